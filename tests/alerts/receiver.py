"""A real HTTP receiver on loopback for the webhook tests: records every request, answers with the
status a test sets, and can be stopped and started again on the same port (a receiver that is down,
then comes back)."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict:
        return orjson.loads(self.body)


@dataclass
class Receiver:
    port: int = 0
    host: str = "127.0.0.1"
    status: int = 200
    retry_after: str | None = None
    reply_body: bytes = b"ok"
    reply_headers: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/hooks/podlife"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.received.append(Received(self.path, dict(self.headers.items()), body))
                    status, retry_after = receiver.status, receiver.retry_after
                    reply, extra = receiver.reply_body, dict(receiver.reply_headers)
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            allow_reuse_address = True

        self._server = Server((self.host, self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="webhook-receiver", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def messages(self) -> list[dict]:
        with self._lock:
            return [r.json() for r in self.received]
