"""PostgreSQL only: ``timelines_observation`` as declarative range partitions by ``observed_at``.

Layout (made by migration 0010 from the single table, in place):

- one partition per span (a UTC day by default, ``PODLIFE_PARTITION_DAYS``), named after its first day
  (``timelines_observation_p20261130``), created ahead by beat (``timelines.ensure_partitions``) and on
  demand when a row arrives for a span not made yet (it then waits in the default partition, see below);
- ``timelines_observation_legacy``: the table as it was before the migration (when it held rows), attached
  as the partition of everything before the next span (MINVALUE up to it) without copying a row;
  retention deletes its expired rows as it did before the migration, and drops it whole once its upper
  bound is past the cutoff, like any other partition;
- ``timelines_observation_default``: rows no range holds (offline input from long ago, a clock far in the
  future, an imported bundle's facts whose day was dropped). Small by construction; creating a partition
  moves its rows for that span out of it first.

Indexes: the parent's (by pod, by kind, BRIN on time; migrations 0025 and 0027) exist on every partition;
each partition also gets its own unique index of its rows' keys (``KEY_HASH``: a hash of the cluster and
the dedupe key) and an index of its ids by bucket of 16 (evidence links, ``ID_BUCKET``).
PostgreSQL enforces a unique index only within one partition (unless it holds the partition key), and a
re-delivered fact can arrive on another day than its first delivery (a relist re-sends a pod unchanged
for a week with its old resourceVersion), so ``timelines/store.py`` looks the batch's keys up in the other
partitions before it COPYs (only within the span of the partitions that hold the cluster's rows of the
batch's kinds, and a pod snapshot's key only from its pod's creation on: ``store.probe_since``, migration
0031; the one the rows go to fails the COPY itself on a key it holds), using the partition list this
process last read (``range_holding``), checked in the same transaction.

A day that has ended is closed (``close_past``, beat hourly): its indexes rebuilt with full pages
(``REINDEX TABLE CONCURRENTLY``), a quarter smaller than they grew row by row.

Retention (``drop_expired``) detaches and drops whole partitions whose upper bound is at or before the
cutoff: no DELETE, no dead tuples, nothing for vacuum. Rows of imported clusters in such a partition (an
incident bundle is a record, kept) are moved to the default partition before the drop; in the default
partition (and the legacy one), the live rows older than the start of the cutoff's span are deleted (they
hold few rows; ``retention_cut``).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from timelines import pg_arrays

PARENT = "timelines_observation"
LEGACY = f"{PARENT}_legacy"
DEFAULT = f"{PARENT}_default"


def key_hash(cluster_id: int, key: str) -> uuid.UUID:
    """``KEY_HASH`` of a cluster id and a dedupe key, as PostgreSQL computes it (the key as stored: a text
    column holds no NUL, which the store replaces)."""
    return uuid.UUID(bytes=key_digest(cluster_id, key))


def key_digest(cluster_id: int, key: str) -> bytes:
    """``key_hash``'s 16 bytes, without the UUID object (the store's rows: a UUID costs a µs to make)."""
    return hashlib.md5(f"{cluster_id}:{key}".encode("utf-8", "surrogatepass")).digest()


def key_hash_sql(cluster: str, key: str) -> str:
    """``KEY_HASH`` of the SQL expressions ``cluster`` and ``key`` (a row's columns, or what it is probed with)."""
    return f"md5({cluster}::text || ':' || {key})::uuid"


def stored_key_hash_sql(table: str = "") -> str:
    """The key hash of a stored row (``table``: its alias and a dot, or nothing): its ``key_hash`` column,
    or for a row stored before migration 0028 (which holds the key's text), ``key_hash_sql`` of its
    columns. The store's look-ups and the reads by key name it as written here, so that the planner matches
    them to the partitions' unique index (``KEY_HASH``)."""
    return f"COALESCE({table}key_hash, {key_hash_sql(f'{table}cluster_id', f'{table}dedupe_key')})"


# What each partition's unique key index holds (migrations 0026 and 0028): 16 bytes (an MD5, as a uuid) of
# the cluster and the dedupe key, where the key's text took 40 to 60. A row stored since 0028 holds that
# hash in its ``key_hash`` column and the key in its body; an older row the key's text, hashed here.
KEY_HASH = f"(({stored_key_hash_sql()}))"
KEY_INDEX_SUFFIX = "_row_key"


def key_index(partition: str) -> str:
    """The name of ``partition``'s unique index of its rows' keys (``KEY_HASH``)."""
    return partition[:55] + KEY_INDEX_SUFFIX


# Each partition finds a row by id through a btree of its id's bucket, ``id / ID_BUCKET`` (migration
# 0030), not of the id: the rows of a bucket share one key, so btree deduplication keeps one entry and 6
# bytes a row for them (7.7 B an observation where the id's own index took 20.5, closed), and they were
# stored together, in a page or two. A read by id names the bucket (``id_bucket_sql``) beside the id, and
# reads the bucket's few other rows to drop them.
ID_BUCKET = 16
ID_INDEX_SUFFIX = "_id16"


def id_bucket_sql(column: str = "id") -> str:
    """The bucket of the id ``column`` (a row's ``id``, with its table's alias), as the partitions' id index
    (``ID_INDEX_SUFFIX``) writes it, so that the planner matches it."""
    return f"({column} / {ID_BUCKET})"


def id_buckets(ids: Iterable[int]) -> list[int]:
    """The buckets of ``ids`` (``id_bucket_sql``), each once, in order."""
    return sorted({int(i) // ID_BUCKET for i in ids})


def ids_sql(ids: Iterable[int], column: str = "id") -> tuple[str, list[str]]:
    """The condition of a row whose id ``column`` is one of ``ids``, naming their buckets beside them as
    every read by id does on PostgreSQL (the partitions' id index holds the buckets), and its two array
    parameters."""
    wanted = list(ids)
    return (
        f"{column} = ANY(%s::bigint[]) AND {id_bucket_sql(column)} = ANY(%s::bigint[])",
        [pg_arrays.int_array(wanted), pg_arrays.int_array(id_buckets(wanted))],
    )


# Spans are counted from a Monday midnight UTC, so a week partition runs Monday to Monday and a day
# partition midnight to midnight.
_ANCHOR = datetime(1970, 1, 5, tzinfo=UTC)
EARLIEST = datetime.min.replace(tzinfo=UTC)  # what MINVALUE and MAXVALUE bounds compare as
LATEST = datetime.max.replace(tzinfo=UTC)
_BOUND = re.compile(r"FOR VALUES FROM \((?P<lo>[^)]*)\) TO \((?P<hi>[^)]*)\)")


@dataclass(frozen=True)
class Partition:
    name: str
    lower: datetime | None  # None: MINVALUE (the legacy table)
    upper: datetime | None  # None: MAXVALUE
    default: bool = False
    bound: str = ""  # as the catalogue prints it (``pg_get_expr``): what ``store`` checks is still attached

    def holds(self, at: datetime) -> bool:
        """True when a row observed at ``at`` belongs in this range (never for the default partition)."""
        if self.default:
            return False
        return (self.lower is None or self.lower <= at) and (self.upper is None or at < self.upper)


def configured_span() -> timedelta:
    return timedelta(days=settings.PODLIFE_PARTITION_DAYS)


def ensure_configured(*, now: datetime | None = None) -> list[str]:
    """``ensure_partitions`` with the settings' span and look-ahead (beat's task and the migration)."""
    if not is_partitioned():
        return []
    return ensure_partitions(
        configured_span(), now=now or timezone.now(), ahead=settings.PODLIFE_PARTITIONS_AHEAD
    )


# The end of the time this process knows partitions exist for (one catalogue read per span, not per batch).
_covered_until: dict[str, datetime] = {}


def cover(at: datetime) -> None:
    """Make sure the partition for ``at`` exists when ``at`` is a time beat would have covered (now up to
    the look-ahead): a store that runs without beat (``manage.py collect``) still writes into day
    partitions, not into the default one. Times outside that window wait in the default partition."""
    if connection.vendor != "postgresql":
        return
    alias = connection.alias
    known = _covered_until.get(alias)
    if known is not None and at < known:
        return
    span, now = configured_span(), timezone.now()
    horizon = span_start(now, span) + (settings.PODLIFE_PARTITIONS_AHEAD + 1) * span
    if at >= horizon or (known is not None and known >= horizon):
        return
    if not is_partitioned():
        _covered_until[alias] = horizon
        return
    ensure_configured(now=now)
    _covered_until[alias] = horizon


def is_partitioned() -> bool:
    """True when ``timelines_observation`` is a partitioned table (PostgreSQL after migration 0010)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [PARENT])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def span_start(at: datetime, span: timedelta) -> datetime:
    """The start of the span of length ``span`` that holds ``at`` (spans counted from a Monday, UTC)."""
    steps = (at - _ANCHOR) // span
    return _ANCHOR + steps * span


def retention_cut(cutoff: datetime) -> datetime:
    """Where retention's DELETE cuts (the default and legacy partitions on PostgreSQL, the one table on
    SQLite): at the start of the span that holds ``cutoff``, never inside a span. A span is the unit the
    observations' compact form chains rows in (docs/storage.md: a row may be stored as the change against
    an earlier row of its object in the same span), so a cut inside one would leave rows whose base is
    gone. Up to one span more is kept, as a partition's drop keeps it."""
    return span_start(cutoff, configured_span())


def partition_name(start: datetime) -> str:
    return f"{PARENT}_p{start.astimezone(UTC):%Y%m%d}"


def _parse_bound(text: str) -> datetime | None:
    text = text.strip()
    if text.upper() in ("MINVALUE", "MAXVALUE"):
        return None
    value = text.strip("'")
    # PostgreSQL prints a timestamptz bound as '2026-11-30 00:00:00+00' in the session's time zone.
    if re.search(r"[+-]\d\d$", value):
        value += ":00"
    return datetime.fromisoformat(value)


def partitions() -> list[Partition]:
    """The partitions of ``timelines_observation``, ordered by lower bound (the default one last)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)",
            [PARENT],
        )
        rows = cursor.fetchall()
    found: list[Partition] = []
    for name, bound in rows:
        if bound == "DEFAULT":
            found.append(Partition(name, None, None, default=True, bound=bound))
            continue
        match = _BOUND.match(bound)
        if match is None:
            raise RuntimeError(f"partition {name} has a bound podlife does not expect: {bound}")
        found.append(Partition(name, _parse_bound(match["lo"]), _parse_bound(match["hi"]), bound=bound))
    return sorted(found, key=lambda p: (p.default, p.lower or EARLIEST))


# The range partitions as this process last read them, per database alias: (monotonic time read, list).
# Only a hint for the store's key look-up (``timelines/store.py``), which checks in the same statement that
# the partition it relies on is still attached with these bounds, and reads the catalogue again if not.
_layouts: dict[str, tuple[float, list[Partition]]] = {}
_layouts_lock = threading.Lock()
LAYOUT_REREAD_S = 30.0  # a time no cached range holds: read the catalogue again at most this often


def range_holding(low: datetime, high: datetime) -> Partition | None:
    """The range partition (as last read) that holds both ``low`` and ``high``, hence every time between;
    None when none does (the times go to the default partition, or span two ranges) or the table is not
    partitioned. A miss reads the catalogue again when the last read is older than ``LAYOUT_REREAD_S``."""
    if connection.vendor != "postgresql":
        return None
    alias = connection.alias
    for attempt in range(2):
        read_at, layout = _layouts.get(alias, (None, []))
        for part in layout:
            if part.holds(low):
                return part if part.holds(high) else None
        if attempt or (read_at is not None and time.monotonic() - read_at < LAYOUT_REREAD_S):
            return None
        with _layouts_lock:
            _layouts[alias] = (time.monotonic(), partitions() if is_partitioned() else [])
    return None


def forget_layout() -> None:
    """Read the partitions from the catalogue at the next ``range_holding`` (this process made or dropped
    one, or found the one it relied on gone)."""
    with _layouts_lock:
        _layouts.pop(connection.alias, None)


def _gaps(start: datetime, end: datetime, existing: Sequence[Partition]) -> list[tuple[datetime, datetime]]:
    """The parts of ``[start, end)`` no existing range covers (the legacy partition's upper bound, day
    partitions inside a week after the span setting changed)."""
    covered = sorted((p.lower or EARLIEST, p.upper or LATEST) for p in existing if not p.default)
    gaps: list[tuple[datetime, datetime]] = []
    at = start
    for lo, hi in covered:
        if hi <= at or lo >= end:
            continue
        if lo > at:
            gaps.append((at, lo))
        at = max(at, hi)
        if at >= end:
            break
    if at < end:
        gaps.append((at, end))
    return gaps


def ensure_partitions(span: timedelta, *, now: datetime, ahead: int) -> list[str]:
    """Create the partitions for the span holding ``now`` and ``ahead`` spans after it, where missing.
    Returns the names created. Idempotent; safe when two workers run it at once (a lock serialises them).
    """
    created: list[str] = []
    first = span_start(now, span)
    for i in range(ahead + 1):
        start = first + i * span
        created += create_partition(start, start + span)
    # A partition ahead may have been made by a process still running the code before a migration that
    # changed the partitions' own indexes (an upgrade's old collector meeting a missing day): it gets
    # today's while it is still empty. The ones just created have them already.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_id("partitions")])
        for part in partitions():
            if part.lower is not None and part.lower > first and part.name not in created:
                _local_indexes(cursor, part.name)
    return created


def create_partition(start: datetime, end: datetime) -> list[str]:
    """Create partitions for what of ``[start, end)`` no range holds yet, with their own indexes, moving the
    default partition's rows of those ranges into them. Returns the names created."""
    with transaction.atomic(), connection.cursor() as cursor:
        # One creator at a time (beat and a store meeting a missing day): the second sees the first's.
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_id("partitions")])
        existing = partitions()
        names = []
        for lo, hi in _gaps(start, end, existing):
            names.append(_create(cursor, lo, hi, has_default=any(p.default for p in existing)))
    if names:
        forget_layout()
    return names


def _create(cursor: Any, lo: datetime, hi: datetime, *, has_default: bool) -> str:
    name = partition_name(lo)
    q = connection.ops.quote_name
    _create_like_parent(cursor, name)
    if has_default:
        # Rows that waited in the default partition for this range move into the new one first;
        # ATTACH would refuse the range while the default partition still holds them.
        columns = column_list(cursor)
        cursor.execute(
            f"WITH moved AS (DELETE FROM {DEFAULT} WHERE observed_at >= %s AND observed_at < %s "
            f"RETURNING {columns}) INSERT INTO {q(name)} ({columns}) SELECT {columns} FROM moved",
            [lo, hi],
        )
    cursor.execute(f"ALTER TABLE {PARENT} ATTACH PARTITION {q(name)} FOR VALUES FROM (%s) TO (%s)", [lo, hi])
    _local_indexes(cursor, name)
    return name


# A column's place in a new partition by its alignment: fixed-length ones widest-aligned first, so that none
# waits for padding (``_create_like_parent``).
_ALIGNED_FIRST = {"d": 0, "i": 1, "s": 2, "c": 3}


def _create_like_parent(cursor: Any, name: str) -> None:
    """Create table ``name`` with the parent's columns (types, collations, NOT NULL, defaults, storage) and
    CHECK constraints, to be attached as its partition (which matches columns by name), in the order that
    stores a row in the fewest bytes: the fixed-length columns widest-aligned first, then the
    variable-length ones (short texts and a body take no alignment), each group in the parent's order. In
    the parent's own order, which its migrations made, two short texts pushed the times to the next 8 bytes
    and the names pushed the cluster id: 6 B a row of the ``scale`` churn (docs/storage.md, "Step 2e")."""
    q = connection.ops.quote_name
    cursor.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid), "
        "CASE WHEN a.attcollation <> t.typcollation THEN c.collname END, "
        "CASE WHEN a.attstorage <> t.typstorage THEN a.attstorage END, t.typlen, t.typalign "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "LEFT JOIN pg_collation c ON c.oid = a.attcollation "
        "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        [PARENT],
    )
    columns = sorted(cursor.fetchall(), key=lambda c: (c[6] < 0, 0 if c[6] < 0 else _ALIGNED_FIRST[c[7]]))
    storage = {"p": "PLAIN", "e": "EXTERNAL", "m": "MAIN", "x": "EXTENDED"}
    cursor.execute(
        f"CREATE TABLE {q(name)} ("
        + ", ".join(
            f"{q(column)} {kind}"
            + (f" COLLATE {q(collation)}" if collation else "")
            + (" NOT NULL" if not_null else "")
            + (f" DEFAULT {default}" if default is not None else "")
            for column, kind, not_null, default, collation, _storage, _len, _align in columns
        )
        + ")"
    )
    for column, *_, how, _len, _align in columns:
        if how is not None:
            cursor.execute(f"ALTER TABLE {q(name)} ALTER COLUMN {q(column)} SET STORAGE {storage[how]}")
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass "
        "AND contype = 'c' ORDER BY conname",
        [PARENT],
    )
    for constraint, definition in cursor.fetchall():
        cursor.execute(f"ALTER TABLE {q(name)} ADD CONSTRAINT {q(constraint)} {definition}")


def column_list(cursor: Any) -> str:
    """The parent's columns, quoted, in its order: for moving rows between it, its partitions and tables
    detached from it, whose columns may lie in another order (``_create_like_parent``)."""
    cursor.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum",
        [PARENT],
    )
    return ", ".join(connection.ops.quote_name(row[0]) for row in cursor.fetchall())


def _local_indexes(cursor: Any, name: str) -> None:
    """The indexes a partition has of its own: what the parent cannot declare (a unique key without the
    partition key) or need not (the id look-up of evidence links, by bucket: ``ID_BUCKET``)."""
    q = connection.ops.quote_name
    # A 16-byte hash of (cluster, key) rather than the key's text (migrations 0026, 0028): the store's look-up
    # names the same expression to it (timelines/store.py ``_LOOKUP``). A partition made by a migration
    # before 0028 (0010 makes the first ones) gets 0026's index, which 0028 replaces.
    cursor.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = 'key_hash' AND NOT attisdropped",
        [PARENT],
    )
    if cursor.fetchone() is not None:
        index, expression = key_index(name), KEY_HASH
        cursor.execute(f"DROP INDEX IF EXISTS {q(name[:54] + '_key_hash')}")  # 0026's, which it replaces
    else:
        index, expression = name[:54] + "_key_hash", f"(({key_hash_sql('cluster_id', 'dedupe_key')}))"
    cursor.execute(f"CREATE UNIQUE INDEX IF NOT EXISTS {q(index)} ON {q(name)} {expression}")
    cursor.execute(f"CREATE INDEX IF NOT EXISTS {q(name + ID_INDEX_SUFFIX)} ON {q(name)} ({id_bucket_sql()})")
    cursor.execute(f"DROP INDEX IF EXISTS {q(name + '_id')}")  # the index of every id, before 0030


def ensure_default(cursor: Any) -> None:
    cursor.execute(f"CREATE TABLE IF NOT EXISTS {DEFAULT} PARTITION OF {PARENT} DEFAULT")
    _local_indexes(cursor, DEFAULT)


@dataclass
class Dropped:
    partitions: list[str]
    rows: int  # observations gone (estimated from the partitions' statistics, counted in the default one)
    kept: int  # rows of imported clusters moved to the default partition


def drop_expired(cutoff: datetime, kept_clusters: Iterable[int]) -> Dropped:
    """Detach and drop every partition whose upper bound is at or before ``cutoff``; delete the live rows
    older than the start of ``cutoff``'s span (``retention_cut``) in the default partition and the legacy
    table. Rows of ``kept_clusters`` (imported) are kept."""
    kept_ids = list(kept_clusters)
    result = Dropped([], 0, 0)
    sweep = [DEFAULT]
    for part in partitions():
        if part.default:
            continue
        if part.upper is None or part.upper > cutoff:
            if part.lower is None:  # the legacy table, until all of it is past the cutoff
                sweep.append(part.name)
            continue
        q = connection.ops.quote_name(part.name)
        with transaction.atomic(), connection.cursor() as cursor:
            result.rows += _row_count(cursor, part.name)
            cursor.execute(f"ALTER TABLE {PARENT} DETACH PARTITION {q}")
            if kept_ids:
                # The kept clusters' rows under their row lock, as the store writes (store._LOCK_CLUSTER):
                # a cluster deleted meanwhile keeps nothing.
                columns = column_list(cursor)
                cursor.execute(
                    f"INSERT INTO {PARENT} ({columns}) SELECT {columns} FROM {q} WHERE cluster_id = ANY(ARRAY("
                    "SELECT id FROM timelines_cluster WHERE id = ANY(%s) FOR KEY SHARE))",
                    [kept_ids],
                )
                result.kept += cursor.rowcount
            cursor.execute(f"DROP TABLE {q}")
        result.partitions.append(part.name)
    # The default partition, and the legacy table while it still holds rows inside the retention window,
    # lose their expired live rows by DELETE, as the single table did before migration 0010, cut at a
    # span's start (``retention_cut``).
    with connection.cursor() as cursor:
        for name in sweep:
            cursor.execute(
                f"DELETE FROM {connection.ops.quote_name(name)} "
                "WHERE observed_at < %s AND NOT (cluster_id = ANY(%s))",
                [retention_cut(cutoff), kept_ids],
            )
            result.rows += cursor.rowcount
    result.rows -= result.kept
    if result.partitions:
        forget_layout()
    return result


def _row_count(cursor: Any, name: str) -> int:
    """Rows in a partition: the planner's count when it has one (autovacuum analyses a partition once it
    has grown), else an exact count (a partition never analysed is small). Counting a day of a fleet
    exactly would read the whole partition that the drop otherwise never touches."""
    cursor.execute("SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", [name])
    row = cursor.fetchone()
    if row is not None and row[0] >= 0:
        return int(row[0])
    cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(name)}")
    return int(cursor.fetchone()[0])


# A day that has ended still gets rows for a while (kubelet lines and audit events shipped late, a relist):
# it is closed this long after its range ends.
CLOSE_AFTER = timedelta(hours=2)
CLOSED = "podlife: closed"  # the comment a closed partition carries


def close_past(*, now: datetime | None = None, after: timedelta = CLOSE_AFTER, limit: int = 2) -> list[str]:
    """Close the range partitions whose range ended more than ``after`` before ``now`` and that are not
    closed yet (``close_partition``), the newest first and at most ``limit`` of them (a rebuild reads a
    whole day: after an upgrade the month closes over a day of hourly runs, not in one); returns the names
    closed. Beat runs it hourly."""
    if not is_partitioned():
        return []
    cut = (now or timezone.now()) - after
    closed: list[str] = []
    for part in sorted(partitions(), key=lambda p: p.upper or LATEST, reverse=True):
        if len(closed) >= limit:
            break
        if part.default or part.upper is None or part.upper > cut or _is_closed(part.name):
            continue
        if close_partition(part.name):
            closed.append(part.name)
    return closed


def _is_closed(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT obj_description(to_regclass(%s), 'pg_class')", [connection.ops.quote_name(name)]
        )
        return bool(cursor.fetchone()[0] == CLOSED)


def close_partition(name: str) -> bool:
    """Rebuild the partition ``name``'s indexes packed full, then mark it closed (``CLOSED``); False when
    another process is closing it.

    An index grown row by row keeps its pages part empty where keys arrive in no order: the key hash's
    index takes 42–45 B an observation grown so, 29 B built in one go with its pages full, the index by pod
    19 B against 12.5 (docs/storage.md "Step 2d"). A day that has ended gets few rows more, so its btree
    indexes are set to fill their pages (fillfactor 100) and rebuilt ``REINDEX TABLE CONCURRENTLY``:
    writers and readers go on, and a row that still arrives is indexed as ever (a full page splits).
    Outside a transaction (a concurrent rebuild cannot run in one). A rebuild that failed (a killed
    worker) leaves invalid copies of the indexes (``…_ccnew``): they are dropped first."""
    if connection.in_atomic_block:
        raise RuntimeError("close_partition runs outside a transaction (REINDEX CONCURRENTLY)")
    q = connection.ops.quote_name
    lock = _lock_id(f"close:{name}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock])
        if not cursor.fetchone()[0]:
            return False
        try:
            cursor.execute(
                "SELECT i.relname, a.amname, x.indisvalid FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                "JOIN pg_am a ON a.oid = i.relam WHERE x.indrelid = to_regclass(%s) ORDER BY 1",
                [q(name)],
            )
            for index, method, valid in cursor.fetchall():
                if not valid and "_ccnew" in index:  # a failed rebuild's copy
                    cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {q(index)}")
                elif method == "btree":
                    cursor.execute(f"ALTER INDEX {q(index)} SET (fillfactor = 100)")
            cursor.execute(f"REINDEX TABLE CONCURRENTLY {q(name)}")
            cursor.execute(f"COMMENT ON TABLE {q(name)} IS '{CLOSED}'")
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [lock])
    return True


def _lock_id(text: str) -> int:
    """A stable signed 32-bit number for an advisory lock key."""
    return zlib.crc32(text.encode()) - 2**31
