"""Django set-up shared by the benchmark scripts (run from the project root or bench/)."""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def derive_stage_elsewhere() -> str:
    """Keep the derive stage out of a store benchmark's clock, as deployed: without a broker Celery tasks
    run eagerly and the store's signal would derive inline, on the storing thread (the derive stage is
    another worker's cost: bench/derive.py). With REDIS_URL each stored batch queues it, as deployed, and
    nothing consumes the queue here. Returns what was done, for the report."""
    from django.conf import settings

    from timelines.signals import DERIVE_RECEIVER, observations_stored

    if settings.REDIS_URL:
        return "derive stage queued"
    observations_stored.disconnect(dispatch_uid=DERIVE_RECEIVER)
    return "derive stage not run"


def setup_django(*, scratch_database: bool = False) -> None:
    """Set Django up. With ``scratch_database``, the run works in a new, migrated copy of the configured
    database (``test_<name>``, as the tests use) that is dropped at exit: what it measures then does not
    depend on what the configured database already holds (bloat from earlier runs on a server without
    autovacuum, a large table) and leaves it untouched."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")
    # DEBUG is off by default and then settings want a SECRET_KEY: a throwaway one for this run (servers
    # the benchmark starts inherit it).
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    import django

    django.setup()
    if scratch_database:
        import atexit

        from django.db import connection

        configured = connection.settings_dict["NAME"]
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        atexit.register(connection.creation.destroy_test_db, configured, verbosity=0)


def raw_copy_seconds(rows: list[tuple], batch: int, *, as_json: bool = False) -> float:
    """Seconds to write ``rows`` (made by ``timelines.store._row``) into a scratch copy of the observation
    table (same columns, indexes and unique constraint: on PostgreSQL those of the partition of now), ``batch`` rows per transaction, as fast as the
    database takes them: the same binary ``COPY`` the store uses, without its checks; on SQLite, a plain
    ``executemany`` INSERT. The baseline of the ingest and watch benchmarks.

    ``as_json``: each row's ``body`` field is its payload's JSON text instead of its body, and goes to the
    ``payload`` column (jsonb on PostgreSQL), as rows were stored before the compressed body (#37): the form
    the observations arrive in, so a baseline that does not shrink with the stored form (bench/watch.py)."""
    from django.db import connection, transaction

    from timelines import store

    columns = store._COLUMN_LIST
    if as_json:
        columns = ", ".join(c if c != "body" else "payload" for c in store._COLUMNS)
        at = store._COLUMNS.index("body")
        if connection.vendor == "postgresql":
            from psycopg.types.json import Jsonb

            def verbatim(text: bytes) -> bytes:
                return text

            rows = [(*r[:at], Jsonb(r[at], dumps=verbatim), *r[at + 1 :]) for r in rows]  # binary, unclocked
        else:
            rows = [(*r[:at], r[at].decode(), *r[at + 1 :]) for r in rows]

    table = "bench_observation_raw"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        if connection.vendor == "postgresql":
            # Like the partition that rows of now go to (timelines/partitions.py): the parent's indexes
            # and the partition's own unique key (a hash of cluster and dedupe key) and id ones.
            from django.utils import timezone

            from timelines import partitions

            partitions.cover(timezone.now())
            like = "timelines_observation"
            if partitions.is_partitioned():
                now, span = timezone.now(), partitions.configured_span()
                like = partitions.partition_name(partitions.span_start(now, span))
                if like not in {p.name for p in partitions.partitions()}:
                    like = partitions.LEGACY  # before the migration's next span
            cursor.execute(f"CREATE TABLE {table} (LIKE {like} INCLUDING ALL)")
        else:
            cursor.execute(f"CREATE TABLE {table} AS SELECT * FROM timelines_observation WHERE 0")
            cursor.execute(f"CREATE UNIQUE INDEX {table}_dedupe ON {table} (cluster_id, key_hash)")
    if connection.vendor != "postgresql":  # SQLite binds text: times and key hashes adapted (unclocked)
        rows = [store.portable_row(r) for r in rows]
    marks = ", ".join(["%s"] * len(store._COLUMNS))
    try:
        started = time.perf_counter()
        for i in range(0, len(rows), batch):
            chunk = rows[i : i + batch]
            with transaction.atomic(), connection.cursor() as cursor:
                if connection.vendor == "postgresql" and as_json:
                    with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
                        store.set_row_types(
                            copy, [t if i != at else "jsonb" for i, t in enumerate(store._COPY_TYPES)]
                        )
                        for row in chunk:
                            copy.write_row(row)
                elif connection.vendor == "postgresql":
                    store.copy_observation_rows(cursor.cursor, table, chunk)
                else:
                    cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", chunk)
        return time.perf_counter() - started
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")


def postgres_cpu_seconds() -> float:
    """CPU seconds (user + system) all PostgreSQL server processes of this machine have used so far, those
    that ended too (a closed connection's backend: the server's main process counts its reaped children);
    0.0 where /proc cannot tell (another OS, a database on another host). Another client's queries count
    too: on a shared machine the figure is an upper bound of the benchmark's own."""
    total = 0.0
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if (entry / "comm").read_text().strip() != "postgres":
                continue
        except OSError:  # gone meanwhile, or not ours to read
            continue
        total += process_cpu_seconds(entry)
    return total


def process_cpu_seconds(entry: Path) -> float:
    """CPU seconds (user + system, and those of its reaped children) of the process ``/proc/<pid>``; 0.0
    when it is gone or not ours to read."""
    try:
        fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
