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
        assert {k: v for k, v in hello.items() if k != "collector"} == {
            "type": "hello",
            "group": GROUP,
            "max_fps": 10,
        }
        assert (
            hello["collector"]["streams"] == 0 and hello["collector"]["stale"] == []
        )  # nothing collects lab
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
        pod = frame["pods"][0]
        assert pod["schema"] == "podlife.timeline/v2" and pod["pod"]["name"] == "web-new"
        assert pod["lanes"]["worker"][0]["state"] == "setup"
        await ws.disconnect()

    async_to_sync(run)()
    assert UID_EVIL  # the fixture's hostile pod is on this node too (see the browser test)


@pytest.mark.redis
def test_deltas_flow_through_the_redis_pubsub_layer(settings: Any, viewer: Any) -> None:
    """GIVEN the Redis pub/sub layer WHEN a pod on the node is ingested THEN the consumer forwards it, with
    Redis-backed sequence numbers that continue where they were."""
    import os

    from channels.layers import channel_layers

    settings.REDIS_URL = os.environ["REDIS_URL"]
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [settings.REDIS_URL]},
        }
    }
    channel_layers.backends.clear()

    async def run() -> None:
        ws = await connect(viewer)
        await ws.receive_json_from()
        await asyncio.sleep(0.2)  # the subscription is live
        from channels.db import database_sync_to_async

        await database_sync_to_async(ingest_observations)("lab", started_pod("u-redis-1", "web-redis"))
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "deltas" and frame["pods"][0]["pod"]["uid"] == "u-redis-1"
        assert frame["seq"] >= 1
        await ws.disconnect()
        await get_channel_layer().flush()

    try:
        async_to_sync(run)()
    finally:
        channel_layers.backends.clear()


def test_stale_streams_are_named_on_hello_and_when_they_change(
    settings: Any, viewer: Any, lab: Any, monkeypatch: Any
) -> None:
    """GIVEN lab's pods watch progressing, its daemonsets watch 10 min behind and a skipped log pull
    WHEN a viewer connects THEN hello names daemonsets (and only it) as stale with its age; WHEN the
    daemonsets watch ends a step and the pods watch stalls THEN a ``collector`` frame names pods instead."""
    from datetime import timedelta

    from channels.db import database_sync_to_async
    from django.utils import timezone

    from timelines.models import CollectorState
    from timelines.web import consumers

    settings.PODLIFE_LIVE_STALE_S = 90.0
    monkeypatch.setattr(consumers, "HEALTH_POLL_S", 0.1)
    now = timezone.now()
    cluster = lab["lab"]
    CollectorState.objects.create(
        cluster=cluster, resource="pods", last_event_at=now - timedelta(seconds=200), last_step_at=now
    )
    CollectorState.objects.create(
        cluster=cluster, resource="daemonsets", last_step_at=now - timedelta(minutes=10)
    )
    CollectorState.objects.create(cluster=cluster, resource="kubelet-logs", note="skipped: no log handler")
    CollectorState.objects.create(
        cluster=lab["other"], resource="nodes", last_step_at=now - timedelta(hours=1)
    )  # another cluster's stall is not this page's

    def move(resource: str, **fields: Any) -> None:
        CollectorState.objects.filter(cluster=cluster, resource=resource).update(**fields)

    async def run() -> None:
        ws = await connect(viewer)
        hello = await ws.receive_json_from()
        health = hello["collector"]
        assert health["streams"] == 3 and health["stale_after_s"] == 90.0
        assert [s["stream"] for s in health["stale"]] == ["daemonsets"]
        assert 599 <= health["stale"][0]["behind_s"] <= 660
        later = timezone.now()
        await database_sync_to_async(move)("daemonsets", last_step_at=later)
        await database_sync_to_async(move)(
            "pods", last_event_at=later - timedelta(minutes=5), last_step_at=later - timedelta(minutes=3)
        )
        frame = await ws.receive_json_from(timeout=3)
        assert frame["type"] == "collector"
        assert [s["stream"] for s in frame["stale"]] == ["pods"]
        assert 179 <= frame["stale"][0]["behind_s"] <= 240
        await database_sync_to_async(move)("pods", last_event_at=timezone.now())
        frame = await ws.receive_json_from(timeout=3)
        assert frame["type"] == "collector" and frame["stale"] == []
        await ws.disconnect()

    async_to_sync(run)()
