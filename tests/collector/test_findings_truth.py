"""Findings measured against what really happened (issue #34): precision and recall per finding kind.

A finding is an alert someone may be paged for. GIVEN the demo cluster, which records what it really did
(``SimCluster.truth()``: evictions granted and refused by a PodDisruptionBudget, deletes and whether the
kubelet had started the pod, removals, node shutdowns, static pods put back, PDBs over bare pods; never
read from podlife's output) WHEN the collector watches it through every scenario at once, and again
while the real ``kubectl drain`` runs against it (one drain the budget allows at once, one it holds)
THEN every finding the derive stage writes is compared with what the truth says a person must be told:

* ``pdb_blocking_drain``: a pod an eviction of which a PDB refused (429) — the drain was held on it;
  never a pod whose own eviction was granted at once (its budget then reads 0 *because of it*), and
  never after its eviction was granted;
* ``killed_during_setup``: a pod deleted (or evicted) while the kubelet had not started its containers;
* ``stuck_terminating``: a pod whose object outlived its deletion by more than its grace period plus
  the configured slack (removed late, or still there when the story ends);
* ``grace_exceeded``: a pod whose containers died later than its grace period (plus the configured
  slack) after their termination began;
* ``node_shutdown``: a pod on a node when it was shut down;
* ``uid_reuse``: a static pod put back under the same UID while its old incarnation still terminated;
* ``pdb_unmanaged_pods``: a PDB using maxUnavailable (or a percentage) over pods with no controller.

A finding on a pod the truth does not name, a second one of one kind on one pod, or a
``pdb_blocking_drain`` that starts after the pod's eviction was granted counts against precision; a
named pod without its finding counts against recall. Both must be at least 0.99 for every kind that
the truth or the findings contain; a kind found that this test cannot judge fails it (add its truth).
``pytest -s`` prints the table.
"""

from __future__ import annotations

import io
import subprocess
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command

from collectors.kube.resources import ALL_RESOURCES
from collectors.kube.runner import Collector
from demo_cluster.truth import TruthEntry
from tests.tools import require_tool
from tests.waits import wait_for
from timelines import derivation
from timelines.lifecycle.findings import Thresholds
from timelines.models import Finding

from .conftest import CLUSTER, FAST, catch_up, on_virtual_time

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MIN_SCORE = 0.99
JUDGED = (
    "grace_exceeded",
    "pdb_blocking_drain",
    "killed_during_setup",
    "stuck_terminating",
    "node_shutdown",
    "uid_reuse",
    "pdb_unmanaged_pods",
)


@dataclass
class Score:
    expected: set[str] = field(default_factory=set)
    found: list[str] = field(default_factory=list)  # subjects, one per finding row
    wrong: list[str] = field(default_factory=list)  # why each false positive is false

    @property
    def true_positives(self) -> int:
        return len(self.found) - len(self.wrong)

    @property
    def precision(self) -> float:
        return self.true_positives / len(self.found) if self.found else 1.0

    @property
    def recall(self) -> float:
        return len(self.expected & set(self.found)) / len(self.expected) if self.expected else 1.0


def expected_findings(
    truth: Iterable[TruthEntry], end: datetime, thresholds: Thresholds
) -> dict[str, set[str]]:
    """What the truth says a person must be told, by kind: the subjects (``namespace/name``)."""
    out: dict[str, set[str]] = defaultdict(set)
    removed: dict[str, TruthEntry] = {}
    deletes: list[TruthEntry] = []
    for e in truth:
        ref = f"{e.namespace}/{e.name}"
        if e.action == "eviction" and e.outcome == "refused" and e.detail.get("pdb"):
            out["pdb_blocking_drain"].add(ref)
        elif e.action == "delete":
            deletes.append(e)
            if e.detail["known_to_kubelet"] and not e.detail["started"]:
                out["killed_during_setup"].add(ref)
        elif e.action == "removed":
            removed[e.uid or ref] = e
        elif e.action == "node_shutdown":
            out["node_shutdown"] |= set(e.detail["pods"])
        elif e.action == "containers_stopped":
            took = e.at - e.detail["requested"]
            if took > timedelta(seconds=e.detail["grace"]) + thresholds.grace_exceeded_slack:
                out["grace_exceeded"].add(ref)
        elif e.action == "static_pod_added" and e.detail["old_still_terminating"]:
            out["uid_reuse"].add(ref)
        elif e.action == "pdb_created" and e.detail["unmanaged"] and e.detail["uses_scale"]:
            out["pdb_unmanaged_pods"].add(ref)
    for d in deletes:
        gone = removed.get(d.uid or f"{d.namespace}/{d.name}")
        lasted = (gone.at if gone is not None else end) - d.detail["requested"]
        if lasted > timedelta(seconds=d.detail["grace"]) + thresholds.stuck_terminating_slack:
            out["stuck_terminating"].add(f"{d.namespace}/{d.name}")
    return out


def granted_at(truth: Iterable[TruthEntry]) -> dict[str, datetime]:
    """When each pod's eviction was first granted (``namespace/name``)."""
    out: dict[str, datetime] = {}
    for e in truth:
        if e.action == "eviction" and e.outcome == "granted":
            out.setdefault(f"{e.namespace}/{e.name}", e.at)
    return out


def score(truth: list[TruthEntry], end: datetime) -> dict[str, Score]:
    expected = expected_findings(truth, end, Thresholds())
    granted = granted_at(truth)
    scores: dict[str, Score] = defaultdict(Score)
    for kind, subjects in expected.items():
        scores[kind].expected |= subjects
    seen: set[tuple[str, str]] = set()
    for f in Finding.objects.filter(cluster__name=CLUSTER).order_by("start", "id"):
        subject = str(f.attrs.get("pod")) if f.kind == "pdb_blocking_drain" else f.subject_name
        s = scores[f.kind]
        s.found.append(subject)
        if (f.kind, subject) in seen:
            s.wrong.append(f"{subject}: a second {f.kind}")
        elif subject not in s.expected:
            s.wrong.append(f"{subject}: the truth names no {f.kind} here ({f.message})")
        elif f.kind == "pdb_blocking_drain" and subject in granted and f.start >= granted[subject]:
            s.wrong.append(
                f"{subject}: begins at {f.start}, after its eviction was granted at {granted[subject]}"
            )
        seen.add((f.kind, subject))
    return scores


def report(title: str, scores: dict[str, Score]) -> str:
    lines = [title, f"{'kind':<22} {'expected':>8} {'found':>6} {'TP':>4} {'precision':>9} {'recall':>7}"]
    for kind in sorted(scores):
        s = scores[kind]
        lines.append(
            f"{kind:<22} {len(s.expected):>8} {len(s.found):>6} {s.true_positives:>4} "
            f"{s.precision:>9.3f} {s.recall:>7.3f}"
        )
    for kind in sorted(scores):
        s = scores[kind]
        lines += [f"  {kind} false: {why}" for why in s.wrong]
        lines += [f"  {kind} missed: {ref}" for ref in sorted(s.expected - set(s.found))]
    return "\n".join(lines)


def check(title: str, scores: dict[str, Score]) -> None:
    print("\n" + report(title, scores))
    unjudged = sorted(set(scores) - set(JUDGED))
    assert not unjudged, f"findings of kinds the truth does not judge: {unjudged}"
    for kind, s in scores.items():
        missing = sorted(s.expected - set(s.found))
        assert s.precision >= MIN_SCORE, f"{kind}: precision {s.precision:.3f}: {s.wrong}"
        assert s.recall >= MIN_SCORE, f"{kind}: recall {s.recall:.3f}, missing {missing}"


def test_every_scenarios_findings_against_the_truth(make_sim, monkeypatch, derive_worker, tmp_path):
    """GIVEN every scenario at once WHEN the collector watches ~3 virtual minutes (each scenario runs
    at least once) THEN each finding kind's precision and recall against the cluster's truth ≥ 0.99."""
    log = tmp_path / "audit.log"
    sim = make_sim("mixed", advance=0, audit_log_path=log)
    engine = sim.server.cluster.engine
    on_virtual_time(monkeypatch, engine)
    for resource in ALL_RESOURCES:  # the first lists, before anything happens: every pod from its start
        assert sim.step(resource).ok
    collector = Collector([CLUSTER], tunables=FAST).start()
    try:
        sim.advance_watched(200)
    finally:
        collector.stop()
    catch_up(sim)
    derive_worker.stop()
    # The API server's audit log beside the watch: the refused evictions (a watch sees none of them)
    call_command("ingest_audit_log", "--cluster", CLUSTER, str(log), stdout=io.StringIO())
    derivation.drain()
    truth = sim.server.cluster.truth()
    assert {e.action for e in truth} >= {"eviction", "delete", "removed", "node_shutdown", "pdb_created"}
    check("every scenario (mixed, 200 virtual seconds)", score(truth, engine.now))


NS = "demo"


def _drain(kubectl: str, kubeconfig: Path, home: Path, node: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [kubectl, "--kubeconfig", str(kubeconfig), "drain", node, "--ignore-daemonsets", "--timeout=120s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )


def test_scripted_kubectl_drains_against_the_truth(make_sim, monkeypatch, derive_worker, tmp_path):
    """GIVEN Deployment ok (3 pods, PDB minAvailable 2: one disruption allowed) and Deployment held (2 pods,
    PDB minAvailable 2: none allowed), each on its own nodes
    WHEN the real kubectl drains a node of ok (its eviction is granted at once: the budget reads 0
    because of it), then a node of held (evictions refused until the owner is scaled to 3)
    THEN no pdb_blocking_drain on ok's evicted pod, exactly one on held's, and every finding kind's
    precision and recall against the truth ≥ 0.99."""
    kubectl = require_tool("kubectl")
    sim = make_sim(None, advance=0, realtime=True, speed=4)
    c = sim.server.cluster
    engine = c.engine
    on_virtual_time(monkeypatch, engine)
    with engine.lock:
        for pool in ("ok", "held"):
            for i in (1, 2, 3):
                c.add_node(f"{pool}-node-{i}", {"podlife.dev/pool": pool})
            c.create_deployment(
                NS,
                pool,
                3 if pool == "ok" else 2,
                "ghcr.io/podlife/api:2.4.1",
                {"app": pool},
                node_selector={"podlife.dev/pool": pool},
            )
            c.create_pdb(NS, f"{pool}-pdb", {"matchLabels": {"app": pool}}, min_available=2)
    collector = Collector([CLUSTER], tunables=FAST).start()
    try:

        def healthy(pool: str, want: int) -> bool:
            pdb = c.store.get("poddisruptionbudgets", NS, f"{pool}-pdb")
            return bool(pdb and pdb["status"].get("currentHealthy") == want)

        wait_for(lambda: healthy("ok", 3) and healthy("held", 2), "both PDBs healthy in the cluster", 60)
        # the watch has it too
        wait_for(lambda: _stored_pdbs_healthy({"ok-pdb": 3, "held-pdb": 2}), "both PDBs healthy as stored")
        for pool in ("ok", "held"):
            victim = next(
                p for p in c.store.iter_objects("pods", NS) if p["metadata"]["labels"].get("app") == pool
            )
            node = victim["spec"]["nodeName"]
            proc = _drain(kubectl, sim.kubeconfig, tmp_path, node)
            if pool == "held":
                wait_for(
                    lambda: any(e.outcome == "refused" for e in c.truth() if e.action == "eviction"),
                    "an eviction refused",
                )
                with engine.lock:
                    c.update_deployment(NS, pool, lambda d: d["spec"].__setitem__("replicas", 3))
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0, out
            assert f"node/{node} drained" in out
    finally:
        collector.stop()
    catch_up(sim)
    derive_worker.stop()
    derivation.drain()
    truth = c.truth()
    evictions = [e for e in truth if e.action == "eviction"]
    assert {e.outcome for e in evictions if e.namespace == NS} == {"granted", "refused"}
    blocking = Finding.objects.filter(cluster__name=CLUSTER, kind="pdb_blocking_drain")
    by_pod = defaultdict(list)
    for f in blocking:
        by_pod[f.attrs["pod"]].append(f)
    refused = {f"{e.namespace}/{e.name}" for e in evictions if e.outcome == "refused"}
    # ok's pods whose eviction was granted at once (were two on the node, the second waits its turn)
    ok_evicted = {
        f"{e.namespace}/{e.name}" for e in evictions if e.name.startswith("ok-") and e.outcome == "granted"
    } - refused
    held_refused = {p for p in refused if p.startswith(f"{NS}/held-")}
    assert ok_evicted, evictions
    assert not ok_evicted & set(by_pod), "a drain the budget allowed raised pdb_blocking_drain"
    assert held_refused and all(len(by_pod[p]) == 1 for p in held_refused), by_pod
    check("scripted kubectl drains (one allowed at once, one held by its PDB)", score(truth, engine.now))


def _stored_pdbs_healthy(want: dict[str, int]) -> bool:
    """Whether the collector stored each PDB with its wanted currentHealthy."""
    from tests.stored import rows_of
    from timelines.lifecycle.observation import Kind

    seen = {
        o.name: (o.payload.get("status") or {}).get("current_healthy")
        for o in rows_of(CLUSTER, kinds=[Kind.PDB], order=("observed_at",))
    }
    return all(seen.get(name) == n for name, n in want.items())
