"""A status written by a client through apps/v1 status subresources is collected by the real collector's
watch as a workload-status sample, and the workload page shows it beside the controller's own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from kubernetes import client

from collectors.kube import config, lease, watch
from collectors.kube.config import ClusterSource, Tunables
from collectors.kube.watch import StepControl, run_step
from demo_cluster import SimServer, run_sim
from tests.sim.conftest import api_client
from timelines import derivation
from timelines.models import Workload, WorkloadStatusSample

CLUSTER = "status-writes"
NS = "e2e"
FAST = Tunables(watch_timeout_s=1, lease_ttl_s=5.0, list_page_size=50, batch_size=200, batch_seconds=0.1)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimServer, client.AppsV1Api]]:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=2)
    kc = tmp_path / "kc"
    with run_sim(None, seed=8, start=start, kubeconfig_path=kc, bookmark_interval=0.2) as server:
        c = server.cluster
        with c.engine.lock:
            c.add_node("e2e-node-1", {"pool": "e2e"})
            c.create_deployment(NS, "web", 2, "nginx:1.26.2", {"app": "web"}, node_selector={"pool": "e2e"})
            c.create_statefulset(NS, "db", 2, "postgres:17.2", {"app": "db"}, node_selector={"pool": "e2e"})
            c.advance(30)
        watch.forget_caches()
        lease._backend = None
        config.register_cluster(ClusterSource(CLUSTER, str(kc), "podlife-demo"))
        api = api_client(kc)
        try:
            yield server, client.AppsV1Api(api)
        finally:
            api.close()
            config.unregister_cluster(CLUSTER)
            config.close_clients()
            watch.forget_caches()


def step(resource: str) -> None:
    """One watch step, then the derive stage as a derive worker would run it (workload rows and their
    status samples are its projections)."""
    result = run_step(CLUSTER, resource, control=StepControl(tunables=FAST))
    assert result.error is None, result.error
    derivation.drain()


@pytest.mark.django_db
def test_client_written_status_is_a_sample_and_on_the_workload_page(
    sim: tuple[SimServer, client.AppsV1Api], admin_client: object
) -> None:
    """GIVEN Deployment web and StatefulSet db collected (ready 2) WHEN a client replaces web's status
    (ready 5, a condition) and patches db's (ready 7) and the collector watches THEN each write is a
    status sample with the client's values, the controllers' corrections after them are newer samples,
    and the workload page's replica chart draws the written value."""
    server, api = sim
    for resource in ("pods", "deployments", "statefulsets"):
        step(resource)
    web = Workload.objects.get(cluster__name=CLUSTER, kind="Deployment", name="web")
    db = Workload.objects.get(cluster__name=CLUSTER, kind="StatefulSet", name="db")
    assert web.samples.order_by("-at").first().ready == 2 and db.samples.order_by("-at").first().ready == 2

    dep = api.read_namespaced_deployment_status("web", NS)
    dep.status.ready_replicas = 5
    dep.status.conditions = [
        *dep.status.conditions,
        client.V1DeploymentCondition(
            type="StatusUpdate", status="True", reason="E2E", message="Set from e2e test"
        ),
    ]
    api.replace_namespaced_deployment_status("web", NS, dep)
    api.patch_namespaced_stateful_set_status("db", NS, {"status": {"readyReplicas": 7}})
    step("deployments")
    step("statefulsets")
    written_web = web.samples.order_by("-at").first()
    assert written_web.ready == 5
    assert {
        "type": "StatusUpdate",
        "status": "True",
        "reason": "E2E",
        "message": "Set from e2e test",
    }.items() <= next(c for c in written_web.status["conditions"] if c["type"] == "StatusUpdate").items()
    assert db.samples.order_by("-at").first().ready == 7

    with server.cluster.engine.lock:
        server.cluster.advance(2)  # the controllers' next sync puts their counts back
    step("deployments")
    step("statefulsets")
    assert [s.ready for s in web.samples.order_by("at")][-3:] == [2, 5, 2]
    assert [s.ready for s in db.samples.order_by("at")][-3:] == [2, 7, 2]
    assert WorkloadStatusSample.objects.filter(workload=web, ready=5).count() == 1

    page = admin_client.get(reverse("workload", args=[CLUSTER, NS, "Deployment", "web"]))  # type: ignore[attr-defined]
    assert page.status_code == 200
    assert [s["ready"] for s in page.context["samples"]][-3:] == [2, 5, 2]
    ready_trace = next(t for t in page.context["page"]["status_figure"]["data"] if t["name"] == "ready")
    assert 5 in ready_trace["y"]
