"""End to end in Chromium (Debian's, driven by Playwright) against uvicorn serving the real ASGI app.

The server runs in a thread of this process with the in-memory channel layer, and new observations are
ingested on the server's side (``LiveServer.run_in_loop``), so the live push reaches the browser exactly
as it does in the one-process demo.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.web.conftest import CHROMIUM, SHOTS, UID_EVIL, UID_KILLED, UID_OK, login
from tests.web.factories import HOSTILE, retarget, started_pod

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]


def test_node_page_live_update_pod_evidence_and_hostile_name(
    live_server_asgi: Any, viewer: Any, browser_page: Any
) -> None:
    """GIVEN a viewer of namespaces default and evil on node-a
    WHEN they open the node page, a new pod is ingested on the node, and they follow a finding
    THEN the Gantt draws, the new pod appears live, the finding leads to its evidence rows, and the hostile
    pod name is text everywhere (no dialog ever fires)."""
    server, page = live_server_asgi, browser_page
    base = server.url
    login(page, base, "viewer")
    assert "What it collects" in page.inner_text("#about")

    page.goto(f"{base}/c/lab/nodes/node-a/")
    page.wait_for_selector("#gantt .main-svg")
    page.wait_for_selector("#live-state[data-state=live]", timeout=10_000)
    page.wait_for_selector("#pods-body tr")
    assert page.get_attribute("#gantt", "data-rows") == "3"  # default (2) + evil (1); secret is not readable
    table = page.inner_text("#pods-table")
    assert HOSTILE in table and page.locator("#pods-table img").count() == 0
    ticks = page.locator("#gantt .ytick text").evaluate_all("els => els.map(e => e.textContent)")
    assert f"evil/{HOSTILE}" in ticks  # Plotly shows the escaped label as the literal text
    page.screenshot(path=str(SHOTS / "node-before.png"), full_page=True)

    new_uid = "bbbbbbbb-0000-4000-8000-00000000live"
    server.run_in_loop(ingest_observations, "lab", started_pod(new_uid, "web-live"))
    page.wait_for_selector(f'#pods-body tr[data-uid="{new_uid}"]', timeout=5_000)
    assert page.get_attribute("#gantt", "data-rows") == "4"
    page.screenshot(path=str(SHOTS / "node-after-live.png"), full_page=True)

    page.click("#tz-toggle")
    assert "tz=local" in page.url

    page.click("#pods-body >> text=web-killed")
    page.wait_for_url(f"**/c/lab/pods/{UID_KILLED}/**")
    page.wait_for_selector("#gantt .main-svg")
    link = page.locator("#findings a.evidence-link").first
    ids = link.get_attribute("data-evidence").split(",")
    link.click()
    page.wait_for_selector("tr.evidence")
    highlighted = page.locator("tr.evidence").evaluate_all("rows => rows.map(r => r.id)")
    assert highlighted == [f"obs-{i}" for i in ids]
    assert "evidence=" in page.url
    page.screenshot(path=str(SHOTS / "pod-evidence.png"), full_page=True)

    page.goto(f"{base}/c/lab/pods/{UID_EVIL}/")
    page.wait_for_selector("#gantt .main-svg")
    assert HOSTILE in page.inner_text("#pod-title")
    assert page.locator("main img").count() == 0
    page.hover("#gantt .bars path", force=True)
    page.screenshot(path=str(SHOTS / "pod-hostile.png"), full_page=True)

    assert page.dialogs == []
    assert page.errors == []


def test_pod_page_gantt_follows_its_pod_live(live_server_asgi: Any, viewer: Any, browser_page: Any) -> None:
    """GIVEN a viewer on the page of a running pod WHEN the pod is deleted (new observations, derived)
    THEN the page's Gantt redraws with the terminating state, without a reload."""
    server, page = live_server_asgi, browser_page
    login(page, server.url, "viewer")
    page.goto(f"{server.url}/c/lab/pods/{UID_OK}/")
    page.wait_for_selector("#gantt .main-svg")
    page.wait_for_selector("#live-state[data-state=live]", timeout=10_000)
    hovers = "document.getElementById('gantt').data.flatMap((t) => t.hovertext || t.text || []).join('\\n')"
    assert "terminating" not in page.evaluate(hovers)
    page.evaluate("window.__podlifeMark = 'same document'")

    deleted = retarget(scenarios.graceful_delete(), uid=UID_OK, name="web-ok")
    server.run_in_loop(ingest_observations, "lab", deleted)
    page.wait_for_function("(window.__podlifeLiveUpdates || 0) >= 1", timeout=5_000)
    assert "<b>terminating</b>" in page.evaluate(hovers)
    assert page.evaluate("window.__podlifeMark") == "same document"  # redrawn in place, not reloaded
    page.screenshot(path=str(SHOTS / "pod-after-live.png"), full_page=True)
    assert page.errors == []


def test_namespace_page_shows_a_new_pod_live(live_server_asgi: Any, viewer: Any, browser_page: Any) -> None:
    """GIVEN a viewer on the namespace page of ``evil`` WHEN a pod starts there THEN its row appears live."""
    server, page = live_server_asgi, browser_page
    login(page, server.url, "viewer")
    page.goto(f"{server.url}/c/lab/ns/evil/")
    page.wait_for_selector("#gantt .main-svg")
    page.wait_for_selector("#live-state[data-state=live]", timeout=10_000)
    assert page.get_attribute("#gantt", "data-rows") == "1"
    new_uid = "cccccccc-0000-4000-8000-00000000live"
    server.run_in_loop(ingest_observations, "lab", started_pod(new_uid, "evil-live", namespace="evil"))
    page.wait_for_selector(f'#pods-body tr[data-uid="{new_uid}"]', timeout=5_000)
    assert page.get_attribute("#gantt", "data-rows") == "2"
    assert page.errors == []


def test_findings_page_leads_to_evidence(
    live_server_asgi: Any, admin_user: Any, lab: Any, browser_page: Any
) -> None:
    page, base = browser_page, live_server_asgi.url
    login(page, base, "root")
    page.goto(f"{base}/findings/?kind=killed_during_setup")
    page.click("#findings a.evidence-link")
    page.wait_for_selector("tr.evidence")
    assert page.locator("tr.evidence").count() >= 1
    assert page.errors == []


def test_pod_page_highlights_evidence_its_document_cites_by_key(
    live_server_asgi: Any, viewer: Any, browser_page: Any
) -> None:
    """GIVEN a pod whose podlife.timeline/v2 document (the chart's data, as live frames) cites its finding's
    evidence by dedupe key
    WHEN the finding is clicked on the Gantt, and the page is later opened with those keys as ``?evidence=``
    (the link a live-updated node page makes)
    THEN exactly the observation rows with those keys are highlighted both times, and the URL the click
    leaves carries their observation ids (the short form other pages link with)."""
    page, base = browser_page, live_server_asgi.url
    login(page, base, "viewer")
    page.goto(f"{base}/c/lab/pods/{UID_KILLED}/")
    page.wait_for_selector("#gantt .main-svg")
    finding = page.evaluate(
        "document.getElementById('gantt').data.flatMap((t) => t.customdata || [])"
        ".find((c) => Array.isArray(c) && c[2] === 'finding')"
    )
    keys = sorted(finding[1].split(","))
    assert keys and not any(k.isdigit() for k in keys)
    page.evaluate(
        "(c) => document.getElementById('gantt').emit('plotly_click', {points: [{customdata: c}]})", finding
    )
    page.wait_for_selector("tr.evidence")
    rows = "rows => rows.map(r => [r.id, r.dataset.key])"
    highlighted = page.locator("tr.evidence").evaluate_all(rows)
    assert sorted(key for _, key in highlighted) == keys
    ids = sorted(row_id.removeprefix("obs-") for row_id, _ in highlighted)
    assert sorted(parse_qs(urlsplit(page.url).query)["evidence"][0].split(",")) == ids

    page.goto(f"{base}/c/lab/pods/{UID_KILLED}/?{urlencode({'evidence': ','.join(keys)})}")
    page.wait_for_selector("tr.evidence")
    assert sorted(key for _, key in page.locator("tr.evidence").evaluate_all(rows)) == keys
    assert page.errors == []
