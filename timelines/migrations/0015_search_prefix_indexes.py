"""PostgreSQL only: pattern indexes that answer pod search by prefix (``dashboard/fleet.py``).

``LIKE 'prefix%'`` uses a B-tree only under the C collation, or with the ``varchar_pattern_ops`` operator
class under any other (docs/performance-history.md, "Pages at fleet scale"). One index per searched column, led by
the cluster, so a search over 150,000 pods reads a few index pages. The pod UID and the finding kind get
theirs too; name, node and namespace replace nothing (the existing indexes also serve equality and order).
SQLite (the embedded default) searches by scanning, with the same results.
"""

from __future__ import annotations

from django.db import migrations

INDEXES = [
    ("pod_name_prefix", "timelines_pod", "name"),
    ("pod_uid_prefix", "timelines_pod", "uid"),
    ("pod_owner_prefix", "timelines_pod", "owner_name"),
    ("pod_node_prefix", "timelines_pod", "node"),
    ("pod_ns_prefix", "timelines_pod", "namespace"),
    ("finding_kind_prefix", "timelines_finding", "kind"),
]


# Results come newest first (``ORDER BY last_seen DESC, namespace, name LIMIT n``): with this index a
# prefix that matches most of the fleet reads the newest pods in order and stops at n (an incremental sort
# breaks the ties) instead of sorting 150,000 rows; a narrow prefix still combines the indexes above.
RECENT = ("pod_recent", "timelines_pod", '("cluster_id", "last_seen" DESC)')


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, table, column in INDEXES:
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("cluster_id", "{column}" varchar_pattern_ops)'
        )
    name, table, columns = RECENT
    schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" {columns}')


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _table, _column in [*INDEXES, RECENT]:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [("timelines", "0006_interval_source_kubelet")]
    operations = [migrations.RunPython(create, drop)]
