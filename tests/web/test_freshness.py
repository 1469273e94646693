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
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard import freshness
from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.lifecycle.factories import T0, ctr, pod, worker
from tests.lifecycle.test_kubelet_truth import parse
from tests.web.conftest import CHROMIUM, UID_OK, login
from tests.web.factories import retarget
from timelines.lifecycle.observation import Transition
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
    assert late_row.startswith("kubelet evidence pending since 2024-06-07 06:54:47.300"), late_row
    assert page.get_attribute(f'#pods-body tr[data-uid="{LATE}"]', "data-pending") == "1"
    ok_row = page.inner_text(f'#pods-body tr[data-uid="{UID_OK}"] td.worker-state')
    assert ok_row.startswith("running") and "kubelet evidence" in ok_row and " old" in ok_row, ok_row
    tails = [t for t in page.evaluate(TRACES) if t["name"] == "kubelet evidence pending"]
    assert len(tails) == 1 and len(tails[0]["y"]) == 1 and tails[0]["pattern"] == "/"
    assert tails[0]["base"] == ["2024-06-07 06:54:47.300000"]
    assert "pending</b> since 2024-06-07 06:54:47.300" in tails[0]["hover"]

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


# --- a kubelet's final status line ends the wait (real excerpt: tests/fixtures/real/kubelet/README.md) ------------
KUEUE = Path(__file__).resolve().parents[1] / "fixtures/real/kubelet/kueue-4669-kind-1.31-v3.journal"
KUEUE_UID = "8bb7de3e-72f0-4102-adbd-53897040775e"  # pod-e2e-dx5dg/group-0 on kind-worker


def kueue_lines(until: str | None = None) -> list[Any]:
    """The real journal's observations; ``until``: only its lines before the first one holding that text."""
    lines = KUEUE.read_text(encoding="utf-8").splitlines()
    if until is not None:
        lines = lines[: next(i for i, line in enumerate(lines) if until in line)]
    return parse([lines], node="kind-worker", year=2025)


def api_after_the_kubelet(seconds_after_last_line: float) -> list[Any]:
    """SYNTHETIC: the API's view of group-0 some time after the journal's last line (10:22:16.943833), as a
    watch sees the Failed pod before its final removal; it makes the API newer than any kubelet evidence."""
    seen = (
        datetime(2025, 3, 18, 10, 22, 16, 943833, tzinfo=UTC) - T0
    ).total_seconds() + seconds_after_last_line
    done = [ctr(state="terminated", reason="Error", exit_code=137, started=seen - 55, finished=seen - 17)]
    return [
        pod(
            KUEUE_UID,
            900,
            seen,
            phase="Failed",
            node="kind-worker",
            namespace="pod-e2e-dx5dg",
            name="group-0",
            created=seen - 60,
            start_time=seen - 58,
            deletion=seen - 50,
            deletion_grace=1,
            containers=done,
        )
    ]


def test_a_pod_whose_kubelet_wrote_its_final_status_has_nothing_pending(lab: Any, settings: Any) -> None:
    """GIVEN the real kueue-4669 journal, whose kubelet ends group-0 with "The pod termination is finished as
    SyncTerminatedPod completes its execution" (10:22:16.784665), and the API seeing the pod 40 s after the
    journal's last line WHEN its freshness is read THEN nothing is pending: that kubelet writes no more
    status for the pod, so no later kubelet evidence is coming. GIVEN the same journal cut before its final
    status lines THEN the worker lane waits for kubelet evidence from the last line kept on."""
    settings.PODLIFE_KUBELET_PENDING_SLACK_S = 10
    ingest_observations("lab", kueue_lines() + api_after_the_kubelet(40))
    cluster = Cluster.objects.get(name="lab")
    p = Pod.objects.get(uid=KUEUE_UID)
    assert p.last_seen is not None and p.last_seen > datetime(2025, 3, 18, 10, 22, 56, tzinfo=UTC)
    assert freshness.pod_freshness(cluster, p) == {
        "kubelet_until": "2025-03-18T10:22:16.943833+00:00",
        "pending_since": None,
    }
    response = Client()
    response.force_login(User.objects.create_superuser("fresh-root", password="x"))
    window = "from=2025-03-18T10:20:00Z&to=2025-03-18T10:30:00Z"
    data = orjson.loads(response.get(f"/api/v1/clusters/lab/nodes/kind-worker/timeline?{window}").content)
    assert [p["freshness"]["pending_since"] for p in data["pods"] if p["uid"] == KUEUE_UID] == [None]


def test_a_pod_cut_before_its_final_status_lines_is_pending(lab: Any, settings: Any) -> None:
    settings.PODLIFE_KUBELET_PENDING_SLACK_S = 10
    cut = kueue_lines(
        until='"Status for pod updated successfully" pod="pod-e2e-dx5dg/group-0" statusVersion=4'
    )
    ingest_observations("lab", cut + api_after_the_kubelet(40))
    fresh = freshness.pod_freshness(Cluster.objects.get(name="lab"), Pod.objects.get(uid=KUEUE_UID))
    assert fresh["pending_since"] is not None and fresh["pending_since"] < "2025-03-18T10:22:16.78"


def test_a_uid_started_again_after_its_final_status_waits_again(lab: Any, settings: Any) -> None:
    """GIVEN the real journal's final status for group-0 and then (SYNTHETIC) "Pod is being synced for the
    first time" for the same UID (a static pod's reused UID starts a new worker) THEN that new worker's
    evidence is awaited again: the pod is pending once the API is ahead."""
    settings.PODLIFE_KUBELET_PENDING_SLACK_S = 10
    again = (datetime(2025, 3, 18, 10, 22, 20, tzinfo=UTC) - T0).total_seconds()
    restart = worker(
        KUEUE_UID, again, Transition.FIRST_SEEN, node="kind-worker", pod_ref="pod-e2e-dx5dg/group-0"
    )
    ingest_observations("lab", kueue_lines() + [restart] + api_after_the_kubelet(40))
    fresh = freshness.pod_freshness(Cluster.objects.get(name="lab"), Pod.objects.get(uid=KUEUE_UID))
    assert fresh["pending_since"] == "2025-03-18T10:22:20.000000+00:00"
