"""The websocket Origin check (issue #18, finding 10): scheme, host and port, not the host alone.

Channels' ``AllowedHostsOriginValidator`` accepts any Origin whose host is in ALLOWED_HOSTS, whatever its
scheme and port: ``http://podlife.example.org:8080`` (another service on the same host) could open a
socket with the user's cookies. A browser always sends Origin on a websocket handshake; it is accepted
only when it is

* the request's own origin: the socket's scheme (``wss`` → ``https``, ``ws`` → ``http``, or ``https``
  when ``SECURE_PROXY_SSL_HEADER`` says a proxy terminated TLS), the Host header's host, which must be in
  ALLOWED_HOSTS, and its port (the scheme's default when none is given); or
* one of CSRF_TRUSTED_ORIGINS, compared the same way (``https://*.example.org`` allows subdomains, as
  Django's CSRF check reads it).

Anything else, a missing Origin included, is refused at the handshake (HTTP 403).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


def parse_origin(text: str) -> Origin | None:
    """(scheme, host, port) of an origin such as ``https://podlife.example.org:8443``; None if malformed."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def own_origin(scope: dict[str, Any], headers: dict[str, str]) -> Origin | None:
    """The origin the socket was opened on, if its Host is one podlife serves (ALLOWED_HOSTS)."""
    secure = scope.get("scheme") in ("wss", "https")
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        header, value = proxy
        name = header.removeprefix("HTTP_").replace("_", "-").lower()
        secure = secure or headers.get(name, "").split(",")[0].strip() == value
    host, port = split_domain_port(headers.get("host", ""))
    if not host or not validate_host(host, settings.ALLOWED_HOSTS):
        return None
    scheme = "https" if secure else "http"
    try:
        number = int(port) if port else DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    return scheme, host.lower().strip("[]"), number


def trusted(origin: Origin) -> bool:
    """``origin`` is one of CSRF_TRUSTED_ORIGINS (scheme and port exact, ``*.`` for subdomains)."""
    scheme, host, port = origin
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        wildcard = "://*." in entry
        allowed = parse_origin(entry.replace("://*.", "://", 1))
        if allowed is None or allowed[0] != scheme or allowed[2] != port:
            continue
        if host == allowed[1] or (wildcard and host.endswith("." + allowed[1])):
            return True
    return False


def origin_allowed(scope: dict[str, Any]) -> bool:
    headers = _headers(scope)
    origin = parse_origin(headers["origin"]) if "origin" in headers else None
    if origin is None:
        return False
    return origin == own_origin(scope, headers) or trusted(origin)


class SameOriginValidator:
    """ASGI middleware for websockets: the application runs only for an allowed Origin."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            raise ValueError("SameOriginValidator guards websocket connections only")
        if origin_allowed(scope):
            await self.application(scope, receive, send)
        else:
            await WebsocketDenier()(scope, receive, send)
