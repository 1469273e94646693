"""A direct PostgreSQL connection beside Django's, for tests that watch or act on the server itself
(pg_stat_activity, pg_terminate_backend, roles): autocommit, as the test database's user."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connection


def admin_connection(dbname: str | None = None) -> psycopg.Connection[Any]:
    """An autocommit connection to ``dbname`` (default: the test database) on the test database's server,
    as its user. A context manager: ``with admin_connection() as db: ...``."""
    s = connection.settings_dict
    return psycopg.connect(
        host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"], dbname=dbname or s["NAME"], autocommit=True
    )
