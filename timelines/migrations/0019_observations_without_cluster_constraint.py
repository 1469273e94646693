"""PostgreSQL: the observation table loses its foreign key to the cluster (``timelines_observation_cluster_fk``,
made deferrable in 0010).

The key was checked row by row at every COMMIT (a look-up and a row lock of the cluster per stored row):
about an eighth of the database's time per stored observation (docs/performance-history.md, "Watch"). Instead each
transaction that writes observations locks the cluster's row once, FOR KEY SHARE (``timelines/store.py``
``_LOCK_CLUSTER``), and a cluster is deleted only after locking its row FOR UPDATE
(``models.ClusterQuerySet.delete``, ``Cluster.delete``), which keeps the key's promise: no observation
outlives its cluster (``tests/test_cluster_deletion.py``). SQLite keeps the constraint (one writer at a
time there, and its store pays nothing per row for it). Backwards: the key comes back, validated.
"""

from django.db import migrations

NAME = "timelines_observation_cluster_fk"


# The parent's key (its partitions inherit it) and any a partition has of its own: an install partitioned
# in place by 0010 keeps the single table's Django-made key on its legacy partition.
OWN_KEYS = """
SELECT c.conrelid::regclass::text, c.conname FROM pg_constraint c
WHERE c.contype = 'f' AND c.confrelid = 'timelines_cluster'::regclass AND c.conparentid = 0
  AND (c.conrelid = 'timelines_observation'::regclass
       OR c.conrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'timelines_observation'::regclass))
"""


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(OWN_KEYS)
        keys = cursor.fetchall()
    for table, name in keys:
        schema_editor.execute(f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(name)}")


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"ALTER TABLE timelines_observation ADD CONSTRAINT {NAME} FOREIGN KEY (cluster_id) "
        "REFERENCES timelines_cluster (id) DEFERRABLE INITIALLY DEFERRED"
    )


class Migration(migrations.Migration):
    dependencies = [("timelines", "0018_store_lookup_function")]

    operations = [migrations.RunPython(forward, backward)]
