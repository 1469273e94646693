"""Celery tasks of the pipeline (the timelines app), and the kick that queues the derive stage. Each task is
a few lines around a module a test drives without Celery.

* ``derive_dirty``: the derive stage (``timelines/derivation.py``): claims dirty keys, derives, writes,
  pushes, for at most ~20 s, then hands what is left to a successor. Queued by the kick below after every
  store (one queued at a time) and every few seconds by beat, which also picks up the keys of a worker
  that died holding them once their claim expired. It runs on its own queue (``<deployment>.derive``), so
  long watch steps never hold it up.
* ``mark_open_pods``: pods still terminating or cleaning up are marked dirty every minute (a termination
  becomes "stuck" with time, with no new observation).
* ``ensure_partitions`` (beat, hourly): PostgreSQL's observation partitions of the spans ahead
  (``timelines/partitions.py``).
* ``close_partitions`` (beat, hourly): PostgreSQL's partitions of days that have ended get their indexes
  rebuilt packed full (``partitions.close_past``).
* ``apply_retention`` (beat, hourly): drops observations older than ``PODLIFE_RETENTION_DAYS`` (on
  PostgreSQL whole partitions; ``timelines/store.py``).

The kick (``request``, the waker, ``on_observations_stored``) lives here, beside the task it queues: the
derive stage knows nothing of Celery or Redis and imports nothing of this module, so the two form no
import cycle. The schedule is declared in settings (``CELERY_BEAT_SCHEDULE``). Tasks take ids and
primitives.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import threading
import time
from typing import Any

from celery import current_app
from django.conf import settings

from podlife_site.celery_types import task
from timelines import derivation, partitions, store

log = logging.getLogger(__name__)


@task(name="timelines.derive_dirty", ignore_result=True, acks_late=True)
def derive_dirty_task() -> int:
    return run_task()


@task(name="timelines.mark_open_pods", ignore_result=True)
def mark_open_pods_task() -> int:
    marked = derivation.mark_open_pods()
    if marked:
        request()
    return marked


@task(name="timelines.ensure_partitions", ignore_result=True)
def ensure_partitions() -> list[str]:
    return partitions.ensure_configured()


@task(name="timelines.close_partitions", ignore_result=True)
def close_partitions() -> list[str]:
    return partitions.close_past()


@task(name="timelines.apply_retention", ignore_result=True)
def apply_retention() -> int:
    return store.apply_retention(settings.PODLIFE_RETENTION_DAYS)


# -- the kick: asking for the derive stage to run -----------------------------------------------------------
_redis_client: Any = None
_redis_lock = threading.Lock()
PENDING_TTL_MS = 10_000  # a queued derive task not started by then is presumed lost (the beat re-kicks too)


def _redis() -> Any:
    global _redis_client
    with _redis_lock:
        if _redis_client is None:
            import redis

            _redis_client = redis.Redis.from_url(str(settings.REDIS_URL))
        return _redis_client


def _pending_key() -> str:
    return f"{settings.PODLIFE_DEPLOYMENT}:derive:pending"


def _eager() -> bool:
    return bool(current_app.conf.task_always_eager)


def request() -> None:
    """Ask for the derive stage to run: inline where Celery tasks run eagerly (the embedded default),
    else one ``timelines.derive_dirty`` task queued unless one is queued and not started yet."""
    if _eager():
        derivation.drain()
        return
    try:
        if _redis().set(_pending_key(), worker_name(), nx=True, px=PENDING_TTL_MS):
            derive_dirty_task.apply_async()
    except Exception:  # the beat's periodic run derives it anyway; storing must not fail for this
        log.warning("could not queue the derive stage", exc_info=True)


def run_task(*, budget_s: float = 20.0) -> int:
    """The derive task's body: drain for at most ``budget_s`` seconds, then queue a successor if work is
    left (so a long backlog never holds a worker past its time limit)."""
    if not _eager():
        _redis().delete(_pending_key())  # from now on a new mark queues another task
    done = 0
    started = time.monotonic()
    while True:
        result = derivation.run_batch()
        if result is None:
            return done
        done += result.claimed
        if time.monotonic() - started >= budget_s:
            request()  # work is left: a successor task goes on with it
            return done
        if result.claimed >= derivation.batch_size():
            request()  # a backlog: one more task, for an idle worker to share it


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class _Waker:
    """Asks for the derive stage from a thread of its own, so that a store's commit does not wait for it.

    The collector's writers commit a batch every few milliseconds during a burst; asking on their thread
    (one Redis ``SET NX``, and a task queued when none is pending) made each batch wait on Redis, and the
    first ask on the broker's imports (docs/performance-history.md "Watch", "The foreign key"). Here a commit only
    sets a flag; the thread clears it and then asks, so a commit made while it asks is asked for again:
    no wake-up is lost, and a burst costs one ask per ask's round trip instead of one per batch. What is
    still wanted when the process exits is asked for then (and the beat's periodic run derives it
    anyway)."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a forked child starts without the thread

    def _reset(self) -> None:
        self._wanted = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def want(self) -> None:
        self._wanted.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="derive-waker", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            try:
                request()
            except Exception:  # the thread must outlive one failed ask (request() logs Redis's own)
                log.exception("could not ask for the derive stage")

    def flush(self) -> None:
        if self._wanted.is_set():
            self._wanted.clear()
            request()


_waker = _Waker()
atexit.register(_waker.flush)


def on_observations_stored(sender: Any, **kwargs: Any) -> None:
    """``observations_stored`` receiver (connected in ``TimelinesConfig.ready``): derive inline where
    Celery tasks run eagerly (the embedded default: the caller sees its timelines when the store returns),
    else ask from the waker's thread."""
    if _eager():
        request()
    else:
        _waker.want()
