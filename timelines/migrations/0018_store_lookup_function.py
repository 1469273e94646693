"""The store's key look-up as a PL/pgSQL function, and dirty batches stored without compression.

* ``podlife_stored_keys``: the batch's keys some other partition holds (``timelines/store.py``). The keys
  come as one array literal in text, parsed only when some partition has to be probed. As one
  plain statement each batch was planned afresh, and planning a look-up over the observation partitions
  (each with seven indexes, two of them partial, whose predicates the planner tries on every partition)
  cost PostgreSQL about 1 ms a batch, more than running it; a function's statements keep their plans for
  the session. Generic plans at once (``plan_cache_mode``): the partition bounds are parameters, so each
  call prunes at its start, and a plan made per call would be planned again and again. No sequential
  scans (``enable_seqscan = off``): a plan made when a partition was still empty (one made ahead, or the
  day's in its first minutes) must not scan it row by row once it holds a day, before an ANALYZE or a
  partition's creation invalidates the plan; every probe has its index (the key's unique one, the
  (cluster, kind, time) one). Unlike a client-side prepared statement this holds behind PgBouncer in transaction mode:
  the plans live on whichever server connection runs the function. ``CREATE OR REPLACE``: the store's
  docstring and this body change together.
* ``timelines_dirtybatch.keys`` ``STORAGE EXTERNAL``: a batch's dirty keys are a 25–30 KB JSON array
  that pglz compressed on every insert (0.8 ms of the server's CPU a batch of 500) for a row the derive
  stage folds and deletes within seconds.

PostgreSQL only; SQLite keeps its portable path.
"""

from django.db import migrations

FUNCTION = """
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
            WHERE o.dedupe_key = k AND o.cluster_id + 0 = p_cluster LIMIT 1) AS hit;
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
        WHERE o.dedupe_key = k AND o.cluster_id + 0 = p_cluster
        AND (o.observed_at < p_lower OR o.observed_at >= p_upper)
        AND o.observed_at >= first_at AND o.observed_at <= last_at LIMIT 1) AS hit;
END
$body$
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(FUNCTION)
    schema_editor.execute("ALTER TABLE timelines_dirtybatch ALTER COLUMN keys SET STORAGE EXTERNAL")


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "DROP FUNCTION IF EXISTS podlife_stored_keys(bigint, text, varchar[], timestamptz, timestamptz, text, text)"
    )
    schema_editor.execute("ALTER TABLE timelines_dirtybatch ALTER COLUMN keys SET STORAGE EXTENDED")


class Migration(migrations.Migration):
    dependencies = [("timelines", "0017_derive_reads_and_row_digests")]

    operations = [migrations.RunPython(forward, backward)]
