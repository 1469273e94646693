"""Each scenario shows what a real cluster would show (no HTTP: the engine is stepped by hand)."""

from __future__ import annotations

import re
from collections import defaultdict

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.sim import SCENARIOS, SimCluster, install
from collectors.sim.kubelet import SHUTDOWN_MESSAGE

from .conftest import KHI_RE

PHASE_OF = {
    "SyncPod enter": 0,
    "SyncPod exit": 0,
    "SyncTerminatingPod enter": 1,
    "Pod terminating with grace period": 1,
    "SyncTerminatingPod exit": 1,
    "SyncTerminatedPod enter": 2,
    "Pod termination unmounted volumes": 2,
    "Pod termination removed cgroups": 2,
    "SyncTerminatedPod exit": 2,
}
UID_RE = re.compile(r'podUID="([0-9a-f-]+)"')


def run(name: str, seed: int = 1) -> SimCluster:
    c = SimCluster(seed=seed)
    install(c, name)
    c.run_until_idle(600)
    return c


def history(c: SimCluster, resource: str) -> list[tuple[str, dict]]:
    return [(e.type, orjson.loads(e.data)) for e in c.store._hist if e.resource == resource]


def all_lines(c: SimCluster) -> list[str]:
    return [ln for k in c.kubelets.values() for ln in k.logs_since(None)]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_kubelet_lines_parse_and_follow_worker_order(name: str) -> None:
    c = run(name)
    lines = all_lines(c)
    assert lines
    per_uid: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for ln in lines:
        m = KHI_RE.match(ln)
        assert m, ln
        assert re.match(r"^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} [ \d]{7} ", ln), ln
        msg = m.group(6).split('"')[1]
        uid = UID_RE.search(ln)
        if msg in PHASE_OF and uid:
            per_uid[uid.group(1)].append((PHASE_OF[msg], msg))
    assert per_uid
    for uid, seq in per_uid.items():
        phases = [p for p, _ in seq]
        if name != "static-pod-uid-reuse":  # a reused UID legitimately starts over
            assert phases == sorted(phases), (uid, seq)
        assert [m for _, m in seq if m.endswith("enter")] == [
            m.replace("exit", "enter") for _, m in seq if m.endswith("exit")
        ], (uid, seq)


def test_drain_refused_evictions_never_followed_by_deletion_until_budget_allows() -> None:
    c = run("drain-blocked-by-pdb")
    outcomes = [(r["name"], r["outcome"]) for r in c.eviction_log]
    assert outcomes[0][1] == "Blocked" and ("Allowed" in [o for _, o in outcomes])
    victim = outcomes[0][0]
    allowed_at = next(r["time"] for r in c.eviction_log if r["outcome"] == "Allowed" and r["name"] == victim)
    deletes = [
        o
        for t, o in history(c, "pods")
        if o["metadata"]["name"] == victim and (t == "DELETED" or o["metadata"].get("deletionTimestamp"))
    ]
    first_delete = min(o["metadata"]["deletionTimestamp"] for o in deletes)
    assert first_delete >= allowed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    # While blocked, the PDB said so: budget 0 with the pods it needs.
    pdb_states = [
        (o["status"].get("disruptionsAllowed"), o["status"].get("currentHealthy"))
        for _, o in history(c, "poddisruptionbudgets")
    ]
    assert (0, 2) in pdb_states and any(a and a > 0 for a, _ in pdb_states)
    nodes = [o for _, o in history(c, "nodes") if o["spec"].get("unschedulable")]
    assert nodes and any(t["key"] == "node.kubernetes.io/unschedulable" for t in nodes[0]["spec"]["taints"])
    refused = [
        o
        for _, o in history(c, "pods")
        if any(cd["type"] == "DisruptionTarget" for cd in o["status"].get("conditions", []))
    ]
    assert refused and refused[0]["metadata"]["name"] == victim


def test_delete_during_setup_never_reaches_running() -> None:
    c = run("delete-during-setup")
    states = [(t, o) for t, o in history(c, "pods")]
    assert all(o["status"]["phase"] != "Running" for _, o in states)
    final_type, final = states[-1]
    assert final_type == "DELETED" and final["status"]["phase"] == "Failed"
    cs = final["status"]["containerStatuses"][0]["state"]["terminated"]
    assert cs["reason"] == "ContainerStatusUnknown" and cs["exitCode"] == 137
    lines = all_lines(c)
    assert any('"Cancelling current pod sync"' in ln for ln in lines)
    assert not any('"Started container' in ln for ln in lines)
    assert [e["reason"] for _, e in history(c, "events") if e["involvedObject"]["kind"] == "Pod"] == [
        "Scheduled",
        "Pulling",
    ]


def test_stuck_terminating_container_outlives_grace_period() -> None:
    c = run("stuck-terminating")
    pods = history(c, "pods")
    deleting = next(o for _, o in pods if o["metadata"].get("deletionTimestamp"))
    grace = deleting["metadata"]["deletionGracePeriodSeconds"]
    dead = next(
        o
        for _, o in pods
        if "terminated" in (o["status"].get("containerStatuses") or [{"state": {}}])[0]["state"]
    )
    term = dead["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 137
    from datetime import datetime

    asked = datetime.fromisoformat(deleting["metadata"]["deletionTimestamp"].replace("Z", "+00:00"))
    finished = datetime.fromisoformat(term["finishedAt"].replace("Z", "+00:00"))
    assert (finished - asked).total_seconds() > 0, (
        "the container outlived deletionTimestamp (= request + grace)"
    )
    assert grace == 10
    reasons = [e["reason"] for _, e in history(c, "events")]
    assert "ExceededGracePeriod" in reasons
    assert any(
        o["metadata"].get("finalizers") and o["metadata"].get("deletionGracePeriodSeconds") == 0
        for _, o in pods
    )
    assert pods[-1][0] == "DELETED"


def test_node_shutdown_pods_end_failed_with_exact_reason() -> None:
    c = run("node-shutdown")
    killed = {}
    for _, o in history(c, "pods"):
        if o["status"].get("reason") == "Terminated":
            killed[o["metadata"]["name"]] = o
    assert killed
    for pod in killed.values():
        st = pod["status"]
        assert st["phase"] == "Failed" and st["message"] == SHUTDOWN_MESSAGE
        dt = next(cd for cd in st["conditions"] if cd["type"] == "DisruptionTarget")
        assert (dt["status"], dt["reason"], dt["message"]) == (
            "True",
            "TerminationByKubelet",
            SHUTDOWN_MESSAGE,
        )
    ready = [
        next(cd for cd in o["status"]["conditions"] if cd["type"] == "Ready")["status"]
        for _, o in history(c, "nodes")
        if o["metadata"]["name"] == "shutdown-node-1"
    ]
    assert "False" in ready and ready[-1] == "True"
    assert any('"Pod is being removed by the kubelet, begin teardown"' in ln for ln in all_lines(c))


def test_static_pod_uid_is_32_hex_and_reused() -> None:
    c = run("static-pod-uid-reuse")
    lines = c.kubelets["static-node-1"].logs_since(None)
    uids = {
        m.group(1)
        for ln in lines
        if (m := UID_RE.search(ln)) and "etcd-backup" in ln and "Deleting a mirror pod" not in ln
    }
    (uid,) = uids
    assert re.fullmatch(r"[0-9a-f]{32}", uid)
    firsts = [ln for ln in lines if '"Pod is being synced for the first time"' in ln]
    assert len(firsts) == 2
    restart = [i for i, ln in enumerate(lines) if "requested to restart with same UID" in ln]
    old_done = [i for i, ln in enumerate(lines) if '"Pod is complete and the worker can now stop"' in ln]
    assert restart and old_done and restart[0] < old_done[0]  # re-added while the old incarnation terminates
    mirrors = [o for t, o in history(c, "pods") if t == "ADDED"]
    assert len(mirrors) == 2 and {
        m["metadata"]["annotations"]["kubernetes.io/config.mirror"] for m in mirrors
    } == {uid}


def test_pdb_unmanaged_pods_event_text_exact() -> None:
    c = run("pdb-unmanaged-pods")
    (ev,) = [e for _, e in history(c, "events") if e["reason"] == "UnmanagedPods"][-1:]
    assert ev["type"] == "Warning"
    assert ev["message"] == (
        "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: consul,},"
        "MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the status of the PDB "
        "cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set "
        '".spec.minAvailable" field of the PDB to an integer value.'
    )
    statuses = [
        o["status"] for _, o in history(c, "poddisruptionbudgets") if o["status"].get("observedGeneration")
    ]
    assert statuses and all(s["expectedPods"] == 0 and s["disruptionsAllowed"] == 0 for s in statuses)


def test_rollout_status_counts_move_consistently() -> None:
    c = run("rollout")
    deps = [o for _, o in history(c, "deployments") if o["status"]]
    want = deps[0]["spec"]["replicas"]
    surge = 1  # 25% of 4
    for d in deps:
        st = d["status"]
        assert st.get("replicas", 0) <= want + surge
        assert st.get("updatedReplicas", 0) <= st.get("replicas", 0)
        assert st.get("availableReplicas", 0) <= st.get("readyReplicas", 0) <= st.get("replicas", 0) + surge
    gens = [d["status"]["observedGeneration"] for d in deps]
    assert gens == sorted(gens) and gens[-1] == 2
    assert any(
        d["status"].get("updatedReplicas") == want == d["status"].get("availableReplicas")
        and d["metadata"]["generation"] == 2
        for d in deps
    )
    rs_names = {o["metadata"]["name"] for _, o in history(c, "replicasets")}
    assert len(rs_names) == 2
    scaling = [e["message"] for _, e in history(c, "events") if e["reason"] == "ScalingReplicaSet"]
    assert scaling[0].startswith("Scaled up replica set web-") and any(
        m.startswith("Scaled down") for m in scaling
    )


def test_metrics_consistent_with_workers_mid_scenario() -> None:
    c = SimCluster(seed=2)
    install(c, "mixed")
    for _ in range(12):
        c.advance(5)
        for node, k in c.kubelets.items():
            fams = {f.name: f for f in text_string_to_metric_families(k.metrics_text())}
            samples = fams["kubelet_working_pods"].samples
            assert len(samples) == 15, node
            assert sum(s.value for s in samples) == len(k.workers)
            assert fams["kubelet_running_pods"].samples[0].value == sum(
                1 for w in k.workers.values() if w.containers
            )


def test_deterministic_given_seed() -> None:
    a, b = run("rollout", seed=9), run("rollout", seed=9)
    assert all_lines(a) == all_lines(b)
    assert [e.data for e in a.store._hist] == [e.data for e in b.store._hist]


def test_scale_lists_fast_and_churns() -> None:
    c = SimCluster(seed=1)
    install(c, "scale", nodes=200, pods_per_node=30, churn=50)
    c.advance(10)
    assert c.store.count("pods") >= 6000
    items, _, token, _ = c.store.list_page("pods", None, 500, None)
    assert len(items) == 500 and token
    assert sum(1 for ln in all_lines(c) if '"SyncTerminatedPod exit"' in ln) > 100
