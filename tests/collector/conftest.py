"""The collector against the demo cluster, through the real ``kubernetes`` client, over loopback HTTP."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.db import connection
from django.utils import timezone

from collectors.kube import config, lease, watch
from collectors.kube.config import ClusterSource, Tunables
from collectors.kube.kubelet import pull_kubelet_logs, pull_kubelet_metrics
from collectors.kube.resources import ALL_RESOURCES
from collectors.kube.watch import StepControl, StepResult, run_step
from demo_cluster import SimServer, run_sim
from tests.stored import ORDER, keys_of, rows_of
from timelines import derivation
from timelines.observation_rows import StoredRow, Where

CLUSTER = "sim"

# Short enough that a watch step (one request) takes about a second.
FAST = Tunables(
    watch_timeout_s=1,
    lease_ttl_s=5.0,
    list_page_size=20,
    batch_size=200,
    batch_seconds=0.1,
    backoff_base_s=0.01,
    backoff_cap_s=0.05,
    kubelet_interval_s=1.0,
)


@dataclass
class SimCluster:
    """A demo cluster registered as collector source ``sim``."""

    server: SimServer
    kubeconfig: Path
    pods_checked_rv: int = 0  # pod watch events up to this resourceVersion are stored (``pods_stored``)
    cluster: str = CLUSTER  # the collector source it is registered as

    @property
    def store(self) -> Any:
        return self.server.cluster.store

    def step(self, resource: str, **control: Any) -> StepResult:
        control.setdefault("tunables", FAST)
        return run_step(CLUSTER, resource, control=StepControl(**control))

    def advance(self, seconds: float) -> None:
        with self.server.cluster.engine.lock:
            self.server.cluster.advance(seconds)

    def spawn(self, n: int = 1, node: str | None = None) -> set[str]:
        """Create ``n`` bare pods bound to ``node`` (the first node by default); their UIDs."""
        cluster = self.server.cluster
        node = node or sorted(cluster.kubelets)[0]
        return {cluster.spawn_pod(node)["metadata"]["uid"] for _ in range(n)}

    def remove(self, uid: str) -> None:
        """Delete the pod with ``uid`` outright (as a force delete: one DELETED event)."""
        for pod in self.store.iter_objects("pods"):
            if pod["metadata"]["uid"] == uid:
                with self.server.cluster.engine.lock:
                    self.store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                return
        raise AssertionError(f"no pod {uid} in the demo cluster")

    def advance_watched(self, seconds: float, step: float = 1.0, timeout: float = 60.0) -> None:
        """Tell the story ``step`` virtual seconds at a time, each step only once the running collector
        stored every pod event the demo cluster made so far (``pods_stored``). With arrivals stamped in
        the demo's time (``on_virtual_time``), a delivery lag can then never stretch a span: the clock
        does not move while the watch is behind, however loaded the machine. The pods must have been
        listed first (``step`` of each resource): the events before that list are not waited for, only
        the pods' state it returned."""
        if not self.pods_checked_rv:
            with self.store.cond:
                self.pods_checked_rv = self.store.rv
        for _ in range(round(seconds / step)):
            self.advance(step)
            self.pods_stored(timeout)

    def pods_stored(self, timeout: float = 60.0) -> None:
        """Wait until the observation of every pod watch event made so far is stored (its dedupe key is
        ``pod:<uid>:<resourceVersion>``, ``:deleted`` for a DELETED), failing after ``timeout`` s."""
        store = self.store
        with store.cond:
            start = bisect.bisect_right(store._hist_rvs, self.pods_checked_rv)
            made = [(e.rv, e.type, e.data) for e in store._hist[start:] if e.resource == "pods"]
        if not made:
            return
        keys = set()
        for rv, kind, data in made:
            meta = orjson.loads(data)["metadata"]
            mirror_of = (meta.get("annotations") or {}).get("kubernetes.io/config.mirror")
            uid = mirror_of or meta["uid"]  # a mirror pod is keyed by its static pod's UID (``uids``)
            keys.add(f"pod:{uid}:{rv}:deleted" if kind == "DELETED" else f"pod:{uid}:{rv}")
        deadline = time.monotonic() + timeout
        while True:
            missing = keys - keys_of(self.cluster, keys=keys)
            if not missing:
                break
            if time.monotonic() >= deadline:
                uids = {k.split(":")[1] for k in missing}
                near = keys_of(self.cluster, pod_uids=uids, kinds=["pod"])
                raise AssertionError(
                    f"{len(missing)} pod events not stored after {timeout} s: {sorted(missing)[:5]}; "
                    f"stored of those pods: {sorted(near)[:10]}"
                )
            time.sleep(0.01)
        self.pods_checked_rv = max(rv for rv, _, _ in made)

    def uids(self, resource: str) -> set[str]:
        """UIDs as the collector keys them (a mirror pod by its static pod's uid)."""
        return {
            (o["metadata"].get("annotations") or {}).get("kubernetes.io/config.mirror")
            or o["metadata"]["uid"]
            for o in self.store.iter_objects(resource)
        }


def catch_up(sim) -> None:
    """With the collector stopped: one more watch step of every resource (from the version each reached,
    to the end of the stream) and one kubelet pull, so everything the story produced is stored."""
    for resource in ALL_RESOURCES:
        result = sim.step(resource)
        assert result.ok, (resource, result.error)
    pull_kubelet_logs(CLUSTER)
    pull_kubelet_metrics(CLUSTER)


def stored(
    kind: str | tuple[str, ...], where: Where | None = None, *, order: Sequence[str] = ORDER, **selected: Any
) -> list[StoredRow]:
    """The demo cluster's stored rows of ``kind`` (one or several) that ``observation_rows.selection``'s
    ``selected`` choose and ``where`` keeps, decoded, in ``order`` (by time by default)."""
    kinds = (kind,) if isinstance(kind, str) else kind
    return rows_of(CLUSTER, where, order=order, kinds=kinds, **selected)


@pytest.fixture(autouse=True)
def _fresh_collector_process() -> Iterator[None]:
    """Each test starts with no process-level collector state (clients, caches, local leases)."""
    watch.forget_caches()
    lease._backend = None
    _drop_test_leases()
    yield
    config.unregister_cluster(CLUSTER)
    config.close_clients()
    watch.forget_caches()


def _drop_test_leases() -> None:
    backend = lease.leases()
    if isinstance(backend, lease.RedisLeases):  # leases of earlier runs live on in Redis for their TTL
        for key in backend.redis.scan_iter(f"{lease.KEY_PREFIX}*"):
            backend.redis.delete(key)


def _serve(tmp_path: Path, scenario: str | None, advance: float, **opts: Any) -> Iterator[SimCluster]:
    kubeconfig = tmp_path / "kubeconfig"
    # Virtual time starts a minute before the wall clock, so kubelet log times are recent, as on a
    # real node (the first log pull reaches back FIRST_LOG_WINDOW from now).
    opts.setdefault("start", datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1))
    with run_sim(scenario, seed=11, kubeconfig_path=kubeconfig, bookmark_interval=0.2, **opts) as server:
        if advance:
            with server.cluster.engine.lock:
                server.cluster.advance(advance)
        config.register_cluster(ClusterSource(CLUSTER, str(kubeconfig), "podlife-demo"))
        yield SimCluster(server, kubeconfig)


class DeriveWorker:
    """The derive stage on a thread of this process, as a Celery worker runs it beside the collector: it
    drains what is dirty every ``interval`` seconds until ``stop``."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.stopped = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="derive-worker", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopped.is_set():
                try:
                    derivation.drain()
                except Exception as exc:  # reported by stop(): a test must not pass over it
                    self.errors.append(exc)
                self.stopped.wait(self.interval)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(30)
        assert not self.errors, self.errors


@pytest.fixture
def derive_worker(transactional_db: Any) -> Iterator[DeriveWorker]:
    worker = DeriveWorker()
    yield worker
    worker.stop()


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimCluster]:
    """The mixed scenario (every kind of object), 25 virtual seconds in, stepped by the test."""
    yield from _serve(tmp_path, "mixed", 25)


@pytest.fixture
def make_sim(tmp_path: Path) -> Iterator[Callable[..., SimCluster]]:
    """A factory for a demo cluster with other options (``forbidden=...``, another scenario)."""
    stack: list[Iterator[SimCluster]] = []

    def make(scenario: str | None = "mixed", advance: float = 25, **opts: Any) -> SimCluster:
        gen = _serve(tmp_path, scenario, advance, **opts)
        stack.append(gen)
        return next(gen)

    yield make
    for gen in reversed(stack):
        gen.close()


def on_virtual_time(monkeypatch: pytest.MonkeyPatch, engine: Any) -> None:
    """The whole process reads the demo cluster's clock: Django's ``now`` (findings about open intervals)
    and the watch's arrival stamps (``observed_at``), so a story of minutes told in seconds keeps its
    durations (a grace period, a stuck deletion) as a real cluster would."""

    class VirtualDatetime(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
            return engine.now

    monkeypatch.setattr(timezone, "now", lambda: engine.now)
    monkeypatch.setattr(watch, "datetime", VirtualDatetime)
