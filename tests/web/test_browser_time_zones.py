"""Times agree with the UTC/local switch in any browser zone, in Chromium.

GIVEN a pod whose worker setup began at 2024-06-07 06:54:41.100000 UTC (first seen by the worker) and whose
Scheduled event is at 06:54:41.000000 UTC, and a browser set to America/New_York (UTC-4 in June) or
Asia/Kolkata (UTC+5:30, a half-hour offset)
WHEN the pod page and the node page open zoomed on that second, with "times: UTC", "times: local" and a zone
picked by name (?tz=Australia/Adelaide, UTC+9:30 in June)
THEN the axis ticks, the bar's drawn start, the hover and the table cells all name the same instant in the
picked zone: UTC wall time under "UTC", the browser zone's wall time under "local", Adelaide's when picked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.flow import ingest as ingest_observations
from tests.lifecycle.factories import pdb
from tests.web.conftest import ARGS, CHROMIUM, login
from tests.web.factories import started_pod

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]

UID = "cccccccc-0000-4000-8000-0000000000e1"
SETUP_START = datetime(2024, 6, 7, 6, 54, 41, 100000, tzinfo=UTC)  # worker first seen (T0 + 1.1 s)
SCHEDULED = datetime(2024, 6, 7, 6, 54, 41, tzinfo=UTC)  # the Scheduled event (T0 + 1.0 s)
ZOOM = "x0=2024-06-07T06:54:40.500000Z&x1=2024-06-07T06:54:42.500000Z"

# What the chart draws: the setup bar's start as Plotly placed it on the axis (calc ms are the wall time
# of the axis read as UTC), the tick labels, and the setup bar's hover text.
DRAWN = """() => {
  const gd = document.getElementById("gantt");
  const i = gd.data.findIndex((t) => t.type === "bar" && t.name.startsWith("setup"));
  const base = Math.min(...gd.calcdata[i].map((c) => Math.min(c.s0, c.s1)));
  return {
    bar: new Date(base).toISOString(),
    ticks: [...gd.querySelectorAll(".xtick text")].map((t) => t.textContent),
    hover: gd.data[i].hovertext.join(" | "),
  };
}"""

SETUP_BOX = """() => {
  const gd = document.getElementById("gantt");
  const bars = gd.data.filter((t) => t.type === "bar");
  const k = bars.findIndex((t) => t.name.startsWith("setup"));
  const r = document.querySelectorAll("#gantt .barlayer .trace")[k].querySelector("path").getBoundingClientRect();
  return { x: r.left + Math.min(r.width / 2, 20), y: r.top + r.height / 2 };
}"""


def wall(at: datetime, zone: str | None) -> datetime:
    return at.astimezone(ZoneInfo(zone)) if zone else at


def shown(at: datetime, zone: str | None) -> str:
    """As the pages show an instant: the fraction trimmed to its precision (groups of three digits), so a
    whole second has none and 06:54:41.100000 reads 06:54:41.100."""
    text = re.sub(r"\.(\d{3})000$", r".\1", wall(at, zone).strftime("%Y-%m-%d %H:%M:%S.%f"))
    return text.removesuffix(".000")


@pytest.fixture
def zoned_pages(live_server_asgi: Any) -> Iterator[Callable[[str], Any]]:
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)

        def new_page(zone: str) -> Any:
            context = browser.new_context(timezone_id=zone, viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            page.errors = []
            page.on("pageerror", lambda e: page.errors.append(str(e)))
            return page

        yield new_page
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def check_chart(page: Any, zone: str | None) -> None:
    names = page.evaluate("() => document.getElementById('gantt').data.map((t) => t.type + ':' + t.name)")
    assert any(n.startswith("bar:setup") for n in names), names
    drawn = page.evaluate(DRAWN)
    expected = wall(SETUP_START, zone)
    # The bar starts on the axis at the picked zone's wall time, microseconds kept (to Plotly's 0.1 ms).
    assert drawn["bar"] == expected.strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z", drawn
    assert shown(SETUP_START, zone) in drawn["hover"]
    # A two-second zoom puts ticks on whole and half seconds of that wall time: 06:54:41 in UTC, 02:54:41
    # in New York, 12:24:41 in Kolkata; never the browser's zone under "UTC".
    assert any(t.startswith(expected.strftime("%H:%M:41")) for t in drawn["ticks"]), drawn["ticks"]
    other = wall(SETUP_START, None if zone else "Asia/Kolkata")
    assert not any(t.startswith(other.strftime("%H:%M")) for t in drawn["ticks"]), drawn["ticks"]


@pytest.mark.parametrize("browser_zone", ["America/New_York", "Asia/Kolkata"])
def test_axis_hover_and_tables_follow_the_switch_in_any_browser_zone(
    live_server_asgi: Any, admin_user: Any, lab: Any, zoned_pages: Any, browser_zone: str
) -> None:
    server, base = live_server_asgi, live_server_asgi.url
    server.run_in_loop(ingest_observations, "lab", started_pod(UID, "tz-web"))
    page = zoned_pages(browser_zone)
    login(page, base, "root")
    offset = page.evaluate(f"() => -new Date('{SETUP_START.isoformat()}').getTimezoneOffset()")
    assert offset == wall(SETUP_START, browser_zone).utcoffset() / timedelta(minutes=1) != 0

    # UTC, the browser's zone, and a zone picked by name (half-hour offset, neither UTC nor the browser's).
    picked = "Australia/Adelaide"
    for zone, query in ((None, ""), (browser_zone, "&tz=local"), (picked, f"&tz={picked}")):
        page.goto(f"{base}/c/lab/pods/{UID}/?{ZOOM}{query}")
        page.wait_for_selector("#gantt .main-svg .bars path")
        check_chart(page, zone)
        markers = page.inner_text("#markers") if page.locator("#markers").count() else page.inner_text("main")
        assert shown(SCHEDULED, zone) in markers
        label = {None: "UTC", browser_zone: "local (UTC", picked: f"{picked} (UTC+"}[
            zone
        ]  # the offset of now
        assert page.inner_text("#tz-toggle").startswith(f"times: {label}")
        # The mouse over the setup bar: the hover names the same instant.
        box = page.evaluate(SETUP_BOX)
        page.mouse.move(box["x"], box["y"])
        page.wait_for_selector("#gantt .hoverlayer .hovertext")
        assert shown(SETUP_START, zone) in page.locator("#gantt .hoverlayer").text_content()

    # The switch itself (no reload) moves the axis and the tables together.
    page.goto(f"{base}/c/lab/pods/{UID}/?{ZOOM}")
    page.wait_for_selector("#gantt .main-svg .bars path")
    page.click("#tz-toggle")
    check_chart(page, browser_zone)
    assert shown(SCHEDULED, browser_zone) in page.inner_text("main")

    # The node page: same bar, same ticks, and its window inputs in the picked zone.
    window = "from=2024-06-07T06:50:00Z&to=2024-06-07T07:00:00Z"
    for zone, query in ((None, ""), (browser_zone, "&tz=local")):
        page.goto(f"{base}/c/lab/nodes/node-a/?{window}&{ZOOM}{query}")
        page.wait_for_selector("#gantt .main-svg .bars path")
        check_chart(page, zone)
        assert page.input_value("#win-from") == shown(datetime(2024, 6, 7, 6, 50, tzinfo=UTC), zone)

    # The PDB page: its server-built status chart and its tables follow the switch too.
    server.run_in_loop(ingest_observations, "lab", [pdb(20.25, 0), pdb(40.5, 1)])
    blocked = datetime(2024, 6, 7, 6, 55, 0, 250000, tzinfo=UTC)  # T0 + 20.25 s
    for zone, query in ((None, ""), (browser_zone, "?tz=local")):
        page.goto(f"{base}/c/lab/ns/shop/pdb/web-pdb/{query}")
        page.wait_for_selector("#status-chart .main-svg")
        assert shown(blocked, zone) in page.inner_text("#blocked")
        first = page.evaluate(
            "() => new Date(document.getElementById('status-chart').calcdata[0][0].x).toISOString()"
        )
        assert first == wall(blocked, zone).strftime("%Y-%m-%dT%H:%M:%S.%f")[:23] + "Z"
    assert page.errors == []
