"""The node, namespace and workload timeline API streams its answer (``timeline_reads.window_json``, issue #18 d6):
the same bytes as the read it replaced, which built every pod's rows as Python lists and dicts, annotated
them (``freshness.annotate_window``), dropped the node's lanes for a namespace-only reader
(``visibility.strip_node_lanes``) and encoded the whole with one ``orjson.dumps``. That construction is kept
here, frozen as it was (``previous_answer``), and compared byte for byte on a node with many pods, every kind
of lane, markers, findings, pods with findings only and with markers only, moved pods, open intervals,
kubelet evidence (freshness) and the node's own lanes, with rows fetched a few at a time so pods straddle
fetches. Run on both databases.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest
from django.db import connection

from dashboard import freshness, timeline_reads
from dashboard.timeline_reads import MAX_WINDOW_PODS, WINDOW_SCHEMA, time_text_sql
from tests.web.bulk import DAY0, make_node_pods
from timelines.models import Cluster, Finding, Interval, Marker, Pod

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


# --- the previous construction, frozen (dashboard/queries.py, dashboard/freshness.py, visibility.py) ------
def _ids(text: Any) -> Any:
    """Evidence ids as raw JSON, passed through to the response undecoded."""
    if isinstance(text, str):
        return orjson.Fragment(text)
    return text if text is not None else []


def previous_window_timelines(
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
) -> dict[str, Any]:
    """Every readable pod in a scope with something in ``[start, end)``: the chosen lanes (None = all),
    markers and findings, in schema ``podlife.window/v1`` (compact rows; docs/api.md).

    Built for speed (a 10,000-pod namespace day): one query per table, no ORM converters, evidence ids kept
    as raw JSON (``orjson.Fragment``). Serialize the result with orjson; ``orjson.loads(orjson.dumps(x))``
    gives plain data.
    """

    # Hand-written SQL (portable: PostgreSQL and SQLite): building these through the ORM costs more than
    # running them on a node page, and the endpoint's budget is twice the raw query time.
    q = connection.ops.quote_name
    t0, t1 = connection.ops.adapt_datetimefield_value(start), connection.ops.adapt_datetimefield_value(end)

    def in_list(column: str, values: Iterable[str], params: list[Any]) -> str:
        values = list(values)
        params.extend(values)
        return f"{column} IN ({', '.join(['%s'] * len(values))})" if values else "1 = 0"

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
    rows: dict[str, dict[str, Any]] = {}
    first_start: dict[str, str] = {}
    node_lanes: dict[str, list[list[Any]]] = {}
    with connection.cursor() as cursor:
        cursor.execute(interval_sql, params)
        for uid, lane, state, s, e, source, evidence in cursor.fetchall():
            if uid is None:
                node_lanes.setdefault(lane, []).append([state, s, e, source, _ids(evidence)])
                continue
            r = rows.get(uid)
            if r is None:
                r = rows[uid] = {"uid": uid, "intervals": [], "markers": [], "findings": []}
                first_start[uid] = s
            r["intervals"].append([lane, state, s, e, source, _ids(evidence)])

        params = [cluster.id, t0, t1]
        cursor.execute(
            f"SELECT pod_uid, {time_text_sql('at')}, kind, reason, message, CAST(evidence AS TEXT) "
            f"FROM {q(Marker._meta.db_table)} WHERE cluster_id = %s AND at >= %s AND at < %s "
            f"AND pod_uid IS NOT NULL{scope_sql(params)} ORDER BY at",
            params,
        )
        for uid, at, kind, reason, message, evidence in cursor.fetchall():
            if uid in rows:
                rows[uid]["markers"].append([at, kind, reason, message, _ids(evidence)])

        params = [cluster.id, t1, t0]
        cursor.execute(
            f"SELECT pod_uid, kind, severity, message, {time_text_sql('start')}, {time_text_sql(q('end'))}, "
            f"CAST(evidence AS TEXT) FROM {q(Finding._meta.db_table)} WHERE cluster_id = %s AND {overlap} "
            f"AND pod_uid IS NOT NULL{scope_sql(params)} ORDER BY start",
            params,
        )
        for uid, kind, severity, message, s, e, evidence in cursor.fetchall():
            if uid not in rows:
                rows[uid] = {"uid": uid, "intervals": [], "markers": [], "findings": []}
                first_start[uid] = s
            rows[uid]["findings"].append([kind, severity, message, s, e, _ids(evidence)])

        pods = []
        uids = list(rows)
        for i in range(0, len(uids), 900):  # SQLite caps bound parameters
            params = [cluster.id]
            cursor.execute(
                f"SELECT uid, namespace, name, node, owner_kind, owner_name, phase, {time_text_sql('created_at')}, "
                f"{time_text_sql('deleted_at')} FROM {q(Pod._meta.db_table)} WHERE cluster_id = %s "
                f"AND {in_list('uid', uids[i : i + 900], params)}",
                params,
            )
            for uid, ns, name, pnode, okind, oname, phase, created, deleted in cursor.fetchall():
                r = rows[uid]
                r.update(
                    namespace=ns,
                    name=name,
                    node=pnode,
                    owner_kind=okind,
                    owner_name=oname,
                    phase=phase,
                    created_at=created,
                    deleted_at=deleted,
                )
                pods.append(r)
    pods.sort(key=lambda r: (first_start[r["uid"]], r["namespace"], r["name"]))
    return {
        "schema": WINDOW_SCHEMA,
        "cluster": cluster.name,
        "scope": scope or {},
        "window": {"from": start, "to": end},
        "lanes": None if lanes is None else list(lanes),
        "pods": pods[:MAX_WINDOW_PODS],
        "truncated": len(pods) > MAX_WINDOW_PODS,
        "node_lanes": node_lanes,
    }


def previous_annotate_window(
    cluster: Cluster, data: dict[str, Any], *, start: datetime, namespaces: set[str] | None = None
) -> dict[str, Any]:
    pods = data["pods"]
    nodes = (p.get("node", "") for p in pods)
    until = freshness.kubelet_evidence_until(
        cluster, nodes, since=start - freshness.LOOKBACK, namespaces=namespaces
    )
    last_seen: dict[str, datetime | None] = {}
    uids = [p["uid"] for p in pods]
    for i in range(0, len(uids), 900):
        last_seen.update(
            Pod.objects.filter(cluster=cluster, uid__in=uids[i : i + 900]).values_list("uid", "last_seen")
        )
    for p in pods:
        p["freshness"] = freshness.freshness_of(last_seen.get(p["uid"]), until.get(p.get("node", "")))
    data["kubelet_until"] = {node: freshness.format_time(at) for node, at in until.items()}
    return data


def previous_answer(cluster: Cluster, *, whole_cluster: bool = True, **kw: Any) -> bytes:
    """What ``dashboard/web/api/views.py`` answered before the read was streamed."""
    data = previous_window_timelines(cluster, **kw)
    previous_annotate_window(cluster, data, start=kw["start"], namespaces=kw["namespaces"])
    if not whole_cluster and data.get("node_lanes"):
        data["node_lanes"] = {}
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)


# --- the comparisons ---------------------------------------------------------------------------------------
WHOLE_DAY = {"start": DAY0, "end": DAY0 + timedelta(days=1)}


@pytest.fixture
def busy(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    cluster = Cluster.objects.create(name="busy")
    make_node_pods(cluster, pods=240, node="node-busy")
    monkeypatch.setattr(timeline_reads, "WINDOW_FETCH", 7)  # a pod's rows straddle fetches
    return cluster


CASES: list[tuple[str, dict[str, Any]]] = [
    ("node, worker lane", {"node": "node-busy", "lanes": ("worker",), "namespaces": None}),
    ("node, every lane", {"node": "node-busy", "lanes": None, "namespaces": None}),
    ("node, two lanes", {"node": "node-busy", "lanes": ("api", "container:app"), "namespaces": None}),
    ("node, a lane no pod has", {"node": "node-busy", "lanes": ("nope",), "namespaces": None}),
    ("node, one namespace readable", {"node": "node-busy", "lanes": None, "namespaces": {"kube-system"}}),
    ("node, nothing readable", {"node": "node-busy", "lanes": None, "namespaces": set()}),
    ("namespace", {"namespace": "default", "lanes": None, "namespaces": None}),
    ("namespace, worker lane", {"namespace": "kube-system", "lanes": ("worker",), "namespaces": None}),
    ("node elsewhere", {"node": "node-other", "lanes": None, "namespaces": None}),
]


@pytest.mark.parametrize(("what", "kw"), CASES, ids=[c[0] for c in CASES])
def test_streamed_window_is_the_previous_answer_byte_for_byte(
    busy: Cluster, what: str, kw: dict[str, Any]
) -> None:
    scope = {"kind": "node" if "node" in kw else "namespace", "name": kw.get("node") or kw.get("namespace")}
    for whole in (True, False):
        for window in (
            WHOLE_DAY,
            {"start": DAY0 + timedelta(hours=5), "end": DAY0 + timedelta(hours=9)},  # cuts rows at both ends
            {"start": DAY0 - timedelta(days=2), "end": DAY0 - timedelta(days=1)},  # nothing in it
        ):
            args = {**kw, **window, "scope": scope}
            expected = previous_answer(busy, whole_cluster=whole, **args)
            got = timeline_reads.window_json(busy, node_lanes=whole, **args)
            assert got == expected, what
    data = orjson.loads(timeline_reads.window_json(busy, **{**kw, **WHOLE_DAY, "scope": scope}))
    if what == "node, every lane":  # the comparison covered what it should
        assert len(data["pods"]) > 200 and data["node_lanes"] and data["kubelet_until"]
        assert any(p["freshness"]["pending_since"] for p in data["pods"])
        assert any(p["findings"] and not p["intervals"] for p in data["pods"])
        assert {lane for p in data["pods"] for lane, *_ in p["intervals"]} >= {
            "worker",
            "api",
            "container:app",
        }
        assert sum(len(p["markers"]) for p in data["pods"]) > 600


def test_streamed_window_of_pods_by_uid_is_the_previous_answer(busy: Cluster) -> None:
    uids = list(Pod.objects.filter(cluster=busy).order_by("-uid").values_list("uid", flat=True)[:50])
    kw = {
        **WHOLE_DAY,
        "namespaces": None,
        "pod_uids": uids,
        "lanes": None,
        "scope": {"kind": "workload", "name": "x"},
    }
    assert timeline_reads.window_json(busy, **kw) == previous_answer(busy, **kw)
    assert timeline_reads.window_json(busy, **{**kw, "pod_uids": []}) == previous_answer(
        busy, **{**kw, "pod_uids": []}
    )


@pytest.mark.django_db(transaction=True)
def test_streamed_window_outside_a_transaction_is_the_previous_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Autocommit (as a request is served): on PostgreSQL the server-side cursors are declared WITH HOLD."""
    cluster = Cluster.objects.create(name="busy-autocommit")
    make_node_pods(cluster, pods=60, node="node-busy")
    monkeypatch.setattr(timeline_reads, "WINDOW_FETCH", 5)
    kw = {
        **WHOLE_DAY,
        "node": "node-busy",
        "namespaces": None,
        "lanes": None,
        "scope": {"kind": "node", "name": "n"},
    }
    assert connection.get_autocommit()
    assert timeline_reads.window_json(cluster, **kw) == previous_answer(cluster, **kw)


@contextmanager
def statements_parsed() -> Iterator[set[bytes]]:
    """The statement texts this thread puts through psycopg's cache of parsed statements (128, least
    recently used: ``_queries._query2pg_client``, what the behaviour below is about) while the block runs.
    Counting the cache's misses instead counted every thread's: a collector or publisher thread left by
    another test made them move."""
    from psycopg import _queries

    texts: set[bytes] = set()
    cached = _queries._query2pg_client
    me = threading.get_ident()

    def recording(query: bytes, encoding: str) -> Any:
        if threading.get_ident() == me:
            texts.add(query)
        return cached(query, encoding)

    _queries._query2pg_client = recording  # type: ignore[assignment]
    try:
        yield texts
    finally:
        _queries._query2pg_client = cached


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_window_read_again_runs_the_statements_it_ran_before() -> None:
    """PostgreSQL: the server-side cursors of every read have one name (``timeline_reads.WINDOW_CURSOR``), so a
    second read of the same view runs the very statements of the first, and psycopg's cache of parsed
    statements (128, least recently used) gains nothing. Django's ``chunked_cursor()`` named each cursor
    after its thread and a counter: every read put three new ``DECLARE`` texts in that cache, which kept
    them past the load that made them (docs/performance-history.md "Load")."""
    cluster = Cluster.objects.create(name="busy-named")
    make_node_pods(cluster, pods=30, node="node-busy")
    kw = {
        **WHOLE_DAY,
        "node": "node-busy",
        "namespaces": None,
        "lanes": None,
        "scope": {"kind": "node", "name": "n"},
    }
    with statements_parsed() as first_texts:
        first = timeline_reads.window_json(cluster, **kw)
    with statements_parsed() as again:
        assert timeline_reads.window_json(cluster, **kw) == first
    assert again and again <= first_texts


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_window_reads_of_any_number_of_pods_run_the_same_statements() -> None:
    """PostgreSQL: GIVEN one read of a 3-pod node WHEN nodes of 6 and 40 pods are read THEN psycopg's
    cache of parsed statements gains nothing: the pods' UIDs are one array parameter, so the query's text
    does not change with their number. An ``IN`` list of N placeholders was a new statement per N (padded
    to powers of two: still one per power), first met when a node grew, often at a load's peak, and kept
    by that cache after it (docs/performance-history.md "Load"). The same holds for the nodes and
    namespaces a window's kubelet evidence is read by (``freshness.kubelet_evidence_until``)."""
    cluster = Cluster.objects.create(name="busy-counts")
    for pods in (3, 6, 40):  # each node also has a pod whose row names "node-other": two nodes each
        make_node_pods(cluster, pods=pods, node=f"node-{pods}", seed=pods)
    kw = {**WHOLE_DAY, "namespaces": None, "lanes": None, "scope": {"kind": "node", "name": "n"}}
    with statements_parsed() as texts:
        for node in ("node-3", "node-6", "node-40"):
            assert orjson.loads(timeline_reads.window_json(cluster, node=node, **kw))["pods"]
        # A namespace's or a workload's window spans any number of nodes, read by their kubelet evidence.
        for nodes, namespaces in ((2, 1), (5, 3)):
            freshness.kubelet_evidence_until(
                cluster,
                [f"node-{n}" for n in range(nodes)],
                since=DAY0,
                namespaces={f"ns-{n}" for n in range(namespaces)},
            )
    # Texts that differ only in how many placeholders a list holds would be one text here.
    lists = re.compile(rb"%s(?:\s*,\s*%s)+")
    assert texts and len({lists.sub(b"%s", text) for text in texts}) == len(texts)
