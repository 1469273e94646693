"""The worker lane: what the kubelet's pod worker was doing, and when, from whatever evidence there is.

The pod worker (k8s-facts.md §1) goes ``sync`` (SyncPod) → ``terminating`` (SyncTerminatingPod) →
``terminated`` (SyncTerminatedPod) → done, one way. The lane draws ``setup`` → ``running`` (SyncPod split
where the pod's containers have all started) → ``terminating`` → ``cleanup``, from three kinds of
evidence, each graded:

* ``observed``: the worker's own V4 transitions and the kubelet's spans (exact);
* ``kubelet``: kubelet lines below V4 — SyncLoop ADD / DELETE / REMOVE, PLEG events, kills, the shutdown
  and eviction managers, the startup-latency tracker, the status manager (docs/kubelet-lines.md);
* ``inferred``: the API object (binding, containers' start and finish times, deletion, terminal phase).

Every piece of evidence either **begins** a state (the transition happened at that instant) or shows the
worker **in** a state at that instant. A state's start is known only from a begin; otherwise it began at
an unknown moment at or before its first evidence (``start_unknown``). When the next state's begin is not
in the evidence, the previous state ended at an unknown moment after its last evidence (``end_unknown``)
and the stretch between is drawn ``unknown``: a bound is never made up. Where several sources describe one
transition, the best grade wins (observed over kubelet over inferred); an API bound fills a boundary the
kubelet evidence leaves unknown only where it fits between the kubelet evidence on both sides.

Kubelet restarts: a new kubelet process re-syncs the pods it finds (``SyncLoop ADD`` of its initial list,
"Pod is being synced for the first time" again). Those lines restate a state, never begin one, so a
restart neither opens a new setup nor a new cycle; only a static pod whose UID really comes back (its
worker done, then set up again) starts a new cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from timelines.lifecycle.facts import (
    STATIC_UID,
    Incarnation,
    KubeletMarkerRecord,
    KubeletProcess,
    PodFacts,
    PodSnapshot,
    WorkerEvent,
    all_containers_started_at,
    first_run_start,
    snapshot_api_state,
)
from timelines.lifecycle.observation import TerminationCause, Transition
from timelines.lifecycle.record import record
from timelines.lifecycle.timeline import (
    WORKER_LANE,
    ApiState,
    Interval,
    IntervalSource,
    WorkerPhase,
    parse_time,
)

# Worker states of the state machine (SyncPod is one state; setup / running split it afterwards).
SYNC, TERMINATING, CLEANUP, DONE = 0, 2, 3, 4
PRESENT = -2  # the pod is known to the kubelet, in whatever state it was (a restarted kubelet's re-list)
STATE_NAMES = {SYNC: "sync", TERMINATING: WorkerPhase.TERMINATING, CLEANUP: WorkerPhase.CLEANUP, DONE: "done"}

OBSERVED: IntervalSource = "observed"
KUBELET: IntervalSource = "kubelet"
API: IntervalSource = "inferred"
GRADE_RANK = {OBSERVED: 0, KUBELET: 1, API: 2}

# Lines of one transition are logged within moments of each other (one goroutine): begins of the same
# state this close together describe one transition, and the best-graded one dates it.
SAME_TRANSITION = timedelta(seconds=1)
# A kubelet lists every pod it has right after it starts: an ADD / first sync this soon after the process
# started is its initial list, which restates what already existed unless the API says it is newer.
RELIST_WINDOW = timedelta(minutes=2)
# "Pod is being synced for the first time" is followed at once by the work the worker was given.
FIRST_WORK_WINDOW = timedelta(seconds=1)
# A kill line right after "Message for Container of pod" about that container restarts it (liveness
# probe, changed spec): not termination.
RESTART_KILL_WINDOW = timedelta(seconds=5)
# An API container start time (second precision) and the PLEG event of the same start.
PLEG_MATCH = timedelta(seconds=2)
_ZERO, _ONE_SECOND, _ONE_MINUTE = timedelta(0), timedelta(seconds=1), timedelta(minutes=1)  # made once


# Among begins of one transition with the same grade, the worker's own record of it dates it best.
_BEGIN_RANK = {
    Transition.FIRST_SEEN: 0,
    Transition.TERMINATION_REQUESTED: 0,
    Transition.COMPLETED_NATURALLY: 0,
    Transition.CONTAINERS_TERMINATED: 0,
    Transition.WORKER_DONE: 0,
    Transition.ORPHAN_CONTAINERS_TERMINATED: 0,
}


@record(frozen=True)
class Mark:
    """One piece of evidence about the worker's state."""

    at: datetime
    state: int  # SYNC, TERMINATING, CLEANUP or DONE
    begins: bool  # the transition into ``state`` happened at ``at``
    grade: IntervalSource
    name: str  # what it is (a transition name, a marker reason, "api:...")
    key: str
    pid: int | None = None
    cause: str | None = None
    grace: int | None = None
    setup_only: bool = False  # certainly before the containers all started ("Pod cannot start yet")
    cleanup_ran: bool = False  # a DONE logged as SyncTerminatedPod completing: cleanup ran until then
    failed: bool = False  # a sync's end that reports an error (the phase is retried)

    @property
    def kubelet_side(self) -> bool:
        return self.grade != API


@dataclass(slots=True)
class _Segment:
    state: int
    first: datetime
    last: datetime
    begin: Mark | None
    marks: list[Mark] = field(default_factory=list)

    @property
    def start(self) -> datetime:
        return self.begin.at if self.begin is not None else self.first


@record(frozen=True)
class RunningCandidate:
    """When the pod's containers had all started, by one source."""

    at: datetime
    grade: IntervalSource
    name: str
    key: str


@record(frozen=True)
class WorkerLane:
    """The lane and what findings need from it."""

    intervals: tuple[Interval, ...]
    # Kubelet evidence that came after the worker had moved past it: containers started after
    # termination began (the race #102344 closed), or a state restated out of order.
    late_starts: tuple[tuple[datetime, str, int], ...]  # (at, evidence key, cycle)
    first_seen_state: dict[int, int]  # cycle -> the state the worker was first seen in (when seen)
    restarts: tuple[datetime, ...]


# ------------------------------------------------------------------------------------------ evidence


# Config sources of static pods (a manifest file or URL): only the API source deletes pods gracefully.
_STATIC_SOURCES = frozenset({"file", "http"})


def _worker_mark(ev: WorkerEvent, first_work: Mapping[str, int]) -> Mark | None:
    """The mark a worker event (V4 line, V0–V3 line, or span end) gives, or None."""
    p = ev.payload
    name = ev.name
    pid = ev.pid
    cause = p.get("cause") if isinstance(p.get("cause"), str) else None
    grace = p.get("grace_period") if isinstance(p.get("grace_period"), int) else None

    def mk(state: int, begins: bool, grade: IntervalSource = OBSERVED, **kw: Any) -> Mark:
        return Mark(
            ev.at,
            state,
            begins,
            grade,
            name,
            ev.key,
            pid,
            kw.get("cause", cause),
            grace,
            kw.get("setup_only", False),
            kw.get("cleanup_ran", False),
            kw.get("failed", False),
        )

    T = Transition
    if name == T.FIRST_SEEN:
        state = first_work.get(ev.key, SYNC)
        return mk(state, True)
    if name in (T.SYNC_ENTER, T.SYNC_EXIT, T.POD_TERMINAL):
        return mk(SYNC, False)
    if name == T.CANNOT_START_YET:
        return mk(SYNC, False, setup_only=True)
    if name == T.TERMINATION_REQUESTED:
        return mk(TERMINATING, True)
    if name == T.COMPLETED_NATURALLY:
        return mk(TERMINATING, True, cause=TerminationCause.TERMINAL_PHASE)
    if name == T.CANCELLING_SYNC:
        work = p.get("work_type")
        if work in (None, "terminating"):
            return mk(TERMINATING, True, KUBELET)
        return None
    if name == T.ORPHANED:
        message = str(p.get("message") or "").lower()
        if "began terminating" in message:  # housekeeping set terminatingAt just now
            return mk(TERMINATING, True, cause=TerminationCause.ORPHANED)
        if "has not been started" in message:  # the worker shuts down without a sync
            return mk(DONE, False)
        return mk(TERMINATING, False)
    if name in (
        T.OBSERVED_TERMINATE,
        T.TERMINATING_ENTER,
        T.TERMINATING_EXIT,
        T.TERMINATING_RUNTIME_ENTER,
        T.TERMINATING_RUNTIME_EXIT,
        T.CANNOT_START_EVER,
    ):
        return mk(TERMINATING, False)
    if name == T.CONTAINERS_TERMINATED:
        return mk(CLEANUP, True)
    if name == T.ORPHAN_CONTAINERS_TERMINATED:
        return mk(DONE, True)
    if name in (T.TERMINATED_ENTER, T.TERMINATED_EXIT):
        return mk(CLEANUP, False)
    if name == T.WORKER_DONE:
        # "Pod is complete and the worker can now stop" follows a successful SyncTerminatedPod; "Pod
        # never started and the worker can now stop" (1.23-1.26) ran no cleanup.
        return mk(DONE, True, cleanup_ran="never started" not in str(p.get("message") or "").lower())
    if name == T.WORKER_STOPPED:
        return mk(DONE, True, KUBELET)
    if name in (T.FORGOTTEN, T.UID_REUSE_RESTART, T.FINISHED_IGNORED):
        return mk(DONE, False)
    if name == T.PENDING_UPDATE:
        work = {"sync": SYNC, "terminating": TERMINATING, "terminated": CLEANUP}.get(str(p.get("work_type")))
        return mk(work, False) if work is not None else None
    # spans
    if name == "span:syncPod:start":
        return mk(SYNC, p.get("update_type") == "create")
    if name == "span:syncPod:end":
        return mk(SYNC, False, failed=bool(p.get("error")))
    if name == "span:syncTerminatingPod:start":
        return mk(TERMINATING, True)
    if name == "span:syncTerminatingPod:end":
        # Without an error the worker marks the pod terminated as the span ends (completeTerminating):
        # cleanup begins there. With one, terminating is retried.
        return mk(CLEANUP, True) if not p.get("error") else mk(TERMINATING, False)
    if name == "span:syncTerminatedPod:start":
        return mk(CLEANUP, True)
    if name == "span:syncTerminatedPod:end":
        return mk(DONE, True, cleanup_ran=True) if not p.get("error") else mk(CLEANUP, False)
    # V0–V3 lines
    if name == T.SYNCLOOP_ADD:
        return mk(SYNC, True, KUBELET)
    if name == T.SYNCLOOP_DELETE:
        return mk(TERMINATING, True, KUBELET, cause=TerminationCause.DELETION)
    if name == T.SYNCLOOP_REMOVE:
        if p.get("config_source") in _STATIC_SOURCES:
            # A static pod's manifest is gone (its file, or its URL, no longer lists it): nothing else
            # ever asks the kubelet to stop it, so this is its termination request (HandlePodRemoves
            # kills the pod: "Killing unwanted pod" up to 1.21, a SyncPodKill update from 1.22).
            return mk(TERMINATING, True, KUBELET, cause=TerminationCause.REMOVED)
        return mk(DONE, True, KUBELET)  # re-read in _segments: before any termination, a force delete
    if name in (T.CONTAINER_STARTED, T.STARTUP_OBSERVED, T.RUNNING_MARKED):
        return mk(SYNC, False, KUBELET)
    if name == T.DELETION_DELAYED:
        # The status manager waits on a deleted pod (1.27+): while its local phase is still Running or
        # Pending the worker is still killing containers (terminating); a terminal one, they are gone.
        local = p.get("local_phase")  # the klog value unquoted by the parser: "Running", never '"Running"'
        if local in ("Running", "Pending"):
            return mk(TERMINATING, False, KUBELET)
        if local in ("Succeeded", "Failed"):
            return mk(CLEANUP, False, KUBELET)
        return None
    if name == T.TERMINATION_FINISHED:
        # The status manager saw SyncTerminatedPod complete (1.27+, V3): cleanup ended here.
        return mk(DONE, True, KUBELET, cleanup_ran=True)
    if name == T.REMOVED_FROM_ETCD:
        # The kubelet's own final DELETE of the API object, once its worker is done (read like REMOVE).
        return mk(DONE, True, KUBELET)
    return None


_MARKER_MARKS: dict[str, tuple[int, bool, IntervalSource, str | None]] = {
    "KillingContainer": (TERMINATING, False, KUBELET, None),
    "GracePeriod": (TERMINATING, False, OBSERVED, None),
    "ContainerState": (TERMINATING, False, OBSERVED, None),
    "ContainersStopped": (TERMINATING, False, OBSERVED, None),
    "OrphanKill": (TERMINATING, False, OBSERVED, None),
    "ShutdownKill": (TERMINATING, True, KUBELET, TerminationCause.REMOVED),
    "ShutdownKilled": (CLEANUP, True, KUBELET, None),
    "ShutdownKillFailed": (TERMINATING, False, KUBELET, None),
    "Evicting": (TERMINATING, True, KUBELET, TerminationCause.EVICTED),
    "Evicted": (CLEANUP, True, KUBELET, None),
    # The eviction manager polls every second until the worker is finished (ShouldPodBeFinished).
    "EvictionCleanedUp": (DONE, True, KUBELET, None),
    "EvictionFailed": (TERMINATING, False, KUBELET, None),
    "DeletedMustBeKilled": (TERMINATING, True, KUBELET, TerminationCause.REMOVED),
    "VolumesUnmounted": (CLEANUP, False, OBSERVED, None),
    "VolumePathsCleaned": (CLEANUP, False, KUBELET, None),
    "VolumesPending": (CLEANUP, False, KUBELET, None),
    "CgroupsRemoved": (CLEANUP, False, OBSERVED, None),
    "StatusFinal": (CLEANUP, False, OBSERVED, None),
    # The volume manager: a volume being set up for the pod (its containers wait for every volume), and
    # its volumes going once its containers are gone; the pod's directory removed when nothing of it is
    # left (not in the config, nothing running, no volume): the worker was done by then.
    "VolumeAttachVerify": (SYNC, False, KUBELET, None),
    "VolumeMountStarted": (SYNC, False, KUBELET, None),
    "VolumeMounted": (SYNC, False, KUBELET, None),
    "VolumeUnmountStarted": (CLEANUP, False, KUBELET, None),
    "VolumeTornDown": (CLEANUP, False, KUBELET, None),
    "PodVolumesDirCleaned": (DONE, False, KUBELET, None),
    # The device manager allocating the pod's devices: its admission, right after the ADD and before the
    # worker exists; the kubelet's handling of the pod has begun, its containers cannot have started.
    "DeviceAllocation": (SYNC, True, KUBELET, None),
}
# Volume lines of a pod's setup: a first attach check or mount of one of its volumes ("MountVolume.SetUp
# succeeded" is also what a remount of a running pod's secret logs at V4: no sign of setup).
_VOLUME_SETUP = frozenset({"VolumeAttachVerify", "VolumeMountStarted"})


def _marker_mark(m: KubeletMarkerRecord, restart_kill: bool) -> Mark | None:
    spec = _MARKER_MARKS.get(m.reason)
    if spec is None:
        return None
    if m.reason == "KillingContainer" and restart_kill:
        return None
    state, begins, grade, cause = spec
    grace = m.payload.get("grace_period")
    return Mark(
        m.at,
        state,
        begins,
        grade,
        m.reason,
        m.key,
        m.pid,
        cause,
        grace if isinstance(grace, int) and not isinstance(grace, bool) else None,
    )


def _restart_kills(markers: Sequence[KubeletMarkerRecord]) -> set[str]:
    """Kill lines that restart a container ("Message for Container of pod" just before, same container)."""
    reasons = [m for m in markers if m.reason == "ContainerRestart"]
    out: set[str] = set()
    for m in markers:
        if m.reason != "KillingContainer" or m.payload.get("override"):
            continue
        container = m.payload.get("container")
        if any(
            r.payload.get("container") == container and _ZERO <= m.at - r.at <= RESTART_KILL_WINDOW
            for r in reasons
        ):
            out.add(m.key)
    return out


def _first_work(events: Sequence[WorkerEvent]) -> dict[str, int]:
    """For each "Pod is being synced for the first time", the state of the work it was given at once:
    the next pending update's work type, a teardown begun in the same breath, or "finished" (≤1.26
    kubelets mark a pod they first see terminal and stopped as finished outright)."""
    out: dict[str, int] = {}
    for i, ev in enumerate(events):
        if ev.name != Transition.FIRST_SEEN:
            continue
        for nxt in events[i + 1 :]:
            if nxt.at - ev.at > FIRST_WORK_WINDOW:
                break
            if nxt.pid != ev.pid or nxt.name == Transition.FIRST_SEEN:
                continue
            if nxt.name == Transition.PENDING_UPDATE:
                work = nxt.payload.get("work_type")
                out[ev.key] = {"terminating": TERMINATING, "terminated": CLEANUP}.get(str(work), SYNC)
                break
            if nxt.name in (Transition.TERMINATION_REQUESTED, Transition.CANNOT_START_EVER):
                out[ev.key] = TERMINATING
                break
            if nxt.name == Transition.FINISHED_IGNORED:
                out[ev.key] = DONE
                break
            if nxt.name in (Transition.SYNC_ENTER, "span:syncPod:start"):
                break
    return out


def process_starts(processes: Iterable[KubeletProcess]) -> dict[tuple[str | None, int], datetime]:
    """When each kubelet process (node, pid) started: its start line, else (when an earlier process of
    that node was seen before its first line) the end of the first minute it logged in, the latest its
    first line can be (so a re-list shortly after it is never taken for a pod's first sight)."""
    by_node: dict[str | None, list[KubeletProcess]] = {}
    for p in processes:
        if p.pid is not None:
            by_node.setdefault(p.node, []).append(p)
    out: dict[tuple[str | None, int], datetime] = {}
    for node, procs in by_node.items():
        firsts: dict[int, datetime] = {}
        first_ends: dict[int, datetime] = {}
        lasts: dict[int, datetime] = {}
        for p in procs:
            assert p.pid is not None
            if p.first_at <= firsts.get(p.pid, p.first_at):
                firsts[p.pid] = p.first_at
                first_ends[p.pid] = p.first_at + min(p.last_at - p.first_at, _ONE_MINUTE)
            lasts[p.pid] = max(lasts.get(p.pid, p.last_at), p.last_at)
            if p.started_at is not None:
                out[(node, p.pid)] = min(out.get((node, p.pid), p.started_at), p.started_at)
        for pid, first in firsts.items():
            if (node, pid) in out:
                continue
            if any(other != pid and lasts[other] <= first for other in firsts):
                out[(node, pid)] = first_ends[pid]
    return out


def start_lines(processes: Iterable[KubeletProcess]) -> dict[str | None, list[datetime]]:
    """Every kubelet start the logs show per node: start lines, and a pid's first line after another
    pid's last (``process_starts``)."""
    procs = list(processes)
    out: dict[str | None, set[datetime]] = {}
    for p in procs:
        out.setdefault(p.node, set()).update(p.starts or ((p.started_at,) if p.started_at else ()))
    for (node, _), at in process_starts(procs).items():
        out.setdefault(node, set()).add(at)
    return {node: sorted(times) for node, times in out.items()}


def restart_times(processes: Iterable[KubeletProcess]) -> tuple[datetime, ...]:
    """Moments a new kubelet process started on the pod's node(s), when the logs show one."""
    procs = list(processes)
    earliest: dict[str | None, datetime] = {}
    for p in procs:
        earliest[p.node] = min(earliest.get(p.node, p.first_at), p.first_at)
    # A start counts as a restart when the log shows the node's kubelet before it (else it may be a boot),
    # or when a pod status it rewrote from scratch says so.
    known = {at for p in procs if p.restart for at in (p.starts or ((p.started_at,) if p.started_at else ()))}
    return tuple(
        sorted(
            {at for node, times in start_lines(procs).items() for at in times if earliest.get(node, at) < at}
            | known
        )
    )


def first_lines(processes: Iterable[KubeletProcess]) -> dict[tuple[str | None, int | None], datetime]:
    """The latest moment each kubelet process (node, pid; pid None: lines without one) is known to have
    been logging by: the end of the first minute the logs show it in."""
    out: dict[tuple[str | None, int | None], datetime] = {}
    for p in processes:
        key = (p.node, p.pid)
        by = p.first_at + min(p.last_at - p.first_at, _ONE_MINUTE)
        out[key] = min(out.get(key, by), by)
    return out


def _may_be_relist(
    mark: Mark,
    node: str | None,
    starts: Mapping[tuple[str | None, int], datetime],
    lines: Mapping[str | None, Sequence[datetime]],
    firsts: Mapping[tuple[str | None, int | None], datetime],
) -> tuple[bool, datetime | None]:
    """Whether the mark may lie in a kubelet's initial list (it restates pods the kubelet found when it
    started), and that kubelet's start when known.

    A kubelet lists every pod it has right after it starts. That is only a possibility when the evidence
    shows a kubelet start within ``RELIST_WINDOW`` before the mark: a start line, or a new process's first
    line after another's last (whose start is known to the minute, so up to a minute after the mark). An
    excerpt that merely begins shortly before the mark shows no start: its first sight is taken for what
    it says (a `SyncLoop ADD` begins setup)."""

    def near(start: datetime) -> bool:
        return -_ONE_MINUTE <= mark.at - start <= RELIST_WINDOW

    if mark.pid is not None and (node, mark.pid) in starts:
        start = starts[(node, mark.pid)]
        return near(start), start
    close = [at for at in lines.get(node, ()) if near(at)]
    if close and (mark.pid is None or (node, mark.pid) not in firsts):
        return True, max(close)
    return False, None


def kubelet_marks(facts: PodFacts) -> list[Mark]:
    """The kubelet-side marks (observed and kubelet grades) of a pod, time-ordered."""
    events = list(facts.worker_events)
    first_work = _first_work(events)
    starts = process_starts(facts.processes)
    lines = start_lines(facts.processes)
    firsts = first_lines(facts.processes)
    created = [inc.created for inc in facts.incarnations if inc.created is not None]
    # startTime is set by the kubelet that first synced the pod (RFC 3339 seconds, so up to 1 s early):
    # one a restarted kubelet did not rewrite says when the pod was first acknowledged on its node.
    acknowledged = [
        s.start_time + _ONE_SECOND for s in facts.snapshots if s.start_time is not None and not s.status_reset
    ]
    restart_kills = _restart_kills(facts.kubelet_markers)
    # Finalizers keep a deleted object after the kubelet's final delete: its REMOVE comes when they are
    # gone, so it dates nothing of the worker (only that it was done by then).
    finalized = any(s.finalizers and s.deletion_timestamp is not None for s in facts.snapshots)
    marks: list[Mark] = []
    for ev in events:
        mark = _worker_mark(ev, first_work)
        if mark is None:
            continue
        if finalized and mark.name == Transition.SYNCLOOP_REMOVE and mark.begins:
            mark = _restate(mark)
        # A new kubelet's initial list comes as ADDs (SyncPodCreate): a first sync caused by an update, a
        # deletion or a kill (1.27+ logs its updateType) is never a re-list.
        relist_kind = ev.payload.get("update_type") in (None, "create")
        if (
            relist_kind
            and mark.begins
            and mark.name
            in (
                Transition.FIRST_SEEN,
                Transition.SYNCLOOP_ADD,
                "span:syncPod:start",
            )
        ):
            # A new kubelet's initial list restates pods it found, unless the API says the pod is newer
            # (created, or first acknowledged by a kubelet, after it started).
            relist, start = _may_be_relist(mark, ev.node, starts, lines, firsts)
            newer = start is not None and (
                (created and min(created) >= start) or (acknowledged and min(acknowledged) >= start)
            )
            if relist and not newer:
                # A re-list: the pod still exists for the new kubelet, in whatever state it was.
                mark = _presence(mark) if mark.name == Transition.SYNCLOOP_ADD else _restate(mark)
        marks.append(mark)
    mounted = [(m.at, m.payload.get("volume")) for m in facts.kubelet_markers if m.reason == "VolumeMounted"]
    for m in facts.kubelet_markers:
        mark = _marker_mark(m, m.key in restart_kills)
        if mark is None:
            continue
        if m.reason == "DeviceAllocation":
            # No re-list here: a new kubelet re-admits every pod it finds, but the device manager's
            # checkpoint keeps what it had allocated, so "Need devices to allocate" means devices the pod
            # never got (devicesToAllocate returns early for allocated ones).
            if not any(ev.at >= m.at and ev.name in _WORKER_SIGHT for ev in events):
                # Admission not seen to finish (it hands the pod to its worker, which never shows):
                # setup goes on, the containers cannot have started.
                mark = replace(mark, setup_only=True)
        elif m.reason in _VOLUME_SETUP:
            if _may_be_relist(mark, m.node, starts, lines, firsts)[0]:
                # A new kubelet checks every volume of every pod it finds: presence, not setup.
                mark = _presence(mark)
            elif m.reason == "VolumeMountStarted" and not any(
                at >= m.at and volume == m.payload.get("volume") for at, volume in mounted
            ):
                # A mount begun and not seen to succeed: the containers still wait for it (setup goes on,
                # like a first sync that has not returned).
                mark = replace(mark, setup_only=True)
        marks.append(mark)
    marks.extend(_eviction_ranked(facts, marks))
    marks.extend(_containers_stopped(facts, marks))
    marks = _all_died(facts, marks)
    marks = _not_admitted(facts, marks)
    marks.sort(key=_mark_order)
    return _removed_while_running(marks)


def bare_container_id(value: object) -> str:
    """A container ID without its runtime: kill lines say ``containerd://62e0…``, PLEG lines ``62e0…``; ""
    for none."""
    return str(value or "").split("://")[-1]


def _removed_while_running(marks: list[Mark]) -> list[Mark]:
    """An API REMOVE after which the kubelet still kills the pod's containers (the next line of the pod
    that is not a config line is a kill) did not come after the worker's end: the object went while its
    containers ran (a deletion that did not wait for them), and the REMOVE path kills them. It is a
    termination request (cause removed), folded into one already under way."""
    out = list(marks)
    for i, m in enumerate(out):
        if m.name != Transition.SYNCLOOP_REMOVE or m.state != DONE or not m.begins:
            continue
        nxt = next((o for o in out[i + 1 :] if o.kubelet_side and o.name not in _CONFIG_LINES), None)
        if nxt is not None and nxt.state == TERMINATING and nxt.name in _KILLS:
            out[i] = Mark(m.at, TERMINATING, True, m.grade, m.name, m.key, m.pid, TerminationCause.REMOVED)
    return out


# The pod worker's first lines of a pod (admission is done once they show).
_WORKER_SIGHT = frozenset({Transition.FIRST_SEEN, Transition.SYNC_ENTER, "span:syncPod:start"})
# Lines of a container being killed.
_KILLS = frozenset({"KillingContainer", "OrphanKill"})


def _not_admitted(facts: PodFacts, marks: list[Mark]) -> list[Mark]:
    """SyncLoop lines about a pod the kubelet never gave a worker (rejected at admission) begin nothing.

    The kubelet admits a pod in HandlePodAdditions, between the ADD and the pod worker's first sync: an
    ADD followed by "Pod admission denied" (1.31+), or, in a log at V4 (where a worker's first sync is
    always logged), by no "being synced for the first time" within a second, was rejected. And a DELETE
    the worker first sees as already terminated or finished (the controller deleting the Failed pod)
    begins no termination either: the worker's first sight dates its life."""
    v4 = any(m.grade == OBSERVED for m in marks)
    firsts = [ev for ev in facts.worker_events if ev.name == Transition.FIRST_SEEN]
    denied = [m.at for m in facts.kubelet_markers if m.reason == "AdmissionRejected"]
    first_states = {m.key: m.state for m in marks if m.name == Transition.FIRST_SEEN}
    out = []
    for m in marks:
        if m.name == Transition.SYNCLOOP_ADD and m.begins:
            if any(_ZERO <= d - m.at <= SAME_TRANSITION for d in denied):
                continue
            if v4 and not any(_ZERO <= f.at - m.at <= SAME_TRANSITION for f in firsts):
                continue
        if m.name in (Transition.SYNCLOOP_DELETE, Transition.SYNCLOOP_REMOVE) and any(
            d <= m.at for d in denied
        ):
            # The controller deleting a pod admission rejected: no worker had it to terminate (1.27+
            # gives it one first seen terminated, ≤1.26 marks it finished at once).
            continue
        if m.name in (Transition.SYNCLOOP_DELETE, Transition.SYNCLOOP_ADD) and m.begins:
            later = [first_states.get(f.key, SYNC) for f in firsts if _ZERO <= f.at - m.at <= SAME_TRANSITION]
            if any(state > m.state for state in later):
                continue
        out.append(m)
    return out


# Config lines that open a door to termination, unless the pod's containers had already ended it.
_CONFIG_DOORS = frozenset({Transition.SYNCLOOP_DELETE, Transition.SYNCLOOP_REMOVE})


def _all_died(facts: PodFacts, marks: list[Mark]) -> list[Mark]:
    """Every container and sandbox PLEG saw start has died, and nothing started again: the worker tore
    the pod down (the sandbox goes last, in SyncTerminatingPod), whatever the log says after.

    Without a kill line before it (a RestartNever pod that completed: door 2, which has no line below
    V4), cleanup began about then (kubelet grade), and a later SyncLoop DELETE or REMOVE (the Job
    controller deleting the finished pod) is no termination request: it is dropped as a mark."""
    started: dict[str, datetime] = {}
    died: dict[str, datetime] = {}
    for ev in facts.worker_events:
        cid = bare_container_id(ev.payload.get("container_id"))
        if not cid:
            continue
        if ev.name == Transition.CONTAINER_STARTED:
            started[cid] = max(started.get(cid, ev.at), ev.at)
        elif ev.name in (Transition.CONTAINER_DIED, Transition.CONTAINER_FINISHED):
            died[cid] = (
                min(died.get(cid, ev.at), ev.at)
                if cid not in died or ev.at >= started.get(cid, ev.at)
                else died[cid]
            )
    kill_times = [m.at for m in marks if m.name == "KillingContainer"]
    if died and not started:
        # Deaths no kill line explains and nothing started again (an excerpt that missed the starts):
        # the containers exited on their own (a finished RestartNever pod, or a crash waiting for its
        # back-off). A DELETE after that says nothing certain about the worker: no state from it.
        last_death = max(died.values())
        if not any(k <= last_death for k in kill_times):
            return [m for m in marks if not (m.name in _CONFIG_DOORS and m.at >= last_death)]
        return marks
    if not started or any(cid not in died or died[cid] < at for cid, at in started.items()):
        return marks
    last = max(died.values())
    if any(at > last for at in started.values()):
        return marks
    kills = [m for m in marks if m.name == "KillingContainer" and m.at <= last]
    if kills:
        return marks
    key = next(
        ev.key
        for ev in facts.worker_events
        if ev.at == last and ev.name in (Transition.CONTAINER_DIED, Transition.CONTAINER_FINISHED)
    )
    kept = [m for m in marks if not (m.name in _CONFIG_DOORS and m.at >= last)]
    return kept + [Mark(last, CLEANUP, True, KUBELET, "all_containers_died", key)]


def _presence(mark: Mark) -> Mark:
    return Mark(mark.at, PRESENT, False, mark.grade, mark.name, mark.key, mark.pid)


def _restate(mark: Mark) -> Mark:
    return Mark(mark.at, mark.state, False, mark.grade, mark.name, mark.key, mark.pid, mark.cause, mark.grace)


def _mark_order(m: Mark) -> tuple[Any, ...]:
    return (m.at, m.state, not m.begins, GRADE_RANK[m.grade], m.name, m.key)


def _eviction_ranked(facts: PodFacts, marks: Sequence[Mark]) -> list[Mark]:
    """The eviction manager ranks the pods and kills the first one it may (V0), at most one per pass:
    the ranking line begins this pod's termination when its kill (or "Evicting pod") follows at once."""
    out = []
    for m in facts.kubelet_markers:
        if m.reason != "EvictionRanked":
            continue
        if any(
            k.name in ("KillingContainer", "Evicting") and _ZERO <= k.at - m.at <= SAME_TRANSITION
            for k in marks
        ):
            out.append(
                Mark(
                    m.at, TERMINATING, True, KUBELET, "EvictionRanked", m.key, m.pid, TerminationCause.EVICTED
                )
            )
    return out


def _containers_stopped(facts: PodFacts, marks: Sequence[Mark]) -> list[Mark]:
    """Cleanup begins (kubelet grade) when every container the termination killed has died: the kill
    lines name each running container's ID, the PLEG ContainerDied / "container finished" lines report
    each death. Restart kills (a container's own restart) do not count."""
    kills = {
        bare_container_id(m.payload.get("container_id")): m.at
        for m in facts.kubelet_markers
        if m.reason == "KillingContainer" and any(k.key == m.key for k in marks)
    }
    kills.pop("", None)
    if not kills:
        return []
    deaths: dict[str, tuple[datetime, str]] = {}
    for ev in facts.worker_events:
        if ev.name not in (Transition.CONTAINER_DIED, Transition.CONTAINER_FINISHED):
            continue
        cid = bare_container_id(ev.payload.get("container_id"))
        if cid in kills and ev.at >= kills[cid] and (cid not in deaths or ev.at < deaths[cid][0]):
            deaths[cid] = (ev.at, ev.key)
    if set(deaths) != set(kills):
        return []
    at, key = max(deaths.values())
    return [Mark(at, CLEANUP, True, KUBELET, "containers_died", key)]


def api_marks(inc: Incarnation, facts: PodFacts) -> list[Mark]:
    """The marks the API object gives (grade ``inferred``): bound to the node, termination requested,
    no container running any more, object gone."""
    out: list[Mark] = []
    bound = bound_at(inc)
    if bound is None:
        return out  # never on a node: no pod worker ever had it
    out.append(Mark(bound[0], SYNC, True, API, "api:bound", bound[1]))
    request = termination_request(inc)
    if request is None:
        return out
    out.append(
        Mark(request.at, TERMINATING, True, API, "api:" + request.cause, request.key, cause=request.cause)
    )
    stop = no_container_runs_at(inc, request)
    if stop is not None:
        out.append(Mark(stop[0], CLEANUP, True, API, "api:containers_stopped", stop[1]))
        if inc.deleted_at is not None and inc.deleted_at >= stop[0]:
            out.append(Mark(inc.deleted_at, DONE, True, API, "api:deleted", inc.snapshots[-1].key))
    elif inc.deleted_at is not None:
        # Gone with no word on the containers: termination ended by then at the latest.
        out.append(Mark(inc.deleted_at, DONE, False, API, "api:deleted", inc.snapshots[-1].key))
    return out


# ------------------------------------------------------------------------------------------ API reading


@record(frozen=True)
class TerminationRequest:
    """When and why the API shows termination was requested (the three doors)."""

    at: datetime
    cause: str
    key: str


def terminal_time(snap: PodSnapshot) -> datetime:
    """When the phase became terminal: the last regular container's (or sidecar's: the kubelet reports a
    terminal phase only once they stopped too) finish if all are known, else ``snap.at`` (the API lane and
    the worker lane inferred from the API end there alike)."""
    finishes = []
    for c in snap.containers:
        if c.kind != "regular" and not c.sidecar:
            continue
        if c.state != "terminated" or c.finished_at is None:
            return snap.at
        finishes.append(c.finished_at)
    if finishes and max(finishes) <= snap.at:
        return max(finishes)
    return snap.at


def termination_request(inc: Incarnation) -> TerminationRequest | None:
    """The earliest termination request the API shows for this incarnation, or None.

    Doors: deletion timestamp (minus the deletion grace), a terminal phase (when it was reached),
    DisruptionTarget=True set by the kubelet (TerminationByKubelet), or phase Failed reason Evicted.
    The kubelet's eviction manager sets both (1.26+): its DisruptionTarget, set as the eviction begins,
    dates the eviction, and the reason Evicted of the incarnation names its cause.
    """
    found: list[tuple[datetime, int, str, str]] = []
    evicted = any(snap.reason == "Evicted" for snap in inc.snapshots)
    by_kubelet = TerminationCause.EVICTED if evicted else TerminationCause.REMOVED
    for snap in inc.snapshots:
        if snap.deletion_requested_at is not None:
            found.append((snap.deletion_requested_at, 0, TerminationCause.DELETION, snap.key))
        target = snap.condition("DisruptionTarget")
        if target is not None and target.status == "True" and target.reason == "TerminationByKubelet":
            found.append((target.last_transition or snap.at, 1, by_kubelet, snap.key))
        if snap.terminal and not snap.deleted:
            cause = TerminationCause.EVICTED if snap.reason == "Evicted" else TerminationCause.TERMINAL_PHASE
            found.append((terminal_time(snap), 2, cause, snap.key))
    if not found:
        return None
    at, _, cause, key = min(found)
    return TerminationRequest(at, cause, key)


def bound_at(inc: Incarnation) -> tuple[datetime, str] | None:
    """When the API shows the pod bound to a node (its kubelet could start it from then on)."""
    times: list[tuple[datetime, str]] = []
    for snap in inc.snapshots:
        if snap.status_reset:
            continue  # a restarted kubelet rewrote these times
        scheduled = snap.condition("PodScheduled")
        if scheduled is not None and scheduled.status == "True" and scheduled.last_transition is not None:
            times.append((scheduled.last_transition, snap.key))
        elif snap.start_time is not None:
            times.append((snap.start_time, snap.key))
        elif snap.node:
            times.append((snap.at, snap.key))
    if not times and any(s.node for s in inc.snapshots):
        # Only reset statuses (a snapshot on a node adds a time above unless it is one, and a reset is told
        # by its startTime, so each has one): a restarted kubelet acknowledged the pod anew at their
        # startTime, and the status describes that kubelet's life of it (the API knows nothing of the
        # worker before); the first restart's is the earliest.
        return min((s.start_time, s.key) for s in inc.snapshots if s.start_time is not None)
    return min(times) if times else None


def no_container_runs_at(inc: Incarnation, after: TerminationRequest) -> tuple[datetime, str] | None:
    """When, after the request, the API first shows no container running (with container finish times)."""
    ever_ran = bool(first_run_start(inc, ("regular", "init", "ephemeral")))
    for snap in inc.snapshots:
        state = snapshot_api_state(snap)
        if state not in (ApiState.TERMINATING, ApiState.SUCCEEDED, ApiState.FAILED, ApiState.DELETED):
            continue
        if snap.at < after.at and snap.key != after.key:
            continue
        if any(c.state == "running" for c in snap.containers):
            continue
        if snap.deleted and not snap.containers and ever_ran:
            return None  # the last state says nothing about the containers
        finishes = [
            c.finished_at for c in snap.containers if c.state == "terminated" and c.finished_at is not None
        ]
        if finishes:
            return max(after.at, max(finishes)), snap.key
        return (after.at if not ever_ran else max(after.at, snap.at)), snap.key
    return None


def api_grace(facts: PodFacts, inc: Incarnation | None = None) -> int | None:
    """The grace period the termination was given: the deletion grace of the DELETE that began it, or a
    shorter one a later DELETE set while a container still ran. The kubelet's own final DELETE
    (``gracePeriodSeconds=0`` once the containers are gone, or a finalizer-held pod's grace dropped to 0)
    shortens nothing: taking it made every graceful termination exceed a 0 s grace. Without a deletion,
    the spec's ``terminationGracePeriodSeconds``."""
    snaps = inc.snapshots if inc is not None else facts.snapshots
    deleting = [s for s in snaps if s.deletion_grace_seconds is not None]
    if deleting:
        grace = deleting[0].deletion_grace_seconds
        assert grace is not None
        for snap in deleting[1:]:
            shorter = snap.deletion_grace_seconds
            if shorter is not None and shorter < grace and any(c.state == "running" for c in snap.containers):
                grace = shorter
        return grace
    for snap in reversed(snaps):
        if snap.grace_seconds is not None:
            return snap.grace_seconds
    return None


def never_all_started(facts: PodFacts) -> bool:
    """The API lists the pod's regular containers and some never started (as far as it ever showed; a
    status a restarted kubelet rewrote from scratch says nothing about that)."""
    for inc in facts.incarnations:
        names = {
            c.name for s in inc.snapshots if not s.status_reset for c in s.containers if c.kind == "regular"
        }
        if names and any(n not in first_run_start(inc) for n in names):
            return True
    return False


# ------------------------------------------------------------------------------------------ the walk


def _cycles(marks: Sequence[Mark], static: bool) -> tuple[list[list[Mark]], list[Mark]]:
    """Split marks into worker cycles; returns (cycles, out-of-order marks).

    A cycle is one life of the worker for this UID. A begin of SyncPod after the worker reached
    termination starts a new cycle only for a static pod (its UID is a hash of its manifest and really
    comes back); for any other pod it is out of order (a re-sync), kept aside.
    """
    cycles: list[list[Mark]] = [[]]
    late: list[Mark] = []
    top = -1
    for m in marks:
        if m.state == PRESENT:
            cycles[-1].append(m)
            continue
        if m.kubelet_side and m.state == SYNC and m.begins and top >= TERMINATING:
            if static:
                cycles.append([m])
                top = SYNC
                continue
            late.append(m)
            continue
        if m.kubelet_side and m.state < top:
            late.append(m)
            continue
        cycles[-1].append(m)
        if m.kubelet_side:
            top = max(top, m.state)
    return [c for c in cycles if c], late


def _segments(marks: Sequence[Mark]) -> tuple[list[_Segment], list[Mark]]:
    """Walk one cycle's kubelet-side marks into state segments; returns (segments, out-of-order marks)."""
    segments: list[_Segment] = []
    late: list[Mark] = []
    ordered = list(marks)
    i = 0
    while i < len(ordered):
        m = ordered[i]
        cur = segments[-1] if segments else None
        state = m.state
        if state == PRESENT:
            if cur is not None and cur.state != DONE:
                cur.last = max(cur.last, m.at)
                cur.marks.append(Mark(m.at, cur.state, False, m.grade, m.name, m.key, m.pid))
            i += 1
            continue
        # A REMOVE that is itself a termination request (a static pod's manifest removed) is read as one.
        api_remove = m.name == Transition.SYNCLOOP_REMOVE and m.state != TERMINATING
        if (api_remove or m.name == "DeletedMustBeKilled") and (cur is None or cur.state == DONE):
            # The REMOVE path kills a pod the worker still runs; with no sign of a live worker (an
            # excerpt that begins here, a pod never admitted, one already done) it begins nothing.
            i += 1
            continue
        if api_remove and cur is not None and cur.state < TERMINATING:
            # A REMOVE before any termination: the pod was force-deleted; the kubelet kills it now.
            m = Mark(m.at, TERMINATING, True, m.grade, m.name, m.key, m.pid, TerminationCause.REMOVED)
            state = TERMINATING
        elif (api_remove or m.name == Transition.REMOVED_FROM_ETCD) and not any(
            seg.state == TERMINATING
            and seg.begin is not None
            and seg.begin.cause == TerminationCause.DELETION
            for seg in segments
        ):
            # The kubelet deletes a gracefully deleted pod as soon as its cleanup is done, so that REMOVE
            # dates the worker's end; any other REMOVE (a finished Job pod deleted later) only says
            # the worker was done by then.
            m = _restate(m)
        if cur is not None and state < cur.state:
            late.append(m)
            i += 1
            continue
        if cur is not None and state == cur.state:
            cur.last = max(cur.last, m.at)
            cur.marks.append(m)
            i += 1
            continue
        # A new state: its begin is the best-graded begin of that state logged with this one.
        begin: Mark | None = None
        if m.begins:
            group = [m]
            for other in ordered[i + 1 :]:
                if other.at - m.at > SAME_TRANSITION:
                    break
                if (
                    other.state == state
                    and other.begins
                    and (other.pid is None or m.pid is None or other.pid == m.pid)
                ):
                    group.append(other)
            begin = min(group, key=lambda g: (GRADE_RANK[g.grade], _BEGIN_RANK.get(g.name, 9), g.at, g.key))
        seg = _Segment(state, m.at, m.at, begin, [m])
        segments.append(seg)
        i += 1
    return segments, late


@record(frozen=True)
class _Bound:
    at: datetime
    known: bool
    grade: IntervalSource
    name: str
    key: str = ""  # the evidence (dedupe key) that proves the bound, when one does


@dataclass(slots=True)
class _Piece:
    """An interval-to-be: a state (or an unknown stretch) between two bounds."""

    state: int  # SYNC, TERMINATING, CLEANUP, or UNKNOWN_STATE
    start: _Bound
    end: _Bound | None  # None: open
    evidence: set[str]
    grades: set[IntervalSource]
    cause: str | None = None
    grace: int | None = None
    setup_only: bool = False
    between: tuple[str, str] | None = None
    drawn: str = ""
    last_seen: datetime | None = None  # the last kubelet-side evidence of this state
    start_pid: int | None = None  # the kubelet process whose line began it
    open_unknown: bool = False  # open, and its end could not be seen at the log's verbosity
    marks: list[Mark] = field(default_factory=list)  # the kubelet-side evidence of the state


UNKNOWN_STATE = -1
# Marks that are the worker's first sight of the pod: nothing of its life comes before them.
_FIRST_SIGHT = frozenset(
    {Transition.FIRST_SEEN, Transition.SYNCLOOP_ADD, "span:syncPod:start", "DeviceAllocation"}
)


@dataclass(slots=True)
class _StateEvidence:
    """What one cycle's evidence says about one worker state."""

    state: int
    begin: Mark | None = None
    first: datetime | None = None  # kubelet-side evidence of being in it
    last: datetime | None = None
    marks: list[Mark] = field(default_factory=list)

    @property
    def start(self) -> datetime:
        if self.begin is not None:
            return self.begin.at
        assert self.first is not None
        return self.first


def _door_override(kubelet_begin: Mark, api: Sequence[Mark], floor: datetime | None) -> Mark | None:
    """An earlier door the API shows (a terminal phase before a later DELETE): its begin, else None."""
    if kubelet_begin.cause is None:
        return None
    earlier = [
        m
        for m in api
        if m.state == TERMINATING
        and m.begins
        and m.cause not in (None, kubelet_begin.cause)
        and m.at < kubelet_begin.at - SAME_TRANSITION
        and (floor is None or m.at >= floor)
    ]
    return min(earlier, key=lambda m: (m.at, m.key)) if earlier else None


def _evidence_by_state(segments: Sequence[_Segment], api: Sequence[Mark]) -> list[_StateEvidence]:
    """Per state present in the cycle (kubelet evidence, or an API begin that fits between it)."""
    found: dict[int, _StateEvidence] = {}
    for seg in segments:
        found[seg.state] = _StateEvidence(seg.state, seg.begin, seg.first, seg.last, list(seg.marks))
    kubelet_states = sorted(found)
    first_state = kubelet_states[0] if kubelet_states else None
    for state in (SYNC, TERMINATING, CLEANUP, DONE):
        ev: _StateEvidence | None = found.get(state)
        if ev is not None and ev.begin is not None:
            if state == TERMINATING:
                floor = max(
                    (last for s in kubelet_states if s < state and (last := found[s].last) is not None),
                    default=None,
                )
                door = _door_override(ev.begin, api, floor)
                if door is not None:
                    ev.begin = door
            continue
        first_begin = found[first_state].begin if first_state is not None else None
        if (
            first_state is not None
            and state < first_state
            and first_begin is not None
            and first_begin.name in _FIRST_SIGHT
        ):
            continue  # the worker's own first sight pins where its life began: nothing before it
        # The window an API begin of this state must fall in to fit the kubelet evidence.
        lo = max((last for s in found if s < state and (last := found[s].last) is not None), default=None)
        hi_candidates = [first for s in found if s >= state and (first := found[s].first) is not None]
        hi_candidates += [begin.at for s in found if s > state and (begin := found[s].begin) is not None]
        hi = min(hi_candidates, default=None)
        fits = [
            m
            for m in api
            if m.state == state and m.begins and (lo is None or m.at >= lo) and (hi is None or m.at <= hi)
        ]
        if not fits:
            continue
        best = min(fits, key=lambda m: (m.at, m.key))
        if ev is None:
            found[state] = _StateEvidence(state, best, None, None, [best])
        else:
            ev.begin = best
            ev.marks.append(best)
    done = found.get(DONE)
    if CLEANUP not in found and done is not None and done.begin is not None and _proves_cleanup(done.begin):
        # The worker's end is logged as SyncTerminatedPod completing: cleanup ran until then, from an
        # unknown moment (an excerpt that holds only this line still shows where cleanup ended).
        found[CLEANUP] = _StateEvidence(CLEANUP, None, done.begin.at, done.begin.at, [done.begin])
    ordered = [found[s] for s in sorted(found)]
    # API begins must keep the order of states.
    out: list[_StateEvidence] = []
    for ev in ordered:
        api_only = ev.begin is not None and not ev.begin.kubelet_side and ev.first is None
        if out and ev.start < out[-1].start and api_only:
            continue
        out.append(ev)
    return out


# Lines that end a phase by its sync function returning (``exit``): alone, they prove the phase ran until
# then, and (unless the sync failed and is retried) that it ended there.
_EXITS = frozenset(
    {Transition.TERMINATING_EXIT, Transition.TERMINATING_RUNTIME_EXIT, Transition.TERMINATED_EXIT}
)


def _proves_cleanup(m: Mark) -> bool:
    """A begin of DONE logged as SyncTerminatedPod completing (not a worker that never started, nor a
    REMOVE or the eviction manager, which only say the worker was done by then)."""
    return m.cleanup_ran


def _adjacent(a: _StateEvidence, b: _StateEvidence) -> bool:
    """Whether the worker can go straight from a's state to b's (no state in between skipped)."""
    pair = (a.state, b.state)
    if pair in ((SYNC, TERMINATING), (TERMINATING, CLEANUP), (CLEANUP, DONE)):
        return True
    # An orphaned runtime pod's worker stops right after terminating (no cleanup).
    return (
        pair == (TERMINATING, DONE)
        and b.begin is not None
        and b.begin.name == Transition.ORPHAN_CONTAINERS_TERMINATED
    )


def _bound_of_begin(m: Mark) -> _Bound:
    return _Bound(m.at, True, m.grade, m.name, m.key)


def _grade_of(marks: Iterable[Mark]) -> IntervalSource:
    grades = [m.grade for m in marks]
    return min(grades, key=lambda g: GRADE_RANK[g]) if grades else API


def _failed(exit_mark: Mark, errors: Sequence[tuple[datetime, int | None]]) -> bool:
    """Whether the sync that ``exit_mark`` ended failed: "Error syncing pod" follows it at once (the
    worker retries the same phase)."""
    return any(
        _ZERO <= at - exit_mark.at <= SAME_TRANSITION
        and (pid is None or exit_mark.pid is None or pid == exit_mark.pid)
        for at, pid in errors
    )


def sync_errors(facts: PodFacts) -> list[tuple[datetime, int | None]]:
    """(time, pid) of each "Error syncing pod" line of the pod."""
    return [(m.at, m.pid) for m in facts.kubelet_markers if m.reason in ("SyncError", "FailedKill")]


def _pieces(
    evidence: Sequence[_StateEvidence], errors: Sequence[tuple[datetime, int | None]] = ()
) -> list[_Piece]:
    """Intervals-to-be of one cycle: each state from its begin (or first evidence) to the next state's
    begin when the worker goes straight there, else to its last evidence followed by an unknown stretch.
    A last state whose last evidence is its sync function's exit (and no error follows) ended there."""
    pieces: list[_Piece] = []
    for i, ev in enumerate(evidence):
        nxt = evidence[i + 1] if i + 1 < len(evidence) else None
        if ev.state == DONE:
            break
        start = (
            _bound_of_begin(ev.begin)
            if ev.begin is not None
            else _Bound(ev.start, False, _grade_of(ev.marks), ev.marks[0].name, ev.marks[0].key)
        )
        if pieces and pieces[-1].end is not None and pieces[-1].end.at > start.at:
            start = _Bound(pieces[-1].end.at, start.known, start.grade, start.name, start.key)
        gap: _Piece | None = None
        end: _Bound | None
        if nxt is None:
            end = None
            kubelet = [m for m in ev.marks if m.kubelet_side]
            last = max(kubelet, key=lambda m: (m.at, m.name in _EXITS), default=None)
            if last is not None and last.name in _EXITS and not _failed(last, errors):
                end = _Bound(max(last.at, start.at), True, last.grade, last.name, last.key)
        elif nxt.begin is not None and _adjacent(ev, nxt):
            end = _bound_of_begin(nxt.begin)
        else:
            last_at = ev.last if ev.last is not None else start.at
            last_mark = max(
                (m for m in ev.marks if m.at <= last_at), key=lambda m: m.at, default=ev.marks[-1]
            )
            end = _Bound(max(last_at, start.at), False, last_mark.grade, last_mark.name, last_mark.key)
            nxt_start = nxt.start
            if nxt_start > end.at:
                nxt_bound = (
                    _bound_of_begin(nxt.begin)
                    if nxt.begin is not None
                    else _Bound(nxt_start, False, _grade_of(nxt.marks), nxt.marks[0].name, nxt.marks[0].key)
                )
                gap = _Piece(
                    UNKNOWN_STATE,
                    _Bound(end.at, True, end.grade, end.name, end.key),
                    _Bound(nxt_start, True, nxt_bound.grade, nxt_bound.name, nxt_bound.key),
                    {last_mark.key, nxt.marks[0].key},
                    {end.grade, nxt_bound.grade},
                    between=(STATE_NAMES[ev.state], STATE_NAMES[nxt.state]),
                )
        causes = [m.cause for m in ([ev.begin] if ev.begin else []) + ev.marks if m.cause]
        graces = [m.grace for m in ev.marks if m.grace is not None and m.kubelet_side]
        pieces.append(
            _Piece(
                ev.state,
                start,
                end,
                {m.key for m in ev.marks}
                | ({ev.begin.key} if ev.begin else set())
                | (
                    {nxt.begin.key}
                    if end is not None and end.known and nxt is not None and nxt.begin is not None
                    else set()
                ),
                {m.grade for m in ev.marks},
                cause=causes[0] if causes else None,
                grace=graces[0] if graces else None,
                setup_only=any(m.setup_only for m in ev.marks),
                last_seen=ev.last,
                start_pid=ev.begin.pid if ev.begin is not None else None,
                marks=sorted(
                    {
                        (m.key, m.name): m
                        for m in ev.marks + ([ev.begin] if ev.begin else [])
                        if m.kubelet_side
                    }.values(),
                    key=_mark_order,
                ),
            )
        )
        if gap is not None:
            pieces.append(gap)
    # A first state that did not begin in the evidence after a later one's start: the next cleans up.
    return pieces


def _api_only(api: Sequence[Mark]) -> list[_Piece]:
    """The API's own guess when there is no kubelet evidence: each state from its begin to the next's;
    an object gone without a word on its containers ends the last state there."""
    begins = sorted((m for m in api if m.begins), key=lambda m: (m.at, m.state))
    chain: list[Mark] = []
    for m in begins:
        if chain and m.state <= chain[-1].state:
            continue
        chain.append(m)
    pieces: list[_Piece] = []
    for j, m in enumerate(chain):
        if m.state == DONE:
            break
        nxt = chain[j + 1] if j + 1 < len(chain) else None
        end = _Bound(nxt.at, True, API, nxt.name, nxt.key) if nxt is not None else None
        keys = {m.key} | ({nxt.key} if nxt is not None else set())
        if end is None:
            gone = next((x for x in api if x.state == DONE and not x.begins and x.at >= m.at), None)
            if gone is not None:
                end = _Bound(gone.at, True, API, gone.name, gone.key)
                keys.add(gone.key)
        pieces.append(
            _Piece(m.state, _Bound(m.at, True, API, m.name, m.key), end, keys, {API}, cause=m.cause)
        )
    return pieces


# ------------------------------------------------------------------------------------------ running split


def running_candidates(facts: PodFacts) -> list[RunningCandidate]:
    """When the containers had all started, by source, best first: "Observed pod startup duration"
    (its observedRunningTime), "Mark when the pod was running for the first time", the API's container
    start times (sharpened by the PLEG event of the same start), the last PLEG ContainerStarted of the
    start-up (a heuristic: a container started again after a crash does not count)."""
    out: list[RunningCandidate] = []
    for ev in facts.worker_events:
        if ev.name == Transition.STARTUP_OBSERVED:
            try:
                when = parse_time(ev.payload.get("observed_running"))
            except ValueError:
                when = None
            out.append(RunningCandidate(when or ev.at, KUBELET, "startup_observed", ev.key))
    for ev in facts.worker_events:
        if ev.name == Transition.RUNNING_MARKED:
            out.append(RunningCandidate(ev.at, KUBELET, "running_marked", ev.key))
    pleg = [e for e in facts.worker_events if e.name == Transition.CONTAINER_STARTED]
    for inc in facts.incarnations:
        started = all_containers_started_at(inc)
        if inc.snapshots and all(snap.status_reset for snap in inc.snapshots):
            # A restarted kubelet's status: its containers' current runs started in that kubelet's life
            # (an earlier run, in lastState, belongs to the previous kubelet's).
            started = _current_runs_started(inc.snapshots[-1])
        if started is None:
            continue
        near = [e for e in pleg if _ZERO <= e.at - started <= PLEG_MATCH]
        if near:
            out.append(RunningCandidate(max(e.at for e in near), KUBELET, "container_started", near[-1].key))
        key = next((s.key for s in inc.snapshots if s.at >= started), inc.snapshots[-1].key)
        out.append(RunningCandidate(started, API, "all_containers_started", key))
    return out


def _current_runs_started(snap: PodSnapshot) -> datetime | None:
    """When every regular container's current run had started, as one snapshot says (None if one has no
    current run)."""
    starts = []
    for c in snap.containers:
        if c.kind != "regular":
            continue
        run = c.current_run
        if run is None or run.started_at is None:
            return None
        starts.append(run.started_at)
    return max(starts) if starts else None


def _pleg_start(facts: PodFacts, piece: _Piece) -> tuple[RunningCandidate | None, bool]:
    """From PLEG lines alone: when the containers had all started, and whether only the sandbox did.

    Only when the SyncPod piece begins in the evidence (its ADD or first sync is there, so no
    ContainerStarted of this start-up was cut off): the events after it, from the same kubelet process,
    before the piece ends. The sandbox is one of them (PLEG reports a sandbox as a container), so a single
    event means the containers had not started; with more, the last one marks the start-up done. A
    container started again after it crashed ("container finished" with a non-zero exit) does not count.
    """
    if not piece.start.known or piece.start.grade == API:
        return None, False
    lo = piece.start.at
    hi = piece.end.at if piece.end is not None else None
    restarted = [at for times in start_lines(facts.processes).values() for at in times if at > lo]
    if restarted and (hi is None or min(restarted) < hi):
        hi = min(restarted)  # a new kubelet's first relist reports every running container as started
    events = [
        e
        for e in facts.worker_events
        if e.name == Transition.CONTAINER_STARTED
        and e.at > lo
        and (hi is None or e.at <= hi)
        and (piece.start_pid is None or e.pid is None or e.pid == piece.start_pid)
    ]
    crashed = {
        bare_container_id(e.payload.get("container_id"))
        for e in facts.worker_events
        if e.name == Transition.CONTAINER_FINISHED and e.payload.get("exit_code") not in (0, None)
    }
    # A container the kubelet restarted (its kill line follows "Message for Container of pod": a failed
    # liveness probe, a changed spec) ran before it died, like one that crashed: its new start is no part
    # of the start-up.
    restart_kills = _restart_kills(facts.kubelet_markers)
    crashed |= {
        bare_container_id(m.payload.get("container_id"))
        for m in facts.kubelet_markers
        if m.key in restart_kills
    } - {""}
    crashes = [
        e.at
        for e in facts.worker_events
        if e.name in (Transition.CONTAINER_DIED, Transition.CONTAINER_FINISHED)
        and bare_container_id(e.payload.get("container_id")) in crashed
    ]
    startup = [e for e in events if not any(c < e.at for c in crashes)]
    if len(startup) >= 2:
        return RunningCandidate(startup[-1].at, KUBELET, "container_started", startup[-1].key), False
    ended = piece.end is not None and piece.end.known
    return None, len(startup) == 1 and ended


# Marks that show the worker setting the pod up (its first sight and the work it is handed before a sync).
_SETUP_SIGNS = frozenset(
    {
        *_VOLUME_SETUP,
        Transition.FIRST_SEEN,
        Transition.SYNCLOOP_ADD,
        Transition.PENDING_UPDATE,
        Transition.CANNOT_START_YET,
        "span:syncPod:start",
        Transition.SYNC_ENTER,
    }
)
_SYNC_EXITS = frozenset({Transition.SYNC_EXIT, "span:syncPod:end"})
# A pod that reached a terminal phase through its containers (the worker's own word) ran them.
_NATURAL_END = frozenset({Transition.COMPLETED_NATURALLY, Transition.POD_TERMINAL})


@record(frozen=True)
class _SetupProof:
    """How far the evidence proves setup: to ``at`` (None: to the piece's end), and whether that is where
    the first sync returned without an error (``returned``)."""

    at: datetime | None
    name: str
    grade: IntervalSource
    returned: bool


def _setup_proof(piece: _Piece, errors: Sequence[tuple[datetime, int | None]]) -> _SetupProof | None:
    """What a piece that begins at the worker's first sight proves of setup (docs/kubelet-lines.md,
    "Every bound where a line proves it"): the first sync (``SyncPod enter`` or a ``syncPod`` span) is
    setup until it returns without an error; a sync that failed ("Error syncing pod": the containers did
    not all start) or is still running, or "Pod cannot start yet", keeps setup going to the piece's end;
    without any sync line, setup is proven until its last sign (the first sight, the work handed over)."""
    if not piece.start.known or piece.start.name not in _FIRST_SIGHT:
        return None
    syncing = piece.setup_only
    last: Mark | None = None
    for m in piece.marks:
        if m.name in _SYNC_EXITS:
            if m.failed or _failed(m, errors):
                syncing = True
                last = m
                continue
            # A span's end and the exit line of one return are logged moments apart: the later dates it.
            same = [
                x for x in piece.marks if x.name in _SYNC_EXITS and _ZERO <= x.at - m.at <= SAME_TRANSITION
            ]
            last_exit = max(same, key=lambda x: (x.at, x.name))
            return _SetupProof(max(last_exit.at, piece.start.at), last_exit.name, last_exit.grade, True)
        if m.name in (Transition.SYNC_ENTER, "span:syncPod:start"):
            syncing = True
        if m.name in _SETUP_SIGNS:  # (a sync's exit has been taken above)
            last = m
    if syncing:
        return _SetupProof(None, "", piece.start.grade, False)
    if last is None:
        return None
    return _SetupProof(max(last.at, piece.start.at), last.name, last.grade, False)


def _split_sync(
    piece: _Piece,
    candidates: Sequence[RunningCandidate],
    never_started: bool,
    cycle_lo: datetime,
    cycle_hi: datetime | None,
    facts: PodFacts,
) -> list[_Piece]:
    """Split a SyncPod piece into setup, running and unknown.

    Setup runs from the worker's first sight as far as a line proves it (``_setup_proof``); running
    begins where the containers' start is seen (``running_candidates``, PLEG, or a first sync that
    returned for a pod that later completed on its own); what no line decides is ``unknown`` between
    setup and running."""
    lo = piece.start.at
    hi = piece.end.at if piece.end is not None else None
    # The API dates a container's start to the second (RFC 3339, truncated): a start dated to the second
    # this cycle began in may lie after the cycle's first sight, the earliest it can be (a static pod's
    # UID come back: its new life's containers start in the second of its first sight).
    in_cycle = (
        replace(c, at=cycle_lo) if c.grade == API and cycle_lo - _ONE_SECOND < c.at < cycle_lo else c
        for c in candidates
    )
    fits = [
        c
        for c in in_cycle
        if c.at >= cycle_lo and (cycle_hi is None or c.at < cycle_hi) and (hi is None or c.at <= hi)
    ]
    pleg, sandbox_only = _pleg_start(facts, piece)
    if pleg is not None:
        fits.append(pleg)
    proof = _setup_proof(piece, sync_errors(facts))
    if proof is not None and proof.returned and proof.at is not None:
        natural = (piece.end is not None and piece.end.name in _NATURAL_END) or any(
            m.name in _NATURAL_END for m in piece.marks
        )
        if natural:
            # The pod completed on its own, so its containers ran: from the first sync's return at most.
            # A heuristic like PLEG's (init containers may have run first): graded kubelet, never observed.
            fits.append(RunningCandidate(proof.at, KUBELET, "sync_returned", _key_at(piece, proof)))
    best = min(fits, key=lambda c: (_cand_rank(c.name), GRADE_RANK[c.grade], c.at, c.key)) if fits else None
    if best is None:
        proven_whole = proof is not None and (proof.at is None or (hi is not None and proof.at >= hi))
        if never_started or piece.setup_only or sandbox_only or proven_whole:
            piece.drawn = WorkerPhase.SETUP
            return [piece]
        # Setup is proven up to its last sign, then unknown; a first sight that is its only sign is an
        # instant of setup (it began there; nothing says for how long).
        if proof is not None and proof.at is not None and proof.at >= lo and (hi is None or proof.at < hi):
            setup = _Piece(
                SYNC,
                piece.start,
                _Bound(proof.at, False, proof.grade, proof.name, _key_at(piece, proof)),
                set(piece.evidence),
                set(piece.grades),
                drawn=WorkerPhase.SETUP,
                marks=piece.marks,
            )
            rest = _Piece(
                UNKNOWN_STATE,
                _Bound(proof.at, True, proof.grade, proof.name, _key_at(piece, proof)),
                piece.end,
                set(piece.evidence),
                set(piece.grades),
                between=("setup", "running"),
                drawn=WorkerPhase.UNKNOWN,
            )
            return [setup, rest]
        piece.drawn = WorkerPhase.UNKNOWN
        piece.between = ("setup", "running")
        return [piece]
    split = _Bound(best.at, True, best.grade, best.name, best.key)
    if best.at <= lo:
        # Already running when this evidence begins (a restart's re-sync, an excerpt from mid-life). Where
        # the piece's start is not in the evidence and a line dates the start of running before it
        # ("Observed pod startup duration": its observedRunningTime), running is proven from there.
        if not piece.start.known and best.at < lo and best.name == "startup_observed":
            piece.start = _Bound(best.at, True, best.grade, best.name, best.key)
        piece.drawn = WorkerPhase.RUNNING
        return [piece]
    setup = _Piece(
        SYNC,
        piece.start,
        split,
        piece.evidence | ({best.key} - {""}),
        piece.grades | {best.grade},
        drawn=WorkerPhase.SETUP,
    )
    running = _Piece(
        SYNC,
        split,
        piece.end,
        piece.evidence | ({best.key} - {""}),
        piece.grades | {best.grade},
        drawn=WorkerPhase.RUNNING,
    )
    return [setup, running]


def _key_at(piece: _Piece, proof: _SetupProof) -> str:
    """The evidence key of the mark a setup proof ends at."""
    return next((m.key for m in piece.marks if m.at == proof.at and m.name == proof.name), "")


def _cand_rank(name: str) -> int:
    return {
        "startup_observed": 0,
        "running_marked": 1,
        "container_started": 2,
        "all_containers_started": 3,
        "sync_returned": 4,
    }.get(name, 9)


# ------------------------------------------------------------------------------------------ the lane


def worker_lane(facts: PodFacts) -> WorkerLane:
    """The ``worker`` lane of a pod (see the module docstring), with what the findings need from it."""
    static = bool(STATIC_UID.match(facts.uid)) or any(s.static for s in facts.snapshots)
    marks = kubelet_marks(facts)
    cycles, late = _cycles(marks, static)
    api_by_inc = [(inc, api_marks(inc, facts)) for inc in facts.incarnations]
    restarts = restart_times(facts.processes)
    own_starts = {pid: at for (_, pid), at in process_starts(facts.processes).items()}
    candidates = running_candidates(facts)
    never = never_all_started(facts)
    errors = sync_errors(facts)
    intervals: list[Interval] = []
    first_seen: dict[int, int] = {}
    kubelet_cycles = [c for c in cycles if c]
    if not kubelet_cycles:
        # No kubelet evidence: one cycle per API incarnation (a static pod's UID may come back).
        for inc, api in api_by_inc:
            pieces = _api_only(api)
            intervals.extend(_draw(pieces, inc.index, candidates, never, None, None, restarts, facts, inc))
        return WorkerLane(tuple(intervals), (), first_seen, restarts)
    starts = [min(m.at for m in c) for c in kubelet_cycles]
    for index, cycle in enumerate(kubelet_cycles):
        hi = starts[index + 1] if index + 1 < len(starts) else None
        api = [m for inc, inc_marks in api_by_inc for m in inc_marks if _inc_cycle(inc, starts) == index]
        segments, out_of_order = _segments(cycle)
        late.extend(out_of_order)
        if segments and segments[0].begin is not None and segments[0].begin.name == Transition.FIRST_SEEN:
            first_seen[index] = segments[0].state
        pieces = _pieces(_evidence_by_state(segments, api), errors)
        if hi is not None:
            pieces = _close_before(pieces, hi)
        else:
            pieces = _close_at_restart(pieces, restarts, cycle, own_starts)
            pieces = _unobservable_end(pieces, cycle)
        lo = starts[index] if index else None
        cycle_inc = next((i for i, _ in api_by_inc if _inc_cycle(i, starts) == index), None)
        # A config line (the API's ADD, DELETE, REMOVE) says what the kubelet was asked, not what its
        # worker did: admission may have rejected the pod. A state such a line begins is drawn as an
        # instant only where the cycle shows the pod admitted (_admitted), or where the evidence ends.
        instants = _admitted(cycle) or (bool(pieces) and pieces[-1].end is None)
        intervals.extend(
            _draw(pieces, index, candidates, never, lo, hi, restarts, facts, cycle_inc, instants=instants)
        )
    late_starts = [
        (m.at, m.key, _cycle_of(m.at, starts)) for m in late if m.name == Transition.CONTAINER_STARTED
    ]
    return WorkerLane(tuple(intervals), tuple(sorted(late_starts)), first_seen, restarts)


def _cycle_of(at: datetime, starts: Sequence[datetime]) -> int:
    index = 0
    for i, s in enumerate(starts):
        if s <= at:
            index = i
    return index


def _inc_cycle(inc: Incarnation, starts: Sequence[datetime]) -> int:
    """The kubelet cycle an API incarnation belongs to (by when it was created)."""
    if not inc.index:
        return 0
    return _cycle_of(inc.created or inc.first_at, starts)


def _close_at_restart(
    pieces: list[_Piece],
    restarts: Sequence[datetime],
    cycle: Sequence[Mark],
    own_starts: Mapping[int, datetime] | None = None,
) -> list[_Piece]:
    """A state still open when its kubelet restarted, and never mentioned by the new kubelet: the old
    worker is gone with its process, so the state lasted at least until its last evidence and how it
    ended is not known (the node may have rebooted, the new kubelet may have found it finished)."""
    if not pieces or pieces[-1].last_seen is None:
        return pieces
    last = pieces[-1]
    # An end the API gives after the restart (the object deleted once the new kubelet was up) only says
    # the old worker was gone by then: it is no more the state's end than an open one.
    api_end = last.end is not None and last.end.grade == API
    if last.end is not None and not api_end:
        return pieces
    seen = last.last_seen
    assert seen is not None
    # A process started before its own lines: its start, dated the latest it can be (the end of the
    # first minute it logged in, ``process_starts``), never ends what it logged itself.
    mine = {own_starts[m.pid] for m in last.marks if own_starts and m.pid is not None and m.pid in own_starts}
    later = [r for r in restarts if r > seen and r not in mine and (last.end is None or r <= last.end.at)]
    # The new kubelet carried the state on if it says anything of the pod beyond "done" (a REMOVE).
    if not later or any(m.kubelet_side and m.at >= later[0] and m.state != DONE for m in cycle):
        return pieces
    if seen > last.start.at:
        last.end = _Bound(seen, False, last.start.grade, "kubelet_restart")
    else:
        # Seen at one instant only (a node shutdown's kill line, then the reboot): it lasted at least
        # that instant and how it ended is not known; never read as still going on.
        last.end = None
        last.open_unknown = True
    return pieces


def _unobservable_end(pieces: list[_Piece], cycle: Sequence[Mark]) -> list[_Piece]:
    """An open cleanup the log could not have seen end: below V4 the worker's end is logged only as
    "Pod worker has stopped" (V3, 1.27+), a REMOVE after a graceful delete, or the eviction manager's
    "pods successfully cleaned up". Without V4 lines it stays open with ``end_unknown``: it began there,
    how long it lasted is not in the evidence (never read it as still going on)."""
    if not pieces or pieces[-1].end is not None or pieces[-1].state != CLEANUP:
        return pieces
    if any(m.grade == OBSERVED for m in cycle):
        return pieces
    pieces[-1].open_unknown = True
    return pieces


def _close_before(pieces: list[_Piece], hi: datetime) -> list[_Piece]:
    """A cycle's still-open last state ended, at the latest, when the next cycle began."""
    if pieces and pieces[-1].end is None:
        last = pieces[-1]
        last.end = _Bound(max(hi, last.start.at), False, last.start.grade, "next_cycle")
    return pieces


# Cleanup lines that only a pod whose volumes were set up (so one admitted) logs.
_ADMITTED_CLEANUP = frozenset({"VolumeTornDown"})
# What the API asked of the kubelet (the config's lines, and the REMOVE path's own word on it).
_CONFIG_LINES = frozenset(
    {
        Transition.SYNCLOOP_ADD,
        Transition.SYNCLOOP_DELETE,
        Transition.SYNCLOOP_REMOVE,
        Transition.REMOVED_FROM_ETCD,
        "DeletedMustBeKilled",
    }
)


def _admitted(cycle: Sequence[Mark]) -> bool:
    """Whether the kubelet-side evidence of a cycle shows the pod admitted: a line of its setup, running
    or termination that is not a config line (a sync, PLEG, a kill, a volume mounted or torn down). A
    pod admission rejected gets none of these: only the config's lines and, 1.27+, a worker first seen
    terminated that cleans up what never ran."""
    return any(
        m.kubelet_side
        and m.name not in _CONFIG_LINES
        and (m.state in (SYNC, TERMINATING) or m.name in _ADMITTED_CLEANUP)
        and m.name != "DeviceAllocation"  # admission under way, not done
        for m in cycle
    )


def _draw(
    pieces: Sequence[_Piece],
    cycle: int,
    candidates: Sequence[RunningCandidate],
    never: bool,
    lo: datetime | None,
    hi: datetime | None,
    restarts: Sequence[datetime],
    facts: PodFacts,
    inc: Incarnation | None,
    *,
    instants: bool = True,
) -> list[Interval]:
    out: list[Interval] = []
    for piece in pieces:
        if piece.state == UNKNOWN_STATE:
            piece.drawn = WorkerPhase.UNKNOWN
            parts = [piece]
        elif piece.state == SYNC:
            parts = _split_sync(piece, candidates, never, lo or _min_time(piece), hi, facts)
        else:
            piece.drawn = STATE_NAMES[piece.state]
            if piece.state == TERMINATING and piece.grace is None:
                marked = _marker_grace(facts, piece)
                piece.grace = marked if marked is not None else api_grace(facts, inc)
            parts = [piece]
        for part in parts:
            iv = _interval(part, cycle, restarts, instants=instants)
            if iv is not None:
                out.append(iv)
    return out


def _min_time(piece: _Piece) -> datetime:
    return piece.start.at - timedelta(days=36500)


def _marker_grace(facts: PodFacts, piece: _Piece) -> int | None:
    stop = piece.end.at if piece.end is not None else None
    for m in facts.kubelet_markers:
        if m.at >= piece.start.at and (stop is None or m.at <= stop):
            value = m.payload.get("grace_period")
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _interval(
    piece: _Piece, cycle: int, restarts: Sequence[datetime], *, instants: bool = True
) -> Interval | None:
    state = piece.drawn
    start, end = piece.start, piece.end
    end_at = end.at if end is not None else None
    # An instant is kept where one moment is all the evidence says of a state (rule 2: from its first
    # evidence to its last): an end whose start is not in the evidence (an excerpt that holds only "Pod
    # is complete and the worker can now stop": cleanup ended there), a begin with nothing else of its
    # state (an ADD followed by nothing of its sync: setup began there), or one line inside it
    # ("SyncTerminatedPod enter" alone: cleanup then); at a config line, only where ``instants`` allows
    # (see worker_lane). Two proven bounds at one moment, an unknown stretch of no length, and a
    # piece whose evidence all lies before its start (clipped by the state before it) are no interval.
    if end is not None and (
        end.at < start.at
        or (
            end.at == start.at
            and (
                (start.known and end.known)
                or state == WorkerPhase.UNKNOWN
                or (
                    not end.known
                    and not any(
                        m.at == start.at and (instants or m.name not in _CONFIG_LINES) for m in piece.marks
                    )
                )
            )
        )
    ):
        return None
    if state == WorkerPhase.UNKNOWN:
        grades = [start.grade] + ([end.grade] if end is not None else [])
    else:
        known = [b.grade for b in (start, end) if b is not None and b.known]
        grades = known or list(piece.grades) or [OBSERVED]
    source = max(grades, key=lambda g: GRADE_RANK[g])
    attrs: dict[str, Any] = {
        "cycle": cycle,
        "start_from": start.name,
        "end_from": end.name if end is not None else None,
    }
    # Which observation proves each bound (its dedupe key): `timeline --explain` prints its line.
    if start.key:
        attrs["start_evidence"] = start.key
    if end is not None and end.key:
        attrs["end_evidence"] = end.key
    if state != WorkerPhase.UNKNOWN:
        if not start.known:
            attrs["start_unknown"] = True
        if (end is not None and not end.known) or piece.open_unknown:
            attrs["end_unknown"] = True
    if end is None and state != WorkerPhase.UNKNOWN:
        # Open: its end is not in the evidence. The last evidence of the state says how long it lasted
        # at least (a live log keeps moving it; a cut one stops there).
        seen = max(piece.last_seen or start.at, start.at)
        attrs["seen_until"] = seen.isoformat(timespec="microseconds")
    if state == WorkerPhase.TERMINATING:
        attrs["cause"] = piece.cause
        attrs["grace_seconds"] = piece.grace
    if piece.between is not None and state == WorkerPhase.UNKNOWN:
        attrs["between"] = list(piece.between)
    inside = [r for r in restarts if r > start.at and (end_at is None or r < end_at)]
    if inside:
        attrs["kubelet_restarts"] = [r.isoformat(timespec="microseconds") for r in inside]
    return Interval(WORKER_LANE, state, start.at, end_at, source, attrs, tuple(sorted(piece.evidence)))
