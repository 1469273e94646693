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
    batch_seconds: float = 0.2  # ... or after this long (a live page waits this long at most)
    writers: int = 2  # threads (and database connections) a step stores its batches with, on PostgreSQL
    store_process: bool = True  # ... in a process of their own (timelines/store_process.py)
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
            store_process=settings.PODLIFE_WATCH_STORE_PROCESS,
            backoff_base_s=settings.PODLIFE_WATCH_BACKOFF_S,
            backoff_cap_s=settings.PODLIFE_WATCH_BACKOFF_MAX_S,
            kubelet_interval_s=settings.PODLIFE_KUBELET_INTERVAL_S,
        )


# Where a pod's ServiceAccount volume puts its files (the kubernetes client's defaults).
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
SERVICE_ACCOUNT_CA = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"


@dataclass(frozen=True)
class ClusterSource:
    """How to reach one cluster's API server, and which optional kubelet pulls it gets.

    In-cluster, the API server is ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, the bearer
    token is read from ``token_file`` (re-read every minute: projected tokens rotate) and the server's
    certificate is verified against ``ca_file``; both default to the ServiceAccount volume's paths.
    """

    name: str
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    kubelet_metrics: bool = True
    kubelet_logs: bool = True
    token_file: str | None = None
    ca_file: str | None = None

    def __post_init__(self) -> None:
        if not self.in_cluster and not self.kubeconfig:
            raise ValueError(f"cluster {self.name!r}: give a kubeconfig path or in_cluster=True")

    @property
    def token_path(self) -> str:
        """``token_file``, else PODLIFE_IN_CLUSTER_TOKEN_FILE, else the ServiceAccount volume's token."""
        return (
            self.token_file or getattr(settings, "PODLIFE_IN_CLUSTER_TOKEN_FILE", "") or SERVICE_ACCOUNT_TOKEN
        )

    @property
    def ca_path(self) -> str:
        """``ca_file``, else PODLIFE_IN_CLUSTER_CA_FILE, else the ServiceAccount volume's ``ca.crt``."""
        return self.ca_file or getattr(settings, "PODLIFE_IN_CLUSTER_CA_FILE", "") or SERVICE_ACCOUNT_CA

    def credentials(self) -> str:
        """The credentials a 401 is about, in words."""
        if self.in_cluster:
            return f"the ServiceAccount token read from {self.token_path}"
        return f"the credentials of kubeconfig context {self.context or '(current)'!r} in {self.kubeconfig}"

    def trust(self) -> str:
        """What the server's certificate is verified against, in words."""
        if self.in_cluster:
            return f"the CA in {self.ca_path}"
        return f"the certificate authority of kubeconfig context {self.context or '(current)'!r} in {self.kubeconfig}"


class ClusterAccessError(Exception):
    """A cluster's API server cannot be used as configured; the message names the cluster, the input
    that is wrong and what was expected. Raised by the API client ``api_client`` returns, so a collector
    step records it (collector health: ``last_error``) like any other error, and retries later."""


class ClusterConfigError(ClusterAccessError):
    """No client could be built: the in-cluster environment or files, or the kubeconfig, are unusable."""


class ClusterCredentialsError(ClusterAccessError):
    """The API server answered 401: the token (or client certificate) is not accepted."""

    status = 401


class ClusterTLSError(ClusterAccessError):
    """The API server's certificate did not verify against the configured CA."""


def api_errors() -> tuple[type[Exception], ...]:
    """What a call through a cluster's API client raises when the API server (or a kubelet behind its node
    proxy) cannot be used or answers with an error, as opposed to a bug: the cluster's access errors, the
    client's ApiException, urllib3's transport errors (with ``retries`` off, unwrapped), http.client's and
    the socket's (OSError: refused, reset, timed out, TLS)."""
    import http.client

    import urllib3
    from kubernetes.client.exceptions import ApiException

    return (
        ClusterAccessError,
        ApiException,
        urllib3.exceptions.HTTPError,
        http.client.HTTPException,
        OSError,
    )


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
    """The process's ``kubernetes.client.ApiClient`` for cluster ``name`` (built once, thread-safe).

    A cluster whose configuration is unusable (no in-cluster environment, a missing token file, a broken
    kubeconfig) still gets a client: every request through it raises the ClusterConfigError that says
    why, so the step records it in collector health. It is not cached: the next call tries again (a
    token volume mounted late, a kubeconfig fixed)."""
    with _lock:
        client = _clients.get(name)
    if client is not None:
        return client
    source = cluster_source(name)
    client = new_api_client(source)
    if client.unusable is not None:
        return client
    with _lock:
        existing = _clients.setdefault(name, client)
    if existing is not client:
        client.close()
    return existing


CONNECTION_POOL_SIZE = 32  # ≥ watched resources (8) + kubelet pull threads (FETCH_THREADS in kubelet.py)


def new_api_client(source: ClusterSource) -> Any:
    """A ``kubernetes.client.ApiClient`` for ``source`` whose requests raise ClusterAccessError subclasses
    with a clear message for a refused token (401), a certificate that does not verify, or (attribute
    ``unusable``) a configuration from which no client could be built."""
    from kubernetes import client as kclient
    from kubernetes import config as kconfig
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    configuration = kclient.Configuration()
    unusable: ClusterConfigError | None = None
    try:
        if source.in_cluster:
            InClusterConfigLoader(
                token_filename=source.token_path, cert_filename=source.ca_path
            ).load_and_set(configuration)
        else:
            kconfig.load_kube_config(
                config_file=source.kubeconfig, context=source.context, client_configuration=configuration
            )
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        unusable = ClusterConfigError(_config_problem(source, exc))
    # One client serves every watch thread of the cluster and the parallel kubelet pulls; urllib3's
    # default pool of 10 would drop (and log) a connection for each one past ten.
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    return _client_class()(configuration, source=source, unusable=unusable)


def _config_problem(source: ClusterSource, exc: Exception) -> str:
    """What is wrong with ``source``'s configuration, naming the variable or file."""
    import os

    text = str(exc)
    if not source.in_cluster:
        return f"cluster {source.name!r}: kubeconfig {source.kubeconfig} (context {source.context or '(current)'!r}) is unusable: {text}"
    where = f"cluster {source.name!r}: in-cluster configuration"
    if "host/port" in text:
        missing = [v for v in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT") if not os.environ.get(v)]
        return f"{where} needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (set in every pod); {', '.join(missing)} not set"
    if "token" in text.lower():
        state = "is empty" if "empty" in text else "does not exist"
        return f"{where}: the ServiceAccount token file {source.token_path} {state} (is automountServiceAccountToken off, or PODLIFE_IN_CLUSTER_TOKEN_FILE wrong?)"
    if "cert" in text.lower():
        state = "is empty" if "empty" in text else "does not exist"
        return f"{where}: the CA file {source.ca_path} {state} (expected the cluster CA in PEM, as the ServiceAccount volume's ca.crt)"
    return f"{where}: {text}"


_CLIENT_CLASS: Any = None


def _client_class() -> Any:
    """``ApiClient`` with clear errors (built on first use: the kubernetes client is a heavy import)."""
    global _CLIENT_CLASS
    if _CLIENT_CLASS is not None:
        return _CLIENT_CLASS
    import ssl

    import urllib3
    from kubernetes import client as kclient
    from kubernetes.client.exceptions import ApiException

    class ClusterApiClient(kclient.ApiClient):  # type: ignore[misc]
        def __init__(
            self, configuration: Any, *, source: ClusterSource, unusable: ClusterConfigError | None
        ) -> None:
            super().__init__(configuration)
            self.source = source
            self.unusable = unusable

        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if self.unusable is not None:
                raise self.unusable
            host = self.configuration.host
            try:
                return super().request(method, url, *args, **kwargs)
            except ApiException as exc:
                if exc.status == 401:
                    raise ClusterCredentialsError(
                        f"cluster {self.source.name!r}: the API server at {host} rejected "
                        f"{self.source.credentials()} (401 Unauthorized): the token is wrong, expired or "
                        "revoked, or belongs to another cluster"
                    ) from None
                raise
            except urllib3.exceptions.MaxRetryError as exc:
                reason = exc.reason
                if isinstance(reason, urllib3.exceptions.SSLError | ssl.SSLError):
                    inner = reason.args[0] if reason.args else reason
                    raise ClusterTLSError(
                        f"cluster {self.source.name!r}: the certificate of the API server at {host} does not "
                        f"verify against {self.source.trust()} ({inner}): expected the cluster's CA certificate "
                        "(PEM) that signed the API server's certificate"
                    ) from None
                raise

    _CLIENT_CLASS = ClusterApiClient
    return _CLIENT_CLASS


def close_clients() -> None:
    with _lock:
        clients = list(_clients.values())
        _clients.clear()
    for client in clients:
        client.close()
