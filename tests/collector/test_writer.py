"""The watch step's writer: saves run at once, what follows them runs in submission order."""

from __future__ import annotations

import random
import threading
import time

import pytest

from collectors.kube.watch import _Writer


def test_then_runs_in_submission_order_after_every_earlier_save():
    """GIVEN saves that finish in random order on three threads
    WHEN twenty jobs are submitted and drained
    THEN each ``then`` sees its own save's result, in submission order, after all earlier saves ended."""
    rng = random.Random(5)
    delays = [rng.uniform(0, 0.02) for _ in range(20)]
    saved: set[int] = set()
    order: list[tuple[int, object]] = []
    lock = threading.Lock()
    overlap = threading.Semaphore(0)

    def save(i: int) -> str:
        time.sleep(delays[i])
        with lock:
            saved.add(i)
        overlap.release()
        return f"result {i}"

    def then(i: int, result: object) -> None:
        assert set(range(i + 1)) <= saved  # every batch up to this one is stored
        order.append((i, result))

    writer = _Writer("test-writer", threads=3)
    try:
        for i in range(20):
            writer.submit(lambda i=i: save(i), lambda result, i=i: then(i, result))
        writer.drain()
    finally:
        assert writer.close() is None
    assert order == [(i, f"result {i}") for i in range(20)]


def test_a_failed_save_stops_what_follows_and_is_raised_in_the_step():
    """GIVEN job 3's save fails
    THEN no ``then`` from job 3 on runs (no version is recorded past a batch that was not stored)
    AND the failure is raised by drain, once."""
    ran: list[int] = []

    def save(i: int) -> int:
        if i == 3:
            raise RuntimeError("database went away")
        return i

    writer = _Writer("test-writer", threads=2)
    try:
        with pytest.raises(RuntimeError, match="database went away"):
            for i in range(8):
                writer.submit(lambda i=i: save(i), lambda result: ran.append(result))
            writer.drain()
    finally:
        assert writer.close() is None  # already reported
    assert ran == [0, 1, 2]
