"""Observations by pod: ``(cluster_id, pod_uid)`` replaces ``(cluster_id, pod_uid, observed_at)`` (#37, docs/storage.md
"Indexes").

Without the time, btree deduplication folds each pod's entries into one key and a posting list of 6 bytes
a row: the index took 99 bytes an observation of the ``scale`` churn and takes about a fifth of that. Every
read by pod reads the pod's rows and sorts them itself (``observation_rows.by_pod``, ``pg_pods``): a
pod's rows are tens to thousands, which the derive stage reads whole anyway; a read by time across pods
has the BRIN on ``observed_at`` and the (cluster, kind, time) index.

On PostgreSQL the new index is built as 0017 built its partial ones, without blocking the collector: the
parent's declared ``ON ONLY`` the partitioned table, each partition's built ``CONCURRENTLY`` and attached
(the parent's becomes valid once all are); partitions made later get theirs when they are attached. Only
then is the old one dropped (a partitioned index drops with its partitions' in one short lock). Hence
``atomic = False``; run again after an interruption, it carries on (``IF NOT EXISTS``). Backwards, the
old index is built the same way and the new one dropped.
"""

from django.db import migrations, models

TABLE = "timelines_observation"
NEW = models.Index(fields=["cluster", "pod_uid"], name="obs_by_pod")
OLD = models.Index(fields=["cluster", "pod_uid", "observed_at"], name="obs_by_pod_time")
COLUMNS = {"obs_by_pod": "(cluster_id, pod_uid)", "obs_by_pod_time": "(cluster_id, pod_uid, observed_at)"}


def _build(schema_editor, index, other) -> None:
    name, columns = index.name, COLUMNS[index.name]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        partitioned = cursor.fetchone()[0] == "p"
        if not partitioned:
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
                cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{child}" ON "{partition}" {columns}')
                cursor.execute(
                    "SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s) AND inhparent = to_regclass(%s)",
                    [f'"{child}"', f'"{name}"'],
                )
                if cursor.fetchone() is None:
                    cursor.execute(f'ALTER INDEX "{name}" ATTACH PARTITION "{child}"')
        cursor.execute(f'DROP INDEX IF EXISTS "{other.name}"')  # its partitions' indexes go with it


def _portable(apps, schema_editor, index, other) -> None:
    model = apps.get_model("timelines", "Observation")
    schema_editor.add_index(model, index)
    schema_editor.remove_index(model, other)


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        _portable(apps, schema_editor, NEW, OLD)
    else:
        _build(schema_editor, NEW, OLD)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        _portable(apps, schema_editor, OLD, NEW)
    else:
        _build(schema_editor, OLD, NEW)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [
        ("timelines", "0024_observation_body"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="observation", name="obs_by_pod_time"),
                migrations.AddIndex(model_name="observation", index=NEW),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
