"""Issue #13, "What goes wrong today": each case through the real parsers, the resolver and the lifecycle
core, from lines written in the formats real kubelets print (tests/fixtures/kubelet/README.md).

Every test here failed on the code before this change (podlife 86e38ef): the failure each one caught is
in its docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from pathlib import Path

from collectors.parsers.kubectl import read_kubectl_output
from collectors.parsers.kubelet_log import KubeletLogParser, parse_kubelet_log
from timelines.lifecycle import schema
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation
from timelines.lifecycle.resolve import anchors_of, resolve_pod_observations
from timelines.lifecycle.timeline import PodTimeline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def lines_of(name: str) -> list[str]:
    return (FIXTURES / "kubelet" / name).read_text(encoding="utf-8").splitlines()


def parse(files: Sequence[Sequence[str]], *, node: str, year: int, tz: tzinfo = UTC) -> list[Observation]:
    """Each file through its own parser, as ``ingest_kubelet_log`` reads them (processes included), its
    times read in ``tz`` (``--tz``)."""
    out: list[Observation] = []
    for lines in files:
        parser = KubeletLogParser(node=node, year=year, tz=tz)
        for line in lines:
            out.extend(parser.feed(line))
        out.extend(parser.close())
        out.extend(parser.processes())
    return out


def timelines(observations: Sequence[Observation]) -> dict[str, PodTimeline]:
    """Every pod's timeline, its UID-less lines resolved over everything (as the derive stage does)."""
    obs = list({o.dedupe_key: o for o in observations}.values())
    candidates = [o for o in obs if o.pod_uid is None]
    anchors = anchors_of(o for o in obs if o.pod_uid)
    return {
        uid: derive_pod_timeline(
            resolve_pod_observations(uid, [o for o in obs if o.pod_uid == uid], candidates, anchors)
        )
        for uid in sorted({o.pod_uid for o in obs if o.pod_uid})
    }


def worker(tl: PodTimeline) -> list[tuple[str, str]]:
    return [(iv.state, iv.source) for iv in tl.lane("worker")]


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --------------------------------------------------------------------------------------- first seen terminated


def test_a_worker_first_seen_terminated_has_no_setup_and_never_started() -> None:
    """GIVEN a pod rejected at admission (1.29, V4): its ADD gets no worker; when its controller deletes
    it, the worker is "synced for the first time" with workType="terminated" and runs SyncTerminatedPod
    THEN the lane is cleanup alone, from that first sight, and never_started is raised naming the
    rejection the kubelet wrote.

    Before: a 46 µs observed `setup` from the first sight to SyncTerminatedPod, and no finding."""
    tl = timelines(parse([lines_of("v1.29-first-seen-terminated.journal")], node="worker-4", year=2024))[
        "563dafa2-77a7-4dab-949e-9dbf079a4a70"
    ]
    assert worker(tl) == [("cleanup", "observed")]
    (cleanup,) = tl.lane("worker")
    assert (cleanup.start, cleanup.end) == (
        utc(2024, 8, 15, 22, 24, 53, 998256),
        utc(2024, 8, 15, 22, 24, 53, 999389),
    )
    assert (cleanup.attrs["start_from"], cleanup.attrs["end_from"]) == ("first_seen", "worker_done")
    (finding,) = tl.findings
    assert finding.kind == "never_started"
    # The cause the kubelet itself wrote (its status line: phase Failed, "Pod was rejected: ...").
    assert "rejected it at admission (TopologyAffinityError: Pod was rejected" in finding.message


# --------------------------------------------------------------------------------------- kubelet restart


def test_a_kubelet_restart_re_syncs_known_pods_without_a_new_life() -> None:
    """GIVEN a 1.28 node (V4) whose kubelet restarts (new pid, systemd restart, "Kubelet version") while
    a completed Job pod, a running pod and a pod mid-termination exist; the new kubelet syncs each "for
    the first time" again
    THEN no pod gets a new setup or cycle, no uid_reuse; the running pod keeps running, the terminating
    pod's termination continues across the restart (marked on it), the Job pod stays finished.

    Before: each re-synced pod got a second `setup` (cycle 1) and a uid_reuse warning."""
    got = timelines(parse([lines_of("v1.28-kubelet-restart.journal")], node="worker-5", year=2023))
    report, web, api = (
        got["aaaa1111-2b3c-4d5e-8f60-718293a4b5c6"],
        got["bbbb2222-3c4d-4e5f-9061-8293a4b5c6d7"],
        got["cccc3333-4d5e-4f60-8172-93a4b5c6d7e8"],
    )
    restart = utc(2023, 11, 20, 9, 10, 31).isoformat(timespec="microseconds")
    for tl in (report, web, api):
        assert {iv.attrs["cycle"] for iv in tl.lane("worker")} == {0}
        assert [iv.state for iv in tl.lane("worker")].count("setup") == 1
        assert "uid_reuse" not in {f.kind for f in tl.findings}
    assert [iv.state for iv in web.lane("worker")] == ["setup", "running"]
    assert web.lane("worker")[-1].end is None and web.lane("worker")[-1].attrs["kubelet_restarts"] == [
        restart
    ]
    terminating = [iv for iv in api.lane("worker") if iv.state == "terminating"]
    assert [(iv.start, iv.end) for iv in terminating] == [
        (utc(2023, 11, 20, 9, 10, 0, 100), utc(2023, 11, 20, 9, 11, 0, 200100))
    ]
    assert terminating[0].attrs["kubelet_restarts"] == [restart]
    assert [iv.state for iv in report.lane("worker")] == ["setup", "running", "terminating", "cleanup"]
    assert report.lane("worker")[-1].end == utc(2023, 11, 20, 9, 5, 10, 900100)


# --------------------------------------------------------------------------------------- mid-phase excerpts


EXCERPT = [
    'I0301 10:00:00.100000    1043 kubelet.go:1] "SyncLoop (probe)" probe="readiness" status="ready" pod="kube-system/coredns-5d78c9869d-8qhfr"',
    'I0301 10:05:00.000100    1043 kubelet.go:2032] "SyncTerminatingPod exit" pod="default/web-0" podUID=4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f',
    'I0301 10:05:00.000200    1043 pod_workers.go:1412] "Pod terminated all containers successfully" podUID=4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f',
    'I0301 10:05:01.500000    1043 kubelet.go:2096] "SyncTerminatedPod exit" pod="default/web-0" podUID=4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f',
    'I0301 10:05:01.500100    1043 pod_workers.go:1446] "Pod is complete and the worker can now stop" podUID=4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f',
]


def test_an_excerpt_that_begins_mid_phase_still_draws_its_phases() -> None:
    """GIVEN an excerpt with only "SyncTerminatingPod exit", "Pod terminated all containers successfully",
    "SyncTerminatedPod exit" and "Pod is complete and the worker can now stop" (1.28, V4)
    THEN terminating is drawn from its first line with an unknown start, cleanup from the transition to
    the worker's end.

    Before: no interval at all (the lines were stored, nothing drew them)."""
    (tl,) = timelines(parse([EXCERPT], node="n1", year=2024)).values()
    assert [(iv.state, iv.start, iv.end, iv.start_known) for iv in tl.lane("worker")] == [
        ("terminating", utc(2024, 3, 1, 10, 5, 0, 100), utc(2024, 3, 1, 10, 5, 0, 200), False),
        ("cleanup", utc(2024, 3, 1, 10, 5, 0, 200), utc(2024, 3, 1, 10, 5, 1, 500100), True),
    ]


def test_exit_lines_alone_are_evidence_too() -> None:
    """Only "SyncTerminatingPod exit" and "SyncTerminatedPod exit": each state is drawn where a line shows
    it (terminating an instant at its exit line, neither bound known; cleanup until its exit), the
    boundary between them is unknown."""
    (tl,) = timelines(parse([[EXCERPT[0], EXCERPT[1], EXCERPT[3]]], node="n1", year=2024)).values()
    assert [(iv.state, iv.attrs.get("between")) for iv in tl.lane("worker")] == [
        ("terminating", None),
        ("unknown", ["terminating", "cleanup"]),
        ("cleanup", None),
    ]
    terminating = tl.lane("worker")[0]
    assert terminating.start == terminating.end == utc(2024, 3, 1, 10, 5, 0, 100)
    assert terminating.attrs.get("start_unknown") and terminating.attrs.get("end_unknown")


# --------------------------------------------------------------------------------------- a hole in the log


def test_a_hole_in_the_log_is_unknown_not_a_long_observed_setup() -> None:
    """GIVEN a V4 log of a pod's whole life with the lines of its termination missing (two files with a
    hole between them)
    THEN SyncPod ends at its last line, an unknown stretch covers the hole, and cleanup starts at its first
    line: no phase claims the hole.

    Before: one observed `setup` from the first sync to the start of cleanup."""
    full = lines_of("v1.22-graceful-delete.journal")
    web = "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"
    cut_from = next(i for i, line in enumerate(full) if '"SyncLoop DELETE"' in line)
    cut_to = next(i for i, line in enumerate(full) if '"syncTerminatedPod enter"' in line and web in line)
    tl = timelines(parse([full[:cut_from], full[cut_to:]], node="worker-1", year=2021))[web]
    states = [(iv.state, iv.start_known, iv.end_known) for iv in tl.lane("worker")]
    assert states[-3:] == [("running", True, False), ("unknown", True, True), ("cleanup", False, True)]
    running, hole, cleanup = tl.lane("worker")[-3:]
    assert running.end == hole.start < cleanup.start == hole.end
    assert hole.attrs["between"] == ["sync", "cleanup"]


# --------------------------------------------------------------------------------------- UID-less lines


def test_uid_less_shutdown_and_eviction_lines_attach_to_their_pods() -> None:
    """GIVEN a 1.26 node at V2: memory pressure evicts batch/hog, then a graceful node shutdown kills
    default/cache-0; the eviction and shutdown managers name the pods only as ns/name
    THEN each line attaches to its pod: evicted (signal, rank) and node_shutdown are raised, and the
    lanes show the whole life from V2 lines alone.

    Before: those lines were stored without a pod; no eviction finding existed, node_shutdown came only
    from the API."""
    got = timelines(parse([lines_of("v1.26-v2-eviction-shutdown.journal")], node="worker-6", year=2024))
    cache, hog = got["0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a"], got["51d2e3f4-a5b6-4c7d-8e9f-a0b1c2d3e4f5"]
    assert worker(hog) == [
        ("setup", "kubelet"),
        ("running", "kubelet"),
        ("terminating", "kubelet"),
        ("cleanup", "kubelet"),
    ]
    assert [iv.attrs["start_from"] for iv in hog.lane("worker")] == [
        "syncloop_add",
        "startup_observed",
        "EvictionRanked",
        "containers_died",
    ]
    (evicted,) = [f for f in hog.findings if f.kind == "evicted"]
    assert (evicted.attrs["resource"], evicted.attrs["rank"], evicted.attrs["ranked"]) == ("memory", 0, 2)
    assert evicted.start == utc(2024, 2, 6, 10, 10, 0, 900)
    assert [f.kind for f in cache.findings] == ["node_shutdown"]
    shutdown = cache.findings[0]
    assert shutdown.start == utc(2024, 2, 6, 10, 30, 0, 1200)
    assert any(m.reason == "ShutdownKill" for m in cache.markers)
    assert [iv.attrs["start_from"] for iv in cache.lane("worker")][2] == "ShutdownKill"
    # The eviction manager's ranking names cache-0 too, but its kill was hog's: cache-0 has no eviction.
    assert "evicted" not in {f.kind for f in cache.findings}


def test_the_newer_file_first_gives_the_same_timelines() -> None:
    full = lines_of("v1.26-v2-eviction-shutdown.journal")
    half = len(full) // 2
    forward = timelines(parse([full[:half], full[half:]], node="worker-6", year=2024))
    backward = timelines(parse([full[half:], full[:half]], node="worker-6", year=2024))
    assert {u: schema.to_builtins(schema.write_timeline(t, "c")) for u, t in forward.items()} == {
        u: schema.to_builtins(schema.write_timeline(t, "c")) for u, t in backward.items()
    }
    assert set(forward) == {"0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a", "51d2e3f4-a5b6-4c7d-8e9f-a0b1c2d3e4f5"}


def test_a_line_attaches_when_the_uid_arrives_later_and_the_api_says_the_phase() -> None:
    """GIVEN only the shutdown manager's lines (no line of that log carries the pod's UID)
    WHEN the API's view of the pods arrives later (kubectl get pods -o json)
    THEN the shutdown kill attaches to cache-0 and node_shutdown says the phase became Failed."""
    shutdown_only = [
        line for line in lines_of("v1.26-v2-eviction-shutdown.journal") if "Shutdown manager" in line
    ]
    alone = parse([shutdown_only], node="worker-6", year=2024)
    assert timelines(alone) == {}  # no UID anywhere: kept, attached to nothing
    api = read_kubectl_output((FIXTURES / "k8s" / "pods-after-shutdown.json").read_text(), origin="pods.json")
    got = timelines(alone + api.observations)
    cache = got["0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a"]
    (finding,) = [f for f in cache.findings if f.kind == "node_shutdown"]
    assert finding.attrs["phase_failed"] is True and finding.severity == "info"
    assert any(m.reason == "ShutdownKill" and m.at == utc(2024, 2, 6, 10, 30, 0, 1200) for m in cache.markers)
    hog = got["51d2e3f4-a5b6-4c7d-8e9f-a0b1c2d3e4f5"]
    (evicted,) = [f for f in hog.findings if f.kind == "evicted"]
    assert (evicted.attrs["resource"], evicted.attrs["threshold"], evicted.attrs["available"]) == (
        "memory",
        "100Mi",
        "92408Ki",
    )


def test_a_reused_name_splits_between_its_incarnations() -> None:
    """GIVEN default/web-0 of a StatefulSet deleted and recreated on the same node (a new UID), at V2
    THEN each SyncLoop line goes to the incarnation whose life it falls in."""
    old, new = "4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f", "9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
    log = [
        'I0301 09:50:00.000000    1043 kubelet.go:1] "SyncLoop (probe)" probe="readiness" status="ready" pod="kube-system/coredns-5d78c9869d-8qhfr"',
        'I0301 10:00:00.000000    1043 kubelet.go:1] "SyncLoop ADD" source="api" pods=[default/web-0]',
        f'I0301 10:00:01.000000    1043 kubelet.go:1] "SyncLoop (PLEG): event for pod" pod="default/web-0" event=&{{ID:{old} Type:ContainerStarted Data:{"a" * 64}}}',
        f'I0301 10:00:02.000000    1043 kubelet.go:1] "SyncLoop (PLEG): event for pod" pod="default/web-0" event=&{{ID:{old} Type:ContainerStarted Data:{"b" * 64}}}',
        'I0301 10:10:00.000000    1043 kubelet.go:1] "SyncLoop DELETE" source="api" pods=[default/web-0]',
        f'I0301 10:10:00.001000    1043 kuberuntime_container.go:1] "Killing container with a grace period" pod="default/web-0" podUID={old} containerName="web" containerID="containerd://{"b" * 64}" gracePeriod=30',
        f'I0301 10:10:02.000000    1043 kubelet.go:1] "SyncLoop (PLEG): event for pod" pod="default/web-0" event=&{{ID:{old} Type:ContainerDied Data:{"b" * 64}}}',
        'I0301 10:10:03.000000    1043 kubelet.go:1] "SyncLoop REMOVE" source="api" pods=[default/web-0]',
        'I0301 10:10:04.000000    1043 kubelet.go:1] "SyncLoop ADD" source="api" pods=[default/web-0]',
        f'I0301 10:10:05.000000    1043 kubelet.go:1] "SyncLoop (PLEG): event for pod" pod="default/web-0" event=&{{ID:{new} Type:ContainerStarted Data:{"c" * 64}}}',
        'I0301 10:20:00.000000    1043 kubelet.go:1] "SyncLoop DELETE" source="api" pods=[default/web-0]',
    ]
    got = timelines(parse([log], node="n1", year=2024))
    first, second = got[old], got[new]
    assert [(iv.state, iv.attrs["start_from"]) for iv in first.lane("worker")] == [
        ("setup", "syncloop_add"),
        ("running", "container_started"),
        ("terminating", "syncloop_delete"),
        ("cleanup", "containers_died"),
    ]
    assert first.lane("worker")[-1].attrs["end_from"] == "syncloop_remove"
    assert first.lane("worker")[0].start == utc(2024, 3, 1, 10, 0, 0)
    assert second.lane("worker")[0].start == utc(2024, 3, 1, 10, 10, 4)
    assert second.lane("worker")[-1].attrs["start_from"] == "syncloop_delete"
    assert second.lane("worker")[-1].start == utc(2024, 3, 1, 10, 20, 0)


# --------------------------------------------------------------------------------------- V2 / V3 lines


def test_v2_lines_alone_give_the_worker_lane_as_inferred_from_kubelet_lines() -> None:
    """GIVEN the 1.22 graceful delete at V2 only (SyncLoop, PLEG, the kill)
    THEN setup, running, terminating and cleanup are drawn with source `kubelet`.

    Before: V2 lines were ignored; without V4 lines the lane was empty."""
    v2 = [
        line
        for line in lines_of("v1.22-graceful-delete.journal")
        if any(
            m in line for m in ('"SyncLoop ', "SyncLoop (PLEG)", '"Killing container with a grace period"')
        )
    ]
    tl = timelines(parse([v2], node="worker-1", year=2021))["6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"]
    assert [(iv.state, iv.source) for iv in tl.lane("worker") if iv.state != "unknown"][:3] == [
        ("setup", "kubelet"),
        ("running", "kubelet"),
        ("terminating", "kubelet"),
    ]
    assert tl.lane("worker")[2].attrs["cause"] == "deletion"


def test_v3_cancelling_the_sync_dates_a_termination_during_setup() -> None:
    log = [
        'I0814 09:00:00.000000    2981 kubelet.go:1] "SyncLoop (probe)" probe="readiness" status="ready" pod="kube-system/coredns-5d78c9869d-8qhfr"',
        'I0814 09:15:31.200417    2981 kubelet.go:2344] "SyncLoop ADD" source="api" pods=["default/slow-start-0"]',
        'I0814 09:15:41.507700    2981 kubelet.go:2351] "SyncLoop DELETE" source="api" pods=["default/slow-start-0"]',
        'I0814 09:15:41.507851    2981 pod_workers.go:970] "Cancelling current pod sync" pod="default/slow-start-0" podUID="9a7c5e3b-1d2f-4e6a-b8c0-d2e4f6a8b0c1" workType="terminating"',
    ]
    (tl,) = timelines(parse([log], node="worker-2", year=2023)).values()
    # The DELETE and the cancel describe one transition; the ADD dates setup: the cancelled sync shows
    # the pod admitted, so setup is drawn as an instant at the ADD (it began there; no line says how
    # long it lasted). Nothing says whether the containers had started (no PLEG line): that stays unknown.
    states = [(iv.state, iv.attrs["start_from"]) for iv in tl.lane("worker")]
    assert states == [
        ("setup", "syncloop_add"),
        ("unknown", "syncloop_add"),
        ("terminating", "syncloop_delete"),
    ]
    setup = tl.lane("worker")[0]
    assert setup.start == setup.end and setup.attrs.get("end_unknown")


# --------------------------------------------------------------------------------------- mirror pod reset


def test_a_mirror_pods_status_reset_by_a_kubelet_restart_dates_nothing() -> None:
    """GIVEN one `kubectl get -o json` snapshot of a static pod's mirror (created 26 days earlier) whose
    status a restarted kubelet just rewrote (Pending, container waiting, startTime and every transition
    time at the restart)
    THEN the worker lane begins where the restarted kubelet acknowledged the pod (the status describes
    that kubelet's life of it; nothing in it dates the old kubelet's), unknown between setup and running
    (the container waits: the snapshot cannot tell more), and the API lane says Pending only from the
    restart on; the restart is marked. The real mirror of tests/fixtures/real/kubelet (minikube 1.20)
    shows the same reset with the container running again: setup from the restart to that run's start.

    Before: 26 days of `pending` from the creation."""
    result = read_kubectl_output(
        (FIXTURES / "k8s" / "mirror-pod-status-reset.json").read_text(), origin="mirror.json"
    )
    (tl,) = timelines(result.observations).values()
    (life,) = tl.lane("worker")
    assert (life.state, life.start, life.end, life.source) == (
        "unknown",
        utc(2024, 6, 7, 6, 51, 2),
        None,
        "inferred",
    )
    assert [(iv.state, iv.start) for iv in tl.lane("api")] == [("pending", utc(2024, 6, 7, 6, 51, 2))]
    restarts = [o for o in result.observations if o.kind == "kubelet_process"]
    assert [o.payload["started_at"] for o in restarts] == ["2024-06-07T06:51:02.000000+00:00"]


# --------------------------------------------------------------------------------------- cut lines


def test_a_line_cut_by_systemctl_status_is_counted_as_cut_never_a_pod() -> None:
    """`systemctl status kubelet` cuts long lines: `pod="default/cert>` is a prefix of a name, not a pod."""
    result = parse_kubelet_log(
        [
            'Mar 01 10:00:00 n1 kubelet[1043]: I0301 10:00:00.000001    1043 kubelet.go:2344] "SyncLoop ADD" source="api" pods=["cert-manager/cert>',
            'Mar 01 10:00:01 n1 kubelet[1043]: I0301 10:00:01.000001    1043 kuberuntime_container.go:809] "Killing container with a grace period" pod="cert-manager/cert>',
            'Mar 01 10:00:02 n1 kubelet[1043]: I0301 10:00:02.000001    1043 kuberuntime_container.go:809] "Killing container with a grace period" pod="cert-manager/cert-manager-7d9f8b6c4-x2k9p" podUID=6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47 containerName="cert-manager" containerID="containerd://4536…',
            'Mar 01 10:00:03 n1 kubelet[1043]: I0301 10:00:03.000001    1043 kubelet.go:2344] "SyncLoop ADD" source="api" pods=["cert-manager/cert…',
            'Mar 01 10:00:04 n1 kubelet[1043]: I0301 10:00:04.000001    1043 pod_workers.go:770] "Pod is being synced for the first time" pod="cert-manager/cert-manager-7d9f8b6c4-x2k9p" podUID=6b0f2a4e-91c3-4d2',
        ],
        node="n1",
        year=2024,
        tz=UTC,
    )
    assert result.skipped["cut"] == 4
    # The kill whose identity is whole is kept, its cut containerID dropped.
    (kill,) = result.observations
    assert (kill.namespace, kill.name, kill.payload["container_id"]) == (
        "cert-manager",
        "cert-manager-7d9f8b6c4-x2k9p",
        None,
    )
    assert result.cut_kept == 1
    assert all(o.name != "cert>" for o in result.observations)


# --------------------------------------------------------------------------------------- setup means setup


def test_setup_ends_where_the_containers_started_not_at_termination() -> None:
    """GIVEN a pod that ran for three days (1.22, V4 lines and PLEG) before it was deleted
    THEN setup lasts until its container started; the days after are `running`.

    Before: one `setup` from the first sync to the deletion, which users read as "still starting"."""
    tl = timelines(parse([lines_of("v1.22-graceful-delete.journal")], node="worker-1", year=2021))[
        "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"
    ]
    setup, running = tl.lane("worker")[:2]
    assert (setup.state, running.state) == ("setup", "running")
    assert setup.end == running.start == utc(2021, 11, 3, 14, 2, 13, 771052)  # PLEG: the container started
    assert running.end == utc(2021, 11, 3, 14, 7, 15, 116122)  # the termination request
