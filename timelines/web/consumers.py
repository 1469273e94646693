"""Live pages: one websocket per browser tab on a node, namespace or pod page.

A consumer joins its page's group (``timelines.live.group_name(SCOPE, C, NAME)``: ``node.C.NODE``,
``ns.C.NAMESPACE`` or ``pod.C.UID``), tells the publisher it listens there (``timelines.live.listen``,
renewed while connected: deltas go only to groups someone listens to) and receives a ``timeline.delta``
with the pods of that group each derive batch changed, each as the JSON text the publisher encoded once.
It forwards them coalesced — at most ``LIVE_MAX_FPS`` frames a second, the newest timeline of each pod
wins — and only for pods in namespaces the user may read (the namespace travels beside each text), joining
the texts into the frame as they are: a page costs no decoding or encoding of timelines. Each group message carries a per-group sequence number; when one is skipped (or arrives
late) the consumer drops what it holds and tells the browser to refetch over REST instead of drawing a
picture with a hole in it.

Who may watch: a node, anyone who reads something in the cluster (each pod is then filtered by its
namespace); a namespace, who may read that namespace; a pod, who may read the namespace of that pod (an
unknown UID is answered as one the user may not read).

Frames to the browser (JSON, ``type`` first):
  ``hello``   {group, max_fps, collector}            on connect
  ``collector`` {streams, stale, stale_after_s}       the cluster's collector health, when the set of stale
                                                      streams changes (and every HEALTH_REFRESH_S while some
                                                      are stale); ``stale`` lists {stream, behind_s}
  ``deltas``  {seq, pods: [podlife.timeline/v2 …]}    coalesced updates
  ``refetch`` {seq, reason}                           a sequence gap: GET the page's timeline again
  ``error``   {status, message}                       then the socket closes (4401, 4403, 4404); status
                                                      400 (a frame that is not a JSON text) keeps it open

The badge on the page says "live" only while the socket is up **and** no stream is stale
(``queries.collector_health``: no event and no finished step or pull for ``PODLIFE_LIVE_STALE_S``);
otherwise it names the stale streams. A live socket over a stalled collector is not live.

Shutdown order: ``disconnect`` cancels the pending flush, the health poll and the listening renewal first, then leaves the
group (the publisher stops sending there once no consumer renews it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from timelines import live, queries
from timelines.live import group_name
from timelines.models import Cluster, Pod
from timelines.web.access import Access
from timelines.web.figures import LIVE_MAX_FPS

log = logging.getLogger(__name__)
BAD_FRAME = 'frames to this socket are JSON text, e.g. {"type": "ping"}'
HEALTH_POLL_S = 5.0  # how often a socket re-reads its cluster's collector health
HEALTH_REFRESH_S = 30.0  # while streams are stale, their ages are re-sent this often


Verdict = tuple[int, str, set[str] | None]  # (status, message, readable namespaces: None = all)


@database_sync_to_async
def _authorize(user: Any, cluster_name: str, scope: live.Scope, name: str) -> Verdict:
    """May ``user`` watch the ``scope`` group ``name`` of ``cluster_name``?"""
    if user is None or not user.is_authenticated:
        return 401, f"log in to watch a {_WHAT[scope]}", None
    access = Access.for_user(user)
    cluster = Cluster.objects.filter(name=cluster_name).first()
    if cluster is None or not access.can_cluster(cluster):
        return 404, f"no cluster named {cluster_name!r} that you may read", None
    if scope == "ns" and not access.can_namespace(cluster, name):
        return 404, f"no namespace {name!r} in cluster {cluster_name!r} that you may read", None
    if scope == "pod":
        namespace = Pod.objects.filter(cluster=cluster, uid=name).values_list("namespace", flat=True).first()
        if namespace is None or not access.can_namespace(cluster, namespace):
            return 404, f"no pod with UID {name!r} in cluster {cluster_name!r} that you may read", None
    return 200, "", access.namespace_filter(cluster)


_WHAT: dict[live.Scope, str] = {"node": "node", "ns": "namespace", "pod": "pod"}


@database_sync_to_async
def _collector_frame(cluster_name: str) -> dict[str, Any]:
    """The ``collector`` frame of a cluster: how many streams it has and which are stale, oldest first."""
    cluster = Cluster.objects.filter(name=cluster_name).first()
    rows = queries.collector_health([cluster.id]) if cluster is not None else []
    stale = [
        {
            "stream": row["resource"],
            "behind_s": None if row["behind_seconds"] is None else round(row["behind_seconds"], 1),
        }
        for row in rows
        if row["stale"]
    ]
    stale.sort(key=lambda s: (s["behind_s"] is not None, -(s["behind_s"] or 0.0), s["stream"]))
    return {
        "type": "collector",
        "streams": len(rows),
        "stale": stale,
        "stale_after_s": float(settings.PODLIFE_LIVE_STALE_S),
    }


class GroupConsumer(AsyncJsonWebsocketConsumer):
    """The live watch of one group; subclasses say which (``group_scope``, and the URL's ``name_kwarg``)."""

    max_fps = LIVE_MAX_FPS
    group_scope: live.Scope
    name_kwarg: str

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return orjson.dumps(content).decode()  # a delta is a few kB of timeline: orjson is ~5x json.dumps

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        self.cluster, self.name = kwargs["cluster"], kwargs[self.name_kwarg]
        self.group: str | None = None
        self.pending: dict[str, str] = {}  # uid -> its newest timeline, JSON text
        self.last_seq: int | None = None
        self.gap: str | None = None
        self.last_sent = 0.0
        self.flush_task: asyncio.Task[None] | None = None
        self.renew_task: asyncio.Task[None] | None = None
        self.health_task: asyncio.Task[None] | None = None
        status, message, namespaces = await _authorize(
            self.scope.get("user"), self.cluster, self.group_scope, self.name
        )
        await self.accept()
        if status != 200:
            # Accept, say why, close: a refused handshake looks like a network error to the page, and the
            # page must not keep reconnecting when the answer is "no".
            await self.send_json({"type": "error", "status": status, "message": message})
            await self.close(code=4000 + status)
            return
        self.namespaces = namespaces
        self.group = group_name(self.group_scope, self.cluster, self.name)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await live.listen(self.group)
        self.renew_task = asyncio.get_running_loop().create_task(self._renew(self.group))
        health = await _collector_frame(self.cluster)
        await self.send_json(
            {"type": "hello", "group": self.group, "max_fps": self.max_fps, "collector": health}
        )
        self.health_task = asyncio.get_running_loop().create_task(self._watch_health(health))

    async def _watch_health(self, sent: dict[str, Any]) -> None:
        """Send a ``collector`` frame when the set of stale streams changes, and refresh their ages."""
        loop = asyncio.get_running_loop()
        sent_at = loop.time()
        while True:
            await asyncio.sleep(HEALTH_POLL_S)
            try:
                frame = await _collector_frame(self.cluster)
            except Exception:  # the database away for a moment: the next poll tries again
                log.warning("reading the collector health of %s failed", self.cluster, exc_info=True)
                continue
            names = [s["stream"] for s in frame["stale"]]
            changed = names != [s["stream"] for s in sent["stale"]] or frame["streams"] != sent["streams"]
            if changed or (names and loop.time() - sent_at >= HEALTH_REFRESH_S):
                await self.send_json(frame)
                sent, sent_at = frame, loop.time()

    async def _renew(self, group: str) -> None:
        while True:
            await asyncio.sleep(live.LISTEN_TTL_S / 3)
            try:
                await live.listen(group)
            except Exception:  # Redis away for a moment: the next renewal tries again
                log.warning("renewing the live group %s failed", group, exc_info=True)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "flush_task", None) is not None:
            self.flush_task.cancel()
        if getattr(self, "renew_task", None) is not None:
            self.renew_task.cancel()
        if getattr(self, "health_task", None) is not None:
            self.health_task.cancel()
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """A frame from the browser: JSON text. Anything else gets an error frame, never a traceback."""
        if text_data is None:
            await self.send_json(
                {"type": "error", "status": 400, "message": BAD_FRAME + " (got binary data)"}
            )
            return
        try:
            content = orjson.loads(text_data)
        except orjson.JSONDecodeError as exc:
            await self.send_json({"type": "error", "status": 400, "message": f"{BAD_FRAME} ({exc})"})
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The browser only ever says "ping"; anything else is ignored (read-only socket).
        if isinstance(content, dict) and content.get("type") == "ping":
            await self.send_json({"type": "pong", "seq": self.last_seq})

    # --- group messages -----------------------------------------------------------------------------------
    async def dispatch(self, message: dict[str, Any]) -> None:
        """A group delta goes straight to its handler. Channels' own dispatch first hops to a worker thread
        to close stale database connections (``aclose_old_connections``) for every message: per delivered
        delta, on every socket of a node, that hop cost more than the delta itself under load
        (bench/load.py, docs/performance.md "Load"). The handler touches no database, and what here does
        (``database_sync_to_async``) closes stale connections around its own call."""
        if message.get("type") == "timeline.delta":
            await self.timeline_delta(message)
        else:
            await super().dispatch(message)

    async def timeline_delta(self, message: dict[str, Any]) -> None:
        """A group's delta: each pod's timeline arrives as JSON text (``timelines.live.GroupDelta``) and is
        forwarded as it is, never decoded; the namespaces beside it filter what a restricted reader gets."""
        seq = message.get("seq")
        if isinstance(seq, int):
            if self.last_seq is not None and seq != self.last_seq + 1:
                what = "skipped" if seq > self.last_seq + 1 else "arrived late"
                self.gap = f"sequence gap on {self.group}: expected {self.last_seq + 1}, got {seq} ({what})"
            self.last_seq = seq if self.last_seq is None else max(seq, self.last_seq)
        uids, namespaces, pods = message.get("uids"), message.get("namespaces"), message.get("pods")
        if not (
            isinstance(uids, list)
            and isinstance(namespaces, list)
            and isinstance(pods, list)
            and len(uids) == len(namespaces) == len(pods)
        ):
            # Another schema (a publisher of an older release during a rolling upgrade): what it carried is
            # in the store, so the page refetches rather than the socket failing.
            self.gap = (
                f"a delta on {self.group} in a form this server does not read ({message.get('schema')!r})"
            )
            self._schedule()
            return
        if self.namespaces is None:
            self.pending.update(zip(uids, pods, strict=True))
        else:
            for uid, namespace, pod in zip(uids, namespaces, pods, strict=True):
                if namespace in self.namespaces:
                    self.pending[uid] = pod
        if not self.pending:
            if self.gap:
                self._schedule()
            return
        idle = self.flush_task is None or self.flush_task.done()
        if idle and asyncio.get_running_loop().time() - self.last_sent >= 1.0 / self.max_fps:
            await self._flush()  # a quiet group: send now, no extra trip through the event loop
        else:
            self._schedule()

    def _schedule(self) -> None:
        if self.flush_task is None or self.flush_task.done():
            loop = asyncio.get_running_loop()
            delay = max(0.0, self.last_sent + 1.0 / self.max_fps - loop.time())
            self.flush_task = loop.create_task(self._flush_after(delay))

    async def _flush_after(self, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        await self._flush()
        # Anything that arrived during the send goes out in the next frame, no sooner than 1 / max_fps.
        self.flush_task = None
        if self.pending or self.gap:
            self._schedule()

    async def _flush(self) -> None:
        self.last_sent = asyncio.get_running_loop().time()
        if self.gap:
            reason, self.gap = self.gap, None
            self.pending.clear()  # the refetch reads the store, which already holds all of them
            await self.send_json({"type": "refetch", "seq": self.last_seq, "reason": reason})
        elif self.pending:
            pods, self.pending = ",".join(self.pending.values()), {}
            # The pods' JSON texts, joined as they came: no per-client encoding of the timelines.
            await self.send(
                text_data=f'{{"type":"deltas","seq":{orjson.dumps(self.last_seq).decode()},"pods":[{pods}]}}'
            )


class NodeConsumer(GroupConsumer):
    """Every pod on one node (the node page)."""

    group_scope = "node"
    name_kwarg = "node"


class NamespaceConsumer(GroupConsumer):
    """Every pod of one namespace (the namespace page)."""

    group_scope = "ns"
    name_kwarg = "namespace"


class PodConsumer(GroupConsumer):
    """One pod UID (the pod page)."""

    group_scope = "pod"
    name_kwarg = "uid"
