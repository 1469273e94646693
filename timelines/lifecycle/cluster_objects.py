"""Timelines of what guards and hosts pods: nodes and PodDisruptionBudgets. Pure, order-independent.

* A node's lanes: ``node:ready`` (ready / not_ready / unknown), ``node:cordoned``, ``node:shutdown`` (the
  kubelet is shutting the node down, or it is tainted out-of-service), ``node:working_pods`` (steps of
  the kubelet's ``kubelet_working_pods`` by lifecycle, from metric scrapes) and ``node:kubelet`` (one bar
  per kubelet process its logs show, from its start line or first line to its last; ``restart`` marks a
  process that started after another one's last line). From audit logs (``audit`` observations of
  ``nodes`` writes): ``node:drain`` (``cordoned`` from the request that set ``spec.unschedulable`` to the
  one that cleared it, naming who), and the cordon changes join the snapshots' ``node:cordoned`` points,
  so a cluster known from audit logs alone has its cordons.
* A PDB's lane ``pdb:NAME``: ``allowed`` / ``blocked`` (disruptionsAllowed = 0) with the
  DisruptionAllowed condition's reason, and its findings: ``pdb_blocking_drain`` (evictions of a covered
  pod refused by this PDB, 429 in the audit log; or budget 0 while a covered pod's node is cordoned and
  before the pod's own eviction was granted: a pod in ``status.disruptedPods`` or carrying DisruptionTarget
  is being evicted, not blocked; one finding per pod, with the count of refused evictions and who asked
  for them) and ``pdb_unmanaged_pods``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from timelines.lifecycle.audit_evidence import (
    AuditRecord,
    Life,
    belongs,
    read_audit,
    refused_evictions,
    who_of,
)
from timelines.lifecycle.observation import Kind, Observation
from timelines.lifecycle.timeline import Finding, Interval, parse_time

NODE_READY_LANE = "node:ready"
NODE_CORDONED_LANE = "node:cordoned"
NODE_SHUTDOWN_LANE = "node:shutdown"
NODE_WORKING_PODS_LANE = "node:working_pods"
NODE_KUBELET_LANE = "node:kubelet"  # one bar per kubelet process the logs show; a new one is a restart
NODE_DRAIN_LANE = "node:drain"  # cordoned, from audited requests: who cordoned it (and who uncordoned it)
PDB_LANE_PREFIX = "pdb:"
OUT_OF_SERVICE_TAINTS = frozenset(
    {"node.kubernetes.io/out-of-service", "node.cloudprovider.kubernetes.io/shutdown"}
)
UNMANAGED_REASON = "UnmanagedPods"

Span = tuple[datetime, datetime | None]


def _canonical(observations: Iterable[Observation], kinds: frozenset[str]) -> list[Observation]:
    """Deduplicated by key and sorted by ``sort_key``: the order-free view every derivation starts from."""
    unique = {o.dedupe_key: o for o in observations if o.kind in kinds}
    return sorted(unique.values(), key=lambda o: o.sort_key)


def _steps(
    lane: str, points: Sequence[tuple[datetime, str | None, dict[str, Any], str]], end: datetime | None
) -> tuple[Interval, ...]:
    """Runs of equal states from time-ordered points ``(at, state or None for 'nothing', attrs, key)``."""
    out: list[Interval] = []
    current: tuple[datetime, str, dict[str, Any], list[str]] | None = None
    for at, state, attrs, key in points:
        if current is not None and state == current[1] and attrs == current[2]:
            current[3].append(key)
            continue
        if current is not None:
            out.append(
                Interval(lane, current[1], current[0], at, "observed", current[2], tuple(sorted(current[3])))
            )
            current = None
        if state is not None:
            current = (at, state, attrs, [key])
    if current is not None:
        out.append(
            Interval(lane, current[1], current[0], end, "observed", current[2], tuple(sorted(current[3])))
        )
    return tuple(out)


def _condition(payload: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in payload.get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == kind:
            return c
    return None


def _transition_time(cond: Mapping[str, Any] | None, observed_at: datetime) -> datetime:
    """The condition's own transition time when it is plausible (not after we saw it), else when seen."""
    try:
        at = parse_time(cond.get("last_transition")) if cond else None
    except ValueError:
        at = None
    return at if at is not None and at <= observed_at else observed_at


@dataclass(frozen=True, slots=True)
class NodeTimeline:
    name: str
    lanes: dict[str, tuple[Interval, ...]] = field(hash=False)
    deleted_at: datetime | None = None

    def spans(self, lane: str, state: str) -> list[Span]:
        return [(iv.start, iv.end) for iv in self.lanes.get(lane, ()) if iv.state == state]


def derive_node_timeline(observations: Iterable[Observation]) -> NodeTimeline:
    """The lanes of one node from its node / node_deleted / node_metrics observations (any order)."""
    obs = _canonical(
        observations,
        frozenset({Kind.NODE, Kind.NODE_DELETED, Kind.NODE_METRICS, Kind.KUBELET_PROCESS, Kind.AUDIT}),
    )
    changes = [o for o in obs if o.kind == Kind.AUDIT and _cordon_change(o) is not None]
    obs = [o for o in obs if o.kind != Kind.AUDIT]
    names = {
        str((o.payload.get("name") if o.kind != Kind.KUBELET_PROCESS else None) or o.node or o.name or "")
        for o in obs
    } - {""}
    names |= {str(o.node or o.name) for o in changes if o.node or o.name}
    if len(names) > 1:
        raise ValueError(f"observations of more than one node: {sorted(names)}")
    name = next(iter(names), "")
    snaps = [o for o in obs if o.kind in (Kind.NODE, Kind.NODE_DELETED)]
    deleted_at = min((o.observed_at for o in snaps if o.kind == Kind.NODE_DELETED), default=None)
    ready: list[tuple[datetime, str | None, dict[str, Any], str]] = []
    cordon: list[tuple[datetime, str | None, dict[str, Any], str]] = []
    shutdown: list[tuple[datetime, str | None, dict[str, Any], str]] = []
    for o in snaps:
        p = o.payload
        cond = _condition(p, "Ready")
        state = {"True": "ready", "False": "not_ready"}.get(str((cond or {}).get("status")), "unknown")
        attrs = {"reason": (cond or {}).get("reason"), "message": (cond or {}).get("message")}
        ready.append((_transition_time(cond, o.observed_at), state, attrs, o.dedupe_key))
        cordon.append((o.observed_at, "cordoned" if p.get("unschedulable") else None, {}, o.dedupe_key))
        taints = {t.get("key") for t in p.get("taints") or [] if isinstance(t, Mapping)}
        message = str((cond or {}).get("message") or "").lower()
        shutting = "shutting down" in message or bool(taints & OUT_OF_SERVICE_TAINTS)
        shutdown.append((o.observed_at, "shutting_down" if shutting else None, {}, o.dedupe_key))
    working: list[tuple[datetime, str | None, dict[str, Any], str]] = []
    for o in obs:
        if o.kind == Kind.NODE_METRICS and isinstance(o.payload.get("working_pods"), Mapping):
            counts = {k: int(v) for k, v in sorted(o.payload["working_pods"].items()) if isinstance(v, int)}
            working.append((o.observed_at, "working_pods", counts, o.dedupe_key))
    drain: list[tuple[datetime, str | None, dict[str, Any], str]] = []
    for o in changes:
        value = _cordon_change(o)
        cordon.append((o.observed_at, "cordoned" if value else None, {}, o.dedupe_key))
        drain.append((o.observed_at, "cordoned" if value else None, {"who": who_of(o.payload)}, o.dedupe_key))
    cordon.sort(key=lambda p: (p[0], p[3]))
    ready.sort(key=lambda p: (p[0], p[3]))
    lanes = {
        NODE_READY_LANE: _steps(NODE_READY_LANE, ready, deleted_at),
        NODE_CORDONED_LANE: _steps(NODE_CORDONED_LANE, cordon, deleted_at),
        NODE_SHUTDOWN_LANE: _steps(NODE_SHUTDOWN_LANE, shutdown, deleted_at),
        NODE_WORKING_PODS_LANE: _steps(NODE_WORKING_PODS_LANE, working, deleted_at),
        NODE_KUBELET_LANE: _kubelet_processes([o for o in obs if o.kind == Kind.KUBELET_PROCESS]),
        NODE_DRAIN_LANE: _drain_spans(drain, deleted_at),
    }
    return NodeTimeline(name=name, lanes={k: v for k, v in lanes.items() if v}, deleted_at=deleted_at)


def _cordon_change(o: Observation) -> bool | None:
    """What an audited ``nodes`` write did to ``spec.unschedulable`` (True: cordoned, False: uncordoned), or
    None when it changed nothing about it (another field, refused, a dry run)."""
    p = o.payload
    if (
        p.get("resource") != "nodes"
        or p.get("subresource")
        or p.get("succeeded") is not True
        or p.get("dry_run")
    ):
        return None
    change = p.get("node_change")
    if not isinstance(change, Mapping):
        return None
    value = change.get("unschedulable")
    return value if isinstance(value, bool) else None


def _drain_spans(
    points: Sequence[tuple[datetime, str | None, dict[str, Any], str]], end: datetime | None
) -> tuple[Interval, ...]:
    """``cordoned`` from the first request that cordoned the node to the one that uncordoned it; a second
    cordon while cordoned changes nothing (its requester is not the one who began it)."""
    out: list[Interval] = []
    current: tuple[datetime, dict[str, Any], list[str]] | None = None
    for at, state, attrs, key in sorted(points, key=lambda p: (p[0], p[3])):
        if state is not None:
            if current is None:
                current = (at, dict(attrs), [key])
            else:
                current[2].append(key)
        elif current is not None:
            out.append(
                Interval(
                    NODE_DRAIN_LANE,
                    "cordoned",
                    current[0],
                    at,
                    "observed",
                    {**current[1], "uncordoned_by": attrs.get("who")},
                    tuple(sorted([*current[2], key])),
                )
            )
            current = None
    if current is not None:
        out.append(
            Interval(
                NODE_DRAIN_LANE,
                "cordoned",
                current[0],
                end,
                "observed",
                current[1],
                tuple(sorted(current[2])),
            )
        )
    return tuple(out)


def _kubelet_processes(obs: Sequence[Observation]) -> tuple[Interval, ...]:
    """One interval per kubelet process (pid): from its start line (else its first line) to its last line.

    A process whose start lies after another process's last line is a restart (``attrs.restart``); the
    stretch between them is left empty: the kubelet was down, or its lines were not given."""
    spans: dict[Any, dict[str, Any]] = {}
    for o in obs:
        p = o.payload
        try:
            first = parse_time(p.get("first_at")) or o.observed_at
            last = parse_time(p.get("last_at")) or first
            started = parse_time(p.get("started_at"))
        except ValueError:
            continue
        pid = p.get("pid")
        span = spans.setdefault(pid, {"first": first, "last": last, "started": started, "keys": [], "p": p})
        span["first"] = min(span["first"], first)
        span["last"] = max(span["last"], last)
        if started is not None and (span["started"] is None or started < span["started"]):
            span["started"] = started
        span["keys"].append(o.dedupe_key)
        for key in ("version", "verbosity"):
            if p.get(key) is not None:
                span["p"] = {**span["p"], key: p.get(key)}
    ordered = sorted(spans.items(), key=lambda kv: (kv[1]["started"] or kv[1]["first"], str(kv[0])))
    out: list[Interval] = []
    for i, (pid, span) in enumerate(ordered):
        start = min(span["started"] or span["first"], span["first"])
        restart = any(other["last"] <= start for _, other in ordered[:i]) or bool(
            span["p"].get("from_status_reset")
        )
        end = span["last"] if span["last"] > start else None
        attrs = {
            "pid": pid,
            "version": span["p"].get("version"),
            "verbosity": span["p"].get("verbosity"),
            "restart": restart,
            "start_from": "start_line" if span["started"] is not None else "first_line",
        }
        out.append(
            Interval(NODE_KUBELET_LANE, "kubelet", start, end, "observed", attrs, tuple(sorted(span["keys"])))
        )
    return tuple(out)


# ------------------------------------------------------------------------------------------------ PDBs


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist).

    An empty selector matches every pod (policy/v1); a missing one (None) matches none.
    """
    if selector is None:
        return False
    for key, value in (selector.get("match_labels") or selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("match_expressions") or selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def selector_text(selector: Mapping[str, Any] | None) -> str:
    """A metav1.LabelSelector as ``kubectl`` writes one (``labels.Selector.String()``): requirements
    sorted by key, joined by commas: ``app=web,tier in (a,b),tier notin (c),canary,!legacy``. An empty
    selector is ``(every pod)`` (policy/v1 matches all), a missing one ``(none)``."""
    if selector is None:
        return "(none)"
    parts: list[tuple[str, str]] = []
    for key, value in (selector.get("match_labels") or selector.get("matchLabels") or {}).items():
        parts.append((str(key), f"{key}={value}"))
    for expr in selector.get("match_expressions") or selector.get("matchExpressions") or []:
        key, op = str(expr.get("key")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        text = {
            "In": f"{key} in ({values})",
            "NotIn": f"{key} notin ({values})",
            "Exists": key,
            "DoesNotExist": f"!{key}",
        }.get(str(op), f"{key} {op} ({values})")
        parts.append((key, text))
    return ",".join(t for _, t in sorted(parts, key=lambda p: p[0])) or "(every pod)"


@dataclass(frozen=True, slots=True)
class CoveredPod:
    """What a PDB rule needs to know about a pod (from the pod's current row and derived lanes)."""

    uid: str
    namespace: str
    name: str
    node: str | None
    labels: Mapping[str, str] = field(hash=False)
    has_controller: bool = True
    created_at: datetime | None = None
    deleted_at: datetime | None = None
    disruption_target: tuple[Span, ...] = ()  # spans where condition DisruptionTarget was True


@dataclass(frozen=True, slots=True)
class PdbTimeline:
    uid: str
    namespace: str
    name: str
    intervals: tuple[Interval, ...]
    findings: tuple[Finding, ...]
    covered: tuple[str, ...]  # pod uids
    unmanaged: tuple[str, ...]  # pod uids with no controller
    deleted_at: datetime | None = None


def _overlap(a: Span, b: Span) -> Span | None:
    start = max(a[0], b[0])
    ends = [e for e in (a[1], b[1]) if e is not None]
    end = min(ends) if ends else None
    return (start, end) if end is None or end > start else None


def _lifetime_overlaps(pod: CoveredPod, life: Span) -> bool:
    """Whether the pod existed at some moment while the PDB did (ends inclusive; open ends unbounded)."""
    pod_start = pod.created_at or life[0]
    return (life[1] is None or pod_start <= life[1]) and (pod.deleted_at is None or pod.deleted_at >= life[0])


def _uses_scale(payload: Mapping[str, Any]) -> bool:
    """The disruption controller looks for controllers (and so meets unmanaged pods) only for
    maxUnavailable or a percentage minAvailable (k8s-facts §7)."""
    min_available = payload.get("min_available")
    return payload.get("max_unavailable") is not None or isinstance(min_available, str)


def _blocked_runs(intervals: Sequence[Interval]) -> list[Interval]:
    """Back-to-back ``blocked`` intervals (the healthy counts moved, the budget stayed 0) as one each."""
    runs: list[Interval] = []
    for iv in intervals:
        if iv.state != "blocked":
            continue
        if runs and runs[-1].end == iv.start:
            last = runs[-1]
            runs[-1] = Interval(
                last.lane,
                last.state,
                last.start,
                iv.end,
                last.source,
                last.attrs,
                tuple(sorted(set(last.evidence) | set(iv.evidence))),
            )
        else:
            runs.append(iv)
    return runs


def _refused_by(records: Sequence[AuditRecord], pod: CoveredPod, pdb: str) -> list[AuditRecord]:
    """The evictions of ``pod`` (joined by name and lifetime) refused by the PDB named ``pdb`` (or by a
    budget the answer does not name)."""
    life = Life(pod.uid, pod.namespace, pod.name, pod.created_at, pod.deleted_at)
    return [
        r for r in refused_evictions(records) if r.eviction.get("pdb") in (pdb, None) and belongs(r, life)
    ]


def _disruption_began(
    pod: CoveredPod, snaps: Sequence[Observation], records: Sequence[AuditRecord]
) -> datetime | None:
    """When this pod began being disrupted, so that a drain no longer waits on it: the earliest of its own
    granted eviction (audit log), its entry in the PDB's ``status.disruptedPods`` (the eviction subresource
    writes it when it grants an eviction and takes one disruption from the budget for it), and the start
    of its DisruptionTarget condition (set by a granted eviction, a preemption, the taint manager, the
    kubelet: the pod is going). None while nothing shows it going.

    ``disruptedPods`` names pods by name only: an entry counts for this incarnation when its time falls in
    the pod's lifetime (a name's next incarnation is not blamed for the last one's eviction)."""
    times: list[datetime] = [span[0] for span in pod.disruption_target]
    life = Life(pod.uid, pod.namespace, pod.name, pod.created_at, pod.deleted_at)
    times += [r.at for r in records if r.eviction_outcome == "granted" and belongs(r, life)]
    for o in snaps:
        disrupted = (o.payload.get("status") or {}).get("disrupted_pods") or {}
        if not isinstance(disrupted, Mapping) or pod.name not in disrupted:
            continue
        when = parse_time(disrupted[pod.name]) or o.observed_at
        if (pod.created_at is None or when >= pod.created_at) and (
            pod.deleted_at is None or when <= pod.deleted_at
        ):
            times.append(when)
    return min(times, default=None)


def _before(span: Span, cutoff: datetime | None) -> Span | None:
    """``span`` cut at ``cutoff`` (None: no cut); None when nothing of it is left."""
    if cutoff is None:
        return span
    if span[0] >= cutoff:
        return None
    return (span[0], cutoff if span[1] is None or span[1] > cutoff else span[1])


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _blocking_finding(
    namespace: str,
    name: str,
    pod: CoveredPod,
    runs: Sequence[Interval],
    snaps: Sequence[Observation],
    evictions: Sequence[AuditRecord],
    cordons: Mapping[str, Sequence[Span]],
) -> Finding | None:
    """``pdb_blocking_drain`` of one covered pod, or None: at most one per pod and PDB.

    Kubernetes semantics (the eviction subresource, k8s-facts §7): a drain evicts each pod of the node and
    retries while the API server answers 429 (the budget allows 0 disruptions). So the budget blocked a
    drain of this pod when

    * an eviction of it was refused by this budget (429 in the audit log): the API server's own word; or
    * its node was cordoned (a drain begins with a cordon) while the budget allowed 0 disruptions, before
      the pod began being disrupted (``_disruption_began``): a drain waits on it.

    A budget at 0 *because this pod's own eviction was granted* (the pod is in ``status.disruptedPods``,
    carries DisruptionTarget, or its eviction was answered 201) blocks nothing: the pod is being evicted,
    not blocked. The finding spans the waits and refusals, from the first to the last."""
    refused = _refused_by(evictions, pod, name)
    going = _disruption_began(pod, snaps, evictions)
    cutoff = min((t for t in (going, pod.deleted_at) if t is not None), default=None)
    waits: list[tuple[Span, Interval]] = []
    if pod.node:
        for run in runs:
            for cordon in cordons.get(pod.node, ()):
                life = (pod.created_at or run.start, None)  # a drain cannot wait on a pod before it exists
                hit = _overlap((run.start, run.end), cordon)
                hit = _overlap(hit, life) if hit is not None else None
                hit = _before(hit, cutoff) if hit is not None else None
                if hit is not None:
                    waits.append((hit, run))
    if not waits and not refused:
        return None
    starts = [hit[0] for hit, _ in waits] + [r.at for r in refused]
    ends: list[datetime | None] = [hit[1] for hit, _ in waits] + [r.at for r in refused]
    found: dict[str, Any] = {"pod_uid": pod.uid, "pod": f"{pod.namespace}/{pod.name}", "node": pod.node}
    evidence = {key for _, run in waits for key in run.evidence} | {r.key for r in refused}
    numbers = ""
    if refused:
        last = refused[-1].eviction
        if isinstance(last.get("desired_healthy"), int) and isinstance(last.get("current_healthy"), int):
            numbers = f" ({last['current_healthy']} healthy, {last['desired_healthy']} needed)"
    else:
        run = waits[0][1]
        numbers = f" ({run.attrs.get('current_healthy')} healthy, {run.attrs.get('desired_healthy')} needed)"
    parts = [
        f"PodDisruptionBudget {namespace}/{name} allowed 0 disruptions{numbers} while pod {pod.namespace}/{pod.name}"
    ]
    if waits:
        parts.append(f" runs on cordoned node {pod.node}, not yet evicted: a drain of the node waits on it.")
    else:
        parts.append(" was being evicted:")
    if refused:
        n = len(refused)
        actors = sorted({r.who for r in refused})
        found.update(refused_evictions=n, drain_actor=", ".join(actors))
        parts.append(
            f" {n} {_plural(n, 'eviction', 'evictions')} by {', '.join(actors)} "
            f"{_plural(n, 'was', 'were')} refused."
        )
    return Finding(
        kind="pdb_blocking_drain",
        severity="warning",
        message="".join(parts),
        start=min(starts),
        end=None if any(e is None for e in ends) else max(e for e in ends if e is not None),
        evidence=tuple(sorted(evidence)),
        attrs=found,
    )


def derive_pdb_timeline(
    observations: Iterable[Observation],
    *,
    pods: Sequence[CoveredPod] = (),
    cordons: Mapping[str, Sequence[Span]] | None = None,
) -> PdbTimeline:
    """The ``pdb:NAME`` lane and findings of one PDB from its pdb / pdb_deleted observations and the
    events regarding it, given the pods that may be covered and each node's cordoned spans."""
    obs = _canonical(observations, frozenset({Kind.PDB, Kind.PDB_DELETED, Kind.EVENT, Kind.AUDIT}))
    evictions = [r for o in obs if o.kind == Kind.AUDIT and (r := read_audit(o)) is not None]
    obs = [o for o in obs if o.kind != Kind.AUDIT]
    snaps = [o for o in obs if o.kind in (Kind.PDB, Kind.PDB_DELETED)]
    if not snaps:
        raise ValueError("no pdb observation: a PDB timeline needs at least one snapshot")
    first, last = snaps[0].payload, snaps[-1].payload
    uid, namespace, name = str(last.get("uid")), str(last.get("namespace") or ""), str(last.get("name"))
    lane = PDB_LANE_PREFIX + name
    deleted_at = min((o.observed_at for o in snaps if o.kind == Kind.PDB_DELETED), default=None)
    points: list[tuple[datetime, str | None, dict[str, Any], str]] = []
    for o in snaps:
        status = o.payload.get("status") or {}
        allowed = status.get("disruptions_allowed")
        if not isinstance(allowed, int):
            continue
        cond = _condition(status, "DisruptionAllowed") or {}
        attrs = {
            "reason": cond.get("reason"),
            "disruptions_allowed": allowed,
            "current_healthy": status.get("current_healthy"),
            "desired_healthy": status.get("desired_healthy"),
            "expected_pods": status.get("expected_pods"),
        }
        points.append((o.observed_at, "blocked" if allowed <= 0 else "allowed", attrs, o.dedupe_key))
    intervals = _steps(lane, points, deleted_at)

    created = parse_time(first.get("created")) or snaps[0].observed_at
    life: Span = (min(created, snaps[0].observed_at), deleted_at)
    selectors = [o.payload.get("selector") for o in snaps]
    covered = sorted(
        (
            p
            for p in pods
            if p.namespace == namespace
            and _lifetime_overlaps(p, life)
            and any(selector_matches(s, p.labels) for s in selectors)
        ),
        key=lambda p: p.uid,
    )
    unmanaged = [p for p in covered if not p.has_controller]
    findings: list[Finding] = []
    runs = _blocked_runs(intervals)
    for pod in covered:
        finding = _blocking_finding(namespace, name, pod, runs, snaps, evictions, cordons or {})
        if finding is not None:
            findings.append(finding)
    events = [o for o in obs if o.kind == Kind.EVENT and o.payload.get("reason") == UNMANAGED_REASON]
    if events or (unmanaged and any(_uses_scale(o.payload) for o in snaps)):
        # A budget selects a pod only while both exist: an older pod, or an event left by an earlier budget
        # of this name, does not date the finding before the budget's creation.
        start = max(
            min([e.observed_at for e in events] + [p.created_at or life[0] for p in unmanaged] or [life[0]]),
            life[0],
        )
        names = ", ".join(f"{p.namespace}/{p.name}" for p in unmanaged) or "(named in the event)"
        message = (
            f"PodDisruptionBudget {namespace}/{name} selects pods with no controller ({names}); its status "
            "cannot be calculated correctly. Set .spec.minAvailable to an integer to account for them."
        )
        findings.append(
            Finding(
                kind="pdb_unmanaged_pods",
                severity="warning",
                message=message,
                start=start,
                end=deleted_at,
                evidence=tuple(sorted({e.dedupe_key for e in events} | {snaps[-1].dedupe_key})),
                attrs={
                    "pods": [p.uid for p in unmanaged],
                    "event": events[-1].payload.get("message") if events else None,
                },
            )
        )
    findings.sort(key=lambda f: (f.start, f.kind, str(f.attrs.get("pod_uid"))))
    return PdbTimeline(
        uid=uid,
        namespace=namespace,
        name=name,
        intervals=intervals,
        findings=tuple(findings),
        covered=tuple(p.uid for p in covered),
        unmanaged=tuple(p.uid for p in unmanaged),
        deleted_at=deleted_at,
    )
