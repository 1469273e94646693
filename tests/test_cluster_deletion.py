"""No observation outlives its cluster; on PostgreSQL without a foreign key (migration 0019).

A writer holds its cluster's row FOR KEY SHARE while it stores (``store._LOCK_CLUSTER``); a deletion locks
the row FOR UPDATE before it reads anything (``models.ClusterQuerySet.delete``, ``Cluster.delete``). Each
order of the two is played with real threads, each on its own connection, and the tables are then read:
without the locks (the key gone) the first leaves the writer's rows behind and the second stores rows of a
cluster that no longer exists.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from timelines import store
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow


def pod(rv: int) -> Observation:
    return Observation(
        kind=Kind.POD,
        source=Source.API,
        observed_at=timezone.now(),
        dedupe_key=f"pod:uid-a:{rv}",
        pod_uid="uid-a",
        node="node-a",
        namespace="default",
        name="web-0",
        payload={"watch": "MODIFIED", "resource_version": str(rv), "uid": "uid-a"},
    )


def in_thread(work: Callable[[], None]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        finally:
            connection.close()  # the thread's own connection

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db
@pytest.mark.both_databases
def test_deleting_a_cluster_deletes_what_it_stored_on_either_database() -> None:
    """GIVEN two clusters with observations WHEN one is deleted, as an instance and as a queryset THEN
    its observations go with it and the other's stay (SQLite: the lock is a no-op, its key holds)."""
    kept, doomed, also = (store.cluster_for(n) for n in ("kept", "doomed", "also-doomed"))
    for cluster in (kept, doomed, also):
        store.save_observations(cluster, [pod(1)])
    doomed.delete()
    Cluster.objects.filter(name="also-doomed").delete()
    assert list(Cluster.objects.values_list("name", flat=True)) == ["kept"]
    assert list(ObservationRow.objects.values_list("cluster_id", flat=True)) == [kept.pk]


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_the_foreign_key_is_gone_and_the_deletion_waits_for_a_writer_then_takes_its_rows() -> None:
    """GIVEN a writer that stored a batch and has not committed WHEN the cluster is deleted (the
    instance's ``delete()``, as the admin's delete view) THEN the deletion waits for the writer's commit
    and deletes what it stored: no row of the cluster is left."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND conrelid = 'timelines_observation'::regclass"
        )
        assert cursor.fetchone()[0] == 0
    cluster = store.cluster_for("doomed")
    store.save_observations(cluster, [pod(1)])
    stored, release, deleted = threading.Event(), threading.Event(), threading.Event()

    def write() -> None:
        with transaction.atomic():
            assert store.save_observations(cluster, [pod(2), pod(3)]).stored == 2
            stored.set()
            release.wait(10)

    def delete() -> None:
        Cluster.objects.get(pk=cluster.pk).delete()
        deleted.set()

    writer = in_thread(write)
    assert stored.wait(10)
    deleter = in_thread(delete)
    assert not deleted.wait(0.5), "the deletion did not wait for the writer's lock"
    release.set()
    writer.join(10)
    deleter.join(10)
    assert deleted.is_set()
    assert not Cluster.objects.filter(pk=cluster.pk).exists()
    assert not ObservationRow.objects.filter(cluster_id=cluster.pk).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
@pytest.mark.parametrize("look_up_first", [False, True], ids=["checked-after-copy", "looked-up-first"])
def test_a_writer_waits_for_a_deletion_then_stores_nothing_and_says_why(
    look_up_first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a deletion of the cluster (a queryset's ``delete()``, as the admin's bulk action) that has not
    committed WHEN a batch of that cluster is stored THEN the store waits for the deletion, stores nothing
    and raises IntegrityError naming the cluster (what the foreign key raised). Both ways a batch goes: a
    new one's check after its COPY locks the row, a relist's look-up before it."""
    cluster = store.cluster_for("doomed")
    store.save_observations(cluster, [pod(1)])
    if look_up_first:
        monkeypatch.setattr(store, "_probe_all", {cluster.pk})
    locked, release = threading.Event(), threading.Event()
    outcome: list[BaseException | str] = []

    def delete() -> None:
        with transaction.atomic():
            Cluster.objects.filter(name="doomed").delete()
            locked.set()
            release.wait(10)

    def write() -> None:
        try:
            store.save_observations(cluster, [pod(2)])
            outcome.append("stored")
        except IntegrityError as exc:
            outcome.append(exc)

    deleter = in_thread(delete)
    assert locked.wait(10)
    writer = in_thread(write)
    writer.join(0.5)
    assert writer.is_alive(), "the writer did not wait for the deletion's lock"
    release.set()
    deleter.join(10)
    writer.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], IntegrityError), outcome
    assert f"cluster {cluster.pk} does not exist" in str(outcome[0])
    assert not ObservationRow.objects.filter(cluster_id=cluster.pk).exists()
