"""The live consumers (node, namespace, pod pages): permission, coalescing, sequence gaps, namespace
filtering; Origin check; and the same path through the Redis pub/sub channel layer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from dashboard.web.routing import websocket_urlpatterns
from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.waits import subscribed, until
from tests.web.conftest import UID_EVIL, UID_OK, UID_SECRET
from tests.web.factories import retarget, started_pod
from timelines import live
from timelines.live import group_name

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
    """The message the publisher sends (``live.delta_message``): the pod's timeline as JSON text."""
    return dict(
        live.delta_message(GROUP, seq, [(uid, namespace, orjson.dumps(timeline(uid, namespace)).decode())])
    )


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
            "heartbeat_s": 5.0,
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


def test_one_message_of_mixed_namespaces_reaches_a_restricted_reader_filtered(viewer: Any) -> None:
    """GIVEN a viewer who may read namespace default (not secret) WHEN one group message carries pods of
    both THEN the frame holds the readable pod's timeline, byte for byte as the publisher encoded it, and
    nothing of the other (neither its UID nor its name)."""
    texts = {
        uid: orjson.dumps(timeline(uid, namespace, name=f"name-{uid}")).decode()
        for uid, namespace in (("u-ok-1", "default"), ("u-hidden", "secret"), ("u-ok-2", "default"))
    }

    async def run() -> str:
        ws = await connect(viewer)
        await ws.receive_json_from()
        pods = [(uid, orjson.loads(text)["pod"]["namespace"], text) for uid, text in texts.items()]
        await get_channel_layer().group_send(GROUP, dict(live.delta_message(GROUP, 5, pods)))
        raw = await ws.receive_from(timeout=2)
        await ws.disconnect()
        return raw

    raw = async_to_sync(run)()
    assert "u-hidden" not in raw and "name-u-hidden" not in raw
    assert raw == f'{{"type":"deltas","seq":5,"pods":[{texts["u-ok-1"]},{texts["u-ok-2"]}]}}'


def test_deltas_reach_the_page_without_a_thread_hop_each(admin_user: Any, lab: Any, monkeypatch: Any) -> None:
    """GIVEN a node page's socket WHEN ten deltas arrive THEN all reach the page and none went through
    Channels' per-message hop to a worker thread (``aclose_old_connections``), which under 200 pages cost
    more than the deltas themselves; the browser's own frames still do."""
    from channels import consumer as channels_consumer

    hops: list[str] = []
    original = channels_consumer.aclose_old_connections

    async def counted() -> None:
        hops.append("hop")
        await original()

    monkeypatch.setattr(channels_consumer, "aclose_old_connections", counted)

    async def run() -> tuple[int, int]:
        ws = await connect(admin_user)
        await ws.receive_json_from()
        before = len(hops)
        layer = get_channel_layer()
        seen: set[str] = set()
        for seq in range(1, 11):
            await layer.group_send(GROUP, delta(seq, f"u-{seq}"))
        while len(seen) < 10:
            frame = await ws.receive_json_from(timeout=2)
            seen |= {p["pod"]["uid"] for p in frame["pods"]}
        during = len(hops) - before
        await ws.send_json_to({"type": "ping"})
        assert (await ws.receive_json_from(timeout=2))["type"] == "pong"
        after_ping = len(hops) - before
        await ws.disconnect()
        return during, after_ping

    during, after_ping = async_to_sync(run)()
    assert during == 0 and after_ping == 1


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


def test_a_delta_of_another_schema_makes_the_page_refetch(admin_user: Any, lab: Any) -> None:
    """GIVEN a page's socket WHEN a delta in the former form arrives (decoded timelines, no texts: an older
    publisher during a rolling upgrade) THEN the page is told to refetch, and the socket keeps working."""

    async def run() -> None:
        ws = await connect(admin_user)
        await ws.receive_json_from()
        layer = get_channel_layer()
        old = {"type": "timeline.delta", "schema": "podlife.delta/v2", "group": GROUP, "seq": 1,
               "timelines": [timeline("u-old")]}  # fmt: skip
        await layer.group_send(GROUP, old)
        frame = await ws.receive_json_from(timeout=2)
        assert frame["type"] == "refetch" and "podlife.delta/v2" in frame["reason"]
        await layer.group_send(GROUP, delta(2, "u-new"))
        frame = await ws.receive_json_from(timeout=2)
        assert frame["type"] == "deltas" and [p["pod"]["uid"] for p in frame["pods"]] == ["u-new"]
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


@pytest.fixture
def redis_layer(settings: Any, viewer: Any) -> Iterator[None]:
    """The Redis pub/sub channel layer (and Redis-backed listeners and sequence numbers), after ``viewer``'s
    fixtures set the in-memory one up."""
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
    yield
    channel_layers.backends.clear()


@pytest.mark.redis
def test_deltas_flow_through_the_redis_pubsub_layer(redis_layer: None, settings: Any, viewer: Any) -> None:
    """GIVEN the Redis pub/sub layer and a group whose Redis sequence stands at 41 (earlier publishers)
    WHEN two pods on the node are ingested one after the other THEN the consumer forwards them as 42 and 43:
    the numbers continue where Redis had them, with no false gap."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = f"{settings.PODLIFE_DEPLOYMENT}:live"
    seq_key, lock_key = f"{prefix}:seq:{GROUP}", f"{prefix}:lock:{GROUP}"
    client.set(seq_key, 41)

    async def run() -> None:
        ws = await connect(viewer)
        await ws.receive_json_from()
        await subscribed(get_channel_layer(), GROUP)  # Redis took the socket's SUBSCRIBE
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
        client.delete(seq_key, lock_key)
        client.zrem(f"{prefix}:listeners", GROUP)
        client.close()


def _deleted(uid: str, name: str, namespace: str = "default") -> Any:
    """The observations of a pod that started and was then deleted gracefully (a change to a started pod)."""
    return retarget(scenarios.graceful_delete(), uid=uid, name=name, namespace=namespace)


async def _ingest(cluster: str, observations: Any) -> None:
    from channels.db import database_sync_to_async

    await database_sync_to_async(ingest_observations)(cluster, observations)


def test_pod_page_socket_pushes_that_pods_change_only(viewer: Any) -> None:
    """GIVEN a pod page's socket WHEN that pod is deleted, and another pod on its node changes THEN only
    the watched pod's new timeline arrives, with its terminating state."""

    async def run() -> None:
        ws = await connect(viewer, f"/ws/v1/pods/lab/{UID_OK}/")
        hello = await ws.receive_json_from()
        assert {k: v for k, v in hello.items() if k != "collector"} == {
            "type": "hello",
            "group": group_name("pod", "lab", UID_OK),
            "max_fps": 10,
            "heartbeat_s": 5.0,
        }
        await _ingest("lab", started_pod("u-neighbour", "web-neighbour"))  # same node, other pod
        await _ingest("lab", _deleted(UID_OK, "web-ok"))
        frame = await ws.receive_json_from(timeout=3)
        assert frame["type"] == "deltas"
        assert [p["pod"]["uid"] for p in frame["pods"]] == [UID_OK]
        states = [iv["state"] for iv in frame["pods"][0]["lanes"]["api"]]
        assert "terminating" in states and states[-1] == "deleted"
        assert await ws.receive_nothing(timeout=0.3)
        await ws.disconnect()

    async_to_sync(run)()


def test_namespace_page_socket_pushes_its_namespaces_pods(viewer: Any) -> None:
    async def run() -> None:
        ws = await connect(viewer, "/ws/v1/namespaces/lab/evil/")
        assert (await ws.receive_json_from())["group"] == group_name("ns", "lab", "evil")
        await _ingest("lab", started_pod("u-default-2", "web-2"))  # namespace default: not this group
        await _ingest("lab", started_pod("u-evil-2", "evil-2", namespace="evil"))
        frame = await ws.receive_json_from(timeout=3)
        assert frame["type"] == "deltas" and [p["pod"]["uid"] for p in frame["pods"]] == ["u-evil-2"]
        await ws.disconnect()

    async_to_sync(run)()


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (f"/ws/v1/pods/lab/{UID_SECRET}/", "no pod with UID"),  # a namespace the viewer may not read
        ("/ws/v1/pods/lab/no-such-uid/", "no pod with UID"),  # answered alike: existence is not told
        ("/ws/v1/namespaces/lab/secret/", "no namespace 'secret'"),
        ("/ws/v1/pods/other/whatever/", "no cluster named 'other'"),
    ],
)
def test_pod_and_namespace_sockets_refuse_what_the_user_may_not_read(
    viewer: Any, path: str, message: str
) -> None:
    async def run() -> None:
        ws = await connect(viewer, path)
        frame = await ws.receive_json_from()
        assert frame["type"] == "error" and frame["status"] == 404 and message in frame["message"]
        closed = await ws.receive_output(timeout=2)
        assert closed["type"] == "websocket.close" and closed["code"] == 4404

    async_to_sync(run)()


@pytest.mark.redis
def test_pod_deltas_flow_through_the_redis_pubsub_layer(
    redis_layer: None, settings: Any, viewer: Any
) -> None:
    """GIVEN the Redis pub/sub layer and a pod page's socket WHEN the pod changes THEN its delta arrives
    (the consumer registered its pod group as listened to, in Redis, as node groups are)."""
    import redis

    group = group_name("pod", "lab", UID_OK)

    async def run() -> None:
        ws = await connect(viewer, f"/ws/v1/pods/lab/{UID_OK}/")
        await ws.receive_json_from()
        await subscribed(get_channel_layer(), group)  # Redis took the socket's SUBSCRIBE
        listeners = redis.Redis.from_url(settings.REDIS_URL).zscore(
            f"{settings.PODLIFE_DEPLOYMENT}:live:listeners", group
        )
        assert listeners is not None and listeners > time.time()
        await _ingest("lab", _deleted(UID_OK, "web-ok"))
        frame = await ws.receive_json_from(timeout=5)
        assert frame["type"] == "deltas" and frame["pods"][0]["pod"]["uid"] == UID_OK
        await ws.disconnect()
        await get_channel_layer().flush()

    async_to_sync(run)()


def test_stale_streams_are_named_on_hello_and_when_they_change(
    settings: Any, viewer: Any, lab: Any, monkeypatch: Any
) -> None:
    """GIVEN lab's pods watch progressing, its daemonsets watch 10 min behind and a skipped log pull
    WHEN a viewer connects THEN hello names daemonsets (and only it) as stale with its age; WHEN the
    daemonsets watch ends a step and the pods watch stalls THEN a ``collector`` frame names pods instead."""
    from datetime import timedelta

    from channels.db import database_sync_to_async
    from django.utils import timezone

    from collectors.models import CollectorState
    from dashboard.web import fanout

    settings.PODLIFE_LIVE_STALE_S = 90.0
    monkeypatch.setattr(fanout, "HEALTH_POLL_S", 0.1)
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


def test_pages_of_one_group_share_one_reader_and_one_frame(admin_user: Any, viewer: Any) -> None:
    """GIVEN three pages of one node (two of a reader of everything, one of a viewer of default only)
    WHEN a delta of two namespaces arrives THEN the channel layer holds ONE subscriber for the group (the
    process's hub, not one per page), the two unrestricted pages get the very same frame text and the
    viewer its filtered one; WHEN the last page leaves THEN the group has no subscriber left."""
    pods = [
        ("u-a", "default", orjson.dumps(timeline("u-a")).decode()),
        ("u-s", "secret", orjson.dumps(timeline("u-s", "secret")).decode()),
    ]

    async def run() -> None:
        layer = get_channel_layer()
        pages = [await connect(admin_user), await connect(admin_user), await connect(viewer)]
        for page in pages:
            await page.receive_json_from()
        assert len(layer.groups[GROUP]) == 1
        await layer.group_send(GROUP, dict(live.delta_message(GROUP, 3, pods)))
        texts = [await page.receive_from(timeout=2) for page in pages]
        assert texts[0] == texts[1] == f'{{"type":"deltas","seq":3,"pods":[{pods[0][2]},{pods[1][2]}]}}'
        assert texts[2] == f'{{"type":"deltas","seq":3,"pods":[{pods[0][2]}]}}'
        for page in pages:
            await page.disconnect()
        assert GROUP not in layer.groups

    async_to_sync(run)()


def test_pages_of_one_cluster_share_one_health_poll(admin_user: Any, lab: Any, monkeypatch: Any) -> None:
    """GIVEN three pages of cluster lab and a health poll every 0.05 s WHEN five polls have read the
    cluster's collector health THEN they were all made by one poller (one poll for all three pages, not one
    each); after the pages leave it has stopped and read no more."""
    from dashboard.web import consumers, fanout

    monkeypatch.setattr(fanout, "HEALTH_POLL_S", 0.05)
    readers: list[asyncio.Task[Any] | None] = []  # the task of each read: a page's own, or a poller's
    original = consumers._collector_frame

    async def counted(cluster: str) -> dict[str, Any]:
        readers.append(asyncio.current_task())
        return await original(cluster)

    monkeypatch.setattr(consumers, "_collector_frame", counted)

    async def run() -> tuple[set[asyncio.Task[Any] | None], int]:
        pages = [await connect(admin_user) for _ in range(3)]
        for page in pages:
            await page.receive_json_from()
        hellos = len(readers)
        await until(lambda: len(readers) >= hellos + 5, "five health polls")
        pollers = set(readers[hellos:])
        for page in pages:
            await page.disconnect()
        left = len(readers)
        await until(lambda: all(t is not None and t.done() for t in pollers), "the poller stops")
        return pollers, len(readers) - left

    pollers, after = async_to_sync(run)()
    assert len(pollers) == 1, pollers
    assert after == 0


def test_every_socket_hears_a_heartbeat_while_its_group_is_quiet(settings: Any, viewer: Any) -> None:
    """GIVEN a heartbeat every 0.2 s and two pages of one node WHEN nothing changes on the node THEN each
    socket gets ``heartbeat`` frames (version 1, the group's last sequence number, the server's clock with
    microseconds), one per beat, and hello told the page how often they come; WHEN a delta arrives THEN the
    next heartbeat carries its sequence number."""
    from datetime import UTC, datetime

    settings.PODLIFE_LIVE_HEARTBEAT_S = 0.2

    async def run() -> None:
        pages = [await connect(viewer), await connect(viewer)]
        for ws in pages:
            assert (await ws.receive_json_from())["heartbeat_s"] == 0.2
        for ws in pages:  # each beat within 2 s of the last (10 heartbeats), not after a minute
            beats = [await ws.receive_json_from(timeout=2) for _ in range(3)]
            assert [(b["type"], b["v"], b["seq"]) for b in beats] == [("heartbeat", 1, None)] * 3
            at = datetime.fromisoformat(beats[0]["at"])
            assert at.tzinfo is not None and abs((datetime.now(UTC) - at).total_seconds()) < 5
        await get_channel_layer().group_send(GROUP, delta(7, "u-ok"))
        for ws in pages:
            frame = await ws.receive_json_from(timeout=2)
            while frame["type"] == "heartbeat":
                frame = await ws.receive_json_from(timeout=2)
            assert frame["type"] == "deltas" and frame["seq"] == 7
            beat = await ws.receive_json_from(timeout=2)
            assert beat["type"] == "heartbeat" and beat["seq"] == 7
        for ws in pages:
            await ws.disconnect()

    async_to_sync(run)()


def test_a_refused_socket_gets_no_heartbeat(settings: Any, nobody: Any) -> None:
    """GIVEN a user without any grant WHEN they open a node page's socket THEN the error frame and the close
    come, and no heartbeat: only a watched group beats."""
    settings.PODLIFE_LIVE_HEARTBEAT_S = 0.1

    async def run() -> None:
        ws = await connect(nobody)
        frame = await ws.receive_json_from()
        assert frame["type"] == "error" and frame["status"] == 404
        assert (await ws.receive_output(timeout=1))["type"] == "websocket.close"

    async_to_sync(run)()
