"""Export and import endpoints. The site includes them with
``path("", include("dashboard.web.export_urls"))`` in dashboard/web/urls.py (or podlife_site/urls.py)."""

from __future__ import annotations

from django.urls import path

import podlife_site.converters  # noqa: F401  (registers <segment:…>)
from dashboard.web import export_views as views

urlpatterns = [
    path("c/<segment:cluster>/export", views.export_download, name="export-download"),
    path("c/<segment:cluster>/export/jobs", views.export_job_create, name="export-job-create"),
    path("export/jobs/<str:job_id>", views.export_job_status, name="export-job-status"),
    path("export/jobs/<str:job_id>/download", views.export_job_download, name="export-job-download"),
    path("import", views.import_bundle, name="import-bundle"),
]
