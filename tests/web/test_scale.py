"""A 10,000-pod namespace day draws in Chromium: every row, with WebGL, and with a level of detail.

How fast it draws is a benchmark, not a test: ``bench/firstdraw.py`` (docs/performance.md).
"""

from __future__ import annotations

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
# Segments of the chart by trace name: a WebGL trace holds one segment as [start, end, null] in x.
SEGMENTS = """() => Object.fromEntries(document.getElementById("gantt").data
    .filter((t) => t.type === "scattergl" && t.mode === "lines" && t.name !== "finding")
    .map((t) => [t.name, t.x.length / 3]))"""


def test_ten_thousand_pod_namespace_day_draws_every_row_with_a_level_of_detail(
    live_server_asgi: Any, admin_user: Any, request: Any
) -> None:
    """GIVEN 10,000 pods of one namespace over a day, each setup → terminating → cleanup (a fifth
    inferred) WHEN the namespace page opens THEN it draws 10,000 rows with WebGL, and at the whole day (a
    pixel is about a minute) the termination and cleanup of each pod (under 45 s) lengthen its setup
    segment: one segment a pod. Zoomed to ten minutes (a pixel is under a second) every termination
    (1-40 s) is drawn as its own segment."""
    make_pods(Cluster.objects.create(name="scale"), pods=PODS)  # before Playwright's loop starts
    assert Interval.objects.filter(cluster__name="scale", state="terminating").count() == PODS
    page = request.getfixturevalue("browser_page")
    base = live_server_asgi.url
    login(page, base, "root")

    page.goto(f"{base}/c/scale/ns/big/")
    wait_for_js(page, "window.__podlifeDraws && window.__podlifeDraws.length > 0", timeout_s=60)
    assert page.get_attribute("#gantt", "data-renderer") == "webgl"
    assert page.get_attribute("#gantt", "data-rows") == str(PODS)
    assert page.locator("#gantt .main-svg").count() > 0 and page.locator("#gantt canvas").count() > 0
    assert page.text_content("#pod-count") == f"{PODS} pods (first 2,000 listed)"
    assert page.locator("#pods-body tr").count() == 2000
    day = page.evaluate(SEGMENTS)
    assert day == {"setup": PODS * 4 // 5, "setup (inferred)": PODS // 5}, day
    page.screenshot(path=str(SHOTS / "namespace-10000.png"))

    page.goto(f"{base}/c/scale/ns/big/?x0=2024-06-07T12:00:00Z&x1=2024-06-07T12:10:00Z")
    wait_for_js(page, "window.__podlifeDraws && window.__podlifeDraws.length > 0", timeout_s=60)
    zoomed = page.evaluate(SEGMENTS)
    assert zoomed["terminating"] + zoomed["terminating (inferred)"] == PODS, zoomed
    assert sum(zoomed.values()) > PODS * 2, zoomed  # most cleanups (0.1-5 s) are drawn too
    assert page.errors == []
