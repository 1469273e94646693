"""The dashboard's pages. Each view parses the request, reads through ``queries`` narrowed by ``access``,
hands the result to ``figures`` where something is drawn on the server, and renders a template. Pages that
draw Gantt charts fetch their rows from the REST API (``dashboard/web/api``) so the first paint and every later
refetch (window change, live sequence gap) take the same path.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET

from dashboard import fleet, freshness, plotly_bundles, queries, serialize, timeline_reads
from dashboard.web import figures
from dashboard.web.access import access_for
from dashboard.web.api.views import ApiError, parse_when, readable_cluster, require_namespace
from dashboard.web.routing import namespace_ws_path, node_ws_path, pod_ws_path
from dashboard.web.visibility import (
    require_known_namespace,
    require_node,
    visible_counts,
    visible_health,
    visible_node_summaries,
)
from timelines import dirty
from timelines.lifecycle.timeline import format_time, parse_time
from timelines.live import group_name
from timelines.models import Finding, Workload
from timelines.observation_rows import StoredRow


def _cluster_or_404(request: HttpRequest, name: str) -> Any:
    try:
        return readable_cluster(access_for(request), name)
    except queries.NotFound as exc:
        raise Http404(str(exc)) from None


def _namespace_or_404(request: HttpRequest, cluster: Any, namespace: str) -> None:
    try:
        require_namespace(access_for(request), cluster, namespace)
    except queries.NotFound as exc:
        raise Http404(str(exc)) from None


def _export(
    param: str, value: str, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Any]:
    """Template context for the Export button (``timelines/_export.html``): the scope parameter of the
    export API and, for pages without a window picker, the default window."""
    return {
        "export_scope": (param, value),
        "export_since": format_time(since) if since else "",
        "export_until": format_time(until) if until else "",
    }


def owner_map(workloads: Any) -> dict[str, list[str]]:
    """Each workload that has an owner, as ``namespace/Kind/name`` → ``[owner kind, owner name]`` (a
    ReplicaSet → its Deployment): what ``static/podlife/rows.js`` climbs to group pods by owner."""
    return {
        f"{w.namespace}/{w.kind}/{w.name}": [w.owner_kind, w.owner_name]
        for w in workloads
        if w.owner_kind and w.owner_name
    }


def _gantt_page(
    request: HttpRequest, template: str, context: dict[str, Any], page: dict[str, Any]
) -> HttpResponse:
    page = {
        "gantt": figures.gantt_config(),
        "plotly_js": reverse("plotly-js"),
        "plotly_gl_js": reverse("plotly-gl-js"),
        **page,
    }
    if "api" in page and page["kind"] != "pod":
        # The first data request, named in the page so the browser fetches it (<link rel=preload>) while
        # plotly.js loads; timeline-page.js uses exactly this URL for its first load.
        query = {k: request.GET[k] for k in ("from", "to") if request.GET.get(k)}
        if page.get("lod") and request.GET.get("detail") == "full":
            page["lod"] = False  # every row, as before the level of detail (a baseline, or by choice)
        lod = {"detail": "auto"} if page.get("lod") else {}
        page["initial_api"] = f"{page['api']}?{urlencode({**query, 'lanes': 'worker', **lod})}"
    return render(request, template, {**context, "page": page})


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    """Clusters, collector health and findings by kind / severity; and what podlife collects."""
    access = access_for(request)
    clusters = list(access.clusters())
    # Aggregates only (issue #17: 150,000 pods answer in under a second): one grouped count per table.
    counts = fleet.cluster_counts(clusters, {c.id: access.namespace_filter(c) for c in clusters})
    rows = [{"cluster": c, "counts": visible_counts(access, c, counts[c.id])} for c in clusters]
    observations = fleet.observation_count(clusters, all_clusters=True) if access.superuser else (None, False)
    health = (
        visible_health(access, clusters, queries.collector_health([c.id for c in clusters]))
        if clusters
        else []
    )
    context = {
        "clusters": rows,
        "health": health,
        # The derive stage's quarantine (issue #35): keys name pods and namespaces of any cluster, so only
        # a superuser sees them; ``manage.py derive --quarantined`` lists the same.
        "quarantined": _quarantined() if access.superuser else [],
        "finding_counts": queries.finding_counts(access.q()),
        "observation_count": observations[0],
        "observation_estimate": observations[1],
        "database": connection.vendor,
    }
    return render(request, "timelines/overview.html", context)


def _quarantined() -> list[dict[str, Any]]:
    """The quarantined keys as the overview shows them: a key escaped (it may hold what the boundary
    refuses, a right-to-left override or a NUL, if it was marked before the boundary existed)."""
    return [
        {
            "cluster": q.cluster.name,
            "kind": q.kind,
            "key": ascii(q.key)[1:-1],
            "failures": q.failures,
            "first_failed_at": q.first_failed_at,
            "last_failed_at": q.last_failed_at,
            "error": q.error,
        }
        for q in dirty.quarantined()
    ]


@login_required
def cluster(request: HttpRequest, cluster: str) -> HttpResponse:
    access = access_for(request)
    c = _cluster_or_404(request, cluster)
    namespaces = access.namespace_filter(c)
    q = request.GET.get("q", "")
    results, search_error = None, ""
    if q.strip():
        try:
            results = fleet.search_pods(c, q, namespaces)
        except fleet.SearchError as exc:
            search_error = str(exc)
    context = {
        "cluster": c,
        "counts": visible_counts(access, c, queries.cluster_counts(c, namespaces)),
        "nodes": visible_node_summaries(access, c, queries.node_summaries(c, namespaces)),
        "namespaces": queries.namespace_summaries(c, namespaces),
        "q": q,
        "results": results,
        "search_error": search_error,
        "health": visible_health(access, [c], queries.collector_health([c.id])),
    }
    return render(request, "timelines/cluster.html", context)


@login_required
def node(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    c = _cluster_or_404(request, cluster)
    try:
        require_node(access_for(request), c, node)
    except queries.NotFound as exc:
        raise Http404(str(exc)) from None
    page = {
        "kind": "node",
        "cluster": c.name,
        "title": node,
        "api": reverse("api-node-timeline", args=[c.name, node]),
        "ws": node_ws_path(c.name, node),
        "pod_url": reverse("pod", args=[c.name, "UID"]),
        "group": group_name("node", c.name, node),
        # Finished pods fold into their owner: ReplicaSets climb to their Deployment.
        "owners": owner_map(queries.owned_workloads(c, access_for(request).namespace_filter(c))),
    }
    context = {"cluster": c, "node": node, **_export("node", node)}
    return _gantt_page(request, "timelines/node.html", context, page)


@login_required
def namespace(request: HttpRequest, cluster: str, namespace: str) -> HttpResponse:
    access = access_for(request)
    c = _cluster_or_404(request, cluster)
    _namespace_or_404(request, c, namespace)
    try:
        require_known_namespace(c, namespace)
    except queries.NotFound as exc:
        raise Http404(str(exc)) from None
    page = {
        "kind": "namespace",
        "cluster": c.name,
        "title": namespace,
        "api": reverse("api-namespace-timeline", args=[c.name, namespace]),
        "ws": namespace_ws_path(c.name, namespace),
        "pod_url": reverse("pod", args=[c.name, "UID"]),
        "group": group_name("ns", c.name, namespace),
        "lod": True,  # crowded windows come as bands of pods (fleet.window_overview)
    }
    workloads = queries.workloads(c, access.namespace_filter(c), namespace=namespace)
    page["owners"] = owner_map(workloads)  # rows grouped Deployment → ReplicaSet → pods
    context = {
        "cluster": c,
        "namespace": namespace,
        "workloads": workloads,
        "pdbs": queries.pdbs(c, access.namespace_filter(c), namespace=namespace),
        **_export("namespace", namespace),
    }
    return _gantt_page(request, "timelines/namespace.html", context, page)


@login_required
def workload(request: HttpRequest, cluster: str, namespace: str, kind: str, name: str) -> HttpResponse:
    c = _cluster_or_404(request, cluster)
    _namespace_or_404(request, c, namespace)
    if kind not in Workload.Kind.values:
        raise Http404(f"kind {kind!r} is not one of {', '.join(Workload.Kind.values)}")
    try:
        w = queries.get_workload(c, namespace, kind, name)
    except queries.NotFound as exc:
        raise Http404(str(exc)) from None
    samples = queries.workload_samples(w)
    fields = [
        ("replicas", "replicas"),
        ("ready", "ready"),
        ("updated", "updated"),
        ("available", "available"),
    ]
    page = {
        "kind": "workload",
        "cluster": c.name,
        "title": f"{kind} {namespace}/{name}",
        "api": reverse("api-workload-timeline", args=[c.name, namespace, kind, name]),
        "pod_url": reverse("pod", args=[c.name, "UID"]),
        "owners": owner_map(
            queries.owned_workloads(c, access_for(request).namespace_filter(c), namespace=namespace)
        ),
        "status_figure": figures.series_figure(
            samples, fields, title="replicas over time", until=w.deleted_at or datetime.now(UTC)
        )
        if samples
        else None,
    }
    context = {
        "cluster": c,
        "workload": w,
        "owned": queries.workload_tree(c, w)[1:],
        "samples": samples,
        **_export("workload", f"{kind}/{namespace}/{name}"),
    }
    return _gantt_page(request, "timelines/workload.html", context, page)


def finding_zoom(start: str | datetime | None, end: str | datetime | None) -> str:
    """The query string that zooms a pod page onto a finding: its span with a margin on both sides."""
    s = start if isinstance(start, datetime) else parse_time(start)
    e = end if isinstance(end, datetime) else parse_time(end)
    if s is None or e is None:
        return ""
    pad = max((e - s) * 0.15, timedelta(seconds=2))
    return urlencode({"x0": format_time(s - pad), "x1": format_time(max(e, s) + pad)})


@login_required
def pod(request: HttpRequest, cluster: str, uid: str) -> HttpResponse:
    access = access_for(request)
    c = _cluster_or_404(request, cluster)
    try:
        p = queries.resolve_pod(c, uid=uid)
    except queries.NotFound as exc:
        raise Http404(str(exc)) from None
    if not access.can_namespace(c, p.namespace):
        raise Http404(f"no pod with UID {uid!r} in cluster {c.name!r}")
    timeline = serialize.to_builtins(timeline_reads.pod_timeline(c, p))
    # Read-time: "kubelet evidence pending since …"
    fresh = freshness.pod_freshness(c, p, namespaces=access.namespace_filter(c))
    observations = queries.pod_observations(c, p)
    by_id = {o.id: o for o in observations}
    # The document cites dedupe keys; the table's rows are anchored by id (``#obs-ID``, ``?evidence=``).
    id_of = {o.dedupe_key: o.id for o in observations}
    diff = None
    a, b = request.GET.get("a", ""), request.GET.get("b", "")
    if a.isdigit() and b.isdigit() and int(a) in by_id and int(b) in by_id:
        diff = {
            "a": by_id[int(a)],
            "b": by_id[int(b)],
            "changes": queries.payload_diff(by_id[int(a)].payload, by_id[int(b)].payload),
        }
    pending = fresh["pending_since"]
    findings = [
        {
            **f,
            "evidence_ids": sorted(id_of[k] for k in f["evidence"] if k in id_of),
            "zoom": finding_zoom(f["start"], f["end"] or timeline["pod"].get("last_observed") or f["start"]),
            # A finding still open, or lasting past the newest kubelet evidence, may change when it arrives.
            "waits_for_kubelet": bool(pending and (not f["end"] or f["end"] >= pending)),
        }
        for f in timeline["findings"]
    ]
    lanes = list(timeline["lanes"])  # in the document's lane order (schema.lane_order)
    page = {
        "kind": "pod",
        "cluster": c.name,
        "title": f"{p.namespace}/{p.name}",
        "timeline": timeline,
        "freshness": fresh,
        "lanes": lanes,
        "api": reverse("api-pod-timeline", args=[c.name, p.uid]),
        "ws": pod_ws_path(c.name, p.uid),
        "group": group_name("pod", c.name, p.uid),
    }
    incarnations = queries.find_pods(c, namespace=p.namespace, name=p.name) if p.name else []
    context = {
        "cluster": c,
        "pod": p,
        "timeline": timeline,
        "findings": findings,
        "markers": [
            {**m, "evidence_links": [{"key": k, "id": id_of.get(k)} for k in m["evidence"]]}
            for m in timeline["markers"]
        ],
        "observations": [
            {"row": o, "at": format_time(o.observed_at), "summary": _summary(o)} for o in observations
        ],
        "diff": diff,
        "a": a,
        "b": b,
        "other_incarnations": [x for x in incarnations if x.uid != p.uid],
        # The pod's whole recorded life (to just past its last observation: the window's end is exclusive).
        **_export(
            "pod",
            p.uid,
            p.first_seen or p.created_at,
            (p.deleted_at or p.last_seen or datetime.now(UTC)) + timedelta(seconds=1),
        ),
        "pdbs": [
            x
            for x in queries.pdbs(c, None, namespace=p.namespace)
            if queries.selector_matches(x.selector or {}, p.labels or {})
        ],
    }
    return _gantt_page(request, "timelines/pod.html", context, page)


def _summary(o: StoredRow) -> str:
    """One readable line per observation: the log message, event reason, phase, span name."""
    p = o.payload or {}
    if o.kind == "worker":
        return str(p.get("message") or p.get("transition") or "")
    if o.kind == "kubelet_marker":
        return f"{p.get('reason', '')}: {p.get('message', '')}"
    if o.kind == "event":
        return f"{p.get('type', '')} {p.get('reason', '')}: {p.get('message', '')}"
    if o.kind == "span":
        return f"{p.get('name', '')} {p.get('start', '')} → {p.get('end', '')}"
    if o.kind in ("pod", "pod_deleted"):
        deletion = " deletionTimestamp=" + str(p["deletion_timestamp"]) if p.get("deletion_timestamp") else ""
        return f"{p.get('watch', '')} rv={p.get('resource_version', '')} phase={p.get('phase', '')}{deletion}"
    return ""


@login_required
def pdb(request: HttpRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    c = _cluster_or_404(request, cluster)
    _namespace_or_404(request, c, namespace)
    try:
        p = queries.get_pdb(c, namespace, name)
    except queries.NotFound as exc:
        raise Http404(str(exc)) from None
    samples = queries.pdb_samples(p)
    until = p.deleted_at or datetime.now(UTC)
    blocked = queries.blocked_periods(samples, until=None if p.deleted_at is None else p.deleted_at)
    fields = [
        ("disruptions_allowed", "disruptionsAllowed"),
        ("current_healthy", "currentHealthy"),
        ("desired_healthy", "desiredHealthy"),
        ("expected_pods", "expectedPods"),
    ]
    page = {
        "kind": "pdb",
        "cluster": c.name,
        "title": f"{namespace}/{name}",
        "status_figure": figures.series_figure(
            samples, fields, title="status over time", until=until, shade=blocked
        )
        if samples
        else None,
    }
    pdb_findings = queries.pdb_findings(p, limit=200)
    for f in pdb_findings:  # "zoom to finding": the pod page zoomed onto its span
        f.zoom = finding_zoom(f.start, f.end or f.start)  # type: ignore[attr-defined]  # for the template only
    context = {
        "cluster": c,
        "pdb": p,
        "selector_text": queries.selector_text(p.selector),
        "samples": samples,
        "blocked": blocked,
        "covered": queries.pdb_covered_pods(p),
        **_export(
            "pdb",
            f"{namespace}/{name}",
            p.created_at or (samples[0]["at"] if samples else None),
            until + timedelta(seconds=1),
        ),
        "lane": queries.pdb_lane(p),
        "findings": pdb_findings,
    }
    return _gantt_page(request, "timelines/pdb.html", context, page)


@login_required
def findings(request: HttpRequest) -> HttpResponse:
    access = access_for(request)
    g = request.GET
    error = ""
    try:
        start, end = parse_when(g.get("from"), "from"), parse_when(g.get("to"), "to")
    except ApiError as exc:
        error, start, end = exc.message, None, None
    rows, total = queries.findings_filtered(
        access.q(),
        cluster=g.get("cluster", ""),
        namespace=g.get("namespace", ""),
        kind=g.get("kind", ""),
        severity=g.get("severity", ""),
        start=start,
        end=end,
        limit=500,
    )
    for r in rows:  # "zoom to finding": the pod page zoomed onto its span
        r.zoom = finding_zoom(r.start, r.end or r.start)  # type: ignore[attr-defined]  # for the template only
    context = {
        "rows": rows,
        "total": total,
        "error": error,
        "f": {k: g.get(k, "") for k in ("cluster", "namespace", "kind", "severity", "from", "to")},
        "clusters": access.clusters(),
        "kinds": queries.finding_kinds(access.q()),
        "severities": Finding.Severity.values,
    }
    return render(request, "timelines/findings.html", context)


@login_required
def pod_by_ref(request: HttpRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    """``/c/C/pods/NS/NAME``: the newest incarnation (a shareable link that survives pod re-creation)."""
    c = _cluster_or_404(request, cluster)
    _namespace_or_404(request, c, namespace)
    pods = queries.find_pods(c, namespace=namespace, name=name)
    if not pods:
        raise Http404(f"no pod {namespace}/{name} in cluster {c.name!r}")
    return redirect("pod", cluster=c.name, uid=pods[0].uid)


# --- plotly.js: the partial bundle every page loads, the full one for WebGL (dashboard/plotly_bundles.py) -------
_plotly_cache: dict[tuple[str, str], bytes] = {}
_plotly_lock = threading.Lock()


def _plotly_bytes(bundle: str, encoding: str) -> bytes:
    with _plotly_lock:
        if (bundle, "raw") not in _plotly_cache:
            raw = plotly_bundles.code(bundle)
            _plotly_cache[bundle, "raw"] = raw
            _plotly_cache[bundle, "gzip"] = gzip.compress(raw, compresslevel=6, mtime=0)
            _plotly_cache[bundle, "etag"] = hashlib.sha256(raw).hexdigest()[:32].encode()
        return _plotly_cache[bundle, encoding]


@require_GET
def plotly_js(request: HttpRequest, bundle: str = "partial") -> HttpResponse:
    etag = '"' + _plotly_bytes(bundle, "etag").decode() + '"'
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponse(status=304)
    else:
        gz = "gzip" in request.headers.get("Accept-Encoding", "")
        response = HttpResponse(
            _plotly_bytes(bundle, "gzip" if gz else "raw"), content_type="text/javascript; charset=utf-8"
        )
        if gz:
            response["Content-Encoding"] = "gzip"
    response["ETag"] = etag
    response["Vary"] = "Accept-Encoding"
    response["Cache-Control"] = "public, max-age=86400"
    return response


def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok", "database": connection.vendor})


# --- small pages ---------------------------------------------------------------------------------------------
@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever a page names (JSON answers, downloads): the site's icon."""
    return redirect(static("podlife/favicon.svg"), permanent=True)


@login_required
@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    """The API viewer: a page of the site that renders /api/v1/openapi.json with its own script (no CDN)."""
    return render(request, "timelines/api_docs.html")
