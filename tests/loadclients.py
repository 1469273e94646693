"""The client side of tests/loadgen.py, each in a process of its own: live pages on one node
(``pages_main``), and API clients (``rest_main``).

They run apart from the process that stores and derives (spawned children, without Django), so the
pages' clock is not held up by the publishers' work on the same interpreter lock, and the publishers are
not held up by 50 API clients' threads. Each pushed pod's name ends in ``-t<microseconds since the
epoch>`` of its event, so the lag is read from the frame alone.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import orjson
import requests

NO_DEFLATE = bool(os.environ.get("PODLIFE_LOAD_NO_DEFLATE"))


@dataclass
class PagesResult:
    connected: int = 0
    lags_ms: list[float] = field(default_factory=list)
    refetches: int = 0
    refetch_statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    missing: int = 0


def event_time(name: str) -> float | None:
    """The event time a load pod's name carries (``…-t<µs>``), or None for other pods."""
    head, _, stamp = name.rpartition("-t")
    return int(stamp) / 1e6 if head and stamp.isdigit() else None


async def open_page(base_url: str, cluster: str, node: str, cookie: str) -> tuple[Any, dict[str, Any]]:
    """Open the node's live view as the page does; the socket and its first frame (``hello``)."""
    from websockets.asyncio.client import connect

    socket = await connect(
        base_url.replace("http://", "ws://") + f"/ws/v1/nodes/{cluster}/{node}/",
        origin=base_url,  # type: ignore[arg-type]
        additional_headers={"Cookie": f"sessionid={cookie}"},
        open_timeout=60,
        max_size=None,
        compression=None if NO_DEFLATE else "deflate",
    )
    return socket, orjson.loads(await asyncio.wait_for(socket.recv(), 60))


def warm_page(base_url: str, cluster: str, node: str, cookie: str) -> None:
    """One page opened, greeted and closed: the live route served once."""

    async def visit() -> None:
        socket, hello = await open_page(base_url, cluster, node, cookie)
        await socket.close()
        if hello.get("type") != "hello":
            raise RuntimeError(f"the warm page was not greeted: {hello}")

    asyncio.run(visit())


class Pages:
    def __init__(self, base_url: str, cluster: str, node: str, cookie: str, n: int) -> None:
        self.base_url, self.cluster, self.node, self.cookie, self.n = base_url, cluster, node, cookie, n
        self.result = PagesResult()
        self.delivered: list[set[str]] = [set() for _ in range(n)]
        self.connected_ids: set[int] = set()
        self.http = ThreadPoolExecutor(16, thread_name_prefix="refetch")
        self.node_api = f"{base_url}/api/v1/clusters/{cluster}/nodes/{node}/timeline?lanes=worker"

    def _refetch(self) -> int:
        return requests.get(self.node_api, cookies={"sessionid": self.cookie}, timeout=60).status_code

    async def page(self, i: int, handshakes: asyncio.Semaphore, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with handshakes:
                socket, hello = await open_page(self.base_url, self.cluster, self.node, self.cookie)
            if hello.get("type") != "hello":
                self.result.errors.append(f"page {i}: {hello}")
                await socket.close()
                return
            self.result.connected += 1
            self.connected_ids.add(i)
            async with socket:
                while not stop.is_set():
                    try:
                        raw = await asyncio.wait_for(socket.recv(), 0.5)
                    except TimeoutError:
                        continue
                    now = time.time()
                    frame = orjson.loads(raw)
                    if frame["type"] == "deltas":
                        for pod in frame["pods"]:
                            uid, at = pod["pod"]["uid"], event_time(pod["pod"].get("name") or "")
                            if at is not None and uid not in self.delivered[i]:
                                self.delivered[i].add(uid)
                                self.result.lags_ms.append((now - at) * 1000)
                    elif frame["type"] == "refetch":
                        self.result.refetches += 1
                        status = await loop.run_in_executor(self.http, self._refetch)
                        self.result.refetch_statuses[status] += 1
                    elif frame["type"] == "error":
                        self.result.errors.append(f"page {i}: {frame}")
                        return
        except Exception as exc:  # counted: a page that could not connect or was dropped
            self.result.errors.append(f"page {i}: {type(exc).__name__}: {exc}")

    async def run(self, conn: Connection, settle_s: float) -> PagesResult:
        stop = asyncio.Event()
        handshakes = asyncio.Semaphore(16)
        pages = [asyncio.create_task(self.page(i, handshakes, stop)) for i in range(self.n)]
        while self.result.connected + len(self.result.errors) < self.n:
            await asyncio.sleep(0.1)
        conn.send("ready")  # the parent waits until Redis counts the server's subscription
        loop = asyncio.get_running_loop()
        expected: set[str] = await loop.run_in_executor(None, conn.recv)  # the pods published, at the end
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline and any(expected - self.delivered[i] for i in self.connected_ids):
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*pages)
        self.http.shutdown()
        self.result.missing = sum(len(expected - self.delivered[i]) for i in self.connected_ids)
        return self.result


def pages_main(conn: Connection, args: dict[str, Any]) -> None:
    """Child process entry: run the pages, say "ready" once all are connected, take the set of published
    UIDs, wait for them to arrive (at most ``settle_s``), send back a PagesResult."""
    pages = Pages(args["base_url"], args["cluster"], args["node"], args["cookie"], args["n"])
    result = asyncio.run(pages.run(conn, args["settle_s"]))
    conn.send(result)
    conn.close()


def rest_main(conn: Connection, args: dict[str, Any]) -> None:
    """Child process entry: ``args["n"]`` API clients loop over ``args["paths"]`` with the API token until
    told to stop; send back the statuses and each request's milliseconds."""
    statuses: Counter[int] = Counter()
    times_ms: list[float] = []
    lock, stop = threading.Lock(), threading.Event()

    def client(n: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {args['token']}"
        for i in itertools.count(n):
            if stop.is_set():
                return
            began = time.monotonic()
            answer = session.get(args["paths"][i % len(args["paths"])], timeout=60)
            with lock:
                statuses[answer.status_code] += 1
                times_ms.append((time.monotonic() - began) * 1000)
            if answer.status_code == 503:  # as a well-behaved client: wait as told
                stop.wait(float(answer.headers.get("Retry-After", "1")))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(args["n"])]
    for t in threads:
        t.start()
    conn.recv()  # "stop"
    stop.set()
    for t in threads:
        t.join()
    conn.send((statuses, times_ms))
    conn.close()
