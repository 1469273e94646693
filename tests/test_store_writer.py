"""The store writer (``timelines/writer.py``), every input's way into the store: batches by size and age,
threads that store while the input parses (the watch's writers before the one-way flow's writer), a
bounded hand-over, and batches counted in the order they were handed over, a failed one stopping the
count. The watch's use of it (progress, the 0.5 s rule) is exercised through real watches in
tests/collector/test_watch.py; the inputs' answers in tests/ingest, tests/audit and tests/poison."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction

from timelines import store, writer
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import Observation as ObservationRow
from timelines.store_process import WriterThreads
from timelines.writer import StoredBatch, StoreWriter, observation_writer

T0 = datetime(2024, 6, 7, 6, 54, 47, tzinfo=UTC)


def obs(i: int, *, uid: str = "uid-a") -> Observation:
    """A synthetic pod-worker observation (hand-written, one per key)."""
    return Observation(
        kind=Kind.WORKER,
        source=Source.KUBELET_LOG,
        observed_at=T0 + timedelta(seconds=i),
        dedupe_key=f"k{i}",
        pod_uid=uid,
        node="node-a",
        namespace="default",
        name="web-0",
        payload={"transition": "sync_enter"},
    )


def counted(n: int) -> store.SaveResult:
    return store.SaveResult(received=n, stored=n)


# ---- the threads -------------------------------------------------------------------------------------


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

    pool = WriterThreads("test-writers", count=3)
    try:
        futures = [pool.submit(lambda i=i: save(i)) for i in range(3)]
        assert [f.result(timeout=20) for f in futures] == ["batch 0", "batch 1", "batch 2"]
    finally:
        pool.close()
    assert len(set(threads)) == 3 and all(name.startswith("test-writers-") for name in threads)


def test_a_failed_save_comes_back_on_its_own_future_and_the_others_are_stored():
    stored: list[int] = []

    def save(i: int) -> int:
        if i == 2:
            raise RuntimeError("database went away")
        stored.append(i)
        return i

    pool = WriterThreads("test-writers", count=2)
    try:
        futures = [pool.submit(lambda i=i: save(i)) for i in range(5)]
        with pytest.raises(RuntimeError, match="database went away"):
            futures[2].result(timeout=10)
        assert [f.result(timeout=10) for i, f in enumerate(futures) if i != 2] == [0, 1, 3, 4]
    finally:
        pool.close()
    assert sorted(stored) == [0, 1, 3, 4]


def test_close_lets_every_batch_handed_over_finish():
    done: list[int] = []
    gate = threading.Event()

    def save(i: int) -> None:
        gate.wait(10)
        done.append(i)

    pool = WriterThreads("test-writers", count=2)
    futures = [pool.submit(lambda i=i: save(i)) for i in range(3)]  # two running, one queued
    gate.set()
    pool.close()
    assert all(f.done() for f in futures) and sorted(done) == [0, 1, 2]


# ---- batching ----------------------------------------------------------------------------------------


def test_a_batch_goes_when_it_holds_batch_size_observations_and_the_rest_at_close():
    """GIVEN a writer of batches of 3 WHEN 7 observations are added one by one THEN two batches of 3
    are stored as they fill, and the seventh when the input closes."""
    batches: list[list[int]] = []
    w: StoreWriter[int] = StoreWriter(lambda b: (batches.append(list(b)), counted(len(b)))[1], batch_size=3)
    for i in range(7):
        w.add(i)
        assert len(batches) == (i + 1) // 3
    assert w.close().stored == 7
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]


def test_a_batch_held_past_batch_seconds_is_due_and_a_hand_over_restarts_the_clock(monkeypatch):
    """GIVEN a writer with an age limit of 0.2 s (the watch's ``batch_seconds``) on a clock the test
    moves WHEN 0.15 s pass THEN the held batch is not due, 0.05 s left; WHEN 0.05 s more pass THEN it is;
    WHEN it is handed over THEN the next batch's age counts from then."""
    now = [100.0]
    monkeypatch.setattr(writer.time, "monotonic", lambda: now[0])
    w: StoreWriter[int] = StoreWriter(lambda b: counted(len(b)), batch_size=500, batch_seconds=0.2)
    w.add(1)
    now[0] += 0.15
    assert not w.aged() and w.age_left() == pytest.approx(0.05)
    now[0] += 0.05
    assert w.aged() and w.age_left() == 0.0
    w.flush()
    assert not w.aged() and w.age_left() == pytest.approx(0.2)
    sized: StoreWriter[int] = StoreWriter(lambda b: counted(len(b)))  # no age limit: only size and flush
    now[0] += 3600
    assert not sized.aged()


def test_counted_units_fill_a_batch_and_a_mark_alone_is_handed_over():
    """GIVEN a writer of batches of 4 WHEN the input counts 4 units without an observation (node
    heartbeats the watch dropped) THEN the batch is full and goes, empty, with them; WHEN only a mark is
    flushed (a version reached by bookmarks) THEN it goes too, and nothing is asked of the store."""
    saves: list[int] = []
    got: list[StoredBatch] = []
    w: StoreWriter[int] = StoreWriter(
        lambda b: (saves.append(len(b)), counted(len(b)))[1], batch_size=4, on_stored=got.append
    )
    w.count(4)
    assert w.holding and w.full()
    w.flush(mark="41")
    w.flush(mark="42")
    w.flush()  # nothing held, no mark: nothing handed over
    assert [(b.saved, b.units, b.mark) for b in got] == [(None, 4, "41"), (None, 0, "42")]
    assert saves == []


# ---- back-pressure and accounting ------------------------------------------------------------------


def test_an_input_never_runs_more_than_threads_plus_one_batches_ahead_of_the_database():
    """GIVEN one writer thread whose first save is held up WHEN the input hands over three batches THEN
    the third hand-over returns only once the first is stored and counted: one stored, one waiting, and
    the input blocked (memory and lag bounded, whatever the database's pace)."""
    release = threading.Event()

    def save(batch: list[int]) -> store.SaveResult:
        if batch == [0]:
            release.wait(10)
        return counted(len(batch))

    got: list[StoredBatch] = []
    w: StoreWriter[int] = StoreWriter(save, batch_size=1, threads=1, on_stored=got.append)
    try:
        w.add(0)
        w.add(1)
        assert got == [] and w.in_flight == 2
        threading.Timer(0.3, release.set).start()  # the database catches up later
        w.add(2)  # blocks until batch 0 is stored
        assert [b.saved.stored for b in got if b.saved] != [] and w.in_flight <= 2
    finally:
        release.set()
        w.close()
    assert w.result.stored == 3 and len(got) == 3


def test_batches_are_counted_in_hand_over_order_and_none_after_a_failed_one():
    """GIVEN two writer threads and a second batch whose save fails WHEN four batches are handed over
    THEN the error is raised where it is counted, the first batch alone is counted (the watch saves no
    version past a batch that was not stored), and close raises it too and ends the threads."""
    got: list[StoredBatch] = []

    def save(batch: list[int]) -> store.SaveResult:
        if batch == [1]:
            raise RuntimeError("database went away")
        return counted(len(batch))

    w: StoreWriter[int] = StoreWriter(save, batch_size=None, threads=2, on_stored=got.append)
    with pytest.raises(RuntimeError, match="database went away"):
        for i in range(4):
            w.add(i)
            w.flush(mark=str(i))
        w.drain()
    with pytest.raises(RuntimeError, match="database went away"):
        w.close()
    assert [b.mark for b in got] == ["0"] and w.result.stored == 1 and w.in_flight == 0


@pytest.mark.django_db
def test_inside_a_callers_transaction_batches_are_stored_on_its_thread():
    """GIVEN a writer asked for two threads WHEN it is used inside the caller's transaction (an import,
    a test) THEN each batch is stored on the caller's thread, in that transaction, and counted at once:
    another connection could not see its uncommitted rows, nor roll back with it."""
    threads: list[int] = []

    def save(batch: list[Observation]) -> store.SaveResult:
        threads.append(threading.get_ident())
        return store.save_observations("c1", batch)

    with transaction.atomic():
        w: StoreWriter[Observation] = StoreWriter(save, batch_size=2, threads=2)
        for i in range(5):
            w.add(obs(i))
        assert w.in_flight == 0 and w.result.stored == 4
        w.close()
        assert ObservationRow.objects.count() == 5
    assert set(threads) == {threading.get_ident()}


@pytest.mark.django_db(transaction=True)
@pytest.mark.both_databases
def test_the_total_names_refused_records_and_keeps_no_keys():
    """GIVEN batches of 3 into a cluster, one record naive in time (the contract refuses it), one
    already stored WHEN 7 records go through the writer THEN the total counts each once: 5 stored, 1
    already stored, 1 refused and named by its key, the pods touched; and no stored keys are kept (a
    whole input's keys would grow with the input)."""
    store.save_observations("c1", [obs(0)])
    naive = {  # the store takes mappings too; a naive time is refused by the contract
        "kind": Kind.WORKER,
        "source": Source.KUBELET_LOG,
        "observed_at": datetime(2024, 6, 7, 7, 0),  # naive on purpose
        "dedupe_key": "k3",
        "pod_uid": "uid-b",
    }
    w = observation_writer(store.cluster_for("c1"), batch_size=3)
    for record in [obs(0), obs(1), obs(2, uid="uid-b"), naive, obs(4), obs(5), obs(6, uid="uid-c")]:
        w.add(record)
    total = w.close()
    assert (total.received, total.stored, total.duplicates) == (7, 5, 1)
    assert [r.key for r in total.rejected] == ["k3"] and "timezone-aware" in total.rejected[0].reason
    assert total.pods_touched == {"uid-a", "uid-b", "uid-c"} and total.stored_keys == set()
    assert ObservationRow.objects.filter(cluster__name="c1").count() == 6


@pytest.mark.django_db(transaction=True)
def test_a_read_only_cluster_refuses_the_first_batch():
    """GIVEN an imported (read-only) cluster WHEN an input writes to it THEN the store's refusal reaches
    the input at the first hand-over, and nothing is stored."""
    with transaction.atomic():
        cluster = store.begin_import("imported").cluster
    w = observation_writer(cluster, batch_size=2)
    w.add(obs(1))
    with pytest.raises(PermissionError, match="read-only"):
        w.add(obs(2))
    assert not ObservationRow.objects.exists()
