"""The ingestion endpoints at the root, as podlife_site/urls.py includes them."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("", include("collectors.ingest_urls"))]
