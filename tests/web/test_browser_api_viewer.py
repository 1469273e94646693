"""The API viewer in Chromium under the site's CSP (script-src 'self'): it renders every endpoint of
/api/v1/openapi.json with no request leaving the site and no policy violation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.test_csp import WATCH_CSP
from tests.web.conftest import CHROMIUM, SHOTS, login, wait_for_js

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]


def test_api_viewer_renders_the_openapi_document_offline(
    live_server_asgi: Any, admin_user: Any, browser_page: Any
) -> None:
    """GIVEN a logged-in user WHEN they follow the header's API link THEN the page lists every operation of
    the OpenAPI document with its parameters, and the schemas, asking nothing of any other host."""
    from dashboard.web.api.openapi import document

    page, base = browser_page, live_server_asgi.url
    login(page, base, "root")
    hosts: set[str] = set()
    page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
    page.add_init_script(WATCH_CSP)
    page.click("header >> text=API")
    page.wait_for_url(f"{base}/api/")
    wait_for_js(page, "document.body.dataset.apiReady === '1'")
    doc = document(server=f"{base}/api/v1")
    operations = [f"{m.upper()} {p}" for p, item in doc["paths"].items() for m in item]
    listed = page.locator("#api-index a").evaluate_all("els => els.map(e => e.textContent)")
    assert listed == operations
    section = page.inner_text("#api-paths")
    assert f"GET {base}/api/v1/clusters/{{cluster}}/pods/{{uid}}/timeline" in section
    assert "Cluster name." in section  # a parameter's description
    assert all(f"schema-{name}" in page.content() for name in doc["components"]["schemas"])
    assert page.locator("header .brand").count() == 1
    assert hosts == {base.split("/")[2]}, hosts
    assert page.evaluate("window.__csp") == []
    page.screenshot(path=str(SHOTS / "api-viewer.png"), full_page=False)
    assert page.errors == []
