"""Observations by kind: ``(cluster_id, kind)`` replaces ``(cluster_id, kind, observed_at)`` (#37,
docs/storage.md "Indexes").

Without the time, btree deduplication folds a kind's entries into one key and posting lists of 6 bytes a
row: the index took 35 to 48 bytes an observation of the ``scale`` churn and takes a few. A read of a kind
within a time span combines it with the BRIN on ``observed_at`` (a bitmap AND); a read of a kind in time
order sorts the rows it reads.

The store's look-up (``podlife_stored_keys``, 0018 and 0026) took the time span the batch's kinds have
outside the batch's partition from the old index (its oldest and newest row, one descent each per
partition). It now asks each other range partition whether it holds a row of those kinds for the cluster
(one descent of the new index, stopping at the first row) and takes the span of those partitions' bounds,
read from the catalogue; the default partition, where rows only wait for their range to be made, gives
its rows' own times. The keys are then probed only in that span, as before: a cluster whose rows all sit
in the day being written still costs no probe.

Built as 0025 built the index by pod, without blocking the collector: the parent's index declared ``ON
ONLY`` the partitioned table, each partition's built ``CONCURRENTLY`` and attached. The function is
replaced once the new index is whole and before the old one is dropped, so at every moment it reads an
index that exists. Hence ``atomic = False``; run again after an interruption, it carries on. Backwards,
the same in the other direction, with 0026's function.
"""

from importlib import import_module

from django.db import migrations, models

TABLE = "timelines_observation"
NEW = models.Index(fields=["cluster", "kind"], name="obs_by_kind")
OLD = models.Index(fields=["cluster", "kind", "observed_at"], name="obs_by_kind_time")
COLUMNS = {"obs_by_kind": "(cluster_id, kind)", "obs_by_kind_time": "(cluster_id, kind, observed_at)"}

_0026 = import_module("timelines.migrations.0026_observation_key_hash_index")

# 0026's function with another bound: which other partitions hold a row of the batch's kinds.
FUNCTION = """
CREATE OR REPLACE FUNCTION podlife_stored_keys(
    p_cluster bigint, p_keys text, p_kinds varchar[],
    p_lower timestamptz, p_upper timestamptz, p_name text, p_bound text
) RETURNS SETOF varchar LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_bitmapscan = off AS $body$
DECLARE
    first_at timestamptz;
    last_at timestamptz;
BEGIN
    IF p_name IS NULL THEN  -- every partition
        RETURN QUERY SELECT k FROM unnest(p_keys::varchar[]) AS k, LATERAL (SELECT 1 FROM timelines_observation o
            WHERE PROBE LIMIT 1) AS hit;
        RETURN;
    END IF;
    -- Locked first, so that no detach or drop of the batch's partition can follow until the transaction
    -- ends; then a NULL row says that partition is no longer attached with the bounds the caller knew.
    LOCK TABLE timelines_observation IN ACCESS SHARE MODE;
    IF NOT EXISTS (SELECT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'timelines_observation'::regclass AND c.oid = to_regclass(p_name)
            AND pg_get_expr(c.relpartbound, c.oid) = p_bound) THEN
        RETURN NEXT NULL;
        RETURN;
    END IF;
    -- The other range partitions that hold a row of these kinds for the cluster: each one's bounds from
    -- the catalogue (MINVALUE for the legacy partition), then one descent of its (cluster, kind) index.
    SELECT min(b.lo), max(b.hi) INTO first_at, last_at
        FROM (SELECT coalesce(m[1]::timestamptz, '-infinity') AS lo, m[2]::timestamptz AS hi
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
            LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid),
                '^FOR VALUES FROM \\((?:''([^'']*)''|MINVALUE)\\) TO \\(''([^'']*)''\\)$') AS m
            WHERE i.inhparent = 'timelines_observation'::regclass AND c.oid <> to_regclass(p_name)
            AND m IS NOT NULL) AS b,
        LATERAL (SELECT 1 FROM unnest(p_kinds) AS kd, LATERAL (SELECT 1 FROM timelines_observation o
            WHERE o.cluster_id = p_cluster AND o.kind = kd AND o.observed_at >= b.lo AND o.observed_at < b.hi
            LIMIT 1) AS row_of_kind LIMIT 1) AS hit;
    -- The default partition's rows of these kinds, by their own times.
    SELECT least(first_at, min(o.observed_at)), greatest(last_at, max(o.observed_at))
        INTO first_at, last_at FROM unnest(p_kinds) AS kd, timelines_observation_default o
        WHERE o.cluster_id = p_cluster AND o.kind = kd;
    IF first_at IS NULL THEN  -- nothing of these kinds outside the batch's partition
        RETURN;
    END IF;
    RETURN QUERY SELECT k FROM unnest(p_keys::varchar[]) AS k, LATERAL (SELECT 1 FROM timelines_observation o
        WHERE PROBE
        AND (o.observed_at < p_lower OR o.observed_at >= p_upper)
        AND o.observed_at >= first_at AND o.observed_at <= last_at LIMIT 1) AS hit;
END
$body$
""".replace("PROBE", _0026.PROBE_HASH)
BEFORE = _0026._BODY.replace("PROBE", _0026.PROBE_HASH)


def _partitioned(cursor) -> bool:
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
    return cursor.fetchone()[0] == "p"


def _build(schema_editor, index, other, function: str) -> None:
    name, columns = index.name, COLUMNS[index.name]
    with schema_editor.connection.cursor() as cursor:
        if not _partitioned(cursor):
            cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON {TABLE} {columns}')
        else:
            cursor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON ONLY {TABLE} {columns}')
            cursor.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
                [TABLE],
            )
            for (partition,) in cursor.fetchall():
                child = f"{partition}_{name.removeprefix('obs_')}"[:63]
                cursor.execute(
                    f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{child}" ON "{partition}" {columns}'
                )
                cursor.execute(
                    "SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s) AND inhparent = to_regclass(%s)",
                    [f'"{child}"', f'"{name}"'],
                )
                if cursor.fetchone() is None:
                    cursor.execute(f'ALTER INDEX "{name}" ATTACH PARTITION "{child}"')
            schema_editor.execute(function, params=None)
        cursor.execute(f'DROP INDEX IF EXISTS "{other.name}"')  # its partitions' indexes go with it


def _portable(apps, schema_editor, index, other) -> None:
    model = apps.get_model("timelines", "Observation")
    schema_editor.add_index(model, index)
    schema_editor.remove_index(model, other)


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        _portable(apps, schema_editor, NEW, OLD)
    else:
        _build(schema_editor, NEW, OLD, FUNCTION)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        _portable(apps, schema_editor, OLD, NEW)
    else:
        _build(schema_editor, OLD, NEW, BEFORE)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("timelines", "0026_observation_key_hash_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="observation", name="obs_by_kind_time"),
                migrations.AddIndex(model_name="observation", index=NEW),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
