"""The API lane of a pod the collector first saw late (issue #38: `derive._api_incarnation`, survivors of
sample fresh-1209a).

A watch started after a short Job's pod finished, or a list after a collector's outage, shows the pod
first in a terminal phase: the states it went through are dated from what its status still says, as the
API server serves it (a container's state.running.startedAt / state.terminated.startedAt and
lastState.terminated.startedAt; PodStatus in k8s.io/api core/v1). Running began when the first regular
container started: init containers run before it (they are Initialized's), and a container's earlier
run (its lastState) started before its current one. Pods are hand-built (SYNTHETIC) with the shapes of
the collector's normalized status (tests/lifecycle/factories.py)."""

from __future__ import annotations

import pytest

from tests.lifecycle.factories import cond, ctr, last_terminated, pod, t
from timelines.lifecycle.derive import derive_pod_timeline

UID = "5d1c3a2b-0000-4c1e-9a7e-00000000a001"


def _api(obs) -> list[tuple[str, object]]:
    return [(iv.state, iv.start) for iv in derive_pod_timeline(obs).lane("api")]


@pytest.mark.parametrize(
    ("phase", "state", "exit_code"), [("Succeeded", "succeeded", 0), ("Failed", "failed", 2)]
)
def test_a_pod_first_seen_finished_ran_from_its_containers_start(
    phase: str, state: str, exit_code: int
) -> None:
    """GIVEN the only snapshot of a pod (seen at 60 s) already in phase Succeeded / Failed: created at 0,
    scheduled at 0.5, started by the kubelet at 1, its init container ran 1.2–2, its container ran 3–8
    THEN the API lane is pending 0, scheduled 0.5, initializing 1, running from 3 (the container's
    start, not the init container's), then the terminal phase from 8 (the container's finish)."""
    snap = pod(
        UID,
        7,
        60.0,
        phase=phase,
        start_time=1.0,
        conditions=[cond("PodScheduled", "True", 0.5)],
        containers=[
            ctr("init", "terminated", kind="init", started=1.2, finished=2.0, exit_code=0),
            ctr("app", "terminated", started=3.0, finished=8.0, exit_code=exit_code),
        ],
    )
    assert _api([snap]) == [
        ("pending", t(0.0)),
        ("scheduled", t(0.5)),
        ("initializing", t(1.0)),
        ("running", t(3.0)),
        (state, t(8.0)),
    ]


def test_a_pod_first_seen_running_ran_from_its_first_containers_earliest_run() -> None:
    """GIVEN the only snapshot of a running pod (seen at 60 s): one container restarted (its last run began
    at 4, its current one at 20), another started at 5 THEN running began at 4, not when it was seen."""
    snap = pod(
        UID,
        7,
        60.0,
        phase="Running",
        start_time=1.0,
        conditions=[cond("PodScheduled", "True", 0.5)],
        containers=[
            ctr("app", "running", started=20.0, restarts=1, last=last_terminated(4.0, 19.0)),
            ctr("worker", "running", started=5.0),
        ],
    )
    assert ("running", t(4.0)) in _api([snap])


def test_a_running_pod_whose_status_lists_no_started_container_runs_from_when_it_was_seen() -> None:
    """GIVEN a snapshot in phase Running whose container statuses give no start (the kubelet had not yet
    reported them) THEN the phase alone says it ran by then: running from the snapshot's time."""
    snap = pod(UID, 7, 60.0, phase="Running", start_time=1.0, containers=[ctr("app", "waiting")])
    assert ("running", t(60.0)) in _api([snap])


def test_a_finished_pod_whose_containers_never_started_did_not_run() -> None:
    """GIVEN a pod first seen Failed whose container never started (an image that never pulled, a
    rejected pod) THEN the API lane has no running state: it went from initializing to failed."""
    snap = pod(
        UID,
        7,
        60.0,
        phase="Failed",
        start_time=1.0,
        reason="Evicted",
        containers=[ctr("app", "waiting", reason="ImagePullBackOff")],
    )
    states = [s for s, _ in _api([snap])]
    assert "running" not in states and states[-1] == "failed"


def test_a_running_pod_is_not_ready_until_its_ready_condition_says_so() -> None:
    """GIVEN a pod seen Running at 10 s (its container started at 3 s) whose Ready condition turned True at
    8 s (a readiness probe's first success), and no earlier word on readiness THEN the API lane's running
    state is split: not ready from 3 s, ready from 8 s (a pod is not ready until the kubelet sets Ready:
    PodStatus conditions, k8s.io/api core/v1)."""
    snap = pod(
        UID,
        7,
        10.0,
        phase="Running",
        start_time=1.0,
        conditions=[cond("PodScheduled", "True", 0.5), cond("Ready", "True", 8.0)],
        containers=[ctr("app", "running", started=3.0, ready=True)],
    )
    lane = derive_pod_timeline([snap]).lane("api")
    assert [(iv.start, iv.attrs["ready"]) for iv in lane if iv.state == "running"] == [
        (t(3.0), False),
        (t(8.0), True),
    ]


def test_the_first_snapshot_to_show_a_terminal_phase_dates_it_and_gives_its_reason() -> None:
    """GIVEN a pod seen Failed at 10 s (its container finished at 9 s; reason DeadlineExceeded, the Job's
    activeDeadlineSeconds message) and seen again at 20 s with the same finish and (SYNTHETIC) a rewritten
    message THEN the failed state begins at 9 s with the first snapshot's reason and message, and cites
    both snapshots: a later report of the same instant adds its evidence, not its words."""
    done = [ctr("app", "terminated", reason="Error", started=2.0, finished=9.0, exit_code=137)]
    first = pod(
        UID,
        7,
        10.0,
        phase="Failed",
        start_time=1.0,
        reason="DeadlineExceeded",
        message="Pod was active on the node longer than the specified deadline",
        containers=done,
    )
    later = pod(
        UID,
        8,
        20.0,
        phase="Failed",
        start_time=1.0,
        reason="DeadlineExceeded",
        message="rewritten",
        containers=done,
    )
    (failed,) = [iv for iv in derive_pod_timeline([later, first]).lane("api") if iv.state == "failed"]
    assert failed.start == t(9.0)
    assert failed.attrs == {
        "reason": "DeadlineExceeded",
        "message": "Pod was active on the node longer than the specified deadline",
    }
    assert set(failed.evidence) == {first.dedupe_key, later.dedupe_key}
