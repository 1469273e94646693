"""Security as a browser and an API client send it (issue #38, deliverable 5), on every route the URL
configuration has, found by walking it (a new route is covered the day it is added):

* a logged-in browser session's POST without a CSRF token is never carried out, on any route;
* the same POST with the token a page gave is carried out (the refusal is the CSRF check, not a blanket);
* a revoked API token, a token of a deactivated user and the session of a user deactivated after logging
  in are refused on every route that reads data.
"""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.web.conftest import UID_OK

pytestmark = pytest.mark.django_db

# A value for each path parameter: the lab cluster's own names, so a route answers as it does for a user.
SAMPLES = {
    "cluster": "lab",
    "node": "node-a",
    "namespace": "default",
    "uid": UID_OK,
    "name": "web-ok",
    "kind": "Deployment",
    "job_id": "0" * 32,
}
# Routes whose every method is public by design (health probes, static assets, the login form), and the
# admin, whose forms Django protects itself.
PUBLIC = ("healthz", "readyz", "favicon.ico", "vendor/", "accounts/login/", "api/v1/openapi.json", "metrics")


def routes() -> list[str]:
    """Every path of the URL configuration, parameters filled from SAMPLES (catch-alls left out)."""
    out: list[str] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            text = str(p.pattern)
            if isinstance(p, URLResolver):
                if text.startswith("admin/"):
                    continue
                walk(p.url_patterns, prefix + text)
            elif isinstance(p, URLPattern):
                if text.startswith("^"):
                    continue  # the API's JSON 404 for any other path
                path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: SAMPLES[m.group(1)], prefix + text)
                out.append("/" + path)

    walk(get_resolver().url_patterns, "")
    return sorted(set(out))


def test_the_walk_finds_the_routes_that_change_state() -> None:
    """GIVEN the URL configuration WHEN it is walked THEN the routes below are among what the tests
    cover (a walk that found nothing would make every test here pass)."""
    found = set(routes())
    assert {
        "/import",
        "/c/lab/export/jobs",
        "/accounts/logout/",
        "/api/v1/clusters",
        "/ingest/v1/audit",
    } <= found
    assert len(found) > 30


def csrf_refused(response: Any) -> bool:
    return response.status_code == 403 and b"CSRF" in response.content


def test_a_session_post_without_a_csrf_token_is_carried_out_nowhere(lab: Any, admin_user: Any) -> None:
    """GIVEN a superuser's browser session (a cookie) WHEN it POSTs to every route without a CSRF token, as
    a hostile page's form would THEN no route carries it out: each answers the CSRF refusal (403), 401
    (the ingest routes take bearer tokens only, never the cookie) or 405 (a route that takes no POST)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    answers = {}
    for path in routes():
        if path.lstrip("/").startswith(PUBLIC):
            continue
        answers[path] = client.post(path, {"name": "x"})
    carried_out = {
        p: r.status_code for p, r in answers.items() if not (csrf_refused(r) or r.status_code in (401, 405))
    }
    assert carried_out == {}
    assert csrf_refused(answers["/import"]) and csrf_refused(answers["/c/lab/export/jobs"])
    assert csrf_refused(answers["/accounts/logout/"])


def test_the_same_post_with_the_pages_token_is_carried_out(lab: Any, admin_user: Any) -> None:
    """GIVEN a session that loaded the import form (which sets the CSRF cookie) WHEN it logs out by POST
    with the token THEN the logout happens: the refusals above are the CSRF check, not every POST."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.get("/import").status_code == 200
    token = client.cookies["csrftoken"].value
    assert client.post("/accounts/logout/", HTTP_X_CSRFTOKEN=token).status_code == 302
    assert client.get("/api/v1/clusters").status_code == 401  # logged out


def reads() -> list[str]:
    """The routes that read data for a user (pages, API, export), not the public ones or the ingest."""
    return [
        p
        for p in routes()
        if not p.lstrip("/").startswith(PUBLIC) and not p.startswith(("/ingest/", "/v1/", "/accounts/"))
    ]


def token_for(username: str) -> str:
    out = StringIO()
    call_command("api_token", username, stdout=out)
    return out.getvalue().strip()


def test_revoked_tokens_and_deactivated_users_are_refused_everywhere(lab: Any, viewer: Any) -> None:
    """GIVEN a viewer with a revoked token, then a live token, then deactivated WHEN each asks every route
    that reads data THEN every answer is 401 or the login page:
    a revoked token reads nothing, and deactivating a user ends both their tokens and their session."""
    revoked = token_for("viewer")
    call_command("api_token", "viewer", "--revoke-all", stderr=StringIO())
    live = token_for("viewer")
    browser = Client()
    browser.force_login(viewer)
    assert Client().get("/api/v1/clusters", HTTP_AUTHORIZATION=f"Bearer {live}").status_code == 200
    assert browser.get("/api/v1/clusters").status_code == 200
    viewer.is_active = False
    viewer.save()
    for path in reads():
        for token in (revoked, live):
            answer = Client().get(path, HTTP_AUTHORIZATION=f"Bearer {token}")
            assert refused(answer), (path, "token", answer.status_code)
        answer = browser.get(path)
        assert refused(answer), (path, "session", answer.status_code)


def refused(answer: Any) -> bool:
    """401, or the login page (a page takes no bearer token: the request is anonymous there)."""
    return answer.status_code == 401 or (
        answer.status_code == 302 and answer["Location"].startswith("/accounts/login/")
    )
