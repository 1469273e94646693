"""The derive stage writes only what changed, and finds UID-less lines without scanning a cluster.

* ``digest`` on intervals, markers and findings: a hash of each row (``store.row_digest``); existing rows
  have none, so each pod's rows are rewritten once, the next time it is derived. Adding a nullable column
  rewrites no table.
* Two partial indexes on observations, for the UID-less kubelet lines and audited requests a pod's
  derivation looks up by name, and node-level lines by time. On PostgreSQL the observation table is the
  largest and the collector writes to it all the time, so they are built without blocking its writes:
  the parent's index is declared ``ON ONLY`` the partitioned table, each partition's is built
  ``CONCURRENTLY`` and attached (the parent's becomes valid once all are), and partitions made later get
  theirs when they are attached (``timelines/partitions.py``). Hence ``atomic = False``: a concurrent
  build cannot run in a transaction. Run again after an interruption, it carries on (``IF NOT EXISTS``).
"""

from django.db import migrations, models

KINDS = ["audit", "kubelet_marker", "kubelet_process", "worker"]  # models.UIDLESS_INDEXED at this migration
INDEXES = [
    models.Index(
        condition=models.Q(("kind__in", KINDS), ("pod_uid__isnull", True)),
        fields=["cluster", "namespace", "name"],
        name="obs_uidless_by_name",
    ),
    models.Index(
        condition=models.Q(("kind__in", KINDS), ("name", ""), ("pod_uid__isnull", True)),
        fields=["cluster", "observed_at"],
        name="obs_nameless_by_time",
    ),
]
TABLE = "timelines_observation"
KIND_LIST = ", ".join(f"'{k}'" for k in KINDS)
SQL = {  # name -> (columns, condition), as Django would write them for INDEXES
    "obs_uidless_by_name": ("(cluster_id, namespace, name)", f"kind IN ({KIND_LIST}) AND pod_uid IS NULL"),
    "obs_nameless_by_time": (
        "(cluster_id, observed_at)",
        f"kind IN ({KIND_LIST}) AND name = '' AND pod_uid IS NULL",
    ),
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        model = apps.get_model("timelines", "Observation")
        for index in INDEXES:
            schema_editor.add_index(model, index)
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        partitioned = cursor.fetchone()[0] == "p"
        for name, (columns, condition) in SQL.items():
            if not partitioned:
                cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON {TABLE} {columns} WHERE {condition}')
                continue
            cursor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON ONLY {TABLE} {columns} WHERE {condition}')
            cursor.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
                [TABLE],
            )
            for (partition,) in cursor.fetchall():
                child = f"{partition}_{name.removeprefix('obs_')}"[:63]
                cursor.execute(
                    f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{child}" ON "{partition}" {columns} WHERE {condition}'
                )
                cursor.execute(
                    "SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s) AND inhparent = to_regclass(%s)",
                    [f'"{child}"', f'"{name}"'],
                )
                if cursor.fetchone() is None:
                    cursor.execute(f'ALTER INDEX "{name}" ATTACH PARTITION "{child}"')


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        model = apps.get_model("timelines", "Observation")
        for index in INDEXES:
            schema_editor.remove_index(model, index)
        return
    for name in SQL:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')  # its partitions' indexes go with it


class Migration(migrations.Migration):
    atomic = False
    dependencies = [
        ("timelines", "0016_merge_partitions_search"),
    ]

    operations = [
        migrations.AddField(
            model_name="finding",
            name="digest",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="interval",
            name="digest",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="marker",
            name="digest",
            field=models.BigIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="observation", index=index) for index in INDEXES],
            database_operations=[migrations.RunPython(create, drop)],
        ),
    ]
