"""Pods straight off the API server's wire: typed, partial JSON decoding of list pages and watch events
(msgspec), and the pod observation built from it.

The generic path (orjson into dicts, then ``k8s_objects.pod_observation``) reads any pod-shaped object,
however odd. This one reads only the fields a pod payload uses, into typed structs, and skips the rest of
the object (images, tolerations, managedFields, ...) without building it: about a third of the cost for
the pods a real API server sends, which is most of what a collector does. Whatever falls outside it (a
value of another type, a page or line that does not decode, a pod without a resourceVersion or a uid)
makes these functions return None, and the caller takes the generic path for that page, line or pod,
which yields the same observation or names the problem. The two paths are tested for equality
(tests/parsers/test_pod_wire.py). The payload is encoded here, from typed structs, into the JSON the store
writes (``EncodedObservation``): the dicts the generic path builds, and their encoding later, are skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from collectors.parsers.k8s_objects import NO_STATE, container_entry
from collectors.parsers.k8s_objects import normalize_time as _time  # wire times: a string or null
from timelines.lifecycle.observation import EncodedObservation, InvalidObservation, Kind

# -- the subset of a Pod that a pod payload reads --------------------------------------------------------
# gc=False: these structs never form reference cycles, so the cyclic GC need not track them.


class _Owner(msgspec.Struct, gc=False):
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None


class _Annotations(msgspec.Struct, gc=False):
    config_source: str | None = msgspec.field(name="kubernetes.io/config.source", default=None)
    config_mirror: str | None = msgspec.field(name="kubernetes.io/config.mirror", default=None)


class _Meta(msgspec.Struct, rename="camel", gc=False):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: _Annotations | None = None
    finalizers: list[str] | None = None
    owner_references: list[_Owner] | None = None
    generation: int | None = None


class _Sleep(msgspec.Struct, gc=False):
    seconds: int | None = None


class _Handler(msgspec.Struct, gc=False):
    sleep: _Sleep | None = None


class _Lifecycle(msgspec.Struct, rename="camel", gc=False):
    pre_stop: _Handler | None = None


class _Named(msgspec.Struct, rename="camel", gc=False):
    name: str | None = None
    restart_policy: str | None = None
    lifecycle: _Lifecycle | None = None

    @property
    def prestop_sleep(self) -> int | None:
        pre_stop = self.lifecycle.pre_stop if self.lifecycle is not None else None
        sleep = pre_stop.sleep if pre_stop is not None else None
        return sleep.seconds if sleep is not None else None


class _Spec(msgspec.Struct, rename="camel", gc=False):
    node_name: str | None = None
    termination_grace_period_seconds: int | None = None
    init_containers: list[_Named] | None = None
    containers: list[_Named] | None = None
    ephemeral_containers: list[_Named] | None = None


class _Condition(msgspec.Struct, rename="camel", gc=False):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None


class _StateDetail(msgspec.Struct, rename="camel", gc=False):
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    started_at: str | None = None
    finished_at: str | None = None


class _State(msgspec.Struct, gc=False):
    terminated: _StateDetail | None = None
    running: _StateDetail | None = None
    waiting: _StateDetail | None = None


class _Resources(msgspec.Struct, gc=False):
    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


class _ContainerStatus(msgspec.Struct, rename="camel", gc=False):
    name: str | None = None
    state: _State | None = None
    last_state: _State | None = None
    ready: bool | None = None
    started: bool | None = None
    restart_count: int | None = None
    resources: _Resources | None = None
    allocated_resources: dict[str, str] | None = None


class _Status(msgspec.Struct, rename="camel", gc=False):
    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: str | None = None
    conditions: list[_Condition] | None = None
    init_container_statuses: list[_ContainerStatus] | None = None
    container_statuses: list[_ContainerStatus] | None = None
    ephemeral_container_statuses: list[_ContainerStatus] | None = None
    observed_generation: int | None = None


class WirePod(msgspec.Struct, gc=False):
    """A Pod as decoded here: only what a pod payload uses."""

    kind: str | None = None
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | None = None

    @property
    def api_uid(self) -> str:
        return (self.metadata.uid if self.metadata else None) or ""

    @property
    def resource_version(self) -> str:
        return (self.metadata.resource_version if self.metadata else None) or ""


class _ListMeta(msgspec.Struct, rename="camel", gc=False):
    resource_version: str | None = None
    continue_: str | None = msgspec.field(name="continue", default=None)


class WirePodList(msgspec.Struct, gc=False):
    """One page of a pod list: its pods, the list's resourceVersion and the continue token."""

    items: list[WirePod] | None = None
    metadata: _ListMeta | None = None

    @property
    def resource_version(self) -> str:
        return (self.metadata.resource_version if self.metadata else None) or ""

    @property
    def continue_token(self) -> str | None:
        return (self.metadata.continue_ if self.metadata else None) or None


class _WireEvent(msgspec.Struct, gc=False):
    type: str | None = None
    object: WirePod | None = None


_LIST = msgspec.json.Decoder(WirePodList)
_EVENT = msgspec.json.Decoder(_WireEvent)
_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})


def decode_pod_list(data: bytes) -> WirePodList | None:
    """A pod list page, or None when it does not decode into the typed subset (use the generic path)."""
    try:
        return _LIST.decode(data)
    except msgspec.MsgspecError:
        return None


def decode_pod_event(line: bytes) -> tuple[str, WirePod] | None:
    """(type, pod) of an ADDED / MODIFIED / DELETED watch line; None for any other line (a BOOKMARK, an
    ERROR, something malformed or outside the typed subset), which the generic path then reads."""
    try:
        event = _EVENT.decode(line)
    except msgspec.MsgspecError:
        return None
    if event.type not in _OBJECT_EVENTS or event.object is None:
        return None
    return event.type, event.object


# -- the payload ------------------------------------------------------------------------------------------


def _state(state: _State | None) -> tuple[Any, ...]:
    """As ``k8s_objects._container_state``: the first of terminated / running / waiting that is set."""
    if state is None:
        return NO_STATE
    for name, detail in (
        ("terminated", state.terminated),
        ("running", state.running),
        ("waiting", state.waiting),
    ):
        if detail is not None:
            return (
                name,
                detail.reason,
                detail.message,
                detail.exit_code,
                detail.signal,
                _time(detail.started_at),
                _time(detail.finished_at),
            )
    return NO_STATE


def _containers(spec: _Spec | None, status: _Status | None) -> list[dict[str, object]]:
    """As ``k8s_objects._containers``: spec order, then statuses of containers the spec lacks."""
    groups = (
        ("init", spec and spec.init_containers, status and status.init_container_statuses),
        ("regular", spec and spec.containers, status and status.container_statuses),
        ("ephemeral", spec and spec.ephemeral_containers, status and status.ephemeral_container_statuses),
    )
    out: list[dict[str, object]] = []
    for kind, specs, statuses_in in groups:
        if not specs and not statuses_in:  # most pods have no init or ephemeral containers
            continue
        statuses = {cs.name: cs for cs in statuses_in or () if cs.name is not None}
        names = [c.name for c in specs or () if c.name is not None]
        by_name: dict[str, _Named] = {}
        for c in specs or ():
            if c.name is not None:
                by_name.setdefault(c.name, c)
        if statuses:
            names += [n for n in statuses if n not in names]
        for name in names:
            cs = statuses.get(name)
            c_spec = by_name.get(name)
            policy = c_spec.restart_policy if c_spec is not None else None
            sleep = c_spec.prestop_sleep if c_spec is not None else None
            if cs is None:
                out.append(container_entry(name, kind, NO_STATE, NO_STATE, None, None, None, policy, sleep))
            else:
                now, last = _state(cs.state), _state(cs.last_state)
                res = cs.resources
                out.append(
                    container_entry(
                        name,
                        kind,
                        now,
                        last,
                        cs.ready,
                        cs.started,
                        cs.restart_count,
                        policy,
                        sleep,
                        None if res is None else {"requests": res.requests or {}, "limits": res.limits or {}},
                        cs.allocated_resources,
                    )
                )
    return out


def _controller(owners: list[_Owner] | None) -> dict[str, str | None] | None:
    for ref in owners or ():
        if ref.controller is True:
            return {"kind": ref.kind, "name": ref.name, "uid": ref.uid}
    return None


class _ConditionOut(msgspec.Struct, gc=False):
    """One item of a pod payload's ``conditions`` (as ``k8s_objects._conditions`` makes it)."""

    type: str | None
    status: str | None
    reason: str | None
    message: str | None
    last_transition: str | None


class _PodPayload(msgspec.Struct, gc=False):
    """The ``pod`` payload of docs/observations.md, field for field as ``k8s_objects.normalize_pod``
    returns it (tests/parsers/test_pod_wire.py holds the two equal); encoded to JSON, never kept."""

    watch: str
    resource_version: str
    uid: str
    api_uid: str
    namespace: str | None
    name: str
    node: str | None
    labels: dict[str, str]
    created: str | None
    deletion_timestamp: str | None
    deletion_grace_seconds: int | None
    grace_seconds: int | None
    finalizers: list[str]
    static: bool
    owner: dict[str, str | None] | None
    phase: str | None
    reason: str | None
    message: str | None
    start_time: str | None
    conditions: list[_ConditionOut]
    containers: list[dict[str, object]]
    generation: int | None
    observed_generation: int | None


_encode = msgspec.json.Encoder().encode


def wire_pod_observation(
    pod: WirePod, *, watch_type: str, observed_at: datetime, source: str
) -> EncodedObservation | None:
    """The observation ``k8s_objects.pod_observation`` makes of the same pod, with its payload already
    encoded (``EncodedObservation``); or None when this pod needs the generic path: no name, uid or
    resourceVersion, a kind other than Pod, or ``observed_at`` naive."""
    meta = pod.metadata
    if meta is None or pod.kind not in (None, "Pod") or observed_at.utcoffset() is None:
        return None
    name, api_uid, rv = meta.name, meta.uid, meta.resource_version
    if not name or not api_uid or len(api_uid) > 64 or not rv:
        return None
    spec, status = pod.spec, pod.status
    node = spec.node_name if spec is not None else None
    notes = meta.annotations
    config_source = notes.config_source if notes is not None else None
    mirror_of = notes.config_mirror if notes is not None else None
    uid = mirror_of if mirror_of and len(mirror_of) <= 64 else api_uid
    payload = _PodPayload(
        watch_type,
        rv,
        uid,
        api_uid,
        meta.namespace,
        name,
        node,
        meta.labels or {},
        _time(meta.creation_timestamp),
        _time(meta.deletion_timestamp),
        meta.deletion_grace_period_seconds,
        spec.termination_grace_period_seconds if spec is not None else None,
        list(meta.finalizers or ()),
        bool(mirror_of) or config_source not in (None, "", "api"),
        _controller(meta.owner_references),
        None if status is None else status.phase,
        None if status is None else status.reason,
        None if status is None else status.message,
        None if status is None else _time(status.start_time),
        [
            _ConditionOut(c.type, c.status, c.reason, c.message, _time(c.last_transition_time))
            for c in (None if status is None else status.conditions) or ()
        ],
        _containers(spec, status),
        meta.generation,
        None if status is None else status.observed_generation,
    )
    deleted = watch_type.upper() == "DELETED"
    try:
        return EncodedObservation(
            kind=Kind.POD_DELETED if deleted else Kind.POD,
            source=source,
            observed_at=observed_at,
            dedupe_key=f"{Kind.POD}:{uid}:{rv}:deleted" if deleted else f"{Kind.POD}:{uid}:{rv}",
            pod_uid=uid,
            node=node,
            namespace=meta.namespace,
            name=name,
            payload_json=_encode(payload),
        )
    except InvalidObservation:  # a name Kubernetes would refuse: the generic path names the problem
        return None
