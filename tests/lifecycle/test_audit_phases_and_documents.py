"""Which audited requests date a pod's phase, a finding document's ``end``, and a restarted kubelet's status
reset (issue #38 survivors of sample fresh-1207z).

Audit inputs are the real events of tests/fixtures/real/audit (README there): an EKS kubelet v1.21.2
``pods/status`` patch setting ``phase: Failed`` (level Request), and a kubeadm kubelet's ``pods/status`` patch
audited at level Metadata (no body). Variants of the EKS line change one field of it and are labelled
synthetic."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.parsers.audit import parse_audit
from collectors.parsers.k8s_objects import normalize_pod
from timelines.lifecycle.audit_evidence import AuditRecord, audit_snapshots, audited_phases, read_audit
from timelines.lifecycle.facts import status_was_reset
from timelines.lifecycle.observation import Kind
from timelines.lifecycle.schema import FindingDoc

AUDIT = Path(__file__).parent.parent / "fixtures" / "real" / "audit"
EKS = AUDIT / "eks-2021-kubelet-status-patch-oomkilled.jsonl"
KUBEADM_METADATA = AUDIT / "kubeadm-2022-mirror-pod-status-patch-metadata.jsonl"
AKKERIS_POD = (
    Path(__file__).parent.parent / "fixtures" / "real" / "kubelet" / "akkeris-2022-pod-being-deleted.json"
)


def _records(raw: bytes) -> list[AuditRecord]:
    out = []
    for o in parse_audit(raw).observations:
        rec = read_audit(o) if o.kind == Kind.AUDIT else None
        if rec is not None:
            out.append(rec)
    return out


def _eks_event() -> dict[str, object]:
    event = json.loads(EKS.read_bytes().splitlines()[0])
    assert isinstance(event, dict)
    return event


def _eks_variant(**changes: object) -> list[AuditRecord]:
    """synthetic: the real EKS event with the top-level fields ``changes`` replaced."""
    event = {**_eks_event(), **changes}
    return _records(json.dumps(event).encode() + b"\n")


# --------------------------------------------------------------------------------------- audited_phases


def test_a_kubelets_successful_status_patch_dates_the_phase_it_sets() -> None:
    """The real EKS kubelet patch of ``pods/status`` (code 200) carrying ``phase: Failed`` is when the
    API's phase became Failed."""
    [rec] = _records(EKS.read_bytes())
    assert audited_phases([rec]) == [("failed", rec.at, rec.key)]


def test_a_failed_status_patch_set_no_phase() -> None:
    """A status patch the server refused (409: the kubelet's UID precondition failed, the pod is another
    incarnation) stored nothing: the phase it carries never was the API's."""
    for code in (409, 422, 500):
        records = _eks_variant(responseStatus={"metadata": {}, "status": "Failure", "code": code})
        assert [r.succeeded for r in records] == [False]
        assert audited_phases(records) == [], code


def test_a_dry_run_status_patch_set_no_phase() -> None:
    """A ``?dryRun=All`` status patch is answered 200 but stored nothing (apiserver dry run)."""
    event = _eks_event()
    records = _eks_variant(requestURI=f"{event['requestURI']}?dryRun=All")
    assert [(r.succeeded, r.dry_run) for r in records] == [(True, True)]
    assert audited_phases(records) == []


def test_a_status_update_is_no_dated_change_of_phase() -> None:
    """An update (PUT) of ``pods/status`` carries the whole status, not what changed: the phase it names may
    have been the API's long before, so it dates no change (only a patch, the kubelet's two-way merge of
    old and new status, carries a phase only when it changed)."""
    records = _eks_variant(verb="update")
    assert [(r.verb, r.succeeded) for r in records] == [("update", True)]
    assert audited_phases(records) == []


def test_a_status_patch_audited_without_its_body_names_no_phase() -> None:
    """The real kubeadm kubelet status patch audited at level Metadata: the request succeeded, but without
    the request body nothing says which phase (if any) it set."""
    records = _records(KUBEADM_METADATA.read_bytes())
    assert [(r.verb, r.subresource, r.succeeded) for r in records] == [("patch", "status", True)]
    assert audited_phases(records) == []


def test_each_reason_a_request_is_no_status_write_refuses_it_on_its_own() -> None:
    """Each of these alone makes a request not the stored write of a phase, whatever the rest of the record
    says: a write of the pod object itself (not ``pods/status``: the pod strategy's PrepareForUpdate keeps
    the old status), a verb other than patch, a request that failed or whose outcome is unknown, a dry run,
    a body that is not a status, a write that is not a patch of what changed. The real EKS patch, with one
    field of its record changed at a time."""
    [rec] = _records(EKS.read_bytes())
    write = rec.payload["status_write"]
    refused = {
        "pod object": replace(rec, subresource=None),
        "ephemeralcontainers": replace(rec, subresource="ephemeralcontainers"),
        "update": replace(rec, verb="update"),
        "failed": replace(rec, succeeded=False),
        "outcome unknown": replace(rec, succeeded=None),
        "dry run": replace(rec, dry_run=True),
        "no body": replace(rec, payload={**rec.payload, "status_write": None}),
        "whole status": replace(rec, payload={**rec.payload, "status_write": {**write, "partial": False}}),
    }
    for what, variant in refused.items():
        assert audited_phases([variant]) == [], what


# --------------------------------------------------------------------------------------- FindingDoc.end


def test_a_finding_document_with_a_bad_end_is_refused_naming_end() -> None:
    """``findings[i].end`` is an ISO 8601 time with an offset, or null: anything else is refused, and the
    error names the field ``end``."""
    start = "2021-09-27T08:36:44.021638+00:00"
    assert FindingDoc("stuck", "warning", "m", start, None).end is None
    assert FindingDoc("stuck", "warning", "m", start, "2021-09-27T08:37:44+00:00").end is not None
    for bad in ("2021-09-27T08:37:44", "yesterday"):
        with pytest.raises(ValueError) as err:
            FindingDoc("stuck", "warning", "m", start, bad)
        assert str(err.value).startswith("end: "), (bad, str(err.value))


# --------------------------------------------------------------------------------------- status_was_reset


def test_a_container_start_one_whole_second_before_start_time_is_no_reset() -> None:
    """``status.startTime`` and a container's ``startedAt`` are serialized in whole seconds (truncated,
    metav1.Time RFC 3339): two instants under a second apart, in either order, can read one whole second
    apart. A container start exactly 1 s before startTime is therefore no evidence of a kubelet that
    rewrote the status from scratch; 2 s before is (a restarted kubelet sets startTime anew, after the
    containers it found running)."""
    # synthetic: times in the whole seconds the API gives
    start_time = datetime(2021, 9, 27, 8, 36, 29, tzinfo=UTC)
    one_before = start_time - timedelta(seconds=1)
    two_before = start_time - timedelta(seconds=2)
    assert status_was_reset(start_time, None, False, [one_before]) is False
    assert status_was_reset(start_time, None, False, [start_time]) is False
    assert status_was_reset(start_time, None, False, [two_before]) is True


# --------------------------------------------------------------------------------------- audit snapshots


def test_a_pod_snapshot_read_back_from_requests_has_the_shape_of_a_watched_pod() -> None:
    """What the server stored by a request is handed to the core as the event a watch would have delivered
    (docs/observations.md, ``pod``): every field of a watched pod's payload is there, those no request
    tells (the controller ``owner``: a pods/status patch does not carry metadata.ownerReferences) null.
    The watched pod is the real Pod object of tests/fixtures/real/kubelet/akkeris-2022-pod-being-deleted.json
    read by the collector's own normalizer."""
    watched = normalize_pod(json.loads(AKKERIS_POD.read_text()))
    [snapshot] = audit_snapshots("10177585-b79f-44a0-bdcc-c68ec12d012a", _records(EKS.read_bytes()))
    assert set(snapshot.payload) == set(watched)
    assert snapshot.payload["owner"] is None
    assert snapshot.payload["phase"] == "Failed"
