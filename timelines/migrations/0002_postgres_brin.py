"""PostgreSQL only: BRIN indexes on time columns of the append-mostly tables.

Rows arrive roughly in time order, so a BRIN index answers time-window scans and bulk retention deletes
at a tiny fraction of a B-tree's size and write cost. SQLite has no BRIN; it keeps the B-tree indexes.
"""

from __future__ import annotations

from django.db import migrations

BRIN = [
    ("obs_observed_brin", "timelines_observation", "observed_at"),
    ("interval_start_brin", "timelines_interval", "start"),
]


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, table, column in BRIN:
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" USING brin ("{column}")')


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _table, _column in BRIN:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [("timelines", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
