"""The JSON shape of every document the read side writes but the timeline (msgspec Structs), and the
pod row's part of a timeline.

``TimelineDoc`` and its parts are declared, assembled and read in the pure ``timelines/lifecycle/schema.py``
(re-exported here), the one writer the live push uses too; ``pod_doc`` is a pod row's ``pod`` part, which
``dashboard/timeline_reads.py`` hands to it. Every other document (workloads, PDBs, findings, pods as a
list, observations, the bundle's sections) is declared here: the REST API and the incident bundle build
the same Structs, with times always ``format_time`` text (UTC, microseconds always, ``+00:00``) and owner
references as ``{kind, name, uid}`` or null. The bundle adds its window-bound parts (lanes, samples,
covered pods) in subclasses, so a bundle's ``pdbs`` / ``workloads`` items keep their document order byte
for byte; ``BUNDLE_SECTIONS`` is what the import reads back.

The read layer (``dashboard/queries.py``) returns models and rows with datetimes; this module is the edge
where they become wire text. ``to_builtins`` gives the plain dict orjson writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any

import msgspec

from timelines.lifecycle.schema import (
    FindingDoc,
    IntervalDoc,
    MarkerDoc,
    PodDoc,
    SeverityName,
    Time,
    TimelineDoc,
    check_times,
    decode_timeline,
    to_builtins,
)
from timelines.lifecycle.timeline import format_time
from timelines.models import Finding, Node, Pod, PodDisruptionBudget, Workload
from timelines.observation_rows import StoredRow


class Owner(msgspec.Struct, frozen=True):
    """A controller owner reference."""

    kind: str
    name: str
    uid: str


def owner(kind: str, name: str, uid: str) -> Owner | None:
    """The owner reference of a row's ``owner_*`` columns; None when it has no controller owner."""
    return Owner(kind=kind, name=name, uid=uid) if kind else None


def pod_doc(pod: Pod) -> PodDoc:
    """A pod row's identity, the ``pod`` of its timeline document (``schema.write_timeline`` writes the
    same fields of a derived timeline)."""
    return PodDoc(
        uid=pod.uid,
        namespace=pod.namespace or None,
        name=pod.name or None,
        node=pod.node or None,
        static=pod.static,
        owner={"kind": pod.owner_kind, "name": pod.owner_name, "uid": pod.owner_uid}
        if pod.owner_kind
        else None,
        created_at=format_time(pod.created_at),
        deleted_at=format_time(pod.deleted_at),
        phase=pod.phase or None,
        first_observed=format_time(pod.first_seen),
        last_observed=format_time(pod.last_seen),
    )


# --- workloads and PDBs ------------------------------------------------------------------------------------
class WorkloadSample(msgspec.Struct):
    """One status sample of a Deployment, ReplicaSet, StatefulSet, DaemonSet or Job."""

    at: Time
    replicas: int | None
    current: int | None
    ready: int | None
    updated: int | None
    available: int | None

    def __post_init__(self) -> None:
        check_times(self, ("at",), ())


class PdbSample(msgspec.Struct):
    """One status sample of a PodDisruptionBudget."""

    at: Time
    disruptions_allowed: int
    current_healthy: int
    desired_healthy: int
    expected_pods: int
    observed_generation: int | None
    reason: str
    disrupted_pods: dict[str, Any]
    conditions: list[Any]

    def __post_init__(self) -> None:
        check_times(self, ("at",), ())


class WorkloadDoc(msgspec.Struct):
    """A workload's identity, as the API lists it and a bundle carries it."""

    kind: str
    uid: str
    namespace: str
    name: str
    owner: Owner | None
    selector: dict[str, Any]
    created_at: Time | None
    deleted_at: Time | None

    def __post_init__(self) -> None:
        check_times(self, (), ("created_at", "deleted_at"))


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
    created_at: Time | None
    deleted_at: Time | None

    def __post_init__(self) -> None:
        check_times(self, (), ("created_at", "deleted_at"))


class PdbBundleDoc(PdbDoc):
    """A bundle's PDB: its own lanes in the window, status samples, the bundle's pods it covers."""

    lanes: dict[str, list[IntervalDoc]]
    samples: list[PdbSample]
    covered_pods: list[str]
    evidence_outside_bundle: int  # cited observations the bundle does not carry (left out of evidence)


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
    """A sample row of ``queries.workload_samples`` (``at`` and ``WORKLOAD_SAMPLE_FIELDS``, times as datetimes)."""
    return WorkloadSample(**{**row, "at": _time(row["at"])})


def pdb_sample(row: Mapping[str, Any]) -> PdbSample:
    """A sample row of ``queries.pdb_samples`` (``at`` and ``PDB_SAMPLE_FIELDS``, times as datetimes)."""
    return PdbSample(**{**row, "at": _time(row["at"])})


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
    lanes: dict[str, list[IntervalDoc]],
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

    start: Time
    end: Time | None
    reason: str


def blocked_period(row: Mapping[str, Any]) -> BlockedPeriod:
    """A row of ``queries.blocked_periods`` (times as datetimes)."""
    return BlockedPeriod(start=_time(row["start"]), end=format_time(row["end"]), reason=row["reason"])


Subject = Annotated[str, msgspec.Meta(extra_json_schema={"enum": ["pod", "pdb", "node"]})]


class FindingRowDoc(msgspec.Struct):
    """A stored finding as ``/api/v1/findings`` lists it (evidence: observation ids)."""

    id: int
    cluster: str
    subject: Subject
    subject_name: str
    pod_uid: str | None
    namespace: str
    node: str
    kind: str
    severity: SeverityName
    message: str
    start: Time
    end: Time | None
    evidence: list[int]
    attrs: dict[str, Any]


def finding_row_doc(f: Finding, cluster: str) -> FindingRowDoc:
    return FindingRowDoc(
        id=f.id,
        cluster=cluster,
        subject=f.subject,
        subject_name=f.subject_name,
        pod_uid=f.pod_uid,
        namespace=f.namespace,
        node=f.node,
        kind=f.kind,
        severity=f.severity,
        message=f.message,
        start=_time(f.start),
        end=format_time(f.end),
        evidence=list(f.evidence or ()),
        attrs=dict(f.attrs or {}),
    )


class PodRowDoc(msgspec.Struct):
    """A pod as the API lists it (search results, a PDB's covered pods)."""

    uid: str
    namespace: str
    name: str
    node: str
    owner: Owner | None
    phase: str
    static: bool
    created_at: Time | None
    deleted_at: Time | None
    last_seen: Time | None


def pod_row_doc(p: Pod) -> PodRowDoc:
    return PodRowDoc(
        uid=p.uid,
        namespace=p.namespace,
        name=p.name,
        node=p.node,
        owner=owner(p.owner_kind, p.owner_name, p.owner_uid),
        phase=p.phase,
        static=p.static,
        created_at=format_time(p.created_at),
        deleted_at=format_time(p.deleted_at),
        last_seen=format_time(p.last_seen),
    )


class ObservationDoc(msgspec.Struct):
    """A stored observation as the API returns it (the raw evidence behind a timeline)."""

    id: int
    kind: str
    source: str
    observed_at: Time
    received_at: Time
    dedupe_key: str
    node: str
    namespace: str
    name: str
    payload: Any


def observation_doc(o: StoredRow) -> ObservationDoc:
    return ObservationDoc(
        id=o.id,
        kind=o.kind,
        source=o.source,
        observed_at=_time(o.observed_at),
        received_at=_time(o.received_at),
        dedupe_key=o.dedupe_key,
        node=o.node,
        namespace=o.namespace,
        name=o.name,
        payload=o.payload,
    )


API_SCHEMAS = (
    TimelineDoc,
    FindingRowDoc,
    PodRowDoc,
    ObservationDoc,
    WorkloadDoc,
    WorkloadSample,
    PdbDoc,
    PdbSample,
    BlockedPeriod,
)


def json_schemas(ref_template: str = "#/components/schemas/{name}") -> dict[str, Any]:
    """JSON Schemas of the API's timeline, workload and PDB documents, generated from these Structs (the OpenAPI
    document's components), so the published schema cannot drift from what is sent."""
    _, components = msgspec.json.schema_components(API_SCHEMAS, ref_template=ref_template)
    return components


def default(value: Any) -> Any:
    """orjson's ``default``: a Struct becomes its builtins (anything else is an error, as without it)."""
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    raise TypeError(f"cannot serialize {type(value).__name__}")


class NodeBundleDoc(msgspec.Struct):
    """A bundle's node: identity and its own lanes (``node:*``) in the window (read back on import)."""

    name: str
    uid: str | None
    labels: dict[str, Any]
    ready: bool | None
    unschedulable: bool
    created_at: Time | None
    deleted_at: Time | None
    lanes: dict[str, list[IntervalDoc]]
    evidence_outside_bundle: int

    def __post_init__(self) -> None:
        check_times(self, (), ("created_at", "deleted_at"))


def node_bundle_doc(
    node: Node, *, lanes: dict[str, list[IntervalDoc]], evidence_outside_bundle: int
) -> NodeBundleDoc:
    return NodeBundleDoc(
        name=node.name,
        uid=node.uid or None,
        labels=node.labels or {},
        ready=node.ready,
        unschedulable=node.unschedulable,
        created_at=format_time(node.created_at),
        deleted_at=format_time(node.deleted_at),
        lanes=lanes,
        evidence_outside_bundle=evidence_outside_bundle,
    )


class FindingBundleDoc(msgspec.Struct):
    """A bundle's ``findings`` item: a stored finding of one of its pods or PDBs (evidence: dedupe keys, as
    in its pods' timelines; no database id, no cluster)."""

    subject: Subject
    subject_name: str
    pod_uid: str | None
    namespace: str | None
    node: str | None
    kind: str
    severity: SeverityName
    message: str
    start: Time
    end: Time | None
    attrs: dict[str, Any]
    evidence: list[str]

    def __post_init__(self) -> None:
        check_times(self, ("start",), ("end",))


BUNDLE_SECTIONS: dict[str, type[msgspec.Struct]] = {
    "pods": TimelineDoc,
    "nodes": NodeBundleDoc,
    "pdbs": PdbBundleDoc,
    "workloads": WorkloadBundleDoc,
    "findings": FindingBundleDoc,
}


def check_bundle_item(section: str, item: Any) -> None:
    """Raise ValueError naming the field when ``item`` does not fit its bundle section's Struct."""
    if section == "pods":
        decode_timeline(item)
        return
    try:
        msgspec.convert(item, BUNDLE_SECTIONS[section])
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None


__all__ = [
    "FindingDoc",
    "IntervalDoc",
    "MarkerDoc",
    "PodDoc",
    "TimelineDoc",
    "decode_timeline",
    "to_builtins",
]
