"""Live pages: one websocket per browser tab on a node, namespace or pod page.

A socket joins its page's group (``timelines.live.group_name(SCOPE, C, NAME)``: ``node.C.NODE``,
``ns.C.NAMESPACE`` or ``pod.C.UID``) through the group's hub in this process (``dashboard.web.fanout``):
the hub tells the publisher it listens there (``timelines.live.listen``, renewed while a socket is
connected: deltas go only to groups someone listens to), receives each ``timeline.delta`` once (the pods
of that group each derive batch changed, each as the JSON text the publisher encoded once) and hands its
sockets one frame per flush — at most ``LIVE_MAX_FPS`` frames a second, the newest timeline of each pod
wins — holding only pods in namespaces the socket's user may read (the namespace travels beside each text):
a page costs no decoding or encoding of timelines. Each group message carries a per-group sequence
number; when one is skipped (or arrives late) the hub drops what it holds and every socket tells its
browser to refetch over REST instead of drawing a picture with a hole in it.

Who may watch: a node, anyone who reads something in the cluster (each pod is then filtered by its
namespace); a namespace, who may read that namespace; a pod, who may read the namespace of that pod (an
unknown UID is answered as one the user may not read).

Frames to the browser (JSON, ``type`` first):
  ``hello``   {group, max_fps, heartbeat_s, collector} on connect
  ``heartbeat`` {v: 1, seq, at}                       every ``PODLIFE_LIVE_HEARTBEAT_S`` (``fanout``): the page
                                                      turns its badge amber after two heartbeats of silence
  ``collector`` {streams, stale, stale_after_s}       the cluster's collector health, when the set of stale
                                                      streams changes (and every HEALTH_REFRESH_S while some
                                                      are stale; one poll per cluster per process, see
                                                      ``fanout.HealthWatch``); ``stale`` lists {stream, behind_s}
  ``deltas``  {seq, pods: [podlife.timeline/v2 …]}    coalesced updates
  ``refetch`` {seq, reason}                           a sequence gap: GET the page's timeline again
  ``error``   {status, message}                       then the socket closes (4401, 4403, 4404); status
                                                      400 (a frame that is not a JSON text) keeps it open

The badge on the page says "live" only while the socket is up **and** no stream is stale
(``queries.collector_health``: no event and no finished step or pull for ``PODLIFE_LIVE_STALE_S``);
otherwise it names the stale streams. A live socket over a stalled collector is not live. Nor is a socket
that went silent: a page that gets no frame (not even a heartbeat) for two heartbeats says "no message for
N s" until frames resume.

Shutdown order: ``disconnect`` cancels the socket's send under way, leaves the health watch, then the hub;
the last socket of a group stops its hub (its renewal and reader) and leaves the group (the publisher stops
sending there once nobody renews it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, cast

import orjson
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch
from django.conf import settings

from dashboard import queries
from dashboard.web import fanout
from dashboard.web.access import Access
from dashboard.web.figures import LIVE_MAX_FPS
from timelines import live
from timelines.live import group_name
from timelines.models import Cluster, Pod

log = logging.getLogger(__name__)
BAD_FRAME = 'frames to this socket are JSON text, e.g. {"type": "ping"}'


_P = ParamSpec("_P")
_R = TypeVar("_R")
Verdict = tuple[int, str, set[str] | None]  # (status, message, readable namespaces: None = all)


def _in_thread(fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """channels' ``database_sync_to_async`` (a thread, old connections closed around the call), typed:
    channels ships no types, so the decorator would make what it wraps untyped."""
    return cast("Callable[_P, Awaitable[_R]]", database_sync_to_async(fn))


@_in_thread
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


@_in_thread
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


class GroupConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]  # channels ships no types
    """The live watch of one group; subclasses say which (``group_scope``, and the URL's ``name_kwarg``).

    The socket reads only its browser: deltas come from its group's hub (``dashboard.web.fanout``), which
    hands it each frame ready to send, so a socket has no channel of its own on the channel layer."""

    max_fps = LIVE_MAX_FPS
    # Set by connect (None here: a socket refused or dropped before it disconnects with none of them).
    hub: fanout.GroupHub | None = None
    health: fanout.HealthWatch | None = None
    sending: asyncio.Task[None] | None = None  # the frames being sent
    group_scope: live.Scope
    name_kwarg: str

    @classmethod
    async def encode_json(cls, content: Any) -> str:
        return orjson.dumps(content).decode()  # a delta is a few kB of timeline: orjson is ~5x json.dumps

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # Channels' own __call__ minus the per-socket channel (a Redis subscription and a reader each).
        self.scope, self.channel_layer, self.base_send = scope, None, send
        with contextlib.suppress(StopConsumer):
            await await_many_dispatch([receive], self.dispatch)

    async def connect(self) -> None:
        kwargs = self.scope["url_route"]["kwargs"]
        self.cluster, self.name = kwargs["cluster"], kwargs[self.name_kwarg]
        # Frames for this socket wait here while it sends (the hello first): pods by uid (newest wins), a
        # refetch (which drops them), other frames in order.
        self.sending = None
        self.busy = True  # until hello is out
        self.backlog: dict[str, tuple[str, str]] = {}
        self.refetch: str | None = None
        self.frames: list[str] = []
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
        group = group_name(self.group_scope, self.cluster, self.name)
        self.hub = await fanout.join_group(get_channel_layer(), group, self.max_fps, self)
        health = await _collector_frame(self.cluster)
        await self.send_json(
            {
                "type": "hello",
                "group": group,
                "max_fps": self.max_fps,
                "heartbeat_s": self.hub.heartbeat_s,
                "collector": health,
            }
        )
        self.health = fanout.watch_health(self.cluster, _collector_frame, self, health)
        self.busy = False
        self._send_held()

    # --- frames from the hub and the health watch (dashboard.web.fanout.Member) ----------------------------
    def offer_deltas(self, frame: str, pods: dict[str, tuple[str, str]]) -> None:
        if self.busy:
            if self.refetch is None:
                self.backlog.update(pods)
        else:
            self._start_sending(frame)

    def offer_frame(self, frame: str, *, refetch: bool = False) -> None:
        if not self.busy:
            self._start_sending(frame)
        elif refetch:
            self.refetch = frame
            self.backlog.clear()  # the refetch reads the store, which already holds all of them
        else:
            self.frames.append(frame)

    def offer_heartbeat(self, frame: str) -> None:
        if not self.busy:  # a send under way reaches the page anyway: no heartbeat queued behind it
            self._start_sending(frame)

    def _start_sending(self, frame: str | None) -> None:
        self.busy = True
        self.sending = asyncio.get_running_loop().create_task(self._send_out(frame))

    def _send_held(self) -> None:
        if self.refetch is not None or self.frames or self.backlog:
            self._start_sending(None)

    def _next_held(self) -> str | None:
        if self.refetch is not None:
            frame, self.refetch = self.refetch, None
            return frame
        if self.frames:
            return self.frames.pop(0)
        if self.backlog:
            pods, self.backlog = self.backlog, {}
            seq = self.hub.last_seq if self.hub is not None else None
            return fanout.deltas_frame(seq, (text for _, text in pods.values()))
        return None

    async def _send_out(self, frame: str | None) -> None:
        """Send ``frame``, then what was held meanwhile, then stand idle."""
        try:
            while frame is not None or (frame := self._next_held()) is not None:
                await self.send(text_data=frame)
                frame = None
        except Exception:  # the page went away mid-send: its disconnect follows
            log.debug("a live frame to %s was not sent", self.cluster, exc_info=True)
        finally:
            self.busy = False

    async def disconnect(self, code: int) -> None:
        # Each is set only once the socket got that far (a refused socket has none of them).
        sending, health, hub = self.sending, self.health, self.hub
        if sending is not None:
            sending.cancel()
        if health is not None:
            fanout.unwatch_health(health, self)
        if hub is not None:
            await fanout.leave_group(hub, self)

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
            seq = self.hub.last_seq if self.hub is not None else None
            await self.send_json({"type": "pong", "seq": seq})


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
