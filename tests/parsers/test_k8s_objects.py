"""API objects to normalized payloads and observations."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from collectors.parsers.k8s_objects import (
    event_observation,
    newest_timestamp,
    normalize_node,
    normalize_pod,
    normalize_time,
    object_observation,
    pod_observation,
)
from timelines.lifecycle.observation import Kind, Source

WEB = "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"


def _mixed(k8s_fixture: Path) -> dict[str, dict]:
    items = json.loads((k8s_fixture / "mixed-list.json").read_text())["items"]
    return {item["kind"]: item for item in items}


def test_normalize_time_keeps_microseconds_and_uses_plus_zero():
    assert normalize_time("2024-06-07T06:54:47Z") == "2024-06-07T06:54:47+00:00"
    assert normalize_time("2021-11-03T14:02:11.398214Z") == "2021-11-03T14:02:11.398214+00:00"
    assert normalize_time("2024-06-07T08:54:47.123456789+02:00") == "2024-06-07T06:54:47.123456+00:00"
    assert (
        normalize_time("2022-12-30 15:33:09.258791695 +0000 UTC m=+13.029631711")
        == "2022-12-30T15:33:09.258791+00:00"
    )
    assert normalize_time(datetime(2024, 1, 1, 0, 3, 14, 120650)) == "2024-01-01T00:03:14.120650+00:00"
    assert normalize_time("0001-01-01 00:00:00 +0000 UTC") is None
    assert normalize_time(None) is None and normalize_time("garbage") is None


def test_normalize_pod_running(k8s_fixture: Path):
    pod = normalize_pod(_mixed(k8s_fixture)["Pod"], watch="LIST")
    assert pod["uid"] == WEB and pod["namespace"] == "default" and pod["name"] == "web-7d9f8b6c4-x2k9p"
    assert pod["watch"] == "LIST" and pod["resource_version"] == "48213"
    assert pod["node"] == "worker-1" and pod["phase"] == "Running" and pod["grace_seconds"] == 30
    assert pod["owner"] == {
        "kind": "ReplicaSet",
        "name": "web-7d9f8b6c4",
        "uid": "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
    }
    assert pod["static"] is False and pod["deletion_timestamp"] is None
    assert pod["created"] == "2021-11-03T14:02:11+00:00"
    ready = next(c for c in pod["conditions"] if c["type"] == "Ready")
    assert ready == {
        "type": "Ready",
        "status": "True",
        "reason": None,
        "message": None,
        "last_transition": "2021-11-03T14:02:14+00:00",
    }
    (container,) = pod["containers"]
    assert container["name"] == "nginx" and container["kind"] == "regular"
    assert container["state"] == "running" and container["started_at"] == "2021-11-03T14:02:13+00:00"
    assert container["ready"] is True and container["restart_count"] == 0 and container["last_state"] is None


def test_normalize_pod_from_yaml_static_with_init_and_last_state(k8s_fixture: Path):
    docs = list(yaml.safe_load_all((k8s_fixture / "pods.yaml").read_text()))
    etcd = normalize_pod(docs[0])
    assert etcd["static"] is True and etcd["owner"]["kind"] == "Node"
    assert etcd["start_time"] == "2024-01-01T00:03:14.120650+00:00"  # YAML-loaded datetime, microseconds kept
    (c,) = etcd["containers"]
    assert c["last_state"] == {
        "state": "terminated",
        "reason": "Error",
        "exit_code": 137,
        "started_at": "2023-12-30T09:12:44+00:00",
        "finished_at": "2024-01-01T00:00:13+00:00",
    }
    cache = normalize_pod(docs[1])
    assert [(c["name"], c["kind"], c["state"], c["reason"]) for c in cache["containers"]] == [
        ("init-perms", "init", "terminated", "Completed"),
        ("redis", "regular", "waiting", "ContainerCreating"),
    ]
    with pytest.raises(ValueError, match=r"Pod default/no-uid: expected metadata.uid"):
        normalize_pod(docs[2])


def test_pod_observation_dedupe_kinds_and_offline_time(k8s_fixture: Path):
    pod = _mixed(k8s_fixture)["Pod"]
    live = pod_observation(
        pod, watch_type="MODIFIED", observed_at=datetime(2021, 11, 3, 14, 5, tzinfo=UTC), source=Source.API
    )
    assert live.kind == Kind.POD and live.dedupe_key == f"pod:{WEB}:48213"
    assert (live.pod_uid, live.node, live.namespace, live.name) == (
        WEB,
        "worker-1",
        "default",
        "web-7d9f8b6c4-x2k9p",
    )
    gone = pod_observation(pod, watch_type="DELETED", observed_at=None, source=Source.OFFLINE)
    assert gone.kind == Kind.POD_DELETED and gone.dedupe_key == f"pod:{WEB}:48213:deleted"
    assert gone.observed_at == datetime(2021, 11, 3, 14, 2, 14, tzinfo=UTC)  # newest time inside
    no_rv = json.loads(json.dumps(pod))
    del no_rv["metadata"]["resourceVersion"]
    a = pod_observation(no_rv, watch_type="SNAPSHOT", observed_at=None, source=Source.OFFLINE)
    no_rv["status"]["phase"] = "Failed"
    b = pod_observation(no_rv, watch_type="SNAPSHOT", observed_at=None, source=Source.OFFLINE)
    assert a.dedupe_key.startswith(f"pod:{WEB}:") and a.dedupe_key != b.dedupe_key
    with pytest.raises(ValueError, match="timezone-aware"):
        pod_observation(pod, watch_type="ADDED", observed_at=datetime(2021, 1, 1), source=Source.API)


def test_newest_timestamp_uses_deletion_request_not_deadline():
    obj = {
        "metadata": {
            "creationTimestamp": "2021-11-03T14:02:11Z",
            "deletionTimestamp": "2021-11-03T14:07:45Z",
            "deletionGracePeriodSeconds": 30,
        }
    }
    assert newest_timestamp(obj) == datetime(2021, 11, 3, 14, 7, 15, tzinfo=UTC)


def test_core_v1_event(k8s_fixture: Path):
    obs = event_observation(_mixed(k8s_fixture)["Event"], source=Source.OFFLINE)
    assert obs is not None and obs.kind == Kind.EVENT
    assert obs.dedupe_key == "event:5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e:48878"
    assert obs.observed_at == datetime(2021, 11, 3, 14, 7, 15, tzinfo=UTC)
    assert (obs.pod_uid, obs.node, obs.namespace, obs.name) == (
        WEB,
        "worker-1",
        "default",
        "web-7d9f8b6c4-x2k9p",
    )
    p = obs.payload
    assert (p["reason"], p["type"], p["message"], p["count"], p["component"], p["host"]) == (
        "Killing",
        "Normal",
        "Stopping container nginx",
        1,
        "kubelet",
        "worker-1",
    )
    assert p["involved"]["field_path"] == "spec.containers{nginx}"


def test_events_k8s_io_v1_shapes(k8s_fixture: Path):
    scheduled, unhealthy = json.loads((k8s_fixture / "events-v1.json").read_text())["items"]
    obs = object_observation(
        scheduled, kind_hint="Event", watch_type="LIST", observed_at=None, source=Source.OFFLINE
    )
    assert obs is not None
    assert obs.observed_at == datetime(2021, 11, 3, 14, 2, 11, 398214, tzinfo=UTC)
    assert (obs.payload["component"], obs.payload["action"], obs.payload["message"]) == (
        "default-scheduler",
        "Binding",
        "Successfully assigned default/web-7d9f8b6c4-x2k9p to worker-1",
    )
    assert obs.pod_uid == WEB
    obs = event_observation(unhealthy, source=Source.API)
    assert obs is not None
    assert obs.observed_at == datetime(2021, 11, 3, 14, 3, 52, 118804, tzinfo=UTC)  # series.lastObservedTime
    assert (obs.payload["count"], obs.payload["component"], obs.payload["host"]) == (4, "kubelet", "worker-1")
    assert obs.payload["first"] == "2021-11-03T14:02:40+00:00"
    assert obs.payload["last"] == "2021-11-03T14:03:52.118804+00:00"


def test_event_without_any_time_is_none_unless_delivery_time_given():
    event = {"kind": "Event", "metadata": {"name": "e", "namespace": "d"}, "reason": "X"}
    assert event_observation(event, source=Source.API) is None
    at = datetime(2024, 1, 1, tzinfo=UTC)
    obs = event_observation(event, source=Source.API, observed_at=at)
    assert obs is not None and obs.observed_at == at and obs.dedupe_key.startswith("event:")


def test_node_fingerprint_ignores_heartbeats_but_not_cordon(k8s_fixture: Path):
    node = _mixed(k8s_fixture)["Node"]
    base = normalize_node(node)
    assert base["unschedulable"] is True and base["taints"][0]["key"] == "node.kubernetes.io/unschedulable"
    assert base["taints"][0]["time_added"] == "2021-11-03T14:07:10+00:00"
    ready = next(c for c in base["conditions"] if c["type"] == "Ready")
    assert ready == {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status. AppArmor enabled",
        "last_transition": "2021-10-01T08:01:10+00:00",
    }
    beat = json.loads(json.dumps(node))
    beat["metadata"]["resourceVersion"] = "49999"
    beat["metadata"]["managedFields"] = [{"manager": "kubelet", "time": "2021-11-03T14:07:22Z"}]
    for c in beat["status"]["conditions"]:
        c["lastHeartbeatTime"] = "2021-11-03T14:07:22Z"
    assert normalize_node(beat)["fingerprint"] == base["fingerprint"]
    uncordoned = json.loads(json.dumps(node))
    uncordoned["spec"]["unschedulable"] = False
    assert normalize_node(uncordoned)["fingerprint"] != base["fingerprint"]
    obs = object_observation(node, watch_type="MODIFIED", observed_at=None, source=Source.OFFLINE)
    assert (
        obs is not None
        and obs.kind == Kind.NODE
        and obs.dedupe_key == "node:e0d1c2b3-a495-4867-9788-695a4b3c2d1e:48870"
    )
    assert obs.observed_at == datetime(2021, 11, 3, 14, 7, 12, tzinfo=UTC)  # the last heartbeat
    assert obs.pod_uid is None and obs.node == "worker-1"


def test_pdb_payload(k8s_fixture: Path):
    obs = object_observation(
        _mixed(k8s_fixture)["PodDisruptionBudget"], watch_type="LIST", observed_at=None, source=Source.OFFLINE
    )
    assert obs is not None and obs.kind == Kind.PDB
    p = obs.payload
    assert (p["namespace"], p["name"], p["min_available"], p["max_unavailable"]) == (
        "default",
        "web",
        1,
        None,
    )
    assert p["selector"] == {"match_labels": {"app": "web"}, "match_expressions": []}
    s = p["status"]
    assert (
        s["disruptions_allowed"],
        s["current_healthy"],
        s["desired_healthy"],
        s["expected_pods"],
        s["observed_generation"],
    ) == (0, 1, 1, 1, 1)
    assert s["disrupted_pods"] == {"web-7d9f8b6c4-x2k9p": "2021-11-03T14:07:14+00:00"}
    assert s["conditions"][0]["reason"] == "InsufficientPods"
    assert obs.dedupe_key == "pdb:aa11bb22-cc33-4d44-8e55-ff6677889900:48890"


def test_workload_payload_and_deleted(k8s_fixture: Path):
    deploy = _mixed(k8s_fixture)["Deployment"]
    obs = object_observation(
        deploy, watch_type="DELETED", observed_at=datetime(2021, 11, 4, tzinfo=UTC), source=Source.API
    )
    assert obs is not None and obs.kind == Kind.WORKLOAD_DELETED
    assert obs.dedupe_key == "workload:0f1e2d3c-4b5a-4968-8776-5a4b3c2d1e0f:48901:deleted"
    p = obs.payload
    assert (p["kind"], p["spec_replicas"], p["strategy"]) == ("Deployment", 2, "RollingUpdate")
    assert p["status"]["ready_replicas"] == 1 and p["status"]["unavailable_replicas"] == 1
    assert p["status"]["terminating_replicas"] is None
    assert p["status"]["conditions"][0]["reason"] == "MinimumReplicasUnavailable"
    # The watch event that delivered it, as for a pod: a deletion says so in its payload too.
    assert p["watch"] == "DELETED"
    modified = object_observation(deploy, watch_type="MODIFIED", observed_at=None, source=Source.API)
    assert modified is not None and modified.payload["watch"] == "MODIFIED"


def test_a_selector_requirement_that_is_not_an_object_is_read_as_empty(k8s_fixture: Path):
    """A PDB's ``matchExpressions`` item that is not an object (a hand-edited dump) is read as a
    requirement naming nothing, the rest of the PDB as it is: never a crash that loses the object."""
    pdb = json.loads(json.dumps(_mixed(k8s_fixture)["PodDisruptionBudget"]))
    pdb["spec"]["selector"]["matchExpressions"] = ["tier In (web)", {"key": "tier", "operator": "Exists"}]
    obs = object_observation(pdb, watch_type="LIST", observed_at=None, source=Source.OFFLINE)
    assert obs is not None and obs.payload["selector"]["match_expressions"] == [
        {"key": None, "operator": None, "values": []},
        {"key": "tier", "operator": "Exists", "values": []},
    ]


def test_invalid_and_unsupported_objects_raise_value_error_naming_them(k8s_fixture: Path):
    with pytest.raises(ValueError, match=r"Service default/web: unsupported kind 'Service'"):
        object_observation(
            _mixed(k8s_fixture)["Service"], watch_type="LIST", observed_at=None, source=Source.OFFLINE
        )
    with pytest.raises(ValueError, match="expected a metadata object"):
        object_observation({"kind": "Pod"}, watch_type="LIST", observed_at=None, source=Source.OFFLINE)
    with pytest.raises(ValueError, match="expected a JSON object"):
        object_observation([], watch_type="LIST", observed_at=None, source=Source.OFFLINE)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no timestamp inside"):
        object_observation(
            {"kind": "Node", "metadata": {"name": "n", "uid": "u"}},
            watch_type="LIST",
            observed_at=None,
            source=Source.OFFLINE,
        )


def test_mirror_pod_is_keyed_on_the_static_pod_uid():
    """The API gives a mirror pod a fresh uid each time; the kubelet speaks of the config hash."""
    static_uid = "d1c4757bcb230bf06ab7e866b62132a1"
    obj = {
        "metadata": {
            "name": "etcd-node-a",
            "namespace": "kube-system",
            "uid": "0b7e1c7e-8c1a-4b57-9d36-3f0f2c9a1e11",
            "resourceVersion": "42",
            "annotations": {"kubernetes.io/config.mirror": static_uid, "kubernetes.io/config.source": "file"},
        },
        "spec": {"nodeName": "node-a", "containers": [{"name": "etcd"}]},
        "status": {"phase": "Running"},
    }
    from datetime import UTC, datetime

    from collectors.parsers.k8s_objects import pod_observation

    obs = pod_observation(obj, watch_type="ADDED", observed_at=datetime(2024, 1, 1, tzinfo=UTC), source="api")
    assert obs.pod_uid == static_uid
    assert obs.payload["uid"] == static_uid
    assert obs.payload["api_uid"] == "0b7e1c7e-8c1a-4b57-9d36-3f0f2c9a1e11"
    assert obs.payload["static"] is True


def test_a_deleted_event_is_its_expiry_and_says_nothing_of_the_pod(k8s_fixture: Path) -> None:
    """Events expire by TTL (the API server's --event-ttl, 1 h by default): a watch's DELETED for an Event,
    however the watch type is spelled, is that expiry, not news of the pod: no observation. The same Event
    ADDED is read."""
    event = _mixed(k8s_fixture)["Event"]
    for watch_type in ("DELETED", "Deleted", "deleted"):
        assert object_observation(event, watch_type=watch_type, observed_at=None, source=Source.API) is None
    added = object_observation(event, watch_type="ADDED", observed_at=None, source=Source.API)
    assert added is not None and added.kind == Kind.EVENT


def test_a_pod_from_a_list_without_its_kind_is_still_named_a_pod_when_refused() -> None:
    """The API server's typed lists leave ``kind`` out of their items (k8s-facts.md: "Items have no
    kind/apiVersion inside typed lists"): a pod item that
    cannot be read is still named as a Pod, by namespace and name, or as a Pod with no name when it has no
    metadata (hand-written items)."""
    with pytest.raises(ValueError, match=r"^Pod shop/web-0: expected metadata.uid"):
        normalize_pod({"metadata": {"name": "web-0", "namespace": "shop"}})
    with pytest.raises(ValueError, match=r"^Pod <no name>: expected a metadata object"):
        normalize_pod({"spec": {"nodeName": "worker-1"}})


def test_a_pdbs_disrupted_pods_times_count_among_its_times(k8s_fixture: Path) -> None:
    """A granted eviction records the pod in the PDB's ``status.disruptedPods`` (pod name -> time;
    k8s-facts.md, eviction): a PDB snapshot is at least as late as that time, even when nothing else in it
    changed since (the fixture's PDB, its condition dated before the eviction)."""
    pdb = json.loads(json.dumps(_mixed(k8s_fixture)["PodDisruptionBudget"]))
    pdb["status"]["conditions"][0]["lastTransitionTime"] = "2021-11-03T14:02:11Z"
    assert pdb["status"]["disruptedPods"] == {"web-7d9f8b6c4-x2k9p": "2021-11-03T14:07:14Z"}
    assert newest_timestamp(pdb) == datetime(2021, 11, 3, 14, 7, 14, tzinfo=UTC)
