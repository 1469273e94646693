"""The audit parser on the scenario fixtures (tests/fixtures/audit, written from the audit API types and
k8s-facts.md §13): what each request becomes, value by value."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from collectors.parsers.audit import parse_audit
from tests.audit.helpers import FIXTURES, audits, by_id, parsed
from timelines.lifecycle.observation import Kind, Source


def test_drain_refused_evictions_name_the_pdb_and_its_numbers() -> None:
    result = parsed("drain-refused-evictions.jsonl")
    evictions = [o for o in audits(result) if o.payload["subresource"] == "eviction"]
    outcomes = [(o.payload["eviction"]["outcome"], o.payload["code"]) for o in evictions]
    assert outcomes == [("refused", 429)] * 4 + [("granted", 201)]
    refused = evictions[0].payload
    assert refused["eviction"] == {
        "outcome": "refused",
        "cause": "insufficient_pods",
        "pdb": "web",
        "desired_healthy": 2,
        "current_healthy": 2,
        "detail": None,
        "grace_period_seconds": None,
        "api_version": "policy/v1",
    }
    assert refused["reason"] == "TooManyRequests"
    assert refused["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert refused["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
            "field": None,
        }
    ]
    assert refused["actor"] == {"kind": "user", "name": "kubernetes-admin"}
    assert refused["user_agent"].startswith("kubectl/v1.30.2")
    assert refused["source_ips"] == ["10.0.0.12"]
    assert all(o.namespace == "shop" and o.name == "web-7d9f8b6c4-x2k9p" for o in evictions)
    # microseconds from stageTimestamp, the request's own time kept beside it
    assert evictions[0].observed_at == datetime(2024, 6, 7, 6, 54, 0, 218236, tzinfo=UTC)
    assert refused["requested_at"] == "2024-06-07T06:54:00.210331+00:00"
    assert refused["completed_at"] == "2024-06-07T06:54:00.218236+00:00"


def test_drain_cordon_taint_and_the_kubelets_final_delete() -> None:
    result = parsed("drain-refused-evictions.jsonl")
    events = by_id(result)
    cordon = events["b7e3c1d2-4a5f-4e6d-8c9b-0a1f2e3d4c5b"]
    assert (cordon.node, cordon.payload["node_change"]) == (
        "worker-1",
        {"unschedulable": True, "unschedulable_taint": None, "change": "cordon"},
    )
    taint = events["d1c2b3a4-5e6f-4a7b-8c9d-0e1f2a3b4c5d"]
    assert taint.payload["actor"] == {"kind": "controller", "name": "node-controller"}
    assert taint.payload["node_change"]["unschedulable_taint"] is True
    # the credential id of the controller's token is dropped; nothing else was in extra
    assert taint.payload["user"]["extra"] == {}
    final = events["2b3c4d5e-8888-4999-8aaa-011122223333"]
    assert final.payload["actor"] == {"kind": "kubelet", "name": "worker-1"}
    assert final.node == "worker-1"
    assert final.payload["uid"] == "0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3"  # from preconditions.uid
    assert final.payload["delete"] == {
        "options": "body",
        "grace_period_seconds": 0,
        "propagation_policy": None,
        "preconditions": {"uid": "0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3", "resource_version": None},
    }
    gone = [o for o in result.observations if o.kind == Kind.POD_DELETED]
    assert [(o.dedupe_key, o.source, o.pod_uid) for o in gone] == [
        (
            "pod:0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3:48866:deleted",
            Source.AUDIT,
            "0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3",
        )
    ]
    assert final.payload["snapshots"] == [gone[0].dedupe_key]


def test_drain_snapshots_are_the_watch_shapes_with_source_audit() -> None:
    result = parsed("drain-refused-evictions.jsonl")
    pods = [o for o in result.observations if o.kind == Kind.POD]
    assert [(o.dedupe_key, o.payload["watch"], o.payload["phase"], o.payload["node"]) for o in pods] == [
        ("pod:c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f:48801", "ADDED", "Pending", None),
        ("pod:c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f:48822", "MODIFIED", "Running", "worker-3"),
        ("pod:0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3:48861", "MODIFIED", "Succeeded", "worker-1"),
    ]
    assert {o.source for o in pods} == {Source.AUDIT}
    evicted = pods[2].payload
    assert evicted["deletion_grace_seconds"] == 30
    assert evicted["owner"] == {
        "kind": "ReplicaSet",
        "name": "web-7d9f8b6c4",
        "uid": "5e0c8a1d-6b2f-4c3e-9d4a-1f2e3d4c5b6a",
    }
    target = next(c for c in evicted["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "EvictionByEvictionAPI")
    # PDB status writes are PUTs of the whole object: a snapshot, its new resourceVersion unknown
    pdbs = [o for o in result.observations if o.kind == Kind.PDB]
    assert [o.payload["status"]["disruptions_allowed"] for o in pdbs] == [1, 0]
    assert [o.payload["resource_version"] for o in pdbs] == [None, None]
    assert pdbs[1].payload["status"]["disrupted_pods"] == {"web-7d9f8b6c4-x2k9p": "2024-06-07T06:54:20+00:00"}
    writers = {
        o.payload["actor"]["kind"] for o in audits(result) if o.payload["resource"] == "poddisruptionbudgets"
    }
    assert writers == {"controller", "apiserver"}


def test_drain_pairs_request_received_and_counts_the_unfinished_one() -> None:
    result = parsed("drain-refused-evictions.jsonl")
    assert result.events == 30
    assert result.skipped["request_received"] == 15
    assert result.skipped["read_verb"] == 1  # the API server's own PDB list inside the eviction
    assert result.unpaired == 1  # the last eviction's RequestReceived has no completion in the file
    assert len(audits(result)) == 14
    assert not result.rejected


def test_scheduler_binding_and_controller_create() -> None:
    events = by_id(parsed("drain-refused-evictions.jsonl"))
    binding = events["5cd0a11e-2222-4333-8444-a55566667777"]
    assert binding.payload["actor"] == {"kind": "scheduler", "name": "kube-scheduler"}
    assert (binding.payload["binding_node"], binding.node) == ("worker-3", "worker-3")
    assert (
        binding.payload["uid"] == "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f"
    )  # objectRef.uid from the Binding's metadata
    created = events["c0ffee00-1111-4222-8333-944455556666"]
    # generateName: the name exists only in the response
    assert (created.name, created.payload["uid"]) == (
        "web-7d9f8b6c4-m5n7r",
        "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f",
    )
    assert created.payload["actor"] == {"kind": "controller", "name": "replicaset-controller"}


def test_garbage_collector_deletes() -> None:
    result = parsed("gc-delete.jsonl")
    deletes = audits(result)
    assert [(o.name, o.payload["code"], o.payload["succeeded"]) for o in deletes] == [
        ("web-7d9f8b6c4-q8w4z", 200, True),
        ("web-7d9f8b6c4-m5n7r", 200, True),
        ("web-7d9f8b6c4-x2k9p", 404, False),
    ]
    for o in deletes:
        assert o.payload["actor"] == {"kind": "controller", "name": "generic-garbage-collector"}
        assert o.payload["delete"]["propagation_policy"] == "Background"
        assert o.payload["uid"] == o.payload["delete"]["preconditions"]["uid"]
    assert deletes[2].payload["reason"] == "NotFound"
    snapshots = [o for o in result.observations if o.kind == Kind.POD]
    assert [(o.payload["name"], o.payload["deletion_grace_seconds"]) for o in snapshots] == [
        ("web-7d9f8b6c4-q8w4z", 30),
        ("web-7d9f8b6c4-m5n7r", 30),
    ]
    # the deployment and replicaset deletes, a lease renewal, a get and a watch are not followed
    assert result.skipped == {"other_resource": 5, "request_received": 3, "read_verb": 2}


def test_kubectl_delete_grace_periods_dry_run_and_impersonation() -> None:
    events = by_id(parsed("kubectl-delete-grace.jsonl"))

    def grace(audit_id: str) -> tuple[str, int | None]:
        d = events[audit_id].payload["delete"]
        return d["options"], d["grace_period_seconds"]

    assert grace("bb00bb00-0000-4000-8000-000000000001") == ("body", 5)  # --grace-period=5
    assert grace("bb00bb00-0000-4000-8000-000000000002") == ("body", 1)  # --now
    assert grace("bb00bb00-0000-4000-8000-000000000003") == ("body", 0)  # --force --grace-period=0
    assert grace("bb00bb00-0000-4000-8000-000000000004") == (
        "query",
        10,
    )  # Metadata level, ?gracePeriodSeconds
    assert grace("bb00bb00-0000-4000-8000-000000000005") == ("body", None)  # the pod's own grace applies
    assert grace("bb00bb00-0000-4000-8000-000000000007") == (
        "unknown",
        None,
    )  # refused before the body was read
    impersonated = events["bb00bb00-0000-4000-8000-000000000005"].payload
    assert impersonated["actor"] == {"kind": "user", "name": "alice"}
    assert impersonated["user"]["username"] == "kubernetes-admin"
    assert impersonated["impersonated_user"]["groups"] == ["dev", "system:authenticated"]
    dry = events["bb00bb00-0000-4000-8000-000000000006"].payload
    assert (dry["dry_run"], dry["succeeded"], dry["snapshots"]) == (True, True, [])
    forbidden = events["bb00bb00-0000-4000-8000-000000000007"].payload
    assert (forbidden["code"], forbidden["succeeded"], forbidden["authorization"]["decision"]) == (
        403,
        False,
        "forbid",
    )
    assert events["bb00bb00-0000-4000-8000-000000000004"].payload["source_ips"] == ["203.0.113.7", "10.0.0.3"]


def test_kubectl_force_delete_is_gone_at_once_and_now_is_still_terminating() -> None:
    result = parsed("kubectl-delete-grace.jsonl")
    snapshots = [
        (o.kind, o.payload["name"], o.payload["deletion_grace_seconds"])
        for o in result.observations
        if o.kind != Kind.AUDIT
    ]
    assert snapshots == [(Kind.POD, "scratch", 1), (Kind.POD_DELETED, "stuck-0", 0)]


def test_kubelet_status_writes() -> None:
    result = parsed("kubelet-status-patches.jsonl")
    events = by_id(result)
    patches = [events[f"cc00cc00-0000-4000-8000-00000000000{i}"].payload for i in (1, 2, 3)]
    assert [p["uid"] for p in patches] == [
        "5a5a5a5a-6b6b-4c7c-8d8d-9e9e0f0f1a1a"
    ] * 3  # metadata.uid of the patch
    assert [p["status_write"].get("phase") for p in patches] == [None, "Running", "Succeeded"]
    assert [p["status_write"]["containers"][0]["state"] for p in patches] == [
        "waiting",
        "running",
        "terminated",
    ]
    assert patches[0]["status_write"]["containers"][0]["reason"] == "ContainerCreating"
    assert patches[0]["status_write"]["start_time"] == "2024-06-07T13:29:59+00:00"
    ready = {c["type"]: c["status"] for c in patches[1]["status_write"]["conditions"]}
    assert ready == {"PodReadyToStartContainers": "True", "Ready": "True", "ContainersReady": "True"}
    assert all(p["status_write"]["partial"] for p in patches)
    terminated = patches[2]["status_write"]["containers"][0]
    assert (terminated["exit_code"], terminated["reason"]) == (0, "Completed")
    taint = events["cc00cc00-0000-4000-8000-000000000004"].payload
    assert taint["actor"] == {"kind": "controller", "name": "taint-eviction-controller"}
    assert taint["status_write"]["conditions"][0]["reason"] == "DeletionByTaintManager"
    gate = events["cc00cc00-0000-4000-8000-000000000005"].payload
    assert gate["status_write"] == {"partial": True, "json_patch_paths": ["/status/conditions/-"]}
    assert gate["actor"] == {"kind": "serviceaccount", "name": "ops/readiness-gate"}
    assert gate["user"]["extra"] == {  # where the token is bound is kept; its credential id is not
        "authentication.kubernetes.io/pod-name": ["readiness-gate-6c9f7-xyz12"],
        "authentication.kubernetes.io/pod-uid": ["4b4b4b4b-3c3c-4d2d-8e1e-0f0f9a9a8b8b"],
        "authentication.kubernetes.io/node-name": ["worker-1"],
    }
    panic = events["cc00cc00-0000-4000-8000-000000000007"]
    assert (panic.payload["stage"], panic.payload["code"], panic.payload["succeeded"]) == (
        "Panic",
        500,
        False,
    )
    assert panic.dedupe_key.startswith("audit:cc00cc00-0000-4000-8000-000000000007:Panic:")
    # Request level: no bodies come back, so no snapshots; every pod_uid column stays empty (docs/audit.md)
    assert {o.kind for o in result.observations} == {Kind.AUDIT}
    assert {o.pod_uid for o in result.observations} == {None}


def test_cordon_uncordon_every_way() -> None:
    result = parsed("cordon.jsonl")
    changes = [
        (o.payload["actor"]["name"], o.payload["verb"], o.payload["code"], o.payload["node_change"])
        for o in audits(result)
    ]
    assert changes == [
        (
            "kubernetes-admin",
            "patch",
            200,
            {"unschedulable": True, "unschedulable_taint": None, "change": "cordon"},
        ),
        (
            "node-controller",
            "patch",
            200,
            {"unschedulable": None, "unschedulable_taint": True, "change": "cordon"},
        ),
        (
            "maint-bot",
            "patch",
            200,
            {"unschedulable": False, "unschedulable_taint": None, "change": "uncordon"},
        ),
        (
            "node-controller",
            "patch",
            200,
            {"unschedulable": None, "unschedulable_taint": False, "change": "uncordon"},
        ),
        (
            "kubernetes-admin",
            "update",
            200,
            {"unschedulable": True, "unschedulable_taint": False, "change": None},
        ),
        (
            "kubernetes-admin",
            "update",
            409,
            {"unschedulable": True, "unschedulable_taint": False, "change": None},
        ),
    ]
    nodes = [o for o in result.observations if o.kind == Kind.NODE]
    # one heartbeat with a Node body (the second changed nothing podlife keeps), and the successful PUT
    assert [
        (o.payload["resource_version"], o.payload["unschedulable"], len(o.payload["taints"])) for o in nodes
    ] == [
        ("60010", True, 1),
        (None, True, 0),
    ]
    assert result.skipped["node_heartbeat"] == 2  # the Metadata-level heartbeat and the unchanged one


def test_a_state_that_comes_back_is_a_new_snapshot() -> None:
    """GIVEN the disruption controller writing a PDB's status 1, 0, then 1 again (whole-object PUTs) THEN
    three snapshots, keyed by the version each replaced: the third is not taken for the first."""
    import json

    from collectors.parsers.audit import parse_audit

    line: dict[str, object] = next(
        json.loads(raw)
        for raw in (FIXTURES / "drain-refused-evictions.jsonl").read_text().splitlines()
        if '"d15c0a7e-4444-4555-8666-c77788889999"' in raw and '"ResponseComplete"' in raw
    )
    events = []
    for i, allowed in enumerate([1, 0, 1]):
        event = json.loads(json.dumps(line))
        event["auditID"] = f"pdb-write-{i}"
        event["requestObject"]["metadata"]["resourceVersion"] = str(48790 + i)
        event["requestObject"]["status"]["disruptionsAllowed"] = allowed
        events.append(json.dumps(event))
    pdbs = [o for o in parse_audit("\n".join(events).encode()).observations if o.kind == Kind.PDB]
    assert [(o.dedupe_key, o.payload["status"]["disruptions_allowed"]) for o in pdbs] == [
        ("pdb:9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d:after:48790", 1),
        ("pdb:9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d:after:48791", 0),
        ("pdb:9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d:after:48792", 1),
    ]


def test_an_invalid_requests_causes_name_the_field() -> None:
    """(Written from the API types, not copied from a cluster.) A request the API server refuses as
    Invalid (422) answers a metav1.Status whose ``details.causes`` each name the ``field`` at fault, as its
    JSON path (metav1.StatusCause): the observation keeps it, so a refused create says what was wrong."""
    import json

    from collectors.parsers.audit import parse_audit

    cause = {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers[0].image"}
    event = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": "invalid-1",
        "stage": "ResponseComplete",
        "requestURI": "/api/v1/namespaces/shop/pods",
        "verb": "create",
        "user": {"username": "kubernetes-admin"},
        "objectRef": {"resource": "pods", "namespace": "shop", "name": "web-0", "apiVersion": "v1"},
        "responseStatus": {
            "metadata": {},
            "status": "Failure",
            "message": 'Pod "web-0" is invalid: spec.containers[0].image: Required value',
            "reason": "Invalid",
            "details": {"name": "web-0", "kind": "Pod", "causes": [cause]},
            "code": 422,
        },
        "requestReceivedTimestamp": "2024-06-07T06:54:00.100000Z",
        "stageTimestamp": "2024-06-07T06:54:00.110000Z",
    }
    (refused,) = [o for o in parse_audit(json.dumps(event).encode()).observations if o.kind == Kind.AUDIT]
    assert refused.payload["code"] == 422
    assert refused.payload["causes"] == [cause]


def test_a_whole_node_update_without_unschedulable_says_schedulable() -> None:
    """An ``update`` (PUT) replaces the whole Node: a spec without ``unschedulable`` (``omitempty``: false
    is never written) and without taints leaves the node schedulable and untainted, which the write states
    (``change`` None: a PUT states the result only). The PUT of cordon.jsonl, its ``unschedulable`` taken
    out."""
    import json

    from collectors.parsers.audit import parse_audit

    (put,) = [
        json.loads(line)
        for line in (FIXTURES / "cordon.jsonl").read_text().splitlines()
        if '"verb":"update"' in line and '"ResponseComplete"' in line and '"code":200' in line
    ]
    del put["requestObject"]["spec"]["unschedulable"]
    (audit,) = [o for o in parse_audit(json.dumps(put).encode()).observations if o.kind == Kind.AUDIT]
    assert audit.payload["node_change"] == {
        "unschedulable": False,
        "unschedulable_taint": False,
        "change": None,
    }


DRY_RUN_DELETE = "bb00bb00-0000-4000-8000-000000000006"


def _dry_run_variant(uri_query: bool, body: dict[str, object] | None) -> dict[str, object]:
    """The fixture's ``kubectl delete --dry-run=server`` (ResponseComplete), with its dry run said only in
    the URI's query, only in the body, or nowhere (hand-written edits of a hand-written fixture)."""
    line: dict[str, object] = next(
        json.loads(raw)
        for raw in FIXTURES.joinpath("kubectl-delete-grace.jsonl").read_text().splitlines()
        if DRY_RUN_DELETE in raw and "ResponseComplete" in raw
    )
    if not uri_query:
        line["requestURI"] = str(line["requestURI"]).split("?")[0]
    if body is None:
        line.pop("requestObject", None)
    else:
        line["requestObject"] = body
    return line


@pytest.mark.parametrize(
    ("uri_query", "body", "dry"),
    [
        (True, None, True),  # Metadata level: the query is all there is
        (False, {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}, True),  # client-go's body
        (
            False,
            {"kind": "Eviction", "apiVersion": "policy/v1", "deleteOptions": {"dryRun": ["All"]}},
            True,
        ),  # an eviction carries its DeleteOptions inside
        (False, {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}, False),
        (False, {"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": []}, False),  # an empty list: no
    ],
)
def test_a_dry_run_is_read_wherever_the_request_says_it(
    uri_query: bool, body: dict[str, object] | None, dry: bool
) -> None:
    """A request is a dry run (validated and admitted, never persisted) when its URI's query says
    ``dryRun=All`` (metav1.CreateOptions/UpdateOptions/PatchOptions/DeleteOptions as query parameters),
    when the DeleteOptions of its body list a dry-run stage, or when an Eviction's ``deleteOptions`` do;
    each alone is enough, and only a non-empty list counts (``dryRun: []`` is a real request)."""
    result = parse_audit([json.dumps(_dry_run_variant(uri_query, body))])
    (request,) = [o for o in audits(result) if o.payload["audit_id"] == DRY_RUN_DELETE]
    assert request.payload["dry_run"] is dry
    assert request.payload["namespace"] == "default" and request.payload["name"] == "web-legacy-2"
