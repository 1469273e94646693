"""Kubelet log lines to WORKER and KUBELET_MARKER observations."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from collectors.parsers.kubelet_log import MarkerReason, parse_kubelet_line, parse_kubelet_log
from timelines.lifecycle.observation import Kind, Source, TerminationCause, Transition, digest_key

STATIC_UID = "d1c4757bcb230bf06ab7e866b62132a1"
PR113145 = [
    'Oct 19 00:23:45 kind-worker kubelet[273]: I1019 00:23:45.896841     273 kubelet.go:1761] "syncTerminatingPod enter" pod="default/test-term-kind-worker" podUID=d1c4757bcb230bf06ab7e866b62132a1',
    'Oct 19 00:23:45 kind-worker kubelet[273]: I1019 00:23:45.897362     273 kubelet.go:1791] "Pod terminating with grace period" pod="default/test-term-kind-worker" podUID=d1c4757bcb230bf06ab7e866b62132a1 gracePeriod=100',
    'Oct 19 00:23:45 kind-worker kubelet[273]: I1019 00:23:45.897541     273 kuberuntime_container.go:698] "Killing container with a grace period override" pod="default/test-term-kind-worker" podUID=d1c4757bcb230bf06ab7e866b62132a1 containerName="main" containerID="containerd://453682542f97798080422795c40bba9d4b827098c17a28fbe609dfc78873447e" gracePeriod=100',
]


def _one(line: str, **kw: object):
    args = {"node": "n1", "year": 2022, "tz": UTC, **kw}
    result = parse_kubelet_line(line, **args)  # type: ignore[arg-type]
    assert len(result.observations) == 1, (result.observations, result.skipped)
    return result.observations[0]


def _transitions(observations):
    return [(o.pod_uid, o.payload["transition"]) for o in observations if o.kind == Kind.WORKER]


def test_real_1_26_termination_lines_from_pr_113145():
    result = parse_kubelet_log(PR113145, node="kind-worker", year=2022, tz=UTC)
    enter, grace, kill = result.observations
    assert enter.kind == Kind.WORKER and enter.source == Source.KUBELET_LOG
    assert enter.payload["transition"] == Transition.TERMINATING_ENTER
    assert enter.payload["message"] == "syncTerminatingPod enter"
    assert enter.observed_at == datetime(2022, 10, 19, 0, 23, 45, 896841, tzinfo=UTC)
    assert (enter.pod_uid, enter.namespace, enter.name, enter.node) == (
        STATIC_UID,
        "default",
        "test-term-kind-worker",
        "kind-worker",
    )
    assert enter.payload["pod_ref"] == "default/test-term-kind-worker"
    assert enter.payload["caller"] == "kubelet.go:1761" and enter.payload["severity"] == "I"
    assert grace.kind == Kind.KUBELET_MARKER
    assert grace.payload["reason"] == MarkerReason.GRACE_PERIOD and grace.payload["grace_period"] == 100
    assert kill.payload["reason"] == MarkerReason.KILLING_CONTAINER
    assert (kill.payload["container"], kill.payload["grace_period"], kill.payload["override"]) == (
        "main",
        100,
        True,
    )
    assert kill.payload["container_id"].startswith("containerd://4536825")
    assert result.lines_read == 3 and not result.skipped


def test_khi_killing_container_line_with_quoted_uid_and_collapsed_pid():
    obs = _one(
        'I1119 22:48:13.914655 1675 kuberuntime_container.go:808] "Killing container with a grace period" '
        'pod="kube-system/kube-dns-58f547fd74-swzzt" podUID="34a3f9e5-4363-47a9-8bd9-3b37c60d107b" '
        'containerName="sidecar" containerID="containerd://5e0d5f0eab7a" gracePeriod=30'
    )
    assert obs.pod_uid == "34a3f9e5-4363-47a9-8bd9-3b37c60d107b"
    assert obs.observed_at == datetime(2022, 11, 19, 22, 48, 13, 914655, tzinfo=UTC)
    assert (obs.payload["container"], obs.payload["grace_period"], obs.payload["override"]) == (
        "sidecar",
        30,
        False,
    )


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        ("Pod is marked for graceful deletion, begin teardown", TerminationCause.DELETION),
        ("Pod is in a terminal phase (success/failed), begin teardown", TerminationCause.TERMINAL_PHASE),
        ("Pod is being evicted by the kubelet, begin teardown", TerminationCause.EVICTED),
        ("Pod is being removed by the kubelet, begin teardown", TerminationCause.REMOVED),
        ("Pod is orphaned and must be torn down", TerminationCause.ORPHANED),
        ("pod is marked for graceful deletion -- begin teardown", TerminationCause.DELETION),
    ],
)
def test_begin_teardown_messages_give_termination_requested_with_cause(message: str, cause: str):
    obs = _one(
        f'I0607 06:54:47.001537    1187 pod_workers.go:873] "{message}" pod="a/b" podUID=0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3 updateType="kill"'
    )
    assert obs.payload["transition"] == Transition.TERMINATION_REQUESTED
    assert obs.payload["cause"] == cause
    assert obs.payload["update_type"] == "kill" and obs.payload["work_type"] is None


@pytest.mark.parametrize(
    ("old", "new", "transition"),
    [
        ("syncPod enter", "SyncPod enter", Transition.SYNC_ENTER),
        ("syncPod exit", "SyncPod exit", Transition.SYNC_EXIT),
        ("syncTerminatingPod enter", "SyncTerminatingPod enter", Transition.TERMINATING_ENTER),
        ("syncTerminatingPod exit", "SyncTerminatingPod exit", Transition.TERMINATING_EXIT),
        (
            "syncTerminatingRuntimePod enter",
            "SyncTerminatingRuntimePod enter",
            Transition.TERMINATING_RUNTIME_ENTER,
        ),
        ("syncTerminatedPod enter", "SyncTerminatedPod enter", Transition.TERMINATED_ENTER),
        ("syncTerminatedPod exit", "SyncTerminatedPod exit", Transition.TERMINATED_EXIT),
    ],
)
def test_lowercase_1_22_and_capitalised_1_27_spellings_map_to_the_same_transition(
    old: str, new: str, transition: str
):
    for message in (old, new):
        obs = _one(
            f'I0301 10:00:00.000001    1 kubelet.go:1 "{message}" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b'.replace(
                '1 "', '1] "'
            )
        )
        assert obs.payload["transition"] == transition


@pytest.mark.parametrize(
    ("message", "transition"),
    [
        ("Pod is being synced for the first time", Transition.FIRST_SEEN),
        ("Pod worker has observed request to terminate", Transition.OBSERVED_TERMINATE),
        (
            "Pod indicated lifecycle completed naturally and should now terminate",
            Transition.COMPLETED_NATURALLY,
        ),
        ("Pod terminated all containers successfully", Transition.CONTAINERS_TERMINATED),
        (
            "Pod terminated all orphaned containers successfully and worker can now stop",
            Transition.ORPHAN_CONTAINERS_TERMINATED,
        ),
        ("Pod is complete and the worker can now stop", Transition.WORKER_DONE),
        ("Pod cannot start ever", Transition.CANNOT_START_EVER),
        ("Pod cannot start yet", Transition.CANNOT_START_YET),
        ("Pod is terminal", Transition.POD_TERMINAL),
        ("Pod is finished processing, no further updates", Transition.FINISHED_IGNORED),
        (
            "Pod is terminating but has been requested to restart with same UID, will be reconciled later",
            Transition.RESTART_REQUESTED,
        ),
        (
            "Pod has been terminated but another pod with the same UID was created, remove history to allow restart",
            Transition.UID_REUSE_RESTART,
        ),
        ("Pod worker has stopped", Transition.WORKER_STOPPED),
        (
            "Pod has been terminated and is no longer known to the kubelet, remove all history",
            Transition.FORGOTTEN,
        ),
        ("Sync exited with context cancellation error", Transition.CONTEXT_CANCELLED),
        ("Cancelling current pod sync", Transition.CANCELLING_SYNC),
        ("Pod is orphaned and has not been started", Transition.ORPHANED),
        ("Pod is orphaned and still running, began terminating", Transition.ORPHANED),
        ("Pod is orphaned and still terminating, notified the pod worker", Transition.ORPHANED),
    ],
)
def test_every_pod_worker_message_maps_to_its_transition(message: str, transition: str):
    obs = _one(
        f'I0301 10:00:00.000001       1 pod_workers.go:1] "{message}" podUID=4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f'
    )
    assert obs.kind == Kind.WORKER
    assert obs.payload["transition"] == transition
    assert obs.pod_uid == "4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f"


@pytest.mark.parametrize(
    ("raw", "work"),
    [("0", "sync"), ("1", "terminating"), ("2", "terminated"), ('"terminated"', "terminated")],
)
def test_numeric_update_type_is_the_work_type_in_work_type_messages(raw: str, work: str):
    obs = _one(
        f'I0301 10:00:00.000001       1 pod_workers.go:1] "Pod cannot start ever" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b updateType={raw}'
    )
    assert obs.payload["work_type"] == work and obs.payload["update_type"] is None


def test_update_type_is_the_sync_pod_type_elsewhere_and_work_type_key_is_read():
    obs = _one(
        'I0301 10:00:00.000001       1 pod_workers.go:1] "Pod is being synced for the first time" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b updateType="create"'
    )
    assert (obs.payload["update_type"], obs.payload["work_type"]) == ("create", None)
    obs = _one(
        'I0301 10:00:00.000001       1 pod_workers.go:1] "Cancelling current pod sync" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b workType="terminating"'
    )
    assert obs.payload["work_type"] == "terminating"


def test_sync_exit_is_terminal_and_json_values():
    obs = _one(
        'I0301 10:00:00.000001       1 kubelet.go:1] "SyncPod exit" pod="a/b" podUID="0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3" isTerminal=true'
    )
    assert obs.payload["is_terminal"] is True
    assert obs.pod_uid == "0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3"


def test_static_pod_uid_32_hex_quoted_or_not():
    for value in (STATIC_UID, f'"{STATIC_UID}"', STATIC_UID.upper()):
        obs = _one(
            f'I0301 10:00:00.000001       1 kubelet.go:1] "SyncPod enter" pod="kube-system/etcd-cp-1" podUID={value}'
        )
        assert obs.pod_uid == STATIC_UID


def test_error_syncing_pod_is_a_transition_and_a_marker_with_distinct_keys():
    result = parse_kubelet_line(
        'E0301 10:00:00.000001       1 pod_workers.go:1300] "Error syncing pod, skipping" '
        'err="failed to \\"StartContainer\\" for \\"app\\" with CrashLoopBackOff" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
        node="n1",
        year=2023,
        tz=UTC,
    )
    worker, marker = result.observations
    assert worker.payload["transition"] == Transition.SYNC_ERROR
    assert worker.payload["error"] == 'failed to "StartContainer" for "app" with CrashLoopBackOff'
    assert worker.payload["severity"] == "E"
    assert marker.kind == Kind.KUBELET_MARKER and marker.payload["reason"] == MarkerReason.SYNC_ERROR
    assert worker.dedupe_key != marker.dedupe_key


def test_kill_errors_become_failed_kill_markers():
    result = parse_kubelet_line(
        '{"ts":1717743320603.55,"caller":"kubelet/pod_workers.go:1300","msg":"Error syncing pod, skipping",'
        '"pod":{"name":"m","namespace":"mon"},"podUID":"7e6d5c4b-3a29-4180-9f8e-7d6c5b4a3928",'
        '"err":"failed to \\"KillPodSandbox\\" for \\"7e6d\\" with KillPodSandboxError: \\"rpc error\\""}',
        node="n1",
        year=2024,
        tz=UTC,
    )
    worker, marker = result.observations
    assert worker.payload["severity"] == "E"
    assert marker.payload["reason"] == MarkerReason.FAILED_KILL
    assert (marker.namespace, marker.name) == ("mon", "m")
    obs = _one(
        'E0301 10:00:00.000001       1 kubelet.go:1] "error killing pod" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b err="timeout"'
    )
    assert obs.payload["reason"] == MarkerReason.FAILED_KILL and obs.payload["error"] == "timeout"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            '"Evicting pod" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b message="The node was low on resource: memory. "',
            MarkerReason.EVICTING,
        ),
        ('"Eviction manager: pod is evicted successfully" pod="a/b"', MarkerReason.EVICTED),
        ('"Eviction manager: pod failed to evict" err="boom" pod="a/b"', MarkerReason.EVICTION_FAILED),
        ('"Eviction manager: cannot evict a critical pod" pod="a/b"', MarkerReason.EVICTION_SKIPPED_CRITICAL),
        (
            '"Failed to admit pod to node" pod="a/b" nodeCondition=["DiskPressure"]',
            MarkerReason.ADMISSION_REJECTED,
        ),
        (
            '"Shutdown manager killing pod with gracePeriod" pod="a/b" gracePeriod=20',
            MarkerReason.SHUTDOWN_KILL,
        ),
        ('"Shutdown manager finished killing pod" pod="a/b"', MarkerReason.SHUTDOWN_KILLED),
        ('"Shutdown manager killed pod" pod="a/b"', MarkerReason.SHUTDOWN_KILLED),
        ('"Shutdown manager failed killing pod" err="x" pod="a/b"', MarkerReason.SHUTDOWN_KILL_FAILED),
        (
            '"Post-termination container state" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b containers="(app state=exited exitCode=0)"',
            MarkerReason.CONTAINER_STATE,
        ),
        (
            '"Pod termination stopped all running containers" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            MarkerReason.CONTAINERS_STOPPED,
        ),
        (
            '"Pod termination unmounted volumes" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            MarkerReason.VOLUMES_UNMOUNTED,
        ),
        (
            '"Pod is terminated, but some volumes have not been cleaned up" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            MarkerReason.VOLUMES_PENDING,
        ),
        (
            '"Pod termination cleaned up volume paths" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            MarkerReason.VOLUME_PATHS_CLEANED,
        ),
        (
            '"Pod termination removed cgroups" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            MarkerReason.CGROUPS_REMOVED,
        ),
        (
            '"Pod is terminated and will need no more status updates" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            MarkerReason.STATUS_FINAL,
        ),
        (
            '"Pod has been deleted and must be killed" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            MarkerReason.DELETED_MUST_BE_KILLED,
        ),
        ('"Generating pod status" pod="a/b" podIsTerminal=false', None),
    ],
)
def test_marker_lines(line: str, reason: str | None):
    result = parse_kubelet_line(f"I0301 10:00:00.000001       1 x.go:1] {line}", node="n1", year=2023, tz=UTC)
    if reason is None:
        assert result.observations == [] and result.skipped == Counter(unrecognized_message=1)
        return
    (obs,) = result.observations
    assert obs.kind == Kind.KUBELET_MARKER and obs.payload["reason"] == reason
    assert (obs.namespace, obs.name) == ("a", "b")


def test_old_printf_style_lines_with_format_pod():
    obs = _one(
        "W0301 10:00:00.000001    2480 eviction_manager.go:168] Failed to admit pod "
        "kube-flannel-ds-amd64-6wkdk_kube-system(e3f4c428-ab15-48af-92eb-f07ce06aa4af) - node has conditions: [DiskPressure]"
    )
    assert obs.payload["reason"] == MarkerReason.ADMISSION_REJECTED
    assert (obs.pod_uid, obs.namespace, obs.name) == (
        "e3f4c428-ab15-48af-92eb-f07ce06aa4af",
        "kube-system",
        "kube-flannel-ds-amd64-6wkdk",
    )
    assert obs.payload["severity"] == "W"


def test_pod_lines_without_uid_stay_uid_less_whatever_came_before():
    """GIVEN a shutdown-manager kill naming only ns/name, after a line that tied that name to a UID
    THEN the kill is kept without a UID: which incarnation it belongs to is decided at derive time from
    every file (timelines/lifecycle/resolve.py), never from the order lines were read in."""
    result = parse_kubelet_log(
        [
            'I0301 10:00:00.000001       1 kubelet.go:1] "SyncPod enter" pod="default/cache-0" podUID=0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a',
            'I0301 10:00:01.000001       1 nodeshutdown.go:1] "Shutdown manager killing pod with gracePeriod" pod="default/cache-0" gracePeriod=20',
            'I0301 10:00:02.000001       1 nodeshutdown.go:1] "Shutdown manager killing pod with gracePeriod" pod="default/other-0" gracePeriod=20',
            'I0301 10:00:03.000001       1 pod_workers.go:1] "Pod worker has observed request to terminate" pod="default/other-0"',
        ],
        node="n1",
        year=2023,
        tz=UTC,
    )
    enter, known, other = result.observations
    assert enter.pod_uid == "0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a"
    assert known.pod_uid is None and (known.namespace, known.name) == ("default", "cache-0")
    assert known.payload["grace_period"] == 20 and "uid_inferred" not in known.payload
    assert other.pod_uid is None and (other.namespace, other.name) == ("default", "other-0")
    # A V4 worker transition still needs its UID: without it there is nothing to join it on.
    assert result.skipped == Counter(no_pod_uid=1)


def test_skip_reasons_are_counted():
    result = parse_kubelet_log(
        [
            "",
            'Jun 18 19:42:16 host containerd[1]: time="2022-06-18T19:42:16Z" level=info msg="x"',
            'I0301 10:00:00.000001       1 kubelet.go:1] "Generating pod status" pod="default/x"',
            'I0301 10:00:00.000001       1 pod_workers.go:1] "Processing pod event" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b updateType=0',
            'I0301 10:00:00.000001       1 kubelet.go:1] "SyncPod enter" pod="a/b"',
            'I0231 10:00:00.000001       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            "just some text",
            "\tstray continuation",
            '{"msg":"no ts"}',
            "x" * 1_000_001,
        ],
        node="n1",
        year=2023,
        tz=UTC,
    )
    assert result.observations == []
    assert result.lines_read == 10
    # Every dated kubelet line counts for its process (pid 1): the file shows that kubelet at V4.
    # Every dated kubelet line counts for its process (pid 1): one observation per minute it logged in
    # (the impossible date is not dated).
    (process,) = result.processes
    assert process.kind == Kind.KUBELET_PROCESS and process.payload["pid"] == 1
    assert (process.payload["first_at"], process.payload["last_at"]) == (
        "2023-03-01T10:00:00.000000+00:00",
        "2023-03-01T10:01:00.000000+00:00",
    )


def test_year_rolls_over_from_december_to_january_inside_a_file():
    result = parse_kubelet_log(
        [
            'I1231 23:59:59.999999       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            'I1130 23:59:59.000000       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',  # a stale line, same year
            'I0101 00:00:00.000001       1 kubelet.go:1] "SyncPod exit" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
            'I0102 00:00:00.000001       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
        ],
        node="n1",
        year=2023,
        tz=UTC,
    )
    assert [o.observed_at.year for o in result.observations] == [2023, 2023, 2024, 2024]


def test_short_iso_prefix_gives_the_year_and_handles_new_year_skew():
    obs = _one(
        '2024-01-01T00:00:00+0000 host kubelet[1]: I1231 23:59:59.999871       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
        year=1999,
    )
    assert obs.observed_at == datetime(2023, 12, 31, 23, 59, 59, 999871, tzinfo=UTC)


def test_header_time_is_read_in_the_given_zone_and_returned_in_utc():
    cest = timezone(timedelta(hours=2))
    obs = _one(
        'I0607 08:54:47.123456       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
        tz=cest,
        year=2024,
    )
    assert obs.observed_at == datetime(2024, 6, 7, 6, 54, 47, 123456, tzinfo=UTC)
    assert obs.observed_at.utcoffset() == timedelta(0)


def test_node_log_query_utc_prefix_tells_the_zone_of_the_header():
    """``journalctl --utc --output=short-precise`` (the node log query) on a node whose kubelet logs in
    +05:30: the header's wall clock is read in the zone that makes it the prefix's instant."""
    lines = [
        # 06:24:47 in +05:30 is 00:54:47 UTC; journald stamped the line 0.4 ms later.
        'Jun 07 00:54:47.123870 node-a kubelet[812]: I0607 06:24:47.123456     812 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
        # Across New Year: 2024-01-01 05:00 in +05:30 is 2023-12-31 23:30 UTC.
        'Dec 31 23:30:00.000300 node-a kubelet[812]: I0101 05:00:00.000100     812 kubelet.go:1] "SyncPod exit" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
    ]
    june, new_year = (
        parse_kubelet_log([line], node="n1", year=2024, tz=UTC, prefix_tz=UTC) for line in lines
    )
    assert june.observations[0].observed_at == datetime(2024, 6, 7, 0, 54, 47, 123456, tzinfo=UTC)
    assert new_year.observations[0].observed_at == datetime(2023, 12, 31, 23, 30, 0, 100, tzinfo=UTC)
    # Without knowing the prefix's zone, the configured zone is used, as before.
    plain = parse_kubelet_log(lines[:1], node="n1", year=2024, tz=UTC)
    assert plain.observations[0].observed_at == datetime(2024, 6, 7, 6, 24, 47, 123456, tzinfo=UTC)


def test_short_iso_prefix_offset_tells_the_zone_and_disagreeing_clocks_fall_back():
    cest = 'I0607 08:54:47.123456       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b'
    shown_in_utc = _one(f"2024-06-07T06:54:47+0000 host kubelet[1]: {cest}", tz=UTC, year=2024)
    assert shown_in_utc.observed_at == datetime(2024, 6, 7, 6, 54, 47, 123456, tzinfo=UTC)
    # Clocks 2 h 40 min apart, no whole quarter hour (a replayed line, a broken clock): the configured
    # zone stands.
    odd = _one(f"2024-06-07T06:14:47+0000 host kubelet[1]: {cest}", tz=UTC, year=2024)
    assert odd.observed_at == datetime(2024, 6, 7, 8, 54, 47, 123456, tzinfo=UTC)


def test_same_line_from_journald_and_plain_file_has_the_same_dedupe_key():
    plain = 'I1019 00:23:45.896841     273 kubelet.go:1761] "syncTerminatingPod enter" pod="default/t" podUID=d1c4757bcb230bf06ab7e866b62132a1'
    keys = {
        _one(text).dedupe_key
        for text in (
            plain,
            f"Oct 19 00:23:45 kind-worker kubelet[273]: {plain}",
            f"Oct 19 00:23:45.896900 kind-worker kubelet[273]: {plain}",
            f"2022-10-19T00:23:45+0000 kind-worker kubelet[273]: {plain}",
        )
    }
    assert keys == {digest_key("n1", plain)}
    assert _one(plain, node="n2").dedupe_key != digest_key("n1", plain)


def test_multi_line_block_with_journald_prefix_on_each_line():
    lines = [
        'Aug 14 09:15:40 w2 kubelet[2981]: E0814 09:15:40.118204    2981 pod_workers.go:1300] "Error syncing pod, skipping" err=<',
        "Aug 14 09:15:40 w2 kubelet[2981]: \tline one",
        "Aug 14 09:15:40 w2 kubelet[2981]: \tline two",
        'Aug 14 09:15:40 w2 kubelet[2981]:  > pod="default/api" podUID=c3a1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e',
    ]
    result = parse_kubelet_log(lines, node="w2", year=2023, tz=UTC)
    worker, marker = result.observations
    assert worker.payload["error"] == "line one\nline two"
    assert worker.pod_uid == "c3a1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e"
    same = parse_kubelet_log(
        [
            lines[0].split("kubelet[2981]: ", 1)[1],
            "\tline one",
            "\tline two",
            ' > pod="default/api" podUID=c3a1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e',
        ],
        node="w2",
        year=2023,
        tz=UTC,
    )
    assert [o.dedupe_key for o in same.observations] == [worker.dedupe_key, marker.dedupe_key]
    assert result.lines_read == 4


def test_source_names_the_first_line_of_each_record_and_never_changes_a_key():
    """A record over several physical lines (a key=< block) is proved by its first line; naming the input
    changes no dedupe key (the same line from two files is one observation). Synthetic lines."""
    lines = [
        "",
        'E0814 09:15:40.118204    2981 pod_workers.go:1300] "Error syncing pod, skipping" err=<',
        "\tline one",
        ' > pod="default/api" podUID=c3a1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e',
        'I0814 09:15:41.000001    2981 kubelet.go:2407] "SyncLoop ADD" source="api" pods=["default/web"]',
    ]
    named = parse_kubelet_log(lines, node="w2", year=2023, tz=UTC, source="logs/w2.log")
    plain = parse_kubelet_log(lines, node="w2", year=2023, tz=UTC)
    assert [o.payload.get("where") for o in named.observations] == ["logs/w2.log:2"] * 2 + ["logs/w2.log:5"]
    assert [o.dedupe_key for o in named.observations] == [o.dedupe_key for o in plain.observations]
    assert all("where" not in o.payload for o in plain.observations)


def test_block_cut_off_by_a_new_record_keeps_both():
    result = parse_kubelet_log(
        [
            'E0301 10:00:00.000001       1 pod_workers.go:1] "Error syncing pod, skipping" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b err=<',
            "\tonly line",
            'I0301 10:00:01.000001       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b',
        ],
        node="n1",
        year=2023,
        tz=UTC,
    )
    assert _transitions(result.observations) == [
        ("3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b", Transition.SYNC_ERROR),
        ("3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b", Transition.SYNC_ENTER),
    ]
    assert result.observations[0].payload["error"] == "only line"


def test_bytes_and_garbage_do_not_raise():
    result = parse_kubelet_log(
        [
            b"\xff\xfe\x00garbage",
            "\x00\x00",
            'I0301 10:00:00.000001       1 kubelet.go:1] "SyncPod enter" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b\x00',
        ],  # type: ignore[list-item]
        node="n1",
        year=2023,
        tz=UTC,
    )
    assert result.lines_read == 3
    assert len(result.observations) == 1


# -- fixtures -----------------------------------------------------------------------------------------------


def _parse_fixture(path: Path, node: str, year: int):
    with path.open(encoding="utf-8") as f:
        return parse_kubelet_log(f, node=node, year=year, tz=UTC)


def test_fixture_1_22_graceful_delete(kubelet_fixture: Path):
    result = _parse_fixture(kubelet_fixture / "v1.22-graceful-delete.journal", "worker-1", 2021)
    web = "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"
    assert [t for uid, t in _transitions(result.observations) if uid == web] == [
        Transition.FIRST_SEEN,
        Transition.SYNC_ENTER,
        Transition.CONTAINER_STARTED,  # V2 PLEG: the UID rides on event.ID (the sandbox first)
        Transition.CONTAINER_STARTED,
        Transition.SYNC_EXIT,
        Transition.TERMINATION_REQUESTED,
        Transition.OBSERVED_TERMINATE,
        Transition.TERMINATING_ENTER,
        Transition.CONTAINER_DIED,
        Transition.TERMINATING_EXIT,
        Transition.CONTAINERS_TERMINATED,
        Transition.TERMINATED_ENTER,
        Transition.TERMINATED_EXIT,
        Transition.WORKER_DONE,
        Transition.FORGOTTEN,
        Transition.WORKER_STOPPED,
    ]
    teardown = next(
        o for o in result.observations if o.payload.get("transition") == Transition.TERMINATION_REQUESTED
    )
    assert teardown.payload["cause"] == TerminationCause.DELETION
    assert teardown.observed_at == datetime(2021, 11, 3, 14, 7, 15, 116122, tzinfo=UTC)
    report = "2f8c1d3e-4a5b-4c6d-9e7f-8a9b0c1d2e3f"
    report_transitions = [t for uid, t in _transitions(result.observations) if uid == report]
    assert (
        Transition.POD_TERMINAL in report_transitions and Transition.COMPLETED_NATURALLY in report_transitions
    )
    terminal = next(o for o in result.observations if o.payload.get("transition") == Transition.POD_TERMINAL)
    assert terminal.payload["work_type"] == "sync"
    exits = [
        o.payload["is_terminal"]
        for o in result.observations
        if o.payload.get("transition") == Transition.SYNC_EXIT
    ]
    assert exits == [False, False, True]
    markers = [(o.payload["reason"], o.pod_uid) for o in result.observations if o.kind == Kind.KUBELET_MARKER]
    assert (MarkerReason.KILLING_CONTAINER, web) in markers
    assert (MarkerReason.CONTAINER_STATE, web) in markers
    assert result.skipped["not_kubelet"] == 1 and result.skipped["untracked_worker_message"] == 14
    assert result.lines_read == 69
    # The SyncLoop config lines name pods only as ns/name (1.22: `pods=[default/web-…]`): kept UID-less.
    syncloop = [(o.payload["transition"], o.name) for o in result.observations if o.pod_uid is None]
    assert syncloop == [
        (Transition.SYNCLOOP_ADD, "web-7d9f8b6c4-x2k9p"),
        (Transition.SYNCLOOP_ADD, "report-27912345-7xk2m"),
        (Transition.SYNCLOOP_DELETE, "web-7d9f8b6c4-x2k9p"),  # the graceful delete seen
        (Transition.SYNCLOOP_DELETE, "web-7d9f8b6c4-x2k9p"),  # the kubelet's own final delete (grace 0)
        (Transition.SYNCLOOP_REMOVE, "web-7d9f8b6c4-x2k9p"),
    ]
    # The kubelet (pid 1043) logged in five minutes of this file: one process observation per minute.
    minutes = [(p.payload["pid"], p.payload["first_at"][11:16]) for p in result.processes]
    assert minutes == [(1043, m) for m in ("13:55", "14:02", "14:05", "14:06", "14:07")]
    pleg = [
        o.observed_at
        for o in result.observations
        if o.payload.get("transition") == Transition.CONTAINER_STARTED
    ]
    assert len(pleg) == 4  # each pod's sandbox, then its one container
    again = _parse_fixture(kubelet_fixture / "v1.22-graceful-delete.journal", "worker-1", 2021)
    assert [p.dedupe_key for p in again.processes] == [p.dedupe_key for p in result.processes]
    assert len({o.dedupe_key for o in result.observations}) == len(result.observations)


def test_fixture_1_27_delete_during_setup(kubelet_fixture: Path):
    result = _parse_fixture(kubelet_fixture / "v1.27-delete-during-setup.log", "worker-2", 2023)
    slow = "9a7c5e3b-1d2f-4e6a-b8c0-d2e4f6a8b0c1"
    transitions = [t for uid, t in _transitions(result.observations) if uid == slow]
    assert transitions == [
        Transition.FIRST_SEEN,
        Transition.PENDING_UPDATE,  # workType="sync": the first work type of this pod
        Transition.SYNC_ENTER,
        Transition.CONTAINER_STARTED,
        Transition.TERMINATION_REQUESTED,
        Transition.PENDING_UPDATE,  # workType="terminating": a change, kept
        Transition.CANCELLING_SYNC,
        Transition.SYNC_EXIT,
        Transition.CONTEXT_CANCELLED,
        Transition.OBSERVED_TERMINATE,
        Transition.TERMINATING_ENTER,
        Transition.CONTAINER_DIED,
        Transition.TERMINATING_EXIT,
        Transition.CONTAINERS_TERMINATED,
        Transition.TERMINATED_ENTER,
        Transition.TERMINATED_EXIT,
        Transition.WORKER_DONE,
        Transition.FORGOTTEN,
        Transition.WORKER_STOPPED,
    ]
    api = "c3a1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e"
    error = next(
        o
        for o in result.observations
        if o.pod_uid == api and o.payload.get("transition") == Transition.SYNC_ERROR
    )
    assert error.payload["error"].startswith('[failed to "StartContainer" for "api"')
    assert error.payload["error"].endswith("waiting for volumes to attach or mount")
    assert error.observed_at == datetime(2023, 8, 14, 9, 15, 40, 118204, tzinfo=UTC)
    cancelled = next(
        o for o in result.observations if o.payload.get("transition") == Transition.CONTEXT_CANCELLED
    )
    assert cancelled.payload["work_type"] == "sync"
    assert result.lines_read == 49


def test_fixture_json_logging_behind_short_iso(kubelet_fixture: Path):
    result = _parse_fixture(kubelet_fixture / "v1.29-json.journal", "worker-3", 1970)
    hog = "51d2e3f4-a5b6-4c7d-8e9f-a0b1c2d3e4f5"
    teardown = next(
        o for o in result.observations if o.payload.get("transition") == Transition.TERMINATION_REQUESTED
    )
    assert (teardown.pod_uid, teardown.payload["cause"], teardown.payload["update_type"]) == (
        hog,
        TerminationCause.EVICTED,
        "kill",
    )
    assert teardown.observed_at == datetime(2024, 6, 7, 6, 54, 47, 1537, tzinfo=UTC)
    assert (teardown.namespace, teardown.name) == ("batch", "hog-6f7c9d8b5-r8v2n")
    reasons = [o.payload["reason"] for o in result.observations if o.kind == Kind.KUBELET_MARKER]
    assert reasons == [
        MarkerReason.EVICTION_RECLAIM,
        MarkerReason.EVICTION_RECLAIM,
        MarkerReason.EVICTION_RANKED,  # one per pod ranked, in rank order
        MarkerReason.EVICTION_RANKED,
        MarkerReason.EVICTING,
        MarkerReason.GRACE_PERIOD,
        MarkerReason.KILLING_CONTAINER,
        MarkerReason.CONTAINERS_STOPPED,
        MarkerReason.EVICTED,
        MarkerReason.EVICTION_CLEANUP_WAIT,
        MarkerReason.VOLUMES_UNMOUNTED,
        MarkerReason.CGROUPS_REMOVED,
        MarkerReason.FAILED_KILL,
    ]
    ranked = [
        (o.name, o.payload["rank"], o.payload["ranked"])
        for o in result.observations
        if o.payload.get("reason") == MarkerReason.EVICTION_RANKED
    ]
    assert ranked == [("hog-6f7c9d8b5-r8v2n", 0, 2), ("metrics-agent-k7d2q", 1, 2)]
    evicted = next(o for o in result.observations if o.payload.get("reason") == MarkerReason.EVICTED)
    assert evicted.pod_uid is None and (evicted.namespace, evicted.name) == ("batch", "hog-6f7c9d8b5-r8v2n")
    reclaim = next(o for o in result.observations if o.payload.get("reason") == MarkerReason.EVICTION_RECLAIM)
    assert reclaim.pod_uid is None and reclaim.payload["resource"] == "memory" and reclaim.node == "worker-3"
    assert result.skipped["not_kubelet"] == 1


def test_fixture_mixed_versions_shutdown_and_new_year(kubelet_fixture: Path):
    result = _parse_fixture(kubelet_fixture / "mixed-upgrade-shutdown.journal", "cp-1", 2023)
    by_uid: dict[str, list[str]] = {}
    for uid, t in _transitions(result.observations):
        by_uid.setdefault(uid, []).append(t)
    assert by_uid[STATIC_UID] == [
        Transition.SYNC_ENTER,
        Transition.SYNC_EXIT,
        Transition.TERMINATION_REQUESTED,
        Transition.TERMINATING_ENTER,
    ]
    assert by_uid["5e8f0a2b4c6d8e0f1a3b5c7d9e1f3a5b"] == [
        Transition.FIRST_SEEN,
        Transition.SYNC_ENTER,
        Transition.SYNC_EXIT,
    ]
    cache_old = by_uid["0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a"]
    assert cache_old[2:4] == [Transition.TERMINATION_REQUESTED, Transition.OBSERVED_TERMINATE]
    assert cache_old[-1] == Transition.WORKER_DONE
    removed = [o for o in result.observations if o.payload.get("cause") == TerminationCause.REMOVED]
    assert [o.observed_at for o in removed] == [
        datetime(2024, 1, 1, 0, 0, 3, 502190, tzinfo=UTC),
        datetime(2024, 1, 1, 0, 0, 3, 503231, tzinfo=UTC),
    ]
    first = result.observations[0]
    assert first.observed_at == datetime(2023, 12, 31, 23, 59, 58, 120087, tzinfo=UTC)
    shutdown = [
        (o.payload["reason"], o.pod_uid, o.name)
        for o in result.observations
        if o.payload.get("reason", "").startswith("Shutdown")
    ]
    # The V1 shutdown-manager lines name pods only as ns/name: UID-less, resolved at derive time.
    assert shutdown == [
        (MarkerReason.SHUTDOWN_DETECTED, None, None),
        (MarkerReason.SHUTDOWN_DETECTED, None, None),
        (MarkerReason.SHUTDOWN_KILL, None, "cache-0"),
        (MarkerReason.SHUTDOWN_KILL, None, "etcd-cp-1"),
        (MarkerReason.SHUTDOWN_KILLED, None, "cache-0"),
        (MarkerReason.SHUTDOWN_KILL_TIMEOUT, None, None),
    ]
    # Two kubelet processes: 902 before the reboot, 655 after it (its "Kubelet version" line dates it).
    starts = [(p.payload["pid"], p.payload["started_at"], p.payload["version"]) for p in result.processes]
    assert (655, "2024-01-01T00:03:12.441830+00:00", "v1.29.4") in starts
    assert {pid for pid, started, _ in starts if started is None} == {902}  # 655 logged in one minute
    service = next(o for o in result.observations if o.payload.get("reason") == MarkerReason.KUBELET_SERVICE)
    assert service.pod_uid is None and service.payload["action"] in ("started", "stopped")
    assert result.skipped["not_kubelet"] == 1
    assert result.skipped["unrecognized_message"] == 2  # the grouped 3-line mirror-pod error, Kubelet version


def test_fixtures_parse_the_same_whatever_the_order_of_files(kubelet_fixture: Path):
    one = _parse_fixture(kubelet_fixture / "v1.27-delete-during-setup.log", "worker-2", 2023)
    again = _parse_fixture(kubelet_fixture / "v1.27-delete-during-setup.log", "worker-2", 2023)
    assert [(o.dedupe_key, o.payload) for o in one.observations] == [
        (o.dedupe_key, o.payload) for o in again.observations
    ]


def test_unrecognised_message_texts_are_counted_most_frequent_first() -> None:
    """The real kueue excerpt (--v=3): 5 "Generating pod status" and 5 "Patch status for pod" lines are
    the texts no rule reads most often; every unrecognised line is counted under its text."""
    from collections import Counter
    from datetime import UTC
    from pathlib import Path

    from collectors.parsers.kubelet_log import parse_kubelet_log, top_unrecognized

    path = Path(__file__).resolve().parents[1] / "fixtures/real/kubelet/kueue-4669-kind-1.31-v3.journal"
    result = parse_kubelet_log(path.read_text().splitlines(), node="kind-worker", year=2025, tz=UTC)
    top = top_unrecognized(result.unrecognized)
    assert top[:2] == [("Generating pod status", 5), ("Patch status for pod", 5)]
    assert sum(result.unrecognized.values()) == result.skipped["unrecognized_message"]
    assert len(top) == 10 and top == top_unrecognized(
        Counter(dict(reversed(list(result.unrecognized.items()))))
    )


@pytest.mark.parametrize(
    "ident", ["kubenswrapper", "hyperkube", "k3s", "kubelite", "rke2", "kubelet.service"]
)
def test_kubelet_wrappers_journal_identifiers_are_read(ident: str) -> None:
    """Synthetic line in the journald shape of each wrapper (OpenShift 4.14+ logs `kubenswrapper[pid]:`)."""
    from datetime import UTC

    from collectors.parsers.kubelet_log import parse_kubelet_log

    line = (
        f"Jun 08 18:32:08 bip {ident}[2657]: I0608 18:32:08.363840    2657 pod_workers.go:1] "
        '"SyncTerminatingPod exit" pod="ns/p" podUID="0c7f5a2e-3b1d-4e8f-9a6c-2d4b6f8a0e1c"'
    )
    result = parse_kubelet_log([line], node="bip", year=2024, tz=UTC)
    assert [o.payload["transition"] for o in result.observations] == ["terminating_exit"]
    assert result.observations[0].payload["pid"] == 2657


@pytest.mark.parametrize(
    "pod",
    [
        'pod="web-5c9d7f8b6-q2x7z_default(2f6c1a9e-7b3d-4c8e-9f1a-5d7b9c1e3a5f)"',
        "pod=web-5c9d7f8b6-q2x7z_default(2f6c1a9e-7b3d-4c8e-9f1a-5d7b9c1e3a5f)",
    ],
)
def test_a_pod_value_in_format_pod_form_gives_name_namespace_and_uid(pod: str) -> None:
    """Synthetic: kubelets that print a pod with format.Pod write `name_namespace(uid)` as the value."""
    from datetime import UTC

    from collectors.parsers.kubelet_log import parse_kubelet_log

    line = f'I0608 18:32:08.363840    2657 kuberuntime_container.go:1] "Killing container with a grace period" {pod} containerName="app" gracePeriod=30'
    (obs,) = parse_kubelet_log([line], node="n", year=2024, tz=UTC).observations
    assert (obs.pod_uid, obs.namespace, obs.name) == (
        "2f6c1a9e-7b3d-4c8e-9f1a-5d7b9c1e3a5f",
        "default",
        "web-5c9d7f8b6-q2x7z",
    )


# ---------------------------------------------------------------------------------- kubelets before 1.20

_REAL = Path(__file__).resolve().parents[1] / "fixtures/real/kubelet"


def _real(name: str, **kw: object):
    opts: dict[str, object] = {"node": "n", "year": 2020, "tz": UTC} | kw
    with open(_REAL / name, encoding="utf-8") as fh:
        return parse_kubelet_log(fh, **opts)  # type: ignore[arg-type]


def _worker(result, transition: str):
    return [o for o in result.observations if o.kind == Kind.WORKER and o.payload["transition"] == transition]


def test_pre_1_20_syncloop_config_lines_name_each_pod_with_its_uid():
    # 1.16-1.19 syncLoopIteration: `SyncLoop (DELETE, "api"): %q` of format.Pods (name_namespace(uid)).
    result = _real("k8s-92126-1.16-crio-delete-remove-same-ms.journal")
    (delete,) = _worker(result, Transition.SYNCLOOP_DELETE)
    (remove,) = _worker(result, Transition.SYNCLOOP_REMOVE)
    for obs in (delete, remove):
        assert (obs.pod_uid, obs.namespace, obs.name) == (
            "27ce04fc-48f9-4f39-a805-12f57727d730",
            "kube-system",
            "metrics-server-8f9559cbb-b67qm",
        )
        assert obs.payload["config_source"] == "api"
    assert remove.observed_at - delete.observed_at == timedelta(microseconds=1842)
    # A static pod's manifest removed: source "file", the UID is the manifest hash (32 hex).
    (static,) = _worker(
        _real("k8s-92442-plain-klog-1.18-static-pod-file-remove.log"), Transition.SYNCLOOP_REMOVE
    )
    assert (static.pod_uid, static.payload["config_source"]) == ("5fda0b7885755b311057b80f00dfae7b", "file")


def test_pre_1_20_pleg_and_sync_lines():
    # `SyncLoop (PLEG): "name_ns(uid)", event: &pleg.PodLifecycleEvent{ID:..., Type:..., Data:...}`
    (died,) = _worker(_real("k8s-98157-plain-klog-docker-oomkilled-pleg-died.log"), Transition.CONTAINER_DIED)
    assert (died.pod_uid, died.namespace, died.name) == (
        "e9a15367-9f7c-44c7-a03e-6b01bf40a705",
        "tts-team",
        "jumpserver-reader-589945c95c-d2nzg",
    )
    assert died.payload["container_id"] == "d01a562554dc9e4a7d673bdd7a0075d78efe7667f954cadeb6113c74464988f4"
    started = _worker(_real("k8s-100803-plain-klog-1.19-pleg-started.log"), Transition.CONTAINER_STARTED)
    assert [o.observed_at.strftime("%S.%f") for o in started] == ["27.145341", "27.146778"]
    # `SyncLoop (SYNC): 1 pods; name_ns(uid)`: the pod is being synced (periodic resync).
    result = _real("k8s-90950-1.18-terminated-volumes-not-cleaned.journal")
    (sync,) = _worker(result, Transition.SYNCLOOP_SYNC)
    assert sync.pod_uid == "2f8333ac-1939-44cf-8a2d-6a550d9aaee2"
    # `Pod "name_ns(uid)" is terminated, but some volumes have not been cleaned up`
    (pending,) = [o for o in result.observations if o.payload.get("reason") == MarkerReason.VOLUMES_PENDING]
    assert (pending.pod_uid, pending.name) == ("b7c8450c-9d1b-4c36-b69a-82cfdafd3dd0", "nginx1")


@pytest.mark.parametrize(
    ("name", "uid"),
    [
        # `minikube logs` "Problems detected": `  - Apr 15 17:21:40 minikube kubelet[46838]: E0415 ...`
        ("minikube-11105-1.20-problems-detected-static-crashloop.txt", "58559ae51deca84cd181529bc44866d9"),
        # grep -n output: `\t 4582: E0818 02:12:02.073699 ...`
        ("k8s-111901-1.24-grep-n-static-apiserver-restart.log", "17b60a8466d5776e928eb61d70f0ad95"),
        # journal lines indented by two spaces
        (
            "microk8s-1.23-kubelite-calico-crashloop-critical-eviction.journal",
            "144b3044-4f15-46ba-93bf-305be42d810e",
        ),
        # journalctl in a zh_CN locale: `4月 09 21:43:37 host kubelet[36357]: I0409 21:43:37.433175 ...`
        ("k8s-117822-localized-month-1.28-eviction-v4.journal", "e23cf55e-509b-4106-b3da-9df51372b6f1"),
        # a per-unit log without time or host: `hyperkube[1001]: I0511 21:33:58.454960 ...`
        ("openshift-origin-22819-hyperkube-crio-delete.journal", "6a56e3b9-7434-11e9-951e-0a267c3af1cc"),
    ],
)
def test_what_tools_put_before_a_kubelet_line_is_taken_off(name: str, uid: str):
    result = _real(name)
    assert any(o.pod_uid == uid for o in result.observations)
    assert result.skipped["not_klog"] <= 1  # only the other process's line (crio) in the OpenShift file


def test_localized_month_is_read_from_the_klog_header():
    result = _real("k8s-117822-localized-month-1.28-eviction-v4.journal", year=2024)
    assert result.observations[0].observed_at == datetime(2024, 4, 9, 21, 43, 37, 433175, tzinfo=UTC)


def test_admission_rejection_status_and_the_recreated_pods_old_uid():
    # 1.28 at V10: the kubelet rejects the pod (TopologyAffinityError) and writes a Failed status "Pod was
    # rejected: ..."; the status manager notes the name was deleted and recreated (oldPodUID -> podUID).
    result = _real("blog-numa-1.28-topology-affinity-rejected-v10.journal", year=2024)
    markers = [o for o in result.observations if o.kind == Kind.KUBELET_MARKER]
    (rejected,) = [o for o in markers if o.payload["reason"] == MarkerReason.ADMISSION_REJECTED]
    assert rejected.observed_at == datetime(2024, 8, 15, 22, 24, 53, 991866, tzinfo=UTC)
    assert rejected.payload["detail"].startswith("TopologyAffinityError: Pod was rejected")
    (recreated,) = [o for o in markers if o.payload["reason"] == MarkerReason.RECREATED]
    assert recreated.pod_uid == "5e71a8a1-581b-4be8-84b9-80b507422429"
    assert recreated.payload["new_uid"] == "563dafa2-77a7-4dab-949e-9dbf079a4a70"


def test_volume_manager_lines_are_markers_on_the_pod_their_text_names():
    """GIVEN the volume manager's lines of real logs, which name the pod's UID only inside the message
    (`... pod "NAME" (UID: "UID")`): a 1.10 printf line, 1.31 structured ones (the unmount lines give the
    UID as the pod's name) and 1.31's orphaned-dir cleanup (podUID)
    WHEN they are parsed
    THEN each is a marker on that UID, with the volume it concerns."""
    crio = (_REAL / "crio-1515-1.10-crio-1.9-add-volumes.journal").read_text(encoding="utf-8").splitlines()
    kueue = (
        (_REAL / "kueue-3901-kind-1.31-tas-pod-finishing.journal").read_text(encoding="utf-8").splitlines()
    )
    old = parse_kubelet_log(crio[1:], node="n", year=2018, tz=UTC).observations
    assert [(o.kind, o.pod_uid, o.payload["reason"], o.payload["volume"]) for o in old] == [
        (
            Kind.KUBELET_MARKER,
            "6084349d-416f-11e8-9969-fa163e583850",
            reason,
            "kubernetes.io/secret/6084349d-416f-11e8-9969-fa163e583850-default-token-qrc5l",
        )
        for reason in (MarkerReason.VOLUME_ATTACH_VERIFY, MarkerReason.VOLUME_MOUNT_STARTED)
    ]
    new = parse_kubelet_log([kueue[0], kueue[4], kueue[5], kueue[11]], node="n", year=2024, tz=UTC)
    uid = "db7f7520-c7b0-49bf-b701-51df87cb2f9c"
    assert [(o.pod_uid, o.payload["reason"]) for o in new.observations] == [
        (uid, MarkerReason.VOLUME_ATTACH_VERIFY),
        (uid, MarkerReason.VOLUME_UNMOUNT_STARTED),
        (uid, MarkerReason.VOLUME_TORN_DOWN),
        (uid, MarkerReason.POD_DIR_CLEANED),
    ]
    verify, unmount, _, _ = new.observations
    assert (verify.namespace, verify.name) == ("e2e-tas-pytorchjob-qbdbb", "ranks-pytorch-master-0")
    assert (unmount.namespace, unmount.name) == (None, None)  # the UID is no pod name
    assert unmount.payload["volume"] == f"kubernetes.io/projected/{uid}-kube-api-access-chkkb"


def test_the_kubelets_echo_of_a_killing_event_is_a_kill_on_the_pod_it_names():
    """GIVEN the 1.16 kubelet's V3 echo of the event it recorded as it stopped a container
    (`Event(v1.ObjectReference{Kind:"Pod", …, UID:"27ce04fc-…", …}): type: 'Normal' reason: 'Killing'
    Stopping container metrics-server`, k8s-92126)
    WHEN it is parsed
    THEN it is a KillingContainer marker on that UID and container (from the event)."""
    lines = (
        (_REAL / "k8s-92126-1.16-crio-delete-remove-same-ms.journal").read_text(encoding="utf-8").splitlines()
    )
    (kill,) = parse_kubelet_log(lines[3:], node="n", year=2020, tz=UTC).observations
    assert (kill.kind, kill.pod_uid, kill.namespace, kill.name) == (
        Kind.KUBELET_MARKER,
        "27ce04fc-48f9-4f39-a805-12f57727d730",
        "kube-system",
        "metrics-server-8f9559cbb-b67qm",
    )
    assert kill.payload["reason"] == MarkerReason.KILLING_CONTAINER
    assert (kill.payload["container"], kill.payload["from"]) == ("metrics-server", "event")
    assert kill.observed_at == datetime(2020, 6, 15, 0, 3, 23, 999097, tzinfo=UTC)


def test_the_device_managers_allocation_for_a_pod_is_a_marker_on_its_uid():
    """GIVEN a 1.27 V10 kubelet admitting a GPU pod: "Need devices to allocate for pod" and "Issuing a
    GetPreferredAllocation call for container" (podUID, no pod name)
    WHEN they are parsed
    THEN each is a DeviceAllocation marker on that UID."""
    lines = (_REAL / "blog-gpu-mig-1.27-v10-admission-stuck.journal").read_text(encoding="utf-8").splitlines()
    result = parse_kubelet_log(lines[3:5], node="n", year=2025, tz=UTC)
    assert [(o.kind, o.pod_uid, o.payload["reason"]) for o in result.observations] == [
        (Kind.KUBELET_MARKER, "69e0758e-d625-4013-9258-df8b7ddf04e2", MarkerReason.DEVICE_ALLOCATION)
    ] * 2


def test_a_line_the_parser_fails_on_is_named_not_counted_as_malformed(monkeypatch: pytest.MonkeyPatch):
    """GIVEN a log whose second line makes the parser raise (a bug of podlife's: simulated here, since a
    known one would be fixed) WHEN it is parsed THEN the other lines are read, and the failure is counted
    as ``parser_error`` and named with where it happened and the error, never as a malformed line."""
    from collectors.parsers.kubelet_log import KubeletLogParser

    real = KubeletLogParser._feed

    def failing(self: KubeletLogParser, line: str | bytes) -> list:
        if self.lines_read == 2:
            raise KeyError("transition")
        return real(self, line)

    monkeypatch.setattr(KubeletLogParser, "_feed", failing)
    result = parse_kubelet_log(PR113145, node="kind-worker", year=2022, tz=UTC, source="kubelet.log")
    assert len(result.observations) == 2 and result.lines_read == 3
    assert result.skipped == Counter(parser_error=1)
    assert result.errors == ["kubelet.log:2: KeyError: 'transition'"]


def test_startup_duration_lines_date_the_pods_creation_under_both_spellings():
    """pod_startup_latency_tracker.go's "Observed pod startup duration" names the pod's creation time
    ``pod.CreationTimestamp`` up to 1.26 and ``podCreationTimestamp`` from 1.27: under either name it is the
    pod's creation (to the second, as metav1.Time prints), read from real lines of each (issue #38: a
    mutant that dropped one spelling survived)."""

    def startup(name: str, year: int):
        return _worker(_real(name, year=year), Transition.STARTUP_OBSERVED)[0]

    old = startup("gke-1.26-multus-init-container-startup.journal", 2023)
    assert old.name == "kube-multus-ds-kk2r8"
    assert (
        old.payload["created"] == "2023-05-02T08:55:55.000000+00:00"
    )  # pod.CreationTimestamp="2023-05-02 08:55:55 +0000 UTC"
    assert old.payload["first_started_pulling"] == "2023-05-02T08:55:55.732815+00:00"
    new = startup("k8s-127339-prestop-1.29.journal", 2024)
    assert new.name == "test-54f748667b-xln29"
    assert (
        new.payload["created"] == "2024-09-19T09:45:13.000000+00:00"
    )  # podCreationTimestamp="2024-09-19 09:45:13 +0000 UTC"
    assert new.payload["first_started_pulling"] == "2024-09-19T09:45:14.250689+00:00"
    assert new.payload["slo_seconds"] == 136.39753918


def test_the_real_eviction_line_keeps_the_kubelets_reason_and_its_pod():
    """tests/fixtures/real/kubelet/k8s-117822-localized-month-1.28-eviction-v4.journal (SOURCES.md): the
    eviction manager's "Evicting pod" line says why (``message=``, the text the pod's status.message and
    its Evicted event carry: k8s-facts.md, Events) and which pod (``pod="default/uuuuu"``, its UID): the
    marker keeps both, the reason as the sentence a user reads beside the kill."""
    path = (
        Path(__file__).resolve().parents[1]
        / "fixtures/real/kubelet/k8s-117822-localized-month-1.28-eviction-v4.journal"
    )
    result = parse_kubelet_log(
        path.read_text(encoding="utf-8").splitlines(), node="VM-8-4-tencentos", year=2024, tz=UTC
    )
    (evicting,) = [
        o
        for o in result.observations
        if o.kind == Kind.KUBELET_MARKER and o.payload["reason"] == MarkerReason.EVICTING
    ]
    assert evicting.payload["detail"] == (
        "The node was low on resource: memory. Threshold quantity: 2Gi, available: 719212Ki. Container u was "
        "using 1847180Ki, request is 0, has larger consumption of memory. "
    )
    assert (evicting.namespace, evicting.name, evicting.pod_uid) == (
        "default",
        "uuuuu",
        "e23cf55e-509b-4106-b3da-9df51372b6f1",
    )
