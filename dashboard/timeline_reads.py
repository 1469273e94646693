"""Every read of a pod's timeline, on PostgreSQL and SQLite: one statement builder, a dialect switch.

All reads of a timeline are here: any number of pods' documents, a chunk of pods per query
(``pod_timelines``: the export, the import's check), the same read with one pod (``pod_timeline``: the
pod page, the API, the command line), and a scope's window (``window_json``: the node, namespace and
workload pages and their live refetch). Each reads derived rows only, never observations' payloads.

The SQL is written once for both databases. What differs is a few small pieces, each a function here: how
a time is printed as text (``time_text_sql``: ``to_char`` against cutting Django's SQLite text), how a set
of values is passed (``any_of``, and ``observation_keys``' ids: one array parameter against placeholders
or ``json_each``), how a chunk of pods is looked up (``pod_rows``: a lateral lookup per UID against
``IN``) and how rows are streamed (``_streaming_cursor``: a named server-side cursor against SQLite's own
stepping). Times come as the text ``format_time`` writes, JSON columns as text for orjson, evidence as the
ids' text: no ORM row machinery, no datetime round trip, which is most of a 10,000-pod export's time
otherwise.

Documents are ``TimelineDoc``s assembled by the one writer, ``timelines/lifecycle/schema.py``
(``timeline_doc``); evidence cites dedupe keys, translated from the stored ids with one query per chunk
(``observation_keys``). The window is its own document, ``podlife.window/v1`` (docs/api.md), whose compact
rows cite ids.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any, cast

import orjson
from django.db import connection
from django.db.models import Model

from dashboard import freshness, serialize
from timelines import observation_rows, pg_arrays
from timelines.lifecycle.schema import FindingDoc, IntervalDoc, MarkerDoc, TimelineDoc, timeline_doc
from timelines.lifecycle.timeline import format_time, parse_time
from timelines.models import Cluster, Finding, Interval, Marker, Pod
from timelines.observation_rows import PodMatch

WINDOW_SCHEMA = "podlife.window/v1"
MAX_WINDOW_PODS = 20_000
CHUNK = 500  # pods per bulk read: under SQLite's bound-parameter limit, a few MB of rows at most


# --- the dialect: the few pieces of SQL that differ ----------------------------------------------------------
def _postgres() -> bool:
    return connection.vendor == "postgresql"


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


def json_text_sql(column: str) -> str:
    """A JSON column as its text, for orjson (faster than the JSONField's own decoding). Both databases."""
    return f"CAST({column} AS TEXT)"


def ids_text_sql(column: str) -> str:
    """An evidence column (a JSON array of observation ids) as the ids' text joined by commas (``3,9,10``;
    empty for none): ``ids`` splits it with no JSON parsing per row. Both databases."""
    return f"replace(replace(replace(CAST({column} AS TEXT), '[', ''), ']', ''), ' ', '')"


def any_of(column: str, values: Iterable[str], params: list[Any]) -> str:
    """``column`` is one of ``values``; appends its parameters to ``params`` (``pg_arrays.any_of`` on this
    connection's database)."""
    return pg_arrays.any_of(column, values, params, postgres=_postgres())


def _pod_uid_match(uids: Sequence[str], *, postgres: bool) -> PodMatch:
    """``pod_rows``' default: the rows whose ``pod_uid`` is one of ``uids``."""
    if postgres:
        return PodMatch(
            "unnest(%s::varchar[]) WITH ORDINALITY AS u(uid, ord)",
            "x.pod_uid = u.uid",
            "t.pod_uid",
            [list(uids)],
        )
    return PodMatch("", f"t.pod_uid IN ({', '.join(['%s'] * len(uids))})", "t.pod_uid", list(uids))


def pod_rows(
    model: type[Model],
    cluster: Cluster,
    uids: Sequence[str],
    columns: Callable[[str], str],
    order: Sequence[str],
    *,
    by_uid: bool = False,
    match: Callable[..., PodMatch] | None = None,
) -> list[tuple[Any, ...]]:
    """The rows of ``model`` of the pods ``uids`` (at most ``CHUNK``) in one query, each pod's rows by the
    columns ``order``; ``columns(alias)`` is the select list over the table's alias. The pods come in the
    order of ``uids`` on PostgreSQL, of the UIDs themselves on SQLite and with ``by_uid`` (a caller groups
    them by UID, or asks for ``by_uid``).

    PostgreSQL: a lateral lookup per UID walks the table's ``(cluster, pod_uid, …)`` index whatever the
    planner's statistics say: ``pod_uid IN (…)`` on a table not analyzed since a bulk load (autovacuum off,
    or not yet run) was planned as a scan of every row of the cluster, once per chunk of pods. The
    ``ORDER BY`` inside keeps the subquery from being flattened into that same plan, and hands each pod's
    rows over sorted. SQLite plans ``IN`` on the index.

    ``match``: how the rows are found by UID (``observation_rows.pod_match``, for the observations, which
    hold a pod's UID as text or as 16 bytes); by default the table's ``pod_uid``."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    outer = ", ".join(f"t.{quote(c)}" for c in order)
    found = (match or _pod_uid_match)(uids, postgres=_postgres())
    if _postgres():
        inner = ", ".join(f"x.{quote(c)}" for c in order)
        sql = (
            f"SELECT {columns('t')} FROM {found.source} CROSS JOIN LATERAL (SELECT * FROM {table} x "
            f"WHERE x.cluster_id = %s AND {found.match} ORDER BY {inner}) t "
            f"ORDER BY {found.uid if by_uid else 'u.ord'}, {outer}"
        )
        params = [*found.params, cluster.pk]
    else:
        sql = (
            f"SELECT {columns('t')} FROM {table} t WHERE t.cluster_id = %s AND {found.match} "
            f"ORDER BY {found.uid}, {outer}"
        )
        params = [cluster.pk, *found.params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cast(list[tuple[Any, ...]], cursor.fetchall())


def chunks(items: Sequence[Any], size: int | None = None) -> Iterator[Sequence[Any]]:
    """``items`` ``size`` at a time (``CHUNK``: what one bulk read takes)."""
    size = size or CHUNK
    for i in range(0, len(items), size):
        yield items[i : i + size]


# --- evidence: stored ids, cited as dedupe keys --------------------------------------------------------------
def observation_keys(
    cluster: Cluster, ids: Iterable[int], known: Mapping[int, str] | None = None
) -> dict[int, str]:
    """The dedupe key of each of the observations ``ids`` of ``cluster``: from ``known`` (keys a reader
    has decoded already: the export's observations), the rest in ONE query (``observation_rows.keys_by_id``,
    which takes each key out of its row's body); an id no longer stored (dropped by retention) is absent."""
    if not known:
        return observation_rows.keys_by_id(cluster, ids)
    out: dict[int, str] = {}
    missing = []
    for i in ids:
        if (key := known.get(i)) is not None:
            out[i] = key
        else:
            missing.append(i)
    out.update(observation_rows.keys_by_id(cluster, missing))
    return out


def evidence_keys(ids: Iterable[int] | None, key_of: Mapping[int, str]) -> list[str]:
    """A stored evidence column (observation ids) as the document cites it: the observations' dedupe keys,
    sorted (the same event reads the same in any cluster or database; ids differ between them). An id
    ``key_of`` does not know (an observation retention dropped) is left out: its key is gone with it."""
    return sorted({key_of[i] for i in ids or () if i in key_of})


def ids(value: str | None) -> list[str]:
    """Evidence ids from ``ids_text_sql``'s text."""
    return value.split(",") if value else []


def cited_keys(
    cluster: Cluster,
    row_sets: Iterable[Sequence[tuple[Any, ...]]],
    known: Mapping[int, str] | None = None,
) -> Callable[[str | None], list[str]]:
    """The evidence of rows (their last column: ``ids_text_sql``) as sorted dedupe keys, from ``known``
    and ONE query for the rest (``observation_keys``); an id whose observation is gone (retention) is left
    out, as ``evidence_keys``."""
    cited = {i for rows in row_sets for row in rows for i in ids(row[-1])}
    key_of = {str(i): k for i, k in observation_keys(cluster, map(int, cited), known).items()}

    def keys(value: str | None) -> list[str]:
        return sorted({key_of[i] for i in ids(value) if i in key_of})

    return keys


def attrs_of(value: Any) -> dict[str, Any]:
    """A JSON object column (its text, or the value the ORM decoded) as a dict."""
    out = orjson.loads(value) if isinstance(value, str | bytes) else value
    return out or {}


# --- pods' documents -----------------------------------------------------------------------------------------
def _interval_columns(t: str) -> str:
    end = f"{t}.{connection.ops.quote_name('end')}"
    return (
        f"{t}.pod_uid, {t}.lane, {t}.state, {time_text_sql(f'{t}.start')}, {time_text_sql(end)}, {t}.source, "
        f"{json_text_sql(f'{t}.attrs')}, {ids_text_sql(f'{t}.evidence')}"
    )


def _marker_columns(t: str) -> str:
    return (
        f"{t}.pod_uid, {time_text_sql(f'{t}.at')}, {t}.kind, {t}.reason, {t}.message, "
        f"{json_text_sql(f'{t}.attrs')}, {ids_text_sql(f'{t}.evidence')}"
    )


def _finding_columns(t: str) -> str:
    end = f"{t}.{connection.ops.quote_name('end')}"
    return (
        f"{t}.pod_uid, {t}.kind, {t}.severity, {t}.message, {time_text_sql(f'{t}.start')}, "
        f"{time_text_sql(end)}, {json_text_sql(f'{t}.attrs')}, {ids_text_sql(f'{t}.evidence')}"
    )


INTERVAL_ORDER = ("lane", "start", "id")
MARKER_ORDER = ("at", "id")
FINDING_ORDER = ("start", "kind", "id")


def pod_timelines(
    cluster: Cluster, pods: Sequence[Pod], known: Mapping[int, str] | None = None
) -> Iterator[tuple[Pod, TimelineDoc]]:
    """``(pod, its podlife.timeline/v2 document)`` for each of ``pods``, in order: ``CHUNK`` pods per query
    and table, and one more query a chunk for the evidence's dedupe keys that ``known`` does not hold."""
    for chunk in chunks(pods):
        uids = [p.uid for p in chunk]
        interval_rows = pod_rows(Interval, cluster, uids, _interval_columns, INTERVAL_ORDER)
        marker_rows = pod_rows(Marker, cluster, uids, _marker_columns, MARKER_ORDER)
        finding_rows = pod_rows(Finding, cluster, uids, _finding_columns, FINDING_ORDER)
        keys = cited_keys(cluster, (interval_rows, marker_rows, finding_rows), known)
        lanes: dict[str, dict[str, list[IntervalDoc]]] = {u: {} for u in uids}
        for uid, lane, state, start, end, source, attrs, evidence in interval_rows:
            lanes[uid].setdefault(lane, []).append(
                IntervalDoc(
                    state=state,
                    start=start,
                    end=end,
                    source=source,
                    attrs=attrs_of(attrs),
                    evidence=keys(evidence),
                )
            )
        markers: dict[str, list[MarkerDoc]] = {u: [] for u in uids}
        for uid, at, kind, reason, message, attrs, evidence in marker_rows:
            markers[uid].append(
                MarkerDoc(
                    at=at,
                    kind=kind,
                    reason=reason,
                    message=message,
                    attrs=attrs_of(attrs),
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
                    attrs=attrs_of(attrs),
                )
            )
        for pod in chunk:
            doc = timeline_doc(
                cluster.name, serialize.pod_doc(pod), lanes[pod.uid], markers[pod.uid], findings[pod.uid]
            )
            yield pod, doc


def pod_timeline(cluster: Cluster, pod: Pod) -> TimelineDoc:
    """The stored timeline of ``pod``: ``pod_timelines`` of one pod."""
    ((_, doc),) = pod_timelines(cluster, [pod])
    return doc


# --- a scope's window ----------------------------------------------------------------------------------------
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

    def scope_sql(params: list[Any]) -> str:
        parts = []
        if node:
            parts.append("node = %s")
            params.append(node)
        if namespace:
            parts.append("namespace = %s")
            params.append(namespace)
        if pod_uids is not None:
            parts.append(any_of("pod_uid", pod_uids, params))
        if namespaces is not None:
            parts.append(any_of("namespace", sorted(namespaces), params))
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
        pod_part += " AND " + any_of("pod_uid", pod_uids, params)
    if namespaces is not None:
        pod_part += " AND " + any_of("namespace", sorted(namespaces), params)
    if lanes is not None:
        pod_part += " AND " + any_of("lane", lanes, params)
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
                f"WHERE cluster_id = %s AND {any_of('uid', uids[i : i + IN_BATCH], params)}",
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
