"""The one way observations reach the store: batching, back-pressure, and what each batch did.

Every input hands its observations to a ``StoreWriter``: the watch (``collectors/kube/watch.py``), kubelet
logs (``collectors/kubelet_logs.py``, the command, the HTTP endpoint and the node-proxy pull), kubelet
metrics (``collectors/kube/kubelet.py``), OTLP spans (``collectors/ingest_http.py``), audit events
(``collectors/ingest_audit.py``), kubectl output (``manage.py ingest_k8s_json``) and an imported bundle
(``dashboard/export/importer.py``, through its ``ImportSession``). The writer

* **batches**: it holds what it is given and hands a batch to the store (``store.save_observations``) when
  it holds ``batch_size`` observations (or units the input counts: watch events), when the input says so
  (``flush``: a list's last page, a paused stream, the end of a file), or, with ``batch_seconds``, once
  that long has passed since the last hand-over (``aged``, which the watch asks while it waits on its
  stream);
* **pushes back**: with ``threads`` (the watch on PostgreSQL, the audit command), batches are stored on
  that many threads of their own while the input goes on parsing (the watch's full batches by as many
  threads in a store process, ``timelines/store_process.py``), at most one more batch waits for a
  thread, and a hand-over blocks while more than ``threads + 1`` batches are unstored: an input never
  runs further ahead of the database than that, and holds at most that many batches in memory. Without
  threads (and inside a caller's transaction, whose rows another connection could not see) each batch
  is stored on the caller's thread when it is handed over, so a slow database slows the input itself;
* **accounts**: batches are counted in the order they were handed over, on the input's thread, each once
  it and every batch before it are stored (``settle``): ``result`` totals what was received, stored,
  found stored already and refused (each refused record named, for the inputs' answers), and
  ``on_stored`` gets each batch with the progress the input attached to it (``StoredBatch``: the watch's
  events and resourceVersion), so progress is never recorded ahead of what it covers. A batch that
  failed raises its error where it is counted; nothing after it is counted.

Storing stays the store's: validation, deduplication, dirty marks and the ``observations_stored`` signal
happen in ``save_observations`` whichever input called.
"""

from __future__ import annotations

import collections
import itertools
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

from django.db import connection

from timelines import store, store_process
from timelines.lifecycle.observation import AnyObservation
from timelines.models import Cluster

BATCH_SIZE: Final = (
    5_000  # observations per batch of the file and HTTP inputs: bounded memory for multi-GB logs
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One batch stored and counted, as ``on_stored`` gets it (in the order batches were handed over)."""

    saved: store.SaveResult | None  # None: the batch held no observation (it carried progress only)
    units: int  # what the input counted for it (``count``): the watch's events, a list's objects
    mark: str | None  # the progress it reaches (``flush(mark=...)``): the watch's resourceVersion
    at: float  # ``time.monotonic()`` when it was stored, on the thread that stored it


class StoreWriter(Generic[T]):
    """One input's batches into the store (the module docstring says how): hold, hand over, count.

    ``save`` stores one batch and returns what it did (``observation_writer`` gives
    ``store.save_observations`` for a cluster; an import passes its session's). ``batch_size`` None: no
    size limit (an input whose whole request or file is one batch). Use from one thread only (the input's);
    ``close`` (or ``drain``) before reading ``result`` as the total.

    ``held`` is the batch being filled: ``add`` and ``hold`` append to it, and an input whose hot path
    cannot afford a call per observation (the watch) appends to it directly and asks ``full`` once per
    chunk. A hand-over replaces ``held`` with a new list: re-read it after ``flush``.

    ``remote`` (the watch on PostgreSQL: ``observation_writer(process=True)``) takes the full batches, a
    burst's, to another process (``timelines/store_process.py``) and gives back their Futures; they are
    counted in the same order as the batches the threads store.
    """

    def __init__(
        self,
        save: Callable[[list[T]], store.SaveResult],
        *,
        batch_size: int | None = BATCH_SIZE,
        batch_seconds: float | None = None,
        threads: int = 0,
        name: str = "store",
        on_stored: Callable[[StoredBatch], None] | None = None,
        remote: Callable[[list[T]], Future[tuple[store.SaveResult | None, float]]] | None = None,
    ) -> None:
        self.held: list[T] = []
        self.result = store.SaveResult()
        self.batch_size = batch_size
        self.batch_seconds = batch_seconds
        self._save = save
        self._threads_wanted = threads
        self._name = name
        self._on_stored = on_stored
        self._remote = remote
        self._threads: store_process.WriterThreads | None = None
        self._inline: bool | None = None  # decided at the first hand-over
        self._held_units = 0
        self._handed_at = time.monotonic()
        # Batches handed to the threads, in hand-over order, with the progress each carries (``settle``).
        self._in_flight: collections.deque[
            tuple[Future[tuple[store.SaveResult | None, float]], int, str | None]
        ] = collections.deque()

    # ---- batching ------------------------------------------------------------------------------------
    def add(self, item: T) -> None:
        """Hold one observation; hand the batch over when it is full."""
        self.held.append(item)
        if self.batch_size is not None and len(self.held) >= self.batch_size:
            self.flush()

    def hold(self, items: Iterable[T], *, units: int = 0) -> None:
        """Hold ``items`` (and ``units`` more of what the input counts); hand the batch over when full.

        The items go in whole: a batch passes ``batch_size`` by less than one call's items (a list page,
        a log line's observations); an input of many items at once gives them one by one (``add``)."""
        self.held.extend(items)
        self._held_units += units
        if self.full():
            self.flush()

    def count(self, units: int) -> None:
        """The held batch stands for ``units`` more of what the input counts (watch events: a node
        heartbeat dropped at the source is an event without an observation)."""
        self._held_units += units

    @property
    def holding(self) -> bool:
        """True when observations or counted units wait to be handed over."""
        return bool(self.held) or self._held_units > 0

    def full(self) -> bool:
        """The held batch has reached ``batch_size`` observations or counted units."""
        size = self.batch_size
        return size is not None and (len(self.held) >= size or self._held_units >= size)

    def age_left(self) -> float:
        """Seconds until the held batch is due by age (``batch_seconds`` after the last hand-over); 0 when
        due, infinite without an age limit."""
        if self.batch_seconds is None:
            return float("inf")
        return max(0.0, self.batch_seconds - (time.monotonic() - self._handed_at))

    def aged(self) -> bool:
        """``batch_seconds`` have passed since the last hand-over (never without an age limit)."""
        return self.age_left() == 0.0

    def start_batch(self) -> None:
        """The held batch's age counts from now (an input that starts receiving: the watch request opened)."""
        self._handed_at = time.monotonic()

    def flush(self, *, mark: str | None = None) -> None:
        """Hand the held batch over now, with ``mark``, the progress it reaches (given back with it in
        ``on_stored``); with nothing held and no mark, nothing is handed over. Raises the error of a
        batch that failed, when it is counted here (without threads, this batch's own)."""
        if not self.holding and mark is None:
            return
        batch, units = self.held, self._held_units
        self.held, self._held_units = [], 0
        self._hand_over(batch, units, mark)
        self._handed_at = time.monotonic()  # after any wait for a thread: the next batch's age starts now

    def discard(self) -> None:
        """Drop the held batch unstored (an input that failed part-way and whose source gives it again:
        the watch, whose next step resumes from the last version saved)."""
        self.held, self._held_units = [], 0

    # ---- storing, back-pressure and accounting ---------------------------------------------------------
    def _store(self, batch: list[T]) -> tuple[store.SaveResult | None, float]:
        # With the time it was stored at (on the thread that stored it): the input counts it later.
        saved = self._save(batch) if batch else None
        return saved, time.monotonic()

    def _hand_over(self, batch: list[T], units: int, mark: str | None) -> None:
        if self._inline is None:
            # Inside a caller's transaction another connection could not see its uncommitted rows (and
            # would not roll back with it): store on the caller's thread.
            self._inline = self._threads_wanted <= 0 or connection.in_atomic_block
        if self._inline:
            saved, at = self._store(batch)
            self._account(saved, at, units, mark)
            return
        if (
            self._remote is not None
            and self.batch_size is not None
            and len(batch) >= self.batch_size
            and store_process.available()
        ):
            future = self._remote(batch)  # a full batch: a burst, stored by another process (``remote``)
        else:
            if self._threads is None:
                self._threads = store_process.WriterThreads(self._name, self._threads_wanted)
            future = self._threads.submit(lambda: self._store(batch))
        self._in_flight.append((future, units, mark))
        self.settle(block=len(self._in_flight) > self._threads_wanted + 1)

    @property
    def in_flight(self) -> int:
        """Batches handed over and not counted yet."""
        return len(self._in_flight)

    def settle(self, *, block: bool = False) -> None:
        """Count the batches at the front of the hand-over order that are stored (with ``block``, wait for
        at least the first); raises the error of one that failed (the batches after it do not count)."""
        while self._in_flight and (block or self._in_flight[0][0].done()):
            future, units, mark = self._in_flight[0]
            saved, at = future.result()  # raises a failed batch's error
            self._in_flight.popleft()
            self._account(saved, at, units, mark)
            block = False

    def _account(self, saved: store.SaveResult | None, at: float, units: int, mark: str | None) -> None:
        if saved is not None:
            total = self.result
            total.received += saved.received
            total.stored += saved.stored
            total.duplicates += saved.duplicates
            total.rejected.extend(saved.rejected)
            total.pods_touched |= saved.pods_touched
            # Not ``stored_keys``: a whole input's keys would grow with the input (a multi-GB log).
        if self._on_stored is not None:
            self._on_stored(StoredBatch(saved, units, mark, at))

    def drain(self) -> store.SaveResult:
        """Hand the held batch over and wait until every batch handed over is stored and counted (raises
        the error of one that failed); ``result`` is then complete."""
        self.flush()
        while self._in_flight:
            self.settle(block=True)
        return self.result

    def close(self) -> store.SaveResult:
        """``drain``, then end the threads (after they stored what they were given). Raises the error of
        the first batch that failed; nothing after it is counted, and the writer is done all the same."""
        try:
            return self.drain()
        except BaseException:
            self._in_flight.clear()  # nothing after a failed batch counts
            raise
        finally:
            threads, self._threads = self._threads, None
            if threads is not None:
                threads.close()


_writer_numbers = itertools.count()  # tells the store process one input's batches from another's


def observation_writer(
    cluster: Cluster,
    *,
    batch_size: int | None = BATCH_SIZE,
    batch_seconds: float | None = None,
    threads: int = 0,
    name: str | None = None,
    on_stored: Callable[[StoredBatch], None] | None = None,
    process: bool = False,
) -> StoreWriter[AnyObservation]:
    """A writer of observations into ``cluster`` (``store.save_observations``, which refuses a read-only one)."""

    def save(batch: list[AnyObservation]) -> store.SaveResult:
        return store.save_observations(cluster, batch)  # looked up per batch: a test may wrap it

    number = next(_writer_numbers)

    def remote(batch: list[AnyObservation]) -> Future[tuple[store.SaveResult | None, float]]:
        return store_process.shared().submit(cluster, batch, writer=number, threads=threads)

    return StoreWriter(
        save,
        batch_size=batch_size,
        batch_seconds=batch_seconds,
        threads=threads,
        name=name or f"store-{cluster.name}",
        on_stored=on_stored,
        remote=remote if process and threads > 0 else None,
    )
