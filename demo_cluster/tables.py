"""Server-side ``meta.k8s.io/v1`` Tables, as the API server builds them for ``kubectl get``.

Columns and cells follow kubernetes/kubernetes ``pkg/printers/internalversion/printers.go`` (v1.32): the
API server always renders the wide columns (``GenerateOptions{Wide: true}``), and kubectl hides those with
``priority: 1`` unless ``-o wide``. Ages use apimachinery's ``duration.HumanDuration``. Descriptions are the
fields' OpenAPI documentation (kubectl does not print them).

Every kind the demo cluster serves has a printer here, so ``kubectl get`` never falls back to
``NAME AGE``. ``table`` builds a Table for a list (or, for a watch event, a one-row Table).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. "
    "It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)
CONTAINERS_DOC = "Names of each container in the template."
IMAGES_DOC = "Images referenced by each container in the template."
SELECTOR_DOC = (
    "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected "
    "by this deployment."
)


def _col(name: str, ctype: str, description: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": ctype, "format": fmt, "description": description, "priority": priority}


def _name() -> dict[str, Any]:
    return _col("Name", "string", NAME_DOC, fmt="name")


def _age() -> dict[str, Any]:
    return _col("Age", "string", AGE_DOC)


COLUMNS: dict[str, list[dict[str, Any]]] = {
    "pods": [
        _name(),
        _col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
        _col("Status", "string", "The aggregate status of the containers in this pod."),
        _col(
            "Restarts",
            "string",
            "The number of times the containers in this pod have been restarted and when the last container "
            "in this pod has restarted.",
        ),
        _age(),
        _col(
            "IP",
            "string",
            "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            1,
        ),
        _col(
            "Node",
            "string",
            "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for "
            "scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this "
            "node becomes responsible for the lifecycle of this pod. This field should not be used to express a "
            "desire for the pod to be scheduled on a specific node. "
            "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
            1,
        ),
        _col(
            "Nominated Node",
            "string",
            "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be "
            "scheduled right away as preemption victims receive their graceful termination periods. This field "
            "does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the "
            "pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the "
            "resources on this node to a higher priority pod that is created after preemption. As a result, "
            "this field may be different than PodSpec.nodeName when the pod is scheduled.",
            1,
        ),
        _col(
            "Readiness Gates",
            "string",
            "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its "
            'containers are ready AND all conditions specified in the readiness gates have status equal to "True" '
            "More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
            1,
        ),
    ],
    "poddisruptionbudgets": [
        _name(),
        _col("Min Available", "string", "The minimum number of pods that must be available."),
        _col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
        _col(
            "Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."
        ),
        _age(),
    ],
    "replicasets": [
        _name(),
        _col(
            "Desired",
            "integer",
            "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit "
            "zero and unspecified. Defaults to 1. More info: "
            "https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller",
        ),
        _col(
            "Current",
            "integer",
            "Replicas is the most recently observed number of replicas. More info: "
            "https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller",
        ),
        _col("Ready", "integer", "The number of ready replicas for this replica set."),
        _age(),
        _col("Containers", "string", CONTAINERS_DOC, 1),
        _col("Images", "string", IMAGES_DOC, 1),
        _col(
            "Selector",
            "string",
            "Selector is a label query over pods that should match the replica count. If the selector is empty, "
            "it is defaulted to the labels present on the pod template. Label keys and values that must match in "
            "order to be controlled by this replica set. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            1,
        ),
    ],
    "daemonsets": [
        _name(),
        _col(
            "Desired",
            "integer",
            "The total number of nodes that should be running the daemon pod (including nodes correctly running "
            "the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        _col(
            "Current",
            "integer",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. "
            "More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        _col(
            "Ready",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod "
            "running and ready.",
        ),
        _col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
        _col(
            "Available",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod "
            "running and available (ready for at least spec.minReadySeconds)",
        ),
        _col(
            "Node Selector",
            "string",
            "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must "
            "match a node's labels for the pod to be scheduled on that node. More info: "
            "https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
        ),
        _age(),
        _col("Containers", "string", CONTAINERS_DOC, 1),
        _col("Images", "string", IMAGES_DOC, 1),
        _col(
            "Selector",
            "string",
            "A label query over pods that are managed by the daemon set. Must match in order to be controlled. "
            "If empty, defaulted to labels on Pod template. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            1,
        ),
    ],
    "statefulsets": [
        _name(),
        _col("Ready", "string", "Number of the pod with ready state"),
        _age(),
        _col("Containers", "string", CONTAINERS_DOC, 1),
        _col("Images", "string", IMAGES_DOC, 1),
    ],
    "deployments": [
        _name(),
        _col("Ready", "string", "Number of the pod with ready state"),
        _col(
            "Up-to-date",
            "string",
            "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        _col(
            "Available",
            "string",
            "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        _age(),
        _col("Containers", "string", CONTAINERS_DOC, 1),
        _col("Images", "string", IMAGES_DOC, 1),
        _col("Selector", "string", SELECTOR_DOC, 1),
    ],
    "nodes": [
        _name(),
        _col("Status", "string", "The status of the node"),
        _col("Roles", "string", "The roles of the node"),
        _age(),
        _col("Version", "string", "Kubelet Version reported by the node."),
        _col(
            "Internal-IP",
            "string",
            "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "
            "https://kubernetes.io/docs/reference/node/node-status/#addresses",
            1,
        ),
        _col(
            "External-IP",
            "string",
            "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "
            "https://kubernetes.io/docs/reference/node/node-status/#addresses",
            1,
        ),
        _col(
            "OS-Image",
            "string",
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            1,
        ),
        _col(
            "Kernel-Version",
            "string",
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            1,
        ),
        _col(
            "Container-Runtime",
            "string",
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            1,
        ),
    ],
    "events": [
        _col(
            "Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."
        ),
        _col(
            "Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"
        ),
        _col(
            "Reason",
            "string",
            "This should be a short, machine understandable string that gives the reason for the transition "
            "into the object's current status.",
        ),
        _col("Object", "string", "The object that this event is about."),
        _col(
            "Subobject",
            "string",
            "If referring to a piece of an object instead of an entire object, this string should contain a "
            "valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if "
            "the object reference is to a container within a pod, this would take on a value like: "
            '"spec.containers{name}" (where "name" refers to the name of the container that triggered the '
            'event) or if no container name is specified "spec.containers[2]" (container with index 2 in this '
            "pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
            1,
        ),
        _col(
            "Source",
            "string",
            "The component reporting this event. Should be a short machine understandable string.",
            1,
        ),
        _col("Message", "string", "A human-readable description of the status of this operation."),
        _col(
            "First Seen",
            "string",
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            1,
        ),
        _col("Count", "string", "The number of times this event has occurred.", 1),
        _col("Name", "string", NAME_DOC, 1, "name"),
    ],
    "namespaces": [_name(), _col("Status", "string", "The status of the namespace"), _age()],
    "leases": [
        _name(),
        _col(
            "Holder",
            "string",
            "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader "
            "Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
        ),
        _age(),
    ],
}


# ---- formatting helpers (apimachinery's) --------------------------------------------------------
def human_duration(seconds: float) -> str:
    """``k8s.io/apimachinery/pkg/util/duration.HumanDuration``."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        s = secs % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def since(value: str | None, now: datetime) -> str:
    """``translateTimestampSince``: ``<unknown>`` for an unset time."""
    if not value:
        return "<unknown>"
    return human_duration((now - _parse_time(value)).total_seconds())


def format_labels(labels: Mapping[str, str] | None) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` joined by commas, ``<none>`` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def selector_string(selector: Mapping[str, Any] | None) -> str:
    """``metav1.LabelSelectorAsSelector(sel).String()``: requirements sorted by key."""
    if not selector:
        return ""
    reqs: list[tuple[str, str]] = []
    for k, v in (selector.get("matchLabels") or {}).items():
        reqs.append((k, f"{k}={v}"))
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key", ""), e.get("operator", ""), sorted(e.get("values") or [])
        text = {
            "In": f"{key} in ({','.join(values)})",
            "NotIn": f"{key} notin ({','.join(values)})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(op, key)
        reqs.append((key, text))
    return ",".join(text for _, text in sorted(reqs))


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``metav1.FormatLabelSelector``: ``<none>`` for an empty selector."""
    return selector_string(selector) or "<none>"


def _containers(spec: Mapping[str, Any]) -> tuple[str, str]:
    containers = spec.get("containers") or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _template_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec


def _int_or_string(value: Any) -> str:
    return "N/A" if value is None else str(value)


# ---- rows ---------------------------------------------------------------------------------------
def _pod_cells(pod: Mapping[str, Any], now: datetime) -> tuple[list[Any], list[dict[str, Any]]]:
    meta, spec, st = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    phase = st.get("phase") or ""
    reason = st.get("reason") or phase
    for cond in st.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    conditions: list[dict[str, Any]] = []
    if phase == "Succeeded":
        conditions = [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    elif phase == "Failed":
        conditions = [
            {"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}
        ]
    total = len(spec.get("containers") or [])
    ready = restarts = 0
    last_restart: str | None = None
    has_running = False
    initializing = False
    init_statuses = st.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        term = state.get("terminated")
        if term is not None and term.get("exitCode") == 0:
            continue
        if term is not None:
            reason = (
                "Init:" + term["reason"] if term.get("reason") else f"Init:ExitCode:{term.get('exitCode', 0)}"
            )
        elif (state.get("waiting") or {}).get("reason") not in (None, "", "PodInitializing"):
            reason = "Init:" + state["waiting"]["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in st.get("conditions") or []
    )
    if not initializing or initialized:
        restarts = 0
        for cs in reversed(st.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            last_term = (cs.get("lastState") or {}).get("terminated")
            if (
                last_term
                and last_term.get("finishedAt")
                and (last_restart is None or last_term["finishedAt"] > last_restart)
            ):
                last_restart = last_term["finishedAt"]
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = (
                    f"Signal:{term['signal']}"
                    if term.get("signal")
                    else f"ExitCode:{term.get('exitCode', 0)}"
                )
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_cond = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or []
            )
            reason = "Running" if ready_cond else "NotReady"
    if meta.get("deletionTimestamp") and st.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_str = str(restarts)
    if restarts and last_restart:
        restarts_str = f"{restarts} ({since(last_restart, now)} ago)"
    ips = st.get("podIPs") or []
    pod_ip = (ips[0].get("ip") if ips else "") or "<none>"
    gates = spec.get("readinessGates") or []
    gates_str = "<none>"
    if gates:
        conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
        gates_str = f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/{len(gates)}"
    cells = [
        meta["name"],
        f"{ready}/{total}",
        reason,
        restarts_str,
        since(meta.get("creationTimestamp"), now),
        pod_ip,
        spec.get("nodeName") or "<none>",
        st.get("nominatedNodeName") or "<none>",
        gates_str,
    ]
    return cells, conditions


def _pdb_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    return [
        obj["metadata"]["name"],
        _int_or_string(spec.get("minAvailable")),
        _int_or_string(spec.get("maxUnavailable")),
        int(st.get("disruptionsAllowed") or 0),
        since(obj["metadata"].get("creationTimestamp"), now),
    ]


def _rs_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    return [
        obj["metadata"]["name"],
        int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1),
        int(st.get("replicas") or 0),
        int(st.get("readyReplicas") or 0),
        since(obj["metadata"].get("creationTimestamp"), now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def _ds_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    tspec = _template_spec(obj)
    names, images = _containers(tspec)
    return [
        obj["metadata"]["name"],
        int(st.get("desiredNumberScheduled") or 0),
        int(st.get("currentNumberScheduled") or 0),
        int(st.get("numberReady") or 0),
        int(st.get("updatedNumberScheduled") or 0),
        int(st.get("numberAvailable") or 0),
        format_labels(tspec.get("nodeSelector")),
        since(obj["metadata"].get("creationTimestamp"), now),
        names,
        images,
        format_label_selector(spec.get("selector")),
    ]


def _sts_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    desired = spec.get("replicas", 1) if spec.get("replicas") is not None else 1
    return [
        obj["metadata"]["name"],
        f"{int(st.get('readyReplicas') or 0)}/{int(desired)}",
        since(obj["metadata"].get("creationTimestamp"), now),
        names,
        images,
    ]


def _deploy_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    spec, st = obj.get("spec") or {}, obj.get("status") or {}
    names, images = _containers(_template_spec(obj))
    desired = spec.get("replicas", 1) if spec.get("replicas") is not None else 1
    return [
        obj["metadata"]["name"],
        f"{int(st.get('readyReplicas') or 0)}/{int(desired)}",
        int(st.get("updatedReplicas") or 0),
        int(st.get("availableReplicas") or 0),
        since(obj["metadata"].get("creationTimestamp"), now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


def node_roles(labels: Mapping[str, str]) -> list[str]:
    roles = set()
    for k, v in labels.items():
        if k.startswith("node-role.kubernetes.io/") and k[len("node-role.kubernetes.io/") :]:
            roles.add(k[len("node-role.kubernetes.io/") :])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    return sorted(roles)


def _node_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    meta, spec, st = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    status: list[str] = []
    for cond in st.get("conditions") or []:
        if cond.get("type") == "Ready":
            status.append("Ready" if cond.get("status") == "True" else "NotReady")
    if not status:
        status.append("Unknown")
    if spec.get("unschedulable"):
        status.append("SchedulingDisabled")
    info = st.get("nodeInfo") or {}
    addresses = st.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address", "") for a in addresses if a.get("type") == kind), "<none>")

    return [
        meta["name"],
        ",".join(status),
        ",".join(node_roles(meta.get("labels") or {})) or "<none>",
        since(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _event_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    first = (
        since(obj.get("firstTimestamp"), now)
        if obj.get("firstTimestamp")
        else since(obj.get("eventTime"), now)
    )
    last = since(obj.get("lastTimestamp"), now) if obj.get("lastTimestamp") else first
    count = obj.get("count") or 0
    series = obj.get("series")
    if series is not None:
        last = since(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    return [
        last,
        obj.get("type", ""),
        obj.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{component}, {host}" if host else component,
        str(obj.get("message", "")).strip(),
        first,
        int(count),
        obj["metadata"]["name"],
    ]


def _namespace_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    return [
        obj["metadata"]["name"],
        (obj.get("status") or {}).get("phase", ""),
        since(obj["metadata"].get("creationTimestamp"), now),
    ]


def _lease_cells(obj: Mapping[str, Any], now: datetime) -> list[Any]:
    return [
        obj["metadata"]["name"],
        (obj.get("spec") or {}).get("holderIdentity") or "",
        since(obj["metadata"].get("creationTimestamp"), now),
    ]


CELLS: dict[str, Callable[[Mapping[str, Any], datetime], list[Any]]] = {
    "poddisruptionbudgets": _pdb_cells,
    "replicasets": _rs_cells,
    "daemonsets": _ds_cells,
    "statefulsets": _sts_cells,
    "deployments": _deploy_cells,
    "nodes": _node_cells,
    "events": _event_cells,
    "namespaces": _namespace_cells,
    "leases": _lease_cells,
}


def row(
    resource: str, obj: dict[str, Any], now: datetime, include_object: str, kind: str, api_version: str
) -> dict[str, Any]:
    """One Table row of ``obj``; ``include_object`` is the request's ``includeObject`` (``Metadata`` by
    default, ``Object`` for the whole object, ``None`` for none)."""
    conditions: list[dict[str, Any]] = []
    if resource == "pods":
        cells, conditions = _pod_cells(obj, now)
    else:
        cells = CELLS[resource](obj, now)
    out: dict[str, Any] = {"cells": cells}
    if conditions:
        out["conditions"] = conditions
    if include_object == "Object":
        out["object"] = {"kind": kind, "apiVersion": api_version, **obj}
    elif include_object != "None":
        out["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"],
        }
    return out


def has_table(resource: str) -> bool:
    return resource in COLUMNS


def table(
    resource: str,
    objs: list[dict[str, Any]],
    now: datetime,
    rv: str,
    include_object: str,
    kind: str,
    api_version: str,
    headers: bool = True,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``objs``; ``headers=False`` leaves ``columnDefinitions`` null (the
    API server does so for every watch event after the first)."""
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": COLUMNS[resource] if headers else None,
        "rows": [row(resource, o, now, include_object, kind, api_version) for o in objs],
    }
