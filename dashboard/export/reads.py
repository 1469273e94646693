"""Bulk reads for export: a chunk of pods at a time, one query per table per chunk, rows as tuples.

The pods' timelines are ``dashboard/timeline_reads.py``'s ``pod_timelines`` (the same read the pod page
makes with one pod); this module reads what only a bundle carries: the pods' observations, the UID-less
ones resolved to them, the side observations of nodes, PDBs and workloads, and the findings section. Every
per-pod table is read through ``timeline_reads.pod_rows`` (one statement builder for both databases), every
item is one of the Structs of ``dashboard/serialize.py`` (``NodeBundleDoc``, ``PdbBundleDoc``,
``WorkloadBundleDoc``, ``FindingBundleDoc``), and every evidence list cites dedupe keys: those of the
observations the bundle has read already (``Carried``), the rest translated with one more query a chunk
(``timeline_reads.cited_keys``). Status samples and node / PDB lanes are
``queries.py``'s reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import F, Func, Q, TextField

from dashboard import queries, serialize, timeline_reads
from dashboard.serialize import FindingBundleDoc, IntervalDoc
from dashboard.timeline_reads import (
    attrs_of,
    chunks,
    cited_keys,
    ids,
    ids_text_sql,
    json_text_sql,
    pod_rows,
    time_text_sql,
)
from timelines import derivation, observation_rows
from timelines.lifecycle.observation import FIELDS, Kind
from timelines.models import (
    Cluster,
    Finding,
    Node,
    Observation,
    Pod,
    PodDisruptionBudget,
    Workload,
)

# The fields of the observation contract; the digest covers these.
CONTRACT_FIELDS = FIELDS


class _IsoUtc(Func):
    """A timestamp as the text ``format_time`` writes, made by the database (``time_text_sql``) in a query
    the ORM builds."""

    template = time_text_sql("%(expressions)s", "postgresql")
    output_field = TextField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template=time_text_sql("%(expressions)s", "sqlite"))


def iso(field: str) -> Any:
    """``field`` as ISO text (NULL stays None)."""
    return _IsoUtc(F(field))


class _SqlText(Func):
    output_field = TextField()


def json_text(field: str) -> Any:
    """A JSON column as text (``json_text_sql``), in a query the ORM builds."""
    return _SqlText(F(field), template=json_text_sql("%(expressions)s"))


def ids_text(field: str) -> Any:
    """An evidence column as its ids' text (``ids_text_sql``), in a query the ORM builds."""
    return _SqlText(F(field), template=ids_text_sql("%(expressions)s"))


# --- observations ------------------------------------------------------------------------------------------
@dataclass
class Carried:
    """What a bundle's derived sections need to know of the observations it carries: the ids of its side
    observations (evidence on a node's or PDB's lane or a finding outside them is cut) and the dedupe keys
    of the observations it has read already, by id (evidence cites keys: these need no second read of
    their bodies). ``note`` keeps at most ``KEYS_HELD`` keys; evidence beyond them is looked up."""

    KEYS_HELD = 1 << 18  # about 50 MB of keys; a namespace's day of 3,000 pods is 51,000 observations

    side_ids: set[int] = field(default_factory=set)
    keys: dict[int, str] = field(default_factory=dict)

    def note(self, item: dict[str, Any], *, side: bool = False) -> None:
        """``item`` (an observation as ``pod_observations`` gives it) is in the bundle."""
        if side:
            self.side_ids.add(item["id"])
        if len(self.keys) < self.KEYS_HELD:
            self.keys[item["id"]] = item["dedupe_key"]


_OBS_COLUMNS = (
    "id",
    "kind",
    "source",
    "observed_iso",
    "received_iso",
    "dedupe_key",
    "stored_uid",
    "node",
    "namespace",
    "name",
    "payload_text",
)


def _observation_items(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[Sequence[Any], dict[str, Any]]]:
    """Each of ``rows`` (``_OBS_COLUMNS``) with its bundle item, decoded a batch at a time
    (``observation_rows.decoded``)."""
    for row, key, payload in observation_rows.decoded(rows, _decoded_from):
        oid, kind, source, observed, received, _key, pod_uid, node, ns, name, _stored = row
        yield (
            row,
            {
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
                "payload": payload,
            },
        )


def _decoded_from(r: Sequence[Any]) -> tuple[Any, ...]:
    """What ``observation_rows.decode`` takes of a row of ``_OBS_COLUMNS`` (its time is text here)."""
    return (r[10], r[5], r[6], r[7], r[8], r[9], datetime.fromisoformat(r[3]))


def _sort_key(item: dict[str, Any]) -> tuple[str, str, str]:
    """``Observation.sort_key`` of a bundle item (its times are text of one width: they sort as times)."""
    return (item["observed_at"], item["kind"], item["dedupe_key"])


def _observation_rows(qs: Any) -> Iterator[dict[str, Any]]:
    """Rows as bundle items; the payload is read as stored and decoded by ``observation_rows``."""
    rows = qs.annotate(
        payload_text=observation_rows.payload_expression(),
        stored_uid=observation_rows.uid_expression(),
        observed_iso=iso("observed_at"),
        received_iso=iso("received_at"),
    ).values_list(*_OBS_COLUMNS)
    for _row, item in _observation_items(rows):
        yield item


def _observation_columns(t: str) -> str:
    return (
        f"{t}.id, {t}.kind, {t}.source, {time_text_sql(f'{t}.observed_at')}, "
        f"{time_text_sql(f'{t}.received_at')}, {t}.dedupe_key, {observation_rows.uid_sql(t)}, {t}.node, {t}.namespace, "
        f"{t}.name, {observation_rows.payload_sql(t)}"
    )


def pod_observations(cluster: Cluster, pods: Sequence[Pod]) -> Iterator[dict[str, Any]]:
    """Every observation of ``pods``: pod by pod in the given order, each in ``Observation.sort_key``
    order (time, kind, dedupe key), which does not depend on row ids: read by time and kind, then sorted
    once decoded (a row stored since migration 0028 holds its key in its body). Times are text already:
    no per-row conversions beyond decoding."""
    for chunk in chunks(pods):
        uids = [p.uid for p in chunk]
        by_uid: dict[str, list[dict[str, Any]]] = {u: [] for u in uids}
        rows = pod_rows(
            Observation,
            cluster,
            uids,
            _observation_columns,
            ("observed_at", "kind"),
            match=observation_rows.pod_match,
        )
        for row, item in _observation_items(rows):
            by_uid[row[6]].append(item)
        del rows
        for pod in chunk:
            items = by_uid.pop(pod.uid)
            items.sort(key=_sort_key)
            yield from items


def _window_and_before(
    qs: Any, since: datetime, until: datetime, where: observation_rows.Where | None = None
) -> list[int]:
    """Ids of ``qs`` observed in the window, plus the newest one before it (the state at ``since``);
    with ``where``, of the rows whose payload it accepts (``observation_rows``: no payload filter in SQL)."""
    if where is not None:
        rows = observation_rows.rows(qs.filter(observed_at__lt=until).order_by("observed_at", "id"), where)
        earlier = [row.id for row in rows if row.observed_at < since]
        return [row.id for row in rows if row.observed_at >= since] + earlier[-1:]
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
    select = observation_rows.selection
    ids: set[int] = set()
    for node in nodes:
        snaps = select(cluster, kinds=(Kind.NODE, Kind.NODE_DELETED), node=node.name)
        ids.update(_window_and_before(snaps, since, until))
        metrics = select(cluster, kinds=(Kind.NODE_METRICS,), node=node.name)
        ids.update(_window_and_before(metrics, since, until))
        # KUBELET_PROCESS observations travel with the pods they were resolved to (resolved_context_ids).
        assert set(derivation.NODE_KINDS) == {
            Kind.NODE,
            Kind.NODE_DELETED,
            Kind.NODE_METRICS,
            Kind.KUBELET_PROCESS,
        }
    for pdb in pdbs:
        snaps = select(cluster, kinds=(Kind.PDB, Kind.PDB_DELETED), namespace=pdb.namespace, name=pdb.name)
        ids.update(_window_and_before(snaps, since, until, observation_rows.field_is(("uid",), pdb.uid)))
        events = select(
            cluster,
            kinds=(Kind.EVENT,),
            namespace=pdb.namespace,
            name=pdb.name,
            has_pod_uid=False,
            since=since,
            before=until,
        )
        about_pdb = observation_rows.field_is(("involved", "kind"), "PodDisruptionBudget")
        ids.update(row.id for row in observation_rows.rows(events, about_pdb))
    for w in workloads:
        snaps = select(
            cluster, kinds=(Kind.WORKLOAD, Kind.WORKLOAD_DELETED), namespace=w.namespace, name=w.name
        )
        ids.update(_window_and_before(snaps, since, until, observation_rows.field_is(("uid",), w.uid)))
    return sorted(ids)


def resolved_context_ids(cluster: Cluster, pods: Sequence[Pod]) -> list[int]:
    """Ids of the UID-less observations (kubelet lines naming a pod only as ns/name, node-level lines,
    kubelet processes) the derive stage resolves to ``pods``: a bundle carries them, so that re-deriving
    its pods gives the timelines it holds."""
    ids: set[int] = set()
    for chunk in chunks([p.uid for p in pods]):
        ids.update(derivation.pod_observations(cluster, list(chunk)).resolved_ids)
    return sorted(ids)


def observations_by_ids(cluster: Cluster, ids: Sequence[int]) -> Iterator[dict[str, Any]]:
    """The observations with ``ids`` in ``sort_key`` order (held in memory: side observations are few)."""
    items: list[dict[str, Any]] = []
    for chunk in chunks(ids):
        items += _observation_rows(observation_rows.selection(cluster, ids=chunk))
    items.sort(key=_sort_key)
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
    cluster: Cluster, since: datetime, until: datetime, carried: Carried, **subject: str
) -> tuple[dict[str, list[IntervalDoc]], int]:
    """A node's or PDB's own lanes overlapping the window, evidence cut to what the bundle carries; and
    how many ids were cut."""
    lanes: dict[str, list[IntervalDoc]] = {}
    dropped: list[int] = []
    rows = [
        (lane, state, start, end, source, attrs, _kept(evidence, carried.side_ids, dropped))
        for lane, state, start, end, source, attrs, evidence in queries.side_intervals(
            cluster.id, since=since, until=until, **subject
        ).values_list("lane", "state", iso("start"), iso("end"), "source", "attrs", "evidence")
    ]
    key_of = timeline_reads.observation_keys(cluster, (i for *_, kept in rows for i in kept), carried.keys)
    for lane, state, start, end, source, attrs, kept in rows:
        lanes.setdefault(lane, []).append(
            IntervalDoc(
                state=state,
                start=start,
                end=end,
                source=source,
                attrs=attrs_of(attrs),
                evidence=timeline_reads.evidence_keys(kept, key_of),
            )
        )
    return lanes, len(set(dropped))


def node_doc(
    cluster: Cluster, node: Node, since: datetime, until: datetime, carried: Carried
) -> serialize.NodeBundleDoc:
    """A node in the bundle: its own lanes (``node:*``) overlapping the window."""
    lanes, dropped = _side_lanes(cluster, since, until, carried, node=node.name)
    return serialize.node_bundle_doc(node, lanes=lanes, evidence_outside_bundle=dropped)


def pdb_doc(
    cluster: Cluster,
    pdb: PodDisruptionBudget,
    since: datetime,
    until: datetime,
    carried: Carried,
    covered: Sequence[str],
) -> serialize.PdbBundleDoc:
    """A PDB in the bundle: its lanes overlapping the window; its status samples in the window and the one
    before."""
    lanes, dropped = _side_lanes(cluster, since, until, carried, pdb_uid=pdb.uid)
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


def _finding_columns(t: str) -> str:
    end = f"{t}.{connection.ops.quote_name('end')}"
    return (
        f"{t}.id, {t}.subject, {t}.subject_name, {t}.pod_uid, {t}.namespace, {t}.node, {t}.kind, {t}.severity, "
        f"{t}.message, {time_text_sql(f'{t}.start')}, {time_text_sql(end)}, {json_text_sql(f'{t}.attrs')}, "
        f"{ids_text_sql(f'{t}.evidence')}"
    )


def findings(
    cluster: Cluster,
    pod_uids: Sequence[str],
    pdb_uids: Sequence[str],
    since: datetime,
    until: datetime,
    carried: Carried,
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
            evidence = ",".join(i for i in ids(evidence) if int(i) in carried.side_ids)
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
            attrs=attrs_of(attrs),
            evidence=keys(evidence),
        )

    for chunk in chunks(pod_uids):
        # Within a chunk by pod UID (not the chunk's pod order): the order this section always had.
        rows = pod_rows(Finding, cluster, chunk, _finding_columns, ("start", "kind", "id"), by_uid=True)
        keys = cited_keys(cluster, [rows], carried.keys)
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
        keys = cited_keys(cluster, [rows], carried.keys)
        for row in rows:
            yield item(row, keys, cut=True)
