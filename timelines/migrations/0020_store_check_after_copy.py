"""PostgreSQL: ``podlife_batch_is_new``, the store's check that runs after a batch's COPY, in its transaction.

A batch expected new (``timelines/store.py`` ``_copy_new_batch``) goes to the server as one simple query of
three statements, which PostgreSQL runs as one implicit transaction: the COPY of its rows, a call of this
function, and the INSERT of its dirty keys. The function

* locks the cluster's row FOR KEY SHARE (there is no foreign key, migration 0019) and raises
  ``foreign_key_violation`` when the cluster is gone (deleted before the lock was granted);
* raises ``object_not_in_prerequisite_state`` when the partition the caller believed holds the batch is no
  longer attached with the bounds it knew (``podlife_stored_keys`` returns a NULL row);
* raises ``unique_violation`` when some other partition holds a key of the batch (a fact stored on another
  day: a relist's unchanged pod).

Any of them rolls back the COPY with it; the store then takes its look-up-first path. Before this the
look-up, the lock and the marks went first, inside an explicit transaction: four exchanges with the server
a batch (BEGIN with them, the COPY's two, COMMIT) where a plain autocommit COPY takes two, and the
writer threads waited on the other two (docs/performance-history.md, "Watch").
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION podlife_batch_is_new(
    p_cluster bigint, p_keys text, p_kinds varchar[],
    p_lower timestamptz, p_upper timestamptz, p_name text, p_bound text
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
        FROM podlife_stored_keys(p_cluster, p_keys, p_kinds, p_lower, p_upper, p_name, p_bound) AS k;
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


def forward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION, params=None)  # no placeholders: the body's % are RAISE's


def backward(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "DROP FUNCTION IF EXISTS podlife_batch_is_new(bigint, text, varchar[], timestamptz, timestamptz, text, text)"
        )


class Migration(migrations.Migration):
    dependencies = [("timelines", "0019_observations_without_cluster_constraint")]

    operations = [migrations.RunPython(forward, backward)]
