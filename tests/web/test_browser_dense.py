"""Dense views in Chromium (issue #34, deliverable 4), on the export tests' cluster
(``tests/export/conftest.py``: Deployment web → ReplicaSet web-7d9 → pods web-a … web-e on node-a, which is
cordoned, then NotReady) and on synthetic pods added per test (named as such).

The node page opens on its last quarter hour or its drain; the namespace page groups its rows by owner and
labels each; markers too close to tell apart are one marker with a count; the row filters match a part of a
name, UID or node.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.export.conftest import T0, source_observations, uid_for
from tests.flow import ingest as ingest_observations
from tests.web.bulk import make_pods
from tests.web.conftest import CHROMIUM, SHOTS, login, wait_for_js
from tests.web.factories import started_pod
from timelines.lifecycle.timeline import parse_time
from timelines.models import Cluster

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]

WINDOW = "from=2024-06-07T06:00:00Z&to=2024-06-07T08:00:00Z"

# What the chart shows: its row labels (tick texts, in order), its trace names and the clustered markers.
DRAWN = """() => {
  const gd = document.getElementById("gantt");
  const ticks = gd._fullLayout.yaxis.ticktext || [];
  const clusters = gd.data.filter((t) => t.name === "markers (count)");
  return {
    ticks: [...ticks],
    drawnTicks: [...gd.querySelectorAll(".ytick text")].map((t) => t.textContent),
    rowCount: Number(gd.dataset.rows) + Number(gd.dataset.headers),
    counts: clusters.flatMap((t) => t.text),
    groups: [...new Set(gd.data.map((t) => t.legendgroup).filter(Boolean))],
    range: gd._fullLayout.xaxis.range.slice(),
  };
}"""


# The pod rows drawn (no owner headers). Polled through wait_for_js as a called function: Playwright takes a
# bare expression holding "=>" for a function and would return the function, never its value.
POD_ROWS = "() => window.__podlifeRows().filter((r) => !r.header)"


def trimmed(at: datetime) -> str:
    """Wall time as the pages show it: the fraction to its precision in groups of three digits."""
    text = re.sub(r"\.(\d{3})000$", r".\1", at.strftime("%Y-%m-%d %H:%M:%S.%f"))
    return text.removesuffix(".000")


@pytest.fixture
def src(live_server_asgi: Any, admin_user: Any) -> Any:
    live_server_asgi.run_in_loop(ingest_observations, "src", source_observations())
    return live_server_asgi


def test_namespace_rows_are_grouped_by_owner_labelled_and_the_chart_comes_first(
    src: Any, browser_page: Any
) -> None:
    """GIVEN namespace shop with Deployment web (ReplicaSet web-7d9, its five pods and one pod with a
    hostile name) WHEN its page opens THEN the Gantt is above the list of workloads, the rows read
    Deployment web › ReplicaSet web-7d9 › its pods by start, every row is labelled, and the legend is
    grouped by lane."""
    page, base = browser_page, src.url
    login(page, base, "root")
    page.goto(f"{base}/c/src/ns/shop/?{WINDOW}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    drawn = page.evaluate(DRAWN)
    ticks = drawn["ticks"]
    assert "Deployment web" in ticks[0] and "<b>" in ticks[0], ticks
    assert "ReplicaSet web-7d9" in ticks[1], ticks
    pods = ticks[2:]
    assert len(pods) == drawn["rowCount"] - 2 == 6, ticks
    assert all(t.startswith("\u2002" * 4) for t in pods), ticks  # indented under their ReplicaSet
    # Every row has its label drawn, in the same order.
    assert len(drawn["drawnTicks"]) == drawn["rowCount"], drawn["drawnTicks"]
    # Sorted by start: web-c (first seen first in this fixture) … in the order the pods began.
    rows = page.evaluate("() => window.__podlifeRows().filter((r) => !r.header).map((r) => r._first)")
    assert rows == sorted(rows), rows
    # The chart before the workloads' list.
    above = page.evaluate(
        "() => document.getElementById('gantt').getBoundingClientRect().top < "
        "document.querySelector('.cards').getBoundingClientRect().top"
    )
    assert above
    assert "worker" in drawn["groups"] and "findings" in drawn["groups"], drawn["groups"]
    assert page.errors == []


def test_node_page_opens_on_the_last_quarter_hour_or_the_drain(src: Any, browser_page: Any) -> None:
    """GIVEN node-a with pods from 06:54 and a cordon (the start of a drain) of the fixture, and node-b
    with a synthetic pod whose data spans an hour with no cordon WHEN each node page opens with no window
    in its URL THEN node-b's window is its last 15 minutes and node-a's starts before its cordon began."""
    page, base = browser_page, src.url
    login(page, base, "root")
    # Synthetic: one pod started at T0 on node-b, then another an hour later.
    early = started_pod("dddddddd-0000-4000-8000-0000000000d1", "early", node="node-b")
    late = started_pod(
        "dddddddd-0000-4000-8000-0000000000d2", "late", node="node-b", shift=timedelta(hours=1)
    )
    src.run_in_loop(ingest_observations, "src", early + late)
    page.goto(f"{base}/c/src/nodes/node-b/")
    page.wait_for_selector("#gantt .main-svg .bars path")
    start = parse_time(page.evaluate("() => document.body.dataset.windowFrom"))
    end = parse_time(page.evaluate("() => document.body.dataset.windowTo"))
    assert start is not None and end is not None
    assert end - start == timedelta(minutes=15), (start, end)
    # The input shows the instant to its precision: milliseconds here, no trailing zeros.
    assert page.input_value("#win-from") == trimmed(start)
    assert start.microsecond % 1000 == 0 and not page.input_value("#win-from").endswith("000")

    page.goto(f"{base}/c/src/nodes/node-a/")
    page.wait_for_selector("#gantt .main-svg .bars path")
    start = parse_time(page.evaluate("() => document.body.dataset.windowFrom"))
    lanes = page.evaluate("() => window.__podlifeRows().filter((r) => r.key === 'node:node:cordoned')")
    assert lanes, "node-a's cordon lane is drawn"
    cordon = min(parse_time(iv[2]) for iv in lanes[0]["intervals"] if iv[1] == "cordoned")
    assert start is not None and start < cordon, (start, cordon)
    assert page.errors == []


def test_close_markers_cluster_with_a_count_and_separate_when_zoomed(src: Any, browser_page: Any) -> None:
    """GIVEN pods whose events are a second or less apart WHEN the namespace page shows two hours THEN
    those events are one marker with their count; WHEN zoomed to a few seconds THEN they are apart."""
    page, base = browser_page, src.url
    login(page, base, "root")
    page.goto(f"{base}/c/src/ns/shop/?{WINDOW}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    drawn = page.evaluate(DRAWN)
    counts = [int(c) for c in drawn["counts"]]
    assert counts and all(c >= 2 for c in counts), drawn
    # The count is drawn on the marker, as text.
    texts = page.evaluate(
        "() => [...document.querySelectorAll('#gantt .scatterlayer .textpoint text')].map((t) => t.textContent)"
    )
    assert sorted(texts) == sorted(drawn["counts"]), texts
    total = sum(counts)
    # Zoomed in to 40 ms around the first events, the cluster splits (fewer markers per cluster).
    first = T0 + timedelta(seconds=1)
    x0 = (first - timedelta(milliseconds=20)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    x1 = (first + timedelta(milliseconds=20)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    page.goto(f"{base}/c/src/ns/shop/?{WINDOW}&x0={x0}&x1={x1}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    zoomed = page.evaluate(DRAWN)
    assert sum(int(c) for c in zoomed["counts"]) < total, (drawn, zoomed)
    assert page.errors == []


def test_row_filters_match_a_part_of_a_name_uid_or_node_and_finding_kinds(
    src: Any, browser_page: Any
) -> None:
    """GIVEN the namespace page of shop WHEN "EB-D" (the middle of web-d, in capitals), then a piece of a UID, then a
    finding kind are chosen THEN only the pods that match keep their rows, and the URL keeps the filter."""
    page, base = browser_page, src.url
    login(page, base, "root")
    page.goto(f"{base}/c/src/ns/shop/?{WINDOW}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    pods = f"() => ({POD_ROWS})().map((r) => r.name)"
    page.fill("#row-search", "EB-D")  # typed in capitals
    wait_for_js(page, f"({POD_ROWS})().length === 1")
    assert page.evaluate(pods) == ["web-d"]
    assert "q=EB-D" in page.url
    uid = page.evaluate("() => window.__podlifeRows().find((r) => r.name === 'web-d').uid")
    page.fill("#row-search", uid[-5:])  # the end of its UID (the fixture's UIDs differ in their last digit)
    wait_for_js(page, f"({POD_ROWS})().length === 1")
    assert page.evaluate(pods) == ["web-d"]
    page.fill("#row-search", "")
    page.select_option("#finding-kind", "killed_during_setup")
    wait_for_js(page, f"({POD_ROWS})().length === 1")
    assert page.evaluate(pods) == ["web-b"]
    page.select_option("#finding-kind", "")
    reasons = page.evaluate(
        "() => [...document.querySelectorAll('#event-reason option')].map((o) => o.value).filter(Boolean)"
    )
    assert reasons, "the event reasons of the window are offered"
    page.select_option("#event-reason", reasons[0])
    wait_for_js(page, f"({POD_ROWS})().length >= 1")
    kept = page.evaluate("() => window.__podlifeRows().filter((r) => !r.header)")
    assert all(any(m[2] == reasons[0] for m in r["markers"]) for r in kept)
    assert page.errors == []


def test_finished_pods_fold_into_their_owner_and_unfold_on_click(src: Any, browser_page: Any) -> None:
    """GIVEN node-a, where pods of Deployment web finished (deleted, Succeeded or Failed) and others still
    run WHEN its page opens THEN the finished ones are one row "Deployment web: N finished pods" carrying
    their bars; WHEN that row is clicked THEN each finished pod has its row again; the table lists every
    pod throughout."""
    page, base = browser_page, src.url
    login(page, base, "root")
    page.goto(f"{base}/c/src/nodes/node-a/?{WINDOW}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    folded = page.evaluate("() => window.__podlifeRows().filter((r) => r.collapsed)")
    assert len(folded) == 1 and re.fullmatch(r"Deployment web: (\d+) finished pods ▸", folded[0]["name"]), (
        folded
    )
    members = folded[0]["members"]
    assert len(members) >= 2 and folded[0]["intervals"]
    ticks = page.evaluate("() => document.getElementById('gantt')._fullLayout.yaxis.ticktext.slice()")
    assert any(t.startswith("Deployment web: ") for t in ticks), ticks
    listed = page.locator("#pods-body tr").count()
    page.evaluate(
        """() => { const gd = document.getElementById("gantt");
          const t = gd.data.find((d) => d.customdata && d.customdata.some((c) => String(c[0]).startsWith("finished:")));
          gd.emit("plotly_click", { points: [{ customdata: t.customdata.find((c) => String(c[0]).startsWith("finished:")) }] }); }"""
    )
    wait_for_js(page, "(() => window.__podlifeRows().every(function (r) { return !r.collapsed; }))()")
    uids = page.evaluate("() => window.__podlifeRows().map((r) => r.uid)")
    assert set(members) <= set(uids)
    assert page.locator("#pods-body tr").count() == listed
    assert page.errors == []


LABEL_BOXES = """() => {
  const boxes = [...document.querySelectorAll("#gantt .ytick text")].map((t) => t.getBoundingClientRect())
    .map((r) => ({ top: r.top, bottom: r.bottom, h: r.height }));
  const bars = [...document.querySelectorAll("#gantt .barlayer .point path")].map((p) => p.getBoundingClientRect())
    .filter((r) => r.width || r.height).map((r) => r.height);
  const gd = document.getElementById("gantt");
  const legend = gd.querySelector(".legend").getBoundingClientRect();
  const plot = gd.querySelector(".nsewdrag").getBoundingClientRect();
  return { boxes, minBar: Math.min(...bars), page: document.documentElement.scrollWidth, view: window.innerWidth,
           legendAbove: legend.bottom <= plot.top, axisSide: gd._fullLayout.xaxis.side };
}"""


def test_a_namespace_of_243_pods_labels_every_row_without_overlap(
    live_server_asgi: Any, admin_user: Any, request: Any
) -> None:
    """GIVEN a synthetic namespace of 243 pods (tests/web/bulk.py: 40 ReplicaSets, two hours) WHEN its page
    opens THEN every pod and every owner has its label, no two labels overlap, no bar is under 3 px high
    (the issue saw a diagonal of 1-2 px bars without labels) and nothing is wider than the page."""
    make_pods(Cluster.objects.create(name="mid"), pods=243, namespace="mid", span=timedelta(hours=2))
    page = request.getfixturevalue("browser_page")
    base = live_server_asgi.url
    login(page, base, "root")
    page.goto(f"{base}/c/mid/ns/mid/?from=2024-06-07T00:00:00Z&to=2024-06-07T03:00:00Z")
    page.wait_for_selector("#gantt .main-svg .bars path")
    assert page.get_attribute("#gantt", "data-rows") == "243"
    headers = int(page.get_attribute("#gantt", "data-headers") or 0)
    assert headers == 40, headers  # one a ReplicaSet (no Deployment is known in this synthetic data)
    seen = page.evaluate(LABEL_BOXES)
    boxes = sorted(seen["boxes"], key=lambda b: b["top"])
    assert len(boxes) == 243 + headers
    overlaps = [(a, b) for a, b in zip(boxes, boxes[1:], strict=False) if b["top"] < a["bottom"] - 0.5]
    assert overlaps == [], overlaps[:3]
    assert seen["minBar"] >= 3, seen["minBar"]
    assert seen["page"] <= seen["view"], seen
    # A chart this tall has its time axis and legend above the rows, where the reader starts.
    assert seen["axisSide"] == "top" and seen["legendAbove"], seen
    page.screenshot(
        path=str(SHOTS / "namespace-243.png"), clip={"x": 0, "y": 0, "width": 1400, "height": 1600}
    )
    assert page.errors == []


# Every finding's ✕ and every phase bar, as page rectangles with their row (the pod page: a row a lane).
MARKS_AND_BARS = """() => {
  const gd = document.getElementById("gantt");
  const rects = (selector) => [...gd.querySelectorAll(selector)].map((e) => e.getBoundingClientRect())
    .filter((r) => r.width || r.height).map((r) => ({ l: r.left, r: r.right, t: r.top, b: r.bottom }));
  const k = gd.data.findIndex((t) => t.name === "finding start");
  const layers = [...gd.querySelectorAll(".scatterlayer .trace")];
  const scatter = gd.data.map((t, i) => i).filter((i) => gd.data[i].type === "scatter");
  const marks = rects(`.scatterlayer .trace:nth-child(${scatter.indexOf(k) + 1}) .point`);
  const bars = gd.data.filter((t) => t.type === "bar");
  const barLayers = [...gd.querySelectorAll(".barlayer .trace")];
  const phases = bars.flatMap((t, j) => (t.name === "finding" ? [] : [...barLayers[j].querySelectorAll("path")]))
    .map((e) => e.getBoundingClientRect()).filter((r) => r.width && r.height)
    .map((r) => ({ l: r.left, r: r.right, t: r.top, b: r.bottom }));
  return { marks, phases, layers: layers.length };
}"""


def test_a_findings_mark_never_covers_a_phase(src: Any, browser_page: Any) -> None:
    """GIVEN pods with findings (web-b killed during setup; web-d stuck terminating) WHEN their pod pages
    and the node page draw THEN no finding's ✕ overlaps a phase bar: it sits on the row's top edge, the
    band behind the row (the issue: "finding boxes hide the phase colours")."""
    page, base = browser_page, src.url
    login(page, base, "root")
    for path in (
        f"/c/src/pods/{uid_for('web-b')}/",
        f"/c/src/pods/{uid_for('web-d')}/",
        f"/c/src/nodes/node-a/?{WINDOW}",
    ):
        page.goto(base + path)
        page.wait_for_selector("#gantt .main-svg .bars path")
        seen = page.evaluate(MARKS_AND_BARS)
        assert seen["marks"] and seen["phases"], (path, seen)
        hits = [
            (m, b)
            for m in seen["marks"]
            for b in seen["phases"]
            if m["l"] < b["r"] and b["l"] < m["r"] and m["t"] < b["b"] - 0.5 and b["t"] < m["b"] - 0.5
        ]
        assert hits == [], (path, hits[:3])
    assert page.errors == []


def test_a_findings_sentence_names_its_instant_in_the_picked_zone(src: Any, browser_page: Any) -> None:
    """GIVEN web-b, whose killed_during_setup finding says "... at 2024-06-07 06:54:46.450 UTC ..." WHEN its
    pod page is shown in Asia/Kolkata THEN the sentence says 12:24:46.450 Asia/Kolkata beside columns in
    that zone, never "UTC"; back under UTC it reads as written."""
    page, base = browser_page, src.url
    login(page, base, "root")
    page.goto(f"{base}/c/src/pods/{uid_for('web-b')}/?tz=Asia/Kolkata")
    page.wait_for_selector("#gantt .main-svg .bars path")
    row = page.inner_text("#findings tr:nth-child(2)")
    assert "2024-06-07 12:24:46.450 Asia/Kolkata" in row and " UTC" not in row, row
    hovers = page.evaluate(
        "() => document.getElementById('gantt').data.filter((t) => t.name === 'finding start')"
        ".flatMap((t) => t.hovertext)"
    )
    assert any("12:24:46.450 Asia/Kolkata" in h for h in hovers) and not any(" UTC" in h for h in hovers), (
        hovers
    )
    page.click("#tz-toggle")  # a picked zone goes back to UTC
    assert "2024-06-07 06:54:46.450 UTC" in page.inner_text("#findings tr:nth-child(2)")
    assert page.errors == []
