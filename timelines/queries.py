"""Reads for views, the API, the CLI and export. Everything here reads derived rows, never raw JSON."""

from __future__ import annotations

from django.db.models import Q

from timelines.lifecycle.timeline import Finding as FindingT
from timelines.lifecycle.timeline import Interval as IntervalT
from timelines.lifecycle.timeline import Marker as MarkerT
from timelines.lifecycle.timeline import PodTimeline
from timelines.models import Cluster, Finding, Interval, Marker, Pod


class NotFound(LookupError):
    """What was asked for does not exist; the message says what was looked for."""


def get_cluster(name: str) -> Cluster:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        known = ", ".join(Cluster.objects.values_list("name", flat=True)[:20]) or "none yet"
        raise NotFound(f"no cluster named {name!r} (known: {known})")
    return cluster


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


def _evidence(ids: list[int]) -> tuple[str, ...]:
    return tuple(str(i) for i in ids)


def pod_timeline(cluster: Cluster, pod: Pod) -> PodTimeline:
    """The stored timeline of ``pod``; evidence cites observation ids."""
    lanes: dict[str, list[IntervalT]] = {"worker": [], "api": []}
    for row in Interval.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("lane", "start", "id"):
        lanes.setdefault(row.lane, []).append(
            IntervalT(row.lane, row.state, row.start, row.end, row.source, row.attrs, _evidence(row.evidence))
        )
    markers = tuple(
        MarkerT(m.at, m.kind, m.reason, m.message, m.attrs, _evidence(m.evidence))
        for m in Marker.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("at", "id")
    )
    findings = tuple(
        FindingT(f.kind, f.severity, f.message, f.start, f.end, _evidence(f.evidence), f.attrs)
        for f in Finding.objects.filter(cluster=cluster, pod_uid=pod.uid).order_by("start", "kind", "id")
    )
    owner = {"kind": pod.owner_kind, "name": pod.owner_name, "uid": pod.owner_uid} if pod.owner_kind else None
    return PodTimeline(
        uid=pod.uid,
        namespace=pod.namespace or None,
        name=pod.name or None,
        node=pod.node or None,
        lanes={k: tuple(v) for k, v in lanes.items()},
        markers=markers,
        findings=findings,
        static=pod.static,
        owner=owner,
        created_at=pod.created_at,
        deleted_at=pod.deleted_at,
        phase=pod.phase or None,
        first_observed=pod.first_seen,
        last_observed=pod.last_seen,
    )


def search_pods(cluster: Cluster, text: str, *, limit: int = 100) -> list[Pod]:
    """Pods whose name, namespace, UID, owner or node contains ``text``."""
    q = (
        Q(name__icontains=text)
        | Q(namespace__icontains=text)
        | Q(uid__istartswith=text)
        | Q(owner_name__icontains=text)
        | Q(node__icontains=text)
    )
    return list(Pod.objects.filter(cluster=cluster).filter(q).order_by("-last_seen")[:limit])
