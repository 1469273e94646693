"""``podlife.timeline/v2`` (docs/timeline-schema.md) as msgspec Structs: the one declaration of the shape,
its one writer and its one reader.

Stable keys are required, the others have defaults, keys a reader does not know are ignored (the schema's
stability rule); every time is checked to be ISO 8601 with an offset, every value of a closed set to be in
it, with a message naming it.

Every timeline document is a ``TimelineDoc`` assembled by ``timeline_doc`` (``worker`` and ``api`` always
there, lanes in ``lane_order``) and encoded by msgspec or orjson from its builtins: from a derived
``PodTimeline`` (``write_timeline``: the live push, the command line's unstored pods) or from stored rows
(``dashboard/timeline_reads.py``: the pages, the API, the command line, the export), which cannot differ
in shape. ``read_timeline`` reads one back (v1 upgraded), ``decode_timeline`` checks a bundle's. Pure:
msgspec only; this module imports ``timeline.py``, never the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from timelines.lifecycle.timeline import (
    API_LANE,
    CONTAINER_LANE_PREFIX,
    INTERVAL_SOURCES,
    MARKER_KINDS,
    SCHEMA,
    SCHEMA_V1,
    SCHEMAS_READ,
    SEVERITIES,
    WORKER_LANE,
    Finding,
    Interval,
    Marker,
    PodTimeline,
    WorkerPhase,
    format_time,
    parse_time,
)

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
    for name in required:
        _check_time(name, getattr(doc, name), True)
    for name in optional:
        _check_time(name, getattr(doc, name), False)


def _check_time(name: str, value: object, required: bool) -> None:
    """Raise ValueError naming ``name`` when ``value`` is not ISO 8601 with an offset (nor, when not
    ``required``, None or empty). Called for every time of every document made or read: the valid case
    costs one ``fromisoformat``."""
    if value is None or value == "":
        if required:
            raise ValueError(f"{name} is required (a time), got {value!r}")
        return
    if type(value) is str:
        try:
            if datetime.fromisoformat(value).utcoffset() is not None:
                return
        except ValueError:
            pass
    try:
        parse_time(value)  # the message naming what is wrong
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


_SOURCES = sorted(INTERVAL_SOURCES)
_MARKER_KINDS = sorted(MARKER_KINDS)
_SEVERITIES = list(SEVERITIES)


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
        if self.source not in INTERVAL_SOURCES:
            _one_of("source", self.source, _SOURCES)
        _check_time("start", self.start, True)
        _check_time("end", self.end, False)


class MarkerDoc(msgspec.Struct):
    """``markers[i]``."""

    at: Time
    kind: MarkerKind
    reason: str
    message: str
    attrs: dict[str, Any] = {}
    evidence: Evidence = []

    def __post_init__(self) -> None:
        if self.kind not in MARKER_KINDS:
            _one_of("kind", self.kind, _MARKER_KINDS)
        _check_time("at", self.at, True)


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
        if self.severity not in SEVERITIES:
            _one_of("severity", self.severity, _SEVERITIES)
        _check_time("start", self.start, True)
        _check_time("end", self.end, False)


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


# --- the one writer ----------------------------------------------------------------------------------------
def lane_order(name: str) -> tuple[int, str]:
    """Where lane ``name`` goes in a document's ``lanes``: ``worker``, ``api``, the containers, then every
    other lane (the conditions), each group by name."""
    if name == WORKER_LANE:
        return (0, name)
    if name == API_LANE:
        return (1, name)
    return (2 if name.startswith(CONTAINER_LANE_PREFIX) else 3, name)


def timeline_doc(
    cluster: str,
    pod: PodDoc,
    lanes: Mapping[str, list[IntervalDoc]],
    markers: list[MarkerDoc],
    findings: list[FindingDoc],
    problems: Sequence[str] = (),
) -> TimelineDoc:
    """The document of one pod from its parts, however they were read: ``worker`` and ``api`` always
    there (possibly empty), every lane in ``lane_order``."""
    every: dict[str, list[IntervalDoc]] = {WORKER_LANE: [], API_LANE: [], **lanes}
    return TimelineDoc(
        schema="podlife.timeline/v2",
        cluster=cluster,
        pod=pod,
        lanes={name: every[name] for name in sorted(every, key=lane_order)},
        markers=markers,
        findings=findings,
        problems=list(problems),
    )


assert SCHEMA == "podlife.timeline/v2"  # what timeline_doc writes


def write_timeline(timeline: PodTimeline, cluster: str) -> TimelineDoc:
    """A derived timeline as its document (times in ``format_time`` spelling)."""
    return timeline_doc(
        cluster,
        PodDoc(
            uid=timeline.uid,
            namespace=timeline.namespace,
            name=timeline.name,
            node=timeline.node,
            static=timeline.static,
            owner=dict(timeline.owner) if timeline.owner is not None else None,
            created_at=format_time(timeline.created_at),
            deleted_at=format_time(timeline.deleted_at),
            phase=timeline.phase,
            first_observed=format_time(timeline.first_observed),
            last_observed=format_time(timeline.last_observed),
        ),
        {
            name: [
                IntervalDoc(
                    state=iv.state,
                    start=_text(iv.start),
                    end=format_time(iv.end),
                    source=iv.source,
                    attrs=dict(iv.attrs),
                    evidence=list(iv.evidence),
                )
                for iv in intervals
            ]
            for name, intervals in timeline.lanes.items()
        },
        [
            MarkerDoc(
                at=_text(m.at),
                kind=m.kind,
                reason=m.reason,
                message=m.message,
                attrs=dict(m.attrs),
                evidence=list(m.evidence),
            )
            for m in timeline.markers
        ],
        [
            FindingDoc(
                kind=f.kind,
                severity=f.severity,
                message=f.message,
                start=_text(f.start),
                end=format_time(f.end),
                evidence=list(f.evidence),
                attrs=dict(f.attrs),
            )
            for f in timeline.findings
        ],
        timeline.problems,
    )


def _text(value: datetime) -> str:
    text = format_time(value)
    assert text is not None
    return text


def to_builtins(doc: msgspec.Struct) -> dict[str, Any]:
    """``doc`` as the plain dict orjson writes (field order kept)."""
    out = msgspec.to_builtins(doc)
    assert isinstance(out, dict)
    return out


def encode(doc: msgspec.Struct) -> bytes:
    """``doc`` as compact JSON."""
    return msgspec.json.encode(doc)


# --- the one reader ----------------------------------------------------------------------------------------
def read_timeline(data: Mapping[str, Any]) -> PodTimeline:
    """A timeline document (parsed JSON, v2 or v1) as a ``PodTimeline`` (the cluster is ``data["cluster"]``;
    it is not kept). Raises ValueError naming the first key that is missing or malformed."""
    if not isinstance(data, Mapping):
        raise ValueError(f"timeline must be a JSON object, got {type(data).__name__}")
    if data.get("schema") not in SCHEMAS_READ:
        raise ValueError(
            f"timeline schema is {data.get('schema')!r}; expected one of {', '.join(SCHEMAS_READ)}"
        )
    if data.get("schema") == SCHEMA_V1:
        data = upgrade_v1(data)
    return timeline_of(decode_timeline(data))


def timeline_of(doc: TimelineDoc) -> PodTimeline:
    """A checked document as a ``PodTimeline`` (what the command line's table and the tests read)."""
    pod = doc.pod
    return PodTimeline(
        uid=pod.uid,
        namespace=pod.namespace,
        name=pod.name,
        node=pod.node,
        lanes={
            name: tuple(
                Interval(
                    lane=name,
                    state=iv.state,
                    start=_parsed(iv.start),
                    end=parse_time(iv.end),
                    source=iv.source,  # type: ignore[arg-type]  # checked by IntervalDoc
                    attrs=dict(iv.attrs),
                    evidence=tuple(iv.evidence),
                )
                for iv in intervals
            )
            for name, intervals in doc.lanes.items()
        },
        markers=tuple(
            Marker(
                at=_parsed(m.at),
                kind=m.kind,  # type: ignore[arg-type]  # checked by MarkerDoc
                reason=m.reason,
                message=m.message,
                attrs=dict(m.attrs),
                evidence=tuple(m.evidence),
            )
            for m in doc.markers
        ),
        findings=tuple(
            Finding(
                kind=f.kind,
                severity=f.severity,  # type: ignore[arg-type]  # checked by FindingDoc
                message=f.message,
                start=_parsed(f.start),
                end=parse_time(f.end),
                evidence=tuple(f.evidence),
                attrs=dict(f.attrs),
            )
            for f in doc.findings
        ),
        static=pod.static,
        owner=dict(pod.owner) if pod.owner is not None else None,
        created_at=parse_time(pod.created_at),
        deleted_at=parse_time(pod.deleted_at),
        phase=pod.phase,
        first_observed=parse_time(pod.first_observed),
        last_observed=parse_time(pod.last_observed),
        problems=tuple(doc.problems),
    )


def _parsed(text: str) -> datetime:
    value = parse_time(text)
    assert value is not None  # a required time: the schema refused an empty one
    return value


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
