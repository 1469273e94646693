"""Reads for views, the API, the CLI and export, from derived rows: lookups, counts, lists, samples.

A pod's timeline, many pods' and a scope's window are read in ``dashboard/timeline_reads.py``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import Count, Max, Min, Model, Q, QuerySet
from django.utils import timezone

from collectors.models import CollectorState  # the collectors' own rows, read for their health
from dashboard.timeline_reads import MAX_WINDOW_PODS
from timelines import observation_rows
from timelines.lifecycle import cluster_objects
from timelines.models import (
    Cluster,
    Finding,
    Interval,
    Node,
    Pod,
    PodDisruptionBudget,
    Workload,
)
from timelines.models import NotFound as NotFound  # the read side's callers catch queries.NotFound
from timelines.observation_rows import StoredRow

_M = TypeVar("_M", bound=Model)


def get_cluster(name: str) -> Cluster:
    return Cluster.objects.named(name)


def find_pods(cluster: Cluster, *, namespace: str, name: str) -> list[Pod]:
    """Every incarnation (UID) of ``namespace/name``, newest first."""
    return list(
        Pod.objects.filter(cluster=cluster, namespace=namespace, name=name).order_by(
            "-last_seen", "-created_at", "uid"
        )
    )


def resolve_pod(cluster: Cluster, *, uid: str | None = None, pod_ref: str | None = None) -> Pod:
    """The pod with ``uid``, or the newest incarnation of ``pod_ref`` (``NAMESPACE/NAME``)."""
    if uid:
        pod = Pod.objects.filter(cluster=cluster, uid=uid).first()
        if pod is None:
            raise NotFound(f"no pod with UID {uid!r} in cluster {cluster.name!r}")
        return pod
    if not pod_ref or pod_ref.count("/") != 1 or not all(pod_ref.split("/")):
        raise NotFound(f"pod reference {pod_ref!r} is not NAMESPACE/NAME")
    namespace, name = pod_ref.split("/")
    pods = find_pods(cluster, namespace=namespace, name=name)
    if not pods:
        raise NotFound(f"no pod {pod_ref!r} in cluster {cluster.name!r}")
    return pods[0]


# --- the dashboard and the API (dashboard/web/views.py, dashboard/web/api/views.py) ---------------------------------
# These take the readable namespaces (``namespaces``: None = all) from dashboard/web/access.py, so a caller
# can never forget to narrow a read to what its user may see.


def _ns_filter(qs: Any, namespaces: set[str] | None, field: str = "namespace") -> Any:
    return qs if namespaces is None else qs.filter(**{f"{field}__in": sorted(namespaces)})


def collector_health(
    cluster_ids: Iterable[int] | None = None, *, now: datetime | None = None
) -> list[dict[str, Any]]:
    """Health of every watch and kubelet pull (CollectorState) of the clusters (all when None), ordered by
    cluster and resource, with ``lag_seconds`` (now − last event), ``behind_seconds`` (now − its last
    progress: an event or the end of a step or pull) and ``stale`` (behind more than
    ``PODLIFE_LIVE_STALE_S``, or never progressed; a pull skipped on purpose is not stale). The one computation of collector
    health: the pages, the REST API and ``/metrics`` (``dashboard/collector_health.py``) all read it. The per-node
    bookkeeping rows of log pulls (``kubelet-logs:NODE``) are summarized by their cluster's row."""
    now = now or timezone.now()
    stale_after = float(settings.PODLIFE_LIVE_STALE_S)
    rows = CollectorState.objects.select_related("cluster").order_by("cluster__name", "resource")
    if cluster_ids is not None:
        rows = rows.filter(cluster_id__in=list(cluster_ids))
    out = []
    for row in rows:
        if ":" in row.resource:
            continue
        lag = (now - row.last_event_at).total_seconds() if row.last_event_at else None
        # Progress is an event or the end of a step/pull: a quiet watch still ends a step every timeout, a
        # starved one (its next step queued behind others) or a dead one does neither.
        progress = max((t for t in (row.last_event_at, row.last_step_at) if t is not None), default=None)
        behind = None if progress is None else max(0.0, (now - progress).total_seconds())
        skipped = row.note.startswith("skipped:")
        out.append(
            {
                "cluster": row.cluster.name,
                "resource": row.resource,
                "resource_version": row.resource_version,
                "last_event_at": row.last_event_at,
                "last_step_at": row.last_step_at,
                "lag_seconds": None if lag is None else max(0.0, lag),
                "behind_seconds": behind,
                "stale": not skipped and (behind is None or behind > stale_after),
                "events_total": row.events_total,
                "events_per_second": row.events_per_second,
                "errors_total": row.errors_total,
                "relists_total": row.relists_total,
                "last_error": row.last_error,
                "last_error_at": row.last_error_at,
                "note": row.note,
                "lease_owner": row.lease_owner,
                "lease_expires": row.lease_expires,
            }
        )
    return out


def finding_counts(readable: Q) -> list[dict[str, Any]]:
    """Findings counted by cluster, kind and severity (``readable`` from Access.q())."""
    rows = (
        Finding.objects.filter(readable)
        .values("cluster__name", "kind", "severity")
        .annotate(n=Count("id"))
        .order_by("cluster__name", "kind", "severity")
    )
    return [
        {"cluster": r["cluster__name"], "kind": r["kind"], "severity": r["severity"], "count": r["n"]}
        for r in rows
    ]


def cluster_counts(cluster: Cluster, namespaces: set[str] | None) -> dict[str, int]:
    pods = _ns_filter(Pod.objects.filter(cluster=cluster), namespaces)
    return {
        "pods": pods.count(),
        "live_pods": pods.filter(deleted_at__isnull=True).count(),
        "nodes": Node.objects.filter(cluster=cluster).count(),
        "findings": _ns_filter(Finding.objects.filter(cluster=cluster), namespaces).count(),
    }


def node_summaries(cluster: Cluster, namespaces: set[str] | None) -> list[dict[str, Any]]:
    """Every node known from Node rows or from pods, with its readable pod counts."""
    counts = {
        r["node"]: r
        for r in _ns_filter(Pod.objects.filter(cluster=cluster).exclude(node=""), namespaces)
        .values("node")
        .annotate(pods=Count("id"), live=Count("id", filter=Q(deleted_at__isnull=True)))
    }
    nodes = {n.name: n for n in Node.objects.filter(cluster=cluster)}
    out = []
    for name in sorted(set(nodes) | set(counts)):
        n, c = nodes.get(name), counts.get(name, {})
        out.append(
            {
                "name": name,
                "ready": n.ready if n else None,
                "unschedulable": n.unschedulable if n else False,
                "deleted_at": n.deleted_at if n else None,
                "last_seen": n.last_seen if n else None,
                "pods": c.get("pods", 0),
                "live_pods": c.get("live", 0),
            }
        )
    return out


def namespace_summaries(cluster: Cluster, namespaces: set[str] | None) -> list[dict[str, Any]]:
    rows = (
        _ns_filter(Pod.objects.filter(cluster=cluster), namespaces)
        .values("namespace")
        .annotate(pods=Count("id"), live=Count("id", filter=Q(deleted_at__isnull=True)))
        .order_by("namespace")
    )
    findings = dict(
        _ns_filter(Finding.objects.filter(cluster=cluster), namespaces)
        .values_list("namespace")
        .annotate(n=Count("id"))
    )
    return [
        {
            "name": r["namespace"],
            "pods": r["pods"],
            "live_pods": r["live"],
            "findings": findings.get(r["namespace"], 0),
        }
        for r in rows
    ]


def data_extent(
    cluster: Cluster, *, node: str = "", namespace: str = "", pod_uids: list[str] | None = None
) -> tuple[datetime | None, datetime | None]:
    """Earliest start and latest start/end of the intervals in a scope (to pick a default window)."""
    qs = Interval.objects.filter(cluster=cluster)
    if node:
        qs = qs.filter(node=node)
    if namespace:
        qs = qs.filter(namespace=namespace)
    if pod_uids is not None:
        qs = qs.filter(pod_uid__in=pod_uids[:5000])
    agg = qs.aggregate(first=Min("start"), last_start=Max("start"), last_end=Max("end"))
    last = max((t for t in (agg["last_start"], agg["last_end"]) if t is not None), default=None)
    return agg["first"], last


def latest_cordon(cluster: Cluster, node: str) -> tuple[datetime, datetime | None] | None:
    """The start and end (None while it lasts) of the node's latest ``cordoned`` interval (its own
    ``node:*`` lanes), or None when it was never seen cordoned: a drain begins with a cordon."""
    row = (
        Interval.objects.filter(cluster=cluster, node=node, pod_uid__isnull=True, state="cordoned")
        .order_by("-start")
        .values_list("start", "end")
        .first()
    )
    return (row[0], row[1]) if row else None


def workload_tree(cluster: Cluster, workload: Workload) -> list[Workload]:
    """``workload`` and the workloads it owns (a Deployment's ReplicaSets), oldest first."""
    owned = list(
        Workload.objects.filter(cluster=cluster, owner_uid=workload.uid).order_by("created_at", "name")
    )
    return [workload, *owned]


def workload_pod_uids(cluster: Cluster, workload: Workload, namespaces: set[str] | None) -> list[str]:
    owners = [w.uid for w in workload_tree(cluster, workload)]
    qs = _ns_filter(
        Pod.objects.filter(cluster=cluster, namespace=workload.namespace, owner_uid__in=owners), namespaces
    )
    return list(qs.values_list("uid", flat=True)[:MAX_WINDOW_PODS])


WORKLOAD_SAMPLE_FIELDS = ("replicas", "current", "ready", "updated", "available")
PDB_SAMPLE_FIELDS = (
    "disruptions_allowed",
    "current_healthy",
    "desired_healthy",
    "expected_pods",
    "observed_generation",
    "reason",
    "disrupted_pods",
    "conditions",
)


def _status_samples(
    qs: Any, fields: Sequence[str], since: datetime | None, until: datetime | None
) -> list[dict[str, Any]]:
    """Status samples (``at`` and ``fields``) in time order. With ``since``: those from it on, preceded by
    the newest one before it (the status at ``since``); with ``until``: those before it."""
    rows = qs
    if since is not None:
        rows = rows.filter(at__gte=since)
    if until is not None:
        rows = rows.filter(at__lt=until)
    out = [dict(r) for r in rows.order_by("at", "id").values("at", *fields)]
    if since is not None:
        before = qs.filter(at__lt=since).order_by("-at", "-id").values("at", *fields).first()
        if before is not None:
            out.insert(0, dict(before))
    return out


def workload_samples(
    workload: Workload, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """A workload's status samples (times as datetimes; ``serialize.workload_sample`` shapes one)."""
    return _status_samples(workload.samples.all(), WORKLOAD_SAMPLE_FIELDS, since, until)


def _current_incarnation(qs: QuerySet[_M], what: str, cluster: Cluster) -> _M:
    """The live object of a name (else the newest deleted one): names are reused, UIDs are not."""
    found = qs.order_by("deleted_at", "-created_at").first()
    if found is None:
        raise NotFound(f"no {what} in cluster {cluster.name!r}")
    return found


def get_workload(cluster: Cluster, namespace: str, kind: str, name: str) -> Workload:
    qs = Workload.objects.filter(cluster=cluster, namespace=namespace, kind=kind, name=name)
    return _current_incarnation(qs, f"{kind} {namespace}/{name}", cluster)


def workloads(cluster: Cluster, namespaces: set[str] | None, *, namespace: str = "") -> list[Workload]:
    qs = _ns_filter(Workload.objects.filter(cluster=cluster), namespaces)
    if namespace:
        qs = qs.filter(namespace=namespace)
    return list(qs.order_by("namespace", "kind", "name"))


def owned_workloads(cluster: Cluster, namespaces: set[str] | None, *, namespace: str = "") -> list[Workload]:
    """The workloads that have an owner (a Deployment's ReplicaSets): what a page needs to group pods
    Deployment → ReplicaSet → pods, without every workload of the cluster."""
    qs = _ns_filter(Workload.objects.filter(cluster=cluster).exclude(owner_name=""), namespaces)
    if namespace:
        qs = qs.filter(namespace=namespace)
    return list(qs.only("namespace", "kind", "name", "owner_kind", "owner_name"))


def get_pdb(cluster: Cluster, namespace: str, name: str) -> PodDisruptionBudget:
    qs = PodDisruptionBudget.objects.filter(cluster=cluster, namespace=namespace, name=name)
    return _current_incarnation(qs, f"PodDisruptionBudget {namespace}/{name}", cluster)


def pdbs(cluster: Cluster, namespaces: set[str] | None, *, namespace: str = "") -> list[PodDisruptionBudget]:
    qs = _ns_filter(PodDisruptionBudget.objects.filter(cluster=cluster), namespaces)
    if namespace:
        qs = qs.filter(namespace=namespace)
    return list(qs.order_by("namespace", "name"))


# metav1.LabelSelector semantics live in the pure core; re-exported for views, export and scope.
selector_matches = cluster_objects.selector_matches
selector_text = cluster_objects.selector_text


def pdb_findings(pdb: PodDisruptionBudget, *, limit: int = 200) -> list[Finding]:
    """The findings about a PDB (blocked drains; each may name the pod it blocked), newest first."""
    qs = Finding.objects.filter(cluster_id=pdb.cluster_id, subject="pdb", attrs__pdb_uid=pdb.uid)
    return list(qs.order_by("-start")[:limit])


def pdb_covered_pods(pdb: PodDisruptionBudget) -> list[Pod]:
    pods = Pod.objects.filter(cluster_id=pdb.cluster_id, namespace=pdb.namespace).order_by(
        "name", "-last_seen"
    )
    return [p for p in pods if selector_matches(pdb.selector or {}, p.labels or {})]


def pdb_samples(
    pdb: PodDisruptionBudget, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """A PDB's status samples (times as datetimes; ``serialize.pdb_sample`` shapes one)."""
    return _status_samples(pdb.samples.all(), PDB_SAMPLE_FIELDS, since, until)


def blocked_periods(samples: list[dict[str, Any]], *, until: datetime | None = None) -> list[dict[str, Any]]:
    """Spans where ``disruptions_allowed`` was 0, from consecutive status samples (open end = still)."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for s in samples:
        blocked = s["disruptions_allowed"] <= 0
        if blocked and current is None:
            current = {"start": s["at"], "end": None, "reason": s.get("reason") or ""}
        elif not blocked and current is not None:
            current["end"] = s["at"]
            out.append(current)
            current = None
    if current is not None:
        current["end"] = until
        out.append(current)
    return out


def overlapping(since: datetime, until: datetime) -> Q:
    """Rows (intervals, findings) that overlap ``[since, until)``: begun before its end, not ended before it."""
    return Q(start__lt=until) & (Q(end__isnull=True) | Q(end__gte=since))


def side_intervals(
    cluster_id: int,
    *,
    node: str | None = None,
    pdb_uid: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[Interval]:
    """The derived intervals that belong to no pod: a node's own lanes (``node:*``) or a PDB's
    (``pdb:NAME``), optionally only those overlapping ``[since, until)``; by lane, then time."""
    qs = Interval.objects.filter(cluster_id=cluster_id, pod_uid__isnull=True)
    if node is not None:
        qs = qs.filter(node=node, lane__startswith="node:")
    if pdb_uid is not None:
        qs = qs.filter(attrs__pdb_uid=pdb_uid)
    if since is not None and until is not None:
        qs = qs.filter(overlapping(since, until))
    return qs.order_by("lane", "start", "id")


def pdb_lane(pdb: PodDisruptionBudget) -> list[Interval]:
    """The derived ``pdb:NAME`` intervals when the lifecycle core made them."""
    return list(side_intervals(pdb.cluster_id, pdb_uid=pdb.uid))


def pod_observations(cluster: Cluster, pod: Pod, *, limit: int = 5000) -> list[StoredRow]:
    return observation_rows.rows(
        observation_rows.selection(cluster, pod_uids=[pod.uid]).order_by("observed_at", "id")[:limit]
    )


def observations_by_id(cluster: Cluster, ids: Iterable[int], namespaces: set[str] | None) -> list[StoredRow]:
    qs = _ns_filter(observation_rows.selection(cluster, ids=list(ids)[:1000]), namespaces)
    return observation_rows.rows(qs.order_by("observed_at", "id"))


MAX_KEYS = 1000  # observations asked for by key in one request


def observations_by_key(
    cluster: Cluster, keys: Iterable[str], namespaces: set[str] | None
) -> list[StoredRow]:
    """The observations of ``cluster`` with these dedupe keys (what a timeline document cites as
    evidence), over the ``(cluster, dedupe_key)`` index; at most ``MAX_KEYS``."""
    wanted = sorted(set(keys))[:MAX_KEYS]
    qs = _ns_filter(observation_rows.selection(cluster, keys=wanted), namespaces)
    return observation_rows.rows(qs.order_by("observed_at", "id"))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": [1]}}`` → ``{"a.b[0]": 1}``; lists of named objects are keyed by name or type."""
    out: dict[str, Any] = {}
    if isinstance(value, dict):
        if not value and prefix:
            out[prefix] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list):
        if not value and prefix:
            out[prefix] = []
        for i, v in enumerate(value):
            key = v.get("name") or v.get("type") if isinstance(v, dict) else None
            out.update(flatten(v, f"{prefix}[{key}]" if isinstance(key, str) else f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def payload_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What changed between two payloads, path by path (``resource_version`` and ``watch`` included)."""
    a, b = flatten(dict(before)), flatten(dict(after))
    return [
        {
            "path": k,
            "before": a.get(k),
            "after": b.get(k),
            "change": "added" if k not in a else "removed" if k not in b else "changed",
        }
        for k in sorted(set(a) | set(b))
        if a.get(k, _MISSING) != b.get(k, _MISSING)
    ]


_MISSING = object()


def findings_filtered(
    readable: Q,
    *,
    cluster: str = "",
    namespace: str = "",
    kind: str = "",
    severity: str = "",
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 500,
) -> tuple[list[Finding], int]:
    """Findings matching every given filter (blank = any) and readable; returns (page, total)."""
    qs = Finding.objects.filter(readable).select_related("cluster")
    if cluster:
        qs = qs.filter(cluster__name=cluster)
    if namespace:
        qs = qs.filter(namespace=namespace)
    if kind:
        qs = qs.filter(kind=kind)
    if severity:
        qs = qs.filter(severity=severity)
    if start is not None:
        qs = qs.filter(Q(end__isnull=True) | Q(end__gte=start))
    if end is not None:
        qs = qs.filter(start__lt=end)
    return list(qs.order_by("-start", "id")[:limit]), qs.count()


def finding_kinds(readable: Q) -> list[str]:
    return list(Finding.objects.filter(readable).values_list("kind", flat=True).distinct().order_by("kind"))
