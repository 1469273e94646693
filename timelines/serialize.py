"""The one place workload and PDB documents get their JSON shape (msgspec Structs).

The REST API (``timelines/web/api/views.py``) and the incident bundle (``timelines/export/reads.py``) used to
shape the same objects twice, with different key orders, different time spellings (orjson's datetime, which
drops zero microseconds, against ``format_time``) and different field sets. Both now build these Structs:
one declared shape, times always ``format_time`` text (UTC, microseconds always, ``+00:00``), owner
references as ``{kind, name, uid}`` or null. The bundle adds its window-bound parts (lanes, samples, covered
pods) in subclasses, so a bundle's ``pdbs`` / ``workloads`` items keep their document order byte for byte.

The read layer (``timelines/queries.py``) returns models and rows with datetimes; this module is the edge
where they become wire text. ``to_builtins`` gives the plain dict orjson writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from timelines.lifecycle.timeline import format_time
from timelines.models import PodDisruptionBudget, Workload


class Owner(msgspec.Struct, frozen=True):
    """A controller owner reference."""

    kind: str
    name: str
    uid: str


def owner(kind: str, name: str, uid: str) -> Owner | None:
    """The owner reference of a row's ``owner_*`` columns; None when it has no controller owner."""
    return Owner(kind=kind, name=name, uid=uid) if kind else None


class WorkloadSample(msgspec.Struct):
    """One status sample of a Deployment, ReplicaSet, StatefulSet, DaemonSet or Job."""

    at: str
    replicas: int | None
    current: int | None
    ready: int | None
    updated: int | None
    available: int | None


class PdbSample(msgspec.Struct):
    """One status sample of a PodDisruptionBudget."""

    at: str
    disruptions_allowed: int
    current_healthy: int
    desired_healthy: int
    expected_pods: int
    observed_generation: int | None
    reason: str
    disrupted_pods: dict[str, Any]
    conditions: list[Any]


class WorkloadDoc(msgspec.Struct):
    """A workload's identity, as the API lists it and a bundle carries it."""

    kind: str
    uid: str
    namespace: str
    name: str
    owner: Owner | None
    selector: dict[str, Any]
    created_at: str | None
    deleted_at: str | None


class WorkloadBundleDoc(WorkloadDoc):
    """A bundle's workload: its status samples in the window (and the newest one before it)."""

    samples: list[WorkloadSample]


class PdbDoc(msgspec.Struct):
    """A PodDisruptionBudget's identity and spec, as the API lists it and a bundle carries it."""

    uid: str
    namespace: str
    name: str
    selector: dict[str, Any]
    min_available: str | None
    max_unavailable: str | None
    unhealthy_pod_eviction_policy: str | None
    created_at: str | None
    deleted_at: str | None


class PdbBundleDoc(PdbDoc):
    """A bundle's PDB: its own lanes in the window, status samples, the bundle's pods it covers."""

    lanes: dict[str, list[dict[str, Any]]]
    samples: list[PdbSample]
    covered_pods: list[str]
    evidence_outside_bundle: int


def _workload_fields(w: Workload) -> dict[str, Any]:
    return {
        "kind": w.kind,
        "uid": w.uid,
        "namespace": w.namespace,
        "name": w.name,
        "owner": owner(w.owner_kind, w.owner_name, w.owner_uid),
        "selector": w.selector or {},
        "created_at": format_time(w.created_at),
        "deleted_at": format_time(w.deleted_at),
    }


def workload_doc(w: Workload) -> WorkloadDoc:
    return WorkloadDoc(**_workload_fields(w))


def workload_bundle_doc(w: Workload, samples: Sequence[Mapping[str, Any]]) -> WorkloadBundleDoc:
    return WorkloadBundleDoc(**_workload_fields(w), samples=[workload_sample(s) for s in samples])


def _time(value: datetime) -> str:
    text = format_time(value)
    assert text is not None
    return text


def workload_sample(row: Mapping[str, Any]) -> WorkloadSample:
    """A sample row of ``queries.workload_samples`` (times as datetimes)."""
    return WorkloadSample(
        at=_time(row["at"]),
        replicas=row["replicas"],
        current=row["current"],
        ready=row["ready"],
        updated=row["updated"],
        available=row["available"],
    )


def pdb_sample(row: Mapping[str, Any]) -> PdbSample:
    """A sample row of ``queries.pdb_samples`` (times as datetimes)."""
    return PdbSample(
        at=_time(row["at"]),
        disruptions_allowed=row["disruptions_allowed"],
        current_healthy=row["current_healthy"],
        desired_healthy=row["desired_healthy"],
        expected_pods=row["expected_pods"],
        observed_generation=row["observed_generation"],
        reason=row["reason"],
        disrupted_pods=row["disrupted_pods"],
        conditions=row["conditions"],
    )


def _pdb_fields(p: PodDisruptionBudget) -> dict[str, Any]:
    return {
        "uid": p.uid,
        "namespace": p.namespace,
        "name": p.name,
        "selector": p.selector or {},
        "min_available": p.min_available or None,
        "max_unavailable": p.max_unavailable or None,
        "unhealthy_pod_eviction_policy": p.unhealthy_pod_eviction_policy or None,
        "created_at": format_time(p.created_at),
        "deleted_at": format_time(p.deleted_at),
    }


def pdb_doc(p: PodDisruptionBudget) -> PdbDoc:
    return PdbDoc(**_pdb_fields(p))


def pdb_bundle_doc(
    p: PodDisruptionBudget,
    *,
    lanes: dict[str, list[dict[str, Any]]],
    samples: Sequence[Mapping[str, Any]],
    covered_pods: Sequence[str],
    evidence_outside_bundle: int,
) -> PdbBundleDoc:
    return PdbBundleDoc(
        **_pdb_fields(p),
        lanes=lanes,
        samples=[pdb_sample(s) for s in samples],
        covered_pods=list(covered_pods),
        evidence_outside_bundle=evidence_outside_bundle,
    )


class BlockedPeriod(msgspec.Struct):
    """A span in which a PDB allowed no disruption (``end`` null: still blocked)."""

    start: str
    end: str | None
    reason: str


def blocked_period(row: Mapping[str, Any]) -> BlockedPeriod:
    """A row of ``queries.blocked_periods`` (times as datetimes)."""
    return BlockedPeriod(start=_time(row["start"]), end=format_time(row["end"]), reason=row["reason"])


def default(value: Any) -> Any:
    """orjson's ``default``: a Struct becomes its builtins (anything else is an error, as without it)."""
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


def to_builtins(doc: msgspec.Struct) -> dict[str, Any]:
    """``doc`` as the plain dict orjson writes (field order kept)."""
    out = msgspec.to_builtins(doc)
    assert isinstance(out, dict)
    return out
