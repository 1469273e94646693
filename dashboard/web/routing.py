"""Websocket routes (mounted by podlife_site/asgi.py behind the Origin check and the session auth)."""

from __future__ import annotations

from django.urls import path

from dashboard.web.consumers import NamespaceConsumer, NodeConsumer, PodConsumer
from podlife_site.converters import url_segment  # also registers <segment:…>

websocket_urlpatterns = [
    path("ws/v1/nodes/<segment:cluster>/<segment:node>/", NodeConsumer.as_asgi()),
    path("ws/v1/namespaces/<segment:cluster>/<segment:namespace>/", NamespaceConsumer.as_asgi()),
    path("ws/v1/pods/<segment:cluster>/<segment:uid>/", PodConsumer.as_asgi()),
]


def node_ws_path(cluster: str, node: str) -> str:
    return f"/ws/v1/nodes/{url_segment(cluster)}/{url_segment(node)}/"


def namespace_ws_path(cluster: str, namespace: str) -> str:
    return f"/ws/v1/namespaces/{url_segment(cluster)}/{url_segment(namespace)}/"


def pod_ws_path(cluster: str, uid: str) -> str:
    return f"/ws/v1/pods/{url_segment(cluster)}/{url_segment(uid)}/"
