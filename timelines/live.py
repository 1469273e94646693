"""Live push: the only caller of ``group_send``.

The derive stage hands over the pods one batch re-derived (``publish_timelines``). Each pod belongs to
three groups, ``pod.C.UID``, ``node.C.NAME`` and ``ns.C.NAME`` (C = cluster), but a delta goes only to a
group some consumer has joined: consumers register the groups they listen to (``listen``, renewed while
they are connected), and the publisher asks once per batch which of its groups are listened to. A group
gets ONE message per batch, holding every changed pod of it, so the push never costs a round trip per pod.

Each group has its own sequence number, so a client that sees a gap, or reconnects, knows to refetch over
REST. Several derive workers publish at once, and a consumer must never see a false gap from two
publishers overtaking each other. With the deployment's Redis pub/sub channel layer, one Lua script numbers
each listened group's message and publishes it (Redis runs a script whole, so a group's messages leave in
the order of their numbers, without a lock), on this process's pooled connection and without an event
loop: a batch costs two round trips (who listens; number and publish) whatever its groups. With any
other layer the number and the ``group_send`` happen under the group's publish lock (a Redis lock; without
Redis, a mutex); a publisher that dies between the two leaves a real gap, and the consumer refetches,
which is what a gap is for. Each pod's timeline is written (``schema.write_timeline``) and encoded to JSON
text once here; consumers forward that text without decoding it. Consumers coalesce what they receive (see
``dashboard/web/consumers.py``), so a busy node never floods a browser.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
import uuid
import weakref
from collections.abc import Iterable
from typing import Any, Literal, TypedDict

import msgpack  # type: ignore[import-untyped]
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from timelines.lifecycle import schema
from timelines.lifecycle.timeline import PodTimeline

log = logging.getLogger(__name__)

DELTA_SCHEMA = "podlife.delta/v3"
Scope = Literal["pod", "node", "ns"]
_GROUP_OK = re.compile(r"^[A-Za-z0-9.-]+$")
_GROUP_MAX = 100
LISTEN_TTL_S = (
    60.0  # a consumer renews its groups every third of this; a group unrenewed this long is dropped
)
LOCK_TTL_MS = 5_000  # a publisher that dies holding a group's lock frees it after this


class GroupDelta(TypedDict):
    """The channel-layer message for one group and one batch (``type`` routes it to the consumer's
    handler): every pod of the group that the batch re-derived. ``pods`` holds each pod's
    ``podlife.timeline/v2`` as JSON text, encoded once here; ``uids`` and ``namespaces`` (same order) let a
    consumer coalesce and filter without decoding it. ``seq`` comes last (the fast path appends it)."""

    type: Literal["timeline.delta"]
    schema: str
    group: str
    uids: list[str]
    namespaces: list[str]
    pods: list[str]
    seq: int


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
    client = _async_redis(settings.REDIS_URL)
    now = time.time()
    async with client.pipeline(transaction=False) as pipe:
        pipe.zadd(_key("listeners"), {group: now + LISTEN_TTL_S}, gt=True)  # adds, or moves later
        pipe.zremrangebyscore(_key("listeners"), "-inf", now)
        await pipe.execute()


# loop -> (REDIS_URL, its client): a consumer process's sockets share one pool per event loop
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def _async_redis(url: str) -> Any:
    import redis.asyncio

    loop = asyncio.get_running_loop()
    known = _async_clients.get(loop)
    if known is None or known[0] != url:
        # Blocking: 200 sockets renewing at once wait a moment for a connection instead of failing with
        # "Too many connections" (bench/load.py saw that with the plain pool).
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, max_connections=16, timeout=5, socket_timeout=2, socket_connect_timeout=2
        )
        known = _async_clients[loop] = (url, redis.asyncio.Redis(connection_pool=pool))
    return known[1]


async def _listened(client: Any, groups: list[str]) -> set[str]:
    if client is None:
        now = time.monotonic()
        with _local_lock:
            return {g for g in groups if _local_listeners.get(g, 0.0) > now}
    scores = await client.zmscore(_key("listeners"), groups)
    now = time.time()
    return {g for g, score in zip(groups, scores, strict=True) if score is not None and score > now}


# -- publishing ------------------------------------------------------------------------------------------
# The fast path (the Redis pub/sub channel layer, the deployment's): one script numbers each listened
# group's message and publishes it. Redis runs a script whole, so a group's messages leave in the order of
# their numbers with no lock, and the whole batch costs one round trip. The message is the layer's own
# msgpack encoding with ``seq`` last; the script appends the number (cmsgpack, built into Redis's Lua).
# KEYS: each group's sequence key; ARGV: per group, its layer channel and the message up to ``seq``.
_NUMBER_AND_PUBLISH = """
for i, key in ipairs(KEYS) do
  local seq = redis.call('incr', key)
  redis.call('publish', ARGV[2 * i - 1], ARGV[2 * i] .. cmsgpack.pack(seq))
end
return #KEYS
"""
# The slow path (any other layer while Redis numbers the groups): number and send under the group's lock.
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


def encode_pods(cluster: str, timelines: Iterable[PodTimeline]) -> list[tuple[str, str, str]]:
    """Each pod's ``(uid, namespace, podlife.timeline/v2 as JSON text)``: written by the one document writer
    (``schema.write_timeline``, the document the REST read gives for the same rows) and encoded once by the
    publisher; every consumer forwards the text as it is."""
    return [
        (t.uid, t.namespace or "", schema.encode(schema.write_timeline(t, cluster)).decode())
        for t in timelines
    ]


def delta_message(group: str, seq: int, pods: list[tuple[str, str, str]]) -> GroupDelta:
    """The ``timeline.delta`` of ``group`` numbered ``seq`` holding ``pods`` (from ``encode_pods``)."""
    return {**_delta_fields(group, pods), "seq": seq}  # type: ignore[typeddict-item]


def _delta_fields(group: str, pods: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {
        "type": "timeline.delta",
        "schema": DELTA_SCHEMA,
        "group": group,
        "uids": [uid for uid, _, _ in pods],
        "namespaces": [namespace for _, namespace, _ in pods],
        "pods": [text for _, _, text in pods],
    }


class _DirectPublish:
    """What the fast path needs of a Redis pub/sub channel layer: its Redis and how it names a group's
    channel. Made only when the layer reads back what this writes (a self-check: an encrypting layer, a
    layer of several shards, or one on another Redis than ``REDIS_URL`` gets the slow path)."""

    def __init__(self, layer: Any, redis_url: str) -> None:
        from channels_redis.pubsub import RedisPubSubChannelLayer  # type: ignore[import-untyped]

        if not isinstance(layer, RedisPubSubChannelLayer):
            raise TypeError(f"{type(layer).__name__} is not the Redis pub/sub channel layer")
        hosts = layer._kwargs.get("hosts") or (layer._args[0] if layer._args else None)
        if hosts != [redis_url]:
            raise ValueError(f"the channel layer's hosts {hosts!r} are not [REDIS_URL]")
        self.redis_url, self.prefix = redis_url, str(layer._kwargs.get("prefix", "asgi"))
        probe = delta_message("probe", 7, [("u", "ns", "{}")])
        try:
            read = layer.deserialize(self.packed("probe", [("u", "ns", "{}")]) + msgpack.packb(7))
        except Exception as exc:  # an encrypting serializer refuses plain bytes (its own exception types)
            raise ValueError(f"the channel layer does not read plain msgpack messages ({exc!r})") from exc
        if read != probe:
            raise ValueError("the channel layer reads plain msgpack messages differently")

    def channel(self, group: str) -> str:
        return f"{self.prefix}__group__{group}"  # channels_redis.pubsub's name for a group's channel

    @staticmethod
    def packed(group: str, pods: list[tuple[str, str, str]]) -> bytes:
        """The message as the layer's msgpack serializer writes it, up to and including the key ``seq``."""
        fields = _delta_fields(group, pods)
        out = [bytes([0x80 | (len(fields) + 1)])]  # a fixmap: seven entries
        for key, value in fields.items():
            out += [msgpack.packb(key), msgpack.packb(value)]
        out.append(msgpack.packb("seq"))
        return b"".join(out)


# layer -> (REDIS_URL it was checked against, the fast path or None: the slow one)
_direct: weakref.WeakKeyDictionary[Any, tuple[str, _DirectPublish | None]] = weakref.WeakKeyDictionary()


def _direct_for(layer: Any) -> _DirectPublish | None:
    url = settings.REDIS_URL
    if not url:
        return None
    known = _direct.get(layer)
    if known is None or known[0] != url:
        try:
            known = (url, _DirectPublish(layer, url))
        except (TypeError, ValueError) as exc:
            log.info("live push numbers and sends under a lock per group: %s", exc)
            known = (url, None)
        _direct[layer] = known
    return known[1]


def _publish_direct(direct: _DirectPublish, by_group: dict[str, list[PodTimeline]], encode: Any) -> int:
    """The fast path, synchronously: one round trip for who listens, one to number and publish."""
    client = _redis(direct.redis_url)
    groups = sorted(by_group)
    now = time.time()
    scores = client.zmscore(_key("listeners"), groups)
    listened = [g for g, score in zip(groups, scores, strict=True) if score is not None and score > now]
    if not listened:
        return 0
    keys = [_key(f"seq:{group}") for group in listened]
    argv: list[Any] = []
    for group in listened:
        argv += [direct.channel(group), direct.packed(group, encode(by_group[group]))]
    return int(_script(client)(keys=keys, args=argv))


_scripts: dict[int, Any] = {}


def _script(client: Any) -> Any:
    script = _scripts.get(id(client))
    if script is None:
        script = _scripts[id(client)] = client.register_script(_NUMBER_AND_PUBLISH)  # EVALSHA, cached
    return script


async def _send(layer: Any, client: Any, group: str, pods: list[tuple[str, str, str]]) -> bool:
    if client is None:
        with _local_publish:
            seq = _local_sequences[group] = _local_sequences.get(group, 0) + 1
            await layer.group_send(group, delta_message(group, seq, pods))
        return True
    token, lock = uuid.uuid4().hex, _key(f"lock:{group}")
    deadline = time.monotonic() + LOCK_TTL_MS / 1000
    while (seq := await client.eval(_CLAIM, 2, lock, _key(f"seq:{group}"), token, LOCK_TTL_MS)) is None:
        if time.monotonic() > deadline:
            log.warning("live push to %s skipped: its publish lock stayed taken", group)
            return False
        await asyncio.sleep(0.001)
    try:
        await layer.group_send(group, delta_message(group, int(seq), pods))
    finally:
        await client.eval(_RELEASE, 1, lock, token)
    return True


def publish_timelines(cluster: str, timelines: Iterable[PodTimeline]) -> int:
    """Send the timelines to the groups they belong to that someone listens to, one message per group;
    returns how many messages were sent.

    A failing channel layer or Redis is logged, never raised: live push must not fail derivation. With the
    Redis pub/sub layer the send is synchronous (two round trips on this process's Redis pool, from sync or
    async code alike); with another layer, called from async code, it runs in the background on that loop.
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
    encoded: dict[int, tuple[str, str, str]] = {}  # a pod encoded once, and only for a listened group

    def encode(group_timelines: list[PodTimeline]) -> list[tuple[str, str, str]]:
        out = []
        for timeline in group_timelines:
            made = encoded.get(id(timeline))
            if made is None:
                made = encoded[id(timeline)] = encode_pods(cluster, [timeline])[0]
            out.append(made)
        return out

    direct = _direct_for(layer)
    if direct is not None:
        try:
            return _publish_direct(direct, by_group, encode)
        except Exception:  # broad: a push is best effort (pages catch up on their next read); logged
            log.exception("live push of %d group(s) failed", len(by_group))
            return 0

    async def send_all() -> int:
        client = None
        if settings.REDIS_URL:
            import redis.asyncio

            client = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        sent = 0
        try:
            for group in sorted(await _listened(client, sorted(by_group))):
                try:
                    sent += await _send(layer, client, group, encode(by_group[group]))
                except Exception:  # broad: one group's failed push must not stop the others; logged
                    log.exception("live push to %s failed", group)
        except Exception:  # broad: a push is best effort (pages catch up on their next read); logged
            log.exception("live push of %d group(s) failed", len(by_group))
        finally:
            if client is not None:
                await client.aclose()
        return sent

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a derive worker, a command
        return async_to_sync(send_all)()
    # Called from async code: async_to_sync would refuse; send in the background on this loop.
    task = loop.create_task(send_all())
    _pending_sends.add(task)
    task.add_done_callback(_pending_sends.discard)
    return -1  # not known yet


_pending_sends: set[asyncio.Task[int]] = set()  # keeps background sends alive until they finish


_sync_clients: dict[str, Any] = {}  # REDIS_URL -> redis.Redis (its own connection pool), per process
_sync_clients_lock = threading.Lock()


def _redis(url: str) -> Any:
    """This process's client of ``url`` (a connection pool shared by its threads)."""
    import redis

    with _sync_clients_lock:
        client = _sync_clients.get(url)
        if client is None:
            client = _sync_clients[url] = redis.Redis.from_url(
                url, socket_timeout=2, socket_connect_timeout=2
            )
    return client


def current_sequence(group: str) -> int:
    """The group's last sequence number (0 before its first message). A reader that takes it before it
    reads the store sees every pod the messages up to it carried (they were stored before being numbered);
    dashboard/web/shared_reads.py keys shared results by it."""
    if not settings.REDIS_URL:
        return _local_sequences.get(group, 0)
    value = _redis(settings.REDIS_URL).get(_key(f"seq:{group}"))
    return int(value) if value is not None else 0
