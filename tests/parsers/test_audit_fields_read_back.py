"""Every field the audit parser reads from a real audit event, read back whole (issue #38: fresh mutation
samples of ``collectors/parsers/`` showed audit fields parsed and never checked by any test).

Real events from tests/fixtures/real/audit (its README and tests/fixtures/real/SOURCES.md name where each
was copied from). Each test states what the event says, field by field: who asked (user, impersonation,
the actor podlife names), what (verb, resource, object, URI), when (received, completed), the answer
(code, status, reason, message, causes) and what the request carried (an eviction, a delete, a status
write).
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from collectors.parsers.audit import parse_audit
from timelines.lifecycle.observation import Kind, Source

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "audit"

# What an event says nothing of.
UNSAID: dict[str, Any] = {
    "binding_node": None,
    "delete": None,
    "eviction": None,
    "impersonated_user": None,
    "node_change": None,
    "retry_after_seconds": None,
    "rpc_code": None,
    "snapshots": [],
    "status_write": None,
    "dry_run": False,
    "truncated": False,
}


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_a_refused_eviction_is_read_whole_wrapped_or_bare() -> None:
    """AKS 2025: cluster-autoscaler (as aksService) asks to evict entity-service-blue/shard-sport2-…-gsxxc
    (policy/v1beta1, grace 30 s); the API server answers 429 TooManyRequests, Failure, the PDB `service`
    needing 16 healthy pods and having 16. The same event wrapped in Azure's diagnostic record (envelope
    ``aks``) and bare (``native``) reads the same, under the same key."""
    read = {}
    for name, envelope in (
        ("aks-2025-kube-audit-admin-eviction-429.jsonl", "aks"),
        ("aks-2025-eviction-429-unwrapped.jsonl", "native"),
    ):
        result = parse_audit((REAL / name).read_bytes())
        assert (result.events, result.used, result.skipped) == (1, 1, Counter())
        (obs,) = result.observations
        assert (obs.kind, obs.source, obs.observed_at, obs.pod_uid, obs.node, obs.namespace, obs.name) == (
            Kind.AUDIT,
            Source.AUDIT,
            at("2025-05-15 12:24:35.385521"),
            None,
            None,
            "entity-service-blue",
            "shard-sport2-58ff578d97-gsxxc",
        )
        assert obs.payload == {
            **UNSAID,
            "envelope": envelope,
            "audit_id": "00000000-0000-0000-0000-000000000024",
            "stage": "ResponseComplete",
            "level": "RequestResponse",
            "verb": "create",
            "api_group": "",
            "api_version": "v1",
            "resource": "pods",
            "subresource": "eviction",
            "namespace": "entity-service-blue",
            "name": "shard-sport2-58ff578d97-gsxxc",
            "uid": None,
            "request_uri": "/api/v1/namespaces/entity-service-blue/pods/shard-sport2-58ff578d97-gsxxc/eviction",
            "requested_at": "2025-05-15T12:24:35.363709+00:00",
            "completed_at": "2025-05-15T12:24:35.385521+00:00",
            "user": {
                "username": "aksService",
                "uid": None,
                "groups": ["system:masters", "system:authenticated"],
                "extra": {},
            },
            "actor": {"kind": "user", "name": "aksService"},
            "user_agent": "cluster-autoscaler/v0.0.0 (linux/amd64) kubernetes/$Format",
            "source_ips": ["172.31.16.220"],
            "code": 429,
            "status": "Failure",
            "reason": "TooManyRequests",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget service needs 16 healthy pods and has 16 currently",
                    "field": None,
                }
            ],
            "succeeded": False,
            "authorization": {"decision": "allow", "reason": None},  # the event's reason is ""
            "eviction": {
                "api_version": "policy/v1beta1",
                "outcome": "refused",
                "cause": "insufficient_pods",
                "pdb": "service",
                "desired_healthy": 16,
                "current_healthy": 16,
                "detail": None,
                "grace_period_seconds": 30,
            },
        }
        read[envelope] = obs
    assert read["aks"].dedupe_key == read["native"].dedupe_key
    assert read["aks"].dedupe_key.startswith("audit:00000000-0000-0000-0000-000000000024:ResponseComplete:")


def test_a_kubelet_status_patch_is_the_nodes_and_carries_the_status_it_wrote() -> None:
    """EKS 2021 (Request level): the kubelet of ip-00-00-00-00.eu-west-1.compute.internal (its node user,
    kubelet/v1.21.2) patches default/stress-83-tbnq2's status (uid 10177585-…, from the body's metadata):
    phase Failed, Ready and ContainersReady False since 08:36:44, container stress terminated OOMKilled
    with exit code 2 (started 08:36:29, finished 08:36:42). A strategic-merge patch is partial. The node's
    user extras (AWS keys, ARNs) are not kept."""
    result = parse_audit((REAL / "eks-2021-kubelet-status-patch-oomkilled.jsonl").read_bytes())
    (obs,) = result.observations
    node = "ip-00-00-00-00.eu-west-1.compute.internal"
    assert (obs.observed_at, obs.pod_uid, obs.node, obs.namespace, obs.name) == (
        at("2021-09-27 08:36:44.021638"),
        None,
        node,
        "default",
        "stress-83-tbnq2",
    )
    not_ready: dict[str, Any] = {
        "last_transition": "2021-09-27T08:36:44+00:00",
        "message": "containers with unready status: [stress]",
        "reason": "ContainersNotReady",
        "status": "False",
    }
    assert obs.payload == {
        **UNSAID,
        "envelope": "native",
        "audit_id": "0e507148-8b16-4dfb-934b-9b05dba50974",
        "stage": "ResponseComplete",
        "level": "Request",
        "verb": "patch",
        "api_group": "",
        "api_version": "v1",
        "resource": "pods",
        "subresource": "status",
        "namespace": "default",
        "name": "stress-83-tbnq2",
        "uid": "10177585-b79f-44a0-bdcc-c68ec12d012a",
        "request_uri": "/api/v1/namespaces/default/pods/stress-83-tbnq2/status",
        "requested_at": "2021-09-27T08:36:44.014671+00:00",
        "completed_at": "2021-09-27T08:36:44.021638+00:00",
        "user": {
            "username": f"system:node:{node}",
            "uid": "heptio-authenticator-aws:12345678912:AROA2PRXA4MTEFOJD26WP",
            "groups": ["system:bootstrappers", "system:nodes", "system:authenticated"],
            "extra": {},
        },
        "actor": {"kind": "kubelet", "name": node},
        "user_agent": "kubelet/v1.21.2 (linux/amd64) kubernetes/729bdfc",
        "source_ips": ["54.75.17.171"],
        "code": 200,
        "status": None,
        "reason": None,
        "message": None,
        "causes": [],
        "succeeded": True,
        "authorization": {"decision": "allow", "reason": None},
        "status_write": {
            "partial": True,
            "phase": "Failed",
            "conditions": [{**not_ready, "type": "Ready"}, {**not_ready, "type": "ContainersReady"}],
            "containers": [
                {
                    "name": "stress",
                    "kind": "regular",
                    "state": "terminated",
                    "reason": "OOMKilled",
                    "message": None,
                    "exit_code": 2,
                    "signal": None,
                    "started_at": "2021-09-27T08:36:29+00:00",
                    "finished_at": "2021-09-27T08:36:42+00:00",
                    "ready": False,
                    "started": False,
                    "restart_count": 0,
                    "last_state": None,
                    "allocated_resources": None,
                    "resources": None,
                    "restart_policy": None,
                    "prestop_sleep_seconds": None,
                }
            ],
        },
    }


def test_an_impersonated_delete_at_metadata_level_names_who_and_cannot_know_its_options() -> None:
    """kodekloud 2022: kubernetes-admin, impersonating agent-smith, deletes citadel/webapp-color with kubectl
    v1.20.0; RBAC allowed it by the RoleBinding it names. At Metadata level no body is recorded: the
    delete's options are unknown. The other five events of the file are reads or other resources."""
    result = parse_audit((REAL / "kodekloud-2022-citadel-webapp-color-delete.jsonl").read_bytes())
    assert (result.events, result.used, result.skipped) == (6, 1, Counter(other_resource=4, read_verb=1))
    (obs,) = result.observations
    assert (obs.observed_at, obs.node, obs.namespace, obs.name) == (
        at("2022-06-23 13:38:21.881241"),
        None,
        "citadel",
        "webapp-color",
    )
    rbac = (
        'RBAC: allowed by RoleBinding "important_binding_do_not_delete/citadel" of Role '
        '"important_role_do_not_delete" to User "agent-smith"'
    )
    assert obs.payload == {
        **UNSAID,
        "envelope": "native",
        "audit_id": "cc296a89-f5d3-4574-a210-2855e406c80b",
        "stage": "ResponseComplete",
        "level": "Metadata",
        "verb": "delete",
        "api_group": "",
        "api_version": "v1",
        "resource": "pods",
        "subresource": None,
        "namespace": "citadel",
        "name": "webapp-color",
        "uid": None,
        "request_uri": "/api/v1/namespaces/citadel/pods/webapp-color",
        "requested_at": "2022-06-23T13:38:21.871164+00:00",
        "completed_at": "2022-06-23T13:38:21.881241+00:00",
        "user": {
            "username": "kubernetes-admin",
            "uid": None,
            "groups": ["system:masters", "system:authenticated"],
            "extra": {},
        },
        "impersonated_user": {
            "username": "agent-smith",
            "uid": None,
            "groups": ["system:authenticated"],
            "extra": {},
        },
        "actor": {"kind": "user", "name": "agent-smith"},
        "user_agent": "kubectl/v1.20.0 (linux/amd64) kubernetes/af46c47",
        "source_ips": ["192.168.121.1"],
        "code": 200,
        "status": None,
        "reason": None,
        "message": None,
        "causes": [],
        "succeeded": True,
        "authorization": {"decision": "allow", "reason": rbac},
        "delete": {
            "options": "unknown",
            "grace_period_seconds": None,
            "propagation_policy": None,
            "preconditions": {"uid": None, "resource_version": None},
        },
    }


@pytest.mark.parametrize(
    ("name", "events", "used", "skipped", "ignored"),
    [
        # an exec into a pod: a subresource that is not the pod's lifecycle, however far it got
        ("falco-2018-minikube-pod-exec.jsonl", 1, 0, {"other_subresource": 1}, {"create pods/exec": 1}),
        # a node's lease renewal: not a followed resource
        (
            "elastic-2025-aks-kube-audit-lease-update.jsonl",
            1,
            0,
            {"other_resource": 1},
            {"update coordination.k8s.io/leases": 1},
        ),
        # GCE at scale: 4 node-status heartbeats that change nothing, 3 leases, 3 watches of other resources
        (
            "gcsreader-2019-gce-scale-node-heartbeats.jsonl",
            10,
            0,
            {"other_resource": 6, "node_heartbeat": 4},
            {"update coordination.k8s.io/leases": 3, "watch secrets": 2, "watch services": 1},
        ),
        # kubectl run: the create is read; kubectl's two reads of the pod (received, complete) are reads
        ("minikube-2022-kubectl-run-nginx-create-metadata.jsonl", 3, 1, {"read_verb": 2}, {"get pods": 2}),
        # kodekloud 2024: five pods created and deleted (read), their configmaps (not followed) and the
        # reads of both: 28 gets and 7 lists of pods, 16 lists and 24 watch events of configmaps
        (
            "kodekloud-2024-citadel-webapp-color-deletes.jsonl",
            95,
            10,
            {"other_resource": 50, "read_verb": 35},
            {
                "get pods": 28,
                "list pods": 7,
                "create configmaps": 5,
                "delete configmaps": 5,
                "list configmaps": 16,
                "watch configmaps": 24,
            },
        ),
        # a mirror pod's status patch, logged when received and when complete: one request
        ("kubeadm-2022-mirror-pod-status-patch-metadata.jsonl", 2, 1, {"request_received": 1}, {}),
    ],
)
def test_what_a_real_audit_log_holds_is_read_or_set_aside_by_reason_and_shape(
    name: str, events: int, used: int, skipped: dict[str, int], ignored: dict[str, int]
) -> None:
    """Each event of a real audit file is either read or counted under the reason it is not, and what is
    not followed is listed by its shape (verb, group/resource/subresource), so a reader sees what the log
    held beside the pods' lifecycle."""
    result = parse_audit((REAL / name).read_bytes())
    assert (result.events, result.used, result.skipped, result.ignored) == (
        events,
        used,
        Counter(skipped),
        Counter(ignored),
    )
    assert (result.rejected, result.unpaired) == (Counter(), 0)


def test_a_line_that_is_not_json_is_rejected_by_its_line_and_the_rest_read() -> None:
    """kubeadm 1.20: the third line of the log is cut mid-way (not JSON): rejected as ``bad_json``, named by
    its line; the two creates of other resources are set aside and the kubelet's status patch is read."""
    result = parse_audit(
        (REAL / "kubeadm-1.20-kubelet-status-patch-running-malformed-line.jsonl").read_bytes()
    )
    assert (result.events, result.used, result.rejected) == (3, 1, Counter(bad_json=1))
    assert result.skipped == Counter(other_resource=2)
    assert result.ignored == Counter({"create serviceaccounts": 1, "create secrets": 1})
    (example,) = result.examples
    assert example.startswith("bad_json: line 3: ")


def test_empty_lines_between_events_are_counted_blank_and_the_events_read() -> None:
    """Two real audit logs joined with empty lines between and before them (hand-joined: the EKS status
    patch, then AKS's bare eviction): an empty line after the first event is counted ``blank`` (one each),
    those before any event are not counted (the reader has not yet seen what the input is), and both
    events are read."""
    eks = (REAL / "eks-2021-kubelet-status-patch-oomkilled.jsonl").read_bytes().strip()
    aks = (REAL / "aks-2025-eviction-429-unwrapped.jsonl").read_bytes().strip()
    result = parse_audit(b"\n\n" + eks + b"\n\n\n" + aks + b"\n")
    assert (result.events, result.used, result.skipped, result.rejected) == (
        2,
        2,
        Counter(blank=2),
        Counter(),
    )


def test_an_eviction_of_a_pod_already_gone_failed_for_not_found() -> None:
    """The eviction subresource answers 404 NotFound when the pod is gone (pkg/registry/core/pod/storage/
    eviction.go reads the pod first; apimachinery's NotFound status): the eviction failed, for want of
    the pod, and names no budget. Hand-written event (tests/fixtures/audit/README.md's method), the
    Status body as the API server writes it."""
    event = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": "0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6",
        "stage": "ResponseComplete",
        "requestURI": "/api/v1/namespaces/shop/pods/web-0/eviction",
        "verb": "create",
        "user": {"username": "system:serviceaccount:kube-system:cluster-autoscaler"},
        "objectRef": {
            "resource": "pods",
            "namespace": "shop",
            "name": "web-0",
            "apiVersion": "v1",
            "subresource": "eviction",
        },
        "responseStatus": {
            "metadata": {},
            "status": "Failure",
            "message": 'pods "web-0" not found',
            "reason": "NotFound",
            "details": {"name": "web-0", "kind": "pods"},
            "code": 404,
        },
        "requestReceivedTimestamp": "2024-03-01T10:00:00.100000Z",
        "stageTimestamp": "2024-03-01T10:00:00.101000Z",
    }
    (obs,) = parse_audit(json.dumps(event).encode()).observations
    assert (obs.payload["code"], obs.payload["reason"], obs.payload["succeeded"]) == (404, "NotFound", False)
    unnamed = {"pdb": None, "desired_healthy": None, "current_healthy": None, "detail": None}
    assert obs.payload["eviction"] == {
        "outcome": "failed",
        "cause": "not_found",
        **unnamed,
        "grace_period_seconds": None,
        "api_version": None,
    }
    # The same request ending in a panic of the API server (stage Panic, code 500: k8s-facts.md's audit
    # table) failed too, for no cause the answer names: not for a missing pod.
    panicked = event | {
        "stage": "Panic",
        "responseStatus": {"metadata": {}, "code": 500, "message": "APIServer panic'd: runtime error"},
    }
    (obs,) = parse_audit(json.dumps(panicked).encode()).observations
    assert (obs.payload["stage"], obs.payload["code"], obs.payload["succeeded"]) == ("Panic", 500, False)
    assert obs.payload["eviction"] == {
        "outcome": "failed",
        "cause": None,
        **unnamed,
        "grace_period_seconds": None,
        "api_version": None,
    }


def test_a_gke_eviction_is_refused_only_when_its_message_says_a_budget_refused_it() -> None:
    """GKE's Cloud Audit Logs carry a google.rpc code, not the HTTP one: an eviction is refused by a budget
    when its message says so (429 becomes RESOURCE_EXHAUSTED, 8), granted when OK (0), forbidden when RBAC denied it
    (PERMISSION_DENIED, 7, "… is forbidden: User … cannot create resource \\"pods/eviction\\" …"), and
    failed otherwise. (The hand-written GKE fixture's refused eviction, tests/fixtures/audit/README.md,
    and the same entry answered otherwise.)"""
    entries = json.loads((REAL.parents[1] / "audit" / "gke-logentries.json").read_text())
    entry = next(e for e in entries if e["protoPayload"]["methodName"].endswith("pods.eviction.create"))
    forbidden = (
        'pods "web-7d9f8b6c4-x2k9p" is forbidden: User "alice" cannot create resource "pods/eviction" '
        'in API group "" in the namespace "shop"'
    )
    for code, message, outcome in (
        (8, entry["protoPayload"]["status"]["message"], "refused"),
        (7, forbidden, "forbidden"),
        (13, "Internal error occurred", "failed"),
        (0, "", "granted"),
    ):
        answered = json.loads(json.dumps(entry))
        answered["protoPayload"]["status"] = {"code": code, "message": message}
        (obs,) = [
            o for o in parse_audit(json.dumps([answered]).encode()).observations if o.kind == Kind.AUDIT
        ]
        assert (obs.payload["rpc_code"], obs.payload["eviction"]["outcome"]) == (code, outcome)


def test_a_kubelet_known_only_by_its_group_is_a_kubelet_of_no_named_node() -> None:
    """AKS 2019 (kubelet v1.14.5): the status patch of default/nginx comes from user ``nodeclient`` in group
    system:nodes, the client certificate AKS then shared between its nodes: a kubelet, but of no node the
    request names. The patch writes phase Running, Ready and ContainersReady True, container mypod running
    since 12:56:55; a 1.14 status has no ``started`` field: unknown, not False."""
    result = parse_audit((REAL / "aks-2019-nodeclient-pod-status-patch-running.jsonl").read_bytes())
    assert (result.events, result.used, result.skipped) == (2, 1, Counter(read_verb=1))
    (obs,) = result.observations
    assert (obs.observed_at, obs.node, obs.namespace, obs.name) == (
        at("2019-09-20 12:56:55.910588"),
        None,
        "default",
        "nginx",
    )
    ready: dict[str, Any] = {
        "status": "True",
        "reason": None,
        "message": None,
        "last_transition": "2019-09-20T12:56:55+00:00",
    }
    rbac = 'RBAC: allowed by ClusterRoleBinding "system:aks-client-nodes" of ClusterRole "system:node" to Group "system:nodes"'
    assert obs.payload == {
        **UNSAID,
        "envelope": "native",
        "audit_id": "e13ca54f-9b7a-4a47-abb4-930d0b518c49",
        "stage": "ResponseComplete",
        "level": "Request",
        "verb": "patch",
        "api_group": "",
        "api_version": "v1",
        "resource": "pods",
        "subresource": "status",
        "namespace": "default",
        "name": "nginx",
        "uid": None,
        "request_uri": "/api/v1/namespaces/default/pods/nginx/status",
        "requested_at": "2019-09-20T12:56:55.895345+00:00",
        "completed_at": "2019-09-20T12:56:55.910588+00:00",
        "user": {
            "username": "nodeclient",
            "uid": None,
            "groups": ["system:nodes", "system:authenticated"],
            "extra": {},
        },
        "actor": {"kind": "kubelet", "name": None},
        "user_agent": "kubelet/v1.14.5 (linux/amd64) kubernetes/0e9fcb4",
        "source_ips": ["13.88.18.92"],
        "code": 200,
        "status": None,
        "reason": None,
        "message": None,
        "causes": [],
        "succeeded": True,
        "authorization": {"decision": "allow", "reason": rbac},
        "status_write": {
            "partial": True,
            "phase": "Running",
            "conditions": [{**ready, "type": "Ready"}, {**ready, "type": "ContainersReady"}],
            "containers": [
                {
                    "name": "mypod",
                    "kind": "regular",
                    "state": "running",
                    "reason": None,
                    "message": None,
                    "exit_code": None,
                    "signal": None,
                    "started_at": "2019-09-20T12:56:55+00:00",
                    "finished_at": None,
                    "ready": True,
                    "started": None,
                    "restart_count": 0,
                    "last_state": None,
                    "allocated_resources": None,
                    "resources": None,
                    "restart_policy": None,
                    "prestop_sleep_seconds": None,
                }
            ],
        },
    }


def test_a_controllers_create_names_the_pod_from_the_answer_and_keeps_its_snapshot() -> None:
    """falco 2018 (minikube, audit.k8s.io/v1beta1, RequestResponse): the ReplicaSet controller creates a pod
    by ``generateName``: the request names none, the answer names nginx-deployment-5cdcc99dbf-rgw6z with
    its UID; the created pod (Pending, owned by its ReplicaSet) is kept as the pod object the watch would
    have delivered (ADDED) at the request's completion, and the request names that snapshot."""
    result = parse_audit((REAL / "falco-2018-minikube-rs-pod-create-privileged.jsonl").read_bytes())
    request, snapshot = result.observations
    uid = "8c845395-d85f-11e8-88b6-080027728ac4"
    done = at("2018-10-25 14:09:12.581541")
    assert (request.kind, request.observed_at, request.namespace, request.name) == (
        Kind.AUDIT,
        done,
        "default",
        "nginx-deployment-5cdcc99dbf-rgw6z",
    )
    payload = dict(request.payload)
    assert payload.pop("user")["username"] == "system:serviceaccount:kube-system:replicaset-controller"
    assert payload.pop("authorization")["decision"] == "allow"
    assert payload == {
        **UNSAID,
        "envelope": "native",
        "audit_id": "a362d22b-db3c-4590-9505-23782f12925f",
        "stage": "ResponseComplete",
        "level": "RequestResponse",
        "verb": "create",
        "api_group": "",
        "api_version": "v1",
        "resource": "pods",
        "subresource": None,
        "namespace": "default",
        "name": "nginx-deployment-5cdcc99dbf-rgw6z",
        "uid": uid,
        "request_uri": "/api/v1/namespaces/default/pods",
        "requested_at": "2018-10-25T14:09:12.572676+00:00",
        "completed_at": "2018-10-25T14:09:12.581541+00:00",
        "actor": {"kind": "controller", "name": "replicaset-controller"},
        "user_agent": None,
        "source_ips": ["::1"],
        "code": 201,
        "status": None,
        "reason": None,
        "message": None,
        "causes": [],
        "succeeded": True,
        "snapshots": [snapshot.dedupe_key],
    }
    assert snapshot.dedupe_key == f"pod:{uid}:237252"
    assert (snapshot.kind, snapshot.observed_at, snapshot.pod_uid, snapshot.name) == (
        Kind.POD,
        done,
        uid,
        "nginx-deployment-5cdcc99dbf-rgw6z",
    )
    assert (snapshot.payload["watch"], snapshot.payload["phase"], snapshot.payload["owner"]) == (
        "ADDED",
        "Pending",
        {
            "kind": "ReplicaSet",
            "name": "nginx-deployment-5cdcc99dbf",
            "uid": "8c800470-d85f-11e8-88b6-080027728ac4",
        },
    )
