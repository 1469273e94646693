"""Hand-built observations following docs/observations.md exactly (the shapes the parsers produce).

Times are offsets in seconds from ``T0`` so that scenarios read like a log; ``at(s)`` is the ISO string
the timeline JSON uses for the same instant.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from timelines.lifecycle.observation import Kind, Observation, Source, digest_key
from timelines.lifecycle.timeline import Interval, PodTimeline, format_time

T0 = datetime(2024, 6, 7, 6, 54, 40, tzinfo=UTC)
NODE = "node-a"


def t(seconds: float) -> datetime:
    """T0 plus ``seconds`` (microsecond precision)."""
    return T0 + timedelta(seconds=seconds)


def at(seconds: float | None) -> str | None:
    """The timeline's ISO spelling of T0 + ``seconds``."""
    return None if seconds is None else format_time(t(seconds))


def cond(
    type_: str, status: str, lt: float | None, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """A normalized pod condition."""
    return {"type": type_, "status": status, "reason": reason, "message": message, "last_transition": at(lt)}


def ctr(
    name: str = "app",
    state: str | None = "waiting",
    *,
    kind: str = "regular",
    reason: str | None = None,
    message: str | None = None,
    started: float | None = None,
    finished: float | None = None,
    exit_code: int | None = None,
    restarts: int = 0,
    last: dict[str, Any] | None = None,
    ready: bool = False,
) -> dict[str, Any]:
    """A normalized container status."""
    return {
        "name": name,
        "kind": kind,
        "state": state,
        "reason": reason,
        "message": message,
        "exit_code": exit_code,
        "signal": None,
        "started_at": at(started),
        "finished_at": at(finished),
        "ready": ready,
        "started": state == "running",
        "restart_count": restarts,
        "last_state": last,
    }


def last_terminated(
    started: float, finished: float, reason: str = "Error", exit_code: int = 1
) -> dict[str, Any]:
    """A ``last_state`` of a terminated previous run."""
    return {
        "state": "terminated",
        "reason": reason,
        "exit_code": exit_code,
        "started_at": at(started),
        "finished_at": at(finished),
    }


def pod(
    uid: str,
    rv: int,
    seen: float,
    *,
    phase: str = "Pending",
    node: str | None = NODE,
    created: float = 0.0,
    start_time: float | None = None,
    deletion: float | None = None,
    deletion_grace: int | None = None,
    grace: int = 30,
    conditions: list[dict[str, Any]] | None = None,
    containers: list[dict[str, Any]] | None = None,
    reason: str | None = None,
    message: str | None = None,
    static: bool = False,
    deleted: bool = False,
    namespace: str = "default",
    name: str = "web-1",
    watch: str | None = None,
    source: str = Source.API,
    finalizers: list[str] | None = None,
) -> Observation:
    """A ``pod`` (or with ``deleted=True`` a ``pod_deleted``) observation seen at T0 + ``seen``.

    ``deletion`` is the deletionTimestamp offset (request time + grace), as the API reports it.
    """
    payload = {
        "watch": watch or ("DELETED" if deleted else "MODIFIED"),
        "resource_version": str(rv),
        "uid": uid,
        "namespace": namespace,
        "name": name,
        "node": node,
        "labels": {"app": "web"},
        "created": at(created),
        "deletion_timestamp": at(deletion),
        "deletion_grace_seconds": deletion_grace,
        "grace_seconds": grace,
        "finalizers": finalizers or [],
        "static": static,
        "owner": None if static else {"kind": "ReplicaSet", "name": "web-7d9", "uid": "rs-uid-1"},
        "phase": phase,
        "reason": reason,
        "message": message,
        "start_time": at(start_time),
        "conditions": conditions or [],
        "containers": containers or [],
    }
    return Observation(
        kind=Kind.POD_DELETED if deleted else Kind.POD,
        source=source,
        observed_at=t(seen),
        dedupe_key=f"pod:{uid}:{rv}" + (":deleted" if deleted else ""),
        pod_uid=uid,
        node=node,
        namespace=namespace,
        name=name,
        payload=payload,
    )


MESSAGES = {
    "first_seen": "Pod is being synced for the first time",
    "sync_enter": "SyncPod enter",
    "sync_exit": "SyncPod exit",
    "termination_requested": "Pod is marked for graceful deletion, begin teardown",
    "observed_terminate": "Pod worker has observed request to terminate",
    "completed_naturally": "Pod indicated lifecycle completed naturally and should now terminate",
    "terminating_enter": "SyncTerminatingPod enter",
    "terminating_exit": "SyncTerminatingPod exit",
    "terminating_runtime_enter": "SyncTerminatingRuntimePod enter",
    "terminating_runtime_exit": "SyncTerminatingRuntimePod exit",
    "containers_terminated": "Pod terminated all containers successfully",
    "orphan_containers_terminated": "Pod terminated all orphaned containers successfully and worker can now stop",
    "terminated_enter": "SyncTerminatedPod enter",
    "terminated_exit": "SyncTerminatedPod exit",
    "worker_done": "Pod is complete and the worker can now stop",
    "cannot_start_ever": "Pod cannot start ever",
    "restart_requested": "Pod is terminating but has been requested to restart with same UID, will be reconciled later",
    "uid_reuse_restart": "Pod has been terminated but another pod with the same UID was created, remove history to allow restart",
}


def worker(
    uid: str,
    seen: float,
    transition: str,
    *,
    cause: str | None = None,
    grace: int | None = None,
    is_terminal: bool | None = None,
    pod_ref: str = "default/web-1",
    node: str = NODE,
    message: str | None = None,
) -> Observation:
    """A ``worker`` observation: one pod-worker transition read from a kubelet log line."""
    text = message or MESSAGES.get(transition, transition)
    line = f"I{seen:.6f} {text} pod={pod_ref} podUID={uid}"
    return Observation(
        kind=Kind.WORKER,
        source=Source.KUBELET_LOG,
        observed_at=t(seen),
        dedupe_key=digest_key(node, line),
        pod_uid=uid,
        node=node,
        namespace=pod_ref.split("/")[0],
        name=pod_ref.split("/")[1],
        payload={
            "transition": transition,
            "message": text,
            "severity": "I",
            "caller": "pod_workers.go:1",
            "work_type": None,
            "update_type": None,
            "cause": cause,
            "is_terminal": is_terminal,
            "grace_period": grace,
            "error": None,
            "pod_ref": pod_ref,
        },
    )


def span(
    uid: str,
    name: str,
    start: float,
    end: float,
    *,
    span_id: str | None = None,
    update_type: str | None = None,
) -> Observation:
    """A kubelet OTLP ``span`` observation (syncPod / syncTerminatingPod / syncTerminatedPod)."""
    sid = span_id or digest_key(uid, name, start)[:16]
    return Observation(
        kind=Kind.SPAN,
        source=Source.KUBELET_SPAN,
        observed_at=t(start),
        dedupe_key=f"span:{sid}",
        pod_uid=uid,
        node=NODE,
        namespace="default",
        name="web-1",
        payload={
            "name": name,
            "start": at(start),
            "end": at(end),
            "span_id": sid,
            "trace_id": digest_key("trace", sid)[:32],
            "update_type": update_type,
            "error": None,
        },
    )


def event(
    uid: str,
    event_uid: str,
    seen: float,
    reason: str,
    message: str,
    *,
    count: int = 1,
    type_: str = "Normal",
    rv: int = 1,
    component: str = "kubelet",
    first: float | None = None,
    field_path: str | None = None,
) -> Observation:
    """An ``event`` observation about the pod."""
    return Observation(
        kind=Kind.EVENT,
        source=Source.API,
        observed_at=t(seen),
        dedupe_key=f"event:{event_uid}:{rv}",
        pod_uid=uid,
        node=NODE,
        namespace="default",
        name="web-1",
        payload={
            "uid": event_uid,
            "resource_version": str(rv),
            "reason": reason,
            "type": type_,
            "message": message,
            "count": count,
            "action": None,
            "component": component,
            "host": NODE,
            "first": at(first if first is not None else seen),
            "last": at(seen),
            "involved": {
                "kind": "Pod",
                "namespace": "default",
                "name": "web-1",
                "uid": uid,
                "field_path": field_path,
            },
        },
    )


def marker(
    uid: str,
    seen: float,
    reason: str,
    message: str,
    *,
    container: str | None = None,
    grace: int | None = None,
) -> Observation:
    """A ``kubelet_marker`` observation."""
    line = f"{seen} {reason} {message} {uid}"
    return Observation(
        kind=Kind.KUBELET_MARKER,
        source=Source.KUBELET_LOG,
        observed_at=t(seen),
        dedupe_key=digest_key(NODE, line),
        pod_uid=uid,
        node=NODE,
        namespace="default",
        name="web-1",
        payload={
            "reason": reason,
            "message": message,
            "severity": "I",
            "container": container,
            "grace_period": grace,
        },
    )


def node(
    seen: float,
    *,
    ready: str = "True",
    unschedulable: bool = False,
    message: str = "",
    name: str = NODE,
    source: str = Source.API,
) -> Observation:
    """A ``node`` observation (normalized payload) seen at T0 + ``seen``."""
    return Observation(
        kind=Kind.NODE,
        source=source,
        observed_at=t(seen),
        dedupe_key=f"node:{name}-uid:{int(seen * 1000)}",
        node=name,
        name=name,
        payload={
            "name": name,
            "uid": f"{name}-uid",
            "unschedulable": unschedulable,
            "taints": [],
            "labels": {"kubernetes.io/hostname": name},
            "conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": message}],
        },
    )


def node_metrics(
    seen: float, sync: int, terminating: int = 0, terminated: int = 0, *, name: str = NODE
) -> Observation:
    """A ``node_metrics`` observation: kubelet_working_pods by lifecycle, scraped at T0 + ``seen``."""
    return Observation(
        kind=Kind.NODE_METRICS,
        source=Source.KUBELET_METRICS,
        observed_at=t(seen),
        dedupe_key=f"node_metrics:{name}:{seen}",
        node=name,
        payload={"working_pods": {"sync": sync, "terminating": terminating, "terminated": terminated}},
    )


def pdb(
    seen: float,
    allowed: int,
    *,
    healthy: int = 2,
    desired: int = 2,
    expected: int = 2,
    max_unavailable: int | str | None = None,
    created: float = 0.0,
    uid: str = "pdb-uid-1",
    source: str = Source.API,
    disrupted: dict[str, datetime] | None = None,
) -> Observation:
    """A ``pdb`` observation of PDB shop/web-pdb (selector app=web) seen at T0 + ``seen``; it uses
    ``minAvailable: 2`` unless ``max_unavailable`` is given."""
    return Observation(
        kind=Kind.PDB,
        source=source,
        observed_at=t(seen),
        dedupe_key=f"pdb:{uid}:{int(seen * 1000)}",
        namespace="shop",
        name="web-pdb",
        payload={
            "uid": uid,
            "namespace": "shop",
            "name": "web-pdb",
            "created": at(created),
            "selector": {"match_labels": {"app": "web"}},
            "min_available": None if max_unavailable is not None else 2,
            "max_unavailable": max_unavailable,
            "status": {
                "disruptions_allowed": allowed,
                "current_healthy": healthy,
                "desired_healthy": desired,
                "expected_pods": expected,
                # status.disruptedPods: pods whose eviction was granted, by name, with when
                "disrupted_pods": {k: format_time(v) for k, v in (disrupted or {}).items()},
                "conditions": [
                    {
                        "type": "DisruptionAllowed",
                        "status": str(allowed > 0),
                        "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                    }
                ],
            },
        },
    )


Row = tuple[str, str | None, str | None, str]


def rows(timeline: PodTimeline, lane: str) -> list[Row]:
    """A lane as (state, start, end, source) with ISO times, for exact golden comparisons."""
    return [(iv.state, format_time(iv.start), format_time(iv.end), iv.source) for iv in timeline.lane(lane)]


def finding_rows(timeline: PodTimeline) -> list[tuple[str, str, str | None, str | None]]:
    """Findings as (kind, severity, start, end)."""
    return [(f.kind, f.severity, format_time(f.start), format_time(f.end)) for f in timeline.findings]


def only(timeline: PodTimeline, lane: str, state: str) -> Interval:
    """The single interval of that state in that lane."""
    found = [iv for iv in timeline.lane(lane) if iv.state == state]
    assert len(found) == 1, f"{lane}/{state}: {found}"
    return found[0]
