"""The live socket (issue #18, finding 10): the Origin must be the page's own origin (scheme, host and
port) or a trusted origin; a frame that is not JSON text gets an error frame and the socket stays up."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from dashboard.web.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)
PATH = "/ws/v1/nodes/lab/node-a/"


def handshake(scheme: str, host: str, origin: str | None) -> bool:
    from podlife_site.asgi import application

    async def run() -> bool:
        headers = [(b"host", host.encode())]
        if origin is not None:
            headers.append((b"origin", origin.encode()))
        ws = WebsocketCommunicator(application, PATH, headers=headers)
        ws.scope["scheme"] = scheme
        connected, _ = await ws.connect()
        await ws.disconnect()
        return bool(connected)

    return async_to_sync(run)()


@pytest.mark.parametrize(
    ("scheme", "host", "origin", "allowed"),
    [
        ("ws", "localhost:8000", "http://localhost:8000", True),
        ("ws", "localhost:8000", "https://localhost:8000", False),  # another scheme
        ("ws", "localhost:8000", "http://localhost:9999", False),  # another port
        ("ws", "localhost:8000", "http://localhost", False),  # port 80 is another origin
        ("ws", "localhost", "http://localhost", True),
        ("ws", "localhost", "http://localhost:80", True),
        ("wss", "localhost", "https://localhost", True),
        ("wss", "localhost", "http://localhost", False),  # a page on plain HTTP must not reach a TLS socket
        ("ws", "localhost:8000", None, False),  # no Origin at all
        ("ws", "localhost:8000", "null", False),
        ("ws", "evil.example:8000", "http://evil.example:8000", False),  # not in ALLOWED_HOSTS
        ("ws", "10.0.0.5:8000", "https://podlife.example.org", True),  # CSRF_TRUSTED_ORIGINS, behind a proxy
        ("ws", "10.0.0.5:8000", "http://podlife.example.org", False),
        ("ws", "10.0.0.5:8000", "https://podlife.example.org:8443", False),
        ("ws", "10.0.0.5:8000", "https://team.apps.example.net", True),  # https://*.apps.example.net
        ("ws", "10.0.0.5:8000", "https://apps.example.net.evil.org", False),
    ],
)
def test_origin_must_match_scheme_host_and_port(
    settings: Any, lab: Any, scheme: str, host: str, origin: str | None, allowed: bool
) -> None:
    settings.ALLOWED_HOSTS = ["localhost", "10.0.0.5"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://podlife.example.org", "https://*.apps.example.net"]
    assert handshake(scheme, host, origin) is allowed


def test_a_proxy_that_terminated_tls_makes_the_socket_https(settings: Any, lab: Any) -> None:
    from podlife_site.asgi import application

    settings.ALLOWED_HOSTS = ["podlife.example.org"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

    async def run(proto: bytes) -> bool:
        ws = WebsocketCommunicator(
            application,
            PATH,
            headers=[
                (b"host", b"podlife.example.org"),
                (b"origin", b"https://podlife.example.org"),
                (b"x-forwarded-proto", proto),
            ],
        )
        connected, _ = await ws.connect()
        await ws.disconnect()
        return bool(connected)

    assert async_to_sync(run)(b"https") is True
    assert async_to_sync(run)(b"http") is False


def test_a_frame_that_is_not_json_gets_an_error_frame_and_the_socket_stays(admin_user: Any, lab: Any) -> None:
    async def run() -> list[dict[str, Any]]:
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), PATH)
        ws.scope["user"] = admin_user
        connected, _ = await ws.connect()
        assert connected
        frames = [await ws.receive_json_from()]  # hello
        await ws.send_to(text_data="this is not JSON")
        frames.append(await ws.receive_json_from(timeout=2))
        await ws.send_to(bytes_data=b"\x00\x01binary")
        frames.append(await ws.receive_json_from(timeout=2))
        await ws.send_json_to({"type": "ping"})  # still up and answering
        frames.append(await ws.receive_json_from(timeout=2))
        await ws.disconnect()
        return frames

    hello, not_json, binary, pong = async_to_sync(run)()
    assert hello["type"] == "hello"
    assert not_json["type"] == "error" and not_json["status"] == 400
    assert not_json["message"].startswith('frames to this socket are JSON text, e.g. {"type": "ping"}')
    assert binary["type"] == "error" and binary["status"] == 400 and "binary" in binary["message"]
    assert pong == {"type": "pong", "seq": None}
