"""A pod's stored timeline read through the ORM: the reference the one read path
(``dashboard/timeline_reads.py``, raw SQL printing times in the database) is held to.

This was ``queries.pod_timeline`` before the pod page, the API and the command line moved to the bulk read
with one pod; kept here as an independent reading of the same rows (datetimes from the ORM, printed by
``format_time`` through ``schema.write_timeline``, JSON columns decoded by the JSONField, evidence ids
translated one by one), so a test can compare the two byte for byte.
"""

from __future__ import annotations

from typing import cast

from tests.stored import key_by_id
from timelines.lifecycle.schema import lane_order
from timelines.lifecycle.timeline import (
    Finding,
    Interval,
    IntervalSource,
    Marker,
    MarkerKind,
    PodTimeline,
    Severity,
)
from timelines.models import Cluster, Pod
from timelines.models import Finding as FindingRow
from timelines.models import Interval as IntervalRow
from timelines.models import Marker as MarkerRow


def orm_timeline(cluster: Cluster, pod: Pod) -> PodTimeline:
    """The stored timeline of ``pod``, its evidence as the observations' dedupe keys, sorted."""
    intervals = list(
        IntervalRow.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("lane", "start", "id")
    )
    markers = list(MarkerRow.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("at", "id"))
    findings = list(
        FindingRow.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("start", "kind", "id")
    )
    cited = {i for rows in (intervals, markers, findings) for r in rows for i in r.evidence or ()}
    key_of = key_by_id(cluster, cited)

    def keys(ids: list[int] | None) -> tuple[str, ...]:
        return tuple(sorted({key_of[i] for i in ids or () if i in key_of}))

    lanes: dict[str, list[Interval]] = {"worker": [], "api": []}
    for r in intervals:
        lanes.setdefault(r.lane, []).append(
            Interval(
                r.lane, r.state, r.start, r.end, cast(IntervalSource, r.source), r.attrs, keys(r.evidence)
            )
        )
    return PodTimeline(
        uid=pod.uid,
        namespace=pod.namespace or None,
        name=pod.name or None,
        node=pod.node or None,
        lanes={k: tuple(lanes[k]) for k in sorted(lanes, key=lane_order)},
        markers=tuple(
            Marker(m.at, cast(MarkerKind, m.kind), m.reason, m.message, m.attrs, keys(m.evidence))
            for m in markers
        ),
        findings=tuple(
            Finding(f.kind, cast(Severity, f.severity), f.message, f.start, f.end, keys(f.evidence), f.attrs)
            for f in findings
        ),
        static=pod.static,
        owner={"kind": pod.owner_kind, "name": pod.owner_name, "uid": pod.owner_uid}
        if pod.owner_kind
        else None,
        created_at=pod.created_at,
        deleted_at=pod.deleted_at,
        phase=pod.phase or None,
        first_observed=pod.first_seen,
        last_observed=pod.last_seen,
    )
