"""A pod's UID as 16 bytes: ``pod_id`` (uuid) holds the UID of a new row when it is a UUID in its canonical
text (lower case, hyphens: what the API server writes), and ``pod_uid`` then holds NULL; any other UID stays
text in ``pod_uid`` (#37, docs/storage.md "Step 2c"). A row stored before keeps its text: nothing is
rewritten, and every read takes ``COALESCE(pod_uid, pod_id as text)`` (``observation_rows.uid_expression``)
and selects a pod by either column (``observation_rows.pod_condition``); ``compact_observations`` moves
the older rows.

The index by pod, ``(cluster_id, pod_uid)``, becomes two partial ones: ``(cluster_id, pod_uid) WHERE
pod_uid IS NOT NULL`` (the rows stored before, and UIDs that are not UUIDs) and ``(cluster_id, pod_id) WHERE
pod_id IS NOT NULL``. A UID-less row is in neither (it was in the old one, under NULL). The two partial
indexes of UID-less lines (0017) get ``pod_id IS NULL`` in their condition, so that lines naming a pod
stay out of them now that their ``pod_uid`` is NULL.

On PostgreSQL the column is added without a default (no rewrite), and the indexes are built as 0025 built
the index by pod, without blocking the collector: the parent's declared ``ON ONLY`` the partitioned table,
each partition's built ``CONCURRENTLY`` and attached; the old ones are dropped once the new ones are whole. Hence
``atomic = False``; run again after an interruption, it carries on. Backwards, the old index is built the
same way, the new ones dropped, and the rows stored since get their UID back as text before the column
goes.
"""

from django.db import migrations, models

TABLE = "timelines_observation"
BY_TEXT = models.Index(
    fields=["cluster", "pod_uid"], name="obs_by_pod_text", condition=models.Q(pod_uid__isnull=False)
)
BY_ID = models.Index(fields=["cluster", "pod_id"], name="obs_by_pod_id", condition=models.Q(pod_id__isnull=False))
OLD = models.Index(fields=["cluster", "pod_uid"], name="obs_by_pod")
KINDS = ["audit", "kubelet_marker", "kubelet_process", "worker"]  # models.UIDLESS_INDEXED at this migration
NO_UID_BY_NAME = models.Index(
    fields=["cluster", "namespace", "name"],
    name="obs_no_uid_by_name",
    condition=models.Q(pod_uid__isnull=True, pod_id__isnull=True, kind__in=KINDS),
)
NO_UID_BY_TIME = models.Index(
    fields=["cluster", "observed_at"],
    name="obs_no_uid_by_time",
    condition=models.Q(pod_uid__isnull=True, pod_id__isnull=True, name="", kind__in=KINDS),
)
OLD_UIDLESS = [  # 0017's
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
_KIND_LIST = ", ".join(f"'{k}'" for k in KINDS)
DEFINITIONS = {
    "obs_by_pod_text": "(cluster_id, pod_uid) WHERE pod_uid IS NOT NULL",
    "obs_by_pod_id": "(cluster_id, pod_id) WHERE pod_id IS NOT NULL",
    "obs_by_pod": "(cluster_id, pod_uid)",
    "obs_no_uid_by_name": (
        f"(cluster_id, namespace, name) WHERE kind IN ({_KIND_LIST}) AND pod_uid IS NULL AND pod_id IS NULL"
    ),
    "obs_no_uid_by_time": (
        f"(cluster_id, observed_at) WHERE kind IN ({_KIND_LIST}) AND name = '' AND pod_uid IS NULL "
        "AND pod_id IS NULL"
    ),
    "obs_uidless_by_name": f"(cluster_id, namespace, name) WHERE kind IN ({_KIND_LIST}) AND pod_uid IS NULL",
    "obs_nameless_by_time": f"(cluster_id, observed_at) WHERE kind IN ({_KIND_LIST}) AND name = '' AND pod_uid IS NULL",
}
NEW = [BY_TEXT, BY_ID, NO_UID_BY_NAME, NO_UID_BY_TIME]
GONE = [OLD, *OLD_UIDLESS]
BATCH = 5000


def _partitioned(cursor) -> bool:
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
    return cursor.fetchone()[0] == "p"


def _build(cursor, name: str) -> None:
    """The index ``name`` (``DEFINITIONS``) on the table, without blocking writers (0025's way)."""
    definition = DEFINITIONS[name]
    if not _partitioned(cursor):
        cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" ON {TABLE} {definition}')
        return
    cursor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON ONLY {TABLE} {definition}')
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
        [TABLE],
    )
    for (partition,) in cursor.fetchall():
        child = f"{partition}_{name.removeprefix('obs_')}"[:63]
        cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{child}" ON "{partition}" {definition}')
        cursor.execute(
            "SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s) AND inhparent = to_regclass(%s)",
            [f'"{child}"', f'"{name}"'],
        )
        if cursor.fetchone() is None:
            cursor.execute(f'ALTER INDEX "{name}" ATTACH PARTITION "{child}"')


def _uids_back(schema_editor) -> None:
    """Backwards: each row stored with ``pod_id`` gets its UID's text back, batch by batch."""
    with schema_editor.connection.cursor() as cursor:
        while True:
            if schema_editor.connection.vendor == "postgresql":
                cursor.execute(
                    f"UPDATE {TABLE} SET pod_uid = pod_id::text, pod_id = NULL WHERE id IN "
                    f"(SELECT id FROM {TABLE} WHERE pod_id IS NOT NULL LIMIT {BATCH})"
                )
            else:  # Django's SQLite uuid: 32 hex digits
                h = "pod_id"
                text = (
                    f"substr({h}, 1, 8) || '-' || substr({h}, 9, 4) || '-' || substr({h}, 13, 4) || '-' || "
                    f"substr({h}, 17, 4) || '-' || substr({h}, 21, 12)"
                )
                cursor.execute(
                    f"UPDATE {TABLE} SET pod_uid = lower({text}), pod_id = NULL WHERE id IN "
                    f"(SELECT id FROM {TABLE} WHERE pod_id IS NOT NULL LIMIT {BATCH})"
                )
            if cursor.rowcount == 0:
                return


def _swap(apps, schema_editor, build, drop) -> None:
    """Build the indexes ``build``, then drop ``drop`` (on PostgreSQL a partitioned index drops with its
    partitions' in one short lock)."""
    if schema_editor.connection.vendor != "postgresql":
        model = apps.get_model("timelines", "Observation")
        for index in build:
            schema_editor.add_index(model, index)
        for index in drop:
            schema_editor.remove_index(model, index)
        return
    with schema_editor.connection.cursor() as cursor:
        for index in build:
            _build(cursor, index.name)
        for index in drop:
            cursor.execute(f'DROP INDEX IF EXISTS "{index.name}"')


def forward(apps, schema_editor):
    _swap(apps, schema_editor, NEW, GONE)


def backward(apps, schema_editor):
    _uids_back(schema_editor)
    _swap(apps, schema_editor, GONE, NEW)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [
        ("timelines", "0028_observation_key_in_body"),
    ]

    operations = [
        migrations.AddField(
            model_name="observation",
            name="pod_id",
            field=models.UUIDField(blank=True, default=None, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                *(migrations.RemoveIndex(model_name="observation", name=index.name) for index in GONE),
                *(migrations.AddIndex(model_name="observation", index=index) for index in NEW),
            ],
            database_operations=[migrations.RunPython(forward, backward)],
        ),
    ]
