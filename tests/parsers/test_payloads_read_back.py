"""Every field the kubelet log parser reads from a real line, read back whole (issue #38: fresh mutation
samples of ``collectors/parsers/`` showed fields parsed and never checked by any test).

Each test takes one real line (tests/fixtures/real/kubelet; its README and tests/fixtures/real/SOURCES.md
name where each file was copied from) and states what a kubelet engineer reads from it: the instant, the
pod (UID, namespace, name) and each key of the payload, with the line's own values. The klog V level of
each message is the one k8s-facts.md gives for it (/work/shared/k8s-facts.md, "pod lifecycle messages").
Lines of V0 messages carry no level: a V0 line says nothing of the log's verbosity (the highest V level a
log's lines show).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from collectors.parsers.klog import parse_klog_body
from collectors.parsers.kubelet_log import (
    MAX_LINE,
    MarkerReason,
    _container_id,
    _phase_of,
    parse_kubelet_line,
    parse_kubelet_log,
    top_unrecognized,
)
from timelines.lifecycle.observation import Kind, Observation, Source, Transition

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"

KUEUE = "kueue-4669-kind-1.31-v3.journal"  # kind 1.31, --v=3; pod pod-e2e-dx5dg/group-0
KUEUE_UID = "8bb7de3e-72f0-4102-adbd-53897040775e"
KUEUE_C = "62e04a72b1c5bb855056e55b44513a36a9f338baa5ee997b5ea20858b61fa058"  # its container "c"


def line_of(name: str, number: int) -> str:
    """The 1-based line ``number`` of the real file ``name``, verbatim."""
    return (REAL / name).read_text(encoding="utf-8").splitlines()[number - 1]


def read(
    name: str, number: int, *, year: int, node: str = "kind-worker", tz: tzinfo = UTC
) -> list[Observation]:
    """What the parser makes of that one real line, alone (its klog time in ``tz``)."""
    result = parse_kubelet_log([line_of(name, number)], node=node, year=year, tz=tz)
    assert not result.errors
    return result.observations


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def pod_fields(obs: Observation) -> tuple[Any, ...]:
    return (obs.kind, obs.source, obs.observed_at, obs.node, obs.pod_uid, obs.namespace, obs.name)


WORKER_NONE = {  # what a pod-worker line that does not say them leaves unsaid
    "work_type": None,
    "update_type": None,
    "cause": None,
    "is_terminal": None,
    "grace_period": None,
    "error": None,
}
MARKER_NONE = {"container": None, "grace_period": None, "error": None}


def test_a_config_line_names_its_source_and_how_many_pods_it_lists() -> None:
    """`"SyncLoop ADD" source="api" pods=["pod-e2e-dx5dg/group-0"]` (V2): the API server sent the kubelet one
    pod, named without a UID (none is logged since 1.21)."""
    line = line_of(KUEUE, 1)
    assert '"SyncLoop ADD" source="api" pods=["pod-e2e-dx5dg/group-0"]' in line
    (add,) = read(KUEUE, 1, year=2025)
    assert pod_fields(add) == (
        Kind.WORKER,
        Source.KUBELET_LOG,
        at("2025-03-18 10:21:19.149698"),
        "kind-worker",
        None,
        "pod-e2e-dx5dg",
        "group-0",
    )
    assert add.payload == {
        "transition": Transition.SYNCLOOP_ADD,
        "message": "SyncLoop ADD",
        "severity": "I",
        "caller": "kubelet.go:2407",
        "config_source": "api",
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "pods_in_line": 1,
        "pid": 246,
        "level": 2,
    }


def test_a_pleg_event_gives_the_pod_uid_its_id_and_the_container_its_data() -> None:
    """A PLEG event's ID is the pod's UID and its Data the runtime ID of what started (V2)."""
    (started,) = read(KUEUE, 17, year=2025)
    assert pod_fields(started) == (
        Kind.WORKER,
        Source.KUBELET_LOG,
        at("2025-03-18 10:21:21.516037"),
        "kind-worker",
        KUEUE_UID,
        "pod-e2e-dx5dg",
        "group-0",
    )
    assert started.payload == {
        "transition": Transition.CONTAINER_STARTED,
        "message": "SyncLoop (PLEG): event for pod",
        "severity": "I",
        "caller": "kubelet.go:2439",
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "container_id": KUEUE_C,
        "pid": 246,
        "level": 2,
    }
    (died,) = read(KUEUE, 41, year=2025)
    assert (died.payload["transition"], died.payload["container_id"]) == (Transition.CONTAINER_DIED, KUEUE_C)


def test_the_startup_line_gives_each_of_its_times_in_utc_and_its_durations() -> None:
    """`"Observed pod startup duration"` (V0): created at 10:21:18, running from .586452803 (the kubelet) and
    .676410453 (the watch), SLO and end-to-end duration 3.676410453 s; the pull times are Go's zero time
    (``0001-01-01``): no image was pulled, so there are none. Times to the microsecond, truncated as Go's
    nanoseconds are."""
    (startup,) = read(KUEUE, 26, year=2025)
    assert pod_fields(startup) == (
        Kind.WORKER,
        Source.KUBELET_LOG,
        at("2025-03-18 10:21:21.676439"),
        "kind-worker",
        None,
        "pod-e2e-dx5dg",
        "group-0",
    )
    payload = dict(startup.payload)
    assert payload.pop("level") is None  # V0
    assert payload == {
        "transition": Transition.STARTUP_OBSERVED,
        "message": "Observed pod startup duration",
        "severity": "I",
        "caller": "pod_startup_latency_tracker.go:104",
        **WORKER_NONE,
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "observed_running": "2025-03-18T10:21:21.586452+00:00",
        "watch_observed_running": "2025-03-18T10:21:21.676410+00:00",
        "created": "2025-03-18T10:21:18.000000+00:00",
        "first_started_pulling": None,
        "last_finished_pulling": None,
        "slo_seconds": 3.676410453,
        "e2e_seconds": 3.676410453,
        "pid": 246,
    }


def test_a_startup_line_with_pulls_gives_both_pull_times_and_both_durations() -> None:
    """The AKS 2025 line of default/liveness-exec: its image was pulled from 18:34:05.069571752 to
    .968299422, so the SLO duration (2.066691337 s, pulling excluded) is shorter than the end-to-end one
    (`podStartE2EDuration="2.965419007s"`, Go duration text)."""
    name = "aks-2025-1.31-liveness-probe-restart.journal"
    assert 'podStartSLOduration=2.066691337 podStartE2EDuration="2.965419007s"' in line_of(name, 4)
    (startup,) = read(name, 4, year=2025, node="aks-nodepool1-29985679-vmss00000A")
    payload = dict(startup.payload)
    assert payload.pop("level") is None  # V0
    assert payload == {
        "transition": Transition.STARTUP_OBSERVED,
        "message": "Observed pod startup duration",
        "severity": "I",
        "caller": "pod_startup_latency_tracker.go:104",
        **WORKER_NONE,
        "pod_ref": "default/liveness-exec",
        "observed_running": "2025-05-16T18:34:06.965398+00:00",
        "watch_observed_running": "2025-05-16T18:34:06.965419+00:00",
        "created": "2025-05-16T18:34:04.000000+00:00",
        "first_started_pulling": "2025-05-16T18:34:05.069571+00:00",
        "last_finished_pulling": "2025-05-16T18:34:05.968299+00:00",
        "slo_seconds": 2.066691337,
        "e2e_seconds": 2.965419007,
        "pid": 4052,
    }


def test_a_status_update_gives_the_phase_it_wrote_and_its_version() -> None:
    """`"Status for pod updated successfully" … statusVersion=2 status={"phase":"Running",…}` (V3): the
    kubelet wrote phase Running, its second status of the pod."""
    (running,) = read(KUEUE, 24, year=2025)
    assert pod_fields(running) == (
        Kind.WORKER,
        Source.KUBELET_LOG,
        at("2025-03-18 10:21:21.586345"),
        "kind-worker",
        None,
        "pod-e2e-dx5dg",
        "group-0",
    )
    assert running.payload == {
        "transition": Transition.STATUS_UPDATED,
        "message": "Status for pod updated successfully",
        "severity": "I",
        "caller": "status_manager.go:881",
        **WORKER_NONE,
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "phase": "Running",
        "status_version": 2,
        "pid": 246,
        "level": 3,
    }


def test_a_cancelled_sync_gives_the_work_the_worker_turned_to() -> None:
    """`"Cancelling current pod sync" … workType="terminating"` (V3): the worker turned to terminating."""
    (cancel,) = read(KUEUE, 28, year=2025)
    assert (cancel.pod_uid, cancel.namespace, cancel.name) == (KUEUE_UID, "pod-e2e-dx5dg", "group-0")
    assert cancel.payload == {
        "transition": Transition.CANCELLING_SYNC,
        "message": "Cancelling current pod sync",
        "severity": "I",
        "caller": "pod_workers.go:970",
        **WORKER_NONE,
        "work_type": "terminating",
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "pid": 246,
        "level": 3,
    }


def test_both_kill_lines_give_the_container_its_id_and_the_grace_each_names() -> None:
    """The V3 override line (grace 1) and the V2 line (grace 2: the 2 s floor) kill container c."""
    (override,) = read(KUEUE, 30, year=2025)
    (kill,) = read(KUEUE, 31, year=2025)
    common = {
        "reason": MarkerReason.KILLING_CONTAINER,
        "severity": "I",
        "container": "c",
        "error": None,
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "container_id": f"containerd://{KUEUE_C}",
        "pid": 246,
    }
    assert pod_fields(override) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2025-03-18 10:21:22.519778"),
        "kind-worker",
        KUEUE_UID,
        "pod-e2e-dx5dg",
        "group-0",
    )
    assert override.payload == {
        **common,
        "message": "Killing container with a grace period override",
        "caller": "kuberuntime_container.go:787",
        "grace_period": 1,
        "override": True,
        "level": 3,
    }
    assert kill.payload == {
        **common,
        "message": "Killing container with a grace period",
        "caller": "kuberuntime_container.go:808",
        "grace_period": 2,
        "override": False,
        "level": 2,
    }


def test_a_killing_event_names_the_container_its_message_stops() -> None:
    """The kubelet's `Killing` event, echoed in its log (`"Event occurred" … kind="Pod" … reason="Killing"
    message="Stopping container c"`): the kill of container c, marked as told by an event."""
    (event,) = read(KUEUE, 32, year=2025)
    assert pod_fields(event) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2025-03-18 10:21:22.520840"),
        "kind-worker",
        None,
        "pod-e2e-dx5dg",
        "group-0",
    )
    payload = dict(event.payload)
    payload.pop("level")  # an event's line is logged at the level the kubelet's event broadcaster was given
    assert payload == {
        "reason": MarkerReason.KILLING_CONTAINER,
        "message": "Stopping container c",
        "severity": "I",
        "caller": "event.go:389",
        **MARKER_NONE,
        "container": "c",
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "container_id": None,
        "override": False,
        "pid": 246,
        "from": "event",
    }


def test_a_delayed_deletion_and_a_finished_termination_give_both_phases() -> None:
    """`"Delaying pod deletion as the phase is non-terminal" phase="Running" localPhase="Running"` and `"The
    pod termination is finished …" phase="Failed" localPhase="Failed"` (V3, 1.27+): the API's phase and the
    kubelet's own, each as the line names it."""
    (delayed,) = read(KUEUE, 35, year=2025)
    (finished,) = read(KUEUE, 55, year=2025)
    for obs, transition, phase, caller in (
        (delayed, Transition.DELETION_DELAYED, "Running", "status_manager.go:937"),
        (finished, Transition.TERMINATION_FINISHED, "Failed", "status_manager.go:942"),
    ):
        assert (obs.pod_uid, obs.namespace, obs.name) == (KUEUE_UID, "pod-e2e-dx5dg", "group-0")
        assert obs.payload == {
            "transition": transition,
            "message": obs.payload["message"],
            "severity": "I",
            "caller": caller,
            **WORKER_NONE,
            "pod_ref": "pod-e2e-dx5dg/group-0",
            "phase": phase,
            "local_phase": phase,
            "pid": 246,
            "level": 3,
        }
    # kind 1.34 (kueue#4520): a pod deleted while Pending; both phases still Pending
    (pending,) = read("kueue-4520-kind-1.34-marked-failed.journal", 1, year=2025)
    assert (pending.payload["transition"], pending.payload["phase"], pending.payload["local_phase"]) == (
        Transition.DELETION_DELAYED,
        "Pending",
        "Pending",
    )


def test_marking_a_terminal_pod_failed_gives_the_phase_it_had() -> None:
    """`"Marking terminal pod as failed" oldPhase="Pending"` (V3, 1.27+; kueue#4520, kind 1.34): the
    kubelet forced Failed on a pod whose phase was Pending."""
    (marked,) = read("kueue-4520-kind-1.34-marked-failed.journal", 3, year=2025)
    assert pod_fields(marked) == (
        Kind.WORKER,
        Source.KUBELET_LOG,
        at("2025-10-08 10:14:16.848691"),
        "kind-worker",
        "6066b861-eabc-41d9-bcd5-2c90f9a0433b",
        "sts-e2e-pldgc",
        "sts-0",
    )
    assert marked.payload == {
        "transition": Transition.MARKED_FAILED,
        "message": "Marking terminal pod as failed",
        "severity": "I",
        "caller": "status_manager.go:610",
        **WORKER_NONE,
        "pod_ref": "sts-e2e-pldgc/sts-0",
        "old_phase": "Pending",
        "pid": 228,
        "level": 3,
    }


def test_a_finished_container_gives_its_exit_code_and_id_under_the_pod_uid_alone() -> None:
    """`"Generic (PLEG): container finished" podID="5da5612b-…" containerID="c65a36d4…" exitCode=0` (V2,
    AKS): the pod is named by its UID only (``podID``), its container exited 0."""
    name = "aks-2024-v2.syslog"
    number = next(
        i
        for i, text in enumerate((REAL / name).read_text(encoding="utf-8").splitlines(), 1)
        if "container finished" in text
    )
    (finished,) = read(name, number, year=2024, node="aks-np2-39852331-vmss000000")
    assert pod_fields(finished) == (
        Kind.WORKER,
        Source.KUBELET_LOG,
        at("2024-11-29 18:20:18.668292"),
        "aks-np2-39852331-vmss000000",
        "5da5612b-9738-493c-af51-a213072997f6",
        None,
        None,
    )
    assert finished.payload == {
        "transition": Transition.CONTAINER_FINISHED,
        "message": "Generic (PLEG): container finished",
        "severity": "I",
        "caller": "generic.go:334",
        **WORKER_NONE,
        "pod_ref": None,
        "container_id": "c65a36d4090569f70b6badb5b6127ad773ebd7e5ce18d3872b8e93ee4fb52cab",
        "exit_code": 0,
        "pid": 2775,
        "level": 2,
    }


def test_a_volume_line_gives_the_pod_uid_and_the_volume_unique_name_it_names() -> None:
    """`operationExecutor.VerifyControllerAttachedVolume started for volume "kube-api-access-v5gs9"
    (UniqueName: "kubernetes.io/projected/8bb7de3e-…-kube-api-access-v5gs9") pod "group-0" (UID: "8bb7…")`:
    the pod's UID and its volume's unique name, as the message says them."""
    (verify,) = read(KUEUE, 5, year=2025)
    assert pod_fields(verify) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2025-03-18 10:21:19.253480"),
        "kind-worker",
        KUEUE_UID,
        "pod-e2e-dx5dg",
        "group-0",
    )
    payload = dict(verify.payload)
    payload.pop("level")  # the volume manager's lines: not in k8s-facts.md's table
    assert payload == {
        "reason": MarkerReason.VOLUME_ATTACH_VERIFY,
        "message": payload["message"],
        "severity": "I",
        "caller": "reconciler_common.go:245",
        **MARKER_NONE,
        "pod_ref": "pod-e2e-dx5dg/group-0",
        "volume": f"kubernetes.io/projected/{KUEUE_UID}-kube-api-access-v5gs9",
        "pid": 246,
    }
    assert payload["message"].startswith(
        'operationExecutor.VerifyControllerAttachedVolume started for volume "'
    )


def test_a_pod_recreated_under_its_name_marks_the_old_uid_and_names_the_new() -> None:
    """`"Pod was deleted and then recreated, skipping status update" pod="vm-cluster-common/vmstorage-common-15"
    oldPodUID="5e71a8a1-…" podUID="563dafa2-…"` (V2): a marker on the old incarnation, naming its successor."""
    name = "blog-numa-1.28-topology-affinity-rejected-v10.journal"
    # the node logs in UTC+8 (SOURCES.md: `startTime 2024-08-15T14:24:53Z` = 22:24:53)
    (recreated,) = read(name, 17, year=2024, node="wxyd-216-8-20", tz=ZoneInfo("Asia/Shanghai"))
    assert pod_fields(recreated) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2024-08-15 14:24:53.589024"),
        "wxyd-216-8-20",
        "5e71a8a1-581b-4be8-84b9-80b507422429",
        "vm-cluster-common",
        "vmstorage-common-15",
    )
    payload = dict(recreated.payload)
    payload.pop("level")  # V2 in k8s-facts.md; the parser records no level for it (docs/testing.md)
    assert payload == {
        "reason": MarkerReason.RECREATED,
        "message": "Pod was deleted and then recreated, skipping status update",
        "severity": "I",
        "caller": "status_manager.go:863",
        **MARKER_NONE,
        "pod_ref": "vm-cluster-common/vmstorage-common-15",
        "new_uid": "563dafa2-77a7-4dab-949e-9dbf079a4a70",
        "pid": 102192,
    }


def test_a_post_termination_state_gives_the_containers_text() -> None:
    """`"Post-termination container state" … containers="(nginx state=exited exitCode=0 finishedAt=…)"` (V4,
    kubernetes#107730): the containers' state, as the kubelet wrote it."""
    (state,) = read("k8s-107730-v1.23-terminating-exit.journal", 2, year=2022, node="bm02")
    assert (state.kind, state.pod_uid, state.namespace, state.name) == (
        Kind.KUBELET_MARKER,
        "68aaedee-7ebd-44fd-ad66-0febb9a0b509",
        "default",
        "nginx-75cd7474f-tt7b8",
    )
    assert state.payload == {
        "reason": MarkerReason.CONTAINER_STATE,
        "message": "Post-termination container state",
        "severity": "I",
        "caller": "kubelet.go:1823",
        **MARKER_NONE,
        "pod_ref": "default/nginx-75cd7474f-tt7b8",
        "containers": "(nginx state=exited exitCode=0 finishedAt=2022-01-27T07:57:17.377710677Z)",
        "pid": 2050782,
        "level": 4,
    }


def test_a_reclaim_line_is_the_nodes_and_gives_the_resource() -> None:
    """`"Eviction manager: attempting to reclaim" resourceName="ephemeral-storage"` (V0, k3s): the node,
    not a pod, is short of ephemeral storage."""
    (reclaim,) = read("k3s-1.30-homelab-disk-pressure-critical-pod.journal", 1, year=2026, node="homelab-1")
    assert pod_fields(reclaim) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2026-06-17 16:18:42.080925"),
        "homelab-1",
        None,
        None,
        None,
    )
    payload = dict(reclaim.payload)
    assert payload.pop("level") is None
    assert payload == {
        "reason": MarkerReason.EVICTION_RECLAIM,
        "message": "Eviction manager: attempting to reclaim",
        "severity": "I",
        "caller": "eviction_manager.go:381",
        **MARKER_NONE,
        "pod_ref": None,
        "resource": "ephemeral-storage",
        "pid": 3814777,
    }


# -- lines read, and lines counted apart with their reason --------------------------------------------------


def test_every_line_of_a_pasted_syslog_is_read_or_counted_once_under_its_reason() -> None:
    """The AKS syslog paste (48 lines): 17 kubelet lines read; the reporter's `#` notes and shell prompts are
    not klog (5); containerd's and systemd's lines are other units' (15); 3 lines are empty; 8 kubelet lines
    say what podlife does not read, each message text counted (two "No sandbox…", two "No ready
    sandbox…", two "RemoveContainer", one each of the runtime's errors)."""
    lines = (REAL / "aks-2024-v2.syslog").read_text(encoding="utf-8").splitlines()
    result = parse_kubelet_log(lines, node="aks-np2-39852331-vmss000000", year=2024, tz=UTC)
    assert result.lines_read == 48
    assert result.skipped == Counter(not_klog=5, not_kubelet=15, blank=3, unrecognized_message=8)
    assert len(result.observations) == 17 and not any("where" in o.payload for o in result.observations)
    named = parse_kubelet_log(
        lines, node="aks-np2-39852331-vmss000000", year=2024, tz=UTC, source="aks.syslog"
    )
    assert [o.payload["where"] for o in named.observations][:3] == [
        "aks.syslog:2",
        "aks.syslog:4",
        "aks.syslog:5",
    ]
    assert top_unrecognized(result.unrecognized) == [
        ("No ready sandbox for pod can be found. Need to start a new one", 2),
        ("No sandbox for pod can be found. Need to start a new one", 2),
        ("RemoveContainer", 2),
        ("ContainerStatus from runtime service failed", 1),
        ("DeleteContainer returned error", 1),
    ]


def test_a_message_carried_onto_a_tab_indented_line_is_a_continuation_without_its_block() -> None:
    """kubernetes#21248 (1.21 stderr): the AWS credentials error goes on, after a newline, as
    `\\tFor verbose messaging see aws.Config.CredentialsChainVerboseErrors`. That tab-indented line opens no
    klog header and belongs to no ``key=<`` block: counted as a continuation, not as damage or other text."""
    lines = (
        (REAL / "k8s-21248-1.21-stderr-multiline-continuation.log").read_text(encoding="utf-8").splitlines()
    )
    assert lines[1].startswith("\tFor verbose messaging")
    result = parse_kubelet_log(lines, node="ubuntu-focal", year=2021, tz=UTC)
    assert result.skipped == Counter(unrecognized_message=4, orphan_continuation=1)


def test_lines_cut_by_systemctl_are_counted_as_cut_and_a_cut_volume_name_gives_no_uid() -> None:
    """OCP 4.10 `systemctl status` (lines cut at the terminal's width with `>`): the kill line's pod
    (`pod="openshift-marketplace/cert>`) and two volume lines are cut before what names their pod: counted
    `cut`; the TearDown line's volume name is cut inside the pod's UID (`kubernetes.io/projected/39dd>`): no
    UID; the two SyncLoop lines are whole and read."""
    lines = (REAL / "ocp-4.10-systemctl-truncated.journal").read_text(encoding="utf-8").splitlines()
    result = parse_kubelet_log(lines, node="master2.ocp4.example.com", year=2021, tz=UTC)
    assert result.skipped == Counter(unrecognized_message=4, cut=3, no_pod_uid=1)
    assert [(o.payload["transition"], o.name) for o in result.observations] == [
        (Transition.SYNCLOOP_DELETE, "redhat-marketplace-t2g47"),
        (Transition.SYNCLOOP_REMOVE, "redhat-marketplace-t2g47"),
    ]


def test_a_line_dated_past_the_supported_range_is_counted_out_of_range() -> None:
    """A real line read as of the year 9000 (docs/configuration.md: times from 1970 up to, not including,
    9000-01-01) is refused as out of range, not stored; the same line in 8999 is read."""
    line = line_of(KUEUE, 1)
    late = parse_kubelet_log([line], node="kind-worker", year=9000, tz=UTC)
    assert (late.observations, late.skipped) == ([], Counter(out_of_range=1))
    assert len(parse_kubelet_log([line], node="kind-worker", year=8999, tz=UTC).observations) == 1


def test_a_line_longer_than_the_limit_is_counted_too_long_and_one_at_the_limit_is_read() -> None:
    """MAX_LINE characters is the longest line read: a real line padded with trailing blanks to exactly
    MAX_LINE is read; one more character and it is a runaway line, counted ``too_long`` (synthetic padding
    of a real line)."""
    line = line_of(KUEUE, 1)
    at_limit = line + " " * (MAX_LINE - len(line))
    assert len(parse_kubelet_log([at_limit], node="kind-worker", year=2025, tz=UTC).observations) == 1
    over = parse_kubelet_log([at_limit + " "], node="kind-worker", year=2025, tz=UTC)
    assert (over.observations, over.skipped) == ([], Counter(too_long=1))


# -- node level: the kubelet unit and its processes ----------------------------------------------------------


def test_systemd_stopping_and_starting_the_kubelet_unit_are_node_markers_with_their_action() -> None:
    """NVIDIA/k8s-device-plugin#175: systemd's `Stopping kubelet: …`, `Stopped …` and `Started kubelet: The
    Kubernetes Node Agent.` lines: the unit stopped, stopped, started, at the journal prefix's second, told
    by systemd (pid 1), about the node and no pod; three lines, three keys."""
    lines = (REAL / "nvidia-175-kubelet-service-restart.journal").read_text(encoding="utf-8").splitlines()
    result = parse_kubelet_log(lines, node="fabricnode2", year=2020, tz=UTC)
    assert result.skipped == Counter()
    assert [pod_fields(o) for o in result.observations] == [
        (Kind.KUBELET_MARKER, Source.KUBELET_LOG, at("2020-05-31 10:36:45"), "fabricnode2", None, None, None)
    ] * 3
    assert [o.payload for o in result.observations] == [
        {
            "reason": MarkerReason.KUBELET_SERVICE,
            "message": message,
            "severity": "I",
            "caller": "systemd",
            "action": action,
            "pid": 1,
        }
        for message, action in (
            ("Stopping kubelet: The Kubernetes Node Agent...", "stopped"),
            ("Stopped kubelet: The Kubernetes Node Agent.", "stopped"),
            ("Started kubelet: The Kubernetes Node Agent.", "started"),
        )
    ]
    assert len({o.dedupe_key for o in result.observations}) == 3


def test_each_kubelet_start_is_a_process_with_its_pid_minute_start_and_version() -> None:
    """kubernetes#112364: the kubelet started at 07:51:51 (pid 2993124) and, after systemd restarted it, at
    08:29:03 (pid 3016595), each `"Kubelet version" kubeletVersion="v1.22.13"`: two processes, each one
    minute of lines, started at its version line. The deprecation warnings are stderr text, not klog; the
    systemd line that does not name the kubelet is another unit's."""
    lines = (REAL / "k8s-112364-1.22-kubelet-restarts.journal").read_text(encoding="utf-8").splitlines()
    result = parse_kubelet_log(lines, node="node15", year=2022, tz=UTC)
    assert result.skipped == Counter(not_klog=4, not_kubelet=1, unrecognized_message=4)
    assert [(o.payload["action"], o.observed_at) for o in result.observations] == [
        ("started", at("2022-09-10 08:29:03"))
    ]
    assert [(p.kind, p.observed_at, p.node, p.pod_uid) for p in result.processes] == [
        (Kind.KUBELET_PROCESS, at("2022-09-10 07:51"), "node15", None),
        (Kind.KUBELET_PROCESS, at("2022-09-10 08:29"), "node15", None),
    ]
    assert [p.payload for p in result.processes] == [
        {
            "pid": pid,
            "first_at": f"2022-09-10T{minute}:00.000000+00:00",
            "last_at": f"2022-09-10T{next_minute}:00.000000+00:00",
            "started_at": f"2022-09-10T{started}+00:00",
            "version": "v1.22.13",
            "starts": [f"2022-09-10T{started}+00:00"],
        }
        for pid, minute, next_minute, started in (
            (2993124, "07:51", "07:52", "07:51:51.358218"),
            (3016595, "08:29", "08:30", "08:29:03.114807"),
        )
    ]


def test_a_status_printed_as_a_go_struct_gives_its_phase() -> None:
    """Kubelets of about 1.22/1.23 print the status they wrote as Go's ``%+v`` of the PodStatus struct
    (`status={Phase:Running Conditions:[{Type:Initialized …} …] … QOSClass:BestEffort …}`), not as JSON: its
    phase is the ``Phase:`` field, Running (a real message body whose header its author stripped:
    blog-1.23-headerless-status-go-struct.txt)."""
    text = (REAL / "blog-1.23-headerless-status-go-struct.txt").read_text(encoding="utf-8").splitlines()[0]
    body = parse_klog_body(text.strip())
    assert (body.message, body.values["pod"], body.values["statusVersion"]) == (
        "Status for pod updated successfully",
        "default/nginx-deployment-9456bbbf9-cvrr7",
        "3",
    )
    assert body.values["status"].startswith("{Phase:Running Conditions:[")
    assert _phase_of(body.values["status"]) == "Running"


def test_a_line_given_as_bytes_reads_as_its_text_and_a_byte_that_is_not_utf8_is_replaced() -> None:
    """A kubelet line read as bytes (a file, a shipped batch) is UTF-8: the real volume line given as bytes
    reads as its text does; a byte that is not UTF-8 (synthetic: one 0xff put in the volume's short name)
    is read as U+FFFD, and the line is still read, never refused."""
    line = line_of(KUEUE, 5)
    text = parse_kubelet_line(line, node="kind-worker", year=2025, tz=UTC).observations
    raw = parse_kubelet_line(line.encode("utf-8"), node="kind-worker", year=2025, tz=UTC).observations
    assert [(o.dedupe_key, o.payload) for o in raw] == [(o.dedupe_key, o.payload) for o in text] != []
    damaged = line.encode("utf-8").replace(
        b'volume \\"kube-api-access-v5gs9', b'volume \\"kube-api-access-v5gs\xff', 1
    )
    (marker,) = parse_kubelet_line(damaged, node="kind-worker", year=2025, tz=UTC).observations
    assert 'volume "kube-api-access-v5gs\ufffd" (UniqueName' in marker.payload["message"]
    assert marker.payload["volume"] == f"kubernetes.io/projected/{KUEUE_UID}-kube-api-access-v5gs9"


def test_a_header_and_its_short_iso_prefix_across_new_year_are_read_in_their_own_years() -> None:
    """klog headers carry no year; a ``short-iso`` journald prefix does, in the node's zone. Across New Year
    the two dates fall in different years: a header of 1 January (the kubelet writing UTC) under a prefix
    of 31 December (UTC-5) is the prefix's next year; a header of 31 December under a prefix of 1 January
    (UTC+9) is the prefix's year before. (Synthetic: the real SyncLoop ADD body of the kueue log under
    hand-written prefixes and headers.)"""
    body = line_of(KUEUE, 1).split("kubelet.go:2407] ", 1)[1]
    cases = (
        (
            "2025-12-31T19:21:19.149800-05:00",
            "I0101 00:21:19.149698",
            datetime(2026, 1, 1, 0, 21, 19, 149698),
        ),
        (
            "2026-01-01T08:21:19.149800+09:00",
            "I1231 23:21:19.149698",
            datetime(2025, 12, 31, 23, 21, 19, 149698),
        ),
    )
    for prefix, header, utc in cases:
        line = f"{prefix} kind-worker kubelet[246]: {header}     246 kubelet.go:2407] {body}"
        (add,) = parse_kubelet_log([line], node="kind-worker", year=1999, tz=UTC).observations
        assert add.observed_at == utc.replace(tzinfo=UTC), line


# -- kubelets before 1.20: printf lines ---------------------------------------------------------------------


def test_a_pre_1_20_config_line_names_its_source_and_its_pod_with_the_uid() -> None:
    """kubernetes#91914 (1.18): `SyncLoop (DELETE, "api"): "analytics-11-865c5777c7-ftzdv_whoop(ad544c18-…)"`
    and `SyncLoop (ADD, "api"): "…-lghdb_whoop(57f42639-…)"`: format.Pod's `name_namespace(uid)` gives the
    pod its namespace, name and UID (no structured line before 1.21 does), the config source is "api"."""
    name = "k8s-91914-1.18-docker-delete-add.syslog"
    deleted, added = (read(name, n, year=2020, node="ip-10-1-73-214")[0] for n in (1, 2))
    for obs, transition, message, caller, uid, pod in (
        (
            deleted,
            Transition.SYNCLOOP_DELETE,
            "SyncLoop DELETE",
            "kubelet.go:1904",
            "ad544c18-3890-47b6-852a-dac78fc71187",
            "analytics-11-865c5777c7-ftzdv",
        ),
        (
            added,
            Transition.SYNCLOOP_ADD,
            "SyncLoop ADD",
            "kubelet.go:1888",
            "57f42639-a88d-4174-8fc1-58f56d572891",
            "analytics-11-865c5777c7-lghdb",
        ),
    ):
        assert (obs.kind, obs.pod_uid, obs.namespace, obs.name) == (Kind.WORKER, uid, "whoop", pod)
        assert obs.payload == {
            "transition": transition,
            "message": message,
            "severity": "I",
            "caller": caller,
            "config_source": "api",
            "pod_ref": f"whoop/{pod}",
            "pods_in_line": 1,
            "pid": 1517,
            "level": 2,
        }
    assert deleted.observed_at == at("2020-06-08 15:36:12.678061")


def test_a_pre_1_20_pleg_line_gives_the_go_struct_events_uid_type_and_data() -> None:
    """kubernetes#88440 (1.18): `SyncLoop (PLEG): "pod-submit-status-2-6_pods-6969(d19a0cf1-…)", event:
    &pleg.PodLifecycleEvent{ID:"d19a0cf1-…", Type:"ContainerDied", Data:"5c3ff805…"}`: the sandbox
    5c3ff805… of pods-6969/pod-submit-status-2-6 died."""
    (died,) = read("k8s-88440-plain-klog-1.18-kill-unwanted-pleg-died.log", 5, year=2020, node="node-88440")
    assert pod_fields(died) == (
        Kind.WORKER,
        Source.KUBELET_LOG,
        at("2020-02-26 01:57:59.454998"),
        "node-88440",
        "d19a0cf1-9f23-4c35-9ac6-9b70a01f5237",
        "pods-6969",
        "pod-submit-status-2-6",
    )
    assert died.payload == {
        "transition": Transition.CONTAINER_DIED,
        "message": "SyncLoop (PLEG): event for pod",
        "severity": "I",
        "caller": "kubelet.go:1959",
        "pod_ref": "pods-6969/pod-submit-status-2-6",
        "container_id": "5c3ff805bec3aff116c440e5a5960061e3c6bc69a8574a929efd9c1fe5e92003",
        "pid": 1388,
        "level": 2,
    }


def test_a_pre_1_20_killing_event_names_the_pod_by_its_object_reference() -> None:
    """kubernetes#92126 (1.16, CRI-O): `Event(v1.ObjectReference{Kind:"Pod", Namespace:"kube-system",
    Name:"metrics-server-8f9559cbb-b67qm", UID:"27ce04fc-…", …, FieldPath:"spec.containers{metrics-server}"}):
    type: 'Normal' reason: 'Killing' Stopping container metrics-server`: the kill of that container, its pod
    named with its UID by the reference."""
    (event,) = read("k8s-92126-1.16-crio-delete-remove-same-ms.journal", 4, year=2020, node="HOST1")
    assert pod_fields(event) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2020-06-15 00:03:23.999097"),
        "HOST1",
        "27ce04fc-48f9-4f39-a805-12f57727d730",
        "kube-system",
        "metrics-server-8f9559cbb-b67qm",
    )
    payload = dict(event.payload)
    payload.pop("level")  # an event's line: see test_a_killing_event_names_the_container_its_message_stops
    assert payload == {
        "reason": MarkerReason.KILLING_CONTAINER,
        "message": "Stopping container metrics-server",
        "severity": "I",
        "caller": "event.go:274",
        **MARKER_NONE,
        "container": "metrics-server",
        "pod_ref": "kube-system/metrics-server-8f9559cbb-b67qm",
        "container_id": None,
        "override": False,
        "pid": 288702,
        "from": "event",
    }


def test_a_container_id_is_type_colon_slash_slash_id_however_the_kubelet_printed_it() -> None:
    """``ContainerID.String()`` is ``type://id``, the form the kill lines log (`containerID="containerd://…"`)
    and that findings match kills and deaths by. 1.29+ kubelets JSON-encode the struct when they pass it
    whole (AKS 2025's `"Message for Container of pod" … containerStatusID={"Type":"containerd","ID":"05657a9c…"}`,
    before the liveness kill of the same container); older ones Go-print it (`containerID={Type:docker
    ID:dc18bc33…}`, a real 1.23 message body). Both read as ``type://id``. Before: the restart marker's
    ID was Python's text of a dict, matching no kill."""
    name = "aks-2025-1.31-liveness-probe-restart.journal"
    (restart,) = read(name, 9, year=2025, node="aks-nodepool1-29985679-vmss00000A")
    (kill,) = read(name, 10, year=2025, node="aks-nodepool1-29985679-vmss00000A")
    assert pod_fields(restart) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2025-05-16 18:34:49.885576"),
        "aks-nodepool1-29985679-vmss00000A",
        None,
        "default",
        "liveness-exec",
    )
    assert restart.payload == {
        "reason": MarkerReason.CONTAINER_RESTART,
        "message": "Message for Container of pod",
        "severity": "I",
        "caller": "kuberuntime_manager.go:1027",
        **MARKER_NONE,
        "container": "liveness",
        "pod_ref": "default/liveness-exec",
        "detail": "Container liveness failed liveness probe, will be restarted",
        "container_id": "containerd://05657a9c673d612aedd955a65136ccca36b82ba987831de7844cdc0238f1d707",
        "pid": 4052,
        "level": 2,
    }
    assert kill.payload["container_id"] == restart.payload["container_id"]
    text = (REAL / "blog-1.23-headerless-status-go-struct.txt").read_text(encoding="utf-8").splitlines()[1]
    body = parse_klog_body(text.strip())
    assert body.message == "Kill container failed"
    assert _container_id(body.values["containerID"]) == (
        "docker://dc18bc33e7914de8b6db57585ce56f2fbbb36c8deab970d5d0014f882ce1748c"
    )
    # hand-made structs: without an ID no container, without a type the bare ID
    assert _container_id({"Type": "containerd", "ID": ""}) is None
    assert _container_id({"Type": "", "ID": "05657a9c673d"}) == "05657a9c673d"
    assert _container_id("c65a36d4090569f70b6badb5b6127ad773ebd7e5ce18d3872b8e93ee4fb52cab") == (
        "c65a36d4090569f70b6badb5b6127ad773ebd7e5ce18d3872b8e93ee4fb52cab"  # a bare ID (PLEG's) stays bare
    )


# -- evictions, shutdown, JSON logging ------------------------------------------------------------------------


def test_an_eviction_and_the_teardown_it_starts_are_read_whole() -> None:
    """kubernetes PR #117822 (about 1.28, V4): `"Evicting pod" pod="default/uuuuu" podUID="e23cf55e-…"
    message="The node was low on resource: memory. …"` (V3), then `"Pod is being evicted by the kubelet,
    begin teardown" … updateType="kill"` (V4: a kill, caused by an eviction) and `"Notifying pod of pending
    update" … workType="terminating"` (V4)."""
    name = "k8s-117822-localized-month-1.28-eviction-v4.journal"
    lines = (REAL / name).read_text(encoding="utf-8").splitlines()[:3]
    evicting, teardown, pending = parse_kubelet_log(
        lines, node="VM-8-4-tencentos", year=2024, tz=UTC
    ).observations
    uid = "e23cf55e-509b-4106-b3da-9df51372b6f1"
    for obs, clock in (
        (evicting, "21:43:37.433175"),
        (teardown, "21:43:37.433198"),
        (pending, "21:43:37.433211"),
    ):
        assert (obs.observed_at, obs.pod_uid, obs.namespace, obs.name) == (
            at(f"2024-04-09 {clock}"),
            uid,
            "default",
            "uuuuu",
        )
    memory = (
        "The node was low on resource: memory. Threshold quantity: 2Gi, available: 719212Ki. Container u was "
        "using 1847180Ki, request is 0, has larger consumption of memory. "
    )
    assert evicting.payload == {
        "reason": MarkerReason.EVICTING,
        "message": "Evicting pod",
        "severity": "I",
        "caller": "eviction_manager.go:580",
        **MARKER_NONE,
        "pod_ref": "default/uuuuu",
        "detail": memory,
        "pid": 36357,
        "level": 3,
    }
    assert teardown.payload == {
        "transition": Transition.TERMINATION_REQUESTED,
        "message": "Pod is being evicted by the kubelet, begin teardown",
        "severity": "I",
        "caller": "pod_workers.go:866",
        **WORKER_NONE,
        "update_type": "kill",
        "cause": "evicted",
        "pod_ref": "default/uuuuu",
        "pid": 36357,
        "level": 4,
    }
    assert pending.payload == {
        "transition": Transition.PENDING_UPDATE,
        "message": "Notifying pod of pending update",
        "severity": "I",
        "caller": "pod_workers.go:965",
        **WORKER_NONE,
        "work_type": "terminating",
        "pod_ref": "default/uuuuu",
        "pid": 36357,
        "level": 4,
    }


def test_a_node_shutdown_kill_gives_the_pod_and_its_grace() -> None:
    """kubernetes#110755 (GKE): `"Shutdown manager killing pod with gracePeriod" pod="XX/client-…"
    gracePeriod=15` (V1): the graceful node shutdown kills the pod (named without a UID) with 15 s."""
    name = "k8s-110755-gke-node-shutdown.txt"
    (kill,) = read(name, 3, year=2022, node="gke-node")
    assert pod_fields(kill) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2022-06-23 15:42:16.744070"),
        "gke-node",
        None,
        "XX",
        "client-64ccc5cc77-6jrfk",
    )
    payload = dict(kill.payload)
    payload.pop("level")  # V1 in k8s-facts.md; the parser records levels 2 to 4 only
    assert payload == {
        "reason": MarkerReason.SHUTDOWN_KILL,
        "message": "Shutdown manager killing pod with gracePeriod",
        "severity": "I",
        "caller": "nodeshutdown_manager_linux.go:316",
        **MARKER_NONE,
        "grace_period": 15,
        "pod_ref": "XX/client-64ccc5cc77-6jrfk",
        "pid": 1748,
    }


def test_json_config_lines_name_their_pods_as_objects_with_the_records_time_and_level() -> None:
    """kops 1.24 with `--logging-format=json`: `{"ts":1655581336244.2942,"caller":"kubelet/kubelet.go:2102",
    "msg":"SyncLoop REMOVE","v":2,"source":"api","pods":[{"name":"nettools","namespace":"dev"}]}`: the time
    is the record's epoch milliseconds, the level its ``v``, the pod a KObj; the journal's pid is the
    process's."""
    name = "kops-1.24-json-v2.journal"
    removed, added = (read(name, n, year=2022, node="ip-172-20-59-66")[0] for n in (3, 5))
    for obs, transition, message, caller, clock in (
        (
            removed,
            Transition.SYNCLOOP_REMOVE,
            "SyncLoop REMOVE",
            "kubelet/kubelet.go:2102",
            "19:42:16.244294",
        ),
        (added, Transition.SYNCLOOP_ADD, "SyncLoop ADD", "kubelet/kubelet.go:2092", "19:42:34.264564"),
    ):
        assert pod_fields(obs) == (
            Kind.WORKER,
            Source.KUBELET_LOG,
            at(f"2022-06-18 {clock}"),
            "ip-172-20-59-66",
            None,
            "dev",
            "nettools",
        )
        assert obs.payload == {
            "transition": transition,
            "message": message,
            "severity": "I",
            "caller": caller,
            "config_source": "api",
            "pod_ref": "dev/nettools",
            "pods_in_line": 1,
            "pid": 5656,
            "level": 2,
        }


def test_an_unmount_line_naming_its_pod_by_the_uid_gives_the_uid_and_no_name() -> None:
    """deckhouse#336 (about 1.19, MSK): `UnmountVolume.TearDown succeeded for volume
    "kubernetes.io/secret/6c1ffa82-…-default-token-t5qqg" (OuterVolumeSpecName: …) pod "6c1ffa82-…" (UID:
    "6c1ffa82-…")`: the volume manager names the pod by its UID there, which is no pod name; the marker is
    the pod's (its UID), with the volume's unique name. The klog pid (1977863) is the kubelet's, not the
    journal's wrapper's (1977858)."""
    name = "deckhouse-336-kubelet-forker-wrapper-volume-teardown.journal"
    lines = (REAL / name).read_text(encoding="utf-8").splitlines()
    result = parse_kubelet_log(lines, node="kube-master-3", year=2021, tz=ZoneInfo("Europe/Moscow"))
    assert result.skipped == Counter(unrecognized_message=3)
    (torn,) = result.observations
    uid = "6c1ffa82-fa70-4292-a772-8a0413771631"
    assert pod_fields(torn) == (
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        at("2021-11-30 13:20:40.229803"),
        "kube-master-3",
        uid,
        None,
        None,
    )
    payload = dict(torn.payload)
    assert payload.pop("message").startswith("UnmountVolume.TearDown succeeded for volume ")
    payload.pop("level")  # the volume manager's lines: not in k8s-facts.md's table
    assert payload == {
        "reason": MarkerReason.VOLUME_TORN_DOWN,
        "severity": "I",
        "caller": "operation_generator.go:788",
        **MARKER_NONE,
        "pod_ref": None,
        "volume": f"kubernetes.io/secret/{uid}-default-token-t5qqg",
        "pid": 1977863,
    }
