from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from timelines.web import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("", include("collectors.urls")),
    path("", include("collectors.ingest_urls")),
    path("", include("timelines.web.export_urls")),
    path("", include("timelines.web.urls")),
]
