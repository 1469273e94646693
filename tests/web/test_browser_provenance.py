"""The pod page draws each interval source its own way, in Chromium.

GIVEN a pod known only from a kubelet's V2 lines (no pod-worker line: its worker lane is inferred from
kubelet lines, its cleanup's end not in the evidence) and a pod known only from the API WHEN their pages
open THEN the Gantt's worker bars are cross-hatched "(from kubelet lines)" for the first and hatched
"(inferred)" for the second, never drawn like observed bars, and the hover of a bound the evidence does
not hold says so.
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from collectors.parsers.kubelet_log import parse_kubelet_log
from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.web.conftest import CHROMIUM, login
from tests.web.factories import retarget

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]
V2_LOG = Path(__file__).resolve().parents[1] / "fixtures" / "kubelet" / "v1.26-v2-eviction-shutdown.journal"
CACHE = "0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a"  # default/cache-0 in that log
API_ONLY = "aaaaaaaa-0000-4000-8000-0000000000a1"

WORKER_TRACES = """() => document.getElementById("gantt").data
    .filter((t) => t.type === "bar" && t.name !== "finding")
    .map((t) => ({name: t.name, pattern: (t.marker.pattern || {}).shape || "", opacity: t.opacity,
                  hover: (t.hovertext || []).join(" | ")}))"""


def test_kubelet_lines_and_api_guesses_are_drawn_apart(
    live_server_asgi: Any, admin_user: Any, lab: Any, browser_page: Any
) -> None:
    server, page, base = live_server_asgi, browser_page, live_server_asgi.url
    parsed = parse_kubelet_log(V2_LOG.read_text().splitlines(), node="node-a", year=2024, tz=UTC)
    server.run_in_loop(ingest_observations, "lab", parsed.observations + parsed.processes)
    server.run_in_loop(ingest_observations, "lab", retarget(scenarios.api_only(), uid=API_ONLY, name="api-0"))
    login(page, base, "root")

    page.goto(f"{base}/c/lab/pods/{CACHE}/")
    page.wait_for_selector("#gantt .main-svg")
    traces = page.evaluate(WORKER_TRACES)
    worker = {
        t["name"]: t
        for t in traces
        if t["name"].split(" ")[0] in ("setup", "running", "terminating", "cleanup")
    }
    assert set(worker) == {
        "setup (from kubelet lines)",
        "running (from kubelet lines)",
        "terminating (from kubelet lines)",
        "cleanup (from kubelet lines)",
    }
    assert {t["pattern"] for t in worker.values()} == {"x"}
    assert {t["opacity"] for t in worker.values()} == {0.8}
    # The shutdown kill's cleanup began where PLEG saw the container die; its end is not in a V2 log.
    assert "end unknown" in worker["cleanup (from kubelet lines)"]["hover"]

    page.goto(f"{base}/c/lab/pods/{API_ONLY}/")
    page.wait_for_selector("#gantt .main-svg")
    api_only = [t for t in page.evaluate(WORKER_TRACES) if t["name"].endswith("(inferred)")]
    assert api_only and {t["pattern"] for t in api_only} == {"/"}
    assert page.errors == []
