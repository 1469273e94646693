"""How this process stores and reads an observation's payload (docs/storage.md, "Step 1: the body").

A stored row holds its payload in ``body`` (``compact.pack_body``): its JSON text with the row's own texts
written as one byte each, compressed by zstd with a dictionary of the row's cluster and kind when that is
shorter. Rows stored before it hold it as JSON in ``payload`` (``compact_observations`` moves them), and
both read back through ``unpack``.

Dictionaries (``PayloadDictionary``) are trained here from the data of the rows this process stores: a
first one once a cluster's kind has ``FIRST_WINDOW`` rows, then a new one after each longer window of rows
(``_Kind.window``), from the last rows of the window; until the first, its rows are compressed without
one. A dictionary is stored, committed, before any row names it, and is never changed nor deleted (not
even with its cluster: 16 KiB each, and a row that names it stays readable), so training happens only
outside a transaction (the collector's and the ingest's batches); a batch inside one (an import, which is
all or nothing) uses the dictionaries already stored and trains none.

A kind's first dictionary is trained where its ``FIRST_WINDOW``-th row is packed, on the writer's thread
(``FIRST_WINDOW`` samples: about 10 ms, once a cluster's kind), so the rows that follow are compressed
with it at once: left to another thread, the 1,000-2,000 rows of a fresh cluster's first list that were
packed meanwhile took about 480 B a pod body against 55 with it. On PostgreSQL the store's batches hand
each later training to one thread of this process (``train_due(background=True)``), with its own
connection: training on 2,000 samples took a writer thread 0.1-0.2 s a kind (longer on a busy machine),
during which its batches waited. That thread commits the dictionary, then the kind's next rows use it;
the rows packed meanwhile go with the kind's previous dictionary.

A dictionary goes stale when what a kind's rows hold changes (a first list of settled pods, then churn:
pending, running and terminating pods, which that dictionary compressed to 110 B a pod body against 56
for the list). Each ``DRIFT_ROWS`` rows the mean size of the bodies packed with the current dictionary is
compared with the smallest such mean it has had; ``DRIFT`` times that or more, and at least
``EARLY_AFTER`` rows since the dictionary came, the kind samples its next ``SAMPLES`` rows for a new one
without waiting for its window's end (``_Kind.drifted``).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
import zstandard
from django.db import DatabaseError, connection, connections
from django.utils import timezone

from timelines import compact

log = logging.getLogger(__name__)

# A cluster's kind gets a dictionary after its first FIRST_WINDOW rows, then a new one after each window of
# rows WINDOW_GROWTH times longer than the previous one's, up to windows of LONGEST_WINDOW rows, trained on
# the last SAMPLES rows of the window: the rows that come next look like those. The first rows of a
# cluster are its first list (settled pods, all running); what follows is churn (pending, running and
# terminating pods, their events), which a dictionary of the list compressed to 138 B a pod snapshot and
# one of the churn to 67 (docs/performance-history.md, "Storage"). 16 KiB each: the largest cluster's
# pods (13 million rows a day) get one a day or two.
FIRST_WINDOW = 200
WINDOW_GROWTH = 10
LONGEST_WINDOW = 10_000_000
SAMPLES = 2000
# A dictionary is stale (``_Kind.check``) when the mean body it packed over the last DRIFT_ROWS rows is
# DRIFT times the smallest such mean it has had; a new one is then sampled early, at least EARLY_AFTER rows
# after the current one came (at most 16 KiB and one training each 10,000 rows: 1.6 B a row).
DRIFT = 1.5
DRIFT_ROWS = 1000
EARLY_AFTER = 10_000
# How long a writer thread waits for its kind's first dictionary that another thread trains: the rows it
# packs meanwhile would go without one (about 480 B a pod body against 55).
FIRST_WAIT_S = 2.0
DICTIONARY_BYTES = 16384
SAMPLE_BYTES = 1 << 16  # a longer payload is sampled by its first bytes only
_TABLE = "timelines_payloaddictionary"


def _load(dict_id: int) -> bytes | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT data FROM {_TABLE} WHERE id = %s", [dict_id])
        row = cursor.fetchone()
    return bytes(row[0]) if row is not None else None


# Every dictionary this process has read or made, by id (read from the table the first time a row names it).
dictionaries = compact.Dictionaries(load=_load)


@dataclass
class _Kind:
    """What this process knows of one cluster's kind: the dictionary its new rows are compressed with
    (0: none), how many it has had, the rows packed since the last, and the data of the last of them,
    for the next one."""

    dictionary: int = 0
    made: int = 0  # dictionaries this kind has had (the next one's window follows from it)
    seen: int = 0  # rows packed since the last one was handed to training (or since this process began)
    samples: list[bytes | bytearray | memoryview] = field(default_factory=list)
    training: bool = False  # a dictionary of these samples is being trained (not stored yet)
    drifted: bool = False  # the current dictionary is stale: the next rows are sampled for a new one
    packed: int = 0  # bytes of the bodies packed with the current dictionary since the last check
    counted: int = 0  # and how many
    best: float = 0.0  # the smallest mean body of a check since the current dictionary came (0: none yet)
    trained_once: threading.Event = field(default_factory=threading.Event)  # a training has ended

    def window(self) -> int:
        """How many rows the next dictionary waits for (the last ``SAMPLES`` of them are its samples)."""
        return int(min(FIRST_WINDOW * WINDOW_GROWTH**self.made, LONGEST_WINDOW))

    def sampling(self) -> bool:
        """Whether the row being packed is one the next dictionary learns from: its window's last rows,
        or the rows after its dictionary was found stale."""
        return (self.drifted or self.seen > self.window() - SAMPLES) and len(self.samples) < SAMPLES

    def due(self) -> bool:
        if self.training or not self.samples:
            return False
        return self.seen >= self.window() or (self.drifted and len(self.samples) >= SAMPLES)

    def check(self, size: int) -> None:
        """Count a body of ``size`` bytes packed with the current dictionary; each ``DRIFT_ROWS`` of them,
        find the dictionary stale when their mean is ``DRIFT`` times its best (``best``)."""
        self.packed += size
        self.counted += 1
        if self.counted < DRIFT_ROWS:
            return
        mean = self.packed / self.counted
        self.packed = self.counted = 0
        if not self.best or mean < self.best:
            self.best = mean
        elif mean >= DRIFT * self.best and self.seen >= EARLY_AFTER and not self.training:
            self.drifted = True

    def trained(self, dict_id: int) -> None:
        """The next rows are packed with ``dict_id``, whose own best is yet to be seen."""
        self.dictionary, self.made = dict_id, self.made + 1
        self.packed = self.counted = 0
        self.best = 0.0


_kinds: dict[tuple[int, str], _Kind] = {}
_lock = threading.Lock()


def _kind(cluster_id: int, kind: str) -> _Kind:
    """The state of a cluster's kind, from the newest stored dictionary the first time it is asked."""
    state = _kinds.get((cluster_id, kind))
    if state is not None:
        return state
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, data, count(*) OVER () FROM {_TABLE} WHERE cluster_id = %s AND kind = %s "
            "ORDER BY id DESC LIMIT 1",
            [cluster_id, kind],
        )
        row = cursor.fetchone()
    made = _Kind()
    if row is not None:
        dictionaries.add(row[0], bytes(row[1]))
        made = _Kind(dictionary=row[0], made=row[2])
    with _lock:
        return _kinds.setdefault((cluster_id, kind), made)


class Plain(NamedTuple):
    """A row's body before compression (``plain``), and what ``seal`` compresses it with."""

    data: bytes
    flags: int
    dictionary: int  # the id of the dictionary (0: none)
    state: _Kind  # the row's cluster's kind, which counts the sealed body (``_Kind.check``)


def plain(
    cluster_id: int, kind: str, payload_json: bytes, texts: compact.Texts, key: str | None = None
) -> Plain:
    """The body, before compression, of a row of ``cluster_id`` and ``kind`` whose payload is
    ``payload_json`` (with ``key``: and whose dedupe key it is, held in the body, migration 0028).
    ``seal`` makes the body of it; a batch's rows are sealed together, in one compression call a
    dictionary."""
    state = _kinds.get((cluster_id, kind)) or _kind(cluster_id, kind)
    data, flags = compact.plain_body(payload_json, texts, key)
    state.seen += 1  # writer threads may race here: a window a row or two longer does not matter
    if state.sampling():
        with _lock:
            state.samples.append(data[:SAMPLE_BYTES])
    if not state.made:  # the kind's first dictionary: trained here, and the other threads wait for it
        if state.due():
            train_due(only=(cluster_id, kind))
        elif state.training:
            state.trained_once.wait(FIRST_WAIT_S)
    return Plain(data, flags, state.dictionary, state)


def seal(plains: Sequence[Plain]) -> list[bytes]:
    """The bodies of ``plains``, in order (``compact.pack_plains``)."""
    bodies = compact.pack_plains([(p.data, p.flags, p.dictionary) for p in plains], dictionaries)
    for one, body in zip(plains, bodies, strict=True):
        # Counted against the dictionary it was packed with while that is still its kind's.
        if one.dictionary and one.dictionary == one.state.dictionary:
            one.state.check(len(body))
    return bodies


def pack(
    cluster_id: int, kind: str, payload_json: bytes, texts: compact.Texts, key: str | None = None
) -> bytes:
    """The ``body`` of one row (``plain``, then ``seal``)."""
    return seal([plain(cluster_id, kind, payload_json, texts, key)])[0]


_Due = list[tuple[tuple[int, str], _Kind, list[bytes | bytearray | memoryview]]]


def train_due(*, background: bool = False, only: tuple[int, str] | None = None) -> list[int]:
    """Train and store the dictionaries whose rows are due (``_Kind.due``), outside a transaction only:
    each is committed before a row names it. Returns the ids stored. With ``background`` on PostgreSQL,
    hands them to this process's trainer thread and returns at once (nothing stored yet: ``[]``);
    ``wait_trained`` waits for it. SQLite takes one writer at a time: there they are trained here. With
    ``only`` (a cluster id and kind), that kind's dictionary alone."""
    if connection.in_atomic_block:
        return []
    with _lock:  # taken at once: a writer thread that comes next finds nothing due
        due = [
            (key, state, state.samples)
            for key, state in _kinds.items()
            if state.due() and (only is None or key == only)
        ]
        for _key, state, _samples in due:
            state.samples, state.seen, state.training, state.drifted = [], 0, True, False
    if not due:
        return []
    if background and connection.vendor == "postgresql":
        _trainer().put(due)
        return []
    return _train(due)


_jobs: queue.Queue[_Due] | None = None
_jobs_pid = 0  # the process that started the trainer: a forked child (a Celery worker) starts its own


def _trainer() -> queue.Queue[_Due]:
    """The queue of this process's trainer thread, started the first time a batch hands it work."""
    global _jobs, _jobs_pid
    with _lock:
        if _jobs is None or _jobs_pid != os.getpid():
            _jobs, _jobs_pid = queue.Queue(), os.getpid()
            threading.Thread(
                target=_train_forever, args=(_jobs,), name="payload-dictionaries", daemon=True
            ).start()
        return _jobs


def _train_forever(jobs: queue.Queue[_Due]) -> None:
    while True:
        due = jobs.get()
        try:
            _train(due)
        except Exception:  # broad: the trainer outlives a failure; the kind trains again at its next rows
            log.exception("training zstd dictionaries failed")
        finally:
            connections.close_all()  # this thread's connection: no session stays open between jobs
            jobs.task_done()


def wait_trained() -> None:
    """Return once the dictionaries handed to the trainer thread are stored (or failed)."""
    if _jobs is not None and _jobs_pid == os.getpid():
        _jobs.join()


def _train(due: _Due) -> list[int]:
    made = []
    for (cluster_id, kind), state, samples in due:
        try:
            made += _train_one(cluster_id, kind, state, samples)
        finally:
            state.training = False
            state.trained_once.set()
    return made


def _train_one(
    cluster_id: int, kind: str, state: _Kind, samples: list[bytes | bytearray | memoryview]
) -> list[int]:
    """Train, store and commit one kind's dictionary, then let its next rows use it: ``[its id]``."""
    n = len(samples)
    try:
        data = compact.train(samples, DICTIONARY_BYTES)
    except zstandard.ZstdError as exc:  # too little data to learn from: compressed without one
        log.info("no zstd dictionary for cluster %s's %s rows from %d samples: %s", cluster_id, kind, n, exc)
        state.made += 1  # the next window is longer, with more to learn from
        return []
    try:
        with connection.cursor() as cursor:  # autocommit: committed when it returns
            cursor.execute(
                f"INSERT INTO {_TABLE} (cluster_id, kind, samples, data, created_at) "
                "VALUES (%s, %s, %s, %s, %s) RETURNING id",
                [cluster_id, kind, n, data, timezone.now()],
            )
            dict_id = cursor.fetchone()[0]
    except DatabaseError as exc:  # the batch is stored all the same; the next rows train again
        log.warning("zstd dictionary for cluster %s's %s rows not stored: %s", cluster_id, kind, exc)
        return []
    dictionaries.add(dict_id, data)  # before a packer can read its id below
    state.trained(dict_id)
    return [dict_id]


def unpack(stored: bytes | memoryview | str, texts: compact.Texts) -> tuple[Any, str | None]:
    """The payload of a stored row and the dedupe key its body holds (None: the row holds the key's
    text): ``stored`` is its body, or the JSON text of a row stored before bodies. Readers of many rows
    unpack them in batches (``unpack_many``)."""
    return unpack_many([stored], [texts])[0]


def unpack_many(
    stored: Sequence[bytes | memoryview | str], texts: Sequence[compact.Texts]
) -> list[tuple[Any, str | None]]:
    """``unpack`` of each stored payload (with the same row's ``texts``), in order: the bodies' frames
    decompressed together (``compact.unpack_bodies``)."""
    out: list[tuple[Any, str | None]] = []
    bodies: list[bytes] = []
    at: list[int] = []
    for i, one in enumerate(stored):
        body = _body_of(one)
        if body is None:
            out.append((orjson.loads(one), None))
            continue
        out.append((None, None))
        bodies.append(body)
        at.append(i)
    if bodies:
        unpacked = compact.unpack_bodies(bodies, [texts[i] for i in at], dictionaries)
        for i, (data, key) in zip(at, unpacked, strict=True):
            out[i] = (orjson.loads(data), key)
    return out


def _body_of(stored: bytes | memoryview | str) -> bytes | None:
    """A stored payload's body, or None when it is the JSON text of a row stored before bodies (a payload
    is an object, a body starts with a flags byte)."""
    if isinstance(stored, str):
        return None
    raw = bytes(stored)
    return None if raw[:1] == b"{" else raw


def keys_of(stored: Sequence[bytes | memoryview | str], texts: Sequence[compact.Texts]) -> list[str | None]:
    """The dedupe key each stored payload's body holds (with the same row's ``texts``), in order, without
    decoding the payloads (None: the row holds the key's text, or holds a payload stored before bodies);
    the bodies' frames decompressed together (``compact.body_keys``)."""
    out: list[str | None] = [None] * len(stored)
    bodies: list[bytes] = []
    at: list[int] = []
    for i, one in enumerate(stored):
        if (body := _body_of(one)) is not None:
            bodies.append(body)
            at.append(i)
    for i, key in zip(at, compact.body_keys(bodies, [texts[i] for i in at], dictionaries), strict=True):
        out[i] = key
    return out


def forget() -> None:
    """Forget what this process knows of the stored dictionaries (tests: a flushed database), once the
    trainer thread is done with what it was given."""
    global dictionaries
    wait_trained()
    with _lock:
        _kinds.clear()
        dictionaries = compact.Dictionaries(load=_load)
