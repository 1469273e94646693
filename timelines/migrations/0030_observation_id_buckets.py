"""Each observation partition finds a row by id through a btree of ``id / 16`` instead of one of ``id``
(#37, docs/storage.md "Step 2e").

The index of every id took 20.5 bytes an observation of the ``scale`` churn once its day was closed (an
8-byte key, its 8-byte tuple header and a line pointer, each row); the rows of one bucket of 16 ids share
one key, which btree deduplication keeps once with 6 bytes a row: 7.7 B. Rows are stored in id order, so a
bucket's rows lie in a page or two, and a read by id (``observation_rows.selection``, ``keys_by_id``, the
admin) names the bucket beside the id (``partitions.id_bucket_sql``) and drops the bucket's other rows.

On PostgreSQL each partition's new index is built ``CONCURRENTLY`` (the collector keeps writing), then its
old one dropped ``CONCURRENTLY``. Hence ``atomic = False``; run again after an interruption, it carries on
(an invalid index a failed build left is dropped and built again). Backwards, the same in the other
direction: the code before this migration reads by id alone. SQLite (one table, its primary key) is
unchanged.
"""

from django.db import migrations

TABLE = "timelines_observation"
INDEXES = {"bucket": ("_id16", "((id / 16))"), "id": ("_id", "(id)")}  # frozen: partitions.ID_INDEX_SUFFIX


def _partitions(cursor) -> list[str]:
    cursor.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
        [TABLE],
    )
    return [name for (name,) in cursor.fetchall()]


def _swap(schema_editor, *, new: str, old: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        found = cursor.fetchone()
        if found is None or found[0] != "p":  # not partitioned (0010 not applied): nothing of this is there
            return
        suffix, columns = INDEXES[new]
        for partition in _partitions(cursor):
            index = f'"{partition}{suffix}"'
            cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [index])
            valid = cursor.fetchone()
            if valid is not None and not valid[0]:  # a build that failed: built again
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
            cursor.execute(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS {index} ON "{partition}" {columns}')
            cursor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{partition}{INDEXES[old][0]}"')


def forward(apps, schema_editor):
    _swap(schema_editor, new="bucket", old="id")


def backward(apps, schema_editor):
    _swap(schema_editor, new="id", old="bucket")


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("timelines", "0029_observation_pod_id")]

    operations = [migrations.RunPython(forward, backward)]
