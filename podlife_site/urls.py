from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from podlife_site import health

# DEBUG off: Django renders templates/404.html etc.; a 500 under /api/ stays JSON (podlife_site/errors.py).
handler500 = "podlife_site.errors.server_error"

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("", include("dashboard.metrics_urls")),
    path("", include("collectors.ingest_urls")),
    path("", include("dashboard.web.export_urls")),
    path("", include("dashboard.web.urls")),
]
