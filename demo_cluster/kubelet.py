"""The simulated kubelet of one node: its pod workers, its klog lines and its Prometheus metrics.

The worker of each pod goes setup (SyncPod) -> terminating (SyncTerminatingPod) -> terminated
(SyncTerminatedPod) -> done, printing the ≥1.27 messages of k8s-facts.md §1.4/§2.1 in the order the real
pod worker does, and updates the pod's API status through the cluster as the status manager would.

Each message is printed at its klog level (``LEVELS``, docs/kubelet-lines.md): a kubelet at
``verbosity`` 2, the production default, prints no pod-worker line, only the config, PLEG, kill,
startup and manager lines a real one prints at ``--v=2``. The cluster's ``kubelet_verbosity`` (the
scenario option ``kubelet_verbosity``) sets it for every kubelet, 4 by default.
"""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, Protocol

from .engine import Engine
from .objects import EventRecorder, condition, container_id, image_id, set_condition, ts
from .store import Store

KUBELET_VERSION = "v1.31.4"  # every demo kubelet's (Node status nodeInfo, its first log line)


class KubeletHost(EventRecorder, Protocol):
    """What a kubelet needs of its cluster (``SimCluster`` is one): the clock and engine, the API objects,
    and the API writes a kubelet makes. Declared here, beside its one user, so this module imports nothing
    of ``cluster.py`` and the demo cluster's modules form no import cycle (tests/sim/test_import_graph.py)."""

    engine: Engine
    store: Store
    rng: random.Random
    kubelet_verbosity: int

    @property
    def now(self) -> datetime: ...

    def node_ip(self, node: str) -> str: ...

    def pod_ip(self, node: str) -> str: ...

    def pod_grace(self, namespace: str, name: str) -> int: ...

    def update_pod_status(
        self, namespace: str, name: str, fn: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any] | None: ...

    def create_mirror_pod(self, node: str, w: Worker) -> None: ...

    def worker_finished(self, kubelet: SimKubelet, w: Worker) -> None: ...

    def record_truth(
        self,
        action: str,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        node: str | None = None,
        outcome: str = "",
        **detail: Any,
    ) -> None: ...


# file:line of each message, so a parser can key on the caller too (≈ v1.31 sources).
# A node's kubelet writes klog headers in the node's local zone, which nothing else reveals; the node log
# query (`journalctl --utc --output=short-precise`) puts a UTC journald prefix before each line. Demo nodes
# get one of these zones by name (no draw from the scenario's rng), so the collector has to get it right.
LOG_ZONES: tuple[tzinfo, ...] = (
    UTC,
    timezone(timedelta(hours=2)),
    timezone(timedelta(hours=5, minutes=30)),
    timezone(timedelta(hours=-7)),
)


def node_log_zone(node: str) -> tzinfo:
    return LOG_ZONES[zlib.crc32(node.encode()) % len(LOG_ZONES)]


CALLERS = {
    "SyncLoop ADD": "kubelet.go:2434",
    "SyncLoop UPDATE": "kubelet.go:2440",
    "SyncLoop REMOVE": "kubelet.go:2443",
    "SyncLoop DELETE": "kubelet.go:2450",
    "SyncLoop (PLEG): event for pod": "kubelet.go:2468",
    "SyncPod enter": "kubelet.go:1732",
    "SyncPod exit": "kubelet.go:1734",
    "SyncTerminatingPod enter": "kubelet.go:1997",
    "SyncTerminatingPod exit": "kubelet.go:1999",
    "Pod terminating with grace period": "kubelet.go:2020",
    "Post-termination container state": "kubelet.go:2068",
    "Pod termination stopped all running containers": "kubelet.go:2076",
    "SyncTerminatedPod enter": "kubelet.go:2157",
    "SyncTerminatedPod exit": "kubelet.go:2159",
    "Pod termination unmounted volumes": "kubelet.go:2187",
    "Pod termination cleaned up volume paths": "kubelet.go:2198",
    "Pod termination removed cgroups": "kubelet.go:2212",
    "Pod is terminated and will need no more status updates": "kubelet.go:2226",
    "Killing container with a grace period": "kuberuntime_container.go:809",
    "Observed pod startup duration": "pod_startup_latency_tracker.go:104",
    "Pod fully terminated and removed from etcd": "status_manager.go:895",
    "Deleting a mirror pod": "mirror_client.go:108",
    "Pod has been deleted and must be killed": "kubelet.go:2673",
    "Pod has been terminated and is no longer known to the kubelet, remove all history": "pod_workers.go:1570",
    "Pod has been terminated but another pod with the same UID was created, remove history to allow restart": "pod_workers.go:1565",
    "Pod will be restarted because it is in the desired set and not known to the pod workers (likely due to UID reuse)": "kubelet_pods.go:1246",
    "Shutdown manager detected new shutdown event, isNodeShuttingDownNow": "nodeshutdown_manager_linux.go:265",
    "Shutdown manager processing shutdown event": "nodeshutdown_manager_linux.go:321",
    "Shutdown manager killing pod with gracePeriod": "nodeshutdown_manager_linux.go:375",
    "Shutdown manager finished killing pod": "nodeshutdown_manager_linux.go:391",
    "Shutdown manager completed processing shutdown event, node will shutdown shortly": "nodeshutdown_manager_linux.go:335",
    "Generic (PLEG): container finished": "generic.go:334",
    "Kubelet version": "server.go:438",
    "Starting kubelet main sync loop": "kubelet.go:2181",
}

# The klog V level of each message (≈ v1.31 sources, docs/kubelet-lines.md); a message not listed is V4.
# A kubelet at --v=N prints the lines of level ≤ N.
LEVELS: dict[str, int] = {
    "Kubelet version": 0,
    "Starting kubelet main sync loop": 0,
    "Observed pod startup duration": 0,
    "Shutdown manager detected new shutdown event, isNodeShuttingDownNow": 1,
    "Shutdown manager processing shutdown event": 1,
    "Shutdown manager killing pod with gracePeriod": 1,
    "Shutdown manager finished killing pod": 1,
    "Shutdown manager completed processing shutdown event, node will shutdown shortly": 1,
    "SyncLoop ADD": 2,
    "SyncLoop UPDATE": 2,
    "SyncLoop REMOVE": 2,
    "SyncLoop DELETE": 2,
    "SyncLoop (PLEG): event for pod": 2,
    "Generic (PLEG): container finished": 2,
    "Killing container with a grace period": 2,
    "Sync exited with context cancellation error": 2,
    "Deleting a mirror pod": 2,
    "Cancelling current pod sync": 3,
    "Pod worker has stopped": 3,
    "Pod termination cleaned up volume paths": 3,
    "Pod has been deleted and must be killed": 3,
    "Pod fully terminated and removed from etcd": 3,
    "Pod will be restarted because it is in the desired set and not known to the pod workers (likely due to UID reuse)": 3,
}
DEFAULT_VERBOSITY = 4
POD_WORKERS = "pod_workers.go:{}"
WORKER_LINES = {
    "Pod is being synced for the first time": 754,
    "Pod is terminating but has been requested to restart with same UID, will be reconciled later": 772,
    "Pod is marked for graceful deletion, begin teardown": 807,
    "Pod is in a terminal phase (success/failed), begin teardown": 815,
    "Pod is being evicted by the kubelet, begin teardown": 826,
    "Pod is being removed by the kubelet, begin teardown": 828,
    "Notifying pod of pending update": 913,
    "Cancelling current pod sync": 934,
    "Processing pod event": 1233,
    "Sync exited with context cancellation error": 1291,
    "Processing pod event done": 1352,
    "Pod worker has observed request to terminate": 1030,
    "Pod terminated all containers successfully": 1450,
    "Pod is complete and the worker can now stop": 1519,
    "Pod worker has stopped": 1229,
}

DEF_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
START_BUCKETS = (
    0.5,
    1.0,
    2.0,
    3.0,
    4.0,
    5.0,
    6.0,
    8.0,
    10.0,
    20.0,
    30.0,
    45.0,
    60.0,
    120.0,
    180.0,
    240.0,
    300.0,
    360.0,
    480.0,
    600.0,
    900.0,
    1200.0,
    1800.0,
    2700.0,
    3600.0,
)
WORKER_OPS = ("create", "update", "sync", "kill", "terminated")
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."


@dataclass
class Behaviour:
    """How one pod behaves on the node (scenarios set it before the pod is created)."""

    setup_seconds: float = 1.2  # sandbox + container start, image present
    pull_seconds: float = 0.0  # > 0: the image is pulled first (Pulling/Pulled events)
    stop_seconds: float = 0.4  # SIGTERM -> exit
    exit_code: int = 0  # exit code on SIGTERM
    ignore_sigterm: bool = False  # only SIGKILL at the end of the grace period stops it
    runtime_hang_seconds: float = 0.0  # after SIGKILL, the runtime takes this long to reap it


@dataclass(slots=True)
class Worker:
    uid: str  # the kubelet's UID: the API uid, or 32 hex for a static pod
    namespace: str
    name: str
    static: bool
    behaviour: Behaviour
    api_name: str  # the (mirror) pod name in the API
    state: str = "sync"  # sync | terminating | terminated
    config: str = "desired"  # desired | orphan
    started: bool = False
    token: int = 0  # bumped to cancel a scheduled setup step
    finished: bool = False
    restart_requested: bool = False
    first_seen: datetime | None = None
    sandbox: str = ""  # the running pod sandbox's ID ("" when none)
    containers: dict[str, str] = field(default_factory=dict)  # name -> containerID of running containers
    cause: str = ""
    terminal_phase: str | None = None  # what a kill's status function decided, reported once containers stop

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


class Histogram:
    __slots__ = ("buckets", "counts", "sum", "count")

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.sum += v
        self.count += 1
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1


def _fmt_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "nil"
    if isinstance(v, int | float):
        return str(v)
    return json.dumps(v, separators=(",", ":"))


class SimKubelet:
    """One node's kubelet. All methods run under the cluster's lock, at the engine's virtual time."""

    def __init__(self, cluster: KubeletHost, node: str, pid: int, log_limit: int = 20_000) -> None:
        self.cluster = cluster
        self.node = node
        self.pid = pid
        self.lines: deque[tuple[datetime, str]] = deque(maxlen=log_limit)  # (UTC time, klog line)
        self.log_zone = node_log_zone(node)
        self._last_t: datetime | None = None
        self.workers: dict[str, Worker] = {}
        self.by_api: dict[tuple[str, str], str] = {}  # (ns, api name) -> worker uid
        self.worker_hist = {op: Histogram(DEF_BUCKETS) for op in WORKER_OPS}
        self.start_hist = Histogram(START_BUCKETS)
        self.started_pods_total = 0
        self.started_containers_total = 0
        self.restarted_static_total = 0
        self.running = True  # false once the node has shut down
        self.verbosity = cluster.kubelet_verbosity  # klog --v: lines above it are not printed
        # A kubelet process begins its log with its version (V0), then starts its sync loop.
        self.log("Kubelet version", kubeletVersion=KUBELET_VERSION)
        self.log("Starting kubelet main sync loop")

    # ---- logging ------------------------------------------------------------------------------
    def log(self, msg: str, /, *, severity: str = "I", **kv: Any) -> None:
        if LEVELS.get(msg, 4) > self.verbosity:
            return
        t = self.cluster.now
        if self._last_t is not None and t <= self._last_t:
            t = self._last_t + timedelta(microseconds=1)
        self._last_t = t
        caller = CALLERS.get(msg) or POD_WORKERS.format(WORKER_LINES.get(msg, 1200))
        header = (
            f"{severity}{t.astimezone(self.log_zone).strftime('%m%d %H:%M:%S.%f')} {self.pid:>7} {caller}] "
        )
        body = json.dumps(msg) + "".join(f" {k}={_fmt_value(v)}" for k, v in kv.items())
        self.lines.append((t, header + body))

    def logs_since(
        self,
        since: datetime | None,
        until: datetime | None = None,
        pattern: str | None = None,
        tail: int | None = None,
    ) -> list[str]:
        """The klog lines written from ``since`` to ``until`` (UTC), containing ``pattern``, the last
        ``tail`` of them."""
        return [line for _t, line in self._matching(since, until, pattern, tail)]

    def journal_since(
        self,
        since: datetime | None,
        until: datetime | None = None,
        pattern: str | None = None,
        tail: int | None = None,
    ) -> list[str]:
        """``logs_since`` as the node log query serves it: behind `journalctl --utc -o short-precise`
        prefixes (``Jun 07 00:54:47.123870 node kubelet[812]: ``)."""
        # journald names the process that wrote each line: the klog header's pid (a node's journal spans
        # its kubelet's restarts).
        return [
            f"{t:%b %d %H:%M:%S}.{t.microsecond:06d} {self.node} kubelet[{line.split(maxsplit=3)[2]}]: {line}"
            for t, line in self._matching(since, until, pattern, tail)
        ]

    def _matching(
        self, since: datetime | None, until: datetime | None, pattern: str | None, tail: int | None
    ) -> list[tuple[datetime, str]]:
        out = [
            (t.astimezone(UTC), line)
            for t, line in list(self.lines)
            if (since is None or t >= since)
            and (until is None or t <= until)
            and (not pattern or pattern in line)
        ]
        return out[-tail:] if tail else out

    def _wlog(self, msg: str, w: Worker, **kv: Any) -> None:
        self.log(msg, pod=w.ref, podUID=w.uid, **kv)

    # ---- pod admission / setup ----------------------------------------------------------------
    def pod_added(self, pod: dict[str, Any], behaviour: Behaviour, static_uid: str | None = None) -> None:
        """The config source delivered a new pod (API watch, or a static manifest when static_uid)."""
        meta = pod["metadata"]
        uid = static_uid or meta["uid"]
        source = "file" if static_uid else "api"
        self.log("SyncLoop ADD", source=source, pods=[f"{meta['namespace']}/{meta['name']}"])
        w = self.workers.get(uid)
        if w is not None and w.state != "sync" and not w.finished:
            w.restart_requested = True
            w.config = "desired"
            self._wlog(
                "Pod is terminating but has been requested to restart with same UID, will be reconciled later",
                w,
                updateType="create",
            )
            return
        w = Worker(uid, meta["namespace"], meta["name"], bool(static_uid), behaviour, meta["name"])
        w.first_seen = self.cluster.now
        self.workers[uid] = w
        self.by_api[(w.namespace, w.api_name)] = uid
        self._start_setup(w)

    def adopt_running(self, pod: dict[str, Any], behaviour: Behaviour, started: datetime) -> Worker:
        """A pod this kubelet set up before the simulation began (the ``scale`` population): its worker
        is in ``sync``, started, with running containers. No log lines and no events: that happened
        before anyone was watching."""
        meta = pod["metadata"]
        w = Worker(meta["uid"], meta["namespace"], meta["name"], False, behaviour, meta["name"])
        w.started = True
        w.first_seen = started
        for cs in pod["status"].get("containerStatuses") or []:
            w.containers[cs["name"]] = cs["containerID"]
        self.workers[w.uid] = w
        self.by_api[(w.namespace, w.api_name)] = w.uid
        self.started_pods_total += 1
        self.started_containers_total += len(w.containers)
        return w

    def _start_setup(self, w: Worker) -> None:
        self._wlog("Pod is being synced for the first time", w, updateType="create")
        self._wlog("Notifying pod of pending update", w, workType="sync")
        self._wlog("Processing pod event", w, updateType="sync")
        self._wlog("SyncPod enter", w)
        if w.static:
            self.cluster.create_mirror_pod(self.node, w)
        now = self.cluster.now

        def initial(pod: dict[str, Any]) -> None:
            st = pod["status"]
            st["phase"] = "Pending"
            st["hostIP"] = self.cluster.node_ip(self.node)
            st["hostIPs"] = [{"ip": st["hostIP"]}]
            st["startTime"] = ts(now)
            names = [c["name"] for c in pod["spec"]["containers"]]
            unready = f"containers with unready status: [{' '.join(names)}]"
            conds = st.setdefault("conditions", [])
            set_condition(conds, condition("PodReadyToStartContainers", False, now))
            set_condition(conds, condition("Initialized", True, now))
            set_condition(conds, condition("Ready", False, now, "ContainersNotReady", unready))
            set_condition(conds, condition("ContainersReady", False, now, "ContainersNotReady", unready))
            st["containerStatuses"] = [
                {
                    "name": c["name"],
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                    "lastState": {},
                    "ready": False,
                    "restartCount": 0,
                    "image": c["image"],
                    "imageID": "",
                    "started": False,
                }
                for c in pod["spec"]["containers"]
            ]

        self.cluster.update_pod_status(w.namespace, w.api_name, initial)
        token = w.token
        b = w.behaviour
        self.cluster.engine.schedule(0.35, lambda: self._sandbox_ready(w, token))
        self.cluster.engine.schedule(
            0.35 + b.pull_seconds + b.setup_seconds, lambda: self._containers_started(w, token)
        )

    def _sandbox_ready(self, w: Worker, token: int) -> None:
        if w.token != token or w.state != "sync":
            return
        now = self.cluster.now
        ip = self.cluster.pod_ip(self.node)
        # PLEG reports the new sandbox as a started container (its ID derived, not drawn: the scenario's
        # random sequence stays what it was).
        w.sandbox = hashlib.sha256(f"{w.uid}/{now.isoformat()}".encode()).hexdigest()
        self.log(
            "SyncLoop (PLEG): event for pod",
            pod=w.ref,
            event={"ID": w.uid, "Type": "ContainerStarted", "Data": w.sandbox},
        )

        def sandbox(pod: dict[str, Any]) -> None:
            set_condition(pod["status"]["conditions"], condition("PodReadyToStartContainers", True, now))
            pod["status"]["podIP"] = ip
            pod["status"]["podIPs"] = [{"ip": ip}]

        self.cluster.update_pod_status(w.namespace, w.api_name, sandbox)
        pod = self.cluster.store.get("pods", w.namespace, w.api_name)
        if pod is None:
            return
        for c in pod["spec"]["containers"]:
            path = f"spec.containers{{{c['name']}}}"
            if w.behaviour.pull_seconds > 0:
                self.cluster.record_event(
                    pod, "Normal", "Pulling", f'Pulling image "{c["image"]}"', "kubelet", self.node, path
                )
            else:
                self.cluster.record_event(
                    pod,
                    "Normal",
                    "Pulled",
                    f'Container image "{c["image"]}" already present on machine',
                    "kubelet",
                    self.node,
                    path,
                )

    def _containers_started(self, w: Worker, token: int) -> None:
        if w.token != token or w.state != "sync":
            return
        now = self.cluster.now
        pod = self.cluster.store.get("pods", w.namespace, w.api_name)
        if pod is None:
            return
        rng = self.cluster.rng
        for c in pod["spec"]["containers"]:
            path = f"spec.containers{{{c['name']}}}"
            if w.behaviour.pull_seconds > 0:
                took = w.behaviour.pull_seconds
                self.cluster.record_event(
                    pod,
                    "Normal",
                    "Pulled",
                    f'Successfully pulled image "{c["image"]}" in {took:.3f}s ({took:.3f}s including waiting). Image size: 72099410 bytes.',
                    "kubelet",
                    self.node,
                    path,
                )
            w.containers[c["name"]] = container_id(rng)
            self.cluster.record_event(
                pod, "Normal", "Created", f"Created container: {c['name']}", "kubelet", self.node, path
            )
            self.cluster.record_event(
                pod, "Normal", "Started", f"Started container {c['name']}", "kubelet", self.node, path
            )
            self.started_containers_total += 1
        w.started = True
        self.started_pods_total += 1
        for cid in w.containers.values():
            self.log(
                "SyncLoop (PLEG): event for pod",
                pod=w.ref,
                event={"ID": w.uid, "Type": "ContainerStarted", "Data": cid.split("//")[1]},
            )

        def running(pod: dict[str, Any]) -> None:
            st = pod["status"]
            st["phase"] = "Running"
            for cs in st["containerStatuses"]:
                cs["state"] = {"running": {"startedAt": ts(now)}}
                cs["ready"] = True
                cs["started"] = True
                cs["containerID"] = w.containers.get(cs["name"], "")
                cs["imageID"] = image_id(cs["image"])
            set_condition(st["conditions"], condition("ContainersReady", True, now))
            set_condition(st["conditions"], condition("Ready", True, now))

        self.cluster.update_pod_status(w.namespace, w.api_name, running)
        elapsed = (now - w.first_seen).total_seconds() if w.first_seen else 0.0
        self.worker_hist["create"].observe(min(elapsed, 0.5 + w.behaviour.setup_seconds / 10))
        self.start_hist.observe(elapsed)
        self._wlog("SyncPod exit", w, isTerminal=False)
        self._wlog("Processing pod event done", w, updateType="sync")
        created = pod["metadata"]["creationTimestamp"]
        self.log(
            "Observed pod startup duration",
            pod=w.ref,
            podStartSLOduration=round(elapsed, 6),
            podStartE2EDuration=f"{elapsed:.9f}s",
            podCreationTimestamp=created.replace("T", " ").replace("Z", " +0000 UTC"),
            firstStartedPulling="0001-01-01 00:00:00 +0000 UTC",
            lastFinishedPulling="0001-01-01 00:00:00 +0000 UTC",
        )

    # ---- termination --------------------------------------------------------------------------
    def pod_deleted(self, namespace: str, name: str, grace: int) -> None:
        """The API pod got a deletionTimestamp (graceful DELETE): SyncLoop DELETE, then teardown."""
        self.log("SyncLoop DELETE", source="api", pods=[f"{namespace}/{name}"])
        uid = self.by_api.get((namespace, name))
        if uid:
            self.request_termination(uid, "deletion", grace)

    def pod_removed(self, namespace: str, name: str, source: str = "api") -> None:
        """The pod is gone from the config source (API object deleted, or static manifest removed)."""
        self.log("SyncLoop REMOVE", source=source, pods=[f"{namespace}/{name}"])
        uid = self.by_api.get((namespace, name))
        w = self.workers.get(uid) if uid else None
        if w is None:
            return
        w.config = "orphan" if source == "api" else "desired"
        if w.state == "sync":
            self._wlog("Pod has been deleted and must be killed", w)
            self.request_termination(w.uid, "removed" if source == "file" else "orphan", None)
        elif w.finished:
            self.cluster.engine.schedule(1.7, lambda: self._forget(w))

    def request_termination(self, uid: str, cause: str, grace: int | None, status_fn: Any = None) -> None:
        """The three doors into terminating: deletion, a terminal phase, or a kubelet kill."""
        w = self.workers.get(uid)
        if w is None or w.state != "sync":
            return
        spec_grace = self.cluster.pod_grace(w.namespace, w.api_name)
        g = spec_grace if grace is None else grace
        g = max(1, g) if cause != "orphan" else 1
        messages = {
            "deletion": ("Pod is marked for graceful deletion, begin teardown", "update"),
            "terminal": ("Pod is in a terminal phase (success/failed), begin teardown", "update"),
            "evicted": ("Pod is being evicted by the kubelet, begin teardown", "kill"),
            "removed": ("Pod is being removed by the kubelet, begin teardown", "kill"),
            "orphan": ("Pod is being removed by the kubelet, begin teardown", "kill"),
        }
        msg, update_type = messages[cause]
        w.cause = cause
        self._wlog(msg, w, updateType=update_type)
        self._wlog("Notifying pod of pending update", w, workType="terminating")
        w.state = "terminating"
        w.token += 1
        if not w.started:
            # Setup is in flight: its context is cancelled and SyncPod returns early.
            self._wlog("Cancelling current pod sync", w, workType="terminating")
            self._wlog("SyncPod exit", w, isTerminal=False)
            self._wlog("Sync exited with context cancellation error", w, updateType="sync")
            self._wlog("Processing pod event done", w, updateType="sync")
        began = self.cluster.now
        self.cluster.engine.schedule(0.004, lambda: self._terminating(w, g, began, status_fn))

    def _terminating(self, w: Worker, grace: int, began: datetime, status_fn: Any) -> None:
        self._wlog("Processing pod event", w, updateType="terminating")
        self.log("Pod worker has observed request to terminate", podUID=w.uid)
        self._wlog("SyncTerminatingPod enter", w)
        self._wlog("Pod terminating with grace period", w, gracePeriod=grace)
        if status_fn is not None:
            # Since 1.25 (kubernetes#108366) the kubelet reports a terminal phase only once the pod's
            # containers have stopped: the reason, message and DisruptionTarget go out now, the phase
            # with the containers' final states.
            def without_phase(pod: dict[str, Any]) -> None:
                phase = pod["status"].get("phase")
                status_fn(pod)
                w.terminal_phase = pod["status"].get("phase")
                pod["status"]["phase"] = phase

            self.cluster.update_pod_status(w.namespace, w.api_name, without_phase)
        pod = self.cluster.store.get("pods", w.namespace, w.api_name)
        b = w.behaviour
        for cname, cid in w.containers.items():
            self.log(
                "Killing container with a grace period",
                pod=w.ref,
                podUID=w.uid,
                containerName=cname,
                containerID=cid,
                gracePeriod=grace,
            )
            if pod is not None:
                self.cluster.record_event(
                    pod,
                    "Normal",
                    "Killing",
                    f"Stopping container {cname}",
                    "kubelet",
                    self.node,
                    f"spec.containers{{{cname}}}",
                )
        if not w.containers:
            self.cluster.engine.schedule(0.05, lambda: self._containers_dead(w, began, grace, killed=False))
            return
        if b.ignore_sigterm:
            dies = grace + b.runtime_hang_seconds
            kill_timeout = max(10.0, 1.5 * grace)
            if dies > kill_timeout and pod is not None:

                def exceeded() -> None:
                    p = self.cluster.store.get("pods", w.namespace, w.api_name)
                    if p is not None and w.state == "terminating":
                        self.cluster.record_event(
                            p,
                            "Warning",
                            "ExceededGracePeriod",
                            "Container runtime did not kill the pod within specified grace period.",
                            "kubelet",
                            self.node,
                        )

                self.cluster.engine.schedule(kill_timeout, exceeded)
        else:
            dies = min(b.stop_seconds, float(grace))
        self.cluster.engine.schedule(
            dies, lambda: self._containers_dead(w, began, grace, killed=b.ignore_sigterm)
        )

    def _containers_dead(self, w: Worker, began: datetime, grace: int, killed: bool) -> None:
        now = self.cluster.now
        if w.containers:
            self.cluster.record_truth(
                "containers_stopped",
                w.namespace,
                w.api_name,
                uid=w.uid,
                node=self.node,
                requested=began,
                grace=grace,
                killed=killed,
            )
        exit_code = 137 if killed else w.behaviour.exit_code
        for cid in w.containers.values():
            self.log(
                "SyncLoop (PLEG): event for pod",
                pod=w.ref,
                event={"ID": w.uid, "Type": "ContainerDied", "Data": cid.split("//")[1]},
            )
            self.log(
                "Generic (PLEG): container finished",
                podID=w.uid,
                containerID=cid.split("//")[1],
                exitCode=exit_code,
            )
        if w.sandbox:
            # Then the sandbox is stopped (killPodWithSyncResult), which PLEG reports as a died container.
            self.log(
                "SyncLoop (PLEG): event for pod",
                pod=w.ref,
                event={"ID": w.uid, "Type": "ContainerDied", "Data": w.sandbox},
            )
            w.sandbox = ""
        had_containers = bool(w.containers)

        def dead(pod: dict[str, Any]) -> None:
            st = pod["status"]
            for cs in st.get("containerStatuses") or []:
                running = cs.get("state", {}).get("running")
                if running is not None:
                    cs["state"] = {
                        "terminated": {
                            "exitCode": exit_code,
                            "reason": "Completed" if exit_code == 0 else "Error",
                            "startedAt": running["startedAt"],
                            "finishedAt": ts(now),
                            "containerID": cs.get("containerID", ""),
                        }
                    }
                else:
                    cs["state"] = {
                        "terminated": {
                            "exitCode": 137,
                            "reason": "ContainerStatusUnknown",
                            "message": "The container could not be located when the pod was terminated",
                            "startedAt": None,
                            "finishedAt": None,
                        }
                    }
                    cs["lastState"] = {}
                cs["ready"] = False
                cs["started"] = False
            names = [c["name"] for c in pod["spec"]["containers"]]
            failed = any(
                cs["state"]["terminated"]["exitCode"] != 0 for cs in st.get("containerStatuses") or []
            )
            if w.terminal_phase in ("Failed", "Succeeded"):
                st["phase"] = w.terminal_phase
            elif st.get("phase") not in ("Failed", "Succeeded"):
                st["phase"] = "Failed" if failed or not had_containers else "Succeeded"
            reason = "PodCompleted"
            set_condition(st["conditions"], condition("ContainersReady", False, now, reason))
            set_condition(st["conditions"], condition("Ready", False, now, reason))
            del names

        self.cluster.update_pod_status(w.namespace, w.api_name, dead)
        if had_containers:
            states = " ".join(
                f"({c} state=exited exitCode={exit_code} finishedAt={ts(now)})" for c in w.containers
            )
            self._wlog("Post-termination container state", w, containers=states)
        self._wlog("Pod termination stopped all running containers", w)
        self._wlog("SyncTerminatingPod exit", w)
        self.log("Pod terminated all containers successfully", podUID=w.uid)
        self._wlog("Processing pod event done", w, updateType="terminating")
        w.containers.clear()
        w.state = "terminated"
        self.worker_hist["kill"].observe(min((now - began).total_seconds(), 10.0) / 4)
        self.cluster.engine.schedule(0.012, lambda: self._terminated(w))

    def _terminated(self, w: Worker) -> None:
        began = self.cluster.now
        self._wlog("Processing pod event", w, updateType="terminated")
        self._wlog("SyncTerminatedPod enter", w)

        def sandbox_gone(pod: dict[str, Any]) -> None:
            set_condition(pod["status"]["conditions"], condition("PodReadyToStartContainers", False, began))

        self.cluster.update_pod_status(w.namespace, w.api_name, sandbox_gone)

        def cleanup() -> None:
            self._wlog("Pod termination unmounted volumes", w)
            self._wlog("Pod termination cleaned up volume paths", w)
            self._wlog("Pod termination removed cgroups", w)
            self._wlog("Pod is terminated and will need no more status updates", w)
            self._wlog("SyncTerminatedPod exit", w)
            self.log("Pod is complete and the worker can now stop", podUID=w.uid)
            self._wlog("Processing pod event done", w, updateType="terminated")
            w.finished = True
            self.worker_hist["terminated"].observe((self.cluster.now - began).total_seconds())
            self.cluster.worker_finished(self, w)

        self.cluster.engine.schedule(0.15, cleanup)

    def _forget(self, w: Worker) -> None:
        """Housekeeping (HandlePodCleanups): forget a finished worker, or restart a reused static UID."""
        if self.workers.get(w.uid) is not w:
            return
        if w.restart_requested:
            self.log(
                "Pod has been terminated but another pod with the same UID was created, remove history to allow restart",
                podUID=w.uid,
            )
            self.log("Pod worker has stopped", podUID=w.uid)
            self.log(
                "Pod will be restarted because it is in the desired set and not known to the pod workers (likely due to UID reuse)",
                podUID=w.uid,
            )
            self.restarted_static_total += 1
            nw = Worker(w.uid, w.namespace, w.name, w.static, w.behaviour, w.api_name)
            nw.first_seen = self.cluster.now
            self.workers[w.uid] = nw
            self._start_setup(nw)
            return
        self.log(
            "Pod has been terminated and is no longer known to the kubelet, remove all history", podUID=w.uid
        )
        self.log("Pod worker has stopped", podUID=w.uid)  # its update channel closed (1.27+, V3)
        del self.workers[w.uid]
        if self.by_api.get((w.namespace, w.api_name)) == w.uid:
            del self.by_api[(w.namespace, w.api_name)]

    def forget_later(self, w: Worker, delay: float = 1.8) -> None:
        self.cluster.engine.schedule(delay, lambda: self._forget(w))

    # ---- metrics ------------------------------------------------------------------------------
    def working_pods(self) -> dict[tuple[str, str, str], int]:
        counts: dict[tuple[str, str, str], int] = {}
        for lifecycle in ("sync", "terminating", "terminated"):
            for config, static in (
                ("desired", ""),
                ("desired", "true"),
                ("orphan", ""),
                ("orphan", "true"),
                ("runtime_only", "unknown"),
            ):
                counts[(lifecycle, config, static)] = 0
        for w in self.workers.values():
            counts[(w.state, w.config, "true" if w.static else "")] += 1
        return counts

    def metrics_text(self) -> str:
        out: list[str] = []

        def head(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP {name} [ALPHA] {help_text}")
            out.append(f"# TYPE {name} {kind}")

        head(
            "kubelet_working_pods",
            "gauge",
            "Number of pods the kubelet is actually running, broken down by lifecycle phase, whether the pod is desired, orphaned, or runtime only (also orphaned), and whether the pod is static. An orphaned pod has been removed from local configuration or force deleted in the API and consumes resources that are not otherwise visible.",
        )
        for (lifecycle, config, static), n in sorted(self.working_pods().items()):
            out.append(
                f'kubelet_working_pods{{config="{config}",lifecycle="{lifecycle}",static="{static}"}} {n}'
            )
        desired = [w for w in self.workers.values() if w.config == "desired"]
        head(
            "kubelet_desired_pods",
            "gauge",
            "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver.",
        )
        out.append(f'kubelet_desired_pods{{static=""}} {sum(1 for w in desired if not w.static)}')
        out.append(f'kubelet_desired_pods{{static="true"}} {sum(1 for w in desired if w.static)}')
        active = [w for w in desired if not w.finished]
        head(
            "kubelet_active_pods",
            "gauge",
            "The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver.",
        )
        out.append(f'kubelet_active_pods{{static=""}} {sum(1 for w in active if not w.static)}')
        out.append(f'kubelet_active_pods{{static="true"}} {sum(1 for w in active if w.static)}')
        head(
            "kubelet_mirror_pods",
            "gauge",
            "The number of mirror pods the kubelet will try to create (one per admitted static pod)",
        )
        out.append(f"kubelet_mirror_pods {sum(1 for w in desired if w.static)}")
        head(
            "kubelet_orphaned_runtime_pods_total",
            "counter",
            "Number of pods that have been detected in the container runtime without being already known to the pod worker. This typically indicates the kubelet was restarted while a pod was force deleted in the API or in the local configuration, which is unusual.",
        )
        out.append("kubelet_orphaned_runtime_pods_total 0")
        head(
            "kubelet_restarted_pods_total",
            "counter",
            "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)",
        )
        out.append('kubelet_restarted_pods_total{static=""} 0')
        out.append(f'kubelet_restarted_pods_total{{static="true"}} {self.restarted_static_total}')
        running = sum(1 for w in self.workers.values() if w.containers)
        head("kubelet_running_pods", "gauge", "Number of pods that have a running pod sandbox")
        out.append(f"kubelet_running_pods {running}")
        head("kubelet_running_containers", "gauge", "Number of containers currently running")
        out.append(
            f'kubelet_running_containers{{container_state="running"}} {sum(len(w.containers) for w in self.workers.values())}'
        )
        head("kubelet_started_pods_total", "counter", "Cumulative number of pods started")
        out.append(f"kubelet_started_pods_total {self.started_pods_total}")
        head("kubelet_started_containers_total", "counter", "Cumulative number of containers started")
        out.append(
            f'kubelet_started_containers_total{{container_type="container"}} {self.started_containers_total}'
        )
        head(
            "kubelet_pod_worker_duration_seconds",
            "histogram",
            "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
        )
        for op in WORKER_OPS:
            self._hist_lines(
                out, "kubelet_pod_worker_duration_seconds", self.worker_hist[op], f'operation_type="{op}"'
            )
        head(
            "kubelet_pod_start_duration_seconds",
            "histogram",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
        )
        self._hist_lines(out, "kubelet_pod_start_duration_seconds", self.start_hist, "")
        return "\n".join(out) + "\n"

    @staticmethod
    def _hist_lines(out: list[str], name: str, h: Histogram, labels: str) -> None:
        sep = "," if labels else ""
        for b, c in zip(h.buckets, h.counts, strict=True):
            out.append(f'{name}_bucket{{{labels}{sep}le="{b}"}} {c}')
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {h.count}')
        lab = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{lab} {h.sum}")
        out.append(f"{name}_count{lab} {h.count}")

    # ---- node shutdown ------------------------------------------------------------------------
    def shutdown(self, grace: int) -> None:
        """Graceful node shutdown: kill every pod with the shutdown status, then stop the kubelet."""
        self.log("Shutdown manager detected new shutdown event, isNodeShuttingDownNow", event=True)
        self.log("Shutdown manager processing shutdown event")
        now = self.cluster.now

        def shutdown_status(pod: dict[str, Any]) -> None:
            st = pod["status"]
            if st.get("phase") != "Succeeded":
                st["phase"] = "Failed"
            st["reason"] = "Terminated"
            st["message"] = SHUTDOWN_MESSAGE
            set_condition(
                st.setdefault("conditions", []),
                condition("DisruptionTarget", True, now, "TerminationByKubelet", SHUTDOWN_MESSAGE),
            )

        for w in list(self.workers.values()):
            if w.state != "sync":
                continue
            self.log("Shutdown manager killing pod with gracePeriod", pod=w.ref, gracePeriod=grace)
            self.request_termination(w.uid, "removed", grace, status_fn=shutdown_status)

    def has_pending_kill(self) -> bool:
        return any(w.state != "sync" and not w.finished for w in self.workers.values())
