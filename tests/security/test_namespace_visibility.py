"""What a namespace grant reveals (issue #18, finding 9; decided in docs/security.md): the nodes that the
namespaces' pods ran on and nothing of other nodes, no node lanes, no collector error texts or per-node
rows, and a pod of another namespace answers 404 everywhere, export included, exactly like an unknown UID.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from collectors.models import CollectorState
from tests.flow import ingest as ingest_observations
from tests.lifecycle.factories import node as node_observation
from tests.web.conftest import UID_SECRET
from tests.web.factories import started_pod
from timelines.models import Cluster, Interval

pytestmark = pytest.mark.django_db

UID_HIDDEN = "aaaaaaaa-0000-4000-8000-0000000000f1"
LEAKY_ERROR = f"watch failed on pod secret/vault-0 ({UID_SECRET}) on node-hidden"
WINDOW = {"since": "2024-06-07T06:00:00Z", "until": "2024-06-07T08:00:00Z"}


@pytest.fixture
def hidden(lab: dict[str, Any]) -> Cluster:
    """Beside the lab: a node only a ``secret`` pod ran on, a node no pod ran on, collector rows with an
    error that quotes a secret pod, and the node lanes of node-a."""
    c = lab["lab"]
    ingest_observations("lab", started_pod(UID_HIDDEN, "vault-1", namespace="secret", node="node-hidden"))
    ingest_observations("lab", [node_observation(0.0, name="node-empty"), node_observation(0.0)])
    now = timezone.now()
    CollectorState.objects.create(
        cluster=c,
        resource="pods",
        last_event_at=now,
        last_error=LEAKY_ERROR,
        last_error_at=now,
        errors_total=3,
    )
    CollectorState.objects.create(
        cluster=c, resource="kubelet-logs:node-hidden", note="skipped: node-hidden refused (HTTP 403)"
    )
    assert Interval.objects.filter(cluster=c, pod_uid=None, node="node-a", lane__startswith="node:").exists()
    return c


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_namespace_reader_sees_only_the_nodes_its_pods_ran_on(
    viewer: Any, admin_user: Any, hidden: Any
) -> None:
    reader, admin = client_for(viewer), client_for(admin_user)
    assert [n["name"] for n in reader.get("/api/v1/clusters/lab/nodes").json()["nodes"]] == ["node-a"]
    assert {n["name"] for n in admin.get("/api/v1/clusters/lab/nodes").json()["nodes"]} == {
        "node-a",
        "node-empty",
        "node-hidden",
    }
    page = reader.get("/c/lab/").content.decode()
    assert "node-a" in page and "node-hidden" not in page and "node-empty" not in page
    counts = {c["name"]: c["counts"] for c in reader.get("/api/v1/clusters").json()["clusters"]}
    assert counts["lab"]["nodes"] == 1
    assert reader.get("/c/lab/", {"q": "node-hidden"}).content.decode().count("vault-1") == 0


@pytest.mark.parametrize("node", ["node-hidden", "node-empty", "never-seen"])
def test_other_nodes_answer_404_like_an_unknown_node(
    viewer: Any, admin_user: Any, hidden: Any, node: str
) -> None:
    reader = client_for(viewer)
    page = reader.get(f"/c/lab/nodes/{node}/")
    api = reader.get(f"/api/v1/clusters/lab/nodes/{node}/timeline")
    export = reader.get("/c/lab/export", {"node": node, **WINDOW})
    assert (page.status_code, api.status_code, export.status_code) == (404, 404, 404)
    assert api.json()["error"]["message"] == f"no node '{node}' in cluster 'lab' that you may read"
    admin = client_for(admin_user)
    expected = 404 if node == "never-seen" else 200
    assert admin.get(f"/c/lab/nodes/{node}/").status_code == expected
    assert admin.get(f"/api/v1/clusters/lab/nodes/{node}/timeline").status_code == expected


def test_node_lanes_need_the_whole_cluster(viewer: Any, admin_user: Any, hidden: Any) -> None:
    url = "/api/v1/clusters/lab/nodes/node-a/timeline"
    assert client_for(admin_user).get(url, {"lanes": "all"}).json()["node_lanes"]
    body = client_for(viewer).get(url, {"lanes": "all"}).json()
    assert body["node_lanes"] == {} and body["pods"]


def test_collector_health_keeps_counts_but_no_error_text_for_a_namespace_reader(
    viewer: Any, admin_user: Any, hidden: Any
) -> None:
    reader, admin = client_for(viewer), client_for(admin_user)
    rows = reader.get("/api/v1/clusters").json()["collectors"]
    assert [(r["resource"], r["errors_total"]) for r in rows] == [("pods", 3)]
    assert rows[0]["last_error"] == "(hidden: needs a grant on the whole cluster)"
    for page in (reader.get("/").content.decode(), reader.get("/c/lab/").content.decode()):
        assert UID_SECRET not in page and "vault-0" not in page and "node-hidden" not in page
    full = admin.get("/api/v1/clusters").json()["collectors"]
    # Per-node pull rows are bookkeeping, summarized by their cluster's row (dashboard.queries.collector_health).
    assert {r["resource"] for r in full} == {"pods"}
    assert LEAKY_ERROR in admin.get("/").content.decode()


def test_export_of_an_unreadable_pod_is_404_like_an_unknown_uid(viewer: Any, hidden: Any) -> None:
    reader = client_for(viewer)
    secret = reader.get("/c/lab/export", {"pod": UID_SECRET, **WINDOW})
    unknown = reader.get("/c/lab/export", {"pod": "ffffffff-0000-4000-8000-000000000000", **WINDOW})
    assert secret.status_code == unknown.status_code == 404
    assert secret.json()["error"] == f"no pod with UID '{UID_SECRET}' in cluster 'lab'"
    job = reader.post("/c/lab/export/jobs", {"pod": UID_SECRET, **WINDOW})
    assert job.status_code == 404
    assert reader.get(f"/api/v1/clusters/lab/pods/{UID_SECRET}/timeline").status_code == 404
    assert reader.get(f"/c/lab/pods/{UID_SECRET}/").status_code == 404


def test_hidden_rows_do_not_reach_the_reader_over_time(viewer: Any, hidden: Any) -> None:
    """A later error on another node keeps the same redaction (the rule is per row, not a snapshot)."""
    CollectorState.objects.filter(resource="pods").update(
        last_error="list failed: pods secret/vault-1 on node-hidden",
        last_error_at=timezone.now() + timedelta(seconds=1),
    )
    text = client_for(viewer).get("/").content.decode()
    assert "vault-1" not in text and "node-hidden" not in text


@pytest.mark.parametrize(
    "url",
    [
        "/c/lab/nodes/never-seen/",
        "/c/lab/ns/never-seen/",
        "/c/lab/pods/ffffffff-0000-4000-8000-000000000000/",
        "/c/lab/pods/never/seen/",
        "/c/nope/",
        "/api/v1/clusters/lab/nodes/never-seen/timeline",
        "/api/v1/clusters/lab/namespaces/never-seen/timeline",
    ],
)
def test_unknown_nodes_namespaces_and_pods_are_404_never_an_empty_page(
    admin_user: Any, lab: Any, url: str
) -> None:
    """Issue #15: even for a superuser, a name nothing stored carries is 404, not an empty 200 page."""
    answer = client_for(admin_user).get(url)
    assert answer.status_code == 404
    if url.startswith("/api/"):
        assert "never-seen" in answer.json()["error"]["message"]
    else:
        assert b"<h1>Not found</h1>" in answer.content


def test_a_whole_cluster_grant_reads_every_namespace_and_a_namespace_grant_only_its_own() -> None:
    """GIVEN a reader granted the whole of one cluster (a grant with no namespace) and some namespaces of
    another WHEN it asks about namespaces THEN it reads every namespace of the first, the namespaces
    granted and no other of the second, and nothing of a third cluster (timelines/web/access.py,
    docs/security.md "What a namespace grant reveals"). Unsaved clusters: only their ids are read."""
    from dashboard.web.access import ALL, Access

    whole, some, other = Cluster(id=1, name="whole"), Cluster(id=2, name="some"), Cluster(id=3, name="other")
    reader = Access(namespaces={whole.id: ALL, some.id: {"shop"}})
    assert reader.can_namespace(whole, "shop") and reader.can_namespace(whole, "kube-system")
    assert reader.whole_cluster(whole) and not reader.whole_cluster(some)
    assert reader.can_namespace(some, "shop") and not reader.can_namespace(some, "kube-system")
    assert not reader.can_namespace(some, None)  # what belongs to no namespace needs the whole cluster
    assert not reader.can_namespace(other, "shop") and not reader.can_cluster(other)
    assert Access(superuser=True).can_namespace(other, "anything")
