"""publish_timelines: the one caller of group_send: only listened groups, one message per group and batch,
from sync and from async code."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from timelines import live
from timelines.lifecycle import schema
from timelines.lifecycle.timeline import Interval, PodTimeline
from timelines.live import group_name, publish_timelines

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def timeline(uid: str = "u1", node: str = "node-a") -> PodTimeline:
    iv = Interval("worker", "setup", T0, None, "observed")
    return PodTimeline(uid=uid, namespace="shop", name="web-0", node=node, lanes={"worker": (iv,), "api": ()})


@pytest.mark.parametrize(
    ("scope", "cluster", "name", "expected"),
    [
        ("node", "prod", "node-a.example", "node.prod.node-a.example"),
        (
            "pod",
            "prod",
            "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47",
            "pod.prod.6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47",
        ),
    ],
)
def test_group_names_keep_kubernetes_names(scope, cluster, name, expected):
    assert group_name(scope, cluster, name) == expected


def test_hostile_or_long_names_become_a_digest():
    hostile = group_name("ns", "prod", "<img src=x onerror=alert(1)>")
    assert hostile.startswith("ns.h.") and len(hostile) <= 100
    assert group_name("ns", "prod", "x" * 200) != group_name("ns", "prod", "x" * 201)
    with pytest.raises(ValueError, match="scope"):
        group_name("cluster", "prod", "x")  # type: ignore[arg-type]


def forget(*groups: str) -> None:
    """Drop what publishing and listening left in Redis for these groups (nothing without Redis)."""
    from django.conf import settings

    if not settings.REDIS_URL:
        return
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    prefix = f"{settings.PODLIFE_DEPLOYMENT}:live"
    try:
        client.delete(*[f"{prefix}:{what}:{g}" for g in groups for what in ("seq", "lock")])
        client.zrem(f"{prefix}:listeners", *groups)
    finally:
        client.close()


def uids_of(message: dict) -> list[str]:
    """The pods a delta carries, read from their JSON texts (and checked against its ``uids``)."""
    uids = [orjson.loads(text)["pod"]["uid"] for text in message["pods"]]
    assert uids == message["uids"]
    return uids


async def nothing_arrives(layer, channel: str, seconds: float = 0.3) -> bool:
    try:
        await asyncio.wait_for(layer.receive(channel), seconds)
    except TimeoutError:
        return True
    return False


def test_one_message_per_listened_group_with_consecutive_numbers():
    """GIVEN a listener on one node's group, and channels in the other groups the pods belong to that nobody
    registered as listened WHEN a sync caller (a derive worker) publishes three pods, two on that node and
    one on another, twice THEN the node group's channel receives exactly one message per call holding its
    two pods, numbered one after the other, and the other groups' channels receive nothing."""
    layer = get_channel_layer()
    cluster = f"prod-{datetime.now(UTC).timestamp():.0f}"  # Redis numbers outlive a test run

    async def scenario() -> tuple[list[int], list[dict], list[bool], bool]:
        group = group_name("node", cluster, "node-a")
        others = [
            group_name("node", cluster, "node-b"),
            group_name("pod", cluster, "u1"),
            group_name("ns", cluster, "shop"),
        ]
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        await live.listen(group)
        other_channels = [await layer.new_channel() for _ in others]
        for other, other_channel in zip(others, other_channels, strict=True):
            await layer.group_add(other, other_channel)  # joined, but not registered as listened
        try:
            pods = [timeline("u1"), timeline("u2"), timeline("u3", node="node-b")]
            sent = [
                await sync_to_async(publish_timelines, thread_sensitive=False)(cluster, pods)
                for _ in range(2)
            ]
            got = [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(2)]
            quiet = [await nothing_arrives(layer, c) for c in other_channels]
            return sent, got, quiet, await nothing_arrives(layer, channel)
        finally:
            await layer.group_discard(group, channel)
            for other, other_channel in zip(others, other_channels, strict=True):
                await layer.group_discard(other, other_channel)
            await sync_to_async(forget)(group, *others)

    sent, (first, second), quiet, no_third = asyncio.run(scenario())
    assert sent == [1, 1]  # only the listened group: not the pods', the namespace's or node-b's
    assert quiet == [True, True, True] and no_third
    assert first["type"] == "timeline.delta" and first["schema"] == "podlife.delta/v3"
    assert first["group"] == second["group"] == group_name("node", cluster, "node-a")
    assert uids_of(first) == ["u1", "u2"]
    assert uids_of(second) == ["u1", "u2"]
    assert second["seq"] == first["seq"] + 1


def test_async_caller_does_not_fail_derivation(settings):
    """Called from async code, the send still reaches the listened group: with the Redis pub/sub layer it
    is the same synchronous script (the count is returned); with the in-memory layer it runs in the
    background on that loop (the caller gets -1 at once)."""
    layer = get_channel_layer()
    cluster = f"prod-async-{datetime.now(UTC).timestamp():.0f}"

    async def scenario() -> tuple[int, dict]:
        group = group_name("pod", cluster, "u1")
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        await live.listen(group)
        try:
            sent = publish_timelines(cluster, [timeline()])
            return sent, await asyncio.wait_for(layer.receive(channel), 5)
        finally:
            await layer.group_discard(group, channel)
            await sync_to_async(forget)(group)

    sent, message = asyncio.run(scenario())
    assert sent == (1 if settings.REDIS_URL else -1)
    assert message["group"] == group_name("pod", cluster, "u1")
    assert uids_of(message) == ["u1"]


@pytest.mark.redis
def test_the_deployments_layer_takes_the_one_script_path_and_others_the_locked_one(settings):
    """GIVEN the deployment's Redis pub/sub layer THEN the publisher numbers and publishes in one script
    (its self-check read back what it writes); GIVEN an encrypting layer (whose messages the script cannot
    write) THEN it falls back to the per-group lock, and a listened group still gets a numbered delta it
    can read."""
    import os

    from channels.layers import channel_layers

    settings.REDIS_URL = os.environ["REDIS_URL"]
    assert live._direct_for(get_channel_layer()) is not None
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [settings.REDIS_URL], "symmetric_encryption_keys": ["k" * 32]},
        }
    }
    channel_layers.backends.clear()
    cluster = f"prod-enc-{datetime.now(UTC).timestamp():.0f}"
    try:
        layer = get_channel_layer()
        assert live._direct_for(layer) is None

        async def scenario() -> tuple[list[int], list[dict]]:
            group = group_name("pod", cluster, "u1")
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
            await live.listen(group)
            try:
                call = sync_to_async(publish_timelines, thread_sensitive=False)
                sent = [await call(cluster, [timeline()]) for _ in range(2)]
                return sent, [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(2)]
            finally:
                await layer.group_discard(group, channel)
                await sync_to_async(forget)(group)

        sent, (first, second) = asyncio.run(scenario())
        assert sent == [1, 1] and uids_of(first) == ["u1"] and second["seq"] == first["seq"] + 1
    finally:
        channel_layers.backends.clear()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "scenario", ["graceful_delete", "delete_during_setup", "crash_loop", "static_uid_reuse", "orphaned"]
)
def test_a_live_frame_and_the_rest_read_are_the_same_document(
    monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    """GIVEN a scenario's observations stored and derived, the derive stage's pushes captured
    WHEN each pushed pod's document (what its live frame carries) is set beside the stored read the REST
    API and the pod page serve (``timeline_reads.pod_timeline``)
    THEN they are the same podlife.timeline/v2 document, evidence included: both cite dedupe keys (the
    stored ids are translated on read), so a page drawn from either highlights the same observations."""
    from dashboard import queries, timeline_reads
    from tests.flow import ingest
    from tests.lifecycle import scenarios

    pushed: list[PodTimeline] = []
    monkeypatch.setattr(live, "publish_timelines", lambda cluster, tls: pushed.extend(tls) or 0)
    ingest("lab", getattr(scenarios, scenario)())
    cluster = queries.get_cluster("lab")
    latest = {t.uid: t for t in pushed}
    assert latest
    for uid, frame in latest.items():
        read = schema.to_builtins(timeline_reads.pod_timeline(cluster, queries.resolve_pod(cluster, uid=uid)))
        # The frame's text as live.encode_pods writes it: the REST read's document, its lanes in the same
        # order (not byte for byte: PostgreSQL's jsonb gives an attrs object's keys back in its own order).
        ((_, _, text),) = live.encode_pods("lab", [frame])
        sent = orjson.loads(text)
        assert sent == read and list(sent["lanes"]) == list(read["lanes"]), uid
        cited = {k for ivs in read["lanes"].values() for iv in ivs for k in iv["evidence"]}
        assert cited and not any(k.isdigit() for k in cited)
