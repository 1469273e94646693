"""``manage.py compact_observations``: move the observations stored before migration 0024 (their payload as
jsonb) to the compact body (``timelines/payloads.py``, docs/storage.md), in place, batch by batch.

Each batch is its own transaction: the rows whose ``body`` is still empty, in id order, get their body and
lose their jsonb payload. Nothing else is locked, so the collector and the web keep running (reads take
either form), and a run that stops resumes where it stopped: the rows left are the ones without a body.
Dictionaries are trained on the rows moved, as on the rows the store takes (the first batches of a
cluster's kind go without one). A progress bar is drawn on a terminal (``--progress`` anywhere).
PostgreSQL keeps the dead row versions until vacuum, which makes their pages free for new rows: the disk
shrinks as new rows fill them (or at once, partition by partition, with ``VACUUM FULL`` while none is
written).
"""

from __future__ import annotations

import sys
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from timelines import observation_rows, payloads
from timelines.compact import Texts
from timelines.progress import ProgressBar

_TABLE = "timelines_observation"


def pending() -> int:
    """How many observations still hold their payload as jsonb."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {_TABLE} WHERE body IS NULL")
        return int(cursor.fetchone()[0])


def move_batch(after: int, size: int) -> tuple[int, int]:
    """Give a body to the first ``size`` rows after id ``after`` that have none; returns (how many, the
    last id seen; 0 when none was left)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, cluster_id, kind, pod_uid, node, namespace, name, observed_at, "
            f"{observation_rows.payload_sql(_TABLE)} FROM {_TABLE} WHERE body IS NULL AND id > %s "
            "ORDER BY id LIMIT %s",
            [after, size],
        )
        found = cursor.fetchall()
    if not found:
        return 0, 0
    moved: list[tuple[int, bytes]] = []
    times = []
    for oid, cluster_id, kind, uid, node, ns, name, at, stored in found:
        if stored is None:  # neither form: nothing to move (never written so by any podlife)
            continue
        if connection.vendor != "postgresql":  # SQLite through a raw cursor: Django's naive UTC time
            at = connection.ops.convert_datetimefield_value(at, None, connection)  # type: ignore[attr-defined]
        payload = observation_rows.decode_payload(stored, uid, node, ns, name, at)
        moved.append(
            (oid, payloads.pack(cluster_id, kind, orjson.dumps(payload), Texts(uid, node, ns, name, at)))
        )
        times.append(at)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The batch's time span too, so that only the partitions holding it are probed (by id).
            cursor.execute(
                f"UPDATE {_TABLE} o SET body = v.body, payload = NULL "
                "FROM unnest(%s::bigint[], %s::bytea[]) AS v(id, body) WHERE o.id = v.id AND o.body IS NULL "
                "AND o.observed_at BETWEEN %s AND %s",
                [
                    [m[0] for m in moved],
                    [m[1] for m in moved],
                    min(times, default=None),
                    max(times, default=None),
                ],
            )
        else:
            cursor.executemany(
                f"UPDATE {_TABLE} SET body = %s, payload = NULL WHERE id = %s AND body IS NULL",
                [(body, oid) for oid, body in moved],
            )
    payloads.train_due()  # between batches, outside their transactions
    return len(moved), int(found[-1][0])


class Command(BaseCommand):
    help = "Move observations stored before migration 0024 to their compact body, batch by batch (resumable)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=2000, help="rows per transaction (default 2000)")
        parser.add_argument("--progress", action="store_true", help="draw a progress bar on stderr")

    def handle(self, *args: object, batch: int, progress: bool, **options: Any) -> None:
        if batch < 1:
            raise CommandError(f"--batch {batch}: expected a positive number of rows")
        total = pending()
        bar = ProgressBar(self.stderr) if (progress or sys.stderr.isatty()) else None
        done, after = 0, 0
        while True:
            if bar is not None:
                bar("compacting", done, total)
            count, after = move_batch(after, batch)
            if not after:
                break
            done += count
        if bar is not None:
            bar("done", done, max(total, done))
        self.stdout.write(f"compacted {done} observation{'s' if done != 1 else ''}; {pending()} left")
