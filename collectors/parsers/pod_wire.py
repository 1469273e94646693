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

import msgspec

from collectors.parsers.k8s_objects import normalize_time_text as _ntime
from timelines.lifecycle.observation import EncodedObservation, InvalidObservation, Kind, encoded_observation

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
# Every wire time is a string or null (the structs above say so): ``normalize_time`` of a string is
# ``normalize_time_text``, called here directly (a pod has a dozen times; the wrapper's type checks were a
# tenth of building its payload).


class _LastStateOut(msgspec.Struct, gc=False):
    """A container's ``last_state`` as ``k8s_objects.container_entry`` makes it."""

    state: str
    reason: str | None
    exit_code: int | None
    started_at: str | None
    finished_at: str | None


class _ContainerOut(msgspec.Struct, gc=False):
    """One item of a pod payload's ``containers``, field for field as ``k8s_objects.container_entry``
    makes it (the same keys in the same order; tests/parsers/test_pod_wire.py holds the two equal): a
    struct is built and encoded at a fraction of a 17-key dict's cost. What a container has not (a
    status, a state) is None, the default, and is encoded all the same."""

    name: str
    kind: str
    state: str | None = None
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    ready: bool | None = None
    started: bool | None = None
    restart_count: int | None = None
    last_state: _LastStateOut | None = None
    restart_policy: str | None = None
    prestop_sleep_seconds: int | None = None
    resources: dict[str, dict[str, str]] | None = None
    allocated_resources: dict[str, str] | None = None


def _detail(state: _State | None) -> tuple[str, _StateDetail] | None:
    """As ``k8s_objects._container_state``: the first of terminated / running / waiting that is set."""
    if state is None:
        return None
    if state.terminated is not None:
        return "terminated", state.terminated
    if state.running is not None:
        return "running", state.running
    if state.waiting is not None:
        return "waiting", state.waiting
    return None


def _container(name: str, kind: str, c_spec: _Named | None, cs: _ContainerStatus | None) -> _ContainerOut:
    """``k8s_objects.container_entry`` of one container from its spec and status (either may be absent)."""
    policy = sleep = None
    if c_spec is not None:
        policy = c_spec.restart_policy
        if c_spec.lifecycle is not None:
            sleep = c_spec.prestop_sleep
    if cs is None:
        return _ContainerOut(name, kind, restart_policy=policy, prestop_sleep_seconds=sleep)
    now = _detail(cs.state)
    last = _detail(cs.last_state)
    last_out = None
    if last is not None:
        ls = last[1]
        last_out = _LastStateOut(
            last[0],
            ls.reason,
            ls.exit_code,
            None if ls.started_at is None else _ntime(ls.started_at),
            None if ls.finished_at is None else _ntime(ls.finished_at),
        )
    res = cs.resources
    resources = None if res is None else {"requests": res.requests or {}, "limits": res.limits or {}}
    if now is None:
        return _ContainerOut(
            name,
            kind,
            ready=cs.ready,
            started=cs.started,
            restart_count=cs.restart_count,
            last_state=last_out,
            restart_policy=policy,
            prestop_sleep_seconds=sleep,
            resources=resources,
            allocated_resources=cs.allocated_resources,
        )
    d = now[1]
    return _ContainerOut(
        name,
        kind,
        now[0],
        d.reason,
        d.message,
        d.exit_code,
        d.signal,
        None if d.started_at is None else _ntime(d.started_at),
        None if d.finished_at is None else _ntime(d.finished_at),
        cs.ready,
        cs.started,
        cs.restart_count,
        last_out,
        policy,
        sleep,
        resources,
        cs.allocated_resources,
    )


def _containers(spec: _Spec | None, status: _Status | None) -> list[_ContainerOut]:
    """As ``k8s_objects._containers``: spec order, then statuses of containers the spec lacks."""
    out: list[_ContainerOut] = []
    if spec is None and status is None:
        return out
    if spec is None:
        spec = _NO_SPEC
    if status is None:
        status = _NO_STATUS
    if spec.init_containers or status.init_container_statuses:  # most pods have none
        _group(out, "init", spec.init_containers, status.init_container_statuses)
    if spec.containers or status.container_statuses:
        _group(out, "regular", spec.containers, status.container_statuses)
    if spec.ephemeral_containers or status.ephemeral_container_statuses:
        _group(out, "ephemeral", spec.ephemeral_containers, status.ephemeral_container_statuses)
    return out


_NO_SPEC = _Spec()
_NO_STATUS = _Status()


def _group(
    out: list[_ContainerOut],
    kind: str,
    specs: list[_Named] | None,
    statuses_in: list[_ContainerStatus] | None,
) -> None:
    """The containers of one kind (init, regular, ephemeral) appended to ``out``."""
    if specs and statuses_in and len(specs) == 1 and len(statuses_in) == 1:  # the common pod: one container
        c, cs = specs[0], statuses_in[0]
        if c.name is not None and c.name == cs.name:
            out.append(_container(c.name, kind, c, cs))
            return
    statuses = {cs.name: cs for cs in statuses_in or () if cs.name is not None}
    by_name: dict[str, _Named] = {}
    for c in specs or ():
        if c.name is not None:
            by_name.setdefault(c.name, c)
    names = [c.name for c in specs or () if c.name is not None]
    if statuses:
        names += [n for n in statuses if n not in by_name]
    for name in names:
        out.append(_container(name, kind, by_name.get(name), statuses.get(name)))


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
    containers: list[_ContainerOut]
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
    if status is None:
        phase = reason = message = start_time = observed_generation = None
        conditions: list[_ConditionOut] = []
    else:
        phase, reason, message = status.phase, status.reason, status.message
        start_time = None if status.start_time is None else _ntime(status.start_time)
        observed_generation = status.observed_generation
        conditions = [
            _ConditionOut(
                c.type,
                c.status,
                c.reason,
                c.message,
                None if c.last_transition_time is None else _ntime(c.last_transition_time),
            )
            for c in status.conditions or ()
        ]
    payload = _PodPayload(
        watch_type,
        rv,
        uid,
        api_uid,
        meta.namespace,
        name,
        node,
        meta.labels or {},
        None if meta.creation_timestamp is None else _ntime(meta.creation_timestamp),
        None if meta.deletion_timestamp is None else _ntime(meta.deletion_timestamp),
        meta.deletion_grace_period_seconds,
        spec.termination_grace_period_seconds if spec is not None else None,
        meta.finalizers or [],  # encoded, never kept: not copied
        bool(mirror_of) or config_source not in (None, "", "api"),
        None if meta.owner_references is None else _controller(meta.owner_references),
        phase,
        reason,
        message,
        start_time,
        conditions,
        _containers(spec, status),
        meta.generation,
        observed_generation,
    )
    deleted = watch_type.upper() == "DELETED"
    try:
        return encoded_observation(
            Kind.POD_DELETED if deleted else Kind.POD,
            source,
            observed_at,
            f"{Kind.POD}:{uid}:{rv}:deleted" if deleted else f"{Kind.POD}:{uid}:{rv}",
            uid,
            node,
            meta.namespace,
            name,
            _encode(payload),
        )
    except InvalidObservation:  # a name Kubernetes would refuse: the generic path names the problem
        return None
