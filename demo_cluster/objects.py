"""Builders for the Kubernetes objects the demo cluster serves, shaped as a real API server shows them.

Times: object timestamps (creationTimestamp, lastTransitionTime, startedAt, first/lastTimestamp) have
second precision as on the wire; ``eventTime`` and kubelet log lines keep microseconds.
"""

from __future__ import annotations

import functools
import hashlib
import random
import uuid
from datetime import datetime
from typing import Any, Protocol

SAFE_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand alphanumerics


def ts(t: datetime) -> str:
    """RFC 3339 with second precision, as metav1.Time serializes (``t`` is UTC; isoformat is ~4x
    faster than strftime, which matters when building 150,000 pods)."""
    return t.isoformat(timespec="seconds")[:19] + "Z"


def ts_micro(t: datetime) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime serializes (``t`` is UTC)."""
    return t.isoformat(timespec="microseconds")[:26] + "Z"


def new_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def rand_suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(SAFE_CHARS) for _ in range(n))


def container_id(rng: random.Random) -> str:
    return "containerd://" + f"{rng.getrandbits(256):064x}"


def template_hash(template: dict[str, Any]) -> str:
    """A stable pod-template-hash-like string (the real one is an FNV hash rendered with SAFE_CHARS)."""
    digest = hashlib.sha256(repr(sorted(template.items())).encode()).digest()
    return "".join(SAFE_CHARS[b % len(SAFE_CHARS)] for b in digest[:10])


@functools.lru_cache(maxsize=256)
def image_id(image: str) -> str:
    """A stable ``imageID`` (repo digest) for an image reference."""
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    if "/" not in repo:
        repo = "docker.io/library/" + repo
    elif "." not in repo.split("/", 1)[0]:
        repo = "docker.io/" + repo
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def revision_hash(obj: Any) -> str:
    """A controller-revision-hash-like suffix (the real one is an FNV hash of the template)."""
    digest = hashlib.sha256(repr(obj).encode()).digest()
    return "".join(SAFE_CHARS[b % len(SAFE_CHARS)] for b in digest[:10])


def static_pod_uid(namespace: str, name: str, node: str, manifest: str) -> str:
    """Static pods are keyed by an md5 of their manifest: 32 hex characters, no dashes."""
    return hashlib.md5(f"{namespace}/{name}@{node}\n{manifest}".encode()).hexdigest()


def go_label_selector(selector: dict[str, Any]) -> str:
    """``%v`` of a *metav1.LabelSelector, as the disruption controller prints it."""
    labels = selector.get("matchLabels") or {}
    inner = ",".join(f"{k}: {v}" for k, v in sorted(labels.items()))
    parts = [f"MatchLabels:map[string]string{{{inner},}}"]
    exprs = selector.get("matchExpressions") or []
    if exprs:
        rendered = ",".join(
            f"LabelSelectorRequirement{{Key:{e['key']},Operator:{e['operator']},Values:[{' '.join(e.get('values') or [])}],}}"
            for e in exprs
        )
        parts.append(f"MatchExpressions:[]LabelSelectorRequirement{{{rendered},}}")
    else:
        parts.append("MatchExpressions:[]LabelSelectorRequirement{}")
    return "&LabelSelector{" + ",".join(parts) + ",}"


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector against labels (an empty selector matches everything, as in policy/v1)."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def condition(
    ctype: str, status: bool | str, t: datetime, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    cond: dict[str, Any] = {
        "type": ctype,
        "status": status if isinstance(status, str) else ("True" if status else "False"),
    }
    cond["lastProbeTime"] = None
    cond["lastTransitionTime"] = ts(t)
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def set_condition(conds: list[dict[str, Any]], new: dict[str, Any]) -> None:
    """Replace a condition by type, keeping lastTransitionTime when the status did not change."""
    for i, old in enumerate(conds):
        if old["type"] == new["type"]:
            if old["status"] == new["status"]:
                new["lastTransitionTime"] = old.get("lastTransitionTime", new["lastTransitionTime"])
            conds[i] = new
            return
    conds.append(new)


def get_condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    conditions: list[dict[str, Any]] = obj.get("status", {}).get("conditions") or []
    return next((cond for cond in conditions if cond["type"] == ctype), None)


def is_ready(pod: dict[str, Any]) -> bool:
    cond = get_condition(pod, "Ready")
    return bool(cond and cond["status"] == "True")


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    refs: list[dict[str, Any]] = obj["metadata"].get("ownerReferences") or []
    return next((ref for ref in refs if ref.get("controller")), None)


def owner_ref(owner: dict[str, Any], kind: str, api_version: str, controller: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def make_pod(
    *,
    namespace: str,
    name: str,
    uid: str,
    created: datetime,
    labels: dict[str, str],
    containers: list[dict[str, Any]],
    owner: dict[str, Any] | None = None,
    node_selector: dict[str, str] | None = None,
    grace: int = 30,
    annotations: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
    node_name: str | None = None,
    priority: int = 0,
    extra_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod as the API server stores it at creation (``extra_spec`` adds or replaces spec fields, e.g.
    the affinity/tolerations a DaemonSet sets or a StatefulSet pod's hostname/subdomain)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "resourceVersion": "0",
        "creationTimestamp": ts(created),
        "labels": dict(labels),
    }
    if name and owner and owner.get("kind") in ("ReplicaSet", "DaemonSet"):
        meta["generateName"] = owner["name"] + "-"
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        meta["ownerReferences"] = [owner]
    if finalizers:
        meta["finalizers"] = list(finalizers)
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": c["name"],
                "image": c["image"],
                "resources": c.get("resources", {}),
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
            for c in containers
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": grace,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": priority,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_name:
        spec["nodeName"] = node_name
    if extra_spec:
        spec.update(extra_spec)
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }


def running_status(
    pod: dict[str, Any],
    *,
    scheduled: datetime,
    started: datetime,
    host_ip: str,
    pod_ip: str,
    container_ids: dict[str, str],
) -> dict[str, Any]:
    """``status`` of a pod whose containers all run and are ready, as the kubelet leaves it after setup."""
    conds = [
        condition("PodReadyToStartContainers", True, started),
        condition("Initialized", True, scheduled),
        condition("Ready", True, started),
        condition("ContainersReady", True, started),
        condition("PodScheduled", True, scheduled),
    ]
    return {
        "phase": "Running",
        "conditions": conds,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": ts(scheduled),
        "containerStatuses": [
            {
                "name": c["name"],
                "state": {"running": {"startedAt": ts(started)}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": c["image"],
                "imageID": image_id(c["image"]),
                "containerID": container_ids.get(c["name"], ""),
                "started": True,
            }
            for c in pod["spec"]["containers"]
        ],
        "qosClass": pod["status"].get("qosClass", "BestEffort"),
    }


DAEMONSET_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def daemon_pod_affinity(node: str) -> dict[str, Any]:
    """The node affinity the DaemonSet controller pins each of its pods with (matchFields on the name)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }


def make_node(
    name: str,
    uid: str,
    created: datetime,
    labels: dict[str, str],
    ip: str,
    pod_cidr: str,
    kubelet_version: str,
    heartbeat: datetime | None = None,
) -> dict[str, Any]:
    hb = ts(heartbeat or created)
    conds = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
    ]
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "resourceVersion": "0",
            "creationTimestamp": ts(created),
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **labels,
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr], "providerID": f"podlife-sim://{name}"},
        "status": {
            "capacity": {"cpu": "8", "ephemeral-storage": "102350Mi", "memory": "32856640Ki", "pods": "110"},
            "allocatable": {
                "cpu": "8",
                "ephemeral-storage": "94321Mi",
                "memory": "32754240Ki",
                "pods": "110",
            },
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "lastHeartbeatTime": hb,
                    "lastTransitionTime": hb,
                    "reason": r,
                    "message": m,
                }
                for t, s, r, m in conds
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": hashlib.md5(name.encode()).hexdigest(),
                "systemUUID": uid,
                "bootID": uid,
                "kernelVersion": "6.1.0-podlife",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def event_to_events_v1(ev: dict[str, Any]) -> dict[str, Any]:
    """The events.k8s.io/v1 view of a core/v1 Event (same uid/resourceVersion, renamed fields)."""
    out: dict[str, Any] = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": ev["metadata"]}
    out["eventTime"] = ev.get("eventTime")
    if ev.get("series"):
        out["series"] = ev["series"]
    for src, dst in (
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
    ):
        if ev.get(src) is not None:
            out[dst] = ev[src]
    out["regarding"] = ev.get("involvedObject", {})
    if ev.get("related"):
        out["related"] = ev["related"]
    out["note"] = ev.get("message", "")
    out["type"] = ev.get("type", "Normal")
    if ev.get("source"):
        out["deprecatedSource"] = ev["source"]
    if ev.get("firstTimestamp"):
        out["deprecatedFirstTimestamp"] = ev["firstTimestamp"]
    if ev.get("lastTimestamp"):
        out["deprecatedLastTimestamp"] = ev["lastTimestamp"]
    if ev.get("count"):
        out["deprecatedCount"] = ev["count"]
    return out


def status(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None, ok: bool = False
) -> dict[str, Any]:
    """A metav1.Status as the API server returns it."""
    out: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if ok else "Failure",
    }
    if not ok:
        out["message"] = message
        out["reason"] = reason
        if details is not None:
            out["details"] = details
    out["code"] = code
    return out


class EventRecorder(Protocol):
    """Who records Events for the demo cluster's controllers and kubelets (``SimCluster``): one declaration
    the kubelet's and the workload controllers' host protocols share."""

    def record_event(
        self,
        obj: dict[str, Any],
        etype: str,
        reason: str,
        message: str,
        component: str,
        host: str = "",
        field_path: str | None = None,
        micro: bool = False,
        action: str | None = None,
    ) -> dict[str, Any]: ...
