"""PostgreSQL only: trigram indexes that answer pod search by a part of a name, UID or node
(``dashboard/fleet.py``: ``LIKE '%part%'``, issue #34: "kd2mp" must find web-7d9f-kd2mp).

A B-tree (0015's pattern indexes) answers only ``LIKE 'prefix%'``; a GIN index with ``gin_trgm_ops``
(the pg_trgm extension, shipped with PostgreSQL and trusted since 13, so the database's owner may create
it) answers ``LIKE '%part%'`` for a part of three characters or more. Where the extension cannot be
created (no privilege), the migration says so and goes on: search is then a scan, with the same results.
SQLite (the embedded default) searches by scanning.
https://www.postgresql.org/docs/current/pgtrgm.html#PGTRGM-INDEX
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, migrations, transaction

log = logging.getLogger(__name__)

INDEXES = [
    ("pod_name_trgm", "timelines_pod", "name"),
    ("pod_uid_trgm", "timelines_pod", "uid"),
    ("pod_node_trgm", "timelines_pod", "node"),
]


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=schema_editor.connection.alias):  # a savepoint: a refusal ends here
            schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except DatabaseError as exc:  # no privilege, or no extension installed: search scans, the log says why
        log.warning("pg_trgm not available (%s): pod search by a part of a name scans", exc)
        return
    for name, table, column in INDEXES:
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" USING gin ("{column}" gin_trgm_ops)'
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, _table, _column in INDEXES:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [("timelines", "0021_derive_quarantine")]
    operations = [migrations.RunPython(create, drop)]
