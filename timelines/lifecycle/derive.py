"""Derive one pod's timeline from its observations: pure, and independent of arrival order.

Lanes (states in ``timeline.py``):

* ``api``: the API server's view, from pod / pod_deleted snapshots, using the times inside the object
  (creation, condition transitions, startTime, container startedAt / finishedAt, deletionTimestamp minus
  the deletion grace) where they are more precise than when the watch delivered the snapshot.
* ``worker``: the kubelet pod worker (setup / terminating / cleanup). ``observed`` from worker log lines
  and spans when there are any; otherwise ``inferred`` from the API.
* ``container:NAME``: waiting(reason) / running / terminated(reason, exit code), one interval per run.
* ``condition:TYPE``: true / false / unknown spans with reason and message.

Every lane goes through ``_settle`` last, which sorts and clips so intervals never overlap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from timelines.lifecycle.audit_evidence import (
    AuditRecord,
    audited_phases,
    deletion_request,
    marker_of,
    termination_attrs,
    termination_request,
)
from timelines.lifecycle.facts import (
    STATIC_UID,
    Incarnation,
    KubeletMarkerRecord,
    PodFacts,
    PodSnapshot,
    Run,
    collect_facts,
    snapshot_api_state,
)
from timelines.lifecycle.findings import DEFAULT_THRESHOLDS, Thresholds, detect_facts_findings
from timelines.lifecycle.observation import Observation, Transition
from timelines.lifecycle.timeline import (
    API_LANE,
    CONDITION_LANE_PREFIX,
    CONTAINER_LANE_PREFIX,
    WORKER_LANE,
    ApiState,
    ContainerState,
    Finding,
    Interval,
    IntervalSource,
    Marker,
    PodTimeline,
    WorkerPhase,
    format_time,
    parse_time,
)
from timelines.lifecycle.worker import WorkerLane, terminal_time, worker_lane

CONDITION_ORDER = (
    "PodScheduled",
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
    "DisruptionTarget",
)
CONTAINER_KIND_ORDER = {"init": 0, "regular": 1, "ephemeral": 2}
API_RANK = {state: i for i, state in enumerate(ApiState.ORDER)}
API_RANK[ApiState.FAILED] = API_RANK[ApiState.SUCCEEDED]  # two spellings of "terminal phase"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def derive_pod_timeline(
    observations: Iterable[Observation],
    *,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    now: datetime | None = None,
) -> PodTimeline:
    """Build the ``PodTimeline`` of ONE pod UID from its observations.

    Contract: the same observations in any order, with or without duplicates (same ``dedupe_key``),
    give an equal timeline. Intervals in a lane are sorted and never overlap; an interval with no end
    yet is open (``end is None``). ``now`` only affects findings about still-open intervals; it
    defaults to the newest ``observed_at`` so that the result depends on the observations alone.
    Raises ValueError when the observations name no pod UID or more than one.
    """
    facts = collect_facts(observations)
    lane = worker_lane(facts)
    timeline = derive_from_facts(facts, lane)
    findings = detect_facts_findings(timeline, facts, thresholds, now, lane)
    return _replace_findings(timeline, findings)


def derive_from_facts(facts: PodFacts, lane: WorkerLane) -> PodTimeline:
    """The timeline without findings, from already collected facts and their worker lane (see
    ``derive_pod_timeline``)."""
    snaps = facts.snapshots
    latest = snaps[-1] if snaps else None
    deleted_at = facts.incarnations[-1].deleted_at if facts.incarnations else None
    lanes: dict[str, tuple[Interval, ...]] = {
        WORKER_LANE: _settle(lane.intervals),
        API_LANE: _settle(_api_lane(facts)),
    }
    lanes.update(_container_lanes(facts))
    lanes.update(_condition_lanes(facts))
    lanes.update(_resize_lane(facts))
    lanes.update(_generation_lane(facts))
    if facts.audits:
        for name in (API_LANE, WORKER_LANE):
            lanes[name] = _with_requester(facts, lanes[name])
    return PodTimeline(
        uid=facts.uid,
        namespace=_latest(facts, "namespace"),
        name=_latest(facts, "name"),
        node=_latest(facts, "node"),
        lanes=lanes,
        markers=_markers(facts),
        findings=(),
        static=any(s.static for s in snaps) or bool(STATIC_UID.match(facts.uid)),
        owner=latest.owner if latest is not None else None,
        created_at=facts.incarnations[0].created if facts.incarnations else None,
        deleted_at=deleted_at,
        phase=latest.phase if latest is not None else None,
        first_observed=min(
            (o.observed_at.astimezone(UTC) for o in facts.observations if o.pod_uid), default=None
        ),
        last_observed=facts.latest_observed.astimezone(UTC) if facts.latest_observed else None,
        problems=facts.problems,
    )


def _replace_findings(timeline: PodTimeline, findings: tuple[Finding, ...]) -> PodTimeline:
    # Positionally, as ``dataclasses.replace`` would but without its look-up of every field by name.
    t = timeline
    return PodTimeline(
        t.uid, t.namespace, t.name, t.node, t.lanes, t.markers, findings, t.static, t.owner, t.created_at,
        t.deleted_at, t.phase, t.first_observed, t.last_observed, t.problems,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------- identity


def _latest(facts: PodFacts, attr: str) -> str | None:
    """The newest non-empty namespace / name / node: snapshots first, then any observation, then pod_ref."""
    for snap in reversed(facts.snapshots):
        value = getattr(snap, attr)
        if value:
            return str(value)
    for obs in reversed(facts.observations):
        value = getattr(obs, attr)
        if value and obs.pod_uid:
            return str(value)
    if attr in ("namespace", "name"):
        for ev in reversed(facts.worker_events):
            ref = ev.payload.get("pod_ref")
            if isinstance(ref, str) and "/" in ref:
                namespace, name = ref.split("/", 1)
                return namespace if attr == "namespace" else name
    return None


# --------------------------------------------------------------------------------------------- settling


def _settle(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    """Sort and clip a lane so that intervals never overlap.

    An interval starting inside an earlier one (or after an open one) cuts the earlier one there.
    Empty intervals (end == start) are dropped, except an instant ``deleted`` that ends the api lane and
    a worker state drawn as an instant (one moment is all its evidence says: ``worker._interval``); one
    that a later interval's start cut down to nothing is dropped.
    """
    ordered = sorted(
        intervals, key=lambda iv: (iv.start, iv.end is None, iv.end or iv.start, iv.state, iv.evidence)
    )
    out: list[tuple[Interval, bool]] = []  # (interval, drawn as an instant)
    for iv in ordered:
        if iv.end is not None and iv.end < iv.start:
            iv = _with(iv, end=iv.start)
        if out:
            prev, instant = out[-1]
            if prev.end is None or prev.end > iv.start:
                out[-1] = (_with(prev, end=iv.start), False)
        out.append((iv, iv.end == iv.start))
    return tuple(
        iv
        for iv, instant in out
        if iv.end != iv.start
        or (iv.state == ApiState.DELETED and iv.lane == API_LANE)
        or (iv.lane == WORKER_LANE and instant and iv.state != WorkerPhase.UNKNOWN)
    )


def _with(iv: Interval, *, end: datetime | None, end_from: str | None = None) -> Interval:
    attrs = iv.attrs if end_from is None else {**iv.attrs, "end_from": end_from}
    return Interval(iv.lane, iv.state, iv.start, end, iv.source, attrs, iv.evidence)


def _chain(
    lane: str, points: list[_Point], end: datetime | None, source: IntervalSource = "observed"
) -> list[Interval]:
    """Intervals from a step function: each point (in time order) starts a state that lasts until the next
    point; the last one lasts until ``end``, or stays open when there is none or it comes before that
    point (an object gone before its last reported state: the report is the newer word)."""
    if end is not None and points and end < points[-1].at:
        end = None
    out: list[Interval] = []
    for i, pt in enumerate(points):
        stop = points[i + 1].at if i + 1 < len(points) else end
        out.append(
            Interval(lane, pt.state, pt.at, stop, source, dict(pt.attrs), tuple(sorted(set(pt.evidence))))
        )
    return out


@dataclass(slots=True)
class _Point:
    at: datetime
    state: str
    attrs: dict[str, Any] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)


def _merge_points(points: list[_Point], identity: Callable[[_Point], object]) -> list[_Point]:
    """Collapse consecutive points with the same identity; later points add their evidence."""
    merged: list[_Point] = []
    for pt in points:
        if merged and identity(merged[-1]) == identity(pt):
            merged[-1].evidence.extend(pt.evidence)
            continue
        if merged and merged[-1].at == pt.at:
            # Same instant, different state: the later report wins; keep the earlier evidence too.
            pt = _Point(pt.at, pt.state, pt.attrs, merged[-1].evidence + pt.evidence)
            merged.pop()
            if merged and identity(merged[-1]) == identity(pt):
                merged[-1].evidence.extend(pt.evidence)
                continue
        merged.append(pt)
    return merged


# --------------------------------------------------------------------------------------------- api lane


def _api_lane(facts: PodFacts) -> list[Interval]:
    out: list[Interval] = []
    phases = audited_phases(facts.audits) if facts.audits else []
    for inc in facts.incarnations:
        mine = [p for p in phases if _incarnation_at(facts, p[1]) is inc]
        out.extend(_api_incarnation(inc, mine, facts.audits))
    return out


def _api_incarnation(
    inc: Incarnation,
    audited: Sequence[tuple[str, datetime, str]] = (),
    audits: Sequence[AuditRecord] = (),
) -> list[Interval]:
    # Milestones: the earliest time any snapshot proves each state was reached.
    milestones: dict[str, tuple[datetime, dict[str, Any], list[str]]] = {}

    def reach(
        state: str, at: datetime | None, snap: PodSnapshot, attrs: dict[str, Any] | None = None
    ) -> None:
        # Evidence: the snapshot that dates the state, plus every snapshot showing it as its own state.
        if at is None:
            return
        have = milestones.get(state)
        if have is None or at < have[0]:
            milestones[state] = (at, attrs or {}, [snap.key] + (have[2] if have else []))
        elif snapshot_api_state(snap) == state:
            have[2].append(snap.key)

    deletion: tuple[datetime | None, str | None] = (None, None)  # the last deletion time, formatted
    for snap in inc.snapshots:
        state = snapshot_api_state(snap)
        # A status a restarted kubelet rewrote tells the phase from then (its startTime) on, not before.
        reach(
            ApiState.PENDING,
            (snap.start_time or snap.at) if snap.status_reset else (snap.created or snap.at),
            snap,
        )
        scheduled = snap.condition("PodScheduled")
        if snap.status_reset:
            pass  # a restarted kubelet rewrote startTime and the transition times: they date nothing
        elif scheduled is not None and scheduled.status == "True":
            reach(ApiState.SCHEDULED, scheduled.last_transition or snap.start_time or snap.at, snap)
        elif snap.node:
            reach(ApiState.SCHEDULED, snap.start_time or snap.at, snap)
        if not snap.status_reset:
            reach(ApiState.INITIALIZING, snap.start_time, snap)
        if snap.phase in ("Running", "Succeeded", "Failed"):
            starts = [
                r.started_at
                for c in snap.containers
                if c.kind == "regular"
                for r in (c.current_run, c.last)
                if r is not None and r.started_at is not None
            ]
            if starts or snap.phase == "Running":
                reach(ApiState.RUNNING, min(starts) if starts else snap.at, snap)
        if snap.deletion_timestamp is not None:
            if snap.deletion_timestamp is not deletion[0]:  # the snapshots share one parsed time
                deletion = (snap.deletion_timestamp, format_time(snap.deletion_timestamp))
            attrs: dict[str, Any] = {
                "deletion_timestamp": deletion[1],
                "grace_seconds": snap.deletion_grace_seconds,
            }
            sleeps = {c.name: c.prestop_sleep for c in snap.containers if c.prestop_sleep is not None}
            if sleeps:  # the preStop sleep (1.29+) spends that much of the grace budget
                attrs["prestop_sleep_seconds"] = sleeps
            reach(ApiState.TERMINATING, snap.deletion_requested_at, snap, attrs)
        if snap.terminal and state in (ApiState.SUCCEEDED, ApiState.FAILED):
            attrs = {"reason": snap.reason, "message": snap.message}
            reach(state, terminal_time(snap), snap, attrs)
        if snap.deleted:
            reach(ApiState.DELETED, snap.at, snap)

    # A whole-second deletionTimestamp dates the DELETE up to a second early: the audited request that set
    # it (``deletion_request``) dates it to the microsecond it was received.
    term = milestones.get(ApiState.TERMINATING)
    if term is not None and audits:
        grace = term[1].get("grace_seconds")
        request = deletion_request(audits, term[0], grace, inc.created or inc.first_at)
        if request is not None:
            milestones[ApiState.TERMINATING] = (request.received_at, term[1], [request.key, *term[2]])
    # An audited status patch that set the phase dates the change itself (``audited_phases``), unless a
    # snapshot showed that phase before the patch (then the patch did not change it).
    dated: set[str] = set()
    for state, at, key in audited:  # earliest first: only the first patch to set a phase changed it
        if state in dated:
            continue
        dated.add(state)
        have = milestones.get(state)
        if any(s.at < at and snapshot_api_state(s) == state for s in inc.snapshots):
            continue
        if have is None or have[0] != at:
            milestones[state] = (at, have[1] if have else {}, [key] + (have[2] if have else []))
    terminating = milestones.get(ApiState.TERMINATING)
    if terminating is not None:
        order = _stop_order(inc, terminating[0])
        if len(order) > 1:  # an order only when there is one (a lone container says nothing)
            terminating[1]["stop_order"] = order
    # Stable: at one instant, the terminal phase a snapshot showed first stands (the kubelet never moves a
    # pod out of a terminal phase the API shows: kubelet_pods.go generateAPIPodStatus forces it back).
    ordered = sorted(milestones.items(), key=lambda kv: (kv[1][0], API_RANK[kv[0]]))
    points: list[_Point] = []
    best_rank = -1
    for state, (at, attrs, evidence) in ordered:
        rank = API_RANK[state]
        if rank <= best_rank:
            continue  # a later report of an earlier stage (e.g. deletion of an already finished pod)
        best_rank = rank
        points.append(_Point(at, state, dict(attrs), list(evidence)))
    # Ready / not ready within running.
    points = _split_running_by_ready(inc, points)
    end = points[-1].at if points and points[-1].state == ApiState.DELETED else None
    return _chain(API_LANE, points, end)


def _stop_order(inc: Incarnation, since: datetime) -> list[str]:
    """The containers (regular ones and sidecars) in the order they stopped after ``since``: the
    kubelet stops the regular containers first, then the sidecars in the reverse of their order (1.29+)."""
    stops: dict[str, datetime] = {}
    for snap in inc.snapshots:
        for c in snap.containers:
            if c.kind != "regular" and not c.sidecar:
                continue
            for run in (c.current_run, c.last):
                if run is None or run.finished_at is None or run.finished_at < since:
                    continue
                if c.name not in stops or run.finished_at < stops[c.name]:
                    stops[c.name] = run.finished_at
    return sorted(stops, key=lambda n: (stops[n], n))


def _split_running_by_ready(inc: Incarnation, points: list[_Point]) -> list[_Point]:
    for i, pt in enumerate(points):
        if pt.state != ApiState.RUNNING:
            continue
        stop = points[i + 1].at if i + 1 < len(points) else None
        changes: list[tuple[datetime, bool, str]] = []
        for snap in inc.snapshots:
            ready = snap.condition("Ready")
            if ready is None or snapshot_api_state(snap) != ApiState.RUNNING:
                continue
            changes.append((ready.last_transition or snap.at, ready.status == "True", snap.key))
        changes.sort()
        initial = False
        for at, value, _ in changes:
            if at <= pt.at:
                initial = value
        split = [_Point(pt.at, pt.state, {**pt.attrs, "ready": initial}, list(pt.evidence))]
        for at, value, key in changes:
            if at <= pt.at or (stop is not None and at >= stop):
                continue
            if split[-1].attrs["ready"] == value:
                split[-1].evidence.append(key)
                continue
            split.append(_Point(at, pt.state, {**pt.attrs, "ready": value}, [key]))
        return points[:i] + split + points[i + 1 :]
    return points


# --------------------------------------------------------------------------------------------- containers


def _container_lanes(facts: PodFacts) -> dict[str, tuple[Interval, ...]]:
    kinds: dict[str, str] = {}
    sidecars: set[str] = set()
    for snap in facts.snapshots:
        for c in snap.containers:
            kinds[c.name] = c.kind
            if c.sidecar:
                sidecars.add(c.name)
    names = sorted(kinds, key=lambda n: (CONTAINER_KIND_ORDER.get(kinds[n], 3), n))
    lanes = {
        CONTAINER_LANE_PREFIX + n: _settle(
            iv for inc in facts.incarnations for iv in _container_lane(inc, n, kinds[n])
        )
        for n in names
    }
    # A sidecar (1.29+: an init container with restartPolicy Always) runs beside the regular containers
    # instead of finishing before them: its intervals say so.
    for n in sidecars:
        lane = CONTAINER_LANE_PREFIX + n
        lanes[lane] = tuple(replace(iv, attrs={**iv.attrs, "sidecar": True}) for iv in lanes[lane])
    return lanes


@dataclass(slots=True)
class _RunInfo:
    started_at: datetime | None
    finished_at: datetime | None = None
    reason: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    restart: int | None = None
    evidence: set[str] = field(default_factory=set)


def _container_lane(inc: Incarnation, name: str, kind: str) -> list[Interval]:
    """One container's runs within one incarnation; the last interval ends when the object is gone."""
    deleted_at = inc.deleted_at
    lane = CONTAINER_LANE_PREFIX + name
    runs: dict[datetime, _RunInfo] = {}
    orphan_finishes: list[_RunInfo] = []
    waits: list[tuple[datetime, str | None, str | None, str, datetime | None]] = []

    def add(run: Run, restart: int | None, key: str, fallback_finish: datetime) -> None:
        if run.started_at is None:
            if run.finished_at is not None or run.reason is not None or run.exit_code is not None:
                info = _RunInfo(
                    None, run.finished_at or fallback_finish, run.reason, run.exit_code, run.signal
                )
                info.evidence.add(key)
                orphan_finishes.append(info)
            return
        info = runs.setdefault(run.started_at, _RunInfo(run.started_at))
        info.evidence.add(key)
        if run.finished_at is not None and info.finished_at is None:
            info.finished_at = run.finished_at
            info.reason, info.exit_code, info.signal = run.reason, run.exit_code, run.signal
        if restart is not None and (info.restart is None or restart < info.restart):
            info.restart = restart

    for snap in inc.snapshots:
        for c in snap.containers:
            if c.name != name:
                continue
            if c.last is not None:
                add(c.last, max(c.restart_count - 1, 0), snap.key, snap.at)
            current = c.current_run
            if current is not None:
                add(current, c.restart_count, snap.key, snap.at)
            elif c.state == "waiting":
                waits.append((snap.at, c.reason, c.message, snap.key, snap.start_time))

    run_list = sorted(runs.values(), key=lambda r: r.started_at or r.finished_at or _EPOCH)
    spans: list[tuple[datetime, datetime | None]] = [
        (r.started_at, r.finished_at) for r in run_list if r.started_at
    ]
    points: list[tuple[datetime, int, _Point]] = []
    for r in run_list:
        assert r.started_at is not None
        attrs: dict[str, Any] = {"kind": kind, "restart": r.restart if r.restart is not None else 0}
        points.append(
            (r.started_at, 2, _Point(r.started_at, ContainerState.RUNNING, attrs, sorted(r.evidence)))
        )
        if r.finished_at is not None:
            points.append(
                (
                    r.finished_at,
                    0,
                    _Point(
                        r.finished_at, ContainerState.TERMINATED, _term_attrs(kind, r), sorted(r.evidence)
                    ),
                )
            )
    for r in orphan_finishes:
        assert r.finished_at is not None
        points.append(
            (
                r.finished_at,
                0,
                _Point(r.finished_at, ContainerState.TERMINATED, _term_attrs(kind, r), sorted(r.evidence)),
            )
        )
    first_known = min((p[0] for p in points), default=None)
    for at, reason, message, key, start_time in waits:
        if any(s <= at and (f is None or at < f) for s, f in spans):
            continue  # the container was running then, by its own start / finish times
        if (first_known is None or at <= first_known) and start_time is not None and start_time < at:
            at = start_time  # waiting since the kubelet started the pod
        points.append(
            (
                at,
                1,
                _Point(
                    at, ContainerState.WAITING, {"kind": kind, "reason": reason, "message": message}, [key]
                ),
            )
        )
    points.sort(key=lambda p: (p[0], p[1], p[2].state, sorted(p[2].evidence)))

    def identity(pt: _Point) -> object:
        if pt.state == ContainerState.WAITING:
            return (pt.state, pt.attrs.get("reason"))
        return (pt.state, pt.at, id(pt))  # every run start / finish is its own interval

    merged = _merge_points([p[2] for p in points], identity)
    return _chain(lane, merged, deleted_at)


def _term_attrs(kind: str, r: _RunInfo) -> dict[str, Any]:
    attrs: dict[str, Any] = {"kind": kind, "reason": r.reason, "exit_code": r.exit_code}
    if r.signal is not None:
        attrs["signal"] = r.signal
    if r.restart is not None:
        attrs["restart"] = r.restart
    return attrs


# --------------------------------------------------------------------------------------------- conditions


_ABSENT = "absent"  # a condition a later status no longer lists (never an interval of its own)


def _gone_since(points: list[tuple[datetime, int, _Point]], snap: PodSnapshot) -> bool:
    """A status that lists conditions, but not this one any more, after it was shown: it ended by then
    (dated by the snapshot; never at or before the state it ends, which would erase that state)."""
    return bool(points and snap.conditions and not snap.deleted and snap.at > max(p[0] for p in points))


def _condition_lanes(facts: PodFacts) -> dict[str, tuple[Interval, ...]]:
    types = {c.type for s in facts.snapshots for c in s.conditions}
    order = [t for t in CONDITION_ORDER if t in types] + sorted(types - set(CONDITION_ORDER))
    lanes: dict[str, tuple[Interval, ...]] = {}
    for ctype in order:
        lane = CONDITION_LANE_PREFIX + ctype
        intervals: list[Interval] = []
        for inc in facts.incarnations:
            points: list[tuple[datetime, int, _Point]] = []
            for i, snap in enumerate(inc.snapshots):
                cond = snap.condition(ctype)
                if cond is None:
                    # A condition the status no longer lists (PodResizePending / PodResizeInProgress are
                    # removed when the resize is done) ended by that snapshot: it is no longer shown.
                    if _gone_since(points, snap):
                        points.append((snap.at, i, _Point(snap.at, _ABSENT, {}, [snap.key])))
                    continue
                at = cond.last_transition or snap.at
                attrs = {"reason": cond.reason, "message": cond.message}
                points.append((at, i, _Point(at, cond.status.lower(), attrs, [snap.key])))
            points.sort(key=lambda p: (p[0], p[1]))
            merged = _merge_points([p[2] for p in points], lambda pt: (pt.state, pt.attrs.get("reason")))
            intervals.extend(iv for iv in _chain(lane, merged, inc.deleted_at) if iv.state != _ABSENT)
        lanes[lane] = _settle(intervals)
    return lanes


# ------------------------------------------------------------------------------------- resize, generation

RESIZE_LANE = "resize"
GENERATION_LANE = "generation"


def _allocated(snap: PodSnapshot) -> dict[str, Any]:
    return {c.name: dict(c.allocated) for c in snap.containers if c.allocated is not None}


def _resize_lane(facts: PodFacts) -> dict[str, tuple[Interval, ...]]:
    """An in-place resize (1.33+) from the kubelet's first word on it to its end: ``pending`` while
    ``PodResizePending`` is True (``reason`` Deferred / Infeasible), ``in_progress`` while
    ``PodResizeInProgress`` is True; it ends when the status lists neither (the resize done, or given
    up). ``allocated`` is what the kubelet had allocated per container as the state began."""
    intervals: list[Interval] = []
    for inc in facts.incarnations:
        points: list[tuple[datetime, int, _Point]] = []
        for i, snap in enumerate(inc.snapshots):
            pending, progress = snap.condition("PodResizePending"), snap.condition("PodResizeInProgress")
            cond = progress if progress is not None and progress.status == "True" else None
            state = "in_progress"
            if pending is not None and pending.status == "True":
                cond, state = pending, "pending"
            if cond is None:
                if _gone_since(points, snap):
                    points.append((snap.at, i, _Point(snap.at, _ABSENT, {}, [snap.key])))
                continue
            at = cond.last_transition or snap.at
            attrs = {"reason": cond.reason, "message": cond.message, "allocated": _allocated(snap)}
            points.append((at, i, _Point(at, state, attrs, [snap.key])))
        points.sort(key=lambda p: (p[0], p[1]))
        merged = _merge_points([p[2] for p in points], lambda pt: (pt.state, pt.attrs.get("reason")))
        intervals.extend(iv for iv in _chain(RESIZE_LANE, merged, inc.deleted_at) if iv.state != _ABSENT)
    return {RESIZE_LANE: _settle(intervals)} if intervals else {}


def _generation_lane(facts: PodFacts) -> dict[str, tuple[Interval, ...]]:
    """Whether the kubelet had observed the pod's newest spec (``status.observedGeneration``, 1.33+):
    ``pending`` while ``metadata.generation`` is ahead of it (a spec change, such as a resize, not yet
    acted on), else ``observed``; from the snapshots that carry both (none before 1.33)."""
    intervals: list[Interval] = []
    for inc in facts.incarnations:
        points: list[_Point] = []
        for snap in inc.snapshots:
            gen, seen = snap.generation, snap.observed_generation
            if gen is None or seen is None or snap.deleted:
                continue
            state = "pending" if gen > seen else "observed"
            attrs = {"generation": gen, "observed_generation": seen}
            points.append(_Point(snap.at, state, attrs, [snap.key]))
        points.sort(key=lambda pt: (pt.at, pt.attrs["generation"], pt.attrs["observed_generation"]))
        merged = _merge_points(
            points, lambda pt: (pt.state, pt.attrs["generation"], pt.attrs["observed_generation"])
        )
        intervals.extend(_chain(GENERATION_LANE, merged, inc.deleted_at))
    return {GENERATION_LANE: _settle(intervals)} if intervals else {}


# ------------------------------------------------------------------------------------------- requesters


def _with_requester(facts: PodFacts, intervals: tuple[Interval, ...]) -> tuple[Interval, ...]:
    """Terminating intervals name the audited request that began them (``attrs.who``, ``request``, the
    evictions refused before a granted one), citing it as evidence."""
    out = []
    for iv in intervals:
        inc = _incarnation_at(facts, iv.start)
        cause = (
            termination_request(facts.audits, iv.start, inc.created or inc.first_at if inc else None)
            if iv.state == "terminating"
            else None
        )
        if cause is None:
            out.append(iv)
            continue
        attrs = {**iv.attrs, **termination_attrs(facts.audits, cause)}
        out.append(replace(iv, attrs=attrs, evidence=tuple(sorted({*iv.evidence, cause.key}))))
    return tuple(out)


def _incarnation_at(facts: PodFacts, at: datetime) -> Incarnation | None:
    """The incarnation alive at ``at`` (the last one created at or before it)."""
    found = None
    for inc in facts.incarnations:
        if (inc.created or inc.first_at) <= at:
            found = inc
    return found or (facts.incarnations[0] if facts.incarnations else None)


# --------------------------------------------------------------------------------------------- markers


# "Post-termination container state" lists each container as ``(NAME state=S exitCode=N finishedAt=T)``.
_CONTAINER_STATE = re.compile(
    r"\((?P<name>[^\s()]+) state=(?P<state>\w+) exitCode=(?P<code>-?\d+) finishedAt=(?P<at>[^\s()]+)\)"
)


def _container_finishes(m: KubeletMarkerRecord) -> list[Marker]:
    """A ``ContainerFinished`` marker at each finish time a "Post-termination container state" line gives
    (the kubelet's own record of when each container ended, exact to the nanosecond)."""
    out = []
    for found in _CONTAINER_STATE.finditer(str(m.payload.get("containers") or "")):
        if found.group("state") != "exited":
            continue
        try:
            at = parse_time(found.group("at"))
        except ValueError:
            continue
        if at is None or at.year < 1971:  # Go's zero time: never ran
            continue
        name, code = found.group("name"), int(found.group("code"))
        attrs = {"container": name, "exit_code": code, "from": "post_termination_state"}
        out.append(
            Marker(at, "kubelet", "ContainerFinished", f"container {name} exited ({code})", attrs, (m.key,))
        )
    return out


# PLEG's word on a container (or the sandbox, which PLEG reports as one): each is on the pod's timeline.
_PLEG_MARKERS = {
    Transition.CONTAINER_STARTED: ("ContainerStarted", "container {id} started (PLEG)"),
    Transition.CONTAINER_DIED: ("ContainerDied", "container {id} died (PLEG)"),
    Transition.CONTAINER_FINISHED: ("ContainerFinished", "container {id} exited ({code}) (PLEG)"),
}


def _pleg_markers(facts: PodFacts) -> list[Marker]:
    out = []
    for ev in facts.worker_events:
        made = _PLEG_MARKERS.get(ev.name)
        if made is None:
            continue
        cid = str(ev.payload.get("container_id") or "")
        code = ev.payload.get("exit_code")
        attrs = {"container_id": cid or None, "exit_code": code, "from": "pleg"}
        message = made[1].format(id=cid[:12] or "?", code=code if code is not None else "?")
        out.append(Marker(ev.at, "kubelet", made[0], message, attrs, (ev.key,)))
    return out


def _removal_markers(facts: PodFacts) -> list[Marker]:
    """A ``Removed`` marker at each `SyncLoop REMOVE`: the pod left the kubelet's config (the API object is
    gone, or a static pod's manifest). It bounds the worker only sometimes (docs/kubelet-lines.md), so
    the moment is shown on its own."""
    out = []
    for ev in facts.worker_events:
        if ev.name != Transition.SYNCLOOP_REMOVE:
            continue
        source = ev.payload.get("config_source")
        attrs = {"config_source": source, "from": "syncloop"}
        message = f"SyncLoop REMOVE (source {source or '?'}): the pod left the kubelet's config"
        out.append(Marker(ev.at, "kubelet", "Removed", message, attrs, (ev.key,)))
    return out


def _markers(facts: PodFacts) -> tuple[Marker, ...]:
    by_uid: dict[str, list[Any]] = {}
    for ev in facts.events:
        by_uid.setdefault(ev.uid, []).append(ev)
    markers: list[Marker] = []
    for records in by_uid.values():
        best = max(records, key=lambda r: (r.count, r.at, r.key))
        involved = best.payload.get("involved")
        field_path = involved.get("field_path") if isinstance(involved, Mapping) else None
        attrs = {
            "type": best.type,
            "count": best.count,
            "component": best.payload.get("component"),
            "first": best.payload.get("first"),
            "last": best.payload.get("last"),
            "field_path": field_path,
            "event_uid": best.uid,
        }
        markers.append(
            Marker(best.at, "event", best.reason, best.message, attrs, tuple(sorted(r.key for r in records)))
        )
    for m in facts.kubelet_markers:
        attrs = {k: v for k, v in sorted(m.payload.items()) if k not in ("reason", "message")}
        markers.append(Marker(m.at, "kubelet", m.reason, m.message, attrs, (m.key,)))
        if m.reason == "ContainerState":
            markers.extend(_container_finishes(m))
    markers.extend(_pleg_markers(facts))
    markers.extend(_removal_markers(facts))
    for record in facts.audits:
        made = marker_of(record, facts.audits)
        if made is not None:
            reason, message, attrs = made
            markers.append(Marker(record.at, "audit", reason, message, attrs, (record.key,)))
    markers.sort(key=lambda m: (m.at, m.kind, m.reason, m.evidence))
    return tuple(markers)
