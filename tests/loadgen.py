"""Load against a real podlife web process (issue #18, deliverable 6), shared by the suite's bounded load
test (tests/security/test_load.py) and the full benchmark (bench/load.py).

What runs, all over loopback:

* the **server**: ``uvicorn podlife_site.asgi:application`` in a subprocess (PostgreSQL, the Redis
  channel layer), as deployed: the pool and the request limit at their defaults;
* the **churn**: ``publishers`` threads of this process, each a collector and a derive worker in one: a
  new pod on the watched node is stored, derived and pushed (``tests.flow.ingest``: the store, the derive
  stage, ``timelines.live``) every ``publish_every_s``; the time before the store is the pod's event time;
* **websocket clients** on that one node's live view, as the page is (tests/loadclients.py, in a process of
  their own): log in (a session cookie), open the socket, read ``deltas`` frames, and on a ``refetch``
  frame GET the node timeline over REST as the page does. A pod's delivery lag is the time from its event
  to the frame that carries it to that client;
* **REST clients** looping over the API a dashboard user hits (the node's timeline, a pod's timeline,
  clusters, findings) with an API token, in a process of their own too (tests/loadclients.py), so their
  threads do not slow the publishers down and inflate the lag.

Counted: every HTTP status (no 500 is allowed), refetch frames (a false gap would make one), pods that
never reached a client, the delivery lag, and the server's resident memory before, at its peak and after
the clients left.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import requests
from django.db import connection

from tests.flow import ingest
from tests.loadclients import PagesResult, pages_main, rest_main, warm_page
from tests.waits import group_subscribed
from tests.web.factories import started_pod
from timelines import live


def rss_mib(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used (Linux)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


@dataclass
class LoadResult:
    ws_clients: int
    rest_clients: int
    seconds: float
    pods: int = 0  # pods published during the run
    connected: int = 0
    lags_ms: list[float] = field(default_factory=list)
    push_ms: list[float] = field(default_factory=list)  # event -> pushed: each pod's store, derive, push
    refetches: int = 0
    missing: int = 0  # (client, pod) pairs never delivered
    ws_errors: list[str] = field(default_factory=list)
    rest_statuses: Counter[int] = field(default_factory=Counter)
    rest_ms: list[float] = field(default_factory=list)
    refetch_statuses: Counter[int] = field(default_factory=Counter)
    rss_unpaged: float = 0.0  # after the warm API requests, before the warm page
    rss_before: float = 0.0
    rss_peak: float = 0.0
    rss_after: float = 0.0
    server_cpu_s: float = 0.0  # CPU the server used from the pages' connection to their report
    wall_s: float = 0.0  # ... in this wall time

    def statuses(self) -> Counter[int]:
        return self.rest_statuses + self.refetch_statuses

    def report(self) -> str:
        lag = self.lags_ms
        rest = self.rest_ms
        return "\n".join(
            [
                f"  {self.ws_clients} websocket clients ({self.connected} connected), {self.rest_clients} REST"
                f" clients, {self.seconds:.0f} s, {self.pods} pods published",
                f"  delta delivery: n={len(lag)} p50 {pct(lag, 50):.0f} ms  p95 {pct(lag, 95):.0f} ms"
                f"  p99 {pct(lag, 99):.0f} ms  max {max(lag, default=float('nan')):.0f} ms;"
                f" undelivered {self.missing}; refetch frames {self.refetches}",
                f"  of which before the server: event -> pushed (store, derive, push) p50"
                f" {pct(self.push_ms, 50):.0f} ms p99 {pct(self.push_ms, 99):.0f} ms",
                f"  REST: {sum(self.rest_statuses.values())} requests {dict(self.rest_statuses)}"
                f" p50 {pct(rest, 50):.0f} ms p99 {pct(rest, 99):.0f} ms; refetches {dict(self.refetch_statuses)}",
                f"  server RSS: {self.rss_before:.0f} MiB before, {self.rss_peak:.0f} MiB peak,"
                f" {self.rss_after:.0f} MiB after the clients left"
                f" ({(self.rss_after / self.rss_before - 1) * 100:+.0f}%)",
                f"  server CPU: {self.server_cpu_s:.1f} s in {self.wall_s:.1f} s"
                f" ({self.server_cpu_s / max(self.wall_s, 1e-9):.0%} of one core)",
                f"  websocket errors: {len(self.ws_errors)} {self.ws_errors[:3]}",
            ]
        )


class Load:
    """One load run against ``base_url`` (a server process ``server_pid``) for node ``node`` of
    ``cluster``, which must already exist with that node and its pod ``seed_uid``."""

    def __init__(
        self,
        base_url: str,
        server_pid: int,
        cluster: str,
        node: str,
        *,
        session_cookie: str,
        token: str,
        seed_uid: str,
        ws_clients: int,
        rest_clients: int,
        seconds: float,
        publishers: int = 2,
        publish_every_s: float = 0.1,
        settle_s: float = 10.0,
    ) -> None:
        self.base_url, self.server_pid = base_url, server_pid
        self.cluster, self.node = cluster, node
        self.session_cookie, self.token = session_cookie, token
        self.result = LoadResult(ws_clients, rest_clients, seconds)
        self.publishers, self.publish_every_s, self.settle_s = publishers, publish_every_s, settle_s
        self.published: dict[str, float] = {}  # uid -> event time (time.time())
        self.seed_uid = seed_uid  # REST clients read its timeline (a pod just stored may still be deriving)
        self.stop_publishing = threading.Event()
        self._lock = threading.Lock()
        self.node_api = f"{base_url}/api/v1/clusters/{cluster}/nodes/{node}/timeline?lanes=worker"

    # --- churn -------------------------------------------------------------------------------------------
    def _publish(self, worker: int) -> None:
        try:
            for i in itertools.count():
                if self.stop_publishing.is_set():
                    return
                uid = str(uuid.uuid4())
                started = time.time()
                with self._lock:
                    self.published[uid] = started
                # The name carries the event time: the pages (another process) read their lag from it.
                name = f"load-{worker}-{i}-t{int(started * 1e6)}"
                ingest(self.cluster, started_pod(uid, name, node=self.node))
                with self._lock:
                    self.result.push_ms.append((time.time() - started) * 1000)
                self.stop_publishing.wait(max(0.0, self.publish_every_s - (time.time() - started)))
        finally:
            connection.close()

    # --- the run ------------------------------------------------------------------------------------------
    def run(self) -> LoadResult:
        # Warm: every route the run uses has been served once (imports, URL resolvers, templates, the live
        # path's channel layer and its Redis connections), so the memory before is the server's steady
        # state, not its first request's or first socket's; it is read as the memory after is, 3 s after
        # the last client left.
        api = [
            self.node_api,
            f"{self.base_url}/api/v1/clusters",
            f"{self.base_url}/api/v1/findings",
            f"{self.base_url}/api/v1/clusters/{self.cluster}/pods/{self.seed_uid}/timeline",
        ]
        for path in api:
            requests.get(path, headers={"Authorization": f"Bearer {self.token}"}, timeout=60)
        self.result.rss_unpaged = rss_mib(self.server_pid)
        warm_page(self.base_url, self.cluster, self.node, self.session_cookie)
        time.sleep(3.0)
        self.result.rss_before = self.result.rss_peak = rss_mib(self.server_pid)
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                self.result.rss_peak = max(self.result.rss_peak, rss_mib(self.server_pid))
                sampling.wait(0.25)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        spawn = multiprocessing.get_context("spawn")
        ours, theirs = spawn.Pipe()
        args = {
            "base_url": self.base_url,
            "cluster": self.cluster,
            "node": self.node,
            "cookie": self.session_cookie,
            "n": self.result.ws_clients,
            "settle_s": self.settle_s,
        }
        pages = spawn.Process(target=pages_main, args=(theirs, args), name="load-pages")
        pages.start()
        rest_ours, rest_theirs = spawn.Pipe()
        rest_args = {"n": self.result.rest_clients, "paths": api, "token": self.token}
        rest = spawn.Process(target=rest_main, args=(rest_theirs, rest_args), name="load-rest")
        try:
            if not ours.poll(300) or ours.recv() != "ready":
                raise RuntimeError("the pages did not connect within 5 minutes")
            group_subscribed(live.group_name("node", self.cluster, self.node))  # nothing is published before
            cpu0, wall0 = cpu_s(self.server_pid), time.monotonic()
            if self.result.rest_clients:
                rest.start()
            threads = [threading.Thread(target=self._publish, args=(w,)) for w in range(self.publishers)]
            for t in threads:
                t.start()
            time.sleep(self.result.seconds)
            self.stop_publishing.set()
            if self.result.rest_clients:
                rest_ours.send("stop")
                self.result.rest_statuses, self.result.rest_ms = rest_ours.recv()
            for t in threads:
                t.join()
            ours.send(set(self.published))
            if not ours.poll(self.settle_s + 120):
                raise RuntimeError("the pages did not report")
            seen: PagesResult = ours.recv()
            self.result.server_cpu_s = cpu_s(self.server_pid) - cpu0
            self.result.wall_s = time.monotonic() - wall0
        finally:
            if rest.pid is not None:
                rest.join(30)
                if rest.is_alive():
                    rest.kill()
            pages.join(30)
            if pages.is_alive():
                pages.kill()
            sampling.set()
            sampler.join()
        self.result.connected, self.result.lags_ms = seen.connected, seen.lags_ms
        self.result.refetches, self.result.refetch_statuses = seen.refetches, seen.refetch_statuses
        self.result.ws_errors, self.result.missing = seen.errors, seen.missing
        time.sleep(3.0)  # the server lets go of what the clients held
        self.result.rss_after = rss_mib(self.server_pid)
        self.result.pods = len(self.published)
        return self.result
