"""permessage-deflate compressed once per frame, not once per socket (docs/performance-history.md "Load").

Every browser offers permessage-deflate and uvicorn accepts it, with context takeover: each socket keeps a
compressor of its own, so the same ``deltas`` frame sent to the 200 pages of a node was compressed 200
times (about half of the web process's CPU under bench/load.py). Here the server asks for
``server_no_context_takeover`` (RFC 7692 §7.1.1.1, which every client must accept): each message it sends
is compressed on its own, so the same text compresses to the same bytes on every socket, and the last few
are kept (``_recent``) to be reused by the next socket that sends them. What the browser sends is untouched
(it may keep its context). The price is the ratio: a message no longer refers back to the ones before it
(measured in docs/performance-history.md "Load").

``install()`` (called by podlife_site/asgi.py) makes uvicorn's websocket protocol negotiate it;
``uvicorn --ws-per-message-deflate=false`` still turns compression off for a deployment that prefers CPU
over bytes. Another ASGI server keeps its own.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections import OrderedDict
from typing import Any

from websockets.extensions.permessage_deflate import PerMessageDeflate, ServerPerMessageDeflateFactory
from websockets.frames import CTRL_OPCODES, Frame

log = logging.getLogger(__name__)
WINDOW_BITS = 12  # as uvicorn asks for: a 4 KiB window, 5 memLevel (the compressor's own memory)
COMPRESS_SETTINGS = {"memLevel": 5}
KEEP = 16  # messages whose compressed form is kept for the next socket sending them
SMALLEST = 256  # bytes: smaller messages are compressed per socket (cheap, and rarely sent to many)
_TAIL = b"\x00\x00\xff\xff"

_recent: OrderedDict[tuple[bytes, int, int], bytes] = OrderedDict()  # (data, bits, level) -> deflated
_recent_lock = threading.Lock()


def deflate(data: bytes, window_bits: int, settings: dict[str, Any]) -> bytes:
    """``data`` as one compressed message (RFC 7692 §7.2.1: the sync flush's empty tail removed)."""
    encoder = zlib.compressobj(wbits=-window_bits, **settings)
    out = encoder.compress(data) + encoder.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(_TAIL)
    return out[:-4]


class SharedDeflate(PerMessageDeflate):
    """permessage-deflate without server context takeover, a message compressed once for all sockets."""

    def encode(self, frame: Frame) -> Frame:
        if frame.opcode in CTRL_OPCODES or not frame.fin or len(frame.data) < SMALLEST:
            return super().encode(frame)  # fragments (never sent here) and small messages: as websockets does
        data = bytes(frame.data)
        key = (data, self.local_max_window_bits, int(self.compress_settings.get("level", -1)))
        with _recent_lock:
            deflated = _recent.get(key)
            if deflated is not None:
                _recent.move_to_end(key)
        if deflated is None:
            deflated = deflate(data, self.local_max_window_bits, self.compress_settings)
            with _recent_lock:
                _recent[key] = deflated
                while len(_recent) > KEEP:
                    _recent.popitem(last=False)
        return Frame(frame.opcode, deflated, frame.fin, True, frame.rsv2, frame.rsv3)


class SharedDeflateFactory(ServerPerMessageDeflateFactory):
    """uvicorn's permessage-deflate offer, with ``server_no_context_takeover`` and ``SharedDeflate``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.update(server_no_context_takeover=True)
        kwargs.setdefault("server_max_window_bits", WINDOW_BITS)
        kwargs.setdefault("client_max_window_bits", WINDOW_BITS)
        kwargs.setdefault("compress_settings", dict(COMPRESS_SETTINGS))
        super().__init__(**kwargs)

    def process_request_params(self, params: Any, accepted_extensions: Any) -> tuple[Any, PerMessageDeflate]:
        response, extension = super().process_request_params(params, accepted_extensions)
        assert extension.local_no_context_takeover  # server_no_context_takeover is always in the response
        return response, SharedDeflate(
            extension.remote_no_context_takeover,
            extension.local_no_context_takeover,
            extension.remote_max_window_bits,
            extension.local_max_window_bits,
            extension.compress_settings,
        )


def forget_recent() -> None:
    """Drop the kept compressed messages (podlife_site/tuning.py's IdleTrim calls it when the process goes
    idle): kept past the load that sent them, they and their keys would hold memory until the next frames
    push them out (docs/performance-history.md "Load")."""
    with _recent_lock:
        _recent.clear()


def install() -> None:
    """Make uvicorn's websocket protocol (the default, sans-I/O one; the legacy one too when it is loaded)
    offer ``SharedDeflateFactory``. They look the factory up when a socket connects, so this holds from
    then on."""
    import sys

    try:
        from uvicorn.protocols.websockets import websockets_sansio_impl
    except ImportError:  # another ASGI server, or uvicorn without websockets
        return
    # setattr: replacing a class another module imported is a patch by design, which mypy rightly refuses to
    # type as an assignment to a class.
    setattr(websockets_sansio_impl, "ServerPerMessageDeflateFactory", SharedDeflateFactory)  # noqa: B010
    legacy = sys.modules.get("uvicorn.protocols.websockets.websockets_impl")  # importing it warns
    if legacy is not None:
        legacy.ServerPerMessageDeflateFactory = SharedDeflateFactory  # type: ignore[attr-defined]
