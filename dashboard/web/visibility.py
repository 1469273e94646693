"""What a reader with namespace grants only may see beyond those namespaces' pods (issue #18, finding 9).

Decided (docs/security.md, "What a namespace grant reveals"):

* **Nodes**: only the nodes that a pod of a readable namespace ran on, by name, with counts of readable
  pods only; any other node answers 404 like one that does not exist. The node's own lanes (Ready,
  cordoned, kubelet pod counts: ``node:*``) need a grant on the whole cluster, as in exports.
* **Collector health**: the counts and lag of each watch, but no ``last_error`` or note text (they can
  quote other namespaces' pods and UIDs) and no per-node kubelet rows (they name every node).

Whole-cluster readers and superusers see everything. Everything here answers questions; the queries are
``dashboard/queries.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dashboard import queries
from dashboard.web.access import Access
from timelines.models import Cluster, Node, Pod, PodDisruptionBudget, Workload

HIDDEN = "(hidden: needs a grant on the whole cluster)"


def node_is_visible(access: Access, cluster: Cluster, node: str) -> bool:
    """True when ``node`` is known in ``cluster`` and the reader may see it (see the module docstring)."""
    if access.whole_cluster(cluster):
        return (
            Node.objects.filter(cluster=cluster, name=node).exists()
            or Pod.objects.filter(cluster=cluster, node=node).exists()
        )
    readable = access.namespace_filter(cluster) or set()
    return Pod.objects.filter(cluster=cluster, node=node, namespace__in=sorted(readable)).exists()


def require_node(access: Access, cluster: Cluster, node: str) -> None:
    """Raise ``queries.NotFound`` (the same words for unknown and unreadable) unless the node is visible."""
    if not node_is_visible(access, cluster, node):
        raise queries.NotFound(f"no node {node!r} in cluster {cluster.name!r} that you may read")


def require_known_namespace(cluster: Cluster, namespace: str) -> None:
    """Raise ``queries.NotFound`` for a namespace nothing stored belongs to (issue #15: 404, never an empty
    page). Readability is ``api.views.require_namespace``'s question; ask it first."""
    known = (
        Pod.objects.filter(cluster=cluster, namespace=namespace).exists()
        or Workload.objects.filter(cluster=cluster, namespace=namespace).exists()
        or PodDisruptionBudget.objects.filter(cluster=cluster, namespace=namespace).exists()
    )
    if not known:
        raise queries.NotFound(f"no namespace {namespace!r} in cluster {cluster.name!r} that you may read")


def visible_node_summaries(
    access: Access, cluster: Cluster, summaries: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """``queries.node_summaries`` rows the reader may see: all of them, or those with a readable pod."""
    if access.whole_cluster(cluster):
        return list(summaries)
    return [row for row in summaries if row.get("pods")]


def sees_node_lanes(access: Access, cluster: Cluster) -> bool:
    """True when the reader may see a node's own lanes (``node:*``): a grant on the whole cluster."""
    return access.whole_cluster(cluster)


def visible_health(
    access: Access, clusters: Iterable[Cluster], rows: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``queries.collector_health`` rows, redacted per cluster for namespace-only readers."""
    whole = {c.name: access.whole_cluster(c) for c in clusters}
    out = []
    for row in rows:
        if whole.get(row["cluster"], False):
            out.append(row)
            continue
        if ":" in row["resource"]:  # per-node kubelet bookkeeping: the resource names a node
            continue
        out.append(
            {
                **row,
                "last_error": HIDDEN if row.get("last_error") else "",
                "note": HIDDEN if row.get("note") else "",
            }
        )
    return out


def visible_counts(access: Access, cluster: Cluster, counts: dict[str, int]) -> dict[str, int]:
    """``queries.cluster_counts`` with ``nodes`` counting only the nodes the reader may see."""
    if not access.whole_cluster(cluster):
        readable = sorted(access.namespace_filter(cluster) or ())
        counts = {
            **counts,
            "nodes": Pod.objects.filter(cluster=cluster, namespace__in=readable)
            .exclude(node="")
            .values("node")
            .distinct()
            .count(),
        }
    return counts
