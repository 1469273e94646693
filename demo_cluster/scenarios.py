"""Scenarios: realistic sequences of what happens on a cluster, written as engine processes.

Each scenario is ``fn(cluster, loop) -> Process``: it yields virtual seconds to wait. ``loop`` makes names
fresh when ``mixed`` repeats them. Scenarios put their pods on their own nodes (label
``podlife.dev/pool``) so they can run side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .cluster import SimCluster
from .engine import Process
from .kubelet import Behaviour
from .objects import is_ready, rand_suffix

NAMESPACE = "demo"


def _nodes(c: SimCluster, pool: str, n: int) -> list[str]:
    names = [f"{pool}-node-{i}" for i in range(1, n + 1)]
    for name in names:
        if name not in c.kubelets:
            c.add_node(name, {"podlife.dev/pool": pool})
    return names


def _sfx(loop: int) -> str:
    return f"-{loop}" if loop else ""


def _wait(pred: Callable[[], bool], timeout: float = 300.0, poll: float = 0.5) -> Process:
    waited = 0.0
    while not pred() and waited < timeout:
        yield poll
        waited += poll


def _deployment_settled(c: SimCluster, ns: str, name: str) -> bool:
    dep = c.store.get("deployments", ns, name)
    if dep is None:
        return True
    st = dep["status"]
    want = dep["spec"]["replicas"]
    return bool(
        st.get("observedGeneration") == dep["metadata"]["generation"]
        and st.get("updatedReplicas") == want
        and st.get("availableReplicas") == want
        and st.get("replicas") == want
    )


def rollout(c: SimCluster, loop: int = 0) -> Process:
    """A Deployment rolls out v1, then a new image: ReplicaSets scale up and down within maxSurge."""
    _nodes(c, "rollout", 3)
    ns, name = NAMESPACE, f"web{_sfx(loop)}"
    c.create_deployment(
        ns,
        name,
        4,
        "nginx:1.26.2",
        {"app": name},
        node_selector={"podlife.dev/pool": "rollout"},
        behaviour=Behaviour(setup_seconds=1.5),
    )
    yield from _wait(lambda: _deployment_settled(c, ns, name))
    yield 5.0

    def new_image(dep: dict[str, Any]) -> None:
        dep["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27.3"

    c.update_deployment(ns, name, new_image)
    yield 1.0
    yield from _wait(lambda: _deployment_settled(c, ns, name))
    yield 10.0
    c.delete_deployment(ns, name)
    yield 30.0


def drain_blocked_by_pdb(c: SimCluster, loop: int = 0) -> Process:
    """kubectl drain: cordon, evictions refused (429) while the budget is 0; the owner scales up, a
    replacement becomes ready elsewhere, and the retried eviction is allowed."""
    nodes = _nodes(c, "drain", 3)
    ns, name = NAMESPACE, f"api{_sfx(loop)}"
    c.create_deployment(
        ns,
        name,
        2,
        "ghcr.io/podlife/api:2.4.1",
        {"app": name},
        node_selector={"podlife.dev/pool": "drain"},
        behaviour=Behaviour(setup_seconds=2.0, stop_seconds=1.0),
    )
    c.create_pdb(ns, f"{name}-pdb", {"matchLabels": {"app": name}}, min_available=2)
    yield from _wait(lambda: _deployment_settled(c, ns, name))
    yield 3.0
    pods = [
        p
        for p in c.store.iter_objects("pods", ns)
        if p["metadata"]["labels"].get("app") == name and not p["metadata"].get("deletionTimestamp")
    ]
    target = pods[0]["spec"]["nodeName"] if pods else nodes[0]
    c.cordon(target)
    yield 1.0
    on_node = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == target]
    scaled = False
    for victim in on_node:
        for attempt in range(60):
            code, _ = c.evict(ns, victim, actor="kubectl-drain")
            if code == 201 or code == 404:
                break
            if attempt == 1 and not scaled:
                c.update_deployment(ns, name, lambda d: d["spec"].__setitem__("replicas", 3))
                scaled = True
            yield 5.0  # kubectl drain retries every 5 s
    yield from _wait(
        lambda: (
            not any(
                p["spec"].get("nodeName") == target and p["metadata"]["labels"].get("app") == name
                for p in c.store.iter_objects("pods", ns)
            )
        )
    )
    yield 10.0
    c.uncordon(target)
    c.delete_pdb(ns, f"{name}-pdb")
    c.delete_deployment(ns, name)
    yield 30.0


def delete_during_setup(c: SimCluster, loop: int = 0) -> Process:
    """A pod is deleted while the kubelet is still pulling its image: it never reaches Running."""
    (node,) = _nodes(c, "setup", 1)
    name = f"slow-start{_sfx(loop)}-{rand_suffix(c.rng)}"
    c.new_pod(
        NAMESPACE,
        name,
        node=node,
        image="ghcr.io/podlife/big-model-server:7.0",
        behaviour=Behaviour(pull_seconds=45.0, setup_seconds=2.0),
    )
    yield 3.0
    c.delete_pod(NAMESPACE, name)
    yield 30.0


def stuck_terminating(c: SimCluster, loop: int = 0) -> Process:
    """A container ignores SIGTERM and the runtime is slow to reap it; a finalizer keeps the object."""
    (node,) = _nodes(c, "stuck", 1)
    name = f"stubborn{_sfx(loop)}-{rand_suffix(c.rng)}"
    fin = "podlife.dev/cleanup"
    c.new_pod(
        NAMESPACE,
        name,
        node=node,
        image="ghcr.io/podlife/ignores-sigterm:1.0",
        grace=10,
        finalizers=[fin],
        behaviour=Behaviour(ignore_sigterm=True, runtime_hang_seconds=25.0),
    )
    yield 8.0
    c.delete_pod(NAMESPACE, name)
    yield 90.0
    c.remove_finalizer(NAMESPACE, name, fin)
    yield 10.0


def node_shutdown(c: SimCluster, loop: int = 0) -> Process:
    """Graceful node shutdown: the pods end Failed/Terminated with DisruptionTarget, the node NotReady."""
    nodes = _nodes(c, "shutdown", 2)
    ns, name = NAMESPACE, f"worker{_sfx(loop)}"
    c.create_deployment(
        ns,
        name,
        3,
        "ghcr.io/podlife/worker:1.9",
        {"app": name},
        node_selector={"podlife.dev/pool": "shutdown"},
        behaviour=Behaviour(stop_seconds=2.0, exit_code=143),
    )
    yield from _wait(lambda: _deployment_settled(c, ns, name))
    yield 5.0
    victim_node = nodes[0]
    c.shutdown_node(victim_node, grace=20)
    yield 90.0
    c.boot_node(victim_node)
    yield 10.0
    c.delete_deployment(ns, name)
    for pod in c.store.iter_objects("pods", ns):
        if pod["metadata"]["labels"].get("app") == name:
            c.delete_pod(ns, pod["metadata"]["name"])
    yield 30.0


def static_pod_uid_reuse(c: SimCluster, loop: int = 0) -> Process:
    """A static pod's manifest is removed and put back unchanged while the old incarnation is still
    terminating: the same 32-hex UID restarts once the old worker is done."""
    (node,) = _nodes(c, "static", 1)
    comp = f"etcd-backup{_sfx(loop)}"
    c.add_static_pod(
        node, "kube-system", comp, "registry.k8s.io/etcd:3.5.16-0", behaviour=Behaviour(stop_seconds=6.0)
    )
    yield 10.0
    c.remove_static_pod(node, "kube-system", comp)
    yield 2.0
    c.add_static_pod(
        node, "kube-system", comp, "registry.k8s.io/etcd:3.5.16-0", behaviour=Behaviour(stop_seconds=6.0)
    )
    yield 40.0
    c.remove_static_pod(node, "kube-system", comp)
    yield 30.0


def _statefulset_settled(c: SimCluster, ns: str, name: str) -> bool:
    sts = c.store.get("statefulsets", ns, name)
    if sts is None:
        return True
    st, want = sts["status"], sts["spec"]["replicas"]
    return bool(
        st.get("observedGeneration") == sts["metadata"]["generation"]
        and st.get("readyReplicas") == want == st.get("updatedReplicas") == st.get("currentReplicas")
        and st.get("currentRevision") == st.get("updateRevision")
    )


def _daemonset_settled(c: SimCluster, ns: str, name: str) -> bool:
    ds = c.store.get("daemonsets", ns, name)
    if ds is None:
        return True
    st = ds["status"]
    return bool(st.get("desiredNumberScheduled")) and st.get("numberReady") == st["desiredNumberScheduled"]


def statefulset_daemonset(c: SimCluster, loop: int = 0) -> Process:
    """A StatefulSet comes up in order (web-0 Ready before web-1 is created) beside a DaemonSet with one
    pod per node; a node joins and the DaemonSet follows it; a new image rolls the StatefulSet from the
    highest ordinal down, each pod deleted and re-created under the same name with a new UID."""
    nodes = _nodes(c, "apps", 2)
    ns, sfx = NAMESPACE, _sfx(loop)
    sts, ds = f"web{sfx}", f"node-agent{sfx}"
    pool = {"podlife.dev/pool": "apps"}
    c.create_daemonset(
        ns,
        ds,
        "ghcr.io/podlife/node-agent:0.9.2",
        {"app": ds},
        node_selector=pool,
        behaviour=Behaviour(setup_seconds=0.8, stop_seconds=0.3),
    )
    c.create_statefulset(
        ns,
        sts,
        2,
        "nginx:1.26.2",
        {"app": f"nginx{sfx}"},
        node_selector=pool,
        behaviour=Behaviour(setup_seconds=1.5, stop_seconds=0.5),
        grace=10,
    )
    yield from _wait(lambda: _statefulset_settled(c, ns, sts) and _daemonset_settled(c, ns, ds))
    yield 30.0
    joiner = f"apps-node-{len(nodes) + 1}"
    if joiner not in c.kubelets:
        c.add_node(joiner, pool)
        yield from _wait(lambda: _daemonset_settled(c, ns, ds))
    yield 5.0

    def new_image(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.27.3"

    c.update_statefulset(ns, sts, new_image)
    yield 1.0
    yield from _wait(lambda: _statefulset_settled(c, ns, sts))
    yield 10.0
    c.delete_statefulset(ns, sts)
    c.delete_daemonset(ns, ds)
    yield 30.0


def pdb_unmanaged_pods(c: SimCluster, loop: int = 0) -> Process:
    """A PDB with maxUnavailable over bare pods: UnmanagedPods warnings, and a budget stuck at 0."""
    nodes = _nodes(c, "unmanaged", 2)
    app = f"consul{_sfx(loop)}"
    names = [f"{app}-{i}" for i in range(3)]
    for i, pname in enumerate(names):
        c.new_pod(NAMESPACE, pname, node=nodes[i % 2], labels={"app": app}, image="hashicorp/consul:1.20")
    yield 5.0
    c.create_pdb(NAMESPACE, f"{app}-pdb", {"matchLabels": {"app": app}}, max_unavailable=1)
    yield 30.0
    code, _ = c.evict(NAMESPACE, names[0], actor="operator")
    yield 30.0
    c.delete_pdb(NAMESPACE, f"{app}-pdb")
    for pname in names:
        c.delete_pod(NAMESPACE, pname)
    yield 30.0
    del code


SCENARIOS: dict[str, Callable[[SimCluster, int], Process]] = {
    "rollout": rollout,
    "drain-blocked-by-pdb": drain_blocked_by_pdb,
    "delete-during-setup": delete_during_setup,
    "stuck-terminating": stuck_terminating,
    "node-shutdown": node_shutdown,
    "static-pod-uid-reuse": static_pod_uid_reuse,
    "pdb-unmanaged-pods": pdb_unmanaged_pods,
    "statefulset-daemonset": statefulset_daemonset,
}
ALL_NAMES = (*SCENARIOS, "mixed", "scale")


def _looping(c: SimCluster, fn: Callable[[SimCluster, int], Process], pause: float) -> Process:
    loop = 0
    while True:
        yield from fn(c, loop)
        yield pause
        loop += 1


SCALE_NAMESPACE = "load"
SCALE_IMAGE = "registry.k8s.io/pause:3.10"


def scale_limits(nodes: int, pods_per_node: int) -> dict[str, float]:
    """Memory-bound defaults for ``scale`` (each applies unless given explicitly to SimCluster):

    * watch history: ~1/3 of the pods, at least 20,000 entries, at most 200,000;
    * kubelet log lines: a budget of ~1M lines shared by all nodes (at least 200 a node);
    * node heartbeats: every 10 s up to 100 nodes, then every nodes/10 s, at most every 60 s
      (5,000 nodes: ~83 node writes a second);
    * event TTL: 15 minutes instead of the API server's 1 hour (at 50 pods/s of churn that is
      ~200,000 live events instead of ~800,000);
    * node Lease renewals: as often as the heartbeats (a real kubelet renews every 10 s, which at 5,000
      nodes would be 500 writes a second into the one shared watch history).
    """
    pods = nodes * pods_per_node
    heartbeat = min(60.0, max(10.0, nodes / 10))
    return {
        "history_limit": max(20_000, min(200_000, pods // 3)),
        "kubelet_log_limit": max(200, min(20_000, 1_000_000 // max(1, nodes))),
        "heartbeat_interval": heartbeat,
        "event_ttl": 900.0,
        "lease_interval": heartbeat,
    }


def populate_scale(c: SimCluster, nodes: int, pods_per_node: int) -> None:
    """``nodes`` × ``pods_per_node`` pods that were started before the simulation began: written
    directly in their Running state (one ADDED each, then the history is compacted), their kubelets
    holding started workers, and no events or kubelet lines for them. Pod and node ages are spread
    over the hours before ``c.now``."""
    from datetime import timedelta

    from .objects import container_id, make_pod, new_uid, running_status

    limits = scale_limits(nodes, pods_per_node)
    if "history_limit" not in c.explicit:
        c.store.history_limit = int(limits["history_limit"])
    if "kubelet_log_limit" not in c.explicit:
        c.kubelet_log_limit = int(limits["kubelet_log_limit"])
    if "heartbeat_interval" not in c.explicit:
        c.heartbeat_interval = limits["heartbeat_interval"]
    if "event_ttl" not in c.explicit:
        c.event_ttl = limits["event_ttl"]
    if "lease_interval" not in c.explicit:
        c.lease_interval = limits["lease_interval"]
    now = c.now
    rng = c.rng
    behaviour = Behaviour()  # shared: every scale pod behaves alike
    containers = [{"name": "app", "image": SCALE_IMAGE}]
    c.ensure_namespace(SCALE_NAMESPACE)
    for i in range(nodes):
        node = f"scale-node-{i:05d}"
        kubelet = c.add_node(node, {"podlife.dev/pool": "scale"}, created=now - timedelta(days=3))
        kubelet.lines.clear()  # it started days ago: its start lines are not in the window
        host_ip = c.node_ip(node)
        for j in range(pods_per_node):
            created = now - timedelta(seconds=rng.randrange(600, 6 * 3600))
            pod = make_pod(
                namespace=SCALE_NAMESPACE,
                name=f"load-{i:05d}-{j:03d}",
                uid=new_uid(rng),
                created=created,
                labels={"app": "load"},
                containers=containers,
                node_name=node,
            )
            started = created + timedelta(seconds=2)
            pod["status"] = running_status(
                pod,
                scheduled=created,
                started=started,
                host_ip=host_ip,
                pod_ip=c.pod_ip(node),
                container_ids={"app": container_id(rng)},
            )
            c.add_running_pod(pod)
            kubelet.adopt_running(pod, behaviour, started)
    c.store.compact()  # an API server that has run a while: the build is not replayable history


def scale(c: SimCluster, nodes: int = 50, pods_per_node: int = 10, churn: float = 1.0) -> Process:
    """Churn on the ``populate_scale`` population: ``churn`` pods a second are deleted (the full
    graceful teardown: SyncLoop DELETE, SyncTerminatingPod, SyncTerminatedPod, Killing event, removal)
    and replaced by a new pod on the same node (scheduled, pulled, started: events and kubelet lines)."""
    yield 5.0
    period = 1.0 / churn if churn > 0 else 0.0
    n = 0
    while period:
        i = c.rng.randrange(nodes)
        node = f"scale-node-{i:05d}"
        keys = sorted(c.pods_on_node(node))
        if keys:
            ns, victim = keys[c.rng.randrange(len(keys))]
            pod = c.store.get("pods", ns, victim)
            if pod is not None and not pod["metadata"].get("deletionTimestamp"):
                c.delete_pod(ns, victim, grace=5)
                n += 1
                c.new_pod(
                    SCALE_NAMESPACE,
                    f"load-{i:05d}-c{n:07d}",
                    node=node,
                    labels={"app": "load"},
                    image=SCALE_IMAGE,
                )
        yield period


def install(c: SimCluster, name: str, **opts: Any) -> None:
    """Start scenario ``name`` on the cluster (``mixed`` loops every scenario forever).

    ``kubelet_verbosity`` (any scenario): every kubelet's klog ``--v``, 4 by default; 2 is what production
    kubelets run at (no pod-worker lines, docs/kubelet-lines.md)."""
    verbosity = opts.get("kubelet_verbosity")
    if verbosity is not None:
        level = int(verbosity)
        if not 0 <= level <= 10:
            raise ValueError(f"kubelet_verbosity {verbosity!r}: expected a klog level from 0 to 10")
        c.kubelet_verbosity = level
        for kubelet in c.kubelets.values():
            kubelet.verbosity = level
    if name == "scale":
        nodes, per_node = int(opts.get("nodes", 50)), int(opts.get("pods_per_node", 10))
        populate_scale(c, nodes, per_node)
        c.engine.spawn(scale(c, nodes, per_node, float(opts.get("churn", 1.0))))
    elif name == "mixed":
        for i, fn in enumerate(SCENARIOS.values()):
            c.engine.spawn(_looping(c, fn, pause=20.0), delay=i * 0.5)
    elif name in SCENARIOS:
        c.engine.spawn(SCENARIOS[name](c, 0))
    else:
        raise ValueError(f"unknown scenario {name!r}; expected one of {', '.join(ALL_NAMES)}")


def is_pod_ready(pod: dict[str, Any]) -> bool:
    return is_ready(pod)
