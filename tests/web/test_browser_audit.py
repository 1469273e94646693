"""The pod page's Gantt says who evicted a pod, in Chromium (issue #16 d3).

GIVEN the drain of tests/fixtures/audit (four evictions refused by PDB web, then granted) ingested from
the audit log alone WHEN the evicted pod's page opens THEN hovering its terminating bars names the drain's
user and the four refusals, and its markers say who asked for what.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.audit.helpers import parsed
from tests.flow import ingest as ingest_observations
from tests.web.conftest import CHROMIUM, login

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]
EVICTED = "0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3"

HOVERS = """() => document.getElementById("gantt").data
    .map((t) => ({name: t.name, hover: (t.hovertext || []).join(" | ")}))"""


def test_the_gantt_hover_names_who_evicted_the_pod(
    live_server_asgi: Any, admin_user: Any, lab: Any, browser_page: Any
) -> None:
    server, page, base = live_server_asgi, browser_page, live_server_asgi.url
    server.run_in_loop(ingest_observations, "lab", parsed("drain-refused-evictions.jsonl").observations)
    login(page, base, "root")
    page.goto(f"{base}/c/lab/pods/{EVICTED}/")
    page.wait_for_selector("#gantt .main-svg")
    traces = page.evaluate(HOVERS)
    terminating = [t for t in traces if t["name"].startswith("terminating")]
    assert terminating, [t["name"] for t in traces]
    assert all(
        "evicted by kubernetes-admin via kubectl after 4 refused evictions" in t["hover"] for t in terminating
    )
    markers = " | ".join(t["hover"] for t in traces if t["name"] not in [x["name"] for x in terminating])
    assert "eviction by kubernetes-admin via kubectl granted (201) after 4 earlier attempts" in markers
    assert "EvictionRefused: eviction by kubernetes-admin via kubectl refused (429)" in markers
    table = page.inner_text("#markers")
    assert "deleted by system:node:worker-1 (grace 0s)" in table
    assert page.errors == []
