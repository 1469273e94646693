"""The dedupe key leaves the row (#37, docs/storage.md "Step 2b"): a new row holds the key inside its body
(``compact._BODY_KEY``) and a 16-byte hash of the cluster and the key in the new ``key_hash`` column, and
its ``dedupe_key`` column is NULL. The key's text took 40 to 60 bytes of every row (``pod:<uid>:<rv>``);
in the body, after the payload that repeats its UID and resourceVersion, zstd writes it in a few.

On PostgreSQL no row is rewritten: the column is added (a catalogue change) and each partition's unique
key index becomes the index of ``COALESCE(key_hash, md5(cluster_id::text || ':' || dedupe_key)::uuid)``
(``partitions.KEY_HASH``), which is the same hash for a row of either form, so rows stored before and
after share one index and a fact stored in one form is a duplicate in the other. Each partition's index
is built ``CONCURRENTLY`` while the collector writes; then the store's look-up (``podlife_stored_keys``)
is replaced to probe it; then the old index (0026's, on the key's text) is dropped. Hence ``atomic =
False``; run again after an interruption, it carries on. Where only a hash is stored, the look-up can no
longer compare the key's text on the row: two keys of one cluster with one MD5 would be taken for one
fact (about n²/2¹²⁹ for n keys; MD5 resists second preimages, so a fact cannot be hidden by a key made to
match it).

SQLite (one table) writes the hash of every stored row here and its unique constraint moves to
``(cluster_id, key_hash)``.

Backwards, the rows stored with the key in the body get it back in their column and a body without it,
then the indexes, the function and the columns go back as they were.
"""

import uuid
from importlib import import_module

from django.db import migrations, models

TABLE = "timelines_observation"
_0027 = import_module("timelines.migrations.0027_observations_by_kind_without_time")
_0026 = import_module("timelines.migrations.0026_observation_key_hash_index")

STORED_HASH = "COALESCE(o.key_hash, md5(o.cluster_id::text || ':' || o.dedupe_key)::uuid)"
PROBE = f"{STORED_HASH} = md5(p_cluster::text || ':' || k)::uuid AND o.cluster_id + 0 = p_cluster"
FUNCTION = _0027.FUNCTION.replace(_0026.PROBE_HASH, PROBE)
assert FUNCTION != _0027.FUNCTION
INDEX = "(COALESCE(key_hash, (md5((((cluster_id)::text || ':'::text) || (dedupe_key)::text)))::uuid))"  # as printed
OLD_INDEX = "((md5(cluster_id::text || ':' || dedupe_key)::uuid))"

OLD_CONSTRAINT = models.UniqueConstraint(fields=["cluster", "dedupe_key"], name="observation_dedupe_per_cluster")
NEW_CONSTRAINT = models.UniqueConstraint(fields=["cluster", "key_hash"], name="observation_key_per_cluster")
BATCH = 2000


def _key_hash(cluster_id: int, key: str) -> uuid.UUID:
    import hashlib

    return uuid.UUID(bytes=hashlib.md5(f"{cluster_id}:{key}".encode("utf-8", "surrogatepass")).digest())


def _partitions(cursor) -> list[str] | None:
    """The partitions, or None when the table is not partitioned (before 0010: nothing of this is there)."""
    cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
    if cursor.fetchone()[0] != "p":
        return None
    return _0026._partitions(cursor)


def _swap_indexes(schema_editor, *, to_any: bool) -> None:
    with schema_editor.connection.cursor() as cursor:
        names = _partitions(cursor)
        if names is None:
            return
        for partition in names:
            if to_any:
                cursor.execute(
                    f'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "{partition[:55]}_row_key" '
                    f'ON "{partition}" ((COALESCE(key_hash, {OLD_INDEX[2:-2]})))'
                )
            else:
                cursor.execute(
                    f'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "{partition[:54]}_key_hash" '
                    f'ON "{partition}" {OLD_INDEX}'
                )
        schema_editor.execute(FUNCTION if to_any else _0027.FUNCTION, params=None)
        for partition in names:
            for old in _0026._key_indexes(cursor, partition, _0026._HASH_COLUMNS if to_any else INDEX):
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {old}")


def _fill_hashes(schema_editor) -> None:
    """SQLite: the hash of every row's key (they all hold its text here)."""
    with schema_editor.connection.cursor() as cursor:
        while True:
            cursor.execute(
                f"SELECT id, cluster_id, dedupe_key FROM {TABLE} WHERE key_hash IS NULL ORDER BY id LIMIT {BATCH}"
            )
            found = cursor.fetchall()
            if not found:
                return
            cursor.executemany(
                f"UPDATE {TABLE} SET key_hash = %s WHERE id = %s",
                [(_key_hash(cluster_id, key).hex, oid) for oid, cluster_id, key in found],
            )


def _keys_back_in_rows(schema_editor) -> None:
    """Backwards: the rows whose body holds their key get it back in ``dedupe_key`` and a body without it."""
    from timelines import compact, payloads

    connection = schema_editor.connection
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                f"SELECT id, pod_uid, node, namespace, name, observed_at, body FROM {TABLE} "
                f"WHERE dedupe_key IS NULL ORDER BY id LIMIT {BATCH}"
            )
            found = cursor.fetchall()
            if not found:
                return
            changed = []
            for oid, uid, node, ns, name, at, body in found:
                if connection.vendor != "postgresql":
                    at = connection.ops.convert_datetimefield_value(at, None, connection)
                texts = compact.Texts(uid, node, ns, name, at)
                data, key = compact.unpack_body(bytes(body), texts, payloads.dictionaries)
                dictionary = compact.body_dictionary(bytes(body)) or 0
                changed.append((key, compact.pack_body(data, texts, payloads.dictionaries, dictionary), oid))
            cursor.executemany(f"UPDATE {TABLE} SET dedupe_key = %s, body = %s WHERE id = %s", changed)


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        _fill_hashes(schema_editor)
    else:
        _swap_indexes(schema_editor, to_any=True)


def backward(apps, schema_editor):
    _keys_back_in_rows(schema_editor)
    if schema_editor.connection.vendor == "postgresql":
        _swap_indexes(schema_editor, to_any=False)


class _NotOnPostgres:
    """A constraint operation of the model's state everywhere and of the database on SQLite only: on
    PostgreSQL each partition has its own unique index instead (0010), which ``forward`` replaces."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class RemoveConstraint(_NotOnPostgres, migrations.RemoveConstraint):
    pass


class AddConstraint(_NotOnPostgres, migrations.AddConstraint):
    pass


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("timelines", "0027_observations_by_kind_without_time")]

    operations = [
        migrations.AddField(
            model_name="observation",
            name="key_hash",
            field=models.UUIDField(null=True, blank=True, default=None),
        ),
        migrations.AlterField(
            model_name="observation",
            name="dedupe_key",
            field=models.CharField(max_length=200, null=True, blank=True, default=None),
        ),
        migrations.RunPython(forward, backward),
        RemoveConstraint(model_name="observation", name=OLD_CONSTRAINT.name),
        AddConstraint(model_name="observation", constraint=NEW_CONSTRAINT),
    ]
