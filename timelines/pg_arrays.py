"""PostgreSQL array literals, one string for a ``%s::text[]`` (``bigint[]``, ``timestamptz[]``) parameter.

Used by the store, the dirty keys, the derive stage and the read side's bulk reads. Pure string building,
no database: a module of its own so that none of those imports another only for these.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any


def text_array(values: Iterable[str]) -> str:
    """A PostgreSQL array literal of ``values`` (each quoted), for a ``%s::text[]`` parameter.

    psycopg dumps a list parameter element by element in Python (a regular expression per element to
    decide its quoting): about 1 µs an element, and the derive stage binds arrays of 200 UIDs or names
    in every read. One string is made here in a single pass and parsed by the server."""
    return "{" + ",".join(['"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values]) + "}"


def int_array(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers, for a ``%s::bigint[]`` parameter (as ``text_array``: one
    string, where psycopg would dump a list of ids element by element in Python)."""
    return "{" + ",".join(map(str, map(int, values))) + "}"


def time_array(values: Iterable[datetime | None]) -> str:
    """A PostgreSQL array literal of aware times (None: NULL), for a ``%s::timestamptz[]`` parameter (ISO
    8601 with the offset and microseconds: the same instants psycopg would bind, in one string)."""
    return (
        "{"
        + ",".join([f'"{v.isoformat(timespec="microseconds")}"' if v is not None else "NULL" for v in values])
        + "}"
    )


def any_of(column: str, values: Iterable[str], params: list[Any], *, postgres: bool) -> str:
    """``column`` is one of ``values``; appends its parameters to ``params`` (``postgres``: for PostgreSQL,
    else for SQLite).

    PostgreSQL: one array parameter, so each query has one text whatever the number of values. An IN list
    of N placeholders is a new statement per N: psycopg parses and caches each text (up to 50
    parameters), and a statement first met at a load's peak stays in that cache after it, keeping a mostly
    empty pymalloc arena from being given back (docs/performance-history.md "Load"). The array goes as one
    literal (pg_arrays.text_array: psycopg would dump a list value by value). SQLite has no arrays:
    placeholders there (IN_BATCH at most: it caps bound parameters)."""
    values = list(values)
    if not values:
        return "1 = 0"
    if postgres:
        params.append(text_array(values))
        return f"{column} = ANY(%s::text[])"
    params.extend(values)
    return f"{column} IN ({', '.join(['%s'] * len(values))})"
