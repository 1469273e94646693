"""What each pod-worker event says about the worker's phase (issue #38: `worker._worker_mark`, survivors of
sample fresh-1209a).

The table is the kubelet's pod worker as its source states it (pkg/kubelet/pod_workers.go, kubelet.go,
status_manager.go; k8s-facts §1): which phase a line or span end shows the worker in (sync = SyncPod,
terminating = SyncTerminatingPod, cleanup = SyncTerminatedPod, done), whether the phase began at that
instant, whose word it is (the worker's own V4 line or span: observed; a V0–V3 line of another component:
kubelet), why a termination began, and the flags a phase's bounds read (setup only, cleanup ran, failed).
Each event is SYNTHETIC: a worker event with the parser's payload for that message (docs/observations.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.lifecycle.factories import t
from timelines.lifecycle.facts import WorkerEvent
from timelines.lifecycle.observation import TerminationCause as C
from timelines.lifecycle.observation import Transition as T
from timelines.lifecycle.worker import (
    CLEANUP,
    DONE,
    RELIST_WINDOW,
    SYNC,
    TERMINATING,
    Mark,
    _may_be_relist,
    _worker_mark,
)

OBS, KUB = "observed", "kubelet"

# (event name, payload) -> (state, begins, grade, cause, setup_only, cleanup_ran, failed)
TABLE: list[tuple[str, dict[str, Any], tuple[int, bool, str, str | None, bool, bool, bool]]] = [
    # "Pod is being synced for the first time": the worker's first SyncPod
    (T.FIRST_SEEN, {}, (SYNC, True, OBS, None, False, False, False)),
    (T.SYNC_ENTER, {}, (SYNC, False, OBS, None, False, False, False)),
    (T.SYNC_EXIT, {"is_terminal": False}, (SYNC, False, OBS, None, False, False, False)),
    (T.POD_TERMINAL, {}, (SYNC, False, OBS, None, False, False, False)),
    # "Pod cannot start yet": SyncPod returned before every container started
    (T.CANNOT_START_YET, {}, (SYNC, False, OBS, None, True, False, False)),
    # "Pod is being removed by the kubelet, begin teardown" / "Pod terminating ... begin teardown"
    (
        T.TERMINATION_REQUESTED,
        {"cause": C.DELETION},
        (TERMINATING, True, OBS, C.DELETION, False, False, False),
    ),
    (T.TERMINATION_REQUESTED, {"cause": C.EVICTED}, (TERMINATING, True, OBS, C.EVICTED, False, False, False)),
    # "Pod indicated lifecycle completed naturally and should now terminate"
    (T.COMPLETED_NATURALLY, {}, (TERMINATING, True, OBS, C.TERMINAL_PHASE, False, False, False)),
    # "Cancelling current pod sync": the update that cancels it is a termination, unless it is for other work
    (T.CANCELLING_SYNC, {}, (TERMINATING, True, KUB, None, False, False, False)),
    (T.CANCELLING_SYNC, {"work_type": "terminating"}, (TERMINATING, True, KUB, None, False, False, False)),
    # SyncKnownPods on a runtime pod the config no longer has
    (
        T.ORPHANED,
        {"message": "Pod is orphaned and still running, began terminating"},
        (TERMINATING, True, OBS, C.ORPHANED, False, False, False),
    ),
    (
        T.ORPHANED,
        {"message": "Pod is orphaned and has not been started"},
        (DONE, False, OBS, None, False, False, False),
    ),
    (
        T.ORPHANED,
        {"message": "Pod is orphaned and still terminating, notified the pod worker"},
        (TERMINATING, False, OBS, None, False, False, False),
    ),
    (T.OBSERVED_TERMINATE, {}, (TERMINATING, False, OBS, None, False, False, False)),
    (T.TERMINATING_ENTER, {}, (TERMINATING, False, OBS, None, False, False, False)),
    (T.TERMINATING_EXIT, {}, (TERMINATING, False, OBS, None, False, False, False)),
    (T.TERMINATING_RUNTIME_ENTER, {}, (TERMINATING, False, OBS, None, False, False, False)),
    (T.TERMINATING_RUNTIME_EXIT, {}, (TERMINATING, False, OBS, None, False, False, False)),
    (T.CANNOT_START_EVER, {}, (TERMINATING, False, OBS, None, False, False, False)),
    # "Pod terminated all containers successfully": completeTerminating, SyncTerminatedPod is next
    (T.CONTAINERS_TERMINATED, {}, (CLEANUP, True, OBS, None, False, False, False)),
    # an orphaned runtime pod has no SyncTerminatedPod: its worker is done once its containers are
    (T.ORPHAN_CONTAINERS_TERMINATED, {}, (DONE, True, OBS, None, False, False, False)),
    (T.TERMINATED_ENTER, {}, (CLEANUP, False, OBS, None, False, False, False)),
    (T.TERMINATED_EXIT, {}, (CLEANUP, False, OBS, None, False, False, False)),
    (
        T.WORKER_DONE,
        {"message": "Pod is complete and the worker can now stop"},
        (DONE, True, OBS, None, False, True, False),
    ),
    # 1.23-1.26: the worker of a pod that never started stops without SyncTerminatedPod
    (
        T.WORKER_DONE,
        {"message": "Pod never started and the worker can now stop"},
        (DONE, True, OBS, None, False, False, False),
    ),
    (T.WORKER_STOPPED, {}, (DONE, True, KUB, None, False, False, False)),
    (T.FORGOTTEN, {}, (DONE, False, OBS, None, False, False, False)),
    (T.UID_REUSE_RESTART, {}, (DONE, False, OBS, None, False, False, False)),
    (T.FINISHED_IGNORED, {}, (DONE, False, OBS, None, False, False, False)),
    # "Pending update already queued": the queued work names the phase the worker is in
    (T.PENDING_UPDATE, {"work_type": "sync"}, (SYNC, False, OBS, None, False, False, False)),
    (T.PENDING_UPDATE, {"work_type": "terminating"}, (TERMINATING, False, OBS, None, False, False, False)),
    (T.PENDING_UPDATE, {"work_type": "terminated"}, (CLEANUP, False, OBS, None, False, False, False)),
    # the worker's spans (1.27+ tracing): a create's syncPod begins setup, an update's does not
    ("span:syncPod:start", {"update_type": "create"}, (SYNC, True, OBS, None, False, False, False)),
    ("span:syncPod:start", {"update_type": "update"}, (SYNC, False, OBS, None, False, False, False)),
    ("span:syncPod:end", {}, (SYNC, False, OBS, None, False, False, False)),
    ("span:syncPod:end", {"error": "rpc error"}, (SYNC, False, OBS, None, False, False, True)),
    ("span:syncTerminatingPod:start", {}, (TERMINATING, True, OBS, None, False, False, False)),
    ("span:syncTerminatingPod:end", {}, (CLEANUP, True, OBS, None, False, False, False)),
    (
        "span:syncTerminatingPod:end",
        {"error": "rpc error"},
        (TERMINATING, False, OBS, None, False, False, False),
    ),
    ("span:syncTerminatedPod:start", {}, (CLEANUP, True, OBS, None, False, False, False)),
    ("span:syncTerminatedPod:end", {}, (DONE, True, OBS, None, False, True, False)),
    ("span:syncTerminatedPod:end", {"error": "rpc error"}, (CLEANUP, False, OBS, None, False, False, False)),
    # V2 SyncLoop lines (the config source's word, not the worker's)
    (T.SYNCLOOP_ADD, {}, (SYNC, True, KUB, None, False, False, False)),
    (T.SYNCLOOP_DELETE, {}, (TERMINATING, True, KUB, C.DELETION, False, False, False)),
    (T.SYNCLOOP_REMOVE, {"config_source": "api"}, (DONE, True, KUB, None, False, False, False)),
    # a static pod's manifest gone: HandlePodRemoves kills it, its only termination request
    (T.SYNCLOOP_REMOVE, {"config_source": "file"}, (TERMINATING, True, KUB, C.REMOVED, False, False, False)),
    (T.SYNCLOOP_REMOVE, {"config_source": "http"}, (TERMINATING, True, KUB, C.REMOVED, False, False, False)),
    (T.CONTAINER_STARTED, {}, (SYNC, False, KUB, None, False, False, False)),
    (T.STARTUP_OBSERVED, {}, (SYNC, False, KUB, None, False, False, False)),
    (T.RUNNING_MARKED, {}, (SYNC, False, KUB, None, False, False, False)),
    # the status manager delays a deleted pod's deletion while its local phase is not terminal
    (T.DELETION_DELAYED, {"local_phase": "Running"}, (TERMINATING, False, KUB, None, False, False, False)),
    (T.DELETION_DELAYED, {"local_phase": "Pending"}, (TERMINATING, False, KUB, None, False, False, False)),
    (T.DELETION_DELAYED, {"local_phase": "Succeeded"}, (CLEANUP, False, KUB, None, False, False, False)),
    (T.DELETION_DELAYED, {"local_phase": "Failed"}, (CLEANUP, False, KUB, None, False, False, False)),
    (T.TERMINATION_FINISHED, {}, (DONE, True, KUB, None, False, True, False)),
    (T.REMOVED_FROM_ETCD, {}, (DONE, True, KUB, None, False, False, False)),
]

# Events that say nothing of the worker's phase.
SILENT: list[tuple[str, dict[str, Any]]] = [
    (T.CANCELLING_SYNC, {"work_type": "sync"}),  # a sync cancelled for another sync
    (T.PENDING_UPDATE, {}),  # no work type: which phase is unknown
    (T.PENDING_UPDATE, {"work_type": "other"}),
    (T.DELETION_DELAYED, {}),  # no local phase
    (T.DELETION_DELAYED, {"local_phase": "Unknown"}),
    (T.SYNCLOOP_UPDATE, {}),
    (T.SYNC_ERROR, {}),
    ("span:somethingElse:start", {}),
]


def _event(name: str, payload: dict[str, Any]) -> WorkerEvent:
    return WorkerEvent(t(5.5), name, f"worker:{name}", {"pid": 4321, **payload}, "node-a")


@pytest.mark.parametrize(("name", "payload", "expected"), TABLE, ids=[f"{n}-{p}" for n, p, _ in TABLE])
def test_each_worker_event_marks_the_phase_the_kubelet_source_says(
    name: str, payload: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    mark = _worker_mark(_event(name, payload), {})
    assert mark is not None
    got = (mark.state, mark.begins, mark.grade, mark.cause, mark.setup_only, mark.cleanup_ran, mark.failed)
    assert got == expected
    # the mark is the event's: its time, its name, its key and its kubelet process
    assert (mark.at, mark.name, mark.key, mark.pid) == (t(5.5), name, f"worker:{name}", 4321)


@pytest.mark.parametrize(("name", "payload"), SILENT, ids=[f"{n}-{p}" for n, p in SILENT])
def test_events_that_say_nothing_of_the_phase_make_no_mark(name: str, payload: dict[str, Any]) -> None:
    assert _worker_mark(_event(name, payload), {}) is None


def test_a_first_sync_of_a_pod_whose_first_work_was_termination_begins_terminating() -> None:
    """ "Pod is being synced for the first time" is written for any first work: a pod the kubelet first
    meets already deleted goes straight to SyncTerminatingPod, so its first sight begins the phase the
    worker's first work was (``first_work``), not setup."""
    event = _event(T.FIRST_SEEN, {})
    mark = _worker_mark(event, {event.key: TERMINATING})
    assert mark is not None and (mark.state, mark.begins) == (TERMINATING, True)


def test_a_termination_carries_the_grace_its_line_gives_and_only_a_whole_number() -> None:
    """The grace period a termination line states (gracePeriod=N) travels with its mark; anything that is
    not a whole number of seconds is no grace."""
    marks = [
        _worker_mark(_event(T.TERMINATION_REQUESTED, p), {})
        for p in ({"grace_period": 30}, {"grace_period": "30"}, {"cause": 7})
    ]
    assert [(m.grace, m.cause) if m else None for m in marks] == [(30, None), (None, None), (None, None)]


# ------------------------------------------------------------------ a kubelet's initial list (re-list)

START = t(
    100.0
)  # a kubelet process's start (its "Kubelet version" line, or its first line after another's last)


def _relist(
    at_s: float, pid: int | None, starts: dict[Any, Any], lines: dict[Any, Any], firsts: dict[Any, Any]
):
    mark = Mark(t(at_s), SYNC, True, OBS, T.FIRST_SEEN, "worker:first", pid)
    return _may_be_relist(mark, "node-a", starts, lines, firsts)


@pytest.mark.parametrize(
    ("at_s", "expected"),
    [
        (
            100.0 - 60.0,
            True,
        ),  # a minute before the start the process's first line dates (kubelet.go, to the minute)
        (100.0 - 60.000001, False),
        (100.0, True),
        (100.0 + 120.0, True),  # RELIST_WINDOW after the start: a large node's initial list takes that long
        (100.0 + 120.000001, False),
    ],
)
def test_a_first_sight_may_be_a_relist_only_near_its_own_kubelets_start(at_s: float, expected: bool) -> None:
    """A mark of a kubelet process whose start is known (its start line, or its first line after another
    process's last) may restate the pod in that kubelet's initial list only within a minute before to
    RELIST_WINDOW (2 minutes) after that start; the start is returned either way."""
    assert timedelta(minutes=2) == RELIST_WINDOW
    assert _relist(at_s, 4321, {("node-a", 4321): START}, {}, {}) == (expected, START)
    # another node's kubelet starting says nothing of this one
    assert _relist(at_s, 4321, {("node-b", 4321): START}, {}, {}) == (False, None)


def test_a_mark_without_a_process_may_be_a_relist_of_the_latest_start_near_it() -> None:
    """A line whose kubelet process is unknown (no pid, or a pid no process record has) may be in the
    initial list of any kubelet start on its node near it: the latest such start is the one it answers."""
    lines = {"node-a": [t(10.0), t(90.0), START, t(500.0)], "node-b": [t(150.0)]}
    assert _relist(150.0, None, {}, lines, {}) == (True, START)
    assert _relist(150.0, 777, {}, lines, {}) == (True, START)
    assert _relist(300.0, None, {}, lines, {}) == (False, None)  # no start within the window before it
    # its process known from its first line, without a start: the excerpt begins in that kubelet's life
    assert _relist(150.0, 777, {}, lines, {("node-a", 777): t(95.0)}) == (False, None)
