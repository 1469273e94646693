"""A bounded database footprint under load (issue #18, finding 4): 503 with Retry-After, never 500.

Before, each HTTP request ran in a thread of its own with a database connection of its own, so 50 REST
clients (or 200 live pages refetching at once) opened as many PostgreSQL connections as requests; past the
server's ``max_connections`` every extra request answered 500 ("too many clients") and each of the threads
kept its memory. Three pieces bound it now:

* psycopg's pool through Django's backend (``PODLIFE_DB_POOL_MAX`` per process, on by default on
  PostgreSQL; podlife_site/settings.py): connections a process holds, whatever the traffic;
* ``ConcurrencyLimit``, an ASGI middleware in front of Django: at most ``PODLIFE_HTTP_MAX_CONCURRENT``
  requests run at once (fewer than the pool, so a running request always finds a connection); up to
  ``PODLIFE_HTTP_MAX_WAITING`` more wait their turn for ``PODLIFE_HTTP_WAIT_S``; the rest get 503 at once,
  before Django, a thread or a connection is spent on them;
* ``DatabaseBusyMiddleware`` and the 500 handler: a request that still cannot get a connection (the pool's
  timeout, the server's own connection limit) answers 503 too.

Every 503 carries ``Retry-After`` between ``PODLIFE_RETRY_AFTER_S`` and twice that, drawn at random, so a
herd that was turned away does not come back in one piece. Probes and static files are never limited:
``/healthz`` touches nothing, ``/readyz`` must say "ready" while the site is merely busy (a readiness
probe failing under load would take every web pod out of the Service at once), and static files are
served from memory by whitenoise.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Final

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

from podlife_site.asgi_types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)


UNLIMITED_PREFIXES: Final = ("/static/",)
UNLIMITED_PATHS: Final = frozenset({"/healthz", "/readyz"})
JSON_PREFIXES: Final = ("/api/", "/ingest/", "/v1/", "/export")
TOO_MANY_CONNECTIONS: Final = "53300"  # PostgreSQL's too_many_connections (server or role/database limit)
BUSY = "podlife is busy"


def retry_after_s() -> int:
    """Seconds a refused client should wait: ``PODLIFE_RETRY_AFTER_S`` to twice that, at random."""
    base = int(settings.PODLIFE_RETRY_AFTER_S)
    return random.randint(base, 2 * base)  # spreading retries, not a secret


def database_busy(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) says the database has no connection for us now: the
    pool's timeout, or PostgreSQL refusing a connection over its limit (SQLSTATE 53300)."""
    seen = 0
    while exc is not None and seen < 8:
        if type(exc).__name__ == "PoolTimeout" and type(exc).__module__.startswith("psycopg_pool"):
            return True
        if getattr(exc, "sqlstate", None) == TOO_MANY_CONNECTIONS:
            return True
        if isinstance(exc, (OperationalError, InterfaceError)) or type(exc).__module__.startswith("psycopg"):
            # A connection refused at start-up carries no SQLSTATE in psycopg: only the server's words.
            text = str(exc)
            if (
                "too many clients" in text
                or "too many connections" in text
                or "remaining connection slots" in text
            ):
                return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def backend_unavailable(exc: BaseException | None) -> str | None:
    """What is away when ``exc`` (or what it was raised from) says the database or Redis cannot be reached
    now (a connection lost, refused or terminated, ``pg_terminate_backend``): ``"database"`` or
    ``"redis"``; None for any other error. Such a request is answered 503 with Retry-After, never 500
    (issue #35): its sender retries it, where a 500 makes OTLP exporters drop their spans."""
    import redis.exceptions

    seen = 0
    while exc is not None and seen < 8:
        if database_busy(exc):
            return "database"
        if isinstance(exc, (OperationalError, InterfaceError)):
            return "database"
        module = type(exc).__module__
        if module.startswith("psycopg") and type(exc).__name__ in ("OperationalError", "InterfaceError"):
            return "database"
        if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            return "redis"
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _503(path: str, message: str, seconds: int) -> HttpResponse:
    """A 503 with Retry-After: JSON under the API and ingest routes, text elsewhere."""
    response: HttpResponse
    if path.startswith(JSON_PREFIXES):
        response = JsonResponse({"error": {"status": 503, "message": message, "param": None}}, status=503)
    else:
        response = HttpResponse(message + "\n", status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(seconds)
    return response


def unavailable_response(path: str, what: str) -> HttpResponse:
    """The 503 for a request that met the database or Redis away."""
    seconds = retry_after_s()
    return _503(path, f"the {what} is unavailable; retry in {seconds} s", seconds)


def busy_response(path: str, why: str) -> HttpResponse:
    """The 503 for a request turned away because the server is busy."""
    seconds = retry_after_s()
    return _503(path, f"{BUSY} ({why}); retry in {seconds} s", seconds)


class DatabaseBusyMiddleware:
    """Django middleware: a view that raised because no connection was to be had, or because the database
    or Redis is away, answers 503."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if database_busy(exception):
            log.warning("503 for %s %s: no database connection (%s)", request.method, request.path, exception)
            return busy_response(request.path, "no database connection free")
        away = backend_unavailable(exception)
        if away is None:
            return None
        log.warning(
            "503 for %s %s: the %s is unavailable (%s)", request.method, request.path, away, exception
        )
        return unavailable_response(request.path, away)


class ConcurrencyLimit:
    """ASGI middleware (podlife_site/asgi.py, outermost for HTTP): at most ``limit`` requests inside the
    application at once, ``waiting`` more queued for ``wait_s``; anything beyond gets 503 before it costs a
    thread or a connection. ``limit`` 0 turns it off. Websockets pass through (their database work is one
    handshake, run in the one database thread of the consumer layer)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit: int | None = None,
        waiting: int | None = None,
        wait_s: float | None = None,
    ) -> None:
        self.app = app
        self.limit = int(settings.PODLIFE_HTTP_MAX_CONCURRENT if limit is None else limit)
        self.max_waiting = int(settings.PODLIFE_HTTP_MAX_WAITING if waiting is None else waiting)
        self.wait_s = float(settings.PODLIFE_HTTP_WAIT_S if wait_s is None else wait_s)
        self.running = 0
        self.waiting = 0
        self.refused = 0  # counted for /metrics and the load test
        self._turns: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._turns is None or self._loop is not loop:  # one per event loop (tests run several)
            self._turns, self._loop = asyncio.Semaphore(self.limit), loop
        return self._turns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or self.limit <= 0
            or path in UNLIMITED_PATHS
            or path.startswith(UNLIMITED_PREFIXES)
        ):
            await self.app(scope, receive, send)
            return
        turns = self._semaphore()
        if turns.locked():
            if self.waiting >= self.max_waiting:
                await self._refuse(scope, send, f"{self.limit} requests running, {self.waiting} waiting")
                return
            self.waiting += 1
            try:
                async with asyncio.timeout(self.wait_s):  # wait_for could lose a turn won at the deadline
                    await turns.acquire()
            except TimeoutError:
                await self._refuse(scope, send, f"no turn within {self.wait_s:g} s")
                return
            finally:
                self.waiting -= 1
        else:
            await turns.acquire()
        self.running += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.running -= 1
            turns.release()

    async def _refuse(self, scope: Scope, send: Send, why: str) -> None:
        self.refused += 1
        path = scope.get("path", "")
        log.warning("503 for %s %s before Django: %s", scope.get("method"), path, why)
        response = busy_response(path, why)
        headers = [
            (b"content-type", response["Content-Type"].encode()),
            (b"content-length", str(len(response.content)).encode()),
            (b"retry-after", response["Retry-After"].encode()),
            (b"connection", b"close"),  # the body (if any) was not read
        ]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": response.content})
