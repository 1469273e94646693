"""Error answers that never carry settings: the 500 handler (JSON under /api/, the plain page elsewhere) and
the log-in lockout page of django-axes (429 with Retry-After).

Django renders ``templates/404.html``, ``403.html``, ``400.html`` and ``500.html`` itself when DEBUG is
off (the default, docs/security.md); with DEBUG on it shows its debug pages instead, which list settings.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

API_PREFIX = "/api/"
SERVER_ERROR = "podlife could not answer this request; the error is in the server's log"


def server_error(request: HttpRequest, template_name: str = defaults.ERROR_500_TEMPLATE_NAME) -> HttpResponse:
    """``handler500``: the REST API keeps its JSON error shape; pages get ``500.html`` (no context).

    A failure to get a database connection outside a view (a session saved by a middleware, say) is not a
    server error but an overload: 503 with Retry-After, as ``DatabaseBusyMiddleware`` answers for views."""
    from podlife_site.overload import backend_unavailable, busy_response, database_busy, unavailable_response

    if database_busy(sys.exc_info()[1]):
        return busy_response(request.path, "no database connection free")
    away = backend_unavailable(sys.exc_info()[1])
    if away is not None:  # the database or Redis away (issue #35): the client retries a 503
        return unavailable_response(request.path, away)
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"error": {"status": 500, "message": SERVER_ERROR, "param": None}}, status=500)
    return defaults.server_error(request, template_name)


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: Any = None
) -> HttpResponse:
    """``AXES_LOCKOUT_CALLABLE``: the lockout page, 429, with Retry-After (seconds of the cool-off)."""
    from axes.helpers import get_cool_off, get_failure_limit

    cool_off = get_cool_off(request)
    seconds = math.ceil(cool_off.total_seconds()) if cool_off else None
    context = {
        "failure_limit": get_failure_limit(request, credentials),
        "cooloff_minutes": math.ceil(seconds / 60) if seconds else None,
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    if seconds:
        response["Retry-After"] = str(seconds)
    return response
