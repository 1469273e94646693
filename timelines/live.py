"""Live push: the only caller of ``group_send``.

After a pod is re-derived, a small versioned delta (that pod's lanes, markers and findings — never a whole
page) goes to three groups: ``pod.C.UID``, ``node.C.NAME`` and ``ns.C.NAME`` (C = cluster). Each group
has its own sequence number so a client that sees a gap, or reconnects, knows to refetch over REST.
Consumers coalesce what they receive (see ``timelines/web/consumers.py``), so a busy node never floods a
browser.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from timelines.lifecycle.timeline import PodTimeline

log = logging.getLogger(__name__)

DELTA_SCHEMA = "podlife.delta/v1"
Scope = Literal["pod", "node", "ns"]
_GROUP_OK = re.compile(r"^[A-Za-z0-9.-]+$")
_GROUP_MAX = 100


class PodDelta(TypedDict):
    """The websocket payload for one changed pod (``type`` routes it to the consumer's handler)."""

    type: Literal["timeline.delta"]
    schema: str
    group: str
    seq: int
    timeline: dict[str, Any]  # podlife.timeline/v2 of the changed pod


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


class _Sequences:
    """Per-group sequence numbers: in Redis when there is one (many publishers), else in this process."""

    def __init__(self) -> None:
        self._local: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()
        self._redis: Any = None

    def next(self, group: str) -> int:
        if settings.REDIS_URL:
            if self._redis is None:
                import redis

                self._redis = redis.Redis.from_url(settings.REDIS_URL)
            return int(self._redis.incr(f"podlife:seq:{group}"))
        with self._lock:
            counter = self._local.setdefault(group, itertools.count(1))
            return next(counter)


sequences = _Sequences()


def publish_timelines(cluster: str, timelines: Iterable[PodTimeline]) -> int:
    """Send each timeline's delta to its pod, node and namespace groups; returns messages sent.

    All messages of one call go out from one event-loop hop. A failing channel layer is logged, never
    raised: live push must not fail ingestion.
    """
    layer = get_channel_layer()
    if layer is None:
        return 0
    messages: list[PodDelta] = []
    for timeline in timelines:
        body = timeline.to_json(cluster)
        groups = [group_name("pod", cluster, timeline.uid)]
        if timeline.node:
            groups.append(group_name("node", cluster, timeline.node))
        if timeline.namespace:
            groups.append(group_name("ns", cluster, timeline.namespace))
        for group in groups:
            messages.append(
                {
                    "type": "timeline.delta",
                    "schema": DELTA_SCHEMA,
                    "group": group,
                    "seq": sequences.next(group),
                    "timeline": body,
                }
            )
    if not messages:
        return 0

    async def send_all() -> int:
        sent = 0
        for message in messages:
            try:
                await layer.group_send(message["group"], message)
                sent += 1
            except Exception:
                log.exception("live push to %s failed", message["group"])
        return sent

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a collector thread, a task, a command
        return async_to_sync(send_all)()
    # Called from async code (an ASGI handler): async_to_sync would refuse; send in the background.
    task = asyncio.get_running_loop().create_task(send_all())
    _pending_sends.add(task)
    task.add_done_callback(_pending_sends.discard)
    return len(messages)


_pending_sends: set[asyncio.Task[int]] = set()  # keeps background sends alive until they finish
