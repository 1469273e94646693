"""The dashboard's pages (included at the site root by podlife_site/urls.py)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

import podlife_site.converters  # noqa: F401  (registers <segment:…>)
from dashboard.web import views

C = "c/<segment:cluster>"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("accounts/login/", auth_views.LoginView.as_view(next_page="/"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="/accounts/login/"), name="logout"),
    path("api/", views.api_docs, name="api-docs"),
    path("api/v1/", include("dashboard.web.api.urls")),
    # Browsers ask for /favicon.ico whatever the page says (JSON answers, the admin): the site's icon.
    path("favicon.ico", views.favicon, name="favicon"),
    path("vendor/plotly-basic.min.js", views.plotly_js, {"bundle": "partial"}, name="plotly-js"),
    path("vendor/plotly.min.js", views.plotly_js, {"bundle": "full"}, name="plotly-gl-js"),
    path("findings/", views.findings, name="findings"),
    path(f"{C}/", views.cluster, name="cluster"),
    path(f"{C}/nodes/<segment:node>/", views.node, name="node"),
    path(f"{C}/ns/<segment:namespace>/", views.namespace, name="namespace"),
    path(f"{C}/ns/<segment:namespace>/pdb/<segment:name>/", views.pdb, name="pdb"),
    path(f"{C}/ns/<segment:namespace>/<segment:kind>/<segment:name>/", views.workload, name="workload"),
    path(f"{C}/pods/<segment:uid>/", views.pod, name="pod"),
    path(f"{C}/pods/<segment:namespace>/<segment:name>/", views.pod_by_ref, name="pod-by-ref"),
]
