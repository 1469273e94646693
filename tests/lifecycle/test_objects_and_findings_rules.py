"""Rules of the world behind the node, PDB, audit and node-shutdown derivations (issue #38, sample
fresh-1207l): a node condition's lastTransitionTime, a kubelet process's first line, the disruption
controller's event reasons, a server-side dry run, and the kubelet status manager's own phase writes."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from collectors.parsers.k8s_objects import node_observation
from collectors.parsers.kubelet_log import KubeletLogParser
from tests.audit.helpers import by_id, parsed
from tests.lifecycle.factories import marker, pdb, pod, worker
from tests.lifecycle.factories import t as at
from tests.lifecycle.test_kubelet_truth import timelines
from timelines.lifecycle import derive_pod_timeline
from timelines.lifecycle.audit_evidence import read_audit
from timelines.lifecycle.cluster_objects import derive_node_timeline, derive_pdb_timeline
from timelines.lifecycle.observation import Kind, Observation, Source

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"


def utc(year: int, month: int, day: int, hour: int, minute: int, second: int, micro: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


# ------------------------------------------------------------------------------------------- node lanes


def test_a_node_is_ready_from_its_ready_conditions_last_transition_not_from_when_we_looked() -> None:
    """GIVEN the real minikube v1.31 node of a ``kubectl cluster-info dump`` (tests/fixtures/real/kubelet/
    minikube-1.31-cluster-info-dump.txt, SOURCES.md), read with no watch time, so seen at its newest
    timestamp (the Ready heartbeat, 10:24:54Z)
    THEN its ready bar starts at the Ready condition's lastTransitionTime (10:19:39Z): the API sets that
    time when the condition's status last changed; the heartbeat only says the kubelet still posts it."""
    text = (REAL / "minikube-1.31-cluster-info-dump.txt").read_text(encoding="utf-8")
    node_list, _ = json.JSONDecoder().raw_decode(text)
    (item,) = node_list["items"]
    seen = node_observation(item, watch_type="SNAPSHOT", observed_at=None, source=Source.API)
    assert seen.observed_at == utc(2024, 11, 17, 10, 24, 54)
    (ready,) = derive_node_timeline([seen]).lanes["node:ready"]
    assert (ready.state, ready.start, ready.end) == ("ready", utc(2024, 11, 17, 10, 19, 39), None)


def _process(pid: int, seen: float, payload: dict[str, object]) -> Observation:
    # synthetic: a kubelet_process observation shaped as KubeletLogParser.processes() writes one.
    return Observation(
        kind=Kind.KUBELET_PROCESS,
        source=Source.KUBELET_LOG,
        observed_at=at(seen),
        dedupe_key=f"process:{pid}:{seen}",
        node="node-a",
        payload={"pid": pid, "started_at": None, "version": None, "starts": [], **payload},
    )


def test_a_kubelet_bar_starts_at_the_first_line_the_process_wrote() -> None:
    """GIVEN kubelet pid 300 whose observation names its first line (``first_at``, T0+40) and was
    recorded later (T0+100), and pid 100 of an observation that names no first line (recorded at T0)
    THEN pid 300's bar starts at its first line (the time the kubelet wrote it, as the pods' facts read
    it), and pid 100's, with no first line named, at the observation's own time (to its last line)."""
    obs = [
        _process(100, 0, {"last_at": at(20).isoformat()}),
        _process(300, 100, {"first_at": at(40).isoformat(), "last_at": at(160).isoformat()}),
    ]
    bars = derive_node_timeline(obs).lanes["node:kubelet"]
    assert [(iv.attrs["pid"], iv.start, iv.end) for iv in bars] == [
        (100, at(0), at(20)),
        (300, at(40), at(160)),
    ]


# -------------------------------------------------------------------------------------------- PDB events


def test_only_the_unmanaged_pods_event_says_a_budget_selects_pods_with_no_controller() -> None:
    """GIVEN a PDB with an integer minAvailable, no pod without a controller, and the disruption
    controller's other events regarding it, ``NoPods`` ("No matching pods found") and
    ``CalculateExpectedPodCountFailed`` (k8s-facts.md, events table)
    THEN no pdb_unmanaged_pods is raised: only the ``UnmanagedPods`` Warning says that."""
    events = [
        # synthetic: Events in the shape the event parser writes, messages as k8s-facts.md gives them.
        Observation(
            kind=Kind.EVENT,
            source=Source.API,
            observed_at=at(5 + i),
            dedupe_key=f"event:e{i}:1",
            namespace="shop",
            name="web-pdb",
            payload={"reason": reason, "type": kind, "message": message},
        )
        for i, (reason, kind, message) in enumerate(
            [
                ("NoPods", "Normal", "No matching pods found"),
                (
                    "CalculateExpectedPodCountFailed",
                    "Warning",
                    'Failed to calculate the number of expected pods: found no controllers for pod "shop/web-1"',
                ),
            ]
        )
    ]
    timeline = derive_pdb_timeline([pdb(0, 1), *events], pods=[])
    assert [f.kind for f in timeline.findings if f.kind == "pdb_unmanaged_pods"] == []


# ---------------------------------------------------------------------------------------------- dry run


def test_a_server_side_dry_run_delete_is_not_a_delete() -> None:
    """GIVEN ``kubectl delete pod web-legacy-2 --dry-run=server`` audited at ResponseComplete with 200
    (tests/fixtures/audit/kubectl-delete-grace.jsonl): the API server answers as if it deleted, and
    persists nothing (``?dryRun=All``)
    THEN its record is a dry run: not a delete, not a termination's request, no Deleted marker; it shows
    only that the pod existed then."""
    record = read_audit(by_id(parsed("kubectl-delete-grace.jsonl"))["bb00bb00-0000-4000-8000-000000000006"])
    assert record is not None and record.succeeded is True and record.verb == "delete"
    assert record.dry_run is True
    assert record.is_delete is False
    assert record.shows_pod_existed is True


# --------------------------------------------------------------------------------------- node shutdown


def test_with_no_api_view_node_shutdown_reads_the_phase_the_status_manager_wrote() -> None:
    """GIVEN the real kind v1.31 journal of kueue#4669 at V3 up to the status manager's last write,
    "Status for pod updated successfully" ... status={"phase":"Failed",...} (10:22:16.781), whose
    earlier "Delaying pod deletion as the phase is non-terminal" lines name phase="Running", no API
    snapshot of the pod, and (synthetic) the shutdown manager's kill of the pod
    THEN node_shutdown says its phase became Failed: only the status manager's write ("Status for pod
    updated successfully") is the phase the kubelet gave the pod, not the phase a deletion check read."""
    lines = (REAL / "kueue-4669-kind-1.31-v3.journal").read_text(encoding="utf-8").splitlines()
    last = next(i for i, line in enumerate(lines) if "statusVersion=4" in line)
    parser = KubeletLogParser(node="kind-worker", year=2025, tz=UTC)
    obs: list[Observation] = []
    for line in lines[: last + 1]:
        obs.extend(parser.feed(line))
    obs.extend(parser.close())
    uid = "8bb7de3e-72f0-4102-adbd-53897040775e"
    # synthetic: the shutdown manager's kill of this pod, shaped as the kubelet parser's marker.
    obs.append(
        Observation(
            kind=Kind.KUBELET_MARKER,
            source=Source.KUBELET_LOG,
            observed_at=utc(2025, 3, 18, 10, 21, 22),
            dedupe_key="synthetic-shutdown-kill",
            pod_uid=uid,
            node="kind-worker",
            namespace="pod-e2e-dx5dg",
            name="group-0",
            payload={
                "reason": "ShutdownKill",
                "message": "Shutdown manager killing pod with gracePeriod",
                "severity": "I",
                "container": None,
                "grace_period": 30,
            },
        )
    )
    (finding,) = [f for f in timelines(obs)[uid].findings if f.kind == "node_shutdown"]
    assert finding.attrs["phase_failed"] is True and finding.severity == "info"


STATIC_UID = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"


def _status_written(seen: float, phase: str) -> Observation:
    # synthetic: the kubelet parser's worker observation of a V3 "Status for pod updated successfully"
    # line, status={"phase":PHASE,...}; the parser keeps the written phase as payload["phase"].
    obs = worker(STATIC_UID, seen, "status_updated", message="Status for pod updated successfully")
    return replace(obs, payload={**obs.payload, "phase": phase})


def test_a_recreated_static_pod_does_not_borrow_its_previous_mirror_pods_phase() -> None:
    """GIVEN a static pod (its UID is the manifest's, kept when the kubelet recreates its mirror pod)
    whose first mirror pod (created T0) the status manager wrote Running at T0+2, then a second mirror
    pod created at T0+20 and seen once before its status was written (the kubelet creates a mirror pod
    with an empty status: no phase yet), and the shutdown
    manager killing it at T0+30 with no status write after that in the log
    THEN node_shutdown on the second mirror pod says its phase is unknown: the status manager's writes
    before that mirror pod was created were about the previous API object, not this one."""
    first = pod(STATIC_UID, 1, 1, created=0, static=True, phase="Running", start_time=1)
    second = pod(STATIC_UID, 5, 21, created=20, static=True)
    second = replace(second, payload={**second.payload, "phase": None})
    obs = [
        first,
        _status_written(2, "Running"),
        second,
        marker(STATIC_UID, 30, "ShutdownKill", "Shutdown manager killing pod with gracePeriod", grace=20),
    ]
    (finding,) = [f for f in derive_pod_timeline(obs).findings if f.kind == "node_shutdown"]
    assert finding.start == at(30)
    assert (finding.attrs["final_phase"], finding.attrs["phase_failed"]) == (None, None)
    assert finding.severity == "warning" and "phase is unknown" in finding.message
