"""Freshness of the worker lane: "kubelet evidence pending since …" when the API is ahead of the kubelet.

GIVEN node-a whose newest kubelet evidence is a pod worker's line at T0+7.3 s (web-killed), and pod ``late-0`` on
it whose API snapshots go on to phase Succeeded at T0+90 s (kubelet logs arrive 30–60 s after the API)
WHEN the node's window API, the node page and the pod page are read
THEN the pod's row says kubelet evidence is pending since T0+7.3 s, the worker lane ends in a hatched
"kubelet evidence pending" tail instead of a confident state, the node table's worker column says so, and
its open findings say they depend on that evidence; a pod fully covered by kubelet evidence is not pending
and its worker column gives its state with the age of the evidence.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from django.test import Client

from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.lifecycle.factories import ctr, pod
from tests.web.conftest import CHROMIUM, UID_OK, login
from tests.web.factories import retarget
from timelines import freshness
from timelines.models import Cluster, Pod

pytestmark = pytest.mark.django_db(transaction=True)

LATE = "dddddddd-0000-4000-8000-0000000000f1"
KUBELET_UNTIL = "2024-06-07T06:54:47.300000+00:00"  # T0 + 7.3 s: the newest kubelet line on node-a
WINDOW = "from=2024-06-07T06:50:00Z&to=2024-06-07T07:00:00Z"


def late_pod() -> list[Any]:
    """A normal start (API + kubelet), then API snapshots only: Running at 60 s, Succeeded at 90 s."""
    obs = scenarios.normal_start()
    done = [ctr(state="terminated", reason="Completed", exit_code=0, started=4, finished=85)]
    obs += [
        pod(
            scenarios.UID,
            105,
            60.0,
            phase="Running",
            start_time=2,
            containers=[ctr(state="running", started=4)],
        ),
        pod(scenarios.UID, 106, 90.0, phase="Succeeded", start_time=2, containers=done),
    ]
    return retarget(obs, uid=LATE, name="late-0")


@pytest.fixture
def late(lab: dict[str, Any]) -> Cluster:
    ingest_observations("lab", late_pod())
    return lab["lab"]


def test_pending_since_compares_the_api_with_the_nodes_kubelet_evidence(late: Cluster, settings: Any) -> None:
    settings.PODLIFE_KUBELET_PENDING_SLACK_S = 10
    p = Pod.objects.get(uid=LATE)
    fresh = freshness.pod_freshness(late, p)
    assert fresh == {"kubelet_until": KUBELET_UNTIL, "pending_since": KUBELET_UNTIL}
    ok = freshness.pod_freshness(late, Pod.objects.get(uid=UID_OK))
    assert ok == {"kubelet_until": KUBELET_UNTIL, "pending_since": None}  # API at 5.3 s: within the slack
    settings.PODLIFE_KUBELET_PENDING_SLACK_S = 100  # the API's 90 s lead is within a generous slack
    assert freshness.pod_freshness(late, p)["pending_since"] is None
    # No kubelet evidence on a node at all: nothing is pending (the lane is inferred from the API already).
    assert freshness.pending_since(datetime(2024, 6, 7, 7, tzinfo=UTC), None) is None


def test_a_namespace_reader_learns_nothing_of_other_namespaces_kubelet_activity(late: Cluster) -> None:
    """node-a's newest kubelet line is web-killed's (default, T0+7.3 s); a reader of ``secret`` only gets
    the newest line of its own vault-0 (T0+4.101 s)."""
    since = datetime(2024, 6, 6, tzinfo=UTC)
    everything = freshness.kubelet_evidence_until(late, ["node-a"], since=since)
    secret_only = freshness.kubelet_evidence_until(late, ["node-a"], since=since, namespaces={"secret"})
    assert everything["node-a"].isoformat() == KUBELET_UNTIL
    assert secret_only["node-a"] == datetime(2024, 6, 7, 6, 54, 44, 101000, tzinfo=UTC)
    assert freshness.kubelet_evidence_until(late, ["node-a"], since=since, namespaces=set()) == {}


def test_window_api_carries_freshness_per_pod(late: Cluster, admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    response = client.get(f"/api/v1/clusters/lab/nodes/node-a/timeline?{WINDOW}")
    assert response.status_code == 200, response.content[:300]
    data = orjson.loads(response.content)
    rows = {p["uid"]: p for p in data["pods"]}
    assert rows[LATE]["freshness"] == {"kubelet_until": KUBELET_UNTIL, "pending_since": KUBELET_UNTIL}
    assert rows[UID_OK]["freshness"]["pending_since"] is None
    assert data["kubelet_until"] == {"node-a": KUBELET_UNTIL}


TRACES = """() => document.getElementById("gantt").data.map((t) => ({name: t.name, y: t.y,
  base: t.base, hover: (t.hovertext || []).join(" | "), pattern: ((t.marker || {}).pattern || {}).shape}))"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)")
def test_pages_draw_a_pending_tail_and_say_so(
    live_server_asgi: Any, admin_user: Any, lab: Any, browser_page: Any
) -> None:
    server, page, base = live_server_asgi, browser_page, live_server_asgi.url
    server.run_in_loop(ingest_observations, "lab", late_pod())
    login(page, base, "root")

    page.goto(f"{base}/c/lab/nodes/node-a/?{WINDOW}")
    page.wait_for_selector(f'#pods-body tr[data-uid="{LATE}"]')
    late_row = page.inner_text(f'#pods-body tr[data-uid="{LATE}"] td.worker-state')
    assert late_row.startswith("kubelet evidence pending since 2024-06-07 06:54:47.300000"), late_row
    assert page.get_attribute(f'#pods-body tr[data-uid="{LATE}"]', "data-pending") == "1"
    ok_row = page.inner_text(f'#pods-body tr[data-uid="{UID_OK}"] td.worker-state')
    assert ok_row.startswith("running") and "kubelet evidence" in ok_row and " old" in ok_row, ok_row
    tails = [t for t in page.evaluate(TRACES) if t["name"] == "kubelet evidence pending"]
    assert len(tails) == 1 and len(tails[0]["y"]) == 1 and tails[0]["pattern"] == "/"
    assert tails[0]["base"] == ["2024-06-07 06:54:47.300000"]
    assert "pending</b> since 2024-06-07 06:54:47.300000" in tails[0]["hover"]

    page.goto(f"{base}/c/lab/pods/{LATE}/")
    page.wait_for_selector("#gantt .main-svg")
    assert "kubelet evidence pending since" in page.inner_text("#freshness")
    tails = [t for t in page.evaluate(TRACES) if t["name"] == "kubelet evidence pending"]
    assert len(tails) == 1 and tails[0]["y"] == [0]  # on the worker lane (the first row) only
    page.goto(f"{base}/c/lab/pods/{UID_OK}/")
    page.wait_for_selector("#gantt .main-svg")
    assert not [t for t in page.evaluate(TRACES) if t["name"] == "kubelet evidence pending"]
    assert "up to" in page.inner_text("#freshness")
    assert page.errors == []
