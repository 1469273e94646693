"""/metrics, the chain's lease rules, the foreground collect command, and small pure helpers."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from collectors.kube import chain, lease
from collectors.kube.config import cluster_name_for
from collectors.kube.stream import backoff_delay, split_lines
from collectors.models import CollectorState
from timelines.lifecycle.observation import Kind

from .conftest import CLUSTER, FAST, stored


@pytest.mark.django_db
def test_metrics_endpoint_exposes_health_per_resource(sim, client, settings):
    settings.PODLIFE_METRICS_TOKEN = "scrape-token"
    sim.step("pods")
    sim.step("nodes")
    sim.spawn(1)
    sim.server.cluster.inject_malformed()  # after a write, so the watch from the list's version sees it
    sim.step("pods")

    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples = {
        (s.name, s.labels.get("resource")): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
        if s.labels.get("cluster") == CLUSTER
    }
    pods = CollectorState.objects.get(cluster__name=CLUSTER, resource="pods")
    assert samples[("podlife_collector_events_total", "pods")] == pods.events_total > 0
    assert samples[("podlife_collector_relists_total", "pods")] == 1
    assert samples[("podlife_collector_errors_total", "pods")] == pods.errors_total >= 1
    assert 0 <= samples[("podlife_collector_lag_seconds", "pods")] < 60
    assert samples[("podlife_collector_last_event_timestamp_seconds", "nodes")] > 0
    assert ("podlife_collector_events_total", "nodes") in samples


def test_one_live_chain_per_watch(monkeypatch):
    """GIVEN an armed chain WHEN the beat tries to arm again THEN it is refused; WHEN the lease expires
    (the worker died) THEN a new chain is armed and the old one's re-delivered step ends at once."""
    now = [1000.0]  # the leases' clock, moved by the test: expiry is exact, whatever the machine's load
    monkeypatch.setattr(lease, "time", SimpleNamespace(monotonic=lambda: now[0]))
    leases = lease.LocalLeases()
    key = lease.watch_key("c", "pods")
    assert leases.acquire(key, "old", 0.5)
    assert not leases.acquire(key, "new", 5)
    now[0] += 0.25
    assert leases.renew(key, "old", 0.5) and not leases.renew(key, "new", 5)
    now[0] += 0.25  # the first lease's end: held still, renewed until 0.5 s after the renewal
    assert leases.holder(key) == "old"
    now[0] += 0.25
    assert leases.holder(key) is None
    assert leases.acquire(key, "new", 5)
    assert not leases.renew(key, "old", 5) and not leases.release(key, "old")
    assert leases.holder(key) == "new"


@pytest.mark.django_db
def test_stale_chain_step_ends_without_touching_the_watch(sim):
    token = chain.arm(CLUSTER, "pods", tunables=FAST)
    assert token and chain.arm(CLUSTER, "pods", tunables=FAST) is None
    result, following = chain.chain_step(CLUSTER, "pods", "", token, tunables=FAST)
    assert result is not None and result.ok and following is not None
    assert following.lease_token == token and following.resource_version == result.resource_version

    assert chain.stop(CLUSTER, "pods", token)
    result, following = chain.chain_step(CLUSTER, "pods", "", token, tunables=FAST)  # a stale message
    assert result is None and following is None
    assert CollectorState.objects.get(cluster__name=CLUSTER, resource="pods").relists_total == 1


@pytest.mark.django_db(transaction=True)
def test_collect_command_runs_steps_and_stops_after_duration(sim, settings, capsys):
    settings.PODLIFE_WATCH_TIMEOUT_S = 1
    # SQLite's in-memory test database locks whole tables between connections: one writer thread there.
    resources = "pods,nodes" if connection.vendor == "postgresql" else "pods"
    call_command(  # returns: it stopped after its duration (a command that did not stop fails on the timeout)
        "collect",
        "--kubeconfig",
        str(sim.kubeconfig),
        "--cluster-name",
        CLUSTER,
        "--duration",
        "2",
        "--resources",
        resources,
        "--no-kubelet",
    )
    assert {o.pod_uid for o in stored(Kind.POD)} == sim.uids("pods")
    assert bool(stored(Kind.NODE)) == ("nodes" in resources) and not stored(Kind.EVENT)
    out = capsys.readouterr().out
    assert f"collecting {resources.replace(',', ', ')} from sim for 2 s" in out and "stopped after" in out
    assert lease.leases().holder(lease.watch_key(CLUSTER, "pods")) is None  # released on stop


def test_collect_command_names_bad_input():
    with pytest.raises(CommandError, match="nothing to collect"):
        call_command("collect")
    with pytest.raises(CommandError, match="unknown resource"):
        call_command("collect", "--in-cluster", "--resources", "pods,secrets")
    with pytest.raises(CommandError, match="cluster name"):
        call_command("collect", "--in-cluster", "--cluster-name", "bad name!")


def test_backoff_is_exponential_capped_and_jittered():
    rng = random.Random(1)
    assert backoff_delay(0, base=1, cap=30, rng=rng) == 0
    for attempt, ceiling in ((1, 1), (2, 2), (3, 4), (10, 30)):
        delays = [backoff_delay(attempt, base=1, cap=30, rng=rng) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1


def test_split_lines_joins_lines_split_across_chunks():
    chunks = [b'{"a":1}\n{"b"', b":2}\n\n", b'{"c":3}']
    assert [line for lines in split_lines(iter(chunks)) for line in lines] == [
        b'{"a":1}',
        b'{"b":2}',
        b'{"c":3}',
    ]


def test_cluster_names_from_contexts():
    assert (
        cluster_name_for("arn:aws:eks:eu-west-1:123:cluster/prod") == "arn-aws-eks-eu-west-1-123-cluster-prod"
    )
    assert cluster_name_for("kind-kind") == "kind-kind"
    with pytest.raises(ValueError, match="no usable cluster name"):
        cluster_name_for("@@@")
