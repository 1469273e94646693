"""The derived picture of one pod: lanes of intervals, markers and findings.

Everything here is immutable and pure (``Interval``, ``Marker`` and ``Finding`` are ``record``s: frozen to
the type checker, plain slots dataclasses at run time, since the derive stage makes tens a pod; see
``record.py``). Its JSON document, ``podlife.timeline/v2`` (docs/timeline-schema.md), is written and read
by ``schema.py`` (``write_timeline``, ``read_timeline``), which imports this module and never the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from timelines.lifecycle.record import record

SCHEMA = "podlife.timeline/v2"
SCHEMA_V1 = "podlife.timeline/v1"  # read (and upgraded) by ``schema.read_timeline``; never written
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

    SETUP: Final = "setup"  # SyncPod until every container has started: the pod is still starting
    RUNNING: Final = "running"  # SyncPod once every container has started
    TERMINATING: Final = "terminating"  # SyncTerminatingPod: containers may still run
    CLEANUP: Final = "cleanup"  # SyncTerminatedPod: no container runs, volumes / cgroups being removed
    UNKNOWN: Final = "unknown"  # the evidence has a hole here: which phase, or where one ended, is not known

    ALL: Final = (SETUP, RUNNING, TERMINATING, CLEANUP)
    ORDER: Final = (SETUP, RUNNING, TERMINATING, CLEANUP)


class ApiState:
    """States of the ``api`` lane, in lifecycle order."""

    PENDING: Final = "pending"
    SCHEDULED: Final = "scheduled"
    INITIALIZING: Final = "initializing"
    RUNNING: Final = "running"
    TERMINATING: Final = "terminating"
    SUCCEEDED: Final = "succeeded"
    FAILED: Final = "failed"
    DELETED: Final = "deleted"

    ORDER: Final = (PENDING, SCHEDULED, INITIALIZING, RUNNING, TERMINATING, SUCCEEDED, FAILED, DELETED)


class ContainerState:
    """States of a ``container:NAME`` lane."""

    WAITING: Final = "waiting"
    RUNNING: Final = "running"
    TERMINATED: Final = "terminated"


def format_time(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with microseconds always (``2024-06-07T06:54:47.000000+00:00``); None stays None.

    Raises ValueError for a naive datetime: a naive time silently corrupts a timeline.
    """
    if value is None:
        return None
    if value.tzinfo is UTC:  # the common case: times the core made, already in UTC
        return value.isoformat(timespec="microseconds")
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


@record(frozen=True)
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


@record(frozen=True)
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


@record(frozen=True)
class Finding:
    """A lifecycle anomaly: ``kind`` (rule name), a severity, one human sentence, a time span, evidence."""

    kind: str
    severity: Severity
    message: str
    start: datetime
    end: datetime | None
    evidence: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict, hash=False)


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
