"""The derive stage: the one place that turns stored observations into timelines, projections and pushes.

The store marks keys dirty (``timelines/dirty.py``) in the transaction that stores what made them dirty.
Here a worker, in a loop (``drain``; the Celery task ``timelines.derive_dirty`` runs it):

1. folds the marked batches into per-key rows and claims a batch of keys no other worker holds;
2. reads each key's observations (``pod_observations``, ``node_observations``, ...) and derives with the
   pure lifecycle core and ``timelines/projections.py``, outside any transaction;
3. in ONE transaction replaces what derives from those keys (``timelines/store.py``), records the
   follow-up keys it found (a pod's namespace's PDBs; the pods a podref names) and finishes the claims:
   a key marked again meanwhile stays dirty, a claim lost to expiry rolls the whole transaction back;
4. after the commit, pushes the changed pods to live listeners (``timelines/live.py``).

So no two workers derive one key at once (no doubled intervals, no two Pod rows of one UID), a relist
or a burst derives each pod once per batch however many of its observations arrived, and a worker killed
anywhere leaves its keys to be claimed again when its claim expires. "Now" for findings about intervals
still open is the wall clock for a live cluster; for offline and imported clusters it is each pod's
newest observation, since their history stopped when the logs or bundle were taken.

PDB derivation reads the PDB's own observations (snapshots and the events about it) and, for the pods it
may cover and the nodes they run on, two derived inputs: the pods' rows (labels, owner, lifetime, node)
with their ``condition:DisruptionTarget`` intervals, and the nodes' ``node:cordoned`` intervals. Rebuilding
those from observations would re-read every pod snapshot of the namespace and every node snapshot of the
cluster on every PDB change. The order is kept by the dirty keys: a pod or node derivation that changes
one of those inputs marks the namespace's PDBs dirty in the transaction that commits the change, so the
PDB derivation that follows reads committed rows.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, InterfaceError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from podlife_site.tuning import gc_paused
from timelines import dirty, live, mirrors, observation_rows, store
from timelines.lifecycle.audit_evidence import Life, audit_lives, audit_snapshots, read_audit, source_key
from timelines.lifecycle.cluster_objects import CoveredPod, derive_node_timeline, derive_pdb_timeline
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.findings import Thresholds
from timelines.lifecycle.observation import Kind
from timelines.lifecycle.resolve import (
    CONTEXT_LOOKBACK,
    CONTEXT_MARGIN,
    KUBELET_KINDS,
    Anchor,
    anchors_of,
    nameless_lives,
    resolve_pod_observations,
    widen,
)
from timelines.lifecycle.timeline import PodTimeline
from timelines.models import Cluster, Interval, Pod, PodDisruptionBudget
from timelines.projections import node_row, pdb_rows, workload_rows

log = logging.getLogger(__name__)

NODE_KINDS = (Kind.NODE, Kind.NODE_DELETED, Kind.NODE_METRICS, Kind.KUBELET_PROCESS)
# UID-less kubelet lines: SyncLoop / shutdown / eviction / status lines naming ns/name, and node-level
# lines (a kubelet process, the eviction manager reclaiming) naming no pod.
UIDLESS_KINDS = (Kind.WORKER, Kind.KUBELET_MARKER, Kind.KUBELET_PROCESS)
NODEPODS_SLACK = timedelta(minutes=5)  # a node-level kubelet line concerns pods alive this close to it


def thresholds_from_settings() -> Thresholds:
    """The finding thresholds, from settings (which read them from the environment)."""
    return Thresholds(
        stuck_terminating_slack=timedelta(seconds=settings.PODLIFE_STUCK_TERMINATING_SLACK_S),
        grace_exceeded_slack=timedelta(seconds=settings.PODLIFE_GRACE_EXCEEDED_SLACK_S),
        slow_cleanup=timedelta(seconds=settings.PODLIFE_SLOW_CLEANUP_S),
        crash_loop_restarts=settings.PODLIFE_CRASH_LOOP_RESTARTS,
        crash_loop_window=timedelta(seconds=settings.PODLIFE_CRASH_LOOP_WINDOW_S),
    )


# -- reading observations (``timelines/observation_rows.py``: the one decode of a stored row) -------------
observation_from_row = observation_rows.observation_from_row
Fact = observation_rows.Fact
_facts = observation_rows.facts
_pg_facts = observation_rows.pg_facts
_REQUESTS_ABOUT_PODS = observation_rows.field_is(("resource",), "pods")


def _own_facts(cluster: Cluster, uids: list[str]) -> Iterable[Fact]:
    """The observations naming one of ``uids``, by pod, time and id."""
    if connection.vendor == "postgresql":
        condition, params = observation_rows.pg_pods(uids)
        return _pg_facts(condition, [cluster.pk, *params])
    return _facts(observation_rows.by_pod(observation_rows.selection(cluster, pod_uids=uids)))


def _named_facts(
    cluster: Cluster,
    names: set[tuple[str, str]],
    *,
    kinds: Sequence[str] = UIDLESS_KINDS,
    pod_requests: bool = False,
) -> Iterable[Fact]:
    """The UID-less observations of ``kinds`` naming one of ``names`` (namespace, name): by default the
    kubelet's; with ``pod_requests`` only those about the ``pods`` resource (audited requests)."""
    if not names:
        return ()
    where = _REQUESTS_ABOUT_PODS if pod_requests else None
    if connection.vendor == "postgresql":
        condition, params = observation_rows.pg_named(kinds, names)
        return _pg_facts(condition, [cluster.pk, *params], where)
    rows = observation_rows.selection(cluster, named=names, has_pod_uid=False, kinds=kinds)
    return _facts(rows, where)


def _nameless_facts(cluster: Cluster, spans: Mapping[str, tuple[datetime, datetime]]) -> Iterable[Fact]:
    """The UID-less kubelet observations naming no pod, on a node of ``spans`` within its span (from
    ``CONTEXT_LOOKBACK`` before to ``CONTEXT_MARGIN`` after)."""
    if not spans:
        return ()
    nodes = sorted(spans)
    los = [spans[n][0] - CONTEXT_LOOKBACK for n in nodes]
    his = [spans[n][1] + CONTEXT_MARGIN for n in nodes]
    if connection.vendor == "postgresql":
        condition, params = observation_rows.pg_nameless_on_nodes(UIDLESS_KINDS, nodes, los, his)
        return _pg_facts(condition, [cluster.pk, *params])
    return _facts(
        observation_rows.selection(
            cluster,
            node_spans=zip(nodes, los, his, strict=True),
            has_pod_uid=False,
            kinds=UIDLESS_KINDS,
            name="",
        )
    )


@dataclass
class PodFacts:
    """What the pods of one read are derived from: each pod's facts (its own observations plus the
    UID-less kubelet lines resolved to it), and the names whose incarnations compete for UID-less lines
    (a pod of such a name that changes may take a line from, or give one to, another incarnation)."""

    by_uid: dict[str, list[Fact]]
    contested: set[tuple[str, str]]
    resolved_ids: set[int] = field(default_factory=set)  # the UID-less rows that some pod took


def pod_observations(cluster: Cluster, uids: Sequence[str]) -> PodFacts:
    """Every stored observation of each pod in ``uids``, plus the UID-less candidates that belong to it
    (the one read a pod's derivation makes).

    Candidates: same cluster, no pod UID, and either the same ``namespace``/``name`` (on any node), or
    no name and a node the pod left evidence on, within its span (``resolve.CONTEXT_MARGIN``; kubelet
    processes from ``CONTEXT_LOOKBACK`` before). Which of them belong is decided by the pure
    ``timelines.lifecycle.resolve.resolve_pod_observations``, with the other incarnations of the same name
    (``Pod`` rows and where they left evidence) as rivals. The dirty keys follow from that
    (``timelines/dirty.py``): a UID-less line naming ``ns/name`` marks every pod of that name
    (``podref``), a node-level line the node's pods around it (``nodepods``), and a pod of a contested
    name that changes marks its rivals (``rivals``).
    """
    wanted = sorted(set(uids))
    own: dict[str, list[Fact]] = {uid: [] for uid in wanted}
    # One pass over the rows: each pod's facts, the names they carry (per pod, for the audited requests
    # below) and each node's span.
    names_of: dict[str, set[tuple[str, str]]] = {uid: set() for uid in wanted}
    spans: dict[str, tuple[datetime, datetime]] = {}
    for fact in _own_facts(cluster, wanted):
        o = fact[1]
        uid = o.pod_uid or ""
        own[uid].append(fact)
        ns, name = o.namespace, o.name
        if ns and name:
            names_of[uid].add((ns, name))
        if o.node:
            widen(spans, o.node, o.observed_at)
    names = {name for pod_names in names_of.values() for name in pod_names}
    candidates: dict[str, Fact] = {}
    for fact in _named_facts(cluster, names):
        candidates[fact[1].dedupe_key] = fact
    # Audited requests about these names: the lifecycle core joins them to an incarnation by UID / time.
    requests: dict[str, list[Fact]] = {}
    for fact in _named_facts(cluster, names, kinds=(Kind.AUDIT,), pod_requests=True):
        for uid, pod_names in names_of.items():
            if (fact[1].namespace, fact[1].name) in pod_names:
                requests.setdefault(uid, []).append(fact)
    contested = {(o.namespace or "", o.name or "") for _, o in candidates.values()}
    for fact in _nameless_facts(cluster, spans):
        candidates[fact[1].dedupe_key] = fact
    if not candidates:  # the common case: nothing to resolve, each pod is its own observations
        return PodFacts({uid: facts + requests.get(uid, []) for uid, facts in own.items()}, contested)
    ids = {o.dedupe_key: i for i, o in candidates.values()}
    anchors = anchors_of(o for facts in own.values() for _, o in facts)
    if contested:
        by_name = Q(*[Q(namespace=ns, name=name) for ns, name in names], _connector=Q.OR)
        rivals: dict[str, tuple[str, str]] = {
            uid: (ns, name)
            for uid, ns, name in Pod.objects.filter(by_name, cluster=cluster)
            .exclude(uid__in=wanted)
            .values_list("uid", "namespace", "name")
        }
        for rival, node, kind, first, last in observation_rows.evidence_spans(
            observation_rows.selection(cluster, pod_uids=rivals)
        ):
            ns, name = rivals[rival or ""]
            anchors.append(Anchor(rival or "", node, first, last, kind in KUBELET_KINDS, ns, name))
    pool = [o for _, o in candidates.values()]
    out: dict[str, list[Fact]] = {}
    taken: set[int] = set()
    for uid, facts in own.items():
        if not facts:
            out[uid] = facts
            continue
        mine = {o.dedupe_key for _, o in facts}
        resolved = resolve_pod_observations(uid, (o for _, o in facts), pool, anchors)
        extra = [(ids[o.dedupe_key], o) for o in resolved if o.dedupe_key not in mine]
        taken.update(i for i, _ in extra)
        out[uid] = facts + extra + requests.get(uid, [])
    return PodFacts(out, contested, taken)


def node_observations(cluster: Cluster, name: str) -> list[Fact]:
    """The node, node_deleted and node_metrics observations of one node, and the audited writes to it."""
    rows = observation_rows.selection(cluster, kinds=NODE_KINDS, node=name)
    requests = observation_rows.selection(cluster, kinds=(Kind.AUDIT,), node=name)
    return [*_facts(rows), *_facts(requests, observation_rows.field_is(("resource",), "nodes"))]


def pdb_observations(cluster: Cluster, namespace: str) -> list[Fact]:
    """The PDB snapshots of ``namespace``, the events about a PDB there and the audited evictions of its
    pods (those a PDB refused are evidence of ``pdb_blocking_drain``)."""
    snaps = observation_rows.selection(cluster, kinds=(Kind.PDB, Kind.PDB_DELETED), namespace=namespace)
    events = observation_rows.selection(cluster, kinds=(Kind.EVENT,), namespace=namespace, has_pod_uid=False)
    evictions = observation_rows.selection(cluster, kinds=(Kind.AUDIT,), namespace=namespace)
    return [
        *_facts(snaps),
        *_facts(events, observation_rows.field_is(("involved", "kind"), "PodDisruptionBudget")),
        *_facts(evictions, observation_rows.field_is(("subresource",), "eviction")),
    ]


def workload_observations(cluster: Cluster, namespace: str, name: str) -> list[Fact]:
    """The snapshots of every workload named ``namespace/name`` (all kinds and incarnations)."""
    rows = observation_rows.selection(
        cluster, kinds=(Kind.WORKLOAD, Kind.WORKLOAD_DELETED), namespace=namespace, name=name
    )
    return list(_facts(rows))


# -- deriving ----------------------------------------------------------------------------------------------
@dataclass
class Derived:
    """What one claimed batch derived, to be written in one transaction and then pushed."""

    writes: list[Callable[[], object]] = field(default_factory=list)
    follow_up: dict[int, list[dirty.MarkedKey]] = field(default_factory=dict)  # cluster id -> keys
    after_writes: list[Callable[[], None]] = field(default_factory=list)  # follow-ups that read the writes
    pushed: dict[str, list[PodTimeline]] = field(default_factory=dict)  # cluster name -> timelines
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, n: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + n

    def mark(self, cluster: Cluster, kind: str, keys: Iterable[str]) -> None:
        self.follow_up.setdefault(cluster.pk, []).extend((kind, k, None, None) for k in keys)

    def mark_pdbs(self, cluster: Cluster, namespaces: Iterable[str] | None) -> None:
        """Mark the PDBs of ``namespaces`` (None: every namespace) dirty, where there are any, once this
        batch's rows are written (a PDB row this batch creates counts)."""
        wanted = None if namespaces is None else set(namespaces)
        if wanted is not None and not wanted:
            return

        def mark() -> None:
            rows = PodDisruptionBudget.objects.filter(cluster=cluster)
            if wanted is not None:
                rows = rows.filter(namespace__in=wanted)
            self.mark(cluster, dirty.PDBS, set(rows.values_list("namespace", flat=True)))

        self.after_writes.append(mark)


def _now_for(cluster: Cluster, now: datetime | None) -> datetime | None:
    if cluster.origin != Cluster.Origin.LIVE:
        return None
    return now or timezone.now()


def derive_pods(
    cluster: Cluster,
    uids: Sequence[str],
    out: Derived,
    *,
    now: datetime | None = None,
    rivals: bool = True,
) -> None:
    """Derive each pod of ``uids`` from all its observations; its PDBs' namespaces become follow-ups, and
    (``rivals``: for pods that got something new, not for pods derived as someone's rival) the other
    incarnations of a name whose UID-less kubelet lines they compete for."""
    now, thresholds = _now_for(cluster, now), thresholds_from_settings()
    read = pod_observations(cluster, uids)
    facts = read.by_uid
    # Mirror pods (issue #35): events naming a mirror's API UID are its static pod's (timelines/mirrors.py).
    joined = mirrors.join(
        cluster,
        uids,
        facts,
        lambda more: pod_observations(cluster, more).by_uid,
        lambda more: list(_own_facts(cluster, more)),
    )
    uids = joined.uids
    batch: list[store.DerivedPod] = []
    audited: set[tuple[str, str]] = set()  # names with audited requests: their audit-only incarnations
    for uid in uids:
        rows = facts.get(uid) or []
        if not rows:
            continue
        audited.update(
            (o.namespace, o.name) for _, o in rows if o.kind == Kind.AUDIT and o.namespace and o.name
        )
        timeline = derive_pod_timeline((o for _, o in rows), thresholds=thresholds, now=now)
        labels = next(
            (
                o.payload.get("labels") or {}
                for _, o in reversed(rows)
                if o.kind in (Kind.POD, Kind.POD_DELETED)
            ),
            {},
        )
        batch.append(store.DerivedPod(timeline, {o.dedupe_key: i for i, o in rows}, labels))
    if joined.forget:
        out.writes.append(functools.partial(store.forget_pods, cluster, sorted(joined.forget)))
    if joined.recheck:  # known by events alone, no longer this batch's static pods' mirrors: derived again
        out.mark(cluster, dirty.POD, sorted(joined.recheck))
    if not batch:
        return

    def write() -> None:
        # Only the pods whose stored timeline changed are pushed, and only their namespaces' PDBs (which
        # read the pods' rows and DisruptionTarget intervals) are derived again.
        changed = store.replace_pod_timelines(cluster, batch)
        timelines = [d.timeline for d in batch if d.timeline.uid in changed]
        out.pushed.setdefault(cluster.name, []).extend(timelines)
        out.mark_pdbs(cluster, {t.namespace for t in timelines if t.namespace})

    out.writes.append(write)
    out.count(dirty.POD, len(batch))
    # A pod of a name UID-less kubelet lines name may take them over from a kubelet-only incarnation.
    audited.update(read.contested)
    if audited:  # a pod of the name may take requests over from an audit-only incarnation, or give some
        out.after_writes.append(functools.partial(derive_audit_lives, cluster, audited, out, now=now))
    if rivals and read.contested:
        out.mark(cluster, dirty.RIVALS, sorted(dirty.ref(ns, name) for ns, name in read.contested))


def derive_audit_lives(
    cluster: Cluster, names: Iterable[tuple[str, str]], out: Derived, *, now: datetime | None
) -> None:
    """The incarnations of ``names`` known only from audited requests (``audit_evidence.audit_lives``):
    their timelines are derived from those requests and what the server stored by them
    (``audit_snapshots``), and the rows of an audit-only incarnation that no longer is one (a real UID
    took its requests over, an earlier log changed its first request) are deleted. Runs after the batch's
    other writes, in its transaction, so the pods derived beside it count as known."""
    thresholds = thresholds_from_settings()
    for namespace, name in sorted(set(names)):
        facts = list(_named_facts(cluster, {(namespace, name)}, kinds=(Kind.AUDIT,), pod_requests=True))
        rows = list(
            Pod.objects.filter(cluster=cluster, namespace=namespace, name=name).values_list(
                "uid", "created_at", "first_seen", "deleted_at"
            )
        )
        own = set(
            observation_rows.values_of(
                observation_rows.selection(cluster, pod_uids=[r[0] for r in rows]), "pod_uid", distinct=True
            )
        )
        known = [
            Life(uid, namespace, name, created or first, deleted)
            for uid, created, first, deleted in rows
            if uid in own
        ]
        lives = audit_lives(namespace, name, (o for _, o in facts), known) if facts else ()
        ids = {o.dedupe_key: i for i, o in facts}
        batch: list[store.DerivedPod] = []
        for life in lives:
            records = [r for r in map(read_audit, life.observations) if r is not None]
            observations = [*life.observations, *audit_snapshots(life.uid, records, life.gone_by)]
            timeline = derive_pod_timeline(observations, thresholds=thresholds, now=now)
            cited = {o.dedupe_key: ids[source_key(o.dedupe_key)] for o in observations}
            batch.append(store.DerivedPod(timeline, cited, {}))
        current = {life.uid for life in lives}
        # Kubelet lines naming only this name that no incarnation takes: a life of their own (the same
        # synthetic identity; docs/kubelet-lines.md "Lines without a UID").
        if not lives:
            lines = list(_named_facts(cluster, {(namespace, name)}))
            line_ids = {o.dedupe_key: i for i, o in lines}
            for life_lines in nameless_lives(
                (o for _, o in lines), _anchors(cluster, {uid for uid in own if uid})
            ):
                timeline = derive_pod_timeline(life_lines, thresholds=thresholds, now=now)
                batch.append(
                    store.DerivedPod(timeline, {o.dedupe_key: line_ids[o.dedupe_key] for o in life_lines}, {})
                )
                current.add(life_lines[0].pod_uid or "")
        store.forget_pods(cluster, [uid for uid, *_ in rows if uid not in own and uid not in current])
        changed = store.replace_pod_timelines(cluster, batch)
        timelines = [d.timeline for d in batch if d.timeline.uid in changed]
        if timelines:
            out.pushed.setdefault(cluster.name, []).extend(timelines)
            out.count(dirty.POD, len(timelines))


def _anchors(cluster: Cluster, uids: Iterable[str]) -> list[Anchor]:
    """Where the pods ``uids`` left evidence: one anchor per pod, node and kind (as rivals are read)."""
    pods = {
        uid: (ns, name)
        for uid, ns, name in Pod.objects.filter(cluster=cluster, uid__in=list(uids)).values_list(
            "uid", "namespace", "name"
        )
    }
    rows = observation_rows.evidence_spans(observation_rows.selection(cluster, pod_uids=pods))
    return [
        Anchor(uid or "", node, first, last, kind in KUBELET_KINDS, *pods[uid or ""])
        for uid, node, kind, first, last in rows
    ]


def _cordon_spans(cluster: Cluster, node: str) -> set[tuple[datetime, datetime | None]]:
    return set(
        Interval.objects.filter(
            cluster=cluster, pod_uid=None, node=node, lane="node:cordoned", state="cordoned"
        ).values_list("start", "end")
    )


def derive_node(cluster: Cluster, name: str, out: Derived) -> None:
    """A node's row and own lanes; when its cordoned spans change, every namespace's PDBs are follow-ups
    (a cordon decides whether a PDB blocks a drain, in any namespace)."""
    facts = node_observations(cluster, name)
    observations = [o for _, o in facts]
    row = node_row(observations)
    timeline = derive_node_timeline(observations) if observations else None
    ids = {o.dedupe_key: i for i, o in facts}
    out.writes.append(lambda: store.replace_node(cluster, name, row, timeline, ids))
    out.count(dirty.NODE)
    new_cordons = set(timeline.spans("node:cordoned", "cordoned")) if timeline else set()
    if new_cordons != _cordon_spans(cluster, name):
        out.mark_pdbs(cluster, None)


def _covered_pods(cluster: Cluster, namespace: str) -> list[CoveredPod]:
    pods = list(Pod.objects.filter(cluster=cluster, namespace=namespace))
    targets: dict[str, list[tuple[datetime, datetime | None]]] = {}
    for uid, start, end in Interval.objects.filter(
        cluster=cluster, namespace=namespace, lane="condition:DisruptionTarget", state="true"
    ).values_list("pod_uid", "start", "end"):
        targets.setdefault(uid or "", []).append((start, end))
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


def derive_pdbs(cluster: Cluster, namespace: str, out: Derived) -> None:
    """Every PDB of ``namespace``: its row and status samples, its lane and findings."""
    facts = pdb_observations(cluster, namespace)
    rows = pdb_rows(o for _, o in facts)
    if not rows:
        return
    pods, cordons = _covered_pods(cluster, namespace), _cordons(cluster)
    for row in rows:
        mine = [
            (i, o)
            for i, o in facts
            if (o.kind == Kind.EVENT and o.name == row.name)
            or (o.kind == Kind.AUDIT and (o.payload.get("eviction") or {}).get("pdb") in (row.name, None))
            or (o.kind != Kind.AUDIT and o.payload.get("uid") == row.uid)
        ]
        timeline = derive_pdb_timeline((o for _, o in mine), pods=pods, cordons=cordons)
        ids = {o.dedupe_key: i for i, o in mine}

        def write(row: Any = row, timeline: Any = timeline, ids: Mapping[str, int] = ids) -> None:
            store.replace_pdb(cluster, row)
            store.replace_pdb_timeline(cluster, timeline, ids)

        out.writes.append(write)
    out.count(dirty.PDBS)


def derive_workload(cluster: Cluster, ref: str, out: Derived) -> None:
    """Every workload named ``NAMESPACE/NAME``: rows and status samples."""
    namespace, name = dirty.split_ref(ref)
    rows = workload_rows(o for _, o in workload_observations(cluster, namespace, name))
    for row in rows:
        out.writes.append(functools.partial(store.replace_workload, cluster, row))
    out.count(dirty.WORKLOAD)


def expand_podref(
    cluster: Cluster, ref: str, out: Derived, *, kind: str = dirty.PODREF, now: datetime | None = None
) -> None:
    """A line naming ``NAMESPACE/NAME`` without a UID concerns every incarnation of that name (the pods
    known once this batch's rows are written: a pod derived beside it counts); so do an incarnation's
    rivals (``rivals`` keys) when it changed. They are derived as ``podonly`` keys: together, and without
    marking their own rivals again (which would never end)."""
    namespace, name = dirty.split_ref(ref)

    def mark() -> None:
        uids = Pod.objects.filter(cluster=cluster, namespace=namespace, name=name).values_list(
            "uid", flat=True
        )
        out.mark(cluster, dirty.PODONLY, list(uids))

    out.after_writes.append(mark)
    if kind == dirty.PODREF:  # an audited request about the name: its audit-only incarnations
        out.after_writes.append(
            functools.partial(derive_audit_lives, cluster, [(namespace, name)], out, now=now)
        )
    out.count(kind)


def expand_nodepods(cluster: Cluster, key: dirty.Claimed, out: Derived) -> None:
    """A node-level kubelet line (shutdown, eviction) concerns the node's pods alive around it."""

    def mark() -> None:
        pods = Pod.objects.filter(cluster=cluster, node=key.key)
        if key.t_min is not None:
            pods = pods.exclude(deleted_at__lt=key.t_min - NODEPODS_SLACK)
        if key.t_max is not None:
            pods = pods.exclude(first_seen__gt=key.t_max + NODEPODS_SLACK)
        out.mark(cluster, dirty.POD, list(pods.values_list("uid", flat=True)))

    out.after_writes.append(mark)
    out.count(dirty.NODEPODS)


def _derive(claimed: Sequence[dirty.Claimed], now: datetime | None) -> Derived:
    out = Derived()
    clusters = {c.pk: c for c in Cluster.objects.filter(pk__in={k.cluster_id for k in claimed})}
    grouped = dirty.keys_by_kind(claimed)
    for (cluster_id, kind), keys in sorted(grouped.items()):
        cluster = clusters.get(cluster_id)
        if cluster is None:  # deleted meanwhile: its keys went with it
            continue
        if kind == dirty.POD:
            uids = sorted(k.key for k in keys)
            for i in range(0, len(uids), POD_CHUNK):
                derive_pods(cluster, uids[i : i + POD_CHUNK], out, now=now)
        elif kind == dirty.PODONLY:  # a pod claimed as both is derived once, as ``pod``
            also = {k.key for k in grouped.get((cluster_id, dirty.POD), [])}
            uids = sorted(k.key for k in keys if k.key not in also)
            for i in range(0, len(uids), POD_CHUNK):
                derive_pods(cluster, uids[i : i + POD_CHUNK], out, now=now, rivals=False)
        for key in keys:
            if kind == dirty.NODE:
                derive_node(cluster, key.key, out)
            elif kind == dirty.PDBS:
                derive_pdbs(cluster, key.key, out)
            elif kind == dirty.WORKLOAD:
                derive_workload(cluster, key.key, out)
            elif kind in (dirty.PODREF, dirty.RIVALS):
                expand_podref(cluster, key.key, out, kind=kind, now=_now_for(cluster, now))
            elif kind == dirty.NODEPODS:
                expand_nodepods(cluster, key, out)
    return out


# -- the stage ---------------------------------------------------------------------------------------------
POD_CHUNK = 200  # pods per read and per replace


@dataclass
class BatchResult:
    claimed: int
    counts: dict[str, int]
    again: int = 0  # keys marked again while derived: they stay dirty
    lost: bool = False  # the claim expired and was taken over: nothing written
    pushed: int = 0
    failed: int = 0  # keys whose derivation failed: released with a back-off, or quarantined
    quarantined: int = 0  # of those, the keys moved to the quarantine


def _settings_int(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


def batch_size() -> int:
    """How many keys one batch claims (``PODLIFE_DERIVE_BATCH``)."""
    return _settings_int("PODLIFE_DERIVE_BATCH", POD_CHUNK)


def claim_ttl() -> timedelta:
    return timedelta(seconds=float(getattr(settings, "PODLIFE_DERIVE_CLAIM_S", 60.0)))


def run_batch(
    *,
    limit: int | None = None,
    cluster: Cluster | None = None,
    now: datetime | None = None,
    raise_failures: bool = False,
) -> BatchResult | None:
    """Fold, claim, derive and write one batch of dirty keys; None when nothing was left to claim.

    ``now`` (live clusters: the wall clock) is the time findings about open intervals are judged at.
    A key whose derivation fails is isolated, backs off and is quarantined (``_derive_isolating``);
    with ``raise_failures`` (an import, all or nothing) the failure goes up instead.
    """
    with gc_paused():
        return _run_batch(limit=limit, cluster=cluster, now=now, raise_failures=raise_failures)


def _run_batch(
    *, limit: int | None, cluster: Cluster | None, now: datetime | None, raise_failures: bool = False
) -> BatchResult | None:
    limit = limit or batch_size()
    cluster_id = cluster.pk if cluster is not None else None
    while dirty.fold(cluster_id=cluster_id):
        pass
    token = dirty.new_token()
    claimed = dirty.claim(token, limit=limit, ttl=claim_ttl(), cluster_id=cluster_id)
    # One key whose derivation failed before and whose back-off is over, derived alone after the batch:
    # a poisoned key never shares a batch again, so it delays no other key (nor cluster).
    retried = dirty.claim(token, limit=1, ttl=claim_ttl(), cluster_id=cluster_id, failed=True)
    if not claimed and not retried:
        return None
    result = BatchResult(0, {})
    for keys in (claimed, retried):
        if keys:
            _merge(result, _derive_isolating(token, keys, now, raise_failures=raise_failures))
    return result


def _merge(total: BatchResult, part: BatchResult) -> None:
    total.claimed += part.claimed
    for kind, n in part.counts.items():
        total.counts[kind] = total.counts.get(kind, 0) + n
    total.again += part.again
    total.lost = total.lost or part.lost
    total.pushed += part.pushed
    total.failed += part.failed
    total.quarantined += part.quarantined


def _derive_isolating(
    token: str, claimed: Sequence[dirty.Claimed], now: datetime | None, *, raise_failures: bool = False
) -> BatchResult:
    """Derive and write ``claimed``; when that fails, the keys in halves, down to the single keys that
    fail alone: those are recorded as failed (``dirty.failed``: a back-off, then the quarantine) and
    every other key of the batch is written. A failure because the database is away is no key's fault:
    the keys are released as they are and the error goes up."""
    try:
        return _derive_batch(token, claimed, now)
    except dirty.ClaimLost as exc:
        log.warning("derive batch %s written by no one: %s", token, exc)
        _release(token, claimed)
        return BatchResult(len(claimed), {}, lost=True)
    except Exception as exc:  # broad: a key that fails for any reason (a bug on its data included) must not
        # hold up the others; it is isolated, logged with its traceback and quarantined by name below
        if raise_failures or not _database_answers():
            _release(token, claimed)
            raise
        if len(claimed) > 1:
            half = len(claimed) // 2
            result = BatchResult(0, {})
            for part in (claimed[:half], claimed[half:]):
                _merge(result, _derive_isolating(token, part, now))
            return result
        key = claimed[0]
        error = f"{type(exc).__name__}: {exc}"[:2000]
        log.warning(
            "deriving %s %r of cluster %s failed: %s", key.kind, key.key, key.cluster_id, error, exc_info=True
        )
        moved = dirty.failed(
            token,
            key,
            error,
            max_failures=_settings_int("PODLIFE_DERIVE_MAX_FAILURES", 5),
            backoff=timedelta(seconds=float(getattr(settings, "PODLIFE_DERIVE_RETRY_S", 10.0))),
            backoff_max=timedelta(seconds=float(getattr(settings, "PODLIFE_DERIVE_RETRY_MAX_S", 600.0))),
        )
        return BatchResult(1, {}, failed=1, quarantined=int(moved))
    except BaseException:  # re-raised
        _release(token, claimed)  # left dirty for the next claim
        raise


def _release(token: str, claimed: Sequence[dirty.Claimed]) -> None:
    try:
        dirty.release(token, claimed)
    except (DatabaseError, InterfaceError):  # the database is away: the claims expire on their own
        log.warning(
            "could not release %d claimed keys; they expire on their own", len(claimed), exc_info=True
        )


def _database_answers() -> bool:
    """Whether the database answers (after a failed batch: a key's fault, or the database's?)."""
    try:
        if connection.in_atomic_block:
            return True  # a caller's transaction (an import): its own error handling decides
        connection.close_if_unusable_or_obsolete()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except (DatabaseError, InterfaceError):
        return False


def _derive_batch(token: str, claimed: Sequence[dirty.Claimed], now: datetime | None) -> BatchResult:
    # Inside a caller's transaction (an import) the reads get a savepoint too: a read that fails must not
    # leave that transaction aborted for the keys derived after it.
    with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
        out = _derive(claimed, now)
    with transaction.atomic():
        dirty.relaxed_commit()  # rebuildable rows, settled with their keys: see its docstring
        for write in out.writes:
            write()
        for follow in out.after_writes:
            follow()
        for follow_cluster, keys in out.follow_up.items():
            dirty.append_batch(follow_cluster, keys)
        again = dirty.finish(token, claimed)
    # The writes are closures over ``out`` that ``out`` holds: a reference cycle that would keep the
    # whole batch (its observations, timelines and rows) alive until the cyclic collector found it.
    out.writes.clear()
    out.after_writes.clear()
    result = BatchResult(len(claimed), out.counts, again=again)
    if out.pushed:
        if connection.in_atomic_block:  # a caller's transaction (an import): push once it commits
            transaction.on_commit(lambda: _push(out.pushed))
        else:
            result.pushed = _push(out.pushed)
    return result


def _push(pushed: Mapping[str, list[PodTimeline]]) -> int:
    """Push what a committed batch changed; a push that fails (the channel layer's Redis away) loses only
    the push (pages catch up on their next read), never the batch."""
    try:
        return sum(live.publish_timelines(name, timelines) for name, timelines in pushed.items())
    except Exception:  # broad: see the docstring; logged with its traceback
        log.warning(
            "could not push %d derived pods to live pages", sum(map(len, pushed.values())), exc_info=True
        )
        return 0


def drain(
    *,
    cluster: Cluster | None = None,
    budget_s: float | None = None,
    now: datetime | None = None,
    raise_failures: bool = False,
) -> int:
    """Derive until nothing is dirty (for ``cluster`` only, when given) or ``budget_s`` seconds passed;
    returns how many keys were derived. Any number of processes may drain at once."""
    started = time.monotonic()
    done = 0
    while budget_s is None or time.monotonic() - started < budget_s:
        result = run_batch(cluster=cluster, now=now, raise_failures=raise_failures)
        if result is None:
            break
        done += result.claimed
    return done


# -- marking from outside the store: periodic and whole-cluster re-derivation -------------------------------
AGING_STATES = ("terminating", "cleanup")  # open intervals whose findings change as time passes


def mark_open_pods() -> int:
    """Mark the pods of live clusters that are still terminating or cleaning up dirty: their findings
    (stuck, slow cleanup) depend on how long ago that began. Returns how many were marked."""
    rows = (
        Interval.objects.filter(
            cluster__origin=Cluster.Origin.LIVE,
            pod_uid__isnull=False,
            end__isnull=True,
            lane__in=("worker", "api"),
            state__in=AGING_STATES,
        )
        .values_list("cluster_id", "pod_uid")
        .distinct()
    )
    by_cluster: dict[int, set[str]] = {}
    for cluster_id, uid in rows:
        by_cluster.setdefault(cluster_id, set()).add(uid or "")
    marked = 0
    with transaction.atomic():
        for cluster_id, uids in by_cluster.items():
            alive = Pod.objects.filter(cluster_id=cluster_id, uid__in=uids, deleted_at__isnull=True)
            keys = [(dirty.POD, uid, None, None) for uid in alive.values_list("uid", flat=True)]
            dirty.append_batch(cluster_id, keys)
            marked += len(keys)
    return marked


def mark_cluster(cluster: Cluster) -> int:
    """Mark everything of ``cluster`` dirty: every pod, node, namespace's PDBs and workload it observed."""
    values_of, select = observation_rows.values_of, observation_rows.selection
    keys: list[dirty.MarkedKey] = [
        (dirty.POD, uid, None, None)
        for uid in values_of(select(cluster, has_pod_uid=True), "pod_uid", distinct=True)
        if uid
    ]
    keys += [
        (dirty.NODE, n, None, None)
        for n in values_of(select(cluster, kinds=NODE_KINDS), "node", distinct=True)
        if n
    ]
    keys += [
        (dirty.PDBS, ns, None, None)
        for ns in values_of(select(cluster, kinds=(Kind.PDB, Kind.PDB_DELETED)), "namespace", distinct=True)
        if ns
    ]
    keys += [
        (dirty.WORKLOAD, dirty.ref(ns, name), None, None)
        for ns, name in observation_rows.columns_of(
            select(cluster, kinds=(Kind.WORKLOAD, Kind.WORKLOAD_DELETED)), "namespace", "name", distinct=True
        )
    ]
    with transaction.atomic():
        for i in range(0, len(keys), 5000):
            dirty.append_batch(cluster.pk, keys[i : i + 5000])
    return len(keys)


def rederive_cluster(cluster: Cluster) -> int:
    """Rebuild everything derived of ``cluster`` from its observations, here and now (``manage.py
    rederive``, imports); returns how many keys were derived."""
    mark_cluster(cluster)
    return drain(cluster=cluster)
