"""permessage-deflate compressed once per frame (podlife_site/websocket_deflate.py): negotiated as a
browser offers it, read back by a standard client, and the same frame to many sockets compressed once."""

from __future__ import annotations

from typing import Any

import orjson
from websockets.frames import Opcode

from podlife_site import websocket_deflate
from tests.wspair import connected_pair, uvicorn_deflate


def _pair() -> tuple[Any, Any]:
    return connected_pair(uvicorn_deflate(websocket_deflate.SharedDeflateFactory))


def _frame(n: int) -> str:
    pods = [{"pod": {"uid": f"u-{i}", "name": f"web-{i}", "node": "node-a"}, "lanes": {}} for i in range(n)]
    return orjson.dumps({"type": "deltas", "seq": n, "pods": pods}).decode()


def test_a_frame_to_many_sockets_is_compressed_once_and_reads_back(monkeypatch: Any) -> None:
    """GIVEN three sockets that negotiated deflate as a browser offers it WHEN the same frame goes to each,
    twice, then another frame THEN each client reads them back as sent, the server said
    server_no_context_takeover, every socket got the same bytes, and the server compressed each distinct
    frame once."""
    compressed: list[int] = []
    original = websocket_deflate.deflate

    def counted(data: bytes, bits: int, settings: dict[str, Any]) -> bytes:
        compressed.append(len(data))
        return original(data, bits, settings)

    monkeypatch.setattr(websocket_deflate, "deflate", counted)
    websocket_deflate._recent.clear()
    pairs = [_pair() for _ in range(3)]
    first, second = _frame(40), _frame(41)
    wire: list[bytes] = []
    for text in (first, first, second):
        for server, client in pairs:
            assert isinstance(server.extensions[0], websocket_deflate.SharedDeflate)
            assert client.extensions[0].remote_no_context_takeover  # the client was told: per message
            server.send_text(text.encode())
            data = b"".join(server.data_to_send())
            wire.append(data)
            client.receive_data(data)
            (frame,) = client.events_received()
            assert frame.opcode is Opcode.TEXT and frame.data.decode() == text
    assert len(set(wire[:6])) == 1 and len(wire[0]) < len(first.encode()) / 3
    assert compressed == [len(first.encode()), len(second.encode())]


def test_the_kept_compressed_frames_are_dropped_when_asked() -> None:
    """GIVEN a frame sent compressed (and kept for the next socket) WHEN the process goes idle
    (``forget_recent``, podlife_site/tuning.py) THEN nothing of it is kept, and the next send still
    reads back."""
    websocket_deflate._recent.clear()
    (server, client) = _pair()
    text = _frame(30)
    server.send_text(text.encode())
    client.receive_data(b"".join(server.data_to_send()))
    assert len(websocket_deflate._recent) == 1
    websocket_deflate.forget_recent()
    assert len(websocket_deflate._recent) == 0
    server.send_text(text.encode())
    client.receive_data(b"".join(server.data_to_send()))
    assert [f.data.decode() for f in client.events_received()] == [text, text]


def test_small_frames_are_compressed_per_socket_and_read_back() -> None:
    server, client = _pair()
    for text in ('{"type":"pong","seq":1}', '{"type":"pong","seq":2}'):
        server.send_text(text.encode())
        client.receive_data(b"".join(server.data_to_send()))
        (frame,) = client.events_received()
        assert frame.data.decode() == text


def test_the_web_server_as_deployed_negotiates_it() -> None:
    """GIVEN ``uvicorn podlife_site.asgi:application`` as deployed WHEN a client offers deflate as a
    browser does THEN the server accepts it without server context takeover (the shared compression), and
    the page's first frame reads back."""
    import asyncio

    from websockets.asyncio.client import connect

    from tests.security.conftest import Served, deployment_env, strong_key

    dead = "127.0.0.1:9"  # the socket of an anonymous user reads no database
    server = Served(deployment_env(SECRET_KEY=strong_key(), DATABASE_URL=f"postgres://x@{dead}/x"))

    async def run() -> tuple[Any, dict[str, Any]]:
        url = server.url.replace("http://", "ws://") + "/ws/v1/nodes/lab/node-a/"
        async with connect(url, origin=server.url, compression="deflate") as socket:  # type: ignore[arg-type]
            return socket.protocol.extensions, orjson.loads(await socket.recv())

    try:
        extensions, frame = asyncio.run(run())
    finally:
        server.stop()
    assert len(extensions) == 1 and extensions[0].remote_no_context_takeover
    assert frame["type"] == "error" and frame["status"] == 401
