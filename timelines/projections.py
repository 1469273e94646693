"""Current-state projections: the "now" rows of nodes, PDBs and workloads and their status samples, from
ALL the observations of one object. Pure (no Django): the derive stage reads the observations, calls these,
and writes the result through ``timelines/store.py``.

Computed from the whole history every time, so the result does not depend on the order observations
arrived in: a late, older snapshot changes nothing it should not, and a sample is kept only where the
status changed from the snapshot before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from timelines.lifecycle.observation import Kind, Observation

NODE_SNAPSHOTS = frozenset({Kind.NODE, Kind.NODE_DELETED})
PDB_SNAPSHOTS = frozenset({Kind.PDB, Kind.PDB_DELETED})
WORKLOAD_SNAPSHOTS = frozenset({Kind.WORKLOAD, Kind.WORKLOAD_DELETED})
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def _condition(conditions: object, kind: str) -> Mapping[str, Any] | None:
    if not isinstance(conditions, list):
        return None
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == kind), None)


def _ordered(observations: Iterable[Observation], kinds: frozenset[str]) -> list[Observation]:
    unique = {o.dedupe_key: o for o in observations if o.kind in kinds}
    return sorted(unique.values(), key=lambda o: o.sort_key)


@dataclass(frozen=True)
class NodeRow:
    name: str
    uid: str
    labels: dict[str, str]
    unschedulable: bool
    ready: bool | None
    created_at: datetime | None
    last_seen: datetime
    deleted_at: datetime | None


def node_row(observations: Iterable[Observation]) -> NodeRow | None:
    """The node's row from its newest snapshot. Without a snapshot, audited cordons make a row (a cluster
    known from audit logs alone: name, UID when a request named it, cordoned or not); metrics alone make
    none."""
    observations = list(observations)
    snaps = _ordered(observations, NODE_SNAPSHOTS)
    if not snaps:
        return _audited_node_row(observations)
    last = snaps[-1]
    p = last.payload
    ready = _condition(p.get("conditions"), "Ready")
    return NodeRow(
        name=str(p.get("name") or last.name or last.node or ""),
        uid=next((str(s.payload["uid"]) for s in reversed(snaps) if s.payload.get("uid")), ""),
        labels=dict(p.get("labels") or {}),
        unschedulable=bool(p.get("unschedulable")),
        ready=None if ready is None else ready.get("status") == "True",
        created_at=next((t for s in reversed(snaps) if (t := _time(s.payload.get("created")))), None),
        last_seen=last.observed_at,
        deleted_at=last.observed_at if last.kind == Kind.NODE_DELETED else None,
    )


def _audited_node_row(observations: list[Observation]) -> NodeRow | None:
    changes = [
        o
        for o in _ordered(observations, frozenset({Kind.AUDIT}))
        if o.payload.get("resource") == "nodes"
        and o.payload.get("succeeded") is True
        and not o.payload.get("dry_run")
        and isinstance((o.payload.get("node_change") or {}).get("unschedulable"), bool)
    ]
    if not changes:
        return None
    last = changes[-1]
    return NodeRow(
        name=str(last.node or last.name or ""),
        uid=next((str(o.payload["uid"]) for o in reversed(changes) if o.payload.get("uid")), ""),
        labels={},
        unschedulable=bool(last.payload["node_change"]["unschedulable"]),
        ready=None,
        created_at=None,
        last_seen=last.observed_at,
        deleted_at=None,
    )


def _samples(snaps: list[Observation], sample_of: Any) -> list[tuple[datetime, dict[str, Any]]]:
    """(time, sample) at each snapshot whose sample differs from the one before it."""
    out: list[tuple[datetime, dict[str, Any]]] = []
    for s in snaps:
        sample = sample_of(s.payload)
        if out and out[-1][1] == sample:
            continue
        if out and out[-1][0] == s.observed_at:
            out[-1] = (s.observed_at, sample)  # two snapshots at one instant: the later one counts
            continue
        out.append((s.observed_at, sample))
    return out


@dataclass(frozen=True)
class PdbRow:
    uid: str
    namespace: str
    name: str
    selector: dict[str, Any]
    min_available: str
    max_unavailable: str
    unhealthy_pod_eviction_policy: str
    created_at: datetime | None
    deleted_at: datetime | None
    samples: list[tuple[datetime, dict[str, Any]]] = field(default_factory=list)


def _pdb_sample(p: Mapping[str, Any]) -> dict[str, Any]:
    status = p.get("status") or {}
    allowed = _condition(status.get("conditions"), "DisruptionAllowed") or {}
    return {
        "disruptions_allowed": status.get("disruptions_allowed") or 0,
        "current_healthy": status.get("current_healthy") or 0,
        "desired_healthy": status.get("desired_healthy") or 0,
        "expected_pods": status.get("expected_pods") or 0,
        "observed_generation": status.get("observed_generation"),
        "reason": allowed.get("reason") or "",
        "disrupted_pods": status.get("disrupted_pods") or {},
        "conditions": status.get("conditions") or [],
    }


def pdb_rows(observations: Iterable[Observation]) -> list[PdbRow]:
    """One row (with its status samples) per PDB uid among ``observations`` (PDB snapshots)."""
    by_uid: dict[str, list[Observation]] = {}
    for o in _ordered(observations, PDB_SNAPSHOTS):
        uid = o.payload.get("uid")
        if uid:
            by_uid.setdefault(str(uid), []).append(o)
    rows = []
    for uid, snaps in sorted(by_uid.items()):
        p = snaps[-1].payload
        rows.append(
            PdbRow(
                uid=uid,
                namespace=str(p.get("namespace") or snaps[-1].namespace or ""),
                name=str(p.get("name") or snaps[-1].name or ""),
                selector=dict(p.get("selector") or {}),
                min_available="" if p.get("min_available") is None else str(p["min_available"]),
                max_unavailable="" if p.get("max_unavailable") is None else str(p["max_unavailable"]),
                unhealthy_pod_eviction_policy=str(p.get("unhealthy_pod_eviction_policy") or ""),
                created_at=next((t for s in reversed(snaps) if (t := _time(s.payload.get("created")))), None),
                deleted_at=min((s.observed_at for s in snaps if s.kind == Kind.PDB_DELETED), default=None),
                samples=_samples(snaps, _pdb_sample),
            )
        )
    return rows


@dataclass(frozen=True)
class WorkloadRow:
    uid: str
    kind: str
    namespace: str
    name: str
    owner_kind: str
    owner_name: str
    owner_uid: str
    selector: dict[str, Any]
    created_at: datetime | None
    deleted_at: datetime | None
    samples: list[tuple[datetime, dict[str, Any]]] = field(default_factory=list)


def _first_int(status: Mapping[str, Any], *names: str) -> int | None:
    for name in names:
        value = status.get(name)
        if isinstance(value, int):
            return value
    return None


def _workload_sample(p: Mapping[str, Any]) -> dict[str, Any]:
    status = p.get("status") or {}
    kind = p.get("kind")
    return {
        "replicas": p.get("spec_replicas") if kind != "DaemonSet" else status.get("desired_number_scheduled"),
        "current": _first_int(status, "replicas", "current_replicas", "current_number_scheduled"),
        "ready": _first_int(status, "ready_replicas", "number_ready"),
        "updated": _first_int(status, "updated_replicas", "updated_number_scheduled"),
        "available": _first_int(status, "available_replicas", "number_available"),
        "status": status,
    }


def workload_rows(observations: Iterable[Observation]) -> list[WorkloadRow]:
    """One row (with its status samples) per workload uid among ``observations`` (workload snapshots)."""
    by_uid: dict[str, list[Observation]] = {}
    for o in _ordered(observations, WORKLOAD_SNAPSHOTS):
        uid, kind = o.payload.get("uid"), o.payload.get("kind")
        if uid and kind in WORKLOAD_KINDS:
            by_uid.setdefault(str(uid), []).append(o)
    rows = []
    for uid, snaps in sorted(by_uid.items()):
        p = snaps[-1].payload
        owner = p.get("owner") or {}
        rows.append(
            WorkloadRow(
                uid=uid,
                kind=str(p["kind"]),
                namespace=str(p.get("namespace") or ""),
                name=str(p.get("name") or ""),
                owner_kind=str(owner.get("kind") or ""),
                owner_name=str(owner.get("name") or ""),
                owner_uid=str(owner.get("uid") or ""),
                selector=dict(p.get("selector") or {}),
                created_at=_time(p.get("created")),
                deleted_at=min(
                    (s.observed_at for s in snaps if s.kind == Kind.WORKLOAD_DELETED), default=None
                ),
                samples=_samples(snaps, _workload_sample),
            )
        )
    return rows
