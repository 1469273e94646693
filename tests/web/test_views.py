"""Pages: login required, grants narrow every page, hostile names render as text."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.web.conftest import PASSWORD, UID_EVIL, UID_KILLED, UID_OK, UID_SECRET
from tests.web.factories import HOSTILE

pytestmark = pytest.mark.django_db


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    "url", ["/", "/findings/", "/c/lab/", "/c/lab/nodes/node-a/", f"/c/lab/pods/{UID_OK}/"]
)
def test_every_page_redirects_anonymous_users_to_login(lab: Any, url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_login_page_logs_in_and_lands_on_the_overview(viewer: Any) -> None:
    client = Client()
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b'name="password"' in page.content
    response = client.post("/accounts/login/", {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    overview = client.get("/")
    assert b"What it collects" in overview.content  # the former landing page stays visible
    assert b'href="/c/lab/"' in overview.content
    assert b'href="/c/other/"' not in overview.content


def test_overview_counts_findings_by_kind_and_severity(admin_user: Any, lab: Any) -> None:
    content = logged_in(admin_user).get("/").content.decode()
    assert "killed_during_setup" in content
    assert "/c/other/" in content


def test_cluster_page_lists_nodes_namespaces_and_only_readable_pods(viewer: Any) -> None:
    client = logged_in(viewer)
    content = client.get("/c/lab/").content.decode()
    assert "/c/lab/nodes/node-a/" in content
    assert "/c/lab/ns/default/" in content and "/c/lab/ns/evil/" in content
    assert "/c/lab/ns/secret/" not in content
    found = client.get("/c/lab/?q=vault").content.decode()
    assert "No pod you may read matches" in found
    found = client.get("/c/lab/?q=web-").content.decode()
    assert UID_OK in found and UID_KILLED in found


def test_search_by_uid_prefix_owner_and_node(admin_user: Any, lab: Any) -> None:
    client = logged_in(admin_user)
    assert UID_SECRET in client.get(f"/c/lab/?q={UID_SECRET[:20]}").content.decode()
    assert UID_OK in client.get("/c/lab/?q=web-7d9").content.decode()  # owner ReplicaSet
    assert UID_SECRET in client.get("/c/lab/?q=node-a").content.decode()


def test_unreadable_cluster_namespace_and_pod_are_404(viewer: Any) -> None:
    client = logged_in(viewer)
    assert client.get("/c/other/").status_code == 404
    assert client.get("/c/lab/ns/secret/").status_code == 404
    assert client.get(f"/c/lab/pods/{UID_SECRET}/").status_code == 404
    assert client.get(f"/c/lab/pods/{UID_OK}/").status_code == 200


def test_user_without_grants_sees_nothing(nobody: Any, lab: Any) -> None:
    client = logged_in(nobody)
    assert b"No cluster you may read yet" in client.get("/").content
    assert client.get("/c/lab/").status_code == 404
    assert b"killed_during_setup" not in client.get("/findings/").content


def test_hostile_pod_name_is_escaped_everywhere(viewer: Any) -> None:
    client = logged_in(viewer)
    for url in (f"/c/lab/pods/{UID_EVIL}/", "/c/lab/?q=img", "/c/lab/ns/evil/"):
        content = client.get(url).content.decode()
        assert HOSTILE not in content, url
    pod_page = client.get(f"/c/lab/pods/{UID_EVIL}/").content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in pod_page
    # In the JSON handed to the page script, < and > are \u003C / \u003E (json_script).
    assert "\\u003Cimg src=x onerror=alert(1)\\u003E" in pod_page


def test_pod_page_links_findings_to_their_evidence_observations(viewer: Any) -> None:
    content = logged_in(viewer).get(f"/c/lab/pods/{UID_KILLED}/").content.decode()
    assert "killed_during_setup" in content
    import re

    link = re.search(r'data-evidence="([\d,]+)"', content)
    assert link, "finding has no evidence link"
    for obs_id in link.group(1).split(","):
        assert f'id="obs-{obs_id}"' in content


def test_pod_page_diffs_two_observations(viewer: Any) -> None:
    from timelines.models import Observation

    ids = list(
        Observation.objects.filter(pod_uid=UID_KILLED, kind="pod")
        .order_by("observed_at")
        .values_list("id", flat=True)
    )
    content = logged_in(viewer).get(f"/c/lab/pods/{UID_KILLED}/?a={ids[0]}&b={ids[-1]}").content.decode()
    assert f"Changes from observation {ids[0]} to {ids[-1]}" in content
    assert "phase" in content and "Failed" in content


def test_findings_page_filters_by_kind_severity_cluster_namespace_and_time(admin_user: Any, lab: Any) -> None:
    client = logged_in(admin_user)
    assert "web-killed" in client.get("/findings/?kind=killed_during_setup").content.decode()
    assert "web-killed" not in client.get("/findings/?kind=crash_loop").content.decode()
    assert "web-killed" not in client.get("/findings/?namespace=evil").content.decode()
    assert "web-killed" not in client.get("/findings/?cluster=other").content.decode()
    assert "web-killed" not in client.get("/findings/?from=2030-01-01T00:00:00Z").content.decode()
    bad = client.get("/findings/?from=yesterday").content.decode()
    assert "from: time &#x27;yesterday&#x27; is not ISO 8601" in bad


def test_node_page_carries_api_and_websocket_urls(viewer: Any) -> None:
    content = logged_in(viewer).get("/c/lab/nodes/node-a/").content.decode()
    assert "/api/v1/clusters/lab/nodes/node-a/timeline" in content
    assert "/ws/v1/nodes/lab/node-a/" in content
    assert "/vendor/plotly.min.js" in content


def test_plotly_is_served_from_the_installed_package_gzipped_and_cached(db: Any) -> None:
    client = Client()
    response = client.get("/vendor/plotly.min.js", HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
    import gzip

    assert b"plotly" in gzip.decompress(response.content)[:2000].lower()
    assert client.get("/vendor/plotly.min.js", HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304


def test_workload_and_pdb_pages(admin_user: Any, lab: Any) -> None:
    from datetime import UTC, datetime

    from timelines.models import PDBStatusSample, PodDisruptionBudget, Workload, WorkloadStatusSample

    t = datetime(2024, 6, 7, 6, 54, 40, tzinfo=UTC)
    rs = Workload.objects.create(
        cluster=lab["lab"], kind="ReplicaSet", uid="rs-uid-1", namespace="default", name="web-7d9"
    )
    WorkloadStatusSample.objects.create(workload=rs, at=t, replicas=2, ready=1, updated=2, available=1)
    pdb = PodDisruptionBudget.objects.create(
        cluster=lab["lab"],
        uid="pdb-1",
        namespace="default",
        name="web-pdb",
        selector={"matchLabels": {"app": "web"}},
    )
    PDBStatusSample.objects.create(
        pdb=pdb,
        at=t,
        disruptions_allowed=0,
        current_healthy=1,
        desired_healthy=2,
        expected_pods=2,
        reason="InsufficientPods",
    )
    client = logged_in(admin_user)
    page = client.get("/c/lab/ns/default/ReplicaSet/web-7d9/").content.decode()
    assert "/api/v1/clusters/lab/workloads/default/ReplicaSet/web-7d9/timeline" in page
    assert '"status_figure"' in page
    pdb_page = client.get("/c/lab/ns/default/pdb/web-pdb/").content.decode()
    assert "still blocked" in pdb_page and "InsufficientPods" in pdb_page
    assert f"/c/lab/pods/{UID_OK}/" in pdb_page  # covered by the selector
    assert f"/c/lab/pods/{UID_SECRET}/" not in pdb_page  # other namespace
    assert client.get("/c/lab/ns/default/Job/x/").status_code == 404
    window = client.get("/api/v1/clusters/lab/workloads/default/ReplicaSet/web-7d9/timeline").json()
    assert {p["uid"] for p in window["pods"]} == {
        UID_OK,
        UID_KILLED,
    }  # same owner UID in "secret": not its pod
    status = client.get("/api/v1/clusters/lab/workloads/default/ReplicaSet/web-7d9/status").json()
    assert status["samples"][0]["ready"] == 1
