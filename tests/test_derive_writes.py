"""The derive stage writes only what changed (``store.replace_pod_timelines``' row digests), and finds a pod's
UID-less lines through the partial indexes, without scanning the cluster's observations.

What must hold: whatever order observations arrive in and however often a pod is re-derived on the way,
the rows stored are exactly those a single derivation of everything would store; a re-derivation that
changes nothing writes nothing, pushes nothing and derives nothing downstream.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from typing import Any

import pytest
from django.db import connection

from tests.lifecycle import scenarios
from tests.lifecycle.factories import t
from tests.stored import rows_of
from timelines import derivation, live, observation_rows, store
from timelines.lifecycle.observation import Kind, Observation, Source, Transition
from timelines.models import Finding, Interval, Marker, Pod

DERIVED = (Interval, Marker, Finding)
NOW = t(100_000)  # findings about intervals still open depend on now: one now for every derivation here
COLUMNS = {
    Interval: ("pod_uid", "node", "namespace", "attrs", "evidence_keys", "lane", "state", "start", "end", "source"),
    Marker: ("pod_uid", "node", "namespace", "attrs", "evidence_keys", "at", "kind", "reason", "message"),
    Finding: ("pod_uid", "node", "namespace", "attrs", "evidence_keys", "subject", "kind", "severity", "start", "end"),
}  # fmt: skip


def stored(cluster: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every derived row of ``cluster`` without its id, evidence as dedupe keys (ids differ between
    clusters), sorted: what two clusters holding the same observations must hold alike."""
    keys = {row.id: row.dedupe_key for row in rows_of(cluster)}
    out: dict[str, list[tuple[Any, ...]]] = {}
    for model in DERIVED:
        rows = []
        for row in model.objects.filter(cluster=cluster).values():
            row["evidence_keys"] = sorted(keys[i] for i in row["evidence"])
            rows.append(tuple(repr(row[c]) for c in COLUMNS[model]))
        out[model.__name__] = sorted(rows)
    pods = Pod.objects.filter(cluster=cluster).values_list("uid", *store._POD_FIELDS)
    out["Pod"] = sorted(tuple(repr(v) for v in row) for row in pods)
    return out


def derived_once(name: str, observations: list[Observation]) -> Any:
    cluster = store.cluster_for(name)
    store.save_observations(cluster, observations)
    derivation.drain(now=NOW)
    return cluster


@pytest.mark.django_db
@pytest.mark.both_databases
@pytest.mark.parametrize("name", sorted(scenarios.ALL_SCENARIOS))
def test_rows_derived_step_by_step_equal_one_derivation_of_everything(name: str) -> None:
    """GIVEN a scenario's observations WHEN they arrive in a shuffled order, a few at a time, each arrival
    derived (so each pod is re-derived over rows that an earlier timeline wrote) THEN the stored rows are
    those of one cluster that stored everything at once and derived it once: no row left over, none
    doubled, none missing."""
    observations = scenarios.ALL_SCENARIOS[name]()
    whole = derived_once("whole", observations)
    shuffled = random.Random(name).sample(observations, len(observations))
    steps = store.cluster_for("steps")
    for i in range(0, len(shuffled), 3):
        store.save_observations(steps, shuffled[i : i + 3])
        derivation.drain(now=NOW)
    assert stored(steps) == stored(whole)
    assert any(stored(whole).values())


@pytest.mark.django_db
@pytest.mark.both_databases
def test_rederiving_with_nothing_new_rewrites_no_row_and_pushes_nothing(
    monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """GIVEN a derived pod WHEN it is marked dirty again with nothing new (``rederive``, the periodic
    re-derivation of terminating pods) THEN its rows keep their ids (none deleted, none inserted), its pod
    row is not written, and nothing is pushed."""
    cluster = derived_once("c", scenarios.graceful_delete())
    ids = {m: set(m.objects.filter(cluster=cluster).values_list("id", flat=True)) for m in DERIVED}
    pushed: list[Any] = []
    monkeypatch.setattr(live, "publish_timelines", lambda name, timelines: pushed.extend(timelines) or 0)
    uid = scenarios.UID
    derivation.mark_cluster(cluster)
    with django_capture_on_commit_callbacks(execute=True):  # the push waits for the test's transaction
        assert derivation.drain(now=NOW) >= 1
    assert {m: set(m.objects.filter(cluster=cluster).values_list("id", flat=True)) for m in DERIVED} == ids
    assert pushed == []
    # and one whose stored rows differ from its timeline (its api lane deleted behind its back) is
    # rewritten and pushed
    Interval.objects.filter(cluster=cluster, pod_uid=uid, lane="api").delete()
    derivation.mark_cluster(cluster)
    with django_capture_on_commit_callbacks(execute=True):
        derivation.drain(now=NOW)
    assert [t.uid for t in pushed] == [uid]


@pytest.mark.django_db
@pytest.mark.both_databases
def test_a_new_observation_rewrites_only_the_rows_it_changes() -> None:
    """GIVEN a pod derived from all but its newest observation WHEN that one arrives THEN the rows it
    does not change keep their ids and only the changed ones are deleted and inserted."""
    observations = scenarios.graceful_delete()
    newest = max(observations, key=lambda o: o.observed_at)
    cluster = derived_once("c", [o for o in observations if o is not newest])
    before = {m: set(m.objects.filter(cluster=cluster).values_list("id", flat=True)) for m in DERIVED}
    store.save_observations(cluster, [newest])
    derivation.drain(now=NOW)
    after = {m: set(m.objects.filter(cluster=cluster).values_list("id", flat=True)) for m in DERIVED}
    kept = sum(len(before[m] & after[m]) for m in DERIVED)
    new = sum(len(after[m] - before[m]) for m in DERIVED)
    assert kept > 0 and new > 0
    assert kept + new == sum(len(after[m]) for m in DERIVED)
    assert stored(cluster) == stored(derived_once("whole", observations))


@pytest.mark.django_db
@pytest.mark.both_databases
def test_rows_written_before_digests_are_replaced_once() -> None:
    """GIVEN rows stored without a digest (before the column existed) WHEN the pod is derived again THEN
    they are replaced by rows with digests, and the pod's rows are what one derivation stores."""
    cluster = derived_once("c", scenarios.normal_start())
    for model in DERIVED:
        model.objects.filter(cluster=cluster).update(digest=None)
    derivation.mark_cluster(cluster)
    derivation.drain(now=NOW)
    assert not any(m.objects.filter(cluster=cluster, digest=None).exists() for m in DERIVED)
    assert stored(cluster) == stored(derived_once("whole", scenarios.normal_start()))


def test_a_row_digest_is_the_same_in_every_process_and_ignores_key_order() -> None:
    """Stable across processes (Python's own string hash is salted per process) and across the key order of
    JSON values; any other difference changes it."""
    row = (1, "uid", "node-a", "ns", {"b": 1, "a": [1, 2]}, [3, 4], "api", "running")
    here = store.row_digest(row)
    code = (
        "import django; django.setup(); from timelines.store import row_digest; "
        "print(row_digest((1, 'uid', 'node-a', 'ns', {'a': [1, 2], 'b': 1}, [3, 4], 'api', 'running')))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "7", "DJANGO_SETTINGS_MODULE": "podlife_site.settings"}
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    assert int(there) == here
    assert store.row_digest((2, *row[1:])) == here  # the cluster id is not hashed
    assert store.row_digest((*row[:7], "ready")) != here


@pytest.mark.django_db
@pytest.mark.postgres
@pytest.mark.parametrize("nameless", [False, True])
def test_uidless_reads_use_their_partial_index(nameless: bool, monkeypatch: Any) -> None:
    """The reads of a pod's candidate UID-less lines must be answered by the partial indexes: before them,
    each derive batch scanned every kubelet line of its cluster (20,000 rows for 2,000 pods in
    bench/derive.py; all of them at fleet scale). The planner may only use a partial index when it can
    prove the query implies the index's condition, which is what this checks."""
    cluster = store.cluster_for("c")
    store.save_observations(
        cluster,
        [
            Observation(Kind.WORKER, Source.KUBELET_LOG, t(i), f"log:{i}", node="node-a",
                        namespace="" if nameless else "ns", name="" if nameless else f"p-{i}",
                        payload={"transition": Transition.SYNC_ENTER})
            for i in range(50)
        ],
    )  # fmt: skip
    partial = ["obs_no_uid_by_name", "obs_no_uid_by_time"]  # either bounds the read to UID-less rows
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = ANY(%s)",
            [partial],
        )
        names = {*partial, *(r[0] for r in cursor.fetchall())}
    assert len(names) > len(partial)  # the partitions have them too
    plans: list[str] = []

    def explain(sql: str, params: Any, where: Any = None) -> list[Any]:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + observation_rows.facts_sql(sql), params)
            plans.append("\n".join(r[0] for r in cursor.fetchall()))
        return []

    monkeypatch.setattr(derivation, "_pg_facts", explain)
    if nameless:
        at = t(10)
        derivation._nameless_facts(cluster, {"node-a": (at, at)})
    else:
        derivation._named_facts(cluster, {("ns", "p-1"), ("ns", "p-2")})
        derivation._named_facts(cluster, {("ns", "p-1")}, kinds=(Kind.AUDIT,), pod_requests=True)
    assert plans
    for plan in plans:
        assert any(name in plan for name in names), plan
