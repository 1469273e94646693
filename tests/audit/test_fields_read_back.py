"""What the audit parser reads from real audit events, each field read back (issue #38: fields the parser
sets and no test checked, so a mutation sample of ``collectors/parsers/audit.py`` let them change freely).

Every event here is a real one, copied verbatim from tests/fixtures/real/audit (its README.md and
../SOURCES.md name where each was copied from); each expected value is read off the event itself by the
``audit.k8s.io/v1`` Event type's meaning (k8s-facts.md §13), never copied from the parser's output. The
few hand-written inputs say so ("synthetic:").
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collectors.parsers.audit import AuditParse, parse_audit
from timelines.lifecycle.observation import Kind, Source

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "audit"
KODEKLOUD = "kodekloud-2024-citadel-webapp-color-deletes.jsonl"
EKS = "eks-2021-kubelet-status-patch-oomkilled.jsonl"
FALCO_EXEC = "falco-2018-minikube-pod-exec.jsonl"


def real_lines(name: str) -> list[str]:
    return (REAL / name).read_text(encoding="utf-8").splitlines()


def parse_lines(*lines: str) -> AuditParse:
    return parse_audit([line.encode() for line in lines])


def test_a_metadata_level_delete_reads_back_every_field_of_its_event() -> None:
    """GIVEN the KodeKloud log's first deletion of citadel/webapp-color (line 12: Metadata level, so no
    request or response body; kubernetes-admin impersonating agent-smith; allowed by RBAC; 200)
    WHEN parsed THEN each field of the Event is in the payload as the Event says it: the request URI, both
    users, the impersonated one as the actor, the client, the source IP, both times, the authorizer's
    decision and reason; the API group of a core resource is "" (objectRef leaves it out); no UID
    (Metadata level has none); and the delete's options are unknown: the level records no body and the
    URI has no query."""
    line = real_lines(KODEKLOUD)[11]
    event = json.loads(line)
    assert event["auditID"] == "7876496f-3a3b-4e67-b02a-722a8af259f1"  # README.md: deletion 1
    result = parse_lines(line)
    (audit,) = result.observations
    assert (audit.kind, audit.source, audit.pod_uid, audit.node) == (Kind.AUDIT, Source.AUDIT, None, None)
    assert (audit.namespace, audit.name) == ("citadel", "webapp-color")
    assert audit.observed_at == datetime(2024, 3, 26, 15, 15, 41, 477069, tzinfo=UTC)  # stageTimestamp
    reason = 'RBAC: allowed by RoleBinding "important_binding_do_not_delete/citadel" of Role "important_role_do_not_delete" to User "agent-smith"'
    assert audit.payload == {
        "envelope": "native",
        "audit_id": "7876496f-3a3b-4e67-b02a-722a8af259f1",
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
        "requested_at": "2024-03-26T15:15:41.464361+00:00",
        "completed_at": "2024-03-26T15:15:41.477069+00:00",
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
        "rpc_code": None,
        "status": None,
        "reason": None,
        "message": None,
        "causes": [],
        "retry_after_seconds": None,
        "succeeded": True,
        "dry_run": False,
        "authorization": {"decision": "allow", "reason": reason},
        "truncated": False,
        "delete": {
            "options": "unknown",
            "grace_period_seconds": None,
            "propagation_policy": None,
            "preconditions": {"uid": None, "resource_version": None},
        },
        "eviction": None,
        "node_change": None,
        "status_write": None,
        "binding_node": None,
        "snapshots": [],
    }
    assert (result.events, result.used, dict(result.skipped), dict(result.rejected)) == (1, 1, {}, {})


def test_a_kubelets_status_patch_names_its_node_and_drops_the_credentials_of_its_token() -> None:
    """GIVEN EKS's Request-level status patch by system:node:ip-00-00-00-00.eu-west-1.compute.internal,
    whose user.extra holds the AWS credential (accessKeyId, arn, canonicalArn, sessionName)
    WHEN parsed THEN the audit observation is the kubelet's on that node, the user keeps its uid and
    groups and none of the credential (extra keeps only where a token is bound), the patch is a partial
    status write (phase Failed), and the UID comes from the patch body's metadata."""
    (line,) = real_lines(EKS)
    result = parse_lines(line)
    (audit,) = [o for o in result.observations if o.kind == Kind.AUDIT]
    node = "ip-00-00-00-00.eu-west-1.compute.internal"
    assert audit.node == node
    p = audit.payload
    assert p["actor"] == {"kind": "kubelet", "name": node}
    assert p["user"] == {
        "username": f"system:node:{node}",
        "uid": "heptio-authenticator-aws:12345678912:AROA2PRXA4MTEFOJD26WP",
        "groups": ["system:bootstrappers", "system:nodes", "system:authenticated"],
        "extra": {},
    }
    assert (p["level"], p["verb"], p["subresource"], p["uid"]) == (
        "Request",
        "patch",
        "status",
        "10177585-b79f-44a0-bdcc-c68ec12d012a",
    )
    assert p["request_uri"] == "/api/v1/namespaces/default/pods/stress-83-tbnq2/status"
    assert (p["user_agent"], p["source_ips"]) == (
        "kubelet/v1.21.2 (linux/amd64) kubernetes/729bdfc",
        ["54.75.17.171"],
    )
    assert p["authorization"] == {"decision": "allow", "reason": None}  # "" is no reason
    assert p["status_write"]["partial"] is True and p["status_write"]["phase"] == "Failed"
    assert p["delete"] is None and p["eviction"] is None and p["node_change"] is None


def test_a_request_to_a_subresource_that_is_not_lifecycle_is_skipped_by_that_name() -> None:
    """GIVEN minikube's ``kubectl exec`` (falco 2018: create pods/exec, ResponseStarted, 101 Switching
    Protocols) WHEN parsed THEN it is an audit event read and skipped as another subresource (an exec
    says nothing of the pod's lifecycle), listed under its shape, and gives no observation."""
    (line,) = real_lines(FALCO_EXEC)
    result = parse_lines(line)
    assert result.observations == []
    assert (result.events, result.used) == (1, 0)
    assert dict(result.skipped) == {"other_subresource": 1}
    assert dict(result.ignored) == {"create pods/exec": 1}


def payload_of(event: dict[str, Any]) -> dict[str, Any]:
    result = parse_lines(json.dumps(event))
    (audit,) = [o for o in result.observations if o.kind == Kind.AUDIT]
    payload: dict[str, Any] = audit.payload
    return payload


AKS_RAW = "aks-2025-eviction-429-unwrapped.jsonl"


def test_a_refused_eviction_reads_back_its_status_its_budget_and_the_grace_it_asked_for() -> None:
    """GIVEN AKS's real 429 eviction by the cluster autoscaler (an ``Eviction`` of policy/v1beta1 asking
    for deleteOptions.gracePeriodSeconds 30; responseStatus Failure / TooManyRequests, one
    DisruptionBudget cause) WHEN parsed THEN the payload says the request failed with that status word,
    reason, message and cause (which names no field), no retry delay (the Status gives none), and the
    eviction is refused by budget ``service`` at 16/16 with the grace and the Eviction's API version the
    request sent."""
    (line,) = real_lines(AKS_RAW)
    p = payload_of(json.loads(line))
    assert (p["code"], p["status"], p["reason"], p["succeeded"]) == (429, "Failure", "TooManyRequests", False)
    assert p["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert p["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget service needs 16 healthy pods and has 16 currently",
            "field": None,
        }
    ]
    assert p["retry_after_seconds"] is None
    assert p["eviction"] == {
        "outcome": "refused",
        "cause": "insufficient_pods",
        "pdb": "service",
        "desired_healthy": 16,
        "current_healthy": 16,
        "detail": None,
        "grace_period_seconds": 30,
        "api_version": "policy/v1beta1",
    }
    assert p["actor"] == {"kind": "user", "name": "aksService"}
    assert p["user_agent"] == "cluster-autoscaler/v0.0.0 (linux/amd64) kubernetes/$Format"
    assert p["snapshots"] == []  # the response is a Status, not the pod


def _aks_eviction_answered(status: dict[str, Any]) -> dict[str, Any]:
    """synthetic: AKS's real eviction event (above) with its responseStatus replaced by another answer
    eviction.go gives (k8s-facts.md §13.5); everything else is the real request."""
    event: dict[str, Any] = json.loads(real_lines(AKS_RAW)[0])
    event["responseStatus"] = status
    del event["responseObject"]
    return event


def test_a_budget_still_being_processed_asks_the_client_to_retry_in_ten_seconds() -> None:
    """GIVEN an eviction answered 429 because the PDB controller has not yet observed the budget's
    generation (eviction.go: cause "The disruption budget <pdb> is still being processed by the server.",
    details.retryAfterSeconds 10) WHEN parsed THEN the payload keeps the retry delay and the eviction is
    refused with cause not_observed naming the budget."""
    event = _aks_eviction_answered(
        {
            "metadata": {},
            "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": "The disruption budget service is still being processed by the server.",
                    }
                ],
                "retryAfterSeconds": 10,
            },
            "code": 429,
        }
    )
    p = payload_of(event)
    assert p["retry_after_seconds"] == 10
    assert (p["eviction"]["outcome"], p["eviction"]["cause"], p["eviction"]["pdb"]) == (
        "refused",
        "not_observed",
        "service",
    )


def test_a_negative_budget_forbids_the_eviction() -> None:
    """GIVEN an eviction answered 403 because the budget's disruptionsAllowed is negative (eviction.go:
    ``poddisruptionbudget.policy "<pdb>" is forbidden: pdb disruptions allowed is negative``) WHEN parsed
    THEN the eviction is forbidden (not refused, not failed) with cause negative_budget naming the budget."""
    event = _aks_eviction_answered(
        {
            "metadata": {},
            "status": "Failure",
            "message": 'poddisruptionbudget.policy "service" is forbidden: pdb disruptions allowed is negative',
            "reason": "Forbidden",
            "code": 403,
        }
    )
    eviction = payload_of(event)["eviction"]
    assert (eviction["outcome"], eviction["cause"], eviction["pdb"]) == (
        "forbidden",
        "negative_budget",
        "service",
    )


def test_an_eviction_whose_budget_update_kept_conflicting_failed() -> None:
    """GIVEN an eviction answered 504 after the PDB update's conflicts were exhausted (eviction.go:
    ``Timeout: couldn't update PodDisruptionBudget "<pdb>" due to conflicts``) WHEN parsed THEN the
    eviction failed (neither granted nor refused) with cause conflicts naming the budget."""
    event = _aks_eviction_answered(
        {
            "metadata": {},
            "status": "Failure",
            "message": 'Timeout: couldn\'t update PodDisruptionBudget "service" due to conflicts',
            "reason": "Timeout",
            "code": 504,
        }
    )
    eviction = payload_of(event)["eviction"]
    assert (eviction["outcome"], eviction["cause"], eviction["pdb"]) == ("failed", "conflicts", "service")


def test_a_granted_eviction_is_a_201_success() -> None:
    """GIVEN an eviction answered 201 ``{"metadata":{},"status":"Success","code":201}`` (eviction.go: the pod
    is deleted inside the API server) WHEN parsed THEN the request succeeded and the eviction is granted,
    with no budget cause."""
    p = payload_of(_aks_eviction_answered({"metadata": {}, "status": "Success", "code": 201}))
    assert (p["succeeded"], p["eviction"]["outcome"], p["eviction"]["cause"]) == (True, "granted", None)


GCS = "gcsreader-2019-gce-scale-node-heartbeats.jsonl"


def test_heartbeats_and_watches_of_other_resources_are_each_counted_by_reason() -> None:
    """GIVEN a cut of a GCE scale cluster's audit log (gcsreader 2019; SOURCES.md): 3 kubelet lease updates,
    2 watches of a secret and one of services (none of them a resource podlife follows), and 4 patches of
    nodes/status with no Node body (heartbeats) WHEN parsed THEN every one of the 10 events is read and
    counted under its reason, one count per event, and none becomes an observation."""
    lines = real_lines(GCS)
    resources = [json.loads(line)["objectRef"]["resource"] for line in lines]
    not_followed = sum(r in ("leases", "secrets", "services") for r in resources)
    assert (len(lines), not_followed) == (10, 6)
    result = parse_lines(*lines)
    assert result.observations == []
    assert (result.events, result.used) == (10, 0)
    assert dict(result.skipped) == {"other_resource": not_followed, "node_heartbeat": 10 - not_followed}
    assert dict(result.ignored) == {
        "update coordination.k8s.io/leases": 3,
        "watch secrets": 2,
        "watch services": 1,
    }


# Real: the comment of p0lyn0mial on 2024-10-07 in github.com/openshift/cluster-kube-apiserver-operator
# pull request #1751 (an OpenShift CI cluster's kube-apiserver 1.31.1 audit log), copied verbatim.
READYZ = (
    '{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata",'
    '"auditID":"fb6a08f8-3656-4435-899a-74dee6416bf1","stage":"ResponseComplete","requestURI":"/readyz",'
    '"verb":"get","user":{"username":"system:apiserver","uid":"45190fa5-6708-486e-9522-40785dec4762",'
    '"groups":["system:masters"]},"sourceIPs":["::1"],'
    '"userAgent":"kube-apiserver/v1.31.1 (linux/amd64) kubernetes/8540bd4",'
    '"responseStatus":{"metadata":{},"code":500},"requestReceivedTimestamp":"2024-10-07T09:40:42.005730Z",'
    '"stageTimestamp":"2024-10-07T09:40:42.006133Z","annotations":{"authorization.k8s.io/decision":"allow",'
    '"authorization.k8s.io/reason":""}}'
)


def test_a_request_for_a_non_resource_url_is_counted_as_such_under_its_path() -> None:
    """GIVEN the API server's own ``get /readyz`` (a non-resource URL: the Event has no objectRef)
    WHEN parsed THEN it is one event, skipped once as non_resource and listed under ``get /readyz``."""
    result = parse_lines(READYZ)
    assert result.observations == []
    assert (result.events, dict(result.skipped), dict(result.ignored)) == (
        1,
        {"non_resource": 1},
        {"get /readyz": 1},
    )


def _eks_event() -> dict[str, Any]:
    (line,) = real_lines(EKS)
    event: dict[str, Any] = json.loads(line)
    return event


def test_an_event_without_a_stage_is_refused_naming_its_audit_id() -> None:
    """GIVEN EKS's real status patch with its ``stage`` taken out (synthetic: a damaged record) WHEN parsed
    THEN nothing is made of it and it is refused as no_stage, quoted by line and auditID (the API server
    always writes the stage: an event without one cannot be placed in a request's life)."""
    event = _eks_event()
    del event["stage"]
    result = parse_lines(json.dumps(event))
    assert result.observations == []
    assert dict(result.rejected) == {"no_stage": 1}
    assert result.examples == ["no_stage: line 1 (0e507148-8b16-4dfb-934b-9b05dba50974)"]


def test_an_event_without_a_readable_time_is_refused_naming_its_audit_id() -> None:
    """GIVEN EKS's real status patch with requestReceivedTimestamp and stageTimestamp taken out
    (synthetic: a damaged record) WHEN parsed THEN it is refused as no_time, quoted by line and auditID:
    an observation needs a time."""
    event = _eks_event()
    del event["requestReceivedTimestamp"], event["stageTimestamp"]
    result = parse_lines(json.dumps(event))
    assert result.observations == []
    assert dict(result.rejected) == {"no_time": 1}
    assert result.examples == ["no_time: line 1 (0e507148-8b16-4dfb-934b-9b05dba50974)"]


def test_an_event_naming_a_uid_that_cannot_be_a_pods_is_refused_as_invalid() -> None:
    """GIVEN EKS's real status patch whose body's metadata.uid is 65 characters (synthetic: a pod UID is a
    UUID, 36 characters; the observation contract takes at most 64) WHEN parsed THEN the event gives no
    observation and is refused as invalid, quoted by line and auditID with what was wrong."""
    event = _eks_event()
    event["requestObject"]["metadata"]["uid"] = "u" * 65
    result = parse_lines(json.dumps(event))
    assert result.observations == []
    assert (dict(result.rejected), result.used) == ({"invalid": 1}, 0)
    (example,) = result.examples
    assert example.startswith("invalid: line 1 (0e507148-8b16-4dfb-934b-9b05dba50974): ")
    assert "the object's uid" in example


GKE = "qwiklabs-2024-gke-binauthz-pod-create-denied.json"


def test_a_gke_log_entry_maps_each_field_to_the_events_and_says_what_it_lacks() -> None:
    """GIVEN GKE's real Cloud Audit Logs entry of a pod create denied by the Binary Authorization webhook
    (Qwiklabs 2024; SOURCES.md): resourceName core/v1/namespaces/default/pods/nginx, the caller's IP and
    user agent in requestMetadata, the HTTP answer as a Status in ``response`` (400 VIOLATES_POLICY), the
    google.rpc code 3 in ``status``, the authorizer's annotations as the entry's labels, ``timestamp``
    05:13:08.760303 (``receiveTimestamp`` is the export's time) WHEN parsed THEN each field is where the
    Event would have it: group "" for GKE's "core", the request URI the resource name, the insertId as the
    auditID, the event placed at ``timestamp``; and what GKE does not record (level, request time, groups,
    uid) is None."""
    entry = json.loads((REAL / GKE).read_text(encoding="utf-8"))
    result = parse_audit((REAL / GKE).read_bytes())
    (audit,) = result.observations
    assert audit.observed_at == datetime(2024, 5, 12, 5, 13, 8, 760303, tzinfo=UTC)
    denial = entry["protoPayload"]["status"]["message"]
    assert denial == entry["protoPayload"]["response"]["message"]
    assert audit.payload == {
        "envelope": "gke",
        "audit_id": "5a3a3498-e69a-47f5-a02d-67bcc8f9efae",
        "stage": "ResponseComplete",
        "level": None,
        "verb": "create",
        "api_group": "",
        "api_version": "v1",
        "resource": "pods",
        "subresource": None,
        "namespace": "default",
        "name": "nginx",
        "uid": None,
        "request_uri": "/core/v1/namespaces/default/pods/nginx",
        "requested_at": None,
        "completed_at": "2024-05-12T05:13:08.760303+00:00",
        "user": {
            "username": "student-01-03aeec6f7a0c@qwiklabs.net",
            "uid": None,
            "groups": None,
            "extra": {},
        },
        "impersonated_user": None,
        "actor": {"kind": "user", "name": "student-01-03aeec6f7a0c@qwiklabs.net"},
        "user_agent": "kubectl/v1.28.9 (linux/amd64) kubernetes/587f5fe",
        "source_ips": ["34.143.180.117"],
        "code": 400,
        "rpc_code": 3,
        "status": "Failure",
        "reason": "VIOLATES_POLICY",
        "message": denial,
        "causes": [
            {
                "reason": "'gcr.io/qwiklabs-gcp-04-e98db2f05087/nginx:latest' : Denied by an ALWAYS_DENY admission rule\n",
                "message": None,
                "field": None,
            }
        ],
        "retry_after_seconds": None,
        "succeeded": False,
        "dry_run": False,
        "authorization": {"decision": "allow", "reason": "access granted by IAM permissions."},
        "truncated": False,
        "delete": None,
        "eviction": None,
        "node_change": None,
        "status_write": None,
        "binding_node": None,
        "snapshots": [],
    }


def test_a_gke_entry_whose_rpc_status_has_no_code_succeeded() -> None:
    """GIVEN GKE's real entry above as it would read had the create gone through (synthetic: ``status`` {}
    and ``response`` the created Pod, given a uid, instead of the denying Status): google.rpc.Status leaves code 0 (OK)
    out of its JSON form, and a Pod response carries no HTTP code WHEN parsed THEN the rpc code is 0 and
    the request succeeded, with no HTTP code, and the created pod is shown."""
    entry = json.loads((REAL / GKE).read_text(encoding="utf-8"))
    proto = entry["protoPayload"]
    proto["status"] = {}
    created = {
        "uid": "0b7e1c7e-8c1a-4b57-9d36-3f0f2c9a1e11",
        "resourceVersion": "1",
        "creationTimestamp": entry["timestamp"],
    }
    pod = proto["request"]
    proto["response"] = {**pod, "@type": "core.k8s.io/v1.Pod", "metadata": {**pod["metadata"], **created}}
    p = payload_of(entry)
    assert (p["rpc_code"], p["code"], p["succeeded"]) == (0, None, True)
    assert p["snapshots"] == ["pod:0b7e1c7e-8c1a-4b57-9d36-3f0f2c9a1e11:1"]


def test_a_server_side_dry_run_eviction_is_marked_dry_run() -> None:
    """GIVEN AKS's real eviction as ``kubectl drain --dry-run=server`` would send it (synthetic: its
    deleteOptions with ``dryRun: ["All"]``) answered 201 WHEN parsed THEN the payload says dry run (the
    eviction only checked: eviction.go writes no PDB and deletes nothing)."""
    event = _aks_eviction_answered({"metadata": {}, "status": "Success", "code": 201})
    event["requestObject"]["deleteOptions"]["dryRun"] = ["All"]
    p = payload_of(event)
    assert (p["dry_run"], p["succeeded"], p["eviction"]["outcome"]) == (True, True, "granted")


def test_only_a_completion_makes_an_observation_other_stages_are_counted_by_name() -> None:
    """GIVEN the KodeKloud deletion (line 12) re-staged (synthetic): as ResponseStarted (the stage the API
    server writes, for long-running requests, once headers are sent), and as a stage audit.k8s.io/v1 does
    not define WHEN parsed THEN neither makes an observation: the first is skipped as response_started, the
    second as unknown_stage, each counted once."""
    event = json.loads(real_lines(KODEKLOUD)[11])
    started = parse_lines(json.dumps({**event, "stage": "ResponseStarted"}))
    unknown = parse_lines(json.dumps({**event, "stage": "ResponseFinished"}))
    assert (started.observations, dict(started.skipped)) == ([], {"response_started": 1})
    assert (unknown.observations, dict(unknown.skipped)) == ([], {"unknown_stage": 1})


# Real: the kubelet's eviction message in tests/fixtures/real/kubelet/k8s-117822-localized-month-1.28-eviction-v4.journal
# ("Evicting pod" pod="default/uuuuu", message="…"), which the kubelet also writes as the pod's status message.
EVICTED_MESSAGE = (
    "The node was low on resource: memory. Threshold quantity: 2Gi, available: 719212Ki. "
    "Container u was using 1847180Ki, request is 0, has larger consumption of memory. "
)


def test_a_status_patch_of_an_evicted_pod_keeps_its_reason_and_message() -> None:
    """GIVEN the kubelet's status patch of a pod it evicted (synthetic: EKS's real Request-level status patch
    with its body's status replaced by what the eviction manager writes: phase Failed, reason Evicted and
    the eviction message) WHEN parsed THEN the status write is partial (a patch) and carries exactly the
    phase, reason and message the patch sets, nothing it does not."""
    event = _eks_event()
    event["requestObject"]["status"] = {"phase": "Failed", "reason": "Evicted", "message": EVICTED_MESSAGE}
    p = payload_of(event)
    assert p["status_write"] == {
        "partial": True,
        "phase": "Failed",
        "reason": "Evicted",
        "message": EVICTED_MESSAGE,
    }


def test_a_request_level_delete_without_a_body_takes_the_objects_own_grace() -> None:
    """GIVEN KodeKloud's real deletion (line 12) as a Request-level policy would log it (synthetic: level
    Request; the client sent no DeleteOptions and the URI has no query) WHEN parsed THEN its delete options
    are ``default``: the request was read, none came, so the pod's own terminationGracePeriodSeconds applies
    (at Metadata level the same event says ``unknown``)."""
    event = json.loads(real_lines(KODEKLOUD)[11])
    p = payload_of({**event, "level": "Request"})
    assert p["delete"] == {
        "options": "default",
        "grace_period_seconds": None,
        "propagation_policy": None,
        "preconditions": {"uid": None, "resource_version": None},
    }


def test_delete_options_sent_as_query_parameters_are_read_from_the_uri() -> None:
    """GIVEN KodeKloud's real Metadata-level deletion (line 12) as a client that passes DeleteOptions as
    query parameters would send it (synthetic: ``?gracePeriodSeconds=0&propagationPolicy=Foreground`` on
    its URI; the API server accepts DeleteOptions either way) WHEN parsed THEN the options come from the
    query: grace 0 and Foreground propagation, even though the level records no body."""
    event = json.loads(real_lines(KODEKLOUD)[11])
    uri = event["requestURI"] + "?gracePeriodSeconds=0&propagationPolicy=Foreground"
    p = payload_of({**event, "requestURI": uri})
    assert p["delete"] == {
        "options": "query",
        "grace_period_seconds": 0,
        "propagation_policy": "Foreground",
        "preconditions": {"uid": None, "resource_version": None},
    }
    assert p["request_uri"] == uri


def _node_json_patch(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """synthetic: gcsreader's real Request-level node patch (line 3) turned into a patch of the Node itself
    whose body is the JSON patch (RFC 6902) ``ops`` (what a client sends with content type
    application/json-patch+json; kubectl's cordon sends a strategic merge patch instead)."""
    event: dict[str, Any] = json.loads(real_lines(GCS)[2])
    event["requestURI"] = event["requestURI"].removesuffix("/status")
    del event["objectRef"]["subresource"]
    event["requestObject"] = ops
    return event


TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def test_a_json_patch_of_the_unschedulable_taint_cordons_or_uncordons_the_node() -> None:
    """GIVEN JSON patches of a Node's taints: appending the node.kubernetes.io/unschedulable taint
    (``add /spec/taints/-``), replacing the taints with a list holding it, replacing them with a list
    without it, and removing them WHEN parsed THEN the first two cordon (the taint is set), the last two
    uncordon (it is not), and none says anything of spec.unschedulable, which they do not touch."""
    other = {"key": "example.com/maintenance", "effect": "NoSchedule"}
    patches: list[list[dict[str, Any]]] = [
        [{"op": "add", "path": "/spec/taints/-", "value": TAINT}],
        [{"op": "replace", "path": "/spec/taints", "value": [other, TAINT]}],
        [{"op": "replace", "path": "/spec/taints", "value": [other]}],
        [{"op": "remove", "path": "/spec/taints"}],
    ]
    changes = [payload_of(_node_json_patch(ops))["node_change"] for ops in patches]
    assert changes == [
        {"unschedulable": None, "unschedulable_taint": True, "change": "cordon"},
        {"unschedulable": None, "unschedulable_taint": True, "change": "cordon"},
        {"unschedulable": None, "unschedulable_taint": False, "change": "uncordon"},
        {"unschedulable": None, "unschedulable_taint": False, "change": "uncordon"},
    ]


AKKERIS = REAL.parent / "kubelet" / "akkeris-2019-pod-being-deleted.json"


def _answered_with_the_pod(verb: str, grace: int, finalizers: list[str]) -> list[str]:
    """synthetic: KodeKloud's real deletion (line 12) logged at RequestResponse level, for ``verb``, of
    akkeris's real pod being deleted (deletionTimestamp set), answered with that pod with ``grace`` seconds
    of deletion grace left and ``finalizers``; the kinds of the observations it gives."""
    pod = json.loads(AKKERIS.read_text(encoding="utf-8"))
    pod["metadata"] = {**pod["metadata"], "deletionGracePeriodSeconds": grace, "finalizers": finalizers}
    event = json.loads(real_lines(KODEKLOUD)[11])
    if verb == "deletecollection":  # the answer is a PodList (its items carry no kind)
        del pod["kind"]
        body: dict[str, Any] = {"kind": "PodList", "apiVersion": "v1", "items": [pod]}
    else:
        body = pod
    event["level"], event["verb"], event["responseObject"] = "RequestResponse", verb, body
    event["objectRef"] = {
        **event["objectRef"],
        "namespace": "pipline-test-space1",
        "name": pod["metadata"]["name"],
    }
    return [o.kind for o in parse_lines(json.dumps(event)).observations]


def test_an_object_a_delete_or_update_answers_with_is_gone_only_with_no_grace_and_no_finalizers() -> None:
    """The generic registry removes an object whose deletion has no grace left and no finalizers (a
    DELETE with grace 0; an UPDATE that leaves a deleting object so, shouldDeleteDuringUpdate); while a
    finalizer or grace remains, the object is still there, deleting. GIVEN delete, update and
    deletecollection requests answered with a deleting pod (a PodList for the last) WHEN parsed THEN the snapshot is a deletion only in the first case."""
    assert _answered_with_the_pod("delete", 30, []) == [Kind.AUDIT, Kind.POD]
    assert _answered_with_the_pod("delete", 0, ["example.com/hold"]) == [Kind.AUDIT, Kind.POD]
    assert _answered_with_the_pod("delete", 0, []) == [Kind.AUDIT, Kind.POD_DELETED]
    assert _answered_with_the_pod("update", 0, ["example.com/hold"]) == [Kind.AUDIT, Kind.POD]
    assert _answered_with_the_pod("update", 0, []) == [Kind.AUDIT, Kind.POD_DELETED]
    assert _answered_with_the_pod("deletecollection", 30, []) == [Kind.AUDIT, Kind.POD]
    assert _answered_with_the_pod("deletecollection", 0, []) == [Kind.AUDIT, Kind.POD_DELETED]


def test_each_request_received_and_never_completed_in_the_input_is_counted_unpaired() -> None:
    """GIVEN the RequestReceived events of two real requests (rxm 2021: kubectl run's pod create;
    kubeadm 2022: the kubelet's mirror-pod status patch) without their ResponseComplete events (the input
    was cut between the stages) WHEN parsed THEN both are skipped as request_received and, at the end of
    the input, both counted unpaired; given with their completions, none is."""
    rxm = real_lines("rxm-2021-webhook-eventlist-kubectl-run-create.jsonl")
    mirror = real_lines("kubeadm-2022-mirror-pod-status-patch-metadata.jsonl")
    cut = parse_lines(rxm[0], mirror[0])
    assert (cut.observations, dict(cut.skipped), cut.unpaired) == ([], {"request_received": 2}, 2)
    whole = parse_lines(rxm[0], mirror[0], rxm[1], mirror[1])
    assert (whole.unpaired, len(whole.observations) >= 2) == (0, True)
