"""Destinations are configured in the admin; /metrics exports findings as gauges from aggregate queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from alerts.delivery import deliver_due
from alerts.models import Delivery, Destination
from timelines.models import Cluster, Node

from .conftest import make_finding

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_loopback")]


def test_destination_configured_in_the_admin_gets_a_test_message(client, receiver):
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw-for-tests-only")
    client.force_login(admin)
    response = client.post(
        "/admin/alerts/destination/add/",
        {
            "name": "oncall",
            "url": receiver.url,
            "format": "slack",
            "enabled": "on",
            "new_signing_secret": "s3cret-for-hmac",
            "clusters": "prod, prod-*",
            "namespaces": "",
            "kinds": "stuck_terminating",
            "min_severity": "warning",
            "notify_resolved": "on",
            "max_per_minute": "10",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    dest = Destination.objects.get(name="oncall")
    assert (dest.format, dest.clusters, dest.max_per_minute) == ("slack", "prod, prod-*", 10)
    assert dest.signing_secret == "s3cret-for-hmac"

    response = client.post(
        "/admin/alerts/destination/", {"action": "send_test_message", "_selected_action": [dest.pk]}
    )
    assert response.status_code == 302
    assert deliver_due().sent == 1
    (got,) = receiver.received
    assert got.headers["X-Podlife-Event"] == "test"
    assert got.json()["text"].startswith(":bell: podlife test message")
    # Deliveries are records: the admin lists them and shows the body, but offers no edit.
    page = client.get(f"/admin/alerts/delivery/{Delivery.objects.get().pk}/change/")
    assert page.status_code == 200 and b"podlife test message" in page.content


def test_admin_refuses_a_destination_that_is_not_http(client):
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw-for-tests-only")
    client.force_login(admin)
    response = client.post(
        "/admin/alerts/destination/add/",
        {
            "name": "x",
            "url": "file:///etc/passwd",
            "format": "json",
            "new_signing_secret": "s",
            "min_severity": "info",
            "max_per_minute": "5",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    assert b"Enter a valid URL" in response.content
    assert not Destination.objects.exists()


def scrape(client, settings) -> dict[str, list[tuple[dict, float]]]:
    settings.PODLIFE_METRICS_TOKEN = "metrics-token-for-tests"
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-token-for-tests")
    assert response.status_code == 200
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_metrics_count_open_and_recent_findings_by_cluster_namespace_kind_severity(
    client, settings, live_cluster
):
    now = timezone.now()
    settings.PODLIFE_METRICS_RECENT_S = 900
    for i in range(3):
        make_finding(live_cluster, pod_uid=f"s{i}", start=now - timedelta(minutes=i + 1))
    make_finding(live_cluster, pod_uid="w", severity="warning", start=now - timedelta(minutes=3))
    make_finding(
        live_cluster,
        pod_uid="n1",
        kind="never_started",
        severity="warning",
        start=now - timedelta(minutes=2),
        end=now - timedelta(minutes=1),
    )
    make_finding(
        live_cluster,
        pod_uid="n2",
        kind="never_started",
        severity="warning",
        start=now - timedelta(hours=2),
        end=now - timedelta(hours=2),
    )
    imported = Cluster.objects.create(name="old-incident", origin=Cluster.Origin.IMPORTED, read_only=True)
    make_finding(imported, pod_uid="i")
    metrics = scrape(client, settings)
    assert sorted(
        (labels["severity"], labels["kind"], value) for labels, value in metrics["podlife_findings_open"]
    ) == [
        ("critical", "stuck_terminating", 3.0),
        ("warning", "stuck_terminating", 1.0),
    ]
    assert all(
        labels["cluster"] == "prod" and labels["namespace"] == "shop"
        for labels, _ in metrics["podlife_findings_open"]
    )
    recent = {
        (labels["kind"], labels["severity"]): value for labels, value in metrics["podlife_findings_recent"]
    }
    assert recent == {
        ("stuck_terminating", "critical"): 3.0,
        ("stuck_terminating", "warning"): 1.0,
        ("never_started", "warning"): 1.0,
    }


def test_metrics_per_node_drain_state(client, settings, live_cluster):
    now = timezone.now()
    Node.objects.create(cluster=live_cluster, name="node-a", unschedulable=True)
    Node.objects.create(cluster=live_cluster, name="node-b", unschedulable=True)
    Node.objects.create(cluster=live_cluster, name="node-c", unschedulable=False)
    for uid in ("p1", "p2"):
        make_finding(
            live_cluster,
            pod_uid=uid,
            subject="pdb",
            subject_name="shop/cart-pdb",
            kind="pdb_blocking_drain",
            severity="warning",
            node="node-a",
            start=now - timedelta(minutes=10 if uid == "p1" else 5),
        )
    make_finding(
        live_cluster,
        pod_uid="p3",
        subject="pdb",
        subject_name="shop/cart-pdb",
        kind="pdb_blocking_drain",
        severity="warning",
        node="node-c",
        start=now - timedelta(hours=1),
        end=now - timedelta(minutes=30),
    )
    metrics = scrape(client, settings)
    blocked = {labels["node"]: value for labels, value in metrics["podlife_node_drain_blocked"]}
    assert blocked == {"node-a": 1.0, "node-b": 0.0}
    assert metrics["podlife_node_drain_blocked_pods"] == [({"cluster": "prod", "node": "node-a"}, 2.0)]
    ((_, since),) = metrics["podlife_node_drain_blocked_since_timestamp_seconds"]
    assert since == pytest.approx((now - timedelta(minutes=10)).timestamp(), abs=1e-3)


def test_metrics_are_aggregates_not_rows(client, settings, live_cluster, django_assert_max_num_queries):
    """However many findings there are, a scrape costs the same few queries."""
    for i in range(50):
        make_finding(live_cluster, pod_uid=f"x{i}", namespace=f"ns{i % 5}")
    settings.PODLIFE_METRICS_TOKEN = "scrape-token"
    with django_assert_max_num_queries(12):
        response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token")
    text = response.content.decode()
    assert text.count("podlife_findings_open{") == 5
