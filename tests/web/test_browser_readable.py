"""Seen, not assumed (issue #34, deliverable 6): every page of docs/dashboard.md, drawn in Chromium from
fixed data (the export tests' cluster, ``tests/export/conftest.py``, and a namespace of 120 pods), checked
for what a person needs to read it, the way a person looks at it:

* every row of a Gantt has its label;
* no bar is narrower than 3 px at the default zoom (a bar wholly inside the visible range);
* no two labels of an axis overlap;
* every legend lies within the page's width.

The screenshots are written under var/screenshots/ (``PODLIFE_SCREENSHOTS=1``: docs/screenshots/, the
pictures in docs/dashboard.md), from the same pages the checks read.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest

from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.web.conftest import CHROMIUM, SHOTS, login
from tests.web.factories import retarget
from tests.web.test_browser_gantt import DOCS_SHOTS, PAGES, WINDOW, src  # noqa: F401 (src: a fixture)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]

# What the page shows, measured in its own pixels: for each chart, the rows its traces draw on and the
# rows whose label is drawn, the narrowest bar wholly inside the visible range, the axis labels' boxes,
# and the legend's box; and the page's width.
READ = """() => {
  const boxes = (els) => [...els].map((e) => { const r = e.getBoundingClientRect();
    return { text: e.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom }; })
    .filter((b) => b.text.trim() && b.r > b.l);
  const charts = [];
  for (const gd of document.querySelectorAll(".js-plotly-plot")) {
    const fl = gd._fullLayout;
    if (!fl || !fl.xaxis) continue;
    const xa = fl.xaxis, ya = fl.yaxis;
    const [lo, hi] = xa.range.map((v) => xa.r2l(v));
    const px = (v) => xa.l2p(xa.d2l(v));
    const rows = new Set();
    let narrowest = null;
    const bar = (s, e, y) => {
      const a = xa.d2l(s), b = xa.d2l(e);
      if (!(a >= lo && b <= hi)) return;  // cut by the visible range: its drawn width is not its own
      const w = Math.abs(px(e) - px(s));
      if (narrowest === null || w < narrowest.width) narrowest = { width: w, y };
    };
    for (const t of gd._fullData) {
      if (t.visible !== true || t.showlegend === false && t.hoverinfo === "skip") continue;
      const ys = t.y || [];
      ys.forEach((y) => { if (y !== null && y !== undefined && y === y) rows.add(ya.d2l(y)); });
      if (t.type === "bar" && t.orientation === "h") {
        ys.forEach((y, i) => {
          const base = Array.isArray(t.base) ? t.base[i] : t.base;
          const len = Array.isArray(t.x) ? t.x[i] : null;
          if (base !== undefined && base !== null && len !== null) bar(base, xa.l2d(xa.d2l(base) + Number(len)), y);
        });
      } else if (t.fill === "toself" && Array.isArray(t.x)) {
        // rectangles [s, e, e, s, s] separated by nulls (gantt.js polygons)
        for (let i = 0; i + 3 < t.x.length; i++) {
          if (t.x[i] === null || (i > 0 && t.x[i - 1] !== null)) continue;
          bar(t.x[i], t.x[i + 1], t.y[i]);
        }
      }
    }
    const yTicks = [...gd.querySelectorAll(".yaxislayer-above .ytick")].filter((g) => g.textContent.trim());
    const labelled = new Set(yTicks.map((g) => Math.round(g.__data__ ? g.__data__.x : NaN)));
    const legend = gd.querySelector(".legend");
    const lr = legend ? legend.getBoundingClientRect() : null;
    charts.push({
      id: gd.id,
      categorical: ya.type === "category",
      gantt: gd.id === "gantt",
      rows: [...rows].map((y) => Math.round(y)),
      labelled: [...labelled],
      narrowest,
      yLabels: boxes(gd.querySelectorAll(".yaxislayer-above .ytick text")),
      xLabels: boxes(gd.querySelectorAll(".xaxislayer-above .xtick text")),
      legend: lr && lr.width ? { l: lr.left, r: lr.right } : null,
    });
  }
  return { width: document.documentElement.clientWidth, charts };
}"""


def overlapping(labels: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of label boxes that overlap (by more than a pixel each way)."""
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if (
                min(a["r"], b["r"]) - max(a["l"], b["l"]) > 1
                and min(a["b"], b["b"]) - max(a["t"], b["t"]) > 1
            ):
                out.append((a["text"], b["text"]))
    return out


def problems(name: str, seen: dict[str, Any]) -> list[str]:
    found = []
    for chart in seen["charts"]:
        where = f"{name} #{chart['id']}"
        if chart["gantt"]:
            unlabelled = sorted(set(chart["rows"]) - set(chart["labelled"]))
            if unlabelled:
                found.append(f"{where}: {len(unlabelled)} of {len(set(chart['rows']))} rows have no label")
            if chart["narrowest"] is not None and chart["narrowest"]["width"] < 3 - 0.05:  # subpixel rounding
                found.append(f"{where}: a bar {chart['narrowest']['width']:.1f} px wide")
        for axis in ("yLabels", "xLabels"):
            if pairs := overlapping(chart[axis]):
                found.append(f"{where}: {axis} overlap: {pairs[:3]}")
        legend = chart["legend"]
        if legend is not None and (legend["l"] < 0 or legend["r"] > seen["width"] + 1):
            found.append(
                f"{where}: legend spans {legend['l']:.0f}-{legend['r']:.0f} px, page {seen['width']} px"
            )
    return found


def crowd(server: Any) -> None:
    """Namespace ``crowd``: 120 pods that each start, run and are deleted within 24 s, one every 30 s
    (an hour of a churning workload in the two-hour window the pages open on)."""
    obs = []
    for i in range(120):
        life = retarget(
            scenarios.graceful_delete(),
            uid=f"cccccccc-0000-4000-8000-{i:012d}",
            name=f"crowd-7d9f8b6c4-{i:05d}",
            namespace="crowd",
            shift=timedelta(seconds=30 * i - 1800),
        )
        obs += life
    server.run_in_loop(ingest_observations, "src", obs)


def test_every_page_is_readable_and_its_screenshot_is_taken(src: Any, browser_page: Any) -> None:  # noqa: F811
    """GIVEN the fixed cluster and a namespace of 120 pods WHEN every page of docs/dashboard.md is drawn
    at its default zoom THEN each Gantt labels every row, draws no bar under 3 px, no two axis labels
    overlap and every legend lies within the page; the screenshot is taken of the page checked."""
    page, base = browser_page, src.url
    target = DOCS_SHOTS if os.environ.get("PODLIFE_SCREENSHOTS") == "1" else SHOTS
    target.mkdir(parents=True, exist_ok=True)
    crowd(src)
    login(page, base, "root")
    found: list[str] = []
    pages = [*PAGES, ("crowd", f"/c/src/ns/crowd/?{WINDOW}", "#gantt .main-svg")]
    for name, path, ready in pages:
        page.goto(base + path)
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        found += problems(name, page.evaluate(READ))
        page.screenshot(path=str(target / f"{name}.png"), full_page=name != "findings")
    assert not found, "\n".join(found)
    assert page.errors == []
