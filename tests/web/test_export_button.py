"""The Export button: this page's scope and window, a background job with progress, then the file."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.web.conftest import CHROMIUM, SHOTS, UID_KILLED, login


@pytest.fixture(autouse=True)
def _jobs_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """With REDIS_URL set, export jobs go to a Celery worker, which these browser tests do not start:
    here the job runs in the server process. tests/export/test_worker.py runs one on a real worker."""
    from podlife_site.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)


pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]


def test_export_from_the_node_page_downloads_the_window_on_screen(
    live_server_asgi: Any, viewer: Any, browser_page: Any, tmp_path: Any
) -> None:
    """GIVEN a viewer on the node page WHEN they export JSON THEN the bundle holds that node's pods they
    may read, for the window the page shows."""
    page = browser_page
    login(page, live_server_asgi.url, "viewer")
    page.goto(f"{live_server_asgi.url}/c/lab/nodes/node-a/")
    page.wait_for_selector("#gantt .main-svg")
    window_from = page.evaluate("document.body.dataset.windowFrom")
    page.select_option("#export-form select[name=format]", "json.gz")
    with page.expect_download(timeout=20_000) as download:
        page.click("#export-form button[type=submit]")
    path = tmp_path / "bundle.json.gz"
    download.value.save_as(path)
    import gzip

    head = orjson.loads(gzip.decompress(path.read_bytes()))
    assert head["schema"] == "podlife.incident/v1"
    assert head["metadata"]["scope"]["kind"] == "node" and head["metadata"]["scope"]["values"] == ["node-a"]
    assert head["metadata"]["window"]["since"][:19] == window_from[:19]
    assert head["metadata"]["namespaces"] is not None  # the viewer may read some namespaces only
    page.screenshot(path=str(SHOTS / "node-export.png"))
    assert page.errors == []


def test_export_from_a_pod_page_uses_its_recorded_life(
    live_server_asgi: Any, viewer: Any, browser_page: Any, tmp_path: Any
) -> None:
    page = browser_page
    login(page, live_server_asgi.url, "viewer")
    page.goto(f"{live_server_asgi.url}/c/lab/pods/{UID_KILLED}/?tz=Asia/Tokyo")  # the page shows Tokyo time
    page.wait_for_selector("#gantt .main-svg")
    page.select_option("#export-form select[name=format]", "html")
    with page.expect_download(timeout=20_000) as download:
        page.click("#export-form button[type=submit]")
    path = tmp_path / "incident.html"
    download.value.save_as(path)
    html = path.read_text()
    assert html.startswith("<!doctype html") or html.lower().startswith("<!doctype html")
    assert UID_KILLED in html
    assert '"tz":"Asia/Tokyo"' in html  # the file opens in the zone the page showed
    assert page.errors == []
