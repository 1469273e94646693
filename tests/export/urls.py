"""The site's URLs plus the export ones, as the lead will include them (see docs/incident-bundle.md)."""

from __future__ import annotations

from django.urls import include, path

from podlife_site.urls import urlpatterns as site

urlpatterns = [path("", include("dashboard.web.export_urls")), *site]
