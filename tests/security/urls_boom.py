"""The site's URLs plus two views that fail, to see what a 500 shows (tests/security/test_safe_defaults.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from podlife_site import urls as site

SECRET_IN_ERROR = "postgres://podlife:s3cret-in-error@db.internal/podlife"
handler500 = getattr(site, "handler500", "django.views.defaults.server_error")  # the site's, as deployed


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError(f"cannot reach {SECRET_IN_ERROR}")


urlpatterns = [path("api/v1/boom", boom), path("boom", boom), *site.urlpatterns]
