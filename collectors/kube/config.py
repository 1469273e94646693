"""Which clusters to collect from, collector tunables, and one API client per cluster (cached per process).

Clusters come from two places: settings (``PODLIFE_KUBECONFIG`` with ``PODLIFE_KUBE_CONTEXTS``, and/or
``PODLIFE_IN_CLUSTER``), which every Celery worker reads, and ``register_cluster`` (the ``collect`` command
and tests), which only the calling process sees. A cluster is named after its kubeconfig context unless
a name is given.

Tunables and sources come from settings (``podlife_site/settings.py`` reads them from the environment;
docs/collector.md lists them).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Tunables:
    """How the watch behaves; every value has a setting (see docs/collector.md)."""

    watch_timeout_s: int = 60  # timeoutSeconds of one watch request (one step)
    lease_ttl_s: float = 150.0  # a chain not renewed for this long is dead and gets re-armed
    list_page_size: int = 200  # peak memory grows with a page (decoded JSON + its observations)
    batch_size: int = 500  # observations per ingest call while watching
    batch_seconds: float = 1.0  # ... or after this long, whichever comes first
    writers: int = 2  # threads (and database connections) a step stores its batches with, on PostgreSQL
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    kubelet_interval_s: float = 60.0

    @classmethod
    def from_settings(cls) -> Tunables:
        return cls(
            watch_timeout_s=settings.PODLIFE_WATCH_TIMEOUT_S,
            lease_ttl_s=settings.PODLIFE_WATCH_LEASE_S,
            list_page_size=settings.PODLIFE_LIST_PAGE_SIZE,
            batch_size=settings.PODLIFE_WATCH_BATCH,
            batch_seconds=settings.PODLIFE_WATCH_BATCH_S,
            writers=settings.PODLIFE_WATCH_WRITERS,
            backoff_base_s=settings.PODLIFE_WATCH_BACKOFF_S,
            backoff_cap_s=settings.PODLIFE_WATCH_BACKOFF_MAX_S,
            kubelet_interval_s=settings.PODLIFE_KUBELET_INTERVAL_S,
        )


@dataclass(frozen=True)
class ClusterSource:
    """How to reach one cluster's API server, and which optional kubelet pulls it gets."""

    name: str
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    kubelet_metrics: bool = True
    kubelet_logs: bool = True

    def __post_init__(self) -> None:
        if not self.in_cluster and not self.kubeconfig:
            raise ValueError(f"cluster {self.name!r}: give a kubeconfig path or in_cluster=True")


def cluster_name_for(context: str) -> str:
    """A valid cluster name (ASCII letters, digits, '-', '.'; at most 63) from a kubeconfig context."""
    name = re.sub(r"[^A-Za-z0-9.-]+", "-", context).strip("-.")[:63].strip("-.")
    if not name:
        raise ValueError(f"kubeconfig context {context!r} gives no usable cluster name; pass one explicitly")
    return name


def contexts_of(kubeconfig: str) -> tuple[list[str], str | None]:
    """All context names in ``kubeconfig`` and the current one."""
    from kubernetes import config as kconfig

    contexts, current = kconfig.list_kube_config_contexts(config_file=kubeconfig)
    return [c["name"] for c in contexts], (current or {}).get("name")


_registered: dict[str, ClusterSource] = {}
_clients: dict[str, Any] = {}
_lock = threading.Lock()


def register_cluster(source: ClusterSource) -> None:
    """Make ``source`` known to this process (replacing a cluster of the same name)."""
    with _lock:
        _registered[source.name] = source
        client = _clients.pop(source.name, None)
    if client is not None:
        client.close()


def unregister_cluster(name: str) -> None:
    with _lock:
        _registered.pop(name, None)
        client = _clients.pop(name, None)
    if client is not None:
        client.close()


def configured_clusters() -> dict[str, ClusterSource]:
    """Every cluster this process collects from: registered ones, then those from settings."""
    found: dict[str, ClusterSource] = {}
    metrics, logs = settings.PODLIFE_KUBELET_METRICS, settings.PODLIFE_KUBELET_LOGS
    kubeconfig = settings.PODLIFE_KUBECONFIG
    if kubeconfig:
        contexts = list(settings.PODLIFE_KUBE_CONTEXTS)
        if not contexts:
            _, current = contexts_of(kubeconfig)
            if current is None:
                raise ImproperlyConfigured(
                    f"PODLIFE_KUBECONFIG={kubeconfig!r} has no current context; set PODLIFE_KUBE_CONTEXTS"
                )
            contexts = [current]
        for ctx in contexts:
            name = cluster_name_for(ctx)
            found[name] = ClusterSource(name, kubeconfig, ctx, False, metrics, logs)
    if settings.PODLIFE_IN_CLUSTER:
        name = settings.PODLIFE_IN_CLUSTER_NAME
        found[name] = ClusterSource(name, in_cluster=True, kubelet_metrics=metrics, kubelet_logs=logs)
    with _lock:
        found.update(_registered)
    return found


def cluster_source(name: str) -> ClusterSource:
    """The source of cluster ``name``; raises LookupError naming the known clusters otherwise."""
    with _lock:
        source = _registered.get(name)
    if source is not None:
        return source
    clusters = configured_clusters()
    if name not in clusters:
        known = ", ".join(sorted(clusters)) or "none: set PODLIFE_KUBECONFIG or PODLIFE_IN_CLUSTER"
        raise LookupError(f"no collector source for cluster {name!r} (known: {known})")
    return clusters[name]


def api_client(name: str) -> Any:
    """The process's ``kubernetes.client.ApiClient`` for cluster ``name`` (built once, thread-safe)."""
    with _lock:
        client = _clients.get(name)
    if client is not None:
        return client
    source = cluster_source(name)
    client = new_api_client(source)
    with _lock:
        existing = _clients.setdefault(name, client)
    if existing is not client:
        client.close()
    return existing


CONNECTION_POOL_SIZE = 32  # ≥ watched resources (8) + kubelet pull threads (FETCH_THREADS in kubelet.py)


def new_api_client(source: ClusterSource) -> Any:
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    configuration = kclient.Configuration()
    if source.in_cluster:
        kconfig.load_incluster_config(client_configuration=configuration)
    else:
        kconfig.load_kube_config(
            config_file=source.kubeconfig, context=source.context, client_configuration=configuration
        )
    # One client serves every watch thread of the cluster and the parallel kubelet pulls; urllib3's
    # default pool of 10 would drop (and log) a connection for each one past ten.
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    return kclient.ApiClient(configuration)


def close_clients() -> None:
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()
