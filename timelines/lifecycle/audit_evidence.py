"""Audit evidence on timelines: who asked for what, and what the API server answered (pure).

An ``audit`` observation (docs/audit.md) carries no pod UID: Metadata-level events, evictions included,
never tell it. It is joined to a pod here, by the UID when the event names one, else by namespace, name and
time: a request belongs to the incarnation of that name that existed when it completed. What the timelines
take from it:

* ``who`` (``who_of``): the user, its impersonator and the client tool, e.g. ``system:admin via kubectl``
  or ``system:serviceaccount:kube-system:generic-garbage-collector``;
* markers (kind ``audit``) for deletes, creates and every eviction attempt: granted, refused by a
  PodDisruptionBudget (429), or failed;
* the request that began a pod's termination (``termination_request``), named on its terminating
  intervals with the evictions refused before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from timelines.lifecycle.observation import Kind, Observation

# Kubernetes' own components name themselves in the user agent; "via" is said only for client tools.
COMPONENT_AGENTS = frozenset({"kube-controller-manager", "kubelet", "kube-scheduler", "kube-apiserver"})
# A request completes a little after the object time it caused (deletionTimestamp - grace is the request's
# own time on the server): how far after an interval's start a request may still have caused it.
CAUSE_SLACK = timedelta(seconds=5)
# A request about a name before the incarnation's creation time belongs to an earlier one, unless this close.
CREATE_SLACK = timedelta(seconds=2)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One ``audit`` observation about a pod, read."""

    key: str
    at: datetime
    verb: str
    subresource: str | None
    uid: str | None
    namespace: str | None
    name: str | None
    who: str
    actor_kind: str | None
    user_agent: str | None
    code: int | None
    succeeded: bool | None
    dry_run: bool
    payload: Mapping[str, Any]

    @property
    def eviction(self) -> Mapping[str, Any]:
        value = self.payload.get("eviction")
        return value if isinstance(value, Mapping) else {}

    @property
    def delete(self) -> Mapping[str, Any]:
        value = self.payload.get("delete")
        return value if isinstance(value, Mapping) else {}

    @property
    def is_delete(self) -> bool:
        """A DELETE of the pod that went through (not a dry run)."""
        return (
            self.verb in ("delete", "deletecollection")
            and self.subresource is None
            and self.succeeded is True
            and not self.dry_run
        )

    @property
    def eviction_outcome(self) -> str | None:
        """``granted`` / ``refused`` / ``forbidden`` / ``failed`` / ``unknown`` for an eviction, else None."""
        if self.subresource != "eviction" or self.dry_run:
            return None
        outcome = self.eviction.get("outcome")
        return outcome if isinstance(outcome, str) else "unknown"


def _name(user: object) -> str | None:
    if isinstance(user, Mapping):
        name = user.get("username")
        return name if isinstance(name, str) and name else None
    return None


def agent_product(user_agent: str | None) -> str | None:
    """The client's product name from a user agent (``kubectl/v1.30.2 (linux/amd64) …`` → ``kubectl``)."""
    if not user_agent:
        return None
    product = user_agent.split("/", 1)[0].split(" ", 1)[0].strip()
    return product or None


def who_of(payload: Mapping[str, Any]) -> str:
    """Who made an audited request, as a person reads it: the username (``alice (impersonated by
    kubernetes-admin)`` when impersonated), then ``via <tool>`` when the user agent names a client tool
    rather than a Kubernetes component. ``unknown`` when the event names nobody."""
    user, imp = _name(payload.get("user")), _name(payload.get("impersonated_user"))
    who = f"{imp} (impersonated by {user})" if imp and user else (imp or user or "unknown")
    agent = payload.get("user_agent")
    product = agent_product(agent if isinstance(agent, str) else None)
    if product and product not in COMPONENT_AGENTS and product.lower() not in who.lower():
        who = f"{who} via {product}"
    return who


def read_audit(obs: Observation) -> AuditRecord | None:
    """The record of a pod-level ``audit`` observation (resource ``pods``), else None."""
    p = obs.payload
    if obs.kind != Kind.AUDIT or p.get("resource") != "pods":
        return None
    actor = p.get("actor")
    code = p.get("code")
    succeeded = p.get("succeeded")
    sub = p.get("subresource")
    agent = p.get("user_agent")
    uid = p.get("uid")
    return AuditRecord(
        key=obs.dedupe_key,
        at=obs.observed_at,
        verb=str(p.get("verb") or ""),
        subresource=sub if isinstance(sub, str) and sub else None,
        uid=uid if isinstance(uid, str) and uid else None,
        namespace=obs.namespace,
        name=obs.name,
        who=who_of(p),
        actor_kind=str(actor.get("kind")) if isinstance(actor, Mapping) and actor.get("kind") else None,
        user_agent=agent if isinstance(agent, str) else None,
        code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        succeeded=succeeded if isinstance(succeeded, bool) else None,
        dry_run=p.get("dry_run") is True,
        payload=p,
    )


@dataclass(frozen=True, slots=True)
class Life:
    """One incarnation's identity and span, to join UID-less requests to it."""

    uid: str
    namespace: str | None
    name: str | None
    created: datetime | None
    ended: datetime | None  # when the object was seen gone, None while it exists


def belongs(record: AuditRecord, life: Life, slack: timedelta = CAUSE_SLACK) -> bool:
    """Whether a request concerns this incarnation: the UID decides when the event names one; else the
    same namespace and name, completed between the creation (``CREATE_SLACK`` before it: the create's own
    completion) and the object's end (``slack`` after: the kubelet's final delete completes after the
    watch may show the object gone)."""
    if record.uid is not None:
        return record.uid == life.uid
    if record.namespace != life.namespace or record.name != life.name or not life.name:
        return False
    if life.created is not None and record.at < life.created - CREATE_SLACK:
        return False
    return life.ended is None or record.at <= life.ended + slack


def records_for(observations: Iterable[Observation], lives: Sequence[Life]) -> tuple[AuditRecord, ...]:
    """The pod-level audit records of ``observations`` that belong to one of ``lives``, ordered."""
    out = []
    for obs in observations:
        record = read_audit(obs)
        if record is not None and any(belongs(record, life) for life in lives):
            out.append(record)
    return tuple(sorted(out, key=lambda r: (r.at, r.key)))


def refused_evictions(records: Iterable[AuditRecord]) -> list[AuditRecord]:
    """The eviction attempts a PodDisruptionBudget refused (429 with a disruption-budget cause)."""
    return [r for r in records if r.eviction_outcome == "refused"]


def termination_request(
    records: Sequence[AuditRecord], start: datetime, since: datetime | None
) -> AuditRecord | None:
    """The request that began a termination at ``start``: the first successful DELETE or granted eviction
    of the incarnation (from ``since``) completed no later than ``CAUSE_SLACK`` after ``start``. A later
    DELETE (a shorter grace, the kubelet's final one) does not begin anything."""
    for r in records:
        if since is not None and r.at < since - CREATE_SLACK:
            continue
        if r.at > start + CAUSE_SLACK:
            return None
        if r.is_delete or r.eviction_outcome == "granted":
            return r
    return None


def termination_attrs(records: Sequence[AuditRecord], cause: AuditRecord) -> dict[str, Any]:
    """What a terminating interval says about the request that began it."""
    attrs: dict[str, Any] = {"who": cause.who, "requested_by": _name(cause.payload.get("user"))}
    if cause.eviction_outcome == "granted":
        refused = [r for r in refused_evictions(records) if r.at <= cause.at]
        attrs["request"] = "eviction"
        attrs["refused_evictions"] = len(refused)
        pdbs = sorted({str(r.eviction.get("pdb")) for r in refused if r.eviction.get("pdb")})
        if pdbs:
            attrs["refused_by"] = pdbs
    else:
        attrs["request"] = "delete"
        grace = cause.delete.get("grace_period_seconds")
        if isinstance(grace, int):
            attrs["grace_period_seconds"] = grace
    return attrs


def marker_of(record: AuditRecord, records: Sequence[AuditRecord]) -> tuple[str, str, dict[str, Any]] | None:
    """(reason, message, attrs) of the marker a request makes on its pod's timeline, or None for requests
    that are not worth a point (status writes, bindings: the lanes show those)."""
    attrs: dict[str, Any] = {
        "who": record.who,
        "actor": record.actor_kind,
        "code": record.code,
        "user_agent": record.user_agent,
        "audit_id": record.payload.get("audit_id"),
    }
    outcome = record.eviction_outcome
    if outcome is not None:
        ev = record.eviction
        pdb = ev.get("pdb")
        attrs.update(pdb=pdb, outcome=outcome)
        if outcome == "refused":
            budget = f"PodDisruptionBudget {pdb}" if pdb else "a PodDisruptionBudget"
            numbers = ""
            if isinstance(ev.get("desired_healthy"), int) and isinstance(ev.get("current_healthy"), int):
                numbers = f" needs {ev['desired_healthy']} healthy pods and has {ev['current_healthy']}"
            return (
                "EvictionRefused",
                f"eviction by {record.who} refused ({record.code}): {budget}{numbers}",
                attrs,
            )
        if outcome == "granted":
            before = sum(1 for r in refused_evictions(records) if r.at <= record.at)
            attrs["refused_before"] = before
            after = f" after {before} refused attempt{'s' if before != 1 else ''}" if before else ""
            return "Evicted", f"evicted by {record.who}{after}", attrs
        detail = record.payload.get("message") or outcome
        return "EvictionFailed", f"eviction by {record.who} failed ({record.code}): {detail}", attrs
    if record.dry_run:
        return None
    if record.verb in ("delete", "deletecollection") and record.subresource is None:
        grace = record.delete.get("grace_period_seconds")
        attrs["grace_period_seconds"] = grace
        if record.succeeded:
            note = f" (grace {grace}s)" if isinstance(grace, int) else ""
            return "Deleted", f"deleted by {record.who}{note}", attrs
        if record.code == 404:
            return None  # already gone: a garbage collector's late delete changes nothing
        return "DeleteFailed", f"delete by {record.who} failed ({record.code})", attrs
    if record.verb == "create" and record.subresource is None and record.succeeded:
        return "Created", f"created by {record.who}", attrs
    return None
