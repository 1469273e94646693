"""Storing batches off the input's thread: ``WriterThreads``, threads that store while an input parses
(``timelines/writer.py`` uses them for the watch on PostgreSQL and the audit command), and the watch's
bursts stored by a process of its own, beside the process that parses them.

Why a process: a collector's Python is bound by one GIL. The watch step's thread decodes the wire and makes
observations (about 20 µs an observation); the store makes each row's body, its key hash and its COPY
(about 25–35 µs beside the parsing thread). In one process the two take turns on one core, however many
writer threads there are; the second core went to PostgreSQL and idled. In two processes they run at once
(docs/storage.md, Plan item 0). That pays in a burst (a list, a backlog replayed: full batches, one after
the other); a steady trickle (a live cluster's few events a second, batches of a few events every 0.2 s)
leaves the step's process idle most of the time, and is not worth a process of 80–90 MiB. So the store
writer (``timelines/writer.py``) hands the full batches of a step here and stores the others on the step's
own threads, and a store process nobody asked for in ``IDLE_S`` ends.

How:

* ``shared()`` gives the process's ``StoreProcess``, started the first time it is asked for (and again
  after one ended, or after ``IDLE_S`` unasked): ``python -m timelines.store_process`` with the parent's settings module and its
  database settings (so a test database is the child's too). It stores with ``WriterThreads``
  (``timelines/writer.py``), each on its own database connection: as many as each input that has batches
  with it would have had in its own process (the watch: ``PODLIFE_WATCH_WRITERS`` a step), started as
  inputs come and kept.
* ``submit(cluster, batch, writer=, threads=)`` hands a batch over and returns a Future of what
  ``store.save_observations`` did with it there, and when (``time.monotonic()``, one clock for every process of the machine). The
  observations travel as tuples of their fields (``_as_fields``) and are made again without a second check
  (they were checked when made). The answer is the ``SaveResult`` without ``stored_keys`` (the watch does
  not read them), or the batch's error, raised where the step counts it.
* Messages are pickles framed by ``multiprocessing.connection.Connection`` on two pipes of their own, so
  nothing the child prints can be taken for an answer. Both ends are this code's: nothing else writes to
  them.
* The child stores what it was given and exits when its input ends: the parent closed it (``close``, at
  the parent's exit) or the parent died. A child that died fails every batch it held with
  ``StoreProcessGone`` (the step fails and its successor resumes from the last progress written, as after
  any failed batch), and the next ``shared`` starts another. One that ended before it was ready (it
  could not start: its stderr says why) makes ``available`` False for ``RETRY_S``: the writer then
  stores the watch's batches in the step's own process instead of failing every step.

Dirty marks are written in the child, in the transaction that stored the rows, as they were in the writer
threads. The ``observations_stored`` signal is sent in the parent, when a batch that stored new rows is
answered for (after the child's commit): the parent's receivers are the ones that count (the derive stage's
kick, ``timelines/tasks.py``, as the process that runs the collector has it; a test's), and a receiver's
error fails the batch, as it did in the store's own commit.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import itertools
import logging
import operator
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.db import connections

from timelines.lifecycle.observation import (
    EncodedObservation,
    Observation,
    stored_encoded_observation,
    stored_observation,
)
from timelines.signals import DERIVE_RECEIVER, observations_stored

if TYPE_CHECKING:
    from timelines.lifecycle.observation import AnyObservation
    from timelines.models import Cluster
    from timelines.store import SaveResult

log = logging.getLogger(__name__)

_FIELDS = operator.attrgetter(
    "kind", "source", "observed_at", "dedupe_key", "pod_uid", "node", "namespace", "name"
)
_ENCODED, _DECODED = 0, 1
_READY = -1  # the number of the child's first answer: it takes batches


class StoreProcessGone(RuntimeError):
    """The store process ended before it answered for a batch."""


def _as_fields(batch: list[AnyObservation]) -> list[tuple[Any, ...]]:
    """A batch as tuples of plain fields, which pickle in C (a slotted frozen dataclass does not)."""
    out = []
    for obs in batch:
        if type(obs) is EncodedObservation:
            out.append((_ENCODED, *_FIELDS(obs), obs.payload_json))
        elif type(obs) is Observation:
            out.append((_DECODED, *_FIELDS(obs), obs.payload))
        else:
            raise TypeError(f"expected an Observation, got {type(obs).__name__}")
    return out


def _from_fields(rows: list[tuple[Any, ...]]) -> list[AnyObservation]:
    """``_as_fields`` undone: the same observations, not checked again (they were, when made)."""
    return [
        stored_encoded_observation(*row[1:]) if row[0] == _ENCODED else stored_observation(*row[1:])
        for row in rows
    ]


_Job = tuple[Callable[[], Any], "Future[Any]"]


class WriterThreads:
    """Threads that store batches while the input parses the next, each on its own database connection.

    Appending observations (and marking their keys dirty) is idempotent and order-free, so ``count``
    batches are stored at once. ``submit`` hands a job over (blocking while one already waits for a
    thread: at most one queued) and returns its Future. Shutdown: ``close`` lets the queued jobs finish,
    then ends the threads, which close their connections.
    """

    def __init__(self, name: str, count: int) -> None:
        self._jobs: queue.Queue[_Job | None] = queue.Queue(1)
        self._name = name
        self._threads: list[threading.Thread] = []
        self.grow(max(1, count))

    @property
    def count(self) -> int:
        return len(self._threads)

    def grow(self, more: int) -> None:
        """Start ``more`` threads besides those running (the store process, as more inputs use it)."""
        for _ in range(more):
            thread = threading.Thread(target=self._run, name=f"{self._name}-{self.count}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def submit(self, job: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((job, future))
        return future

    def close(self) -> None:
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        try:
            while (item := self._jobs.get()) is not None:
                job, future = item
                try:
                    future.set_result(job())
                except BaseException as exc:  # handed to the input's thread, which raises it where it counts
                    future.set_exception(exc)
        finally:
            connections.close_all()  # this thread's connections only


class StoreProcess:
    """One child process storing batches (the module docstring). Thread-safe: every thread of the parent
    may submit; answers are matched to their batches by a number."""

    def __init__(self) -> None:
        from django.conf import settings
        from django.db import connection

        from_parent, to_child = os.pipe()  # (read end, write end)
        from_child, to_parent = os.pipe()
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        env.setdefault("DJANGO_SETTINGS_MODULE", settings.SETTINGS_MODULE)
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "timelines.store_process", str(from_parent), str(to_parent)],
                pass_fds=(from_parent, to_parent),
                env=env,
                stdin=subprocess.DEVNULL,
                cwd=root,
            )
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self._out = Connection(to_child, readable=False)
        self._in = Connection(from_child, writable=False)
        self._lock = threading.Lock()  # one message at a time on the pipe; ``_pending`` with it
        # Batch number -> (its Future, its cluster's id)
        self._pending: dict[int, tuple[Future[tuple[SaveResult | None, float]], int]] = {}
        self._numbers = itertools.count()
        self._gone: str | None = None
        self.asked = time.monotonic()  # when ``shared`` last gave it out
        self._ready = threading.Event()
        self._out.send_bytes(pickle.dumps(dict(connection.settings_dict), protocol=pickle.HIGHEST_PROTOCOL))
        self._reader = threading.Thread(target=self._read, name="store-process-answers", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self._gone is None

    @property
    def pid(self) -> int:
        return self._child.pid

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Wait until the child has set Django up and takes batches (a benchmark's warm-up: a batch handed
        over before waits in the pipe meanwhile); False if it did not within ``timeout``."""
        return self._ready.wait(timeout)

    @property
    def holding(self) -> bool:
        """Batches were handed over and not answered for yet."""
        return bool(self._pending)

    def submit(
        self, cluster: Cluster, batch: list[AnyObservation], *, writer: int = 0, threads: int = 1
    ) -> Future[tuple[SaveResult | None, float]]:
        """Hand ``batch`` over to be stored into ``cluster``; the Future gives (what was done, when).
        ``writer`` tells one input's batches from another's: the child stores with ``threads`` threads for
        each input that has batches with it, as that input's own writer threads would have."""
        future: Future[tuple[SaveResult | None, float]] = Future()
        if not batch:
            future.set_result((None, time.monotonic()))
            return future
        number = next(self._numbers)  # one bytecode: atomic under the GIL
        message = pickle.dumps(
            (number, writer, max(1, threads), cluster, _as_fields(batch)), protocol=pickle.HIGHEST_PROTOCOL
        )
        with self._lock:
            if self._gone is not None:
                raise StoreProcessGone(self._gone)
            self._pending[number] = (future, cluster.pk)
            try:
                self._out.send_bytes(message)
            except OSError as exc:
                del self._pending[number]
                raise StoreProcessGone(f"the store process took no more batches: {exc}") from exc
        return future

    def close(self, timeout: float = 60.0) -> None:
        """Let the child store what it holds and exit (at the parent's exit)."""
        with self._lock:
            if self._gone is None:
                self._gone = "the store process was closed"
            with contextlib.suppress(OSError):
                self._out.close()
        try:
            self._child.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("store process %d did not end within %.0f s: killed", self._child.pid, timeout)
            self._child.kill()
            self._child.wait()
        self._reader.join(timeout)

    def _read(self) -> None:
        try:
            while True:
                number, ok, value, at = pickle.loads(self._in.recv_bytes())
                if number == _READY:
                    self._ready.set()
                    continue
                with self._lock:
                    future, cluster_id = self._pending.pop(number)
                if ok and value.stored:
                    try:  # the signal the child's commit would have sent, sent here (the module docstring)
                        observations_stored.send(sender=type(value), cluster_id=cluster_id)
                    except Exception as exc:  # as a receiver's error in the store's own commit: the batch's
                        ok, value = False, exc
                if ok:
                    future.set_result((value, at))
                else:
                    future.set_exception(value)
        except (EOFError, OSError):
            pass
        code = self._child.wait()
        if not self._ready.is_set():  # it could not start (its stderr says why): not again for a while
            _failed_to_start(f"ended (exit code {code}) before it took a batch")
        with self._lock:
            reason = f"the store process ended (exit code {code}) before it answered for this batch"
            if self._gone is None:
                self._gone = reason
            pending, self._pending = self._pending, {}
            self._in.close()
        for future, _cluster_id in pending.values():
            future.set_exception(StoreProcessGone(reason))


_shared: StoreProcess | None = None
_shared_lock = threading.Lock()


IDLE_S = 60.0  # a store process nobody asked for this long ends (``_end_when_idle``)
RETRY_S = 60.0  # after one that could not start, none is started for this long (``available``)
_failed_start: float | None = None


def _failed_to_start(what: str) -> None:
    global _failed_start
    _failed_start = time.monotonic()
    log.error(
        "the store process %s: the watch stores its batches in its own process for %.0f s", what, RETRY_S
    )


def available() -> bool:
    """False for ``RETRY_S`` after a store process ended before it was ready (a broken environment: the
    watch then stores in its own process, as with ``PODLIFE_WATCH_STORE_PROCESS`` off, instead of failing
    every step)."""
    failed = _failed_start
    return failed is None or time.monotonic() - failed >= RETRY_S


def shared() -> StoreProcess:
    """This process's store process, started now if it has none alive."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.alive:
            try:
                _shared = StoreProcess()
            except OSError as exc:  # no such interpreter, no more processes or pipes
                _failed_to_start(f"could not be started ({exc})")
                raise StoreProcessGone(f"the store process could not be started: {exc}") from exc
            threading.Thread(
                target=_end_when_idle, args=(_shared,), name="store-process-idle", daemon=True
            ).start()
        _shared.asked = time.monotonic()
        return _shared


def _end_when_idle(process: StoreProcess) -> None:
    """End ``process`` once nobody asked for it for ``IDLE_S`` and it holds no batch: a Celery worker's
    child whose burst is over (a relist, a backlog replayed) does not keep a process of 80–90 MiB for a
    trickle its own threads store. A batch handed over right after ``shared`` (which counts as asking) never meets a closed one."""
    global _shared
    while True:
        time.sleep(IDLE_S / 4)
        with _shared_lock:
            if _shared is not process or not process.alive:
                return
            if time.monotonic() - process.asked >= IDLE_S and not process.holding:
                process.close()
                _shared = None
                return


def current() -> StoreProcess | None:
    """This process's store process if it has one alive (a benchmark adds up its CPU)."""
    found = _shared
    return found if found is not None and found.alive else None


def close_shared() -> None:
    """End this process's store process, if it has one, once it stored what it was given (at exit; a test
    that started one)."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared.close()
            _shared = None


def _forget_after_fork() -> None:
    """A forked child (a Celery prefork worker) starts its own: its parent's pipes are not its to use."""
    global _shared, _shared_lock
    _shared, _shared_lock = None, threading.Lock()


atexit.register(close_shared)
os.register_at_fork(after_in_child=_forget_after_fork)


# ---- the child -----------------------------------------------------------------------------------------
def _answer(out: Connection, lock: threading.Lock, number: int, future: Future[Any]) -> None:
    """Send the parent what batch ``number`` did (``future``'s result or error), when."""
    exc = future.exception()
    if exc is None:
        saved = future.result()
        saved.stored_keys = set()  # not read by the watch: not sent
        answer: tuple[Any, ...] = (number, True, saved, time.monotonic())
    else:
        answer = (number, False, _portable(exc), time.monotonic())
    with lock:
        out.send_bytes(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it pickles and comes back, else a RuntimeError that names it."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _serve(source: Connection, out: Connection) -> None:
    import django

    django.setup()
    from django.db import connections

    from podlife_site import tuning
    from timelines import payloads, store

    observations_stored.disconnect(dispatch_uid=DERIVE_RECEIVER)  # the parent sends it (``_read``)
    connections.settings["default"].update(pickle.loads(source.recv_bytes()))  # the parent's: a test's too
    tuning.start(tuning.Role.COLLECTOR)
    writers = WriterThreads("store-process", 1)
    tuning.freeze_after_warm_up()  # what it keeps for good (Django, psycopg, the store) out of the GC's walks
    out.send_bytes(pickle.dumps((_READY, True, None, time.monotonic()), protocol=pickle.HIGHEST_PROTOCOL))
    lock = threading.Lock()  # the answers' pipe, and ``held``
    held: collections.Counter[int] = collections.Counter()  # batches held, by input (``submit``'s writer)

    def done(number: int, writer: int, future: Future[Any]) -> None:
        with lock:
            held[writer] -= 1
            if not held[writer]:
                del held[writer]
        _answer(out, lock, number, future)

    try:
        while True:
            try:
                message = source.recv_bytes()
            except EOFError:
                break
            with tuning.gc_paused():  # a batch's tuples, kept until stored
                number, writer, threads, cluster, rows = pickle.loads(message)
            with lock:
                held[writer] += 1
                wanted = threads * len(held)  # as each input's own threads: never more, never fewer
            if wanted > writers.count:
                writers.grow(wanted - writers.count)

            def job(cluster: Any = cluster, rows: list[tuple[Any, ...]] = rows) -> Any:
                with tuning.gc_paused():  # as the watch step's burst (podlife_site/tuning.py)
                    return store.save_observations(cluster, _from_fields(rows))

            future = writers.submit(job)
            future.add_done_callback(functools.partial(done, number, writer))
    finally:
        writers.close()
        payloads.wait_trained()  # a dictionary being trained is stored before the process ends


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
