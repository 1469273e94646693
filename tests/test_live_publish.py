"""publish_timelines: the one caller of group_send, from sync and from async code."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from timelines.lifecycle.timeline import Interval, PodTimeline
from timelines.live import group_name, publish_timelines

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def timeline(uid: str = "u1") -> PodTimeline:
    iv = Interval("worker", "setup", T0, None, "observed")
    return PodTimeline(
        uid=uid, namespace="shop", name="web-0", node="node-a", lanes={"worker": (iv,), "api": ()}
    )


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


def test_sync_caller_reaches_every_group_with_sequence_numbers():
    """GIVEN a listener on a node group WHEN a sync caller (a collector thread) publishes two pods
    THEN both deltas arrive in order with consecutive sequence numbers (in-memory or Redis layer)."""
    layer = get_channel_layer()

    async def scenario() -> tuple[int, list[dict]]:
        channel = await layer.new_channel()
        group = group_name("node", "prod", "node-a")
        await layer.group_add(group, channel)
        try:
            sent = await sync_to_async(publish_timelines, thread_sensitive=False)(
                "prod", [timeline("u1"), timeline("u2")]
            )
            return sent, [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(2)]
        finally:
            await layer.group_discard(group, channel)

    sent, (first, second) = asyncio.run(scenario())
    assert sent == 6
    assert first["type"] == "timeline.delta" and first["timeline"]["pod"]["uid"] == "u1"
    assert second["timeline"]["pod"]["uid"] == "u2" and second["seq"] == first["seq"] + 1


def test_async_caller_does_not_fail_ingestion():
    async def scenario() -> int:
        sent = publish_timelines("prod", [timeline()])
        await asyncio.sleep(0.05)  # the background send completes
        return sent

    assert asyncio.run(scenario()) == 3
