"""SimCluster: the demo cluster's state and its control plane (API writes, scheduler, ReplicaSet,
Deployment, StatefulSet, DaemonSet and disruption controllers, the eviction subresource, event expiry)
plus one SimKubelet per node, which also posts its node's status heartbeat.

Everything runs under ``engine.lock`` at virtual time; HTTP handlers that write (eviction, delete, the
hooks) take the same lock, so the cluster is only ever changed by one thread at a time.
"""

from __future__ import annotations

import contextlib
import copy
import random
import uuid
import zlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from . import workloads, writes
from .audit import DISRUPTION, GC, Actor, AuditLog
from .engine import Engine, Process
from .kubelet import KUBELET_VERSION, Behaviour, SimKubelet, Worker
from .objects import (
    condition,
    controller_of,
    get_condition,
    go_label_selector,
    is_ready,
    make_node,
    make_pod,
    new_uid,
    owner_ref,
    rand_suffix,
    selector_matches,
    set_condition,
    status,
    template_hash,
    ts,
    ts_micro,
)
from .patch import PatchError, apply_patch
from .store import RESOURCES, ResourceType, Store
from .truth import TruthEntry, TruthLog

DEFAULT_START = datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC)
UNMANAGED_MESSAGE = (
    "Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. As a result, the "
    "status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these "
    'pods please set ".spec.minAvailable" field of the PDB to an integer value.'
)
PDB_BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
# The service account of the controller that creates a pod owned by each kind, and that reconciles each
# kind of dirty key (``_mark_dirty``): who the audit log names.
CREATED_BY = {
    "ReplicaSet": "replicaset-controller",
    "StatefulSet": "statefulset-controller",
    "DaemonSet": "daemon-set-controller",
    "Job": "job-controller",
}
RECONCILED_BY = {
    "rs": "replicaset-controller",
    "deploy": "deployment-controller",
    "pdbns": DISRUPTION,
    "sts": "statefulset-controller",
    "ds": "daemon-set-controller",
    "dsall": "daemon-set-controller",
}

# Defaults; ``scale`` lowers the memory-bound ones (see scenarios.scale_limits) unless set explicitly.
HISTORY_LIMIT = 200_000  # watch-cache entries kept for replay
KUBELET_LOG_LIMIT = 20_000  # klog lines kept per kubelet
HEARTBEAT_INTERVAL = 10.0  # kubelet nodeStatusUpdateFrequency
LEASE_DURATION = 40  # kubelet nodeLeaseDurationSeconds; the lease is renewed every quarter of it
LEASE_INTERVAL = LEASE_DURATION / 4
NODE_LEASE_NAMESPACE = "kube-node-lease"
TAINT_DELAY = 0.05  # the node lifecycle controller's reaction to a node update (seconds)
EVENT_TTL = 3600.0  # kube-apiserver --event-ttl


def _evictor(actor: str) -> Actor:
    """Who an eviction's ``actor`` label is: kubectl drain and HTTP clients are the admin with kubectl; any
    other name a service account of that name (an operator) in ``default``."""
    if actor in ("api", "kubectl-drain"):
        return Actor.admin()
    return Actor(
        f"system:serviceaccount:default:{actor}",
        ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
        f"{actor}/v1.0.0",
        "10.0.3.7",
    )


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        whole, rem = divmod(pct * total, 100)
        return whole + (1 if round_up and rem else 0)
    return int(value)


class SimCluster:
    """The whole simulated cluster. Deterministic given ``seed`` and ``start``."""

    def __init__(
        self,
        seed: int = 0,
        start: datetime | None = None,
        history_limit: int | None = None,
        kubelet_log_limit: int | None = None,
        forbidden: tuple[str, ...] = (),
        heartbeat_interval: float | None = None,
        event_ttl: float | None = None,
        absent_groups: tuple[str, ...] = (),
        lease_interval: float | None = None,
    ) -> None:
        """``history_limit``, ``kubelet_log_limit``, ``heartbeat_interval`` (0 = no heartbeats),
        ``event_ttl`` (0 = events live forever) and ``lease_interval`` (seconds between node Lease renewals,
        0 = none) left as None take the defaults above, or the ``scale`` scenario's
        (scenarios.scale_limits)."""
        self.rng = random.Random(seed)
        self.engine = Engine(start or DEFAULT_START)
        self.explicit = {
            k
            for k, v in (
                ("history_limit", history_limit),
                ("kubelet_log_limit", kubelet_log_limit),
                ("heartbeat_interval", heartbeat_interval),
                ("event_ttl", event_ttl),
                ("lease_interval", lease_interval),
            )
            if v is not None
        }
        self.store = Store(HISTORY_LIMIT if history_limit is None else history_limit)
        self.kubelet_log_limit = KUBELET_LOG_LIMIT if kubelet_log_limit is None else kubelet_log_limit
        self.kubelet_verbosity = 4  # every kubelet's klog --v (scenario option kubelet_verbosity)
        self.heartbeat_interval = HEARTBEAT_INTERVAL if heartbeat_interval is None else heartbeat_interval
        self.event_ttl = EVENT_TTL if event_ttl is None else event_ttl
        self.lease_interval = LEASE_INTERVAL if lease_interval is None else lease_interval
        # (elapsed at creation, namespace, name, dedupe key) of each event, oldest first, for the TTL
        self._event_born: deque[tuple[float, str, str, tuple[str, str, str, str]]] = deque()
        self._event_touched: dict[tuple[str, str], float] = {}
        self._event_gc_started = False
        self._node_cidr: dict[str, str] = {}
        self.forbidden = set(forbidden)  # resource names (or "nodes/proxy") answered with 403
        # API groups this server does not serve (404, left out of discovery), like an older API server
        # without events.k8s.io/v1.
        self.absent_groups = set(absent_groups)
        self.kubelets: dict[str, SimKubelet] = {}
        self.behaviours: dict[tuple[str, str], Behaviour] = {}
        self.workload_behaviour: dict[str, Behaviour] = {}
        self._node_ips: dict[str, str] = {}
        self._pod_ip_next: dict[str, int] = defaultdict(lambda: 2)
        self._pods_by_owner: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self._pods_on_node: dict[str, set[tuple[str, str]]] = defaultdict(set)
        self._dirty: set[tuple[str, str, str]] = set()
        self._event_index: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        self.eviction_log: list[dict[str, Any]] = []  # every eviction attempt: who, when, outcome
        # What really happened (evictions, deletes, removals, shutdowns, ...): what findings are measured
        # against (truth.py); recorded where the cluster acts, never from what a collector derived.
        self._truth = TruthLog()
        # The API server's audit log (demo_cluster/audit.py), when enabled (``enable_audit``): off by
        # default, as the scale scenario's churn would keep every pod body in memory.
        self.audit: AuditLog | None = None
        self.paused = False
        self._static_manifests: dict[tuple[str, str, str], tuple[dict[str, Any], str]] = {}
        self.ensure_namespace("default")
        self.ensure_namespace("kube-system")

    # ---- truth ---------------------------------------------------------------------------------
    def truth(self) -> list[TruthEntry]:
        """Everything the cluster did that a finding may be about, in order (demo_cluster/truth.py)."""
        with self.engine.lock:
            return self._truth.entries()

    def record_truth(
        self,
        action: str,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        node: str | None = None,
        outcome: str = "",
        **detail: Any,
    ) -> None:
        self._truth.record(TruthEntry(self.now, action, namespace, name, uid, node, outcome, detail))

    def _pod_truth(self, action: str, pod: dict[str, Any], outcome: str = "", **detail: Any) -> None:
        meta = pod["metadata"]
        uid = (meta.get("annotations") or {}).get("kubernetes.io/config.mirror") or meta.get("uid")
        self.record_truth(
            action,
            meta["namespace"],
            meta["name"],
            uid=uid,
            node=pod["spec"].get("nodeName"),
            outcome=outcome,
            **detail,
        )

    # ---- audit ---------------------------------------------------------------------------------
    def enable_audit(self, path: str | None = None) -> AuditLog:
        """Audit every write from now on (in memory, and to ``path`` as JSON Lines when given)."""
        if self.audit is None:
            self.audit = AuditLog(seed=self.rng.randrange(1 << 30), path=path)
        return self.audit

    @contextlib.contextmanager
    def acting(self, actor: Actor | None) -> Iterator[None]:
        """Writes made inside are ``actor``'s requests (None: the API server's own, not audited)."""
        if self.audit is None:
            yield
            return
        with self.audit.acting(actor):
            yield

    def acting_controller(self, account: str) -> contextlib.AbstractContextManager[None]:
        """Writes made inside are the kube-controller-manager loop ``account``'s."""
        return self.acting(Actor.controller(account))

    def _audit_pod(
        self, verb: str, pod: dict[str, Any], code: int, *, actor: Actor | None = None, **more: Any
    ) -> None:
        if self.audit is not None:
            meta = pod["metadata"]
            more.setdefault("level", "RequestResponse")
            for key in ("request", "response"):  # the API server's bodies name their kind
                body = more.get(key)
                if body is not None and "metadata" in body and "kind" not in body:
                    more[key] = {"kind": "Pod", "apiVersion": "v1", **body}
            self.audit.record(
                self.now, verb, "pods", meta["namespace"], meta["name"], code=code, actor=actor, **more
            )

    def _kubelet_actor(self, pod: dict[str, Any]) -> Actor:
        node = pod["spec"].get("nodeName") or ""
        return Actor.kubelet(node, self._node_ips.get(node, "10.0.1.1"))

    # ---- time ---------------------------------------------------------------------------------
    @property
    def now(self) -> datetime:
        return self.engine.now

    def advance(self, seconds: float) -> None:
        self.engine.advance(seconds)

    def run_until_idle(self, max_seconds: float = 3600.0) -> float:
        return self.engine.run_until_idle(max_seconds)

    # ---- namespaces and nodes -----------------------------------------------------------------
    def ensure_namespace(self, name: str, uid: str | None = None) -> None:
        with self.engine.lock:
            if self.store.get_raw("namespaces", "", name) is None:
                self.store.put(
                    "namespaces",
                    {
                        "metadata": {
                            "name": name,
                            "uid": uid or new_uid(self.rng),
                            "creationTimestamp": ts(self.now),
                            "labels": {"kubernetes.io/metadata.name": name},
                        },
                        "spec": {"finalizers": ["kubernetes"]},
                        "status": {"phase": "Active"},
                    },
                )

    def add_node(
        self, name: str, labels: dict[str, str] | None = None, created: datetime | None = None
    ) -> SimKubelet:
        """A node joins (``created`` may lie before the simulation began); its kubelet starts posting
        status heartbeats, and DaemonSets that select it get a pod there."""
        with self.engine.lock:
            idx = len(self._node_ips)
            n = idx + 10  # one address per node, never shared (10.0.0.10, 10.0.0.11, ...)
            ip = f"10.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"
            self._node_ips[name] = ip
            cidr = f"10.{100 + ((idx >> 8) & 127)}.{idx & 255}.0/24"
            self._node_cidr[name] = cidr
            node = make_node(
                name,
                new_uid(self.rng),
                created or self.now,
                labels or {},
                ip,
                cidr,
                KUBELET_VERSION,
                heartbeat=self.now,
            )
            self.store.put("nodes", node)
            kubelet = SimKubelet(
                self, name, pid=self.rng.randrange(250, 4000), log_limit=self.kubelet_log_limit
            )
            self.kubelets[name] = kubelet
            if self.heartbeat_interval > 0:
                # Spread nodes over the interval by name, without drawing from the scenario's rng.
                phase = (zlib.crc32(name.encode()) % 1000) / 1000 * self.heartbeat_interval
                self.engine.spawn(
                    self._heartbeats(name), delay=phase or self.heartbeat_interval, background=True
                )
            if self.lease_interval > 0:
                self._renew_lease(name, self.store.get("nodes", "", name) or node)
                phase = (zlib.crc32(name.encode()) % 997) / 997 * self.lease_interval
                self.engine.spawn(
                    self._lease_renewals(name), delay=phase or self.lease_interval, background=True
                )
            if self.store.count("daemonsets"):
                self._mark_dirty("dsall", "", "")
            return kubelet

    def _renew_lease(self, name: str, node: dict[str, Any]) -> None:
        """The kubelet's node lease (coordination.k8s.io/v1 in ``kube-node-lease``): created on first
        renewal with the Node as owner, then only ``renewTime`` moves. UIDs come from the node's name, not
        the scenario's random stream, so leases change no other object's identity."""
        self.ensure_namespace(NODE_LEASE_NAMESPACE, str(uuid.uuid5(uuid.NAMESPACE_URL, NODE_LEASE_NAMESPACE)))
        lease = self.store.get("leases", NODE_LEASE_NAMESPACE, name)
        now = ts_micro(self.now)
        if lease is None:
            lease = {
                "metadata": {
                    "name": name,
                    "namespace": NODE_LEASE_NAMESPACE,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"lease/{name}/{node['metadata']['uid']}")),
                    "creationTimestamp": ts(self.now),
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
                    ],
                },
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION, "renewTime": now},
            }
        else:
            lease["spec"]["renewTime"] = now
        self.store.put("leases", lease)

    def _lease_renewals(self, name: str) -> Process:
        """Every ``lease_interval`` a running kubelet renews its lease; a stopped one lets it expire."""
        while name in self.kubelets:
            node = self.store.get("nodes", "", name)
            if self.kubelets[name].running and node is not None:
                self._renew_lease(name, node)
            yield self.lease_interval

    def _heartbeats(self, name: str) -> Process:
        """The kubelet's node status loop: while nothing else changed, only ``lastHeartbeatTime`` of
        each condition (and so the resourceVersion) moves. A stopped kubelet posts nothing."""
        while name in self.kubelets:
            if self.kubelets[name].running:
                now = ts(self.now)
                node = self.store.get("nodes", "", name)
                conds = [
                    c
                    for c in (node or {}).get("status", {}).get("conditions", [])
                    if c["status"] != "Unknown"
                ]
                if node is not None and any(c["lastHeartbeatTime"] != now for c in conds):
                    for c in conds:
                        c["lastHeartbeatTime"] = now
                    self.store.put("nodes", node)
            yield self.heartbeat_interval

    def node_ip(self, node: str) -> str:
        return self._node_ips.get(node, "10.0.0.1")

    def pod_ip(self, node: str) -> str:
        n = self._pod_ip_next[node]
        self._pod_ip_next[node] = n + 1 if n < 250 else 2
        cidr = self._node_cidr.get(node)
        base = cidr.rsplit(".", 1)[0] if cidr else "10.244.0"
        return f"{base}.{n}"

    def update_node(self, name: str, fn: Callable[[dict[str, Any]], None]) -> dict[str, Any] | None:
        with self.engine.lock:
            node = self.store.get("nodes", "", name)
            if node is None:
                return None
            fn(node)
            return self.store.put("nodes", node)

    def _set_node_ready(self, node: dict[str, Any], st: str, reason: str, message: str) -> None:
        now = ts(self.now)
        for c in node["status"]["conditions"]:
            c["lastHeartbeatTime"] = now  # the kubelet posts every condition with each status update
            if c["type"] == "Ready":
                if c["status"] != st:
                    c["lastTransitionTime"] = now
                c.update(status=st, reason=reason, message=message)

    def cordon(self, name: str) -> None:
        """``kubectl cordon``: ``spec.unschedulable`` set; the node lifecycle controller adds the
        ``node.kubernetes.io/unschedulable`` taint and the kubelet records ``NodeNotSchedulable`` right
        after (``_node_spec_changed``), as for a cordon through the API."""
        self._set_unschedulable(name, True)

    def uncordon(self, name: str) -> None:
        self._set_unschedulable(name, False)

    def _set_unschedulable(self, name: str, value: bool) -> None:
        with self.engine.lock:
            old = self.store.get("nodes", "", name)
            if old is None or bool(old["spec"].get("unschedulable")) == value:
                return

            def fn(node: dict[str, Any]) -> None:
                if value:
                    node["spec"]["unschedulable"] = True
                else:
                    node["spec"].pop("unschedulable", None)

            new = self.update_node(name, fn)
            if new is not None:
                if self.audit is not None:  # kubectl cordon / uncordon: a strategic merge patch
                    patch = {"spec": {"unschedulable": True if value else None}}
                    self.audit.record(self.now, "patch", "nodes", None, name, code=200, request=patch)
                self._node_spec_changed(old, new)

    def _node_spec_changed(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """What follows a write to a Node: the node lifecycle controller keeps the unschedulable taint in
        step with ``spec.unschedulable``; the kubelet records the schedulable event; DaemonSets re-select
        their nodes when labels changed."""
        name = new["metadata"]["name"]
        was, now = bool(old["spec"].get("unschedulable")), bool(new["spec"].get("unschedulable"))
        if was != now:
            self.engine.schedule(TAINT_DELAY, lambda: self._sync_unschedulable_taint(name))
            reason = "NodeNotSchedulable" if now else "NodeSchedulable"
            self.record_event(new, "Normal", reason, f"Node {name} status is now: {reason}", "kubelet", name)
        if (old["metadata"].get("labels") or {}) != (
            new["metadata"].get("labels") or {}
        ) and self.store.count("daemonsets"):
            self._mark_dirty("dsall", "", "")

    def _sync_unschedulable_taint(self, name: str) -> None:
        key = "node.kubernetes.io/unschedulable"

        def fn(node: dict[str, Any]) -> None:
            taints = [t for t in node["spec"].get("taints", []) if t["key"] != key]
            if node["spec"].get("unschedulable"):
                taints.append({"key": key, "effect": "NoSchedule", "timeAdded": ts(self.now)})
            if taints:
                node["spec"]["taints"] = taints
            else:
                node["spec"].pop("taints", None)

        node = self.store.get("nodes", "", name)
        if node is None:
            return
        has = any(t["key"] == key for t in node["spec"].get("taints", []))
        if has != bool(node["spec"].get("unschedulable")):
            new = self.update_node(name, fn)
            if new is not None and self.audit is not None:  # the node lifecycle controller's taint patch
                patch = {"spec": {"taints": new["spec"].get("taints", [])}}
                self.audit.record(
                    self.now,
                    "patch",
                    "nodes",
                    None,
                    name,
                    code=200,
                    actor=Actor.controller("node-controller"),
                    request=patch,
                )

    def shutdown_node(self, name: str, grace: int = 20) -> None:
        """Graceful node shutdown (systemd inhibitor): pods Failed/Terminated, node NotReady."""
        with self.engine.lock:
            kubelet = self.kubelets[name]
            on_node = [self.store.get("pods", ns, pname) for ns, pname in sorted(self._pods_on_node[name])]
            self.record_truth(
                "node_shutdown",
                "",
                name,
                node=name,
                grace=grace,
                pods=[
                    f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in on_node if p is not None
                ],
            )
            node = self.update_node(
                name, lambda n: self._set_node_ready(n, "False", "KubeletNotReady", "node is shutting down")
            )
            if node:
                self.record_event(
                    node, "Normal", "Shutdown", "Shutdown manager detected shutdown event", "kubelet", name
                )
            kubelet.shutdown(grace)

            def stop() -> None:
                kubelet.log(
                    "Shutdown manager completed processing shutdown event, node will shutdown shortly"
                )
                kubelet.running = False

            self.engine.schedule(grace + 1.0, stop)

            def unknown() -> None:
                def fn(n: dict[str, Any]) -> None:
                    for c in n["status"]["conditions"]:
                        c.update(
                            status="Unknown",
                            reason="NodeStatusUnknown",
                            message="Kubelet stopped posting node status.",
                            lastTransitionTime=ts(self.now),
                        )
                    n["spec"]["taints"] = [
                        t
                        for t in n["spec"].get("taints", [])
                        if not t["key"].startswith("node.kubernetes.io/un")
                    ] + [
                        {
                            "key": "node.kubernetes.io/unreachable",
                            "effect": "NoSchedule",
                            "timeAdded": ts(self.now),
                        },
                        {
                            "key": "node.kubernetes.io/unreachable",
                            "effect": "NoExecute",
                            "timeAdded": ts(self.now),
                        },
                    ]

                if not self.kubelets[name].running:
                    self.update_node(name, fn)

            self.engine.schedule(grace + 40.0, unknown)

    def boot_node(self, name: str) -> None:
        """The node comes back: a fresh kubelet, Ready again, unreachable taints gone."""
        with self.engine.lock:
            old = self.kubelets[name]
            kubelet = SimKubelet(
                self, name, pid=self.rng.randrange(250, 4000), log_limit=self.kubelet_log_limit
            )
            old.lines.extend(kubelet.lines)  # the node's one journal goes on with the new process's start
            kubelet.lines = old.lines
            self.kubelets[name] = kubelet

            def fn(n: dict[str, Any]) -> None:
                now = ts(self.now)
                for c in n["status"]["conditions"]:
                    if c["type"] == "Ready":
                        c.update(
                            status="True",
                            reason="KubeletReady",
                            message="kubelet is posting ready status",
                            lastTransitionTime=now,
                            lastHeartbeatTime=now,
                        )
                    else:
                        c.update(status="False", lastTransitionTime=now, lastHeartbeatTime=now)
                n["spec"]["taints"] = [
                    t
                    for t in n["spec"].get("taints", [])
                    if not t["key"].startswith("node.kubernetes.io/un")
                    or t["key"] == "node.kubernetes.io/unschedulable"
                ]
                if not n["spec"]["taints"]:
                    del n["spec"]["taints"]

            node = self.update_node(name, fn)
            if node:
                self.record_event(
                    node, "Normal", "NodeReady", f"Node {name} status is now: NodeReady", "kubelet", name
                )
            for ns, pname in list(self._pods_on_node[name]):
                pod = self.store.get("pods", ns, pname)
                if pod and pod["metadata"].get("deletionTimestamp"):
                    self._final_delete(ns, pname, by_kubelet=True)

    # ---- pods ---------------------------------------------------------------------------------
    def pod_grace(self, namespace: str, name: str) -> int:
        pod = self.store.get("pods", namespace, name)
        if pod is None:
            return 30
        return int(
            pod["metadata"].get("deletionGracePeriodSeconds")
            or pod["spec"].get("terminationGracePeriodSeconds", 30)
        )

    def create_pod(self, pod: dict[str, Any], behaviour: Behaviour | None = None) -> dict[str, Any]:
        with self.engine.lock:
            meta = pod["metadata"]
            key = (meta["namespace"], meta["name"])
            self.ensure_namespace(meta["namespace"])
            self.behaviours[key] = behaviour or Behaviour()
            self.store.put("pods", pod)
            ctrl = controller_of(pod)
            owner = CREATED_BY.get((ctrl or {}).get("kind", ""))
            self._audit_pod(
                "create",
                pod,
                201,
                actor=Actor.controller(owner) if owner else None,
                request=pod,
                response=pod,
            )
            if ctrl:
                self._pods_by_owner[ctrl["uid"]].add(key)
            node = pod["spec"].get("nodeName")
            if node:
                self._pods_on_node[node].add(key)
                self.engine.schedule(0.02 + self.rng.random() * 0.03, lambda: self._kubelet_sees(key))
            else:
                self.engine.schedule(0.005 + self.rng.random() * 0.02, lambda: self._schedule_pod(key))
            self._pod_changed(pod)
            return pod

    def add_running_pod(self, pod: dict[str, Any]) -> None:
        """Store a pod that already runs on its node (bulk population: no scheduler, no controllers,
        no events). The caller registers its worker with ``SimKubelet.adopt_running``."""
        meta = pod["metadata"]
        self.store.put("pods", pod)
        self._pods_on_node[pod["spec"]["nodeName"]].add((meta["namespace"], meta["name"]))

    def pods_on_node(self, node: str) -> set[tuple[str, str]]:
        """(namespace, name) of the API pods bound to ``node``."""
        return self._pods_on_node.get(node, set())

    def new_pod(
        self,
        namespace: str,
        name: str,
        node: str | None = None,
        labels: dict[str, str] | None = None,
        image: str = "registry.k8s.io/pause:3.10",
        behaviour: Behaviour | None = None,
        grace: int = 30,
        finalizers: list[str] | None = None,
        node_selector: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """Create a bare pod (no controller). With ``node``, it is bound there through the scheduler."""
        sel = dict(node_selector or {})
        if node:
            sel["kubernetes.io/hostname"] = node
        pod = make_pod(
            namespace=namespace,
            name=name,
            uid=new_uid(self.rng),
            created=self.now,
            labels=labels or {"app": name},
            containers=[{"name": "app", "image": image}],
            node_selector=sel or None,
            grace=grace,
            finalizers=finalizers,
        )
        return self.create_pod(pod, behaviour)

    def _schedule_pod(self, key: tuple[str, str]) -> None:
        pod = self.store.get("pods", *key)
        if pod is None or pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            return
        sel = pod["spec"].get("nodeSelector") or {}
        pinned = sel.get("kubernetes.io/hostname") or workloads.pinned_node(pod)
        if pinned:
            candidates = [pinned] if pinned in self.kubelets else []
        else:
            candidates = list(self.kubelets)
        tolerates_cordon = any(
            t.get("key") == "node.kubernetes.io/unschedulable" for t in pod["spec"].get("tolerations") or []
        )
        fit: list[tuple[int, str]] = []
        reasons: dict[str, int] = defaultdict(int)
        for name in candidates:
            node = self.store.get("nodes", "", name)
            if node is None:
                continue
            labels = node["metadata"]["labels"]
            if any(labels.get(k) != v for k, v in sel.items()):
                reasons["didn't match Pod's node affinity/selector"] += 1
                continue
            if node["spec"].get("unschedulable") and not tolerates_cordon:
                reasons["were unschedulable"] += 1
                continue
            ready = get_condition(node, "Ready")
            if not ready or ready["status"] != "True":
                reasons["had untolerated taint {node.kubernetes.io/not-ready: }"] += 1
                continue
            fit.append((len(self._pods_on_node[name]), name))
        total = len(self.kubelets)
        if not fit:
            detail = (
                ", ".join(f"{n} node(s) {r}" for r, n in sorted(reasons.items()))
                or "no nodes available to schedule pods"
            )
            msg = f"0/{total} nodes are available: {detail}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."
            self.record_event(
                pod,
                "Warning",
                "FailedScheduling",
                msg,
                "default-scheduler",
                "",
                micro=True,
                action="Scheduling",
            )
            self.engine.schedule(2.0, lambda: self._schedule_pod(key))
            return
        node_name = min(fit)[1]

        def bind(p: dict[str, Any]) -> None:
            p["spec"]["nodeName"] = node_name
            set_condition(p["status"].setdefault("conditions", []), condition("PodScheduled", True, self.now))

        pod = self._update_pod(key[0], key[1], bind)
        if pod is None:
            return
        if self.audit is not None:
            binding = {
                "kind": "Binding",
                "apiVersion": "v1",
                "metadata": {"name": key[1], "namespace": key[0], "uid": pod["metadata"]["uid"]},
                "target": {"kind": "Node", "name": node_name},
            }
            self._audit_pod(
                "create",
                pod,
                201,
                actor=Actor.scheduler(),
                subresource="binding",
                level="Request",
                request=binding,
            )
        self._pods_on_node[node_name].add(key)
        self.record_event(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {key[0]}/{key[1]} to {node_name}",
            "default-scheduler",
            "",
            micro=True,
            action="Binding",
        )
        self.engine.schedule(0.01 + self.rng.random() * 0.03, lambda: self._kubelet_sees(key))

    def _kubelet_sees(self, key: tuple[str, str]) -> None:
        pod = self.store.get("pods", *key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        kubelet = self.kubelets.get(pod["spec"]["nodeName"])
        if kubelet is None or not kubelet.running:
            return
        if not get_condition(pod, "PodScheduled"):
            self.update_pod_status(
                key[0],
                key[1],
                lambda p: set_condition(
                    p["status"].setdefault("conditions", []), condition("PodScheduled", True, self.now)
                ),
            )
            pod = self.store.get("pods", *key)
            assert pod is not None
        kubelet.pod_added(pod, self.behaviours.get(key) or Behaviour())

    def _update_pod(
        self, namespace: str, name: str, fn: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any] | None:
        pod = self.store.get("pods", namespace, name)
        if pod is None:
            return None
        fn(pod)
        self.store.put("pods", pod)
        self._pod_changed(pod)
        return pod

    def update_pod_status(
        self, namespace: str, name: str, fn: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any] | None:
        """The kubelet's status write (a ``pods/status`` patch by ``system:node:NODE``)."""
        with self.engine.lock:
            pod = self._update_pod(namespace, name, fn)
            if pod is not None and self.audit is not None:
                patch = {"metadata": {"uid": pod["metadata"]["uid"]}, "status": pod["status"]}
                self._audit_pod(
                    "patch",
                    pod,
                    200,
                    actor=self._kubelet_actor(pod),
                    subresource="status",
                    request=patch,
                    response=pod,
                )
            return pod

    def delete_pod(self, namespace: str, name: str, grace: int | None = None) -> dict[str, Any] | None:
        """A graceful DELETE: deletionTimestamp = now + grace; the kubelet tears down, then removes it.
        Audited as the current actor's request (``acting``), with the pod it answered."""
        with self.engine.lock:
            pod = self._delete_pod(namespace, name, grace)
            if pod is not None and self.audit is not None:
                options: dict[str, Any] = {
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "propagationPolicy": "Background",
                }
                if grace is not None:
                    options["gracePeriodSeconds"] = grace
                self._audit_pod("delete", pod, 200, request=options, response=pod)
            return pod

    def _delete_pod(self, namespace: str, name: str, grace: int | None) -> dict[str, Any] | None:
        with self.engine.lock:
            pod = self.store.get("pods", namespace, name)
            if pod is None:
                return None
            meta = pod["metadata"]
            g = int(pod["spec"].get("terminationGracePeriodSeconds", 30) if grace is None else grace)
            if meta.get("deletionTimestamp"):
                return pod
            node = pod["spec"].get("nodeName")
            kubelet = self.kubelets.get(node or "")
            if g == 0 or not node:
                if meta.get("finalizers"):
                    meta["deletionTimestamp"] = ts(self.now)
                    meta["deletionGracePeriodSeconds"] = 0
                    self.store.put("pods", pod)
                    self._pod_changed(pod)
                    return pod
                self._final_delete(namespace, name, by_kubelet=False)
                return pod
            worker_uid = kubelet.by_api.get((namespace, name)) if kubelet else None
            worker = kubelet.workers.get(worker_uid) if kubelet and worker_uid else None
            self._pod_truth(
                "delete",
                pod,
                started=bool(worker and worker.started),
                known_to_kubelet=worker is not None,
                grace=g,
                requested=self.now,
            )
            meta["deletionTimestamp"] = ts(self.now + timedelta(seconds=g))
            meta["deletionGracePeriodSeconds"] = g
            self.store.put("pods", pod)
            self._pod_changed(pod)
            if kubelet and kubelet.running:
                if (namespace, name) in kubelet.by_api:
                    kubelet.pod_deleted(namespace, name, g)
                else:  # the kubelet never started it: nothing to tear down
                    self.engine.schedule(0.05, lambda: self._final_delete(namespace, name, by_kubelet=True))
            return pod

    def _final_delete(self, namespace: str, name: str, *, by_kubelet: bool) -> None:
        """The status manager's grace-0 delete once the pod is terminated (``by_kubelet``: audited as the
        kubelet's request), or a finalizer-free removal the API server makes itself."""
        pod = self.store.get("pods", namespace, name)
        if pod is None:
            return
        meta = pod["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionGracePeriodSeconds") != 0:
                meta["deletionGracePeriodSeconds"] = 0
                meta.setdefault("deletionTimestamp", ts(self.now))
                self.store.put("pods", pod)
                self._pod_changed(pod)
            if by_kubelet:
                self._audit_kubelet_delete(pod)
            return
        gone = self.store.delete("pods", namespace, name)
        if gone is not None:
            deletion = meta.get("deletionTimestamp")
            grace = meta.get("deletionGracePeriodSeconds")
            requested = (
                datetime.fromisoformat(deletion.replace("Z", "+00:00")) - timedelta(seconds=int(grace or 0))
                if deletion
                else None
            )
            self._pod_truth("removed", gone, deletion_requested=requested, grace=grace)
        if by_kubelet and gone is not None:
            self._audit_kubelet_delete(gone)
        key = (namespace, name)
        ctrl = controller_of(pod)
        if ctrl:
            self._pods_by_owner[ctrl["uid"]].discard(key)
        node = pod["spec"].get("nodeName") or ""
        self._pods_on_node[node].discard(key)
        self.behaviours.pop(key, None)
        kubelet = self.kubelets.get(node)
        if kubelet and kubelet.running and not self._is_mirror(pod):
            kubelet.pod_removed(namespace, name, "api")
        self._pod_changed(pod, deleted=True)

    def _audit_kubelet_delete(self, pod: dict[str, Any]) -> None:
        """The kubelet's final DELETE: grace 0, with the UID as precondition (k8s-facts.md §13)."""
        options = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": pod["metadata"]["uid"]},
        }
        answered = copy.deepcopy(pod)  # the object as the delete left it: no grace left
        answered["metadata"]["deletionGracePeriodSeconds"] = 0
        self._audit_pod(
            "delete", pod, 200, actor=self._kubelet_actor(pod), request=options, response=answered
        )

    @staticmethod
    def _is_mirror(pod: dict[str, Any]) -> bool:
        return "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {})

    def remove_finalizer(self, namespace: str, name: str, finalizer: str) -> None:
        with self.engine.lock:
            pod = self.store.get("pods", namespace, name)
            if pod is None:
                return
            fins = [f for f in pod["metadata"].get("finalizers", []) if f != finalizer]
            if fins:
                pod["metadata"]["finalizers"] = fins
            else:
                pod["metadata"].pop("finalizers", None)
            self.store.put("pods", pod)
            self._audit_pod("update", pod, 200, request=pod, response=pod)
            if not fins and pod["metadata"].get("deletionGracePeriodSeconds") == 0:
                self._final_delete(namespace, name, by_kubelet=False)

    def worker_finished(self, kubelet: SimKubelet, w: Worker) -> None:
        """The pod worker is done: the status manager deletes API pods that were being deleted."""
        if w.static:
            kubelet.forget_later(w)
            return
        pod = self.store.get("pods", w.namespace, w.api_name)
        if pod is not None and pod["metadata"].get("deletionTimestamp"):
            if not pod["metadata"].get("finalizers"):
                kubelet.log("Pod fully terminated and removed from etcd", pod=w.ref)
            self._final_delete(w.namespace, w.api_name, by_kubelet=True)
        if pod is None or self.store.get_raw("pods", w.namespace, w.api_name) is None:
            kubelet.forget_later(w)

    # ---- static pods --------------------------------------------------------------------------
    def add_static_pod(
        self,
        node: str,
        namespace: str,
        name: str,
        image: str,
        manifest_rev: str = "1",
        behaviour: Behaviour | None = None,
    ) -> str:
        """A manifest appears in the node's staticPodPath; returns its 32-hex UID."""
        from .objects import static_pod_uid

        with self.engine.lock:
            full = f"{name}-{node}"
            uid = static_pod_uid(namespace, name, node, f"{image}#{manifest_rev}")
            pod = make_pod(
                namespace=namespace,
                name=full,
                uid=uid,
                created=self.now,
                labels={"component": name, "tier": "control-plane"},
                containers=[{"name": name, "image": image}],
                node_name=node,
                grace=30,
            )
            self.behaviours[(namespace, full)] = behaviour or Behaviour()
            old = self.kubelets[node].workers.get(uid)
            self.record_truth(
                "static_pod_added",
                namespace,
                full,
                uid=uid,
                node=node,
                old_still_terminating=old is not None and old.state == "terminating",
            )
            self._static_manifests[(node, namespace, full)] = (pod, uid)
            self.kubelets[node].pod_added(pod, behaviour or Behaviour(), static_uid=uid)
            return uid

    def remove_static_pod(self, node: str, namespace: str, name: str) -> None:
        """The manifest disappears: the kubelet kills the pod and deletes its mirror pod."""
        with self.engine.lock:
            full = f"{name}-{node}"
            kubelet = self.kubelets[node]
            manifest = self._static_manifests.get((node, namespace, full))
            self.record_truth(
                "static_pod_removed", namespace, full, uid=manifest[1] if manifest else None, node=node
            )
            kubelet.pod_removed(namespace, full, source="file")
            mirror = self.store.get("pods", namespace, full)
            if mirror is not None:
                kubelet.log(
                    "Deleting a mirror pod", pod=f"{namespace}/{full}", podUID=mirror["metadata"]["uid"]
                )
                self._final_delete(namespace, full, by_kubelet=True)

    def create_mirror_pod(self, node: str, w: Worker) -> None:
        if self.store.get_raw("pods", w.namespace, w.api_name) is not None:
            return
        manifest = self._static_manifests.get((node, w.namespace, w.api_name))
        if manifest is None:
            return
        pod = copy.deepcopy(manifest[0])
        meta = pod["metadata"]
        meta["uid"] = new_uid(self.rng)  # the API server assigns the mirror pod its own UID
        meta["creationTimestamp"] = ts(self.now)
        meta["annotations"] = {
            "kubernetes.io/config.hash": w.uid,
            "kubernetes.io/config.mirror": w.uid,
            "kubernetes.io/config.seen": ts_micro(self.now)[:-1] + "000+00:00",
            "kubernetes.io/config.source": "file",
        }
        node_obj = self.store.get("nodes", "", node)
        if node_obj:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node,
                    "uid": node_obj["metadata"]["uid"],
                    "controller": True,
                }
            ]
        pod["spec"]["priorityClassName"] = "system-node-critical"
        pod["spec"]["priority"] = 2000001000
        pod["status"]["conditions"] = [condition("PodScheduled", True, self.now)]
        self.store.put("pods", pod)
        self._audit_pod("create", pod, 201, actor=self._kubelet_actor(pod), request=pod, response=pod)
        self._pods_on_node[node].add((w.namespace, w.api_name))
        self._pod_changed(pod)

    # ---- events -------------------------------------------------------------------------------
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
    ) -> dict[str, Any]:
        """Record (or bump the count of) an Event about ``obj``, in the shape its emitter produces."""
        with self.engine.lock:
            meta = obj["metadata"]
            namespace = meta.get("namespace") or "default"
            kind = obj.get("kind") or self._kind_of(obj)
            ikey = (meta["uid"], reason, message, component)
            existing = self._event_index.get(ikey)
            now = self.now
            if existing is not None:
                seen = self.store.get("events", *existing)
                if seen is not None:
                    if seen.get("series") is not None or seen.get("eventTime") and seen.get("count") is None:
                        series = seen.setdefault("series", {"count": 1})
                        series["count"] += 1
                        series["lastObservedTime"] = ts_micro(now)
                    else:
                        seen["count"] = seen.get("count", 1) + 1
                        seen["lastTimestamp"] = ts(now)
                    self._event_touched[existing] = self.engine.elapsed
                    return self.store.put("events", seen)
            involved: dict[str, Any] = {
                "kind": kind,
                "name": meta["name"],
                "uid": meta["uid"],
                "apiVersion": self._api_version_of(kind),
                "resourceVersion": meta.get("resourceVersion", ""),
            }
            if meta.get("namespace"):
                involved["namespace"] = meta["namespace"]
            if field_path:
                involved["fieldPath"] = field_path
            name = f"{meta['name']}.{self.rng.getrandbits(64):016x}"
            ev: dict[str, Any] = {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": new_uid(self.rng),
                    "creationTimestamp": ts(now),
                },
                "involvedObject": involved,
                "reason": reason,
                "message": message,
                "type": etype,
            }
            if micro:  # events.k8s.io recorder (scheduler): eventTime, no legacy timestamps
                ev.update(
                    source={},
                    firstTimestamp=None,
                    lastTimestamp=None,
                    eventTime=ts_micro(now),
                    action=action,
                    reportingComponent=component,
                    reportingInstance=f"{component}-podlife-control-plane",
                )
            else:  # legacy core/v1 recorder (kubelet, controllers)
                ev.update(
                    source={"component": component, **({"host": host} if host else {})},
                    firstTimestamp=ts(now),
                    lastTimestamp=ts(now),
                    count=1,
                    eventTime=None,
                    reportingComponent=component,
                    reportingInstance=host,
                )
            self._event_index[ikey] = (namespace, name)
            self._track_event_ttl(namespace, name, ikey)
            return self.store.put("events", ev)

    def _track_event_ttl(self, namespace: str, name: str, ikey: tuple[str, str, str, str]) -> None:
        if self.event_ttl <= 0:
            return
        self._event_born.append((self.engine.elapsed, namespace, name, ikey))
        self._event_touched[(namespace, name)] = self.engine.elapsed
        if not self._event_gc_started:
            self._event_gc_started = True
            self.engine.spawn(self._expire_events(), delay=min(60.0, self.event_ttl), background=True)

    def _expire_events(self) -> Process:
        """Events live ``event_ttl`` after their last write (an etcd lease, refreshed on every update);
        then they vanish, and watchers see DELETED, as on a real API server."""
        while True:
            now = self.engine.elapsed
            born = self._event_born
            while born and born[0][0] + self.event_ttl <= now:
                _, ns, name, ikey = born.popleft()
                touched = self._event_touched.get((ns, name), 0.0)
                if touched + self.event_ttl > now:
                    born.append((touched, ns, name, ikey))
                    continue
                self._event_touched.pop((ns, name), None)
                if self._event_index.get(ikey) == (ns, name):
                    del self._event_index[ikey]
                self.store.delete("events", ns, name)
            yield min(60.0, self.event_ttl)

    @staticmethod
    def _kind_of(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        spec = obj.get("spec", {})
        if "containers" in spec:
            return "Pod"
        if "podCIDR" in spec or "providerID" in spec:
            return "Node"
        if "minAvailable" in spec or "maxUnavailable" in spec:
            return "PodDisruptionBudget"
        if "strategy" in spec:
            return "Deployment"
        if "serviceName" in spec:
            return "StatefulSet"
        if "updateStrategy" in spec:
            return "DaemonSet"
        if "template" in spec:
            return "ReplicaSet"
        del meta
        return "Pod"

    @staticmethod
    def _api_version_of(kind: str) -> str:
        return {
            "PodDisruptionBudget": "policy/v1",
            "Deployment": "apps/v1",
            "ReplicaSet": "apps/v1",
            "StatefulSet": "apps/v1",
            "DaemonSet": "apps/v1",
        }.get(kind, "v1")

    # ---- controllers (debounced reconciles) ---------------------------------------------------
    def _pod_changed(self, pod: dict[str, Any], deleted: bool = False) -> None:
        ctrl = controller_of(pod)
        if ctrl:
            kind = {"ReplicaSet": "rs", "StatefulSet": "sts", "DaemonSet": "ds"}.get(ctrl["kind"])
            if kind:
                self._mark_dirty(kind, pod["metadata"]["namespace"], ctrl["name"])
        if self.store.count("poddisruptionbudgets"):
            self._mark_dirty("pdbns", pod["metadata"]["namespace"], "")

    def _mark_dirty(self, kind: str, namespace: str, name: str) -> None:
        key = (kind, namespace, name)
        if key in self._dirty:
            return
        self._dirty.add(key)

        def run() -> None:
            with self.acting(Actor.controller(RECONCILED_BY[kind])):
                reconcile()

        def reconcile() -> None:
            self._dirty.discard(key)
            if kind == "rs":
                self._reconcile_rs(namespace, name)
            elif kind == "deploy":
                self._reconcile_deployment(namespace, name)
            elif kind == "pdbns":
                for pdb in self.store.iter_objects("poddisruptionbudgets", namespace):
                    self._reconcile_pdb(pdb)
            elif kind == "sts":
                workloads.reconcile_statefulset(self, namespace, name)
            elif kind == "ds":
                workloads.reconcile_daemonset(self, namespace, name)
            elif kind == "dsall":
                for ns, ds_name in self.store.keys("daemonsets"):
                    workloads.reconcile_daemonset(self, ns, ds_name)

        self.engine.schedule(0.02 if kind != "pdbns" else 0.05, run)

    def owned_pods(self, owner_uid: str) -> list[dict[str, Any]]:
        out = []
        for key in sorted(self._pods_by_owner.get(owner_uid, ())):
            pod = self.store.get("pods", *key)
            if pod is not None:
                out.append(pod)
        return out

    @staticmethod
    def _active(pod: dict[str, Any]) -> bool:
        return not pod["metadata"].get("deletionTimestamp") and pod["status"].get("phase") not in (
            "Succeeded",
            "Failed",
        )

    # ---- StatefulSets and DaemonSets (demo_cluster/workloads.py) ---------------------------------
    def create_statefulset(
        self,
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
        with self.engine.lock:
            return workloads.create_statefulset(
                self, namespace, name, replicas, image, labels, node_selector, behaviour, grace, service_name
            )

    def update_statefulset(self, namespace: str, name: str, fn: Callable[[dict[str, Any]], None]) -> None:
        with self.engine.lock:
            workloads.update_statefulset(self, namespace, name, fn)

    def delete_statefulset(self, namespace: str, name: str) -> None:
        with self.engine.lock:
            workloads.delete_workload(self, "statefulsets", namespace, name)

    def create_daemonset(
        self,
        namespace: str,
        name: str,
        image: str,
        labels: dict[str, str],
        node_selector: dict[str, str] | None = None,
        behaviour: Behaviour | None = None,
        grace: int = 30,
    ) -> dict[str, Any]:
        with self.engine.lock:
            return workloads.create_daemonset(
                self, namespace, name, image, labels, node_selector, behaviour, grace
            )

    def delete_daemonset(self, namespace: str, name: str) -> None:
        with self.engine.lock:
            workloads.delete_workload(self, "daemonsets", namespace, name)

    def create_deployment(
        self,
        namespace: str,
        name: str,
        replicas: int,
        image: str,
        labels: dict[str, str],
        node_selector: dict[str, str] | None = None,
        behaviour: Behaviour | None = None,
        grace: int = 30,
        max_surge: Any = "25%",
        max_unavailable: Any = "25%",
    ) -> dict[str, Any]:
        with self.engine.lock:
            self.ensure_namespace(namespace)
            template: dict[str, Any] = {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "containers": [{"name": name.split("-")[0], "image": image}],
                    "terminationGracePeriodSeconds": grace,
                },
            }
            if node_selector:
                template["spec"]["nodeSelector"] = dict(node_selector)
            dep: dict[str, Any] = {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": new_uid(self.rng),
                    "generation": 1,
                    "creationTimestamp": ts(self.now),
                    "labels": dict(labels),
                    "annotations": {"deployment.kubernetes.io/revision": "1"},
                },
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": dict(labels)},
                    "template": template,
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable},
                    },
                    "revisionHistoryLimit": 10,
                    "progressDeadlineSeconds": 600,
                },
                "status": {},
            }
            self.workload_behaviour[dep["metadata"]["uid"]] = behaviour or Behaviour()
            self.store.put("deployments", dep)
            self._mark_dirty("deploy", namespace, name)
            return dep

    def update_deployment(self, namespace: str, name: str, fn: Callable[[dict[str, Any]], None]) -> None:
        with self.engine.lock:
            dep = self.store.get("deployments", namespace, name)
            if dep is None:
                return
            fn(dep)
            dep["metadata"]["generation"] += 1
            self.store.put("deployments", dep)
            self._mark_dirty("deploy", namespace, name)

    def delete_deployment(self, namespace: str, name: str) -> None:
        """Cascading (background) delete: the Deployment, its ReplicaSets, their pods (gracefully)."""
        with self.engine.lock:
            dep = self.store.delete("deployments", namespace, name)
            if dep is None:
                return
            for rs in self.store.iter_objects("replicasets", namespace):
                ctrl = controller_of(rs)
                if ctrl and ctrl["uid"] == dep["metadata"]["uid"]:
                    self.store.delete("replicasets", namespace, rs["metadata"]["name"])
                    with self.acting_controller(GC):
                        for pod in self.owned_pods(rs["metadata"]["uid"]):
                            self.delete_pod(namespace, pod["metadata"]["name"])

    def _reconcile_deployment(self, namespace: str, name: str) -> None:
        dep = self.store.get("deployments", namespace, name)
        if dep is None:
            return
        spec = dep["spec"]
        uid = dep["metadata"]["uid"]
        h = template_hash(spec["template"])
        all_rs = [
            rs
            for rs in self.store.iter_objects("replicasets", namespace)
            if (controller_of(rs) or {}).get("uid") == uid
        ]
        new_rs = next((rs for rs in all_rs if rs["metadata"]["labels"].get("pod-template-hash") == h), None)
        old_rs = [rs for rs in all_rs if rs is not new_rs]
        replicas = spec["replicas"]
        surge = _int_or_percent(spec["strategy"]["rollingUpdate"]["maxSurge"], replicas, True)
        unavail = _int_or_percent(spec["strategy"]["rollingUpdate"]["maxUnavailable"], replicas, False)
        if surge == 0 and unavail == 0:
            unavail = 1
        revision = str(1 + len(old_rs))
        if new_rs is None:
            tmpl = copy.deepcopy(spec["template"])
            tmpl["metadata"]["labels"]["pod-template-hash"] = h
            new_rs = {
                "metadata": {
                    "name": f"{name}-{h}",
                    "namespace": namespace,
                    "uid": new_uid(self.rng),
                    "generation": 1,
                    "creationTimestamp": ts(self.now),
                    "labels": dict(tmpl["metadata"]["labels"]),
                    "annotations": {
                        "deployment.kubernetes.io/desired-replicas": str(replicas),
                        "deployment.kubernetes.io/max-replicas": str(replicas + surge),
                        "deployment.kubernetes.io/revision": revision,
                    },
                    "ownerReferences": [owner_ref(dep, "Deployment", "apps/v1")],
                },
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": dict(tmpl["metadata"]["labels"])},
                    "template": tmpl,
                },
                "status": {"replicas": 0, "observedGeneration": 1},
            }
            self.store.put("replicasets", new_rs)
            self.workload_behaviour[new_rs["metadata"]["uid"]] = self.workload_behaviour.get(uid, Behaviour())
            if dep["metadata"]["annotations"].get("deployment.kubernetes.io/revision") != revision:
                dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = revision

        def pods_of(rs: dict[str, Any]) -> list[dict[str, Any]]:
            return [p for p in self.owned_pods(rs["metadata"]["uid"]) if self._active(p)]

        total = sum(rs["spec"]["replicas"] for rs in all_rs + ([new_rs] if new_rs not in all_rs else []))
        available = sum(1 for rs in [new_rs, *old_rs] for p in pods_of(rs) if is_ready(p))
        # Scale the new ReplicaSet up within maxSurge.
        want_new = min(replicas, new_rs["spec"]["replicas"] + max(0, replicas + surge - total))
        if not old_rs:
            want_new = replicas
        if want_new != new_rs["spec"]["replicas"]:
            self._scale_rs(dep, new_rs, want_new)
        # Scale old ReplicaSets down within maxUnavailable.
        min_available = replicas - unavail
        can_remove = max(0, available - min_available)
        for rs in sorted(old_rs, key=lambda r: r["metadata"]["creationTimestamp"]):
            if can_remove <= 0:
                break
            cur = rs["spec"]["replicas"]
            if cur == 0:
                continue
            step = min(cur, can_remove)
            self._scale_rs(dep, rs, cur - step)
            can_remove -= step
        for rs in old_rs:
            if rs["spec"]["replicas"] == 0 and not pods_of(rs) and len(old_rs) > 2:
                pass  # revisionHistoryLimit pruning is not simulated
        self._deployment_status(dep, new_rs, old_rs)

    def _scale_rs(self, dep: dict[str, Any], rs: dict[str, Any], to: int) -> None:
        frm = rs["spec"]["replicas"]
        rs["spec"]["replicas"] = to
        rs["metadata"]["generation"] = rs["metadata"].get("generation", 1) + 1
        self.store.put("replicasets", rs)
        verb = "up" if to > frm else "down"
        self.record_event(
            dep,
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {verb} replica set {rs['metadata']['name']} from {frm} to {to}",
            "deployment-controller",
        )
        self._mark_dirty("rs", rs["metadata"]["namespace"], rs["metadata"]["name"])

    def _deployment_status(
        self, dep: dict[str, Any], new_rs: dict[str, Any], old_rs: list[dict[str, Any]]
    ) -> None:
        ns = dep["metadata"]["namespace"]
        rss = [
            r
            for r in (self.store.get("replicasets", ns, x["metadata"]["name"]) for x in [new_rs, *old_rs])
            if r
        ]
        replicas = sum(r["status"].get("replicas", 0) for r in rss)
        ready = sum(r["status"].get("readyReplicas", 0) for r in rss)
        avail = sum(r["status"].get("availableReplicas", 0) for r in rss)
        new_now = rss[0] if rss and rss[0]["metadata"]["name"] == new_rs["metadata"]["name"] else new_rs
        updated = new_now["status"].get("replicas", 0)
        want = dep["spec"]["replicas"]
        unavail = max(0, want - avail)
        st = dep["status"]
        conds = st.get("conditions") or []
        now = self.now
        unavail_allowed = _int_or_percent(
            dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], want, False
        )
        is_avail = avail >= want - unavail_allowed
        avail_c = {
            "type": "Available",
            "status": "True" if is_avail else "False",
            "lastUpdateTime": ts(now),
            "lastTransitionTime": ts(now),
            "reason": "MinimumReplicasAvailable" if is_avail else "MinimumReplicasUnavailable",
            "message": "Deployment has minimum availability."
            if is_avail
            else "Deployment does not have minimum availability.",
        }
        complete = updated == want and replicas == want and avail == want
        rsname = new_rs["metadata"]["name"]
        prog_c = {
            "type": "Progressing",
            "status": "True",
            "lastUpdateTime": ts(now),
            "lastTransitionTime": ts(now),
            "reason": "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
            "message": f'ReplicaSet "{rsname}" has successfully progressed.'
            if complete
            else f'ReplicaSet "{rsname}" is progressing.',
        }
        new_conds = []
        for c in (avail_c, prog_c):
            old = next((o for o in conds if o["type"] == c["type"]), None)
            if old and old.get("status") == c["status"]:
                c["lastTransitionTime"] = old.get("lastTransitionTime", c["lastTransitionTime"])
                if old.get("reason") == c["reason"]:
                    c["lastUpdateTime"] = old.get("lastUpdateTime", c["lastUpdateTime"])
            new_conds.append(c)
        # Conditions others wrote (a client through the status subresource) stay, as calculateStatus
        # copies the existing ones and only sets Available / Progressing.
        new_conds += [c for c in conds if c.get("type") not in ("Available", "Progressing")]
        new_st = {
            "observedGeneration": dep["metadata"]["generation"],
            "replicas": replicas,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": avail,
            "conditions": new_conds,
        }
        if unavail:
            new_st["unavailableReplicas"] = unavail
        if not ready:
            del new_st["readyReplicas"]
        if not avail:
            del new_st["availableReplicas"]
        if new_st != st:
            dep["status"] = new_st
            self.store.put("deployments", dep)

    def _reconcile_rs(self, namespace: str, name: str) -> None:
        rs = self.store.get("replicasets", namespace, name)
        if rs is None:
            return
        uid = rs["metadata"]["uid"]
        pods = self.owned_pods(uid)
        active = [p for p in pods if self._active(p)]
        want = rs["spec"]["replicas"]
        if len(active) < want:
            tmpl = rs["spec"]["template"]
            for _ in range(want - len(active)):
                pname = f"{name}-{rand_suffix(self.rng)}"
                pod = make_pod(
                    namespace=namespace,
                    name=pname,
                    uid=new_uid(self.rng),
                    created=self.now,
                    labels=tmpl["metadata"]["labels"],
                    containers=tmpl["spec"]["containers"],
                    owner=owner_ref(rs, "ReplicaSet", "apps/v1"),
                    node_selector=tmpl["spec"].get("nodeSelector"),
                    grace=tmpl["spec"].get("terminationGracePeriodSeconds", 30),
                )
                self.create_pod(pod, self.workload_behaviour.get(uid))
                self.record_event(
                    rs, "Normal", "SuccessfulCreate", f"Created pod: {pname}", "replicaset-controller"
                )
        elif len(active) > want:
            victims = sorted(
                active, key=lambda p: (is_ready(p), p["metadata"]["creationTimestamp"]), reverse=False
            )
            for pod in victims[: len(active) - want]:
                self.delete_pod(namespace, pod["metadata"]["name"])
                self.record_event(
                    rs,
                    "Normal",
                    "SuccessfulDelete",
                    f"Deleted pod: {pod['metadata']['name']}",
                    "replicaset-controller",
                )
        active = [p for p in self.owned_pods(uid) if self._active(p)]
        ready = sum(1 for p in active if is_ready(p))
        new_st: dict[str, Any] = {
            "replicas": len(active),
            "fullyLabeledReplicas": len(active),
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        if ready:
            new_st["readyReplicas"] = ready
            new_st["availableReplicas"] = ready
        if rs["status"].get("conditions"):  # the controller copies the status it read: conditions stay
            new_st["conditions"] = rs["status"]["conditions"]
        if new_st != rs["status"]:
            rs["status"] = new_st
            self.store.put("replicasets", rs)
        ctrl = controller_of(rs)
        if ctrl and ctrl["kind"] == "Deployment":
            self._mark_dirty("deploy", namespace, ctrl["name"])

    # ---- PodDisruptionBudgets and eviction ----------------------------------------------------
    def create_pdb(
        self,
        namespace: str,
        name: str,
        selector: dict[str, Any],
        min_available: Any = None,
        max_unavailable: Any = None,
    ) -> dict[str, Any]:
        with self.engine.lock:
            self.ensure_namespace(namespace)
            spec: dict[str, Any] = {"selector": selector}
            if min_available is not None:
                spec["minAvailable"] = min_available
            if max_unavailable is not None:
                spec["maxUnavailable"] = max_unavailable
            pdb = {
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": new_uid(self.rng),
                    "generation": 1,
                    "creationTimestamp": ts(self.now),
                },
                "spec": spec,
                "status": {
                    "disruptionsAllowed": 0,
                    "currentHealthy": 0,
                    "desiredHealthy": 0,
                    "expectedPods": 0,
                    "observedGeneration": 0,
                },
            }
            sent = {"kind": "PodDisruptionBudget", "apiVersion": "policy/v1", **copy.deepcopy(pdb)}
            self.store.put("poddisruptionbudgets", pdb)
            self._audit_pdb("create", pdb, 201, request=sent)
            self._mark_dirty("pdbns", namespace, "")
            bare = [
                p["metadata"]["name"]
                for p in self.store.iter_objects("pods", namespace)
                if selector_matches(selector, p["metadata"].get("labels") or {}) and controller_of(p) is None
            ]
            self.record_truth(
                "pdb_created",
                namespace,
                name,
                uid=pdb["metadata"]["uid"],
                unmanaged=sorted(bare),
                uses_scale=max_unavailable is not None or isinstance(min_available, str),
            )
            return pdb

    def delete_pdb(self, namespace: str, name: str) -> None:
        with self.engine.lock:
            gone = self.store.delete("poddisruptionbudgets", namespace, name)
            if gone is not None:
                self._audit_pdb("delete", gone, 200, request={"kind": "DeleteOptions", "apiVersion": "v1"})

    def _audit_pdb(self, verb: str, pdb: dict[str, Any], code: int, **more: Any) -> None:
        if self.audit is not None:
            meta = pdb["metadata"]
            self.audit.record(
                self.now,
                verb,
                "poddisruptionbudgets",
                meta["namespace"],
                meta["name"],
                code=code,
                group="policy",
                **more,
            )

    def _expected_scale(self, pdb: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[int, list[str]]:
        spec = pdb["spec"]
        if "minAvailable" in spec and not isinstance(spec["minAvailable"], str):
            return len(pods), []
        unmanaged: list[str] = []
        scales: dict[str, int] = {}
        for pod in pods:
            ctrl = controller_of(pod)
            if ctrl is None:
                unmanaged.append(pod["metadata"]["name"])
                continue
            if ctrl["uid"] in scales:
                continue
            if ctrl["kind"] == "ReplicaSet":
                rs = self.store.get("replicasets", pod["metadata"]["namespace"], ctrl["name"])
                dctrl = controller_of(rs) if rs else None
                if dctrl and dctrl["kind"] == "Deployment":
                    dep = self.store.get("deployments", pod["metadata"]["namespace"], dctrl["name"])
                    scales[dctrl["uid"]] = dep["spec"]["replicas"] if dep else 0
                else:
                    scales[ctrl["uid"]] = rs["spec"]["replicas"] if rs else 0
            elif ctrl["kind"] == "StatefulSet":
                sts = self.store.get("statefulsets", pod["metadata"]["namespace"], ctrl["name"])
                scales[ctrl["uid"]] = sts["spec"]["replicas"] if sts else 0
            elif ctrl["kind"] == "DaemonSet":
                ds = self.store.get("daemonsets", pod["metadata"]["namespace"], ctrl["name"])
                scales[ctrl["uid"]] = ds["status"].get("desiredNumberScheduled", 0) if ds else 0
            else:
                scales[ctrl["uid"]] = 1
        return sum(scales.values()), unmanaged

    def _reconcile_pdb(self, pdb: dict[str, Any]) -> None:
        ns = pdb["metadata"]["namespace"]
        now = self.now
        pods = [
            p
            for p in self.store.iter_objects("pods", ns)
            if selector_matches(pdb["spec"].get("selector"), p["metadata"].get("labels") or {})
        ]
        expected, unmanaged = self._expected_scale(pdb, pods)
        if unmanaged:
            msg = UNMANAGED_MESSAGE.format(selector=go_label_selector(pdb["spec"]["selector"]))
            self.record_event(pdb, "Warning", "UnmanagedPods", msg, "controllermanager")
        spec = pdb["spec"]
        if "maxUnavailable" in spec:
            desired = max(0, expected - _int_or_percent(spec["maxUnavailable"], expected, True))
        elif isinstance(spec.get("minAvailable"), str):
            desired = _int_or_percent(spec["minAvailable"], expected, True)
        else:
            desired = int(spec.get("minAvailable", 0))
        disrupted = dict(pdb["status"].get("disruptedPods") or {})
        live = {p["metadata"]["name"]: p for p in pods}
        for pname, when in list(disrupted.items()):
            p = live.get(pname)
            expired = datetime.fromisoformat(when.replace("Z", "+00:00")) + timedelta(minutes=2) < now
            if p is None or p["metadata"].get("deletionTimestamp") or expired:
                del disrupted[pname]
        healthy = sum(
            1
            for p in pods
            if is_ready(p)
            and not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"] not in disrupted
        )
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        old_st = pdb["status"]
        old_cond = next(
            (c for c in old_st.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None
        )
        cstatus = "True" if allowed > 0 else "False"
        cond = {
            "type": "DisruptionAllowed",
            "status": cstatus,
            "observedGeneration": pdb["metadata"]["generation"],
            "lastTransitionTime": old_cond["lastTransitionTime"]
            if old_cond and old_cond["status"] == cstatus
            else ts(now),
            "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
            "message": "",
        }
        new_st: dict[str, Any] = {
            "observedGeneration": pdb["metadata"]["generation"],
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            # apimeta.SetStatusCondition: only DisruptionAllowed is the controller's; others stay
            "conditions": [cond]
            + [c for c in old_st.get("conditions") or [] if c.get("type") != "DisruptionAllowed"],
        }
        if disrupted:
            new_st["disruptedPods"] = disrupted
        if new_st != old_st:
            pdb["status"] = new_st
            sent = {"kind": "PodDisruptionBudget", "apiVersion": "policy/v1", **copy.deepcopy(pdb)}
            self.store.put("poddisruptionbudgets", pdb)
            self._audit_pdb("update", pdb, 200, subresource="status", request=sent)

    def evict(
        self, namespace: str, name: str, grace: int | None = None, actor: str = "api"
    ) -> tuple[int, dict[str, Any]]:
        """The eviction subresource: (HTTP code, Status body). Honours PodDisruptionBudgets. Audited as
        ``actor``'s request (``kubectl-drain`` and ``api``: the admin with kubectl); what the API server
        does inside it (the DisruptionTarget condition, the delete, the PDB's status) is not."""
        with self.engine.lock:
            with self.acting(None):
                code, answer = self._evict(namespace, name, grace, actor)
            if self.audit is not None:
                body: dict[str, Any] = {
                    "kind": "Eviction",
                    "apiVersion": "policy/v1",
                    "metadata": {"name": name, "namespace": namespace},
                }
                if grace is not None:
                    body["deleteOptions"] = {"gracePeriodSeconds": grace}
                response = {k: v for k, v in answer.items() if k not in ("kind", "apiVersion")}
                self.audit.record(
                    self.now,
                    "create",
                    "pods",
                    namespace,
                    name,
                    code=code,
                    actor=_evictor(actor),
                    subresource="eviction",
                    request=body,
                    status=response,
                )
            return code, answer

    def _evict(self, namespace: str, name: str, grace: int | None, actor: str) -> tuple[int, dict[str, Any]]:
        with self.engine.lock:
            pod = self.store.get("pods", namespace, name)
            record = {"time": self.now, "namespace": namespace, "name": name, "actor": actor}
            if pod is None:
                record["outcome"] = "NotFound"
                self.eviction_log.append(record)
                self.record_truth("eviction", namespace, name, outcome="not_found", actor=actor)
                return 404, status(
                    404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"}
                )
            if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") in (
                "Succeeded",
                "Failed",
            ):
                self._pod_truth("eviction", pod, "granted", actor=actor, pdb=None)
                self.delete_pod(namespace, name, grace)
                record["outcome"] = "Allowed"
                self.eviction_log.append(record)
                return 201, status(201, "", "", ok=True)
            labels = pod["metadata"].get("labels") or {}
            pdbs = [
                p
                for p in self.store.iter_objects("poddisruptionbudgets", namespace)
                if selector_matches(p["spec"].get("selector"), labels)
            ]
            if len(pdbs) > 1:
                record["outcome"] = "MultiplePDBs"
                self.eviction_log.append(record)
                self._pod_truth("eviction", pod, "error", actor=actor, pdb=None)
                return 500, status(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            if pdbs:
                pdb = pdbs[0]
                st = pdb["status"]
                pname = pdb["metadata"]["name"]
                if st.get("observedGeneration", 0) < pdb["metadata"]["generation"]:
                    cause = f"The disruption budget {pname} is still being processed by the server."
                    record["outcome"] = "Blocked"
                    self.eviction_log.append(record)
                    self._pod_truth("eviction", pod, "refused", actor=actor, pdb=pname)
                    return 429, status(
                        429,
                        "TooManyRequests",
                        PDB_BLOCKED,
                        {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
                    )
                unhealthy_ok = not is_ready(pod) and (
                    pdb["spec"].get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
                    or st.get("currentHealthy", 0) >= st.get("desiredHealthy", 0)
                )
                if st.get("disruptionsAllowed", 0) <= 0 and not unhealthy_ok:
                    cause = f"The disruption budget {pname} needs {st.get('desiredHealthy', 0)} healthy pods and has {st.get('currentHealthy', 0)} currently"
                    record["outcome"] = "Blocked"
                    record["pdb"] = pname
                    self.eviction_log.append(record)
                    self._pod_truth("eviction", pod, "refused", actor=actor, pdb=pname)
                    return 429, status(
                        429,
                        "TooManyRequests",
                        PDB_BLOCKED,
                        {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
                    )
                if not unhealthy_ok:
                    st["disruptionsAllowed"] -= 1
                    st.setdefault("disruptedPods", {})[name] = ts(self.now)
                    self.store.put("poddisruptionbudgets", pdb)
            now = self.now
            self._pod_truth(
                "eviction", pod, "granted", actor=actor, pdb=pdbs[0]["metadata"]["name"] if pdbs else None
            )
            self._update_pod(
                namespace,
                name,
                lambda p: set_condition(
                    p["status"].setdefault("conditions", []),
                    condition(
                        "DisruptionTarget", True, now, "EvictionByEvictionAPI", "Eviction API: evicting"
                    ),
                ),
            )
            self.delete_pod(namespace, name, grace)
            record["outcome"] = "Allowed"
            self.eviction_log.append(record)
            return 201, status(201, "", "", ok=True)

    # ---- API writes (PUT / PATCH / DELETE through the HTTP face) ---------------------------------------
    def api_update(
        self,
        resource: str,
        namespace: str,
        name: str,
        subresource: str | None,
        body: Any,
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT of ``body`` to the object (``subresource`` None or ``status``); returns what is stored.
        Raises writes.ApiError as the API server answers (404, 409 on a stale resourceVersion, 400, 422)."""
        rtype = RESOURCES[resource]
        with self.engine.lock:
            old = self.store.get(resource, namespace, name)
            if old is None:
                raise writes.not_found(rtype, name)
            meta = body.get("metadata") if isinstance(body, dict) else None
            rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
            if rv and rv != old["metadata"].get("resourceVersion"):
                raise writes.conflict(rtype, name)
            new = writes.prepare_update(rtype, old, body, subresource, name)
            return self._store_update(rtype, old, new, subresource, dry_run)

    def api_patch(
        self,
        resource: str,
        namespace: str,
        name: str,
        subresource: str | None,
        patch: Any,
        content_type: str,
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH (JSON, merge or strategic merge: demo_cluster/patch.py) of the object or its status."""
        rtype = RESOURCES[resource]
        with self.engine.lock:
            old = self.store.get(resource, namespace, name)
            if old is None:
                raise writes.not_found(rtype, name)
            patched = self._patched(
                rtype, {"kind": rtype.kind, "apiVersion": rtype.api_version, **old}, patch, content_type
            )
            rv = (patched.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"].get("resourceVersion"):
                raise writes.conflict(rtype, name)
            new = writes.prepare_update(rtype, old, patched, subresource, name)
            return self._store_update(rtype, old, new, subresource, dry_run)

    @staticmethod
    def _patched(rtype: ResourceType, obj: dict[str, Any], patch: Any, content_type: str) -> dict[str, Any]:
        try:
            out = apply_patch(obj, patch, content_type)
        except PatchError as exc:
            reason = {400: "BadRequest", 415: "UnsupportedMediaType"}.get(exc.code, "Invalid")
            raise writes.ApiError(exc.code, reason, exc.message) from None
        if out.get("kind") not in (None, rtype.kind, "Scale") or out.get("apiVersion") not in (
            None,
            rtype.api_version,
            "autoscaling/v1",
        ):
            raise writes.bad_request("a patch may not change the kind or apiVersion of an object")
        return out

    def _store_update(
        self,
        rtype: ResourceType,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        unchanged = {
            **new,
            "metadata": {k: v for k, v in new["metadata"].items() if k != "resourceVersion"},
        } == {
            **old,
            "metadata": {k: v for k, v in old["metadata"].items() if k != "resourceVersion"},
        }
        if unchanged:  # a no-op write keeps the resourceVersion and sends no watch event, as etcd3 does
            return old
        if dry_run:
            new["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion", "")
            return new
        stored = self.store.put(rtype.name, new)
        self._after_api_write(rtype.name, old, stored, subresource)
        return stored

    def _after_api_write(
        self, resource: str, old: dict[str, Any], new: dict[str, Any], subresource: str | None
    ) -> None:
        """Controllers and the kubelet react to a client's write as to their own informers' update."""
        meta = new["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        if resource == "pods":
            self._pod_changed(new)
            # The last finalizer went from a pod whose worker is done: the status manager's delete completes.
            if (
                meta.get("deletionTimestamp")
                and not meta.get("finalizers")
                and old["metadata"].get("finalizers")
                and meta.get("deletionGracePeriodSeconds") == 0
            ):
                self._final_delete(ns, name, by_kubelet=False)
        elif resource == "nodes":
            self._node_spec_changed(old, new)
        elif resource in ("deployments", "replicasets", "statefulsets", "daemonsets"):
            self._mark_dirty(
                {"deployments": "deploy", "replicasets": "rs", "statefulsets": "sts", "daemonsets": "ds"}[
                    resource
                ],
                ns,
                name,
            )
        elif resource == "poddisruptionbudgets":
            self._mark_dirty("pdbns", ns, "")

    # ---- the scale subresource (autoscaling/v1 Scale) ----------------------------------------------
    def api_scale(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        rtype = RESOURCES[resource]
        with self.engine.lock:
            obj = self.store.get(resource, namespace, name)
            if obj is None:
                raise writes.not_found(rtype, name)
            return self._scale_of(obj)

    @staticmethod
    def _scale_of(obj: dict[str, Any]) -> dict[str, Any]:
        from .tables import selector_string

        meta = obj["metadata"]
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": obj["spec"].get("replicas", 1)},
            "status": {
                "replicas": obj.get("status", {}).get("replicas", 0),
                "selector": selector_string(obj["spec"].get("selector")),
            },
        }

    def api_update_scale(
        self,
        resource: str,
        namespace: str,
        name: str,
        body: Any,
        content_type: str | None = None,
        *,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT (``content_type`` None) or PATCH of the Scale: sets the owner's ``spec.replicas``."""
        rtype = RESOURCES[resource]
        with self.engine.lock:
            obj = self.store.get(resource, namespace, name)
            if obj is None:
                raise writes.not_found(rtype, name)
            scale = self._scale_of(obj)
            new_scale = body if content_type is None else self._patched(rtype, scale, body, content_type)
            if not isinstance(new_scale, dict) or not isinstance(new_scale.get("spec"), dict):
                raise writes.bad_request("the body of the request must be an autoscaling/v1 Scale")
            rv = (new_scale.get("metadata") or {}).get("resourceVersion")
            if rv and rv != obj["metadata"].get("resourceVersion"):
                raise writes.conflict(rtype, name)
            replicas = new_scale["spec"].get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int):
                raise writes.bad_request(
                    f"json: cannot unmarshal {type(replicas).__name__} into Go struct field ScaleSpec.spec.replicas of type int32"
                )
            if replicas < 0:
                raise writes.invalid(
                    rtype,
                    name,
                    [("spec.replicas", f"Invalid value: {replicas}: must be greater than or equal to 0")],
                )
            target = copy.deepcopy(obj)
            target["spec"]["replicas"] = replicas
            new = writes.prepare_update(rtype, obj, target, None, name)
            stored = self._store_update(rtype, obj, new, None, dry_run)
            return self._scale_of(stored)

    # ---- deletes ------------------------------------------------------------------------------------
    def api_delete(
        self, resource: str, namespace: str, name: str, grace: int | None = None
    ) -> tuple[int, dict[str, Any]]:
        """DELETE of one object: (HTTP code, body). Pods answer with the pod (graceful: its
        deletionTimestamp set), other kinds with a Success Status naming what went (background cascade)."""
        rtype = RESOURCES[resource]
        with self.engine.lock:
            obj = self.store.get(resource, namespace, name)
            if obj is None:
                raise writes.not_found(rtype, name)
            if resource == "pods":
                pod = self.delete_pod(namespace, name, grace)
                return 200, {"kind": "Pod", "apiVersion": "v1", **(pod or obj)}
            if resource == "deployments":
                self.delete_deployment(namespace, name)
            elif resource in ("statefulsets", "daemonsets", "replicasets"):
                workloads.delete_workload(self, resource, namespace, name)
            elif resource in ("poddisruptionbudgets", "events", "leases"):
                self.store.delete(resource, namespace, name)
            else:
                raise writes.ApiError(
                    405,
                    "MethodNotAllowed",
                    f"the demo cluster does not delete {resource} (a real API server would)",
                )
            details: dict[str, Any] = {"name": name}
            if rtype.group:
                details["group"] = rtype.group
            details.update(kind=resource, uid=obj["metadata"]["uid"])
            return 200, {**status(200, "", "", ok=True), "details": details}

    def api_delete_collection(
        self, resource: str, namespace: str | None, match: Callable[[dict[str, Any]], bool]
    ) -> list[dict[str, Any]]:
        """DELETE on a collection (``deletecollection``): deletes every object ``match`` accepts, as single
        deletes would, and returns them as they were last stored."""
        gone: list[dict[str, Any]] = []
        with self.engine.lock:
            for obj in self.store.iter_objects(resource, namespace):
                if not match(obj):
                    continue
                meta = obj["metadata"]
                code, body = self.api_delete(resource, meta.get("namespace", ""), meta["name"])
                gone.append(body if resource == "pods" else obj)
                del code
        return gone

    # ---- hooks --------------------------------------------------------------------------------
    def compact(self) -> int:
        return self.store.compact()

    def drop_watches(self) -> None:
        self.store.drop_watches()

    def inject_malformed(
        self, line: bytes = b'{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"broken"'
    ) -> None:
        self.store.inject_raw(line)

    def redeliver_last(self) -> bool:
        return self.store.redeliver_last()

    def spawn_pod(self, node: str, namespace: str = "default", name: str | None = None) -> dict[str, Any]:
        """Create a bare pod bound to ``node`` now (live-update tests)."""
        with self.engine.lock:
            return self.new_pod(
                namespace,
                name or f"live-{rand_suffix(self.rng)}",
                node=node,
                labels={"app": "live", "podlife.dev/spawned": "true"},
            )
