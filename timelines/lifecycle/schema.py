"""``podlife.timeline/v2`` (docs/timeline-schema.md) as msgspec Structs: the one declaration of the shape.

Stable keys are required, the others have defaults, keys a reader does not know are ignored (the schema's
stability rule); every time is checked to be ISO 8601 with an offset, every value of a closed set to be in
it, with a message naming it. ``PodTimeline.from_json`` and the bundle import read through
``decode_timeline``; ``dashboard/serialize.py`` re-exports these for the API and export. Pure: msgspec only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from timelines.lifecycle.timeline import INTERVAL_SOURCES, MARKER_KINDS, SCHEMAS_READ, SEVERITIES, parse_time

Time = Annotated[str, msgspec.Meta(extra_json_schema={"format": "date-time"})]
"""A time as ``format_time`` writes it (the JSON schema says ``date-time``)."""

# Strings limited to a set: the JSON schema lists it; ``__post_init__`` checks it with a message naming it.
Source = Annotated[
    str,
    msgspec.Meta(
        extra_json_schema={
            "enum": sorted(INTERVAL_SOURCES),
            "description": "observed: from the kubelet's own pod-worker lines or spans, or the API; kubelet: "
            "inferred from V0-V3 kubelet lines; inferred: from the API's view.",
        }
    ),
]
MarkerKind = Annotated[str, msgspec.Meta(extra_json_schema={"enum": sorted(MARKER_KINDS)})]
SeverityName = Annotated[str, msgspec.Meta(extra_json_schema={"enum": list(SEVERITIES)})]
# What a timeline row cites: its observations' dedupe keys (content-derived, so the same event reads the
# same in any cluster or database), sorted.
Evidence = Annotated[
    list[str],
    msgspec.Meta(
        description="dedupe keys of the observations behind this item, sorted "
        "(raw lines: /clusters/C/pods/UID/observations?keys=KEY)"
    ),
]


def check_times(doc: msgspec.Struct, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """Raise ValueError naming the first time field of ``doc`` that is not ISO 8601 with an offset."""
    for name in (*required, *optional):
        value = getattr(doc, name)
        if value is None or value == "":
            if name in required:
                raise ValueError(f"{name} is required (a time), got {value!r}")
            continue
        try:
            parse_time(value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None


def _one_of(name: str, value: str, allowed: list[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} is {value!r}; expected one of {allowed}")


# --- podlife.timeline/v2 -----------------------------------------------------------------------------------
class IntervalDoc(msgspec.Struct):
    """``lanes[NAME][i]``."""

    state: str
    start: Time
    end: Time | None
    source: Source
    attrs: dict[str, Any] = {}
    evidence: Evidence = []

    def __post_init__(self) -> None:
        _one_of("source", self.source, sorted(INTERVAL_SOURCES))
        check_times(self, ("start",), ("end",))


class MarkerDoc(msgspec.Struct):
    """``markers[i]``."""

    at: Time
    kind: MarkerKind
    reason: str
    message: str
    attrs: dict[str, Any] = {}
    evidence: Evidence = []

    def __post_init__(self) -> None:
        _one_of("kind", self.kind, sorted(MARKER_KINDS))
        check_times(self, ("at",))


class FindingDoc(msgspec.Struct):
    """``findings[i]``."""

    kind: str
    severity: SeverityName
    message: str
    start: Time
    end: Time | None
    evidence: Evidence = []
    attrs: dict[str, Any] = {}

    def __post_init__(self) -> None:
        if not self.kind:
            raise ValueError("kind must be a non-empty string")
        _one_of("severity", self.severity, list(SEVERITIES))
        check_times(self, ("start",), ("end",))


class PodDoc(msgspec.Struct):
    """``pod``: identity (stable) and what the API last said of it."""

    uid: str
    namespace: str | None
    name: str | None
    node: str | None
    static: bool = False
    owner: dict[str, Any] | None = None  # as the pod's API object named its controller
    created_at: Time | None = None
    deleted_at: Time | None = None
    phase: str | None = None
    first_observed: Time | None = None
    last_observed: Time | None = None

    def __post_init__(self) -> None:
        if not self.uid:
            raise ValueError("uid must be a non-empty string")
        check_times(self, (), ("created_at", "deleted_at", "first_observed", "last_observed"))


class TimelineDoc(msgspec.Struct):
    """One pod's timeline, ``podlife.timeline/v2`` (a v1 document has the same keys)."""

    schema: Literal["podlife.timeline/v2", "podlife.timeline/v1"]
    cluster: str
    pod: PodDoc
    lanes: dict[str, list[IntervalDoc]]
    markers: list[MarkerDoc]
    findings: list[FindingDoc]
    problems: list[str] = []


assert SCHEMAS_READ == ("podlife.timeline/v2", "podlife.timeline/v1")  # TimelineDoc.schema's Literal


def decode_timeline(item: Any) -> TimelineDoc:
    """A timeline document (parsed JSON) checked against the schema; ValueError naming the field
    (``start: time 'x' is not ISO 8601 … - at `$.lanes['worker'][0]```) when it does not fit."""
    try:
        return msgspec.convert(item, TimelineDoc)
    except msgspec.ValidationError as exc:
        text = str(exc)
    # The path of a lane's interval says only ``$.lanes[...]``: find the lane by name.
    lanes = item.get("lanes") if isinstance(item, Mapping) else None
    if "`$.lanes[...]" in text and isinstance(lanes, Mapping):
        for name, intervals in lanes.items():
            try:
                msgspec.convert(intervals, list[IntervalDoc])
            except msgspec.ValidationError as lane_exc:
                text = str(lane_exc).replace("`$", f"`$.lanes[{name!r}]", 1)
                break
    raise ValueError(text)
