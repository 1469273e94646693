"""Kubelet state through the API server's node proxy: working-pod metrics and kubelet logs.

``pull_kubelet_metrics(cluster)`` reads ``/api/v1/nodes/NODE/proxy/metrics`` from every node and stores one
``node_metrics`` observation per node whose counts changed since the last stored one (an unchanged scrape
is a no-op, dropped here as node heartbeats are). ``pull_kubelet_logs(cluster)`` reads
``/api/v1/nodes/NODE/proxy/logs/?query=kubelet&sinceTime=...`` through ``KubeletLogIngest`` (as the CLI does)
and remembers per node the time it pulled up to. Both are optional per cluster; a cluster that answers 403
(no ``get`` on ``nodes/proxy``) or 404 (the node log query is not enabled) is skipped with a status note
in CollectorState, and not asked again for ``SKIP_AFTER_REFUSAL``.

The ``node_metrics`` payload::

    {"working_pods": {"sync": 3, "terminating": 1, "terminated": 0},     # summed over config/static
     "working_pods_detail": [{"lifecycle": "sync", "config": "desired", "static": "", "value": 3}, ...],
     "desired_pods": 4, "active_pods": 4, "mirror_pods": 1, "running_pods": 4,   # null when not exported
     "orphaned_runtime_pods_total": 0, "restarted_pods_total": 0,
     "fingerprint": "<digest of everything above>"}

``dedupe_key`` = ``node_metrics:<node>:<scrape time>``, ``observed_at`` = the scrape time.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from collectors.kube import state
from collectors.kube.config import api_client, api_errors, cluster_source
from collectors.kube.stream import close_response
from collectors.kubelet_logs import KubeletLogIngest
from timelines import observation_rows, store
from timelines.lifecycle.observation import Kind, Observation, Source, digest_key
from timelines.models import Cluster
from timelines.writer import observation_writer

log = logging.getLogger(__name__)

SKIP_AFTER_REFUSAL = timedelta(minutes=30)
FIRST_LOG_WINDOW = timedelta(minutes=10)  # how far back the first pull from a node reaches
FETCH_THREADS = 8
_GAUGES = {
    "kubelet_desired_pods": "desired_pods",
    "kubelet_active_pods": "active_pods",
    "kubelet_mirror_pods": "mirror_pods",
    "kubelet_running_pods": "running_pods",
    "kubelet_orphaned_runtime_pods": "orphaned_runtime_pods_total",
    "kubelet_restarted_pods": "restarted_pods_total",
}


@dataclass
class PullResult:
    cluster: str
    what: str
    nodes: int = 0
    stored: int = 0
    unchanged: int = 0  # metric scrapes equal to the last stored one (dropped)
    lines: int = 0
    errors: list[str] = field(default_factory=list)
    skipped: str | None = None  # why the whole cluster was skipped


class Refused(Exception):
    """The API server refused the node proxy for this cluster (403) or does not serve it (404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# -- metrics ---------------------------------------------------------------------------------------------


def metrics_payload(text: str) -> dict[str, Any]:
    """The ``node_metrics`` payload from a kubelet's Prometheus text (see the module docstring)."""
    detail: list[dict[str, Any]] = []
    totals = {"sync": 0, "terminating": 0, "terminated": 0}
    payload: dict[str, Any] = dict.fromkeys(_GAUGES.values())
    for family in text_string_to_metric_families(text):
        if family.name == "kubelet_working_pods":
            for sample in family.samples:
                labels = sample.labels
                value = int(sample.value)
                lifecycle = labels.get("lifecycle", "")
                detail.append(
                    {
                        "lifecycle": lifecycle,
                        "config": labels.get("config", ""),
                        "static": labels.get("static", ""),
                        "value": value,
                    }
                )
                totals[lifecycle] = totals.get(lifecycle, 0) + value
        elif family.name in _GAUGES:
            # Counters lose their _total suffix in the family name; sum over labels (static / not).
            total = sum(s.value for s in family.samples if not s.name.endswith("_created"))
            payload[_GAUGES[family.name]] = int(total)
    detail.sort(key=lambda d: (d["lifecycle"], d["config"], d["static"]))
    payload["working_pods"] = totals
    payload["working_pods_detail"] = detail
    payload["fingerprint"] = digest_key(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode())
    return payload


def metrics_observation(node: str, text: str, at: datetime) -> Observation:
    payload = metrics_payload(text)
    return Observation(
        kind=Kind.NODE_METRICS,
        source=Source.KUBELET_METRICS,
        observed_at=at,
        dedupe_key=f"node_metrics:{node}:{at.isoformat()}"[:200],
        node=node,
        name=node,
        payload=payload,
    )


def pull_kubelet_metrics(cluster_name: str, *, nodes: list[str] | None = None) -> PullResult:
    """Scrape working-pod metrics from every node (or ``nodes``) and store the ones that changed."""
    result = PullResult(cluster_name, "metrics")
    began = _begin_pull(result, cluster_source(cluster_name).kubelet_metrics, state.KUBELET_METRICS)
    if began is None:
        return result
    cluster, client = began
    try:
        names = nodes if nodes is not None else node_names(client)
        result.nodes = len(names)
        last = _last_fingerprints(cluster, names)
        fetched = _fetch_all(client, names, lambda n: _get_metrics(client, n))
    except Refused as exc:
        return _refused(cluster, state.KUBELET_METRICS, exc, result)
    except _node_list_errors() as exc:
        _pull_error(cluster, state.KUBELET_METRICS, f"listing nodes: {type(exc).__name__}: {exc}", result)
        return result
    batch = []
    for node, (at, text, error) in fetched.items():
        if isinstance(error, Refused):
            return _refused(cluster, state.KUBELET_METRICS, error, result)
        if error is not None:
            _pull_error(cluster, state.KUBELET_METRICS, f"metrics from {node}: {error}", result)
            continue
        try:
            obs = metrics_observation(node, text, at)
        except ValueError as exc:  # the parser rejects text that is not the exposition format
            _pull_error(cluster, state.KUBELET_METRICS, f"metrics from {node} unreadable: {exc}", result)
            continue
        if last.get(node) == obs.payload["fingerprint"]:
            result.unchanged += 1
            continue
        batch.append(obs)
    writer = observation_writer(cluster, batch_size=None)  # one batch per pull: every node's metrics
    writer.hold(batch)
    result.stored = writer.close().stored
    state.record_events(cluster, state.KUBELET_METRICS, len(batch))
    state.record_step(cluster, state.KUBELET_METRICS, events=len(batch), seconds=0)
    state.set_note(cluster, state.KUBELET_METRICS, "")
    return result


def _begin_pull(result: PullResult, enabled: bool, resource: str) -> tuple[Cluster, Any] | None:
    """The cluster and its API client for a pull, or None (with ``result`` saying why) when the pull is
    off for this cluster or the node proxy refused it recently."""
    if not enabled:
        result.skipped = f"kubelet {result.what} are off for this cluster"
        return None
    cluster = store.cluster_for(result.cluster)
    if _recently_refused(cluster, resource, result):
        return None
    return cluster, api_client(result.cluster)


def _get_metrics(client: Any, node: str) -> str:
    from kubernetes import client as kclient

    response = kclient.CoreV1Api(client).connect_get_node_proxy_with_path(
        node, "metrics", _preload_content=False, _request_timeout=(5, 30)
    )
    try:
        text: str = response.data.decode("utf-8", "replace")  # the kubernetes client is untyped
        return text
    finally:
        close_response(response)


def _last_fingerprints(cluster: Cluster, nodes: list[str]) -> dict[str, str]:
    rows = observation_rows.newest_per(
        observation_rows.selection(cluster, kinds=(Kind.NODE_METRICS,), nodes=nodes), "node"
    )
    found: dict[str, str] = {}
    for row in observation_rows.rows(rows):
        found.setdefault(row.node, observation_rows.field_of(row.payload, "fingerprint"))
    return found


# -- logs ------------------------------------------------------------------------------------------------


def pull_kubelet_logs(cluster_name: str, *, nodes: list[str] | None = None) -> PullResult:
    """Pull new kubelet log lines from every node (or ``nodes``), parse and store them."""
    result = PullResult(cluster_name, "logs")
    began = _begin_pull(result, cluster_source(cluster_name).kubelet_logs, state.KUBELET_LOGS)
    if began is None:
        return result
    cluster, client = began
    now = timezone.now()
    try:
        names = nodes if nodes is not None else node_names(client)
    except Refused as exc:
        return _refused(cluster, state.KUBELET_LOGS, exc, result)
    except _node_list_errors() as exc:
        _pull_error(cluster, state.KUBELET_LOGS, f"listing nodes: {type(exc).__name__}: {exc}", result)
        return result
    result.nodes = len(names)
    since = {node: _log_since(cluster, node, now) for node in names}
    fetched = _fetch_all(client, names, lambda n: _get_logs(client, n, since[n]))
    for node in names:
        at, text, error = fetched[node]
        if isinstance(error, Refused):
            return _refused(cluster, state.KUBELET_LOGS, error, result)
        if error is not None:
            _pull_error(cluster, state.KUBELET_LOGS, f"logs from {node}: {error}", result)
            continue
        # The same parser, batching and store as the CLI and the log-shipping endpoint.
        # The node log query runs `journalctl --utc --output=short-precise`: each line's prefix is UTC,
        # and tells the node's own zone, in which the kubelet wrote the klog header.
        # Each line's payload says where it came from (`timeline --explain`): this pull, line N of it.
        where = f"GET nodes/{node}/proxy/logs since {_since_param(since[node])}"
        ingest = KubeletLogIngest(
            cluster, node=node, year=since[node].year, tz=UTC, prefix_tz=UTC, source=where
        )
        for line in text.splitlines():
            ingest.feed(line)
        saved = ingest.close()
        result.lines += ingest.parser.lines_read
        result.stored += saved.stored
        # sinceTime has second precision and is inclusive: the boundary line comes again and dedupes.
        resource = state.node_logs_resource(node)
        state.save_resource_version(cluster, resource, at.isoformat(timespec="seconds"))
        state.record_events(cluster, resource, saved.received)
    state.record_events(cluster, state.KUBELET_LOGS, result.stored)
    state.record_step(cluster, state.KUBELET_LOGS, events=result.stored, seconds=0)
    state.set_note(cluster, state.KUBELET_LOGS, "")
    return result


def _log_since(cluster: Cluster, node: str, now: datetime) -> datetime:
    stored = state.get(cluster, state.node_logs_resource(node)).resource_version
    if stored:
        try:
            return datetime.fromisoformat(stored)
        except ValueError:
            log.warning(
                "%s: unreadable last log pull time %r for %s; starting over", cluster.name, stored, node
            )
    return now - FIRST_LOG_WINDOW


def _since_param(since: datetime) -> str:
    """The node log query's ``sinceTime`` (RFC 3339, whole seconds, UTC)."""
    return since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _get_logs(client: Any, node: str, since: datetime) -> str:
    # The generated connect_get_node_proxy_with_path escapes "/" and takes no query string, so the
    # raw call goes through the same ApiClient (auth, TLS, proxy) by path.
    query = [("query", "kubelet"), ("sinceTime", _since_param(since))]
    response = client.call_api(
        "/api/v1/nodes/{name}/proxy/logs/",
        "GET",
        path_params={"name": node},
        query_params=query,
        header_params={"Accept": "text/plain, */*"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=(5, 60),
    )
    try:
        text: str = response.data.decode("utf-8", "replace")  # the kubernetes client is untyped
        return text
    finally:
        close_response(response)


# -- shared ----------------------------------------------------------------------------------------------


def _node_list_errors() -> tuple[type[Exception], ...]:
    """What ``node_names`` raises when the node list cannot be had: the API's errors, or a body not JSON."""
    return (*api_errors(), orjson.JSONDecodeError)


def node_names(client: Any) -> list[str]:
    """Names of all nodes, from a raw paged list (no model objects)."""
    from kubernetes import client as kclient
    from kubernetes.client.exceptions import ApiException

    api = kclient.CoreV1Api(client)
    names: list[str] = []
    token = None
    while True:
        try:
            response = api.list_node(
                limit=500, _continue=token, _preload_content=False, _request_timeout=(10, 60)
            )
        except ApiException as exc:
            if exc.status == 403:
                raise Refused(403, f"cannot list nodes (403): {_reason(exc)}") from None
            raise
        try:
            body = orjson.loads(response.data)
        finally:
            close_response(response)
        names.extend(i["metadata"]["name"] for i in body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return names


def _fetch_all(
    client: Any, nodes: list[str], fetch: Any
) -> dict[str, tuple[datetime, str, Exception | None]]:
    """``fetch(node)`` for every node on a few threads: node -> (time asked, text, error or None)."""
    from kubernetes.client.exceptions import ApiException

    unreachable = api_errors()

    def one(node: str) -> tuple[str, tuple[datetime, str, Exception | None]]:
        at = timezone.now()
        try:
            return node, (at, fetch(node), None)
        except ApiException as exc:
            if exc.status in (403, 404) and not _node_missing(exc, node):
                return node, (at, "", Refused(exc.status, _reason(exc)))
            return node, (at, "", exc)
        except unreachable as exc:  # reported per node by the caller, never fatal; anything else goes up
            return node, (at, "", exc)

    if len(nodes) <= 1:
        return dict(one(n) for n in nodes)
    with ThreadPoolExecutor(
        max_workers=min(FETCH_THREADS, len(nodes)), thread_name_prefix="kubelet-pull"
    ) as pool:
        return dict(pool.map(one, nodes))


def _node_missing(exc: Any, node: str) -> bool:
    """A 404 that names the node itself (it was deleted) rather than the proxy path."""
    if exc.status != 404:
        return False
    try:
        details = (orjson.loads(exc.body or b"{}").get("details") or {}) if exc.body else {}
    except orjson.JSONDecodeError:
        return False
    return details.get("kind") == "nodes" and details.get("name") == node


def _reason(exc: Any) -> str:
    try:
        body = orjson.loads(exc.body or b"{}")
        return str(body.get("message") or exc.reason)
    except (orjson.JSONDecodeError, TypeError):
        return f"{exc.status} {exc.reason}"


def _recently_refused(cluster: Cluster, resource: str, result: PullResult) -> bool:
    st = state.get(cluster, resource)
    if (
        st.note.startswith("skipped:")
        and st.last_error_at
        and timezone.now() - st.last_error_at < SKIP_AFTER_REFUSAL
    ):
        result.skipped = st.note
        return True
    return False


def _refused(cluster: Cluster, resource: str, exc: Refused, result: PullResult) -> PullResult:
    what = "node metrics" if resource == state.KUBELET_METRICS else "node logs"
    served = "refused" if exc.status == 403 else "not served"
    note = f"skipped: {what} {served} by the API server (HTTP {exc.status}): {exc}"
    log.info("%s: %s", cluster.name, note)
    state.set_note(cluster, resource, note)
    state.record_error(cluster, resource, note)
    result.skipped = note
    return result


def _pull_error(cluster: Cluster, resource: str, message: str, result: PullResult) -> None:
    log.warning("%s: kubelet %s", cluster.name, message)
    state.record_error(cluster, resource, message)
    result.errors.append(message)
