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

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from timelines.lifecycle.observation import Kind, Observation, Source, name_problem
from timelines.lifecycle.record import record
from timelines.lifecycle.timeline import format_time

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
    node: str | None = None  # the kubelet's node for a ``system:node:NAME`` writer

    @property
    def is_create(self) -> bool:
        """A CREATE of the pod that went through (not a dry run): a new incarnation of the name."""
        return (
            self.verb == "create" and self.subresource is None and self.succeeded is True and not self.dry_run
        )

    @property
    def shows_pod_existed(self) -> bool:
        """Whether the answer shows the pod existed then: the request went through (a CREATE made it; a
        dry-run CREATE made nothing), a 409 (AlreadyExists, Conflict) named the stored object, or a
        budget refused its eviction (the eviction API answers 404 for a pod that is not there). A refused
        CREATE (admission, validation), a 404, a throttled request (a 429 that is no budget's) and a
        request with no answer yet (RequestReceived) show nothing about it."""
        if self.succeeded is True:
            return not (self.dry_run and self.verb == "create" and self.subresource is None)
        return self.code == 409 or self.eviction_outcome == "refused"

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
    def received_at(self) -> datetime:
        """When the API server received the request (``requestReceivedTimestamp``, microseconds kept), else
        the time of its stage."""
        text = self.payload.get("requested_at")
        if isinstance(text, str):
            try:
                at = datetime.fromisoformat(text)
            except ValueError:
                return self.at
            if at.tzinfo is not None:
                return at
        return self.at

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
    """Who made an audited request, as a person reads it: the username (``alice, as kubernetes-admin``
    when ``kubernetes-admin`` impersonated ``alice``: the request acted as ``alice``, sent with
    ``kubernetes-admin``'s credentials), then ``via <tool>`` when the user agent names a client tool
    rather than a Kubernetes component. ``unknown`` when the event names nobody."""
    user, imp = _name(payload.get("user")), _name(payload.get("impersonated_user"))
    who = f"{imp}, as {user}" if imp and user else (imp or user or "unknown")
    agent = payload.get("user_agent")
    product = agent_product(agent if isinstance(agent, str) else None)
    if product and product not in COMPONENT_AGENTS and product.lower() not in who.lower():
        who = f"{who}, via {product}" if imp and user else f"{who} via {product}"
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
        # A row stored before the audit parser refused a UID that is not one names no incarnation.
        uid=uid if isinstance(uid, str) and name_problem("pod_uid", uid) is None else None,
        namespace=obs.namespace,
        name=obs.name,
        who=who_of(p),
        actor_kind=str(actor.get("kind")) if isinstance(actor, Mapping) and actor.get("kind") else None,
        user_agent=agent if isinstance(agent, str) else None,
        code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        succeeded=succeeded if isinstance(succeeded, bool) else None,
        dry_run=p.get("dry_run") is True,
        payload=p,
        node=obs.node,
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
    """The pod-level audit records of ``observations`` that belong to one of ``lives``, ordered. An
    ``audit`` observation that carries a pod UID was already joined to its incarnation (``audit_lives``:
    a stored one never carries one) and belongs as it is."""
    records: list[AuditRecord] = []
    joined: set[str] = set()
    for obs in observations:
        record = read_audit(obs)
        if record is not None:
            records.append(record)
            if obs.pod_uid is not None:
                joined.add(record.key)
    records.sort(key=lambda r: (r.at, r.key))
    taken = joined | {r.key for life in lives for r in taken_by(records, life)}
    return tuple(r for r in records if r.key in taken)


def taken_by(records: Sequence[AuditRecord], life: Life) -> list[AuditRecord]:
    """The records (ordered by time) that belong to ``life`` (``belongs``). A creationTimestamp has whole
    seconds, so the requests of the name just before the incarnation's own CREATE (the previous one's
    DELETE, a quarter second earlier) fall within its span: the first CREATE it takes bounds them, and a
    UID-less request before it is an earlier incarnation's."""
    mine = [r for r in records if belongs(r, life)]
    # Its own CREATE completes about its creation; one after its end (the name made again right after
    # this incarnation was deleted) is the next incarnation's and bounds nothing here.
    first_create = next(
        (r.at for r in mine if r.is_create and r.uid is None and (life.ended is None or r.at <= life.ended)),
        None,
    )
    if first_create is None:
        return mine
    return [r for r in mine if r.uid is not None or r.at >= first_create]


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


def deletion_request(
    records: Sequence[AuditRecord], requested: datetime, grace: int | None, since: datetime | None
) -> AuditRecord | None:
    """The audited request that set a pod's ``deletionTimestamp``, when that timestamp is whole-second.

    The API server sets ``deletionTimestamp = now + grace`` while it handles a DELETE (an eviction deletes
    with the pod's grace), and the object keeps it in RFC 3339 with whole seconds: ``requested``
    (``deletionTimestamp - deletionGracePeriodSeconds``) is that ``now`` truncated, up to a second before
    the request. A successful DELETE or granted eviction of the incarnation (from ``since``) set it when
    its handling (received at ``received_at``, completed at ``at``) overlaps ``[requested, requested +
    1 s)`` and, when both are known, it asked for the same grace. The first such request, or None (also
    for a ``requested`` that has a fraction: a source that kept the microsecond needs no audit)."""
    if requested.microsecond:
        return None
    for r in records:
        if not (r.is_delete or r.eviction_outcome == "granted"):
            continue
        if since is not None and r.at < since - CREATE_SLACK:
            continue
        asked = r.delete.get("grace_period_seconds")
        if isinstance(asked, int) and grace is not None and asked != grace:
            continue
        if r.received_at < requested + _ONE_SECOND and r.at >= requested:
            return r
    return None


_ONE_SECOND = timedelta(seconds=1)


def termination_attrs(records: Sequence[AuditRecord], cause: AuditRecord) -> dict[str, Any]:
    """What a terminating interval says about the request that began it."""
    attrs: dict[str, Any] = {"who": cause.who, "requested_by": _name(cause.payload.get("user"))}
    if cause.eviction_outcome == "granted":
        # Said without the word "refused": this interval stands at the granted request's time, and the
        # refusals are shown at their own (their markers); a reader must not take this one for a refusal.
        refused = [r for r in refused_evictions(records) if r.at <= cause.at]
        attrs["request"] = "eviction"
        attrs["attempts_before"] = len(refused)
        pdbs = sorted({str(r.eviction.get("pdb")) for r in refused if r.eviction.get("pdb")})
        if pdbs:
            attrs["blocked_by"] = pdbs
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
            attrs["attempts_before"] = before
            after = f" after {before} earlier attempt{'s' if before != 1 else ''}" if before else ""
            return "Evicted", f"eviction by {record.who} granted ({record.code}){after}", attrs
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
    if record.subresource == "resize" and record.verb in ("patch", "update"):
        # An in-place resize request (1.33+: only through the ``resize`` subresource): where the
        # resize lane's span was asked for; a refused one (422 invalid, 403) changed nothing.
        if record.succeeded:
            return "ResizeRequested", f"resize requested by {record.who}", attrs
        return "ResizeRefused", f"resize by {record.who} refused ({record.code})", attrs
    return None


# -- incarnations known only from their audited requests ------------------------------------------------
# A Metadata-level log (the level most clusters run) never tells a pod's UID, and a Request-level one tells
# it only in the kubelet's status patches. The requests about one NAMESPACE/NAME that no pod known from
# its own observations explains are split here into incarnations: every successful CREATE of the name
# begins one (names are unique among live objects, so the one before was gone by then). An incarnation
# takes the UID its requests name; one whose requests name none gets a synthetic identity,
# ``audit-`` and 32 hex digits of the name and its first request's dedupe key (its CREATE when the log
# has it): the same requests give the same identity in any order, and a real UID that arrives later (a
# watch snapshot, a RequestResponse body) takes the requests over (docs/audit.md "Audit alone").
# Kubelet lines naming a pod only as NAMESPACE/NAME that no incarnation takes get the same kind of
# identity, ``kubelet-`` and the digest (``resolve.nameless_lives``, docs/kubelet-lines.md).
SYNTHETIC_UID_PREFIX: Final = "audit-"
KUBELET_SYNTHETIC_PREFIX: Final = "kubelet-"


def synthetic_uid(namespace: str, name: str, anchor_key: str, prefix: str = SYNTHETIC_UID_PREFIX) -> str:
    """The identity of an incarnation known only from UID-less requests or kubelet lines (see above)."""
    digest = hashlib.sha256(f"{namespace}/{name}\n{anchor_key}".encode()).hexdigest()[:32]
    return prefix + digest


def is_synthetic_uid(uid: str) -> bool:
    """Whether ``uid`` is ``synthetic_uid``'s (no Kubernetes UID starts with ``audit-`` or ``kubelet-``)."""
    return uid.startswith((SYNTHETIC_UID_PREFIX, KUBELET_SYNTHETIC_PREFIX))


@record(frozen=True)
class AuditLife:
    """One incarnation of a name known only from audited requests."""

    uid: str  # the UID its requests name, else ``synthetic_uid``
    namespace: str
    name: str
    observations: tuple[Observation, ...]  # its ``audit`` observations, each with ``pod_uid`` = uid
    gone_by: AuditRecord | None  # the next CREATE of the name: this incarnation was gone by then


def audit_lives(
    namespace: str, name: str, observations: Iterable[Observation], known: Sequence[Life]
) -> tuple[AuditLife, ...]:
    """The incarnations of ``namespace/name`` that only its ``audit`` observations show: the requests
    no ``known`` incarnation (one with observations of its own) takes (``belongs``), split at each
    successful CREATE; within a split, a request naming another UID than the first one named makes an
    incarnation of that UID. An incarnation whose UID is a known one is left to it, and one none of whose
    requests shows the pod existed (``AuditRecord.shows_pod_existed``: a refused CREATE alone) is none. Order-free: the
    same observations in any order give equal lives."""
    chosen: dict[str, tuple[AuditRecord, Observation]] = {}
    for obs in observations:
        rec = read_audit(obs)
        if rec is not None and rec.namespace == namespace and rec.name == name:
            have = chosen.get(rec.key)
            if have is None or obs.sort_key < have[1].sort_key:
                chosen[rec.key] = (rec, obs)
    pairs = sorted(chosen.values(), key=lambda p: (p[0].at, p[0].key))
    ordered = [r for r, _ in pairs]
    taken = {r.key for life in known for r in taken_by(ordered, life)}
    free = [p for p in pairs if p[0].key not in taken]
    segments: list[list[tuple[AuditRecord, Observation]]] = []
    for pair in free:
        if not segments or pair[0].is_create:
            segments.append([])
        segments[-1].append(pair)
    known_uids = {life.uid for life in known}
    lives: list[AuditLife] = []
    for i, segment in enumerate(segments):
        following = segments[i + 1][0][0] if i + 1 < len(segments) else None  # a CREATE, by construction
        primary = next((r.uid for r, _ in segment if r.uid), None)
        groups: dict[str | None, list[tuple[AuditRecord, Observation]]] = {}
        for rec, obs in segment:
            groups.setdefault(rec.uid or primary, []).append((rec, obs))
        for uid, members in groups.items():
            if uid is not None and uid in known_uids:
                continue
            if not any(rec.shows_pod_existed for rec, _ in members):
                continue  # requests about a name that none shows existed (a refused CREATE): no pod
            life_uid = uid or synthetic_uid(namespace, name, members[0][0].key)
            lives.append(
                AuditLife(
                    uid=life_uid,
                    namespace=namespace,
                    name=name,
                    observations=tuple(replace(o, pod_uid=life_uid) for _, o in members),
                    gone_by=following if uid == primary else None,
                )
            )
    return tuple(sorted(lives, key=lambda life: (life.observations[0].observed_at, life.uid)))


# What the server stored, read back from the requests: the suffixes of the pod snapshots made from them.
SNAPSHOT_SUFFIX: Final = "#audit-pod"
GONE_SUFFIX: Final = "#audit-gone"
_PHASES: Final = {"Running": "running", "Succeeded": "succeeded", "Failed": "failed"}


def source_key(key: str) -> str:
    """The dedupe key of the ``audit`` observation an ``audit_snapshots`` snapshot was made from."""
    for suffix in (SNAPSHOT_SUFFIX, GONE_SUFFIX):
        if key.endswith(suffix):
            return key[: -len(suffix)]
    return key


def _blank_pod(uid: str, namespace: str | None, name: str | None) -> dict[str, Any]:
    """A pod payload of docs/observations.md's shape, every field a request cannot tell null."""
    return {
        "watch": "MODIFIED",
        "resource_version": None,
        "uid": uid,
        "api_uid": uid,
        "namespace": namespace,
        "name": name,
        "node": None,
        "labels": {},
        "created": None,
        "deletion_timestamp": None,
        "deletion_grace_seconds": None,
        "grace_seconds": None,
        "finalizers": [],
        "static": False,
        "owner": None,
        "phase": None,
        "reason": None,
        "message": None,
        "start_time": None,
        "conditions": [],
        "containers": [],
        "generation": None,
        "observed_generation": None,
    }


def _merged(old: Any, new: Any, key: str, partial: bool) -> list[Any]:
    """A list of conditions (by ``type``) or containers (by ``name``) after a write: a patch merges by
    the key (strategic merge), an update replaces the list."""
    fresh = [item for item in new if isinstance(item, Mapping)] if isinstance(new, list) else []
    if not partial:
        return fresh
    out = {
        item.get(key): item for item in (old if isinstance(old, list) else []) if isinstance(item, Mapping)
    }
    for item in fresh:
        out[item.get(key)] = item
    return list(out.values())


def audit_snapshots(
    uid: str, records: Sequence[AuditRecord], gone_by: AuditRecord | None = None
) -> tuple[Observation, ...]:
    """Pod snapshots (source ``audit``) of what the API server stored, read back from ``records``, the
    successful requests about one incarnation: a CREATE makes a ``Pending`` pod created when the request
    arrived; a ``pods/status`` write the pod before it with the status fields it carries (a patch merges
    conditions by type and containers by name); the first DELETE or granted eviction sets the deletion
    time (the request's, plus its grace when the body tells it); a DELETE with grace 0, and ``gone_by``
    (the name's next CREATE), end the object. Each snapshot's key is its request's plus ``SNAPSHOT_SUFFIX``
    (``GONE_SUFFIX`` for ``gone_by``), so ``source_key`` cites the request as evidence. Nothing for a
    request that changed nothing the lanes show (a refused eviction, a binding)."""
    state: dict[str, Any] | None = None
    out: list[Observation] = []
    removed = False
    ordered = sorted(records, key=lambda r: (r.at, r.key))
    for rec in ordered:
        if rec.dry_run or rec.succeeded is not True or removed:
            continue
        base = state if state is not None else _blank_pod(uid, rec.namespace, rec.name)
        new: dict[str, Any] | None = None
        if rec.is_create:
            new = _blank_pod(uid, rec.namespace, rec.name)
            new.update(
                watch="ADDED", phase="Pending", created=rec.payload.get("requested_at") or format_time(rec.at)
            )
        elif rec.subresource == "status" and rec.verb in ("patch", "update"):
            write = rec.payload.get("status_write")
            if isinstance(write, Mapping) and "json_patch_paths" not in write:
                partial = write.get("partial") is True
                new = dict(base)
                for field in ("phase", "reason", "message", "start_time"):
                    if field in write:
                        new[field] = write[field]
                if "conditions" in write:
                    new["conditions"] = _merged(base.get("conditions"), write["conditions"], "type", partial)
                if "containers" in write:
                    new["containers"] = _merged(base.get("containers"), write["containers"], "name", partial)
                if rec.actor_kind == "kubelet" and rec.node:
                    new["node"] = rec.node
        elif (rec.is_delete or rec.eviction_outcome == "granted") and base.get("deletion_timestamp") is None:
            grace = (rec.delete if rec.is_delete else rec.eviction).get("grace_period_seconds")
            seconds = grace if isinstance(grace, int) and not isinstance(grace, bool) else None
            new = dict(base)
            new.update(
                deletion_timestamp=format_time(rec.at + timedelta(seconds=seconds or 0)),
                deletion_grace_seconds=seconds,
            )
        if rec.is_delete and rec.delete.get("grace_period_seconds") == 0:
            new = dict(new if new is not None else base)
            removed = True
        if new is None:
            continue
        state = new
        out.append(_snapshot(uid, rec, new, SNAPSHOT_SUFFIX, deleted=removed))
    if gone_by is not None and state is not None and not removed:
        out.append(_snapshot(uid, gone_by, state, GONE_SUFFIX, deleted=True))
    return tuple(out)


def _snapshot(
    uid: str, rec: AuditRecord, payload: dict[str, Any], suffix: str, *, deleted: bool
) -> Observation:
    return Observation(
        kind=Kind.POD_DELETED if deleted else Kind.POD,
        source=Source.AUDIT,
        observed_at=rec.at,
        dedupe_key=rec.key + suffix,
        pod_uid=uid,
        node=payload.get("node"),
        namespace=payload.get("namespace"),
        name=payload.get("name"),
        # The event a watch would have delivered for this write (docs/observations.md): the CREATE's object
        # ADDED, every later write MODIFIED, the object's end DELETED.
        payload={**payload, "watch": "DELETED" if deleted else "ADDED" if rec.is_create else "MODIFIED"},
    )


def audited_phases(records: Iterable[AuditRecord]) -> list[tuple[str, datetime, str]]:
    """(api-lane state, time, request key) of each successful ``pods/status`` patch that sets the phase
    to Running, Succeeded or Failed. A patch carries what changed (the kubelet sends the two-way merge of
    the status it had and the new one), so the API's phase became that when the patch was stored: the
    request dates the change to the microsecond, where the object's own times (a container's start,
    a condition's second) only bound it."""
    out = []
    for rec in records:
        write = rec.payload.get("status_write")
        if (
            rec.subresource != "status"
            or rec.verb != "patch"
            or rec.succeeded is not True
            or rec.dry_run
            or not isinstance(write, Mapping)
            or write.get("partial") is not True
        ):
            continue
        state = _PHASES.get(str(write.get("phase")))
        if state is not None:
            out.append((state, rec.at, rec.key))
    return sorted(out, key=lambda t: (t[1], t[2]))
