"""Reads for views, the API, the CLI and export. Everything here reads derived rows, never raw JSON."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar, cast

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Min, Model, Q, QuerySet
from django.utils import timezone

from collectors.models import CollectorState  # the collectors' own rows, read for their health
from dashboard import freshness, serialize
from timelines.lifecycle import cluster_objects
from timelines.lifecycle.timeline import Finding as FindingT
from timelines.lifecycle.timeline import Interval as IntervalT
from timelines.lifecycle.timeline import (
    IntervalSource,
    MarkerKind,
    PodTimeline,
    Severity,
    format_time,
    parse_time,
)
from timelines.lifecycle.timeline import Marker as MarkerT
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
from timelines.models import NotFound as NotFound  # the read side's callers catch queries.NotFound
from timelines.pg_arrays import int_array, text_array

_M = TypeVar("_M", bound=Model)


def get_cluster(name: str) -> Cluster:
    return Cluster.objects.named(name)


def find_pods(cluster: Cluster, *, namespace: str, name: str) -> list[Pod]:
    """Every incarnation (UID) of ``namespace/name``, newest first."""
    return list(
        Pod.objects.filter(cluster=cluster, namespace=namespace, name=name).order_by(
            "-last_seen", "-created_at", "uid"
        )
    )


def resolve_pod(cluster: Cluster, *, uid: str | None = None, pod_ref: str | None = None) -> Pod:
    """The pod with ``uid``, or the newest incarnation of ``pod_ref`` (``NAMESPACE/NAME``)."""
    if uid:
        pod = Pod.objects.filter(cluster=cluster, uid=uid).first()
        if pod is None:
            raise NotFound(f"no pod with UID {uid!r} in cluster {cluster.name!r}")
        return pod
    if not pod_ref or pod_ref.count("/") != 1 or not all(pod_ref.split("/")):
        raise NotFound(f"pod reference {pod_ref!r} is not NAMESPACE/NAME")
    namespace, name = pod_ref.split("/")
    pods = find_pods(cluster, namespace=namespace, name=name)
    if not pods:
        raise NotFound(f"no pod {pod_ref!r} in cluster {cluster.name!r}")
    return pods[0]


def observation_keys(cluster: Cluster, ids: Iterable[int]) -> dict[int, str]:
    """The dedupe key of each of the observations ``ids`` of ``cluster``, in ONE query (the id index of
    each partition, the primary key on SQLite), however many ids: the ids travel as one array parameter
    (PostgreSQL) or one JSON text (SQLite ``json_each``), never one bound value each. An id no longer
    stored (dropped by retention) is absent from the answer."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    table = connection.ops.quote_name(Observation._meta.db_table)
    if connection.vendor == "postgresql":
        sql = f"SELECT id, dedupe_key FROM {table} WHERE cluster_id = %s AND id = ANY(%s::bigint[])"
        param: str = int_array(wanted)
    else:
        sql = (
            f"SELECT id, dedupe_key FROM {table} WHERE cluster_id = %s "
            "AND id IN (SELECT value FROM json_each(%s))"
        )
        param = orjson.dumps(wanted).decode()
    with connection.cursor() as cursor:
        cursor.execute(sql, [cluster.pk, param])
        return dict(cursor.fetchall())


def evidence_keys(ids: Iterable[int] | None, key_of: Mapping[int, str]) -> tuple[str, ...]:
    """A stored evidence column (observation ids) as the document cites it: the observations' dedupe keys,
    sorted (the same event reads the same in any cluster or database; ids differ between them). An id
    ``key_of`` does not know (an observation retention dropped) is left out: its key is gone with it."""
    return tuple(sorted({key_of[i] for i in ids or () if i in key_of}))


def pod_timeline(cluster: Cluster, pod: Pod) -> PodTimeline:
    """The stored timeline of ``pod``; evidence cites the observations' dedupe keys (the stored rows hold
    ids, translated here with one query for the whole document: ``observation_keys``)."""
    intervals = list(
        Interval.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("lane", "start", "id")
    )
    marker_rows = list(Marker.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("at", "id"))
    finding_rows = list(
        Finding.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("start", "kind", "id")
    )
    key_of = observation_keys(
        cluster,
        (i for rows in (intervals, marker_rows, finding_rows) for r in rows for i in r.evidence or ()),
    )
    lanes: dict[str, list[IntervalT]] = {"worker": [], "api": []}
    for row in intervals:
        lanes.setdefault(row.lane, []).append(
            IntervalT(
                row.lane,
                row.state,
                row.start,
                row.end,
                cast(IntervalSource, row.source),
                row.attrs,
                evidence_keys(row.evidence, key_of),
            )
        )
    markers = tuple(
        MarkerT(
            m.at, cast(MarkerKind, m.kind), m.reason, m.message, m.attrs, evidence_keys(m.evidence, key_of)
        )
        for m in marker_rows
    )
    findings = tuple(
        FindingT(
            f.kind,
            cast(Severity, f.severity),
            f.message,
            f.start,
            f.end,
            evidence_keys(f.evidence, key_of),
            f.attrs,
        )
        for f in finding_rows
    )
    owner = {"kind": pod.owner_kind, "name": pod.owner_name, "uid": pod.owner_uid} if pod.owner_kind else None

    return PodTimeline(
        uid=pod.uid,
        namespace=pod.namespace or None,
        name=pod.name or None,
        node=pod.node or None,
        lanes={k: tuple(lanes[k]) for k in sorted(lanes, key=serialize.lane_order)},
        markers=markers,
        findings=findings,
        static=pod.static,
        owner=owner,
        created_at=pod.created_at,
        deleted_at=pod.deleted_at,
        phase=pod.phase or None,
        first_observed=pod.first_seen,
        last_observed=pod.last_seen,
    )


# --- the dashboard and the API (dashboard/web/views.py, dashboard/web/api/views.py) ---------------------------------
# These take the readable namespaces (``namespaces``: None = all) from dashboard/web/access.py, so a caller
# can never forget to narrow a read to what its user may see.

WINDOW_SCHEMA = "podlife.window/v1"
MAX_WINDOW_PODS = 20_000


def _ns_filter(qs: Any, namespaces: set[str] | None, field: str = "namespace") -> Any:
    return qs if namespaces is None else qs.filter(**{f"{field}__in": sorted(namespaces)})


def collector_health(
    cluster_ids: Iterable[int] | None = None, *, now: datetime | None = None
) -> list[dict[str, Any]]:
    """Health of every watch and kubelet pull (CollectorState) of the clusters (all when None), ordered by
    cluster and resource, with ``lag_seconds`` (now − last event), ``behind_seconds`` (now − its last
    progress: an event or the end of a step or pull) and ``stale`` (behind more than
    ``PODLIFE_LIVE_STALE_S``, or never progressed; a pull skipped on purpose is not stale). The one computation of collector
    health: the pages, the REST API and ``/metrics`` (``dashboard/collector_health.py``) all read it. The per-node
    bookkeeping rows of log pulls (``kubelet-logs:NODE``) are summarized by their cluster's row."""
    now = now or timezone.now()
    stale_after = float(settings.PODLIFE_LIVE_STALE_S)
    rows = CollectorState.objects.select_related("cluster").order_by("cluster__name", "resource")
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=list(cluster_ids))
    out = []
    for row in rows:
        if ":" in row.resource:
            continue
        lag = (now - row.last_event_at).total_seconds() if row.last_event_at else None
        # Progress is an event or the end of a step/pull: a quiet watch still ends a step every timeout, a
        # starved one (its next step queued behind others) or a dead one does neither.
        progress = max((t for t in (row.last_event_at, row.last_step_at) if t is not None), default=None)
        behind = None if progress is None else max(0.0, (now - progress).total_seconds())
        skipped = row.note.startswith("skipped:")
        out.append(
            {
                "cluster": row.cluster.name,
                "resource": row.resource,
                "resource_version": row.resource_version,
                "last_event_at": row.last_event_at,
                "last_step_at": row.last_step_at,
                "lag_seconds": None if lag is None else max(0.0, lag),
                "behind_seconds": behind,
                "stale": not skipped and (behind is None or behind > stale_after),
                "events_total": row.events_total,
                "events_per_second": row.events_per_second,
                "errors_total": row.errors_total,
                "relists_total": row.relists_total,
                "last_error": row.last_error,
                "last_error_at": row.last_error_at,
                "note": row.note,
                "lease_owner": row.lease_owner,
                "lease_expires": row.lease_expires,
            }
        )
    return out


def finding_counts(readable: Q) -> list[dict[str, Any]]:
    """Findings counted by cluster, kind and severity (``readable`` from Access.q())."""
    rows = (
        Finding.objects.filter(readable)
        .values("cluster__name", "kind", "severity")
        .annotate(n=Count("id"))
        .order_by("cluster__name", "kind", "severity")
    )
    return [
        {"cluster": r["cluster__name"], "kind": r["kind"], "severity": r["severity"], "count": r["n"]}
        for r in rows
    ]


def cluster_counts(cluster: Cluster, namespaces: set[str] | None) -> dict[str, int]:
    pods = _ns_filter(Pod.objects.filter(cluster=cluster), namespaces)
    return {
        "pods": pods.count(),
        "live_pods": pods.filter(deleted_at__isnull=True).count(),
        "nodes": Node.objects.filter(cluster=cluster).count(),
        "findings": _ns_filter(Finding.objects.filter(cluster=cluster), namespaces).count(),
    }


def node_summaries(cluster: Cluster, namespaces: set[str] | None) -> list[dict[str, Any]]:
    """Every node known from Node rows or from pods, with its readable pod counts."""
    counts = {
        r["node"]: r
        for r in _ns_filter(Pod.objects.filter(cluster=cluster).exclude(node=""), namespaces)
        .values("node")
        .annotate(pods=Count("id"), live=Count("id", filter=Q(deleted_at__isnull=True)))
    }
    nodes = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    out = []
    for name in sorted(set(nodes) | set(counts)):
        n, c = nodes.get(name), counts.get(name, {})
        out.append(
            {
                "name": name,
                "ready": n.ready if n else None,
                "unschedulable": n.unschedulable if n else False,
                "deleted_at": n.deleted_at if n else None,
                "last_seen": n.last_seen if n else None,
                "pods": c.get("pods", 0),
                "live_pods": c.get("live", 0),
            }
        )
    return out


def namespace_summaries(cluster: Cluster, namespaces: set[str] | None) -> list[dict[str, Any]]:
    rows = (
        _ns_filter(Pod.objects.filter(cluster=cluster), namespaces)
        .values("namespace")
        .annotate(pods=Count("id"), live=Count("id", filter=Q(deleted_at__isnull=True)))
        .order_by("namespace")
    )
    findings = dict(
        _ns_filter(Finding.objects.filter(cluster=cluster), namespaces)
        .values_list("namespace")
        .annotate(n=Count("id"))
    )
    return [
        {
            "name": r["namespace"],
            "pods": r["pods"],
            "live_pods": r["live"],
            "findings": findings.get(r["namespace"], 0),
        }
        for r in rows
    ]


def data_extent(
    cluster: Cluster, *, node: str = "", namespace: str = "", pod_uids: list[str] | None = None
) -> tuple[datetime | None, datetime | None]:
    """Earliest start and latest start/end of the intervals in a scope (to pick a default window)."""
    qs = Interval.objects.filter(cluster=cluster)
    if node:
        qs = qs.filter(node=node)
    if namespace:
        qs = qs.filter(namespace=namespace)
    if pod_uids is not None:
        qs = qs.filter(pod_uid__in=pod_uids[:5000])
    agg = qs.aggregate(first=Min("start"), last_start=Max("start"), last_end=Max("end"))
    last = max((t for t in (agg["last_start"], agg["last_end"]) if t is not None), default=None)
    return agg["first"], last


def latest_cordon(cluster: Cluster, node: str) -> tuple[datetime, datetime | None] | None:
    """The start and end (None while it lasts) of the node's latest ``cordoned`` interval (its own
    ``node:*`` lanes), or None when it was never seen cordoned: a drain begins with a cordon."""
    row = (
        Interval.objects.filter(cluster=cluster, node=node, pod_uid__isnull=True, state="cordoned")
        .order_by("-start")
        .values_list("start", "end")
        .first()
    )
    return (row[0], row[1]) if row else None


def time_text_sql(column: str, vendor: str | None = None) -> str:
    """SQL for a timestamp column (already quoted where it must be) as the text ``format_time`` writes
    (``2024-06-07T06:54:41.100000+00:00``), made by the database: rows read as text need no parsing.
    PostgreSQL formats it with ``to_char`` in UTC; SQLite holds Django's naive UTC text (microseconds only
    when not zero), which is cut and padded. NULL stays NULL. ``vendor``: the database's (default: ours)."""
    if (vendor or connection.vendor) == "postgresql":
        return f"""to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""
    return (
        f"substr({column}, 1, 10) || 'T' || substr({column}, 12, 8) || '.' || "
        f"substr(substr({column}, 21, 6) || '000000', 1, 6) || '+00:00'"
    )


def _ids(text: Any) -> Any:
    """Evidence ids as raw JSON, passed through to the response undecoded."""
    if isinstance(text, str):
        return orjson.Fragment(text)
    return text if text is not None else []


IN_BATCH = 900  # values in one IN list at most (SQLite caps bound parameters)
WINDOW_FETCH = 1000  # rows per fetch of a window read (one round trip each from a server-side cursor)


def _pods_rows(cursor: Any) -> Iterator[tuple[Any, list[tuple[Any, ...]]]]:
    """The rows of ``cursor`` (ordered by their first column, a pod's UID) pod by pod, fetched a batch at a
    time: only one pod's rows and one batch are Python objects at once."""

    def rows() -> Iterator[tuple[Any, ...]]:
        while batch := cursor.fetchmany(WINDOW_FETCH):
            yield from batch

    for uid, group in groupby(rows(), key=itemgetter(0)):
        yield uid, list(group)


WINDOW_CURSOR = "podlife_window_read"  # the server-side cursor of every window read (one open at a time)


def _streaming_cursor() -> Any:
    """A cursor whose rows reach Python a batch at a time: a server-side cursor on PostgreSQL (unless
    ``DISABLE_SERVER_SIDE_CURSORS``, as Django's ``QuerySet.iterator``), SQLite's own stepping cursor.

    The server-side cursor always has the same name. Django's ``chunked_cursor()`` names each one after
    its thread and a counter, and psycopg caches the parsed form of each distinct statement it runs (128
    of them, least recently used): with the name in each ``DECLARE``, every read put three new statements
    in that cache and pushed three out, and each web request runs on a thread of its own. What stayed in
    the cache after a load were objects made at its peak, scattered over pymalloc's arenas, each keeping a
    mostly empty arena from being given back (docs/performance-history.md "Load"). A read opens its cursors one
    after the other, each closed (``with``) before the next, so one name per connection is enough."""
    if connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS") or connection.vendor != "postgresql":
        return connection.cursor()
    # What chunked_cursor() returns (its body is this call with its own name; Django has no public way
    # to name one): Django's cursor wrapper over the backend's server-side cursor (client-side binding,
    # WITH HOLD in autocommit).
    return cast(Any, connection)._cursor(name=WINDOW_CURSOR)


def _kept(encoded: bytes) -> bytes:
    """``encoded`` (an ``orjson.dumps`` result) copied to its own size, to be kept while others are made:
    orjson (3.13) hands back its whole working buffer, at least 4 KiB, however short the JSON in it."""
    return bytes(memoryview(encoded))


def _json_object_head(value: dict[str, Any]) -> bytes:
    """The JSON of a non-empty object without its closing ``}``, for more members to follow (a copy of
    its own size, as ``_kept``)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)[:-1]


def window_json(
    cluster: Cluster,
    *,
    start: datetime,
    end: datetime,
    namespaces: set[str] | None,
    node: str = "",
    namespace: str = "",
    pod_uids: list[str] | None = None,
    lanes: Iterable[str] | None = ("worker",),
    scope: dict[str, str] | None = None,
    node_lanes: bool = True,
) -> bytes:
    """Every readable pod in a scope with something in ``[start, end)``, as the JSON of schema
    ``podlife.window/v1`` (compact rows; docs/api.md): the chosen lanes (None = all), markers, findings and
    each pod's ``freshness`` (dashboard/freshness.py), and the node's own lanes unless ``node_lanes`` is
    False (a reader without the whole cluster: ``{}``).

    Built for speed (a 10,000-pod namespace day) and for a small peak (issue #18 d6: the node page's API
    clients read it many at a time, and what a read holds at its peak stays with the allocator): one query
    per table, no ORM converters, evidence ids kept as raw JSON (``orjson.Fragment``); rows come a batch at a
    time from a server-side cursor and each pod's rows are encoded as soon as they are complete, so what
    is held while it builds is about the answer's own bytes, never every pod's rows as Python objects.
    ``orjson.loads`` gives plain data.
    """

    # Hand-written SQL (portable: PostgreSQL and SQLite): building these through the ORM costs more than
    # running them on a node page, and the endpoint's budget is twice the raw query time.
    q = connection.ops.quote_name
    t0, t1 = connection.ops.adapt_datetimefield_value(start), connection.ops.adapt_datetimefield_value(end)
    dumps = orjson.dumps

    postgres = connection.vendor == "postgresql"

    def in_list(column: str, values: Iterable[str], params: list[Any]) -> str:
        # PostgreSQL: one array parameter, so each query has one text whatever the number of values.
        # An IN list of N placeholders is a new statement per N: psycopg parses and caches each text
        # (up to 50 parameters), and a statement first met at a load's peak stays in that cache after it,
        # keeping a mostly empty pymalloc arena from being given back (docs/performance-history.md "Load").
        # The array goes as one literal (store.text_array: psycopg would dump a list value by value).
        # SQLite has no arrays: placeholders there (IN_BATCH at most: it caps bound parameters).
        values = list(values)
        if not values:
            return "1 = 0"
        if postgres:
            params.append(text_array(values))
            return f"{column} = ANY(%s::text[])"
        params.extend(values)
        return f"{column} IN ({', '.join(['%s'] * len(values))})"

    def scope_sql(params: list[Any]) -> str:
        parts = []
        if node:
            parts.append("node = %s")
            params.append(node)
        if namespace:
            parts.append("namespace = %s")
            params.append(namespace)
        if pod_uids is not None:
            parts.append(in_list("pod_uid", pod_uids, params))
        if namespaces is not None:
            parts.append(in_list("namespace", sorted(namespaces), params))
        return "".join(f" AND {p}" for p in parts)

    overlap = f"start < %s AND ({q('end')} IS NULL OR {q('end')} >= %s)"
    # Pods' lanes and, on a node page, the node's own lanes (node:*, no pod) in one query. Parameters are
    # appended in the order their placeholders appear.
    params: list[Any] = [cluster.id, t1, t0]
    node_sql = ""
    if node:
        node_sql = " AND node = %s"
        params.append(node)
    pod_part = "pod_uid IS NOT NULL"
    if namespace:
        pod_part += " AND namespace = %s"
        params.append(namespace)
    if pod_uids is not None:
        pod_part += " AND " + in_list("pod_uid", pod_uids, params)
    if namespaces is not None:
        pod_part += " AND " + in_list("namespace", sorted(namespaces), params)
    if lanes is not None:
        pod_part += " AND " + in_list("lane", lanes, params)
    node_part = ""
    if node:
        node_part = " OR (pod_uid IS NULL AND lane LIKE %s)"
        params.append("node:%")
    params.append(MAX_WINDOW_PODS * 20)
    interval_sql = (
        f"SELECT pod_uid, lane, state, {time_text_sql('start')}, {time_text_sql(q('end'))}, source, "
        f"CAST(evidence AS TEXT) FROM {q(Interval._meta.db_table)} WHERE cluster_id = %s AND {overlap}"
        f"{node_sql} AND (({pod_part}){node_part}) ORDER BY pod_uid, start, lane LIMIT %s"
    )
    # Each pod's parts as JSON text, by UID; a pod is in the answer when it has intervals or findings (in
    # the order they were met) and a pod row. Markers count only for pods with intervals.
    intervals: dict[str, bytes] = {}
    markers: dict[str, bytes] = {}
    findings: dict[str, bytes] = {}
    first_start: dict[str, str] = {}
    node_rows: dict[str, list[list[Any]]] = {}
    with _streaming_cursor() as cursor:
        cursor.execute(interval_sql, params)
        for uid, rows in _pods_rows(cursor):
            if uid is None:
                for _, lane, state, s, e, source, evidence in rows:
                    node_rows.setdefault(lane, []).append([state, s, e, source, _ids(evidence)])
                continue
            first_start[uid] = rows[0][3]
            intervals[uid] = _kept(dumps([[*r[1:6], _ids(r[6])] for r in rows]))

    params = [cluster.id, t0, t1]
    with _streaming_cursor() as cursor:
        cursor.execute(
            f"SELECT pod_uid, {time_text_sql('at')}, kind, reason, message, CAST(evidence AS TEXT) "
            f"FROM {q(Marker._meta.db_table)} WHERE cluster_id = %s AND at >= %s AND at < %s "
            f"AND pod_uid IS NOT NULL{scope_sql(params)} ORDER BY pod_uid, at, id",
            params,
        )
        for uid, rows in _pods_rows(cursor):
            if uid in intervals:
                markers[uid] = _kept(dumps([[*r[1:5], _ids(r[5])] for r in rows]))

    params = [cluster.id, t1, t0]
    with _streaming_cursor() as cursor:
        cursor.execute(
            f"SELECT pod_uid, kind, severity, message, {time_text_sql('start')}, {time_text_sql(q('end'))}, "
            f"CAST(evidence AS TEXT) FROM {q(Finding._meta.db_table)} WHERE cluster_id = %s AND {overlap} "
            f"AND pod_uid IS NOT NULL{scope_sql(params)} ORDER BY pod_uid, start, id",
            params,
        )
        for uid, rows in _pods_rows(cursor):
            first_start.setdefault(uid, rows[0][4])
            findings[uid] = _kept(dumps([[*r[1:6], _ids(r[6])] for r in rows]))

    # Each pod as its JSON object but its last member (freshness, known once every pod's node is), with
    # what it sorts by, its node and last_seen; its parts are dropped as it is made.
    pods: list[tuple[tuple[str, str, str], bytes, str, datetime | None, str]] = []
    uids = list(first_start)
    empty = orjson.Fragment(b"[]")
    with connection.cursor() as cursor:
        for i in range(0, len(uids), IN_BATCH):
            params = [cluster.id]
            cursor.execute(
                f"SELECT uid, namespace, name, node, owner_kind, owner_name, phase, {time_text_sql('created_at')}, "
                f"{time_text_sql('deleted_at')}, {time_text_sql('last_seen')} FROM {q(Pod._meta.db_table)} "
                f"WHERE cluster_id = %s AND {in_list('uid', uids[i : i + IN_BATCH], params)}",
                params,
            )
            for uid, ns, name, pnode, okind, oname, phase, created, deleted, last_seen in cursor.fetchall():
                parts = (intervals.pop(uid, None), markers.pop(uid, None), findings.pop(uid, None))
                body = _json_object_head(
                    {
                        "uid": uid,
                        "intervals": empty if parts[0] is None else orjson.Fragment(parts[0]),
                        "markers": empty if parts[1] is None else orjson.Fragment(parts[1]),
                        "findings": empty if parts[2] is None else orjson.Fragment(parts[2]),
                        "namespace": ns,
                        "name": name,
                        "node": pnode,
                        "owner_kind": okind,
                        "owner_name": oname,
                        "phase": phase,
                        "created_at": created,
                        "deleted_at": deleted,
                    }
                )
                pods.append(((first_start[uid], ns, name), body, pnode, parse_time(last_seen), uid))
    del intervals, markers, findings, first_start
    pods.sort(key=itemgetter(0))
    truncated = len(pods) > MAX_WINDOW_PODS
    del pods[MAX_WINDOW_PODS:]

    until = freshness.kubelet_evidence_until(
        cluster, (p[2] for p in pods), since=start - freshness.LOOKBACK, namespaces=namespaces
    )
    # Only a pod that would wait for kubelet evidence is looked up for its kubelet's final status.
    final = freshness.final_status_at(
        cluster,
        (p[4] for p in pods if freshness.pending_since(p[3], until.get(p[2])) is not None),
        since=start - freshness.LOOKBACK,
    )
    out = io.BytesIO()
    out.write(
        _json_object_head(
            {
                "schema": WINDOW_SCHEMA,
                "cluster": cluster.name,
                "scope": scope or {},
                "window": {"from": start, "to": end},
                "lanes": None if lanes is None else list(lanes),
            }
        )
    )
    out.write(b',"pods":[')
    pods.reverse()  # written from the end of the list: each pod's bytes are dropped once written
    for n in range(len(pods)):
        _, body, pnode, last_seen, uid = pods.pop()
        out.write(b"," if n else b"")
        out.write(body)
        out.write(b',"freshness":')
        out.write(dumps(freshness.freshness_of(last_seen, until.get(pnode), final.get(uid))))
        out.write(b"}")
    out.write(b"],")
    tail = {
        "truncated": truncated,
        "node_lanes": node_rows if node_lanes else {},
        "kubelet_until": {n: format_time(at) for n, at in until.items()},
    }
    out.write(orjson.dumps(tail, option=orjson.OPT_NON_STR_KEYS)[1:])
    return out.getvalue()


def workload_tree(cluster: Cluster, workload: Workload) -> list[Workload]:
    """``workload`` and the workloads it owns (a Deployment's ReplicaSets), oldest first."""
    owned = list(
        Workload.objects.filter(cluster=cluster, owner_uid=workload.uid).order_by("created_at", "name")
    )
    return [workload, *owned]


def workload_pod_uids(cluster: Cluster, workload: Workload, namespaces: set[str] | None) -> list[str]:
    owners = [w.uid for w in workload_tree(cluster, workload)]
    qs = _ns_filter(
        Pod.objects.filter(cluster=cluster, namespace=workload.namespace, owner_uid__in=owners), namespaces
    )
    return list(qs.values_list("uid", flat=True)[:MAX_WINDOW_PODS])


WORKLOAD_SAMPLE_FIELDS = ("replicas", "current", "ready", "updated", "available")
PDB_SAMPLE_FIELDS = (
    "disruptions_allowed",
    "current_healthy",
    "desired_healthy",
    "expected_pods",
    "observed_generation",
    "reason",
    "disrupted_pods",
    "conditions",
)


def _status_samples(
    qs: Any, fields: Sequence[str], since: datetime | None, until: datetime | None
) -> list[dict[str, Any]]:
    """Status samples (``at`` and ``fields``) in time order. With ``since``: those from it on, preceded by
    the newest one before it (the status at ``since``); with ``until``: those before it."""
    rows = qs
    if since is not None:
        rows = rows.filter(at__gte=since)
    if until is not None:
        rows = rows.filter(at__lt=until)
    out = [dict(r) for r in rows.order_by("at", "id").values("at", *fields)]
    if since is not None:
        before = qs.filter(at__lt=since).order_by("-at", "-id").values("at", *fields).first()
        if before is not None:
            out.insert(0, dict(before))
    return out


def workload_samples(
    workload: Workload, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """A workload's status samples (times as datetimes; ``serialize.workload_sample`` shapes one)."""
    return _status_samples(workload.samples.all(), WORKLOAD_SAMPLE_FIELDS, since, until)


def _current_incarnation(qs: QuerySet[_M], what: str, cluster: Cluster) -> _M:
    """The live object of a name (else the newest deleted one): names are reused, UIDs are not."""
    found = qs.order_by("deleted_at", "-created_at").first()
    if found is None:
        raise NotFound(f"no {what} in cluster {cluster.name!r}")
    return found


def get_workload(cluster: Cluster, namespace: str, kind: str, name: str) -> Workload:
    qs = Workload.objects.filter(cluster=cluster, namespace=namespace, kind=kind, name=name)
    return _current_incarnation(qs, f"{kind} {namespace}/{name}", cluster)


def workloads(cluster: Cluster, namespaces: set[str] | None, *, namespace: str = "") -> list[Workload]:
    qs = _ns_filter(Workload.objects.filter(cluster=cluster), namespaces)
    if namespace:
        qs = qs.filter(namespace=namespace)
    return list(qs.order_by("namespace", "kind", "name"))


def owned_workloads(cluster: Cluster, namespaces: set[str] | None, *, namespace: str = "") -> list[Workload]:
    """The workloads that have an owner (a Deployment's ReplicaSets): what a page needs to group pods
    Deployment → ReplicaSet → pods, without every workload of the cluster."""
    qs = _ns_filter(Workload.objects.filter(cluster=cluster).exclude(owner_name=""), namespaces)
    if namespace:
        qs = qs.filter(namespace=namespace)
    return list(qs.only("namespace", "kind", "name", "owner_kind", "owner_name"))


def get_pdb(cluster: Cluster, namespace: str, name: str) -> PodDisruptionBudget:
    qs = PodDisruptionBudget.objects.filter(cluster=cluster, namespace=namespace, name=name)
    return _current_incarnation(qs, f"PodDisruptionBudget {namespace}/{name}", cluster)


def pdbs(cluster: Cluster, namespaces: set[str] | None, *, namespace: str = "") -> list[PodDisruptionBudget]:
    qs = _ns_filter(PodDisruptionBudget.objects.filter(cluster=cluster), namespaces)
    if namespace:
        qs = qs.filter(namespace=namespace)
    return list(qs.order_by("namespace", "name"))


# metav1.LabelSelector semantics live in the pure core; re-exported for views, export and scope.
selector_matches = cluster_objects.selector_matches
selector_text = cluster_objects.selector_text


def pdb_findings(pdb: PodDisruptionBudget, *, limit: int = 200) -> list[Finding]:
    """The findings about a PDB (blocked drains; each may name the pod it blocked), newest first."""
    qs = Finding.objects.filter(cluster_id=pdb.cluster_id, subject="pdb", attrs__pdb_uid=pdb.uid)
    return list(qs.order_by("-start")[:limit])


def pdb_covered_pods(pdb: PodDisruptionBudget) -> list[Pod]:
    pods = Pod.objects.filter(cluster_id=pdb.cluster_id, namespace=pdb.namespace).order_by(
        "name", "-last_seen"
    )
    return [p for p in pods if selector_matches(pdb.selector or {}, p.labels or {})]


def pdb_samples(
    pdb: PodDisruptionBudget, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """A PDB's status samples (times as datetimes; ``serialize.pdb_sample`` shapes one)."""
    return _status_samples(pdb.samples.all(), PDB_SAMPLE_FIELDS, since, until)


def blocked_periods(samples: list[dict[str, Any]], *, until: datetime | None = None) -> list[dict[str, Any]]:
    """Spans where ``disruptions_allowed`` was 0, from consecutive status samples (open end = still)."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for s in samples:
        blocked = s["disruptions_allowed"] <= 0
        if blocked and current is None:
            current = {"start": s["at"], "end": None, "reason": s.get("reason") or ""}
        elif not blocked and current is not None:
            current["end"] = s["at"]
            out.append(current)
            current = None
    if current is not None:
        current["end"] = until
        out.append(current)
    return out


def overlapping(since: datetime, until: datetime) -> Q:
    """Rows (intervals, findings) that overlap ``[since, until)``: begun before its end, not ended before it."""
    return Q(start__lt=until) & (Q(end__isnull=True) | Q(end__gte=since))


def side_intervals(
    cluster_id: int,
    *,
    node: str | None = None,
    pdb_uid: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[Interval]:
    """The derived intervals that belong to no pod: a node's own lanes (``node:*``) or a PDB's
    (``pdb:NAME``), optionally only those overlapping ``[since, until)``; by lane, then time."""
    qs = Interval.objects.filter(cluster_id=cluster_id, pod_uid__isnull=True)
    if node is not None:
        qs = qs.filter(node=node, lane__startswith="node:")
    if pdb_uid is not None:
        qs = qs.filter(attrs__pdb_uid=pdb_uid)
    if since is not None and until is not None:
        qs = qs.filter(overlapping(since, until))
    return qs.order_by("lane", "start", "id")


def pdb_lane(pdb: PodDisruptionBudget) -> list[Interval]:
    """The derived ``pdb:NAME`` intervals when the lifecycle core made them."""
    return list(side_intervals(pdb.cluster_id, pdb_uid=pdb.uid))


def pod_observations(cluster: Cluster, pod: Pod, *, limit: int = 5000) -> list[Observation]:
    return list(
        Observation.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("observed_at", "id")[:limit]
    )


def observations_by_id(
    cluster: Cluster, ids: Iterable[int], namespaces: set[str] | None
) -> list[Observation]:
    qs = _ns_filter(Observation.objects.filter(cluster=cluster, id__in=list(ids)[:1000]), namespaces)
    return list(qs.order_by("observed_at", "id"))


MAX_KEYS = 1000  # observations asked for by key in one request


def observations_by_key(
    cluster: Cluster, keys: Iterable[str], namespaces: set[str] | None
) -> list[Observation]:
    """The observations of ``cluster`` with these dedupe keys (what a timeline document cites as
    evidence), over the ``(cluster, dedupe_key)`` index; at most ``MAX_KEYS``."""
    wanted = sorted(set(keys))[:MAX_KEYS]
    qs = _ns_filter(Observation.objects.filter(cluster=cluster, dedupe_key__in=wanted), namespaces)
    return list(qs.order_by("observed_at", "id"))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": [1]}}`` → ``{"a.b[0]": 1}``; lists of named objects are keyed by name or type."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        if not value and prefix:
            out[prefix] = []
        for i, v in enumerate(value):
            key = v.get("name") or v.get("type") if isinstance(v, dict) else None
            out.update(flatten(v, f"{prefix}[{key}]" if isinstance(key, str) else f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def payload_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What changed between two payloads, path by path (``resource_version`` and ``watch`` included)."""
    a, b = flatten(dict(before)), flatten(dict(after))
    return [
        {
            "path": k,
            "before": a.get(k),
            "after": b.get(k),
            "change": "added" if k not in a else "removed" if k not in b else "changed",
        }
        for k in sorted(set(a) | set(b))
        if a.get(k, _MISSING) != b.get(k, _MISSING)
    ]


_MISSING = object()


def findings_filtered(
    readable: Q,
    *,
    cluster: str = "",
    namespace: str = "",
    kind: str = "",
    severity: str = "",
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 500,
) -> tuple[list[Finding], int]:
    """Findings matching every given filter (blank = any) and readable; returns (page, total)."""
    qs = Finding.objects.filter(readable).select_related("cluster")
    if cluster:
        qs = qs.filter(cluster__name=cluster)
    if namespace:
        qs = qs.filter(namespace=namespace)
    if kind:
        qs = qs.filter(kind=kind)
    if severity:
        qs = qs.filter(severity=severity)
    if start is not None:
        qs = qs.filter(Q(end__isnull=True) | Q(end__gte=start))
    if end is not None:
        qs = qs.filter(start__lt=end)
    return list(qs.order_by("-start", "id")[:limit]), qs.count()


def finding_kinds(readable: Q) -> list[str]:
    return list(Finding.objects.filter(readable).values_list("kind", flat=True).distinct().order_by("kind"))
