"""The ASGI callables' types, shared by the site's ASGI middlewares (body limits, the concurrency limit,
the idle trim). A module of its own: it imports nothing of the site, so any middleware can use it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Scope = dict[str, Any]
Message = Mapping[str, Any]  # read only: Django sends and receives Mappings
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
