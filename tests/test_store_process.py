"""The watch's store in a process of its own (``timelines/store_process.py``): batches stored by the child
and counted here, its errors raised here with their type, a child that died failing what it held and
replaced, the ``observations_stored`` signal sent here. The watch itself goes through it in
tests/collector (PostgreSQL)."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.db import transaction
from hypothesis import given
from hypothesis import strategies as st

from tests.test_store_writer import obs as writer_obs
from timelines import store, store_process
from timelines.lifecycle.observation import AnyObservation, EncodedObservation, Kind, Observation, Source
from timelines.models import Observation as ObservationRow
from timelines.signals import observations_stored
from timelines.writer import StoreWriter, observation_writer

T0 = datetime(2024, 6, 7, 6, 54, 47, 123456, tzinfo=UTC)


UID = "0f5a3c1e-7d2b-4c6a-9e8f-1a2b3c4d5e6f"  # canonical: stored as 16 bytes (``pod_id``)


def obs(i: int, *, uid: str = UID) -> Observation:
    return writer_obs(i, uid=uid)


def writer_of(cluster_name: str, batch_size: int = 3):
    return observation_writer(store.cluster_for(cluster_name), batch_size=batch_size, threads=2, process=True)


def stored_by_a_child(w: StoreWriter[AnyObservation], *numbers: int) -> store_process.StoreProcess:
    """Hand ``w`` one full batch of these observations, wait until it is stored; the process that did."""
    for i in numbers:
        w.add(obs(i))
    w.drain()
    child = store_process.current()
    assert child is not None
    return child


@pytest.fixture
def stored_here(monkeypatch):
    """The batches this process's own store gets (the rest were stored by the child)."""
    batches: list[list[str]] = []
    save = store.save_observations

    def recorded(cluster, batch, **kwargs):
        batches.append([o.dedupe_key for o in batch])
        return save(cluster, batch, **kwargs)

    monkeypatch.setattr(store, "save_observations", recorded)
    return batches


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_full_batches_are_stored_by_the_child_the_rest_here_all_counted_here(stored_here, derive_stage_off):
    """GIVEN a writer in process mode WHEN 7 observations go through it in batches of 3, one of them
    already stored THEN the two full batches were stored by the child (another process), the last one by
    this process's threads: 6 rows, and the total counts 7 received, 6 stored, 1 duplicate, and the pods
    touched."""
    w = writer_of("c1")
    for i in [0, 1, 2, 0, 3, 4, 5]:
        w.add(obs(i, uid=UID if i < 4 else "uid-b"))
    total = w.close()
    assert (total.received, total.stored, total.duplicates) == (7, 6, 1)
    assert total.pods_touched == {UID, "uid-b"}
    assert ObservationRow.objects.filter(cluster__name="c1").count() == 6
    assert stored_here == [["k5"]]
    child = store_process.current()
    assert child is not None and child.pid != os.getpid()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_child_s_error_is_raised_here_with_its_type():
    """GIVEN an imported (read-only) cluster WHEN the watch's writer hands it a batch THEN the child's
    refusal reaches the input as the PermissionError it is, naming the cluster, and nothing is stored."""
    with transaction.atomic():
        cluster = store.begin_import("imported").cluster
    w = observation_writer(cluster, batch_size=2, threads=2, process=True)
    w.add(obs(1))
    w.add(obs(2))
    with pytest.raises(PermissionError, match="'imported' is read-only"):
        w.close()
    assert not ObservationRow.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_child_that_died_fails_what_it_held_and_the_next_one_stores(derive_stage_off):
    """GIVEN a store process that stored a batch WHEN it is stopped, handed another batch and killed THEN
    that batch fails with StoreProcessGone, naming how the process ended (the watch step fails; its
    successor resumes from the progress written) AND the next writer gets a new process, which stores."""
    w = writer_of("c1", batch_size=2)
    child = stored_by_a_child(w, 0, 1)
    os.kill(child.pid, signal.SIGSTOP)  # the next batch waits in the pipe, unanswered
    w.add(obs(2))
    w.add(obs(3))
    os.kill(child.pid, signal.SIGKILL)
    with pytest.raises(store_process.StoreProcessGone, match=r"ended \(exit code -9\)"):
        w.close()
    assert not child.alive
    with pytest.raises(store_process.StoreProcessGone):
        child.submit(store.cluster_for("c1"), [obs(4)])
    again = writer_of("c1", batch_size=2)
    again.add(obs(2))
    again.add(obs(3))
    assert again.close().stored == 2
    replacement = store_process.current()
    assert replacement is not None and replacement.pid != child.pid
    assert ObservationRow.objects.filter(cluster__name="c1").count() == 4


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_store_process_nobody_asks_for_ends(monkeypatch, derive_stage_off):
    """GIVEN a store process that stored a batch WHEN nobody asks for it for ``IDLE_S`` THEN it ends (a
    worker child that ran one watch step does not keep it) AND the next batch starts another."""
    monkeypatch.setattr(store_process, "IDLE_S", 0.4)
    child = stored_by_a_child(writer_of("c1", batch_size=2), 0, 1)
    deadline = time.monotonic() + 20
    while _exists(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _exists(child.pid)  # ended and reaped
    assert store_process.current() is None
    again = writer_of("c1", batch_size=2)
    again.add(obs(2))
    again.add(obs(3))
    assert again.close().stored == 2


def assert_stored_here_meanwhile(stored_here: list[list[str]]) -> None:
    """No store process is started for now: a new writer's full batch is stored by this process."""
    assert not store_process.available()
    again = writer_of("c1", batch_size=2)
    again.add(obs(0))
    again.add(obs(1))
    assert again.close().stored == 2
    assert stored_here == [["k0", "k1"]]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_store_process_that_cannot_start_leaves_the_watch_storing_here(monkeypatch, stored_here, caplog):
    """GIVEN a store process that cannot start (its settings module is missing) WHEN a full batch is
    handed over THEN that batch fails with StoreProcessGone and the error log says why the watch stores
    here now AND the next writer's full batches are stored by this process, for ``RETRY_S``."""
    monkeypatch.setattr(store_process, "_failed_start", None)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "podlife_site.no_such_settings")
    w = writer_of("c1", batch_size=2)
    w.add(obs(0))
    w.add(obs(1))
    with pytest.raises(store_process.StoreProcessGone, match="exit code 1"):
        w.close()
    assert (
        "ended (exit code 1) before it took a batch: the watch stores its batches in its own" in caplog.text
    )
    assert_stored_here_meanwhile(stored_here)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_store_process_that_cannot_be_started_fails_the_hand_over_then_stores_here(
    monkeypatch, stored_here
):
    """GIVEN no interpreter to start the store process with WHEN a full batch is handed over THEN the
    hand-over fails with StoreProcessGone naming why AND the next writer's full batches are stored here."""
    monkeypatch.setattr(store_process, "_failed_start", None)
    monkeypatch.setattr(store_process.sys, "executable", "/nonexistent/python")
    w = writer_of("c1", batch_size=2)
    w.add(obs(0))
    with pytest.raises(store_process.StoreProcessGone, match="could not be started.*nonexistent"):
        w.add(obs(1))
    assert_stored_here_meanwhile(stored_here)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_stored_signal_is_sent_here_for_batches_that_stored_rows(derive_stage_off):
    """GIVEN a receiver of ``observations_stored`` in this process WHEN two batches store new rows and a
    third only rows already stored THEN the receiver hears of the first two, with their cluster's id."""
    heard: list[int] = []

    def receiver(sender, cluster_id, **kwargs):
        heard.append(cluster_id)

    observations_stored.connect(receiver, dispatch_uid="test-store-process")
    try:
        w = writer_of("c1", batch_size=2)
        for i in [0, 1, 2, 3, 0, 1]:
            w.add(obs(i))
        w.close()
    finally:
        observations_stored.disconnect(dispatch_uid="test-store-process")
    assert heard == [store.cluster_for("c1").pk] * 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_receiver_s_error_fails_its_batch_as_in_the_store_s_own_commit(derive_stage_off):
    """GIVEN a receiver of ``observations_stored`` that fails WHEN a batch is stored THEN its error is the
    batch's, raised where the input counts it (the rows are stored: the signal follows the commit)."""

    def receiver(sender, cluster_id, **kwargs):
        raise RuntimeError("the receiver broke")

    observations_stored.connect(receiver, dispatch_uid="test-store-process")
    try:
        w = writer_of("c1", batch_size=2)
        w.add(obs(0))
        w.add(obs(1))
        with pytest.raises(RuntimeError, match="the receiver broke"):
            w.close()
    finally:
        observations_stored.disconnect(dispatch_uid="test-store-process")
    assert ObservationRow.objects.filter(cluster__name="c1").count() == 2


names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,18}[a-z0-9])?", fullmatch=True)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)


@given(
    st.lists(
        st.tuples(st.booleans(), names, st.one_of(st.none(), names), st.dictionaries(texts, texts)),
        max_size=5,
    )
)
def test_observations_cross_to_the_child_as_they_are(specs):
    """Any observation, decoded or encoded, made again in the child from its fields is the same: every
    field, the payload or the payload's JSON bytes."""
    batch = []
    for i, (encoded, name, uid, payload) in enumerate(specs):
        fields = {
            "kind": Kind.POD,
            "source": Source.API,
            "observed_at": T0 + timedelta(microseconds=i),
            "dedupe_key": f"pod:{i}",
            "pod_uid": uid or None,
            "node": "n",
            "namespace": "ns",
            "name": name or "p",
        }
        if encoded:
            batch.append(EncodedObservation(**fields, payload_json=orjson.dumps(payload)))
        else:
            batch.append(Observation(**fields, payload=payload))
    again = store_process._from_fields(store_process._as_fields(batch))
    assert [type(o) for o in again] == [type(o) for o in batch]
    assert again == batch  # every field but the payload
    for before, after in zip(batch, again, strict=True):
        if isinstance(before, EncodedObservation):
            assert isinstance(after, EncodedObservation) and after.payload_json == before.payload_json
        else:
            assert isinstance(after, Observation) and after.payload == before.payload
