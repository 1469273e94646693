"""Audit evidence on the timelines (issue #16 d3), pure: who began a termination, refused evictions as
markers and as evidence of ``pdb_blocking_drain``, the node's cordon from audited requests.

Inputs are audit events written from the audit API's specification: the fixtures of tests/fixtures/audit
(README there), and events built here in the same ``audit.k8s.io/v1`` shape, read by the real parser."""

from __future__ import annotations

import json
import random
from datetime import datetime
from typing import Any

from collectors.parsers.audit import parse_audit
from tests.audit.helpers import parsed
from tests.lifecycle.factories import T0, at, cond, ctr, pdb, pod, t
from timelines.lifecycle import derive_pod_timeline
from timelines.lifecycle.audit_evidence import audit_lives, audit_snapshots, marker_of, read_audit, who_of
from timelines.lifecycle.cluster_objects import CoveredPod, derive_node_timeline, derive_pdb_timeline
from timelines.lifecycle.observation import Kind, Observation

EVICTED = "0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3"  # shop/web-7d9f8b6c4-x2k9p in drain-refused-evictions.jsonl
KUBECTL = "kubectl/v1.30.2 (linux/amd64) kubernetes/3968350"
KCM = "kube-controller-manager/v1.30.2 (linux/amd64) kubernetes/3968350/system:serviceaccount:kube-system:{}"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"


def _of_pod(observations: list[Observation], uid: str) -> list[Observation]:
    """What the derive stage hands the core for one pod: its own observations and every audited request
    naming a pod (the core joins them by UID, name and time)."""
    return [o for o in observations if o.pod_uid == uid or (o.kind == Kind.AUDIT and o.pod_uid is None)]


def event(
    audit_id: str,
    seconds: float,
    verb: str,
    uri: str,
    *,
    user: str = "system:admin",
    agent: str = KUBECTL,
    code: int = 200,
    ref: dict[str, Any],
    request: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    level: str = "Request",
) -> bytes:
    """One ResponseComplete ``audit.k8s.io/v1`` Event completed at T0 + ``seconds``."""
    stamp = t(seconds).isoformat().replace("+00:00", "Z")
    doc: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": level,
        "auditID": audit_id,
        "stage": "ResponseComplete",
        "requestURI": uri,
        "verb": verb,
        "user": {"username": user, "groups": ["system:authenticated"]},
        "sourceIPs": ["10.0.0.12"],
        "userAgent": agent,
        "objectRef": {"apiVersion": "v1", **ref},
        "responseStatus": status or {"metadata": {}, "code": code},
        "requestReceivedTimestamp": stamp,
        "stageTimestamp": stamp,
    }
    if request is not None:
        doc["requestObject"] = request
    return json.dumps(doc).encode() + b"\n"


def pod_delete(
    audit_id: str, seconds: float, name: str, *, user: str, agent: str, grace: int | None
) -> bytes:
    body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if grace is not None:
        body["gracePeriodSeconds"] = grace
    return event(
        audit_id,
        seconds,
        "delete",
        f"/api/v1/namespaces/default/pods/{name}",
        user=user,
        agent=agent,
        ref={"resource": "pods", "namespace": "default", "name": name},
        request=body,
    )


def eviction(audit_id: str, seconds: float, name: str, *, refused: bool, ns: str = "shop") -> bytes:
    ref = {"resource": "pods", "subresource": "eviction", "namespace": ns, "name": name}
    uri = f"/api/v1/namespaces/{ns}/pods/{name}/eviction"
    body = {"kind": "Eviction", "apiVersion": "policy/v1", "metadata": {"name": name, "namespace": ns}}
    if not refused:
        return event(audit_id, seconds, "create", uri, code=201, ref=ref, request=body)
    status = {
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget web-pdb needs 2 healthy pods and has 2 currently",
                }
            ]
        },
        "code": 429,
    }
    return event(audit_id, seconds, "create", uri, code=429, ref=ref, request=body, status=status)


def audits_of(*lines: bytes) -> list[Observation]:
    return [o for o in parse_audit(b"".join(lines)).observations if o.kind == Kind.AUDIT]


# --------------------------------------------------------------------------------------------- who


def test_who_names_the_user_the_impersonator_and_the_client_tool() -> None:
    assert who_of({"user": {"username": "system:admin"}, "user_agent": KUBECTL}) == "system:admin via kubectl"
    gc = {"user": {"username": GC}, "user_agent": KCM.format("generic-garbage-collector")}
    assert who_of(gc) == GC  # a Kubernetes component is not a "via"
    kubelet = {"user": {"username": "system:node:worker-1"}, "user_agent": "kubelet/v1.30.2 (linux/amd64)"}
    assert who_of(kubelet) == "system:node:worker-1"
    impersonated = {
        "user": {"username": "kubernetes-admin"},
        "impersonated_user": {"username": "alice"},
        "user_agent": KUBECTL,
    }
    assert who_of(impersonated) == "alice, as kubernetes-admin, via kubectl"
    assert who_of({}) == "unknown"


def test_the_fixtures_impersonated_delete_and_dry_run() -> None:
    result = parsed("kubectl-delete-grace.jsonl")
    names = {o.name: o for o in result.observations if o.kind == Kind.AUDIT and o.payload["verb"] == "delete"}
    assert who_of(names["batch-7"].payload) == "ci-bot via curl"
    whos = {who_of(o.payload) for o in names.values()}
    assert "alice, as kubernetes-admin, via kubectl" in whos


# ------------------------------------------------------------------------------------- drained pod


def test_a_drained_pod_says_who_evicted_it_after_how_many_refusals() -> None:
    """GIVEN kubectl drain's four evictions refused by PDB web, then the granted one, and the kubelet's
    final delete (tests/fixtures/audit/drain-refused-evictions.jsonl)
    WHEN the evicted pod's timeline is derived
    THEN its terminating intervals name the drain's user and the four refusals, and each request is a marker."""
    obs = parsed("drain-refused-evictions.jsonl").observations
    timeline = derive_pod_timeline(_of_pod(obs, EVICTED))
    assert timeline.name == "web-7d9f8b6c4-x2k9p"
    audit_markers = [(m.reason, m.message) for m in timeline.markers if m.kind == "audit"]
    refused = "eviction by kubernetes-admin via kubectl refused (429): PodDisruptionBudget web needs 2 healthy pods and has 2"
    assert audit_markers == [
        ("EvictionRefused", refused),
        ("EvictionRefused", refused),
        ("EvictionRefused", refused),
        ("EvictionRefused", refused),
        ("Evicted", "eviction by kubernetes-admin via kubectl granted (201) after 4 earlier attempts"),
        ("Deleted", "deleted by system:node:worker-1 (grace 0s)"),
    ]
    granted = next(m for m in timeline.markers if m.reason == "Evicted")
    assert granted.attrs["attempts_before"] == 4 and granted.attrs["code"] == 201
    assert granted.at == datetime.fromisoformat("2024-06-07T06:54:20.234002+00:00")
    for lane in ("api", "worker"):
        (term,) = [iv for iv in timeline.lane(lane) if iv.state == "terminating"]
        assert term.attrs["who"] == "kubernetes-admin via kubectl"
        assert term.attrs["request"] == "eviction"
        assert term.attrs["attempts_before"] == 4
        assert term.attrs["blocked_by"] == ["web"]
        assert granted.evidence[0] in term.evidence
    # The replacement pod in the same log is not touched by the evictions of another name.
    other = derive_pod_timeline(_of_pod(obs, "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f"))
    assert [m.reason for m in other.markers if m.kind == "audit"] == ["Created"]
    assert other.markers[0].message == "created by system:serviceaccount:kube-system:replicaset-controller"


def test_audit_evidence_does_not_depend_on_order_or_duplicates() -> None:
    obs = _of_pod(parsed("drain-refused-evictions.jsonl").observations, EVICTED)
    expected = derive_pod_timeline(obs)
    for seed in range(5):
        shuffled = obs + obs[: seed * 3]
        random.Random(seed).shuffle(shuffled)
        assert derive_pod_timeline(shuffled) == expected


# ----------------------------------------------------------------------------- delete by name and time


def _web_pod(
    uid: str, created: float, *, deletion: float | None = None, gone: float | None = None
) -> list[Observation]:
    running: dict[str, Any] = {
        "phase": "Running",
        "created": created,
        "start_time": created + 1,
        "name": "web-0",
        "conditions": [cond("Ready", "True", created + 3)],
        "containers": [ctr("app", "running", started=created + 2)],
    }
    out = [pod(uid, int(created * 10) + 1, created + 3, **running)]
    if deletion is not None:
        out.append(
            pod(uid, int(created * 10) + 2, deletion, deletion=deletion + 30, deletion_grace=30, **running)
        )
    if gone is not None:
        out.append(
            pod(
                uid, int(created * 10) + 3, gone, deleted=True, deletion=deletion, deletion_grace=0, **running
            )
        )
    return out


def test_a_uidless_delete_joins_the_incarnation_alive_when_it_completed() -> None:
    """GIVEN two StatefulSet pods named default/web-0 one after the other, each deleted by a request that
    does not carry the UID (Metadata level)
    WHEN each incarnation is derived
    THEN each names its own deleter and not the other's."""
    first = _web_pod("uid-first", 0, deletion=20, gone=25)
    second = _web_pod("uid-second", 40, deletion=80)
    requests = audits_of(
        pod_delete("a-1", 20.000120, "web-0", user="system:admin", agent=KUBECTL, grace=None),
        pod_delete(
            "a-2", 80.000300, "web-0", user=GC, agent=KCM.format("generic-garbage-collector"), grace=None
        ),
    )
    one = derive_pod_timeline([*first, *requests])
    two = derive_pod_timeline([*second, *requests])
    assert [m.message for m in one.markers if m.kind == "audit"] == ["deleted by system:admin via kubectl"]
    assert [m.message for m in two.markers if m.kind == "audit"] == [f"deleted by {GC}"]
    term_one = next(iv for iv in one.lane("api") if iv.state == "terminating")
    term_two = next(iv for iv in two.lane("api") if iv.state == "terminating")
    assert (term_one.attrs["who"], term_one.attrs["request"]) == ("system:admin via kubectl", "delete")
    assert term_two.attrs["who"] == GC
    # deletionTimestamp (whole seconds) says 80; the audited DELETE that set it knows 80.000300 (#34).
    assert term_two.start == t(80.0003)


def test_a_later_shorter_delete_does_not_replace_the_one_that_began_termination() -> None:
    obs = _web_pod("uid-1", 0, deletion=20, gone=30)
    requests = audits_of(
        pod_delete("d-1", 20.0001, "web-0", user="system:admin", agent=KUBECTL, grace=30),
        pod_delete("d-2", 26.0, "web-0", user="bob", agent=KUBECTL, grace=0),
    )
    timeline = derive_pod_timeline([*obs, *requests])
    term = next(iv for iv in timeline.lane("api") if iv.state == "terminating")
    assert (term.attrs["who"], term.attrs["grace_period_seconds"]) == ("system:admin via kubectl", 30)
    assert [m.message for m in timeline.markers if m.kind == "audit"] == [
        "deleted by system:admin via kubectl (grace 30s)",
        "deleted by bob via kubectl (grace 0s)",
    ]


def test_no_request_no_who() -> None:
    timeline = derive_pod_timeline(_web_pod("uid-1", 0, deletion=20))
    term = next(iv for iv in timeline.lane("api") if iv.state == "terminating")
    assert "who" not in term.attrs
    assert not [m for m in timeline.markers if m.kind == "audit"]


# ----------------------------------------------------------------------------------------------- PDB


def test_refused_evictions_are_evidence_of_pdb_blocking_drain_with_count_and_actor() -> None:
    """GIVEN PDB shop/web-pdb at 0 disruptions, a covered pod on a cordoned node, and three evictions of it
    refused by the PDB (429)
    THEN the finding counts the three refusals, names the drain's user and cites the requests."""
    refused = audits_of(*(eviction(f"e-{i}", 12 + 5 * i, "web-1", refused=True) for i in range(3)))
    granted = audits_of(eviction("e-9", 40, "web-1", refused=False))
    covered = CoveredPod("pod-1", "shop", "web-1", "node-a", {"app": "web"}, created_at=T0, deleted_at=t(50))
    timeline = derive_pdb_timeline(
        [pdb(5, 0), pdb(39, 1, healthy=3), *refused, *granted],
        pods=[covered],
        cordons={"node-a": [(t(10), None)]},
    )
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_blocking_drain"]
    assert finding.attrs["refused_evictions"] == 3
    assert finding.attrs["drain_actor"] == "system:admin via kubectl"
    assert {o.dedupe_key for o in refused} <= set(finding.evidence)
    assert "3 evictions by system:admin via kubectl were refused" in finding.message
    assert "runs on cordoned node node-a" in finding.message
    assert (finding.start, finding.end) == (t(10), t(39))


def test_refused_evictions_alone_show_the_blocked_drain() -> None:
    """An audit-only cluster may know no cordon (nodes not audited): the refusals are the evidence."""
    refused = audits_of(*(eviction(f"e-{i}", 12 + 5 * i, "web-1", refused=True) for i in range(2)))
    covered = CoveredPod("pod-1", "shop", "web-1", "node-a", {"app": "web"}, created_at=T0)
    timeline = derive_pdb_timeline([pdb(5, 0), *refused], pods=[covered])
    (finding,) = [f for f in timeline.findings if f.kind == "pdb_blocking_drain"]
    assert finding.attrs["refused_evictions"] == 2
    assert (finding.start, finding.end) == (t(12), t(17))
    # another pod of the same namespace is not blamed for web-1's refusals
    other = CoveredPod("pod-2", "shop", "web-2", "node-b", {"app": "web"}, created_at=T0)
    timeline = derive_pdb_timeline([pdb(5, 0), *refused], pods=[other])
    assert not [f for f in timeline.findings if f.kind == "pdb_blocking_drain"]


# ---------------------------------------------------------------------------------------------- node


def test_the_node_drain_lane_from_audited_cordons() -> None:
    """cordon.jsonl: kubectl cordons worker-2, maint-bot uncordons it, kubectl's PUT cordons it again and
    a second PUT is refused (409): the drain lane says who, the cordoned lane follows the requests."""
    obs = [o for o in parsed("cordon.jsonl").observations if o.kind == Kind.AUDIT and o.node == "worker-2"]
    timeline = derive_node_timeline(obs)
    drain = timeline.lanes["node:drain"]
    assert [(iv.state, iv.attrs.get("who"), iv.attrs.get("uncordoned_by")) for iv in drain] == [
        ("cordoned", "kubernetes-admin via kubectl", "maint-bot via Go-http-client"),
        ("cordoned", "kubernetes-admin via kubectl", None),
    ]
    assert drain[-1].end is None
    cordoned = timeline.lanes["node:cordoned"]
    assert [(iv.start, iv.end) for iv in cordoned] == [(iv.start, iv.end) for iv in drain]


def test_removing_the_last_finalizer_of_a_deleting_pod_is_its_removal() -> None:
    """The update that drops the last finalizer of a pod whose grace is 0 deletes it in the same request
    (the generic registry's shouldDeleteDuringUpdate): no DELETE is audited, the response is the pod gone."""
    body = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "stubborn",
            "namespace": "default",
            "uid": "uid-fin",
            "resourceVersion": "812",
            "creationTimestamp": at(0),
            "deletionTimestamp": at(20),
            "deletionGracePeriodSeconds": 0,
        },
        "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "busybox"}]},
        "status": {"phase": "Failed"},
    }
    ref = {"resource": "pods", "namespace": "default", "name": "stubborn"}
    uri = "/api/v1/namespaces/default/pods/stubborn"
    line = event("f-1", 60, "update", uri, ref=ref, request=body, level="RequestResponse")
    doc = json.loads(line)
    doc["responseObject"] = body
    result = parse_audit(json.dumps(doc).encode())
    kinds = [(o.kind, o.dedupe_key) for o in result.observations if o.kind != Kind.AUDIT]
    assert kinds == [(Kind.POD_DELETED, "pod:uid-fin:812:deleted")]
    # still holding a finalizer, or with grace left: the object stays
    body["metadata"]["finalizers"] = ["podlife.dev/cleanup"]
    doc["responseObject"] = body
    result = parse_audit(json.dumps(doc).encode())
    assert [o.kind for o in result.observations if o.kind != Kind.AUDIT] == [Kind.POD]


def test_a_second_graceful_delete_never_lengthens_the_deletion_time() -> None:
    """The API server sets deletionTimestamp = now + grace on the first graceful DELETE; a later one can
    shorten it but never lengthen it (k8s-facts.md, API objects: "Graceful DELETE"). GIVEN a pod known only
    from audited requests, created at T0+1, deleted with grace 30 at T0+10 and again with grace 30 at
    T0+20 (kubectl delete run twice) THEN every snapshot from the first DELETE on says deletionTimestamp
    T0+40, grace 30: the second request changed nothing the object shows."""
    create = event(
        "c-1",
        1,
        "create",
        "/api/v1/namespaces/default/pods",
        ref={"resource": "pods", "namespace": "default", "name": "web-0"},
        level="Metadata",
    )
    first = pod_delete("d-1", 10, "web-0", user="system:admin", agent=KUBECTL, grace=30)
    again = pod_delete("d-2", 20, "web-0", user="system:admin", agent=KUBECTL, grace=30)
    requests = audits_of(create, first, again)
    (life,) = audit_lives("default", "web-0", requests, [])
    records = [r for r in map(read_audit, life.observations) if r is not None]
    deleting = [
        (
            o.observed_at,
            datetime.fromisoformat(o.payload["deletion_timestamp"]),
            o.payload["deletion_grace_seconds"],
        )
        for o in audit_snapshots(life.uid, records, life.gone_by)
        if o.payload.get("deletion_timestamp")
    ]
    assert deleting == [(t(10), t(40), 30)]


# ---------------------------------------------------------------- requests that failed (issue #38)


def _marker(line: bytes) -> tuple[str, str, dict[str, Any]] | None:
    (obs,) = audits_of(line)
    record = read_audit(obs)
    assert record is not None
    return marker_of(record, [record])


def test_a_delete_of_a_pod_already_gone_marks_nothing_and_a_refused_one_says_it_failed() -> None:
    """GIVEN a pod's DELETE answered 404 NotFound (the object was already gone: a garbage collector's late
    delete, a second kubectl delete), and one answered 409 Conflict (a precondition on its UID or
    resourceVersion that no longer held) THEN the first puts nothing on the timeline (it changed nothing),
    the second is a DeleteFailed marker that says who and the code."""
    gone = pod_delete("a-404", 5.0, "web-1", user="system:admin", agent=KUBECTL, grace=None)
    gone = gone.replace(b'"code": 200', b'"code": 404')
    conflict = pod_delete("a-409", 6.0, "web-1", user="system:admin", agent=KUBECTL, grace=None)
    conflict = conflict.replace(b'"code": 200', b'"code": 409')
    assert _marker(gone) is None
    found = _marker(conflict)
    assert found is not None
    assert found[:2] == ("DeleteFailed", "delete by system:admin via kubectl failed (409)")
    assert found[2]["code"] == 409


def test_an_eviction_that_failed_for_another_reason_than_a_budget_says_why() -> None:
    """GIVEN an eviction answered 500 with the API server's message (the apiserver could not read the
    pod's budgets: ``Failure``, reason InternalError) THEN it is an EvictionFailed marker that quotes the
    message, neither granted nor refused by a budget."""
    ref = {"resource": "pods", "subresource": "eviction", "namespace": "shop", "name": "web-1"}
    status = {
        "metadata": {},
        "status": "Failure",
        "message": "Internal error occurred: failed to list PodDisruptionBudgets",
        "reason": "InternalError",
        "code": 500,
    }
    body = {"kind": "Eviction", "apiVersion": "policy/v1", "metadata": {"name": "web-1", "namespace": "shop"}}
    line = event(
        "a-500",
        7.0,
        "create",
        "/api/v1/namespaces/shop/pods/web-1/eviction",
        code=500,
        ref=ref,
        request=body,
        status=status,
    )
    found = _marker(line)
    assert found is not None
    reason, message, attrs = found
    assert reason == "EvictionFailed" and attrs["code"] == 500
    assert message.endswith("failed (500): Internal error occurred: failed to list PodDisruptionBudgets")
