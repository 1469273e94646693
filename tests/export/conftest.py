"""A small but complete source cluster for export tests: pods from the lifecycle scenarios (re-keyed to
distinct UIDs and names), a node that is cordoned and drained, a PDB that blocks, a Deployment with its
ReplicaSet, and a pod whose name is an HTML injection attempt. Ingested through the real pipeline."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import orjson
import pytest

from tests.flow import ingest as ingest_observations
from tests.lifecycle import scenarios
from tests.lifecycle.factories import T0, node, node_metrics, pdb, t
from timelines import store
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import Cluster

HOSTILE = "<img src=x onerror=alert(1)>"
PDB_STEPS = ((-7000, 1), (20, 0), (300, 1))  # (seconds, disruptionsAllowed): blocked from 20 s to 300 s
SINCE = T0 - timedelta(hours=1)
UNTIL = T0 + timedelta(hours=2)

# name -> (scenario, namespace, node)
PODS: dict[str, tuple[str, str, str]] = {
    "web-a": ("graceful_delete", "shop", "node-a"),
    "web-b": ("delete_during_setup", "shop", "node-a"),
    "web-c": ("crash_loop", "shop", "node-a"),
    "web-d": ("stuck_terminating", "shop", "node-a"),
    "web-e": ("node_shutdown_not_failed", "shop", "node-a"),
    HOSTILE: ("normal_start", "shop", "node-a"),
    "api-x": ("api_only", "other", "node-b"),
}


def uid_for(name: str) -> str:
    n = sorted(PODS).index(name)
    return f"00000000-0000-4000-8000-{n:012d}"


def rekey(
    observations: list[Observation], *, uid: str, name: str, namespace: str, node: str
) -> list[Observation]:
    """The same scenario as another pod: UID, name, namespace and node replaced everywhere."""
    old_uid = scenarios.UID

    def swap(text: str) -> str:
        return text.replace(old_uid, uid).replace("default/web-1", f"{namespace}/{name}")

    out = []
    for o in observations:
        payload = orjson.loads(swap(orjson.dumps(o.payload).decode()))
        if isinstance(payload.get("name"), str) and payload["name"] == "web-1":
            payload["name"] = name
        if payload.get("namespace") == "default":
            payload["namespace"] = namespace
        if payload.get("node") == "node-a":
            payload["node"] = node
        involved = payload.get("involved")
        if isinstance(involved, dict):
            involved.update(name=name, namespace=namespace)
        key = swap(o.dedupe_key)
        if key == o.dedupe_key:
            key = f"{o.dedupe_key[:150]}:{uid}"
        out.append(
            dataclasses.replace(
                o,
                pod_uid=uid if o.pod_uid else None,
                dedupe_key=key,
                name=name if o.name else o.name,
                namespace=namespace if o.namespace else o.namespace,
                node=node if o.node else o.node,
                payload=payload,
            )
        )
    return out


def workload_obs(
    seconds: float, kind: str, uid: str, name: str, owner: dict | None, ready: int
) -> Observation:
    return Observation(
        kind=Kind.WORKLOAD,
        source=Source.OFFLINE,
        observed_at=t(seconds),
        dedupe_key=f"workload:{uid}:{int(seconds * 1000)}",
        namespace="shop",
        name=name,
        payload={
            "kind": kind,
            "uid": uid,
            "namespace": "shop",
            "name": name,
            "owner": owner,
            "selector": {"match_labels": {"app": "web"}},
            "spec_replicas": 3,
            "status": {
                "replicas": 3,
                "ready_replicas": ready,
                "updated_replicas": 3,
                "available_replicas": ready,
            },
        },
    )


def source_observations() -> list[Observation]:
    out: list[Observation] = []
    for name, (scenario, namespace, on_node) in PODS.items():
        out += rekey(
            scenarios.ALL_SCENARIOS[scenario](),
            uid=uid_for(name),
            name=name,
            namespace=namespace,
            node=on_node,
        )
    out += [
        node(-7200, source=Source.OFFLINE),  # before the window: the state at its start
        node(15, unschedulable=True, source=Source.OFFLINE),
        node(25, unschedulable=True, ready="False", source=Source.OFFLINE),
        node_metrics(-3700, 5),
        node_metrics(5, 6),
        node_metrics(25, 3, 3),
        *(pdb(s, a, healthy=2 + a, expected=3, created=-86400, source=Source.OFFLINE) for s, a in PDB_STEPS),
        workload_obs(-7100, "Deployment", "dep-uid-1", "web", None, 3),
        workload_obs(10, "Deployment", "dep-uid-1", "web", None, 2),
        workload_obs(
            -7100,
            "ReplicaSet",
            "rs-uid-1",
            "web-7d9",
            {"kind": "Deployment", "name": "web", "uid": "dep-uid-1"},
            3,
        ),
    ]
    return out


@pytest.fixture
def source_cluster(db: Any) -> Cluster:
    cluster = store.cluster_for("src", origin=Cluster.Origin.OFFLINE)
    result = ingest_observations(cluster, source_observations())
    assert not result.rejected, result.rejected[:3]
    return cluster
