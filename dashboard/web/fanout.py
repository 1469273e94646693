"""What a web process shares between its live sockets: one reader per group, one health poll per cluster.

A node watched by 200 pages used to cost 200 of everything per delta: the channel layer put the message
in 200 queues, 200 consumers each decoded it (msgpack: 200 copies of every pod's text), coalesced it on a
timer of their own and joined a frame of their own. Now a **group hub** (one per group, per event loop)
joins the group once, reads each delta once, coalesces at ``max_fps`` and joins ONE frame text per flush,
which every socket of the group sends as it is (a restricted reader gets the frame of its set of
namespaces, also joined once per flush). A socket still busy sending (a slow page) keeps the pods that
arrive meanwhile, newest first, and sends them when it is free: one slow page never holds up the others.

The hub also sends every socket of its group a **heartbeat** every ``PODLIFE_LIVE_HEARTBEAT_S``
(``{"type": "heartbeat", "v": 1, "seq", "at"}``: the group's last sequence number and the server's
clock), so a page hears from the server even when its group is quiet, and a page that hears nothing for two
heartbeats knows its socket (or this process) is gone, not merely idle. A socket busy sending skips it:
the frame under way says as much. One timer per group, one frame text per beat, whatever the sockets.

Each group message carries a per-group sequence number (``timelines.live``); when one is skipped, arrives
late, or comes in a form this release does not read, the hub drops what it holds and every socket tells
its page to refetch over REST.

A **health watch** (one per cluster, per event loop) reads the cluster's collector health every
``HEALTH_POLL_S`` and sends a ``collector`` frame to all of that cluster's sockets when the set of stale
streams changes (and every ``HEALTH_REFRESH_S`` while some are stale): one query per cluster per period,
not one per socket.

Both are kept per event loop (a process's sockets share its one loop; a test's loop starts with none), and
both go away with the last socket that uses them.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
from django.conf import settings

from timelines import live

log = logging.getLogger(__name__)
HEALTH_POLL_S = 5.0  # how often a cluster's collector health is re-read (once for all its sockets)
HEALTH_REFRESH_S = 30.0  # while streams are stale, their ages are re-sent this often
HEARTBEAT_VERSION = 1  # the heartbeat frame's "v": a page reads the members of the versions it knows


class Member(Protocol):
    """A socket as the hub and the watch see it."""

    namespaces: set[str] | None  # the namespaces its user may read; None: all

    def offer_deltas(self, frame: str, pods: dict[str, tuple[str, str]]) -> None:
        """Send the ``deltas`` frame now or, while a send is under way, keep its ``pods`` for the next."""

    def offer_frame(self, frame: str, *, refetch: bool = False) -> None:
        """Send ``frame`` (a ``refetch`` drops the pods kept) now or after the send under way."""

    def offer_heartbeat(self, frame: str) -> None:
        """Send the heartbeat ``frame`` now, or drop it while a send is under way."""


def deltas_frame(seq: int | None, texts: Any) -> str:
    """A ``deltas`` frame: the pods' JSON texts joined as they came, no encoding of timelines."""
    return f'{{"type":"deltas","seq":{"null" if seq is None else seq},"pods":[{",".join(texts)}]}}'


class GroupHub:
    """The live deltas of one group in this process (see the module's docstring)."""

    def __init__(self, layer: Any, group: str, max_fps: float) -> None:
        self.layer, self.group, self.max_fps = layer, group, max_fps
        self.members: dict[Member, None] = {}  # insertion-ordered
        self.pending: dict[str, tuple[str, str]] = {}  # uid -> (namespace, newest timeline as JSON text)
        self.last_seq: int | None = None
        self.gap: str | None = None
        self.last_sent = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.channel: str | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.started: asyncio.Task[None] | None = None
        self.heartbeat_s = float(settings.PODLIFE_LIVE_HEARTBEAT_S)

    async def _start(self) -> None:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        await live.listen(self.group)
        loop = asyncio.get_running_loop()
        self.tasks = [
            loop.create_task(self._read()),
            loop.create_task(self._renew()),
            loop.create_task(self._beat()),
        ]

    async def _stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        for task in self.tasks:
            task.cancel()  # the layer drops the channel's queue when its reader is cancelled
        if self.started is not None and not self.started.done():
            self.started.cancel()
        if self.channel is not None:
            await self.layer.group_discard(self.group, self.channel)
        self.pending.clear()

    async def _read(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except Exception:  # the layer's Redis away for a moment: what was lost, the pages refetch
                log.warning("reading the live group %s failed", self.group, exc_info=True)
                self.gap = f"the live messages of {self.group} were interrupted"
                self._schedule()
                await asyncio.sleep(1.0)
                continue
            try:
                self.take(message)
            except Exception:  # one odd message must not end the group's live view
                log.exception("a live delta on %s could not be read", self.group)
                self.gap = f"a delta on {self.group} this server could not read"
                self._schedule()

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(live.LISTEN_TTL_S / 3)
            try:
                await live.listen(self.group)
            except Exception:  # Redis away for a moment: the next renewal tries again
                log.warning("renewing the live group %s failed", self.group, exc_info=True)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            self.beat()

    def beat(self) -> None:
        """One heartbeat frame to every socket of the group (see the module's docstring)."""
        frame = heartbeat_frame(self.last_seq)
        for member in list(self.members):
            member.offer_heartbeat(frame)

    def take(self, message: dict[str, Any]) -> None:
        """A group message: note its number (a gap makes every page refetch), keep its pods, flush when due."""
        if message.get("type") != "timeline.delta":
            return
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
            # in the store, so the pages refetch rather than the sockets failing.
            self.gap = (
                f"a delta on {self.group} in a form this server does not read ({message.get('schema')!r})"
            )
        else:
            self.pending.update(zip(uids, zip(namespaces, pods, strict=True), strict=True))
        if self.pending or self.gap:
            self._schedule()

    def _schedule(self) -> None:
        if self.timer is not None:
            return
        loop = asyncio.get_running_loop()
        delay = self.last_sent + 1.0 / self.max_fps - loop.time()
        if delay <= 0:
            self.flush()  # a quiet group: send now
        else:
            self.timer = loop.call_later(delay, self.flush)

    def flush(self) -> None:
        """One frame per set of readable namespaces, offered to every socket of the group."""
        self.timer = None
        self.last_sent = asyncio.get_running_loop().time()
        if self.gap:
            reason, self.gap = self.gap, None
            self.pending.clear()  # the refetch reads the store, which already holds all of them
            frame = live_frame({"type": "refetch", "seq": self.last_seq, "reason": reason})
            for member in list(self.members):
                member.offer_frame(frame, refetch=True)
            return
        if not self.pending:
            return
        pending, self.pending = self.pending, {}
        frames: dict[frozenset[str] | None, tuple[str, dict[str, tuple[str, str]]] | None] = {}
        for member in list(self.members):
            key = None if member.namespaces is None else frozenset(member.namespaces)
            if key not in frames:
                pods = pending if key is None else {u: p for u, p in pending.items() if p[0] in key}
                frames[key] = (
                    (deltas_frame(self.last_seq, (t for _, t in pods.values())), pods) if pods else None
                )
            made = frames[key]
            if made is not None:
                member.offer_deltas(*made)


def live_frame(content: dict[str, Any]) -> str:
    return orjson.dumps(content).decode()


def heartbeat_frame(seq: int | None) -> str:
    """A ``heartbeat`` frame: the version of its form, the group's last sequence number, the server's clock."""
    at = datetime.now(UTC).isoformat()
    return live_frame({"type": "heartbeat", "v": HEARTBEAT_VERSION, "seq": seq, "at": at})


class HealthWatch:
    """The collector health of one cluster for this process's sockets on it (see the module's docstring)."""

    def __init__(self, cluster: str, read: Callable[[str], Awaitable[dict[str, Any]]]) -> None:
        self.cluster, self.read = cluster, read
        self.members: dict[Member, None] = {}
        self.sent: dict[str, Any] | None = None
        self.task: asyncio.Task[None] | None = None

    def add(self, member: Member, hello: dict[str, Any]) -> None:
        """``member`` was sent ``hello`` (its ``collector`` frame) and gets the changes from now on."""
        self.members[member] = None
        if self.task is None:
            self.sent = hello
            self.task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        sent_at = loop.time()
        while True:
            await asyncio.sleep(HEALTH_POLL_S)
            try:
                frame = await self.read(self.cluster)
            except Exception:  # the database away for a moment: the next poll tries again
                log.warning("reading the collector health of %s failed", self.cluster, exc_info=True)
                continue
            sent = self.sent or frame
            names = [s["stream"] for s in frame["stale"]]
            changed = names != [s["stream"] for s in sent["stale"]] or frame["streams"] != sent["streams"]
            if changed or (names and loop.time() - sent_at >= HEALTH_REFRESH_S):
                text = live_frame(frame)
                for member in list(self.members):
                    member.offer_frame(text)
                self.sent, sent_at = frame, loop.time()


class _Shared:
    """This event loop's hubs and watches."""

    def __init__(self) -> None:
        self.hubs: dict[tuple[int, str], GroupHub] = {}  # (id of the channel layer, group) -> hub
        self.watches: dict[str, HealthWatch] = {}


_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Shared] = weakref.WeakKeyDictionary()


def _shared() -> _Shared:
    loop = asyncio.get_running_loop()
    shared = _per_loop.get(loop)
    if shared is None:
        shared = _per_loop[loop] = _Shared()
    return shared


async def join_group(layer: Any, group: str, max_fps: float, member: Member) -> GroupHub:
    """``member`` receives ``group``'s frames from now on (the hub is started by its first member)."""
    hubs = _shared().hubs
    hub = hubs.get((id(layer), group))
    if hub is None:
        hub = hubs[(id(layer), group)] = GroupHub(layer, group, max_fps)
        hub.started = asyncio.get_running_loop().create_task(hub._start())
    hub.members[member] = None
    assert hub.started is not None
    try:
        await asyncio.shield(hub.started)
    except BaseException:
        await leave_group(hub, member)
        raise
    return hub


async def leave_group(hub: GroupHub, member: Member) -> None:
    hub.members.pop(member, None)
    hubs = _shared().hubs
    if not hub.members and hubs.get((id(hub.layer), hub.group)) is hub:
        del hubs[(id(hub.layer), hub.group)]
        await hub._stop()


def watch_health(
    cluster: str, read: Callable[[str], Awaitable[dict[str, Any]]], member: Member, hello: dict[str, Any]
) -> HealthWatch:
    watches = _shared().watches
    watch = watches.get(cluster)
    if watch is None:
        watch = watches[cluster] = HealthWatch(cluster, read)
    watch.add(member, hello)
    return watch


def unwatch_health(watch: HealthWatch, member: Member) -> None:
    watch.members.pop(member, None)
    watches = _shared().watches
    if not watch.members and watches.get(watch.cluster) is watch:
        del watches[watch.cluster]
        if watch.task is not None:
            watch.task.cancel()


def clear() -> None:
    """Forget this process's hubs and watches (tests: between event loops that share a thread)."""
    _per_loop.clear()
