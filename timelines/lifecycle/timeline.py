"""The derived picture of one pod: lanes of intervals, markers and findings, and its stable JSON shape.

Everything here is immutable and pure. ``PodTimeline.to_json`` writes schema ``podlife.timeline/v2``
(documented in ``docs/timeline-schema.md``); ``PodTimeline.from_json`` reads it back, so an exported
timeline round-trips exactly, and still reads ``podlife.timeline/v1`` (see ``upgrade_v1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

SCHEMA = "podlife.timeline/v2"
SCHEMA_V1 = "podlife.timeline/v1"  # read (and upgraded) by ``from_json``; never written
SCHEMAS_READ = (SCHEMA, SCHEMA_V1)

# observed: the kubelet's own V4 transitions or spans (or the API's record of its own state); kubelet:
# inferred from kubelet lines below V4 (SyncLoop, PLEG, kills, shutdown / eviction managers); inferred:
# the worker lane guessed from the API.
IntervalSource = Literal["observed", "kubelet", "inferred"]
MarkerKind = Literal["event", "kubelet", "audit"]
Severity = Literal["info", "warning", "critical"]

INTERVAL_SOURCES: frozenset[str] = frozenset({"observed", "kubelet", "inferred"})
MARKER_KINDS: frozenset[str] = frozenset({"event", "kubelet", "audit"})
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")

# Lane names: "worker", "api", "container:NAME", "condition:TYPE".
WORKER_LANE = "worker"
API_LANE = "api"
CONTAINER_LANE_PREFIX = "container:"
CONDITION_LANE_PREFIX = "condition:"


class WorkerPhase:
    """States of the ``worker`` lane (the kubelet pod worker's work type, SyncPod split where the pod's
    containers have all started)."""

    SETUP = "setup"  # SyncPod until every container has started: the pod is still starting
    RUNNING = "running"  # SyncPod once every container has started
    TERMINATING = "terminating"  # SyncTerminatingPod: containers may still run
    CLEANUP = "cleanup"  # SyncTerminatedPod: no container runs, volumes / cgroups being removed
    UNKNOWN = "unknown"  # the evidence has a hole here: which phase, or where one ended, is not known

    ALL = (SETUP, RUNNING, TERMINATING, CLEANUP)
    ORDER = (SETUP, RUNNING, TERMINATING, CLEANUP)


class ApiState:
    """States of the ``api`` lane, in lifecycle order."""

    PENDING = "pending"
    SCHEDULED = "scheduled"
    INITIALIZING = "initializing"
    RUNNING = "running"
    TERMINATING = "terminating"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DELETED = "deleted"

    ORDER = (PENDING, SCHEDULED, INITIALIZING, RUNNING, TERMINATING, SUCCEEDED, FAILED, DELETED)


class ContainerState:
    """States of a ``container:NAME`` lane."""

    WAITING = "waiting"
    RUNNING = "running"
    TERMINATED = "terminated"


def format_time(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with microseconds always (``2024-06-07T06:54:47.000000+00:00``); None stays None.

    Raises ValueError for a naive datetime: a naive time silently corrupts a timeline.
    """
    if value is None:
        return None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"time {value!r} is naive; expected a timezone-aware datetime")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def parse_time(text: object) -> datetime | None:
    """Parse an ISO 8601 string with an offset (``Z`` accepted) into an aware UTC datetime.

    None and the empty string give None. Anything else that is not an aware ISO 8601 time raises
    ValueError naming the value.
    """
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise ValueError(f"time {text!r} is not a string; expected ISO 8601 with an offset")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"time {text!r} is not ISO 8601; expected e.g. 2024-06-07T06:54:47.000000+00:00"
        ) from None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"time {text!r} has no offset; expected e.g. 2024-06-07T06:54:47+00:00")
    return value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Interval:
    """One bar in a lane: ``state`` from ``start`` to ``end`` (None while it is still open).

    ``source`` is ``observed`` (the kubelet's V4 transitions and spans, or the API's own record of its
    own state), ``kubelet`` (inferred from kubelet lines below V4) or ``inferred`` (the worker lane
    guessed from the API). A bound the evidence does not pin is flagged in ``attrs``: ``start_unknown``
    (the state began at or before ``start``) and ``end_unknown`` (it lasted at least until ``end``).
    ``evidence`` holds the dedupe keys of the observations that made it, sorted.
    """

    lane: str
    state: str
    start: datetime
    end: datetime | None
    source: IntervalSource
    attrs: dict[str, Any] = field(default_factory=dict, hash=False)
    evidence: tuple[str, ...] = ()

    @property
    def is_open(self) -> bool:
        """True while the interval has no end yet."""
        return self.end is None

    @property
    def start_known(self) -> bool:
        """False when the state began at an unknown moment at or before ``start``."""
        return not self.attrs.get("start_unknown", False)

    @property
    def end_known(self) -> bool:
        """False when the state lasted at least until ``end`` and ended at an unknown moment after it
        (an open interval's end is not known either)."""
        return self.end is not None and not self.attrs.get("end_unknown", False)

    def to_json(self) -> dict[str, Any]:
        """The interval as a JSON-compatible dict (the lane name is the enclosing key)."""
        return {
            "state": self.state,
            "start": format_time(self.start),
            "end": format_time(self.end),
            "source": self.source,
            "attrs": dict(self.attrs),
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class Marker:
    """A point in time worth showing: an API Event (``kind="event"``), a notable kubelet line
    (``"kubelet"``) or an audited request (``"audit"``: a delete, a create, an eviction granted or refused,
    with ``attrs.who``)."""

    at: datetime
    kind: MarkerKind
    reason: str
    message: str
    attrs: dict[str, Any] = field(default_factory=dict, hash=False)
    evidence: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The marker as a JSON-compatible dict."""
        return {
            "at": format_time(self.at),
            "kind": self.kind,
            "reason": self.reason,
            "message": self.message,
            "attrs": dict(self.attrs),
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """A lifecycle anomaly: ``kind`` (rule name), a severity, one human sentence, a time span, evidence."""

    kind: str
    severity: Severity
    message: str
    start: datetime
    end: datetime | None
    evidence: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        """The finding as a JSON-compatible dict."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "start": format_time(self.start),
            "end": format_time(self.end),
            "evidence": list(self.evidence),
            "attrs": dict(self.attrs),
        }


@dataclass(frozen=True, slots=True)
class PodTimeline:
    """Everything derived for one pod UID.

    ``lanes`` maps a lane name to its intervals, sorted by start and never overlapping. It always has
    the ``worker`` and ``api`` keys (possibly empty). ``problems`` lists payload values the derivation
    could not read (they were skipped, not fatal).
    """

    uid: str
    namespace: str | None
    name: str | None
    node: str | None
    lanes: dict[str, tuple[Interval, ...]] = field(hash=False)
    markers: tuple[Marker, ...] = ()
    findings: tuple[Finding, ...] = ()
    static: bool = False
    owner: dict[str, Any] | None = field(default=None, hash=False)
    created_at: datetime | None = None
    deleted_at: datetime | None = None
    phase: str | None = None
    first_observed: datetime | None = None
    last_observed: datetime | None = None
    problems: tuple[str, ...] = ()

    def lane(self, name: str) -> tuple[Interval, ...]:
        """The intervals of lane ``name`` (empty when the lane does not exist)."""
        return self.lanes.get(name, ())

    def to_json(self, cluster: str) -> dict[str, Any]:
        """The timeline in schema ``podlife.timeline/v2`` (see docs/timeline-schema.md).

        Keys ``schema``, ``cluster``, ``pod{uid,namespace,name,node}``, ``lanes``, ``markers`` and
        ``findings`` are stable; extra keys may be added, never removed. Times are UTC ISO 8601 with
        microseconds.
        """
        return {
            "schema": SCHEMA,
            "cluster": cluster,
            "pod": {
                "uid": self.uid,
                "namespace": self.namespace,
                "name": self.name,
                "node": self.node,
                "static": self.static,
                "owner": dict(self.owner) if self.owner is not None else None,
                "created_at": format_time(self.created_at),
                "deleted_at": format_time(self.deleted_at),
                "phase": self.phase,
                "first_observed": format_time(self.first_observed),
                "last_observed": format_time(self.last_observed),
            },
            "lanes": {name: [iv.to_json() for iv in intervals] for name, intervals in self.lanes.items()},
            "markers": [m.to_json() for m in self.markers],
            "findings": [f.to_json() for f in self.findings],
            "problems": list(self.problems),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PodTimeline:
        """Read back what ``to_json`` wrote (the cluster is ``data["cluster"]``; it is not kept here).

        Raises ValueError naming the first key that is missing or malformed.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"timeline must be a JSON object, got {type(data).__name__}")
        if data.get("schema") not in SCHEMAS_READ:
            raise ValueError(
                f"timeline schema is {data.get('schema')!r}; expected one of {', '.join(SCHEMAS_READ)}"
            )
        if data.get("schema") == SCHEMA_V1:
            data = upgrade_v1(data)
        pod = _require(data, "pod", Mapping, "timeline")
        lanes_json = _require(data, "lanes", Mapping, "timeline")
        lanes: dict[str, tuple[Interval, ...]] = {}
        for lane_name, items in lanes_json.items():
            if not isinstance(items, list):
                raise ValueError(f"lanes[{lane_name!r}] must be a list")
            lanes[str(lane_name)] = tuple(
                _interval_from_json(str(lane_name), item, f"lanes[{lane_name!r}][{i}]")
                for i, item in enumerate(items)
            )
        markers = tuple(
            _marker_from_json(item, f"markers[{i}]")
            for i, item in enumerate(_require(data, "markers", list, "timeline"))
        )
        findings = tuple(
            _finding_from_json(item, f"findings[{i}]")
            for i, item in enumerate(_require(data, "findings", list, "timeline"))
        )
        uid = pod.get("uid")
        if not isinstance(uid, str) or not uid:
            raise ValueError("pod.uid must be a non-empty string")
        owner = pod.get("owner")
        return cls(
            uid=uid,
            namespace=_opt_str(pod.get("namespace"), "pod.namespace"),
            name=_opt_str(pod.get("name"), "pod.name"),
            node=_opt_str(pod.get("node"), "pod.node"),
            lanes=lanes,
            markers=markers,
            findings=findings,
            static=bool(pod.get("static", False)),
            owner=dict(owner) if isinstance(owner, Mapping) else None,
            created_at=_time_at(pod, "created_at", "pod"),
            deleted_at=_time_at(pod, "deleted_at", "pod"),
            phase=_opt_str(pod.get("phase"), "pod.phase"),
            first_observed=_time_at(pod, "first_observed", "pod"),
            last_observed=_time_at(pod, "last_observed", "pod"),
            problems=tuple(str(p) for p in data.get("problems", [])),
        )


def upgrade_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``podlife.timeline/v1`` document in v2 terms (the meaning v1 gave each value is kept):

    * v1 ``setup`` in the worker lane covered the whole SyncPod span, whether or not the containers had
      started; v2 splits that span at the containers' start, which v1 did not record. An observed v1
      ``setup`` therefore stays ``setup`` with ``attrs.v1_sync: true`` (it may include running time).
    * every other key and value means the same in v2 (v1 had no ``kubelet`` source, no ``running`` or
      ``unknown`` worker state and no unknown bounds).
    """
    out = dict(data)
    out["schema"] = SCHEMA
    lanes = data.get("lanes")
    if isinstance(lanes, Mapping):
        upgraded: dict[str, Any] = dict(lanes)
        worker = lanes.get(WORKER_LANE)
        if isinstance(worker, list):
            upgraded[WORKER_LANE] = [
                {**iv, "attrs": {**(iv.get("attrs") or {}), "v1_sync": True}}
                if isinstance(iv, Mapping)
                and iv.get("state") == WorkerPhase.SETUP
                and isinstance(iv.get("attrs", {}), Mapping)
                else iv
                for iv in worker
            ]
        out["lanes"] = upgraded
    return out


def _require(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"{where}.{key} must be a {'JSON object' if kind is Mapping else kind.__name__}")
    return value


def _opt_str(value: object, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where} must be a string or null, got {value!r}")


def _time_at(data: Mapping[str, Any], key: str, where: str) -> datetime | None:
    try:
        return parse_time(data.get(key))
    except ValueError as exc:
        raise ValueError(f"{where}.{key}: {exc}") from None


def _required_time(data: Mapping[str, Any], key: str, where: str) -> datetime:
    value = _time_at(data, key, where)
    if value is None:
        raise ValueError(f"{where}.{key} is required")
    return value


def _attrs(data: Mapping[str, Any], where: str) -> dict[str, Any]:
    attrs = data.get("attrs", {})
    if not isinstance(attrs, Mapping):
        raise ValueError(f"{where}.attrs must be a JSON object")
    return dict(attrs)


def _evidence(data: Mapping[str, Any], where: str) -> tuple[str, ...]:
    evidence = data.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise ValueError(f"{where}.evidence must be a list of strings")
    return tuple(evidence)


def _interval_from_json(lane: str, data: object, where: str) -> Interval:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be a JSON object")
    source = data.get("source")
    if source not in INTERVAL_SOURCES:
        raise ValueError(f"{where}.source is {source!r}; expected one of {sorted(INTERVAL_SOURCES)}")
    state = data.get("state")
    if not isinstance(state, str):
        raise ValueError(f"{where}.state must be a string")
    return Interval(
        lane=lane,
        state=state,
        start=_required_time(data, "start", where),
        end=_time_at(data, "end", where),
        source=source,
        attrs=_attrs(data, where),
        evidence=_evidence(data, where),
    )


def _marker_from_json(data: object, where: str) -> Marker:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be a JSON object")
    kind = data.get("kind")
    if kind not in MARKER_KINDS:
        raise ValueError(f"{where}.kind is {kind!r}; expected one of {sorted(MARKER_KINDS)}")
    return Marker(
        at=_required_time(data, "at", where),
        kind=kind,
        reason=str(data.get("reason") or ""),
        message=str(data.get("message") or ""),
        attrs=_attrs(data, where),
        evidence=_evidence(data, where),
    )


def _finding_from_json(data: object, where: str) -> Finding:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be a JSON object")
    severity = data.get("severity")
    if severity not in SEVERITIES:
        raise ValueError(f"{where}.severity is {severity!r}; expected one of {list(SEVERITIES)}")
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"{where}.kind must be a non-empty string")
    return Finding(
        kind=kind,
        severity=severity,
        message=str(data.get("message") or ""),
        start=_required_time(data, "start", where),
        end=_time_at(data, "end", where),
        evidence=_evidence(data, where),
        attrs=_attrs(data, where),
    )
