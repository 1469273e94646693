"""What an export covers: a scope (pods, a node, a namespace, a workload or a PDB) and a window, resolved
to the pods whose life overlaps the window and to the nodes, PDBs and workloads that belong beside them.

A pod's life is [created_at (else first_seen), deleted_at]; an unknown start counts as "long ago" and a
missing deletion as "still there", so a pod is left out only when the stored rows say it was not alive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db.models import Q

from dashboard import queries
from timelines.lifecycle.observation import time_problem
from timelines.lifecycle.timeline import format_time, parse_time
from timelines.models import Cluster, Node, Pod, PodDisruptionBudget, Workload

SCOPE_KINDS = ("pods", "node", "namespace", "workload", "pdb")
MAX_SCOPE_PODS = 50_000
# Beyond this many nodes a namespace/workload/PDB export leaves node lanes out (a namespace can span
# hundreds of nodes, each with a day of kubelet metrics); the metadata says how many were left out.
MAX_SIDE_NODES = 20
MAX_SIDE_WORKLOADS = 200


class ScopeError(ValueError):
    """A scope or window that cannot be exported; the message names the input and what was expected."""


@dataclass(frozen=True)
class Scope:
    """One of: ``pods`` (``values`` = UIDs), ``node`` / ``namespace`` (one name), ``workload``
    (``KIND/NAMESPACE/NAME``), ``pdb`` (``NAMESPACE/NAME``)."""

    kind: str
    values: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.kind not in SCOPE_KINDS:
            raise ScopeError(f"scope kind {self.kind!r} is not one of {list(SCOPE_KINDS)}")
        if not self.values or not all(isinstance(v, str) and v for v in self.values):
            raise ScopeError(f"scope {self.kind} needs at least one non-empty value")
        if self.kind != "pods" and len(self.values) != 1:
            raise ScopeError(f"scope {self.kind} takes exactly one value, got {len(self.values)}")
        if self.kind == "workload":
            parts = self.values[0].split("/")
            if len(parts) != 3 or not all(parts) or parts[0] not in Workload.Kind.values:
                raise ScopeError(
                    f"workload {self.values[0]!r} is not KIND/NAMESPACE/NAME with KIND one of "
                    f"{list(Workload.Kind.values)}"
                )
        if self.kind == "pdb":
            parts = self.values[0].split("/")
            if len(parts) != 2 or not all(parts):
                raise ScopeError(f"pdb {self.values[0]!r} is not NAMESPACE/NAME")

    @classmethod
    def pods(cls, uids: Iterable[str]) -> Scope:
        return cls("pods", tuple(uids))

    @classmethod
    def one(cls, kind: str, value: str) -> Scope:
        return cls(kind, (value,))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Scope:
        if not isinstance(data, Mapping):
            raise ScopeError("scope must be a JSON object {kind, values}")
        values = data.get("values")
        if not isinstance(values, list):
            raise ScopeError("scope.values must be a list of strings")
        return cls(str(data.get("kind")), tuple(str(v) for v in values))

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "values": list(self.values)}

    def label(self) -> str:
        if self.kind == "pods":
            return f"{len(self.values)} pod{'s' if len(self.values) != 1 else ''}"
        return f"{self.kind} {self.values[0]}"


def parse_zone(value: str | None) -> str:
    """The time zone an HTML export opens in: ``utc`` (also for nothing given) or an IANA name such as
    ``Europe/Paris`` (the zone the exporter's page showed; a browser's "local" is resolved by the browser
    to its IANA name before it asks, since the server cannot know it)."""
    if not value or value.lower() == "utc":
        return "utc"
    try:
        ZoneInfo(value)
    except (ValueError, ZoneInfoNotFoundError):
        raise ScopeError(
            f"tz {value!r} is not a time zone: give utc or an IANA name such as Europe/Paris"
        ) from None
    return value


def parse_window(since: str | datetime, until: str | datetime) -> tuple[datetime, datetime]:
    """Both ends as aware UTC datetimes (ISO 8601 with an offset, ``Z`` accepted); ``since < until``."""
    out = []
    for label, value in (("since", since), ("until", until)):
        if isinstance(value, datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                raise ScopeError(f"--{label} {value!r} is naive; give a time with an offset")
            out.append(parse_time(format_time(value)))
            continue
        try:
            parsed = parse_time(value)
        except ValueError as exc:
            raise ScopeError(f"--{label}: {exc}") from None
        if parsed is None:
            raise ScopeError(f"--{label} is required (ISO 8601 with an offset, e.g. 2024-06-07T06:00:00Z)")
        problem = time_problem(f"--{label}", parsed)
        if problem is not None:  # the supported range (docs/configuration.md)
            raise ScopeError(problem)
        out.append(parsed)
    start, end = out
    assert start is not None and end is not None
    if start >= end:
        raise ScopeError(f"--since {format_time(start)} is not before --until {format_time(end)}")
    return start, end


@dataclass
class Resolved:
    """A scope resolved against the stored rows (pods ordered by namespace, name, UID)."""

    cluster: Cluster
    scope: Scope
    since: datetime
    until: datetime
    pods: list[Pod]
    nodes: list[Node] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    namespaces: set[str] | None = None  # readable namespaces (None: all, and what has no namespace)

    @property
    def pod_uids(self) -> list[str]:
        return [p.uid for p in self.pods]


def _alive_in(since: datetime, until: datetime) -> Q:
    started_before_end = (
        Q(created_at__lt=until)
        | Q(created_at__isnull=True, first_seen__lt=until)
        | Q(created_at__isnull=True, first_seen__isnull=True)
    )
    return started_before_end & (Q(deleted_at__isnull=True) | Q(deleted_at__gte=since))


def require_known(cluster: Cluster, scope: Scope, *, namespaces: set[str] | None = None) -> None:
    """Raise ``queries.NotFound`` when the pods or the node of ``scope`` are unknown to the reader (cheap:
    run before a background export is queued, and by ``resolve``). A pod in a namespace the reader may not
    read, or a node none of its readable pods ran on, is as unknown as one never seen (docs/security.md):
    404, not an empty bundle that confirms it exists."""
    if scope.kind == "pods":
        wanted = list(dict.fromkeys(scope.values))
        readable_pods = Pod.objects.filter(cluster=cluster)
        if namespaces is not None:
            readable_pods = readable_pods.filter(namespace__in=sorted(namespaces))
        known: set[str] = set()
        for i in range(0, len(wanted), 500):
            known |= set(readable_pods.filter(uid__in=wanted[i : i + 500]).values_list("uid", flat=True))
        missing = [u for u in wanted if u not in known]
        if missing:
            raise queries.NotFound(
                f"no pod with UID {', '.join(map(repr, missing[:5]))} in cluster {cluster.name!r}"
            )
    elif scope.kind == "node":
        value = scope.values[0]
        if namespaces is None:
            seen = (
                Node.objects.filter(cluster=cluster, name=value).exists()
                or Pod.objects.filter(cluster=cluster, node=value).exists()
            )
        else:
            seen = Pod.objects.filter(cluster=cluster, node=value, namespace__in=sorted(namespaces)).exists()
        if not seen:
            raise queries.NotFound(f"no node {value!r} in cluster {cluster.name!r}")


def resolve(
    cluster: Cluster,
    scope: Scope,
    since: datetime,
    until: datetime,
    *,
    namespaces: set[str] | None = None,
) -> Resolved:
    """The pods of ``scope`` alive in ``[since, until)`` and what goes beside them.

    ``namespaces`` narrows everything to readable namespaces (None: all). Node lanes belong to no
    namespace, so they are included only when every namespace is readable. Raises ScopeError or
    ``queries.NotFound`` naming what was not found.
    """
    pods_qs = Pod.objects.filter(cluster=cluster).filter(_alive_in(since, until))
    if namespaces is not None:
        pods_qs = pods_qs.filter(namespace__in=sorted(namespaces))
    side_pdbs: list[PodDisruptionBudget] | None = None
    workloads: list[Workload] = []
    value = scope.values[0]
    require_known(cluster, scope, namespaces=namespaces)
    if scope.kind == "pods":
        wanted = list(dict.fromkeys(scope.values))
        pods = []
        for i in range(0, len(wanted), 500):
            pods += list(pods_qs.filter(uid__in=wanted[i : i + 500]))
    elif scope.kind == "node":
        pods = list(pods_qs.filter(node=value))
    elif scope.kind == "namespace":
        if namespaces is not None and value not in namespaces:
            raise queries.NotFound(f"no readable namespace {value!r} in cluster {cluster.name!r}")
        pods = list(pods_qs.filter(namespace=value))
    elif scope.kind == "workload":
        kind, ns, name = value.split("/")
        if namespaces is not None and ns not in namespaces:
            raise queries.NotFound(f"no readable namespace {ns!r} in cluster {cluster.name!r}")
        workload = queries.get_workload(cluster, ns, kind, name)
        workloads = queries.workload_tree(cluster, workload)
        owners = Q(owner_uid__in=[w.uid for w in workloads])
        # Offline dumps can name an owner without its UID: match the owner by kind and name too.
        for w in workloads:
            owners |= Q(owner_uid="", owner_kind=w.kind, owner_name=w.name, namespace=w.namespace)
        pods = list(pods_qs.filter(namespace=ns).filter(owners))
    else:  # pdb
        ns, name = value.split("/")
        if namespaces is not None and ns not in namespaces:
            raise queries.NotFound(f"no readable namespace {ns!r} in cluster {cluster.name!r}")
        pdb = queries.get_pdb(cluster, ns, name)
        side_pdbs = [pdb]
        pods = [
            p for p in pods_qs.filter(namespace=ns) if queries.selector_matches(pdb.selector or {}, p.labels)
        ]
    if len(pods) > MAX_SCOPE_PODS:
        raise ScopeError(
            f"{scope.label()} has {len(pods)} pods in the window; at most {MAX_SCOPE_PODS} export at once "
            "(narrow the window or the scope)"
        )
    pods.sort(key=lambda p: (p.namespace, p.name, p.uid))
    resolved = Resolved(cluster, scope, since, until, pods, namespaces=namespaces)
    resolved.pdbs = side_pdbs if side_pdbs is not None else _covering_pdbs(cluster, pods)
    resolved.workloads = workloads or _owning_workloads(cluster, pods, resolved.notes)
    resolved.nodes = _side_nodes(cluster, scope, pods, namespaces, resolved.notes)
    return resolved


def _covering_pdbs(cluster: Cluster, pods: list[Pod]) -> list[PodDisruptionBudget]:
    """PDBs (any age) whose selector matches at least one of ``pods``."""
    by_ns: dict[str, list[Pod]] = {}
    for p in pods:
        by_ns.setdefault(p.namespace, []).append(p)
    out = []
    for pdb in PodDisruptionBudget.objects.filter(cluster=cluster, namespace__in=sorted(by_ns)).order_by(
        "namespace", "name", "uid"
    ):
        if any(queries.selector_matches(pdb.selector or {}, p.labels or {}) for p in by_ns[pdb.namespace]):
            out.append(pdb)
    return out


def _owning_workloads(cluster: Cluster, pods: list[Pod], notes: list[str]) -> list[Workload]:
    """The pods' controllers and their owners (a ReplicaSet's Deployment), when stored."""
    uids = sorted({p.owner_uid for p in pods if p.owner_uid})
    found: dict[str, Workload] = {}
    while uids:
        batch = {w.uid: w for w in Workload.objects.filter(cluster=cluster, uid__in=uids[:500])}
        found.update(batch)
        uids = sorted({w.owner_uid for w in batch.values() if w.owner_uid and w.owner_uid not in found})
        if len(found) > MAX_SIDE_WORKLOADS:
            notes.append(
                f"more than {MAX_SIDE_WORKLOADS} owning workloads: their status samples are left out"
            )
            return []
    return sorted(found.values(), key=lambda w: (w.namespace, w.kind, w.name, w.uid))


def _side_nodes(
    cluster: Cluster, scope: Scope, pods: list[Pod], namespaces: set[str] | None, notes: list[str]
) -> list[Node]:
    if namespaces is not None:
        notes.append("node lanes are left out: they belong to no namespace, and not every one is readable")
        return []
    names = [scope.values[0]] if scope.kind == "node" else sorted({p.node for p in pods if p.node})
    if len(names) > MAX_SIDE_NODES:
        notes.append(
            f"the pods ran on {len(names)} nodes (more than {MAX_SIDE_NODES}): node lanes are left out"
        )
        return []
    return list(Node.objects.filter(cluster=cluster, name__in=names).order_by("name"))
