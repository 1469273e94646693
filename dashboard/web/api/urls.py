from __future__ import annotations

from django.urls import path, re_path

import podlife_site.converters  # noqa: F401  (registers <segment:…>)
from dashboard.web.api import views

C = "clusters/<segment:cluster>"
W = "workloads/<segment:namespace>/<segment:kind>/<segment:name>"

urlpatterns = [
    path("", views.root, name="api-root"),
    path("openapi.json", views.openapi, name="api-openapi"),
    path("clusters", views.clusters, name="api-clusters"),
    path(f"{C}/nodes", views.nodes, name="api-nodes"),
    path(f"{C}/nodes/<segment:node>/timeline", views.node_timeline, name="api-node-timeline"),
    path(f"{C}/namespaces", views.namespaces, name="api-namespaces"),
    path(
        f"{C}/namespaces/<segment:namespace>/timeline",
        views.namespace_timeline,
        name="api-namespace-timeline",
    ),
    path(f"{C}/pods", views.pod_search, name="api-pods"),
    path(f"{C}/pods/<segment:uid>/timeline", views.pod_timeline, name="api-pod-timeline"),
    path(f"{C}/pods/<segment:uid>/observations", views.pod_observations, name="api-pod-observations"),
    path(f"{C}/pods/<segment:uid>/diff", views.pod_diff, name="api-pod-diff"),
    path(f"{C}/workloads", views.workload_list, name="api-workloads"),
    path(f"{C}/{W}/timeline", views.workload_timeline, name="api-workload-timeline"),
    path(f"{C}/{W}/status", views.workload_status, name="api-workload-status"),
    path(f"{C}/pdbs", views.pdb_list, name="api-pdbs"),
    path(f"{C}/pdbs/<segment:namespace>/<segment:name>", views.pdb_detail, name="api-pdb"),
    path("findings", views.findings, name="api-findings"),
    re_path(r"^.*$", views.not_found),  # a JSON 404 naming the path, not an HTML page
]
