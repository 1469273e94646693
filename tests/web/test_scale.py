"""A 10,000-pod namespace day draws in Chromium: every row, with WebGL, and with a level of detail.

How fast it draws is a benchmark, not a test: ``bench/firstdraw.py`` (docs/performance.md).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.web.bulk import make_pods
from tests.web.conftest import CHROMIUM, SHOTS, login, wait_for_js
from timelines.models import Cluster, Interval

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]

PODS = 10_000
# Segments of the chart by trace name: a WebGL trace holds one segment as [start, end, null] in x, an SVG
# bar trace one bar a segment, a filled trace (bands) one rectangle of four corners and a null a segment.
SEGMENTS = """() => Object.fromEntries(document.getElementById("gantt").data
    .filter((t) => t.name !== "finding" && ((t.type === "scattergl" && t.mode === "lines") || t.type === "bar"
      || t.fill === "toself"))
    .map((t) => [t.name, t.type === "bar" ? t.y.length : t.x.length / (t.fill === "toself" ? 5 : 3)]))"""
# A point 40% into the widest rectangle of the first filled trace (not one of its hover points), in page
# pixels, and the rectangle's width in pixels.
WIDEST_BAR = """() => {
  const gd = document.getElementById("gantt");
  const t = gd.data.find((d) => d.fill === "toself" && d.name !== "finding");
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  let best = null;
  for (let i = 0; i + 4 < t.x.length; i += 5) {
    const x0 = xa.d2p(t.x[i]), x1 = xa.d2p(t.x[i + 1]);
    if (!best || x1 - x0 > best.w) best = { w: x1 - x0, x: x0 + 0.4 * (x1 - x0), y: (t.y[i] + t.y[i + 2]) / 2 };
  }
  return { w: best.w, x: box.left + xa._offset + best.x, y: box.top + ya._offset + ya.d2p(best.y), name: t.name };
}"""
# Hide the findings' ✕ (as its legend entry does): a band's hover is then the only one near a bar.
HIDE_FINDING_MARKS = """() => Plotly.restyle("gantt", { visible: false },
    [document.getElementById("gantt").data.findIndex((d) => d.name === "finding start")])"""


def test_ten_thousand_pod_namespace_day_draws_every_row_with_a_level_of_detail(
    live_server_asgi: Any, admin_user: Any, request: Any
) -> None:
    """GIVEN 10,000 pods of one namespace over a day, each setup → terminating → cleanup (a fifth
    inferred) WHEN the namespace page opens THEN the server sends bands of consecutive pods (at most 200
    rows, the level of detail of issue #17) whose totals are the whole namespace's, drawn as SVG bars, and
    the table lists the first 2,000 pods. Zoomed to ten minutes the page fetches that range, which comes
    pod by pod, and every termination (1-40 s) is drawn as its own segment. With ``?detail=full`` the page
    draws every pod's row as before (the baseline of bench/scale_pages.py)."""
    make_pods(Cluster.objects.create(name="scale"), pods=PODS)  # before Playwright's loop starts
    assert Interval.objects.filter(cluster__name="scale", state="terminating").count() == PODS
    page = request.getfixturevalue("browser_page")
    base = live_server_asgi.url
    login(page, base, "root")

    page.goto(f"{base}/c/scale/ns/big/")
    wait_for_js(page, "window.__podlifeDraws && window.__podlifeDraws.length > 0", timeout_s=60)
    assert page.get_attribute("#gantt", "data-detail") == "bands"
    assert page.get_attribute("#gantt", "data-renderer") == "svg"  # few bars: no WebGL to start
    bands = int(page.get_attribute("#gantt", "data-rows") or 0)
    assert 150 <= bands <= 200, bands
    assert page.text_content("#pod-count").startswith(f"{PODS} pods (first 2,000 listed)")
    assert page.locator("#pods-body tr").count() == 2000
    day = page.evaluate(SEGMENTS)
    assert set(day) <= {"setup", "setup (inferred)", "terminating", "terminating (inferred)", "cleanup",
                        "cleanup (inferred)"}, day  # fmt: skip
    assert sum(day.values()) < PODS, day  # folded: fewer segments than pods
    # Each state's bars are one filled path (gantt.js, fill_bars), hovered anywhere along a bar as a bar is.
    paths = page.evaluate(
        """[...document.querySelectorAll('#gantt .scatterlayer .js-fill, #gantt .barlayer .point')]
            .filter((e) => e.tagName !== 'path' || e.getAttribute('d')).map((e) => e.getAttribute('class'))"""
    )
    assert 0 < len(paths) <= len(day) + 3, paths  # + a finding fill a severity
    assert {c.split()[0] for c in paths} == {"js-fill"}, paths
    page.evaluate(HIDE_FINDING_MARKS)
    bar = page.evaluate(WIDEST_BAR)
    # Every band row is labelled now, so the chart is taller than the window: bring the bar into view.
    page.evaluate(f"window.scrollBy(0, {bar['y']} - window.innerHeight / 2)")
    bar = page.evaluate(WIDEST_BAR)
    assert bar["w"] > 40, bar  # wider than Plotly's hover distance on both sides of a point
    page.mouse.move(bar["x"], bar["y"])
    wait_for_js(page, "!!document.querySelector('#gantt .hoverlayer .hovertext')")
    hover = page.text_content("#gantt .hoverlayer .hovertext") or ""
    # A band row holds 50 pods' overlapping bars: the hover names the band and one of its states there.
    assert hover.startswith("pods ") and re.search(r"worker: \w+ \((observed|inferred)\)", hover), (
        bar,
        hover,
    )
    page.screenshot(path=str(SHOTS / "namespace-10000.png"))

    page.goto(f"{base}/c/scale/ns/big/?x0=2024-06-07T12:00:00Z&x1=2024-06-07T12:10:00Z")
    wait_for_js(page, "document.getElementById('gantt').dataset.detail === 'full'", timeout_s=60)
    zoomed = page.evaluate(SEGMENTS)
    overlapping = Interval.objects.filter(
        cluster__name="scale",
        state="terminating",
        start__lt=datetime(2024, 6, 7, 12, 10, tzinfo=UTC),
        end__gte=datetime(2024, 6, 7, 12, 0, tzinfo=UTC),
    ).count()
    assert 0 < overlapping < PODS
    assert zoomed["terminating"] + zoomed["terminating (inferred)"] == overlapping, zoomed

    page.goto(f"{base}/c/scale/ns/big/?detail=full")
    wait_for_js(page, "window.__podlifeDraws && window.__podlifeDraws.length > 0", timeout_s=60)
    assert page.get_attribute("#gantt", "data-detail") == "full"
    assert page.get_attribute("#gantt", "data-rows") == str(PODS)
    assert page.errors == []
