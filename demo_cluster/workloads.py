"""StatefulSet and DaemonSet controllers of the demo cluster (k8s-facts.md §8).

Both follow the real controllers' visible behaviour, not their code:

* StatefulSet (``podManagementPolicy: OrderedReady``, ``RollingUpdate`` with partition 0): pods
  ``NAME-0``, ``NAME-1``, … are created one at a time, each only once the previous one is Running and
  Ready; an update replaces them from the highest ordinal down, deleting a pod and re-creating it under
  the **same name with a new UID**; ``currentRevision`` becomes ``updateRevision`` when every pod runs
  the new revision and is ready. Events: ``SuccessfulCreate`` / ``SuccessfulDelete`` with the
  statefulset-controller's wording (``create Pod web-0 in StatefulSet web successful``).
* DaemonSet: one pod per node matching the template's nodeSelector, pinned with a ``matchFields``
  node affinity on ``metadata.name`` and the DaemonSet tolerations, placed by the default scheduler;
  a node that joins gets its pod. Events: ``SuccessfulCreate`` ``Created pod: NAME``.

Status fields are computed as the controllers do (``computeReplicaStatus`` / ``updateDaemonSetStatus``)
and written only when they change. Functions here run under ``engine.lock``; SimCluster calls them.
"""

from __future__ import annotations

import copy
import random
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from .kubelet import Behaviour
from .objects import (
    DAEMONSET_TOLERATIONS,
    EventRecorder,
    controller_of,
    daemon_pod_affinity,
    is_ready,
    make_pod,
    new_uid,
    owner_ref,
    rand_suffix,
    revision_hash,
    ts,
)
from .store import Store


class WorkloadHost(EventRecorder, Protocol):
    """What the StatefulSet and DaemonSet controllers need of their cluster (``SimCluster`` is one), declared
    beside them so this module imports nothing of ``cluster.py``: no import cycle among the demo cluster's
    modules (tests/sim/test_import_graph.py)."""

    store: Store
    rng: random.Random
    workload_behaviour: dict[str, Behaviour]

    @property
    def now(self) -> datetime: ...

    def ensure_namespace(self, name: str, uid: str | None = None) -> None: ...

    def create_pod(self, pod: dict[str, Any], behaviour: Behaviour | None = None) -> dict[str, Any]: ...

    def delete_pod(self, namespace: str, name: str, grace: int | None = None) -> dict[str, Any] | None: ...

    def owned_pods(self, owner_uid: str) -> list[dict[str, Any]]: ...

    def _mark_dirty(self, kind: str, namespace: str, name: str) -> None: ...

    def acting_controller(self, account: str) -> AbstractContextManager[None]: ...


REVISION_LABEL = "controller-revision-hash"


def _template(
    name: str,
    image: str,
    labels: dict[str, str],
    node_selector: dict[str, str] | None,
    grace: int,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": name.split("-")[0], "image": image}],
        "terminationGracePeriodSeconds": grace,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def _revision(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['name']}-{revision_hash(obj['spec']['template'])}"


def _terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _terminal(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") in ("Succeeded", "Failed")


def _running_and_ready(pod: dict[str, Any]) -> bool:
    return pod["status"].get("phase") == "Running" and is_ready(pod) and not _terminating(pod)


# ---- StatefulSet --------------------------------------------------------------------------------
def create_statefulset(
    c: WorkloadHost,
    namespace: str,
    name: str,
    replicas: int,
    image: str,
    labels: dict[str, str],
    node_selector: dict[str, str] | None = None,
    behaviour: Behaviour | None = None,
    grace: int = 30,
    service_name: str | None = None,
) -> dict[str, Any]:
    c.ensure_namespace(namespace)
    sts: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": new_uid(c.rng),
            "generation": 1,
            "creationTimestamp": ts(c.now),
            "labels": dict(labels),
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": _template(name, image, labels, node_selector, grace),
            "serviceName": service_name or name,
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "revisionHistoryLimit": 10,
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        },
        "status": {"replicas": 0, "availableReplicas": 0},
    }
    c.workload_behaviour[sts["metadata"]["uid"]] = behaviour or Behaviour()
    c.store.put("statefulsets", sts)
    c._mark_dirty("sts", namespace, name)
    return sts


def _ordinal(sts_name: str, pod: dict[str, Any]) -> int:
    tail = pod["metadata"]["name"][len(sts_name) + 1 :]
    return int(tail) if tail.isdigit() else -1


def _sts_pod(c: WorkloadHost, sts: dict[str, Any], ordinal: int, revision: str) -> dict[str, Any]:
    meta, spec = sts["metadata"], sts["spec"]
    tmpl = spec["template"]
    pname = f"{meta['name']}-{ordinal}"
    labels = {
        **tmpl["metadata"]["labels"],
        "apps.kubernetes.io/pod-index": str(ordinal),
        REVISION_LABEL: revision,
        "statefulset.kubernetes.io/pod-name": pname,
    }
    return make_pod(
        namespace=meta["namespace"],
        name=pname,
        uid=new_uid(c.rng),
        created=c.now,
        labels=labels,
        containers=tmpl["spec"]["containers"],
        owner=owner_ref(sts, "StatefulSet", "apps/v1"),
        node_selector=tmpl["spec"].get("nodeSelector"),
        grace=tmpl["spec"].get("terminationGracePeriodSeconds", 30),
        extra_spec={"hostname": pname, "subdomain": spec["serviceName"]},
    )


def reconcile_statefulset(c: WorkloadHost, namespace: str, name: str) -> None:
    sts = c.store.get("statefulsets", namespace, name)
    if sts is None:
        return
    uid = sts["metadata"]["uid"]
    want = sts["spec"]["replicas"]
    update_rev = _revision(sts)
    current_rev = sts["status"].get("currentRevision") or update_rev
    pods = {_ordinal(name, p): p for p in c.owned_pods(uid)}

    def record(verb: str, pname: str) -> None:
        reason = "SuccessfulCreate" if verb == "create" else "SuccessfulDelete"
        c.record_event(
            sts,
            "Normal",
            reason,
            f"{verb} Pod {pname} in StatefulSet {name} successful",
            "statefulset-controller",
        )

    # OrderedReady: walk the ordinals up; create the first missing one, stop at anything not ready.
    blocked = False
    for i in range(want):
        pod = pods.get(i)
        if pod is None:
            new = _sts_pod(c, sts, i, update_rev)
            c.create_pod(new, c.workload_behaviour.get(uid))
            record("create", new["metadata"]["name"])
            blocked = True
            break
        if _terminal(pod) and not _terminating(pod):
            c.delete_pod(namespace, pod["metadata"]["name"])
            record("delete", pod["metadata"]["name"])
            blocked = True
            break
        if not _running_and_ready(pod):
            blocked = True
            break
    if not blocked:
        # Scale down from the highest ordinal, one at a time.
        extra = sorted((i for i in pods if i >= want or i < 0), reverse=True)
        if extra:
            pod = pods[extra[0]]
            if not _terminating(pod):
                c.delete_pod(namespace, pod["metadata"]["name"])
                record("delete", pod["metadata"]["name"])
            blocked = True
    if not blocked:
        # RollingUpdate: replace the highest ordinal still on an old revision.
        for i in range(want - 1, -1, -1):
            pod = pods[i]
            if pod["metadata"]["labels"].get(REVISION_LABEL) != update_rev:
                c.delete_pod(namespace, pod["metadata"]["name"])
                record("delete", pod["metadata"]["name"])
                break
    _statefulset_status(c, sts, current_rev, update_rev)


def _statefulset_status(c: WorkloadHost, sts: dict[str, Any], current_rev: str, update_rev: str) -> None:
    meta = sts["metadata"]
    pods = c.owned_pods(meta["uid"])
    replicas = ready = current = updated = 0
    for pod in pods:
        replicas += 1
        if _running_and_ready(pod):
            ready += 1
        if not _terminating(pod):
            rev = pod["metadata"]["labels"].get(REVISION_LABEL)
            current += rev == current_rev
            updated += rev == update_rev
    want = sts["spec"]["replicas"]
    if updated == want and ready == want and replicas == want:
        current_rev, current = update_rev, updated  # the rolling update is complete
    st: dict[str, Any] = {
        "observedGeneration": meta["generation"],
        "replicas": replicas,
        "readyReplicas": ready,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "currentRevision": current_rev,
        "updateRevision": update_rev,
        "collisionCount": 0,
        "availableReplicas": ready,
    }
    for key in ("readyReplicas", "currentReplicas", "updatedReplicas"):  # omitempty int32 fields
        if not st[key]:
            del st[key]
    if sts["status"].get("conditions"):  # conditions a client wrote stay (the controller compares counts)
        st["conditions"] = sts["status"]["conditions"]
    if st != sts["status"]:
        sts["status"] = st
        c.store.put("statefulsets", sts)


def update_statefulset(c: WorkloadHost, namespace: str, name: str, fn: Any) -> None:
    sts = c.store.get("statefulsets", namespace, name)
    if sts is None:
        return
    before = copy.deepcopy(sts["spec"])
    fn(sts)
    if sts["spec"] != before:
        sts["metadata"]["generation"] += 1
    c.store.put("statefulsets", sts)
    c._mark_dirty("sts", namespace, name)


# ---- DaemonSet ----------------------------------------------------------------------------------
def create_daemonset(
    c: WorkloadHost,
    namespace: str,
    name: str,
    image: str,
    labels: dict[str, str],
    node_selector: dict[str, str] | None = None,
    behaviour: Behaviour | None = None,
    grace: int = 30,
) -> dict[str, Any]:
    c.ensure_namespace(namespace)
    ds: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": new_uid(c.rng),
            "generation": 1,
            "creationTimestamp": ts(c.now),
            "labels": dict(labels),
            "annotations": {"deprecated.daemonset.template.generation": "1"},
        },
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": _template(name, image, labels, node_selector, grace),
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        },
    }
    c.workload_behaviour[ds["metadata"]["uid"]] = behaviour or Behaviour()
    c.store.put("daemonsets", ds)
    c._mark_dirty("ds", namespace, name)
    return ds


def _eligible_nodes(c: WorkloadHost, ds: dict[str, Any]) -> list[str]:
    sel = ds["spec"]["template"]["spec"].get("nodeSelector") or {}
    out = []
    for node in c.store.iter_objects("nodes"):
        labels = node["metadata"].get("labels") or {}
        if all(labels.get(k) == v for k, v in sel.items()):
            out.append(node["metadata"]["name"])
    return out


def pinned_node(pod: dict[str, Any]) -> str:
    """The node a ``matchFields metadata.name In [node]`` affinity (DaemonSet pods) pins a pod to."""
    try:
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        field = terms[0]["matchFields"][0]
    except (KeyError, IndexError, TypeError):
        return ""
    if field.get("key") == "metadata.name" and field.get("operator") == "In" and field.get("values"):
        return str(field["values"][0])
    return ""


def _ds_target(pod: dict[str, Any]) -> str:
    return pinned_node(pod) or pod["spec"].get("nodeName") or ""


def reconcile_daemonset(c: WorkloadHost, namespace: str, name: str) -> None:
    ds = c.store.get("daemonsets", namespace, name)
    if ds is None:
        return
    meta, spec = ds["metadata"], ds["spec"]
    uid = meta["uid"]
    revision = _revision(ds)
    nodes = _eligible_nodes(c, ds)
    by_node: dict[str, list[dict[str, Any]]] = {}
    for pod in c.owned_pods(uid):
        by_node.setdefault(_ds_target(pod), []).append(pod)
    tmpl = spec["template"]
    for node in nodes:
        live = [p for p in by_node.get(node, []) if not _terminating(p) and not _terminal(p)]
        if live:
            continue
        pname = f"{name}-{rand_suffix(c.rng)}"
        labels = {
            **tmpl["metadata"]["labels"],
            REVISION_LABEL: revision.rsplit("-", 1)[1],
            "pod-template-generation": str(meta["generation"]),
        }
        pod = make_pod(
            namespace=namespace,
            name=pname,
            uid=new_uid(c.rng),
            created=c.now,
            labels=labels,
            containers=tmpl["spec"]["containers"],
            owner=owner_ref(ds, "DaemonSet", "apps/v1"),
            node_selector=tmpl["spec"].get("nodeSelector"),
            grace=tmpl["spec"].get("terminationGracePeriodSeconds", 30),
            extra_spec={"affinity": daemon_pod_affinity(node), "tolerations": DAEMONSET_TOLERATIONS},
        )
        c.create_pod(pod, c.workload_behaviour.get(uid))
        c.record_event(ds, "Normal", "SuccessfulCreate", f"Created pod: {pname}", "daemonset-controller")
    _daemonset_status(c, ds, nodes)


def _daemonset_status(c: WorkloadHost, ds: dict[str, Any], nodes: list[str]) -> None:
    eligible = set(nodes)
    scheduled = misscheduled = ready = updated = 0
    gen = str(ds["metadata"]["generation"])
    seen: set[str] = set()
    for pod in c.owned_pods(ds["metadata"]["uid"]):
        node = pod["spec"].get("nodeName")
        if not node or _terminating(pod) or node in seen:
            continue
        seen.add(node)
        if node not in eligible:
            misscheduled += 1
            continue
        scheduled += 1
        if _running_and_ready(pod):
            ready += 1
        if pod["metadata"]["labels"].get("pod-template-generation") == gen:
            updated += 1
    desired = len(eligible)
    st: dict[str, Any] = {
        "currentNumberScheduled": scheduled,
        "numberMisscheduled": misscheduled,
        "desiredNumberScheduled": desired,
        "numberReady": ready,
        "observedGeneration": ds["metadata"]["generation"],
        "updatedNumberScheduled": updated,
        "numberAvailable": ready,
        "numberUnavailable": desired - ready,
    }
    for key in ("updatedNumberScheduled", "numberAvailable", "numberUnavailable"):  # omitempty
        if not st[key]:
            del st[key]
    if ds["status"].get("conditions"):  # storeDaemonSetStatus updates a copy: conditions stay
        st["conditions"] = ds["status"]["conditions"]
    if st != ds["status"]:
        ds["status"] = st
        c.store.put("daemonsets", ds)


# ---- cascading deletes --------------------------------------------------------------------------
def delete_workload(c: WorkloadHost, resource: str, namespace: str, name: str) -> None:
    """Background cascading delete: the object goes now, the garbage collector deletes its pods."""
    obj = c.store.delete(resource, namespace, name)
    if obj is None:
        return
    with c.acting_controller("generic-garbage-collector"):
        for pod in c.owned_pods(obj["metadata"]["uid"]):
            if (controller_of(pod) or {}).get("uid") == obj["metadata"]["uid"]:
                c.delete_pod(namespace, pod["metadata"]["name"])
