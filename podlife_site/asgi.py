"""ASGI entry point: HTTP through Django, websockets through Channels.

The process starts as a web server (``tuning.start(Role.WEB)``: its allocator knobs,
podlife_site/tuning.py); outermost, ``IdleTrim`` returns the C allocator's free memory once nothing has
run for a moment. HTTP requests pass the concurrency limit first (podlife_site/overload.py: 503 with
Retry-After when the process is full), then the body limits (podlife_site/body_limits.py: an oversized or
unauthenticated upload is refused before Django reads its body). Websockets pass the Origin check (scheme, host and port:
podlife_site/websocket_origin.py) and the session auth before a consumer sees them; each consumer then
checks the user's read permission (dashboard/web/consumers.py).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")
# A web server process: the settings turn the database pool on by default (docs/deploy.md "Database connections").
os.environ.setdefault("PODLIFE_PROCESS", "web")
django_asgi_app = get_asgi_application()

# These need Django set up first.
from django.conf import settings  # noqa: E402

from podlife_site.env import require_secret_key  # noqa: E402

require_secret_key(settings.PODLIFE_HAS_SECRET_KEY)  # sessions and CSRF sign with it: no key, no web server

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from dashboard.web.routing import websocket_urlpatterns  # noqa: E402
from podlife_site import tuning  # noqa: E402
from podlife_site.body_limits import BodyLimits  # noqa: E402
from podlife_site.overload import ConcurrencyLimit  # noqa: E402
from podlife_site.websocket_deflate import forget_recent as forget_recent_deflated  # noqa: E402
from podlife_site.websocket_deflate import install as install_shared_deflate  # noqa: E402
from podlife_site.websocket_origin import SameOriginValidator  # noqa: E402

install_shared_deflate()  # uvicorn compresses a frame sent to many sockets once, not once per socket
tuning.start(tuning.Role.WEB)  # the web process's allocator knobs, and why: podlife_site/tuning.py

# Idle, the process drops the frames it kept compressed and hands its allocator's free memory back
# (podlife_site/tuning.py).
application = tuning.IdleTrim(
    ProtocolTypeRouter(
        {
            # The limit first: a request turned away costs no credential check, thread or connection.
            "http": ConcurrencyLimit(BodyLimits(django_asgi_app)),
            "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    ),
    releases=[forget_recent_deflated],
)
