from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from podlife_site import health

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("", include("collectors.urls")),
    path("", include("collectors.ingest_urls")),
    path("", include("timelines.web.export_urls")),
    path("", include("timelines.web.urls")),
]
