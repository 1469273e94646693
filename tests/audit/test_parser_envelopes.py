"""One audit event in every envelope the parser reads gives the same observation (docs/audit.md, "Inputs")."""

from __future__ import annotations

import gzip
import json

import orjson
import pytest

from collectors.parsers.audit import AuditParser, actor_of, eviction_cause, parse_audit, request_path
from tests.audit.helpers import audits, by_id, fixture, parsed, without
from timelines.lifecycle.observation import Kind

NATIVE = "drain-refused-evictions.jsonl"


def native() -> dict[str, dict]:
    return {o.dedupe_key: o.payload for o in parsed(NATIVE).observations}


def test_webhook_eventlist_is_the_log_file() -> None:
    webhook = parse_audit(fixture("webhook-eventlist.json"))
    log = parsed(NATIVE)
    assert [(o.dedupe_key, o.payload) for o in webhook.observations] == [
        (o.dedupe_key, o.payload) for o in log.observations
    ]
    assert (webhook.events, webhook.unpaired, webhook.skipped) == (log.events, log.unpaired, log.skipped)


@pytest.mark.parametrize(
    ("name", "envelope", "count"),
    [
        ("eks-filter-log-events.json", "cloudwatch", 6),
        ("eks-firehose-records.json", "cloudwatch", 8),
        ("aks-diagnostic-records.json", "aks", 14),
    ],
)
def test_wrapped_events_equal_the_native_ones(name: str, envelope: str, count: int) -> None:
    result = parse_audit(fixture(name))
    reference = native()
    wrapped = audits(result)
    assert len(wrapped) == count
    for o in wrapped:
        assert o.dedupe_key in reference
        assert without(o.payload, "envelope") == without(reference[o.dedupe_key], "envelope")
        assert o.payload["envelope"] == ("native" if envelope == "cloudwatch" else envelope)
    for o in result.observations:
        if o.kind != Kind.AUDIT:
            assert o.payload == reference[o.dedupe_key]


def test_firehose_and_aks_skip_their_own_noise() -> None:
    assert parse_audit(fixture("eks-firehose-records.json")).skipped["control_message"] == 1
    assert parse_audit(fixture("aks-diagnostic-records.json")).skipped["other_category"] == 1


def test_aks_table_rows_map_to_event_fields() -> None:
    result = parse_audit(fixture("aks-audit-table.json"))
    reference = native()
    rows = audits(result)
    assert len(rows) == 5
    for o in rows[:4]:
        assert without(o.payload, "envelope") == without(reference[o.dedupe_key], "envelope")
    big = rows[4].payload  # ResponseObject "skipped-too-big-size-object": truncated, and no snapshot
    assert (big["truncated"], big["snapshots"]) == (True, [])
    assert big["delete"]["grace_period_seconds"] == 0


def test_legacy_text_lines_give_the_same_keys_as_json() -> None:
    legacy = parse_audit(fixture("legacy.log"))
    log = parsed(NATIVE)
    assert [o.dedupe_key for o in audits(legacy)] == [o.dedupe_key for o in audits(log)]
    assert (legacy.unpaired, legacy.skipped) == (log.unpaired, log.skipped)
    first = audits(legacy)[2].payload
    assert first["user"]["groups"] == ["kubeadm:cluster-admins", "system:authenticated"]
    assert (first["verb"], first["subresource"], first["code"], first["eviction"]["outcome"]) == (
        "create",
        "eviction",
        429,
        "refused",
    )
    assert first["completed_at"] is None  # the legacy line holds the request's time only
    assert audits(legacy)[2].observed_at.microsecond == 210331


def test_gke_log_entries_keep_what_gke_has_and_say_what_it_lacks() -> None:
    result = parse_audit(fixture("gke-logentries.json"))
    events = by_id(result)
    refused = events["e1a2b3c4-0001-4d5e-8f6a-7b8c9d0e1f2a"].payload
    assert (refused["code"], refused["rpc_code"], refused["eviction"]["outcome"]) == (None, 8, "refused")
    assert refused["user"] == {"username": "kubernetes-admin", "uid": None, "groups": None, "extra": {}}
    assert (refused["level"], refused["requested_at"]) == (None, None)
    granted = events["e1a2b3c4-0004-4d5e-8f6a-7b8c9d0e1f2a"].payload
    assert (granted["rpc_code"], granted["succeeded"], granted["eviction"]["outcome"]) == (0, True, "granted")
    kubelet = events["ab12cd34-3333-4444-8555-b66677778888"].payload
    assert (kubelet["resource"], kubelet["subresource"], kubelet["actor"]["kind"]) == (
        "pods",
        "status",
        "kubelet",
    )
    # response bodies lose their @type and are the same snapshots as the native log's
    reference = native()
    snapshots = [o for o in result.observations if o.kind != Kind.AUDIT]
    assert len(snapshots) == 6
    for o in snapshots:
        assert o.payload == reference[o.dedupe_key]


def test_gzip_bodies_and_gzip_members() -> None:
    body = fixture(NATIVE)
    once = parse_audit(gzip.compress(body))
    twice = parse_audit(gzip.compress(body[:5000]) + gzip.compress(body[5000:]))
    plain = parsed(NATIVE)
    assert [o.dedupe_key for o in once.observations] == [o.dedupe_key for o in plain.observations]
    assert [o.dedupe_key for o in twice.observations] == [o.dedupe_key for o in plain.observations]
    cut = parse_audit(gzip.compress(body)[:-200])
    assert cut.rejected["bad_gzip"] == 1
    # what the ingest prints: the body was cut, and what came before it was kept
    assert "bad_gzip: gzip data is cut short; kept what came before" in cut.examples
    assert 0 < len(cut.observations) < len(plain.observations)


def test_gzip_bomb_stops_at_the_limit() -> None:
    parser = AuditParser(max_document_bytes=1024 * 1024)
    bomb = gzip.compress(b" " * (64 * 1024 * 1024))
    assert list(parser.read_bytes(bomb)) == []
    assert parser.rejected == {"document_too_large": 1}


def test_pretty_printed_and_concatenated_documents() -> None:
    events = [json.loads(line) for line in fixture(NATIVE).splitlines()]
    pretty = json.dumps(
        {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": events}, indent=2
    ).encode()
    lines_result = list(AuditParser().read_lines(pretty.splitlines(keepends=True)))
    assert [o.dedupe_key for o in lines_result] == [o.dedupe_key for o in parsed(NATIVE).observations]
    glued = b"".join(orjson.dumps(e) for e in events)  # back to back, no separator
    assert [o.dedupe_key for o in parse_audit(glued).observations] == [
        o.dedupe_key for o in parsed(NATIVE).observations
    ]


def test_bad_lines_are_counted_and_the_rest_is_kept() -> None:
    good = fixture(NATIVE).splitlines()
    lines = [
        good[0],
        b'{"auditID": "x", "stage": "ResponseComplete"',
        good[1],
        b"\xff\xfe garbage",
        *good[2:],
    ]
    result = parse_audit(lines)
    assert result.rejected["bad_json"] == 2
    assert len(audits(result)) == 14
    assert any(e.startswith("bad_json: line 2:") for e in result.examples)


def test_each_reason_quotes_its_first_ten_bad_records_and_counts_them_all() -> None:
    """A log of 25 bad lines is told by its count and its first MAX_EXAMPLES (10) lines, not 25 quotes."""
    result = parse_audit([b"garbage" for _ in range(25)])
    assert result.rejected["not_audit_text"] == 25
    assert result.examples == [f"not_audit_text: line {n}: 'garbage'" for n in range(1, 11)]


def test_an_event_of_another_api_group_is_refused_by_name() -> None:
    result = parse_audit(
        b'{"kind":"EventList","apiVersion":"v1","items":[{"kind":"Event","reason":"Killing"}]}'
    )
    assert (result.rejected, result.examples) == (
        {"wrong_api_version": 1},
        ["wrong_api_version: document: apiVersion 'v1'"],
    )


def test_a_client_reusing_an_audit_id_does_not_hide_its_second_request() -> None:
    lines = fixture("kubectl-delete-grace.jsonl").splitlines()
    first = json.loads(lines[1])
    second = dict(
        first,
        requestURI="/api/v1/namespaces/default/pods/other",
        objectRef=dict(first["objectRef"], name="other"),
    )
    keys = [o.dedupe_key for o in parse_audit([orjson.dumps(first), orjson.dumps(second)]).observations]
    assert len(set(keys)) == 2 and all(
        k.startswith(f"audit:{first['auditID']}:ResponseComplete:") for k in keys
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The disruption budget web needs 2 healthy pods and has 1 currently",
            {"cause": "insufficient_pods", "pdb": "web", "desired_healthy": 2, "current_healthy": 1},
        ),
        (
            "The disruption budget db-pdb is still being processed by the server.",
            {"cause": "not_observed", "pdb": "db-pdb"},
        ),
        (
            "The disruption budget web does not allow evicting pods currently because it failed sync: found no controllers",
            {"cause": "failed_sync", "pdb": "web", "detail": "found no controllers"},
        ),
        (
            "The disruption budget web does not allow evicting pods currently (InsufficientPods)",
            {"cause": "not_allowed", "pdb": "web", "detail": "InsufficientPods"},
        ),
        (
            'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative',
            {"cause": "negative_budget", "pdb": "web"},
        ),
        (
            'poddisruptionbudget.policy "web" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller',
            {"cause": "too_many_disrupted", "pdb": "web"},
        ),
        (
            'Timeout: couldn\'t update PodDisruptionBudget "web" due to conflicts',
            {"cause": "conflicts", "pdb": "web"},
        ),
        (
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            {"cause": "multiple_pdbs", "pdb": None},
        ),
        ("Cannot evict pod as it would violate the pod's disruption budget.", {"cause": None, "pdb": None}),
    ],
)
def test_eviction_causes_from_eviction_go(text: str, expected: dict) -> None:
    found = eviction_cause([text])
    assert {k: found[k] for k in expected} == expected


def test_multiple_pdbs_is_a_failure_written_as_201() -> None:
    line = json.loads(fixture(NATIVE).splitlines()[5])  # a refused eviction's completion
    line["responseStatus"] = {
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        "code": 201,
    }
    payload = audits(parse_audit(orjson.dumps(line)))[0].payload
    assert (payload["succeeded"], payload["eviction"]["outcome"], payload["eviction"]["cause"]) == (
        False,
        "failed",
        "multiple_pdbs",
    )


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("/api/v1/namespaces/shop/pods/web-0/status", ("", "v1", "shop", "pods", "web-0", "status")),
        ("/api/v1/nodes/worker-1?dryRun=All", ("", "v1", None, "nodes", "worker-1", None)),
        (
            "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/web/status",
            ("policy", "v1", "shop", "poddisruptionbudgets", "web", "status"),
        ),
        ("/api/v1/namespaces/shop", ("", "v1", None, "namespaces", "shop", None)),
        ("/api/v1/watch/namespaces/shop/pods", ("", "v1", "shop", "pods", None, None)),
        ("/healthz", None),
        ("http://[::1", None),
    ],
)
def test_request_path(uri: str, expected: tuple | None) -> None:
    path = request_path(uri)
    got = (
        None
        if path is None
        else (path.api_group, path.api_version, path.namespace, path.resource, path.name, path.subresource)
    )
    assert got == expected


@pytest.mark.parametrize(
    ("username", "reason", "expected"),
    [
        ("system:node:worker-1", None, {"kind": "kubelet", "name": "worker-1"}),
        (
            "system:serviceaccount:kube-system:generic-garbage-collector",
            None,
            {"kind": "controller", "name": "generic-garbage-collector"},
        ),
        (
            "system:serviceaccount:kube-system:replicaset-controller",
            None,
            {"kind": "controller", "name": "replicaset-controller"},
        ),
        (
            "system:serviceaccount:kube-system:bootstrap-signer",
            'RBAC: allowed by RoleBinding "system:controller:bootstrap-signer/kube-system" of Role "system:controller:bootstrap-signer" to ServiceAccount "bootstrap-signer/kube-system"',
            {"kind": "controller", "name": "bootstrap-signer"},
        ),
        (
            "system:serviceaccount:kube-system:coredns",
            None,
            {"kind": "serviceaccount", "name": "kube-system/coredns"},
        ),
        ("system:kube-controller-manager", None, {"kind": "controller", "name": "kube-controller-manager"}),
        ("system:kube-scheduler", None, {"kind": "scheduler", "name": "kube-scheduler"}),
        ("system:apiserver", None, {"kind": "apiserver", "name": "kube-apiserver"}),
        ("alice@example.com", None, {"kind": "user", "name": "alice@example.com"}),
        (None, None, {"kind": "unknown", "name": None}),
    ],
)
def test_actor_of(username: str | None, reason: str | None, expected: dict) -> None:
    assert actor_of(username, reason) == expected


@pytest.mark.parametrize(
    ("username", "groups", "expected"),
    [
        # A kubelet with a shared client credential: the node authorizer's group, no node in the name.
        ("kubelet", ["system:nodes", "system:authenticated"], {"kind": "kubelet", "name": None}),
        ("nodeclient", ["system:nodes"], {"kind": "kubelet", "name": None}),
        ("system:node:node2", ["system:nodes"], {"kind": "kubelet", "name": "node2"}),
        ("alice", ["system:authenticated"], {"kind": "user", "name": "alice"}),
    ],
)
def test_a_member_of_system_nodes_is_a_kubelet(username: str, groups: list[str], expected: dict) -> None:
    assert actor_of(username, None, groups) == expected


def test_an_aks_records_refused_event_is_named_by_its_line() -> None:
    """The first record of the real AKS diagnostic log (tests/fixtures/real/audit, kube-audit-admin), its
    Event's auditID taken out, after a good copy of it: the refusal names the line it came from, as every
    refusal does, so a reader finds it in a file of thousands (the Event inside ``properties.log`` is
    where, not what)."""
    from pathlib import Path

    path = (
        Path(__file__).resolve().parents[1]
        / "fixtures/real/audit/aks-2025-kube-audit-admin-eviction-429.jsonl"
    )
    record = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    event = json.loads(record["properties"]["log"])
    del event["auditID"]
    broken = {**record, "properties": {**record["properties"], "log": json.dumps(event)}}
    result = parse_audit([json.dumps(record).encode(), json.dumps(broken).encode()])
    assert result.rejected == {"no_audit_id": 1}
    assert result.examples == ["no_audit_id: line 2"]
