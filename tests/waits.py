"""Waiting on a condition with a deadline, never on the clock (issue #38): a fixed sleep before an assert is
either too short on a loaded machine (a flaky failure) or longer than needed everywhere else."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.02) -> T:
    """``condition()`` once it is truthy; fails naming ``what`` when it is not within ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what} (last: {value!r})")
        time.sleep(interval)


async def until(
    condition: Callable[[], Any], what: str, timeout: float = 10.0, interval: float = 0.01
) -> None:
    """``wait_for`` inside an event loop: yields to the loop between checks, so that the tasks the
    condition waits on run."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        await asyncio.sleep(interval)


async def subscribed(layer: Any, group: str, subscribers: int = 1, timeout: float = 10.0) -> None:
    """Until Redis counts ``subscribers`` subscriptions to ``group`` of the pub/sub channel ``layer``
    (``PUBSUB NUMSUB``). ``group_add`` sends its SUBSCRIBE without waiting for Redis to take it: a message
    published just after could reach nobody. Call it from the event loop the layer is used on."""
    shard_layer = layer._get_layer()  # channels_redis keeps one per event loop
    channel = shard_layer._get_group_channel_name(group)
    shard = shard_layer._get_shard(channel)
    shard._ensure_redis()
    deadline = time.monotonic() + timeout
    while True:
        [(_, count)] = await shard._redis.pubsub_numsub(channel)
        if count >= subscribers:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{count} of {subscribers} subscriptions to {channel} after {timeout:.0f} s")
        await asyncio.sleep(0.01)


def group_subscribed(group: str, timeout: float = 30.0) -> None:
    """Until Redis counts a subscription to ``group`` of the channel layer in this process's settings: a
    server of the same deployment, in another process, subscribed (the Redis pub/sub layer names a group's
    channel ``<prefix>__group__<group>``)."""
    import redis
    from django.conf import settings

    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    channel = f"{config['prefix']}__group__{group}"
    client = redis.Redis.from_url(config["hosts"][0])
    try:
        wait_for(lambda: client.pubsub_numsub(channel)[0][1] >= 1, f"a subscription to {channel}", timeout)
    finally:
        client.close()
