"""Re-derive pods: read a pod's observations, run the pure lifecycle core, replace what was derived.

Called by the ingestion pipeline for every pod that got a new observation, by ``manage.py rederive`` to
rebuild from the source of truth, and on a schedule for pods still open (a terminating pod becomes
"stuck" as time passes, with no new observation).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max, Min, Q
from django.utils import timezone

from timelines import store
from timelines.lifecycle.cluster_objects import (
    CoveredPod,
    NodeTimeline,
    PdbTimeline,
    derive_node_timeline,
    derive_pdb_timeline,
)
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.findings import Thresholds
from timelines.lifecycle.observation import Kind, Observation
from timelines.lifecycle.resolve import (
    CONTEXT_LOOKBACK,
    CONTEXT_MARGIN,
    KUBELET_KINDS,
    Anchor,
    anchors_of,
    resolve_pod_observations,
)
from timelines.lifecycle.timeline import PodTimeline
from timelines.models import Cluster, Interval, Pod, PodDisruptionBudget
from timelines.models import Observation as ObservationRow


def thresholds_from_settings() -> Thresholds:
    """The finding thresholds, from settings (which read them from the environment)."""
    return Thresholds(
        stuck_terminating_slack=timedelta(seconds=settings.PODLIFE_STUCK_TERMINATING_SLACK_S),
        grace_exceeded_slack=timedelta(seconds=settings.PODLIFE_GRACE_EXCEEDED_SLACK_S),
        slow_cleanup=timedelta(seconds=settings.PODLIFE_SLOW_CLEANUP_S),
        crash_loop_restarts=settings.PODLIFE_CRASH_LOOP_RESTARTS,
        crash_loop_window=timedelta(seconds=settings.PODLIFE_CRASH_LOOP_WINDOW_S),
    )


def _observation(fields: list[Any] | tuple[Any, ...]) -> Observation:
    kind, source, observed_at, dedupe_key, pod_uid, node, namespace, name, payload = fields
    return Observation(
        kind, source, observed_at, dedupe_key, pod_uid, node or None, namespace or None, name or None, payload
    )


def observation_from_row(row: ObservationRow) -> Observation:
    return Observation(
        kind=row.kind,
        source=row.source,
        observed_at=row.observed_at,
        dedupe_key=row.dedupe_key,
        pod_uid=row.pod_uid,
        node=row.node or None,
        namespace=row.namespace or None,
        name=row.name or None,
        payload=row.payload,
    )


CHUNK = 200  # pods per read-derive-replace round


@dataclass
class PodInputs:
    """What one pod is derived from: its observations (own, plus the UID-less kubelet lines resolved to
    it and node-level context), evidence ids by dedupe key, and its newest labels."""

    observations: list[Observation]
    ids_by_key: dict[str, int]
    labels: dict[str, Any]


# UID-less kubelet lines: SyncLoop / shutdown / eviction / status lines naming ns/name, and node-level
# lines (a kubelet process, the eviction manager reclaiming) naming no pod.
UIDLESS_KINDS = (Kind.WORKER, Kind.KUBELET_MARKER, Kind.KUBELET_PROCESS)


def pod_observations_with_candidates(cluster: Cluster, uids: Iterable[str]) -> dict[str, PodInputs]:
    """Each pod's own observations plus the UID-less candidates that belong to it, for the pure core.

    Candidates: same cluster, no pod UID, and either the same ``namespace``/``name`` (on any node), or
    no name and a node the pod left evidence on, within its span (``resolve.CONTEXT_MARGIN``, kubelet
    processes from ``CONTEXT_LOOKBACK`` before). Which of them belong is decided by
    ``timelines.lifecycle.resolve.resolve_pod_observations``, with the other incarnations of the same
    name (``Pod`` rows) as rivals. So when a UID-less line arrives, the pods named ``ns/name`` must be
    re-derived (all of them, on any node); a node-level line on node N at time t concerns the pods on
    N whose span reaches t; and a UID-bearing observation of pod U re-derives U and the other pods named
    like U.
    """
    wanted = sorted(set(uids))
    rows_by_uid: dict[str, list[ObservationRow]] = {u: [] for u in wanted}
    for row in ObservationRow.objects.filter(cluster=cluster, pod_uid__in=wanted).order_by(
        "pod_uid", "observed_at", "id"
    ):
        rows_by_uid[row.pod_uid or ""].append(row)
    own = {u: [observation_from_row(r) for r in rows] for u, rows in rows_by_uid.items()}
    names = {(o.namespace, o.name) for obs in own.values() for o in obs if o.namespace and o.name}
    spans: dict[str, tuple[datetime, datetime]] = {}
    for obs in own.values():
        for o in obs:
            if o.node:
                lo, hi = spans.get(o.node, (o.observed_at, o.observed_at))
                spans[o.node] = (min(lo, o.observed_at), max(hi, o.observed_at))
    candidate_rows: dict[str, ObservationRow] = {}
    if names:
        by_name = Q()
        for ns, name in names:
            by_name |= Q(namespace=ns, name=name)
        for row in ObservationRow.objects.filter(
            by_name, cluster=cluster, pod_uid__isnull=True, kind__in=UIDLESS_KINDS
        ):
            candidate_rows[row.dedupe_key] = row
    for node, (lo, hi) in spans.items():
        for row in ObservationRow.objects.filter(
            cluster=cluster,
            pod_uid__isnull=True,
            kind__in=UIDLESS_KINDS,
            node=node,
            name="",
            observed_at__gte=lo - CONTEXT_LOOKBACK,
            observed_at__lte=hi + CONTEXT_MARGIN,
        ):
            candidate_rows[row.dedupe_key] = row
    candidates = [observation_from_row(r) for r in candidate_rows.values()]
    # The other incarnations of these names: where they left evidence.
    rival_uids = set(
        Pod.objects.filter(
            Q(*[Q(namespace=ns, name=name) for ns, name in names], _connector=Q.OR)
            if names
            else Q(pk__in=[]),
            cluster=cluster,
        ).values_list("uid", flat=True)
    ) - set(wanted)
    anchors = anchors_of(o for obs in own.values() for o in obs)
    if rival_uids:
        rival_names = {
            uid: (ns, name)
            for uid, ns, name in Pod.objects.filter(cluster=cluster, uid__in=rival_uids).values_list(
                "uid", "namespace", "name"
            )
        }
        for uid, node, kind, first, last in (
            ObservationRow.objects.filter(cluster=cluster, pod_uid__in=rival_uids)
            .exclude(node="")
            .values_list("pod_uid", "node", "kind")
            .annotate(first=Min("observed_at"), last=Max("observed_at"))
            .values_list("pod_uid", "node", "kind", "first", "last")
        ):
            ns, name = rival_names.get(uid, (None, None))
            anchors.append(Anchor(uid, node, first, last, kind in KUBELET_KINDS, ns, name))
    out: dict[str, PodInputs] = {}
    for uid in wanted:
        rows = rows_by_uid[uid]
        if not rows:
            continue
        resolved = list(resolve_pod_observations(uid, own[uid], candidates, anchors))
        ids = {r.dedupe_key: r.id for r in rows}
        ids.update(
            {
                o.dedupe_key: candidate_rows[o.dedupe_key].id
                for o in resolved
                if o.dedupe_key in candidate_rows
            }
        )
        labels = next(
            (r.payload.get("labels") or {} for r in reversed(rows) if r.kind in (Kind.POD, Kind.POD_DELETED)),
            {},
        )
        out[uid] = PodInputs(resolved, ids, labels)
    return out


def rederive_pods(cluster: Cluster, uids: Iterable[str], *, now: datetime | None = None) -> list[PodTimeline]:
    """Re-derive each pod in ``uids`` from all its stored observations; returns the new timelines.

    "Now" (for findings about intervals still open, such as a stuck termination) is the wall clock for a
    live cluster; for offline and imported clusters it is each pod's newest observation, since their
    history stopped when the logs or bundle were taken.
    """
    if now is None and cluster.origin == Cluster.Origin.LIVE:
        now = timezone.now()
    thresholds = thresholds_from_settings()
    derived: list[PodTimeline] = []
    ordered = sorted(set(uids))
    # A chunk of pods at a time: one read of their observations, one replace of what derives from them.
    for i in range(0, len(ordered), CHUNK):
        chunk = ordered[i : i + CHUNK]
        inputs = pod_observations_with_candidates(cluster, chunk)
        batch: list[store.DerivedPod] = []
        for uid in chunk:
            pod_inputs = inputs.get(uid)
            if pod_inputs is None:
                continue
            timeline = derive_pod_timeline(pod_inputs.observations, thresholds=thresholds, now=now)
            batch.append(store.DerivedPod(timeline, pod_inputs.ids_by_key, pod_inputs.labels))
        store.replace_pod_timelines(cluster, batch)
        derived.extend(d.timeline for d in batch)
    return derived


AGING_STATES = ("terminating", "cleanup")  # open intervals whose findings change as time passes


def rederive_open_pods(*, now: datetime | None = None) -> int:
    """Re-derive the pods of live clusters that are still terminating or cleaning up, or still carry a
    deletion request: their findings (stuck, slow cleanup) depend on how long ago that began. Returns
    how many pods were re-derived."""
    open_rows = (
        Interval.objects.filter(
            cluster__origin=Cluster.Origin.LIVE,
            pod_uid__isnull=False,
            end__isnull=True,
            lane__in=("worker", "api"),
        )
        .filter(state__in=AGING_STATES)
        .values_list("cluster_id", "pod_uid")
        .distinct()
    )
    by_cluster: dict[int, set[str]] = {}
    for cluster_id, uid in open_rows:
        by_cluster.setdefault(cluster_id, set()).add(uid)
    count = 0
    for cluster in Cluster.objects.filter(pk__in=by_cluster):
        alive = set(
            Pod.objects.filter(
                cluster=cluster, uid__in=by_cluster[cluster.pk], deleted_at__isnull=True
            ).values_list("uid", flat=True)
        )
        count += len(rederive_pods(cluster, alive, now=now))
    return count


def rederive_cluster(cluster: Cluster, *, now: datetime | None = None) -> list[PodTimeline]:
    """Rebuild every pod of ``cluster`` from its observations."""
    uids = (
        ObservationRow.objects.filter(cluster=cluster, pod_uid__isnull=False)
        .values_list("pod_uid", flat=True)
        .distinct()
    )
    return rederive_pods(cluster, list(uids), now=now)


NODE_KINDS = (Kind.NODE, Kind.NODE_DELETED, Kind.NODE_METRICS, Kind.KUBELET_PROCESS)


def rederive_nodes(cluster: Cluster, names: Iterable[str]) -> list[NodeTimeline]:
    """Re-derive the own lanes of each node in ``names`` (ready, cordoned, shutdown, working pods)."""
    derived = []
    for name in sorted(set(names)):
        rows = list(ObservationRow.objects.filter(cluster=cluster, kind__in=NODE_KINDS, node=name))
        if not rows:
            continue
        timeline = derive_node_timeline(observation_from_row(r) for r in rows)
        store.replace_node_timeline(cluster, timeline, {r.dedupe_key: r.id for r in rows})
        derived.append(timeline)
    return derived


def _covered_pods(cluster: Cluster, namespace: str) -> list[CoveredPod]:
    pods = list(Pod.objects.filter(cluster=cluster, namespace=namespace))
    targets: dict[str, list[tuple[datetime, datetime | None]]] = {}
    for uid, start, end in Interval.objects.filter(
        cluster=cluster, namespace=namespace, lane="condition:DisruptionTarget", state="true"
    ).values_list("pod_uid", "start", "end"):
        targets.setdefault(uid, []).append((start, end))
    return [
        CoveredPod(
            uid=p.uid,
            namespace=p.namespace,
            name=p.name,
            node=p.node or None,
            labels=p.labels or {},
            has_controller=bool(p.owner_uid or p.owner_kind),
            created_at=p.created_at or p.first_seen,
            deleted_at=p.deleted_at,
            disruption_target=tuple(sorted(targets.get(p.uid, []))),
        )
        for p in pods
    ]


def _cordons(cluster: Cluster) -> dict[str, list[tuple[datetime, datetime | None]]]:
    spans: dict[str, list[tuple[datetime, datetime | None]]] = {}
    for node, start, end in Interval.objects.filter(
        cluster=cluster, pod_uid=None, lane="node:cordoned", state="cordoned"
    ).values_list("node", "start", "end"):
        spans.setdefault(node, []).append((start, end))
    return spans


def rederive_pdbs(cluster: Cluster, *, namespaces: Iterable[str] | None = None) -> list[PdbTimeline]:
    """Re-derive the PDBs of ``namespaces`` (all when None): their lanes, coverage and findings."""
    pdbs = PodDisruptionBudget.objects.filter(cluster=cluster)
    if namespaces is not None:
        pdbs = pdbs.filter(namespace__in=set(namespaces))
    cordons = _cordons(cluster) if pdbs.exists() else {}
    pods_by_ns: dict[str, list[CoveredPod]] = {}
    derived = []
    for pdb in pdbs:
        rows = list(
            ObservationRow.objects.filter(
                cluster=cluster, kind__in=(Kind.PDB, Kind.PDB_DELETED), namespace=pdb.namespace, name=pdb.name
            ).filter(payload__uid=pdb.uid)
        )
        rows += list(
            ObservationRow.objects.filter(
                cluster=cluster,
                kind=Kind.EVENT,
                namespace=pdb.namespace,
                name=pdb.name,
                payload__involved__kind="PodDisruptionBudget",
            )
        )
        if not any(r.kind != Kind.EVENT for r in rows):
            continue
        if pdb.namespace not in pods_by_ns:
            pods_by_ns[pdb.namespace] = _covered_pods(cluster, pdb.namespace)
        timeline = derive_pdb_timeline(
            (observation_from_row(r) for r in rows), pods=pods_by_ns[pdb.namespace], cordons=cordons
        )
        store.replace_pdb_timeline(cluster, timeline, {r.dedupe_key: r.id for r in rows})
        derived.append(timeline)
    return derived
