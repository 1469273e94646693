"""Issue #18, finding 5: a herd of refetches of one node view costs one read, and two publishers at once
make no false gap (the reason a herd formed in the first place)."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from dashboard.web.access import create_token
from dashboard.web.routing import websocket_urlpatterns
from dashboard.web.shared_reads import timeline_reads
from tests.flow import ingest as ingest_observations
from tests.waits import subscribed
from tests.web.factories import started_pod
from timelines import live
from timelines.lifecycle.timeline import Interval, PodTimeline

HERD = 30


def herd(url: str, token: str, n: int = HERD) -> list[requests.Response]:
    start = threading.Barrier(n)

    def get(_: int) -> requests.Response:
        start.wait()
        return requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(get, range(n)))


@pytest.mark.django_db(transaction=True)
def test_a_refetch_herd_of_one_node_costs_one_read_until_the_node_changes(
    live_server_asgi: Any, lab: Any, admin_user: Any, settings: Any
) -> None:
    """GIVEN a node watched live WHEN 30 pages refetch its timeline at once THEN the store is read once and
    all 30 get the same answer; WHEN a pod of the node then changes (a new live sequence number) THEN the
    next refetch reads again and holds the change."""
    settings.PODLIFE_SHARED_READ_S = 60.0  # as long as the test: the count must not depend on its speed
    timeline_reads.clear()
    token = create_token(admin_user)
    url = f"{live_server_asgi.url}/api/v1/clusters/lab/nodes/node-a/timeline?lanes=worker"
    group = live.group_name("node", "lab", "node-a")
    async_to_sync(live.listen)(group)  # a page listens: each derived change of the node gets a number

    answers = herd(url, token)
    assert [a.status_code for a in answers] == [200] * HERD
    assert len({a.content for a in answers}) == 1
    assert (timeline_reads.stats.reads, timeline_reads.stats.shared) == (1, HERD - 1)

    before = live.current_sequence(group)
    live_server_asgi.run_in_loop(ingest_observations, "lab", started_pod("u-herd-new", "web-herd-new"))
    assert live.current_sequence(group) > before
    again = herd(url, token, 5)
    assert {a.status_code for a in again} == {200}
    assert timeline_reads.stats.reads == 2  # one read for the new number, shared by the 5
    assert all("u-herd-new" in a.text for a in again)


@pytest.mark.django_db(transaction=True)
def test_shared_reads_never_cross_readers_with_different_grants(
    live_server_asgi: Any, lab: Any, admin_user: Any, viewer: Any, settings: Any
) -> None:
    """GIVEN a whole-cluster reader and a reader of two namespaces WHEN both refetch the same node at once
    THEN each gets its own read: the namespace reader never sees the other namespaces' pods."""
    settings.PODLIFE_SHARED_READ_S = 60.0
    timeline_reads.clear()
    url = f"{live_server_asgi.url}/api/v1/clusters/lab/nodes/node-a/timeline?lanes=worker"
    tokens = [create_token(admin_user), create_token(viewer)]
    start = threading.Barrier(2)

    def get(token: str) -> requests.Response:
        start.wait()
        return requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

    with ThreadPoolExecutor(2) as pool:
        whole, part = pool.map(get, tokens)
    assert whole.status_code == part.status_code == 200
    assert timeline_reads.stats.reads == 2
    assert "vault-0" in whole.text and "vault-0" not in part.text  # namespace "secret": not the viewer's


def pod(uid: str) -> PodTimeline:
    iv = Interval("worker", "setup", datetime.now(UTC), None, "observed")
    return PodTimeline(uid=uid, namespace="default", name=uid, node="node-a", lanes={"worker": (iv,)})


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_two_publishers_at_once_make_no_false_gap(settings: Any, admin_user: Any) -> None:
    """GIVEN a consumer of a node through the Redis pub/sub layer WHEN two derive workers publish 40
    batches each for that node at the same time THEN the consumer sees every number once, in order, and
    never tells the browser to refetch."""
    from channels.layers import channel_layers

    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [settings.REDIS_URL], "prefix": f"{settings.PODLIFE_DEPLOYMENT}:herd"},
        }
    }
    channel_layers.backends.clear()
    cluster = f"herd{datetime.now(UTC).timestamp():.0f}"  # Redis numbers outlive a test run
    from timelines.models import Cluster

    Cluster.objects.create(name=cluster)
    batches = 40

    def publisher(worker: int) -> None:
        for i in range(batches):
            live.publish_timelines(cluster, [pod(f"w{worker}-{i}")])

    async def run() -> list[dict[str, Any]]:
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/v1/nodes/{cluster}/node-a/")
        ws.scope["user"] = admin_user
        assert (await ws.connect())[0]
        assert (await ws.receive_json_from())["type"] == "hello"
        # Redis took the socket's SUBSCRIBE
        await subscribed(get_channel_layer(), live.group_name("node", cluster, "node-a"))
        workers = [threading.Thread(target=publisher, args=(w,)) for w in (1, 2)]
        for w in workers:
            w.start()
        await asyncio.get_running_loop().run_in_executor(None, lambda: [w.join() for w in workers])
        frames: list[dict[str, Any]] = []
        seen: set[str] = set()
        while len(seen) < 2 * batches:
            frame = await ws.receive_json_from(timeout=10)
            frames.append(frame)
            if frame["type"] == "refetch":
                break  # what it holds was dropped: the rest of the pods never come
            seen |= {p["pod"]["uid"] for p in frame.get("pods", [])}
        await ws.disconnect()
        return frames

    try:
        frames = async_to_sync(run)()
    finally:
        channel_layers.backends.clear()
    assert [f for f in frames if f["type"] == "refetch"] == []
    assert {f["type"] for f in frames} == {"deltas"}


@pytest.mark.django_db
def test_without_redis_the_timeline_is_read_unshared_never_a_500(
    client: Any, lab: Any, admin_user: Any, settings: Any
) -> None:
    """GIVEN Redis unreachable (the live sequence cannot be read) WHEN a node timeline is asked for THEN it
    is answered from its own read."""
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # discard port: nothing listens
    timeline_reads.clear()
    client.force_login(admin_user)
    answer = client.get("/api/v1/clusters/lab/nodes/node-a/timeline?lanes=worker")
    assert answer.status_code == 200 and "web-ok" in answer.content.decode()
    assert timeline_reads.stats.reads == 0  # not through the shared path
