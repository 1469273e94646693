"""Pages at fleet scale (issue #17 d5), for correctness only (speed: bench/scale_pages.py): the overview's
grouped counts, pod search by each key with hostile text refused, and the level of detail's bands adding
up to the full data."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from dashboard import fleet, queries
from tests.stored import put
from tests.web.bulk import DAY0, make_pods
from tests.web.conftest import grant
from timelines.lifecycle.timeline import format_time
from timelines.models import Cluster, Finding, Interval, Node, Pod

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet_cluster(db: Any) -> Cluster:
    """200 pods in ``big``, 100 in ``other`` (names job-NNNNNN, owners rs-0..rs-39, nodes node-0000..9,
    a slow_cleanup finding on every fiftieth pod)."""
    c = Cluster.objects.create(name="fleet")
    make_pods(c, pods=200, namespace="big", nodes=10)
    make_pods(c, pods=100, namespace="other", nodes=10, seed=8)
    return c


def uids(pods: list[Pod]) -> set[str]:
    return {p.uid for p in pods}


def expect(c: Cluster, **filters: Any) -> set[str]:
    return set(Pod.objects.filter(cluster=c, **filters).values_list("uid", flat=True))


def test_search_finds_pods_by_each_key(fleet_cluster: Cluster) -> None:
    c = fleet_cluster
    found = fleet.search_pods(c, "name:job-00001", None, limit=1000)
    assert uids(found) == expect(c, name__startswith="job-00001") and len(found) == 20
    assert uids(fleet.search_pods(c, "uid:bulk-other-00000", None)) == {
        f"bulk-other-00000{i}" for i in range(10)
    }
    owner = expect(c, owner_name__startswith="rs-3")
    assert len(owner) == 78 and uids(fleet.search_pods(c, "owner:rs-3", None, limit=1000)) == owner
    assert uids(fleet.search_pods(c, "node:node-0003", None, limit=1000)) == expect(c, node="node-0003")
    slow = set(Finding.objects.filter(cluster=c, kind="slow_cleanup").values_list("pod_uid", flat=True))
    assert len(slow) == 6 and uids(fleet.search_pods(c, "finding:slow", None)) == slow
    assert uids(fleet.search_pods(c, "ns:oth", None, limit=1000)) == expect(c, namespace="other")
    # A bare prefix matches any key; terms combine; the text is lowercased (Kubernetes names are).
    assert uids(fleet.search_pods(c, "slow_cleanup", None)) == slow
    assert uids(fleet.search_pods(c, "rs-39", None, limit=1000)) == expect(c, owner_name="rs-39")
    assert uids(fleet.search_pods(c, "ns:big FINDING:slow", None)) == {u for u in slow if "-big-" in u}
    assert uids(fleet.search_pods(c, "NAME:JOB-000010", None)) == expect(c, name="job-000010")
    # LIKE wildcards in the text are literal characters, not patterns.
    assert fleet.search_pods(c, "name:job_", None) == []
    # Readable namespaces narrow in SQL, before the limit; newest first.
    narrowed = fleet.search_pods(c, "job-", {"other"}, limit=1000)
    assert uids(narrowed) == expect(c, namespace="other")
    seen = [p.last_seen for p in narrowed]
    assert seen == sorted(seen, reverse=True)


@pytest.mark.parametrize(
    "text",
    ["a\x00b", "line\x1bbreak", "x" * 300, "name:", "", "   ",
     "name:a ns:b uid:c node:d owner:e finding:f name:g"],
)  # fmt: skip
def test_unreadable_search_text_is_an_error_not_a_500(
    fleet_cluster: Cluster, admin_user: User, text: str
) -> None:
    client = Client()
    client.force_login(admin_user)
    response = client.get("/api/v1/clusters/fleet/pods", {"q": text})
    assert response.status_code == 400, response.content
    error = json.loads(response.content)["error"]
    assert error["param"] == "q" and error["message"].startswith("q:")
    page = client.get("/c/fleet/", {"q": text})
    assert page.status_code == 200
    if text.strip():
        assert b'id="search-error"' in page.content and b'id="search-results"' not in page.content


@pytest.mark.parametrize(
    "text", ["%", "a%b", "_", "\\", "'; DROP TABLE timelines_pod; --", "<script>alert(1)</script>", "foo:bar",
             "uid:é", "job-000001 ns:%"],
)  # fmt: skip
def test_hostile_search_text_is_searched_literally(
    fleet_cluster: Cluster, admin_user: User, text: str
) -> None:
    """Wildcards, quotes, markup and unknown keys are characters of a prefix: nothing matches them here,
    nothing breaks, and what was typed comes back escaped."""
    client = Client()
    client.force_login(admin_user)
    response = client.get("/api/v1/clusters/fleet/pods", {"q": text})
    assert response.status_code == 200, response.content
    assert json.loads(response.content)["pods"] == []
    page = client.get("/c/fleet/", {"q": text}).content.decode()
    assert "No pod you may read matches" in page and "<script>alert(1)</script>" not in page
    assert Pod.objects.filter(cluster=fleet_cluster).count() == 300


def test_a_text_without_keys_is_one_term_spaces_and_all(fleet_cluster: Cluster) -> None:
    Pod.objects.filter(uid="bulk-big-000003").update(name="sp ace ", owner_name="Web-Caps")
    assert uids(fleet.search_pods(fleet_cluster, "sp ace", None)) == {"bulk-big-000003"}
    assert uids(fleet.search_pods(fleet_cluster, "Web-C", None)) == {"bulk-big-000003"}  # as typed
    # With a key, words are terms: "ace" alone is a part of the name "sp ace ", "ace ns:other" none.
    assert uids(fleet.search_pods(fleet_cluster, "ace ns:big", None)) == {"bulk-big-000003"}
    assert fleet.search_pods(fleet_cluster, "ace ns:other", None) == []
    assert uids(fleet.search_pods(fleet_cluster, "sp ns:big", None)) == {"bulk-big-000003"}


def test_names_uids_and_nodes_match_a_part_anywhere(fleet_cluster: Cluster, admin_user: User) -> None:
    """GIVEN a pod named like a ReplicaSet's pod (web-7d9f-kd2mp) among 300 others WHEN its random tail,
    a middle piece of its UID or the end of a node name is searched (bare or keyed, through the API and
    the cluster page) THEN it is found; an owner still matches only by its start (rs-39, not s-39)."""
    c = fleet_cluster
    Pod.objects.filter(uid="bulk-big-000003").update(name="web-7d9f-kd2mp")
    assert uids(fleet.search_pods(c, "kd2mp", None)) == {"bulk-big-000003"}
    assert uids(fleet.search_pods(c, "name:7d9f-kd", None)) == {"bulk-big-000003"}
    assert uids(fleet.search_pods(c, "KD2MP", None)) == {"bulk-big-000003"}  # as typed or lowercased
    assert uids(fleet.search_pods(c, "uid:big-000003", None)) == {"bulk-big-000003"}
    assert uids(fleet.search_pods(c, "node:0003", None, limit=1000)) == expect(c, node="node-0003")
    assert fleet.search_pods(c, "owner:s-39", None) == []
    client = Client()
    client.force_login(admin_user)
    body = json.loads(client.get("/api/v1/clusters/fleet/pods", {"q": "kd2mp"}).content)
    assert [p["uid"] for p in body["pods"]] == ["bulk-big-000003"]
    page = client.get("/c/fleet/", {"q": "kd2mp"}).content.decode()
    assert "web-7d9f-kd2mp" in page and "bulk-big-000003" in page


def test_search_api_and_page_list_matches(fleet_cluster: Cluster, admin_user: User) -> None:
    client = Client()
    client.force_login(admin_user)
    body = json.loads(client.get("/api/v1/clusters/fleet/pods", {"q": "node:node-0003 ns:big"}).content)
    assert {p["uid"] for p in body["pods"]} == expect(fleet_cluster, node="node-0003", namespace="big")
    page = client.get("/c/fleet/", {"q": "uid:bulk-big-000007"}).content.decode()
    assert "bulk-big-000007" in page and "bulk-big-000008" not in page


def test_namespace_grant_narrows_search(fleet_cluster: Cluster) -> None:
    user = User.objects.create_user("ns-reader", password="x-password-123")
    grant(user, fleet_cluster, "other")
    client = Client()
    client.force_login(user)
    body = json.loads(client.get("/api/v1/clusters/fleet/pods", {"q": "finding:slow"}).content)
    assert {p["namespace"] for p in body["pods"]} == {"other"} and len(body["pods"]) == 2


def test_overview_counts_are_the_per_cluster_counts(fleet_cluster: Cluster, admin_user: User) -> None:
    second = Cluster.objects.create(name="second")
    make_pods(second, pods=30, namespace="a", nodes=3)
    Pod.objects.filter(cluster=second, name__in=["job-000001", "job-000002"]).update(deleted_at=None)
    Node.objects.create(cluster=second, name="node-0000")
    empty = Cluster.objects.create(name="empty")
    filters: dict[int, set[str] | None] = {fleet_cluster.id: None, second.id: None, empty.id: {"x"}}
    counts = fleet.cluster_counts([fleet_cluster, second, empty], filters)
    for c in (fleet_cluster, second):
        assert counts[c.id] == queries.cluster_counts(c, None)
    assert counts[second.id]["live_pods"] == 2 and counts[second.id]["nodes"] == 1
    assert counts[empty.id] == {"pods": 0, "live_pods": 0, "nodes": 0, "findings": 0}
    narrowed = fleet.cluster_counts([fleet_cluster], {fleet_cluster.id: {"other"}})
    assert narrowed[fleet_cluster.id] == queries.cluster_counts(fleet_cluster, {"other"})
    client = Client()
    client.force_login(admin_user)
    page = client.get("/").content.decode()
    assert "0 / 300" in page and "2 / 30" in page


def test_observation_total_is_exact_for_few_clusters_and_estimated_for_all_on_postgresql(
    fleet_cluster: Cluster,
) -> None:
    put(
        fleet_cluster,
        [
            {
                "kind": "pod",
                "source": "api",
                "observed_at": DAY0 + timedelta(seconds=i),
                "dedupe_key": f"k{i}",
            }
            for i in range(120)
        ],
    )
    assert fleet.observation_count([fleet_cluster], all_clusters=False) == (120, False)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE timelines_observation")
        assert fleet.observation_count([fleet_cluster], all_clusters=True) == (120, True)
    else:
        assert fleet.observation_count([fleet_cluster], all_clusters=True) == (120, False)


def _window(c: Cluster, **kw: Any) -> dict[str, Any] | None:
    return fleet.window_overview(
        c, start=DAY0, end=DAY0 + timedelta(days=1), namespaces=None, namespace="big", **kw
    )


def test_level_of_detail_bands_add_up_to_the_full_data(
    fleet_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    c = fleet_cluster
    assert _window(c, resolution_us=60_000_000) is None  # 200 pods: every row, as before
    monkeypatch.setattr(fleet, "LOD_PODS", 100)
    data = _window(c, resolution_us=60_000_000, max_bands=30)
    assert data is not None and data["schema"] == "podlife.window-overview/v1"
    assert data["pods_total"] == 200 and len(data["bands"]) <= 30
    assert sum(b["pods"] for b in data["bands"]) == 200
    full = Interval.objects.filter(cluster=c, namespace="big", lane="worker")
    totals: dict[str, dict[str, float]] = {}
    for b in data["bands"]:
        for key, v in b["counts"].items():
            t = totals.setdefault(key, {"intervals": 0, "seconds": 0.0})
            t["intervals"] += v["intervals"]
            t["seconds"] += v["seconds"]
        total = sum(v["intervals"] for v in b["counts"].values())
        merged = sum(int(iv[6].split()[0]) if iv[6] else 1 for iv in b["intervals"])
        assert 0 < len(b["intervals"]) <= merged and merged + b["undrawn"] == total
    for state in ("setup", "terminating", "cleanup"):
        for source in ("observed", "inferred"):
            rows = list(full.filter(state=state, source=source).values_list("start", "end"))
            assert totals[f"{state}|{source}"]["intervals"] == len(rows)
            seconds = sum((e - s).total_seconds() for s, e in rows)
            assert totals[f"{state}|{source}"]["seconds"] == pytest.approx(seconds, abs=1e-3)
    # Findings: merged per band and kind, their counts add up.
    told = sum(int(f[2].split()[0]) for b in data["bands"] for f in b["findings"])
    assert told == Finding.objects.filter(cluster=c, namespace="big").count()
    # Bands follow the chart's order: the first band holds the earliest-starting pods.
    first = Interval.objects.filter(cluster=c, namespace="big").order_by("start").first()
    assert first is not None and data["table"][0]["uid"] == first.pod_uid
    assert len(data["table"]) == 200 and all(r["worker"][0] == "cleanup" for r in data["table"])
    # Finer resolution: more bars, same totals.
    # A pod a band at a microsecond's resolution: every interval its own bar (a pod's do not overlap).
    fine = _window(c, resolution_us=1, max_bands=200)
    assert fine is not None and len(fine["bands"]) == 200
    assert sum(len(b["intervals"]) for b in fine["bands"]) == full.count()
    # ... at its exact start and end, to the microsecond (times are read as integer µs by SQL).
    drawn = sorted((iv[2], iv[3]) for b in fine["bands"] for iv in b["intervals"])
    assert drawn == sorted((format_time(s), format_time(e)) for s, e in full.values_list("start", "end"))
    assert sum(len(b["intervals"]) for b in data["bands"]) < full.count()


def test_namespace_api_detail_auto_and_errors(
    fleet_cluster: Cluster, admin_user: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = Client()
    client.force_login(admin_user)
    url = "/api/v1/clusters/fleet/namespaces/big/timeline"
    window = {"from": "2024-06-07T00:00:00Z", "to": "2024-06-08T00:00:00Z"}
    body = json.loads(client.get(url, {**window, "detail": "auto"}).content)
    assert body["schema"] == "podlife.window/v1" and len(body["pods"]) == 200  # not crowded
    monkeypatch.setattr(fleet, "LOD_PODS", 100)
    body = json.loads(client.get(url, {**window, "detail": "auto", "px": "800"}).content)
    assert body["schema"] == "podlife.window-overview/v1" and body["pods_total"] == 200
    assert body["resolution_us"] == 86400 * 1_000_000 // 800
    body = json.loads(client.get(url, window).content)  # the default stays every row
    assert body["schema"] == "podlife.window/v1" and len(body["pods"]) == 200
    for params, param in (({"detail": "some"}, "detail"), ({"detail": "auto", "px": "9"}, "px"),
                          ({"detail": "auto", "px": "wide"}, "px")):  # fmt: skip
        response = client.get(url, {**window, **params})
        assert response.status_code == 400 and json.loads(response.content)["error"]["param"] == param


def test_the_band_table_names_each_finding_kind_of_a_pod_once(
    fleet_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a pod with two findings of one kind (two spells, as a PDB blocking two drains of it)
    THEN its row in the pod table lists the kind once: the cell says what is wrong, not how often
    (issue #34: "pdb_blocking_drain, pdb_blocking_drain")."""
    c = fleet_cluster
    first = Finding.objects.filter(cluster=c, namespace="big", kind="slow_cleanup").first()
    assert first is not None
    second = Finding.objects.get(pk=first.pk)
    second.pk = None
    second.start = first.start + timedelta(seconds=1)
    second.save()
    monkeypatch.setattr(fleet, "LOD_PODS", 100)
    data = _window(c, resolution_us=60_000_000, max_bands=30)
    assert data is not None
    [row] = [r for r in data["table"] if r["uid"] == first.pod_uid]
    assert row["findings"] == ["slow_cleanup"]


@pytest.mark.postgres
def test_a_part_of_a_name_uid_or_node_is_answered_by_a_trigram_index(fleet_cluster: Cluster) -> None:
    """GIVEN PostgreSQL with migration 0022 WHEN a name, UID or node is searched by a part of it THEN the
    plan reads the pg_trgm index of that column (a part cannot use 0015's prefix B-trees), not the table."""
    # The term alone (no cluster): on 300 rows the planner would rather read the cluster's B-tree, which
    # says nothing about whether the trigram index can answer the pattern.
    for key, index in (("name", "pod_name_trgm"), ("uid", "pod_uid_trgm"), ("node", "pod_node_trgm")):
        qs = Pod.objects.filter(fleet._term_q(fleet_cluster, fleet.SearchTerm(key, "kd2mp")))
        sql, params = qs.order_by().values_list("id").query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
            plan = "\n".join(r[0] for r in cursor.fetchall())
        assert index in plan, plan
