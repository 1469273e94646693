"""A websocket server and client (websockets' sans-I/O protocols) past their handshake, no sockets: for
the permessage-deflate tests (tests/web/test_websocket_deflate.py) and bench/ws_deflate.py."""

from __future__ import annotations

import logging
from typing import Any

from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory
from websockets.http11 import Response
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

_QUIET = logging.getLogger("tests.wspair")  # not a line per connection
_QUIET.setLevel(logging.WARNING)


def connected_pair(server_extensions: list[Any]) -> tuple[ServerProtocol, ClientProtocol]:
    """A server offering ``server_extensions`` (as uvicorn's protocol does) and a client offering deflate
    as browsers do, after the handshake."""
    server = ServerProtocol(extensions=server_extensions, logger=_QUIET)
    client = ClientProtocol(
        parse_uri("ws://127.0.0.1/ws/"),
        extensions=[ClientPerMessageDeflateFactory(client_max_window_bits=True)],
    )
    client.send_request(client.connect())
    server.receive_data(b"".join(client.data_to_send()))
    server.send_response(server.accept(server.events_received()[0]))
    client.receive_data(b"".join(server.data_to_send()))
    if not isinstance(client.events_received()[0], Response):
        raise RuntimeError("the handshake failed")
    return server, client


def uvicorn_deflate(factory: Any) -> list[Any]:
    """``factory`` (a permessage-deflate factory class) made as uvicorn's sans-I/O protocol makes it."""
    return [factory(server_max_window_bits=12, client_max_window_bits=12, compress_settings={"memLevel": 5})]
