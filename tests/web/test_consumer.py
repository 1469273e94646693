"""The live node consumer: permission, coalescing, sequence gaps, namespace filtering; Origin check; and
the same path through the Redis pub/sub channel layer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from tests.flow import ingest as ingest_observations
from tests.web.conftest import UID_EVIL
from tests.web.factories import started_pod
from timelines.live import group_name
from timelines.web.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)
GROUP = group_name("node", "lab", "node-a")


def timeline(uid: str, namespace: str = "default", name: str = "p") -> dict[str, Any]:
    return {
        "schema": "podlife.timeline/v2",
        "cluster": "lab",
        "pod": {"uid": uid, "namespace": namespace, "name": name, "node": "node-a"},
        "lanes": {"worker": [], "api": []},
        "markers": [],
        "findings": [],
    }


def delta(seq: int, uid: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "type": "timeline.delta",
        "schema": "podlife.delta/v2",
        "group": GROUP,
        "seq": seq,
        "timelines": [timeline(uid, namespace)],
    }


async def connect(user: Any, path: str = "/ws/v1/nodes/lab/node-a/") -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


def test_hello_then_deltas_for_readable_namespaces_only(viewer: Any) -> None:
    async def run() -> None:
        ws = await connect(viewer)
        hello = await ws.receive_json_from()
        assert hello == {"type": "hello", "group": GROUP, "max_fps": 10}
        layer = get_channel_layer()
        await layer.group_send(GROUP, delta(1, "u-secret", "secret"))  # not readable: dropped
        await layer.group_send(GROUP, delta(2, "u-ok", "default"))
        frame = await ws.receive_json_from(timeout=2)
        assert frame["type"] == "deltas" and [p["pod"]["uid"] for p in frame["pods"]] == ["u-ok"]
        assert frame["seq"] == 2
        await ws.disconnect()

    async_to_sync(run)()


def test_bursts_are_coalesced_to_at_most_ten_frames_a_second(admin_user: Any, lab: Any) -> None:
    async def run() -> None:
        ws = await connect(admin_user)
        await ws.receive_json_from()
        layer = get_channel_layer()
        started = time.monotonic()
        for seq in range(1, 201):  # 200 updates of 20 pods in about a second
            await layer.group_send(GROUP, delta(seq, f"u-{seq % 20}"))
            await asyncio.sleep(0.005)
        sending = time.monotonic() - started
        frames, seen = [], {}
        # receive_nothing, not a timeout on receive: a receive timeout cancels the application.
        while time.monotonic() - started < 4 and not await ws.receive_nothing(timeout=0.4):
            frame = await ws.receive_json_from()
            frames.append((time.monotonic(), frame))
            for p in frame.get("pods", []):
                seen[p["pod"]["uid"]] = frame["seq"]
        assert frames and [f["type"] for _, f in frames] == ["deltas"] * len(frames)
        assert (
            len(seen) == 20 and frames[-1][1]["seq"] == 200
        )  # nothing lost: every pod's newest state arrived
        # Frames are read after the fact, so count them against how long the updates kept coming: at most
        # ten a second, plus the first (sent at once) and the last (the tail after the burst).
        assert 3 <= len(frames) <= 10 * sending + 2, (len(frames), sending)
        await ws.disconnect()

    async_to_sync(run)()


def test_sequence_gap_tells_the_browser_to_refetch(admin_user: Any, lab: Any) -> None:
    async def run() -> None:
        ws = await connect(admin_user)
        await ws.receive_json_from()
        layer = get_channel_layer()
        await layer.group_send(GROUP, delta(7, "u-a"))
        assert (await ws.receive_json_from(timeout=2))["type"] == "deltas"
        await layer.group_send(GROUP, delta(9, "u-b"))  # 8 went missing
        frame = await ws.receive_json_from(timeout=2)
        assert frame["type"] == "refetch" and frame["seq"] == 9
        assert "expected 8, got 9" in frame["reason"]
        await layer.group_send(GROUP, delta(10, "u-c"))  # back in step
        assert (await ws.receive_json_from(timeout=2))["type"] == "deltas"
        await ws.disconnect()

    async_to_sync(run)()


@pytest.mark.parametrize(
    ("who", "status"), [("anonymous", 401), ("nobody", 404), ("viewer-other-cluster", 404)]
)
def test_users_without_permission_get_an_error_frame_and_a_close(
    request: Any, lab: Any, who: str, status: int
) -> None:
    from django.contrib.auth.models import AnonymousUser

    user = {"anonymous": AnonymousUser(), "nobody": None, "viewer-other-cluster": None}[who]
    if who == "nobody":
        user = request.getfixturevalue("nobody")
    if who == "viewer-other-cluster":
        user = request.getfixturevalue("viewer")
    path = "/ws/v1/nodes/other/node-z/" if who == "viewer-other-cluster" else "/ws/v1/nodes/lab/node-a/"

    async def run() -> None:
        ws = await connect(user, path)
        frame = await ws.receive_json_from()
        assert frame["type"] == "error" and frame["status"] == status
        closed = await ws.receive_output(timeout=2)
        assert closed["type"] == "websocket.close" and closed["code"] == 4000 + status

    async_to_sync(run)()


def test_foreign_origin_is_refused_before_the_consumer(viewer: Any) -> None:
    from podlife_site.asgi import application

    async def run() -> None:
        for origin, ok in ((b"http://evil.example", False), (b"http://localhost", True)):
            ws = WebsocketCommunicator(
                application,
                "/ws/v1/nodes/lab/node-a/",
                headers=[(b"origin", origin), (b"host", b"localhost")],
            )
            connected, _ = await ws.connect()
            assert connected is ok, origin
            await ws.disconnect()

    async_to_sync(run)()


def test_ingesting_a_pod_on_the_node_pushes_its_timeline(viewer: Any) -> None:
    async def run() -> None:
        ws = await connect(viewer)
        await ws.receive_json_from()
        from channels.db import database_sync_to_async

        await database_sync_to_async(ingest_observations)("lab", started_pod("u-new-1", "web-new"))
        frame = await ws.receive_json_from(timeout=3)
        assert frame["type"] == "deltas"
        # Only the pod that changed goes out, not the rest of the node (the fixture's pods, its hostile
        # one among them, are on node-a too).
        assert [p["pod"]["uid"] for p in frame["pods"]] == ["u-new-1"]
        assert UID_EVIL not in str(frame)
        pod = frame["pods"][0]
        assert pod["schema"] == "podlife.timeline/v2" and pod["pod"]["name"] == "web-new"
        assert pod["lanes"]["worker"][0]["state"] == "setup"
        await ws.disconnect()

    async_to_sync(run)()


@pytest.mark.redis
def test_deltas_flow_through_the_redis_pubsub_layer(settings: Any, viewer: Any) -> None:
    """GIVEN the Redis pub/sub layer and a group whose Redis sequence stands at 41 (earlier publishers)
    WHEN two pods on the node are ingested one after the other THEN the consumer forwards them as 42 and 43:
    the numbers continue where Redis had them, with no false gap."""
    import os

    import redis
    from channels.layers import channel_layers

    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [settings.REDIS_URL]},
        }
    }
    channel_layers.backends.clear()
    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = f"{settings.PODLIFE_DEPLOYMENT}:live"
    seq_key, lock_key = f"{prefix}:seq:{GROUP}", f"{prefix}:lock:{GROUP}"
    client.set(seq_key, 41)

    async def run() -> None:
        ws = await connect(viewer)
        await ws.receive_json_from()
        await asyncio.sleep(0.2)  # the subscription is live
        from channels.db import database_sync_to_async

        await database_sync_to_async(ingest_observations)("lab", started_pod("u-redis-1", "web-redis"))
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "deltas" and [p["pod"]["uid"] for p in frame["pods"]] == ["u-redis-1"]
        assert frame["seq"] == 42
        await database_sync_to_async(ingest_observations)("lab", started_pod("u-redis-2", "web-redis-2"))
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "deltas" and [p["pod"]["uid"] for p in frame["pods"]] == ["u-redis-2"]
        assert frame["seq"] == 43
        await ws.disconnect()
        await get_channel_layer().flush()

    try:
        async_to_sync(run)()
        assert int(client.get(seq_key) or 0) == 43
    finally:
        channel_layers.backends.clear()
        client.delete(seq_key, lock_key)
        client.zrem(f"{prefix}:listeners", GROUP)
        client.close()
