"""Mirror pods: one pod per static pod, whatever UID an observation names it by (issue #35, finding 6).

podlife keys a static pod on its own UID, the config hash in the mirror pod's annotation
``kubernetes.io/config.mirror`` (docs/architecture.md "Where podlife departs"): the kubelet's logs and
spans speak of that UID, and the API server gives the mirror a new ``metadata.uid`` each time it recreates
it. Events about the mirror (``involvedObject.uid``) name the mirror's API UID, though, and were derived as
pods of their own: Pod rows with events only, never a phase or a deletion, counted live for ever (40 live
in kube-system against 1 real after 35 minutes of the demo cluster).

The pod snapshots carry both UIDs (``uid`` = the static pod's, ``api_uid`` = the mirror's), so the derive
stage maps one to the other when it reads:

* a static pod's derivation also reads the observations keyed by its mirrors' API UIDs (its own
  snapshots name them), re-keyed to the static UID, and drops any pod derived earlier under such a UID
  (events derived before the mirror's first snapshot was stored);
* a UID with no pod snapshot of its own that is a mirror's API UID (a static pod of the same namespace
  and name has a snapshot naming it) is derived as that static pod, never as a pod of its own;
* a UID known by events alone that no snapshot names (a mirror the watch never saw: one the API server
  replaced before the collector started, whose events the first list of events still holds, or one
  created and deleted between two lists) is the mirror of the static pod of its namespace and name, since
  a name is held by one object at a time: the one alive then (``owner_of``). Only a static pod that was
  deleted (its last snapshot a deletion) more than ``MIRROR_EVENT_SLACK`` before the events leaves them
  a pod of their own, as does one on another node. Decided from the observations alone, whichever is
  derived first: the events' UID when it is (``static_owners``), the static pod when it is (``join``).

Nothing is rewritten in the observations: ``manage.py rederive`` maps the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q

from timelines import observation_rows
from timelines.lifecycle.observation import Kind, Observation, stored_observation
from timelines.models import Cluster, Marker, Pod

POD_SNAPSHOTS = (Kind.POD, Kind.POD_DELETED)
Fact = tuple[int, Observation]
# Events about a mirror pod stamped after its static pod's deletion was observed: the kubelet's last
# events (Killing) come at the deletion, stamped to the second, and reach the API a little later.
MIRROR_EVENT_SLACK = timedelta(seconds=60)
Name = tuple[str, str]


@dataclass
class Joined:
    """The pods to derive once mirrors are mapped, the UIDs that were a mirror's (their own pods, if
    any were derived, are to be forgotten), and UIDs known by events alone that a static pod derived here
    no longer takes (to be derived again: as a pod of their own, or another static pod's mirror)."""

    uids: list[str]
    forget: set[str] = field(default_factory=set)
    recheck: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class StaticLife:
    """What the pod snapshots of one static pod say of its life: first and last seen, whether the last
    snapshot is its deletion, and the nodes it ran on."""

    uid: str
    first: datetime
    last: datetime
    deleted: bool
    nodes: frozenset[str]


def owner_of(events: Sequence[Observation], lives: Iterable[StaticLife]) -> str | None:
    """The static pod whose mirror the events' pod was, for a UID no snapshot names and known by events
    alone, among the static pods of its namespace and name (``lives``): the one alive at the first event
    (the last one seen first before it; else, for events older than any snapshot, the first one seen),
    unless that one had been deleted more than ``MIRROR_EVENT_SLACK`` before (then the name was free
    for an ordinary pod) or ran on other nodes than the events name. None: a pod of its own."""
    if not events:
        return None
    first = min(o.observed_at for o in events)
    nodes = {o.node for o in events if o.node}
    fitting = [life for life in lives if not (nodes and life.nodes and not nodes & life.nodes)]
    if not fitting:
        return None
    started = [life for life in fitting if life.first <= first]
    if started:
        life = max(started, key=lambda x: (x.first, x.uid))
    else:
        life = min(fitting, key=lambda x: (x.first, x.uid))
    if life.deleted and first > life.last + MIRROR_EVENT_SLACK:
        return None
    return life.uid


def _by_name(names: Iterable[Name]) -> Q:
    return Q(*[Q(namespace=ns, name=name) for ns, name in sorted(set(names))], _connector=Q.OR)


def static_lives(
    cluster: Cluster, names: Iterable[Name], also: Sequence[str] = ()
) -> dict[Name, list[StaticLife]]:
    """The static pods of these names (those derived, and ``also``), as their pod snapshots tell. Two
    indexed reads: the pod rows by name, their snapshots by UID."""
    wanted = set(names)
    if not wanted:
        return {}
    uids = set(also) | set(
        Pod.objects.filter(_by_name(wanted), cluster=cluster, static=True).values_list("uid", flat=True)
    )
    rows = observation_rows.rows(
        observation_rows.selection(cluster, pod_uids=sorted(uids), kinds=POD_SNAPSHOTS).order_by(
            "observed_at", "id"
        ),
        observation_rows.field_is(("static",), True),
    )
    seen: dict[tuple[str, str, str], tuple[datetime, datetime, bool, set[str]]] = {}
    for row in rows:
        uid, ns, name, kind, at, node = (
            row.pod_uid,
            row.namespace,
            row.name,
            row.kind,
            row.observed_at,
            row.node,
        )
        if (ns, name) not in wanted:
            continue
        key = (ns, name, str(uid))
        first, _last, _deleted, nodes = seen.get(key, (at, at, False, set()))
        if node:
            nodes.add(node)
        seen[key] = (first, at, kind == Kind.POD_DELETED, nodes)
    out: dict[Name, list[StaticLife]] = {}
    for (ns, name, uid), (first, last, deleted, nodes) in seen.items():
        out.setdefault((ns, name), []).append(StaticLife(uid, first, last, deleted, frozenset(nodes)))
    return out


def own_events(facts: Iterable[Fact], uid: str) -> list[Observation] | None:
    """The events keyed by ``uid`` among its facts, or None when it has an observation of another kind
    keyed by it (then it is known otherwise than by events alone)."""
    own = [o for _, o in facts if o.pod_uid == uid]
    if not own or any(o.kind != Kind.EVENT for o in own):
        return None
    return own


def _rekeyed(fact: Fact, uid: str) -> Fact:
    i, o = fact
    return i, stored_observation(
        o.kind, o.source, o.observed_at, o.dedupe_key, uid, o.node, o.namespace, o.name, o.payload
    )


def mirror_uids(facts: Sequence[Fact], uid: str) -> set[str]:
    """The API UIDs of the mirror pods whose snapshots are among ``facts`` of the static pod ``uid``."""
    out: set[str] = set()
    for _, o in facts:
        if o.kind in POD_SNAPSHOTS:
            api_uid = o.payload.get("api_uid")
            if isinstance(api_uid, str) and api_uid and api_uid != uid:
                out.add(api_uid)
    return out


def static_owners(cluster: Cluster, facts_by_uid: dict[str, list[Fact]]) -> dict[str, str]:
    """Which of these UIDs (those without a pod snapshot of their own) are a mirror pod's API UID: mirror
    API UID -> static UID. Named by a static pod's snapshot, or known by events alone and taken by
    ``owner_of``. A few indexed reads, and only when such a UID is there."""
    names: dict[str, set[Name]] = {}
    for uid, facts in facts_by_uid.items():
        if facts and not any(o.kind in POD_SNAPSHOTS for _, o in facts):
            names[uid] = {(o.namespace, o.name) for _, o in facts if o.namespace and o.name}
    wanted = {pair for pairs in names.values() for pair in pairs}
    if not wanted:
        return {}
    statics = list(
        Pod.objects.filter(_by_name(wanted), cluster=cluster, static=True)
        .exclude(uid__in=list(names))
        .values_list("uid", flat=True)
    )
    batch = _batch_statics(facts_by_uid)
    if not statics and not batch:
        return {}
    owners = {
        api_uid: str(row.pod_uid)
        for row in observation_rows.rows(
            observation_rows.selection(cluster, pod_uids=sorted({*statics, *batch}), kinds=POD_SNAPSHOTS)
        )
        if row.pod_uid
        and isinstance(api_uid := observation_rows.field_of(row.payload, "api_uid"), str)
        and api_uid in names
    }
    unnamed: dict[str, tuple[Name, list[Observation]]] = {}
    for uid, pairs in names.items():
        events = own_events(facts_by_uid[uid], uid) if uid not in owners and len(pairs) == 1 else None
        if events:
            unnamed[uid] = (next(iter(pairs)), events)
    if unnamed:
        lives = static_lives(cluster, (pair for pair, _ in unnamed.values()), also=batch)
        for uid, (pair, events) in unnamed.items():
            owner = owner_of(events, (life for life in lives.get(pair, ()) if life.uid != uid))
            if owner is not None:
                owners[uid] = owner
    return owners


def unnamed_mirrors(
    cluster: Cluster,
    uid: str,
    facts_by_uid: dict[str, list[Fact]],
    named: set[str],
    read_own: Callable[[list[str]], list[Fact]],
) -> tuple[set[str], set[str]]:
    """For the static pod ``uid`` (its facts in ``facts_by_uid``, the batch's; ``named``: the mirror UIDs
    its snapshots name), the UIDs known by events alone that no snapshot names and that may be its
    mirrors: pods of its name derived before or in this batch, and those whose events it took before.
    Returns (those ``owner_of`` gives it, those it took before and no longer takes: to be derived again)."""
    facts = facts_by_uid.get(uid) or ()
    pairs = {
        (o.namespace, o.name)
        for _, o in facts
        if o.kind in POD_SNAPSHOTS and o.pod_uid == uid and o.payload.get("static") and o.namespace and o.name
    }
    if not pairs:
        return set(), set()
    candidates = set(
        Pod.objects.filter(_by_name(pairs), cluster=cluster, static=False).values_list("uid", flat=True)
    )
    candidates |= {
        other
        for other, other_facts in facts_by_uid.items()
        if any((o.namespace, o.name) in pairs and o.pod_uid == other for _, o in other_facts)
    }
    taken = [
        i
        for evidence in Marker.objects.filter(cluster=cluster, pod_uid=uid, kind="event").values_list(
            "evidence", flat=True
        )
        for i in evidence or ()
        if isinstance(i, int)
    ]
    absorbed = (
        {
            str(other)
            for other in observation_rows.values_of(
                observation_rows.selection(cluster, ids=taken, kinds=(Kind.EVENT,)), "pod_uid"
            )
            if other
        }
        if taken
        else set()
    )
    candidates |= absorbed
    candidates -= {uid, *named}
    if not candidates:
        return set(), set()
    events: dict[str, list[Observation]] = {}
    for _, o in read_own(sorted(candidates)):
        events.setdefault(o.pod_uid or "", []).append(o)
    lives = static_lives(cluster, pairs, also=[uid, *_batch_statics(facts_by_uid)])
    statics = sorted({life.uid for group in lives.values() for life in group})
    named_elsewhere = {  # a mirror another static pod's snapshot names is that one's
        api_uid
        for row in observation_rows.rows(
            observation_rows.selection(cluster, pod_uids=statics, kinds=POD_SNAPSHOTS)
        )
        if isinstance(api_uid := observation_rows.field_of(row.payload, "api_uid"), str)
        and api_uid in candidates
    }
    mine: set[str] = set()
    others: set[str] = set()
    for candidate in sorted(candidates - named_elsewhere):
        own = own_events(((0, o) for o in events.get(candidate, ())), candidate)
        pair = {(o.namespace or "", o.name or "") for o in own or ()}
        if own is None or len(pair) != 1:
            continue  # known otherwise than by events alone: a pod of its own
        if owner_of(own, lives.get(next(iter(pair)), [])) == uid:
            mine.add(candidate)
        elif candidate in absorbed:
            others.add(candidate)
    return mine, others


def _batch_statics(facts_by_uid: dict[str, list[Fact]]) -> list[str]:
    """The static pods among the batch's (their pod rows may not be written yet)."""
    return [
        uid
        for uid, facts in facts_by_uid.items()
        if any(o.kind in POD_SNAPSHOTS and o.pod_uid == uid and o.payload.get("static") for _, o in facts)
    ]


def join(
    cluster: Cluster,
    uids: Sequence[str],
    facts_by_uid: dict[str, list[Fact]],
    read: Callable[[list[str]], dict[str, list[Fact]]],
    read_own: Callable[[list[str]], list[Fact]],
) -> Joined:
    """Map mirror API UIDs onto their static pods in ``facts_by_uid`` (changed in place): ``read`` reads
    the facts of pods not read yet (``derivation.pod_observations``), ``read_own`` the observations keyed
    by some UIDs (``derivation._own_facts``). Returns the UIDs to derive and those to forget."""
    owners = static_owners(cluster, facts_by_uid)
    wanted = [uid for uid in uids if uid not in owners]
    missing = sorted({owners[uid] for uid in owners} - set(facts_by_uid))
    if missing:
        facts_by_uid.update(read(missing))
    wanted += [uid for uid in missing if uid not in wanted]
    forget = set(owners)
    recheck: set[str] = set()
    for uid in wanted:
        mirrors = mirror_uids(facts_by_uid.get(uid) or (), uid)
        unnamed, others = unnamed_mirrors(cluster, uid, facts_by_uid, mirrors, read_own)
        mirrors |= unnamed
        recheck |= others
        if not mirrors:
            continue
        forget |= mirrors
        known = {o.dedupe_key for _, o in facts_by_uid[uid]}
        extra = [f for f in read_own(sorted(mirrors)) if f[1].dedupe_key not in known]
        facts_by_uid[uid] = facts_by_uid[uid] + [_rekeyed(f, uid) for f in extra]
    for uid in forget:  # a mirror's UID read beside its static pod (one batch) is not a pod either
        facts_by_uid.pop(uid, None)
    return Joined([uid for uid in wanted if uid not in forget], forget, recheck - forget - set(wanted))
