"""Bodies are refused before they are read (issue #18, finding 7), measured against uvicorn over a socket.

A client posts a body it declares as 1 GiB (or streams one chunked, without end) and keeps sending until
the server answers or closes. The server side counts the body bytes the ASGI application was handed
before it started its answer: a refused body must not be read at all (0 bytes), a chunked body with a
valid token at most one read past the limit. The client stops at 64 MiB: a server that reads that much
without answering has failed (it would read the whole GiB).
"""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from collectors.models import IngestToken
from tests.web.conftest import held_socket
from timelines.models import Cluster

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024
GIB = 1024 * MIB
CLIENT_CAP = 64 * MIB
LIMIT = 1 * MIB  # PODLIFE_INGEST_MAX_BODY_BYTES for these tests


@dataclass
class Seen:
    """What the application was handed for one request, as the server side counts it."""

    path: str
    body_bytes: int = 0
    status: int | None = None
    body_bytes_at_answer: int | None = None


@dataclass
class Counting:
    """ASGI wrapper around podlife's application: counts body bytes handed to it, per request."""

    app: Any
    seen: list[Seen] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        record = Seen(scope["path"])
        self.seen.append(record)

        async def counted_receive() -> Any:
            message = await receive()
            record.body_bytes += len(message.get("body", b""))
            return message

        async def watched_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                record.status, record.body_bytes_at_answer = message["status"], record.body_bytes
            await send(message)

        await self.app(scope, counted_receive, watched_send)


class Server:
    def __init__(self) -> None:
        import uvicorn

        from podlife_site.asgi import application

        self.app = Counting(application)
        self.socket = held_socket()
        self.port = self.socket.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        )
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.socket])), daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


@pytest.fixture
def server(settings: Any) -> Iterator[Server]:
    settings.PODLIFE_INGEST_MAX_BODY_BYTES = LIMIT
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def token(db: Any) -> str:
    _, text = IngestToken.issue(Cluster.objects.create(name="lab"))
    return text


def post(port: int, path: str, headers: dict[str, str], *, declared: int | None, method: str = "POST") -> int:
    """POST (or ``method``) ``path`` with a body declared as ``declared`` bytes (None: chunked, without
    end) and send until the server answers or closes the connection; returns the body bytes the client
    got out."""
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    head.append(f"Content-Length: {declared}" if declared is not None else "Transfer-Encoding: chunked")
    payload = b"I0607 06:54:41.100000    2345 kubelet.go:1] filler line of a big body\n" * 1000
    frame = payload if declared is not None else f"{len(payload):x}\r\n".encode() + payload + b"\r\n"
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sock.setblocking(False)
        sent, pending = 0, b""
        while sent < CLIENT_CAP:
            readable, writable, _ = select.select([sock], [sock], [], 5.0)
            if readable:
                return sent  # the answer (or the close) is there
            if not writable:
                continue
            pending = pending or frame
            try:
                n = sock.send(pending)
            except (BrokenPipeError, ConnectionResetError):
                return sent
            except BlockingIOError:
                continue
            sent += n
            pending = pending[n:]
        raise AssertionError(f"the server read {sent} bytes of {path} without answering")
    finally:
        sock.close()


def answered(server: Server, path: str) -> Seen:
    deadline = time.monotonic() + 10
    while True:
        done = [s for s in server.app.seen if s.path == path and s.status is not None]
        if done:
            return done[-1]
        assert time.monotonic() < deadline, f"no answer recorded for {path}"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("path", "headers", "declared", "status"),
    [
        ("/v1/traces", {"Content-Type": "application/x-protobuf"}, GIB, 401),
        ("/ingest/v1/kubelet-logs?cluster=lab&node=n", {"Content-Type": "text/plain"}, GIB, 401),
        ("/ingest/v1/audit", {"Content-Type": "application/json"}, GIB, 401),
        ("/accounts/login/", {"Content-Type": "application/x-www-form-urlencoded"}, GIB, 413),
        ("/import", {"Content-Type": "multipart/form-data; boundary=x"}, 200 * MIB, 401),
        ("/v1/traces", {"Content-Type": "application/x-protobuf"}, None, 401),
        ("/accounts/login/", {"Content-Type": "application/x-www-form-urlencoded"}, None, 413),
    ],
    ids=[
        "otlp-1GiB-no-token",
        "logs-1GiB-no-token",
        "audit-1GiB-no-token",
        "login-1GiB",
        "import-anonymous",
        "otlp-chunked-no-token",
        "login-chunked",
    ],
)
def test_refused_before_a_byte_of_the_body_is_read(
    server: Server, path: str, headers: dict[str, str], declared: int | None, status: int
) -> None:
    post(server.port, path, headers, declared=declared)
    seen = answered(server, path.split("?")[0])
    if path == "/accounts/login/" and declared is None:  # no token to ask for: stopped at the form limit
        assert seen.status == 413 and 64 * 1024 < seen.body_bytes_at_answer <= 64 * 1024 + 128 * 1024
        return
    assert (seen.status, seen.body_bytes_at_answer) == (status, 0)


def test_an_oversized_content_length_is_refused_unread_even_with_a_valid_token(
    server: Server, token: str
) -> None:
    path = "/ingest/v1/kubelet-logs?cluster=lab&node=n"
    post(server.port, path, {"Authorization": f"Bearer {token}", "Content-Type": "text/plain"}, declared=GIB)
    seen = answered(server, "/ingest/v1/kubelet-logs")
    assert (seen.status, seen.body_bytes_at_answer) == (413, 0)


def test_a_chunked_body_with_a_valid_token_stops_just_past_the_limit(server: Server, token: str) -> None:
    path = "/ingest/v1/kubelet-logs?cluster=lab&node=n"
    post(server.port, path, {"Authorization": f"Bearer {token}", "Content-Type": "text/plain"}, declared=None)
    seen = answered(server, "/ingest/v1/kubelet-logs")
    assert seen.status == 413
    assert LIMIT < seen.body_bytes_at_answer <= LIMIT + 256 * 1024  # one read past the limit, no more


def test_refusals_say_why_in_the_routes_own_format(server: Server, token: str) -> None:
    import requests

    from collectors.parsers import otlp

    base = f"http://127.0.0.1:{server.port}"
    logs = requests.post(f"{base}/ingest/v1/kubelet-logs?cluster=lab&node=n", data=b"x" * (LIMIT + 1),
                         headers={"Authorization": f"Bearer {token}", "Content-Type": "text/plain"}, timeout=30)  # fmt: skip
    assert logs.status_code == 413
    assert logs.json()["error"] == (
        f"the body is {LIMIT + 1} bytes; at most {LIMIT} are accepted here (PODLIFE_INGEST_MAX_BODY_BYTES)"
    )
    traces = requests.post(
        f"{base}/v1/traces", data=b"\x00", headers={"Content-Type": "application/json"}, timeout=30
    )
    assert traces.status_code == 401 and traces.headers["WWW-Authenticate"] == "Bearer"
    assert traces.headers["Content-Type"] == "application/json"
    assert "missing Authorization header" in traces.json()["message"]
    status = otlp.RpcStatus()
    status.ParseFromString(requests.post(f"{base}/v1/traces", data=b"\x00", timeout=30,
                                         headers={"Content-Type": "application/x-protobuf"}).content)  # fmt: skip
    assert status.code == 16 and "missing Authorization header" in status.message
    ok = requests.post(
        f"{base}/ingest/v1/kubelet-logs?cluster=lab&node=n",
        data=b'I0607 06:54:41.100000    2345 kubelet.go:1] "an ordinary line"\n',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "text/plain"},
        timeout=30,
    )
    assert ok.status_code == 200 and ok.json()["lines_read"] == 1  # a body within the limit goes through


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "GET", "OPTIONS"])
@pytest.mark.parametrize(
    "path", ["/v1/traces", "/ingest/v1/kubelet-logs?cluster=lab&node=n", "/ingest/v1/audit", "/import"]
)
def test_a_method_the_route_does_not_take_is_refused_before_its_body(
    server: Server, path: str, method: str
) -> None:
    """Issue #35: an anonymous PUT/PATCH/DELETE of 8 MiB to an ingest route was read in full before its
    405. Every method but the route's own is refused unread (``/import`` takes GET, its form, too)."""
    if path == "/import" and method == "GET":
        return  # the form page: no body, and the view's own answer (401/redirect for anonymous)
    post(server.port, path, {"Content-Type": "application/octet-stream"}, declared=8 * MIB, method=method)
    seen = answered(server, path.split("?")[0])
    assert (seen.status, seen.body_bytes_at_answer) == (405, 0)


def test_a_405_names_the_methods_the_route_takes(server: Server) -> None:
    import requests

    base = f"http://127.0.0.1:{server.port}"
    answer = requests.put(f"{base}/ingest/v1/audit", data=b"x" * 1024, timeout=30)
    assert (answer.status_code, answer.headers["Allow"]) == (405, "POST")
    assert answer.json()["error"] == "PUT is not allowed: POST"
    answer = requests.delete(f"{base}/import", timeout=30)
    assert (answer.status_code, answer.headers["Allow"]) == (405, "GET, POST")
