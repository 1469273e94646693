"""The store's look-up of a batch's keys in the other partitions probes each pod snapshot's key only in the
partitions since its pod was created (#37, docs/storage.md "The look-up in the other partitions").

``podlife_stored_keys`` (0018, 0026-0028) probes each key of a batch in every other partition that holds a
row of the batch's kinds for the cluster: one descent of each one's unique key-hash index a key. A cluster
keeps a day partition for each day of its retention (14 by default), so in the steady state each new row
cost 13 probes that found nothing (measured: PostgreSQL's CPU a stored row from 10.6 to 16.5 µs with 13
days of 20,000 rows each; on a real cluster's days, of millions of rows, 13 random reads of indexes that do
not all stay cached).

A pod snapshot's key names the pod's UID and a resourceVersion (``pod:<uid>:<rv>``, ``…:deleted``, the
audit's ``pod:<uid>:after:<rv>``): one state of one object, whose ``creationTimestamp`` never changes.
Whoever observed that state did so after the pod was created: the watch and the list by the collector's
clock, the audit log at the API server's own times, kubectl output at the newest time it holds. So a
stored copy of the key lies at or after the creation, less the clocks' difference (``store.CREATED_SKEW``),
and the store now gives each key that bound (``p_since``, an array beside ``p_keys``; NULL: none). A
pod's key is probed only in the partitions from its bound on (PostgreSQL prunes the others at run time),
and a churning pod's in one or two.

A row that breaks the rule (observed earlier than its pod's creation less the margin: a clock far off, the
demo cluster run faster than time) is stored as ever, but first its cluster is entered in
``podlife_unbounded_clusters`` (committed before the row): from then on the function ignores the bounds of
that cluster's batches, so no later copy of that row's key is missed. (No foreign key: an entry only
turns the bounds off, so one left by a deleted cluster costs nothing, and a table outside the models must
not stop a TRUNCATE of the clusters.)

The functions with the old arguments stay (a process of the previous release calls them until it is
replaced). Backwards, the new ones and the table are dropped.
"""

from django.db import migrations

STORED_KEYS = """
CREATE OR REPLACE FUNCTION podlife_stored_keys(
    p_cluster bigint, p_keys text, p_kinds varchar[],
    p_lower timestamptz, p_upper timestamptz, p_name text, p_bound text, p_since text
) RETURNS SETOF varchar LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_bitmapscan = off AS $body$
DECLARE
    first_at timestamptz;
    last_at timestamptz;
BEGIN
    IF p_since IS NOT NULL AND EXISTS (SELECT FROM podlife_unbounded_clusters WHERE cluster_id = p_cluster) THEN
        p_since := NULL;  -- a row of this cluster was observed before its pod's creation: no bound holds
    END IF;
    IF p_name IS NULL THEN  -- every partition
        RETURN QUERY SELECT k FROM unnest(p_keys::varchar[], p_since::timestamptz[]) AS u(k, s),
            LATERAL (SELECT 1 FROM timelines_observation o WHERE PROBE
            AND o.observed_at >= coalesce(s, '-infinity') LIMIT 1) AS hit;
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
    -- Each key from its own bound on (greatest ignores a NULL one): the partitions before it are pruned,
    -- and a key whose bound lies in the batch's partition, when no later one holds rows of these kinds, is
    -- not probed at all (the partition's own unique index checks it).
    RETURN QUERY SELECT k FROM unnest(p_keys::varchar[], p_since::timestamptz[]) AS u(k, s),
        LATERAL (SELECT 1 FROM timelines_observation o WHERE PROBE
        AND (o.observed_at < p_lower OR o.observed_at >= p_upper)
        AND o.observed_at >= greatest(first_at, s) AND o.observed_at <= last_at LIMIT 1) AS hit
        WHERE s IS NULL OR s < p_lower OR last_at > p_upper;
END
$body$
""".replace(
    "PROBE",
    "COALESCE(o.key_hash, md5(o.cluster_id::text || ':' || o.dedupe_key)::uuid) = md5(p_cluster::text || ':' || k)::uuid "
    "AND o.cluster_id + 0 = p_cluster",
)

BATCH_IS_NEW = """
CREATE OR REPLACE FUNCTION podlife_batch_is_new(
    p_cluster bigint, p_keys text, p_kinds varchar[],
    p_lower timestamptz, p_upper timestamptz, p_name text, p_bound text, p_since text
) RETURNS void LANGUAGE plpgsql AS $body$
DECLARE
    stored bigint;
    stale boolean;
    example varchar;
BEGIN
    PERFORM FROM timelines_cluster WHERE id = p_cluster FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cluster % does not exist', p_cluster USING ERRCODE = 'foreign_key_violation';
    END IF;
    SELECT count(k), bool_or(k IS NULL), min(k) INTO stored, stale, example
        FROM podlife_stored_keys(p_cluster, p_keys, p_kinds, p_lower, p_upper, p_name, p_bound, p_since) AS k;
    IF stale THEN
        RAISE EXCEPTION 'partition % is no longer attached %', p_name, p_bound
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    IF stored > 0 THEN
        RAISE EXCEPTION '% key(s) of the batch stored in another partition, e.g. %', stored, example
            USING ERRCODE = 'unique_violation';
    END IF;
END
$body$
"""

TABLE = """
CREATE TABLE IF NOT EXISTS podlife_unbounded_clusters (cluster_id bigint PRIMARY KEY)
"""

_NEW = "bigint, text, varchar[], timestamptz, timestamptz, text, text, text"


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for statement in (TABLE, STORED_KEYS, BATCH_IS_NEW):
            schema_editor.execute(statement, params=None)  # no placeholders: the bodies' % are RAISE's


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP FUNCTION IF EXISTS podlife_batch_is_new({_NEW})")
        schema_editor.execute(f"DROP FUNCTION IF EXISTS podlife_stored_keys({_NEW})")
        schema_editor.execute("DROP TABLE IF EXISTS podlife_unbounded_clusters")


class Migration(migrations.Migration):
    dependencies = [("timelines", "0030_observation_id_buckets")]

    operations = [migrations.RunPython(forward, backward)]
