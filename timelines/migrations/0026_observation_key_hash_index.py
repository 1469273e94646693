"""The key index of every observation partition holds a 16-byte hash of (cluster, dedupe key) instead of
the key's text (#37, docs/storage.md "Indexes").

The unique ``(dedupe_key, cluster_id)`` index of each partition took 104 bytes an observation of the
``scale`` churn (a key is 40 to 60 characters: ``pod:<uid>:<resourceVersion>``); the unique index on
``md5(cluster_id::text || ':' || dedupe_key)::uuid`` takes about 43, and still makes a partition refuse a
second copy of a fact. The store's look-up (``podlife_stored_keys``) probes it with the same expression of
the key it looks for, and compares the key itself on the row it finds, so a look-up is exact whatever the
hash; two different keys of one cluster that hash alike (about n²/2¹²⁹ for n keys) would be refused as one
by the index, never taken for each other by the store.

On PostgreSQL each partition's index is built ``CONCURRENTLY`` (the collector keeps writing), then the
look-up function is replaced, then the old index dropped ``CONCURRENTLY``: at every moment a key is found
by one index or the other. Hence ``atomic = False``; run again after an interruption, it carries on.
Backwards, the same in the other direction. SQLite (one table, its unique constraint) is unchanged.
"""

from django.db import migrations

TABLE = "timelines_observation"
KEY_HASH = "((md5(cluster_id::text || ':' || dedupe_key)::uuid))"

_BODY = """
CREATE OR REPLACE FUNCTION podlife_stored_keys(
    p_cluster bigint, p_keys text, p_kinds varchar[],
    p_lower timestamptz, p_upper timestamptz, p_name text, p_bound text
) RETURNS SETOF varchar LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $body$
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
    SELECT min(s.lo), max(s.hi) INTO first_at, last_at FROM unnest(p_kinds) AS kd,
        LATERAL (SELECT min(o.observed_at) AS lo, max(o.observed_at) AS hi FROM timelines_observation o
            WHERE o.cluster_id = p_cluster AND o.kind = kd
            AND (o.observed_at < p_lower OR o.observed_at >= p_upper)) AS s;
    IF first_at IS NULL THEN  -- nothing of these kinds outside the batch's partition
        RETURN;
    END IF;
    RETURN QUERY SELECT k FROM unnest(p_keys::varchar[]) AS k, LATERAL (SELECT 1 FROM timelines_observation o
        WHERE PROBE
        AND (o.observed_at < p_lower OR o.observed_at >= p_upper)
        AND o.observed_at >= first_at AND o.observed_at <= last_at LIMIT 1) AS hit;
END
$body$
"""
# The probe of one key ``k``: the hash names the index, the key and the cluster are compared on the row.
PROBE_HASH = (
    "md5(o.cluster_id::text || ':' || o.dedupe_key)::uuid = md5(p_cluster::text || ':' || k)::uuid "
    "AND o.dedupe_key = k AND o.cluster_id + 0 = p_cluster"
)
PROBE_TEXT = "o.dedupe_key = k AND o.cluster_id + 0 = p_cluster"  # migration 0018's


def _partitions(cursor) -> list[str]:
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
        [TABLE],
    )
    return [name for (name,) in cursor.fetchall()]


def _key_indexes(cursor, partition: str, columns: str) -> list[str]:
    """The unique indexes of ``partition`` on ``columns`` (as ``pg_get_indexdef`` writes them)."""
    cursor.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "WHERE i.indrelid = to_regclass(%s) AND i.indisunique",
        [f'"{partition}"'],
    )
    return [name for name, definition in cursor.fetchall() if definition.endswith(columns)]


_TEXT_COLUMNS = "(dedupe_key, cluster_id)"
_HASH_COLUMNS = "(((md5((((cluster_id)::text || ':'::text) || (dedupe_key)::text)))::uuid))"


def _swap(schema_editor, *, to_hash: bool) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        if cursor.fetchone()[0] != "p":  # not partitioned (0010 not applied): nothing of this is there
            return
        names = _partitions(cursor)
        for partition in names:
            if to_hash:
                cursor.execute(
                    f'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "{partition[:54]}_key_hash" '
                    f'ON "{partition}" {KEY_HASH}'
                )
            else:
                cursor.execute(
                    f'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "{partition[:56]}_dedupe" '
                    f'ON "{partition}" (dedupe_key, cluster_id)'
                )
        schema_editor.execute(_BODY.replace("PROBE", PROBE_HASH if to_hash else PROBE_TEXT), params=None)
        for partition in names:
            for old in _key_indexes(cursor, partition, _TEXT_COLUMNS if to_hash else _HASH_COLUMNS):
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {old}")


def forward(apps, schema_editor):
    _swap(schema_editor, to_hash=True)


def backward(apps, schema_editor):
    _swap(schema_editor, to_hash=False)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("timelines", "0025_observations_by_pod_without_time")]

    operations = [migrations.RunPython(forward, backward)]
