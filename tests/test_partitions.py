"""PostgreSQL: observations partitioned by observed time (timelines/partitions.py, migration 0010).

Idempotence across partitions, retention by dropping whole partitions, partitions made ahead (and on
demand), and the migration of a populated single table in place.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.stored import count_of, keys_of, put_as_before_0028, rows_of
from timelines import partitions, store
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def names() -> set[str]:
    return {p.name for p in partitions.partitions()}


DAY = timedelta(days=1)
D1 = datetime(2025, 3, 10, tzinfo=UTC)  # a Monday


def pod_snapshot(
    at: datetime, rv: str = "41", *, uid: str = "uid-a", created: datetime | None = None
) -> Observation:
    """A pod as a watch delivers it: ``observed_at`` is the delivery time, the key its resourceVersion;
    with ``created``, its payload names when the pod was created (``store.probe_since``)."""
    payload: dict[str, Any] = {"watch": "MODIFIED", "resource_version": rv, "uid": uid}
    if created is not None:
        payload["created"] = created.isoformat()
    return Observation(
        kind=Kind.POD,
        source=Source.API,
        observed_at=at,
        dedupe_key=f"pod:{uid}:{rv}",
        pod_uid=uid,
        node="node-a",
        namespace="default",
        name="web-0",
        payload=payload,
    )


@pytest.fixture(autouse=True)
def _own_partitions():
    """Partitions outlive the TRUNCATE between tests: drop the ones a test made."""
    before = names() if partitions.is_partitioned() else set()
    yield
    with connection.cursor() as cursor:
        for name in names() - before:
            cursor.execute(f'DROP TABLE "{name}"')
    partitions.forget_layout()  # what this process read of them is gone with them
    store._probe_all.clear()
    with connection.cursor() as cursor:  # a table of no model: the TRUNCATE between tests leaves it
        cursor.execute("DELETE FROM podlife_unbounded_clusters")
    store._unbounded.clear()


def partition_of(key: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tableoid::regclass::text FROM timelines_observation "
            f"WHERE {partitions.stored_key_hash_sql()} = {partitions.key_hash_sql('cluster_id', '%s')}",
            [key],
        )
        return ",".join(r[0] for r in cursor.fetchall())


def _layout(table: str) -> list[tuple[Any, ...]]:
    """The columns of ``table`` in its physical order: name, type, NOT NULL, storage, length, alignment."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attstorage, t.typlen, "
            "t.typalign FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            [table],
        )
        return cursor.fetchall()


def test_a_new_partition_lays_its_columns_out_widest_aligned_first_and_stores_a_row_in_fewer_bytes():
    """GIVEN the parent's columns in the order its migrations made (short texts between the id and the
    times, names before the cluster id)
    WHEN a day's partition is made
    THEN it holds the parent's columns (types, NOT NULL, storage) with every fixed-length one first, the
    widest-aligned first; a pod snapshot stored through the parent lands in it, reads back, and takes
    fewer bytes there than the same row in the parent's order; a row waiting in the default partition
    moves into a later day made so, and the day's rows of an imported cluster move back out of it when
    retention drops it."""
    (name,) = partitions.create_partition(D1, D1 + DAY)
    parent, child = _layout(partitions.PARENT), _layout(name)
    assert sorted(child) == sorted(parent) and child != parent
    rank = {"d": 0, "i": 1, "s": 2, "c": 3}
    fixed = [column for column in child if column[4] > 0]
    assert child[: len(fixed)] == fixed and len(fixed) < len(child)
    assert [rank[column[5]] for column in fixed] == sorted(rank[column[5]] for column in fixed)
    assert ("body", "bytea", False, "e", -1, "i") in child  # EXTERNAL, as the parent's

    assert store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=9))]).stored == 1
    assert partition_of("pod:uid-a:41") == name
    assert [row.payload["resource_version"] for row in rows_of(Cluster.objects.get(name="c1"))] == ["41"]
    columns = ", ".join(column[0] for column in parent)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE parent_order (LIKE {partitions.PARENT})")
        cursor.execute(f"INSERT INTO parent_order ({columns}) SELECT {columns} FROM {name}")
        cursor.execute(
            f"SELECT (SELECT pg_column_size(o.*) FROM {name} o), pg_column_size(p.*) FROM parent_order p"
        )
        ours, theirs = cursor.fetchone()
    assert ours < theirs

    waiting = pod_snapshot(D1 + 3 * DAY, rv="43")  # no partition for its day yet: the default one
    store.save_observations("c1", [waiting])
    (later,) = partitions.create_partition(D1 + 3 * DAY, D1 + 4 * DAY)
    assert partition_of("pod:uid-a:43") == later and _layout(later) == child

    Cluster.objects.filter(name="c1").update(read_only=True)  # an imported incident: kept
    partitions.drop_expired(D1 + DAY, [Cluster.objects.get(name="c1").pk])
    assert partition_of("pod:uid-a:41") == partitions.DEFAULT
    assert sorted(keys_of(None)) == ["pod:uid-a:41", "pod:uid-a:43"]


def test_the_same_fact_two_days_apart_is_stored_once():
    """GIVEN day partitions for two days and a pod snapshot stored on the first
    WHEN the same snapshot (same resourceVersion) is re-delivered two days later (a relist)
    THEN nothing new is stored, the first row stays where it was, and the pod is not marked dirty again."""
    for day in range(4):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    first = store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=9))])
    assert first.stored == 1
    assert partition_of("pod:uid-a:41") == partitions.partition_name(D1)

    again = store.save_observations("c1", [pod_snapshot(D1 + 2 * DAY + timedelta(hours=1))])
    assert (again.stored, again.duplicates, again.pods_touched) == (0, 1, set())
    assert count_of(None, keys=["pod:uid-a:41"]) == 1
    assert partition_of("pod:uid-a:41") == partitions.partition_name(D1)

    # The same holds on the staging path (taken when a COPY meets a unique violation): a row for the third
    # day whose key the first day holds is skipped, a new one is stored.
    cluster = Cluster.objects.get(name="c1")
    snapshots = [pod_snapshot(D1 + 3 * DAY, rv=rv) for rv in ("41", "42")]
    rows = {obs.dedupe_key: store._row(cluster.pk, obs, D1 + 3 * DAY) for obs in snapshots}
    from django.db import transaction

    with transaction.atomic():
        inserted = store._insert_postgres_staged(cluster.pk, rows, nested=False)
    assert inserted == [("uid-a", "pod:uid-a:42")]
    assert count_of(None, keys=["pod:uid-a:41"]) == 1


def test_a_fact_waiting_in_the_default_partition_is_still_a_duplicate_and_moves_into_its_day():
    store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=3))])
    assert partition_of("pod:uid-a:41") == partitions.DEFAULT
    created = partitions.create_partition(D1, D1 + DAY)
    assert created == [partitions.partition_name(D1)]
    assert partition_of("pod:uid-a:41") == created[0]
    partitions.create_partition(D1 + DAY, D1 + 2 * DAY)
    assert store.save_observations("c1", [pod_snapshot(D1 + DAY)]).stored == 0


def test_beat_creates_the_partitions_ahead_once(settings):
    settings.PODLIFE_PARTITION_DAYS = 1
    settings.PODLIFE_PARTITIONS_AHEAD = 3
    now = datetime(2031, 5, 6, 13, 0, tzinfo=UTC)
    created = partitions.ensure_configured(now=now)
    assert created == [partitions.partition_name(datetime(2031, 5, d, tzinfo=UTC)) for d in (6, 7, 8, 9)]
    assert partitions.ensure_configured(now=now) == []
    # Weeks (Monday to Monday) made later fill around the days (ranges never overlap).
    settings.PODLIFE_PARTITION_DAYS = 7
    week = partitions.ensure_configured(now=now + 2 * DAY)
    bounds = {p.name: (p.lower, p.upper) for p in partitions.partitions()}
    may = [datetime(2031, 5, d, tzinfo=UTC) for d in (5, 6, 10, 12, 19)]
    assert [bounds[name] for name in week[:3]] == [(may[0], may[1]), (may[2], may[3]), (may[3], may[4])]


def test_a_partition_ahead_made_by_code_before_the_key_hash_gets_today_s_key_index(settings):
    """GIVEN a day ahead made by a process still running the code before migration 0028 (an upgrade's old
    collector meeting a missing day: its unique index is 0026's, of the key's text alone)
    WHEN beat ensures the partitions ahead
    THEN that day has today's key index instead, while it is empty, and a fact stored there twice is
    stored once."""
    settings.PODLIFE_PARTITION_DAYS = 1
    settings.PODLIFE_PARTITIONS_AHEAD = 2
    now = datetime(2031, 6, 2, 13, 0, tzinfo=UTC)
    partitions.ensure_configured(now=now)
    ahead = partitions.partition_name(datetime(2031, 6, 4, tzinfo=UTC))
    with connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX "{partitions.key_index(ahead)}"')
        cursor.execute(
            f'CREATE UNIQUE INDEX "{ahead[:54]}_key_hash" ON "{ahead}" '
            f"(({partitions.key_hash_sql('cluster_id', 'dedupe_key')}))"
        )
    partitions.ensure_configured(now=now)
    defs = _indexes_on(ahead)
    assert "COALESCE(key_hash" in defs[partitions.key_index(ahead)], defs
    assert f"{ahead[:54]}_key_hash" not in defs, defs
    late = pod_snapshot(datetime(2031, 6, 4, 1, tzinfo=UTC), rv="77")
    assert store.save_observations("c1", [late]).stored == 1
    assert store.save_observations("c1", [late]).duplicates == 1


def test_retention_drops_whole_partitions_and_keeps_imported_clusters():
    """GIVEN five day partitions with live and imported rows, and a live row in the default partition
    WHEN retention keeps two days
    THEN the partitions wholly before the cutoff are gone (dropped, not emptied), the imported rows live on
    in the default partition, the live rows at or after the cutoff are untouched."""
    for day in range(5):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    live = [pod_snapshot(D1 + day * DAY + timedelta(hours=12), rv=str(100 + day)) for day in range(5)]
    old = pod_snapshot(D1 - 30 * DAY, rv="7")  # no partition: the default one holds it
    assert store.save_observations("c1", [*live, old]).stored == 6
    imported = Cluster.objects.create(name="bundle", origin=Cluster.Origin.IMPORTED, read_only=True)
    ObservationRow.objects.create(
        cluster=imported,
        kind=Kind.POD,
        source=Source.API,
        observed_at=D1 + timedelta(hours=1),
        received_at=D1,
        dedupe_key="pod:imported:1",
    )

    now = D1 + 4 * DAY + timedelta(hours=6)  # cutoff = D1 + 2 days 6 h: days 0 and 1 are wholly before it
    gone = store.apply_retention(2, now=now)

    assert gone == 3  # days 0 and 1, and the old row in the default partition
    left = names()
    assert partitions.partition_name(D1) not in left
    assert partitions.partition_name(D1 + DAY) not in left
    assert partitions.partition_name(D1 + 2 * DAY) in left  # holds the cutoff: kept whole
    assert sorted(keys_of("c1")) == [
        "pod:uid-a:102",
        "pod:uid-a:103",
        "pod:uid-a:104",
    ]
    assert partition_of("pod:imported:1") == partitions.DEFAULT
    assert store.apply_retention(2, now=now) == 0


def test_migration_converts_a_populated_table_in_place():
    """GIVEN the single observation table of migration 0006 with rows over several days (one in the future)
    WHEN migration 0010 runs
    THEN the table is partitioned, every row is still there with its id, the old table is the legacy
    partition (not a copy), ids continue after the highest one, and a fact the legacy table holds is a
    duplicate when it comes again on a later day."""
    executor = MigrationExecutor(connection)
    executor.migrate([("timelines", "0006_interval_source_kubelet")])
    assert not partitions.is_partitioned()
    cluster = Cluster.objects.create(name="c1")
    now = datetime.now(UTC)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO timelines_observation (cluster_id, pod_uid, kind, source, observed_at, received_at, "
            "dedupe_key, node, namespace, name, payload) SELECT %s, 'uid-' || (i %% 50), 'pod', 'api', "
            "%s - i * interval '1 minute', %s, 'pod:uid-' || (i %% 50) || ':' || i, 'node-a', 'default', "
            "'web', jsonb_build_object('i', i) FROM generate_series(0, 4999) i",
            [cluster.pk, now, now],
        )
        cursor.execute(
            "INSERT INTO timelines_observation (cluster_id, kind, source, observed_at, received_at, "
            "dedupe_key, node, namespace, name, payload) VALUES (%s, 'pod', 'api', %s, %s, 'future', '', '', "
            "'', '{}')",
            [cluster.pk, now + 40 * DAY, now],
        )
        cursor.execute("SELECT 'timelines_observation'::regclass::oid")
        (old_oid,) = cursor.fetchone()
        cursor.execute("SELECT max(id), sum(id) FROM timelines_observation")
        max_id, id_sum = cursor.fetchone()

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert partitions.is_partitioned()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'timelines_observation_legacy'::regclass::oid")
        assert cursor.fetchone()[0] == old_oid  # the same table, attached, not a copy
        cursor.execute("SELECT count(*), max(id), sum(id) FROM timelines_observation")
        assert cursor.fetchone() == (5001, max_id, id_sum)
        cursor.execute("SELECT count(*) FROM timelines_observation_legacy")
        assert cursor.fetchone()[0] == 5000
    assert partition_of("future") == partitions.DEFAULT
    again = Observation(
        kind=Kind.POD,
        source=Source.API,
        observed_at=now + DAY,
        dedupe_key="pod:uid-7:7",
        pod_uid="uid-7",
        payload={},
    )
    fresh = pod_snapshot(now + DAY, rv="9999")
    result = store.save_observations("c1", [again, fresh])
    assert (result.stored, result.duplicates) == (1, 1)
    assert rows_of(None, keys=["pod:uid-a:9999"])[0].id > max_id
    assert partition_of("pod:uid-a:9999") == partitions.partition_name(partitions.span_start(now + DAY, DAY))


def test_a_fact_its_own_partition_holds_fails_one_copy_then_the_batches_probe_every_partition():
    """GIVEN a pod snapshot stored on a day (its partition is not probed by the next batches' look-up)
    WHEN the same snapshot is re-delivered later that day (a relist of stored pods)
    THEN the partition's unique index fails the COPY, the batch is looked up across every partition and
    stored once; the cluster's next batches probe every partition until one finds nothing stored."""
    partitions.create_partition(D1, D1 + DAY)
    assert store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=9))]).stored == 1
    cluster_id = Cluster.objects.get(name="c1").pk
    assert cluster_id not in store._probe_all

    again = store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=10))])
    assert (again.stored, again.duplicates) == (0, 1)
    assert count_of(None, keys=["pod:uid-a:41"]) == 1
    assert cluster_id in store._probe_all  # the relist's next batches find their stored keys first

    mixed = [pod_snapshot(D1 + timedelta(hours=11)), pod_snapshot(D1 + timedelta(hours=11), rv="42")]
    assert store.save_observations("c1", mixed).stored == 1
    assert cluster_id in store._probe_all  # it still met a stored key
    fresh = store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=12), rv="43")])
    assert fresh.stored == 1
    assert cluster_id not in store._probe_all  # nothing stored met: back to the cheaper look-up


def _stale_layout(*parts: partitions.Partition) -> None:
    """What a long-running process may still believe after another one dropped or re-made partitions."""
    import time

    partitions._layouts[connection.alias] = (time.monotonic(), list(parts))


def test_a_partition_remade_with_other_bounds_since_it_was_read_is_not_trusted():
    """GIVEN a process that read a week partition from Monday D1, which was since dropped and re-made as
    days (so a row of Wednesday now lives in Wednesday's partition, outside what the process believes)
    WHEN a fact stored on Wednesday is re-delivered on Monday
    THEN the look-up sees the partition's bounds changed, probes every partition and stores nothing."""
    for day in (0, 2):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    assert store.save_observations("c1", [pod_snapshot(D1 + 2 * DAY + timedelta(hours=1))]).stored == 1
    week = partitions.Partition(
        partitions.partition_name(D1),  # the same name the day partition has
        D1,
        D1 + 7 * DAY,
        bound="FOR VALUES FROM ('2025-03-10 00:00:00+00') TO ('2025-03-17 00:00:00+00')",
    )
    _stale_layout(week)
    again = store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=3))])
    assert (again.stored, again.duplicates) == (0, 1)
    assert count_of(None, keys=["pod:uid-a:41"]) == 1
    # The process read the catalogue again: the day partition it now knows is probed around.
    assert partitions.range_holding(D1, D1) == next(p for p in partitions.partitions() if p.lower == D1)


def test_a_partition_dropped_since_it_was_read_is_not_trusted():
    """GIVEN a process that still knows a day partition another process dropped (its rows then wait in the
    default partition) WHEN a fact the default partition holds is re-delivered for that day
    THEN it is stored once."""
    partitions.create_partition(D1 + DAY, D1 + 2 * DAY)
    known = next(p for p in partitions.partitions() if p.lower == D1 + DAY)
    store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=5))])  # before it: the default one
    with connection.cursor() as cursor:
        cursor.execute(f'DROP TABLE "{known.name}"')
    _stale_layout(known)
    again = store.save_observations("c1", [pod_snapshot(D1 + DAY + timedelta(hours=1))])
    assert (again.stored, again.duplicates) == (0, 1)
    assert partition_of("pod:uid-a:41") == partitions.DEFAULT


def test_keys_with_quotes_backslashes_braces_and_commas_are_found_on_another_day():
    """GIVEN facts whose dedupe keys hold what an array literal must escape (a hostile name's `"`, `\\`,
    `{`, `}`, `,` and spaces) stored on one day WHEN they are re-delivered the next day THEN each is found
    by the cross-partition look-up and none is stored twice."""
    for day in range(2):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    odd = ['a"b', "c\\d", "{e,f}", "g h", "NULL", "", '\\"}']

    def facts(at: datetime) -> list[Observation]:
        return [
            Observation(
                kind=Kind.POD,
                source=Source.API,
                observed_at=at,
                dedupe_key=f"pod:uid-{i}:{text}",
                pod_uid=f"uid-{i}",
                namespace="default",
                name=f"web-{i}",
            )
            for i, text in enumerate(odd)
        ]

    assert store.save_observations("c1", facts(D1 + timedelta(hours=1))).stored == len(odd)
    again = store.save_observations("c1", facts(D1 + DAY + timedelta(hours=1)))
    assert (again.stored, again.duplicates) == (0, len(odd))


def test_a_copy_stored_on_a_later_day_or_in_the_default_partition_is_found_from_an_earlier_day():
    """GIVEN a pod snapshot stored on a later day (a collector whose clock ran ahead) and an event stored in
    the default partition (no partition held its day), in a cluster whose other rows all sit on the first
    day WHEN both come again in one batch timed on the first day (with a new fact of a third kind) THEN the
    look-up's span of the batch's kinds outside the first day reaches both: neither is stored twice."""
    for day in range(3):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=1), rv="40")])

    def event(at: datetime) -> Observation:
        return Observation(
            kind=Kind.EVENT, source=Source.API, observed_at=at, dedupe_key="event:e-1:7", pod_uid="uid-a"
        )

    assert store.save_observations("c1", [pod_snapshot(D1 + 2 * DAY)]).stored == 1
    assert store.save_observations("c1", [event(D1 + 9 * DAY)]).stored == 1
    assert partition_of("event:e-1:7") == partitions.DEFAULT
    node = Observation(kind=Kind.NODE, source=Source.API, observed_at=D1, dedupe_key="node:n-1:3", node="n-1")
    again = store.save_observations(
        "c1", [pod_snapshot(D1 + timedelta(hours=2)), event(D1 + timedelta(hours=2)), node]
    )
    assert (again.stored, again.duplicates, again.stored_keys) == (1, 2, {"node:n-1:3"})
    assert partition_of("pod:uid-a:41") == partitions.partition_name(D1 + 2 * DAY)
    assert partition_of("event:e-1:7") == partitions.DEFAULT


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipeline", "libpq-without-pipeline"])
def test_a_batch_expected_new_is_copied_checked_and_marked_in_one_query_and_a_stale_one_only_for_its_new_rows(
    derive_stage_off, monkeypatch, pipeline
):
    """GIVEN a day partition WHEN a batch of new facts of that day is stored THEN nothing is looked up
    before its COPY (the COPY, the check after it and the marks are one query) and its keys are marked.
    GIVEN pod a's snapshot stored on the first day WHEN a batch on the next day holds it again beside pod
    b's first snapshot THEN the check after the COPY rolls the query back, the batch is looked up first
    and only b is stored and marked dirty; and a batch of stored facts alone leaves no mark at all. The
    same where libpq has no pipeline mode (the look-up's two statements then go one after the other)."""
    from timelines.models import DirtyBatch

    monkeypatch.setattr(store, "_PIPELINE", pipeline)
    look_ups: list[int] = []
    stored_keys = store._stored_keys

    def counted(raw, cluster_id, rows, since):
        look_ups.append(len(rows))
        return stored_keys(raw, cluster_id, rows, since)

    monkeypatch.setattr(store, "_stored_keys", counted)

    for day in range(2):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    c = Observation(
        kind=Kind.POD, source=Source.API, observed_at=D1, dedupe_key="pod:uid-c:3", pod_uid="uid-c"
    )
    assert store.save_observations("c1", [pod_snapshot(D1 + timedelta(hours=1)), c]).stored == 2
    assert look_ups == []
    (marked,) = DirtyBatch.objects.all()
    assert sorted(marked.keys) == [["pod", "uid-a", None, None], ["pod", "uid-c", None, None]]
    DirtyBatch.objects.all().delete()
    b = Observation(
        kind=Kind.POD, source=Source.API, observed_at=D1 + DAY, dedupe_key="pod:uid-b:7", pod_uid="uid-b"
    )
    again = store.save_observations("c1", [pod_snapshot(D1 + DAY + timedelta(hours=1)), b])
    assert (again.stored, again.duplicates) == (1, 1)
    assert look_ups == [2]
    assert count_of(None, keys=["pod:uid-a:41"]) == 1
    assert [row.keys for row in DirtyBatch.objects.all()] == [[["pod", "uid-b", None, None]]]
    DirtyBatch.objects.all().delete()
    store._probe_all.clear()  # a batch expected new, not a relist: its COPY goes first
    assert store.save_observations("c1", [pod_snapshot(D1 + DAY + timedelta(hours=2))]).stored == 0
    assert look_ups == [2, 1]
    assert not DirtyBatch.objects.exists()


def _indexes_on(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return dict(cursor.fetchall())


def test_migrations_0025_to_0028_move_every_partition_to_the_lean_indexes_and_back():
    """GIVEN a cluster's observations over three days, in three partitions, with the indexes of 0024 (by pod
    and time, by kind and time; the key's text)
    WHEN migrations 0025 to 0028 run
    THEN every partition's index by pod is (cluster_id, pod_uid) and by kind (cluster_id, kind), each
    attached to a valid parent index, its key index holds the hash of the cluster and key (the row's
    ``key_hash`` or, for these older rows, the hash of the key's text), the old ones are gone, a read by
    pod still gives the pod's rows in time order and a fact of the first day is still a duplicate on the
    third; backwards, the old indexes are back on every partition (and the look-up finds keys by them),
    and forwards again leaves the same indexes."""
    executor = MigrationExecutor(connection)
    executor.migrate([("timelines", "0024_observation_body")])
    base = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - 3 * DAY
    partitions.ensure_partitions(DAY, now=base, ahead=3)
    facts = [
        pod_snapshot(base + day * DAY + timedelta(minutes=m), rv=f"{day}-{m}")
        for day in range(3)
        for m in (30, 10)
    ]
    cluster = Cluster.objects.create(name="c1")
    put_as_before_0028(cluster.pk, facts)
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM timelines_observation")
        held = sorted(name for (name,) in cursor.fetchall())
    assert len(held) == 3

    def lean(name: str) -> None:
        defs = _indexes_on(name)
        assert defs[f"{name}_by_pod"].endswith("USING btree (cluster_id, pod_uid)"), defs
        assert defs[f"{name}_by_kind"].endswith("USING btree (cluster_id, kind)"), defs
        key_index = defs[partitions.key_index(name)]
        assert key_index.startswith("CREATE UNIQUE INDEX"), defs
        assert "COALESCE(key_hash, (md5(" in key_index, defs
        old = (
            "(cluster_id, pod_uid, observed_at)",
            "(cluster_id, kind, observed_at)",
            "(dedupe_key, cluster_id)",
            "USING btree (((md5(",
        )
        assert not any(o in d for o in old for d in defs.values()), defs

    def stored_again(rv: str) -> set[str]:
        """The keys the store's look-up (as the schema of the moment has it) finds of a later copy."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT k FROM podlife_stored_keys(%s, %s, ARRAY['pod']::varchar[], NULL, NULL, NULL, NULL) k",
                [cluster.pk, "{pod:uid-a:" + rv + "}"],
            )
            return {k for (k,) in cursor.fetchall()}

    executor = MigrationExecutor(connection)
    executor.migrate([("timelines", "0028_observation_key_in_body")])
    for name in held:
        lean(name)
    with connection.cursor() as cursor:
        for valid, gone in (("obs_by_pod", "obs_by_pod_time"), ("obs_by_kind", "obs_by_kind_time")):
            cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = %s::regclass", [valid])
            assert cursor.fetchone() == (True,)
            cursor.execute("SELECT to_regclass(%s)", [gone])
            assert cursor.fetchone() == (None,)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())  # today's code reads and writes today's rows
    from timelines import observation_rows

    condition, params = observation_rows.pg_pods(["uid-a"])
    read = [o.dedupe_key for _, o in observation_rows.pg_facts(condition, [cluster.pk, *params])]
    assert read == [f.dedupe_key for f in sorted(facts, key=lambda f: f.observed_at)]
    late = pod_snapshot(base + 2 * DAY + timedelta(hours=3), rv="0-30")
    assert (
        store.save_observations("c1", [late]).stored,
        store.save_observations("c1", [late]).duplicates,
    ) == (0, 1)
    assert stored_again("0-30") == {"pod:uid-a:0-30"}

    executor = MigrationExecutor(connection)
    executor.migrate([("timelines", "0024_observation_body")])
    for name in held:
        defs = _indexes_on(name)
        assert defs[f"{name}_by_pod_time"].endswith("(cluster_id, pod_uid, observed_at)"), defs
        assert defs[f"{name}_by_kind_time"].endswith("(cluster_id, kind, observed_at)"), defs
        assert defs[f"{name}_dedupe"].endswith("(dedupe_key, cluster_id)"), defs
        lean_names = {f"{name}_by_pod", f"{name}_by_kind", f"{name}_key_hash", partitions.key_index(name)}
        assert not lean_names & set(defs), defs
    assert stored_again("1-10") == {"pod:uid-a:1-10"}
    executor = MigrationExecutor(connection)
    executor.migrate([("timelines", "0028_observation_key_in_body")])
    for name in held:
        lean(name)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_migration_0029_keeps_a_uuid_pod_uid_as_16_bytes_and_reads_both_forms_as_one_pod():
    """GIVEN a pod (a UUID UID) and a pod whose UID is not a UUID, with rows stored before migration 0029
    on two days (the UID's text in ``pod_uid``)
    WHEN 0029 runs and both pods get more rows, on the second day and the third
    THEN the new rows of the UUID pod hold it in ``pod_id`` and NULL in ``pod_uid`` (the other pod's keep
    their text); every partition's index by pod is the two partial ones, attached to valid parent
    indexes, and the old one is gone, and the partial indexes of UID-less lines leave out both forms; a
    read by pod (``pg_pods``, ``selection``, the export's ``pod_rows``) gives each pod's rows of both
    forms in time order with its UID, through both indexes; a fact stored before is still a duplicate;
    backwards, every row holds its UID's text again and the old index is back; forwards again, the same."""
    from dashboard import timeline_reads
    from timelines import observation_rows

    uid = "0b9f1c52-7d8e-4f4a-9c1e-3a5b6d7e8f90"

    def snapshot(at: datetime, rv: str, pod: str) -> Observation:
        return dataclasses.replace(
            pod_snapshot(at, rv), pod_uid=pod, dedupe_key=f"pod:{pod}:{rv}", payload={"uid": pod, "rv": rv}
        )

    executor = MigrationExecutor(connection)
    executor.migrate([("timelines", "0028_observation_key_in_body")])
    base = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - 3 * DAY
    partitions.ensure_partitions(DAY, now=base, ahead=3)
    cluster = Cluster.objects.create(name="c1")
    before = [snapshot(base + day * DAY + timedelta(minutes=m), f"{day}-{m}", pod)
              for pod in (uid, "uid-a") for day in range(2) for m in (30, 10)]  # fmt: skip
    put_as_before_0028(cluster.pk, before)
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM timelines_observation")
        held = sorted(name for (name,) in cursor.fetchall())
    assert len(held) == 2

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    partitions.forget_layout()
    after = [snapshot(base + day * DAY + timedelta(minutes=m), f"{day}-{m}", pod)
             for pod in (uid, "uid-a") for day in (1, 2) for m in (50, 40)]  # fmt: skip
    assert store.save_observations("c1", after).stored == len(after)
    assert store.save_observations("c1", before[:1]).duplicates == 1
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pod_uid, pod_id, count(*) FROM timelines_observation GROUP BY 1, 2 ORDER BY 1 NULLS FIRST"
        )
        assert cursor.fetchall() == [(None, uuid.UUID(uid), 4), (uid, None, 4), ("uid-a", None, 8)]
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM timelines_observation")
        held = sorted(name for (name,) in cursor.fetchall())
    assert len(held) == 3

    def two_partial(name: str) -> None:
        defs = _indexes_on(name)
        assert defs[f"{name}_by_pod_text"].endswith("(cluster_id, pod_uid) WHERE (pod_uid IS NOT NULL)"), defs
        assert defs[f"{name}_by_pod_id"].endswith("(cluster_id, pod_id) WHERE (pod_id IS NOT NULL)"), defs
        assert f"{name}_by_pod" not in defs, defs
        for partial in ("no_uid_by_name", "no_uid_by_time"):  # UID-less lines: neither UID column
            assert "(pod_uid IS NULL) AND (pod_id IS NULL)" in defs[f"{name}_{partial}"], defs
        assert not {f"{name}_uidless_by_name", f"{name}_nameless_by_time"} & set(defs), defs

    for name in held:
        two_partial(name)
    with connection.cursor() as cursor:
        for valid in ("obs_by_pod_text", "obs_by_pod_id"):
            cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = %s::regclass", [valid])
            assert cursor.fetchone() == (True,)
        cursor.execute("SELECT to_regclass('obs_by_pod')")
        assert cursor.fetchone() == (None,)

    def in_order(pod: str) -> list[str]:
        return [o.dedupe_key for o in sorted((o for o in before + after if o.pod_uid == pod),
                                             key=lambda o: o.observed_at)]  # fmt: skip

    condition, params = observation_rows.pg_pods([uid, "uid-a"])
    read = observation_rows.pg_facts(condition, [cluster.pk, *params])
    assert [o.dedupe_key for _, o in read] == in_order(uid) + in_order("uid-a")
    assert {o.pod_uid for _, o in read} == {uid, "uid-a"}
    assert all(o.payload["uid"] == o.pod_uid for _, o in read)
    selected = observation_rows.rows(
        observation_rows.by_pod(observation_rows.selection(cluster, pod_uids=[uid]))
    )
    assert [r.dedupe_key for r in selected] == in_order(uid) and {r.pod_uid for r in selected} == {uid}
    exported = timeline_reads.pod_rows(
        ObservationRow,
        cluster,
        [uid],
        lambda t: f"{observation_rows.uid_sql(t)}, t.observed_at",
        ("observed_at",),
        match=observation_rows.pod_match,
    )
    assert [r[0] for r in exported] == [uid] * 8 and [r[1] for r in exported] == sorted(
        r[1] for r in exported
    )
    # The plan of a populated cluster, analysed: other pods' rows on every day.
    others = [snapshot(base + day * DAY + timedelta(seconds=i), "1", str(uuid.UUID(int=i + 1)))
              for day in range(3) for i in range(1500)]  # fmt: skip
    store.save_observations("c1", others)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE timelines_observation")
        cursor.execute("EXPLAIN " + observation_rows.facts_sql(condition), [cluster.pk, *params])
        plan = "\n".join(r[0] for r in cursor.fetchall())
    assert "_by_pod_text" in plan and "_by_pod_id" in plan, plan

    executor = MigrationExecutor(connection)
    executor.migrate([("timelines", "0028_observation_key_in_body")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM timelines_observation WHERE pod_uid IS NULL")
        assert cursor.fetchone() == (0,)
    for name in held:
        defs = _indexes_on(name)
        assert defs[f"{name}_by_pod"].endswith("USING btree (cluster_id, pod_uid)"), defs
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    for name in held:
        two_partial(name)


def test_migration_0030_finds_rows_by_id_through_the_buckets_of_their_ids_and_back(client):
    """GIVEN three days of a populated cluster, every partition with its index of every id (migration
    0029)
    WHEN 0030 runs
    THEN every partition's id index is of the ids' buckets (``id / 16``) and the old one is gone; reads by
    id (``selection``, ``keys_by_id``, the admin's page of one observation and its list, newest first)
    give exactly the rows asked for, through that index (their plans, the table analysed); backwards,
    every partition has its index of every id again and none of buckets; forwards again, the same."""
    from django.contrib.auth.models import User

    from timelines import observation_rows

    base = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - 3 * DAY
    partitions.ensure_partitions(DAY, now=base, ahead=3)
    stored = [
        dataclasses.replace(
            pod_snapshot(base + day * DAY + timedelta(seconds=i), f"{day}-{i}"), name=f"web-{i}"
        )
        for day in range(3)
        for i in range(1500)
    ]
    for i in range(0, len(stored), 500):
        store.save_observations("c1", stored[i : i + 500])
    cluster = Cluster.objects.get(name="c1")
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM timelines_observation")
        held = sorted(name for (name,) in cursor.fetchall())
        cursor.execute("SELECT id, name FROM timelines_observation ORDER BY id")
        ids = cursor.fetchall()
    assert len(held) == 3 and len(ids) == 4500

    def id_indexes(name: str) -> set[str]:
        return {index for index, definition in _indexes_on(name).items()
                if definition.endswith(" (id)") or definition.endswith(" (((id / 16)))")}  # fmt: skip

    def back_and_forth() -> None:
        """0030 backwards (each partition's index of every id), then forwards (of the ids' buckets)."""
        executor = MigrationExecutor(connection)
        executor.migrate([("timelines", "0029_observation_pod_id")])
        assert all(id_indexes(name) == {f"{name}_id"} for name in held)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        assert all(id_indexes(name) == {f"{name}{partitions.ID_INDEX_SUFFIX}"} for name in held)

    back_and_forth()

    wanted = [ids[i] for i in (0, 15, 16, 17, 1499, 1500, 3001, 4499)]  # bucket edges, every day
    selected = observation_rows.selection(cluster, ids=[oid for oid, _ in wanted])
    read = {r.id: (r.name, r.dedupe_key) for r in observation_rows.rows(selected)}
    assert sorted((oid, name) for oid, (name, _) in read.items()) == sorted(wanted)
    assert read[ids[0][0]] == ("web-0", "pod:uid-a:0-0") and read[ids[-1][0]] == (
        "web-1499",
        "pod:uid-a:2-1499",
    )
    assert observation_rows.keys_by_id(cluster, [*read, 10**12]) == {
        oid: key for oid, (_, key) in read.items()
    }
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE timelines_observation")
    assert partitions.ID_INDEX_SUFFIX in selected.explain()

    client.force_login(User.objects.create_superuser("root", "r@example.org", "pw-123456789"))
    oid, name = wanted[3]
    page = client.get(f"/admin/timelines/observation/{oid}/change/")
    assert page.status_code == 200 and name.encode() in page.content
    assert client.get("/admin/timelines/observation/999999999/change/").status_code == 302  # none: listed
    listing = client.get("/admin/timelines/observation/")
    assert listing.status_code == 200 and f"/observation/{ids[-1][0]}/change/".encode() in listing.content

    back_and_forth()


def test_a_day_that_has_ended_is_closed_with_its_indexes_packed_and_stays_readable():
    """GIVEN partitions of three days with rows stored on each (keys in no order, as a cluster's facts
    arrive), and on the first a copy of an index a failed rebuild left (invalid, ``…_ccnew``)
    WHEN beat's ``close_past`` runs two hours after the second day ends, once with a limit of one
    THEN the second day is closed, then the first: every btree index rebuilt with full pages (fillfactor
    100), valid, still attached to its parent index, the key index smaller than it grew row by row, the
    leftover gone; the third day is left as it is; a fact of the first day is still a duplicate, and every
    row reads back; run again, it closes nothing."""
    days = [D1 + i * DAY for i in range(3)]
    for day in days:
        partitions.create_partition(day, day + DAY)
    stored = [
        pod_snapshot(day + timedelta(seconds=i), rv=f"{day.day}-{i}") for day in days for i in range(3000)
    ]
    for i in range(0, len(stored), 500):
        store.save_observations("c1", stored[i : i + 500])
    names = [partitions.partition_name(day) for day in days]
    key_index = partitions.key_index(names[0])
    leftover = f"{names[0][:50]}_ccnew"

    def btree_indexes(name: str) -> dict[str, tuple[Any, bool, bool]]:
        """Each btree index of the partition: (its options, valid, attached to a parent index)."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT i.relname, i.reloptions, x.indisvalid, EXISTS (SELECT 1 FROM pg_inherits h "
                "WHERE h.inhrelid = i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                "JOIN pg_am a ON a.oid = i.relam WHERE x.indrelid = %s::regclass AND a.amname = 'btree'",
                [f'"{name}"'],
            )
            return {
                index: (options, valid, attached) for index, options, valid, attached in cursor.fetchall()
            }

    with connection.cursor() as cursor:
        cursor.execute(f'CREATE INDEX CONCURRENTLY "{leftover}" ON "{names[0]}" (id)')
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [f'"{leftover}"']
        )
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [f'"{key_index}"'])
        grown = cursor.fetchone()[0]
    before = {name: btree_indexes(name) for name in names}
    assert leftover in before[names[0]] and sum(a for _, _, a in before[names[0]].values()) >= 3

    late = days[2] + partitions.CLOSE_AFTER + timedelta(minutes=1)
    assert partitions.close_past(now=late, limit=1) == [names[1]]  # the newest first, a bounded number a run
    assert partitions.close_past(now=late) == [names[0]]
    for name in names:
        after = btree_indexes(name)
        expected = {index: attached for index, (_, _, attached) in before[name].items() if index != leftover}
        assert {index: attached for index, (_, _, attached) in after.items()} == expected, after
        assert all(valid for _, valid, _ in after.values()), after
        packed = {index for index, (options, _, _) in after.items() if options == ["fillfactor=100"]}
        assert packed == (set(after) if name in names[:2] else set()), after
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(%s::regclass)", [f'"{key_index}"'])
        assert cursor.fetchone()[0] < grown
    assert store.save_observations("c1", stored[:1]).duplicates == 1
    assert count_of(Cluster.objects.get(name="c1")) == len(stored)
    assert partitions.close_past(now=late) == []


def test_a_look_up_by_key_names_the_key_hash_index():
    """GIVEN facts stored on two days
    WHEN the store's look-up and a read by key (``observation_rows.selection(keys=...)``) are planned
    THEN both probe the partitions' key index (the hash of cluster and key), not the rows: the look-up is
    one index probe a key whatever a partition holds, and the hash a reader computes in Python is the one
    PostgreSQL computes of a row stored with the key's text (before migration 0028)."""
    from timelines import observation_rows

    store.save_observations("c1", [pod_snapshot(D1, rv="1"), pod_snapshot(D1 + DAY, rv="2")])
    # A cluster with the rows of a day, analysed, as the planner meets it in a deployment (in a table of
    # two rows any index will do).
    store.save_observations("c1", [pod_snapshot(D1 + timedelta(seconds=i), rv=f"x{i}") for i in range(3000)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE timelines_observation")
    cluster = Cluster.objects.get(name="c1")
    stored = {row.id: row.dedupe_key for row in rows_of(cluster)}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {partitions.key_hash_sql('%s', '%s')}", [cluster.pk, "pod:uid-a:7"])
        assert cursor.fetchone()[0] == partitions.key_hash(cluster.pk, "pod:uid-a:7")
        cursor.execute("SELECT id, key_hash FROM timelines_observation")
        for oid, hashed in cursor.fetchall():
            assert hashed == partitions.key_hash(cluster.pk, stored[oid])
        cursor.execute(
            "EXPLAIN SELECT k FROM unnest(ARRAY['pod:uid-a:1']::varchar[]) AS k, LATERAL (SELECT 1 FROM "
            f"timelines_observation o WHERE {partitions.stored_key_hash_sql('o.')} = "
            f"{partitions.key_hash_sql('%s', 'k')} AND o.cluster_id + 0 = %s LIMIT 1) AS hit",
            [cluster.pk, cluster.pk],
        )
        plan = "\n".join(r[0] for r in cursor.fetchall())
    assert partitions.KEY_INDEX_SUFFIX in plan, plan
    selected = observation_rows.selection(cluster, keys=["pod:uid-a:2", "pod:uid-a:9"])
    assert partitions.KEY_INDEX_SUFFIX in selected.explain(), selected.explain()
    assert [r.dedupe_key for r in observation_rows.rows(selected)] == ["pod:uid-a:2"]


def _index_scans(table: str) -> dict[str, int]:
    """How many scans each index of ``table`` has had, this backend's counts flushed first."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:  # a new statement, a new snapshot of the counts
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE relname = %s", [table])
        return dict(cursor.fetchall())


def test_the_check_after_a_copy_finds_the_other_days_of_a_kind_by_its_index_not_by_reading_the_day():
    """GIVEN a day holding 3,000 analysed pod snapshots of a cluster (as the planner meets a deployment's)
    WHEN a batch of the next day is checked after its COPY, once of a kind the first day does not hold
    and once of pods
    THEN the look-up asks the first day's (cluster, kind) index whether it holds the batch's kinds, and
    never scans its rows through the BRIN on time (a read of the whole day each batch); the kind it does
    not hold costs no probe of its keys, and a pod stored on the first day is still found."""
    for day in range(2):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    first = partitions.partition_name(D1)
    store.save_observations("c1", [pod_snapshot(D1 + timedelta(seconds=i), rv=f"x{i}") for i in range(3000)])
    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{first}"')
    defs = _indexes_on(first)
    by_kind = next(n for n, d in defs.items() if d.endswith("USING btree (cluster_id, kind)"))
    brin = next(n for n, d in defs.items() if "USING brin" in d)
    key_hash = partitions.key_index(first)
    before = _index_scans(first)
    node = Observation(
        kind=Kind.NODE, source=Source.API, observed_at=D1 + DAY, dedupe_key="node:n:1", node="n"
    )
    assert store.save_observations("c1", [node]).stored == 1
    after_node = _index_scans(first)
    assert after_node[by_kind] > before[by_kind]
    assert after_node[key_hash] == before[key_hash]  # no key of it probed there
    again = store.save_observations("c1", [pod_snapshot(D1 + DAY + timedelta(hours=1), rv="x7")])
    assert (again.stored, again.duplicates) == (0, 1)
    after_pod = _index_scans(first)
    assert after_pod[key_hash] > after_node[key_hash]
    assert after_pod[brin] == before[brin], after_pod


def _key_index_scans(day: int) -> int:
    name = partitions.partition_name(D1 + day * DAY)
    return _index_scans(name)[partitions.key_index(name)]


def test_a_pod_snapshot_is_looked_up_only_in_the_days_since_its_pod_was_created():
    """GIVEN pods stored on three days, each created the day it was first seen
    WHEN the third day's pod comes again on the fourth day beside a pod created that day
    THEN the look-up probes only the third day's key index (no copy of a pod can be older than the pod,
    less an hour for the clocks: migration 0031) and finds the copy there; the new pod's key is looked for
    in no earlier day; WHEN the first day's pod comes again THEN it is probed back to the first day and found."""
    for day in range(4):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    for day, uid in enumerate("abc"):
        made = D1 + day * DAY + timedelta(hours=1)
        assert (
            store.save_observations(
                "c1", [pod_snapshot(made + timedelta(minutes=5), "1", uid=uid, created=made)]
            ).stored
            == 1
        )
    before = [_key_index_scans(day) for day in range(3)]
    fourth = D1 + 3 * DAY + timedelta(hours=2)
    again = store.save_observations(
        "c1",
        [
            pod_snapshot(fourth, "1", uid="c", created=D1 + 2 * DAY + timedelta(hours=1)),
            pod_snapshot(fourth, "1", uid="d", created=fourth),
        ],
    )
    assert (again.stored, again.duplicates, again.stored_keys) == (1, 1, {"pod:d:1"})
    after = [_key_index_scans(day) for day in range(3)]
    assert after[:2] == before[:2] and after[2] > before[2], (before, after)  # the check, then the look-up
    first = store.save_observations(
        "c1", [pod_snapshot(fourth, "1", uid="a", created=D1 + timedelta(hours=1))]
    )
    assert (first.stored, first.duplicates) == (0, 1)
    assert _key_index_scans(0) > after[0]


def test_a_row_observed_before_its_pod_was_created_turns_the_bounds_off_for_its_cluster():
    """GIVEN a pod snapshot observed on the first day whose payload says its pod was created on the fourth
    (a clock days off, the demo cluster run faster than time) WHEN it comes again on the fourth day THEN
    it is still found on the first day: its cluster was entered among those whose look-up ignores the
    bounds before the row was stored."""
    for day in range(4):
        partitions.create_partition(D1 + day * DAY, D1 + (day + 1) * DAY)
    made = D1 + 3 * DAY + timedelta(hours=1)
    assert (
        store.save_observations(
            "c1", [pod_snapshot(D1 + timedelta(hours=2), "1", uid="e", created=made)]
        ).stored
        == 1
    )
    again = store.save_observations(
        "c1", [pod_snapshot(made + timedelta(hours=1), "1", uid="e", created=made)]
    )
    assert (again.stored, again.duplicates) == (0, 1)
    assert count_of("c1") == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT cluster_id FROM podlife_unbounded_clusters")
        assert (Cluster.objects.get(name="c1").pk,) in cursor.fetchall()
