"""Readable Gantts and the documentation's screenshots, in Chromium, on the export tests' cluster
(``tests/export/conftest.py``: node-a cordoned then NotReady, a PDB that blocks, a Deployment, pods deleted
during setup, crash-looping, stuck terminating, killed by a node shutdown).

With ``PODLIFE_SCREENSHOTS=1`` the screenshot test overwrites ``docs/screenshots/*.png`` (the pictures in
docs/dashboard.md); otherwise it writes them under ``var/screenshots/`` and only checks every page draws.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from dashboard.web import figures
from tests.export.conftest import T0, source_observations, uid_for
from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.lifecycle.factories import ctr, pod
from tests.web.conftest import CHROMIUM, SHOTS, login, wait_for_js
from tests.web.factories import retarget
from timelines.lifecycle.timeline import parse_time

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]

DOCS_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WINDOW = "from=2024-06-07T06:00:00Z&to=2024-06-07T08:00:00Z"


def iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def src(live_server_asgi: Any, admin_user: Any) -> Any:
    live_server_asgi.run_in_loop(ingest_observations, "src", source_observations())
    return live_server_asgi


FLAKY = "eeeeeeee-0000-4000-8000-0000000000c1"


def flaky_pod() -> list[Any]:
    """A normal start (Ready at 5 s), then Ready=False at 30 s while the pod keeps running."""
    obs = scenarios.normal_start() + [
        pod(
            scenarios.UID,
            105,
            30.2,
            phase="Running",
            start_time=2,
            conditions=scenarios._conds("False", 30),
            containers=[ctr(state="running", started=4)],
        )
    ]
    return retarget(obs, uid=FLAKY, name="flaky-0", namespace="shop")


BAR_WIDTHS = """() => {
  const gd = document.getElementById("gantt");
  const bars = gd.data.filter((t) => t.type === "bar");
  const layers = document.querySelectorAll("#gantt .barlayer .trace");
  const out = [];
  bars.forEach((t, k) => {
    layers[k].querySelectorAll("path").forEach((p, i) => {
      const r = p.getBoundingClientRect();
      if (r.width || r.height) out.push({ name: t.name, width: r.width, hover: (t.hovertext || [])[i] || "" });
    });
  });
  return out;
}"""

TRACES = """() => document.getElementById("gantt").data.map((t, i) => ({i, name: t.name, type: t.type,
  hoverinfo: t.hoverinfo || "", colour: t.marker && typeof t.marker.color === "string" ? t.marker.color : null}))"""


def test_a_three_second_phase_in_six_hours_is_visible_with_its_true_duration(
    src: Any, browser_page: Any
) -> None:
    page, base = browser_page, src.url
    login(page, base, "root")
    six_hours = f"from={iso(-3 * 3600)}&to={iso(3 * 3600)}"
    page.goto(f"{base}/c/src/nodes/node-a/?{six_hours}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    bars = page.evaluate(BAR_WIDTHS)
    # The hover's fourth line is the duration as people say it: "2.97 s" under a minute.
    lines = [(b, b["hover"].split("<br>")) for b in bars]
    seconds = [(b, re.fullmatch(r"(\d+(?:\.\d+)?) s", h[3])) for b, h in lines if len(h) > 3]
    short = [b for b, m in seconds if m and float(m.group(1)) < 10]
    assert short, bars[:5]
    # 6 h over ~1,100 px: a 3 s phase would be 0.15 px wide; it is drawn at least min_bar_px.
    assert min(b["width"] for b in short) >= figures.MIN_BAR_PX - 0.5, short
    # The hover keeps the true duration, to three significant digits, never "2.967853 s".
    assert all(len(m.group(1).replace(".", "").lstrip("0")) <= 3 for _, m in seconds if m), seconds
    assert page.errors == []


def test_finding_bands_stay_behind_bars_and_zoom_to_finding(src: Any, browser_page: Any) -> None:
    page, base = browser_page, src.url
    login(page, base, "root")
    killed = uid_for("web-b")
    page.goto(f"{base}/c/src/pods/{killed}/")
    page.wait_for_selector("#gantt .main-svg .bars path")
    traces = page.evaluate(TRACES)
    band = [t for t in traces if t["name"] == "finding"]
    assert band and band[0]["hoverinfo"] == "skip"  # never steals a bar's hover
    assert band[0]["i"] < min(t["i"] for t in traces if t["type"] == "bar" and t["name"] != "finding")
    full = page.evaluate("() => document.getElementById('gantt')._fullLayout.xaxis.range.slice()")

    link = page.locator("#findings a.zoom-link").first
    link.click()
    page.wait_for_url("**x0=**")
    page.wait_for_selector("#gantt .main-svg .bars path")
    q = parse_qs(urlparse(page.url).query)
    x0, x1 = parse_time(q["x0"][0]), parse_time(q["x1"][0])
    row = page.locator("#findings tr").nth(1)
    start = parse_time(row.locator("td").nth(3).get_attribute("data-time"))
    assert x0 is not None and x1 is not None and start is not None and x0 < start < x1
    zoomed = page.evaluate("() => document.getElementById('gantt')._fullLayout.xaxis.range.slice()")
    assert zoomed[0] > full[0] or zoomed[1] < full[1]
    assert zoomed[0].replace(" ", "T").startswith(x0.strftime("%Y-%m-%dT%H:%M:%S"))

    # On the node page a click on a finding's ✕ opens its pod zoomed on the finding.
    page.goto(f"{base}/c/src/nodes/node-a/?{WINDOW}")
    page.wait_for_selector("#gantt .main-svg .scatterlayer .point")
    page.evaluate(
        """() => { const gd = document.getElementById("gantt");
          const i = gd.data.findIndex((t) => t.name === "finding start");
          gd.emit("plotly_click", { points: [{ customdata: gd.data[i].customdata[0] }] }); }"""
    )
    page.wait_for_url("**/pods/**x0=**")

    # Every finding of the findings page and of a PDB page has its zoom link.
    for path in ("/findings/", "/c/src/ns/shop/pdb/web-pdb/"):
        page.goto(base + path)
        rows = (
            page.locator("#findings tr").count() - 1
            if path == "/findings/"
            else page.locator("main li").count()
        )
        assert rows > 0 and page.locator("a.zoom-link").count() == rows
    page.locator("a.zoom-link").first.click()
    page.wait_for_url("**/pods/**x0=**")
    page.wait_for_selector("#gantt .main-svg .bars path")
    assert page.errors == []


def test_colours_tell_classes_apart(src: Any, browser_page: Any) -> None:
    colours, severity = figures.STATE_COLOURS, figures.SEVERITY_COLOURS
    assert colours["cordoned"] != colours["terminating"]
    assert severity["info"] != colours["setup"]
    assert colours["false"] != colours["failed"] != colours["false (unexpected)"]

    page, base = browser_page, src.url
    login(page, base, "root")
    # web-a: Ready=false while starting and after its graceful delete: normal, grey.
    page.goto(f"{base}/c/src/pods/{uid_for('web-a')}/")
    page.wait_for_selector("#gantt .main-svg .bars path")
    traces = {t["name"]: t for t in page.evaluate(TRACES)}
    assert traces["false"]["colour"] == colours["false"]
    assert "false (unexpected)" not in traces
    # flaky-0 was Ready, then its readiness fails while it runs: an anomaly, red.
    src.run_in_loop(ingest_observations, "src", flaky_pod())
    page.goto(f"{base}/c/src/pods/{FLAKY}/")
    page.wait_for_selector("#gantt .main-svg .bars path")
    traces = {t["name"]: t for t in page.evaluate(TRACES)}
    unexpected = [t for n, t in traces.items() if n.startswith("false (unexpected)")]
    assert unexpected and unexpected[0]["colour"] == colours["false (unexpected)"]
    # The node's lanes: cordoned drawn in its own colour.
    page.goto(f"{base}/c/src/nodes/node-a/?{WINDOW}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    traces = {t["name"]: t for t in page.evaluate(TRACES)}
    assert traces["cordoned"]["colour"] == colours["cordoned"]
    # The mode bar sits above the plot area, not over the first lane.
    page.hover("#gantt .main-svg")
    wait_for_js(page, "!!document.querySelector('#gantt .modebar-container .modebar')")
    bar = page.locator("#gantt .modebar").bounding_box()
    plot = page.locator("#gantt .draglayer .nsewdrag").first.bounding_box()
    assert bar is not None and plot is not None and bar["y"] + bar["height"] <= plot["y"] + 1
    assert page.errors == []


PAGES = [
    ("overview", "/", "#about"),
    ("cluster", "/c/src/", "main table"),
    ("node", f"/c/src/nodes/node-a/?{WINDOW}", "#gantt .main-svg .bars path"),
    ("namespace", f"/c/src/ns/shop/?{WINDOW}", "#gantt .main-svg .bars path"),
    ("workload", f"/c/src/ns/shop/Deployment/web/?{WINDOW}", "#status-chart .main-svg"),
    ("pdb", "/c/src/ns/shop/pdb/web-pdb/", "#status-chart .main-svg"),
    ("pod", f"/c/src/pods/{uid_for('web-b')}/", "#gantt .main-svg .bars path"),
    ("findings", "/findings/", "#findings tr"),
]


def test_every_page_draws_and_its_screenshot_is_taken(src: Any, browser_page: Any) -> None:
    """Each page of docs/dashboard.md draws without a script error; with PODLIFE_SCREENSHOTS=1 the pictures
    in docs/screenshots/ are replaced by fresh ones."""
    page, base = browser_page, src.url
    target = DOCS_SHOTS if os.environ.get("PODLIFE_SCREENSHOTS") == "1" else SHOTS
    target.mkdir(parents=True, exist_ok=True)
    login(page, base, "root")
    for name, path, ready in PAGES:
        page.goto(base + path)
        page.wait_for_selector(ready)
        page.wait_for_timeout(300)  # let Plotly finish its transitions
        page.screenshot(path=str(target / f"{name}.png"), full_page=name != "findings")
    assert page.errors == []


LAYOUT_CHECKS = """() => {
  const inside = (a, b) => a.left >= b.left - 1 && a.right <= b.right + 1 && a.top >= b.top - 1 && a.bottom <= b.bottom + 1;
  const out = {};
  for (const id of ["gantt", "status-chart"]) {
    const gd = document.getElementById(id);
    if (!gd || !gd._fullLayout) continue;
    const svg = gd.querySelector(".main-svg").getBoundingClientRect();
    const legend = gd.querySelector(".legend");
    out[id] = { range: gd._fullLayout.xaxis.range, l: gd._fullLayout.margin.l, r: gd._fullLayout.margin.r,
                legendInside: legend ? inside(legend.getBoundingClientRect(), svg) : null };
  }
  // Times and ids: one line each (a wrapped cell has more than one client rect for its text).
  out.wrapped = [...document.querySelectorAll("td.mono:not(.wrap)")].filter((td) => {
    if (!td.firstChild) return false;
    const range = document.createRange();
    range.selectNodeContents(td);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size > 1;
  }).map((td) => td.textContent);
  return out;
}"""


def test_replica_chart_shares_the_gantt_axis_legends_fit_and_times_stay_whole(
    src: Any, browser_page: Any
) -> None:
    page, base = browser_page, src.url
    login(page, base, "root")
    page.goto(f"{base}/c/src/ns/shop/Deployment/web/?{WINDOW}")
    page.wait_for_selector("#status-chart .main-svg")
    page.wait_for_selector("#gantt .main-svg .bars path")
    seen = page.evaluate(LAYOUT_CHECKS)
    gantt, status = seen["gantt"], seen["status-chart"]
    assert status["range"] == gantt["range"] and (status["l"], status["r"]) == (gantt["l"], gantt["r"]), seen
    assert gantt["legendInside"] and status["legendInside"], seen
    # A zoom of the Gantt moves the replica chart with it.
    page.goto(f"{base}/c/src/ns/shop/Deployment/web/?{WINDOW}&x0={iso(-60)}&x1={iso(120)}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    wait_for_js(
        page,
        "document.getElementById('status-chart')._fullLayout.xaxis.range[0] === "
        "document.getElementById('gantt')._fullLayout.xaxis.range[0]",
    )
    zoomed = page.evaluate(LAYOUT_CHECKS)
    assert zoomed["gantt"]["range"][0].startswith("2024-06-07 06:53:40")
    for path in (f"/c/src/pods/{uid_for('web-b')}/", "/findings/"):
        page.goto(base + path)
        page.wait_for_selector("td.mono")
        assert page.evaluate(LAYOUT_CHECKS)["wrapped"] == []
    assert page.errors == []
