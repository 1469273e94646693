"""Each scenario shows what a real cluster would show (no HTTP: the engine is stepped by hand)."""

from __future__ import annotations

import copy
import itertools
import re
from collections import defaultdict
from datetime import datetime

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from demo_cluster import SCENARIOS, SimCluster, install
from demo_cluster.kubelet import SHUTDOWN_MESSAGE
from demo_cluster.objects import controller_of, is_ready, ts

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
    # The cordon writes spec.unschedulable; the node lifecycle controller's taint follows in its own write.
    nodes = [o for _, o in history(c, "nodes") if o["spec"].get("unschedulable")]
    assert nodes and "taints" not in nodes[0]["spec"]
    tainted = [
        o
        for o in nodes
        if any(t["key"] == "node.kubernetes.io/unschedulable" for t in o["spec"].get("taints", []))
    ]
    assert tainted
    assert int(tainted[0]["metadata"]["resourceVersion"]) > int(nodes[0]["metadata"]["resourceVersion"])
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
    # A terminal phase is reported only with the containers' final states (kubernetes#108366).
    for _, o in history(c, "pods"):
        if o["status"].get("phase") in ("Failed", "Succeeded"):
            running = [
                cs["name"] for cs in o["status"].get("containerStatuses") or [] if "running" in cs["state"]
            ]
            assert not running, f"{o['metadata']['name']} is {o['status']['phase']} with {running} running"
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


def test_scale_population_starts_running_then_churns_with_full_lifecycles() -> None:
    """GIVEN 200 nodes x 30 pods WHEN built THEN every pod is Running/Ready with a started worker, with no
    startup events or kubelet lines and no replayable build history (how fast it builds is measured by
    ``python -m demo_cluster --scenario scale --build-only``, not asserted here); WHEN time runs with churn
    THEN deleted pods go through the whole teardown and replacements through the whole startup."""
    c = SimCluster(seed=1)
    install(c, "scale", nodes=200, pods_per_node=30, churn=20)
    assert c.store.count("pods") == 6000 and len(c.kubelets) == 200
    assert c.store.count("events") == 0 and all_lines(c) == []
    assert [e for e in c.store._hist if e.resource == "pods"] == []  # compacted: a list is the way in
    # scale's memory-bound defaults
    assert c.store.history_limit == 20_000 and c.kubelet_log_limit == 5_000
    assert all(k.lines.maxlen == 5_000 for k in c.kubelets.values())
    assert c.heartbeat_interval == 20.0 and c.event_ttl == 900.0

    names, token, list_rv, pages = [], None, None, 0
    while True:
        items, rv, token, remaining = c.store.list_page("pods", "load", 500, token)
        list_rv = list_rv or rv
        assert rv == list_rv and len(items) == 500
        pages += 1
        names += [orjson.loads(i)["metadata"]["name"] for i in items]
        if token is None:
            break
        assert remaining == 6000 - 500 * pages
    assert pages == 12 and len(set(names)) == 6000 and names == sorted(names)

    pod = c.store.get("pods", "load", "load-00007-011")
    assert pod["status"]["phase"] == "Running" and is_ready(pod)
    assert pod["metadata"]["creationTimestamp"] < ts(c.now)
    cs = pod["status"]["containerStatuses"][0]
    kubelet = c.kubelets["scale-node-00007"]
    worker = kubelet.workers[pod["metadata"]["uid"]]
    assert worker.state == "sync" and worker.started and worker.containers == {"app": cs["containerID"]}
    working = kubelet.working_pods()
    assert working[("sync", "desired", "")] == 30 and sum(working.values()) == 30

    c.advance(15)  # churn starts at 5 s: ~200 pods replaced

    hist = [(e.type, orjson.loads(e.data)) for e in c.store._hist if e.resource == "pods"]
    deleted = {o["metadata"]["uid"] for t, o in hist if t == "DELETED"}
    added = {o["metadata"]["uid"]: o["metadata"]["name"] for t, o in hist if t == "ADDED"}
    assert len(deleted) > 150 and len(added) > 150
    assert all(re.fullmatch(r"load-\d{5}-c\d{7}", n) for n in added.values())
    lines = all_lines(c)
    ended = {m.group(1) for ln in lines if '"SyncTerminatedPod exit"' in ln and (m := UID_RE.search(ln))}
    assert deleted <= ended  # every removed pod went through the full worker teardown first
    started = {m.group(1) for ln in lines if '"SyncPod exit"' in ln and (m := UID_RE.search(ln))}
    assert len(started & set(added)) > 150  # replacements were set up, not written as Running
    reasons = {e["reason"] for e in c.store.iter_objects("events")}
    assert {"Scheduled", "Pulled", "Created", "Started", "Killing"} <= reasons
    assert 6000 <= c.store.count("pods") <= 6000 + 40  # replacements overlap their victims' teardown
    assert sum(len(k.workers) for k in c.kubelets.values()) >= 6000


def test_statefulset_pods_come_up_in_order_and_roll_back_to_front() -> None:
    c = run("statefulset-daemonset")
    pods = history(c, "pods")
    sts_pods = [(t, o) for t, o in pods if (controller_of(o) or {}).get("kind") == "StatefulSet"]
    adds = [(o["metadata"]["name"], o["metadata"]["uid"]) for t, o in sts_pods if t == "ADDED"]
    assert [n for n, _ in adds] == ["web-0", "web-1", "web-1", "web-0"]  # up in order, update 1 then 0
    assert len({u for _, u in adds}) == 4  # same names, new UIDs
    # web-1 is created only once web-0 is Running and Ready
    seq = [(t, o) for t, o in sts_pods]
    first_web1 = next(i for i, (t, o) in enumerate(seq) if t == "ADDED" and o["metadata"]["name"] == "web-1")
    assert any(o["metadata"]["name"] == "web-0" and is_ready(o) for _, o in seq[:first_web1])
    web0 = next(o for _, o in sts_pods if o["metadata"]["name"] == "web-0")
    assert web0["spec"]["hostname"] == "web-0" and web0["spec"]["subdomain"] == "web"
    assert web0["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] == "web-0"
    ref = controller_of(web0)
    assert ref["apiVersion"] == "apps/v1" and ref["name"] == "web" and ref["blockOwnerDeletion"]

    states = [o for _, o in history(c, "statefulsets")]
    for st in (o["status"] for o in states if o["status"].get("updateRevision")):
        assert max(st.get("currentReplicas", 0), st.get("updatedReplicas", 0)) <= st["replicas"] <= 2
        assert st["availableReplicas"] == st.get("readyReplicas", 0) <= st["replicas"]
        assert st["collisionCount"] == 0
    revs = [(o["status"].get("currentRevision"), o["status"].get("updateRevision")) for o in states]
    old, new = revs[-1][0], revs[-1][1]
    assert old == new and any(cur != upd for cur, upd in revs if cur)  # mid-rollout they differ
    final = states[-1]["status"]
    assert final["observedGeneration"] == 2 and final["currentReplicas"] == final["updatedReplicas"] == 2
    msgs = [e["message"] for _, e in history(c, "events") if e["involvedObject"]["kind"] == "StatefulSet"]
    assert msgs[:2] == [
        "create Pod web-0 in StatefulSet web successful",
        "create Pod web-1 in StatefulSet web successful",
    ]
    assert "delete Pod web-1 in StatefulSet web successful" in msgs


def test_daemonset_runs_one_pod_per_node_and_follows_a_joining_node() -> None:
    c = run("statefulset-daemonset")
    pods = [
        o
        for t, o in history(c, "pods")
        if t == "ADDED" and (controller_of(o) or {}).get("kind") == "DaemonSet"
    ]
    pinned = sorted(
        p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ][0]["matchFields"][0]["values"][0]
        for p in pods
    )
    assert pinned == ["apps-node-1", "apps-node-2", "apps-node-3"]
    assert all(p["metadata"]["generateName"] == "node-agent-" for p in pods)
    assert all(
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
        in p["spec"]["tolerations"]
        for p in pods
    )
    bound = {
        o["metadata"]["name"]: o["spec"].get("nodeName")
        for _, o in history(c, "pods")
        if o["spec"].get("nodeName")
    }
    assert sorted(bound[p["metadata"]["name"]] for p in pods) == pinned
    statuses = [o["status"] for _, o in history(c, "daemonsets")]
    desired = [st["desiredNumberScheduled"] for st in statuses]
    assert 2 in desired and desired[-1] == 3
    for st in statuses:
        assert st["numberMisscheduled"] == 0
        assert st["numberReady"] <= st["currentNumberScheduled"] <= st["desiredNumberScheduled"]
        assert st.get("numberUnavailable", 0) == st["desiredNumberScheduled"] - st["numberReady"]
    assert any(st["numberReady"] == 3 == st.get("numberAvailable") for st in statuses)
    created = [
        e["message"]
        for _, e in history(c, "events")
        if e["reason"] == "SuccessfulCreate" and e["involvedObject"]["kind"] == "DaemonSet"
    ]
    assert sorted(created) == sorted(f"Created pod: {p['metadata']['name']}" for p in pods)


def test_node_heartbeats_change_only_heartbeat_time_and_resource_version() -> None:
    c = run("rollout")
    assert c.engine.elapsed < 200  # background heartbeats do not keep run_until_idle going
    versions = [o for _, o in history(c, "nodes") if o["metadata"]["name"] == "rollout-node-2"]
    assert len(versions) >= 6

    def strip(node: dict) -> dict:
        node = copy.deepcopy(node)
        del node["metadata"]["resourceVersion"]
        for cond in node["status"]["conditions"]:
            del cond["lastHeartbeatTime"]
        return node

    assert all(strip(v) == strip(versions[0]) for v in versions)
    beats = [datetime.fromisoformat(v["status"]["conditions"][0]["lastHeartbeatTime"]) for v in versions[1:]]
    assert {(b - a).total_seconds() for a, b in itertools.pairwise(beats)} == {10.0}
    assert all(len({c["lastHeartbeatTime"] for c in v["status"]["conditions"]}) == 1 for v in versions)


def test_no_heartbeats_from_a_node_that_shut_down() -> None:
    """Heartbeats go on while the node shuts down gracefully (the kubelet still runs), stop once the
    kubelet has stopped, and resume, fresh, when the node boots again."""
    c = run("node-shutdown")
    versions = [o for _, o in history(c, "nodes") if o["metadata"]["name"] == "shutdown-node-1"]
    ready = [next(x for x in v["status"]["conditions"] if x["type"] == "Ready") for v in versions]
    at = datetime.fromisoformat
    off = next(i for i, r in enumerate(ready) if r["status"] == "False")
    boot = next(i for i, r in enumerate(ready) if i > off and r["status"] == "True")
    assert any(r["status"] == "Unknown" for r in ready[off:boot])
    last_beat = max(at(r["lastHeartbeatTime"]) for r in ready[off:boot])
    assert (last_beat - at(ready[off]["lastTransitionTime"])).total_seconds() <= 21  # grace 20 + 1
    assert (at(ready[boot]["lastTransitionTime"]) - last_beat).total_seconds() > 60
    assert ready[boot]["lastHeartbeatTime"] == ready[boot]["lastTransitionTime"]
    assert len(ready) - boot >= 3  # beating again


def test_events_expire_after_their_ttl() -> None:
    c = SimCluster(seed=1, event_ttl=20)
    install(c, "rollout")
    c.run_until_idle(600)
    c.advance(120)
    gone = [e for e in c.store._hist if e.resource == "events" and e.type == "DELETED"]
    assert gone and c.store.count("events") == 0
    assert not c._event_index  # nothing left to bump


def test_heartbeats_can_be_turned_off() -> None:
    c = SimCluster(seed=1, heartbeat_interval=0)
    install(c, "rollout")
    c.run_until_idle(600)
    assert [t for t, o in history(c, "nodes")] == ["ADDED"] * 3
