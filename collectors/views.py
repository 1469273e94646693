"""``/metrics``: collector health, open findings and webhook health in the Prometheus text format."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from alerts.metrics import FindingsMetrics
from collectors.health import CollectorHealth

_registry = CollectorRegistry(auto_describe=False)
_registry.register(CollectorHealth())
_registry.register(FindingsMetrics())  # findings and webhook health, for Alertmanager (docs/deploy.md)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    # Scrapers cannot log in; when PODLIFE_METRICS_TOKEN is set they must send it as a bearer token.
    token = settings.PODLIFE_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return HttpResponse("metrics need the bearer token (PODLIFE_METRICS_TOKEN)\n", status=401)
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)
