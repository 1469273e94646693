"""Live push: the only caller of ``group_send``.

The derive stage hands over the pods one batch re-derived (``publish_timelines``). Each pod belongs to
three groups, ``pod.C.UID``, ``node.C.NAME`` and ``ns.C.NAME`` (C = cluster), but a delta goes only to a
group some consumer has joined: consumers register the groups they listen to (``listen``, renewed while
they are connected), and the publisher asks once per batch which of its groups are listened to. A group
gets ONE message per batch, holding every changed pod of it, so the push costs a few round trips per
listened group and batch, never one per pod.

Each group has its own sequence number, so a client that sees a gap, or reconnects, knows to refetch over
REST. Several derive workers publish at once, so the number and the send happen under the group's publish
lock (a Redis lock; in-process, a mutex): a group's messages leave in the order of their numbers, and a
consumer never sees a false gap from two publishers overtaking each other. A publisher that dies between
the two leaves a real gap, and the consumer refetches, which is what a gap is for. Consumers coalesce what
they receive (see ``timelines/web/consumers.py``), so a busy node never floods a browser.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from timelines.lifecycle.timeline import PodTimeline

log = logging.getLogger(__name__)

DELTA_SCHEMA = "podlife.delta/v2"
Scope = Literal["pod", "node", "ns"]
_GROUP_OK = re.compile(r"^[A-Za-z0-9.-]+$")
_GROUP_MAX = 100
LISTEN_TTL_S = (
    60.0  # a consumer renews its groups every third of this; a group unrenewed this long is dropped
)
LOCK_TTL_MS = 5_000  # a publisher that dies holding a group's lock frees it after this


class GroupDelta(TypedDict):
    """The channel-layer message for one group and one batch (``type`` routes it to the consumer's
    handler): every pod of the group that the batch re-derived, in ``podlife.timeline/v2``."""

    type: Literal["timeline.delta"]
    schema: str
    group: str
    seq: int
    timelines: list[dict[str, Any]]  # podlife.timeline/v2 of each changed pod


def group_name(scope: Scope, cluster: str, name: str) -> str:
    """``scope.cluster.name`` with only ASCII letters, digits, '-' and '.' and at most 100 characters.

    Kubernetes names already fit; anything else (or too long) is replaced by a stable digest, so a hostile
    name can never address someone else's group.
    """
    if scope not in ("pod", "node", "ns"):
        raise ValueError(f"group scope {scope!r} is not one of pod, node, ns")
    group = f"{scope}.{cluster}.{name}"
    if _GROUP_OK.match(group) and len(group) <= _GROUP_MAX:
        return group
    digest = hashlib.sha256(f"{cluster}\x1f{name}".encode()).hexdigest()[:40]
    return f"{scope}.h.{digest}"


def groups_of(cluster: str, timeline: PodTimeline) -> list[str]:
    """The groups a pod's delta belongs to."""
    groups = [group_name("pod", cluster, timeline.uid)]
    if timeline.node:
        groups.append(group_name("node", cluster, timeline.node))
    if timeline.namespace:
        groups.append(group_name("ns", cluster, timeline.namespace))
    return groups


# -- who listens -----------------------------------------------------------------------------------------
def _key(what: str) -> str:
    return f"{settings.PODLIFE_DEPLOYMENT}:live:{what}"


_local_listeners: dict[str, float] = {}  # group -> expiry (monotonic), without Redis (one process)
_local_lock = threading.Lock()


async def listen(group: str) -> None:
    """Say that a consumer of this process listens to ``group`` (call on join, and every
    ``LISTEN_TTL_S / 3`` while joined)."""
    if not settings.REDIS_URL:
        with _local_lock:
            _local_listeners[group] = time.monotonic() + LISTEN_TTL_S
        return
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
    try:
        now = time.time()
        async with client.pipeline(transaction=False) as pipe:
            pipe.zadd(_key("listeners"), {group: now + LISTEN_TTL_S}, gt=True)  # adds, or moves later
            pipe.zremrangebyscore(_key("listeners"), "-inf", now)
            await pipe.execute()
    finally:
        await client.aclose()


async def _listened(client: Any, groups: list[str]) -> set[str]:
    if client is None:
        now = time.monotonic()
        with _local_lock:
            return {g for g in groups if _local_listeners.get(g, 0.0) > now}
    scores = await client.zmscore(_key("listeners"), groups)
    now = time.time()
    return {g for g, score in zip(groups, scores, strict=True) if score is not None and score > now}


# -- publishing ------------------------------------------------------------------------------------------
# KEYS[1] lock, KEYS[2] sequence; ARGV[1] token, ARGV[2] lock ttl (ms). The next number, or nil while
# another publisher holds the group.
_CLAIM = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
return nil
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""
_local_sequences: dict[str, int] = {}
_local_publish = threading.Lock()  # in-process: number and send under one mutex


async def _send(layer: Any, client: Any, group: str, timelines: list[dict[str, Any]]) -> bool:
    def message(seq: int) -> GroupDelta:
        return {
            "type": "timeline.delta",
            "schema": DELTA_SCHEMA,
            "group": group,
            "seq": seq,
            "timelines": timelines,
        }

    if client is None:
        with _local_publish:
            seq = _local_sequences[group] = _local_sequences.get(group, 0) + 1
            await layer.group_send(group, message(seq))
        return True
    token, lock = uuid.uuid4().hex, _key(f"lock:{group}")
    deadline = time.monotonic() + LOCK_TTL_MS / 1000
    while (seq := await client.eval(_CLAIM, 2, lock, _key(f"seq:{group}"), token, LOCK_TTL_MS)) is None:
        if time.monotonic() > deadline:
            log.warning("live push to %s skipped: its publish lock stayed taken", group)
            return False
        await asyncio.sleep(0.001)
    try:
        await layer.group_send(group, message(int(seq)))
    finally:
        await client.eval(_RELEASE, 1, lock, token)
    return True


def publish_timelines(cluster: str, timelines: Iterable[PodTimeline]) -> int:
    """Send the timelines to the groups they belong to that someone listens to, one message per group;
    returns how many messages were sent.

    A failing channel layer or Redis is logged, never raised: live push must not fail derivation. Called
    from async code (an ASGI handler, a test), the send runs in the background on that loop.
    """
    layer = get_channel_layer()
    if layer is None:
        return 0
    by_group: dict[str, list[PodTimeline]] = {}
    for timeline in timelines:
        for group in groups_of(cluster, timeline):
            by_group.setdefault(group, []).append(timeline)
    if not by_group:
        return 0
    bodies: dict[int, dict[str, Any]] = {}  # a pod's body, made once and only for a listened group

    def body(timeline: PodTimeline) -> dict[str, Any]:
        made = bodies.get(id(timeline))
        if made is None:
            made = bodies[id(timeline)] = timeline.to_json(cluster)
        return made

    async def send_all() -> int:
        client = None
        if settings.REDIS_URL:
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        sent = 0
        try:
            for group in sorted(await _listened(client, sorted(by_group))):
                try:
                    sent += await _send(layer, client, group, [body(t) for t in by_group[group]])
                except Exception:
                    log.exception("live push to %s failed", group)
        except Exception:
            log.exception("live push of %d group(s) failed", len(by_group))
        finally:
            if client is not None:
                await client.aclose()
        return sent

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a derive worker, a command
        return async_to_sync(send_all)()
    # Called from async code: async_to_sync would refuse; send in the background on this loop.
    task = loop.create_task(send_all())
    _pending_sends.add(task)
    task.add_done_callback(_pending_sends.discard)
    return -1  # not known yet


_pending_sends: set[asyncio.Task[int]] = set()  # keeps background sends alive until they finish


_sync_clients: dict[str, Any] = {}  # REDIS_URL -> redis.Redis (its own connection pool), per process
_sync_clients_lock = threading.Lock()


def current_sequence(group: str) -> int:
    """The group's last sequence number (0 before its first message). A reader that takes it before it
    reads the store sees every pod the messages up to it carried (they were stored before being numbered);
    timelines/web/shared_reads.py keys shared results by it."""
    if not settings.REDIS_URL:
        return _local_sequences.get(group, 0)
    import redis

    with _sync_clients_lock:
        client = _sync_clients.get(settings.REDIS_URL)
        if client is None:
            client = _sync_clients[settings.REDIS_URL] = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2
            )
    value = client.get(_key(f"seq:{group}"))
    return int(value) if value is not None else 0
