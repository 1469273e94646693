"""REST API under ``/api/v1/`` (read-only JSON; the OpenAPI 3 document is ``/api/v1/openapi.json``).

Scripts authenticate with ``Authorization: Bearer TOKEN`` (``manage.py api_token USERNAME``); the browser
with its session. Every read goes through ``dashboard/queries.py`` narrowed by ``dashboard/web/access.py``: a
cluster or namespace the caller may not read answers 404 exactly like one that does not exist, so the API
never confirms what a user cannot see. Errors are JSON: ``{"error": {"status", "message", "param"}}``.
"""

from __future__ import annotations

import functools
import gzip
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from dashboard import fleet, queries, serialize, timeline_reads
from dashboard.web import shared_reads
from dashboard.web.access import Access, BadToken, access_for, user_from_bearer
from dashboard.web.visibility import (
    require_known_namespace,
    require_node,
    sees_node_lanes,
    visible_counts,
    visible_health,
    visible_node_summaries,
)
from timelines import live
from timelines.lifecycle.observation import EARLIEST, LATEST, time_problem
from timelines.lifecycle.timeline import parse_time
from timelines.models import Cluster, Finding, PodDisruptionBudget, Workload

log = logging.getLogger(__name__)

MAX_WINDOW = timedelta(days=31)
DEFAULT_WINDOW = timedelta(hours=1)
MIN_LIVE_WINDOW = timedelta(minutes=5)
# A node page opens on its last quarter hour (pods that lived 10 s are bars, not piles of markers), or on
# its latest drain when that drain is under way or ended within it.
NODE_WINDOW = timedelta(minutes=15)
DRAIN_PAD = timedelta(seconds=30)


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


GZIP_OVER = 256 * 1024


def json_response(data: Any, *, status: int = 200, request: HttpRequest | None = None) -> HttpResponse:
    return json_bytes_response(
        orjson.dumps(data, default=serialize.default, option=orjson.OPT_NON_STR_KEYS),
        status=status,
        request=request,
    )


def json_bytes_response(
    body: bytes, *, status: int = 200, request: HttpRequest | None = None
) -> HttpResponse:
    gz = (
        request is not None and len(body) > GZIP_OVER and "gzip" in request.headers.get("Accept-Encoding", "")
    )
    if gz:
        body = gzip.compress(body, compresslevel=1)  # a 10,000-pod window: 6.7 MB → about 0.5 MB in ~50 ms
    response = HttpResponse(body, status=status, content_type="application/json")
    if gz:
        response["Content-Encoding"] = "gzip"
        response["Vary"] = "Accept-Encoding"
    return response


def error_response(status: int, message: str, param: str | None = None) -> HttpResponse:
    response = json_response({"error": {"status": status, "message": message, "param": param}}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="podlife"'
    return response


def api_view(fn: Callable[..., Any]) -> Callable[..., HttpResponse]:
    """Authenticate (bearer token, else session), run ``fn(request, access, **kwargs)``, map errors to JSON."""

    @functools.wraps(fn)
    @require_GET
    def wrapper(request: HttpRequest, **kwargs: Any) -> HttpResponse:
        header = request.headers.get("Authorization", "")
        if header:
            try:
                request.user = user_from_bearer(header)
            except BadToken as exc:
                return error_response(401, str(exc), "Authorization")
        if not request.user.is_authenticated:
            return error_response(
                401, "authentication required: send 'Authorization: Bearer TOKEN' or log in"
            )
        try:
            result = fn(request, access_for(request), **kwargs)
        except ApiError as exc:
            return error_response(exc.status, exc.message, exc.param)
        except queries.NotFound as exc:
            return error_response(404, str(exc))
        return result if isinstance(result, HttpResponse) else json_response(result, request=request)

    wrapper.csrf_exempt = True  # type: ignore[attr-defined]  # GET only; bearer tokens are not cookies
    return wrapper


# --- parsing helpers (shared with the HTML views) ------------------------------------------------------------
def readable_cluster(access: Access, name: str) -> Cluster:
    """The cluster if the caller may read some of it; 404 otherwise (same message as a missing one)."""
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None or not access.can_cluster(cluster):
        raise queries.NotFound(f"no cluster named {name!r} that you may read")
    return cluster


def require_namespace(access: Access, cluster: Cluster, namespace: str) -> None:
    if not access.can_namespace(cluster, namespace):
        raise queries.NotFound(f"no namespace {namespace!r} in cluster {cluster.name!r} that you may read")


def parse_when(text: str | None, param: str) -> datetime | None:
    """ISO 8601 with an offset (``Z`` accepted), or ``now``; None when absent."""
    if text is None or text == "":
        return None
    if text == "now":
        return datetime.now(UTC)
    try:
        at = parse_time(text.replace(" ", "+") if "T" in text and " " in text else text)
    except (ValueError, OverflowError) as exc:
        raise ApiError(400, f"{param}: {exc}", param=param) from None
    if at is None:  # parse_time gives None only for an empty text, handled above
        raise ApiError(400, f"{param}: expected an ISO 8601 time or 'now'", param=param)
    problem = time_problem(param, at)
    if problem is not None:  # the supported range (docs/configuration.md): the arithmetic below is safe
        raise ApiError(400, problem, param=param)
    return at


def parse_window(
    request: HttpRequest, extent: Callable[[], tuple[datetime | None, datetime | None]]
) -> tuple[datetime, datetime]:
    """``from`` / ``to`` from the query (at most 31 days apart). Without ``to``: now when the scope has data
        from the last hour (a live view), else just after its newest data. Without ``from``: one hour before a
        live end (or from just before the scope's first data when that is younger, but at least five minutes),
    else the scope's whole history up to a day, so a short incident fills the chart."""
    start = parse_when(request.GET.get("from"), "from")
    end = parse_when(request.GET.get("to"), "to")
    first, last = extent() if start is None or end is None else (None, None)  # a query: only when needed
    # Rows stored before the boundary may lie outside the supported range (year 1, 9999): the window
    # arithmetic below must not overflow on them.
    first, last = _supported(first), _supported(last)
    now = datetime.now(UTC)
    pad = max((last - first) * 0.03, timedelta(seconds=1)) if first and last else timedelta(seconds=1)
    live = last is None or now - last < DEFAULT_WINDOW
    if end is None:
        end = now if live or last is None else last + pad
        if start is not None and start >= end:
            end = start + DEFAULT_WINDOW
    if start is None:
        if live and first is not None and not request.GET.get("to"):
            # A live view of a young scope (a new node, a demo just started): from shortly before its
            # first data, not an hour of empty chart.
            start = max(end - DEFAULT_WINDOW, min(first - pad, end - MIN_LIVE_WINDOW))
        elif live or first is None or request.GET.get("to"):
            start = end - DEFAULT_WINDOW
        else:
            start = max(first - pad, end - timedelta(hours=24))
    if start >= end:
        raise ApiError(400, f"from ({start.isoformat()}) must be before to ({end.isoformat()})", param="from")
    if end - start > MAX_WINDOW:
        raise ApiError(400, f"the window is {end - start}; at most {MAX_WINDOW.days} days", param="to")
    return start, end


def node_window(
    request: HttpRequest,
    extent: Callable[[], tuple[datetime | None, datetime | None]],
    drain: Callable[[], tuple[datetime, datetime | None] | None],
) -> tuple[datetime, datetime]:
    """A node's window: as ``parse_window`` when the query names ``from``; else its end as
    ``parse_window`` picks it (now when live, else just after the newest data) and its start
    ``NODE_WINDOW`` before, or, when the node's latest cordon (``drain()``: its start and end, None while
    cordoned) is under way or ended inside that span, from just before the cordon began to the end."""
    start, end = parse_window(request, extent)
    if request.GET.get("from"):
        return start, end
    recent = end - NODE_WINDOW
    cordon = drain()
    if cordon is not None and (cordon[1] is None or cordon[1] >= recent) and cordon[0] < end:
        return min(cordon[0] - DRAIN_PAD, recent), end
    return max(start, recent), end


def _supported(at: datetime | None) -> datetime | None:
    """``at`` moved into the supported time range (observation.EARLIEST .. LATEST), None as None."""
    if at is None:
        return None
    return min(max(at, EARLIEST), LATEST - timedelta(days=1))


def parse_lanes(request: HttpRequest) -> tuple[str, ...] | None:
    text = request.GET.get("lanes", "worker")
    if text == "all":
        return None
    lanes = tuple(x for x in (s.strip() for s in text.split(",")) if x)
    if not lanes:
        raise ApiError(
            400, "lanes: expected 'all' or a comma-separated list such as worker,api", param="lanes"
        )
    return lanes


def parse_limit(request: HttpRequest, default: int, maximum: int) -> int:
    text = request.GET.get("limit")
    if not text:
        return default
    if not text.isdigit() or not 1 <= int(text) <= maximum:
        raise ApiError(400, f"limit {text!r} must be an integer from 1 to {maximum}", param="limit")
    return int(text)


# --- endpoints -------------------------------------------------------------------------------------------------
@api_view
def clusters(request: HttpRequest, access: Access) -> Any:
    out = []
    readable = list(access.clusters())
    counts = fleet.cluster_counts(readable, {c.id: access.namespace_filter(c) for c in readable})
    for c in readable:
        out.append(
            {
                "name": c.name,
                "origin": c.origin,
                "read_only": c.read_only,
                "namespaces": None if access.whole_cluster(c) else sorted(access.namespace_filter(c) or ()),
                "counts": visible_counts(access, c, counts[c.id]),
            }
        )
    health = (
        visible_health(access, readable, queries.collector_health([c.id for c in readable])) if out else []
    )
    return {"clusters": out, "collectors": health}


@api_view
def nodes(request: HttpRequest, access: Access, cluster: str) -> Any:
    c = readable_cluster(access, cluster)
    nodes = visible_node_summaries(access, c, queries.node_summaries(c, access.namespace_filter(c)))
    return {"cluster": c.name, "nodes": nodes}


@api_view
def namespaces(request: HttpRequest, access: Access, cluster: str) -> Any:
    c = readable_cluster(access, cluster)
    return {"cluster": c.name, "namespaces": queries.namespace_summaries(c, access.namespace_filter(c))}


def pod_json(p: Any) -> serialize.PodRowDoc:
    return serialize.pod_row_doc(p)


@api_view
def pod_search(request: HttpRequest, access: Access, cluster: str) -> Any:
    c = readable_cluster(access, cluster)
    q = request.GET.get("q", "")
    limit = parse_limit(request, 100, 1000)
    try:
        pods = fleet.search_pods(c, q, access.namespace_filter(c), limit=limit)
    except fleet.SearchError as exc:
        raise ApiError(400, str(exc), param="q") from None
    return {"cluster": c.name, "q": q, "pods": [pod_json(p) for p in pods]}


def readable_pod(access: Access, cluster: Cluster, uid: str) -> Any:
    pod = queries.resolve_pod(cluster, uid=uid)
    if not access.can_namespace(cluster, pod.namespace):
        raise queries.NotFound(f"no pod with UID {uid!r} in cluster {cluster.name!r}")
    return pod


@api_view
def pod_timeline(request: HttpRequest, access: Access, cluster: str, uid: str) -> Any:
    """Exactly ``podlife.timeline/v2`` (``timeline_reads.pod_timeline``)."""
    c = readable_cluster(access, cluster)
    pod = readable_pod(access, c, uid)
    return timeline_reads.pod_timeline(c, pod)


@api_view
def pod_observations(request: HttpRequest, access: Access, cluster: str, uid: str) -> Any:
    c = readable_cluster(access, cluster)
    pod = readable_pod(access, c, uid)
    ids_text = request.GET.get("ids", "")
    keys = request.GET.getlist("keys")
    if keys:
        rows = [
            o
            for o in queries.observations_by_key(c, parse_keys(keys, ids_text), None)
            if o.pod_uid == pod.uid
        ]
    elif ids_text:
        if not all(x.strip().isdigit() for x in ids_text.split(",")):
            raise ApiError(400, f"ids {ids_text!r} must be comma-separated observation ids", param="ids")
        rows = [
            o
            for o in queries.observations_by_id(c, [int(x) for x in ids_text.split(",")], None)
            if o.pod_uid == pod.uid
        ]
    else:
        rows = queries.pod_observations(c, pod, limit=parse_limit(request, 5000, 20000))
    return {"cluster": c.name, "pod_uid": pod.uid, "observations": [observation_json(o) for o in rows]}


def parse_keys(keys: list[str], ids_text: str) -> list[str]:
    """``keys`` (one dedupe key a parameter, repeated: a key may hold any character, commas too), checked."""
    if ids_text:
        raise ApiError(400, "keys: give ids or keys, not both", param="keys")
    if len(keys) > queries.MAX_KEYS:
        raise ApiError(400, f"keys: at most {queries.MAX_KEYS} dedupe keys, got {len(keys)}", param="keys")
    for key in keys:
        if not key or len(key) > 200:
            raise ApiError(
                400,
                f"keys {key[:60]!r} must be an observation's dedupe key (1 to 200 characters)",
                param="keys",
            )
    return keys


def observation_json(o: Any) -> serialize.ObservationDoc:
    return serialize.observation_doc(o)


@api_view
def pod_diff(request: HttpRequest, access: Access, cluster: str, uid: str) -> Any:
    c = readable_cluster(access, cluster)
    pod = readable_pod(access, c, uid)
    ids = []
    for param in ("a", "b"):
        text = request.GET.get(param, "")
        if not text.isdigit():
            raise ApiError(400, f"{param}: expected an observation id of this pod, got {text!r}", param=param)
        ids.append(int(text))
    found = {o.id: o for o in queries.observations_by_id(c, ids, None) if o.pod_uid == pod.uid}
    for param, i in zip(("a", "b"), ids, strict=True):
        if i not in found:
            raise ApiError(404, f"{param}: observation {i} is not one of pod {pod.uid}'s", param=param)
    a, b = found[ids[0]], found[ids[1]]
    return {"a": a.id, "b": b.id, "changes": queries.payload_diff(a.payload, b.payload)}


def parse_detail(request: HttpRequest) -> int | None:
    """``detail=auto`` (with the chart's width ``px``, default 1200): the resolution in µs a pixel stands
    for, to fold a crowded window into bands (``fleet.window_overview``); ``full`` (the default): None."""
    detail = request.GET.get("detail", "full")
    if detail not in ("full", "auto"):
        raise ApiError(400, f"detail {detail[:40]!r} must be 'full' or 'auto'", param="detail")
    if detail == "full":
        return None
    px = request.GET.get("px", "1200")
    if not px.isdigit() or not 100 <= int(px) <= 10_000:
        raise ApiError(400, f"px {px[:40]!r} must be a chart width from 100 to 10000 pixels", param="px")
    return int(px)


def _window_response(
    request: HttpRequest, access: Access, c: Cluster, scope: dict[str, str], **kw: Any
) -> HttpResponse:
    def extent() -> tuple[datetime | None, datetime | None]:
        return queries.data_extent(
            c, node=kw.get("node", ""), namespace=kw.get("namespace", ""), pod_uids=kw.get("pod_uids")
        )

    def window() -> tuple[datetime, datetime]:
        if kw.get("node"):
            return node_window(request, extent, lambda: queries.latest_cordon(c, kw["node"]))
        return parse_window(request, extent)

    namespaces = access.namespace_filter(c)
    px = parse_detail(request) if kw.get("namespace") else None
    if px is not None:  # level of detail (issue #17): bands of pods when the window is crowded
        start, end = window()
        bands = fleet.window_overview(
            c,
            start=start,
            end=end,
            namespaces=namespaces,
            namespace=kw["namespace"],
            resolution_us=max(1, int((end - start).total_seconds() * 1e6 / px)),
            scope=scope,
        )
        if bands is not None:
            return json_response(bands, request=request)

    def read() -> bytes:
        start, end = window()
        # Each pod with its read-time freshness ("kubelet evidence pending since …"), the node's own lanes
        # only for a reader of the whole cluster.
        return timeline_reads.window_json(
            c,
            start=start,
            end=end,
            namespaces=namespaces,
            lanes=parse_lanes(request),
            scope=scope,
            node_lanes=sees_node_lanes(access, c),
            **kw,
        )

    group = {"node": "node", "namespace": "ns"}.get(scope["kind"])
    ttl = float(settings.PODLIFE_SHARED_READ_S)
    if group is None or ttl <= 0 or kw.get("pod_uids"):
        return json_bytes_response(read(), request=request)
    try:
        seq = live.current_sequence(live.group_name(group, c.name, scope["name"]))  # type: ignore[arg-type]
    except Exception:  # Redis away: no sharing, but the page still gets its answer
        log.warning(
            "live sequence of %s/%s unreadable; reading unshared", c.name, scope["name"], exc_info=True
        )
        return json_bytes_response(read(), request=request)
    # A live page's refetch herd reads once (dashboard/web/shared_reads.py): the key says which view, for
    # whom, and as of which live sequence number of its group.
    key = (
        c.id,
        scope["kind"],
        scope["name"],
        tuple(request.GET.get(p, "") for p in ("from", "to", "lanes")),
        None if namespaces is None else tuple(sorted(namespaces)),
        access.whole_cluster(c),
        seq,
    )
    return json_bytes_response(shared_reads.timeline_reads.get(key, ttl, read), request=request)


@api_view
def node_timeline(request: HttpRequest, access: Access, cluster: str, node: str) -> Any:
    c = readable_cluster(access, cluster)
    require_node(access, c, node)
    return _window_response(request, access, c, {"kind": "node", "name": node}, node=node)


@api_view
def namespace_timeline(request: HttpRequest, access: Access, cluster: str, namespace: str) -> Any:
    c = readable_cluster(access, cluster)
    require_namespace(access, c, namespace)
    require_known_namespace(c, namespace)
    return _window_response(request, access, c, {"kind": "namespace", "name": namespace}, namespace=namespace)


@api_view
def workload_list(request: HttpRequest, access: Access, cluster: str) -> Any:
    c = readable_cluster(access, cluster)
    ns = request.GET.get("namespace", "")
    return {
        "cluster": c.name,
        "workloads": [
            workload_json(w) for w in queries.workloads(c, access.namespace_filter(c), namespace=ns)
        ],
    }


def workload_json(w: Workload) -> dict[str, Any]:
    return serialize.to_builtins(serialize.workload_doc(w))


def _workload(access: Access, c: Cluster, namespace: str, kind: str, name: str) -> Workload:
    require_namespace(access, c, namespace)
    if kind not in Workload.Kind.values:
        raise ApiError(400, f"kind {kind!r} is not one of {', '.join(Workload.Kind.values)}", param="kind")
    return queries.get_workload(c, namespace, kind, name)


@api_view
def workload_timeline(
    request: HttpRequest, access: Access, cluster: str, namespace: str, kind: str, name: str
) -> Any:
    c = readable_cluster(access, cluster)
    w = _workload(access, c, namespace, kind, name)
    uids = queries.workload_pod_uids(c, w, access.namespace_filter(c))
    scope = {"kind": "workload", "name": f"{kind}/{namespace}/{name}"}
    response = _window_response(request, access, c, scope, pod_uids=uids)
    return response


@api_view
def workload_status(
    request: HttpRequest, access: Access, cluster: str, namespace: str, kind: str, name: str
) -> Any:
    c = readable_cluster(access, cluster)
    w = _workload(access, c, namespace, kind, name)
    return {
        "workload": workload_json(w),
        "owned": [workload_json(x) for x in queries.workload_tree(c, w)[1:]],
        "samples": [serialize.workload_sample(s) for s in queries.workload_samples(w)],
    }


@api_view
def pdb_list(request: HttpRequest, access: Access, cluster: str) -> Any:
    c = readable_cluster(access, cluster)
    ns = request.GET.get("namespace", "")
    return {
        "cluster": c.name,
        "pdbs": [pdb_json(p) for p in queries.pdbs(c, access.namespace_filter(c), namespace=ns)],
    }


def pdb_json(p: PodDisruptionBudget) -> dict[str, Any]:
    return serialize.to_builtins(serialize.pdb_doc(p))


@api_view
def pdb_detail(request: HttpRequest, access: Access, cluster: str, namespace: str, name: str) -> Any:
    c = readable_cluster(access, cluster)
    require_namespace(access, c, namespace)
    p = queries.get_pdb(c, namespace, name)
    samples = queries.pdb_samples(p)
    return {
        "pdb": pdb_json(p),
        "samples": [serialize.pdb_sample(s) for s in samples],
        "blocked": [
            serialize.blocked_period(b) for b in queries.blocked_periods(samples, until=p.deleted_at)
        ],
        "covered_pods": [pod_json(x) for x in queries.pdb_covered_pods(p)],
    }


def finding_json(f: Finding) -> serialize.FindingRowDoc:
    return serialize.finding_row_doc(f, f.cluster.name)


@api_view
def findings(request: HttpRequest, access: Access) -> Any:
    severity = request.GET.get("severity", "")
    if severity and severity not in Finding.Severity.values:
        raise ApiError(
            400, f"severity {severity!r} is not one of {', '.join(Finding.Severity.values)}", param="severity"
        )
    rows, total = queries.findings_filtered(
        access.q(),
        cluster=request.GET.get("cluster", ""),
        namespace=request.GET.get("namespace", ""),
        kind=request.GET.get("kind", ""),
        severity=severity,
        start=parse_when(request.GET.get("from"), "from"),
        end=parse_when(request.GET.get("to"), "to"),
        limit=parse_limit(request, 500, 5000),
    )
    return {"total": total, "findings": [finding_json(f) for f in rows]}


@api_view
def openapi(request: HttpRequest, access: Access) -> Any:
    from dashboard.web.api.openapi import document

    return document(server=request.build_absolute_uri(reverse("api-root")).rstrip("/"))


@api_view
def root(request: HttpRequest, access: Access) -> Any:
    return {"openapi": reverse("api-openapi"), "user": request.user.get_username()}


@require_GET
def not_found(request: HttpRequest) -> HttpResponse:
    return error_response(404, f"no API endpoint at {request.path}; see /api/v1/openapi.json")
