"""Golden timelines: exact intervals (to the microsecond), sources, attrs and findings per scenario."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, finding_rows, only, rows, t
from timelines.lifecycle import schema
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.findings import Thresholds
from timelines.lifecycle.timeline import PodTimeline


def R(
    state: str, start: float, end: float | None, source: str = "observed"
) -> tuple[str, str | None, str | None, str]:
    """An expected row: times are seconds after T0."""
    return (state, at(start), at(end), source)


def F(kind: str, severity: str, start: float, end: float | None) -> tuple[str, str, str | None, str | None]:
    return (kind, severity, at(start), at(end))


API_START = [
    R("pending", 0, 1),
    R("scheduled", 1, 2),
    R("initializing", 2, 4),
    R("running", 4, 5),
    R("running", 5, None),
]


def derive(name: str, **kwargs: object) -> PodTimeline:
    return derive_pod_timeline(scenarios.ALL_SCENARIOS[name](), **kwargs)  # type: ignore[arg-type]


def plain(attrs: dict[str, object]) -> dict[str, object]:
    """A worker interval's attributes without the keys of the observations that prove its bounds."""
    return {k: v for k, v in attrs.items() if k not in ("start_evidence", "end_evidence")}


def test_normal_start_is_setup_until_the_containers_started_then_running() -> None:
    tl = derive("normal_start")
    # SyncPod split where the app container started (the API's startedAt: no kubelet line says it here).
    assert rows(tl, "worker") == [R("setup", 1.1, 4, "inferred"), R("running", 4, None, "inferred")]
    setup = only(tl, "worker", "setup")
    assert plain(setup.attrs) == {
        "cycle": 0,
        "start_from": "first_seen",
        "end_from": "all_containers_started",
    }
    # Each bound names the observation that proves it, one of the interval's evidence.
    assert {setup.attrs["start_evidence"], setup.attrs["end_evidence"]} <= set(setup.evidence)
    # The log lines and the syncPod span describe the same phase: one interval, evidence from both.
    assert len(setup.evidence) == 5
    assert rows(tl, "api") == API_START
    assert [iv.attrs["ready"] for iv in tl.lane("api") if iv.state == "running"] == [False, True]
    assert rows(tl, "container:app") == [R("waiting", 2, 4), R("running", 4, None)]
    assert tl.lane("container:app")[0].attrs["reason"] == "ContainerCreating"
    assert rows(tl, "condition:Ready") == [R("false", 2, 5), R("true", 5, None)]
    assert rows(tl, "condition:PodReadyToStartContainers") == [R("false", 2, 3), R("true", 3, None)]
    assert list(tl.lanes) == [
        "worker",
        "api",
        "container:app",
        "condition:PodScheduled",
        "condition:PodReadyToStartContainers",
        "condition:Initialized",
        "condition:ContainersReady",
        "condition:Ready",
    ]
    assert [(m.at, m.kind, m.reason) for m in tl.markers] == [
        (t(1.0), "event", "Scheduled"),
        (t(3.5), "event", "Pulled"),
        (t(4.0), "event", "Started"),
    ]
    assert tl.findings == ()
    assert (tl.namespace, tl.name, tl.node, tl.static, tl.phase) == (
        "default",
        "web-1",
        "node-a",
        False,
        "Running",
    )


def test_graceful_delete_has_observed_termination_phases() -> None:
    tl = derive("graceful_delete")
    assert rows(tl, "worker") == [
        R("setup", 1.1, 4, "inferred"),
        R("running", 4, 20.45, "inferred"),
        R("terminating", 20.45, 23.2015),
        R("cleanup", 23.2015, 23.6005),
    ]
    term = only(tl, "worker", "terminating")
    assert plain(term.attrs) == {
        "cycle": 0,
        "start_from": "termination_requested",
        "end_from": "containers_terminated",
        "cause": "deletion",
        "grace_seconds": 30,
    }
    assert only(tl, "worker", "cleanup").attrs["end_from"] == "worker_done"
    assert rows(tl, "api") == [
        *API_START[:4],
        R("running", 5, 20),
        R("terminating", 20, 23),  # deletionTimestamp 50 minus 30 s grace = the request time
        R("succeeded", 23, 23.9),  # when the last container finished, not when the watch said so
        R("deleted", 23.9, 23.9),
    ]
    assert rows(tl, "container:app") == [R("waiting", 2, 4), R("running", 4, 23), R("terminated", 23, 23.9)]
    assert tl.lane("container:app")[-1].attrs == {
        "kind": "regular",
        "reason": "Completed",
        "exit_code": 0,
        "restart": 0,
    }
    assert rows(tl, "condition:Ready") == [R("false", 2, 5), R("true", 5, 21), R("false", 21, 23.9)]
    assert tl.deleted_at == t(23.9)
    assert [m.reason for m in tl.markers if m.kind == "kubelet"] == ["GracePeriod", "KillingContainer"]
    assert tl.findings == ()


def test_api_only_infers_the_worker_lane() -> None:
    tl = derive("api_only")
    assert rows(tl, "worker") == [
        R("setup", 1, 4, "inferred"),
        R("running", 4, 20, "inferred"),
        R("terminating", 20, 23, "inferred"),
        R("cleanup", 23, 23.9, "inferred"),
    ]
    assert only(tl, "worker", "setup").attrs["end_from"] == "all_containers_started"
    assert only(tl, "worker", "terminating").attrs["cause"] == "deletion"
    assert only(tl, "worker", "cleanup").attrs["end_from"] == "api:deleted"
    assert rows(tl, "api") == rows(derive("graceful_delete"), "api")
    assert tl.findings == ()


def test_delete_during_setup_skips_running() -> None:
    tl = derive("delete_during_setup")
    assert rows(tl, "worker") == [R("setup", 1.1, 6.45), R("terminating", 6.45, 6.9), R("cleanup", 6.9, 7.3)]
    assert rows(tl, "api") == [
        R("pending", 0, 1),
        R("scheduled", 1, 2),
        R("initializing", 2, 6),
        R("terminating", 6, 7.2),
        R("failed", 7.2, 7.5),
        R("deleted", 7.5, 7.5),
    ]
    for name in ("app", "sidecar"):
        assert rows(tl, f"container:{name}") == [R("waiting", 2, 7.2), R("terminated", 7.2, 7.5)]
    assert finding_rows(tl) == [F("killed_during_setup", "info", 6.45, 6.9)]
    assert tl.findings[0].message == (
        "Pod default/web-1 was asked to terminate (deletion) at 2024-06-07 06:54:46.450 UTC, 5.3s into setup, "
        "while 2 of 2 containers (app, sidecar) had not started yet."
    )
    assert tl.findings[0].attrs["not_started"] == ["app", "sidecar"]


def test_rejected_at_admission_goes_straight_to_cleanup() -> None:
    tl = derive("rejected_at_admission")
    # The worker was first seen terminating: no setup at all.
    assert rows(tl, "worker") == [R("terminating", 1.35, 1.3705), R("cleanup", 1.3705, 1.4505)]
    assert only(tl, "worker", "terminating").attrs["cause"] == "terminal_phase"
    assert only(tl, "worker", "terminating").attrs["start_from"] == "first_seen"
    assert rows(tl, "api") == [R("pending", 0, 1), R("scheduled", 1, 1.3), R("failed", 1.3, None)]
    assert only(tl, "api", "failed").attrs["reason"] == "OutOfcpu"
    assert finding_rows(tl) == [F("never_started", "warning", 1.2, 1.4505)]
    assert tl.findings[0].message.startswith(
        "Pod default/web-1 never started a container: it was rejected at admission (OutOfcpu: Pod was rejected: "
    )
    assert tl.findings[0].message.endswith("; it went straight to termination and cleanup.")


def test_orphaned_pod_from_kubelet_lines_only() -> None:
    tl = derive("orphaned")
    assert rows(tl, "worker") == [R("terminating", 0.501, 1.8005)]
    assert plain(only(tl, "worker", "terminating").attrs) == {
        "cycle": 0,
        "start_from": "termination_requested",
        "end_from": "orphan_containers_terminated",
        "cause": "orphaned",
        "grace_seconds": None,
    }
    assert tl.lane("api") == ()
    assert (tl.namespace, tl.name, tl.node, tl.phase, tl.deleted_at) == (
        "default",
        "web-old-1",
        "node-a",
        None,
        None,
    )
    assert tl.findings == ()


def test_static_pod_uid_reuse_gives_two_worker_cycles_and_two_incarnations() -> None:
    tl = derive("static_uid_reuse")
    assert tl.static is True
    assert rows(tl, "worker") == [
        R("setup", 0.1, 1, "inferred"),
        R("running", 1, 10, "inferred"),
        R("terminating", 10, 25),
        R("cleanup", 25, 26),
        R("setup", 27.1, 28, "inferred"),
        R("running", 28, None, "inferred"),
    ]
    assert [iv.attrs["cycle"] for iv in tl.lane("worker")] == [0, 0, 0, 0, 1, 1]
    assert rows(tl, "api") == [
        R("initializing", 0, 1),
        R("running", 1, 2),
        R("running", 2, 10),
        R("terminating", 10, 10.3),
        R("deleted", 10.3, 10.3),
        R("pending", 12, 12.6),
        R("scheduled", 12.6, 28),
        R("running", 28, None),
    ]
    assert rows(tl, "container:etcd") == [R("running", 1, 10.3), R("running", 28, None)]
    assert finding_rows(tl) == [F("uid_reuse", "warning", 12, None)]
    assert tl.findings[0].message == (
        "Static pod kube-system/etcd-node-a reused UID d1c4757bcb230bf06ab7e866b62132a1: a new pod object with "
        "the same UID was created at 2024-06-07 06:54:52 UTC after deletion of the old one began at "
        "2024-06-07 06:54:50 UTC, while the kubelet was still tearing the old one down."
    )


def test_crash_loop_draws_every_run_and_flags_it() -> None:
    tl = derive("crash_loop")
    assert rows(tl, "container:app") == [
        R("running", 2, 12),
        R("terminated", 12, 12.4),
        R("waiting", 12.4, 22),
        R("running", 22, 32),
        R("terminated", 32, 32.5),
        R("waiting", 32.5, 62),
        R("running", 62, 72),
        R("terminated", 72, 72.5),
        R("waiting", 72.5, None),
    ]
    assert [iv.attrs.get("restart") for iv in tl.lane("container:app") if iv.state == "running"] == [0, 1, 2]
    assert {iv.attrs["reason"] for iv in tl.lane("container:app") if iv.state == "waiting"} == {
        "CrashLoopBackOff"
    }
    assert rows(tl, "worker") == [R("setup", 0, 2, "inferred"), R("running", 2, None, "inferred")]
    assert finding_rows(tl) == [F("crash_loop", "warning", 12.4, None)]
    assert tl.findings[0].message == (
        "Container app of pod default/web-1 is crash looping: restarted 3 times within 10m00s and waiting in "
        "CrashLoopBackOff (seen 3 times); restartCount reached 3."
    )
    # One marker per event uid, with the latest count.
    backoff = [m for m in tl.markers if m.reason == "BackOff"]
    assert len(backoff) == 1 and backoff[0].attrs["count"] == 3 and backoff[0].at == t(72.5)


SHUTDOWN_WORKER = [
    R("setup", 1.1, 4, "inferred"),
    R("running", 4, 30.1, "inferred"),
    R("terminating", 30.1, 33.2),
    R("cleanup", 33.2, 33.5),
]


def test_node_shutdown_marked_failed() -> None:
    tl = derive("node_shutdown_failed")
    assert rows(tl, "worker") == SHUTDOWN_WORKER
    assert only(tl, "worker", "terminating").attrs["grace_seconds"] == 20
    assert rows(tl, "api") == [*API_START[:4], R("running", 5, 33), R("failed", 33, None)]
    assert rows(tl, "condition:DisruptionTarget") == [R("true", 30, None)]
    assert finding_rows(tl) == [F("node_shutdown", "info", 30.1, None)]
    assert tl.findings[0].attrs["phase_failed"] is True
    assert tl.findings[0].message == (
        "Pod default/web-1 was terminated by the graceful shutdown of node-a at 2024-06-07 06:55:10.100 UTC; "
        "its phase became Failed."
    )


def test_node_shutdown_left_running_is_the_122_regression() -> None:
    tl = derive("node_shutdown_not_failed")
    assert rows(tl, "worker") == SHUTDOWN_WORKER
    assert rows(tl, "api") == [*API_START[:4], R("running", 5, 33), R("running", 33, None)]
    assert finding_rows(tl) == [F("node_shutdown", "warning", 30.1, None)]
    assert tl.findings[0].attrs == {
        "phase_failed": False,
        "final_phase": "Running",
        "rejected": False,
        "signal": "status reason Terminated: Pod was terminated in response to imminent node shutdown.",
    }
    assert "its phase stayed Running, not Failed (the Kubernetes 1.22 regression)" in tl.findings[0].message


def test_stuck_terminating_is_measured_at_now() -> None:
    tl = derive("stuck_terminating")  # now defaults to the newest observation (200 s)
    assert rows(tl, "worker") == [
        R("setup", 1.1, 4, "inferred"),
        R("running", 4, 20.45, "inferred"),
        R("terminating", 20.45, None),
    ]
    assert rows(tl, "api")[-1] == R("terminating", 20, None)
    assert finding_rows(tl) == [
        F("grace_exceeded", "warning", 20.45, 65),
        F("stuck_terminating", "critical", 20.45, None),
    ]
    assert tl.findings[1].message == (
        "Pod default/web-1 has been terminating for 2m59s (since 2024-06-07 06:55:00.450 UTC), past its "
        "30.0s grace period plus 60.0s slack."
    )
    early = derive("stuck_terminating", now=t(100))
    assert [f.kind for f in early.findings] == ["grace_exceeded"]
    lenient = derive("stuck_terminating", thresholds=Thresholds(stuck_terminating_slack=timedelta(hours=1)))
    assert [f.kind for f in lenient.findings] == ["grace_exceeded"]
    # The lanes never depend on `now`.
    assert early.lanes == tl.lanes


@pytest.mark.parametrize("name", sorted(scenarios.ALL_SCENARIOS))
def test_json_round_trip(name: str) -> None:
    tl = derive(name)
    data = schema.to_builtins(schema.write_timeline(tl, "prod-eu"))
    assert schema.read_timeline(data) == tl
    assert data["schema"] == "podlife.timeline/v2" and data["cluster"] == "prod-eu"
    assert set(data) >= {"schema", "cluster", "pod", "lanes", "markers", "findings"}
    assert set(data["pod"]) >= {"uid", "namespace", "name", "node"}
    assert {"worker", "api"} <= set(data["lanes"])
    for items in data["lanes"].values():
        for item in items:
            assert set(item) >= {"state", "start", "end", "source", "attrs"}
            assert len(item["start"]) == len("2024-06-07T06:54:47.000000+00:00")
    for m in data["markers"]:
        assert set(m) >= {"at", "kind", "reason", "message"}
    for f in data["findings"]:
        assert set(f) >= {"kind", "severity", "message", "start", "end"}
