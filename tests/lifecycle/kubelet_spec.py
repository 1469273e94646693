"""Kubelet log lines written from the message formats of each Kubernetes version, with the ground truth.

Not samples: every line here follows the source of its version (docs/kubelet-lines.md, k8s-facts.md §1,
§2, §4, §12): which messages exist, at which klog level, with which keys, and how klog renders the
values (≤1.28: ``podUID=<uuid>`` bare, ``pods=[ns/name]``, ``event=&{ID:… Type:… Data:…}``; 1.29+: JSON
values ``podUID="…"``, ``pods=["ns/name"]``, ``event={"ID":…}``; ≤1.26 lowercase ``syncPod enter`` and
numeric work types; 1.27+ ``Notifying pod of pending update`` and ``Pod worker has stopped``; 1.26+
``Observed pod startup duration``; 1.31+ ``Pod admission denied``). 1.25 was not checked against its
source and is written as 1.24 (docs/kubelet-lines.md says so).

``Life`` describes one pod's life on one kubelet; ``life_lines`` writes the lines its kubelet prints for
it at a verbosity, each with the time the kubelet printed it; ``Life.truth`` says what the worker was
really doing and when (the V4 transitions' own instants). ``render`` writes lines in a log format:
plain klog, journald (short, short-precise, short-iso), JSON logging (bare or behind journald), and
copies from log stores with their own timestamp prefix (``kubectl logs --timestamps``, a CRI log file,
a Cloud Logging export).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

VERSIONS = ("1.22", "1.23", "1.24", "1.25", "1.26", "1.27", "1.28", "1.29", "1.30", "1.31", "1.32")
FORMATS = (
    "klog",
    "journald",
    "journald-precise",
    "journald-iso",
    "json",
    "json-journald",
    "kubectl-timestamps",
    "cri",
    "cloud-logging",
)
KINDS = ("delete", "delete_during_setup", "job", "rejected", "evicted", "shutdown", "running", "restart")
BASE = datetime(2024, 3, 5, 10, 0, 0, tzinfo=UTC)


def minor(version: str) -> int:
    return int(version.split(".")[1])


@dataclass(frozen=True)
class Line:
    """One kubelet line: when, at which klog level, from which process, what, with which values."""

    at: datetime
    level: int  # klog V level (0: always printed; errors are level 0 too)
    message: str
    kv: tuple[tuple[str, Any], ...]
    pid: int
    caller: str = "kubelet.go:1"
    severity: str = "I"


@dataclass
class Life:
    """One pod's life on one kubelet (seconds after ``start``)."""

    kind: str
    uid: str
    namespace: str = "default"
    name: str = "web-0"
    containers: tuple[str, ...] = ("app",)
    start: datetime = BASE
    setup_s: float = 2.0  # ADD → the last container started
    run_s: float = 30.0  # containers started → termination (or completion)
    stop_s: float = 0.8  # kill → the containers died
    cleanup_s: float = 0.4
    grace: int = 30
    relist_lag: float = 0.4  # PLEG relist period: events lag what they report by up to 1 s
    restart_at_s: float | None = None  # kind "restart": the kubelet restarts this long after the start
    pid: int = 1043
    new_pid: int = 2417
    ids: dict[str, str] = field(default_factory=dict)
    truth: list[tuple[str, datetime, datetime | None]] = field(default_factory=list)

    def t(self, seconds: float) -> datetime:
        return self.start + timedelta(seconds=seconds)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def new_life(rng: random.Random, kind: str, uid: str, **kw: Any) -> Life:
    """A life of that kind with drawn timings and containers."""
    life = Life(
        kind=kind,
        uid=uid,
        containers=tuple(["app", "sidecar", "proxy"][: rng.randint(1, 3)]),
        setup_s=round(rng.uniform(0.6, 40.0), 6),
        run_s=round(rng.uniform(5.0, 3600.0), 6),
        stop_s=round(rng.uniform(0.05, 5.0), 6),
        cleanup_s=round(rng.uniform(0.05, 3.0), 6),
        grace=rng.choice([1, 2, 5, 30]),
        relist_lag=round(rng.uniform(0.0, 0.99), 6),
        **kw,
    )
    life.ids = {c: f"{rng.getrandbits(256):064x}" for c in ("sandbox", *life.containers)}
    if kind == "restart":
        life.restart_at_s = round(life.setup_s + rng.uniform(1.0, life.run_s * 0.8), 6)
    return life


def _uid_value(version: str, uid: str) -> str:
    return f'"{uid}"' if minor(version) >= 29 else uid


class _Writer:
    """Collects one life's lines in the spelling of a version."""

    def __init__(self, life: Life, version: str) -> None:
        self.life = life
        self.version = version
        self.m = minor(version)
        self.lines: list[Line] = []
        self.pid = life.pid

    def add(
        self,
        at: datetime,
        level: int,
        message: str,
        *kv: tuple[str, Any],
        caller: str = "kubelet.go:1",
        severity: str = "I",
    ) -> None:
        self.lines.append(Line(at, level, message, tuple(kv), self.pid, caller, severity))

    # -- the pieces every line is made of, per version -----------------------------------------------
    def pod(self) -> tuple[str, Any]:
        return ("pod", ("ref", self.life.namespace, self.life.name))

    def uid(self) -> tuple[str, Any]:
        return ("podUID", ("uid", self.life.uid))

    def sync_msg(self, name: str) -> str:
        # ≤1.26 the methods were unexported and the messages lowercase.
        return name[0].lower() + name[1:] if self.m <= 26 else name

    def work(self, key: str, work: str) -> tuple[str, Any]:
        numeric = {"sync": 0, "terminating": 1, "terminated": 2}[work]
        return (key, ("int", numeric) if self.m <= 26 else ("str", work))

    # -- the pod worker's moments -----------------------------------------------------------------
    def syncloop(self, at: datetime, op: str, source: str = "api") -> None:
        self.add(
            at,
            4 if op == "RECONCILE" else 2,
            f"SyncLoop {op}",
            ("source", ("str", source)),
            ("pods", ("pods", [self.life.ref])),
            caller="kubelet.go:2434",
        )

    def first_seen(self, at: datetime, update_type: str, work: str) -> None:
        kv = [self.pod(), self.uid()]
        if self.m >= 27:
            kv.append(("updateType", ("str", update_type)))
        self.add(at, 4, "Pod is being synced for the first time", *kv, caller="pod_workers.go:770")
        if self.m >= 27:
            self.add(
                at + timedelta(microseconds=12),
                4,
                "Notifying pod of pending update",
                self.pod(),
                self.uid(),
                self.work("workType", work),
                caller="pod_workers.go:963",
            )

    def processing(self, at: datetime, work: str, done: bool = False) -> None:
        self.add(
            at,
            4,
            "Processing pod event done" if done else "Processing pod event",
            self.pod(),
            self.uid(),
            self.work("updateType", work),
            caller="pod_workers.go:1230",
        )

    def pleg(self, at: datetime, kind: str, cid: str) -> None:
        event = ("event", ("event", self.life.uid, kind, cid))
        self.add(at, 2, "SyncLoop (PLEG): event for pod", self.pod(), event, caller="kubelet.go:2468")

    def finished(self, at: datetime, cid: str, code: int) -> None:
        self.add(
            at,
            2,
            "Generic (PLEG): container finished",
            ("podID", ("uid", self.life.uid)),
            ("containerID", ("str", cid)),
            ("exitCode", ("int", code)),
            caller="generic.go:334",
        )


def life_lines(life: Life, version: str) -> list[Line]:
    """Every line (any level) the kubelet of ``version`` prints for ``life``; sets ``life.truth``."""
    w = _Writer(life, version)
    m = w.m
    us = timedelta(microseconds=1)
    t = life.t
    life.truth = []
    add_at = t(0)
    admitted = life.kind != "rejected"
    # The kubelet had been running for a while (a real log does not begin with this pod's ADD): a V1
    # probe result of another pod, ten minutes before.
    w.add(
        add_at - timedelta(minutes=10),
        1,
        "SyncLoop (probe)",
        ("probe", ("str", "readiness")),
        ("status", ("str", "ready")),
        ("pod", ("ref", "kube-system", "coredns-5d78c9869d-abcde")),
        caller="kubelet.go:2511",
    )
    # --- SyncLoop ADD and setup -------------------------------------------------------------------
    w.syncloop(add_at, "ADD")
    if not admitted:
        # Admission rejects it in HandlePodAdditions, before any pod worker exists (1.31+ logs why).
        if m >= 31:
            w.add(
                add_at + 30 * us,
                0,
                "Pod admission denied",
                w.uid(),
                w.pod(),
                ("reason", ("str", "OutOfcpu")),
                (
                    "message",
                    (
                        "str",
                        "Node didn't have enough resource: cpu, requested: 4000, used: 1000, capacity: 4000",
                    ),
                ),
                caller="kubelet.go:2213",
            )
        w.syncloop(add_at + timedelta(milliseconds=180), "RECONCILE")
        deleted = add_at + timedelta(seconds=0.6)
        w.syncloop(deleted, "DELETE")
        # The controller deletes the Failed pod: the worker is first seen terminated (1.27+ syncs it as
        # terminated; ≤1.26 marks a terminal pod with no running containers finished at once).
        if m >= 27:
            w.first_seen(deleted + 15 * us, "update", "terminated")
            w.processing(deleted + 30 * us, "terminated")
            c0 = deleted + 45 * us
            w.add(c0, 4, "SyncTerminatedPod enter", w.pod(), w.uid())
            w.add(c0 + 300 * us, 4, "Pod termination unmounted volumes", w.pod(), w.uid())
            w.add(c0 + 320 * us, 3, "Pod termination cleaned up volume paths", w.pod(), w.uid())
            w.add(c0 + 900 * us, 4, "Pod termination removed cgroups", w.pod(), w.uid())
            w.add(c0 + 950 * us, 4, "SyncTerminatedPod exit", w.pod(), w.uid())
            done = c0 + 960 * us
            w.add(
                done, 4, "Pod is complete and the worker can now stop", w.uid(), caller="pod_workers.go:1519"
            )
            w.processing(done + 5 * us, "terminated", done=True)
            w.add(done + 9 * us, 3, "Pod worker has stopped", w.uid(), caller="pod_workers.go:1229")
            life.truth = [("cleanup", deleted + 15 * us, done)]
        else:
            kv = [w.pod(), w.uid()]
            w.add(
                deleted + 15 * us,
                4,
                "Pod is being synced for the first time",
                *kv,
                caller="pod_workers.go:573",
            )
            w.add(
                deleted + 20 * us,
                4,
                "Pod is finished processing, no further updates",
                *kv,
                caller="pod_workers.go:600",
            )
            life.truth = []
        removed = deleted + timedelta(seconds=0.05)
        w.syncloop(removed, "REMOVE")
        w.add(
            removed + 20 * us,
            3,
            "Pod has been deleted and must be killed",
            w.pod(),
            w.uid(),
            caller="kubelet.go:2673",
        )
        return w.lines
    seen = add_at + 80 * us
    w.first_seen(seen, "create", "sync")
    w.processing(seen + 40 * us, "sync")
    w.add(seen + 60 * us, 4, w.sync_msg("SyncPod enter"), w.pod(), w.uid())
    sandbox = add_at + timedelta(seconds=min(0.3, life.setup_s / 3))
    w.pleg(sandbox + timedelta(seconds=life.relist_lag), "ContainerStarted", life.ids["sandbox"])
    started = t(life.setup_s)  # the last container started
    killed_in_setup = life.kind == "delete_during_setup"
    if killed_in_setup:
        request = t(life.setup_s * 0.6)  # before any container started
    else:
        relisted = started + timedelta(seconds=life.relist_lag)
        for c in life.containers:
            w.pleg(relisted, "ContainerStarted", life.ids[c])
        w.add(
            started + 900 * us,
            4,
            w.sync_msg("SyncPod exit"),
            w.pod(),
            w.uid(),
            ("isTerminal", ("bool", False)),
        )
        w.processing(started + 950 * us, "sync", done=True)
        if m >= 26:
            running = relisted + timedelta(milliseconds=30)
            w.add(
                running,
                3,
                "Mark when the pod was running for the first time",
                w.pod(),
                ("rv", ("str", "4821")),
                caller="pod_startup_latency_tracker.go:172",
            )
            kv = [
                w.pod(),
                ("podStartSLOduration", ("float", round((running - add_at).total_seconds(), 6))),
            ]
            if m >= 29:
                kv.append(
                    ("podStartE2EDuration", ("str", f"{(running - add_at).total_seconds() + 0.2:.9f}s"))
                )
            kv += [
                (
                    "pod.CreationTimestamp" if m == 26 else "podCreationTimestamp",
                    ("time", add_at - timedelta(seconds=0.2)),
                ),
                ("firstStartedPulling", ("time", None)),
                ("lastFinishedPulling", ("time", None)),
                ("observedRunningTime", ("time", running)),
                ("watchObservedRunningTime", ("time", running + timedelta(milliseconds=40))),
            ]
            w.add(
                running + timedelta(milliseconds=41),
                0,
                "Observed pod startup duration",
                *kv,
                caller="pod_startup_latency_tracker.go:104",
            )
        request = started + timedelta(seconds=life.run_s)
        # Periodic resyncs while it runs (every minute): SyncPod enter / exit at V4.
        resync = started + timedelta(seconds=60)
        stop_resync = request if life.restart_at_s is None else min(request, t(life.restart_at_s))
        while resync < stop_resync - timedelta(seconds=1):
            w.add(resync, 4, w.sync_msg("SyncPod enter"), w.pod(), w.uid())
            w.add(
                resync + 700 * us,
                4,
                w.sync_msg("SyncPod exit"),
                w.pod(),
                w.uid(),
                ("isTerminal", ("bool", False)),
            )
            resync += timedelta(seconds=60)
    # --- a kubelet restart while it runs ---------------------------------------------------------
    if life.kind == "restart":
        assert life.restart_at_s is not None
        life.truth = [("setup", seen, started), ("running", started, None)]
        down = t(life.restart_at_s)
        w.pid = life.new_pid
        w.add(
            down, 0, "Kubelet version", ("kubeletVersion", ("str", f"v{version}.7")), caller="server.go:467"
        )
        w.add(down + timedelta(seconds=1.2), 0, "Starting kubelet main sync loop", caller="kubelet.go:2244")
        relist = down + timedelta(seconds=1.3)
        w.syncloop(relist, "ADD")
        w.first_seen(relist + 60 * us, "create", "sync")
        w.add(relist + 90 * us, 4, w.sync_msg("SyncPod enter"), w.pod(), w.uid())
        # The new kubelet's first PLEG relist reports every running container as started.
        first_relist = down + timedelta(seconds=1.0 + life.relist_lag)
        for c in ("sandbox", *life.containers):
            w.pleg(first_relist, "ContainerStarted", life.ids[c])
        w.add(
            relist + timedelta(milliseconds=400),
            4,
            w.sync_msg("SyncPod exit"),
            w.pod(),
            w.uid(),
            ("isTerminal", ("bool", False)),
        )
        return w.lines
    if life.kind == "running":
        life.truth = [("setup", seen, started), ("running", started, None)]
        return w.lines
    # --- termination ------------------------------------------------------------------------------
    door = {
        "delete": "deletion",
        "delete_during_setup": "deletion",
        "job": "terminal_phase",
        "evicted": "evicted",
        "shutdown": "removed",
    }[life.kind]
    grace = life.grace if door != "evicted" else 1
    pleg_deaths: list[tuple[datetime, str, int]] = []
    if door == "terminal_phase":
        # RestartNever: the containers exit on their own; the next sync finds the pod terminal.
        exited = request
        for c in life.containers:
            pleg_deaths.append((exited + timedelta(seconds=life.relist_lag), life.ids[c], 0))
        tr = exited + timedelta(seconds=life.relist_lag) + timedelta(milliseconds=3)
        w.add(tr - timedelta(milliseconds=2), 4, w.sync_msg("SyncPod enter"), w.pod(), w.uid())
        w.add(
            tr - timedelta(milliseconds=1),
            4,
            "Pod is terminal",
            w.pod(),
            w.uid(),
            w.work("updateType", "sync"),
            caller="pod_workers.go:1300",
        )
        w.add(tr - 500 * us, 4, w.sync_msg("SyncPod exit"), w.pod(), w.uid(), ("isTerminal", ("bool", True)))
        w.add(
            tr,
            4,
            "Pod indicated lifecycle completed naturally and should now terminate",
            w.uid(),
            caller="pod_workers.go:1394",
        )
        killed: list[str] = []
        dead = tr + timedelta(milliseconds=2)
    else:
        tr = request + 40 * us
        if door == "deletion":
            w.syncloop(request, "DELETE")
            w.add(
                tr,
                4,
                "Pod is marked for graceful deletion, begin teardown",
                w.pod(),
                w.uid(),
                ("updateType", ("str", "update") if m >= 27 else ("int", 1)),
                caller="pod_workers.go:807",
            )
        elif door == "evicted":
            reclaim = request - timedelta(milliseconds=2)
            w.add(
                reclaim - timedelta(milliseconds=1),
                0,
                "Eviction manager: attempting to reclaim",
                ("resourceName", ("str", "memory")),
                caller="eviction_manager.go:376",
            )
            w.add(
                reclaim,
                0,
                "Eviction manager: pods ranked for eviction",
                ("pods", ("pods", [life.ref, "kube-system/coredns-5d78c9869d-abcde"])),
                caller="eviction_manager.go:405",
            )
            message = "The node was low on resource: memory. " + (
                "Threshold quantity: 100Mi, available: 82124Ki. " if m >= 26 else ""
            )
            w.add(
                request,
                3,
                "Evicting pod",
                w.pod(),
                w.uid(),
                ("message", ("str", message)),
                caller="eviction_manager.go:615",
            )
            w.add(
                tr,
                4,
                "Pod is being evicted by the kubelet, begin teardown",
                w.pod(),
                w.uid(),
                ("updateType", ("str", "kill") if m >= 27 else ("int", 3)),
                caller="pod_workers.go:826",
            )
        else:  # node shutdown ("removed" by the kubelet)
            w.add(
                request - timedelta(milliseconds=5),
                1,
                "Shutdown manager detected new shutdown event, isNodeShuttingDownNow",
                ("event", ("bool", True)),
                caller="nodeshutdown_manager_linux.go:265",
            )
            w.add(
                request,
                1,
                "Shutdown manager killing pod with gracePeriod",
                w.pod(),
                ("gracePeriod", ("int", grace)),
                caller="nodeshutdown_manager_linux.go:375",
            )
            w.add(
                tr,
                4,
                "Pod is being removed by the kubelet, begin teardown",
                w.pod(),
                w.uid(),
                ("updateType", ("str", "kill") if m >= 27 else ("int", 3)),
                caller="pod_workers.go:828",
            )
        if m >= 27:
            w.add(
                tr + 10 * us,
                4,
                "Notifying pod of pending update",
                w.pod(),
                w.uid(),
                w.work("workType", "terminating"),
                caller="pod_workers.go:963",
            )
        if killed_in_setup:
            # SyncPod is still running: its context is cancelled.
            w.add(
                tr + 20 * us,
                3,
                "Cancelling current pod sync",
                w.pod(),
                w.uid(),
                w.work("workType" if m >= 27 else "updateType", "terminating"),
                caller="pod_workers.go:970",
            )
            w.add(
                tr + timedelta(milliseconds=3),
                4,
                w.sync_msg("SyncPod exit"),
                w.pod(),
                w.uid(),
                ("isTerminal", ("bool", False)),
            )
            w.add(
                tr + timedelta(milliseconds=3, microseconds=20),
                2,
                "Sync exited with context cancellation error",
                w.pod(),
                w.uid(),
                w.work("updateType", "sync"),
                caller="pod_workers.go:1291",
            )
        killed = [] if killed_in_setup else list(life.containers)
        begin = tr + timedelta(milliseconds=4)
        w.processing(begin, "terminating")
        w.add(
            begin + 10 * us,
            4,
            "Pod worker has observed request to terminate",
            w.uid(),
            caller="pod_workers.go:1030",
        )
        w.add(begin + 20 * us, 4, w.sync_msg("SyncTerminatingPod enter"), w.pod(), w.uid())
        w.add(
            begin + 30 * us,
            4,
            "Pod terminating with grace period",
            w.pod(),
            w.uid(),
            ("gracePeriod", ("int", grace)),
        )
        kill_at = begin + timedelta(milliseconds=1)
        override = door in ("evicted", "shutdown")
        for c in killed:
            if override:
                w.add(
                    kill_at,
                    3,
                    "Killing container with a grace period override",
                    w.pod(),
                    w.uid(),
                    ("containerName", ("str", c)),
                    ("containerID", ("str", "containerd://" + life.ids[c])),
                    ("gracePeriod", ("int", grace)),
                    caller="kuberuntime_container.go:788",
                )
            w.add(
                kill_at + us,
                2,
                "Killing container with a grace period",
                w.pod(),
                w.uid(),
                ("containerName", ("str", c)),
                ("containerID", ("str", "containerd://" + life.ids[c])),
                ("gracePeriod", ("int", grace)),
                caller="kuberuntime_container.go:809",
            )
        died = kill_at + timedelta(seconds=life.stop_s)
        for c in killed:
            pleg_deaths.append(
                (died + timedelta(seconds=life.relist_lag), life.ids[c], 143 if life.stop_s > 0.5 else 0)
            )
        dead = died + timedelta(milliseconds=20)
    # The sandbox is stopped last; then SyncTerminatingPod returns.
    pleg_deaths.append((dead + timedelta(seconds=life.relist_lag), life.ids["sandbox"], 0))
    for at, cid, code in sorted(pleg_deaths):
        w.pleg(at, "ContainerDied", cid)
        if cid != life.ids["sandbox"]:
            w.finished(at + 30 * us, cid, code)
    w.add(dead + 10 * us, 4, "Pod termination stopped all running containers", w.pod(), w.uid())
    w.add(dead + 20 * us, 4, w.sync_msg("SyncTerminatingPod exit"), w.pod(), w.uid())
    cleanup = dead + 30 * us
    w.add(cleanup, 4, "Pod terminated all containers successfully", w.uid(), caller="pod_workers.go:1450")
    w.processing(cleanup + 10 * us, "terminating", done=True)
    if life.kind == "shutdown":
        w.add(
            cleanup + 50 * us,
            1,
            "Shutdown manager finished killing pod",
            w.pod(),
            caller="nodeshutdown_manager_linux.go:391",
        )
    if door == "evicted":
        w.add(
            cleanup + 50 * us,
            0,
            "Eviction manager: pod is evicted successfully",
            w.pod(),
            caller="eviction_manager.go:627",
        )
        w.add(
            cleanup + 70 * us,
            0,
            "Eviction manager: pods evicted, waiting for pod to be cleaned up",
            ("pods", ("pods", [life.ref])),
            caller="eviction_manager.go:208",
        )
    c0 = cleanup + timedelta(milliseconds=12)
    w.processing(c0, "terminated")
    w.add(c0 + 10 * us, 4, w.sync_msg("SyncTerminatedPod enter"), w.pod(), w.uid())
    done = c0 + timedelta(seconds=life.cleanup_s)
    w.add(done - timedelta(milliseconds=3), 4, "Pod termination unmounted volumes", w.pod(), w.uid())
    if m >= 27:
        w.add(
            done - timedelta(milliseconds=2), 3, "Pod termination cleaned up volume paths", w.pod(), w.uid()
        )
    w.add(done - timedelta(milliseconds=1), 4, "Pod termination removed cgroups", w.pod(), w.uid())
    w.add(done - 500 * us, 4, w.sync_msg("SyncTerminatedPod exit"), w.pod(), w.uid())
    w.add(done, 4, "Pod is complete and the worker can now stop", w.uid(), caller="pod_workers.go:1519")
    w.processing(done + 10 * us, "terminated", done=True)
    if m >= 27:
        w.add(done + 20 * us, 3, "Pod worker has stopped", w.uid(), caller="pod_workers.go:1229")
    if door == "evicted":
        # The eviction manager polls (every second) until the worker is finished.
        w.add(
            done + timedelta(seconds=life.relist_lag),
            0,
            "Eviction manager: pods successfully cleaned up",
            ("pods", ("pods", [life.ref])),
            caller="eviction_manager.go:458",
        )
    setup_end = tr if killed_in_setup else started
    life.truth = [("setup", seen, setup_end)]
    if not killed_in_setup:
        life.truth.append(("running", started, tr))
    life.truth += [("terminating", tr, cleanup), ("cleanup", cleanup, done)]
    # --- after the worker is done: the API object goes ----------------------------------------------
    if door in ("deletion",):
        if m >= 27:
            w.add(
                done + timedelta(milliseconds=5),
                3,
                "The pod termination is finished as SyncTerminatedPod completes its execution",
                ("phase", ("str", "Running")),
                ("localPhase", ("str", "Succeeded")),
                w.pod(),
                w.uid(),
                caller="status_manager.go:981",
            )
        gone = done + timedelta(milliseconds=25)
        w.add(gone, 3, "Pod fully terminated and removed from etcd", w.pod(), caller="status_manager.go:949")
        w.syncloop(gone + timedelta(milliseconds=3), "REMOVE")
    elif door == "terminal_phase":
        # The Job controller deletes the finished pod much later.
        later = done + timedelta(seconds=300)
        w.syncloop(later, "DELETE")
        w.add(
            later + timedelta(milliseconds=10),
            3,
            "Pod fully terminated and removed from etcd",
            w.pod(),
            caller="status_manager.go:949",
        )
        w.syncloop(later + timedelta(milliseconds=14), "REMOVE")
    return w.lines


# ---------------------------------------------------------------------------------------------- render


def _go_time(at: datetime | None) -> str:
    if at is None:
        return "0001-01-01 00:00:00 +0000 UTC"
    return at.strftime("%Y-%m-%d %H:%M:%S.%f") + "000 +0000 UTC m=+17.146157970"


def _text_value(version: str, value: Any) -> str:
    """How klog's text format (of that version) prints a value."""
    kind = value[0]
    m = minor(version)
    if kind == "ref":
        return json.dumps(f"{value[1]}/{value[2]}")
    if kind == "uid":
        return _uid_value(version, value[1])
    if kind == "str":
        return json.dumps(value[1])
    if kind in ("int", "float"):
        return str(value[1])
    if kind == "bool":
        return "true" if value[1] else "false"
    if kind == "pods":
        if m >= 29:
            return json.dumps(value[1], separators=(",", ":"))
        return "[" + " ".join(value[1]) + "]"
    if kind == "event":
        _, uid, typ, data = value
        if m >= 29:
            return json.dumps({"ID": uid, "Type": typ, "Data": data}, separators=(",", ":"))
        return f"&{{ID:{uid} Type:{typ} Data:{data}}}"
    if kind == "time":
        return json.dumps(_go_time(value[1]))
    raise ValueError(kind)


def _json_value(value: Any) -> Any:
    kind = value[0]
    if kind == "ref":
        return {"name": value[2], "namespace": value[1]}
    if kind in ("uid", "str", "int", "float", "bool"):
        return value[1]
    if kind == "pods":
        return [{"name": p.split("/")[1], "namespace": p.split("/")[0]} for p in value[1]]
    if kind == "event":
        return {"ID": value[1], "Type": value[2], "Data": value[3]}
    if kind == "time":
        # zap encodes time.Time fields with the logger's time encoder: epoch milliseconds.
        return None if value[1] is None else value[1].timestamp() * 1000
    raise ValueError(kind)


def klog_line(line: Line, version: str) -> str:
    head = f"{line.severity}{line.at:%m%d %H:%M:%S.%f} {line.pid:>7} {line.caller}] "
    body = json.dumps(line.message) + "".join(f" {k}={_text_value(version, v)}" for k, v in line.kv)
    return head + body


def json_line(line: Line) -> str:
    obj: dict[str, Any] = {
        "ts": round(line.at.timestamp() * 1000, 4),
        "caller": "kubelet/" + line.caller,
        "msg": line.message,
    }
    if line.severity != "E":
        obj["v"] = line.level
    for k, v in line.kv:
        obj[k] = _json_value(v)
    return json.dumps(obj, separators=(",", ":"))


def render(lines: list[Line], version: str, fmt: str, node: str = "node-a") -> list[str]:
    """The lines as a log of that format would hold them (times written in UTC)."""
    out = []
    for line in sorted(lines, key=lambda ln: ln.at):
        text = json_line(line) if fmt.startswith("json") else klog_line(line, version)
        at = line.at
        journal_at = at + timedelta(microseconds=37)  # journald stamps a line moments after it was written
        if fmt in ("klog", "json"):
            out.append(text)
        elif fmt == "journald":
            out.append(f"{journal_at:%b %d %H:%M:%S} {node} kubelet[{line.pid}]: {text}")
        elif fmt == "journald-precise":
            out.append(f"{journal_at:%b %d %H:%M:%S.%f} {node} kubelet[{line.pid}]: {text}")
        elif fmt in ("journald-iso", "json-journald"):
            out.append(f"{journal_at:%Y-%m-%dT%H:%M:%S%z} {node} kubelet[{line.pid}]: {text}")
        elif fmt == "kubectl-timestamps":
            out.append(f"{journal_at:%Y-%m-%dT%H:%M:%S.%f}123Z {text}")
        elif fmt == "cri":
            out.append(f"{journal_at:%Y-%m-%dT%H:%M:%S.%f}123Z stderr F {text}")
        elif fmt == "cloud-logging":
            out.append(f"{journal_at:%Y-%m-%d %H:%M:%S.%f} UTC\t{text}")
        else:
            raise ValueError(fmt)
    return out


def at_verbosity(lines: list[Line], verbosity: int) -> list[Line]:
    """The lines a kubelet started with ``--v=verbosity`` prints."""
    return [ln for ln in lines if ln.level <= verbosity]


def truth_at(life: Life, at: datetime) -> str | None:
    """What the worker was doing at ``at`` (None before its life, "done" after it)."""
    for state, start, end in life.truth:
        if start <= at and (end is None or at < end):
            return state
    if life.truth and life.truth[-1][2] is not None and at >= life.truth[-1][2]:
        return "done"
    return None


# ---------------------------------------------------------------------------------------------- checking

# Bounds pinned by the worker's own V4 transition (or a span): they must be exact.
EXACT_BOUNDS = frozenset(
    {
        "first_seen",
        "termination_requested",
        "completed_naturally",
        "containers_terminated",
        "worker_done",
        "orphan_containers_terminated",
    }
)
# A kubelet line below V4 dates a transition within the PLEG relist period plus a little.
KUBELET_TOLERANCE = timedelta(seconds=2)
PHASES = ("setup", "running", "terminating", "cleanup")


@dataclass
class Check:
    """What ``check_claims`` found: violations, and how many bounds and states it asserted."""

    violations: list[str] = field(default_factory=list)
    exact_bounds: int = 0
    kubelet_bounds: int = 0
    states: int = 0


def _truth_start(life: Life, state: str) -> datetime | None:
    return next((s for st, s, _ in life.truth if st == state), None)


def _truth_end(life: Life, state: str) -> datetime | None:
    return next((e for st, _, e in life.truth if st == state), None)


def check_claims(intervals: Any, life: Life) -> Check:
    """Whether the worker lane claims only what ``life.truth`` holds: every exact bound equals the true
    transition, every kubelet-graded bound is within ``KUBELET_TOLERANCE`` of it, and inside every
    interval (away from its kubelet-graded edges) the worker really was in that state."""
    check = Check()
    us = timedelta(microseconds=1)
    for iv in intervals:
        if iv.state not in PHASES:
            continue
        known_start = not iv.attrs.get("start_unknown")
        known_end = iv.end is not None and not iv.attrs.get("end_unknown")
        start_exact = iv.attrs.get("start_from") in EXACT_BOUNDS
        end_exact = iv.attrs.get("end_from") in EXACT_BOUNDS
        for which, at, known, exact, truth in (
            ("start", iv.start, known_start, start_exact, _truth_start(life, iv.state)),
            ("end", iv.end, known_end, end_exact, _truth_end(life, iv.state)),
        ):
            if not known or at is None or iv.source == "inferred":
                continue
            if truth is None:
                check.violations.append(f"{iv.state} {which} {at} claimed, truth has no such bound")
                continue
            if exact:
                check.exact_bounds += 1
                if at != truth:
                    check.violations.append(f"{iv.state} {which} {at} != true {truth} (exact)")
            else:
                check.kubelet_bounds += 1
                if abs(at - truth) > KUBELET_TOLERANCE:
                    check.violations.append(f"{iv.state} {which} {at} far from true {truth}")
        lo = iv.start + (us if start_exact else KUBELET_TOLERANCE)
        if iv.end is not None:
            hi = iv.end - (us if end_exact else KUBELET_TOLERANCE)
        else:
            # Open: its end is not in the evidence; it claims the state only until its last evidence.
            seen = iv.attrs.get("seen_until")
            hi = datetime.fromisoformat(seen) if seen and not iv.attrs.get("end_unknown") else lo - us
        points = [p for p in (lo, lo + (hi - lo) / 2, hi) if lo <= p <= hi]
        for p in points:
            got = truth_at(life, p)
            if got != iv.state and not (got is None and p < life.start):
                check.violations.append(f"{iv.state} [{iv.start}, {iv.end}] but at {p} the worker was {got}")
                break
        check.states += 1 if points else 0
    return check
