"""ASGI entry point: HTTP through Django, websockets through Channels.

Websockets pass the Origin check (ALLOWED_HOSTS) and the session auth before a consumer sees them; each
consumer then checks the user's read permission (timelines/web/consumers.py).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")
django_asgi_app = get_asgi_application()

# These need Django set up first.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from timelines.web.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
