"""Which plotly.js the pages load (dashboard/plotly_bundles.py): the partial bundle (bar, pie, scatter) for
every chart podlife draws in SVG, the full one fetched only when a figure needs WebGL, and a chart drawn by
the partial bundle keeps working (zoom handlers) after the full one replaces it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.web.bulk import DAY0, make_pods
from tests.web.conftest import CHROMIUM, login, wait_for_js
from timelines.models import Cluster

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]
DRAWN = "window.__podlifeDraws && window.__podlifeDraws.length > {n}"


def plotly_requests(page: Any) -> list[str]:
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url.rsplit("/", 1)[-1]) if "/vendor/" in r.url else None)
    return seen


def iso(dt: Any) -> str:
    return dt.isoformat().replace("+00:00", "Z")


def test_node_page_draws_with_the_partial_bundle_only(
    live_server_asgi: Any, viewer: Any, browser_page: Any
) -> None:
    """GIVEN a node with a few pods WHEN its page opens THEN the Gantt draws (SVG) with the partial bundle
    and the full bundle is never requested; nothing is asked of another host, and the mode bar offers no
    button that sends the chart to Plotly's cloud (the bundle's default: clusters are air-gapped, and the
    data must not leave)."""
    page = browser_page
    login(page, live_server_asgi.url, "viewer")
    seen = plotly_requests(page)
    hosts: set[str] = set()
    page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
    page.goto(f"{live_server_asgi.url}/c/lab/nodes/node-a/")
    wait_for_js(page, DRAWN.format(n=0))
    assert page.get_attribute("#gantt", "data-renderer") == "svg"
    assert seen == ["plotly-basic.min.js"]
    assert hosts == {live_server_asgi.url.split("/")[2]}, hosts
    assert page.locator("#gantt .modebar-btn").count() > 0  # the mode bar is there...
    assert page.locator('#gantt .modebar-btn[data-title^="Share chart"]').count() == 0  # ...without it
    # Neither of the bundle's foreign defaults (the cloud upload, the CDN's geo maps) is left in the chart.
    context = page.evaluate("(({plotlyServerURL, topojsonURL}) => ({plotlyServerURL, topojsonURL}))"
                            "(document.getElementById('gantt')._context)")  # fmt: skip
    assert context == {"plotlyServerURL": "", "topojsonURL": "./"}, context
    assert page.evaluate("Plotly.version") and not page.evaluate("!!window.Plotly.__podlifeFull")
    assert page.errors == []


def test_a_window_that_needs_webgl_swaps_in_the_full_bundle_and_zoom_still_works(
    live_server_asgi: Any, admin_user: Any, request: Any
) -> None:
    """GIVEN 1,000 pods over a day WHEN the namespace page opens on one hour (SVG, partial bundle) and the
    user widens the window to 24 h (over 1,000 segments: WebGL) THEN the full bundle is fetched once, the
    chart redraws with WebGL, and zooming still writes the zoom into the URL (handlers re-attached)."""
    make_pods(Cluster.objects.create(name="swap"), pods=1000)
    page = request.getfixturevalue("browser_page")
    base = live_server_asgi.url
    login(page, base, "root")
    seen = plotly_requests(page)
    hour = f"from={iso(DAY0 + timedelta(hours=10))}&to={iso(DAY0 + timedelta(hours=11))}"
    page.goto(f"{base}/c/swap/ns/big/?{hour}")
    wait_for_js(page, DRAWN.format(n=0))
    assert page.get_attribute("#gantt", "data-renderer") == "svg"
    assert seen == ["plotly-basic.min.js"]

    page.click("button[data-span='86400']")
    wait_for_js(page, "document.getElementById('gantt').dataset.renderer === 'webgl'", timeout_s=60)
    assert seen == ["plotly-basic.min.js", "plotly.min.js"]
    assert page.locator("#gantt canvas").count() > 0
    zoom = [iso(DAY0 + timedelta(hours=5)), iso(DAY0 + timedelta(hours=6))]
    page.evaluate(
        "([a, b]) => Plotly.relayout(document.getElementById('gantt'), {'xaxis.range[0]': a, 'xaxis.range[1]': b})",
        [z.replace("T", " ").rstrip("Z") for z in zoom],
    )
    wait_for_js(page, "location.search.includes('x0=')")
    assert "x0=2024-06-07T05%3A00%3A00" in page.url or "x0=2024-06-07T05:00:00" in page.url, page.url
    assert page.errors == []
