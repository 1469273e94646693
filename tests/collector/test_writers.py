"""The watch step's writer threads (``collectors.kube.watch._Writers``, which replaced the ordered writer
with the one-way flow): batches are stored at once on several threads, each result or error comes back on
its own Future, and closing lets what was handed over finish. (That progress counts only the stored
prefix of the batches is the step's ``_settle``, exercised through real watches in test_watch.py.)"""

from __future__ import annotations

import threading

import pytest

from collectors.kube.watch import _Writers


def test_batches_are_stored_at_once_on_separate_threads():
    """GIVEN three writer threads WHEN three saves are handed over that can only return once all three
    are running (a barrier) THEN each Future holds its own save's result, from three different threads:
    one writer, or saves run one after the other, would break the barrier instead."""
    barrier = threading.Barrier(3, timeout=10)
    threads: list[str] = []

    def save(i: int) -> str:
        barrier.wait()
        threads.append(threading.current_thread().name)
        return f"batch {i}"

    writers = _Writers("test-writers", threads=3)
    try:
        futures = [writers.submit(lambda i=i: save(i)) for i in range(3)]
        assert [f.result(timeout=20) for f in futures] == ["batch 0", "batch 1", "batch 2"]
    finally:
        writers.close()
    assert len(set(threads)) == 3 and all(name.startswith("test-writers-") for name in threads)


def test_a_failed_save_comes_back_on_its_own_future_and_the_others_are_stored():
    stored: list[int] = []

    def save(i: int) -> int:
        if i == 2:
            raise RuntimeError("database went away")
        stored.append(i)
        return i

    writers = _Writers("test-writers", threads=2)
    try:
        futures = [writers.submit(lambda i=i: save(i)) for i in range(5)]
        with pytest.raises(RuntimeError, match="database went away"):
            futures[2].result(timeout=10)
        assert [f.result(timeout=10) for i, f in enumerate(futures) if i != 2] == [0, 1, 3, 4]
    finally:
        writers.close()
    assert sorted(stored) == [0, 1, 3, 4]


def test_close_lets_every_batch_handed_over_finish():
    done: list[int] = []
    gate = threading.Event()

    def save(i: int) -> None:
        gate.wait(10)
        done.append(i)

    writers = _Writers("test-writers", threads=2)
    futures = [writers.submit(lambda i=i: save(i)) for i in range(3)]  # two running, one queued
    gate.set()
    writers.close()
    assert all(f.done() for f in futures) and sorted(done) == [0, 1, 2]
