"""The collector in one process, without a broker: a thread per (cluster, resource) running the same
``run_step`` the Celery chain runs, plus one thread per cluster for the kubelet pulls.

Used by ``manage.py collect`` and by the embedded default (tasks are eager there, so a chain cannot hand
itself to a broker). Each thread holds its watch's lease, renewed every step, so a Celery chain and a
foreground collector never watch the same resource of the same cluster at once.

Shutdown order (``stop``): set the cancel event; each watch step sees it within half a second, closes its
response (the reader thread ends) and returns; the thread releases its lease and closes its database
connection; ``stop`` joins the threads.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import InterfaceError, OperationalError, close_old_connections, connection

from collectors.kube import kubelet, lease
from collectors.kube.config import Tunables, cluster_source
from collectors.kube.resources import ALL_RESOURCES, resource_spec
from collectors.kube.stream import backoff_delay
from collectors.kube.watch import StepControl, StepResult, run_step

log = logging.getLogger(__name__)


@dataclass
class Collector:
    """Collect ``resources`` of ``clusters`` until ``stop()``; ``on_step`` sees every step's result."""

    clusters: list[str]
    resources: Iterable[str] = ALL_RESOURCES
    kubelet: bool = True
    tunables: Tunables | None = None
    on_step: Callable[[StepResult], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    steps: int = 0

    def __post_init__(self) -> None:
        self.resources = tuple(self.resources)
        for name in self.resources:
            resource_spec(name)  # raises for an unknown resource before any thread starts
        for cluster in self.clusters:
            cluster_source(cluster)  # raises LookupError for an unknown cluster
        self._lock = threading.Lock()

    def start(self) -> Collector:
        tunables = self.tunables or Tunables.from_settings()
        self.tunables = tunables
        for cluster in self.clusters:
            for resource in self.resources:
                self._spawn(f"watch-{cluster}-{resource}", self._watch_loop, cluster, resource)
            source = cluster_source(cluster)
            if self.kubelet and (source.kubelet_metrics or source.kubelet_logs):
                self._spawn(f"kubelet-{cluster}", self._kubelet_loop, cluster)
        return self

    def _spawn(self, name: str, target: Callable[..., None], *args: str) -> None:
        def run() -> None:
            try:
                target(*args)
            except Exception:  # a thread must never die silently: log it; the others go on
                log.exception("%s stopped on an unexpected error", name)
            finally:
                connection.close()

        thread = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(thread)
        thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self.cancel.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            log.warning("collector threads still running after %.0f s: %s", timeout, ", ".join(alive))

    def wait(self, duration: float | None = None) -> None:
        """Block until ``duration`` seconds passed (or forever), then return; Ctrl-C also returns."""
        with contextlib.suppress(KeyboardInterrupt):
            self.cancel.wait(duration)

    # ---- loops ---------------------------------------------------------------------------------------
    def _watch_loop(self, cluster: str, resource: str) -> None:
        tunables = self.tunables or Tunables.from_settings()
        leases = lease.leases()
        key = lease.watch_key(cluster, resource)
        token = lease.new_token()
        held = False
        attempt = 0
        try:
            while not self.cancel.is_set():
                if not held:
                    held = leases.acquire(key, token, tunables.lease_ttl_s)
                    if not held:
                        log.info("%s/%s: another collector holds the watch; waiting", cluster, resource)
                        self.cancel.wait(max(1.0, tunables.lease_ttl_s / 3))
                        continue

                def heartbeat() -> bool:
                    return leases.renew(key, token, tunables.lease_ttl_s)

                if not heartbeat():
                    held = False
                    continue
                try:
                    result = run_step(
                        cluster,
                        resource,
                        control=StepControl(heartbeat=heartbeat, cancel=self.cancel, tunables=tunables),
                    )
                except Exception:  # e.g. the database is unreachable: log, back off, try again
                    log.exception("%s/%s: step failed before it could record its error", cluster, resource)
                    connection.close()
                    attempt += 1
                else:
                    with self._lock:
                        self.steps += 1
                    if self.on_step is not None:
                        self.on_step(result)
                    attempt = 0 if result.ok else attempt + 1
                delay = backoff_delay(attempt, base=tunables.backoff_base_s, cap=tunables.backoff_cap_s)
                if delay:
                    leases.renew(key, token, tunables.lease_ttl_s + delay)
                    self.cancel.wait(delay)
        finally:
            if held:
                leases.release(key, token)

    def _kubelet_loop(self, cluster: str) -> None:
        tunables = self.tunables or Tunables.from_settings()
        source = cluster_source(cluster)
        while not self.cancel.is_set():
            started = time.monotonic()
            # This thread serves no request, so nothing else recycles its connection: one the database
            # dropped (a restart, a failover, pg_terminate_backend) is closed here, or every later pull
            # would fail on it forever ("the connection is closed"), as they did (issue #18, finding 6).
            close_old_connections()
            for enabled, pull in (
                (source.kubelet_metrics, kubelet.pull_kubelet_metrics),
                (source.kubelet_logs, kubelet.pull_kubelet_logs),
            ):
                if enabled and not self.cancel.is_set():
                    self._pull(cluster, pull)
            close_old_connections()  # with the pool (CONN_MAX_AGE 0) this hands the connection back
            self.cancel.wait(max(0.0, tunables.kubelet_interval_s - (time.monotonic() - started)))

    def _pull(self, cluster: str, pull: Callable[[str], object]) -> None:
        """One pull; a pull that failed on a dropped database connection is tried once more on a new one,
        as a watch step is."""
        for attempt in (1, 2):
            try:
                pull(cluster)
                return
            except (OperationalError, InterfaceError) as exc:
                connection.close()  # the next query opens a fresh connection
                if attempt == 2:
                    log.error("%s: kubelet pull failed on the database twice: %s", cluster, exc)
                else:
                    log.warning("%s: kubelet pull lost its database connection (%s); again", cluster, exc)
            except Exception:  # logged; the next round tries again
                log.exception("%s: kubelet pull failed", cluster)
                return


_background: Collector | None = None
_background_lock = threading.Lock()


def ensure_background(clusters: Iterable[str]) -> Collector | None:
    """Start (once per process) a background collector for ``clusters``: the embedded default's way of
    keeping watches live where tasks run eagerly. Returns the running collector, or None without clusters.
    """
    global _background
    names = sorted(set(clusters))
    with _background_lock:
        if _background is not None and not _background.cancel.is_set():
            missing = [c for c in names if c not in _background.clusters]
            if not missing:
                return _background
            _background.stop()
        if not names:
            return None
        _background = Collector(names).start()
        return _background
