"""Attach kubelet lines that carry no pod UID to the pod incarnation they are about: pure and order-free.

Kubelet lines below V4 mostly name a pod only as ``ns/name`` (``SyncLoop ADD/UPDATE/DELETE/REMOVE``, the
shutdown manager's kills, the eviction manager, ``Observed pod startup duration``, the status manager), and
some name no pod at all (a kubelet process, the eviction manager reclaiming a resource). The parser stores
them as they are (``pod_uid`` null); the derive stage asks this module which of them belong to the pod it
derives, given:

* ``own``: the pod's own observations (they carry its UID);
* ``candidates``: UID-less observations of the same cluster that name the same ``ns/name`` (on any node),
  or name no pod and come from a node the pod ran on;
* ``rivals``: where the other incarnations of the same ``ns/name`` left UID-bearing evidence (per node, the
  first and last time, with their name), so a reused name (a StatefulSet's ``web-0``) splits between its
  incarnations.

The rule, per node and name: the ``SyncLoop ADD`` / ``REMOVE`` lines cut the node's timeline into *lives*
(an ADD after a REMOVE opens a new one; an ADD inside a life is a re-list after a kubelet restart, or a
REMOVE that was lost, and only splits when evidence on both sides names different UIDs). Each life belongs to
the one incarnation whose kubelet evidence (PLEG events, kills, V4 lines, spans) falls inside it, or failing
that whose API object was on that node at that time. Lines in a life nobody claims stay unattached: never
guessed. Because the decision depends only on the set of observations, the newer file ingested first gives
the same timeline, and a line re-attaches when the UID that claims it arrives later.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final, TypeVar

from timelines.lifecycle.audit_evidence import KUBELET_SYNTHETIC_PREFIX, synthetic_uid
from timelines.lifecycle.observation import Kind, Observation, Transition

# Kubelet-side kinds: same node clock as the lines being resolved.
KUBELET_KINDS = frozenset({Kind.WORKER, Kind.KUBELET_MARKER, Kind.SPAN})
API_KINDS = frozenset({Kind.POD, Kind.POD_DELETED})
# Node-level context is attached when it lies this close to the pod's own evidence on that node (a
# restart shortly before a re-list, the eviction manager's reclaim a pass before the kill).
CONTEXT_MARGIN = timedelta(minutes=5)
# Kubelet processes are context this far back: whether a first sync was a restarted kubelet's re-list
# depends on how long that kubelet had been logging before it.
CONTEXT_LOOKBACK = timedelta(days=1)

OPENS = frozenset({Transition.SYNCLOOP_ADD})
CLOSES = frozenset({Transition.SYNCLOOP_REMOVE})


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where one incarnation left evidence on one node: ``first``..``last`` (``kubelet``: from kubelet
    lines and spans, same clock as the lines to resolve; else from API snapshots)."""

    uid: str
    node: str
    first: datetime
    last: datetime
    kubelet: bool
    namespace: str | None = None
    name: str | None = None


def pod_names(observations: Iterable[Observation]) -> dict[str, set[tuple[str, str]]]:
    """The ``(namespace, name)`` each UID's observations give it (usually one)."""
    names: dict[str, set[tuple[str, str]]] = {}
    for obs in observations:
        if obs.pod_uid and obs.namespace and obs.name:
            names.setdefault(obs.pod_uid, set()).add((obs.namespace, obs.name))
    return names


K = TypeVar("K")


def widen(spans: dict[K, tuple[datetime, datetime]], key: K, at: datetime) -> None:
    """Widen ``spans[key]`` (earliest, latest) to take ``at`` in; a key not there yet spans ``at`` alone."""
    span = spans.get(key)
    if span is None:
        spans[key] = (at, at)
    elif at < span[0] or at > span[1]:
        spans[key] = (min(at, span[0]), max(at, span[1]))


def anchors_of(observations: Iterable[Observation]) -> list[Anchor]:
    """Anchors (per UID, node, clock and name) of UID-bearing observations."""
    observations = list(observations)
    names = pod_names(observations)
    spans: dict[tuple[str, str, bool], tuple[datetime, datetime]] = {}
    for obs in observations:
        if not obs.pod_uid or not obs.node:
            continue
        if obs.kind in KUBELET_KINDS:
            kubelet = True
        elif obs.kind in API_KINDS:
            kubelet = False
        else:
            continue
        widen(spans, (obs.pod_uid, obs.node, kubelet), obs.observed_at)
    return [
        Anchor(u, n, first, last, k, ns, name)
        for (u, n, k), (first, last) in sorted(spans.items())
        for ns, name in sorted(names.get(u) or {(None, None)})  # type: ignore[arg-type]
    ]


def _transition(obs: Observation) -> str | None:
    value = obs.payload.get("transition") if obs.kind == Kind.WORKER else None
    return value if isinstance(value, str) else None


def _names_pod(obs: Observation) -> bool:
    return bool(obs.namespace and obs.name)


@dataclass
class _Life:
    start: datetime | None  # None: from the beginning of what is known
    lines: list[Observation]
    splits: list[datetime]  # ADD lines inside the life (a re-list, or a lost REMOVE)


def _lives(lines: Sequence[Observation]) -> list[_Life]:
    """Cut one node's lines about one name into lives at ADD-after-REMOVE."""
    ordered = sorted(lines, key=lambda o: (o.observed_at, 0 if _transition(o) in CLOSES else 1, o.dedupe_key))
    lives: list[_Life] = [_Life(None, [], [])]
    closed = False
    for obs in ordered:
        name = _transition(obs)
        current = lives[-1]
        if name in OPENS:
            if closed or (not current.lines and current.start is None):
                if closed:
                    current = _Life(obs.observed_at, [], [])
                    lives.append(current)
                else:
                    current.start = obs.observed_at
                closed = False
            else:
                current.splits.append(obs.observed_at)
        elif closed:
            # A line after a REMOVE and before the next ADD (late PLEG, the status manager's final word):
            # it still belongs to the life the REMOVE ended.
            pass
        current.lines.append(obs)
        if name in CLOSES:
            closed = True
    return [life for life in lives if life.lines]


def _claimants(anchors: Sequence[Anchor], lo: datetime | None, hi: datetime | None) -> list[str]:
    """UIDs whose anchors overlap [lo, hi] (None: unbounded), kubelet anchors first, API ones only when no
    kubelet anchor claims the span."""
    for kubelet in (True, False):
        uids = sorted(
            {
                a.uid
                for a in anchors
                if a.kubelet is kubelet and (hi is None or a.first <= hi) and (lo is None or a.last >= lo)
            }
        )
        if uids:
            return uids
    return []


def _assign(life: _Life, anchors: Sequence[Anchor], end: datetime | None) -> dict[str, str]:
    """Dedupe key -> UID for the lines of one life ([life.start, end))."""
    uids = _claimants(anchors, life.start, end)
    if len(uids) == 1:
        return {o.dedupe_key: uids[0] for o in life.lines}
    if not uids:
        return {}
    # Several incarnations inside one life: the ADDs inside it split it (a REMOVE was lost).
    bounds = [life.start, *life.splits, end]
    out: dict[str, str] = {}
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        part = [
            o
            for o in life.lines
            if (lo is None or o.observed_at >= lo)
            and (hi is None or o.observed_at < hi or o.observed_at == end)
        ]
        owners = _claimants(anchors, lo, hi)
        if len(owners) == 1:
            out.update({o.dedupe_key: owners[0] for o in part})
            continue
        # Still ambiguous: each line goes to the incarnation with evidence nearest to it (ties: none).
        for o in part:
            best = _nearest(anchors, o.observed_at)
            if best is not None:
                out[o.dedupe_key] = best
    return out


def _nearest(anchors: Sequence[Anchor], at: datetime) -> str | None:
    scored: dict[str, timedelta] = {}
    for a in anchors:
        if not a.kubelet:
            continue
        gap = timedelta(0) if a.first <= at <= a.last else min(abs(a.first - at), abs(a.last - at))
        if a.uid not in scored or gap < scored[a.uid]:
            scored[a.uid] = gap
    if not scored:
        return None
    ranked = sorted(scored.items(), key=lambda kv: (kv[1], kv[0]))
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


def resolve_names(lines: Iterable[Observation], anchors: Iterable[Anchor]) -> dict[str, str]:
    """For UID-less lines naming pods (``namespace``/``name`` set), the UID each belongs to (by dedupe
    key); lines no incarnation claims are left out. ``anchors`` are every incarnation's evidence."""
    by_place: dict[tuple[str, str, str], list[Observation]] = {}
    for obs in lines:
        if obs.pod_uid is None and _names_pod(obs) and obs.node:
            by_place.setdefault((obs.node, obs.namespace or "", obs.name or ""), []).append(obs)
    anchor_list = list(anchors)
    out: dict[str, str] = {}
    for (node, ns, name), group in sorted(by_place.items()):
        here = [a for a in anchor_list if a.node == node and (a.namespace, a.name) == (ns, name)]
        lives = _lives(group)
        for i, life in enumerate(lives):
            end = lives[i + 1].start if i + 1 < len(lives) else None
            out.update(_assign(life, here, end))
    return out


def resolve_pod_observations(
    uid: str,
    own: Iterable[Observation],
    candidates: Iterable[Observation],
    rivals: Iterable[Anchor] = (),
) -> tuple[Observation, ...]:
    """The observations the lifecycle core derives pod ``uid`` from: ``own`` plus the ``candidates`` that
    belong to it.

    A candidate naming ``ns/name`` is returned with ``pod_uid`` set to ``uid`` (same dedupe key, so its
    evidence still points at the stored line); it belongs to ``uid`` when ``resolve_names`` says so with
    ``rivals`` (the other incarnations of the name) in view. A candidate naming no pod (a kubelet process,
    a node-level eviction or shutdown line) is returned unchanged when it comes from a node where the pod
    left evidence, within ``CONTEXT_MARGIN`` of it (a ``kubelet_process`` from ``CONTEXT_LOOKBACK`` before).
    Order-free: the result is sorted by ``sort_key``.
    """
    own_list = [o for o in own if o.pod_uid == uid]
    names = pod_names(own_list).get(uid, set())
    cand = [
        c for c in candidates if c.pod_uid is None and (not _names_pod(c) or (c.namespace, c.name) in names)
    ]
    anchors = anchors_of(own_list) + [a for a in rivals if a.uid != uid]
    owners = resolve_names((c for c in cand if _names_pod(c)), anchors)
    attached = [replace(c, pod_uid=uid) for c in cand if owners.get(c.dedupe_key) == uid]
    spans: dict[str, tuple[datetime, datetime]] = {}
    for o in own_list + attached:
        if o.node:
            lo, hi = spans.get(o.node, (o.observed_at, o.observed_at))
            spans[o.node] = (min(lo, o.observed_at), max(hi, o.observed_at))
    context = []
    for c in cand:
        if _names_pod(c) or not c.node or c.node not in spans:
            continue
        lo, hi = spans[c.node]
        first, last = c.observed_at, c.observed_at
        before = CONTEXT_MARGIN
        if c.kind == Kind.KUBELET_PROCESS:
            last = _time_or(c.payload.get("last_at"), first)
            before = CONTEXT_LOOKBACK
        if last >= lo - before and first <= hi + CONTEXT_MARGIN:
            context.append(c)
    return tuple(
        sorted({o.dedupe_key: o for o in own_list + attached + context}.values(), key=lambda o: o.sort_key)
    )


def _time_or(value: object, default: datetime) -> datetime:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return default
        if parsed.tzinfo is not None:
            return parsed
    return default


# The UID a pod known only by name is drawn under (never stored: the read side makes it on request).
UNRESOLVED_UID: Final = "unresolved"


def unclaimed_life(lines: Iterable[Observation]) -> tuple[Observation, ...]:
    """The newest life (``_lives``) of a pod that only UID-less lines name, on the node of its newest line,
    each line given ``UNRESOLVED_UID``: what a reader sees of a pod no UID-bearing evidence names (an
    eviction-manager excerpt, a V2 log of SyncLoop lines). The lines are not attached to anything: a UID
    that arrives later claims them through ``resolve_pod_observations`` as usual. Empty when no line
    names a pod. Order-free."""
    named = [o for o in lines if o.pod_uid is None and _names_pod(o) and o.node]
    if not named:
        return ()
    newest = max(named, key=lambda o: (o.observed_at, o.node or "", o.dedupe_key))
    here = [
        o for o in named if o.node == newest.node and (o.namespace, o.name) == (newest.namespace, newest.name)
    ]
    life = _lives(here)[-1]
    return tuple(sorted((replace(o, pod_uid=UNRESOLVED_UID) for o in life.lines), key=lambda o: o.sort_key))


# Eviction-manager lines that list pods (ranked, waited for, cleaned up) or refuse one (critical): they
# name every pod on the node, and do nothing to it, so they make no pod of their own.
_LISTING_MARKERS: Final = frozenset(
    {
        "EvictionRanked",
        "EvictionCleanupWait",
        "EvictionCleanedUp",
        "EvictionCleanupTimeout",
        "EvictionSkippedCritical",
    }
)


def _acts_on_pod(obs: Observation) -> bool:
    """A line about one pod that shows the kubelet doing something to it: a worker transition, or a
    marker other than the eviction manager's lists and refusals."""
    if obs.kind == Kind.WORKER:
        return True
    return obs.kind == Kind.KUBELET_MARKER and obs.payload.get("reason") not in _LISTING_MARKERS


def nameless_lives(
    lines: Iterable[Observation], anchors: Iterable[Anchor]
) -> tuple[tuple[Observation, ...], ...]:
    """The incarnations that only UID-less lines naming ``ns/name`` show: per node and name, the lines
    no incarnation in ``anchors`` takes (``resolve_names``), cut into lives (``_lives``: ADD after
    REMOVE); a life needs a line that acts on the pod (``_acts_on_pod``: an eviction ranking alone makes
    no pod). Each line given the life's synthetic identity (``audit_evidence.synthetic_uid`` with the
    ``kubelet-`` prefix, from its first line's dedupe key: the same lines give the same identity in any
    order). A UID-bearing line or pod that arrives later takes the lines over, and the life goes away.
    Order-free."""
    named = [o for o in lines if o.pod_uid is None and _names_pod(o) and o.node]
    owners = resolve_names(named, anchors)
    by_place: dict[tuple[str, str, str], list[Observation]] = {}
    for obs in named:
        if obs.dedupe_key not in owners:
            by_place.setdefault((obs.node or "", obs.namespace or "", obs.name or ""), []).append(obs)
    out = []
    for (_, ns, name), group in sorted(by_place.items()):
        for life in _lives(group):
            if not any(_acts_on_pod(o) for o in life.lines):
                continue
            first = min(life.lines, key=lambda o: (o.observed_at, o.dedupe_key))
            uid = synthetic_uid(ns, name, first.dedupe_key, KUBELET_SYNTHETIC_PREFIX)
            out.append(tuple(sorted((replace(o, pod_uid=uid) for o in life.lines), key=lambda o: o.sort_key)))
    return tuple(sorted(out, key=lambda life: (life[0].observed_at, life[0].pod_uid or "")))
