"""``/metrics``: collector health, open findings and webhook health in the Prometheus text format."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from alerts.metrics import FindingsMetrics
from dashboard.collector_health import CollectorHealth

_registry = CollectorRegistry(auto_describe=False)
_registry.register(CollectorHealth())
_registry.register(FindingsMetrics())  # findings and webhook health, for Alertmanager (docs/deploy.md)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    # Scrapers cannot log in: they send PODLIFE_METRICS_TOKEN as a bearer token. Without a token the endpoint
    # is closed unless PODLIFE_METRICS_PUBLIC opens it (docs/security.md).
    token = settings.PODLIFE_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return _unauthorized("metrics need the bearer token (PODLIFE_METRICS_TOKEN)")
    elif not settings.PODLIFE_METRICS_PUBLIC:
        return _unauthorized(
            "metrics are closed: set PODLIFE_METRICS_TOKEN and send it as a bearer token, "
            "or PODLIFE_METRICS_PUBLIC=1 to open them"
        )
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)


def _unauthorized(message: str) -> HttpResponse:
    response = HttpResponse(message + "\n", status=401, content_type="text/plain; charset=utf-8")
    response["WWW-Authenticate"] = 'Bearer realm="podlife metrics"'
    return response
