"""The real kubectl (1.32) against the demo cluster: what it prints and what it changes, as on a real
cluster. Every test here needs kubectl; where it is missing CI fails (tests/tools.py)."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from demo_cluster import SimServer, run_sim
from demo_cluster.tables import human_duration
from tests.waits import wait_for

NS = "demo"


class Kubectl:
    """kubectl with the demo cluster's kubeconfig and an empty HOME (no cached discovery from elsewhere)."""

    def __init__(self, path: str, kubeconfig: Path, home: Path) -> None:
        self.base = [path, "--kubeconfig", str(kubeconfig)]
        self.env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [*self.base, *args], capture_output=True, text=True, timeout=timeout, env=self.env
        )
        if check:
            assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        return out

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.base, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env
        )


def table(text: str) -> tuple[list[str], list[list[str]]]:
    """kubectl's column output split into the header's column names and each row's cells (columns are
    separated by at least two spaces wherever a cell holds one, e.g. 'MIN AVAILABLE')."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    starts = [m.start() for m in re.finditer(r"(?:(?<=\s\s)|^)\S", lines[0])]
    ends = [*starts[1:], None]

    def cut(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]

    return cut(lines[0]), [cut(ln) for ln in lines[1:]]


@pytest.fixture
def k(tmp_path: Path, kubectl: str) -> Callable[[SimServer], Kubectl]:
    def make(sim: SimServer) -> Kubectl:
        return Kubectl(kubectl, sim.kubeconfig_path, tmp_path)  # type: ignore[attr-defined]

    return make


@pytest.fixture
def stepped(tmp_path: Path) -> Iterator[SimServer]:
    """``mixed`` stepped by hand, 40 virtual seconds in: nodes, a PDB, Deployments, ReplicaSets, a
    StatefulSet, a DaemonSet, events, leases."""
    kc = tmp_path / "kc"
    with run_sim("mixed", seed=5, kubeconfig_path=kc) as sim:
        with sim.cluster.engine.lock:
            sim.cluster.advance(40)
        sim.kubeconfig_path = kc  # type: ignore[attr-defined]
        yield sim


def test_get_prints_the_api_servers_columns_for_every_kind(
    stepped: SimServer, k: Callable[[SimServer], Kubectl]
) -> None:
    """GIVEN the mixed demo cluster WHEN kubectl gets each kind THEN it prints the columns printers.go
    defines (server-side Tables, not NAME/AGE), with cells that match the stored objects."""
    kc, store, now = k(stepped), stepped.cluster.store, stepped.cluster.now
    expected = {
        "pdb": ["NAMESPACE", "NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"],
        "deployments": ["NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "replicasets": ["NAMESPACE", "NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        "statefulsets": ["NAMESPACE", "NAME", "READY", "AGE"],
        "daemonsets": [
            "NAMESPACE",
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE",
        ],
        "events": ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "leases": ["NAMESPACE", "NAME", "HOLDER", "AGE"],
    }
    resource_of = {"pdb": "poddisruptionbudgets"}
    for what, columns in expected.items():
        header, rows = table(kc.run("get", what, "-A").stdout)
        assert header == columns, what
        assert rows, what
        resource = resource_of.get(what, what)
        if resource == "events":
            continue
        for cells in rows:
            obj = store.get(resource, cells[0], cells[1])
            assert obj is not None, cells
            assert cells[-1] == human_duration(
                (now - _time(obj["metadata"]["creationTimestamp"])).total_seconds()
            )
            st = obj.get("status") or {}
            if resource == "poddisruptionbudgets":
                assert cells[2:5] == [
                    str(obj["spec"].get("minAvailable", "N/A")),
                    str(obj["spec"].get("maxUnavailable", "N/A")),
                    str(st["disruptionsAllowed"]),
                ]
            elif resource == "deployments":
                assert cells[2:5] == [
                    f"{st.get('readyReplicas', 0)}/{obj['spec']['replicas']}",
                    str(st.get("updatedReplicas", 0)),
                    str(st.get("availableReplicas", 0)),
                ]
            elif resource == "replicasets":
                assert cells[2:5] == [
                    str(obj["spec"]["replicas"]),
                    str(st.get("replicas", 0)),
                    str(st.get("readyReplicas", 0)),
                ]
            elif resource == "statefulsets":
                assert cells[2] == f"{st.get('readyReplicas', 0)}/{obj['spec']['replicas']}"
            elif resource == "daemonsets":
                assert cells[2:8] == [
                    *(
                        str(st.get(f, 0))
                        for f in (
                            "desiredNumberScheduled",
                            "currentNumberScheduled",
                            "numberReady",
                            "updatedNumberScheduled",
                            "numberAvailable",
                        )
                    ),
                    "podlife.dev/pool=apps",
                ]
            elif resource == "leases":
                assert cells[2] == cells[1] == obj["spec"]["holderIdentity"]
    header, rows = table(kc.run("get", "events", "-n", NS, "-o", "wide").stdout)
    assert header == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]
    by_name = {r[-1]: r for r in rows}
    ev = next(e for e in store.iter_objects("events", NS) if e["reason"] == "SuccessfulCreate")
    row = by_name[ev["metadata"]["name"]]
    assert row[1:4] == [
        "Normal",
        "SuccessfulCreate",
        f"{ev['involvedObject']['kind'].lower()}/{ev['involvedObject']['name']}",
    ]
    assert row[5] == ev["source"]["component"] and row[6] == ev["message"] and row[8] == str(ev["count"])

    header, rows = table(kc.run("get", "nodes", "-o", "wide").stdout)
    assert header == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    for cells in rows:
        node = store.get("nodes", "", cells[0])
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
        status = "Ready" if ready else "NotReady"
        if node["spec"].get("unschedulable"):
            status += ",SchedulingDisabled"
        internal = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
        assert cells[1:3] == [status, "<none>"] and cells[4:7] == ["v1.31.4", internal, "<none>"]
    assert len({r[5] for r in rows}) == len(rows)  # every node its own address

    # One object by name is a one-row Table too.
    node = rows[0][0]
    header, one = table(kc.run("get", "node", node).stdout)
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and one[0][0] == node


def _time(value: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_cordon_uncordon_label_annotate_and_patch(
    stepped: SimServer, k: Callable[[SimServer], Kubectl]
) -> None:
    """GIVEN a node and a Deployment WHEN kubectl cordons, labels, annotates and patches them (strategic
    merge, merge and JSON patch) THEN the objects change as on a real cluster: the taint and the kubelet's
    event follow a cordon, an uncordon takes both back, labels come and go, a spec patch bumps the
    generation and its controller acts on it; bad patches are refused with the API server's message."""
    kc, c = k(stepped), stepped.cluster
    node = "rollout-node-2"

    assert kc.run("cordon", node).stdout.strip() == f"node/{node} cordoned"
    patches = stepped.requests_matching("PATCH", f"/api/v1/nodes/{node}")
    assert patches and patches[-1][4].startswith("application/strategic-merge-patch+json")
    stored = c.store.get("nodes", "", node)
    assert stored["spec"]["unschedulable"] is True and "taints" not in stored["spec"]
    with c.engine.lock:
        c.advance(1)
    stored = c.store.get("nodes", "", node)
    assert [t["key"] for t in stored["spec"]["taints"]] == ["node.kubernetes.io/unschedulable"]
    assert any(
        e["reason"] == "NodeNotSchedulable" and e["involvedObject"]["name"] == node
        for e in c.store.iter_objects("events", "default")
    )
    _, rows = table(kc.run("get", "node", node).stdout)
    assert rows[0][1] == "Ready,SchedulingDisabled"
    assert kc.run("cordon", node).stdout.strip() == f"node/{node} already cordoned"

    assert kc.run("uncordon", node).stdout.strip() == f"node/{node} uncordoned"
    with c.engine.lock:
        c.advance(1)
    stored = c.store.get("nodes", "", node)
    assert "unschedulable" not in stored["spec"] and "taints" not in stored["spec"]

    kc.run("label", "node", node, "team=sre")
    assert c.store.get("nodes", "", node)["metadata"]["labels"]["team"] == "sre"
    assert kc.run("label", "node", node, "team=platform", check=False).returncode != 0  # needs --overwrite
    kc.run("label", "node", node, "team=platform", "--overwrite")
    assert c.store.get("nodes", "", node)["metadata"]["labels"]["team"] == "platform"
    kc.run("label", "node", node, "team-")
    assert "team" not in c.store.get("nodes", "", node)["metadata"]["labels"]
    assert stepped.requests_matching("PATCH", f"/api/v1/nodes/{node}")[-1][4].startswith(
        "application/merge-patch+json"
    )

    pod = sorted(c.store.keys("pods", NS))[0][1]
    kc.run("annotate", "pod", pod, "-n", NS, "podlife.dev/note=checked")
    assert c.store.get("pods", NS, pod)["metadata"]["annotations"]["podlife.dev/note"] == "checked"
    kc.run("annotate", "pod", pod, "-n", NS, "podlife.dev/note-")
    assert "podlife.dev/note" not in (c.store.get("pods", NS, pod)["metadata"].get("annotations") or {})

    dep = next(d for d in c.store.iter_objects("deployments", NS))
    name, gen = dep["metadata"]["name"], dep["metadata"]["generation"]
    kc.run(
        "patch",
        "deployment",
        name,
        "-n",
        NS,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":4}]',
    )
    after = c.store.get("deployments", NS, name)
    assert after["spec"]["replicas"] == 4 and after["metadata"]["generation"] == gen + 1
    with c.engine.lock:
        c.advance(20)
    assert c.store.get("deployments", NS, name)["status"]["readyReplicas"] == 4
    container = after["spec"]["template"]["spec"]["containers"][0]["name"]
    kc.run(
        "patch",
        "deployment",
        name,
        "-n",
        NS,
        "-p",
        json.dumps(
            {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "busybox:1.37"}]}}}}
        ),
    )
    merged = [
        x["name"] for x in c.store.get("deployments", NS, name)["spec"]["template"]["spec"]["containers"]
    ]
    assert merged == [container, "sidecar"]  # strategic merge: containers merge by name
    kc.run(
        "patch",
        "deployment",
        name,
        "-n",
        NS,
        "--type=merge",
        "-p",
        json.dumps(
            {"spec": {"template": {"spec": {"containers": [{"name": container, "image": "nginx:1.27.4"}]}}}}
        ),
    )
    replaced = c.store.get("deployments", NS, name)["spec"]["template"]["spec"]["containers"]
    assert [(x["name"], x["image"]) for x in replaced] == [
        (container, "nginx:1.27.4")
    ]  # merge patch: the list replaced

    bad = kc.run(
        "patch", "node", node, "--type=merge", "-p", '{"metadata":{"labels":{"bad":"no way"}}}', check=False
    )
    assert bad.returncode != 0
    assert f'The Node "{node}" is invalid: metadata.labels: Invalid value: "no way"' in bad.stderr
    stale = kc.run(
        "patch",
        "node",
        node,
        "--type=merge",
        "-p",
        '{"metadata":{"resourceVersion":"1","labels":{"a":"b"}}}',
        check=False,
    )
    assert "Error from server (Conflict)" in stale.stderr and "the object has been modified" in stale.stderr
    forbidden = kc.run(
        "patch", "pod", pod, "-n", NS, "--type=merge", "-p", '{"spec":{"nodeName":"elsewhere"}}', check=False
    )
    assert forbidden.returncode != 0 and "pod updates may not change fields other than" in forbidden.stderr
    broken = kc.run(
        "patch",
        "node",
        node,
        "--type=json",
        "-p",
        '[{"op":"test","path":"/metadata/name","value":"other"}]',
        check=False,
    )
    assert broken.returncode != 0 and "the JSON patch could not be applied" in broken.stderr


def test_drain_cordons_then_is_held_by_the_pdb_until_it_allows(tmp_path: Path, kubectl: str) -> None:
    """GIVEN Deployment api (2 pods on two nodes) guarded by a PDB minAvailable 2 WHEN kubectl drains one
    node THEN it cordons first, every eviction is refused with 429 and the API server's message while the
    budget is 0 (kubectl retries every 5 s), and once the owner is scaled to 3 and the replacement is ready
    on another node the retried eviction is allowed, the pod terminates and the drain completes."""
    kc_path = tmp_path / "kc"
    with run_sim(None, seed=9, kubeconfig_path=kc_path, realtime=True, speed=4) as sim:
        c = sim.cluster
        with c.engine.lock:
            for i in (1, 2, 3):
                c.add_node(f"drain-node-{i}", {"podlife.dev/pool": "drain"})
            c.create_deployment(
                NS,
                "api",
                2,
                "ghcr.io/podlife/api:2.4.1",
                {"app": "api"},
                node_selector={"podlife.dev/pool": "drain"},
            )
            c.create_pdb(NS, "api-pdb", {"matchLabels": {"app": "api"}}, min_available=2)
        wait_for(
            lambda: c.store.get("poddisruptionbudgets", NS, "api-pdb")["status"].get("currentHealthy") == 2,
            "api-pdb's two healthy pods",
            30,
            interval=0.1,
        )
        pdb = c.store.get("poddisruptionbudgets", NS, "api-pdb")
        assert pdb["status"]["currentHealthy"] == 2 and pdb["status"]["disruptionsAllowed"] == 0
        victim = next(
            p for p in c.store.iter_objects("pods", NS) if p["metadata"]["labels"].get("app") == "api"
        )
        node = victim["spec"]["nodeName"]
        kc = Kubectl(kubectl, kc_path, tmp_path)
        out: list[str] = []
        proc = kc.popen("drain", node, "--ignore-daemonsets", "--timeout=120s")
        reader = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, "")), daemon=True)
        reader.start()
        refused = f'error when evicting pods/"{victim["metadata"]["name"]}" -n "{NS}" (will retry after 5s): Cannot evict pod as it would violate the pod\'s disruption budget.'
        wait_for(lambda: any(refused in line for line in out), f"{refused!r} in {out}", 30, interval=0.1)
        assert c.store.get("nodes", "", node)["spec"]["unschedulable"] is True
        assert (
            c.store.get("pods", NS, victim["metadata"]["name"])["metadata"]["uid"]
            == victim["metadata"]["uid"]
        )

        kc.run("scale", "deployment", "api", "-n", NS, "--replicas=3")
        assert proc.wait(timeout=90) == 0, out
        reader.join(timeout=5)
        text = "".join(out)
        assert f"node/{node} cordoned" in text and f"pod/{victim['metadata']['name']} evicted" in text
        assert f"node/{node} drained" in text

        cordon = sim.requests_matching("PATCH", f"/api/v1/nodes/{node}")
        evictions = sim.requests_matching("POST", "/eviction")
        assert cordon and evictions and cordon[0][0] < evictions[0][0]  # cordoned before the first eviction
        codes = [r[3] for r in evictions]
        assert codes[0] == 429 and codes[-1] == 201 and set(codes) == {429, 201}
        assert len([x for x in codes if x == 429]) >= 1
        outcomes = [r["outcome"] for r in c.eviction_log]
        assert outcomes[-1] == "Allowed" and "Blocked" in outcomes
        assert c.store.get("pods", NS, victim["metadata"]["name"]) is None
        on_node = [p for p in c.store.iter_objects("pods", NS) if p["spec"].get("nodeName") == node]
        assert on_node == []
        ready_elsewhere = [p for p in c.store.iter_objects("pods", NS) if p["spec"].get("nodeName") != node]
        assert len(ready_elsewhere) == 3


def test_logs_of_demo_containers(tmp_path: Path, kubectl: str) -> None:
    """GIVEN a running demo pod WHEN kubectl logs it (plain, --timestamps, --tail, a wrong container, -f
    across its deletion) THEN it prints the container's log, the API server's errors, and a follow ends
    with the container's shutdown lines when the pod goes."""
    kc_path = tmp_path / "kc"
    with run_sim(None, seed=2, kubeconfig_path=kc_path, realtime=True, speed=10) as sim:
        c = sim.cluster
        with c.engine.lock:
            c.add_node("log-node-1")
            c.new_pod(NS, "talker", node="log-node-1", image="ghcr.io/podlife/talker:1.0")
        wait_for(
            lambda: (c.store.get("pods", NS, "talker") or {}).get("status", {}).get("phase") == "Running",
            "the talker running",
        )
        kc = Kubectl(kubectl, kc_path, tmp_path)
        # The container logs a health line a while after it starts (a condition, not a clock: a busy
        # machine runs the demo's virtual time slower).
        lines = wait_for(
            lambda: (out := kc.run("logs", "-n", NS, "talker").stdout.splitlines())[3:] and out,
            "a health line in the talker's log",
            interval=0.5,
        )
        assert lines[:3] == [
            f"starting ghcr.io/podlife/talker:1.0 (container app of pod {NS}/talker)",
            "listening on :8080",
            "ready: serving requests",
        ]
        assert lines[3] == "health check ok (1)"
        stamped = kc.run("logs", "-n", NS, "talker", "--timestamps", "--tail=1").stdout.splitlines()
        assert len(stamped) == 1 and re.match(
            r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z health check ok \(\d+\)$", stamped[0]
        )
        wrong = kc.run("logs", "-n", NS, "talker", "-c", "nope", check=False)
        assert wrong.returncode != 0 and "container nope is not valid for pod talker" in wrong.stderr

        follow = kc.popen("logs", "-n", NS, "talker", "-f", "--tail=0")
        # the follow request is open before the pod is deleted
        wait_for(
            lambda: [r for r in sim.requests_matching("GET", "/log?") if "follow=true" in r[2]],
            "the follow request",
            20,
            interval=0.05,
        )
        kc.run("delete", "pod", "talker", "-n", NS, "--wait=false")
        tail, _ = follow.communicate(timeout=30)
        assert follow.returncode == 0
        assert tail.splitlines()[-2:] == ["received SIGTERM: shutting down gracefully", "exiting with code 0"]


def test_node_leases_are_renewed_while_the_kubelet_runs(
    stepped: SimServer, k: Callable[[SimServer], Kubectl]
) -> None:
    """GIVEN the demo nodes WHEN time passes THEN each has a coordination.k8s.io/v1 Lease in
    kube-node-lease held by the node and owned by its Node, renewed every 10 s; a node whose kubelet shut
    down stops renewing."""
    c = stepped.cluster
    out = json.loads(k(stepped).run("get", "leases", "-n", "kube-node-lease", "-o", "json").stdout)
    leases = {i["metadata"]["name"]: i for i in out["items"]}
    assert set(leases) == set(c.kubelets)
    for name, lease in leases.items():
        node = c.store.get("nodes", "", name)
        assert lease["apiVersion"] == "coordination.k8s.io/v1" and lease["kind"] == "Lease"
        assert lease["spec"]["holderIdentity"] == name and lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
        ]
    before = {n: lease["spec"]["renewTime"] for n, lease in leases.items()}
    with c.engine.lock:
        c.advance(10.5)
    after = {n: c.store.get("leases", "kube-node-lease", n)["spec"]["renewTime"] for n in before}
    running = {n for n, kubelet in c.kubelets.items() if kubelet.running}
    assert {n for n in before if after[n] > before[n]} == running
    assert running != set(before)  # mixed shuts a node down by now: its lease has stopped
