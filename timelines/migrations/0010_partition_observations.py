"""PostgreSQL only: ``timelines_observation`` becomes a table partitioned by range of ``observed_at``, in
place (timelines/partitions.py describes the layout).

The table as it is (when it holds rows; an empty one is dropped) becomes the partition ``timelines_observation_legacy`` of everything before the next
span (MINVALUE up to it): no row is copied, the table is only scanned once to check the bound (rows at or
after it, a clock in the future, move to the new partitions). Its indexes keep their pages and become the
partition's; its primary key (id) stays as its own id index; its unique (cluster_id, dedupe_key) is
replaced by the unique (dedupe_key, cluster_id) every partition has (the one index built here). Retention drops it whole once its bound is older than the cutoff.

The id sequence moves from the identity column of the old table to a sequence owned by the new parent,
starting after the highest id. SQLite (the embedded default) keeps the single table.
"""

from __future__ import annotations

from django.db import migrations
from django.utils import timezone

OLD_INDEXES = {  # old name -> the legacy partition's own name for it
    "timelines_observation_pkey": "timelines_observation_legacy_pkey",
    "observation_dedupe_per_cluster": "timelines_observation_legacy_dedupe",
    "obs_by_pod_time": "timelines_observation_legacy_by_pod_time",
    "obs_by_kind_time": "timelines_observation_legacy_by_kind_time",
    "obs_observed_brin": "timelines_observation_legacy_observed_brin",
}
CONSTRAINTS = ("timelines_observation_pkey", "observation_dedupe_per_cluster")


def _exists(cursor, regclass: str) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [regclass])
    return bool(cursor.fetchone()[0])


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from timelines import partitions

    if partitions.is_partitioned():
        return
    span = partitions.configured_span()
    now = timezone.now()
    bound = partitions.span_start(now, span) + span
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("LOCK TABLE timelines_observation IN ACCESS EXCLUSIVE MODE")
        cursor.execute("SELECT coalesce(max(id), 0) + 1 FROM timelines_observation")
        next_id = cursor.fetchone()[0]
        cursor.execute("ALTER TABLE timelines_observation RENAME TO timelines_observation_legacy")
        for old, new in OLD_INDEXES.items():
            if old in CONSTRAINTS:
                cursor.execute(f'ALTER TABLE timelines_observation_legacy RENAME CONSTRAINT "{old}" TO "{new}"')
            elif _exists(cursor, old):
                cursor.execute(f'ALTER INDEX "{old}" RENAME TO "{new}"')
        cursor.execute("ALTER TABLE timelines_observation_legacy ALTER COLUMN id DROP IDENTITY IF EXISTS")
        cursor.execute("ALTER TABLE timelines_observation_legacy ALTER COLUMN id DROP DEFAULT")
        cursor.execute(f"CREATE SEQUENCE timelines_observation_id_seq START {int(next_id)}")
        cursor.execute(
            "CREATE TABLE timelines_observation (LIKE timelines_observation_legacy INCLUDING DEFAULTS) "
            "PARTITION BY RANGE (observed_at)"
        )
        cursor.execute(
            "ALTER TABLE timelines_observation ALTER COLUMN id SET DEFAULT nextval('timelines_observation_id_seq')"
        )
        cursor.execute("ALTER SEQUENCE timelines_observation_id_seq OWNED BY timelines_observation.id")
        # The parent's indexes; ATTACH adopts the legacy table's identical ones instead of building them.
        cursor.execute('CREATE INDEX "obs_by_pod_time" ON timelines_observation (cluster_id, pod_uid, observed_at)')
        cursor.execute('CREATE INDEX "obs_by_kind_time" ON timelines_observation (cluster_id, kind, observed_at)')
        cursor.execute('CREATE INDEX "obs_observed_brin" ON timelines_observation USING brin (observed_at)')
        if not _exists(cursor, OLD_INDEXES["obs_observed_brin"]):
            cursor.execute(
                f'CREATE INDEX "{OLD_INDEXES["obs_observed_brin"]}" ON timelines_observation_legacy '
                "USING brin (observed_at)"
            )
        cursor.execute(
            "ALTER TABLE timelines_observation ADD CONSTRAINT timelines_observation_cluster_fk "
            "FOREIGN KEY (cluster_id) REFERENCES timelines_cluster (id) DEFERRABLE INITIALLY DEFERRED"
        )
        # Rows at or after the bound (clocks in the future) leave the legacy table for the new partitions.
        cursor.execute(
            "CREATE TEMPORARY TABLE podlife_observation_future ON COMMIT DROP AS "
            "WITH moved AS (DELETE FROM timelines_observation_legacy WHERE observed_at >= %s RETURNING *) "
            "SELECT * FROM moved",
            [bound],
        )
        cursor.execute("SELECT EXISTS (SELECT 1 FROM timelines_observation_legacy)")
        if cursor.fetchone()[0]:
            # The key index every partition has, key first (timelines/store.py looks keys up by it); it
            # replaces the old (cluster_id, dedupe_key) constraint. The one index this migration builds.
            cursor.execute(
                "CREATE UNIQUE INDEX timelines_observation_legacy_dedupe_key "
                "ON timelines_observation_legacy (dedupe_key, cluster_id)"
            )
            cursor.execute(
                "ALTER TABLE timelines_observation_legacy DROP CONSTRAINT timelines_observation_legacy_dedupe"
            )
            cursor.execute(
                "ALTER TABLE timelines_observation ATTACH PARTITION timelines_observation_legacy "
                "FOR VALUES FROM (MINVALUE) TO (%s)",
                [bound],
            )
        else:  # a new installation: nothing to keep, old times go to the default partition
            cursor.execute("DROP TABLE timelines_observation_legacy")
        partitions.ensure_default(cursor)
    partitions.ensure_configured(now=now)
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("INSERT INTO timelines_observation SELECT * FROM podlife_observation_future")


def unpartition(apps, schema_editor):
    """Back to one table (every row copied into it): for going back to a release before 0010."""
    if schema_editor.connection.vendor != "postgresql":
        return
    from timelines import partitions

    if not partitions.is_partitioned():
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("LOCK TABLE timelines_observation IN ACCESS EXCLUSIVE MODE")
        cursor.execute("CREATE TABLE timelines_observation_single (LIKE timelines_observation)")
        cursor.execute("INSERT INTO timelines_observation_single SELECT * FROM timelines_observation")
        cursor.execute("SELECT coalesce(max(id), 0) + 1 FROM timelines_observation_single")
        next_id = cursor.fetchone()[0]
        cursor.execute("DROP TABLE timelines_observation CASCADE")
        cursor.execute("ALTER TABLE timelines_observation_single RENAME TO timelines_observation")
        cursor.execute(
            "ALTER TABLE timelines_observation ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY "
            f"(START WITH {int(next_id)})"
        )
        cursor.execute("ALTER TABLE timelines_observation ADD CONSTRAINT timelines_observation_pkey PRIMARY KEY (id)")
        cursor.execute(
            "ALTER TABLE timelines_observation ADD CONSTRAINT observation_dedupe_per_cluster "
            "UNIQUE (cluster_id, dedupe_key)"
        )
        cursor.execute('CREATE INDEX "obs_by_pod_time" ON timelines_observation (cluster_id, pod_uid, observed_at)')
        cursor.execute('CREATE INDEX "obs_by_kind_time" ON timelines_observation (cluster_id, kind, observed_at)')
        cursor.execute('CREATE INDEX "obs_observed_brin" ON timelines_observation USING brin (observed_at)')
        cursor.execute(
            "ALTER TABLE timelines_observation ADD CONSTRAINT timelines_observation_cluster_fk "
            "FOREIGN KEY (cluster_id) REFERENCES timelines_cluster (id) DEFERRABLE INITIALLY DEFERRED"
        )


class Migration(migrations.Migration):
    # DDL and the look-ups it depends on run in one transaction: the table is never seen half converted.
    atomic = True
    dependencies = [("timelines", "0006_interval_source_kubelet")]
    operations = [migrations.RunPython(partition, unpartition)]
