"""``manage.py compact_observations``: move the observations stored before migrations 0028 and 0029 (their
dedupe key as text in the row, before 0024 their payload as jsonb too; their pod's UUID as text) to the
compact form the store writes today (a body that holds the payload and the key, the key's hash in
``key_hash``, a UUID pod UID as 16 bytes in ``pod_id``: ``timelines/payloads.py``, docs/storage.md), in
place, batch by batch.

Each batch is its own transaction: the rows that still hold their key's text or a UUID's text, in id
order, get their new body and hash and lose the key's text and any jsonb payload, and their UUID moves
to ``pod_id``. Nothing else is locked, so the collector and the web keep running (reads take either form;
a row's key hash, and so its place in the partition's unique index, is the same in both, and its UID
reads back the same text), and a run that stops resumes where it stopped: the rows left are the ones
that hold either text.
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


def _older(table: str = "") -> str:
    """The condition of a row in an older form: its key's text, or a UUID pod UID as text."""
    regexp = "~" if connection.vendor == "postgresql" else "REGEXP"  # Django gives SQLite a REGEXP
    uuid_text = f"'^{observation_rows.CANONICAL_UID}$'"  # what the store keeps as 16 bytes
    return f"({table}dedupe_key IS NOT NULL OR {table}pod_uid {regexp} {uuid_text})"


def pending() -> int:
    """How many observations are still in an older form (their key's or their UUID's text in the row)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {_TABLE} WHERE {_older()}")
        return int(cursor.fetchone()[0])


def move_batch(after: int, size: int) -> tuple[int, int]:
    """Move the first ``size`` rows after id ``after`` in an older form; returns (how many, the last id
    seen; 0 when none was left)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, cluster_id, kind, pod_uid, node, namespace, name, observed_at, dedupe_key, "
            f"{observation_rows.payload_sql(_TABLE)} FROM {_TABLE} WHERE {_older()} AND id > %s "
            f"AND {partitions.id_bucket_sql()} >= %s ORDER BY {partitions.id_bucket_sql()}, id LIMIT %s",
            [after, after // partitions.ID_BUCKET, size],
        )
        found = cursor.fetchall()
    if not found:
        return 0, 0
    # (id, new body and key hash or None where the key is in the body already, pod_id or None). A row
    # whose key is in its body already has no jsonb payload either: the store wrote it since 0028.
    moved: list[tuple[int, bytes | None, uuid.UUID | None, uuid.UUID | None]] = []
    times = []
    for oid, cluster_id, kind, uid, node, ns, name, at, key, stored in found:
        if stored is None:  # neither form: nothing to move (never written so by any podlife)
            continue
        if connection.vendor != "postgresql":  # SQLite through a raw cursor: Django's naive UTC time
            at = connection.ops.convert_datetimefield_value(at, None, connection)  # type: ignore[attr-defined]
        body, hashed = None, None
        if key is not None:
            key, payload = observation_rows.decode(stored, key, uid, node, ns, name, at)
            texts = Texts(uid, node, ns, name, at)  # the UID's text, which a read gives back either way
            body = payloads.pack(cluster_id, kind, orjson.dumps(payload), texts, key)
            hashed = partitions.key_hash(cluster_id, key)
        moved.append((oid, body, hashed, observation_rows.pod_id_of(uid)))
        times.append(at)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The batch's time span too, so that only the partitions holding it are probed (by the ids'
            # buckets, as their index holds them).
            cursor.execute(
                f"UPDATE {_TABLE} o SET body = COALESCE(v.body, o.body), key_hash = COALESCE(v.key_hash, "
                "o.key_hash), dedupe_key = NULL, payload = NULL, "
                "pod_id = COALESCE(v.pod_id, o.pod_id), pod_uid = CASE WHEN v.pod_id IS NULL THEN o.pod_uid END "
                "FROM unnest(%s::bigint[], %s::bytea[], %s::uuid[], %s::uuid[]) AS v(id, body, key_hash, pod_id) "
                f"WHERE o.id = v.id AND {partitions.id_bucket_sql('o.id')} = {partitions.id_bucket_sql('v.id')} "
                f"AND {_older('o.')} AND o.observed_at BETWEEN %s AND %s",
                [
                    [m[0] for m in moved],
                    [m[1] for m in moved],
                    [m[2] for m in moved],
                    [m[3] for m in moved],
                    min(times, default=None),
                    max(times, default=None),
                ],
            )
        else:
            cursor.executemany(
                f"UPDATE {_TABLE} SET body = COALESCE(%s, body), key_hash = COALESCE(%s, key_hash), "
                "dedupe_key = NULL, payload = NULL, "
                "pod_id = COALESCE(%s, pod_id), pod_uid = CASE WHEN %s IS NULL THEN pod_uid END "
                f"WHERE id = %s AND {_older()}",
                [
                    (body, hashed and hashed.hex, pod_id and pod_id.hex, pod_id and pod_id.hex, oid)
                    for oid, body, hashed, pod_id in moved
                ],
            )
    payloads.train_due()  # between batches, outside their transactions
    return len(moved), int(found[-1][0])


class Command(BaseCommand):
    help = (
        "Move observations stored before migrations 0028 and 0029 to the compact form, batch by batch "
        "(resumable)."
    )

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
