"""Kubernetes API server audit events (``audit.k8s.io/v1``) to observations: decoding and extraction, no I/O.

What it reads (docs/audit.md has the details and the evidence for each):

* the **log backend**: JSON Lines, one ``Event`` per line (``--audit-log-format=json``), and the one-line
  ``legacy`` text format (``<time> AUDIT: id="…" stage="…" …``);
* the **webhook backend**: ``EventList`` bodies (``{"kind":"EventList","items":[…]}``);
* **managed exports** that carry the same ``Event`` in another envelope: EKS (CloudWatch Logs: each log
  event's ``message`` is one Event; ``filter-log-events`` output and subscription ``DATA_MESSAGE``\\ s),
  AKS (diagnostic ``records`` whose ``properties.log`` is the Event as a string; rows of the ``AKSAudit``
  table), and GKE (Cloud Audit Logs ``LogEntry`` with a ``protoPayload``: mapped field by field, and what
  it lacks, groups, stage and the HTTP code, stays unknown);
* any of these as one JSON document, an array of documents, concatenated documents, or one per line.

Stages: ``ResponseComplete`` (and ``Panic``) events become observations; ``RequestReceived`` is kept only to
pair a request with its completion (requests that never complete in the input are counted, see
``AuditParser.unpaired``); ``ResponseStarted`` (watches, exec) is skipped.

Every completed write (create, update, patch, delete, deletecollection) to pods (and ``pods/status``,
``/eviction``, ``/binding``, ``/ephemeralcontainers``, ``/resize``), nodes and PodDisruptionBudgets (and
their status) gives one ``audit`` observation (``Kind.AUDIT``, payload in docs/audit.md). Where the event
carries the object itself (a ``RequestResponse`` ``responseObject``, or the whole object a successful
``update`` sent with its resourceVersion), it also gives the same ``pod`` / ``pod_deleted`` / ``node`` /
``pdb`` snapshot a watch would, through ``collectors.parsers.k8s_objects``, with source ``audit``.

Nothing here raises on any input: a record that cannot be read is counted under a reason and the rest
goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import orjson

from collectors.parsers.k8s_objects import (
    node_observation,
    normalize_pod,
    normalize_time,
    parse_time,
    pdb_observation,
    pod_observation,
)
from timelines.lifecycle.observation import Kind, Observation, Source, digest_key, name_problem

__all__ = [
    "REJECT_REASONS",
    "SKIP_REASONS",
    "AuditParser",
    "AuditParse",
    "actor_of",
    "eviction_cause",
    "parse_audit",
    "request_path",
]

# -------------------------------------------------------------------------------------------- constants

STAGE_RECEIVED: Final = "RequestReceived"
STAGE_STARTED: Final = "ResponseStarted"
STAGE_COMPLETE: Final = "ResponseComplete"
STAGE_PANIC: Final = "Panic"
COMPLETED_STAGES: Final = frozenset({STAGE_COMPLETE, STAGE_PANIC})

WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})

# (API group, resource) -> the subresources that are lifecycle ("" = the resource itself).
FOLLOWED: Final[dict[tuple[str, str], frozenset[str]]] = {
    ("", "pods"): frozenset({"", "status", "eviction", "binding", "ephemeralcontainers", "resize"}),
    ("", "nodes"): frozenset({""}),
    ("policy", "poddisruptionbudgets"): frozenset({"", "status"}),
}
OBJECT_KINDS: Final[dict[str, str]] = {
    "pods": "Pod",
    "nodes": "Node",
    "poddisruptionbudgets": "PodDisruptionBudget",
}
UNSCHEDULABLE_TAINT: Final = "node.kubernetes.io/unschedulable"

# Deliberately ignored records, by reason (counted, never an error).
SKIP_REASONS: Final[dict[str, str]] = {
    "request_received": "RequestReceived stage: kept only to pair with its completion",
    "response_started": "ResponseStarted stage (long-running requests: watch, exec, attach)",
    "unknown_stage": "a stage that is not RequestReceived, ResponseStarted, ResponseComplete or Panic",
    "non_resource": "a request for a non-resource URL (/healthz, /metrics, /version, ...)",
    "read_verb": "a read (get, list, watch) or another verb that changes nothing",
    "other_resource": "a resource podlife does not follow (configmaps, leases, events, ...)",
    "other_subresource": "a subresource that is not lifecycle (pods/log, pods/exec, nodes/proxy, ...)",
    "node_heartbeat": "a nodes/status write without a Node body, or one that changed nothing podlife keeps",
    "not_audit": "a JSON document that is neither an audit event nor a known wrapping of one",
    "other_category": "an AKS diagnostic record of another category than kube-audit / kube-audit-admin",
    "control_message": "a CloudWatch Logs subscription CONTROL_MESSAGE",
    "blank": "an empty line",
}
# Records that should have been audit events and could not be read (counted, with examples).
REJECT_REASONS: Final[dict[str, str]] = {
    "bad_json": "a line or document that is not valid JSON",
    "not_audit_text": "a text line that is neither JSON nor a legacy audit line",
    "wrong_api_version": "an Event whose apiVersion is not audit.k8s.io/*",
    "no_audit_id": "an event without auditID",
    "no_stage": "an event without stage",
    "no_time": "an event without a readable stageTimestamp or requestReceivedTimestamp",
    "invalid": "an event whose observation breaks the contract (e.g. a UID longer than 64 characters)",
    "too_deep": "wrappings nested deeper than the known envelopes",
    "document_too_large": "a multi-line JSON document (or gzip body) larger than the parser's limit",
    "bad_gzip": "gzip data that is corrupt or cut short (what came before the damage is kept)",
}

MAX_TEXT: Final = 4096  # longest message / URI kept in a payload; the rest is cut with a marker
MAX_LIST: Final = 64  # most groups, source IPs or causes kept
MAX_DEPTH: Final = 5  # envelope nesting: records -> properties.log -> EventList -> items -> Event
MAX_OPEN_REQUESTS: Final = 200_000  # RequestReceived events remembered for pairing
MAX_EXAMPLES: Final = 10  # rejected records quoted per reason
DEFAULT_MAX_DOCUMENT: Final = 512 * 1024 * 1024
_BOM: Final = b"\xef\xbb\xbf"
_GZIP_MAGIC: Final = b"\x1f\x8b"

# user.extra keys kept: where a service-account token is bound. The rest (credential ids, scopes) is dropped.
KEPT_EXTRA: Final = frozenset(
    {
        "authentication.kubernetes.io/pod-name",
        "authentication.kubernetes.io/pod-uid",
        "authentication.kubernetes.io/node-name",
        "authentication.kubernetes.io/node-uid",
    }
)
# Controller-manager service accounts (--use-service-account-credentials) that are not named "*-controller".
CONTROLLER_ACCOUNTS: Final = frozenset(
    {
        "generic-garbage-collector",
        "pod-garbage-collector",
        "horizontal-pod-autoscaler",
        "persistent-volume-binder",
        "root-ca-cert-publisher",
        "legacy-service-account-token-cleaner",
    }
)


# -------------------------------------------------------------------------------------------- small readers


_EMPTY: Final[Mapping[str, Any]] = {}


def _map(value: Any) -> Mapping[str, Any]:
    # ``type(...) is dict`` first: decoded JSON is plain dicts, and the ABC check is slow on this hot path.
    return value if type(value) is dict or isinstance(value, Mapping) else _EMPTY


def _str(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return value if value else None
    if value is None or kind is dict or kind is list or isinstance(value, Mapping | list | tuple):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _text(value: Any) -> str | None:
    """A free-text field, cut to ``MAX_TEXT`` characters."""
    text = _str(value)
    if text is not None and len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + "…(cut)"
    return text


_INT64: Final = 2**63


def _int(value: Any) -> int | None:
    """An integer the way JSON writers mean it (also "30" and 30.0), or None; only int64 values, which is
    what the API uses and what the store's JSON encoder takes."""
    number: int | None = None
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and 0 < len(value) <= 24 and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    return number if number is not None and -_INT64 <= number < _INT64 else None


def _strings(value: Any) -> list[str] | None:
    if not isinstance(value, list | tuple):
        return None
    return [s for s in (_str(v) for v in value[:MAX_LIST]) if s is not None]


def _time(value: Any) -> datetime | None:
    """An audit time (MicroTime: ``2024-06-07T06:54:00.123456Z``) as an aware UTC datetime, or None.

    The API's own form is read by the C parser; anything else (nanoseconds, offsets, Go's zero time) goes
    through ``k8s_objects.parse_time``."""
    if isinstance(value, str) and len(value) == 27 and value[-1] == "Z":
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return parse_time(value)
        return at if at.year > 1 else None
    return parse_time(value)


def _query(uri: str) -> dict[str, list[str]]:
    """The query parameters of a request URI (``dryRun``, ``gracePeriodSeconds``, ...)."""
    if "?" not in uri:
        return {}
    try:
        return parse_qs(uri.partition("?")[2].partition("#")[0], max_num_fields=64)
    except ValueError:
        return {}


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def _object(value: Any) -> Any:
    """A body as an event carries it: an object, or (some exports) the JSON text of one."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return value


# -------------------------------------------------------------------------------------------- request paths


@dataclass(frozen=True)
class RequestPath:
    """What a resource request's URL names (the API server's own RequestInfo, for the fields podlife uses)."""

    api_group: str
    api_version: str
    namespace: str | None
    resource: str
    name: str | None
    subresource: str | None
    query: dict[str, list[str]]


def request_path(uri: str) -> RequestPath | None:
    """The object a request URI names, or None for a non-resource URL.

    ``/api/v1/namespaces/NS/pods/NAME/status?dryRun=All`` gives group "", version v1, namespace NS,
    resource pods, name NAME, subresource status and the query. The legacy ``/api/v1/watch/…`` prefix and
    ``/apis/GROUP/VERSION/…`` are understood. Never raises.
    """
    try:
        parts_url = urlsplit(uri)
    except ValueError:
        return None
    parts = [p for p in parts_url.path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if rest and rest[0] == "watch":
        rest = rest[1:]
    namespace: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return None
    try:
        query = parse_qs(parts_url.query, max_num_fields=64)
    except ValueError:
        query = {}
    return RequestPath(
        api_group=group,
        api_version=version,
        namespace=namespace,
        resource=rest[0],
        name=rest[1] if len(rest) > 1 else None,
        subresource="/".join(rest[2:]) or None,
        query=query,
    )


# -------------------------------------------------------------------------------------------- actors


def actor_of(
    username: str | None, authz_reason: str | None = None, groups: Iterable[str] = ()
) -> dict[str, str | None]:
    """Who a username is, by the conventions of k8s-facts.md §13.3: ``{"kind", "name"}``.

    kinds: ``kubelet`` (name = node), ``controller`` (a kube-controller-manager loop: its service account,
    or ``kube-controller-manager``), ``scheduler``, ``apiserver`` (its loopback client, e.g. inside an
    eviction), ``serviceaccount`` (name ``ns/name``), ``user``, ``unknown``. An RBAC decision naming a
    ``system:controller:`` role also marks a controller. A user of the ``system:nodes`` group that is not
    ``system:node:NAME`` (a kubelet with a shared client credential, ``kubelet`` or ``nodeclient``-style)
    is a kubelet whose node the name does not tell.
    """
    if not username:
        return {"kind": "unknown", "name": None}
    if username.startswith("system:node:"):
        return {"kind": "kubelet", "name": username[len("system:node:") :] or None}
    if "system:nodes" in groups:
        return {"kind": "kubelet", "name": None}
    if username.startswith("system:serviceaccount:"):
        rest = username[len("system:serviceaccount:") :]
        namespace, _, account = rest.partition(":")
        if namespace == "kube-system" and (
            account.endswith("-controller")
            or account in CONTROLLER_ACCOUNTS
            or (authz_reason is not None and f'"system:controller:{account}"' in authz_reason)
        ):
            return {"kind": "controller", "name": account}
        return {"kind": "serviceaccount", "name": f"{namespace}/{account}" if account else rest}
    if username == "system:kube-controller-manager":
        return {"kind": "controller", "name": "kube-controller-manager"}
    if username == "system:kube-scheduler":
        return {"kind": "scheduler", "name": "kube-scheduler"}
    if username == "system:apiserver":
        return {"kind": "apiserver", "name": "kube-apiserver"}
    return {"kind": "user", "name": username}


def _user(value: Any) -> dict[str, Any] | None:
    user = _map(value)
    if not user:
        return None
    extra = {
        key: _strings(v) or []
        for key, v in _map(user.get("extra")).items()
        if isinstance(key, str) and key in KEPT_EXTRA
    }
    return {
        "username": _text(user.get("username")),
        "uid": _str(user.get("uid")),
        "groups": _strings(user.get("groups")),
        "extra": extra,
    }


# -------------------------------------------------------------------------------------------- evictions

_CAUSES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "insufficient_pods",
        re.compile(
            r"The disruption budget (?P<pdb>\S+) needs (?P<desired>-?\d+) healthy pods? and has "
            r"(?P<current>-?\d+) currently"
        ),
    ),
    (
        "not_observed",
        re.compile(r"The disruption budget (?P<pdb>\S+) is still being processed by the server"),
    ),
    (
        "failed_sync",
        re.compile(
            r"The disruption budget (?P<pdb>\S+) does not allow evicting pods currently because it failed "
            r"sync: (?P<detail>.*)"
        ),
    ),
    (
        "not_allowed",
        re.compile(
            r"The disruption budget (?P<pdb>\S+) does not allow evicting pods currently"
            r"(?: \((?P<detail>[^)]*)\))?"
        ),
    ),
    (
        "negative_budget",
        re.compile(
            r'poddisruptionbudgets?(?:\.policy)? "(?P<pdb>[^"]+)" is forbidden: pdb disruptions allowed is negative'
        ),
    ),
    (
        "too_many_disrupted",
        re.compile(
            r'poddisruptionbudgets?(?:\.policy)? "(?P<pdb>[^"]+)" is forbidden: DisruptedPods map too big'
        ),
    ),
    ("conflicts", re.compile(r"couldn't update PodDisruptionBudget \"(?P<pdb>[^\"]+)\" due to conflicts")),
    ("multiple_pdbs", re.compile(r"This pod has more than one PodDisruptionBudget")),
)
_REFUSAL: Final = "Cannot evict pod as it would violate the pod's disruption budget"


def eviction_cause(texts: Iterable[str]) -> dict[str, Any]:
    """What an eviction answer's messages say about the PodDisruptionBudget (registry/core/pod/storage/
    eviction.go): ``{"cause", "pdb", "desired_healthy", "current_healthy", "detail"}``, all None when no
    message matches. The first matching text wins; causes are tried before the top-level message."""
    for text in texts:
        for cause, pattern in _CAUSES:
            m = pattern.search(text)
            if m is not None:
                groups = m.groupdict()
                return {
                    "cause": cause,
                    "pdb": groups.get("pdb"),
                    "desired_healthy": _int(groups.get("desired")),
                    "current_healthy": _int(groups.get("current")),
                    "detail": _text(groups.get("detail")),
                }
    return {"cause": None, "pdb": None, "desired_healthy": None, "current_healthy": None, "detail": None}


def _eviction(
    code: int | None,
    rpc_code: int | None,
    status: str | None,
    message: str | None,
    causes: list[dict[str, Any]],
    request: Any,
) -> dict[str, Any]:
    texts = [c["message"] for c in causes if c.get("message")] + ([message] if message else [])
    found = eviction_cause(texts)
    refused_text = any(_REFUSAL in t for t in texts)
    if found["cause"] == "multiple_pdbs":
        outcome = "failed"  # written with HTTP 201, but a Failure: nothing was evicted
    elif code is not None:
        if 200 <= code < 300:
            outcome = "failed" if status == "Failure" else "granted"
        elif code == 429:
            outcome = "refused"
        elif code == 403:
            outcome = "forbidden"
        else:
            outcome = "failed"
    elif rpc_code is not None:  # GKE: a google.rpc code, not the HTTP one
        outcome = (
            "granted"
            if rpc_code == 0
            else "refused"
            if refused_text
            else "forbidden"
            if rpc_code == 7
            else "failed"
        )
    else:
        outcome = "unknown"
    if outcome == "failed" and code == 404:
        found["cause"] = found["cause"] or "not_found"
    body = _map(request)
    options = _map(body.get("deleteOptions"))
    return {
        "outcome": outcome,
        **found,
        "grace_period_seconds": _int(options.get("gracePeriodSeconds")),
        "api_version": _str(body.get("apiVersion")),
    }


# -------------------------------------------------------------------------------------------- bodies


def _delete_options(
    request: Any, query: Mapping[str, list[str]], level: str | None, succeeded: bool | None
) -> dict[str, Any]:
    """What a delete asked for: from the DeleteOptions body (Request level and up) or the query string.

    ``options`` says where they came from: ``body``, ``query``, ``default`` (the level records bodies, the
    delete went through and sent none: the object's own grace period applies) or ``unknown`` (Metadata
    level, or a request refused before its body was read, and no query)."""
    body = _map(request)
    if body:
        source = "body"
    elif any(k in query for k in ("gracePeriodSeconds", "propagationPolicy", "dryRun", "orphanDependents")):
        source = "query"
        body = {
            key: values[0]
            for key in ("gracePeriodSeconds", "propagationPolicy")
            if (values := query.get(key))
        }
    elif level in ("Request", "RequestResponse") and succeeded:
        source = "default"  # the handler read the request, and no body came with it
    else:
        source = "unknown"
    pre = _map(body.get("preconditions"))
    return {
        "options": source,
        "grace_period_seconds": _int(body.get("gracePeriodSeconds")),
        "propagation_policy": _str(body.get("propagationPolicy")),
        "preconditions": {"uid": _str(pre.get("uid")), "resource_version": _str(pre.get("resourceVersion"))},
    }


def _status_summary(status: Mapping[str, Any], *, partial: bool) -> dict[str, Any]:
    """The pod status fields a write carries, read as the pod normalizer reads them (only the keys present;
    conditions and containers through ``normalize_pod`` itself, when the write has any)."""
    summary: dict[str, Any] = {"partial": partial}
    if "phase" in status:
        summary["phase"] = _k8s_str(status.get("phase"))
    if "reason" in status:
        summary["reason"] = _k8s_str(status.get("reason"))
    if "message" in status:
        summary["message"] = _text(_k8s_str(status.get("message")))
    if "startTime" in status:
        summary["start_time"] = normalize_time(status.get("startTime"))
    lists = "conditions" in status, any(k in status for k in _STATUS_LISTS)
    if any(lists):
        normalized = normalize_pod({"metadata": {"name": "_", "uid": "_"}, "status": status})
        if lists[0]:
            summary["conditions"] = normalized["conditions"]
        if lists[1]:
            summary["containers"] = normalized["containers"]
    return summary


_STATUS_LISTS: Final = ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")


def _k8s_str(value: Any) -> str | None:
    """A string field as ``k8s_objects`` renders it (numbers and booleans as text; "" kept)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _node_change(verb: str, request: Any) -> dict[str, Any] | None:
    """Cordon state a nodes write sets: from a patch (strategic merge, merge or JSON patch) or a whole Node.

    ``unschedulable`` / ``unschedulable_taint``: True / False when the write sets them, None when it does
    not touch them. ``change`` is ``cordon`` / ``uncordon`` for a patch that sets either; a whole-object
    ``update`` states the result only (``change`` None: compare with the node before)."""
    unschedulable: bool | None = None
    taint: bool | None = None
    if isinstance(request, list):  # JSON patch
        for op in request:
            op = _map(op)
            path, kind, value = _str(op.get("path")) or "", _str(op.get("op")), op.get("value")
            if path == "/spec/unschedulable":
                unschedulable = kind != "remove" and value is True
            elif path == "/spec/taints" and kind in ("add", "replace"):
                taint = _has_unschedulable_taint(value)
            elif path == "/spec/taints" and kind == "remove":
                taint = False
            elif path == "/spec/taints/-" and kind == "add" and _taint_key(value) == UNSCHEDULABLE_TAINT:
                taint = True
    elif isinstance(request, Mapping):
        spec = request.get("spec")
        if isinstance(spec, Mapping):
            if "unschedulable" in spec:
                unschedulable = spec.get("unschedulable") is True
            elif verb == "update":
                unschedulable = False
            if "taints" in spec:
                taint = _has_unschedulable_taint(spec.get("taints"))
            elif verb == "update":
                taint = False
    if unschedulable is None and taint is None:
        return None
    change = None
    if verb != "update":
        if unschedulable is True or (taint is True and unschedulable is None):
            change = "cordon"
        elif unschedulable is False or (taint is False and unschedulable is None):
            change = "uncordon"
    return {"unschedulable": unschedulable, "unschedulable_taint": taint, "change": change}


def _taint_key(value: Any) -> str | None:
    return _str(_map(value).get("key"))


def _has_unschedulable_taint(value: Any) -> bool:
    return isinstance(value, list) and any(_taint_key(t) == UNSCHEDULABLE_TAINT for t in value)


def _strip_version(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without metadata.resourceVersion: the version an update *sent* is the one it replaced."""
    meta = {k: v for k, v in _map(obj.get("metadata")).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _gone(obj: Mapping[str, Any]) -> bool:
    """A deleted object that the delete removed at once (no grace left, no finalizers)."""
    meta = _map(obj.get("metadata"))
    if meta.get("finalizers"):
        return False
    return meta.get("deletionTimestamp") is None or _int(meta.get("deletionGracePeriodSeconds")) == 0


def _deleted_by_update(obj: Mapping[str, Any]) -> bool:
    """An update that left a deleting object with no finalizers and no grace: the API server removes it in
    that same request (the generic registry's ``shouldDeleteDuringUpdate``), so no DELETE is audited: the
    removal of a pod's last finalizer after its kubelet was done."""
    meta = _map(obj.get("metadata"))
    return (
        meta.get("deletionTimestamp") is not None
        and not meta.get("finalizers")
        and _int(meta.get("deletionGracePeriodSeconds")) == 0
    )


# -------------------------------------------------------------------------------------------- parser


MAX_IGNORED_SHAPES: Final = 1000
OTHER_SHAPES: Final = "(other shapes)"
TOP_IGNORED: Final = 10


def top_ignored(ignored: Counter[str], n: int = TOP_IGNORED) -> list[tuple[str, int]]:
    """The ``n`` most frequent shapes of the events read and not followed, with their counts (ties by
    shape, so the list is the same whatever order the events came in)."""
    return sorted(ignored.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


@dataclass
class AuditParse:
    """What ``parse_audit`` made of one input: observations and what was skipped or rejected."""

    observations: list[Observation]
    events: int
    used: int
    skipped: Counter[str]
    rejected: Counter[str]
    examples: list[str]
    unpaired: int
    ignored: Counter[str] = field(default_factory=Counter)


@dataclass
class AuditParser:
    """Audit events to observations, one record at a time; keeps counts of everything it did not use.

    Feed it lines (``read_lines``, for files of any size), whole bodies (``read_bytes``) or decoded JSON
    documents (``feed_document``); each returns the observations of what it read. ``close`` ends the input
    (counts the RequestReceived events that never completed). An instance holds per-input state (pairing,
    the last fingerprint of each node), so use one per input.
    """

    max_document_bytes: int = DEFAULT_MAX_DOCUMENT
    events: int = 0  # audit events read, any stage
    used: int = 0  # events that gave at least one observation
    observations: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    rejected: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    unpaired: int = 0  # RequestReceived events with no completion in the input (set by close)
    # What was read and not followed, by shape (``verb group/resource/subresource``, or ``verb /path`` for
    # non-resource URLs): a person reads the most frequent ones (``top_ignored``) to see what podlife did
    # not use. Bounded: shapes past MAX_IGNORED_SHAPES distinct ones count under "(other shapes)".
    ignored: Counter[str] = field(default_factory=Counter)
    _open: dict[str, None] = field(default_factory=dict, repr=False)
    _node_fingerprints: dict[str, str] = field(default_factory=dict, repr=False)

    def _ignore(self, shape: str) -> None:
        if shape in self.ignored or len(self.ignored) < MAX_IGNORED_SHAPES:
            self.ignored[shape] += 1
        else:
            self.ignored[OTHER_SHAPES] += 1

    # ---------------------------------------------------------------------------------------- inputs

    def read_lines(self, lines: Iterable[bytes | str]) -> Iterator[Observation]:
        """Observations from a stream of lines (a file read line by line, line endings kept or not).

        The first non-blank line decides: valid JSON means JSON Lines (one document per line); a line that
        starts a JSON document without ending it means one multi-line document (read whole, up to
        ``max_document_bytes``); anything else is read as legacy text lines."""
        mode = ""
        held: list[bytes] = []
        held_size = 0
        for number, raw in enumerate(lines, start=1):
            data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
            stripped = data.strip()
            if not mode and stripped.startswith(_BOM):
                data = stripped = stripped[len(_BOM) :]
            if mode == "document":
                held_size += len(data)
                if held_size > self.max_document_bytes:
                    self._reject("document_too_large", f"line {number}: over {self.max_document_bytes} bytes")
                    mode, held = "dropped", []
                    continue
                held.append(data)
                continue
            if mode == "dropped":
                continue
            if not stripped:
                if mode:
                    self.skipped["blank"] += 1
                continue
            if not mode:
                if stripped[:1] in (b"{", b"["):
                    try:
                        document = orjson.loads(stripped)
                    except orjson.JSONDecodeError:
                        mode, held, held_size = "document", [data], len(data)
                        continue
                    mode = "jsonl"
                    yield from self.feed_document(document, where=f"line {number}")
                    continue
                mode = "text"
            if mode == "jsonl":
                yield from self._line(stripped, f"line {number}")
            else:
                yield from self._legacy_line(stripped, where=f"line {number}")
        if mode == "document":
            yield from self.read_bytes(b"".join(held))

    def _line(self, line: bytes, where: str) -> list[Observation]:
        """One JSON Lines line: a document, or a rejection naming the line."""
        try:
            document = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            self._reject("bad_json", f"{where}: {exc}")
            return []
        return self.feed_document(document, where=where)

    def read_bytes(self, data: bytes) -> Iterator[Observation]:
        """Observations from a whole body: one JSON document (EventList, array, envelope), JSON Lines,
        concatenated documents, or legacy text lines; gzip (every member) is unpacked first, up to
        ``max_document_bytes``."""
        if data[:2] == _GZIP_MAGIC:
            unpacked = self._gunzip(data)
            if unpacked is None:
                return
            data = unpacked
        stripped = data.strip()
        if stripped.startswith(_BOM):
            stripped = stripped[len(_BOM) :]
        if not stripped:
            return
        if stripped[:1] not in (b"{", b"["):
            yield from self.read_lines(data.splitlines())
            return
        try:
            document = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            first = stripped.split(b"\n", 1)[0].strip()
            try:
                orjson.loads(first)
            except orjson.JSONDecodeError:  # documents back to back, or one cut short
                yield from self._concatenated(stripped.decode("utf-8", "replace"))
                return
            yield from self.read_lines(stripped.split(b"\n"))  # JSON Lines: the first line decides so
            return
        yield from self.feed_document(document, where="document")

    def _gunzip(self, data: bytes) -> bytes | None:
        out = bytearray()
        pending = data
        while pending[:2] == _GZIP_MAGIC:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                out += inflater.decompress(pending, self.max_document_bytes + 1 - len(out))
            except zlib.error as exc:
                self._reject("bad_gzip", f"gzip data: {exc}")
                return bytes(out) if out else None
            if len(out) > self.max_document_bytes or inflater.unconsumed_tail:
                self._reject("document_too_large", f"gzip data inflates past {self.max_document_bytes} bytes")
                return None
            if not inflater.eof:
                self._reject("bad_gzip", "gzip data is cut short; kept what came before")
                break
            pending = inflater.unused_data
        return bytes(out)

    def _concatenated(self, text: str) -> Iterator[Observation]:
        """JSON values one after another (JSON Lines, or documents written back to back with no separator,
        as Firehose delivers CloudWatch records). A value that does not decode is skipped to the next line."""
        decoder = json.JSONDecoder(parse_constant=_no_constant, parse_int=_orjson_int)
        at, end, index = 0, len(text), 0
        while at < end:
            while at < end and text[at].isspace():
                at += 1
            if at >= end:
                break
            index += 1
            try:
                document, stop = decoder.raw_decode(text, at)
            except (ValueError, RecursionError) as exc:
                newline = text.find("\n", at)
                self._reject("bad_json", f"value {index}: {str(exc)[:200]}")
                if newline == -1:
                    break
                at = newline + 1
                continue
            at = stop
            yield from self.feed_document(document, where=f"value {index}")

    def feed_document(self, document: Any, *, where: str = "document", depth: int = 0) -> list[Observation]:
        """Observations from one decoded JSON document: an Event, an EventList, an array, or a known
        envelope (GKE LogEntry, AKS records or AKSAudit row, CloudWatch export or subscription message)."""
        if depth > MAX_DEPTH:
            self._reject("too_deep", where)
            return []
        if isinstance(document, list):
            out: list[Observation] = []
            for i, item in enumerate(document):
                out += self.feed_document(item, where=f"{where} item {i}", depth=depth + 1)
            return out
        if not isinstance(document, Mapping):
            self.skipped["not_audit"] += 1
            return []
        kind = document.get("kind")
        if "auditID" in document or (kind == "Event" and _is_audit_version(document.get("apiVersion"))):
            return self._event(document, where=where, envelope="native")
        if kind == "EventList" or (
            isinstance(document.get("items"), list) and _is_audit_version(document.get("apiVersion"))
        ):
            if not _is_audit_version(document.get("apiVersion"), missing_ok=True):
                self._reject("wrong_api_version", f"{where}: apiVersion {document.get('apiVersion')!r}")
                return []
            return self.feed_document(document.get("items") or [], where=where, depth=depth + 1)
        if isinstance(document.get("protoPayload"), Mapping):
            return self._gke(document, where=where)
        if isinstance(document.get("records"), list):  # AKS diagnostic settings (Event Hub, storage)
            return self.feed_document(document["records"], where=where, depth=depth + 1)
        if isinstance(document.get("properties"), Mapping) and "category" in document:
            return self._aks_record(document, where=where, depth=depth)
        if "AuditId" in document:
            return self._aks_row(document, where=where)
        if document.get("messageType") == "CONTROL_MESSAGE":
            self.skipped["control_message"] += 1
            return []
        for key in ("logEvents", "events"):  # CloudWatch Logs: subscription payload; filter-log-events output
            if isinstance(document.get(key), list):
                return self.feed_document(document[key], where=where, depth=depth + 1)
        for key in ("message", "log", "Message", "MESSAGE"):  # one shipped log record holding the Event
            value = document.get(key)
            if isinstance(value, str) and value.lstrip()[:1] == "{":
                try:
                    inner = orjson.loads(value)
                except orjson.JSONDecodeError as exc:
                    self._reject("bad_json", f"{where} {key}: {exc}")
                    return []
                return self.feed_document(inner, where=where, depth=depth + 1)
        self.skipped["not_audit"] += 1
        return []

    def close(self) -> None:
        """End of input: requests seen received and never completed are counted in ``unpaired``."""
        self.unpaired += len(self._open)
        self._open.clear()

    # ---------------------------------------------------------------------------------------- envelopes

    def _aks_record(self, record: Mapping[str, Any], *, where: str, depth: int) -> list[Observation]:
        category = _str(record.get("category")) or ""
        if category.lower() not in ("kube-audit", "kube-audit-admin"):
            self.skipped["other_category"] += 1
            return []
        log = _map(record.get("properties")).get("log")
        if isinstance(log, Mapping):
            return self.feed_document(log, where=where, depth=depth + 1)
        if not isinstance(log, str):
            self.skipped["not_audit"] += 1
            return []
        try:
            event = orjson.loads(log)
        except orjson.JSONDecodeError as exc:
            self._reject("bad_json", f"{where} properties.log: {exc}")
            return []
        if not isinstance(event, Mapping):
            self.skipped["not_audit"] += 1
            return []
        return self._event(event, where=where, envelope="aks")

    def _aks_row(self, row: Mapping[str, Any], *, where: str) -> list[Observation]:
        """A row of the AKSAudit / AKSAuditAdmin table (Azure Monitor): the Event's fields in PascalCase."""
        response_object = _object(row.get("ResponseObject"))
        request_object = _object(row.get("RequestObject"))
        truncated = "skipped-too-big-size-object" in (row.get("ResponseObject"), row.get("RequestObject"))
        annotations = dict(_map(_object(row.get("Annotations"))))
        if truncated:
            annotations["audit.k8s.io/truncated"] = "true"
        event = {
            "level": row.get("Level"),
            "auditID": row.get("AuditId"),
            "stage": row.get("Stage"),
            "requestURI": row.get("RequestUri"),
            "verb": row.get("Verb"),
            "user": _object(row.get("User")),
            "impersonatedUser": _object(row.get("ImpersonatedUser")),
            "sourceIPs": _object(row.get("SourceIps")),
            "userAgent": row.get("UserAgent"),
            "objectRef": _object(row.get("ObjectRef")),
            "responseStatus": _object(row.get("ResponseStatus")),
            "requestObject": request_object if isinstance(request_object, Mapping | list) else None,
            "responseObject": response_object if isinstance(response_object, Mapping) else None,
            "requestReceivedTimestamp": row.get("RequestReceivedTime"),
            "stageTimestamp": row.get("StageReceivedTime"),
            "annotations": annotations,
        }
        return self._event(event, where=where, envelope="aks_table")

    def _gke(self, entry: Mapping[str, Any], *, where: str) -> list[Observation]:
        """A Cloud Audit Logs LogEntry of GKE's API server (k8s-facts.md §13.7), mapped to Event fields.

        GKE gives no stage (entries are written when a request completes), no level, no groups and no HTTP
        code: ``status.code`` is a google.rpc code (0 = OK), kept as ``rpc_code``. A ``response`` that is
        itself a Status object does carry the HTTP code, and is read as the responseStatus."""
        proto = _map(entry.get("protoPayload"))
        method = _str(proto.get("methodName")) or ""
        service = _str(proto.get("serviceName"))
        if service not in (None, "k8s.io") or not method.startswith("io.k8s."):
            self.skipped["not_audit"] += 1
            return []
        resource_name = _str(proto.get("resourceName")) or ""
        parts = [p for p in resource_name.split("/") if p]
        ref: dict[str, Any] | None = None
        if len(parts) >= 3:
            group = "" if parts[0] == "core" else parts[0]
            rest = parts[2:]
            namespace = None
            if len(rest) >= 3 and rest[0] == "namespaces":
                namespace, rest = rest[1], rest[2:]
            ref = {
                "apiGroup": group,
                "apiVersion": parts[1],
                "namespace": namespace,
                "resource": rest[0] if rest else None,
                "name": rest[1] if len(rest) > 1 else None,
                "subresource": "/".join(rest[2:]) or None,
            }
        request, response = _untyped(proto.get("request")), _untyped(proto.get("response"))
        status = proto.get("status")
        rpc_code = _int(_map(status).get("code")) if isinstance(status, Mapping) else None
        if isinstance(status, Mapping) and rpc_code is None:
            rpc_code = 0  # google.rpc.Status leaves code 0 (OK) out of its JSON form
        response_status: dict[str, Any] = {"message": _map(status).get("message")}
        if isinstance(response, Mapping) and response.get("kind") == "Status":
            response_status = dict(response)
            response = None
        metadata = _map(proto.get("requestMetadata"))
        labels = _map(entry.get("labels"))
        when = entry.get("timestamp") or entry.get("receiveTimestamp")
        event = {
            "level": None,
            "auditID": entry.get("insertId") or _map(entry.get("operation")).get("id"),
            "stage": STAGE_COMPLETE,
            "requestURI": "/" + resource_name if resource_name else None,
            "verb": method.rsplit(".", 1)[-1],
            "user": {"username": _map(proto.get("authenticationInfo")).get("principalEmail")},
            "sourceIPs": [metadata.get("callerIp")] if metadata.get("callerIp") else None,
            "userAgent": metadata.get("callerSuppliedUserAgent"),
            "objectRef": ref,
            "responseStatus": response_status,
            "requestObject": request,
            "responseObject": response,
            "requestReceivedTimestamp": None,
            "stageTimestamp": when,
            "annotations": dict(labels),
        }
        return self._event(event, where=where, envelope="gke", rpc_code=rpc_code)

    def _legacy_line(self, line: bytes, *, where: str) -> Iterator[Observation]:
        text = line.decode("utf-8", "replace")
        m = _LEGACY.match(text)
        if m is None:
            self._reject("not_audit_text", f"{where}: {text[:80]!r}")
            return
        fields = {key: _go_unquote(value) for key, value in _LEGACY_PAIR.findall(m.group("rest"))}
        user = fields.get("user")
        groups = fields.get("groups")
        impersonated = fields.get("as")
        asgroups = fields.get("asgroups")
        path = request_path(fields.get("uri") or "")
        ref = None
        if path is not None:
            ref = {
                "apiGroup": path.api_group,
                "apiVersion": path.api_version,
                "namespace": path.namespace,
                "resource": path.resource,
                "name": path.name,
                "subresource": path.subresource,
            }
        response = fields.get("response")
        event = {
            "auditID": fields.get("id"),
            "stage": fields.get("stage"),
            "level": None,
            "verb": fields.get("method"),
            "requestURI": fields.get("uri"),
            "user": {
                "username": None if user in (None, "<none>") else user,
                "groups": None
                if groups in (None, "<none>")
                else [_go_unquote(g) for g in _GO_QUOTED.findall(groups)],
            },
            "impersonatedUser": None
            if impersonated in (None, "<self>")
            else {
                "username": impersonated,
                "groups": None
                if asgroups in (None, "<lookup>")
                else [_go_unquote(g) for g in _GO_QUOTED.findall(asgroups)],
            },
            "sourceIPs": None if fields.get("ip") in (None, "<unknown>") else [fields.get("ip")],
            "userAgent": fields.get("user-agent"),
            "objectRef": ref,
            "responseStatus": None if response in (None, "<deferred>") else {"code": _int(response)},
            "requestReceivedTimestamp": m.group("time"),
            "stageTimestamp": None,
        }
        yield from self._event(event, where=where, envelope="legacy")

    # ---------------------------------------------------------------------------------------- one event

    def _event(
        self, event: Mapping[str, Any], *, where: str, envelope: str, rpc_code: int | None = None
    ) -> list[Observation]:
        self.events += 1
        if not _is_audit_version(event.get("apiVersion"), missing_ok=True):
            self._reject("wrong_api_version", f"{where}: apiVersion {event.get('apiVersion')!r}")
            return []
        audit_id = _str(event.get("auditID"))
        if audit_id is None:
            self._reject("no_audit_id", where)
            return []
        stage = _str(event.get("stage"))
        if stage is None:
            self._reject("no_stage", f"{where} ({audit_id})")
            return []
        verb = (_str(event.get("verb")) or "").lower()
        ref = _map(event.get("objectRef"))
        group = _str(ref.get("apiGroup")) or ""
        resource = _str(ref.get("resource")) or ""
        subresource = _str(ref.get("subresource")) or ""
        if not ref or not resource:
            self.skipped["non_resource"] += 1
            path = (_str(event.get("requestURI")) or "?").split("?", 1)[0]
            self._ignore(f"{verb or '?'} {path[:80]}")
            return []
        followed = FOLLOWED.get((group, resource))
        node_status = (group, resource, subresource) == ("", "nodes", "status")
        shape = f"{verb or '?'} {group + '/' if group else ''}{resource}{'/' + subresource if subresource else ''}"
        if followed is None:
            self.skipped["other_resource"] += 1
            self._ignore(shape)
            return []
        if subresource not in followed and not node_status:
            self.skipped["other_subresource"] += 1
            self._ignore(shape)
            return []
        if verb not in WRITE_VERBS:
            self.skipped["read_verb"] += 1
            self._ignore(shape)
            return []
        if stage == STAGE_RECEIVED:
            self.skipped["request_received"] += 1
            if len(self._open) < MAX_OPEN_REQUESTS:
                self._open[audit_id] = None
            return []
        self._open.pop(audit_id, None)
        if stage == STAGE_STARTED:
            self.skipped["response_started"] += 1
            return []
        if stage not in COMPLETED_STAGES:
            self.skipped["unknown_stage"] += 1
            return []
        requested_at = _time(event.get("requestReceivedTimestamp"))
        completed_at = _time(event.get("stageTimestamp"))
        at = completed_at or requested_at
        if at is None:
            self._reject("no_time", f"{where} ({audit_id})")
            return []
        try:
            made = self._observations(
                event,
                ref,
                audit_id,
                stage,
                verb,
                group,
                resource,
                subresource,
                at,
                requested_at,
                completed_at,
                envelope,
                rpc_code,
                node_status,
            )
        except ValueError as exc:  # a body the normalizers refuse, or an observation breaking the contract
            self._reject("invalid", f"{where} ({audit_id}): {str(exc)[:200]}")
            return []
        if made:
            self.used += 1
            self.observations += len(made)
        elif node_status:
            self.skipped["node_heartbeat"] += 1
        return made

    def _observations(
        self,
        event: Mapping[str, Any],
        ref: Mapping[str, Any],
        audit_id: str,
        stage: str,
        verb: str,
        group: str,
        resource: str,
        subresource: str,
        at: datetime,
        requested_at: datetime | None,
        completed_at: datetime | None,
        envelope: str,
        rpc_code: int | None,
        node_status: bool,
    ) -> list[Observation]:
        level = _str(event.get("level"))
        uri = _str(event.get("requestURI")) or ""
        query = _query(uri)
        request = _object(event.get("requestObject"))
        response = _object(event.get("responseObject"))
        status = _map(_object(event.get("responseStatus")))
        code = _int(status.get("code"))
        status_word = _str(status.get("status"))
        if code is not None:
            succeeded: bool | None = 200 <= code < 300 and status_word != "Failure"
        elif rpc_code is not None:
            succeeded = rpc_code == 0
        else:
            succeeded = None
        if stage == STAGE_PANIC:
            succeeded = False
        details = _map(status.get("details"))
        raw_causes = details.get("causes")
        causes = [
            {
                "reason": _str(c.get("reason")),
                "message": _text(c.get("message")),
                "field": _str(c.get("field")),
            }
            for c in map(_map, raw_causes[:MAX_LIST] if isinstance(raw_causes, list) else [])
        ]
        message = _text(status.get("message"))
        body = _map(request)
        dry_run = (
            bool(query.get("dryRun"))
            or bool(_strings(body.get("dryRun")))
            or bool(_strings(_map(body.get("deleteOptions")).get("dryRun")))
        )
        user = _user(event.get("user"))
        impersonated = _user(event.get("impersonatedUser"))
        annotations = _map(event.get("annotations"))
        authz_reason = _text(annotations.get("authorization.k8s.io/reason"))
        effective = (impersonated or user or {}).get("username")
        actor = actor_of(effective, authz_reason, (impersonated or user or {}).get("groups") or ())
        namespace = _str(ref.get("namespace"))
        name = _str(ref.get("name")) or _str(_map(_map(response).get("metadata")).get("name"))
        kind = OBJECT_KINDS[resource]

        snapshots, shown = (
            ([], [])
            if dry_run or not succeeded
            else self._snapshots(verb, kind, subresource, request, response, at)
        )
        if node_status:
            return snapshots  # heartbeats: only a changed Node body is worth keeping

        uid = (
            _str(ref.get("uid"))
            or _str(_map(body.get("metadata")).get("uid"))
            or _str(_map(body.get("preconditions")).get("uid"))
            or _str(_map(_map(body.get("deleteOptions")).get("preconditions")).get("uid"))
        )
        if uid is None and isinstance(response, Mapping) and response.get("kind") == kind:
            uid = _str(_map(response.get("metadata")).get("uid"))
        if uid is not None and (problem := name_problem("pod_uid", uid)) is not None:
            # The pod is joined by this UID (timelines.lifecycle.audit_evidence): one that is not a UID is refused
            # here, where it enters, rather than stored to fail every derivation of the name.
            raise ValueError(problem.replace("pod_uid", "the object's uid", 1))
        node: str | None = None
        binding_node: str | None = None
        if resource == "nodes":
            node = name
        elif subresource == "binding":
            binding_node = _str(_map(body.get("target")).get("name"))
            node = binding_node
        elif actor["kind"] == "kubelet":
            node = actor["name"]

        payload: dict[str, Any] = {
            "envelope": envelope,
            "audit_id": audit_id,
            "stage": stage,
            "level": level,
            "verb": verb,
            "api_group": group,
            "api_version": _str(ref.get("apiVersion")),
            "resource": resource,
            "subresource": subresource or None,
            "namespace": namespace,
            "name": name,
            "uid": uid,
            "request_uri": _text(uri) or None,
            "requested_at": _iso(requested_at),
            "completed_at": _iso(completed_at),
            "user": user,
            "impersonated_user": impersonated,
            "actor": actor,
            "user_agent": _text(event.get("userAgent")),
            "source_ips": _strings(event.get("sourceIPs")),
            "code": code,
            "rpc_code": rpc_code,
            "status": status_word,
            "reason": _str(status.get("reason")),
            "message": message,
            "causes": causes,
            "retry_after_seconds": _int(details.get("retryAfterSeconds")),
            "succeeded": succeeded,
            "dry_run": dry_run,
            "authorization": None
            if "authorization.k8s.io/decision" not in annotations
            else {"decision": _str(annotations.get("authorization.k8s.io/decision")), "reason": authz_reason},
            "truncated": _str(annotations.get("audit.k8s.io/truncated")) == "true",
            "delete": None,
            "eviction": None,
            "node_change": None,
            "status_write": None,
            "binding_node": binding_node,
            "snapshots": shown,
        }
        if verb in ("delete", "deletecollection"):
            payload["delete"] = _delete_options(request, query, level, succeeded)
        if subresource == "eviction" and verb == "create":
            payload["eviction"] = _eviction(code, rpc_code, status_word, message, causes, request)
        if resource == "nodes" and verb in ("patch", "update", "create"):
            payload["node_change"] = _node_change(verb, request)
        if resource == "pods" and subresource == "status" and verb in ("patch", "update"):
            if isinstance(request, Mapping) and isinstance(request.get("status"), Mapping):
                payload["status_write"] = _status_summary(request["status"], partial=verb == "patch")
            elif isinstance(request, list):
                paths = [_str(_map(op).get("path")) for op in request[:MAX_LIST]]
                payload["status_write"] = {"partial": True, "json_patch_paths": [p for p in paths if p]}
        key_id = audit_id if len(audit_id) <= 100 else digest_key(audit_id)
        # The auditID comes from the client's Audit-ID header when it sends one: the digest of what the
        # request was keeps two different requests that reuse an ID apart, and the same event re-sent equal.
        fingerprint = _fingerprint(verb, uri, effective, payload["requested_at"])
        audit = Observation(
            kind=Kind.AUDIT,
            source=Source.AUDIT,
            observed_at=at,
            dedupe_key=f"audit:{key_id}:{stage}:{fingerprint}",
            pod_uid=None,  # see docs/audit.md: joined to pods by namespace/name/time, the uid is in the payload
            node=node,
            namespace=namespace,
            name=name,
            payload=payload,
        )
        return [audit, *snapshots]

    def _snapshots(
        self, verb: str, kind: str, subresource: str, request: Any, response: Any, at: datetime
    ) -> tuple[list[Observation], list[str]]:
        """The object snapshots a successful write shows: its response body (RequestResponse level), else the
        whole object an ``update`` sent with its resourceVersion (the server took exactly that state); and
        the dedupe keys of all of them, also of a Node state left out as a heartbeat (equal to the one the
        parser kept before): what an event shows does not depend on what was read before it."""
        if subresource not in ("", "status", "ephemeralcontainers", "resize"):
            return [], []  # eviction and binding answer with a Status
        bodies: list[tuple[Mapping[str, Any], str, str | None]] = []  # (object, watch type, replaced version)
        if isinstance(response, Mapping) and response.get("kind") == kind:
            if verb == "create":
                watch = "ADDED"
            elif verb in ("delete", "deletecollection"):
                watch = "DELETED" if _gone(response) else "MODIFIED"
            elif subresource == "" and _deleted_by_update(response):
                watch = "DELETED"
            else:
                watch = "MODIFIED"
            bodies.append((response, watch, None))
        elif isinstance(response, Mapping) and response.get("kind") == f"{kind}List":
            items = response.get("items")
            for item in items if isinstance(items, list) else []:
                if isinstance(item, Mapping):
                    bodies.append(({"kind": kind, **item}, "DELETED" if _gone(item) else "MODIFIED", None))
        elif (
            verb == "update"
            and isinstance(request, Mapping)
            and request.get("kind") == kind
            and (replaced := _str(_map(request.get("metadata")).get("resourceVersion")))
        ):
            bodies.append((_strip_version(request), "MODIFIED", replaced))
        out: list[Observation] = []
        shown: list[str] = []
        for body, watch, replaced in bodies:
            if kind == "Pod":
                obs = pod_observation(body, watch_type=watch, observed_at=at, source=Source.AUDIT)
            elif kind == "Node":
                obs = node_observation(body, watch_type=watch, observed_at=at, source=Source.AUDIT)
            else:
                obs = pdb_observation(body, watch_type=watch, observed_at=at, source=Source.AUDIT)
            if replaced is not None:
                # The state written over resourceVersion R: one successful update can follow R (a second one
                # sent with R fails with 409), so this names the state even though its own version is not in
                # the event, and a state that comes back later is not mistaken for the earlier one.
                version = replaced if len(replaced) <= 64 else digest_key(replaced)
                obs = replace(obs, dedupe_key=f"{obs.kind}:{obs.payload['uid']}:after:{version}")
            shown.append(obs.dedupe_key)
            if kind == "Node":
                fingerprint = str(obs.payload.get("fingerprint"))
                if watch != "DELETED" and self._node_fingerprints.get(obs.payload["name"]) == fingerprint:
                    continue  # a heartbeat: nothing podlife keeps changed
                self._node_fingerprints[obs.payload["name"]] = fingerprint
            out.append(obs)
        return out, shown

    def _reject(self, reason: str, where: str) -> None:
        self.rejected[reason] += 1
        if sum(1 for e in self.examples if e.startswith(f"{reason}:")) < MAX_EXAMPLES:
            self.examples.append(f"{reason}: {where}")


def _fingerprint(*parts: str | None) -> str:
    """12 hex digits of sha1 over the parts (what ``digest_key`` computes, without its generality)."""
    text = "\x1f".join(part or "" for part in parts)
    return hashlib.sha1(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()[:12]


def _no_constant(name: str) -> Any:
    """NaN and Infinity are not JSON: refused here as orjson refuses them everywhere else."""
    raise ValueError(f"{name} is not valid JSON")


def _orjson_int(text: str) -> int | float:
    """Integers as orjson reads them (exact within 64 bits, a float beyond), so a document reads the same
    whichever decoder meets it."""
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(text)


def _is_audit_version(value: Any, *, missing_ok: bool = False) -> bool:
    if value is None or value == "":
        return missing_ok
    return isinstance(value, str) and value.startswith("audit.k8s.io/")


def _untyped(value: Any) -> Any:
    """A Cloud Logging body without its ``@type`` key."""
    if isinstance(value, Mapping):
        return {k: v for k, v in value.items() if k != "@type"}
    return value


# -------------------------------------------------------------------------------------------- legacy text

# --audit-log-format=legacy, pkg/audit/format.go: `<RFC3339Nano> AUDIT: id="…" stage="…" ip="…" method="…"
# user="…" groups="…" as="…" asgroups="…" user-agent="…" namespace="…" uri="…" response="…"`, values
# quoted with Go's %q (groups: a comma-separated list of %q strings, quoted again).
_LEGACY: Final = re.compile(r"^(?P<time>\S+) AUDIT: (?P<rest>.*)$")
_LEGACY_PAIR: Final = re.compile(r'([a-z-]+)="((?:[^"\\]|\\.)*)"')
_GO_QUOTED: Final = re.compile(r'"((?:[^"\\]|\\.)*)"')
_GO_ESCAPE: Final = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)", re.S)
_SIMPLE_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}


def _go_unquote(text: str) -> str:
    """The string a Go ``%q`` rendering stands for (the quotes already removed)."""

    def one(m: re.Match[str]) -> str:
        escape = m.group(1)
        if escape in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[escape]
        try:
            if escape[0] in "xuU":
                return chr(int(escape[1:], 16))
            if len(escape) == 3 and escape[0] in "01234567":
                return chr(int(escape, 8))
        except (ValueError, OverflowError):
            return "\ufffd"
        return escape

    return _GO_ESCAPE.sub(one, text)


# -------------------------------------------------------------------------------------------- one call


def parse_audit(data: bytes | Iterable[bytes | str]) -> AuditParse:
    """Everything ``AuditParser`` makes of one whole input (bytes of a body, or lines of a file)."""
    parser = AuditParser()
    observations = list(parser.read_bytes(data) if isinstance(data, bytes) else parser.read_lines(data))
    parser.close()
    return AuditParse(
        observations=observations,
        events=parser.events,
        used=parser.used,
        skipped=parser.skipped,
        rejected=parser.rejected,
        examples=parser.examples,
        ignored=parser.ignored,
        unpaired=parser.unpaired,
    )
