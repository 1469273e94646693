"""``make demo`` shows who deleted a pod and how many evictions its PDB refused (issue #16, done-when 1).

GIVEN the demo's drain scenario with its API server auditing itself, the collector watching it, the demo's
audit shipper (``manage.py demo``'s ``AuditShipper``) storing the audit log as it grows and a derive worker
WHEN the drain has played out THEN the evicted pod's page says who evicted it after how many refused
evictions, and who made the other pods go; the PDB's finding counts the refusals and names the drain's user.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from collectors.kube.resources import ALL_RESOURCES
from collectors.kube.runner import Collector
from demo_cluster.management.commands.demo import AuditShipper
from tests.waits import wait_for
from timelines import derivation
from timelines.models import Finding, Marker, Pod

from .conftest import CLUSTER, FAST

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EVICTED = re.compile(r"eviction by system:admin via kubectl granted \(201\) after (\d+) earlier attempts?")


def test_the_demo_shows_who_evicted_a_drained_pod(make_sim, monkeypatch, derive_worker):
    sim = make_sim("drain-blocked-by-pdb", advance=0, audit=True)
    cluster = sim.server.cluster
    monkeypatch.setattr(timezone, "now", lambda: cluster.engine.now)
    for resource in ALL_RESOURCES:  # the first lists, before anything happens: every pod from its start
        assert sim.step(resource).ok
    collector = Collector([CLUSTER], tunables=FAST).start()
    shipper = AuditShipper(cluster.audit, CLUSTER, every=0.2).start()
    try:
        sim.advance_watched(100)  # virtual seconds: the drain, its retries and the clean-up
        # the shipper's and the derive worker's rounds
        wait_for(_evicted_marker, "the eviction's marker derived", interval=0.3)
    finally:
        shipper.stop()
        collector.stop()
    shipper.ship()  # what the last round left
    derive_worker.stop()
    derivation.drain()  # what the worker had not derived yet
    refused = [r for r in cluster.eviction_log if r["outcome"] == "Blocked"]
    allowed = [r for r in cluster.eviction_log if r["outcome"] == "Allowed"]
    assert refused and len(allowed) == 1
    victim = Pod.objects.get(cluster__name=CLUSTER, name=allowed[0]["name"])

    client = Client()
    client.force_login(User.objects.create_superuser("demo-admin", "d@example.org", "pw-123456789"))
    page = client.get(f"/c/{CLUSTER}/pods/{victim.uid}/").content.decode()
    found = EVICTED.search(page)
    assert found, "the evicted pod's page does not say who evicted it"
    assert int(found.group(1)) == len(refused)
    assert "refused (429): PodDisruptionBudget" in page
    assert re.search(r"deleted by system:node:drain-node-\d \(grace 0s\)", page)

    api = client.get(f"/api/v1/clusters/{CLUSTER}/pods/{victim.uid}/timeline").json()
    term = next(iv for iv in api["lanes"]["api"] if iv["state"] == "terminating")
    assert (term["attrs"]["who"], term["attrs"]["attempts_before"]) == (
        "system:admin via kubectl",
        len(refused),
    )
    # the Deployment's other pods went with it: the garbage collector deleted them
    gc = Marker.objects.filter(cluster__name=CLUSTER, kind="audit", reason="Deleted").values_list(
        "message", flat=True
    )
    assert "deleted by system:serviceaccount:kube-system:generic-garbage-collector" in set(gc)
    counted = [
        f.attrs
        for f in Finding.objects.filter(cluster__name=CLUSTER, kind="pdb_blocking_drain")
        if f.attrs.get("refused_evictions")
    ]
    assert counted and counted[0]["drain_actor"] == "system:admin via kubectl"
    assert sum(a["refused_evictions"] for a in counted) >= len(refused)


def _evicted_marker() -> bool:
    return Marker.objects.filter(cluster__name=CLUSTER, kind="audit", reason="Evicted").exists()
