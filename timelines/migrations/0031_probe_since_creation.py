"""The store's look-up of a batch's keys in the other partitions probes each pod snapshot's key only in the
partitions since its pod was created (#37, docs/storage.md "The look-up in the other partitions").

``podlife_stored_keys`` (0018, 0026-0028) probes each key of a batch in every other partition that holds a
row of the batch's kinds for the cluster: one descent of each one's unique key-hash index a key. A cluster
keeps a day partition for each day of its retention (14 by default), so in the steady state each new row
cost 13 probes that found nothing (measured with 13 days of 20,000 rows held: PostgreSQL's CPU 62-82 µs a
stored pod row against 14-15 in a fresh cluster, and ``bench/ingest.py --history-days 13`` 11,627 pods a
second against 29,834 with the bound below; on a real cluster's days, of millions of rows, 13 random reads
of indexes that do not all stay cached).

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

from importlib import import_module

from django.db import migrations

_0020 = import_module("timelines.migrations.0020_store_check_after_copy")
_0028 = import_module("timelines.migrations.0028_observation_key_in_body")

_OLD_ARGS = "p_name text, p_bound text\n)"
_NEW_ARGS = "p_name text, p_bound text, p_since text\n)"
_KEYS = "unnest(p_keys::varchar[]) AS k, LATERAL ("
_KEYS_SINCE = "unnest(p_keys::varchar[], p_since::timestamptz[]) AS u(k, s), LATERAL ("


def _replaced(text: str, *pairs: tuple[str, str, int]) -> str:
    """``text`` with each (old, new, times) replaced, each old found exactly ``times`` times."""
    for old, new, times in pairs:
        assert text.count(old) == times, (old, text.count(old))
        text = text.replace(old, new)
    return text


# 0028's function with the keys' bounds: ignored for a cluster entered in the table; beside the keys in
# both look-ups; each key from its own bound on (greatest ignores a NULL one: PostgreSQL prunes the
# partitions before it at run time); and a key whose bound lies in the batch's partition, when no later one
# holds rows of these kinds, not probed at all (the partition's own unique index checks it).
STORED_KEYS = _replaced(
    _0028.FUNCTION,
    (_OLD_ARGS, _NEW_ARGS, 1),
    (
        "BEGIN\n",
        "BEGIN\n    IF p_since IS NOT NULL AND EXISTS (SELECT FROM podlife_unbounded_clusters "
        "WHERE cluster_id = p_cluster) THEN\n"
        "        p_since := NULL;  -- a row of this cluster was observed before its pod's creation\n"
        "    END IF;\n",
        1,
    ),
    (_KEYS, _KEYS_SINCE, 2),
    (
        " = p_cluster LIMIT 1) AS hit;",
        " = p_cluster\n            AND o.observed_at >= coalesce(s, '-infinity') LIMIT 1) AS hit;",
        1,
    ),
    (
        "AND o.observed_at >= first_at AND o.observed_at <= last_at LIMIT 1) AS hit;",
        "AND o.observed_at >= greatest(first_at, s) AND o.observed_at <= last_at LIMIT 1) AS hit\n"
        "        WHERE s IS NULL OR s < p_lower OR last_at > p_upper;",
        1,
    ),
)
BATCH_IS_NEW = _replaced(
    _0020.FUNCTION,
    (_OLD_ARGS, _NEW_ARGS, 1),
    ("p_lower, p_upper, p_name, p_bound)", "p_lower, p_upper, p_name, p_bound, p_since)", 1),
)

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
