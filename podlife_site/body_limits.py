"""Refuse a request body before it is read (issue #18, finding 7): an ASGI middleware in front of Django.

Django's ASGI handler reads a whole request body (spooled to a temporary file) before any middleware or
view runs, so a view's own limit comes too late: a 1 GiB POST without a token was written to disk in full
before its 401. This middleware sees the request first and, per route:

* refuses a ``Content-Length`` over the route's limit with 413 without reading a byte of the body;
* refuses a method the route does not take (405, with ``Allow``) whatever its body: an anonymous
  ``PUT`` of 8 MiB to an ingest route is answered before a byte of it is read (issue #35);
* refuses a request without valid credentials where the route needs them (ingest token on ``/v1/traces``,
  ``/ingest/v1/kubelet-logs`` and ``/ingest/v1/audit``, a staff user's session or API token on ``POST /import``) with 401 / 403,
  again before reading;
* counts a body without ``Content-Length`` (chunked) as Django reads it and stops it one chunk past the
  limit: Django sees the client as gone and answers nothing, this middleware answers 413.

Limits (settings, docs/configuration.md): the ingest endpoints ``PODLIFE_INGEST_MAX_BODY_BYTES``; the
import ``PODLIFE_IMPORT_MAX_BYTES`` plus room for the multipart form; log-in forms
``PODLIFE_FORM_MAX_BODY_BYTES``; everything else ``PODLIFE_MAX_BODY_BYTES``. Refusals name the limit and
its setting. The views keep their own checks (a limit after decompression, the token's cluster): this
only makes sure nothing big is read on the way to them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Final

import orjson
from channels.db import DatabaseSyncToAsync
from django.conf import settings

from podlife_site.asgi_types import ASGIApp, Message, Receive, Scope, Send
from podlife_site.overload import backend_unavailable, retry_after_s

log = logging.getLogger(__name__)

MULTIPART_ROOM: Final = 1024 * 1024  # form boundaries and the name field around an uploaded bundle
UNAUTHENTICATED: Final = 16  # google.rpc.Code


class Refusal(Exception):
    """A request refused before its body is read: HTTP ``status`` and a sentence saying why."""

    def __init__(self, status: int, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass(frozen=True)
class Route:
    """How one path is guarded: its body limit (bytes, and the setting that says so), who may send a body
    (a check that raises Refusal; None: anyone), the methods its view answers (None: any; another is
    refused with 405 before its body), and how refusals are worded (``text``, ``json``, ``otlp``)."""

    setting: str
    extra: int = 0
    check: Callable[[Scope, dict[str, str]], None] | None = None
    style: str = "text"
    methods: frozenset[str] | None = None

    def limit(self) -> int:
        return int(getattr(settings, self.setting)) + self.extra


# --- credentials checked before the body (run in a worker thread: they read the database) --------------------
def _ingest_token(scope: Scope, headers: dict[str, str]) -> None:
    from collectors.models import BadIngestToken, IngestToken

    if scope["method"] != "POST":
        return  # the view answers 405; there is no body worth reading
    try:
        IngestToken.authenticate(headers.get("authorization"))
    except BadIngestToken as exc:
        raise Refusal(401, str(exc), headers={"WWW-Authenticate": "Bearer"}) from None


def _staff_user(scope: Scope, headers: dict[str, str]) -> None:
    """``POST /import`` creates a cluster: staff only (dashboard/web/export_views.py says the same later)."""
    if scope["method"] != "POST":
        return
    from importlib import import_module

    from django.contrib.auth import SESSION_KEY, get_user
    from django.contrib.sessions.backends.base import SessionBase

    from dashboard.web.access import BadToken, user_from_bearer

    header = headers.get("authorization")
    if header:
        try:
            user = user_from_bearer(header)
        except BadToken as exc:
            raise Refusal(401, str(exc), headers={"WWW-Authenticate": 'Bearer realm="podlife"'}) from None
    else:
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except CookieError:  # a malformed header reads as no session
            cookies = SimpleCookie()
        morsel = cookies.get(settings.SESSION_COOKIE_NAME)
        store: SessionBase = import_module(settings.SESSION_ENGINE).SessionStore(
            morsel.value if morsel else None
        )
        if SESSION_KEY not in store:
            raise Refusal(401, "log in (or send 'Authorization: Bearer TOKEN') to import a bundle")

        class _Request:  # what django.contrib.auth.get_user reads: the session
            session = store

        user = get_user(_Request())  # type: ignore[arg-type]
    if not getattr(user, "is_authenticated", False):
        raise Refusal(401, "log in (or send 'Authorization: Bearer TOKEN') to import a bundle")
    if not (user.is_staff or user.is_superuser):
        raise Refusal(403, "importing a bundle creates a cluster: staff only")


def _unavailable_refused(
    check: Callable[[Scope, dict[str, str]], None],
) -> Callable[[Scope, dict[str, str]], None]:
    """``check``, with the database or Redis away answered 503 and Retry-After (issue #35: a token looked
    up on a connection ``pg_terminate_backend`` had ended raised outside Django, a 500 that OTLP exporters
    do not retry). Anything else still goes up."""

    def guarded(scope: Scope, headers: dict[str, str]) -> None:
        try:
            check(scope, headers)
        except Refusal:
            raise
        except Exception as exc:  # only a database or Redis outage is answered here; the rest is re-raised
            away = backend_unavailable(exc)
            if away is None:
                raise
            log.warning("%s %s: the %s is unavailable: %s", scope["method"], scope.get("path"), away, exc)
            seconds = str(retry_after_s())
            raise Refusal(
                503, f"the {away} is unavailable; retry in {seconds} s", headers={"Retry-After": seconds}
            ) from None

    return guarded


POST_ONLY: Final = frozenset({"POST"})
INGEST: Final = Route("PODLIFE_INGEST_MAX_BODY_BYTES", check=_ingest_token, style="json", methods=POST_ONLY)
ROUTES: Final[dict[str, Route]] = {
    "/v1/traces": Route(
        "PODLIFE_INGEST_MAX_BODY_BYTES", check=_ingest_token, style="otlp", methods=POST_ONLY
    ),
    "/ingest/v1/kubelet-logs": INGEST,
    "/ingest/v1/audit": INGEST,
    "/import": Route(
        "PODLIFE_IMPORT_MAX_BYTES",
        extra=MULTIPART_ROOM,
        check=_staff_user,
        style="json",
        methods=frozenset({"GET", "POST"}),  # the form, and the upload (dashboard/web/export_views.py)
    ),
    "/accounts/login/": Route("PODLIFE_FORM_MAX_BODY_BYTES"),
    "/admin/login/": Route("PODLIFE_FORM_MAX_BODY_BYTES"),
}
DEFAULT: Final = Route("PODLIFE_MAX_BODY_BYTES")


def route_for(path: str) -> Route:
    return ROUTES.get(path, DEFAULT)


# --- refusals ---------------------------------------------------------------------------------------------------
def _refusal_body(route: Route, refusal: Refusal, headers: dict[str, str]) -> tuple[bytes, str]:
    if route.style == "otlp":  # OTLP/HTTP: a google.rpc.Status in the request's encoding
        from collectors.parsers import otlp

        media = headers.get("content-type", "").split(";")[0].strip().lower()
        json_reply = media == "application/json"
        codes = {
            401: UNAUTHENTICATED,
            405: otlp.RpcCode.UNIMPLEMENTED,
            413: otlp.RpcCode.RESOURCE_EXHAUSTED,
            503: otlp.RpcCode.UNAVAILABLE,
        }
        code = codes.get(refusal.status, otlp.RpcCode.INVALID_ARGUMENT)
        body = otlp.encode_response(
            otlp.rpc_status(code, refusal.message), "json" if json_reply else "protobuf"
        )
        return body, "application/json" if json_reply else "application/x-protobuf"
    if route.style == "json":
        return orjson.dumps({"error": refusal.message}), "application/json"
    return (refusal.message + "\n").encode(), "text/plain; charset=utf-8"


async def _send_refusal(send: Send, route: Route, refusal: Refusal, headers: dict[str, str]) -> None:
    body, content_type = _refusal_body(route, refusal, headers)
    out = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),  # the body was not read: this connection cannot carry another request
    ]
    out += [(k.lower().encode(), v.encode("latin-1")) for k, v in refusal.headers.items()]
    await send({"type": "http.response.start", "status": refusal.status, "headers": out})
    await send({"type": "http.response.body", "body": body})


def _too_large(size: int | None, route: Route) -> Refusal:
    limit = route.limit()
    told = f"the body is {size} bytes" if size is not None else f"the body is over {limit} bytes"
    return Refusal(413, f"{told}; at most {limit} are accepted here ({route.setting})")


# --- the middleware ---------------------------------------------------------------------------------------------
class BodyLimits:
    """ASGI middleware: wraps the HTTP application (podlife_site/asgi.py); websockets pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = route_for(scope.get("path", ""))
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        try:
            self._check_method(route, scope["method"])  # first: the view would answer 405 to any body
            if route.check is not None:  # then: without credentials no body is worth reading, large or not
                # A worker thread that closes stale connections before and after (as consumers do).
                await DatabaseSyncToAsync(_unavailable_refused(route.check), thread_sensitive=False)(
                    scope, headers
                )
            self._check_length(route, headers)
        except Refusal as refusal:
            log.info("refused %s %s before its body: %s", scope["method"], scope.get("path"), refusal.message)
            await _send_refusal(send, route, refusal, headers)
            return
        await self._run_capped(route, headers, scope, receive, send)

    @staticmethod
    def _check_method(route: Route, method: str) -> None:
        if route.methods is not None and method not in route.methods:
            allowed = ", ".join(sorted(route.methods))
            raise Refusal(405, f"{method} is not allowed: {allowed}", headers={"Allow": allowed})

    @staticmethod
    def _check_length(route: Route, headers: dict[str, str]) -> None:
        declared = headers.get("content-length")
        if declared is None:
            return
        try:
            size = int(declared)
        except ValueError:
            raise Refusal(400, f"Content-Length {declared!r} is not a number") from None
        if size > route.limit():
            raise _too_large(size, route)

    async def _run_capped(
        self, route: Route, headers: dict[str, str], scope: Scope, receive: Receive, send: Send
    ) -> None:
        limit = route.limit()
        read = 0
        over = False
        started = False

        async def capped_receive() -> Message:
            nonlocal read, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > limit:
                    # Django stops reading at a disconnect and answers nothing; the 413 is ours to send.
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, capped_receive, tracking_send)
        if over and not started:
            log.info("refused %s %s: body over %d bytes", scope["method"], scope.get("path"), limit)
            await _send_refusal(send, route, _too_large(None, route), headers)
