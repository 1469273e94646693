"""``manage.py compact_observations``: move the observations stored before migration 0028 (their dedupe key
as text in the row; before 0024 their payload as jsonb too) to the compact form the store writes today (a
body that holds the payload and the key, the key's hash in ``key_hash``: ``timelines/payloads.py``,
docs/storage.md), in place, batch by batch.

Each batch is its own transaction: the rows that still hold their key's text, in id order, get their new
body and hash and lose the key's text and any jsonb payload. Nothing else is locked, so the collector and
the web keep running (reads take either form; a row's key hash, and so its place in the partition's
unique index, is the same in both), and a run that stops resumes where it stopped: the rows left are the
ones that hold their key's text.
Dictionaries are trained on the rows moved, as on the rows the store takes (the first batches of a
cluster's kind go without one). A progress bar is drawn on a terminal (``--progress`` anywhere).
PostgreSQL keeps the dead row versions until vacuum, which makes their pages free for new rows: the disk
shrinks as new rows fill them (or at once, partition by partition, with ``VACUUM FULL`` while none is
written).
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from timelines import observation_rows, partitions, payloads
from timelines.compact import Texts
from timelines.progress import ProgressBar

_TABLE = "timelines_observation"


def pending() -> int:
    """How many observations are still in an older form (their key's text in the row)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {_TABLE} WHERE dedupe_key IS NOT NULL")
        return int(cursor.fetchone()[0])


def move_batch(after: int, size: int) -> tuple[int, int]:
    """Move the first ``size`` rows after id ``after`` that hold their key's text; returns (how many, the
    last id seen; 0 when none was left)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, cluster_id, kind, pod_uid, node, namespace, name, observed_at, dedupe_key, "
            f"{observation_rows.payload_sql(_TABLE)} FROM {_TABLE} WHERE dedupe_key IS NOT NULL AND id > %s "
            "ORDER BY id LIMIT %s",
            [after, size],
        )
        found = cursor.fetchall()
    if not found:
        return 0, 0
    moved: list[tuple[int, bytes, uuid.UUID]] = []
    times = []
    for oid, cluster_id, kind, uid, node, ns, name, at, key, stored in found:
        if stored is None:  # neither form: nothing to move (never written so by any podlife)
            continue
        if connection.vendor != "postgresql":  # SQLite through a raw cursor: Django's naive UTC time
            at = connection.ops.convert_datetimefield_value(at, None, connection)  # type: ignore[attr-defined]
        key, payload = observation_rows.decode(stored, key, uid, node, ns, name, at)
        texts = Texts(uid, node, ns, name, at)
        body = payloads.pack(cluster_id, kind, orjson.dumps(payload), texts, key)
        moved.append((oid, body, partitions.key_hash(cluster_id, key)))
        times.append(at)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The batch's time span too, so that only the partitions holding it are probed (by id).
            cursor.execute(
                f"UPDATE {_TABLE} o SET body = v.body, key_hash = v.key_hash, dedupe_key = NULL, payload = NULL "
                "FROM unnest(%s::bigint[], %s::bytea[], %s::uuid[]) AS v(id, body, key_hash) WHERE o.id = v.id "
                "AND o.dedupe_key IS NOT NULL AND o.observed_at BETWEEN %s AND %s",
                [
                    [m[0] for m in moved],
                    [m[1] for m in moved],
                    [m[2] for m in moved],
                    min(times, default=None),
                    max(times, default=None),
                ],
            )
        else:
            cursor.executemany(
                f"UPDATE {_TABLE} SET body = %s, key_hash = %s, dedupe_key = NULL, payload = NULL "
                "WHERE id = %s AND dedupe_key IS NOT NULL",
                [(body, key_hash.hex, oid) for oid, body, key_hash in moved],
            )
    payloads.train_due()  # between batches, outside their transactions
    return len(moved), int(found[-1][0])


class Command(BaseCommand):
    help = "Move observations stored before migration 0028 to the compact form, batch by batch (resumable)."

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
