"""The derive stage: dirty keys marked with what was stored, claimed by one worker at a time, never lost.

The concurrency tests run real threads, each with its own database connection, against the database the
suite runs on (PostgreSQL: ``FOR UPDATE SKIP LOCKED`` claims; issue #18, finding 3 was found there), and
real Redis for the live push (finding 5).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.db.models import Count

from tests.lifecycle.factories import ctr, pod, t
from tests.waits import subscribed, wait_for
from timelines import derivation, dirty, live, store, tasks
from timelines.derivation import thresholds_from_settings
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import DirtyBatch, DirtyKey, Interval, Marker, Node, Pod

UID = "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"


def uid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def pod_history(u: str, name: str, *, node: str = "node-a", upto: int = 3) -> list[Observation]:
    """A pod scheduled, started, then (from version 3 on) terminating; ``upto`` snapshots of it."""
    running = [ctr("app", "running", started=5.0, ready=True)]
    snaps = [
        pod(u, 1, 1.0, name=name, node=node, phase="Pending"),
        pod(u, 2, 6.0, name=name, node=node, phase="Running", start_time=1.0, containers=running),
        pod(
            u,
            3,
            9.0,
            name=name,
            node=node,
            phase="Running",
            start_time=1.0,
            containers=running,
            deletion=10.0,
        ),
    ]
    for v in range(4, upto + 1):  # status churn while it terminates
        snaps.append(
            pod(
                u,
                v,
                9.0 + v,
                name=name,
                node=node,
                phase="Running",
                start_time=1.0,
                containers=running,
                deletion=10.0,
            )
        )
    return snaps[:upto]


@pytest.mark.django_db
@pytest.mark.both_databases
def test_storing_marks_keys_in_the_same_transaction_and_deriving_clears_them():
    """GIVEN a batch of a pod's snapshots, a node snapshot and a kubelet line with only ``pod="ns/name"``
    WHEN they are stored THEN one DirtyBatch row names the pod, the node and the name; the derive stage
    folds it, derives the pod and the node, expands the name into that pod, and leaves nothing dirty."""
    node = Observation(
        Kind.NODE, Source.API, t(1.0), "node:n1:1", node="node-a", name="node-a", payload={"name": "node-a"}
    )
    line = Observation(
        Kind.KUBELET_MARKER,
        Source.KUBELET_LOG,
        t(2.0),
        "log:x",
        node="node-a",
        namespace="default",
        name="web-0",
        payload={"reason": "Killing", "message": "x"},
    )
    result = store.save_observations("prod", [*pod_history(UID, "web-0"), node, line])
    assert result.stored == 5
    (batch,) = DirtyBatch.objects.all()
    assert sorted((k[0], k[1]) for k in batch.keys) == [
        ("node", "node-a"),
        ("pod", UID),
        ("podref", "default/web-0"),
    ]
    assert store.save_observations("prod", pod_history(UID, "web-0")).stored == 0
    assert DirtyBatch.objects.count() == 1  # nothing new stored, nothing marked

    derived = derivation.drain()

    assert derived >= 4  # pod, node, podref, then the pod the podref named
    assert not DirtyBatch.objects.exists() and not DirtyKey.objects.exists()
    assert Pod.objects.get(uid=UID).name == "web-0"
    assert Node.objects.get(name="node-a").last_seen == t(1.0)
    assert Interval.objects.filter(pod_uid=UID, lane="api").exists()


@pytest.mark.django_db
@pytest.mark.both_databases
def test_a_claim_takes_at_most_its_limit_oldest_first():
    """GIVEN 50 dirty pods WHEN a worker claims 7 THEN it holds exactly 7, the oldest marks, and the next
    claim takes the following 7. (PostgreSQL ran an ``IN (… LIMIT 7 FOR UPDATE SKIP LOCKED)`` subquery
    once per row and claimed all 50.)"""
    for i in range(50):
        store.save_observations("prod", pod_history(uid(i), f"web-{i}", upto=1))
    dirty.fold()
    first = dirty.claim(dirty.new_token(), limit=7, ttl=timedelta(minutes=1))
    second = dirty.claim(dirty.new_token(), limit=7, ttl=timedelta(minutes=1))
    assert [c.key for c in first] == [uid(i) for i in range(7)]
    assert [c.key for c in second] == [uid(i) for i in range(7, 14)]
    assert DirtyKey.objects.exclude(claimed_by="").count() == 14


@pytest.mark.django_db
@pytest.mark.both_databases
def test_a_key_marked_again_while_claimed_stays_dirty():
    """GIVEN a claimed pod key WHEN the pod is marked again before the claimer finishes THEN finishing
    leaves it dirty (generation moved), and the next claim derives it again."""
    store.save_observations("prod", pod_history(UID, "web-0", upto=2))
    dirty.fold()
    token = dirty.new_token()
    (claimed,) = dirty.claim(token, limit=10, ttl=timedelta(minutes=1))
    store.save_observations("prod", pod_history(UID, "web-0", upto=3))
    dirty.fold()  # the new batch meets the claimed key: a new generation
    assert dirty.finish(token, [claimed]) == 1
    (row,) = DirtyKey.objects.all()
    assert row.claimed_by == "" and row.generation == claimed.generation + 1
    assert derivation.drain() == 1 and not DirtyKey.objects.exists()


@pytest.mark.django_db
@pytest.mark.both_databases
def test_a_worker_that_lost_its_claim_writes_nothing():
    """GIVEN a claim that expired and was taken over by another worker WHEN the first worker finishes
    THEN its transaction is rolled back (ClaimLost) and the key belongs to the second worker."""
    store.save_observations("prod", pod_history(UID, "web-0"))
    dirty.fold()
    slow = dirty.new_token()
    (claimed,) = dirty.claim(slow, limit=1, ttl=timedelta(seconds=-1))  # expired at once
    fast = dirty.new_token()
    (taken,) = dirty.claim(fast, limit=1, ttl=timedelta(minutes=1))
    assert taken.id == claimed.id
    with pytest.raises(dirty.ClaimLost):
        dirty.finish(slow, [claimed])
    assert DirtyKey.objects.get().claimed_by == fast
    assert dirty.finish(fast, [taken]) == 0 and not DirtyKey.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_two_workers_racing_never_double_a_timeline(settings: Any) -> None:
    """Issue #18, finding 3. GIVEN 60 pods whose observations keep arriving (a pods and an events watch)
    WHEN two derive workers (threads, each with its own connection) drain at the same time, round after
    round THEN no pod's intervals or markers are stored twice, no IntegrityError is raised, both workers
    derived some of the pods, and every pod ends as one derivation of all its observations makes it."""
    settings.PODLIFE_DERIVE_BATCH = 5  # small claims, so the two workers' claims interleave
    pods = {uid(i): f"web-{i}" for i in range(60)}
    store.save_observations("race", [o for u, n in pods.items() for o in pod_history(u, n, upto=2)])
    errors: list[BaseException] = []
    claims: Counter[str] = Counter()
    stop = threading.Event()
    original_claim = dirty.claim

    def counting_claim(token: str, **kwargs: Any) -> list[dirty.Claimed]:
        got = original_claim(token, **kwargs)
        claims[threading.current_thread().name] += len(got)
        return got

    def worker() -> None:
        try:
            while not stop.is_set():
                derivation.drain()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    dirty.claim = counting_claim  # type: ignore[assignment]
    try:
        threads = [threading.Thread(target=worker, name=f"derive-{i}") for i in range(2)]
        for thread in threads:
            thread.start()
        for version in range(3, 9):  # the watches store new snapshots while both derive
            store.save_observations(
                "race", [o for u, n in pods.items() for o in pod_history(u, n, upto=version)]
            )
        stop.set()
        for thread in threads:
            thread.join(60)
    finally:
        dirty.claim = original_claim  # type: ignore[assignment]
    derivation.drain()

    assert not errors, errors
    assert all(claims[f"derive-{i}"] > 0 for i in range(2)), claims
    assert not DirtyKey.objects.exists() and not DirtyBatch.objects.exists()
    doubled = (
        Interval.objects.filter(pod_uid__in=pods)
        .values("pod_uid", "lane", "start")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not doubled.exists(), list(doubled[:5])
    assert (
        not Marker.objects.values("pod_uid", "at", "reason").annotate(n=Count("id")).filter(n__gt=1).exists()
    )
    thresholds = thresholds_from_settings()
    for u, n in list(pods.items())[:10]:
        expected = derive_pod_timeline(pod_history(u, n, upto=8), thresholds=thresholds)
        got = Counter(Interval.objects.filter(pod_uid=u).values_list("lane", flat=True))
        assert got == Counter({lane: len(ivs) for lane, ivs in expected.lanes.items() if ivs}), u


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
@pytest.mark.redis
def test_concurrent_workers_push_a_groups_deltas_in_sequence(settings: Any) -> None:
    """Issue #18, finding 5. GIVEN a listener on a node's group through the Redis channel layer WHEN three
    derive workers derive pods of that node at the same time, round after round (their sends slowed at random)
    THEN the listener receives the group's messages numbered one after the other in the order they arrive:
    no false gap."""
    from channels.layers import channel_layers, get_channel_layer

    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [settings.REDIS_URL], "prefix": f"{settings.PODLIFE_DEPLOYMENT}:test"},
        }
    }
    channel_layers.backends.clear()
    node = f"seq-{os.getpid()}"
    group = live.group_name("node", "seq", node)
    received: list[int] = []
    listening, done = threading.Event(), threading.Event()

    async def listener() -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        await live.listen(group)
        await subscribed(layer, group)  # Redis took the SUBSCRIBE
        listening.set()
        try:
            while True:
                try:
                    message = await asyncio.wait_for(layer.receive(channel), 3 if done.is_set() else 30)
                except TimeoutError:
                    return
                received.append(message["seq"])
        finally:
            await layer.group_discard(group, channel)

    publishers: Counter[str] = Counter()
    original_publish = live.publish_timelines

    def counting_publish(cluster: str, timelines: Any) -> int:
        sent = original_publish(cluster, timelines)
        publishers[threading.current_thread().name] += sent
        return sent

    live.publish_timelines = counting_publish  # type: ignore[assignment]
    # Sends slowed at random, as a loaded network or Redis would: two publishers' messages could overtake
    # each other between numbering and sending, unless numbering and sending are one step: a group's
    # publish lock on other layers, one Lua script on the Redis pub/sub layer (timelines/live.py).
    layer = get_channel_layer()
    original_send = layer.group_send
    rng = random.Random(7)

    async def jittered_send(group_: str, message: dict[str, Any]) -> None:
        await asyncio.sleep(rng.uniform(0, 0.03))
        await original_send(group_, message)

    layer.group_send = jittered_send
    listen_thread = threading.Thread(target=async_to_sync(listener))
    listen_thread.start()
    errors: list[BaseException] = []
    try:
        assert listening.wait(10)
        stop = threading.Event()

        def worker() -> None:
            try:
                while not stop.is_set():
                    derivation.run_batch(limit=3)
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        workers = [threading.Thread(target=worker, name=f"derive-{i}") for i in range(3)]
        for w in workers:
            w.start()
        for version in range(1, 9):
            store.save_observations(
                "seq", [o for i in range(30) for o in pod_history(uid(i), f"p{i}", node=node, upto=version)]
            )
        derivation.drain()
        stop.set()
        for w in workers:
            w.join(60)
    finally:
        live.publish_timelines = original_publish  # type: ignore[assignment]
        layer.group_send = original_send
        done.set()
        listen_thread.join(60)
        channel_layers.backends.clear()
    assert not errors, errors
    assert sum(1 for name, n in publishers.items() if name.startswith("derive-") and n) >= 2, publishers
    assert len(received) == sum(publishers.values()) >= 5, (received, publishers)
    assert received == list(range(received[0], received[0] + len(received))), received


@pytest.mark.redis
def test_derive_tasks_go_to_the_derive_queue_only(settings: Any) -> None:
    """GIVEN the two queues WHEN a derive task and a watch step are sent THEN each lands in its own queue,
    once."""
    import redis

    from collectors.tasks import watch_step
    from timelines.tasks import derive_dirty_task

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    own, derive = settings.PODLIFE_DEPLOYMENT, f"{settings.PODLIFE_DEPLOYMENT}.derive"
    client.delete(own, derive)
    try:
        derive_dirty_task.apply_async()
        watch_step.apply_async(("c", "pods", "", "token", 0))
        assert (client.llen(own), client.llen(derive)) == (1, 1)
        assert b"timelines.derive_dirty" in client.lindex(derive, 0)
        assert b"collectors.watch_step" in client.lindex(own, 0)
    finally:
        client.delete(own, derive)


@pytest.mark.django_db
def test_metrics_show_the_derive_backlog(client: Any, settings: Any) -> None:
    """GIVEN three dirty pods, one folded WHEN /metrics is scraped THEN the backlog gauges count them."""
    from prometheus_client.parser import text_string_to_metric_families

    for i in range(3):
        store.save_observations("prod", pod_history(uid(i), f"web-{i}", upto=1))
    dirty.fold(limit=1)
    settings.PODLIFE_METRICS_TOKEN = "scrape-token"  # /metrics is closed without one
    scrape = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token")
    samples = {
        s.name: s.value
        for family in text_string_to_metric_families(scrape.content.decode())
        for s in family.samples
    }
    assert samples["podlife_derive_dirty_keys"] == 1 and samples["podlife_derive_dirty_batches"] == 2
    assert samples["podlife_derive_oldest_seconds"] > 0


@pytest.mark.django_db
def test_candidate_reads_find_exactly_what_their_filters_say() -> None:
    """GIVEN UID-less kubelet lines near and far from two pods (same name or not, on their node or not,
    inside or outside their span, other kinds, another cluster) WHEN a derivation reads the pods' candidates
    THEN it gets exactly the lines the documented filters select (on PostgreSQL through the array-bound
    statements, elsewhere through the ORM) and each pod's own observations in order."""
    cluster = store.cluster_for("reads")
    other = store.cluster_for("reads-other")
    a, b = uid(1), uid(2)
    own = pod_history(a, "web-a", node="node-a") + pod_history(b, "web-b", node="node-b", upto=2)

    def line(key: str, at: float, *, node: str, name: str = "", kind: str = Kind.WORKER) -> Observation:
        payload = {"transition": "syncloop_add"} if kind == Kind.WORKER else {"reason": "x", "message": "m"}
        return Observation(
            kind, Source.KUBELET_LOG, t(at), key, node=node, namespace="default" if name else None,
            name=name or None, payload=payload,
        )  # fmt: skip

    lines = [
        line("named-a", 3.0, node="node-z", name="web-a"),  # same name, any node: a candidate
        line("named-c", 3.0, node="node-a", name="web-c"),  # another name: not
        line("node-a-in", 4.0, node="node-a", kind=Kind.KUBELET_MARKER),  # nameless, inside a's span
        line("node-a-late", 9.0 + 200, node="node-a"),  # within the 5 min margin after a's last
        line("node-a-far", 9.0 + 3600, node="node-a"),  # an hour after: not
        line("node-b-in", 2.0, node="node-b"),
        line("node-q", 4.0, node="node-q"),  # a node neither pod was on
    ]
    store.save_observations(cluster, own + lines)
    store.save_observations(other, [line("named-a", 3.0, node="node-z", name="web-a")])

    read = derivation.pod_observations(cluster, [b, a])
    got = set(derivation._named_facts(cluster, {("default", "web-a"), ("default", "web-b")}))
    assert {o.dedupe_key for _, o in got} == {"named-a"}
    spans = {"node-a": (t(1.0), t(9.0)), "node-b": (t(1.0), t(6.0))}
    assert {o.dedupe_key for _, o in derivation._nameless_facts(cluster, spans)} == {
        "node-a-in",
        "node-a-late",
        "node-b-in",
    }
    for u in (a, b):
        mine = [o for _, o in read.by_uid[u] if o.pod_uid == u]
        assert [o.dedupe_key for o in mine] == [
            o.dedupe_key for o in sorted(mine, key=lambda o: o.observed_at)
        ]
        assert len(mine) == (3 if u == a else 2)
    assert all(isinstance(i, int) and i > 0 for u in (a, b) for i, _ in read.by_uid[u])


def test_the_waker_asks_off_the_storing_thread_and_loses_no_wake_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """GIVEN the waker (the store's commits ask for the derive stage through it) WHEN commits want it
    while it is asking THEN the storing thread never asks itself, and a want that came during an ask is
    asked for once more afterwards (coalesced: not once per want)."""
    asked: list[str] = []
    wanted_again: list[bool] = []  # at each ask: whether another ask is already due after it
    first_ask, go_on = threading.Event(), threading.Event()

    def ask() -> None:
        asked.append(threading.current_thread().name)
        wanted_again.append(waker._wanted.is_set())
        first_ask.set()
        go_on.wait(5)

    monkeypatch.setattr(tasks, "request", ask)
    waker = tasks._Waker()
    waker.want()
    assert first_ask.wait(5)
    for _ in range(10):  # ten commits during the first ask
        waker.want()
    go_on.set()
    wait_for(lambda: len(asked) >= 2, "the second ask")
    # No third ask comes: nothing was wanted since the second began, and nothing will be.
    assert wanted_again[1] is False
    assert asked == ["derive-waker", "derive-waker"]
    exiting = tasks._Waker()
    exiting._wanted.set()  # wanted, and its thread has not asked yet
    exiting.flush()  # at exit: asked for on the exiting thread
    exiting.flush()  # once
    assert asked == ["derive-waker", "derive-waker", threading.current_thread().name]


@pytest.mark.django_db
@pytest.mark.redis
def test_a_store_queues_the_derive_stage_through_the_waker(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """GIVEN Celery with its broker (not eager) WHEN a batch is stored THEN one derive task is queued
    shortly after the commit, from the waker's thread."""
    import redis
    from celery import current_app

    assert not current_app.conf.task_always_eager
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    derive = f"{settings.PODLIFE_DEPLOYMENT}.derive"
    client.delete(derive, tasks._pending_key())
    try:
        with django_capture_on_commit_callbacks(execute=True):
            store.save_observations("waker", pod_history(UID, "web-0", upto=1))
        wait_for(lambda: client.llen(derive) >= 1, "a derive task queued", 5)
        assert client.llen(derive) == 1
        assert b"timelines.derive_dirty" in client.lindex(derive, 0)
    finally:
        client.delete(derive, tasks._pending_key())
