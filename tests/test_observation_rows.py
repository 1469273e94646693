"""A payload condition (``observation_rows.field_is``) keeps exactly the rows whose decoded payload meets
it, in the ORM's reads and in PostgreSQL's one-round-trip read (``pg_facts``); the payload is stored
compressed (``body``), so no read filters on it in SQL. Synthetic audit records and events of one
namespace, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from timelines import observation_rows, store
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]

T0 = datetime(2026, 12, 6, 9, 0, 0, 123456, tzinfo=UTC)

PAYLOADS: list[Any] = [
    {"resource": "pods", "subresource": "eviction"},
    {"resource": "pods", "subresource": "status"},
    {"resource": "pods"},
    {"resource": "nodes", "subresource": "eviction"},
    {"resource": "Pods"},
    {"resource": 1, "static": 1},
    {"resource": None, "static": True},
    {"involved": {"kind": "PodDisruptionBudget", "name": "db"}},
    {"involved": {"kind": "Deployment"}},
    {"involved": "PodDisruptionBudget"},
    {"static": "true"},
    {"static": False},
    {},
]

CONDITIONS = [
    (("subresource",), "eviction"),
    (("resource",), "pods"),
    (("involved", "kind"), "PodDisruptionBudget"),
    (("static",), True),
]


def stored() -> Cluster:
    facts = [
        Observation(
            kind=Kind.AUDIT,
            source=Source.AUDIT,
            observed_at=T0 + timedelta(seconds=i),
            dedupe_key=f"audit:row-{i}",
            pod_uid=None,
            node=None,
            namespace="shop",
            name=f"web-{i}",
            payload=payload,
        )
        for i, payload in enumerate(PAYLOADS)
    ]
    store.save_observations("rows", facts)
    return Cluster.objects.get(name="rows")


@pytest.mark.parametrize(("path", "expected"), CONDITIONS)
def test_a_payload_condition_keeps_the_rows_its_decoded_payload_meets(
    path: tuple[str, ...], expected: Any
) -> None:
    cluster = stored()
    where = observation_rows.field_is(path, expected)
    every = ObservationRow.objects.filter(cluster=cluster, kind=Kind.AUDIT).order_by("observed_at")
    by_rule = [r.name for r in observation_rows.rows(every) if where(r.payload)]
    assert by_rule, "each condition meets at least one row"
    assert [r.name for r in observation_rows.rows(every, where)] == by_rule
    with CaptureQueriesContext(connection) as read:
        assert [o.name for _, o in observation_rows.facts(every, where)] == by_rule
    (statement,) = [q["sql"] for q in read.captured_queries]
    assert "payload" not in statement.split(" WHERE ", 1)[1], "no SQL condition on the stored payload"
    if connection.vendor == "postgresql":
        got = observation_rows.pg_facts(
            "AND o.kind = %s ORDER BY o.observed_at", [cluster.pk, Kind.AUDIT], where
        )
        assert [o.name for _, o in got] == by_rule


def mixed(cluster: str) -> Cluster:
    """Synthetic: audit records, events and node snapshots over two namespaces, pods, nodes and names."""
    facts = [
        Observation(
            kind=kind,
            source=source,
            observed_at=T0 + timedelta(seconds=i),
            dedupe_key=f"{kind}:row-{i}",
            pod_uid=f"uid-{i % 3}" if kind == Kind.EVENT else None,
            node=f"node-{i % 2}" if kind == Kind.NODE else None,
            namespace=None if kind == Kind.NODE else ("shop", "ops")[i % 2],
            name=f"web-{i % 4}",
            payload={"i": i},
        )
        for i in range(24)
        for kind, source in ((Kind.AUDIT, Source.AUDIT), (Kind.EVENT, Source.API), (Kind.NODE, Source.API))[
            i % 3 : i % 3 + 1
        ]
    ]
    assert store.save_observations(cluster, facts).stored == len(facts)
    return Cluster.objects.get(name=cluster)


SELECTIONS: list[dict[str, Any]] = [
    {"kinds": [Kind.EVENT, Kind.NODE]},
    {"kinds": []},
    {"keys": ["audit:row-0", "event:row-1", "event:row-99"]},
    {"pod_uids": ["uid-1"]},
    {"node": "node-1"},
    {"namespace": "ops"},
    {"name": "web-2"},
    {"source": Source.AUDIT},
    {"kinds": [Kind.EVENT], "namespace": "shop", "name": "web-0"},
    {"namespace": ""},  # the rows without a namespace (node snapshots)
    {"nodes": ["node-1", "node-9"]},
    {"nodes": []},
    {"namespaces": ["ops", ""]},
    {"named": [("shop", "web-0"), ("ops", "web-3"), ("ops", "web-0")]},
    {"named": []},
    {"node_spans": [("node-0", T0 + timedelta(seconds=2), T0 + timedelta(seconds=14)), ("node-1", T0, T0)]},
    {"node_spans": []},
    {"has_pod_uid": True},
    {"has_pod_uid": False, "kinds": [Kind.EVENT, Kind.AUDIT]},
    {"on_a_node": True},
    {"on_a_node": False},
    {"since": T0 + timedelta(seconds=7)},
    {"before": T0 + timedelta(seconds=7)},
    {"since": T0 + timedelta(seconds=3), "before": T0 + timedelta(seconds=20), "namespace": "ops"},
    {"pod_uids": ["uid-1", "uid-2"], "namespaces": ["ops"], "arrays": True},
    {"nodes": ["node-0"], "arrays": True},
    {"pod_uids": ["uid-1", "uid-2"], "arrays": True},
    {"namespaces": ["shop"], "arrays": True},
    {"nodes": [], "arrays": True},
]

# Each argument's rule: the rows it keeps (``arrays`` changes how values travel, never which rows).
RULES: dict[str, Any] = {
    "kinds": lambda row, v: row.kind in v,
    "keys": lambda row, v: row.dedupe_key in v,
    "pod_uids": lambda row, v: row.pod_uid in v,
    "nodes": lambda row, v: row.node in v,
    "namespaces": lambda row, v: row.namespace in v,
    "named": lambda row, v: (row.namespace, row.name) in v,
    "node_spans": lambda row, v: any(row.node == n and lo <= row.observed_at <= hi for n, lo, hi in v),
    "has_pod_uid": lambda row, v: (row.pod_uid is not None) == v,
    "on_a_node": lambda row, v: (row.node != "") == v,
    "since": lambda row, v: row.observed_at >= v,
    "before": lambda row, v: row.observed_at < v,
    "arrays": lambda row, v: True,
}


@pytest.mark.parametrize("selected", SELECTIONS)
def test_a_selection_keeps_the_cluster_s_rows_whose_columns_it_names(selected: dict[str, Any]) -> None:
    """``observation_rows.selection`` chooses a cluster's rows by their stored columns: each argument keeps
    the rows whose column is (one of) what it gives (``RULES``: a (namespace, name) pair of ``named``, a
    node's inclusive span of ``node_spans``, a pod UID or none, a node or none, ``since`` inclusive and
    ``before`` exclusive), several keep the rows all of them keep, an empty collection keeps none, values
    sent as one array (``arrays``) keep the same rows, and another cluster's rows are never chosen. (By
    id: the same rule.)"""
    here, there = mixed("here"), mixed("there")
    every = observation_rows.rows(ObservationRow.objects.filter(cluster=here).order_by("id"))

    def kept(row: observation_rows.StoredRow) -> bool:
        return all(
            RULES[arg](row, value) if arg in RULES else getattr(row, arg) == value
            for arg, value in selected.items()
        )

    expected = [row.id for row in every if kept(row)]
    assert (expected != []) == ([] not in selected.values()) and len(expected) < len(every)
    for cluster in (here, here.pk):
        chosen = observation_rows.selection(cluster, **selected).order_by("id")
        assert [row.id for row in observation_rows.rows(chosen)] == expected
    ids = [row.id for row in every[::5]]
    theirs = observation_rows.rows(ObservationRow.objects.filter(cluster=there).order_by("id"))
    chosen = observation_rows.selection(here, ids=[*ids, theirs[0].id]).order_by("id")
    assert [row.id for row in observation_rows.rows(chosen)] == ids


def test_keys_by_id_gives_each_stored_id_of_the_cluster_its_dedupe_key() -> None:
    """``observation_rows.keys_by_id``: the dedupe key of each id of the cluster's rows; an id of another
    cluster's row, or of no row, is absent (evidence cites a cluster's own observations)."""
    here, there = mixed("here"), mixed("there")
    mine = observation_rows.rows(observation_rows.selection(here).order_by("id"))
    theirs = observation_rows.rows(observation_rows.selection(there).order_by("id"))
    wanted = [row.id for row in mine[::3]]
    missing = max(row.id for row in theirs) + 1000
    for cluster in (here, here.pk):
        got = observation_rows.keys_by_id(cluster, [*wanted, theirs[0].id, missing])
        assert got == {row.id: row.dedupe_key for row in mine[::3]}
    assert observation_rows.keys_by_id(here, []) == {}
