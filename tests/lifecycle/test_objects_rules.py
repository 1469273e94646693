"""Rules of the node, PDB and audit read-back derivations (issue #38, survivors of sample fresh-1207y):
who began a drain when two cordons share an instant, the kubelet version a process's start line names, a
PDB's selector as the collector stores it, when a budget's unmanaged-pods finding begins, and which
audited ``pods/status`` writes show a status.

Inputs: tests/fixtures/audit (hand-written from the audit API's specification, README there),
tests/fixtures/real/audit (real apiserver events, README there), the Kubernetes documentation's PDB
example, and observations in the parsers' shapes (tests/lifecycle/factories.py). Hand-made data is
labelled SYNTHETIC where it is built."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from collectors.parsers.audit import parse_audit
from collectors.parsers.k8s_objects import normalize_pdb, pod_observation
from collectors.parsers.kubectl import reset_restart
from collectors.parsers.kubelet_log import KubeletLogParser
from tests.audit.helpers import parsed
from tests.lifecycle.factories import T0, node, pdb
from tests.lifecycle.factories import t as at
from tests.lifecycle.test_audit_evidence import audits_of, eviction
from timelines.lifecycle.audit_evidence import AuditRecord, audit_snapshots, read_audit
from timelines.lifecycle.cluster_objects import (
    CoveredPod,
    derive_node_timeline,
    derive_pdb_timeline,
    selector_matches,
    selector_text,
)
from timelines.lifecycle.observation import Kind, Observation, Source

REAL_AUDIT = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "audit"
EKS = REAL_AUDIT / "eks-2021-kubelet-status-patch-oomkilled.jsonl"
EKS_UID = "10177585-b79f-44a0-bdcc-c68ec12d012a"
KUBEADM_METADATA = REAL_AUDIT / "kubeadm-2022-mirror-pod-status-patch-metadata.jsonl"


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def _records(raw: bytes) -> list[AuditRecord]:
    return [r for o in parse_audit(raw).observations if (r := read_audit(o)) is not None]


# ------------------------------------------------------------------------------------------ node:drain


def _cordon_audits() -> list[Observation]:
    return [o for o in parsed("cordon.jsonl").observations if o.kind == Kind.AUDIT and o.node == "worker-2"]


def test_two_cordons_stamped_in_the_same_microsecond_make_one_drain_whatever_their_order() -> None:
    """GIVEN cordon.jsonl's kubectl cordon of worker-2 (02:00:00.010005) and maint-bot's uncordon (02:20),
    and (SYNTHETIC) a second cordon of worker-2 by ``ops-bot`` that the API server stamped in the very same
    microsecond (two clients cordoning one node at once: both patches succeed, the second changes nothing)
    THEN the drain lane has one ``cordoned`` span from that instant to the uncordon, citing both cordons,
    and it is the same whatever order the observations come in (derivations are order-free: requests of
    one instant are taken in their keys' order, never compared by their contents)."""
    audits = _cordon_audits()
    first = audits[0]
    assert first.payload["node_change"]["unschedulable"] is True
    twin = replace(
        first,
        dedupe_key=first.dedupe_key + ":ops-bot",
        payload={
            **first.payload,
            "user": {**first.payload["user"], "username": "ops-bot"},
            "user_agent": None,
        },
    )
    upto = [o for o in audits if o.observed_at <= utc(2024, 6, 8, 2, 20, 1)]
    forward = derive_node_timeline([*upto, twin])
    backward = derive_node_timeline([twin, *reversed(upto)])
    (drain,) = forward.lanes["node:drain"]
    assert (drain.start, drain.end) == (first.observed_at, utc(2024, 6, 8, 2, 20, 0, 129461))
    uncordon = next(o for o in audits if o.payload["user"]["username"] == "maint-bot")
    assert {first.dedupe_key, twin.dedupe_key, uncordon.dedupe_key} <= set(drain.evidence)
    assert drain.attrs["uncordoned_by"] == "maint-bot via Go-http-client"
    assert backward.lanes["node:drain"] == forward.lanes["node:drain"]


# ---------------------------------------------------------------------------------------- node:kubelet

# SYNTHETIC JSON records in the shapes of the real 1.21 JSON log (k8s-100409-1.21-json-logging-flags.json):
# a FLAG line at V1 in minute 07:32, the "Kubelet version" start line in 07:33, one more line in 07:34.
JSON_KUBELET_1_21 = (
    '{"ts":1616398379656.7524,"msg":"FLAG: --eviction-soft=\\"\\"\\n","v":1}',
    '{"ts":1616398380100.5,"caller":"app/server.go:440","msg":"Kubelet version","v":0,'
    '"kubeletVersion":"v1.21.0"}',
    '{"ts":1616398440361.2,"caller":"app/server.go:868",'
    '"msg":"Client rotation is on, will bootstrap in background","v":0}',
)


def test_a_kubelet_bar_keeps_the_version_its_start_line_named_in_a_later_minute() -> None:
    """GIVEN a kubelet logging JSON records (no pid: one ``pid: null`` process, docs/observations.md) that
    prints its ``FLAG:`` lines at V1 and then its ``Kubelet version`` start line, as the real 1.21 JSON log
    tests/fixtures/real/kubelet/k8s-100409-1.21-json-logging-flags.json and the real 1.22 start line of
    k8s-112364-1.22-kubelet-restarts.journal do (SYNTHETIC records in those shapes: the flags in minute
    07:32, the start line in 07:33, one more line in 07:34)
    THEN its bar names the version the start line gave (v1.21.0): a minute whose lines name no version
    (before the start line, or after it) says nothing about the version, it does not erase it."""
    records = list(JSON_KUBELET_1_21)
    parser = KubeletLogParser(node="node-a", year=2021, tz=UTC)
    for line in records:
        parser.feed(line)
    parser.close()
    processes = parser.processes()
    assert [o.payload["version"] for o in sorted(processes, key=lambda o: o.observed_at)] == [
        None,
        "v1.21.0",
        None,
    ]
    (bar,) = derive_node_timeline(processes).lanes["node:kubelet"]
    assert (bar.attrs["version"], bar.attrs["start_from"]) == ("v1.21.0", "start_line")


# ------------------------------------------------------------------------------------------ PDB selector

# The Kubernetes documentation's example budget ("Specifying a Disruption Budget for your Application",
# zookeeper): minAvailable 2, selector app: zookeeper; the expressions are metav1.LabelSelector's.
ZK_PDB: dict[str, Any] = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "zk-pdb", "namespace": "default", "uid": "zk-pdb-uid", "resourceVersion": "1"},
    "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "zookeeper"}}},
}


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ({"matchLabels": {"app": "zookeeper"}}, "app=zookeeper"),
        (
            {
                "matchLabels": {"app": "zookeeper"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["canary"]}],
            },
            "app=zookeeper,tier notin (canary)",
        ),
    ],
)
def test_a_stored_budgets_selector_reads_as_kubectl_writes_it(selector: dict[str, Any], text: str) -> None:
    """GIVEN the documentation's zk-pdb as the collector stores it (``normalize_pdb``: the selector's
    ``matchLabels`` / ``matchExpressions`` kept as ``match_labels`` / ``match_expressions``)
    THEN the page's text of its selector is kubectl's (``labels.Selector.String()``), and it selects the
    zookeeper pods: the stored spelling is read, not only the API's."""
    stored = normalize_pdb({**ZK_PDB, "spec": {**ZK_PDB["spec"], "selector": selector}})["selector"]
    assert "matchLabels" not in stored and stored["match_labels"] == {"app": "zookeeper"}
    assert selector_text(stored) == text
    assert selector_matches(stored, {"app": "zookeeper", "tier": "stable"}) is True
    assert selector_matches(stored, {"app": "web"}) is False


# ------------------------------------------------------------------------------ PDB unmanaged pods


def _bare_pod(created: float) -> CoveredPod:
    # SYNTHETIC: a pod made by hand (``kubectl run``: no ownerReference) that the budget selects.
    return CoveredPod(
        "bare-1", "shop", "web-bare", "node-a", {"app": "web"}, has_controller=False, created_at=at(created)
    )


def _unmanaged_event(seen: float) -> Observation:
    # SYNTHETIC: the disruption controller's Warning about the budget, in the event parser's shape; the
    # message format is k8s-facts.md's (events table, UnmanagedPods).
    return Observation(
        kind=Kind.EVENT,
        source=Source.API,
        observed_at=at(seen),
        dedupe_key=f"event:unmanaged:{seen}",
        namespace="shop",
        name="web-pdb",
        payload={
            "reason": "UnmanagedPods",
            "type": "Warning",
            "message": "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{...}) were found "
            "to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may "
            'result in undefined behavior. To account for these pods please set ".spec.minAvailable" field '
            "of the PDB to an integer value.",
        },
    )


def test_an_unmanaged_pods_finding_begins_no_earlier_than_the_budget_with_the_controllers_event() -> None:
    """GIVEN a hand-made pod (no controller) created at T0+10, budget web-pdb (maxUnavailable 1: the
    disruption controller looks for the pods' controllers, k8s-facts §7) created at T0+100 and selecting
    it, and the controller's UnmanagedPods event at T0+105
    THEN pdb_unmanaged_pods begins when the budget was created (T0+100): a budget cannot select a pod
    before it exists, however old the pod is."""
    budget = pdb(100, 1, created=100, max_unavailable=1)
    timeline = derive_pdb_timeline([budget, _unmanaged_event(105)], pods=[_bare_pod(10)])
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_unmanaged_pods"]
    assert finding.start == at(100)
    assert finding.attrs["pods"] == ["bare-1"]


def test_an_unmanaged_pods_finding_begins_no_earlier_than_the_budget_without_an_event() -> None:
    """GIVEN the same pod and budget and no event yet (the budget's maxUnavailable alone says the
    controller must find the pod's controller, and it has none)
    THEN the finding still begins at the budget's creation (T0+100), not at the pod's (T0+10): before the
    budget existed nothing selected the pod."""
    budget = pdb(100, 1, created=100, max_unavailable=1)
    timeline = derive_pdb_timeline([budget], pods=[_bare_pod(10)])
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_unmanaged_pods"]
    assert finding.start == at(100)
    assert finding.attrs["event"] is None


def test_an_unmanaged_pod_created_under_the_budget_dates_the_finding() -> None:
    """GIVEN budget web-pdb (maxUnavailable 1) created at T0 and a hand-made pod it selects created at
    T0+50 THEN the finding begins at T0+50: the budget met an unmanaged pod only once the pod existed."""
    timeline = derive_pdb_timeline([pdb(60, 1, created=0, max_unavailable=1)], pods=[_bare_pod(50)])
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_unmanaged_pods"]
    assert finding.start == at(50) and at(50) > T0


# --------------------------------------------------------------------------------- audit read-back


def test_a_status_patch_audited_at_metadata_level_shows_no_status() -> None:
    """GIVEN the real kubeadm kubelet's ``pods/status`` patch audited at level Metadata (no request body:
    tests/fixtures/real/audit/kubeadm-2022-mirror-pod-status-patch-metadata.jsonl), answered 200
    THEN it reads back as no snapshot: the event says a write happened, not what it wrote."""
    records = _records(KUBEADM_METADATA.read_bytes())
    assert [(r.subresource, r.verb, r.succeeded) for r in records] == [("status", "patch", True)]
    assert records[0].payload.get("status_write") is None
    assert audit_snapshots("mirror-uid", records) == ()


def test_a_json_patch_of_a_pods_status_shows_no_status() -> None:
    """GIVEN the real EKS kubelet status patch (level Request) with its body replaced (SYNTHETIC) by an
    RFC 6902 JSON patch adding a condition (``[{"op": "add", "path": "/status/conditions/-", ...}]``, as a
    readiness-gate controller sends one)
    THEN it reads back as no snapshot: a JSON patch names positions in a status the log does not hold, so
    it does not say what the status became (docs/audit.md: such a write gives only ``json_patch_paths``)."""
    event = json.loads(EKS.read_bytes().splitlines()[0])
    event["requestObject"] = [
        {
            "op": "add",
            "path": "/status/conditions/-",
            "value": {"type": "example.com/gate", "status": "True"},
        }
    ]
    records = _records(json.dumps(event).encode() + b"\n")
    assert [r.payload["status_write"] for r in records] == [
        {"partial": True, "json_patch_paths": ["/status/conditions/-"]}
    ]
    assert audit_snapshots(EKS_UID, records) == ()
    # the same request with its real merge-patch body does show the status it wrote
    (real,) = audit_snapshots(EKS_UID, _records(EKS.read_bytes()))
    assert real.payload["phase"] == "Failed"


# --------------------------------------------------------------------- beyond the sample: node lanes


def test_a_node_known_only_from_audited_cordons_is_named_by_them() -> None:
    """GIVEN only cordon.jsonl's audited writes to worker-2 (no Node snapshot: nodes are not watched)
    THEN the node's timeline is worker-2's: the requests name the node they changed."""
    assert derive_node_timeline(_cordon_audits()).name == "worker-2"


def test_an_audited_cordon_before_a_snapshot_showing_the_node_schedulable_ends_at_that_snapshot() -> None:
    """GIVEN cordon.jsonl's kubectl cordon of worker-2 (02:00:00.010005) and (SYNTHETIC) a later Node
    snapshot of worker-2 with ``spec.unschedulable`` unset (02:10), given in that order and reversed
    THEN the cordoned lane runs from the audited cordon to the snapshot: cordons from requests and from
    snapshots are one sequence in time, whichever input came first."""
    cordon = _cordon_audits()[0]
    seen = Observation(
        kind=Kind.NODE,
        source=Source.API,
        observed_at=utc(2024, 6, 8, 2, 10, 0),
        dedupe_key="node:worker-2-uid:900",
        node="worker-2",
        name="worker-2",
        payload={"name": "worker-2", "unschedulable": False, "taints": [], "conditions": []},
    )
    for obs in ([seen, cordon], [cordon, seen]):
        (cordoned,) = derive_node_timeline(obs).lanes["node:cordoned"]
        assert (cordoned.start, cordoned.end) == (cordon.observed_at, seen.observed_at)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"succeeded": False, "code": 409}, "refused: the API server stored nothing"),
        ({"dry_run": True}, "a server-side dry run persists nothing"),
        ({"subresource": "status"}, "nodes/status carries the kubelet's status, not spec.unschedulable"),
    ],
)
def test_a_cordon_request_that_changed_nothing_cordons_nothing(change: dict[str, Any], why: str) -> None:
    """GIVEN cordon.jsonl's kubectl cordon of worker-2 made (SYNTHETIC) refused, a dry run, or a write to
    the node's status subresource THEN no drain and no cordon: only a stored change of
    ``spec.unschedulable`` cordons a node."""
    cordon = _cordon_audits()[0]
    changed = replace(cordon, payload={**cordon.payload, **change})
    lanes = derive_node_timeline([changed]).lanes
    assert ("node:drain" in lanes, "node:cordoned" in lanes) == (False, False), why


def test_a_kubelet_bar_spans_the_first_to_the_last_minute_of_its_lines() -> None:
    """GIVEN the pid-less JSON kubelet above (lines in minutes 07:32, 07:33 and 07:34; its start line at
    07:33:00.1, after its FLAG lines) THEN its bar runs from its first minute (07:32, the FLAG lines are
    the same process's) to the end of its last (07:35): the parser counts a process per minute."""
    records = list(JSON_KUBELET_1_21)
    parser = KubeletLogParser(node="node-a", year=2021, tz=UTC)
    for line in reversed(records):  # any order of lines in the file gives the same bar
        parser.feed(line)
    parser.close()
    (bar,) = derive_node_timeline(parser.processes()).lanes["node:kubelet"]
    assert (bar.start, bar.end) == (utc(2021, 3, 22, 7, 32, 0), utc(2021, 3, 22, 7, 35, 0))


# ------------------------------------------------------------------- beyond the sample: PDB refusals

AKS_429 = REAL_AUDIT / "aks-2025-eviction-429-unwrapped.jsonl"
AKS_NS, AKS_POD = "entity-service-blue", "shard-sport2-58ff578d97-gsxxc"


def _aks_budget(name: str, *, namespace: str = AKS_NS) -> Observation:
    # SYNTHETIC: a budget in the numbers the real 429's cause gives ("needs 16 healthy pods and has 16
    # currently": 0 disruptions allowed), seen a minute before the eviction.
    return Observation(
        kind=Kind.PDB,
        source=Source.API,
        observed_at=utc(2025, 5, 15, 12, 23, 35),
        dedupe_key=f"pdb:{name}-uid:1",
        namespace=namespace,
        name=name,
        payload={
            "uid": f"{name}-uid",
            "namespace": namespace,
            "name": name,
            "created": "2025-05-01T00:00:00+00:00",
            "selector": {"match_labels": {"app": "shard-sport2"}, "match_expressions": []},
            "min_available": 16,
            "max_unavailable": None,
            "status": {
                "disruptions_allowed": 0,
                "current_healthy": 16,
                "desired_healthy": 16,
                "expected_pods": 17,
            },
        },
    )


def _aks_pod(namespace: str = AKS_NS) -> CoveredPod:
    # The evicted pod (the real event names it; Metadata-free RequestResponse, no UID): its labels SYNTHETIC.
    return CoveredPod("aks-pod", namespace, AKS_POD, "aks-node-1", {"app": "shard-sport2"}, created_at=None)


def _aks_audits(**cause: Any) -> list[Observation]:
    raw = AKS_429.read_bytes()
    if cause:  # SYNTHETIC: the real event with its refusal's cause replaced
        event = json.loads(raw.splitlines()[0])
        event["responseStatus"]["details"]["causes"] = [cause] if cause.get("reason") else []
        raw = json.dumps(event).encode() + b"\n"
    return [o for o in parse_audit(raw).observations if o.kind == Kind.AUDIT]


def test_a_refused_eviction_blocks_the_drain_the_budget_it_names() -> None:
    """GIVEN the real AKS eviction of entity-service-blue/shard-sport2-58ff578d97-gsxxc by cluster-autoscaler,
    refused with 429 by "The disruption budget service needs 16 healthy pods and has 16 currently"
    THEN budget ``service`` blocked that drain, once, at the refusal, with the API server's numbers and
    who asked; a second budget selecting the same pod is not blamed for a refusal that names another."""
    audits = _aks_audits()
    when = utc(2025, 5, 15, 12, 24, 35, 385521)
    service = derive_pdb_timeline([_aks_budget("service"), *audits], pods=[_aks_pod()])
    (finding,) = service.findings
    assert (finding.kind, finding.start, finding.end) == ("pdb_blocking_drain", when, when)
    assert finding.message == (
        f"PodDisruptionBudget {AKS_NS}/service allowed 0 disruptions (16 healthy, 16 needed) while pod "
        f"{AKS_NS}/{AKS_POD} was being evicted: 1 eviction by aksService via cluster-autoscaler was refused."
    )
    other = derive_pdb_timeline([_aks_budget("other"), *audits], pods=[_aks_pod()])
    assert other.findings == ()


def test_a_refusal_whose_answer_names_no_budget_counts_for_the_budget_at_zero() -> None:
    """GIVEN the real AKS 429 with its cause removed (SYNTHETIC: the answer then names no budget and no
    numbers, only "Cannot evict pod as it would violate the pod's disruption budget.")
    THEN the budget at 0 that selects the pod is still the one that refused it, and its message gives
    no numbers it was not told."""
    audits = _aks_audits(reason=None)
    (finding,) = derive_pdb_timeline([_aks_budget("service"), *audits], pods=[_aks_pod()]).findings
    assert finding.attrs["refused_evictions"] == 1
    assert "allowed 0 disruptions while pod" in finding.message


def test_a_budget_covers_only_the_pods_of_its_own_namespace() -> None:
    """GIVEN budget ``service`` of entity-service-blue and a pod with the same labels in namespace
    ``other-team`` (SYNTHETIC) THEN it does not cover that pod: a PodDisruptionBudget selects pods of its
    own namespace only (policy/v1)."""
    timeline = derive_pdb_timeline([_aks_budget("service")], pods=[_aks_pod("other-team")])
    assert timeline.covered == ()


def test_a_drain_waits_on_a_pod_only_until_its_eviction_was_granted_though_the_cordon_lasts() -> None:
    """GIVEN web-pdb at 0 disruptions from T0+5, web-1's node cordoned from T0+10 to T0+100, and web-1's
    eviction granted at T0+30 (it enters status.disruptedPods with that time; the PDB is seen at T0+40)
    THEN pdb_blocking_drain spans T0+10 to T0+30: once the API server granted the eviction the pod is
    going, whatever the cordon does after."""
    obs = [
        pdb(5, 0, healthy=2, desired=2),
        pdb(40, 0, healthy=2, desired=2, disrupted={"web-1": at(30)}),
    ]
    covered = CoveredPod("u1", "shop", "web-1", "node-a", {"app": "web"}, created_at=T0)
    timeline = derive_pdb_timeline(obs, pods=[covered], cordons={"node-a": [(at(10), at(100))]})
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_blocking_drain"]
    assert (finding.start, finding.end) == (at(10), at(30))


def test_a_drain_waits_on_a_pod_only_until_the_audit_log_shows_its_eviction_granted() -> None:
    """GIVEN web-pdb at 0 disruptions from T0+5 (not seen again), web-1's node cordoned from T0+10 to T0+100,
    and the audited request of web-1's eviction answered 201 at T0+30 (SYNTHETIC, in the audit API's shape:
    tests/lifecycle/test_audit_evidence.py) THEN pdb_blocking_drain spans T0+10 to T0+30: the API server's
    own answer says the pod is going from then, without the budget's disruptedPods to say it."""
    granted = audits_of(eviction("granted-1", 30.0, "web-1", refused=False))
    covered = CoveredPod("u1", "shop", "web-1", "node-a", {"app": "web"}, created_at=T0)
    timeline = derive_pdb_timeline(
        [pdb(5, 0), *granted], pods=[covered], cordons={"node-a": [(at(10), at(100))]}
    )
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_blocking_drain"]
    assert (finding.start, finding.end) == (at(10), at(30))


def test_a_drain_still_waiting_has_an_open_finding_though_an_eviction_was_refused() -> None:
    """GIVEN web-pdb at 0 from T0+5, web-1's node cordoned from T0+10 and still cordoned, and one eviction
    of web-1 refused (429) at T0+20 (SYNTHETIC, the AKS refusal's shape) THEN the finding is open: the
    drain still waits on the pod; the refusal does not end it."""
    refusal = _aks_audits()[0]
    payload = {**refusal.payload, "namespace": "shop", "name": "web-1"}
    payload["eviction"] = {**payload["eviction"], "pdb": "web-pdb"}
    refused = replace(refusal, observed_at=at(20), namespace="shop", name="web-1", payload=payload)
    covered = CoveredPod("u1", "shop", "web-1", "node-a", {"app": "web"}, created_at=T0)
    timeline = derive_pdb_timeline([pdb(5, 0), refused], pods=[covered], cordons={"node-a": [(at(10), None)]})
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_blocking_drain"]
    assert (finding.start, finding.end, finding.attrs["refused_evictions"]) == (at(10), None, 1)


def test_a_cordon_that_ended_as_the_budget_reached_zero_blocked_nothing() -> None:
    """GIVEN web-1's node cordoned from T0+10 to T0+20 and web-pdb seen allowing 1 disruption at T0+5 and 0
    from T0+20 THEN nothing was blocked: the node was schedulable again the instant the budget hit 0, so
    no drain waited while it was 0."""
    covered = CoveredPod("u1", "shop", "web-1", "node-a", {"app": "web"}, created_at=T0)
    timeline = derive_pdb_timeline(
        [pdb(5, 1), pdb(20, 0)], pods=[covered], cordons={"node-a": [(at(10), at(20))]}
    )
    assert [f.kind for f in timeline.findings] == []


def test_a_pod_status_rewritten_by_a_restarted_kubelet_marks_a_kubelet_restart() -> None:
    """GIVEN the real minikube v1.20 mirror pod kube-apiserver-minikube (tests/fixtures/real/kubelet/
    minikube-1.20-mirror-pod-kube-apiserver.json, README there: its status was reset by a kubelet restart,
    startTime 06:58:52 while its previous run ran for a day) read offline
    THEN the node's kubelet lane has a bar from 06:58:52 marked as a restart: the status says a kubelet
    started then, and no log is needed to know it was not the first."""

    path = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"
    obj = json.loads((path / "minikube-1.20-mirror-pod-kube-apiserver.json").read_text(encoding="utf-8"))
    process = reset_restart(
        pod_observation(obj, watch_type="SNAPSHOT", observed_at=None, source=Source.OFFLINE)
    )
    assert process is not None
    (bar,) = derive_node_timeline([process]).lanes["node:kubelet"]
    assert (bar.start, bar.attrs["restart"]) == (utc(2021, 11, 17, 6, 58, 52), True)


def test_an_out_of_service_taint_puts_the_node_in_shutdown() -> None:
    """GIVEN a Node snapshot (SYNTHETIC) Ready=Unknown and tainted ``node.kubernetes.io/out-of-service``
    (NoExecute), as an operator taints a node after a non-graceful shutdown (Kubernetes docs, "Non
    Graceful node shutdown") THEN the node:shutdown lane shows it shutting down, with no kubelet message."""
    tainted = Observation(
        kind=Kind.NODE,
        source=Source.API,
        observed_at=at(10),
        dedupe_key="node:node-a-uid:10",
        node="node-a",
        name="node-a",
        payload={
            "name": "node-a",
            "unschedulable": False,
            "taints": [
                {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
            ],
            "conditions": [
                {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": ""}
            ],
        },
    )
    (shutdown,) = derive_node_timeline([tainted]).lanes["node:shutdown"]
    assert (shutdown.state, shutdown.start) == ("shutting_down", at(10))


def test_a_node_is_gone_from_its_first_deletion_seen() -> None:
    """GIVEN a node seen at T0 and seen deleted twice (SYNTHETIC: the DELETED watch event at T0+30 and a
    relist's 'gone' at T0+90) THEN its lanes end, and the node is gone, at T0+30: the first word of the
    deletion dates it."""

    seen = node(0)
    gone = [
        replace(node(s), kind=Kind.NODE_DELETED, dedupe_key=f"node:node-a-uid:{s}:deleted") for s in (30, 90)
    ]
    timeline = derive_node_timeline([seen, *gone])
    assert timeline.deleted_at == at(30)
    assert [iv.end for iv in timeline.lanes["node:ready"]] == [at(30)]


def test_a_budgets_findings_come_in_time_order_whatever_the_pods_order() -> None:
    """GIVEN web-pdb at 0 from T0+5, node-a cordoned from T0+10, pod u1 created at T0+50 and pod u2 created
    before, both on node-a THEN the findings are in time order: u2's wait (from T0+10) before u1's (from
    T0+50), whatever the order of the pods given."""
    pods = [
        CoveredPod("u1", "shop", "web-1", "node-a", {"app": "web"}, created_at=at(50)),
        CoveredPod("u2", "shop", "web-2", "node-a", {"app": "web"}, created_at=T0),
    ]
    for given in (pods, pods[::-1]):
        timeline = derive_pdb_timeline([pdb(5, 0)], pods=given, cordons={"node-a": [(at(10), None)]})
        assert [(f.attrs["pod_uid"], f.start) for f in timeline.findings] == [("u2", at(10)), ("u1", at(50))]


def test_a_granted_eviction_of_a_names_earlier_pod_does_not_end_the_wait_on_its_successor() -> None:
    """GIVEN web-pdb's status.disruptedPods naming web-1 at T0+30 (the eviction of the pod then called
    web-1), a new pod web-1 (a StatefulSet's next incarnation: same name, new UID) created at T0+50 on
    node-a, cordoned from T0+60, and the budget at 0 THEN the drain waits on the new web-1 from T0+60 and
    is still waiting: ``disruptedPods`` names pods by name, and an entry dated before this pod existed is
    about its predecessor."""
    obs = [pdb(5, 0), pdb(40, 0, disrupted={"web-1": at(30)})]
    successor = CoveredPod("u-next", "shop", "web-1", "node-a", {"app": "web"}, created_at=at(50))
    timeline = derive_pdb_timeline(obs, pods=[successor], cordons={"node-a": [(at(60), None)]})
    (finding,) = timeline.findings
    assert (finding.start, finding.end) == (at(60), None)


def test_a_budget_covers_the_pods_any_of_its_selectors_chose_while_it_lived() -> None:
    """GIVEN web-pdb seen selecting ``app=web`` at T0+5 and (SYNTHETIC) re-pointed to ``app=web-v2`` at
    T0+50 (policy/v1 lets a budget's selector be updated), and a pod labelled app=web
    THEN the pod is covered: the budget selected it for a while, and what it did to the pod then stays
    on the timeline."""
    later = pdb(50, 1)
    later = replace(later, payload={**later.payload, "selector": {"match_labels": {"app": "web-v2"}}})
    covered = CoveredPod("u1", "shop", "web-1", "node-a", {"app": "web"}, created_at=T0)
    assert derive_pdb_timeline([pdb(5, 1), later], pods=[covered]).covered == ("u1",)


# ------------------------------------------------------------ beyond the sample: audit read-back

EVICTED_UID = "0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3"


def _drain_records(name: str) -> list[AuditRecord]:
    observations = parsed("drain-refused-evictions.jsonl").observations
    return [r for o in observations if (r := read_audit(o)) is not None and r.name == name]


def test_an_evicted_pods_stored_states_read_back_from_the_drain_log() -> None:
    """GIVEN drain-refused-evictions.jsonl's requests about web-7d9f8b6c4-x2k9p (tests/fixtures/audit,
    written from the audit API's specification): four evictions refused with 429, one granted (201) at
    06:54:20.234002, the kubelet's status patch to Succeeded, then its DELETE with grace 0
    THEN the stored states read back are: deleting from the granted eviction, Succeeded, then gone at the
    kubelet's delete (grace 0 removes the object); a refusal stored nothing; and the same whatever the
    order the requests are given in."""
    records = _drain_records("web-7d9f8b6c4-x2k9p")
    assert len([r for r in records if r.eviction_outcome == "refused"]) == 4
    snaps = audit_snapshots(EVICTED_UID, records)
    assert [(s.kind, s.observed_at, s.payload["phase"]) for s in snaps] == [
        (Kind.POD, utc(2024, 6, 7, 6, 54, 20, 234002), None),
        (Kind.POD, utc(2024, 6, 7, 6, 54, 51, 829347), "Succeeded"),
        (Kind.POD_DELETED, utc(2024, 6, 7, 6, 54, 52, 252176), "Succeeded"),
    ]
    assert {s.payload["deletion_timestamp"] for s in snaps} == {"2024-06-07T06:54:20.234002+00:00"}
    assert audit_snapshots(EVICTED_UID, records[::-1]) == snaps


def test_nothing_is_stored_after_a_grace_zero_delete_removed_the_pod() -> None:
    """GIVEN the same requests, then (SYNTHETIC) the kubelet's status patch repeated after its DELETE, and
    the name's next CREATE given as what ended the object
    THEN the read-back still ends at the DELETE: a grace-0 delete removed the object, so a later write
    stored nothing about it and the next CREATE does not end it a second time."""
    records = _drain_records("web-7d9f8b6c4-x2k9p")
    patch = next(r for r in records if r.subresource == "status")
    late = replace(patch, at=utc(2024, 6, 7, 6, 54, 53), key=patch.key + ":late")
    create = next(r for r in _drain_records("web-7d9f8b6c4-m5n7r") if r.is_create)
    snaps = audit_snapshots(EVICTED_UID, [*records, late], gone_by=create)
    assert [s.kind for s in snaps][-1] == Kind.POD_DELETED
    assert snaps[-1].observed_at == utc(2024, 6, 7, 6, 54, 52, 252176)


def test_a_created_pod_is_created_when_its_request_arrived() -> None:
    """GIVEN drain-refused-evictions.jsonl's CREATE of web-7d9f8b6c4-m5n7r by the ReplicaSet controller,
    received at 06:54:11.402117 and completed at 06:54:11.416337
    THEN the pod read back is Pending, created at the request's arrival: the API server sets
    creationTimestamp as it admits the request, before it answers."""
    (create,) = [r for r in _drain_records("web-7d9f8b6c4-m5n7r") if r.is_create and r.subresource is None]
    (snap,) = audit_snapshots("c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f", [create])
    assert (snap.payload["phase"], snap.payload["created"]) == ("Pending", "2024-06-07T06:54:11.402117+00:00")
    assert snap.observed_at == utc(2024, 6, 7, 6, 54, 11, 416337)


@pytest.mark.parametrize(
    "change",
    [
        {"responseStatus": {"metadata": {}, "status": "Failure", "code": 409}},
        {"requestURI": "/api/v1/namespaces/default/pods/stress-83-tbnq2/status?dryRun=All"},
    ],
    ids=["refused", "dry-run"],
)
def test_a_status_write_that_stored_nothing_shows_no_status(change: dict[str, Any]) -> None:
    """GIVEN the real EKS kubelet status patch (phase Failed) refused with 409, or sent as a server-side
    dry run (SYNTHETIC variants of the real event) THEN no snapshot: the API server stored nothing."""
    event = {**json.loads(EKS.read_bytes().splitlines()[0]), **change}
    assert audit_snapshots(EKS_UID, _records(json.dumps(event).encode() + b"\n")) == ()


def test_a_status_update_shows_the_status_it_wrote() -> None:
    """GIVEN the real EKS kubelet status write sent as an update (SYNTHETIC: verb ``update``, a PUT of
    pods/status, as controllers' UpdateStatus sends it) THEN it shows the status it wrote, phase Failed,
    as the patch does."""
    event = {**json.loads(EKS.read_bytes().splitlines()[0]), "verb": "update"}
    (snap,) = audit_snapshots(EKS_UID, _records(json.dumps(event).encode() + b"\n"))
    assert snap.payload["phase"] == "Failed"


def test_a_status_update_replaces_the_conditions_a_patch_merges_into() -> None:
    """GIVEN the real EKS kubelet status patch (conditions Ready and ContainersReady False) and, a second
    later, (SYNTHETIC) a PUT of the pod's status whose conditions are only PodScheduled True
    THEN after the PUT the pod's conditions are only PodScheduled: an update stores the status it sends
    as a whole, where a strategic-merge patch merges its conditions by type into the stored ones."""
    event = json.loads(EKS.read_bytes().splitlines()[0])
    put = {
        **event,
        "auditID": "synthetic-put-1",
        "verb": "update",
        "requestReceivedTimestamp": "2021-09-27T08:36:45.014671Z",
        "stageTimestamp": "2021-09-27T08:36:45.021638Z",
        "requestObject": {
            "metadata": {"uid": EKS_UID},
            "status": {
                "phase": "Failed",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2021-09-27T08:36:20Z"}
                ],
            },
        },
    }
    records = _records(EKS.read_bytes() + json.dumps(put).encode() + b"\n")
    patched, updated = audit_snapshots(EKS_UID, records)
    assert sorted(c["type"] for c in patched.payload["conditions"]) == ["ContainersReady", "Ready"]
    assert [c["type"] for c in updated.payload["conditions"]] == ["PodScheduled"]
