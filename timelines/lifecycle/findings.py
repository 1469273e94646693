"""Findings: pure rules over a pod's timeline (and its facts) that flag lifecycle anomalies.

Each rule returns ``Finding``s with a severity, one sentence naming the pod and the numbers, a time
span and the evidence keys. Thresholds come from ``Thresholds``; the Django settings build one from
the environment. See DESIGN.md "Findings" and k8s-facts.md §1, §2, §5, §6 for the semantics.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from timelines.lifecycle.facts import (
    Incarnation,
    PodFacts,
    PodSnapshot,
    collect_facts,
    first_run_start,
)
from timelines.lifecycle.observation import Observation, TerminationCause, Transition
from timelines.lifecycle.record import record
from timelines.lifecycle.timeline import (
    CONTAINER_LANE_PREFIX,
    WORKER_LANE,
    ContainerState,
    Finding,
    Interval,
    PodTimeline,
    Severity,
    WorkerPhase,
)
from timelines.lifecycle.worker import (
    CLEANUP,
    DONE,
    RELIST_WINDOW,
    TERMINATING,
    WorkerLane,
    bare_container_id,
    process_starts,
    worker_lane,
)

_ZERO, _ONE_SECOND = timedelta(0), timedelta(seconds=1)  # made once, not per comparison


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Tunable limits of the finding rules (all durations are ``timedelta``)."""

    # stuck_terminating: terminating longer than the pod's grace period plus this slack.
    stuck_terminating_slack: timedelta = timedelta(seconds=60)
    # Grace period assumed when neither the kubelet nor the API says (the Kubernetes default).
    default_grace: timedelta = timedelta(seconds=30)
    # grace_exceeded: containers stopped later than request + grace + this slack (API times have
    # second precision, so a little slack avoids flagging rounding).
    grace_exceeded_slack: timedelta = timedelta(seconds=2)
    # slow_cleanup: SyncTerminatedPod (volumes, cgroups) longer than this.
    slow_cleanup: timedelta = timedelta(minutes=2)
    # crash_loop: this many restarts within crash_loop_window (or any CrashLoopBackOff).
    crash_loop_restarts: int = 3
    crash_loop_window: timedelta = timedelta(minutes=10)

    def __post_init__(self) -> None:
        for name in (
            "stuck_terminating_slack",
            "default_grace",
            "grace_exceeded_slack",
            "slow_cleanup",
            "crash_loop_window",
        ):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ValueError(f"Thresholds.{name} must be a non-negative timedelta, got {value!r}")
        if not isinstance(self.crash_loop_restarts, int) or self.crash_loop_restarts < 1:
            raise ValueError(
                f"Thresholds.crash_loop_restarts must be an integer >= 1, got {self.crash_loop_restarts!r}"
            )


DEFAULT_THRESHOLDS = Thresholds()

SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
ADMISSION_REASONS = frozenset(
    {
        "NodeShutdown",
        "Shutdown",
        "NodeAffinity",
        "NodeName",
        "TopologyAffinityError",
        "UnexpectedAdmissionError",
        "PodOSNotSupported",
        "PodOSSelectorNodeLabelDoesNotMatch",
        "InvalidNodeInfo",
        "UnsupportedPodOSFeature",
    }
)


def detect_findings(
    timeline: PodTimeline,
    observations: Iterable[Observation],
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    now: datetime | None = None,
) -> tuple[Finding, ...]:
    """Every finding for one pod, sorted by (start, kind, message).

    ``observations`` are the same ones the timeline was derived from. ``now`` (timezone-aware)
    measures still-open intervals; None means the newest ``observed_at``, so the result depends on
    the observations alone. Raises ValueError for a naive ``now``.
    """
    return detect_facts_findings(timeline, collect_facts(observations), thresholds, now)


def detect_facts_findings(
    timeline: PodTimeline,
    facts: PodFacts,
    thresholds: Thresholds,
    now: datetime | None,
    lane: WorkerLane | None = None,
) -> tuple[Finding, ...]:
    """``detect_findings`` over already collected facts (``derive`` uses this to read payloads once, and
    hands over the worker lane it computed)."""
    if now is not None and (now.tzinfo is None or now.utcoffset() is None):
        raise ValueError(f"now {now!r} is naive; expected a timezone-aware datetime")
    moment = now.astimezone(UTC) if now is not None else (facts.latest_observed or datetime.now(UTC))
    ctx = _Context(timeline, facts, thresholds, moment, lane if lane is not None else worker_lane(facts))
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(ctx))
    found.sort(key=lambda f: (f.start, f.kind, f.message, f.evidence))
    return tuple(found)


@record(frozen=True)
class _Context:
    timeline: PodTimeline
    facts: PodFacts
    thresholds: Thresholds
    now: datetime
    lane: WorkerLane

    @property
    def pod(self) -> str:
        t = self.timeline
        if t.namespace and t.name:
            return f"{t.namespace}/{t.name}"
        return t.name or f"UID {t.uid}"

    _worker: dict[str, list[Interval]] = field(default_factory=dict, repr=False, compare=False)

    def worker(self, state: str) -> list[Interval]:
        """The worker lane's intervals in ``state`` (made once per state: most rules ask; read-only)."""
        found = self._worker.get(state)
        if found is None:
            found = self._worker[state] = [iv for iv in self.timeline.lane(WORKER_LANE) if iv.state == state]
        return found

    def incarnation_at(self, at: datetime) -> Incarnation | None:
        chosen = None
        for inc in self.facts.incarnations:
            if (inc.created or inc.first_at) <= at or chosen is None:
                chosen = inc
        return chosen

    def next_cycle_start(self, iv: Interval) -> datetime | None:
        cycle = iv.attrs.get("cycle")
        starts = [
            w.start
            for w in self.timeline.lane(WORKER_LANE)
            if isinstance(cycle, int) and w.attrs.get("cycle", -1) > cycle
        ]
        return min(starts) if starts else None

    def grace(self, iv: Interval) -> timedelta:
        value = iv.attrs.get("grace_seconds")
        if isinstance(value, int) and not isinstance(value, bool):
            return timedelta(seconds=max(value, 1))  # the kubelet's floor is 1 s
        return self.thresholds.default_grace


def _evidence(*groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({k for g in groups for k in g}))


def human_duration(value: timedelta) -> str:
    """A short duration a person reads: ``4.5s``, ``7m12s``, ``3h05m``."""
    seconds = value.total_seconds()
    if seconds < 90:
        return f"{seconds:.1f}s"
    if seconds < 5400:
        m, s = divmod(int(seconds), 60)
        return f"{m}m{s:02d}s"
    h, rem = divmod(int(seconds), 3600)
    return f"{h}h{rem // 60:02d}m"


def human_time(value: datetime) -> str:
    """UTC wall-clock time with milliseconds when they are not zero: ``2024-06-07 06:54:47.250 UTC``."""
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text + " UTC"


# --------------------------------------------------------------------------------------------- rules


def killed_during_setup(ctx: _Context) -> list[Finding]:
    """Termination requested (deletion, eviction, kill) while setup ran and not all containers had started."""
    out: list[Finding] = []
    setups = ctx.worker(WorkerPhase.SETUP)
    # Inferred from the API, a pod deleted before any container started goes from setup straight to
    # cleanup (nothing to stop): that cleanup is where the termination began.
    asked = [*ctx.worker(WorkerPhase.TERMINATING)]
    began = {iv.start for iv in asked}
    for iv in ctx.worker(WorkerPhase.CLEANUP):
        if (
            iv.source == "inferred"
            and iv.start not in began
            and any(
                s.end == iv.start
                and s.attrs.get("end_from") == "api:deletion"
                and s.attrs.get("cycle") == iv.attrs.get("cycle")
                for s in setups
            )
        ):
            asked.append(replace(iv, attrs={**iv.attrs, "cause": TerminationCause.DELETION}))
    for iv in sorted(asked, key=lambda i: i.start):
        cause = iv.attrs.get("cause")
        if cause in (TerminationCause.TERMINAL_PHASE, TerminationCause.ORPHANED):
            continue
        setup = next((s for s in setups if s.attrs.get("cycle") == iv.attrs.get("cycle")), None)
        if setup is None:
            continue
        if setup.end != iv.start:
            # Setup did not run into the termination: it had ended (containers started) before it, or
            # ran on after it, or its end is not known.
            continue
        inc = ctx.incarnation_at(iv.start)
        missing: list[str] = []
        total = 0
        names = (
            sorted({c.name for s in inc.snapshots for c in s.containers if c.kind == "regular"})
            if inc
            else []
        )
        if inc is not None and names:
            starts = first_run_start(inc)
            total = len(names)
            missing = [n for n in names if n not in starts or starts[n] > iv.start]
            if not missing:
                continue
            detail = f"{len(missing)} of {total} containers ({', '.join(missing)}) had not started yet"
        else:
            # Kubelet evidence only: setup still ran when termination began.
            detail = "its containers had not all started yet (kubelet lines)"
        why = f" ({cause})" if cause else ""
        out.append(
            Finding(
                kind="killed_during_setup",
                severity="info",
                message=(
                    f"Pod {ctx.pod} was asked to terminate{why} at {human_time(iv.start)}, "
                    f"{human_duration(iv.start - setup.start)} into setup, while {detail}."
                ),
                start=iv.start,
                end=iv.end,
                evidence=_evidence(setup.evidence, iv.evidence),
                attrs={
                    "cause": cause,
                    "not_started": missing,
                    "containers": total,
                    "cycle": iv.attrs.get("cycle"),
                },
            )
        )
    return out


def started_after_termination_requested(ctx: _Context) -> list[Finding]:
    """A container started after termination was requested: the race kubernetes PR #102344 closed."""
    out: list[Finding] = []
    for iv in ctx.worker(WorkerPhase.TERMINATING):
        if iv.attrs.get("cause") == TerminationCause.TERMINAL_PHASE:
            continue
        inc = ctx.incarnation_at(iv.start)
        if inc is None:
            continue
        horizon = ctx.next_cycle_start(iv)
        late: dict[str, tuple[datetime, set[str]]] = {}
        for snap in inc.snapshots:
            for c in snap.containers:
                for run in (c.current_run, c.last):
                    if run is None or run.started_at is None or run.started_at <= iv.start:
                        continue
                    if horizon is not None and run.started_at >= horizon:
                        continue
                    have = late.get(c.name)
                    if have is None or run.started_at < have[0]:
                        late[c.name] = (run.started_at, (have[1] if have else set()) | {snap.key})
                    else:
                        have[1].add(snap.key)
        for at, key, cycle in _late_pleg_starts(ctx):
            if cycle == iv.attrs.get("cycle") and at > iv.start and (horizon is None or at < horizon):
                name = "(PLEG ContainerStarted)"
                have = late.get(name)
                if have is None or at < have[0]:
                    late[name] = (at, (have[1] if have else set()) | {key})
                else:
                    have[1].add(key)
        if not late:
            continue
        first_name = min(late, key=lambda n: (late[n][0], n))
        first_at = late[first_name][0]
        names = sorted(late)
        out.append(
            Finding(
                kind="started_after_termination_requested",
                severity="critical",
                message=(
                    f"Container {first_name} of pod {ctx.pod} started at {human_time(first_at)}, "
                    f"{human_duration(first_at - iv.start)} after termination was requested at {human_time(iv.start)}"
                    + (
                        f" ({len(names)} containers started late: {', '.join(names)})"
                        if len(names) > 1
                        else ""
                    )
                    + "; this is the race kubernetes PR #102344 fixed."
                ),
                start=iv.start,
                end=first_at,
                evidence=_evidence(iv.evidence, *(v[1] for v in late.values())),
                attrs={
                    "containers": names,
                    "requested_at": iv.start.isoformat(),
                    "cycle": iv.attrs.get("cycle"),
                },
            )
        )
    return out


def _late_pleg_starts(ctx: _Context) -> list[tuple[datetime, str, int]]:
    """PLEG ContainerStarted lines after the worker had begun terminating, minus a restarted kubelet's
    first relist (which reports every container it finds as started)."""
    starts = process_starts(ctx.facts.processes)
    pids = {e.key: (e.node, e.pid) for e in ctx.facts.worker_events}
    out = []
    for at, key, cycle in ctx.lane.late_starts:
        node, pid = pids.get(key, (None, None))
        began = starts.get((node, pid)) if pid is not None else None
        if began is not None and _ZERO <= at - began <= RELIST_WINDOW:
            continue
        out.append((at, key, cycle))
    return out


def _rejection(snap: PodSnapshot) -> bool:
    if snap.phase != "Failed" or not snap.reason:
        return False
    message = snap.message or ""
    return (
        message.startswith("Pod was rejected")
        or snap.reason in ADMISSION_REASONS
        or snap.reason.startswith("OutOf")
    )


def never_started(ctx: _Context) -> list[Finding]:
    """The pod went straight to termination / cleanup and no container ever ran (admission rejection, ...)."""
    facts = ctx.facts
    ran = any(first_run_start(inc, ("regular", "init", "ephemeral")) for inc in facts.incarnations)
    started_lines = [
        e
        for e in facts.worker_events
        if e.name in (Transition.CONTAINER_STARTED, Transition.STARTUP_OBSERVED)
    ]
    if ran or started_lines:
        return []
    # (priority, at, description, evidence key): the most telling signal names the cause.
    signals: list[tuple[int, datetime, str, str]] = []
    for snap in facts.snapshots:
        if _rejection(snap):
            signals.append(
                (0, snap.at, f"it was rejected at admission ({snap.reason}: {snap.message or ''})", snap.key)
            )
            break
    for m in facts.kubelet_markers:
        if m.reason == "AdmissionRejected":
            why = m.payload.get("detail") or m.message  # "TopologyAffinityError: Pod was rejected: ..."
            signals.append((1, m.at, f"the kubelet rejected it at admission ({why})", m.key))
    for ev in facts.worker_events:
        if ev.name == Transition.CANNOT_START_EVER:
            signals.append((2, ev.at, "the kubelet logged 'Pod cannot start ever'", ev.key))
        if (
            ev.name == Transition.WORKER_DONE
            and "never started" in str(ev.payload.get("message") or "").lower()
        ):
            # 1.23-1.26: the worker stops without having set the pod up.
            signals.append(
                (2, ev.at, "the kubelet logged 'Pod never started and the worker can now stop'", ev.key)
            )
    first_seen = ctx.lane.first_seen_state.get(0)
    if first_seen is not None and first_seen >= TERMINATING:
        state = {TERMINATING: "terminating", CLEANUP: "terminated", DONE: "finished"}[first_seen]
        seen = next((e for e in facts.worker_events if e.name == Transition.FIRST_SEEN), None)
        if seen is not None:
            signals.append((2, seen.at, f"its pod worker was first seen already {state}", seen.key))
    syncs = {"span:syncPod:start", Transition.SYNC_ENTER}
    ended = ctx.worker(WorkerPhase.TERMINATING) + ctx.worker(WorkerPhase.CLEANUP)
    kubelet_side = [iv for iv in ended if iv.source != "inferred"]
    no_sync = bool(kubelet_side) and not any(e.name in syncs for e in facts.worker_events)
    if no_sync and (
        facts.incarnations or kubelet_side[0].attrs.get("cause") == TerminationCause.TERMINAL_PHASE
    ):
        signals.append(
            (3, kubelet_side[0].start, "the pod worker never ran SyncPod", kubelet_side[0].evidence[0])
        )
    finished_at_sight = first_seen is not None and first_seen >= TERMINATING
    if not signals or not (
        ended or finished_at_sight or any(s.terminal or s.deleted for s in facts.snapshots)
    ):
        return []
    cleanup = ctx.worker(WorkerPhase.CLEANUP)
    why = min(signals)[2]
    return [
        Finding(
            kind="never_started",
            severity="warning",
            message=f"Pod {ctx.pod} never started a container: {why}; it went straight to termination and cleanup.",
            start=min(s[1] for s in signals),
            end=cleanup[-1].end if cleanup else None,
            evidence=_evidence((s[3] for s in signals), *(iv.evidence for iv in ended)),
            attrs={"signals": sorted({s[2] for s in signals})},
        )
    ]


def stuck_terminating(ctx: _Context) -> list[Finding]:
    """Terminating longer than the grace period plus ``stuck_terminating_slack`` (measured at ``now`` if open).

    Either side can be stuck: the kubelet's worker (containers that will not stop), or the API object
    that stays Terminating after the kubelet is done — "stuck Terminating" as kubectl shows it, most often
    a finalizer nobody removes. The API side is flagged only when the worker's side is not.
    """
    out = _stuck_worker(ctx)
    if not out:
        out = _stuck_api(ctx)
    return out


def _stuck_api(ctx: _Context) -> list[Finding]:
    """An API object that keeps its deletionTimestamp (kubectl's "Terminating") past grace + slack."""
    out: list[Finding] = []
    for inc in ctx.facts.incarnations:
        asked = [s for s in inc.snapshots if s.deletion_timestamp is not None and not s.deleted]
        if not asked:
            continue
        first = asked[0]
        start = min(first.deletion_requested_at or first.at, first.at)
        grace = timedelta(seconds=max(first.deletion_grace_seconds or 0, 1))
        limit = grace + ctx.thresholds.stuck_terminating_slack
        end = inc.deleted_at
        took = (end if end is not None else ctx.now) - start
        if took <= limit:
            continue
        finalizers = list(asked[-1].finalizers)
        why = f"; finalizers {', '.join(finalizers)} keep the object" if finalizers else ""
        state = "has been" if end is None else "was"
        out.append(
            Finding(
                kind="stuck_terminating",
                severity="critical" if end is None else "warning",
                message=(
                    f"Pod {ctx.pod} {state} Terminating in the API for {human_duration(took)} "
                    f"(since {human_time(start)}), past its {human_duration(grace)} grace period plus "
                    f"{human_duration(ctx.thresholds.stuck_terminating_slack)} slack{why}."
                ),
                start=start,
                end=end,
                evidence=_evidence([first.key, asked[-1].key]),
                attrs={
                    "seconds": took.total_seconds(),
                    "grace_seconds": grace.total_seconds(),
                    "open": end is None,
                    "side": "api",
                    "finalizers": finalizers,
                },
            )
        )
    return out


def _held_by_finalizers(facts: PodFacts, iv: Interval) -> bool:
    """Whether the object was kept, during ``iv``, by finalizers (then waiting is theirs, not cleanup's)."""
    inside = [s for s in facts.snapshots if s.at >= iv.start and (iv.end is None or s.at <= iv.end)]
    return bool(inside) and bool(inside[-1].finalizers)


def _stuck_worker(ctx: _Context) -> list[Finding]:
    out: list[Finding] = []
    for iv in ctx.worker(WorkerPhase.TERMINATING):
        if iv.end is None and iv.attrs.get("end_unknown"):
            continue
        grace = ctx.grace(iv)
        limit = grace + ctx.thresholds.stuck_terminating_slack
        stop = iv.end if iv.end is not None else ctx.now
        took = stop - iv.start
        if took <= limit:
            continue
        if iv.end is None:
            text = f"has been terminating for {human_duration(took)} (since {human_time(iv.start)})"
        else:
            text = f"was terminating for {human_duration(took)} (from {human_time(iv.start)})"
        out.append(
            Finding(
                kind="stuck_terminating",
                severity="critical" if iv.end is None else "warning",
                message=(
                    f"Pod {ctx.pod} {text}, past its {human_duration(grace)} grace period "
                    f"plus {human_duration(ctx.thresholds.stuck_terminating_slack)} slack."
                ),
                start=iv.start,
                end=iv.end,
                evidence=iv.evidence,
                attrs={
                    "seconds": took.total_seconds(),
                    "grace_seconds": grace.total_seconds(),
                    "open": iv.end is None,
                },
            )
        )
    return out


def _grace_signal(reason: str, message: str) -> bool:
    """The kubelet said the runtime did not stop the pod within its grace period: the ExceededGracePeriod
    event, or a line with killPodNow's text (the GraceExceeded marker) (k8s-facts §1.4). Not any timeout:
    the eviction manager's "timed out waiting for pods to be cleaned up" is about the pod's resources
    30 s after its kill returned (docs/kubelet-lines.md), not about its containers' grace."""
    return reason == "ExceededGracePeriod" or "within specified grace period" in message


def grace_exceeded(ctx: _Context) -> list[Finding]:
    """Containers took longer than the grace period to stop, or the kubelet said so (ExceededGracePeriod, kill timeout)."""
    facts = ctx.facts
    signals = [(e.at, e.reason, e.message, e.key) for e in facts.events if _grace_signal(e.reason, e.message)]
    signals += [
        (m.at, m.reason, m.message, m.key)
        for m in facts.kubelet_markers
        if _grace_signal(m.reason, m.message)
    ]
    signals.sort()
    used: set[str] = set()
    out: list[Finding] = []
    for iv in ctx.worker(WorkerPhase.TERMINATING):
        if iv.attrs.get("cause") == TerminationCause.TERMINAL_PHASE:
            continue
        grace = ctx.grace(iv)
        horizon = ctx.next_cycle_start(iv)
        mine = [s for s in signals if s[0] >= iv.start and (horizon is None or s[0] < horizon)]
        stopped_at, keys = _containers_stopped(ctx, iv)
        kills = _kill_deaths(ctx, iv)
        if stopped_at is None and kills and all(k.died is not None for k in kills):
            stopped_at = max(k.died for k in kills if k.died is not None)
            keys = {key for k in kills for key in k.keys}
        if stopped_at is None and iv.end is not None and iv.source == "observed" and iv.end_known:
            stopped_at, keys = iv.end, set(iv.evidence)
        took = stopped_at - iv.start if stopped_at is not None and iv.start_known else None
        late = took is not None and took > grace + ctx.thresholds.grace_exceeded_slack
        slow_kills = [
            k
            for k in kills
            if k.died is not None
            and k.died - k.at > timedelta(seconds=max(k.grace, 1)) + ctx.thresholds.grace_exceeded_slack
        ]
        if not late and not mine and not slow_kills:
            continue
        used.update(s[3] for s in mine)
        parts = []
        if late and took is not None:
            parts.append(
                f"its containers took {human_duration(took)} to stop after termination was requested at "
                f"{human_time(iv.start)}, longer than the {human_duration(grace)} grace period"
            )
        for k in slow_kills[:3]:
            assert k.died is not None
            parts.append(
                f"container {k.container or k.container_id[:12]} was killed at {human_time(k.at)} with a "
                f"{k.grace}s grace period and died {human_duration(k.died - k.at)} later (kubelet lines)"
            )
        if slow_kills:
            keys = set(keys) | {key for k in slow_kills for key in k.keys}
            if stopped_at is None:
                stopped_at = max(k.died for k in slow_kills if k.died is not None)
        if mine:
            parts.append(
                f"the kubelet reported {mine[0][1]} ({mine[0][2]})"
                if mine[0][2]
                else f"the kubelet reported {mine[0][1]}"
            )
        out.append(
            Finding(
                kind="grace_exceeded",
                severity="warning",
                message=f"Pod {ctx.pod}: {' and '.join(parts)}.",
                start=iv.start,
                end=stopped_at if stopped_at is not None else (mine[-1][0] if mine else None),
                evidence=_evidence(iv.evidence, keys, (s[3] for s in mine)),
                attrs={
                    "grace_seconds": grace.total_seconds(),
                    "seconds": took.total_seconds() if took else None,
                    "reports": len(mine),
                },
            )
        )
    rest = [s for s in signals if s[3] not in used]
    if rest:
        out.append(
            Finding(
                kind="grace_exceeded",
                severity="warning",
                message=f"Pod {ctx.pod}: the kubelet reported {rest[0][1]} at {human_time(rest[0][0])}"
                + (f" ({rest[0][2]})." if rest[0][2] else "."),
                start=rest[0][0],
                end=None,
                evidence=_evidence(s[3] for s in rest),
                attrs={"reports": len(rest)},
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class _Kill:
    """A kill line (``Killing container with a grace period``) and when that container died."""

    at: datetime
    container: str | None
    container_id: str
    grace: int
    died: datetime | None
    keys: tuple[str, ...]


def _kill_deaths(ctx: _Context, iv: Interval) -> list[_Kill]:
    """Each kill of the termination ``iv`` with the container's death (PLEG ContainerDied or "Generic
    (PLEG): container finished" naming the same container ID), at any verbosity.

    One kill may show as two lines: "Killing container with a grace period override" (V3: the grace the
    pod's termination asked for) and then "Killing container with a grace period" (V2: the grace
    StopContainer was given, what is left after the preStop hook, at least 2 s; 1.21.4 printed it with
    "override" too). A kill line followed by another of the same container before that container died
    announced the kill the later line carried out: the later one is the kill, with its grace."""
    kills = sorted(
        (
            m
            for m in ctx.facts.kubelet_markers
            if m.reason == "KillingContainer"
            and m.key in iv.evidence
            and isinstance(m.payload.get("grace_period"), int)
            and m.payload.get("container_id")
        ),
        key=lambda m: (m.at, m.key),
    )
    out = []
    for i, m in enumerate(kills):
        cid = bare_container_id(m.payload.get("container_id"))
        deaths = sorted(
            (e.at, e.key)
            for e in ctx.facts.worker_events
            if e.name in (Transition.CONTAINER_DIED, Transition.CONTAINER_FINISHED)
            and bare_container_id(e.payload.get("container_id")) == cid
            and e.at >= m.at
        )
        died = deaths[0] if deaths else None
        if any(
            bare_container_id(later.payload.get("container_id")) == cid
            and (died is None or later.at <= died[0])
            for later in kills[i + 1 :]
        ):
            continue
        out.append(
            _Kill(
                m.at,
                m.payload.get("container") if isinstance(m.payload.get("container"), str) else None,
                cid,
                int(m.payload["grace_period"]),
                died[0] if died else None,
                (m.key, died[1]) if died else (m.key,),
            )
        )
    return out


def _containers_stopped(ctx: _Context, iv: Interval) -> tuple[datetime | None, set[str]]:
    """When the containers that ran at the request stopped, per the API's finish times."""
    inc = ctx.incarnation_at(iv.start)
    if inc is None:
        return None, set()
    finishes: dict[str, datetime] = {}
    keys: set[str] = set()
    running_at_request: set[str] = set()
    for snap in inc.snapshots:
        for c in snap.containers:
            for run in (c.current_run, c.last):
                if run is None or run.started_at is None or run.started_at > iv.start:
                    continue
                if run.finished_at is None:
                    running_at_request.add(c.name)
                elif run.finished_at > iv.start:
                    running_at_request.add(c.name)
                    if c.name not in finishes or run.finished_at > finishes[c.name]:
                        finishes[c.name] = run.finished_at
                    keys.add(snap.key)
    if not running_at_request or set(finishes) != running_at_request:
        return None, keys
    return max(finishes.values()), keys


def slow_cleanup(ctx: _Context) -> list[Finding]:
    """Cleanup (SyncTerminatedPod: volumes, cgroups) longer than ``slow_cleanup``."""
    out: list[Finding] = []
    deleting = any(s.deletion_timestamp is not None or s.deleted for s in ctx.facts.snapshots)
    for iv in ctx.worker(WorkerPhase.CLEANUP):
        if iv.end is None and iv.attrs.get("end_unknown"):
            continue  # its end could not be seen at the log's verbosity: how long it took is unknown
        if iv.source == "inferred" and (not deleting or _held_by_finalizers(ctx.facts, iv)):
            # A finished pod nobody deleted, or one a finalizer holds: the API never tells when the
            # kubelet was done (a finalizer's wait is stuck_terminating's business).
            continue
        stop = iv.end if iv.end is not None else ctx.now
        took = stop - iv.start
        if took <= ctx.thresholds.slow_cleanup:
            continue
        state = "is still cleaning up after" if iv.end is None else "spent"
        out.append(
            Finding(
                kind="slow_cleanup",
                severity="warning",
                message=(
                    f"Pod {ctx.pod} {state} {human_duration(took)} in cleanup (volumes, cgroups) since "
                    f"{human_time(iv.start)}, more than the {human_duration(ctx.thresholds.slow_cleanup)} threshold."
                ),
                start=iv.start,
                end=iv.end,
                evidence=iv.evidence,
                attrs={"seconds": took.total_seconds(), "open": iv.end is None, "source": iv.source},
            )
        )
    return out


def uid_reuse(ctx: _Context) -> list[Finding]:
    """A (static) pod UID reused while the old pod with that UID still terminated."""
    facts = ctx.facts
    signals: list[tuple[datetime, str, str]] = []
    for ev in facts.worker_events:
        if ev.name == Transition.RESTART_REQUESTED:
            signals.append(
                (
                    ev.at,
                    "the kubelet logged 'Pod is terminating but has been requested to restart with same UID'",
                    ev.key,
                )
            )
        elif ev.name == Transition.UID_REUSE_RESTART:
            signals.append((ev.at, "the kubelet logged 'another pod with the same UID was created'", ev.key))
    restarted: set[int] = set()
    for iv in ctx.timeline.lane(WORKER_LANE):
        cycle = iv.attrs.get("cycle", 0)
        if (
            iv.source == "observed"
            and isinstance(cycle, int)
            and cycle > 0
            and cycle not in restarted
            and iv.evidence
        ):
            restarted.add(cycle)
            signals.append(
                (
                    iv.start,
                    f"the pod worker started over for the same UID at {human_time(iv.start)}",
                    iv.evidence[0],
                )
            )
    incs = facts.incarnations
    for prev, inc in zip(incs, incs[1:], strict=False):
        if inc.created is None:
            continue
        began = min(
            (s.deletion_requested_at for s in prev.snapshots if s.deletion_requested_at), default=None
        )
        gone = prev.deleted_at
        worker_busy = any(
            iv.state in (WorkerPhase.TERMINATING, WorkerPhase.CLEANUP)
            and iv.start <= inc.created
            and (iv.end is None or iv.end > inc.created)
            for iv in ctx.timeline.lane(WORKER_LANE)
        )
        if began is not None and inc.created >= began:
            text = f"a new pod object with the same UID was created at {human_time(inc.created)} after deletion of the old one began at {human_time(began)}"
        else:
            text = f"a new pod object with the same UID was created at {human_time(inc.created)}"
        if worker_busy:
            text += ", while the kubelet was still tearing the old one down"
        elif gone is None or gone > inc.created:
            text += ", while the old one still existed"
        signals.append((inc.created, text, inc.snapshots[0].key))
    if not signals:
        return []
    signals.sort()
    kind = "Static pod" if ctx.timeline.static else "Pod"
    return [
        Finding(
            kind="uid_reuse",
            severity="warning",
            message=f"{kind} {ctx.pod} reused UID {facts.uid}: {signals[0][1]}.",
            start=signals[0][0],
            end=None,
            evidence=_evidence(s[2] for s in signals),
            attrs={"signals": len(signals), "incarnations": len(incs), "static": ctx.timeline.static},
        )
    ]


def _status_signature(snap: PodSnapshot) -> tuple[Any, ...]:
    containers = tuple(
        sorted(
            (c.name, c.state, c.reason, c.exit_code, c.started_at, c.finished_at, c.restart_count)
            for c in snap.containers
        )
    )
    return (snap.phase, containers)


def _describe_change(before: PodSnapshot, after: PodSnapshot) -> str:
    if before.phase != after.phase:
        return f"phase {before.phase} → {after.phase}"
    old = {c.name: c for c in before.containers}
    for c in sorted(after.containers, key=lambda c: c.name):
        o = old.get(c.name)
        if o is None:
            return f"container {c.name} appeared ({c.state})"
        if (o.state, o.reason, o.exit_code) != (c.state, c.reason, c.exit_code):
            return f"container {c.name} {o.state}{f'({o.reason})' if o.reason else ''} → {c.state}{f'({c.reason})' if c.reason else ''}"
        if (o.started_at, o.finished_at, o.restart_count) != (c.started_at, c.finished_at, c.restart_count):
            return f"container {c.name} times / restart count changed"
    return "container statuses changed"


def status_after_terminal(ctx: _Context) -> list[Finding]:
    """Phase or container state changed after a terminal phase (Succeeded / Failed) was observed."""
    out: list[Finding] = []
    for inc in ctx.facts.incarnations:
        terminal = next((s for s in inc.snapshots if s.terminal), None)
        if terminal is None:
            continue
        base = _status_signature(terminal)
        for snap in inc.snapshots:
            if snap.at < terminal.at or snap is terminal:
                continue
            if snap.deleted and not snap.containers and snap.phase in (None, terminal.phase):
                continue
            if _status_signature(snap) == base:
                continue
            change = _describe_change(terminal, snap)
            out.append(
                Finding(
                    kind="status_after_terminal",
                    severity="warning",
                    message=(
                        f"Pod {ctx.pod} changed status at {human_time(snap.at)} after reaching phase "
                        f"{terminal.phase} at {human_time(terminal.at)}: {change}."
                    ),
                    start=snap.at,
                    end=None,
                    evidence=(terminal.key, snap.key),
                    attrs={"terminal_phase": terminal.phase, "change": change},
                )
            )
            break
    return out


def _max_rise_within(
    counts: list[tuple[datetime, int, str]], window: timedelta
) -> tuple[int, tuple[datetime, datetime] | None]:
    """The largest restart-count rise between two points at most ``window`` apart (sliding minimum)."""
    best: tuple[int, tuple[datetime, datetime] | None] = (0, None)
    lows: deque[tuple[datetime, int]] = deque()  # increasing restart counts within the window
    for at_j, rc_j, _ in counts:
        while lows and at_j - lows[0][0] > window:
            lows.popleft()
        if lows and rc_j - lows[0][1] > best[0]:
            best = (rc_j - lows[0][1], (lows[0][0], at_j))
        while lows and lows[-1][1] >= rc_j:
            lows.pop()
        lows.append((at_j, rc_j))
    return best


def crash_loop(ctx: _Context) -> list[Finding]:
    """A container in CrashLoopBackOff, or restarted ``crash_loop_restarts`` times within ``crash_loop_window``."""
    th = ctx.thresholds
    out: list[Finding] = []
    names = sorted({c.name for s in ctx.facts.snapshots for c in s.containers})
    for name in names:
        counts: list[tuple[datetime, int, str]] = []
        backoffs: list[tuple[datetime, str]] = []
        last_waiting_backoff = False
        for inc in ctx.facts.incarnations:
            base = next((s.start_time for s in inc.snapshots if s.start_time is not None), None)
            if base is not None:
                counts.append((base, 0, ""))
            for snap in inc.snapshots:
                for c in snap.containers:
                    if c.name != name:
                        continue
                    counts.append((snap.at, c.restart_count, snap.key))
                    backoff = c.state == "waiting" and c.reason == "CrashLoopBackOff"
                    if backoff:
                        backoffs.append((snap.at, snap.key))
                    last_waiting_backoff = backoff
        counts.sort()
        best, best_span = _max_rise_within(counts, th.crash_loop_window)
        runs = [
            iv.start
            for iv in ctx.timeline.lane(CONTAINER_LANE_PREFIX + name)
            if iv.state == ContainerState.RUNNING
        ]
        i = 0
        for j in range(len(runs)):
            while runs[j] - runs[i] > th.crash_loop_window:
                i += 1
            if j - i > best:
                best, best_span = j - i, (runs[i], runs[j])
        if not backoffs and best < th.crash_loop_restarts:
            continue
        max_rc = max((c[1] for c in counts), default=0)
        # The loop began with the first restart (or back-off) seen.
        firsts = [b[0] for b in backoffs[:1]] + [c[0] for c in counts if c[1] > 0][:1] + runs[1:2]
        start = min(firsts) if firsts else counts[0][0]
        parts = []
        if best >= th.crash_loop_restarts:
            parts.append(f"restarted {best} times within {human_duration(th.crash_loop_window)}")
        if backoffs:
            parts.append(f"waiting in CrashLoopBackOff (seen {len(backoffs)} times)")
        out.append(
            Finding(
                kind="crash_loop",
                severity="warning",
                message=f"Container {name} of pod {ctx.pod} is crash looping: {' and '.join(parts)}; restartCount reached {max_rc}.",
                start=start,
                end=None
                if last_waiting_backoff
                else (backoffs[-1][0] if backoffs else (best_span[1] if best_span else None)),
                evidence=_evidence((b[1] for b in backoffs), (c[2] for c in counts if c[2] and c[1] > 0)),
                attrs={
                    "container": name,
                    "restarts_in_window": best,
                    "restart_count": max_rc,
                    "backoffs": len(backoffs),
                },
            )
        )
    return out


def _shutdown_signal(snap: PodSnapshot) -> str | None:
    message = snap.message or ""
    if "imminent node shutdown" in message or (snap.reason == "Shutdown" and "shutting" in message):
        return f"status reason {snap.reason}: {message}"
    target = snap.condition("DisruptionTarget")
    if target is not None and target.status == "True" and "imminent node shutdown" in (target.message or ""):
        return f"DisruptionTarget {target.reason}: {target.message}"
    if snap.reason == "NodeShutdown":
        return f"rejected at admission ({snap.reason}: {message})"
    return None


def _kubelet_phase(facts: PodFacts, lo: datetime | None, hi: datetime | None) -> str | None:
    """The last phase the kubelet's status manager wrote ("Status for pod updated successfully", V3)."""
    phase = None
    for ev in facts.worker_events:
        if (
            ev.name != Transition.STATUS_UPDATED
            or (lo is not None and ev.at < lo)
            or (hi is not None and ev.at >= hi)
        ):
            continue
        value = ev.payload.get("phase")
        if isinstance(value, str) and value:
            phase = value
    for ev in facts.worker_events:
        if ev.name == Transition.MARKED_FAILED and (lo is None or ev.at >= lo) and (hi is None or ev.at < hi):
            phase = "Failed"
    return phase


def node_shutdown(ctx: _Context) -> list[Finding]:
    """Terminated by graceful node shutdown; says whether the phase became Failed (1.22 left it not Failed)."""
    facts = ctx.facts
    out: list[Finding] = []
    marker_hits = [
        (m.at, m.key)
        for m in facts.kubelet_markers
        if m.reason in ("ShutdownKill", "NodeShutdown") or m.message.startswith("Shutdown manager")
    ]
    event_hits = [
        (e.at, e.key)
        for e in facts.events
        if e.reason == "NodeShutdown" or "imminent node shutdown" in e.message
    ]
    incs: list[Incarnation | None] = list(facts.incarnations) or [None]
    for i, inc in enumerate(incs):
        snaps = inc.snapshots if inc is not None else ()
        hits = [(s.at, s.key, sig) for s in snaps if (sig := _shutdown_signal(s)) is not None]
        lo = (inc.created or inc.first_at) if inc is not None and i > 0 else None
        nxt = incs[i + 1] if i + 1 < len(incs) else None
        hi = (nxt.created or nxt.first_at) if nxt is not None else None
        extra = [
            (at, key)
            for at, key in marker_hits + event_hits
            if (lo is None or at >= lo) and (hi is None or at < hi)
        ]
        if not hits and not extra:
            continue
        final = next((s for s in reversed(snaps) if s.phase), None)
        phase = final.phase if final is not None else None
        if phase is None:
            # No API object: the kubelet's own status writes say what phase it gave the pod (V3).
            phase = _kubelet_phase(facts, lo, hi)
        rejected = any(s.reason == "NodeShutdown" for s in snaps)
        node = ctx.timeline.node or "its node"
        times = [h[0] for h in hits] + [e[0] for e in extra]
        start = min(times)
        if rejected:
            what = f"Pod {ctx.pod} was rejected at admission because {node} was shutting down"
        else:
            what = f"Pod {ctx.pod} was terminated by the graceful shutdown of {node} at {human_time(start)}"
        if phase is None:
            tail = "the API's view of its phase is unknown"
            severity: Severity = "warning"
        elif phase == "Failed":
            tail = "its phase became Failed"
            severity = "info"
        elif phase == "Succeeded":
            tail = "its phase is Succeeded (its containers had completed), not Failed"
            severity = "info"
        else:
            tail = (
                f"its phase stayed {phase}, not Failed (the Kubernetes 1.22 regression), "
                "so its controller may not replace it"
            )
            severity = "warning"
        out.append(
            Finding(
                kind="node_shutdown",
                severity=severity,
                message=f"{what}; {tail}.",
                start=start,
                end=None,
                evidence=_evidence((h[1] for h in hits), (e[1] for e in extra)),
                attrs={
                    "phase_failed": None if phase is None else phase == "Failed",
                    "final_phase": phase,
                    "rejected": rejected,
                    "signal": hits[0][2] if hits else None,
                },
            )
        )
    return out


EVICTION_MESSAGE = re.compile(
    r"The node (?:was low on resource: (?P<resource>[^.\s]+)|had condition: (?P<condition>[^.]+))\.\s*"
    r"(?:Threshold quantity: (?P<threshold>[^,]+), available: (?P<available>[^.\s]+(?:\.\d+\S*)?)\.)?"
)


def _eviction_detail(text: str) -> dict[str, str | None]:
    m = EVICTION_MESSAGE.search(text or "")
    if m is None:
        return {}
    return {k: (v.strip() if isinstance(v, str) else None) for k, v in m.groupdict().items()}


def evicted(ctx: _Context) -> list[Finding]:
    """Evicted by the kubelet's eviction manager (node pressure): which signal, at what threshold, and
    where the pod ranked, from kubelet lines at any verbosity, the pod's status or the Evicted event."""
    facts = ctx.facts
    kills = [m for m in facts.kubelet_markers if m.reason in ("Evicting", "Evicted", "EvictionFailed")]
    ranks = [m for m in facts.kubelet_markers if m.reason == "EvictionRanked"]
    snaps = [s for s in facts.snapshots if s.reason == "Evicted"]
    events = [e for e in facts.events if e.reason == "Evicted"]
    if not (kills or snaps or events):
        return []
    times = [m.at for m in kills] + [s.at for s in snaps] + [e.at for e in events]
    # The worker's own record of it (its terminating phase, begun by the eviction) dates it best.
    begun = [
        iv.start
        for iv in ctx.worker(WorkerPhase.TERMINATING)
        if iv.attrs.get("cause") == TerminationCause.EVICTED and iv.start_known
    ]
    start = min(begun) if begun else min(times)
    texts = [str(m.payload.get("detail") or "") for m in kills] + [s.message or "" for s in snaps]
    texts += [e.message for e in events]
    detail: dict[str, str | None] = {}
    for text in texts:
        detail = _eviction_detail(text)
        if detail:
            break
    # The reclaim that led to it: the eviction manager's last "attempting to reclaim" before the kill.
    reclaim = [m for m in facts.node_markers if m.reason == "EvictionReclaim" and m.at <= start + _ONE_SECOND]
    resource = detail.get("resource") or (
        str(reclaim[-1].payload.get("resource")) if reclaim and reclaim[-1].payload.get("resource") else None
    )
    rank_of = None
    for m in ranks:
        if m.at <= start + _ONE_SECOND:
            rank_of = m
    parts = []
    if resource:
        parts.append(f"the node was low on {resource}")
    elif detail.get("condition"):
        parts.append(f"the node had condition {detail['condition']}")
    if detail.get("threshold"):
        parts.append(f"threshold {detail['threshold']}, available {detail.get('available')}")
    rank = total = None
    if rank_of is not None:
        rank = rank_of.payload.get("rank")
        total = rank_of.payload.get("ranked")
        if isinstance(rank, int) and isinstance(total, int):
            parts.append(f"it ranked {rank + 1} of {total} pods for eviction")
    failed = any(m.reason == "EvictionFailed" for m in kills)
    node = ctx.timeline.node or "its node"
    why = f": {'; '.join(parts)}" if parts else ""
    tail = "; the kill did not finish in time (Eviction manager: pod failed to evict)" if failed else ""
    return [
        Finding(
            kind="evicted",
            severity="warning",
            message=f"Pod {ctx.pod} was evicted by the kubelet of {node} at {human_time(start)}{why}{tail}.",
            start=start,
            end=None,
            evidence=_evidence(
                (m.key for m in kills),
                (s.key for s in snaps[:1]),
                (e.key for e in events),
                (m.key for m in reclaim[-1:]),
                ([rank_of.key] if rank_of is not None else []),
            ),
            attrs={
                "resource": resource,
                "condition": detail.get("condition"),
                "threshold": detail.get("threshold"),
                "available": detail.get("available"),
                "rank": rank,
                "ranked": total,
                "failed": failed,
            },
        )
    ]


RULES = (
    killed_during_setup,
    started_after_termination_requested,
    never_started,
    stuck_terminating,
    grace_exceeded,
    slow_cleanup,
    uid_reuse,
    status_after_terminal,
    crash_loop,
    node_shutdown,
    evicted,
)
