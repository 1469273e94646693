"""The HTML bundle in a real Chromium with the network cut off: it renders, asks for nothing, and a
hostile pod name stays text."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from tests.export.conftest import HOSTILE, SINCE, UNTIL
from timelines.export import Scope, export_incident

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]


@pytest.fixture
def html_file(source_cluster, tmp_path) -> Path:
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.one("node", "node-a"), SINCE, UNTIL, "html", buf)
    path = tmp_path / "incident.html"
    path.write_bytes(buf.getvalue())
    return path


def test_html_bundle_renders_offline_with_no_request_and_no_script_injection(html_file):
    """GIVEN the HTML bundle of node-a (one pod is named like an <img onerror> injection)
    WHEN Chromium opens it from disk with every request but the file itself blocked
    THEN no other request is attempted, no dialog opens, the Gantt has one bar per worker and API
    interval, and the hostile name shows as plain text in the axis and the summary table."""
    sync_api = pytest.importorskip("playwright.sync_api")
    file_url = html_file.as_uri()
    attempted: list[str] = []
    dialogs: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            context = browser.new_context(offline=True)
            page = context.new_page()

            def route(r):  # type: ignore[no-untyped-def]
                if r.request.url == file_url:
                    r.continue_()
                else:
                    attempted.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.on("request", lambda req: None if req.url == file_url else attempted.append(req.url))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(file_url, wait_until="load")
            page.wait_for_selector("#gantt .main-svg", timeout=20_000)
            page.wait_for_timeout(300)

            data = page.evaluate("JSON.parse(document.getElementById('incident-data').textContent)")
            expected_bars = sum(len(p["lanes"]["worker"]) + len(p["lanes"]["api"]) for p in data["pods"])
            bars = page.locator("#gantt g.trace.bars g.point").count()
            ticks = page.locator("#gantt g.ytick text").all_text_contents()
            summary = page.locator("#summary td").all_text_contents()
            injected = page.locator("img").count()
            rows = page.locator("#findings tr").count()
            modebar = page.locator("#gantt .modebar-btn").count()
            cloud = page.locator('#gantt .modebar-btn[data-title^="Share chart"]').count()
        finally:
            browser.close()
    assert attempted == []
    assert dialogs == []
    assert errors == []
    assert expected_bars > 20
    assert bars == expected_bars
    assert len(data["pods"]) == 6
    assert any(HOSTILE in t for t in ticks), ticks
    assert f"shop/{HOSTILE}" in summary
    assert injected == 0
    assert rows == len(data["findings"]) + 1  # header row
    assert modebar > 0 and cloud == 0  # no button sends the incident to Plotly's cloud


def test_html_bundle_inlines_plotly_and_escapes_the_data_block(html_file):
    text = html_file.read_text()
    assert "<script src" not in text and '<link rel="stylesheet"' not in text
    assert "plotly.js (basic - minified) v" in text  # the partial library is inside the file
    block = text.split('<script type="application/json" id="incident-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block  # a name cannot close the block
    assert "\\u003cimg src=x onerror=alert(1)\\u003e" in block
    assert "connect-src 'none'" in text


def test_one_pod_html_export_is_at_most_one_and_a_half_megabytes(source_cluster):
    """GIVEN the scenario's pod with its whole history WHEN it is exported alone as HTML THEN the file,
    which inlines the partial plotly.js bundle, is at most 1.5 MB (the full bundle alone is 4.8 MB)."""
    from tests.export.conftest import uid_for
    from timelines.plotly_bundles import FULL_PATH, PARTIAL_PATH

    uid = uid_for("web-c")  # the crash loop: the scenario pod with the most history
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.pods([uid]), SINCE, UNTIL, "html", buf)
    html = buf.getvalue()
    assert PARTIAL_PATH.read_bytes() in html and FULL_PATH.stat().st_size > 1_500_000
    assert b"web-c" in html and b"web-a" not in html
    print(f"one-pod HTML export: {len(html):,} bytes")
    assert len(html) <= 1_500_000, f"{len(html):,} bytes"


LEGEND_AND_TRACES = """() => {
  const gd = document.getElementById("gantt");
  const rgb = (c) => { const d = document.createElement("span"); d.style.color = c; document.body.append(d);
    const v = getComputedStyle(d).color; d.remove(); return v; };
  const drawn = new Set(), symbols = new Set();
  for (const t of gd.data) {
    if (t.type === "bar") drawn.add(rgb(t.marker.color));
    else {
      for (const s of [].concat(t.marker.symbol)) symbols.add(s);
      for (const c of [].concat(t.marker.color)) drawn.add(rgb(c));
    }
  }
  for (const s of gd.layout.shapes || []) drawn.add(rgb(s.fillcolor));
  const legend = document.getElementById("legend");
  const swatches = new Set([...legend.querySelectorAll(".swatch")].map((e) => getComputedStyle(e).backgroundColor));
  const legendSymbols = new Set([...legend.querySelectorAll(".symbol")].map((e) => e.dataset.symbol));
  for (const e of legend.querySelectorAll(".symbol")) swatches.add(getComputedStyle(e).color);
  return { drawn: [...drawn], symbols: [...symbols], swatches: [...swatches], legendSymbols: [...legendSymbols],
           title: document.title, heading: document.getElementById("title").textContent,
           plotTitle: gd.layout.title.text };
}"""


def test_one_pod_html_export_is_titled_by_the_pod_and_its_legend_names_every_symbol(source_cluster, tmp_path):
    """GIVEN the HTML bundle of one pod (web-b: deleted during setup, with findings, events, kubelet lines)
    WHEN Chromium opens it offline
    THEN the page, its heading and the chart are titled by the pod's namespace/name, and every colour and
    marker symbol the Gantt draws has an entry in the legend."""
    from tests.export.conftest import uid_for

    sync_api = pytest.importorskip("playwright.sync_api")
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.one("pods", uid_for("web-b")), SINCE, UNTIL, "html", buf)
    path = tmp_path / "pod.html"
    path.write_bytes(buf.getvalue())
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(offline=True).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(path.as_uri(), wait_until="load")
            page.wait_for_selector("#gantt .main-svg", timeout=20_000)
            seen = page.evaluate(LEGEND_AND_TRACES)
        finally:
            browser.close()
    assert errors == []
    assert seen["heading"] == "Pod shop/web-b"
    assert seen["title"].startswith("Pod shop/web-b ·") and seen["plotTitle"] == "Pod shop/web-b"
    assert seen["symbols"] and len(seen["drawn"]) >= 4, seen
    assert set(seen["symbols"]) <= set(seen["legendSymbols"]), seen
    # Every drawn colour is one the legend shows (white: the fill of a plain event circle, outlined).
    missing = set(seen["drawn"]) - set(seen["swatches"]) - {"rgb(255, 255, 255)"}
    assert not missing, (missing, seen)
