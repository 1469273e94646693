"""publish_timelines: the one caller of group_send: only listened groups, one message per group and batch,
from sync and from async code."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from timelines import live
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


def test_one_message_per_listened_group_with_consecutive_numbers():
    """GIVEN a listener on one node's group WHEN a sync caller (a derive worker) publishes three pods, two on
    that node and one on another, twice THEN the node group gets one message per call holding its two pods,
    numbered one after the other; no message goes to the groups nobody listens to (in-memory or Redis)."""
    layer = get_channel_layer()
    cluster = f"prod-{datetime.now(UTC).timestamp():.0f}"  # Redis numbers outlive a test run

    async def scenario() -> tuple[list[int], list[dict]]:
        channel = await layer.new_channel()
        group = group_name("node", cluster, "node-a")
        await layer.group_add(group, channel)
        await live.listen(group)
        try:
            pods = [timeline("u1"), timeline("u2"), timeline("u3", node="node-b")]
            sent = [
                await sync_to_async(publish_timelines, thread_sensitive=False)(cluster, pods)
                for _ in range(2)
            ]
            got = [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(2)]
            return sent, got
        finally:
            await layer.group_discard(group, channel)

    sent, (first, second) = asyncio.run(scenario())
    assert sent == [1, 1]  # only the listened group: not the pods', the namespace's or node-b's
    assert first["type"] == "timeline.delta" and first["schema"] == "podlife.delta/v2"
    assert [t["pod"]["uid"] for t in first["timelines"]] == ["u1", "u2"]
    assert second["seq"] == first["seq"] + 1


def test_async_caller_does_not_fail_derivation():
    async def scenario() -> int:
        await live.listen(group_name("pod", "prod", "u1"))
        sent = publish_timelines("prod", [timeline()])
        await asyncio.sleep(0.2)  # the background send completes
        return sent

    assert asyncio.run(scenario()) == -1  # sent in the background: the count is not known to the caller
