"""Websocket routes (mounted by podlife_site/asgi.py behind the Origin check and the session auth)."""

from __future__ import annotations

from urllib.parse import quote

from django.urls import path

from timelines.web.consumers import NodeConsumer

websocket_urlpatterns = [
    path("ws/v1/nodes/<str:cluster>/<str:node>/", NodeConsumer.as_asgi()),
]


def node_ws_path(cluster: str, node: str) -> str:
    return f"/ws/v1/nodes/{quote(cluster, safe='')}/{quote(node, safe='')}/"
