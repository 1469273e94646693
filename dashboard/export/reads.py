"""Bulk reads for export: a chunk of pods at a time, one query per table per chunk, rows as tuples.

``dashboard/queries.py`` reads one pod at a time (three queries each); a 10,000-pod export needs the same
answer in a few dozen queries. The reads here only fetch rows: every item they give is one of the Structs
of ``dashboard/serialize.py`` (``TimelineDoc`` for a pod, built by ``serialize.timeline_doc`` from
``IntervalDoc`` / ``MarkerDoc`` / ``FindingDoc``; ``NodeBundleDoc``, ``PdbBundleDoc``,
``WorkloadBundleDoc``, ``FindingBundleDoc``), so field names, order, time spelling, lane order and evidence
have one declaration (tests/export/test_export.py holds a pod's to ``queries.pod_timeline(...)
.to_json()``, the API's). Status samples and node / PDB lanes are ``queries.py``'s reads.

On PostgreSQL the per-pod tables are read with one lateral lookup per UID (``_per_pod_rows``), times come
as text from ``queries.time_text_sql`` (``to_char``), evidence as the ids' text (``ids_text``) and the
other JSON columns as text for orjson: no ORM row machinery, no datetime round trip. Every evidence list
of a bundle cites dedupe keys (as the pod document does): the ids a chunk's rows hold are translated with
one more query for the whole chunk (``_evidence_keys``, ``queries.observation_keys``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

import orjson
from django.db import connection
from django.db.models import F, Func, Q, TextField
from django.db.models.functions import Cast

from dashboard import queries, serialize
from dashboard.serialize import FindingBundleDoc, FindingDoc, IntervalDoc, MarkerDoc, TimelineDoc
from timelines.derivation import NODE_KINDS
from timelines.lifecycle.observation import FIELDS, Kind
from timelines.models import (
    Cluster,
    Finding,
    Interval,
    Marker,
    Node,
    Observation,
    Pod,
    PodDisruptionBudget,
    Workload,
)

CHUNK = 500  # pods per query: under SQLite's bound-parameter limit, a few MB of rows at most

# The fields of the observation contract; the digest covers these.
CONTRACT_FIELDS = FIELDS


class _IsoUtc(Func):
    """A timestamp as the text ``format_time`` writes (UTC, microseconds, ``+00:00``), made by the database
    (``queries.time_text_sql``): parsing a quarter of a million timestamps into datetimes only to print
    them again is most of an export's time otherwise."""

    template = queries.time_text_sql("%(expressions)s", "postgresql")
    output_field = TextField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template=queries.time_text_sql("%(expressions)s", "sqlite"))


def iso(field: str) -> Any:
    """``field`` as ISO text (NULL stays None)."""
    return _IsoUtc(F(field))


def json_text(field: str) -> Any:
    """A JSON column as text, to parse with orjson (faster than the JSONField's own decoding)."""
    return Cast(field, TextField())


class _IdsText(Func):
    """An evidence column (a JSON array of observation ids) as the ids' text joined by commas (``3,9,10``;
    empty for none), made by the database: ``ids`` splits it into the strings a document cites, with no
    JSON parsing per row. The array's JSON text (SQLite's column, PostgreSQL's jsonb printed) has only its
    brackets and spaces to drop."""

    template = "replace(replace(replace(%(expressions)s, '[', ''), ']', ''), ' ', '')"
    output_field = TextField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="translate((%(expressions)s)::text, '[] ', '')")


def ids_text(field: str) -> Any:
    return _IdsText(F(field))


def _postgres() -> bool:
    return connection.vendor == "postgresql"


def _per_pod_rows(
    model: Any,
    cluster: Cluster,
    uids: Sequence[str],
    columns: str,
    order: Sequence[str],
    *,
    by_uid: bool = False,
) -> list[tuple[Any, ...]]:
    """PostgreSQL: ``columns`` of ``model``'s rows (alias ``t``) for each of ``uids``, in one query: in the
    order of ``uids`` (``by_uid``: of the UIDs themselves), each pod's rows by the columns ``order``.

    A lateral lookup per UID walks the table's ``(cluster, pod_uid, …)`` index whatever the planner's
    statistics say: ``pod_uid IN (…)`` on a table not analyzed since a bulk load (autovacuum off, or not
    yet run) was planned as a scan of every row of the cluster, once per chunk of pods. The ``ORDER BY``
    inside keeps the subquery from being flattened into that same plan, and hands each pod's rows over
    sorted.
    """
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    cluster_column = quote(model._meta.get_field("cluster").column)
    inner = ", ".join(f"x.{quote(c)}" for c in order)
    outer = ", ".join(f"t.{quote(c)}" for c in order)
    sql = (
        f"SELECT {columns} FROM unnest(%s::varchar[]) WITH ORDINALITY AS u(uid, ord) "
        f"CROSS JOIN LATERAL (SELECT * FROM {table} x WHERE x.{cluster_column} = %s AND x.pod_uid = u.uid "
        f"ORDER BY {inner}) t ORDER BY {'t.pod_uid' if by_uid else 'u.ord'}, {outer}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(uids), cluster.pk])
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def _pg_iso(column: str) -> str:
    return queries.time_text_sql(f"t.{connection.ops.quote_name(column)}")


def _pg_ids(column: str) -> str:
    """``ids_text`` of ``t.column`` in hand-written PostgreSQL."""
    return f"translate(t.{connection.ops.quote_name(column)}::text, '[] ', '')"


def ids(value: str | None) -> list[str]:
    """Evidence ids from ``ids_text``'s text."""
    return value.split(",") if value else []


def loads(value: Any) -> Any:
    return orjson.loads(value) if isinstance(value, str | bytes) else value


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _attrs(value: Any) -> dict[str, Any]:
    """A JSON object column (text, or the value the ORM decoded for this row) as a dict."""
    return loads(value) or {}


def interval_doc(
    state: str, start: str, end: str | None, source: str, attrs: Any, evidence: list[str]
) -> IntervalDoc:
    """An interval row; times as ``iso`` text, ``attrs`` as a value or text."""
    return IntervalDoc(
        state=state,
        start=start,
        end=end,
        source=source,
        attrs=_attrs(attrs),
        evidence=evidence,
    )


def pod_timelines(cluster: Cluster, pods: Sequence[Pod]) -> Iterator[tuple[Pod, TimelineDoc]]:
    """``(pod, its podlife.timeline/v2 document)`` for each of ``pods``, in order, reading ``CHUNK`` pods
    per query. Evidence cites dedupe keys, as ``queries.pod_timeline`` does: the stored ids of a chunk
    are translated with one more query (``queries.observation_keys``)."""
    for chunk in chunks(pods):
        uids = [p.uid for p in chunk]
        interval_rows = list(_interval_rows(cluster, uids))
        marker_rows = list(_marker_rows(cluster, uids))
        finding_rows = list(_finding_rows(cluster, uids))
        keys = _evidence_keys(cluster, (interval_rows, marker_rows, finding_rows))
        lanes: dict[str, dict[str, list[IntervalDoc]]] = {u: {} for u in uids}
        for uid, lane, state, start, end, source, attrs, evidence in interval_rows:
            lanes[uid].setdefault(lane, []).append(
                interval_doc(state, start, end, source, attrs, keys(evidence))
            )
        markers: dict[str, list[MarkerDoc]] = {u: [] for u in uids}
        for uid, at, kind, reason, message, attrs, evidence in marker_rows:
            markers[uid].append(
                MarkerDoc(
                    at=at,
                    kind=kind,
                    reason=reason,
                    message=message,
                    attrs=_attrs(attrs),
                    evidence=keys(evidence),
                )
            )
        findings: dict[str, list[FindingDoc]] = {u: [] for u in uids}
        for uid, kind, severity, message, start, end, attrs, evidence in finding_rows:
            findings[uid].append(
                FindingDoc(
                    kind=kind,
                    severity=severity,
                    message=message,
                    start=start,
                    end=end,
                    evidence=keys(evidence),
                    attrs=_attrs(attrs),
                )
            )
        for pod in chunk:
            yield (
                pod,
                serialize.timeline_doc(
                    cluster.name, pod, lanes[pod.uid], markers[pod.uid], findings[pod.uid]
                ),
            )


def _evidence_keys(
    cluster: Cluster, row_sets: Iterable[Sequence[tuple[Any, ...]]]
) -> Callable[[str | None], list[str]]:
    """The evidence of rows (their last column: ``ids_text``) as sorted dedupe keys, from ONE query for
    all of them; an id whose observation is gone (retention) is left out, as ``queries.evidence_keys``."""
    cited = {i for rows in row_sets for row in rows for i in ids(row[-1])}
    key_of = {str(i): k for i, k in queries.observation_keys(cluster, map(int, cited)).items()}

    def keys(value: str | None) -> list[str]:
        return sorted({key_of[i] for i in ids(value) if i in key_of})

    return keys


def _interval_rows(cluster: Cluster, uids: list[str]) -> Iterable[tuple[Any, ...]]:
    if _postgres():
        return _per_pod_rows(
            Interval,
            cluster,
            uids,
            f"t.pod_uid, t.lane, t.state, {_pg_iso('start')}, {_pg_iso('end')}, t.source, t.attrs::text, "
            f"{_pg_ids('evidence')}",
            ("lane", "start", "id"),
        )
    return (
        Interval.objects.filter(cluster=cluster, pod_uid__in=uids)
        .order_by("pod_uid", "lane", "start", "id")
        .values_list(
            "pod_uid",
            "lane",
            "state",
            iso("start"),
            iso("end"),
            "source",
            json_text("attrs"),
            ids_text("evidence"),
        )
    )


def _marker_rows(cluster: Cluster, uids: list[str]) -> Iterable[tuple[Any, ...]]:
    if _postgres():
        return _per_pod_rows(
            Marker,
            cluster,
            uids,
            f"t.pod_uid, {_pg_iso('at')}, t.kind, t.reason, t.message, t.attrs::text, {_pg_ids('evidence')}",
            ("at", "id"),
        )
    return (
        Marker.objects.filter(cluster=cluster, pod_uid__in=uids)
        .order_by("pod_uid", "at", "id")
        .values_list(
            "pod_uid", iso("at"), "kind", "reason", "message", json_text("attrs"), ids_text("evidence")
        )
    )


def _finding_rows(cluster: Cluster, uids: list[str]) -> Iterable[tuple[Any, ...]]:
    if _postgres():
        return _per_pod_rows(
            Finding,
            cluster,
            uids,
            f"t.pod_uid, t.kind, t.severity, t.message, {_pg_iso('start')}, {_pg_iso('end')}, t.attrs::text, "
            f"{_pg_ids('evidence')}",
            ("start", "kind", "id"),
        )
    return (
        Finding.objects.filter(cluster=cluster, pod_uid__in=uids)
        .order_by("pod_uid", "start", "kind", "id")
        .values_list(
            "pod_uid",
            "kind",
            "severity",
            "message",
            iso("start"),
            iso("end"),
            json_text("attrs"),
            ids_text("evidence"),
        )
    )


# --- observations ------------------------------------------------------------------------------------------
_OBS_COLUMNS = (
    "id",
    "kind",
    "source",
    "observed_iso",
    "received_iso",
    "dedupe_key",
    "pod_uid",
    "node",
    "namespace",
    "name",
    "payload_text",
)


def _observation_item(row: Sequence[Any]) -> dict[str, Any]:
    oid, kind, source, observed, received, key, pod_uid, node, ns, name, payload = row
    return {
        "id": oid,
        "kind": kind,
        "source": source,
        "observed_at": observed,
        "received_at": received,
        "dedupe_key": key,
        "pod_uid": pod_uid or None,
        "node": node or None,
        "namespace": ns or None,
        "name": name or None,
        "payload": loads(payload),
    }


def _observation_rows(qs: Any) -> Iterator[dict[str, Any]]:
    """Rows as bundle items; the payload is read as text and parsed with orjson (several times faster
    than the JSONField's own decoding on a quarter of a million rows)."""
    for row in qs.annotate(
        payload_text=json_text("payload"), observed_iso=iso("observed_at"), received_iso=iso("received_at")
    ).values_list(*_OBS_COLUMNS):
        yield _observation_item(row)


def pod_observations(cluster: Cluster, pods: Sequence[Pod]) -> Iterator[dict[str, Any]]:
    """Every observation of ``pods``: pod by pod in the given order, each in ``Observation.sort_key``
    order (time, kind, dedupe key), which does not depend on row ids."""
    for chunk in chunks(pods):
        uids = [p.uid for p in chunk]
        if _postgres():
            rows = _per_pod_rows(
                Observation,
                cluster,
                uids,
                f"t.id, t.kind, t.source, {_pg_iso('observed_at')}, {_pg_iso('received_at')}, t.dedupe_key, "
                "t.pod_uid, t.node, t.namespace, t.name, t.payload::text",
                ("observed_at", "kind", "dedupe_key"),
            )
            # Times are text already and the payload is text: no per-row conversions beyond parsing it.
            for oid, kind, source, observed, received, key, pod_uid, node, ns, name, payload in rows:
                yield {
                    "id": oid,
                    "kind": kind,
                    "source": source,
                    "observed_at": observed,
                    "received_at": received,
                    "dedupe_key": key,
                    "pod_uid": pod_uid or None,
                    "node": node or None,
                    "namespace": ns or None,
                    "name": name or None,
                    "payload": orjson.loads(payload),
                }
            continue
        by_uid: dict[str, list[dict[str, Any]]] = {u: [] for u in uids}
        qs = Observation.objects.filter(cluster=cluster, pod_uid__in=uids).order_by(
            "pod_uid", "observed_at", "kind", "dedupe_key"
        )
        for item in _observation_rows(qs):
            by_uid[item["pod_uid"]].append(item)
        for pod in chunk:
            yield from by_uid[pod.uid]


def _window_and_before(qs: Any, since: datetime, until: datetime) -> list[int]:
    """Ids of ``qs`` observed in the window, plus the newest one before it (the state at ``since``)."""
    ids = list(qs.filter(observed_at__gte=since, observed_at__lt=until).values_list("id", flat=True))
    before = (
        qs.filter(observed_at__lt=since).order_by("-observed_at", "-id").values_list("id", flat=True).first()
    )
    return ids + ([before] if before is not None else [])


def side_observation_ids(
    cluster: Cluster,
    since: datetime,
    until: datetime,
    *,
    nodes: Sequence[Node],
    pdbs: Sequence[PodDisruptionBudget],
    workloads: Sequence[Workload],
) -> list[int]:
    """Ids of the node, PDB and workload observations a bundle carries: the window and the one before."""
    base = Observation.objects.filter(cluster=cluster)
    ids: set[int] = set()
    for node in nodes:
        snaps = base.filter(kind__in=(Kind.NODE, Kind.NODE_DELETED), node=node.name)
        ids.update(_window_and_before(snaps, since, until))
        ids.update(_window_and_before(base.filter(kind=Kind.NODE_METRICS, node=node.name), since, until))
        # KUBELET_PROCESS observations travel with the pods they were resolved to (resolved_context_ids).
        assert set(NODE_KINDS) == {Kind.NODE, Kind.NODE_DELETED, Kind.NODE_METRICS, Kind.KUBELET_PROCESS}
    for pdb in pdbs:
        snaps = base.filter(
            kind__in=(Kind.PDB, Kind.PDB_DELETED),
            namespace=pdb.namespace,
            name=pdb.name,
            payload__uid=pdb.uid,
        )
        ids.update(_window_and_before(snaps, since, until))
        events = base.filter(
            kind=Kind.EVENT,
            namespace=pdb.namespace,
            name=pdb.name,
            pod_uid__isnull=True,
            payload__involved__kind="PodDisruptionBudget",
            observed_at__gte=since,
            observed_at__lt=until,
        )
        ids.update(events.values_list("id", flat=True))
    for w in workloads:
        snaps = base.filter(
            kind__in=(Kind.WORKLOAD, Kind.WORKLOAD_DELETED),
            namespace=w.namespace,
            name=w.name,
            payload__uid=w.uid,
        )
        ids.update(_window_and_before(snaps, since, until))
    return sorted(ids)


def resolved_context_ids(cluster: Cluster, pods: Sequence[Pod]) -> list[int]:
    """Ids of the UID-less observations (kubelet lines naming a pod only as ns/name, node-level lines,
    kubelet processes) the derive stage resolves to ``pods``: a bundle carries them, so that re-deriving
    its pods gives the timelines it holds."""
    from timelines.derivation import pod_observations

    ids: set[int] = set()
    for chunk in chunks([p.uid for p in pods]):
        ids.update(pod_observations(cluster, list(chunk)).resolved_ids)
    return sorted(ids)


def observations_by_ids(cluster: Cluster, ids: Sequence[int]) -> Iterator[dict[str, Any]]:
    """The observations with ``ids`` in ``sort_key`` order (held in memory: side observations are few)."""
    items: list[dict[str, Any]] = []
    for chunk in chunks(ids):
        items += _observation_rows(Observation.objects.filter(cluster=cluster, id__in=list(chunk)))
    items.sort(key=lambda o: (o["observed_at"], o["kind"], o["dedupe_key"]))
    yield from items


# --- nodes, PDBs, workloads, findings ----------------------------------------------------------------------
def _kept(evidence: Iterable[int], included: set[int], dropped: list[int]) -> list[int]:
    out = []
    for i in evidence or ():
        if i in included:
            out.append(i)
        else:
            dropped.append(i)
    return out


def _side_lanes(
    cluster: Cluster, since: datetime, until: datetime, included: set[int], **subject: str
) -> tuple[dict[str, list[IntervalDoc]], int]:
    """A node's or PDB's own lanes overlapping the window, evidence cut to what the bundle carries; and
    how many ids were cut."""
    lanes: dict[str, list[IntervalDoc]] = {}
    dropped: list[int] = []
    rows = [
        (lane, state, start, end, source, attrs, _kept(evidence, included, dropped))
        for lane, state, start, end, source, attrs, evidence in queries.side_intervals(
            cluster.id, since=since, until=until, **subject
        ).values_list("lane", "state", iso("start"), iso("end"), "source", "attrs", "evidence")
    ]
    key_of = queries.observation_keys(cluster, (i for *_, kept in rows for i in kept))
    for lane, state, start, end, source, attrs, kept in rows:
        lanes.setdefault(lane, []).append(
            interval_doc(state, start, end, source, attrs, list(queries.evidence_keys(kept, key_of)))
        )
    return lanes, len(set(dropped))


def node_doc(
    cluster: Cluster, node: Node, since: datetime, until: datetime, included: set[int]
) -> serialize.NodeBundleDoc:
    """A node in the bundle: its own lanes (``node:*``) overlapping the window."""
    lanes, dropped = _side_lanes(cluster, since, until, included, node=node.name)
    return serialize.node_bundle_doc(node, lanes=lanes, evidence_outside_bundle=dropped)


def pdb_doc(
    cluster: Cluster,
    pdb: PodDisruptionBudget,
    since: datetime,
    until: datetime,
    included: set[int],
    covered: Sequence[str],
) -> serialize.PdbBundleDoc:
    """A PDB in the bundle: its lanes overlapping the window; its status samples in the window and the one
    before."""
    lanes, dropped = _side_lanes(cluster, since, until, included, pdb_uid=pdb.uid)
    return serialize.pdb_bundle_doc(
        pdb,
        lanes=lanes,
        samples=queries.pdb_samples(pdb, since, until),
        covered_pods=covered,
        evidence_outside_bundle=dropped,
    )


def workload_doc(workload: Workload, since: datetime, until: datetime) -> serialize.WorkloadBundleDoc:
    """A workload in the bundle: its samples in the window and the one before."""
    return serialize.workload_bundle_doc(workload, queries.workload_samples(workload, since, until))


def findings(
    cluster: Cluster,
    pod_uids: Sequence[str],
    pdb_uids: Sequence[str],
    since: datetime,
    until: datetime,
    included_side: set[int],
) -> Iterator[FindingBundleDoc]:
    """Every finding of the pods (all subjects: a PDB finding names the pod it blocks), then the PDBs'
    findings about no pod in particular that overlap the window. A PDB finding about a pod outside the
    scope is left out: the bundle does not carry that pod."""
    seen: set[int] = set()
    fields = (
        "id",
        "subject",
        "subject_name",
        "pod_uid",
        "namespace",
        "node",
        "kind",
        "severity",
        "message",
        iso("start"),
        iso("end"),
        "attrs",
        ids_text("evidence"),
    )

    def item(row: tuple[Any, ...], keys: Callable[[str | None], list[str]], *, cut: bool) -> FindingBundleDoc:
        (
            fid,
            subject,
            subject_name,
            pod_uid,
            ns,
            node,
            kind,
            severity,
            message,
            start,
            end,
            attrs,
            evidence,
        ) = row
        if cut:
            evidence = ",".join(i for i in ids(evidence) if int(i) in included_side)
        return FindingBundleDoc(
            subject=subject,
            subject_name=subject_name,
            pod_uid=pod_uid,
            namespace=ns or None,
            node=node or None,
            kind=kind,
            severity=severity,
            message=message,
            start=start,
            end=end,
            attrs=_attrs(attrs),
            evidence=keys(evidence),
        )

    for chunk in chunks(pod_uids):
        if _postgres():
            # Within a chunk by pod UID (not the chunk's pod order): the order this section always had.
            rows: Iterable[tuple[Any, ...]] = _per_pod_rows(
                Finding,
                cluster,
                chunk,
                "t.id, t.subject, t.subject_name, t.pod_uid, t.namespace, t.node, t.kind, t.severity, "
                f"t.message, {_pg_iso('start')}, {_pg_iso('end')}, t.attrs::text, {_pg_ids('evidence')}",
                ("start", "kind", "id"),
                by_uid=True,
            )
        else:
            rows = (
                Finding.objects.filter(cluster=cluster, pod_uid__in=list(chunk))
                .order_by("pod_uid", "start", "kind", "id")
                .values_list(*fields)
            )
        rows = list(rows)
        keys = _evidence_keys(cluster, [rows])
        for row in rows:
            seen.add(row[0])
            yield item(row, keys, cut=row[1] != "pod")
    if pdb_uids:
        q = Q()
        for uid in pdb_uids:
            q |= Q(attrs__pdb_uid=uid)
        rows = [
            row
            for row in Finding.objects.filter(
                queries.overlapping(since, until), q, cluster=cluster, subject="pdb", pod_uid=None
            )
            .order_by("start", "kind", "id")
            .values_list(*fields)
            if row[0] not in seen
        ]
        keys = _evidence_keys(cluster, [rows])
        for row in rows:
            yield item(row, keys, cut=True)
