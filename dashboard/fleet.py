"""Reads that stay fast at fleet scale (150,000 pods, issue #17 deliverable 5): the overview from aggregates
(one GROUP BY per table, never a row per pod), pod search over indexed prefixes, and the level of detail
of a wide Gantt window (the server folds thousands of pod rows into a few hundred bands of pods).

Reads only; the indexes behind them are migration 0015 (docs/performance-history.md, "Pages at fleet scale").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet, Subquery

from timelines.lifecycle.timeline import format_time
from timelines.models import Cluster, Finding, Interval, Node, Observation, Pod

# --- the overview -------------------------------------------------------------------------------------------


def cluster_counts(
    clusters: Iterable[Cluster], filters: dict[int, set[str] | None]
) -> dict[int, dict[str, int]]:
    """``queries.cluster_counts`` for many clusters at once: pods, live pods, nodes and findings by cluster,
    one grouped query per table for the clusters read whole (``filters[id] is None``) and one per cluster
    narrowed to namespaces. Counting 150,000 pods this way reads an index, not the rows."""
    clusters = list(clusters)
    out = {c.id: {"pods": 0, "live_pods": 0, "nodes": 0, "findings": 0} for c in clusters}
    whole = [c.id for c in clusters if filters.get(c.id) is None]
    narrowed = [c.id for c in clusters if filters.get(c.id) is not None]

    def add(pods: QuerySet[Pod], findings: QuerySet[Finding]) -> None:
        for r in pods.values("cluster_id").annotate(
            n=Count("id"), live=Count("id", filter=Q(deleted_at__isnull=True))
        ):
            out[r["cluster_id"]].update(pods=r["n"], live_pods=r["live"])
        for f in findings.values("cluster_id").annotate(n=Count("id")):
            out[f["cluster_id"]]["findings"] = f["n"]

    if whole:
        add(Pod.objects.filter(cluster_id__in=whole), Finding.objects.filter(cluster_id__in=whole))
    for cid in narrowed:
        ns = sorted(filters[cid] or ())
        add(
            Pod.objects.filter(cluster_id=cid, namespace__in=ns),
            Finding.objects.filter(cluster_id=cid, namespace__in=ns),
        )
    for r in (
        Node.objects.filter(cluster_id__in=[c.id for c in clusters])
        .values("cluster_id")
        .annotate(n=Count("id"))
    ):
        out[r["cluster_id"]]["nodes"] = r["n"]
    return out


def observation_count(clusters: list[Cluster], *, all_clusters: bool) -> tuple[int, bool]:
    """How many observations the clusters hold, and whether that is an estimate. Counting a month of a
    fleet (tens of millions of rows) exactly takes seconds on PostgreSQL, so when every cluster is asked
    for there it is the planner's estimate (``pg_class.reltuples`` of the table or its partitions, kept by
    ANALYZE / autovacuum); a few clusters, or SQLite, are counted exactly."""
    if all_clusters and connection.vendor == "postgresql":
        table = Observation._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                # A partitioned parent's own reltuples is already the sum of its partitions': count the
                # tables that hold rows (the plain table, or each partition), never the parent too.
                "SELECT COALESCE(SUM(GREATEST(c.reltuples, 0)), 0)::bigint FROM pg_class c "
                "WHERE c.relkind = 'r' AND (c.oid = %s::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits "
                "WHERE inhparent = %s::regclass))",
                [table, table],
            )
            estimate = int(cursor.fetchone()[0])
        if estimate > 0:
            return estimate, True
    return Observation.objects.filter(cluster__in=clusters).count(), False


# --- search ---------------------------------------------------------------------------------------------------

SEARCH_KEYS = ("name", "uid", "owner", "node", "ns", "finding")
MAX_TERM = 253  # a DNS subdomain, the longest Kubernetes name
MAX_TERMS = 6
SEARCH_CANDIDATES = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # tab and newline separate terms; the rest is refused


class SearchError(ValueError):
    """The search text is not one podlife reads; the message names the part and what was expected."""


@dataclass(frozen=True)
class SearchTerm:
    key: str  # one of SEARCH_KEYS, or "" for any of them
    prefix: str


def parse_search(text: str) -> list[SearchTerm]:
    """``text`` → terms, all of which a pod must match: ``KEY:TEXT`` (KEY one of name, uid, owner,
    node, ns, finding) and bare TEXTs matching any of them, separated by spaces; a name, UID or node
    matches a TEXT anywhere in it, an owner, namespace or finding kind one it starts with. A text without any
    ``KEY:`` is one bare prefix, spaces and all (an imported name may hold any character). Every
    character is literal (``%`` and ``_`` are no wildcards); control characters, a term over 253
    characters, more than six terms or an empty text are refused with a ``SearchError``."""
    if _CONTROL.search(text):
        raise SearchError("q: control characters are not part of any name; remove them")
    words = text.split()
    keyed = [w for w in words if w.partition(":")[0].lower() in SEARCH_KEYS and ":" in w]
    if not keyed:
        bare = text.strip()
        words = [bare] if bare.strip() else []
    terms = []
    for word in words:
        key, sep, value = word.partition(":")
        if not sep or key.lower() not in SEARCH_KEYS:
            key, value = "", word
        if not value:
            raise SearchError(f"q: {word[:60]!r} has nothing after the colon")
        if len(value) > MAX_TERM:
            raise SearchError(f"q: a term of {len(value)} characters; at most {MAX_TERM}")
        terms.append(SearchTerm(key.lower(), value))
    if not terms:
        raise SearchError("q: give the start of a pod name, UID, owner, node, namespace or finding kind")
    if len(terms) > MAX_TERMS:
        raise SearchError(f"q: {len(terms)} terms; at most {MAX_TERMS}")
    return terms


def _term_q(cluster: Cluster, term: SearchTerm) -> Q:
    # ``startswith`` is a LIKE 'prefix%' with the wildcards of the term escaped; on PostgreSQL the pattern
    # indexes of migration 0015 answer it. ``contains`` (names, UIDs, nodes) is a LIKE '%part%' with the
    # same escaping: no b-tree index answers it, so it scans the cluster's pods (at most
    # SEARCH_CANDIDATES matches are read before ordering). Kubernetes names and UIDs are lower case: a prefix typed with
    # capitals matches as typed or lowercased (SQLite's LIKE ignores ASCII case anyway).
    q = Q()
    for prefix in dict.fromkeys((term.prefix, term.prefix.lower())):
        q |= _prefix_q(cluster, term.key, prefix)
    return q


def _prefix_q(cluster: Cluster, key: str, prefix: str) -> Q:
    by_key = {
        # Names, UIDs and nodes match anywhere in them: a pod is named by the random tail of its name
        # ("kd2mp" of web-7d9f-kd2mp) as often as by its start. Owners, namespaces and finding kinds
        # match by prefix (their indexes answer it).
        "name": Q(name__contains=prefix),
        "uid": Q(uid__contains=prefix),
        "owner": Q(owner_name__startswith=prefix),
        "node": Q(node__contains=prefix),
        "ns": Q(namespace__startswith=prefix),
        "finding": Q(
            uid__in=Subquery(
                Finding.objects.filter(
                    cluster=cluster, pod_uid__isnull=False, kind__startswith=prefix
                ).values("pod_uid")
            )
        ),
    }
    if key:
        return by_key[key]
    q = Q()
    for k, part in by_key.items():
        # A bare prefix asks about findings only when some finding kind starts with it (one index probe):
        # an IN (subquery) inside the OR would stop PostgreSQL from combining the five prefix indexes.
        if k == "finding" and not Finding.objects.filter(cluster=cluster, kind__startswith=prefix).exists():
            continue
        q |= part
    return q


def search_pods(cluster: Cluster, text: str, namespaces: set[str] | None, *, limit: int = 100) -> list[Pod]:
    """Readable pods of ``cluster`` matching every term of ``text`` (``parse_search``), most recently
    seen first; raises ``SearchError`` for text it cannot read."""
    qs = Pod.objects.filter(cluster=cluster)
    for term in parse_search(text):
        qs = qs.filter(_term_q(cluster, term))
    if namespaces is not None:
        qs = qs.filter(namespace__in=sorted(namespaces))
    # Two steps, because one ordered query lets PostgreSQL guess wrong: asked for the newest n of a few
    # matches it may walk the newest-first index (pod_recent) through all 150,000 pods looking for them.
    # So first the matches in no order (the prefix indexes, or a scan that stops early), at most
    # SEARCH_CANDIDATES; only when there are more (a prefix of most of the fleet) is the newest-first index
    # the right plan, and then it finds its n quickly.
    ids = list(qs.order_by().values_list("id", flat=True)[: SEARCH_CANDIDATES + 1])
    if len(ids) <= SEARCH_CANDIDATES:
        qs = Pod.objects.filter(id__in=ids)
    return list(qs.order_by("-last_seen", "namespace", "name")[:limit])


# --- level of detail of a wide window ---------------------------------------------------------------------------

OVERVIEW_SCHEMA = "podlife.window-overview/v1"
LOD_PODS = 2000  # more pods than this in a window: bands of pods, not a row each
MAX_BANDS = 200  # a chart about 700 px high (no row labels past 120 rows): three to four pixels a band
TABLE_PODS = 2000  # pods listed under the chart (as the full view lists)
MERGE_PX = 1  # a band's bars of one state closer than a pixel cannot be told apart: drawn as one
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros_sql(column: str) -> str:
    """SQL for a time column as integer microseconds since the epoch (no datetime built per row: a
    10,000-pod day is 30,000 intervals). SQLite stores ``YYYY-MM-DD HH:MM:SS[.ffffff]`` in UTC.
    PostgreSQL: ``date_part`` is a double (``EXTRACT`` a numeric, about twice as slow over 30,000 rows),
    exact to the microsecond: epoch microseconds stay below 2**53 until the year 2255, and the double's
    error (about a quarter of a microsecond at most) is rounded away."""
    col = connection.ops.quote_name(column)
    if connection.vendor == "postgresql":
        return f"CAST(ROUND(date_part('epoch', {col}) * 1000000) AS BIGINT)"
    return (
        f"CASE WHEN {col} IS NULL THEN NULL ELSE CAST(strftime('%%s', {col}) AS INTEGER) * 1000000 "
        f"+ CAST(substr({col} || '.000000', 21, 6) AS INTEGER) END"
    )


def _time(us: int) -> str:
    text = format_time(_EPOCH + timedelta(microseconds=us))
    assert text is not None  # format_time gives None only for None
    return text


def _merge(items: list[tuple[int, int, str]], gap: int) -> list[tuple[int, int, int, int]]:
    """(start µs, end µs, pod) sorted by start → (start, end, intervals, pods) merged where closer than
    ``gap``."""
    out: list[tuple[int, int, int, int]] = []
    cur: list[Any] | None = None
    for s, e, pod in items:
        if cur is not None and s - cur[1] < gap:
            cur[1] = max(cur[1], e)
            cur[2] += 1
            cur[3].add(pod)
        else:
            if cur is not None:
                out.append((cur[0], cur[1], cur[2], len(cur[3])))
            cur = [s, e, 1, {pod}]
    if cur is not None:
        out.append((cur[0], cur[1], cur[2], len(cur[3])))
    return out


def window_overview(
    cluster: Cluster,
    *,
    start: datetime,
    end: datetime,
    namespaces: set[str] | None,
    namespace: str,
    resolution_us: int,
    max_bands: int = MAX_BANDS,
    scope: dict[str, str] | None = None,
) -> dict[str, Any] | None:
    """The worker lane of a namespace window folded for drawing, or None when it holds at most
    ``LOD_PODS`` pods (then the caller sends every row: ``timeline_reads.window_json``).

    Pods are ordered as the chart orders rows (first interval start, then name) and cut into at most
    ``max_bands`` bands of consecutive pods. A band carries, per state and source, its pods' intervals
    merged where they overlap or lie closer than ``MERGE_PX`` pixels (``resolution_us`` is a pixel at the
    chart's width), each merged bar saying how many intervals of how many pods it stands for; a merged
    bar still shorter than a pixel is not drawn (it would not show; ``undrawn`` counts its intervals, and
    zooming in shows them), as the browser's own level of detail folds sub-pixel segments. ``counts``
    are exact (intervals and seconds, unmerged, an open interval to the window's end), so the bands add up
    to the full data. Findings are merged the same way per kind and severity, and always drawn.
    Schema ``podlife.window-overview/v1`` (docs/api.md)."""
    q = connection.ops.quote_name
    t0, t1 = connection.ops.adapt_datetimefield_value(start), connection.ops.adapt_datetimefield_value(end)
    end_us = round((end - _EPOCH).total_seconds() * 1e6)
    params: list[Any] = [cluster.id, namespace, t1, t0]
    if namespaces is not None and namespace not in namespaces:
        return None  # nothing readable: the caller's full read answers (empty)
    overlap = f"start < %s AND ({q('end')} IS NULL OR {q('end')} >= %s)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pod_uid, state, source, {_micros_sql('start')}, {_micros_sql('end')} "
            f"FROM {q(Interval._meta.db_table)} WHERE cluster_id = %s AND namespace = %s AND lane = 'worker' "
            f"AND pod_uid IS NOT NULL AND {overlap}",
            params,
        )
        rows: list[tuple[str, str, str, int, int | None]] = cursor.fetchall()
        cursor.execute(
            f"SELECT pod_uid, kind, severity, {_micros_sql('start')}, {_micros_sql('end')} "
            f"FROM {q(Finding._meta.db_table)} WHERE cluster_id = %s AND namespace = %s "
            f"AND pod_uid IS NOT NULL AND {overlap}",
            params,
        )
        finding_rows: list[tuple[str, str, str, int, int | None]] = cursor.fetchall()
        first: dict[str, int] = {}
        last_state: dict[str, tuple[int, str, str]] = {}
        for uid, state, source, s, _e in rows:
            if uid not in first or s < first[uid]:
                first[uid] = s
            if uid not in last_state or s >= last_state[uid][0]:
                last_state[uid] = (s, state, source)
        for uid, _k, _sev, s, _e in finding_rows:
            first.setdefault(uid, s)
        if len(first) <= LOD_PODS:
            return None
        cursor.execute(
            f"SELECT uid, name, node, phase FROM {q(Pod._meta.db_table)} WHERE cluster_id = %s "
            "AND namespace = %s",
            [cluster.id, namespace],
        )
        pods = {uid: (name, node, phase) for uid, name, node, phase in cursor.fetchall() if uid in first}

    order = sorted(first, key=lambda u: (first[u], pods.get(u, ("",))[0]))
    size = math.ceil(len(order) / max_bands)
    band_of = {uid: i // size for i, uid in enumerate(order)}
    bands: list[dict[str, Any]] = []
    for b in range(math.ceil(len(order) / size)):
        members = order[b * size : (b + 1) * size]
        bands.append(
            {
                "key": f"band:{b}",
                "first": b * size,
                "pods": len(members),
                "first_name": pods.get(members[0], ("",))[0],
                "last_name": pods.get(members[-1], ("",))[0],
                "intervals": [],
                "findings": [],
                "counts": {},
                "undrawn": 0,
            }
        )
    gap = MERGE_PX * resolution_us

    spans: dict[tuple[int, str, str], list[tuple[int, int, str]]] = {}
    for uid, state, source, s, e in rows:
        stop = e if e is not None else max(end_us, s)  # an open interval: drawn to the window's end
        spans.setdefault((band_of[uid], state, source), []).append((s, stop, uid))
    for (b, state, source), items in spans.items():
        items.sort()
        bands[b]["counts"][f"{state}|{source}"] = {
            "intervals": len(items),
            "seconds": sum(e - s for s, e, _ in items) / 1e6,
        }
        for s, e, n, npods in _merge(items, gap):
            if e - s < resolution_us:
                bands[b]["undrawn"] += n
                continue
            what = f"{n} intervals of {npods} pod{'s' if npods != 1 else ''} merged" if n > 1 else ""
            bands[b]["intervals"].append(["worker", state, _time(s), _time(e), source, [], what])
    fspans: dict[tuple[int, str, str], list[tuple[int, int, str]]] = {}
    for uid, kind, severity, s, e in finding_rows:
        fspans.setdefault((band_of[uid], kind, severity), []).append(
            (s, e if e is not None else max(end_us, s), uid)
        )
    for (b, kind, severity), fitems in fspans.items():
        fitems.sort()
        for s, e, n, npods in _merge(fitems, gap):
            message = f"{n} finding{'s' if n != 1 else ''} of {npods} pod{'s' if npods != 1 else ''}"
            bands[b]["findings"].append([kind, severity, message, _time(s), _time(e), []])
    for band in bands:
        band["intervals"].sort(key=lambda iv: iv[2])

    kinds: dict[str, list[str]] = {}  # each kind once a pod: the table names what is wrong, not how often
    for uid, kind, _sev, _s, _e in finding_rows:
        listed = kinds.setdefault(uid, [])
        if kind not in listed:
            listed.append(kind)
    table = []
    for uid in order[:TABLE_PODS]:
        name, node, phase = pods.get(uid, ("", "", ""))
        worker = last_state.get(uid)
        table.append(
            {
                "uid": uid,
                "namespace": namespace,
                "name": name,
                "node": node,
                "phase": phase,
                "worker": [worker[1], worker[2]] if worker else None,
                "findings": kinds.get(uid, []),
            }
        )
    return {
        "schema": OVERVIEW_SCHEMA,
        "cluster": cluster.name,
        "scope": scope or {},
        "window": {"from": start, "to": end},
        "detail": "bands",
        "resolution_us": resolution_us,
        "pods_total": len(order),
        "pods_per_band": size,
        "bands": bands,
        "table": table,
    }
