"""Kubernetes API objects (raw JSON dicts or YAML-loaded dicts) to normalized payloads and observations.

Covers Pods, Events (core/v1 and events.k8s.io/v1), Nodes, PodDisruptionBudgets (policy/v1) and the
apps/v1 workloads (Deployment, StatefulSet, DaemonSet, ReplicaSet). Payload shapes are documented in
``docs/observations.md``. Times are normalized to ISO 8601 with an explicit ``+00:00`` offset, keeping
microseconds where the source had them.

Invalid objects raise ``ValueError`` naming the object and what was expected; callers count and skip
them. Nothing else raises.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final

import orjson

from timelines.lifecycle.observation import Kind, Observation, digest_key

__all__ = [
    "SUPPORTED_KINDS",
    "WORKLOAD_KINDS",
    "event_observation",
    "newest_timestamp",
    "node_observation",
    "normalize_event",
    "normalize_node",
    "normalize_pdb",
    "normalize_pod",
    "normalize_time",
    "normalize_workload",
    "object_observation",
    "parse_time",
    "pdb_observation",
    "pod_observation",
    "workload_observation",
]

WORKLOAD_KINDS: Final = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"})

# RFC 3339 (API), with a space instead of T and a Go-style " +0000 UTC m=+1.2" tail tolerated.
_TIME = re.compile(
    r"\s*(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?\s*(Z|z|[+-]\d{2}:?\d{2}|UTC)?"
)


def parse_time(value: Any) -> datetime | None:
    """A timezone-aware UTC datetime from an API time (RFC 3339 string or a YAML-loaded datetime).

    Fractions beyond microseconds are truncated; a missing offset means UTC; naive datetimes are taken
    as UTC. Returns None for None, empty, the Go zero time and anything unparseable. Never raises.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        at = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return None if at.year <= 1 else at.astimezone(UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if not isinstance(value, str):
        return None
    m = _TIME.match(value)
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, off = m.groups()
    try:
        micro = int((frac or "0")[:6].ljust(6, "0"))
        at = datetime(int(y), int(mo), int(d), int(h), int(mi), min(int(s), 59), micro, tzinfo=UTC)
        if off and off not in ("Z", "z", "UTC"):
            sign = -1 if off[0] == "-" else 1
            digits = off[1:].replace(":", "")
            at -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]))
    except (ValueError, OverflowError):
        return None
    if at.year <= 1:  # Go's zero time "0001-01-01 00:00:00 +0000 UTC"
        return None
    return at


def normalize_time(value: Any) -> str | None:
    """``parse_time`` rendered as ISO 8601 with ``+00:00`` (microseconds only when non-zero)."""
    if value is None:  # most optional times of a snapshot are absent
        return None
    if isinstance(value, str):
        return normalize_time_text(value)
    at = parse_time(value)
    return at.isoformat() if at is not None else None


@functools.lru_cache(maxsize=65536)
def normalize_time_text(value: str) -> str | None:
    """``normalize_time`` of a string.

    The hot path of every pod snapshot: the API's own RFC 3339 form, which the C parser reads. The same
    creation and transition times repeat in every snapshot of a pod, hence the cache."""
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        parsed = parse_time(value)
        return parsed.isoformat() if parsed is not None else None
    if _API_TIME.fullmatch(value) is not None:
        # The API server's form (UTC, whole seconds), which fromisoformat found valid: ``isoformat`` of it
        # is its own text with the offset spelled out, made here without converting and formatting a time
        # for every new one (each new pod brings several).
        return None if at.year <= 1 else f"{value[:19]}+00:00"
    at = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return None if at.year <= 1 else at.isoformat()


_API_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


# -- small accessors ----------------------------------------------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    # ``type(...) is dict`` first: JSON input is plain dicts, and the ABC check behind isinstance(Mapping)
    # was a visible share of normalizing a pod.
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _items(value: Any) -> list[Any] | tuple[Any, ...]:
    """``value`` itself when it is a list or tuple (only to iterate: nothing is copied), else ()."""
    return value if isinstance(value, list | tuple) else ()


def _str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _int_or_str(value: Any) -> int | str | None:
    """An IntOrString (``minAvailable: 2`` or ``"50%"``)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    return _str(value)


def _str_map(value: Any) -> dict[str, str]:
    return {
        k if type(k) is str else str(k): v if type(v) is str else "" if v is None else str(v)
        for k, v in _map(value).items()
    }


def _kind_of(obj: Mapping[str, Any], fallback: str) -> str:
    kind = obj.get("kind")
    return kind if isinstance(kind, str) and kind else fallback


def _describe(obj: Any, fallback_kind: str) -> str:
    if not isinstance(obj, Mapping):
        return f"{fallback_kind} (a {type(obj).__name__}, not an object)"
    meta = _map(obj.get("metadata"))
    ns, name = meta.get("namespace"), meta.get("name")
    where = f"{ns}/{name}" if ns and name else (name or "<no name>")
    return f"{_kind_of(obj, fallback_kind)} {where}"


def _metadata(obj: Any, kind: str, *, need_uid: bool = True) -> Mapping[str, Any]:
    """``obj.metadata`` after checking the object has a name (and uid); raises ValueError otherwise."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise ValueError(f"{_describe(obj, kind)}: expected a JSON object with metadata")
    meta = obj.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise ValueError(f"{_describe(obj, kind)}: expected a metadata object")
    if not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise ValueError(f"{_describe(obj, kind)}: expected metadata.name (a non-empty string)")
    uid = meta.get("uid")
    if need_uid and (not isinstance(uid, str) or not uid or len(uid) > 64):
        raise ValueError(f"{_describe(obj, kind)}: expected metadata.uid (a string of 1-64 characters)")
    return meta


def _controller(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    for ref in _items(meta.get("ownerReferences")):
        ref = _map(ref)
        if ref.get("controller") is True:
            return {"kind": _str(ref.get("kind")), "name": _str(ref.get("name")), "uid": _str(ref.get("uid"))}
    return None


def _conditions(value: Any) -> list[dict[str, Any]]:
    return [
        {
            "type": _str(cond.get("type")),
            "status": _str(cond.get("status")),
            "reason": _str(cond.get("reason")),
            "message": _str(cond.get("message")),
            "last_transition": normalize_time(cond.get("lastTransitionTime")),
        }
        for cond in map(_map, _items(value))
    ]


def _selector(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, Mapping):
        return None
    exprs = []
    for e in _list(value.get("matchExpressions")):
        e = _map(e)
        exprs.append(
            {
                "key": _str(e.get("key")),
                "operator": _str(e.get("operator")),
                "values": [str(v) for v in _list(e.get("values"))],
            }
        )
    return {"match_labels": _str_map(value.get("matchLabels")), "match_expressions": exprs}


_TIME_KEY = re.compile(r"(Timestamp|Time|At|time)$")


def _walk_times(value: Any, key: str = "") -> Iterator[datetime]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            k = str(k)
            if k == "deletionTimestamp":  # a deadline, handled by newest_timestamp
                continue
            if k == "disruptedPods" and isinstance(v, Mapping):
                yield from (t for t in map(parse_time, v.values()) if t is not None)
                continue
            yield from _walk_times(v, k)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _walk_times(v, key)
    elif key and _TIME_KEY.search(key) and key != "deletionTimestamp":
        at = parse_time(value)
        if at is not None:
            yield at


def newest_timestamp(obj: Mapping[str, Any]) -> datetime | None:
    """The newest time written inside an API object: when an offline snapshot was, at the earliest, taken.

    Looks at every field whose name ends in ``Timestamp``/``Time``/``At`` (creation, conditions,
    container states, managedFields, series, ...) and ``disruptedPods``. ``deletionTimestamp`` is a
    deadline in the future, so the deletion request time (``deletionTimestamp`` minus
    ``deletionGracePeriodSeconds``) is used instead. Returns None when the object has no time at all.
    """
    times = list(_walk_times(obj))
    meta = _map(obj.get("metadata"))
    deadline = parse_time(meta.get("deletionTimestamp"))
    if deadline is not None:
        grace = _int(meta.get("deletionGracePeriodSeconds")) or 0
        times.append(deadline - timedelta(seconds=max(grace, 0)))
    return max(times) if times else None


def _content_digest(obj: Any) -> str:
    try:
        text = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=str)
    except (TypeError, orjson.JSONEncodeError):
        return digest_key(repr(obj))
    return digest_key(text.decode("utf-8", "replace"))


def _object_key(prefix: str, uid: str, meta: Mapping[str, Any], obj: Any, deleted: bool) -> str:
    rv = _str(meta.get("resourceVersion"))
    version = rv if rv else _content_digest(obj)
    key = f"{prefix}:{uid}:{version}"
    return key + ":deleted" if deleted else key


def _observed_at(obj: Mapping[str, Any], observed_at: datetime | None, what: str) -> datetime:
    """``observed_at`` checked, or the newest time inside ``obj``; ``what`` is the kind named in errors."""
    if observed_at is not None:
        if observed_at.tzinfo is None or observed_at.utcoffset() is None:
            raise ValueError(f"{_describe(obj, what)}: observed_at must be timezone-aware")
        return observed_at
    at = newest_timestamp(obj)
    if at is None:
        raise ValueError(
            f"{_describe(obj, what)}: no observed_at given and no timestamp inside the object to place it"
        )
    return at


# -- pods -----------------------------------------------------------------------------------------------


NO_STATE: Final = (None, None, None, None, None, None, None)  # a container state that is not set
_STATE_NAMES: Final = ("terminated", "running", "waiting")
_CONTAINER_GROUPS: Final = (
    ("init", "initContainers", "initContainerStatuses"),
    ("regular", "containers", "containerStatuses"),
    ("ephemeral", "ephemeralContainers", "ephemeralContainerStatuses"),
)


def _container_state(state: Any) -> tuple[Any, ...]:
    """(state, reason, message, exit_code, signal, started_at, finished_at) of a container state; the
    first of terminated / running / waiting that is set wins; all None when none is."""
    state = _map(state)
    for name in _STATE_NAMES:
        detail = state.get(name)
        if detail is not None:
            detail = _map(detail)
            return (
                name,
                _str(detail.get("reason")),
                _str(detail.get("message")),
                _int(detail.get("exitCode")),
                _int(detail.get("signal")),
                normalize_time(detail.get("startedAt")),
                normalize_time(detail.get("finishedAt")),
            )
    return NO_STATE


def container_entry(
    name: str,
    kind: str,
    now: tuple[Any, ...],
    last: tuple[Any, ...],
    ready: bool | None,
    started: bool | None,
    restart_count: int | None,
    restart_policy: str | None = None,
    prestop_sleep_seconds: int | None = None,
    resources: dict[str, dict[str, str]] | None = None,
    allocated_resources: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One item of a pod payload's ``containers``; ``now`` and ``last`` are (state, reason, message,
    exit_code, signal, started_at, finished_at) as ``_container_state`` gives them. ``pod_wire`` makes
    the same item as a struct (``_ContainerOut``, the same keys in the same order) from typed structs.

    From the spec: ``restart_policy`` (an init container's ``Always`` makes it a sidecar, 1.29+) and
    ``prestop_sleep_seconds`` (``lifecycle.preStop.sleep.seconds``, 1.29+). From the status (in-place
    resize, 1.33+): ``resources`` (``{"requests": {...}, "limits": {...}}``, what the runtime applied)
    and ``allocated_resources`` (what the kubelet admitted)."""
    return {
        "name": name,
        "kind": kind,
        "state": now[0],
        "reason": now[1],
        "message": now[2],
        "exit_code": now[3],
        "signal": now[4],
        "started_at": now[5],
        "finished_at": now[6],
        "ready": ready,
        "started": started,
        "restart_count": restart_count,
        "last_state": None
        if last[0] is None
        else {
            "state": last[0],
            "reason": last[1],
            "exit_code": last[3],
            "started_at": last[5],
            "finished_at": last[6],
        },
        "restart_policy": restart_policy,
        "prestop_sleep_seconds": prestop_sleep_seconds,
        "resources": resources,
        "allocated_resources": allocated_resources,
    }


def _resources(value: Any) -> dict[str, dict[str, str]] | None:
    """``status.containerStatuses[].resources`` as ``{"requests": {...}, "limits": {...}}``, or None."""
    if not isinstance(value, Mapping):
        return None
    return {"requests": _str_map(value.get("requests")), "limits": _str_map(value.get("limits"))}


def _prestop_sleep(container: Mapping[str, Any]) -> int | None:
    """``lifecycle.preStop.sleep.seconds`` of a container spec (0 is allowed from 1.33), or None."""
    sleep = _map(_map(_map(container.get("lifecycle")).get("preStop")).get("sleep"))
    return _int(sleep.get("seconds"))


def _containers(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    empty: Mapping[str, Any] = {}
    for kind, spec_key, status_key in _CONTAINER_GROUPS:
        statuses: dict[str, Mapping[str, Any]] = {}
        for cs in map(_map, _items(status.get(status_key))):
            cs_name = cs.get("name")
            if isinstance(cs_name, str):
                statuses[cs_name] = cs
        names: list[str] = []
        specs: dict[str, Mapping[str, Any]] = {}
        for c in map(_map, _items(spec.get(spec_key))):
            c_name = c.get("name")
            if isinstance(c_name, str):
                names.append(c_name)
                specs.setdefault(c_name, c)
        if statuses:
            names += [n for n in statuses if n not in names]
        for name in names:
            cs = statuses.get(name, empty)
            now = _container_state(cs.get("state"))
            last = _container_state(cs.get("lastState"))
            ready, started = cs.get("ready"), cs.get("started")
            c_spec = specs.get(name, empty)
            allocated = cs.get("allocatedResources")
            out.append(
                container_entry(
                    name,
                    kind,
                    now,
                    last,
                    ready if ready is True or ready is False else None,
                    started if started is True or started is False else None,
                    _int(cs.get("restartCount")),
                    _str(c_spec.get("restartPolicy")),
                    _prestop_sleep(c_spec),
                    _resources(cs.get("resources")),
                    _str_map(allocated) if isinstance(allocated, Mapping) else None,
                )
            )
    return out


def normalize_pod(obj: Mapping[str, Any], *, watch: str = "SNAPSHOT") -> dict[str, Any]:
    """The ``pod`` payload of docs/observations.md for one Pod object (raw JSON or YAML-loaded dict).

    ``watch`` is recorded as ``payload["watch"]`` (ADDED, MODIFIED, DELETED, LIST, SNAPSHOT, ...).
    Raises ValueError naming the pod when it has no metadata.name / metadata.uid.
    """
    meta = _metadata(obj, "Pod")
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    annotations = _map(meta.get("annotations"))
    config_source = annotations.get("kubernetes.io/config.source")
    mirror_of = annotations.get("kubernetes.io/config.mirror")
    static = bool(mirror_of) or (isinstance(config_source, str) and config_source not in ("", "api"))
    # A mirror pod's API uid is new each time the API server recreates it; the kubelet logs, spans and
    # events speak of the static pod's own uid (its config hash, in this annotation). Key on that one so
    # the API view and the kubelet's view of a static pod meet on one timeline.
    uid = mirror_of if isinstance(mirror_of, str) and 0 < len(mirror_of) <= 64 else meta["uid"]
    return {
        "watch": watch,
        "resource_version": _str(meta.get("resourceVersion")),
        "uid": uid,
        "api_uid": meta["uid"],
        "namespace": _str(meta.get("namespace")),
        "name": meta["name"],
        "node": _str(spec.get("nodeName")),
        "labels": _str_map(meta.get("labels")),
        "created": normalize_time(meta.get("creationTimestamp")),
        "deletion_timestamp": normalize_time(meta.get("deletionTimestamp")),
        "deletion_grace_seconds": _int(meta.get("deletionGracePeriodSeconds")),
        "grace_seconds": _int(spec.get("terminationGracePeriodSeconds")),
        "finalizers": [str(f) for f in _items(meta.get("finalizers"))],
        "static": static,
        "owner": _controller(meta),
        "phase": _str(status.get("phase")),
        "reason": _str(status.get("reason")),
        "message": _str(status.get("message")),
        "start_time": normalize_time(status.get("startTime")),
        "conditions": _conditions(status.get("conditions")),
        "containers": _containers(spec, status),
        "generation": _int(meta.get("generation")),
        "observed_generation": _int(status.get("observedGeneration")),
    }


def _snapshot(
    obj: Mapping[str, Any],
    payload: dict[str, Any],
    kinds: tuple[str, str],
    what: str,
    *,
    watch_type: str,
    observed_at: datetime | None,
    source: str,
    pod_uid: str | None = None,
    node: str | None = None,
    namespace: str | None = None,
) -> Observation:
    """The observation of one object snapshot: ``kinds`` = (live kind, deleted kind); the dedupe key is
    ``<live kind>:<uid>:<resourceVersion>`` (``:deleted`` for a DELETED watch event)."""
    deleted = watch_type.upper() == "DELETED"
    return Observation(
        kind=kinds[1] if deleted else kinds[0],
        source=source,
        observed_at=_observed_at(obj, observed_at, what),
        dedupe_key=_object_key(kinds[0], payload["uid"], _map(obj.get("metadata")), obj, deleted),
        pod_uid=pod_uid,
        node=node,
        namespace=namespace,
        name=payload["name"],
        payload=payload,
    )


def pod_observation(
    obj: Mapping[str, Any], *, watch_type: str, observed_at: datetime | None, source: str
) -> Observation:
    """A POD observation (POD_DELETED when ``watch_type`` is DELETED) for one Pod object.

    ``observed_at`` is when the watch delivered it; None (offline input) means the newest timestamp
    inside the object (``newest_timestamp``). ``dedupe_key`` is ``pod:<uid>:<resourceVersion>`` (a
    content digest instead of the resourceVersion when there is none), plus ``:deleted``. Raises
    ValueError for an invalid pod.
    """
    payload = normalize_pod(obj, watch=watch_type)
    return _snapshot(
        obj,
        payload,
        (Kind.POD, Kind.POD_DELETED),
        "Pod",
        watch_type=watch_type,
        observed_at=observed_at,
        source=source,
        pod_uid=payload["uid"],
        node=payload["node"],
        namespace=payload["namespace"],
    )


# -- events ---------------------------------------------------------------------------------------------


def _first(*values: Any) -> Any:
    for v in values:
        if v is not None and v != "":
            return v
    return None


def normalize_event(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ``event`` payload for a core/v1 or events.k8s.io/v1 Event (fields mapped to one shape).

    ``involved`` comes from ``regarding`` or ``involvedObject``; ``message`` from ``note`` or
    ``message``; ``component`` from ``reportingController``/``reportingComponent``, else
    ``(deprecated)source.component``; ``count`` from ``series.count``, else ``(deprecated)count``;
    ``first``/``last`` are the first and latest occurrence. Raises ValueError without metadata.
    """
    meta = _metadata(obj, "Event", need_uid=False)
    involved = _map(_first(obj.get("regarding"), obj.get("involvedObject")))
    series = _map(obj.get("series"))
    source = _map(_first(obj.get("deprecatedSource"), obj.get("source")))
    event_time = normalize_time(obj.get("eventTime"))
    first = _first(
        normalize_time(obj.get("firstTimestamp")),
        normalize_time(obj.get("deprecatedFirstTimestamp")),
        event_time,
    )
    last = _first(
        normalize_time(series.get("lastObservedTime")),
        normalize_time(obj.get("lastTimestamp")),
        normalize_time(obj.get("deprecatedLastTimestamp")),
        event_time,
    )
    return {
        "uid": _str(meta.get("uid")),
        "resource_version": _str(meta.get("resourceVersion")),
        "api_version": _str(obj.get("apiVersion")),
        "reason": _str(obj.get("reason")),
        "type": _str(obj.get("type")),
        "message": _str(_first(obj.get("note"), obj.get("message"))),
        "count": _int(_first(series.get("count"), obj.get("count"), obj.get("deprecatedCount"))),
        "action": _str(obj.get("action")),
        "component": _str(
            _first(obj.get("reportingController"), obj.get("reportingComponent"), source.get("component"))
        ),
        "host": _str(_first(source.get("host"), obj.get("reportingInstance"))),
        "first": first,
        "last": last,
        "involved": {
            "kind": _str(involved.get("kind")),
            "namespace": _str(involved.get("namespace")),
            "name": _str(involved.get("name")),
            "uid": _str(involved.get("uid")),
            "field_path": _str(involved.get("fieldPath")),
        },
    }


def event_observation(
    obj: Mapping[str, Any], *, source: str, observed_at: datetime | None = None
) -> Observation | None:
    """An EVENT observation for a core/v1 or events.k8s.io/v1 Event.

    ``observed_at`` of the result = ``eventTime`` ‖ ``series.lastObservedTime`` ‖ ``lastTimestamp`` ‖
    ``firstTimestamp`` ‖ ``metadata.creationTimestamp`` ‖ the ``observed_at`` argument (delivery time).
    Returns None when none of these exists (the event cannot be placed in time). ``pod_uid`` is the
    regarding object's uid when it is a Pod; namespace/name are the regarding object's. ``dedupe_key`` =
    ``event:<uid>:<resourceVersion>``, or ``event:<content digest>`` when either is missing. Raises
    ValueError for an object without metadata.
    """
    payload = normalize_event(obj)
    meta = _map(obj.get("metadata"))
    series = _map(obj.get("series"))
    at = None
    for candidate in (
        obj.get("eventTime"),
        series.get("lastObservedTime"),
        obj.get("lastTimestamp"),
        obj.get("deprecatedLastTimestamp"),
        obj.get("firstTimestamp"),
        obj.get("deprecatedFirstTimestamp"),
        meta.get("creationTimestamp"),
    ):
        at = parse_time(candidate)
        if at is not None:
            break
    if at is None:
        if observed_at is None or observed_at.tzinfo is None:
            return None
        at = observed_at
    involved = payload["involved"]
    uid, rv = payload["uid"], payload["resource_version"]
    key = f"event:{uid}:{rv}" if uid and rv and len(uid) + len(rv) < 180 else f"event:{_content_digest(obj)}"
    is_pod = involved["kind"] == "Pod"
    return Observation(
        kind=Kind.EVENT,
        source=source,
        observed_at=at,
        dedupe_key=key,
        pod_uid=involved["uid"] if is_pod and involved["uid"] and len(involved["uid"]) <= 64 else None,
        node=payload["host"] if is_pod or involved["kind"] == "Node" else None,
        namespace=involved["namespace"] or _str(meta.get("namespace")),
        name=involved["name"],
        payload=payload,
    )


# -- nodes ----------------------------------------------------------------------------------------------


def normalize_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ``node`` payload: identity, cordon, taints, conditions (no heartbeats), labels, fingerprint.

    ``fingerprint`` is a digest of everything in the payload except ``resource_version``: two snapshots
    that differ only in ``lastHeartbeatTime``, ``resourceVersion`` or ``managedFields`` (the kubelet's
    status heartbeat every few seconds) have the same fingerprint, so a collector can drop them.
    Raises ValueError without metadata.name / uid.
    """
    meta = _metadata(obj, "Node")
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    taints = []
    for t in _list(spec.get("taints")):
        t = _map(t)
        taints.append(
            {
                "key": _str(t.get("key")),
                "value": _str(t.get("value")),
                "effect": _str(t.get("effect")),
                "time_added": normalize_time(t.get("timeAdded")),
            }
        )
    node_info = _map(status.get("nodeInfo"))
    payload: dict[str, Any] = {
        "name": meta["name"],
        "uid": meta["uid"],
        "resource_version": _str(meta.get("resourceVersion")),
        "created": normalize_time(meta.get("creationTimestamp")),
        "deletion_timestamp": normalize_time(meta.get("deletionTimestamp")),
        "unschedulable": spec.get("unschedulable") is True,
        "taints": taints,
        "conditions": _conditions(status.get("conditions")),
        "labels": _str_map(meta.get("labels")),
        "kubelet_version": _str(node_info.get("kubeletVersion")),
    }
    fingerprint_source = {k: v for k, v in payload.items() if k != "resource_version"}
    payload["fingerprint"] = _content_digest(fingerprint_source)
    return payload


def node_observation(
    obj: Mapping[str, Any], *, watch_type: str, observed_at: datetime | None, source: str
) -> Observation:
    """A NODE (NODE_DELETED for a DELETED watch type) observation; ``dedupe_key`` ``node:<uid>:<rv>``.

    ``observed_at`` None means the newest timestamp inside the object (the latest heartbeat for a
    live node). Raises ValueError for an invalid node.
    """
    payload = normalize_node(obj)
    payload["watch"] = watch_type
    return _snapshot(
        obj,
        payload,
        (Kind.NODE, Kind.NODE_DELETED),
        "Node",
        watch_type=watch_type,
        observed_at=observed_at,
        source=source,
        node=payload["name"],
    )


# -- PDBs -----------------------------------------------------------------------------------------------


def normalize_pdb(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ``pdb`` payload for a policy/v1 (or v1beta1) PodDisruptionBudget.

    Raises ValueError without metadata.name / uid.
    """
    meta = _metadata(obj, "PodDisruptionBudget")
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    disrupted = {str(k): normalize_time(v) for k, v in _map(status.get("disruptedPods")).items()}
    return {
        "namespace": _str(meta.get("namespace")),
        "name": meta["name"],
        "uid": meta["uid"],
        "resource_version": _str(meta.get("resourceVersion")),
        "generation": _int(meta.get("generation")),
        "created": normalize_time(meta.get("creationTimestamp")),
        "deletion_timestamp": normalize_time(meta.get("deletionTimestamp")),
        "labels": _str_map(meta.get("labels")),
        "selector": _selector(spec.get("selector")),
        "min_available": _int_or_str(spec.get("minAvailable")),
        "max_unavailable": _int_or_str(spec.get("maxUnavailable")),
        "unhealthy_pod_eviction_policy": _str(spec.get("unhealthyPodEvictionPolicy")),
        "status": {
            "disruptions_allowed": _int(status.get("disruptionsAllowed")),
            "current_healthy": _int(status.get("currentHealthy")),
            "desired_healthy": _int(status.get("desiredHealthy")),
            "expected_pods": _int(status.get("expectedPods")),
            "disrupted_pods": disrupted,
            "observed_generation": _int(status.get("observedGeneration")),
            "conditions": _conditions(status.get("conditions")),
        },
    }


def pdb_observation(
    obj: Mapping[str, Any], *, watch_type: str, observed_at: datetime | None, source: str
) -> Observation:
    """A PDB (PDB_DELETED) observation; ``dedupe_key`` ``pdb:<uid>:<rv>``. Raises ValueError if invalid."""
    payload = normalize_pdb(obj)
    payload["watch"] = watch_type
    return _snapshot(
        obj,
        payload,
        (Kind.PDB, Kind.PDB_DELETED),
        "PodDisruptionBudget",
        watch_type=watch_type,
        observed_at=observed_at,
        source=source,
        namespace=payload["namespace"],
    )


# -- workloads ------------------------------------------------------------------------------------------

_WORKLOAD_STATUS: Final[dict[str, tuple[str, ...]]] = {
    "Deployment": (
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
        "terminatingReplicas",
        "collisionCount",
    ),
    "StatefulSet": (
        "observedGeneration",
        "replicas",
        "readyReplicas",
        "currentReplicas",
        "updatedReplicas",
        "availableReplicas",
        "currentRevision",
        "updateRevision",
        "collisionCount",
    ),
    "DaemonSet": (
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
        "observedGeneration",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberUnavailable",
        "collisionCount",
    ),
    "ReplicaSet": (
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "terminatingReplicas",
        "observedGeneration",
    ),
}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def normalize_workload(obj: Mapping[str, Any], *, kind_hint: str | None = None) -> dict[str, Any]:
    """The ``workload`` payload for a Deployment, StatefulSet, DaemonSet or ReplicaSet.

    ``status`` holds the kind's status fields of k8s-facts.md section 8 in snake_case (null when
    absent) plus ``conditions``. Raises ValueError for another kind or without metadata.name / uid.
    """
    kind = _kind_of(obj, kind_hint or "") if isinstance(obj, Mapping) else (kind_hint or "")
    if kind not in WORKLOAD_KINDS:
        raise ValueError(
            f"{_describe(obj, kind or 'object')}: expected kind Deployment, StatefulSet, DaemonSet or ReplicaSet"
        )
    meta = _metadata(obj, kind)
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    values: dict[str, Any] = {}
    for field_name in _WORKLOAD_STATUS[kind]:
        raw = status.get(field_name)
        values[_snake(field_name)] = _str(raw) if field_name.endswith("Revision") else _int(raw)
    values["conditions"] = _conditions(status.get("conditions"))
    strategy = _map(_first(spec.get("strategy"), spec.get("updateStrategy")))
    return {
        "kind": kind,
        "namespace": _str(meta.get("namespace")),
        "name": meta["name"],
        "uid": meta["uid"],
        "resource_version": _str(meta.get("resourceVersion")),
        "generation": _int(meta.get("generation")),
        "created": normalize_time(meta.get("creationTimestamp")),
        "deletion_timestamp": normalize_time(meta.get("deletionTimestamp")),
        "labels": _str_map(meta.get("labels")),
        "owner": _controller(meta),
        "selector": _selector(spec.get("selector")),
        "spec_replicas": _int(spec.get("replicas")),
        "strategy": _str(strategy.get("type")),
        "status": values,
    }


def workload_observation(
    obj: Mapping[str, Any],
    *,
    watch_type: str,
    observed_at: datetime | None,
    source: str,
    kind_hint: str | None = None,
) -> Observation:
    """A WORKLOAD (WORKLOAD_DELETED) observation; ``dedupe_key`` ``workload:<uid>:<rv>``.

    Raises ValueError for an invalid or unsupported object.
    """
    payload = normalize_workload(obj, kind_hint=kind_hint)
    payload["watch"] = watch_type
    return _snapshot(
        obj,
        payload,
        (Kind.WORKLOAD, Kind.WORKLOAD_DELETED),
        payload["kind"],
        watch_type=watch_type,
        observed_at=observed_at,
        source=source,
        namespace=payload["namespace"],
    )


# -- dispatch -------------------------------------------------------------------------------------------

SUPPORTED_KINDS: Final = frozenset({"Pod", "Event", "Node", "PodDisruptionBudget"} | WORKLOAD_KINDS)


def object_observation(
    obj: Mapping[str, Any],
    *,
    kind_hint: str | None = None,
    watch_type: str,
    observed_at: datetime | None,
    source: str,
) -> Observation | None:
    """One observation for any supported API object, dispatched on its ``kind`` (else ``kind_hint``).

    Supported kinds: Pod, Event (core/v1 and events.k8s.io/v1), Node, PodDisruptionBudget, Deployment,
    StatefulSet, DaemonSet, ReplicaSet. Returns None for an Event that cannot be placed in time or whose
    ``watch_type`` is DELETED (events expire by TTL; that says nothing about the pod). Raises ValueError
    naming the object for an unsupported kind or an invalid object.
    """
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise ValueError(f"{_describe(obj, kind_hint or 'object')}: expected a JSON object")
    kind = _kind_of(obj, kind_hint or "")
    if kind == "Pod":
        return pod_observation(obj, watch_type=watch_type, observed_at=observed_at, source=source)
    if kind == "Event":
        if watch_type.upper() == "DELETED":
            return None
        return event_observation(obj, source=source, observed_at=observed_at)
    if kind == "Node":
        return node_observation(obj, watch_type=watch_type, observed_at=observed_at, source=source)
    if kind == "PodDisruptionBudget":
        return pdb_observation(obj, watch_type=watch_type, observed_at=observed_at, source=source)
    if kind in WORKLOAD_KINDS:
        return workload_observation(
            obj, watch_type=watch_type, observed_at=observed_at, source=source, kind_hint=kind
        )
    raise ValueError(
        f"{_describe(obj, kind or 'object')}: unsupported kind {kind or '<none>'!r}, expected one of "
        f"{', '.join(sorted(SUPPORTED_KINDS))}"
    )
