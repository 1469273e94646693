"""List + watch through the real kubernetes client against the demo cluster."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from collectors.kube import watch as watch_module
from collectors.kube.watch import StepResult
from collectors.models import CollectorState
from tests.waits import wait_for
from timelines import derivation
from timelines.lifecycle.observation import Kind, Source
from timelines.models import Interval, Pod
from timelines.observation_rows import field_is

from .conftest import CLUSTER, FAST, stored

pytestmark = pytest.mark.django_db


def state(resource: str) -> CollectorState:
    return CollectorState.objects.get(cluster__name=CLUSTER, resource=resource)


def api_states(uid: str) -> list[str]:
    return list(
        Interval.objects.filter(cluster__name=CLUSTER, pod_uid=uid, lane="api")
        .order_by("start")
        .values_list("state", flat=True)
    )


def wait_for_open_watch(sim, timeout: float = 30.0) -> None:
    """Until the demo cluster holds a watch request open (the step listed and is now watching)."""
    wait_for(lambda: sim.server._httpd.open_watches(), "a watch request open", timeout, interval=0.01)


class VirtualClock:
    """Stands for the ``time`` module in collectors/kube/watch.py: ``monotonic()`` reads ``now``, which only
    the test moves; everything else is the real module's."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def test_list_then_watch_stores_every_kind(sim):
    """GIVEN the mixed demo cluster WHEN every resource is listed and then watched
    THEN pods, events, PDBs, nodes and all four workload kinds are stored, and later changes arrive."""
    for resource in (
        "pods",
        "events",
        "poddisruptionbudgets",
        "nodes",
        "deployments",
        "statefulsets",
        "daemonsets",
        "replicasets",
    ):
        result = sim.step(resource)
        assert result.ok, result.error
        assert result.action == "list"
        assert state(resource).resource_version == result.resource_version != ""
    assert {o.pod_uid for o in stored(Kind.POD)} == sim.uids("pods")
    assert {o.payload["uid"] for o in stored(Kind.PDB)} == sim.uids("poddisruptionbudgets") != set()
    assert {o.name for o in stored(Kind.NODE)} == {
        n["metadata"]["name"] for n in sim.store.iter_objects("nodes")
    }
    for resource, kind in (
        ("deployments", "Deployment"),
        ("statefulsets", "StatefulSet"),
        ("daemonsets", "DaemonSet"),
        ("replicasets", "ReplicaSet"),
    ):
        assert {o.payload["uid"] for o in stored(Kind.WORKLOAD, field_is(("kind",), kind))} == sim.uids(
            resource
        )
    assert len(stored(Kind.EVENT)) > 0
    assert all(o.source == Source.API for o in stored((Kind.POD, Kind.EVENT, Kind.NODE)))

    before = sim.uids("pods")
    sim.spawn(3)
    sim.remove(sorted(before)[0])
    sim.advance(10)
    after = sim.uids("pods")
    assert after - before and before - after
    result = sim.step("pods")
    assert result.ok and result.action == "watch" and result.events > 0
    assert {o.pod_uid for o in stored(Kind.POD)} >= after
    assert {o.pod_uid for o in stored(Kind.POD_DELETED)} >= before - after
    assert state("pods").resource_version == result.resource_version
    assert state("pods").events_total == result.events + len(before)


def test_bookmarks_move_the_resource_version(sim):
    """GIVEN a watch on a quiet resource WHEN other resources change THEN BOOKMARKs carry the newer
    resourceVersion into CollectorState (the client's own Watch would not track them)."""
    sim.step("statefulsets")
    listed = int(state("statefulsets").resource_version)
    sim.advance(5)  # pods change; statefulsets do not
    assert sim.store.rv > listed
    result = sim.step("statefulsets")
    assert result.ok and result.events == 0 and result.bookmarks > 0
    assert int(state("statefulsets").resource_version) == sim.store.rv


def test_expired_watch_relists_and_reconciles(sim):
    """GIVEN a stored watch position WHEN the history is compacted while a pod is created and another
    is force-deleted THEN the watch gets 410, the step relists, no pod is lost, and the pod that vanished
    during the gap gets a synthetic deletion carrying its last state."""
    assert sim.step("pods").ok
    listed = sim.uids("pods")
    victim = sorted(listed)[0]
    created = sim.spawn(2)
    sim.remove(victim)
    sim.server.cluster.compact()

    result = sim.step("pods")

    assert result.ok, result.error
    assert result.expired and result.action == "list"
    assert {o.pod_uid for o in stored(Kind.POD)} >= sim.uids("pods") | created
    (gone,) = stored(Kind.POD_DELETED, pod_uids=[victim])
    assert gone.source == Source.SYNTHETIC
    assert gone.payload["watch"] == "RELIST_GONE" and gone.payload["uid"] == victim
    assert result.synthetic_deletions == 1
    assert all(o.pod_uid == victim for o in stored(Kind.POD_DELETED, source=Source.SYNTHETIC))
    st = state("pods")
    assert st.relists_total == 2 and st.resource_version == result.resource_version
    # Through the derive stage: every pod has its timeline, and the vanished one ends deleted.
    derivation.drain()
    assert set(Pod.objects.filter(cluster__name=CLUSTER).values_list("uid", flat=True)) >= sim.uids(
        "pods"
    ) | {victim}
    assert Pod.objects.get(cluster__name=CLUSTER, uid=victim).deleted_at is not None
    assert api_states(victim)[-1] == "deleted"

    again = sim.step("pods")  # the next step watches from the relist's version: nothing expires
    assert again.ok and again.action == "watch" and not again.expired


def test_dropped_connection_resumes_from_the_stored_version(sim, monkeypatch):
    """GIVEN a watch in progress WHEN the server cuts the connection mid-stream THEN what arrived before
    the cut is stored, and the next step resumes from that version: nothing is lost, nothing relisted."""
    from timelines import store

    sim.step("pods")
    first = sim.spawn(2)
    later: set[str] = set()
    saved_uids: set[str] = set()
    first_saved = threading.Event()
    save_observations = store.save_observations

    def noting_save(cluster, batch, *args, **kwargs):
        batch = list(batch)
        saved = save_observations(cluster, batch, *args, **kwargs)
        saved_uids.update(getattr(o, "pod_uid", None) for o in batch)
        if first <= saved_uids:
            first_saved.set()
        return saved

    monkeypatch.setattr(store, "save_observations", noting_save)

    def cut_then_change() -> None:  # the sim side only: the database stays on the test's thread
        # Cut once the step stored the first pods' events: the cut is then mid-stream, after them.
        if first_saved.wait(30):
            sim.server.drop_watches("reset")
        later.update(sim.spawn(2))

    cutter = threading.Thread(target=cut_then_change)
    cutter.start()
    cut = sim.step("pods")
    cutter.join(10)

    assert cut.error is not None and cut.stored >= len(first)
    reached = state("pods").resource_version
    assert {o.pod_uid for o in stored(Kind.POD, pod_uids=first)} == first

    result = sim.step("pods")

    assert result.ok and result.action == "watch" and not result.expired
    assert {o.pod_uid for o in stored(Kind.POD)} >= first | later | sim.uids("pods")
    st = state("pods")
    assert st.relists_total == 1 and st.errors_total == 1
    assert int(reached) < int(result.resource_version)
    # Through the derive stage: every pod seen before and after the cut has its timeline.
    derivation.drain()
    derived = set(
        Interval.objects.filter(cluster__name=CLUSTER, lane="api").values_list("pod_uid", flat=True)
    )
    assert derived >= first | later | sim.uids("pods")


def test_duplicated_event_is_stored_once(sim):
    sim.step("pods")
    (uid,) = sim.spawn(1)
    sim.server.cluster.redeliver_last()

    result = sim.step("pods")

    assert result.ok and result.duplicates >= 1
    latest = stored(Kind.POD, pod_uids=[uid], order=("-observed_at",))[0]
    assert len(stored((Kind.POD,), keys=[latest.dedupe_key])) == 1


def test_malformed_line_is_logged_counted_and_skipped(sim, caplog):
    sim.step("pods")
    errors_before = state("pods").errors_total
    (before,) = sim.spawn(1)
    sim.server.cluster.inject_malformed()  # a truncated line, between two pods in the stream
    (after,) = sim.spawn(1)

    result = sim.step("pods")

    assert result.ok and result.malformed == 1
    assert stored(Kind.POD, pod_uids=[before])
    assert stored(Kind.POD, pod_uids=[after])  # the stream goes on past the bad line
    st = state("pods")
    assert st.errors_total == errors_before + 1 and "malformed watch line" in st.last_error
    assert any("malformed watch line" in r.getMessage() for r in caplog.records)


def test_node_heartbeats_are_dropped_at_the_source(sim):
    """GIVEN stored nodes WHEN a node only heartbeats THEN nothing is stored; WHEN it is cordoned
    THEN that change is stored."""
    sim.step("nodes")
    node = next(
        n["metadata"]["name"] for n in sim.store.iter_objects("nodes") if not n["spec"].get("unschedulable")
    )
    count = len(stored(Kind.NODE, name=node))

    def heartbeat(obj):
        for cond in obj["status"]["conditions"]:
            cond["lastHeartbeatTime"] = "2030-01-01T00:00:00Z"

    for _ in range(3):
        sim.server.cluster.update_node(node, heartbeat)
    result = sim.step("nodes")
    assert result.ok and result.events >= 3 and result.dropped >= 3
    assert len(stored(Kind.NODE, name=node)) == count

    sim.server.cluster.cordon(node)
    result = sim.step("nodes")
    assert result.ok and result.stored >= 1
    assert stored(Kind.NODE, name=node, order=("-observed_at", "-id"))[0].payload["unschedulable"] is True


def test_stale_continue_token_restarts_the_list(sim):
    """GIVEN a paged list WHEN its continue token expires between pages THEN the list starts over and
    completes; the expiry is counted as an error."""
    pages = []

    def between_pages() -> bool:
        pages.append(1)
        if len(pages) == 1:  # after the first page: a write, then a compaction past the list's version
            sim.spawn(1)
            sim.server.cluster.compact()
        return True

    result = sim.step("pods", heartbeat=between_pages, tunables=replace(FAST, list_page_size=4))

    assert result.ok, result.error
    assert {o.pod_uid for o in stored(Kind.POD)} >= sim.uids("pods")
    st = state("pods")
    assert st.errors_total == 1 and "continue token expired" in st.last_error
    assert st.relists_total == 1
    assert len(pages) == 1 + -(-len(sim.uids("pods")) // 4)  # one page, then the whole list again


def test_events_fall_back_to_core_v1_where_events_k8s_io_is_missing(make_sim):
    """GIVEN an API server without events.k8s.io/v1 (404, as older clusters answer) WHEN events are
    collected THEN the collector lists and watches core/v1 events instead, and stores them alike."""
    sim = make_sim("drain-blocked-by-pdb", absent_groups=("events.k8s.io",))
    result = sim.step("events")
    assert result.ok, result.error
    assert result.action == "list" and result.listed > 0
    events = stored(Kind.EVENT)
    assert len(events) == result.listed
    assert {o.payload["reason"] for o in events} >= {"Scheduled"}
    sim.spawn(1)
    sim.advance(5)
    assert sim.step("events").ok
    assert len(stored(Kind.EVENT)) > result.listed


@pytest.mark.parametrize(
    ("resource", "kind", "deleted_kind", "model"),
    [
        ("poddisruptionbudgets", Kind.PDB, Kind.PDB_DELETED, "PodDisruptionBudget"),
        ("replicasets", Kind.WORKLOAD, Kind.WORKLOAD_DELETED, "Workload"),
        ("nodes", Kind.NODE, Kind.NODE_DELETED, "Node"),
    ],
)
def test_expired_watch_reconciles_pdbs_workloads_and_nodes(sim, resource, kind, deleted_kind, model):
    """GIVEN stored PDBs, ReplicaSets or nodes WHEN one vanishes while the history is compacted
    THEN the relist gives it a synthetic deletion and its current-state row is marked deleted."""
    from timelines import models

    assert sim.step(resource).ok
    victim = sorted(sim.store.iter_objects(resource), key=lambda o: o["metadata"]["name"])[0]
    meta = victim["metadata"]
    with sim.server.cluster.engine.lock:
        sim.store.delete(resource, meta.get("namespace") or "", meta["name"])
    sim.server.cluster.compact()

    result = sim.step(resource)

    assert result.ok and result.expired and result.synthetic_deletions == 1
    (gone,) = stored(deleted_kind)
    assert gone.source == Source.SYNTHETIC and gone.name == meta["name"]
    derivation.drain()  # the derive stage projects the rows (a worker's job; here and now)
    row_model = getattr(models, model)
    key = {"name": meta["name"]} if model == "Node" else {"uid": meta["uid"]}
    assert row_model.objects.get(cluster__name=CLUSTER, **key).deleted_at is not None
    assert any(o.name != meta["name"] for o in stored(kind))  # the others are still there


@pytest.mark.django_db(transaction=True)
def test_a_burst_is_stored_when_the_stream_pauses_not_at_the_batch_deadline(sim):
    """GIVEN a listed cluster and a watch whose batches would otherwise wait 30 s (batch_seconds)
    WHEN three pods appear and the stream then goes quiet
    THEN their observations are stored while the watch request is still open, not when the step ends
    (both 30 s away; the test ends the watch itself once it has seen them) (on PostgreSQL through the step's writer threads, committed where another connection sees them)."""
    patient = replace(FAST, watch_timeout_s=30, batch_seconds=30.0)
    assert sim.step("pods", tunables=patient).ok  # the list
    done = threading.Event()
    results: list[StepResult] = []
    step = threading.Thread(target=lambda: (results.append(sim.step("pods", tunables=patient)), done.set()))
    step.start()
    try:
        wait_for_open_watch(sim)
        uids = sim.spawn(3)
        # well before the step ends (30 s)
        wait_for(lambda: len(stored("pod", pod_uids=uids)) >= 3, "the three pods stored", 20)
        assert len({o.pod_uid for o in stored("pod", pod_uids=uids)}) == 3
        assert not done.is_set(), "stored only when the step ended"
    finally:
        sim.server.drop_watches("close")  # the watch ends now, cleanly, not after its 30 s
        step.join(10)
    assert results and results[0].ok and results[0].events >= 3


@pytest.mark.django_db(transaction=True)
def test_a_stored_burst_is_counted_and_its_version_saved_while_the_watch_stays_open(sim, monkeypatch):
    """GIVEN a listed cluster and a watch that would write its progress only every 30 s (PROGRESS_S)
    WHEN three pods appear and the stream then goes quiet
    THEN once their batches are stored, the step counts them and saves the version they reached before
    the watch request ends: it does not wait for the next line, bookmark or the step's end (the count
    came up to a second late, and with it the benchmark's clock and the version a restart resumes from)."""
    monkeypatch.setattr(watch_module, "PROGRESS_S", 30.0)
    patient = replace(FAST, watch_timeout_s=30)
    assert sim.step("pods", tunables=patient).ok  # the list
    listed = state("pods")
    done = threading.Event()
    results: list[StepResult] = []
    step = threading.Thread(target=lambda: (results.append(sim.step("pods", tunables=patient)), done.set()))
    step.start()
    try:
        wait_for_open_watch(sim)
        sim.spawn(3)
        reached = str(sim.store.rv)
        # well before the step ends (30 s)
        wait_for(lambda: state("pods").resource_version == reached, f"version {reached} saved", 20)
        saved = state("pods")
        assert not done.is_set(), "the version was saved only when the step ended"
        assert saved.resource_version == reached
        assert saved.events_total >= listed.events_total + 3
    finally:
        sim.server.drop_watches("close")  # the watch ends now, cleanly, not after its 30 s
        step.join(15)
    assert results and results[0].ok and results[0].events >= 3


def test_a_steps_busy_time_ends_when_its_last_batch_was_stored_not_when_it_was_counted(sim, monkeypatch):
    """GIVEN a listed cluster and a burst of pods, and a step's thread that counts each stored batch 100 s
    late (as when it is parsing or waiting on the stream)
    WHEN one watch step replays the burst
    THEN its ``busy_seconds`` (bench/watch.py's clock) ends when the writers stored the last batch, not
    when the step's thread got round to counting it.

    The step reads a virtual clock that moves only where this test moves it (1 s per stored batch, 100 s
    before each count), so the answer is exact whatever the machine's load: no wall-clock tolerance."""
    from timelines import store
    from timelines import writer as writer_module

    assert sim.step("pods").ok  # the list
    sim.spawn(6)
    sim.advance(2)
    clock = VirtualClock()
    done: list[float] = []  # the virtual time each batch was stored at
    save_observations, stored = store.save_observations, watch_module._Stepper._stored

    def timed_save(*args, **kwargs):
        saved = save_observations(*args, **kwargs)
        clock.now += 1.0  # storing a batch takes a second
        done.append(clock.now)
        return saved

    def late(self, *args, **kwargs):
        clock.now += 100.0  # the step's thread counts it 100 s later
        return stored(self, *args, **kwargs)

    monkeypatch.setattr(store, "save_observations", timed_save)
    monkeypatch.setattr(watch_module._Stepper, "_stored", late)
    monkeypatch.setattr(watch_module, "time", clock)  # the step's start
    monkeypatch.setattr(writer_module, "time", clock)  # each batch's stored time (timelines/writer.py)
    # In a test's transaction the batches are stored on the step's thread, one after the other.
    result = sim.step("pods", tunables=replace(FAST, batch_size=4))
    assert result.ok and result.stored >= 6 and len(done) >= 2
    # The step started at virtual 0; counted late, it would end 100 s after its last store.
    assert result.busy_seconds == max(done)


def test_progress_is_written_once_per_interval_and_whole_when_the_step_ends(sim, monkeypatch):
    """GIVEN a listed cluster and a watch that stores a burst in many small batches
    WHEN one step replays it
    THEN its progress (events, resourceVersion) is written fewer times than batches were stored, and
    when the step ends the stored version is the one it reached and every event is counted."""
    from collectors.kube import state as collector_state
    from timelines import store

    small = replace(FAST, watch_timeout_s=1, batch_size=4)
    assert sim.step("pods", tunables=small).ok  # the list
    before = state("pods").events_total
    sim.spawn(12)
    sim.advance(3)  # their kubelets start them: more events per pod
    writes, batches = [], []
    record_events, save_observations = collector_state.record_events, store.save_observations
    monkeypatch.setattr(
        collector_state, "record_events", lambda *a, **k: (writes.append(k), record_events(*a, **k))[1]
    )
    monkeypatch.setattr(
        store, "save_observations", lambda *a, **k: (batches.append(1), save_observations(*a, **k))[1]
    )
    result = sim.step("pods", tunables=small)
    assert result.ok and result.events >= 24
    assert len(batches) >= result.events // small.batch_size
    assert 1 <= len(writes) < len(batches)
    assert state("pods").resource_version == result.resource_version == str(sim.store.rv)
    assert state("pods").events_total == before + result.events


def test_a_first_list_reads_no_snapshots_back_and_a_relist_does(sim, monkeypatch):
    """GIVEN nothing stored of a kind WHEN it is listed THEN the reconcile does not read back every
    snapshot just stored (nothing can have vanished; it doubled a first list's time and memory); a later
    relist, over stored snapshots, reconciles (the test above checks what it finds)."""
    from collectors.kube import watch

    reads: list[str] = []
    alive = watch._alive_in_store

    def counted(cluster, spec):
        reads.append(spec.name)
        return alive(cluster, spec)

    monkeypatch.setattr(watch, "_alive_in_store", counted)
    assert sim.step("pods").ok
    assert reads == []
    sim.spawn(1)
    sim.server.cluster.compact()
    result = sim.step("pods")
    assert result.ok and result.expired and result.action == "list"
    assert reads == ["pods"]


def test_arrival_stamps_go_on_from_one_watch_step_to_the_next(sim, monkeypatch):
    """GIVEN a clock that stands still (the tests' virtual clock; a burst stamped microseconds ahead of the
    wall clock) WHEN one watch step stores three pods' ADDED and the next step, in the same instant, the
    last one's deletion THEN the deletion is stamped after its ADDED: ordered by arrival, a pod's snapshots
    are in the order the watch delivered them, across steps (a new step started its stamps again at the
    clock's time, before the last step's, and a pod read Succeeded then Running in test_findings_truth)."""
    from .conftest import on_virtual_time

    on_virtual_time(monkeypatch, sim.server.cluster.engine)
    assert sim.step("pods").ok  # the list
    spawned = sim.spawn(3)
    assert sim.step("pods").ok  # the three ADDED, stamped one microsecond apart
    added = stored(Kind.POD, pod_uids=spawned, order=("observed_at",))
    last = added[-1].pod_uid
    sim.remove(last)
    assert sim.step("pods").ok  # its DELETED, in the same instant
    kinds = [o.kind for o in stored((Kind.POD, Kind.POD_DELETED), pod_uids=[last], order=("observed_at",))]
    assert kinds[-1] == Kind.POD_DELETED, kinds
