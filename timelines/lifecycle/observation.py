"""The observation: one fact seen about a cluster, the unit everything in podlife is built from.

Parsers (``collectors/parsers``) turn raw inputs into observations; the store appends them; the lifecycle
core (``timelines/lifecycle``) derives timelines from them. This module is the contract between all three
and is pure: it imports nothing but the standard library.

Kinds and their payloads are listed in ``docs/observations.md``; the constants below are the only spellings.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import re
import unicodedata
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Final, TypeVar


class Kind:
    """Observation kinds (``Observation.kind``)."""

    POD: Final = "pod"  # a snapshot of a Pod object as the API served it (payload: normalized pod)
    POD_DELETED: Final = "pod_deleted"  # the Pod object is gone from the API (payload: last normalized pod)
    EVENT: Final = "event"  # a core/v1 or events.k8s.io/v1 Event (payload: normalized event)
    WORKER: Final = "worker"  # a kubelet pod-worker transition from a log line (payload: transition, ...)
    SPAN: Final = "span"  # a kubelet OTLP span: syncPod / syncTerminatingPod / syncTerminatedPod
    KUBELET_MARKER: Final = "kubelet_marker"  # a notable kubelet line: kill, grace period, failed kill, ...
    NODE: Final = "node"  # a snapshot of a Node object (payload: normalized node)
    NODE_DELETED: Final = "node_deleted"
    NODE_METRICS: Final = "node_metrics"  # kubelet_working_pods & co. scraped from one node
    PDB: Final = "pdb"  # a PodDisruptionBudget snapshot
    PDB_DELETED: Final = "pdb_deleted"
    WORKLOAD: Final = "workload"  # a Deployment / StatefulSet / DaemonSet / ReplicaSet snapshot
    WORKLOAD_DELETED: Final = "workload_deleted"
    AUDIT: Final = "audit"  # one audited API request: verb, object, actor, answer (docs/audit.md)
    # One kubelet process as a log showed it: pid, first and last line, start lines (node-level, no pod).
    KUBELET_PROCESS: Final = "kubelet_process"

    ALL: Final = frozenset(
        {
            POD,
            POD_DELETED,
            EVENT,
            WORKER,
            SPAN,
            KUBELET_MARKER,
            NODE,
            NODE_DELETED,
            NODE_METRICS,
            PDB,
            PDB_DELETED,
            WORKLOAD,
            WORKLOAD_DELETED,
            AUDIT,
            KUBELET_PROCESS,
        }
    )


class Source:
    """Where an observation came from (``Observation.source``)."""

    API: Final = "api"  # list/watch of a live API server
    OFFLINE: Final = "offline"  # kubectl -o json|yaml output, cluster-info dump
    KUBELET_LOG: Final = "kubelet_log"
    KUBELET_SPAN: Final = "kubelet_span"
    KUBELET_METRICS: Final = "kubelet_metrics"
    SYNTHETIC: Final = "synthetic"  # made by podlife itself, e.g. a deletion inferred after a relist
    # the API server's audit log (audit.k8s.io/v1): files, the webhook backend, exports
    AUDIT: Final = "audit"

    ALL: Final = frozenset({API, OFFLINE, KUBELET_LOG, KUBELET_SPAN, KUBELET_METRICS, SYNTHETIC, AUDIT})


class Transition:
    """Pod-worker transitions (``payload["transition"]`` of a WORKER observation).

    Each names one kubelet message family from k8s-facts.md §1.4 / §2.1, whatever its version's spelling.
    """

    FIRST_SEEN: Final = "first_seen"  # "Pod is being synced for the first time"
    SYNC_ENTER: Final = "sync_enter"  # "SyncPod enter" / "syncPod enter"
    SYNC_EXIT: Final = "sync_exit"  # "SyncPod exit" (payload is_terminal)
    TERMINATION_REQUESTED: Final = "termination_requested"  # "... begin teardown" (payload cause)
    OBSERVED_TERMINATE: Final = "observed_terminate"  # "Pod worker has observed request to terminate"
    COMPLETED_NATURALLY: Final = "completed_naturally"  # "Pod indicated lifecycle completed naturally ..."
    TERMINATING_ENTER: Final = "terminating_enter"  # "SyncTerminatingPod enter"
    TERMINATING_EXIT: Final = "terminating_exit"
    TERMINATING_RUNTIME_ENTER: Final = "terminating_runtime_enter"  # "SyncTerminatingRuntimePod enter"
    TERMINATING_RUNTIME_EXIT: Final = "terminating_runtime_exit"
    CONTAINERS_TERMINATED: Final = "containers_terminated"  # "Pod terminated all containers successfully"
    ORPHAN_CONTAINERS_TERMINATED: Final = "orphan_containers_terminated"
    TERMINATED_ENTER: Final = "terminated_enter"  # "SyncTerminatedPod enter"
    TERMINATED_EXIT: Final = "terminated_exit"
    WORKER_DONE: Final = "worker_done"  # "Pod is complete and the worker can now stop"
    CANNOT_START_EVER: Final = "cannot_start_ever"  # "Pod cannot start ever"
    CANNOT_START_YET: Final = "cannot_start_yet"
    POD_TERMINAL: Final = "pod_terminal"  # "Pod is terminal"
    FINISHED_IGNORED: Final = "finished_ignored"  # "Pod is finished processing, no further updates"
    RESTART_REQUESTED: Final = "restart_requested"  # terminating but requested to restart with same UID
    UID_REUSE_RESTART: Final = "uid_reuse_restart"  # "... another pod with the same UID was created ..."
    WORKER_STOPPED: Final = "worker_stopped"  # "Pod worker has stopped"
    FORGOTTEN: Final = "forgotten"  # "Pod has been terminated and is no longer known to the kubelet ..."
    SYNC_ERROR: Final = "sync_error"  # "Error syncing pod, skipping"
    CONTEXT_CANCELLED: Final = "context_cancelled"  # "Sync exited with context cancellation error"
    CANCELLING_SYNC: Final = "cancelling_sync"  # "Cancelling current pod sync"
    ORPHANED: Final = "orphaned"  # SyncKnownPods orphan lines
    # "Notifying pod of pending update" (V4, 1.27+; payload work_type)
    PENDING_UPDATE: Final = "pending_update"

    # Lines below V4 (docs/kubelet-lines.md). The SyncLoop lines name pods only as ns/name (no UID): one
    # observation per pod named, resolved to a UID by timelines/lifecycle/resolve.py.
    SYNCLOOP_ADD: Final = "syncloop_add"  # V2 "SyncLoop ADD": the config source delivered the pod
    SYNCLOOP_UPDATE: Final = "syncloop_update"  # V2 spec / label / annotation change, no deletionTimestamp
    SYNCLOOP_DELETE: Final = "syncloop_delete"  # V2 a change while deletionTimestamp is set (graceful delete)
    SYNCLOOP_REMOVE: Final = "syncloop_remove"  # V2 the object is gone from its config source
    SYNCLOOP_RECONCILE: Final = "syncloop_reconcile"  # V4 status-only change
    SYNCLOOP_SYNC: Final = "syncloop_sync"  # V4 "SyncLoop (SYNC) pods": a periodic resync of the pods listed
    CONTAINER_STARTED: Final = "container_started"  # V2 "SyncLoop (PLEG): event for pod" ContainerStarted
    CONTAINER_DIED: Final = "container_died"  # V2 PLEG ContainerDied
    CONTAINER_FINISHED: Final = "container_finished"  # V2 "Generic (PLEG): container finished" (exit code)
    STARTUP_OBSERVED: Final = "startup_observed"  # V0 "Observed pod startup duration" (1.26+)
    RUNNING_MARKED: Final = "running_marked"  # V3 "Mark when the pod was running for the first time" (1.26+)
    STATUS_UPDATED: Final = "status_updated"  # V3 "Status for pod updated successfully" (payload phase)
    MARKED_FAILED: Final = "marked_failed"  # V3 "Marking terminal pod as failed" (1.27+)
    DELETION_DELAYED: Final = "deletion_delayed"  # V3 "Delaying pod deletion as the phase is non-terminal"
    # V3 "The pod termination is finished as SyncTerminatedPod completes ..."
    TERMINATION_FINISHED: Final = "termination_finished"
    REMOVED_FROM_ETCD: Final = "removed_from_etcd"  # V3 "Pod fully terminated and removed from etcd"


class TerminationCause:
    """Why the worker began teardown (``payload["cause"]`` of TERMINATION_REQUESTED)."""

    DELETION: Final = "deletion"  # deletion timestamp
    TERMINAL_PHASE: Final = "terminal_phase"  # Succeeded / Failed
    EVICTED: Final = "evicted"  # kubelet eviction
    REMOVED: Final = "removed"  # kubelet kill: preemption, node shutdown, ...
    ORPHANED: Final = "orphaned"  # runtime-only pod


@dataclass(frozen=True, slots=True)
class _Fact:
    """The fields an ``Observation`` and an ``EncodedObservation`` share (all but the payload), their
    validation on creation and their order."""

    kind: str
    source: str
    observed_at: datetime
    dedupe_key: str
    pod_uid: str | None = None
    node: str | None = None
    namespace: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        problems = validation_problems(self)  # type: ignore[arg-type]  # only the two subclasses exist
        if problems:
            raise InvalidObservation(self.dedupe_key or "<no dedupe key>", problems)

    @property
    def sort_key(self) -> tuple[datetime, str, str]:
        """A total order that does not depend on arrival order (``SORT_KEY`` as a key function)."""
        return SORT_KEY(self)


# ``_Fact.sort_key``'s order as a key function, without the property call (sorting a pod's facts).
SORT_KEY = operator.attrgetter("observed_at", "kind", "dedupe_key")


@dataclass(frozen=True, slots=True)
class Observation(_Fact):
    """One fact, immutable.

    ``observed_at`` is timezone-aware with microseconds as the source gave them. ``dedupe_key`` is
    unique per cluster for the same fact: a re-delivered watch event, a re-ingested log line or a
    re-sent span produces the same key, so it is stored once. ``payload`` holds JSON-compatible values
    only and is treated as read-only.
    """

    payload: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True, slots=True)
class EncodedObservation(_Fact):
    """An ``Observation`` whose payload arrives already encoded: ``payload_json`` is the compact JSON text
    of a JSON object.

    The typed pod path (``collectors/parsers/pod_wire.py``) encodes a pod's payload straight from the
    structs it decoded off the wire, so no dict of it is ever built; the store writes these bytes as they
    are. The contract is the same as ``Observation``'s (the same fields, checked the same way on
    creation); ``payload`` decodes the JSON for a reader that needs it, ``decoded()`` gives the
    ``Observation`` itself.
    """

    payload_json: bytes = field(default=b"{}", hash=False, compare=False, repr=False)

    @property
    def payload(self) -> dict[str, Any]:
        """The payload, decoded (a new dict on each call)."""
        decoded = json.loads(self.payload_json)
        if not isinstance(decoded, dict):
            raise ValueError(f"payload_json of {self.dedupe_key!r} is not a JSON object")
        return decoded

    def decoded(self) -> Observation:
        """The same fact as an ``Observation`` (its payload decoded)."""
        return Observation(
            self.kind,
            self.source,
            self.observed_at,
            self.dedupe_key,
            self.pod_uid,
            self.node,
            self.namespace,
            self.name,
            self.payload,
        )


AnyObservation = Observation | EncodedObservation  # what the store takes and ingest passes on


_new = object.__new__
_Made = TypeVar("_Made", "Observation", "EncodedObservation")
_SETTERS = tuple(getattr(Observation, f.name).__set__ for f in fields(Observation))


def stored_observation(
    kind: str,
    source: str,
    observed_at: datetime,
    dedupe_key: str,
    pod_uid: str | None,
    node: str | None,
    namespace: str | None,
    name: str | None,
    payload: dict[str, Any],
) -> Observation:
    """An ``Observation`` read back from the store, made without checking it again: the store checked it
    when it stored it (``InvalidObservation`` is refused there), and the derive stage reads every
    observation of every dirty pod (0.6 us a row instead of 2.1 us)."""
    return _unchecked(
        Observation, _SETTERS, kind, source, observed_at, dedupe_key, pod_uid, node, namespace, name, payload
    )


def _unchecked(
    cls: type[_Made],
    setters: tuple[Any, ...],
    kind: str,
    source: str,
    observed_at: datetime,
    dedupe_key: str,
    pod_uid: str | None,
    node: str | None,
    namespace: str | None,
    name: str | None,
    payload: Any,
) -> _Made:
    """A ``cls`` (``Observation`` or ``EncodedObservation``) of these fields, made without the frozen
    dataclass's ``__init__`` (which sets each field through ``object.__setattr__``) and without checks:
    ``setters`` are its fields' slot setters, in order."""
    obs = _new(cls)
    kind_, source_, at_, key_, uid_, node_, ns_, name_, payload_ = setters
    kind_(obs, kind)
    source_(obs, source)
    at_(obs, observed_at)
    key_(obs, dedupe_key)
    uid_(obs, pod_uid)
    node_(obs, node)
    ns_(obs, namespace)
    name_(obs, name)
    payload_(obs, payload)
    return obs


_ENCODED_SETTERS = tuple(getattr(EncodedObservation, f.name).__set__ for f in fields(EncodedObservation))


def stored_encoded_observation(*fields: Any) -> EncodedObservation:
    """An ``EncodedObservation`` of ``fields`` (``encoded_observation``'s, in its order) made again without
    checking it (``stored_observation``'s twin): one that was checked when it was made and sent to another
    process (``timelines/store_process.py``)."""
    return _unchecked(EncodedObservation, _ENCODED_SETTERS, *fields)


def encoded_observation(
    kind: str,
    source: str,
    observed_at: datetime,
    dedupe_key: str,
    pod_uid: str | None,
    node: str | None,
    namespace: str | None,
    name: str | None,
    payload_json: bytes,
) -> EncodedObservation:
    """``EncodedObservation(...)`` of the same fields, checked the same way (``InvalidObservation`` naming
    the same problems), made without the frozen dataclass's ``__init__``, which sets each field through
    ``object.__setattr__``, and a valid one checked in one expression: the typed pod path makes one a pod
    (0.9 us instead of 2.2 with its names known)."""
    obs = _unchecked(
        EncodedObservation, _ENCODED_SETTERS, kind, source, observed_at, dedupe_key, pod_uid, node, namespace, name,
        payload_json,
    )  # fmt: skip
    # What a pod off the wire is, checked at once (each test one of ``validation_problems``, in the form
    # the typed path gives: a known kind and source, an aware time in range, a key, names Kubernetes
    # accepts, a JSON object's bytes); anything else is checked one problem at a time, as on creation.
    try:
        valid = (
            kind in Kind.ALL
            and source in Source.ALL
            and type(observed_at) is datetime
            and observed_at.utcoffset() is not None
            and EARLIEST <= observed_at < LATEST
            and type(dedupe_key) is str
            and 0 < len(dedupe_key) <= MAX_DEDUPE_KEY
            and type(payload_json) is bytes
            and payload_json.startswith(b"{")
            and not _names_problems(pod_uid, namespace, node, name)
        )
    except TypeError:  # a value that cannot be a cache key (a list): checked one problem at a time
        valid = False
    if not valid:
        problems = validation_problems(obs)
        if problems:
            raise InvalidObservation(dedupe_key or "<no dedupe key>", problems)
    return obs


# The contract's fields, in order: what the store keeps in columns and what an incident bundle's digest covers.
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Observation))


class InvalidObservation(ValueError):
    """An observation that breaks the contract; names the record and every problem found."""

    def __init__(self, key: str, problems: list[str]) -> None:
        self.key = key
        self.problems = problems
        super().__init__(f"invalid observation {key!r}: {'; '.join(problems)}")


MAX_DEDUPE_KEY = 200

# The times podlife stores and derives (docs/configuration.md, "Supported time range"): from the Unix
# epoch to the start of the year 9000. Every input passes this contract, so a time outside it (Go's zero
# time 0001-01-01, a hostile 9999-12-31T23:59:59Z) is refused with its record, and the derive stage's
# window arithmetic (a pod's span widened by minutes, a page's window by days, a year's rollover) has
# centuries of room on both sides before ``datetime`` overflows.
EARLIEST: Final = datetime(1970, 1, 1, tzinfo=UTC)
LATEST: Final = datetime(9000, 1, 1, tzinfo=UTC)  # exclusive

# Kubernetes' own name rules (k8s.io/apimachinery/pkg/util/validation): a namespace is a DNS-1123 label,
# a node a DNS-1123 subdomain (both below: of any case). Other object names (an audited request's object: a ClusterRole is
# ``system:controller:...``) follow the generic path-segment rule: not ``.`` or ``..``, no ``/`` or ``%``;
# and, here, no control or format character (NUL, U+202E) and at most 253 characters, what the store's
# columns hold. A UID is printable ASCII without spaces (a UUID; a static pod's is a hash).
MAX_NAMESPACE: Final = 63
MAX_NAME: Final = 253
MAX_UID: Final = 64
# Read case-insensitively, as node names are (below): the API server only stores lower case, but a log a
# person redacted before pasting it keeps the letters they typed (the real GKE excerpt of
# kubernetes/kubernetes#110755 names its pods `XX/client-…`), and refusing them would lose every line
# that names the pod; no case change turns a label into something the derive stage cannot handle.
_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?", re.IGNORECASE)
# Node names: a DNS-1123 subdomain read as DNS reads it, case-insensitively. The API server stores them in
# lower case, but a node's name as a kubelet log, a shipper's host field or an operator's --node gives it
# may keep the host's own case (the corpus's GKE excerpt is read with --node gke-dev-default-pool-XXX); it is
# still one host name, and no case change turns it into something the derive stage cannot handle.
_DNS_SUBDOMAIN = re.compile(
    r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*", re.IGNORECASE
)
_UID = re.compile(r"[!-~]{1,64}")
_PLAIN_NAME = re.compile(r"[-A-Za-z0-9._:@+=~]{1,253}")  # the common case, checked without a scan
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def time_problem(field_name: str, at: datetime) -> str | None:
    """Why ``at`` is outside the supported range (None when it is inside); ``at`` is aware."""
    if EARLIEST <= at < LATEST:
        return None
    return (
        f"{field_name} {at.isoformat()} is outside the supported range "
        f"{EARLIEST.isoformat()} .. {LATEST.isoformat()} (exclusive)"
    )


def name_problem(field_name: str, value: object) -> str | None:
    """Why ``value`` is not a valid ``field_name`` (``namespace``, ``node``, ``name`` or ``pod_uid``) by
    Kubernetes' rules (None when it is, or is None)."""
    if value is None or (value == "" and field_name != "pod_uid"):  # "": not given, as the store keeps it
        return None
    if not isinstance(value, str):
        return f"{field_name} must be a string, got {type(value).__name__}"
    return _string_problem(field_name, value)


def _uncached_names_problems(uid: object, namespace: object, node: object, name: object) -> tuple[str, ...]:
    found = (
        name_problem("pod_uid", uid),
        name_problem("namespace", namespace),
        name_problem("node", node),
        name_problem("name", name),
    )
    if found == _NO_PROBLEMS:  # every new pod comes here once: no generator for the usual answer
        return ()
    return tuple(p for p in found if p is not None)


_NO_PROBLEMS = (None, None, None, None)


# A pod's observations repeat its UID, namespace, node and name, and a cluster its namespaces and nodes:
# the answers are remembered (bounded caches, so hostile names cannot grow them), which keeps the check
# on the watch's path at about one dictionary look-up per observation instead of four regular expressions.
_names_problems = functools.lru_cache(maxsize=16384)(_uncached_names_problems)


@functools.lru_cache(maxsize=16384)
def _string_problem(field_name: str, value: str) -> str | None:
    if field_name == "namespace":
        if _DNS_LABEL.fullmatch(value):
            return None
        return (
            f"namespace {_shown(value)} is not a DNS-1123 label (letters, 0-9, '-'; at most {MAX_NAMESPACE})"
        )
    if field_name == "node":
        if len(value) <= MAX_NAME and _DNS_SUBDOMAIN.fullmatch(value):
            return None
        return f"node {_shown(value)} is not a DNS-1123 subdomain (a-z, 0-9, '-', '.'; at most {MAX_NAME})"
    if field_name == "pod_uid":
        if _UID.fullmatch(value):
            return None
        return f"pod_uid {_shown(value)} is not 1-{MAX_UID} printable ASCII characters without spaces"
    if _PLAIN_NAME.fullmatch(value) and value not in (".", ".."):
        return None
    if not value or len(value) > MAX_NAME:
        return f"{field_name} must be 1-{MAX_NAME} characters, got {len(value)}"
    if value in (".", "..") or "/" in value or "%" in value:
        return f"{field_name} {_shown(value)} may not be '.' or '..' nor contain '/' or '%'"
    if any(unicodedata.category(c) in _UNPRINTABLE for c in value):
        return f"{field_name} {_shown(value)} holds a control or format character"
    return None


def _shown(value: str) -> str:
    """A value as an error message quotes it: escaped (NUL, U+202E shown as escapes), at most 40 characters."""
    text = value if len(value) <= 40 else value[:40] + "..."
    return ascii(text)


def validation_problems(obs: AnyObservation) -> list[str]:
    """Every way ``obs`` breaks the contract (empty when valid)."""
    problems: list[str] = []
    if obs.kind not in Kind.ALL:
        problems.append(f"kind {obs.kind!r} is not one of {sorted(Kind.ALL)}")
    if obs.source not in Source.ALL:
        problems.append(f"source {obs.source!r} is not one of {sorted(Source.ALL)}")
    if not isinstance(obs.observed_at, datetime):
        problems.append(f"observed_at must be a datetime, got {type(obs.observed_at).__name__}")
    elif obs.observed_at.tzinfo is None or obs.observed_at.utcoffset() is None:
        problems.append("observed_at must be timezone-aware")
    elif (out := time_problem("observed_at", obs.observed_at)) is not None:
        problems.append(out)
    if not isinstance(obs.dedupe_key, str) or not obs.dedupe_key:
        problems.append("dedupe_key must be a non-empty string")
    elif len(obs.dedupe_key) > MAX_DEDUPE_KEY:
        problems.append(f"dedupe_key is longer than {MAX_DEDUPE_KEY} characters")
    try:
        names = _names_problems(obs.pod_uid, obs.namespace, obs.node, obs.name)
    except TypeError:  # a value that cannot be a cache key (a list): it is no name either
        names = _uncached_names_problems(obs.pod_uid, obs.namespace, obs.node, obs.name)
    if names:
        problems.extend(names)
    if isinstance(obs, EncodedObservation):
        # The typed path encodes objects only; the first byte is what can be checked without decoding.
        if not isinstance(obs.payload_json, bytes) or not obs.payload_json.startswith(b"{"):
            problems.append("payload_json must be the bytes of a JSON object")
    elif not isinstance(obs.payload, dict):
        problems.append(f"payload must be a dict, got {type(obs.payload).__name__}")
    return problems


def digest_key(*parts: object) -> str:
    """A short stable dedupe key from parts (sha1 hex of their joined text)."""
    text = "\x1f".join("" if p is None else str(p) for p in parts)
    return hashlib.sha1(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
