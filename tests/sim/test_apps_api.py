"""Every apps/v1 call the seed's e2e tests make, through the official client against the demo cluster:
read / replace / patch of Deployment, StatefulSet, DaemonSet and ReplicaSet status, patch of a StatefulSet,
StatefulSets of all namespaces and deletecollection of StatefulSets (15 calls), with the API server's rules
(a status write changes only status, a spec write bumps the generation, stale versions conflict)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from demo_cluster import SimServer, run_sim
from tests.sim.conftest import api_client

NS = "e2e"
POOL = {"podlife.dev/pool": "e2e"}


def build_workloads(sim: SimServer) -> None:
    """Two nodes with a Deployment ``web`` (2), a StatefulSet ``db`` (2) and a DaemonSet ``agent``,
    settled (every pod ready)."""
    c = sim.cluster
    with c.engine.lock:
        for i in (1, 2):
            c.add_node(f"e2e-node-{i}", POOL)
        c.create_deployment(NS, "web", 2, "nginx:1.26.2", {"app": "web"}, node_selector=POOL)
        c.create_statefulset(NS, "db", 2, "postgres:17.2", {"app": "db"}, node_selector=POOL)
        c.create_daemonset(
            NS, "agent", "ghcr.io/podlife/node-agent:0.9.2", {"app": "agent"}, node_selector=POOL
        )
        c.advance(30)


@pytest.fixture
def apps(tmp_path: Path) -> Iterator[tuple[SimServer, client.AppsV1Api]]:
    with run_sim(None, seed=3, kubeconfig_path=tmp_path / "kc") as sim:
        build_workloads(sim)
        api = api_client(tmp_path / "kc")
        try:
            yield sim, client.AppsV1Api(api)
        finally:
            api.close()


def _advance(sim: SimServer, seconds: float) -> None:
    with sim.cluster.engine.lock:
        sim.cluster.advance(seconds)


def _condition_types(status: Any) -> list[str]:
    return [c.type for c in status.conditions or []]


# (resource kind as the client names it, object name, a count the controller owns)
KINDS = [
    ("deployment", "web", "ready_replicas"),
    ("stateful_set", "db", "ready_replicas"),
    ("daemon_set", "agent", "number_ready"),
    ("replica_set", None, "ready_replicas"),
]


@pytest.mark.parametrize(("kind", "name", "count"), KINDS, ids=[k for k, _, _ in KINDS])
def test_status_read_replace_patch(
    apps: tuple[SimServer, client.AppsV1Api], kind: str, name: str | None, count: str
) -> None:
    """GIVEN a settled workload WHEN a client reads its status, replaces it with a condition added (and a
    spec change the status subresource must ignore), then patches another condition in THEN each call
    answers the object as stored, the spec and generation stay, both conditions are kept (strategic merge
    by type) and survive the controller's next sync, which also puts back the counts it owns."""
    sim, api = apps
    if name is None:  # the Deployment's ReplicaSet
        name = sim.cluster.store.iter_objects("replicasets", NS)[0]["metadata"]["name"]
    read = getattr(api, f"read_namespaced_{kind}_status")
    replace = getattr(api, f"replace_namespaced_{kind}_status")
    patch = getattr(api, f"patch_namespaced_{kind}_status")

    obj = read(name, NS)
    assert obj.metadata.name == name and getattr(obj.status, count) == 2
    generation, spec_before = (
        obj.metadata.generation,
        sim.cluster.store.get(f"{kind.replace('_', '')}s", NS, name)["spec"],
    )

    obj.status.conditions = [
        *(obj.status.conditions or []),
        client.V1DeploymentCondition(
            type="StatusUpdate", status="True", reason="E2E", message="Set from e2e test"
        ),
    ]
    setattr(obj.status, count, 7)  # a value only a client writes; the controller will put it back
    if getattr(obj.spec, "replicas", None) is not None:
        obj.spec.replicas = 9  # ignored: a status write changes status only
    replaced = replace(name, NS, obj)
    assert "StatusUpdate" in _condition_types(replaced.status) and getattr(replaced.status, count) == 7
    assert replaced.metadata.generation == generation
    assert int(replaced.metadata.resource_version) > int(obj.metadata.resource_version)
    stored = sim.cluster.store.get(f"{kind.replace('_', '')}s", NS, name)
    assert stored["spec"] == spec_before

    patched = patch(name, NS, {"status": {"conditions": [{"type": "StatusPatched", "status": "True"}]}})
    types = _condition_types(patched.status)
    assert "StatusUpdate" in types and "StatusPatched" in types

    _advance(sim, 2)
    after = read(name, NS)
    assert getattr(after.status, count) == 2  # the controller's own count again
    assert {"StatusUpdate", "StatusPatched"} <= set(_condition_types(after.status))

    with pytest.raises(ApiException) as stale:  # the version read before the patch is stale now
        replace(name, NS, obj)
    assert stale.value.status == 409 and "the object has been modified" in stale.value.body
    with pytest.raises(ApiException) as bad:
        patch(name, NS, {"status": {"observedGeneration": -1}})
    assert bad.value.status == 422 and "status.observedGeneration: Invalid value: -1" in bad.value.body


def test_statefulset_patch_list_all_namespaces_and_delete_collection(
    apps: tuple[SimServer, client.AppsV1Api],
) -> None:
    """GIVEN StatefulSet db WHEN it is patched (a label and a new image), listed across namespaces by that
    label, and deleted as a collection by it THEN the patch bumps the generation and rolls the pods, the
    list finds exactly it, and deletecollection removes it and (cascading) its pods."""
    sim, api = apps
    before = api.read_namespaced_stateful_set("db", NS)
    patched = api.patch_namespaced_stateful_set(
        "db",
        NS,
        {
            "metadata": {"labels": {"e2e": "patched"}},
            "spec": {"template": {"spec": {"containers": [{"name": "db", "image": "postgres:17.3"}]}}},
        },
    )
    assert patched.metadata.labels["e2e"] == "patched"
    assert patched.metadata.generation == before.metadata.generation + 1
    assert [c.image for c in patched.spec.template.spec.containers] == ["postgres:17.3"]  # merged by name
    _advance(sim, 60)
    pods = [p for p in sim.cluster.store.iter_objects("pods", NS) if p["metadata"]["name"].startswith("db-")]
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"postgres:17.3"} and len(pods) == 2

    listed = api.list_stateful_set_for_all_namespaces(label_selector="e2e=patched")
    assert [(s.metadata.namespace, s.metadata.name) for s in listed.items] == [(NS, "db")]
    assert api.list_stateful_set_for_all_namespaces(label_selector="e2e=other").items == []

    gone = api.delete_collection_namespaced_stateful_set(NS, label_selector="e2e=patched")
    assert gone.kind == "StatefulSetList"
    assert sim.cluster.store.get("statefulsets", NS, "db") is None
    assert api.list_stateful_set_for_all_namespaces().items == []
    _advance(sim, 60)
    assert not [
        p for p in sim.cluster.store.iter_objects("pods", NS) if p["metadata"]["name"].startswith("db-")
    ]
