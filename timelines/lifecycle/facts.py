"""Read the observations of one pod into typed, ordered facts that ``derive`` and ``findings`` share.

The payload shapes are those of ``docs/observations.md``. Reading is tolerant: a value that cannot be
read is skipped and named in ``PodFacts.problems`` (never fatal, never silent). Duplicates (same
``dedupe_key``) collapse to one deterministic representative, and everything is ordered by a key that
does not depend on arrival order.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from datetime import UTC, datetime, timedelta
from typing import Any

from timelines.lifecycle.audit_evidence import AuditRecord, Life, records_for
from timelines.lifecycle.observation import SORT_KEY, Kind, Observation
from timelines.lifecycle.record import record
from timelines.lifecycle.timeline import ApiState, parse_time

POD_KINDS = frozenset({Kind.POD, Kind.POD_DELETED})
USED_KINDS = frozenset(
    {
        Kind.POD,
        Kind.POD_DELETED,
        Kind.EVENT,
        Kind.WORKER,
        Kind.SPAN,
        Kind.KUBELET_MARKER,
        Kind.KUBELET_PROCESS,
        Kind.AUDIT,
    }
)
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
STATIC_UID = re.compile(r"^[0-9a-f]{32}$")
# A mirror pod is created by its kubelet while it starts the static pod: a startTime much later than the
# mirror's creation was written by a later kubelet process.
STATIC_START_SLACK = timedelta(minutes=10)
_START_SLACK = timedelta(seconds=1)  # a container start more than this before startTime is a reset


def status_was_reset(
    start_time: datetime | None, created: datetime | None, static: bool, container_starts: Iterable[datetime]
) -> bool:
    """Whether a pod status was rewritten from scratch by a restarted kubelet (``PodSnapshot.status_reset``):
    ``startTime`` after the start of a container's current run (``container_starts``; a previous run,
    ``lastState``, may well predate a new life's start), or a static pod's mirror whose ``startTime`` is
    long after its creation."""
    if start_time is None:
        return False
    before = start_time - _START_SLACK
    if any(at < before for at in container_starts):
        return True
    return static and created is not None and start_time - created > STATIC_START_SLACK


@record(frozen=True)
class Condition:
    """One pod condition as a snapshot reported it."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str | None
    message: str | None
    last_transition: datetime | None


@record(frozen=True)
class Run:
    """One run of a container (identified by its ``started_at``), from ``state`` or ``last_state``."""

    started_at: datetime | None
    finished_at: datetime | None
    reason: str | None
    exit_code: int | None
    signal: int | None


@record(frozen=True)
class ContainerStatus:
    """One container status as a snapshot reported it."""

    name: str
    kind: str  # "regular" | "init" | "ephemeral"
    state: str | None  # "waiting" | "running" | "terminated" | None
    reason: str | None
    message: str | None
    exit_code: int | None
    signal: int | None
    started_at: datetime | None
    finished_at: datetime | None
    restart_count: int
    last: Run | None
    # 1.29+: an init container with ``restartPolicy: Always`` is a sidecar; ``preStop.sleep.seconds``;
    # 1.33+ in-place resize: the resources applied and allocated (``{"requests"/"limits": {...}}``).
    restart_policy: str | None = None
    prestop_sleep: int | None = None
    resources: Mapping[str, Any] | None = None
    allocated: Mapping[str, Any] | None = None
    # ``current_run``, made on first use (lanes and findings ask for it many times per status).
    _current: tuple[Run | None] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def sidecar(self) -> bool:
        """An init container that keeps running beside the regular ones (``restartPolicy: Always``)."""
        return self.kind == "init" and self.restart_policy == "Always"

    @property
    def current_run(self) -> Run | None:
        """The run in ``state`` when the container is running or terminated."""
        if self._current is None:
            run = None
            if self.state in ("running", "terminated"):
                finished = self.finished_at if self.state == "terminated" else None
                run = Run(self.started_at, finished, self.reason, self.exit_code, self.signal)
            object.__setattr__(self, "_current", (run,))  # a cache on a frozen value
            return run
        return self._current[0]


@record(frozen=True)
class PodSnapshot:
    """One ``pod`` / ``pod_deleted`` observation, read."""

    key: str
    at: datetime
    deleted: bool
    resource_version: int | None
    uid: str | None
    namespace: str | None
    name: str | None
    node: str | None
    created: datetime | None
    deletion_timestamp: datetime | None
    deletion_grace_seconds: int | None
    grace_seconds: int | None
    static: bool
    owner: dict[str, Any] | None
    phase: str | None
    reason: str | None
    message: str | None
    start_time: datetime | None
    conditions: tuple[Condition, ...]
    containers: tuple[ContainerStatus, ...]
    finalizers: tuple[str, ...] = ()
    generation: int | None = None  # metadata.generation: bumped by each spec change (a resize)
    observed_generation: int | None = None  # status.observedGeneration: the kubelet saw it (1.33+)
    # ``status_reset``, worked out on first use (it is asked several times per snapshot by lanes and
    # findings); not part of the snapshot's value.
    _status_reset: bool | None = field(default=None, init=False, repr=False, compare=False)
    # ``snapshot_api_state``, the same way (the lanes and findings ask it about 30 times a pod).
    _api_state: str | None = field(default=None, init=False, repr=False, compare=False)
    # ``deletion_requested_at``, the same way (asked about ten times a pod).
    _requested: tuple[datetime | None] | None = field(default=None, init=False, repr=False, compare=False)

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, or None."""
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    @property
    def deletion_requested_at(self) -> datetime | None:
        """When the DELETE was requested: deletionTimestamp minus deletionGracePeriodSeconds."""
        cached = self._requested
        if cached is None:
            at = self.deletion_timestamp
            if at is not None:
                at -= timedelta(seconds=self.deletion_grace_seconds or 0)
            cached = (at,)
            object.__setattr__(self, "_requested", cached)  # a cache on a frozen value
        return cached[0]

    @property
    def terminal(self) -> bool:
        """True when the phase is Succeeded or Failed."""
        return self.phase in TERMINAL_PHASES

    @property
    def status_reset(self) -> bool:
        """A restarted kubelet rewrote this status from scratch, so its times are the restart's.

        ``startTime`` is set once, when a kubelet first acknowledges the pod; a container's current run
        cannot start before that. A restarted kubelet that has no status of its own for a pod (static pods: their
        manifest carries none) sets it again, and every condition's transition time with it. Signs: a
        container that started before ``startTime``, or a static pod's mirror (created by its kubelet as it
        starts the pod) whose ``startTime`` is long after its creation.
        """
        if self._status_reset is None:
            starts = [
                c.started_at
                for c in self.containers
                if c.state in ("running", "terminated") and c.started_at is not None
            ]
            reset = status_was_reset(self.start_time, self.created, self.static, starts)
            object.__setattr__(self, "_status_reset", reset)  # a cache on a frozen value
            return reset
        return self._status_reset


@record(frozen=True)
class Incarnation:
    """The snapshots of one API object lifetime under this UID (a static pod may reuse its UID)."""

    index: int
    created: datetime | None
    snapshots: tuple[PodSnapshot, ...]
    # ``first_run_start`` per container kinds, made once (the lanes and findings ask it four times a pod).
    _first_runs: dict[tuple[str, ...], dict[str, datetime]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def first_at(self) -> datetime:
        """Observation time of its first snapshot."""
        return self.snapshots[0].at

    @property
    def deleted_at(self) -> datetime | None:
        """When the API object was seen gone (first pod_deleted), else None."""
        for snap in self.snapshots:
            if snap.deleted:
                return snap.at
        return None


@record(frozen=True)
class WorkerEvent:
    """A pod-worker transition (a ``worker`` observation) or one end of a ``span``."""

    at: datetime
    name: str  # a Transition constant, or "span:syncPod:start" / "span:syncPod:end" …
    key: str
    payload: Mapping[str, Any]
    node: str | None = None

    @property
    def pid(self) -> int | None:
        """The kubelet process that logged it (klog header / journald prefix), when known."""
        value = self.payload.get("pid")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


@record(frozen=True)
class KubeletProcess:
    """One kubelet process on one node as a log showed it (a ``kubelet_process`` observation)."""

    key: str
    node: str | None
    pid: int | None
    first_at: datetime
    last_at: datetime
    started_at: datetime | None  # the process's start line ("Kubelet version"), when the log has it
    version: str | None
    verbosity: int | None  # the highest klog V level its lines show
    starts: tuple[datetime, ...] = ()  # every start line (a pid-less JSON log may show several processes)
    restart: bool = False  # known to be a restart (a pod status it rewrote from scratch says so)


@record(frozen=True)
class EventRecord:
    """A ``event`` observation, read."""

    key: str
    at: datetime
    uid: str
    reason: str
    type: str
    message: str
    count: int
    payload: Mapping[str, Any]


@record(frozen=True)
class KubeletMarkerRecord:
    """A ``kubelet_marker`` observation, read."""

    key: str
    at: datetime
    reason: str
    message: str
    payload: Mapping[str, Any]
    node: str | None = None

    @property
    def pid(self) -> int | None:
        value = self.payload.get("pid")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


@record(frozen=True)
class PodFacts:
    """All facts about one pod UID, deduplicated and ordered."""

    uid: str
    observations: tuple[Observation, ...]
    incarnations: tuple[Incarnation, ...]
    worker_events: tuple[WorkerEvent, ...]
    events: tuple[EventRecord, ...]
    kubelet_markers: tuple[KubeletMarkerRecord, ...]
    problems: tuple[str, ...] = field(default=())
    # Node-level context the resolver attached (no pod UID): the kubelet processes of the pod's nodes and
    # node-level kubelet lines (the eviction manager reclaiming, a shutdown group timing out).
    processes: tuple[KubeletProcess, ...] = field(default=())
    node_markers: tuple[KubeletMarkerRecord, ...] = field(default=())
    # Audited requests about this pod (joined by UID, else by name and time: audit_evidence.belongs).
    audits: tuple[AuditRecord, ...] = field(default=())

    _snapshots: tuple[PodSnapshot, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _latest: tuple[datetime | None] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def snapshots(self) -> tuple[PodSnapshot, ...]:
        """Every snapshot of every incarnation, in order."""
        if self._snapshots is None:
            flat = tuple(s for inc in self.incarnations for s in inc.snapshots)
            object.__setattr__(self, "_snapshots", flat)  # a cache on a frozen value
            return flat
        return self._snapshots

    @property
    def latest_observed(self) -> datetime | None:
        """The newest ``observed_at`` of the pod's own observations (the default ``now``)."""
        if self._latest is None:
            latest = max((o.observed_at for o in self.observations if o.pod_uid), default=None)
            object.__setattr__(self, "_latest", (latest,))  # a cache on a frozen value
            return latest
        return self._latest[0]


def canonical_observations(observations: Iterable[Observation]) -> tuple[Observation, ...]:
    """Deduplicate by ``dedupe_key`` and sort by ``sort_key``; the result does not depend on input order.

    When two observations share a key but differ (which the contract forbids), the one with the
    smallest (sort_key, canonical payload JSON) wins, so the choice is still order-free.
    """
    chosen: dict[str, Observation] = {}
    for obs in observations:
        best = chosen.get(obs.dedupe_key)
        # The payload's canonical JSON only breaks a tie between duplicates (rare): not made otherwise.
        if best is None or (obs.sort_key, _canonical_json(obs.payload)) < (
            best.sort_key,
            _canonical_json(best.payload),
        ):
            chosen[obs.dedupe_key] = obs
    return tuple(sorted(chosen.values(), key=SORT_KEY))


def _canonical_json(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, default=str, ensure_ascii=True)


def collect_facts(observations: Iterable[Observation]) -> PodFacts:
    """Read the observations of ONE pod UID into ``PodFacts``.

    Kinds other than pod, pod_deleted, event, worker, span, kubelet_marker, kubelet_process and audit are
    ignored. Observations without a pod UID are node-level context (``processes``, ``node_markers``), or
    audited requests (``audits``: those about this pod's incarnations; the rest are dropped).
    Raises ValueError when the observations carry more than one pod UID, or none at all.
    """
    canon = canonical_observations(o for o in observations if o.kind in USED_KINDS)
    uids = sorted({o.pod_uid for o in canon if o.pod_uid})
    if len(uids) > 1:
        raise ValueError(f"observations of one pod expected, got pod UIDs {uids[:5]}")
    if not uids:
        raise ValueError("no observation names a pod UID; expected the observations of one pod")
    reader = _Reader()
    snapshots = [reader.snapshot(o) for o in canon if o.kind in POD_KINDS]
    snapshots.sort(
        key=lambda s: (s.at, s.resource_version if s.resource_version is not None else -1, s.deleted, s.key)
    )
    worker_events: list[WorkerEvent] = []
    events: list[EventRecord] = []
    markers: list[KubeletMarkerRecord] = []
    node_markers: list[KubeletMarkerRecord] = []
    processes: list[KubeletProcess] = []
    for obs in canon:
        if obs.kind == Kind.KUBELET_PROCESS:
            process = reader.process(obs)
            if process is not None:
                processes.append(process)
        elif obs.pod_uid is None:
            if obs.kind == Kind.KUBELET_MARKER:
                node_markers.append(_marker_record(obs))
        elif obs.kind == Kind.WORKER:
            name = obs.payload.get("transition")
            if isinstance(name, str) and name:
                worker_events.append(
                    WorkerEvent(_utc(obs.observed_at), name, obs.dedupe_key, obs.payload, obs.node)
                )
            else:
                reader.problem(obs, f"transition {name!r} is not a Transition name")
        elif obs.kind == Kind.SPAN:
            worker_events.extend(reader.span_events(obs))
        elif obs.kind == Kind.EVENT:
            events.append(reader.event(obs))
        elif obs.kind == Kind.KUBELET_MARKER:
            markers.append(_marker_record(obs))
    worker_events.sort(key=lambda e: (e.at, e.name, e.key))
    incarnations = _incarnations(snapshots)
    audits = records_for((o for o in canon if o.kind == Kind.AUDIT), _lives(uids[0], incarnations))
    if any(o.kind == Kind.AUDIT for o in canon):
        mine = {r.key for r in audits}
        canon = tuple(o for o in canon if o.kind != Kind.AUDIT or o.dedupe_key in mine)
    return PodFacts(
        uid=uids[0],
        observations=canon,
        incarnations=incarnations,
        worker_events=tuple(worker_events),
        events=tuple(events),
        kubelet_markers=tuple(markers),
        problems=tuple(reader.problems),
        processes=tuple(sorted(processes, key=lambda p: (p.first_at, p.key))),
        node_markers=tuple(node_markers),
        audits=audits,
    )


def _lives(uid: str, incarnations: tuple[Incarnation, ...]) -> list[Life]:
    """Each incarnation's name and span, for joining audited requests that carry no UID."""
    lives = []
    for inc in incarnations:
        named = [s for s in inc.snapshots if s.name]
        last = named[-1] if named else None
        lives.append(
            Life(
                uid=uid,
                namespace=last.namespace if last else None,
                name=last.name if last else None,
                created=inc.created or inc.first_at,
                ended=inc.deleted_at,
            )
        )
    return lives


def _marker_record(obs: Observation) -> KubeletMarkerRecord:
    return KubeletMarkerRecord(
        key=obs.dedupe_key,
        at=_utc(obs.observed_at),
        reason=_str(obs.payload.get("reason")) or "",
        message=_str(obs.payload.get("message")) or "",
        payload=obs.payload,
        node=obs.node,
    )


def _incarnations(snapshots: list[PodSnapshot]) -> tuple[Incarnation, ...]:
    """Group snapshots by creation time: a different ``created`` is a new API object under this UID."""
    groups: dict[datetime | None, list[PodSnapshot]] = {}
    order: list[datetime | None] = []
    current: datetime | None = None
    for snap in snapshots:
        created = snap.created if snap.created is not None else current
        if created not in groups:
            groups[created] = []
            order.append(created)
        groups[created].append(snap)
        current = created
    # A snapshot without a creation time joined the incarnation before it; if it came first it forms a
    # group keyed None, which merges into the first dated incarnation.
    if None in groups and len(order) > 1:
        first_dated = next(c for c in order if c is not None)
        groups[first_dated] = sorted(
            groups.pop(None) + groups[first_dated],
            key=lambda s: (
                s.at,
                s.resource_version if s.resource_version is not None else -1,
                s.deleted,
                s.key,
            ),
        )
        order.remove(None)
    dated = sorted(order, key=lambda c: (c is None, c or datetime.min.replace(tzinfo=UTC)))
    return tuple(Incarnation(i, created, tuple(groups[created])) for i, created in enumerate(dated))


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


def _str(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


class _Reader:
    """Reads payload values, collecting what it could not read instead of raising."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        # One pod's snapshots repeat the same times (creation, start, container starts): parse each once.
        self._times: dict[str, datetime] = {}

    def problem(self, obs: Observation, text: str) -> None:
        self.problems.append(f"{obs.dedupe_key}: {text}")

    def time(self, obs: Observation, data: Mapping[str, Any], key: str) -> datetime | None:
        text = data.get(key)
        if text is None:
            return None
        if type(text) is str and (known := self._times.get(text)) is not None:
            return known
        try:
            value = parse_time(text)
            if value is not None and type(text) is str:
                self._times[text] = value
            return value
        except ValueError as exc:
            self.problem(obs, f"{key}: {exc}")
            return None

    def int(self, obs: Observation, data: Mapping[str, Any], key: str) -> int | None:
        value = data.get(key)
        if value is None or type(value) is int:  # the common cases first (bool is not int's type)
            return value
        if isinstance(value, bool):
            self.problem(obs, f"{key} {value!r} is not an integer")
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, str | float):
            try:
                return int(value)
            except ValueError:
                pass
        self.problem(obs, f"{key} {value!r} is not an integer")
        return None

    def mapping(self, obs: Observation, data: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
        value = data.get(key)
        if value is None or type(value) is dict:  # the common cases first (a decoded JSON object)
            return value
        if isinstance(value, Mapping):
            return value
        self.problem(obs, f"{key} is not an object")
        return None

    def items(self, obs: Observation, data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
        value = data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(obs, f"{key} is not a list")
            return []
        good = [v for v in value if type(v) is dict or isinstance(v, Mapping)]
        if len(good) != len(value):
            self.problem(obs, f"{key} has {len(value) - len(good)} entries that are not objects")
        return good

    def snapshot(self, obs: Observation) -> PodSnapshot:
        # The hottest reader of the derive stage (a pod's every snapshot, each container status and
        # condition of it): local names and positional constructors, the values read in the same order
        # as ever (so the same problems come out in the same order).
        p = obs.payload
        time, int_, problem = self.time, self.int, self.problem
        conditions = []
        for c in self.items(obs, p, "conditions"):
            get = c.get
            ctype = _str(get("type"))
            if not ctype:
                problem(obs, "a condition has no type")
                continue
            conditions.append(
                Condition(
                    ctype,
                    _str(get("status")) or "Unknown",
                    _str(get("reason")),
                    _str(get("message")),
                    time(obs, c, "last_transition"),
                )
            )
        containers = []
        for c in self.items(obs, p, "containers"):
            get = c.get
            cname = _str(get("name"))
            if not cname:
                problem(obs, "a container status has no name")
                continue
            last = get("last_state")
            if last is not None and type(last) is not dict and not isinstance(last, Mapping):
                last = self.mapping(obs, c, "last_state")  # names the problem
            last_run = None
            if last is not None and last.get("state") == "terminated":
                last_run = Run(
                    time(obs, last, "started_at"),
                    time(obs, last, "finished_at"),
                    _str(last.get("reason")),
                    int_(obs, last, "exit_code"),
                    int_(obs, last, "signal"),
                )
            state = _str(get("state"))
            if state not in (None, "waiting", "running", "terminated"):
                problem(obs, f"container {cname} state {state!r} is not waiting|running|terminated")
                state = None
            containers.append(
                ContainerStatus(
                    cname,
                    _str(get("kind")) or "regular",
                    state,
                    _str(get("reason")),
                    _str(get("message")),
                    int_(obs, c, "exit_code"),
                    int_(obs, c, "signal"),
                    time(obs, c, "started_at"),
                    time(obs, c, "finished_at"),
                    int_(obs, c, "restart_count") or 0,
                    last_run,
                    _str(get("restart_policy")),
                    int_(obs, c, "prestop_sleep_seconds"),
                    self.mapping(obs, c, "resources"),
                    self.mapping(obs, c, "allocated_resources"),
                )
            )
        get = p.get
        owner = self.mapping(obs, p, "owner")
        return PodSnapshot(
            obs.dedupe_key,
            _utc(obs.observed_at),
            obs.kind == Kind.POD_DELETED,
            int_(obs, p, "resource_version"),
            _str(get("uid")) or obs.pod_uid,
            _str(get("namespace")) or obs.namespace,
            _str(get("name")) or obs.name,
            _str(get("node")) or obs.node,
            time(obs, p, "created"),
            time(obs, p, "deletion_timestamp"),
            int_(obs, p, "deletion_grace_seconds"),
            int_(obs, p, "grace_seconds"),
            bool(get("static", False)),
            dict(owner) if owner is not None else None,
            _str(get("phase")),
            _str(get("reason")),
            _str(get("message")),
            time(obs, p, "start_time"),
            tuple(conditions),
            tuple(containers),
            tuple(str(f) for f in get("finalizers") or () if isinstance(f, str)),
            int_(obs, p, "generation"),
            int_(obs, p, "observed_generation"),
        )

    def process(self, obs: Observation) -> KubeletProcess | None:
        p = obs.payload
        first = self.time(obs, p, "first_at") or _utc(obs.observed_at)
        last = self.time(obs, p, "last_at") or first
        if last < first:
            self.problem(obs, "last_at is before first_at")
            last = first
        pid = self.int(obs, p, "pid")
        verbosity = self.int(obs, p, "verbosity")
        return KubeletProcess(
            key=obs.dedupe_key,
            node=obs.node,
            pid=pid,
            first_at=first,
            last_at=last,
            started_at=self.time(obs, p, "started_at"),
            version=_str(p.get("version")),
            verbosity=verbosity,
            starts=tuple(
                sorted(t for t in (self.time(obs, {"t": v}, "t") for v in p.get("starts") or []) if t)
            ),
            restart=bool(p.get("from_status_reset")),
        )

    def span_events(self, obs: Observation) -> list[WorkerEvent]:
        p = obs.payload
        name = _str(p.get("name")) or ""
        canonical = {
            "syncpod": "syncPod",
            "syncterminatingpod": "syncTerminatingPod",
            "syncterminatedpod": "syncTerminatedPod",
        }
        span = canonical.get(name.lower())
        if span is None:
            self.problem(obs, f"span name {name!r} is not syncPod, syncTerminatingPod or syncTerminatedPod")
            return []
        start = self.time(obs, p, "start") or _utc(obs.observed_at)
        end = self.time(obs, p, "end")
        out = [WorkerEvent(start, f"span:{span}:start", obs.dedupe_key, p, obs.node)]
        if end is not None:
            if end < start:
                self.problem(obs, f"span ends ({end.isoformat()}) before it starts ({start.isoformat()})")
                end = start
            out.append(WorkerEvent(end, f"span:{span}:end", obs.dedupe_key, p, obs.node))
        return out

    def event(self, obs: Observation) -> EventRecord:
        p = obs.payload
        count = self.int(obs, p, "count")
        return EventRecord(
            key=obs.dedupe_key,
            at=_utc(obs.observed_at),
            uid=_str(p.get("uid")) or obs.dedupe_key,
            reason=_str(p.get("reason")) or "",
            type=_str(p.get("type")) or "Normal",
            message=_str(p.get("message")) or "",
            count=count if count is not None else 1,
            payload=p,
        )


def first_run_start(inc: Incarnation, kinds: tuple[str, ...] = ("regular",)) -> dict[str, datetime]:
    """Per container name (of the given kinds), the earliest start time any snapshot reports (made once
    per incarnation and kinds: read it, never change it)."""
    cache = inc._first_runs
    if cache is None:
        cache = {}
        object.__setattr__(inc, "_first_runs", cache)  # a cache on a read-only value
    starts = cache.get(kinds)
    if starts is None:
        starts = cache[kinds] = _first_run_start(inc, kinds)
    return starts


def _first_run_start(inc: Incarnation, kinds: tuple[str, ...]) -> dict[str, datetime]:
    starts: dict[str, datetime] = {}
    for snap in inc.snapshots:
        for c in snap.containers:
            if c.kind not in kinds:
                continue
            for run in (c.current_run, c.last):
                if (
                    run is not None
                    and run.started_at is not None
                    and (c.name not in starts or run.started_at < starts[c.name])
                ):
                    starts[c.name] = run.started_at
    return starts


def all_containers_started_at(inc: Incarnation) -> datetime | None:
    """When every regular container had started at least once, or None if some never did (as far as known)."""
    names = {c.name for s in inc.snapshots for c in s.containers if c.kind == "regular"}
    starts = first_run_start(inc)
    if not names or any(n not in starts for n in names):
        return None
    return max(starts.values())


def snapshot_api_state(snap: PodSnapshot) -> str:
    """The api-lane state a single snapshot shows on its own."""
    state = snap._api_state
    if state is None:
        state = _api_state(snap)
        object.__setattr__(snap, "_api_state", state)  # a cache on a read-only value
    return state


def _api_state(snap: PodSnapshot) -> str:
    if snap.deleted:
        return ApiState.DELETED
    if snap.phase == "Succeeded":
        return ApiState.SUCCEEDED
    if snap.phase == "Failed":
        return ApiState.FAILED
    if snap.deletion_timestamp is not None:
        return ApiState.TERMINATING
    if snap.phase == "Running":
        return ApiState.RUNNING
    if snap.start_time is not None:
        return ApiState.INITIALIZING
    scheduled = snap.condition("PodScheduled")
    if snap.node or (scheduled is not None and scheduled.status == "True"):
        return ApiState.SCHEDULED
    return ApiState.PENDING
