"""Scenario observation sets shared by the golden and property tests (times: seconds after T0)."""

from __future__ import annotations

from typing import Any

from tests.lifecycle.factories import cond, ctr, event, last_terminated, marker, pod, span, worker
from timelines.lifecycle.observation import Observation

UID = "8f0c2d9e-1111-4a5b-9c3d-000000000001"
STATIC_UID = "d1c4757bcb230bf06ab7e866b62132a1"
SHUTDOWN = "Pod was terminated in response to imminent node shutdown."
UNREADY = "containers with unready status: [app]"


def _conds(ready: str, ready_lt: float, *, extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    reason = "ContainersNotReady" if ready == "False" else None
    message = UNREADY if ready == "False" else None
    return [
        cond("PodScheduled", "True", 1),
        cond("PodReadyToStartContainers", "True", 3),
        cond("Initialized", "True", 2),
        cond("ContainersReady", ready, ready_lt, reason, message),
        cond("Ready", ready, ready_lt, reason, message),
        *(extra or []),
    ]


def api_start(uid: str = UID) -> list[Observation]:
    """API view of a normal start: created 0, scheduled 1, started 2, app running 4, ready 5."""
    return [
        pod(uid, 100, 0.05, node=None, watch="ADDED"),
        pod(uid, 101, 1.02, conditions=[cond("PodScheduled", "True", 1)]),
        pod(
            uid,
            102,
            2.3,
            start_time=2,
            conditions=[
                cond("PodScheduled", "True", 1),
                cond("PodReadyToStartContainers", "False", 2),
                cond("Initialized", "True", 2),
                cond("ContainersReady", "False", 2, "ContainersNotReady", UNREADY),
                cond("Ready", "False", 2, "ContainersNotReady", UNREADY),
            ],
            containers=[ctr(reason="ContainerCreating")],
        ),
        pod(
            uid,
            103,
            4.2,
            phase="Running",
            start_time=2,
            conditions=_conds("False", 2),
            containers=[ctr(state="running", started=4)],
        ),
        pod(
            uid,
            104,
            5.3,
            phase="Running",
            start_time=2,
            conditions=_conds("True", 5),
            containers=[ctr(state="running", started=4, ready=True)],
        ),
        event(
            uid,
            "ev-sched",
            1.0,
            "Scheduled",
            "Successfully assigned default/web-1 to node-a",
            component="default-scheduler",
        ),
        event(uid, "ev-pulled", 3.5, "Pulled", 'Container image "nginx:1.27" already present on machine'),
        event(uid, "ev-started", 4.0, "Started", "Started container app", field_path="spec.containers{app}"),
    ]


def kubelet_start(uid: str = UID) -> list[Observation]:
    """Kubelet view of a normal start (v4 lines and a syncPod span)."""
    return [
        worker(uid, 1.10, "first_seen"),
        worker(uid, 1.11, "sync_enter"),
        span(uid, "syncPod", 1.1105, 4.1, update_type="create"),
        worker(uid, 4.101, "sync_exit", is_terminal=False),
    ]


def normal_start() -> list[Observation]:
    return api_start() + kubelet_start()


def api_graceful_delete(uid: str = UID) -> list[Observation]:
    """DELETE at 20 with grace 30; app stops at 23; phase Succeeded; object gone at 23.9."""
    run = {"phase": "Running", "start_time": 2, "deletion": 50, "deletion_grace": 30}
    done = [ctr(state="terminated", reason="Completed", exit_code=0, started=4, finished=23)]
    return [
        pod(
            uid,
            105,
            20.4,
            **run,
            conditions=_conds("True", 5),
            containers=[ctr(state="running", started=4, ready=True)],
        ),
        pod(
            uid,
            106,
            21.6,
            **run,
            conditions=_conds("False", 21),
            containers=[ctr(state="running", started=4)],
        ),
        pod(uid, 107, 23.6, **{**run, "phase": "Succeeded"}, conditions=_conds("False", 21), containers=done),
        pod(
            uid,
            108,
            23.9,
            **{**run, "phase": "Succeeded"},
            conditions=_conds("False", 21),
            containers=done,
            deleted=True,
        ),
        event(uid, "ev-kill", 20.463, "Killing", "Stopping container app", field_path="spec.containers{app}"),
    ]


def kubelet_graceful_delete(uid: str = UID) -> list[Observation]:
    return [
        worker(uid, 20.45, "termination_requested", cause="deletion"),
        worker(uid, 20.46, "observed_terminate"),
        worker(uid, 20.461, "terminating_enter"),
        span(uid, "syncTerminatingPod", 20.4612, 23.2009),
        marker(uid, 20.462, "GracePeriod", "Pod terminating with grace period", grace=30),
        marker(
            uid,
            20.463,
            "KillingContainer",
            "Killing container with a grace period",
            container="app",
            grace=30,
        ),
        worker(uid, 23.201, "terminating_exit"),
        worker(uid, 23.2015, "containers_terminated"),
        worker(uid, 23.21, "terminated_enter"),
        span(uid, "syncTerminatedPod", 23.2101, 23.5999),
        worker(uid, 23.6, "terminated_exit"),
        worker(uid, 23.6005, "worker_done"),
    ]


def graceful_delete() -> list[Observation]:
    return normal_start() + api_graceful_delete() + kubelet_graceful_delete()


def api_only() -> list[Observation]:
    return api_start() + api_graceful_delete()


def delete_during_setup() -> list[Observation]:
    """Deleted at 6 (grace 30) while both containers are still being created; nothing ever ran."""
    creating = [ctr("app", reason="ContainerCreating"), ctr("sidecar", reason="ContainerCreating")]
    unknown = [
        ctr("app", "terminated", reason="ContainerStatusUnknown", exit_code=137),
        ctr("sidecar", "terminated", reason="ContainerStatusUnknown", exit_code=137),
    ]
    setup = {"start_time": 2, "conditions": [cond("PodScheduled", "True", 1), cond("Initialized", "True", 2)]}
    return [
        pod(UID, 100, 0.05, node=None, watch="ADDED"),
        pod(UID, 101, 1.02, conditions=[cond("PodScheduled", "True", 1)]),
        worker(UID, 1.10, "first_seen"),
        worker(UID, 1.11, "sync_enter"),
        pod(UID, 102, 2.3, **setup, containers=creating),
        pod(UID, 103, 6.4, **setup, deletion=36, deletion_grace=30, containers=creating),
        worker(UID, 6.45, "termination_requested", cause="deletion"),
        worker(UID, 6.451, "cancelling_sync"),
        worker(UID, 6.46, "context_cancelled"),
        worker(UID, 6.47, "sync_exit", is_terminal=False),
        worker(UID, 6.48, "terminating_enter", grace=30),
        worker(UID, 6.9, "containers_terminated"),
        worker(UID, 6.91, "terminated_enter"),
        pod(UID, 104, 7.2, **setup, phase="Failed", deletion=36, deletion_grace=30, containers=unknown),
        worker(UID, 7.3, "worker_done"),
        pod(
            UID,
            105,
            7.5,
            **setup,
            phase="Failed",
            deletion=36,
            deletion_grace=30,
            containers=unknown,
            deleted=True,
        ),
    ]


REJECTED = (
    "Pod was rejected: Node didn't have enough resource: cpu, requested: 4000, used: 1000, capacity: 4000"
)


def rejected_at_admission() -> list[Observation]:
    """Scheduled at 1, rejected by the kubelet (OutOfcpu) at 1.2; the worker tears it down at once."""
    return [
        pod(UID, 100, 0.05, node=None, watch="ADDED"),
        pod(UID, 101, 1.02, conditions=[cond("PodScheduled", "True", 1)]),
        marker(UID, 1.2, "AdmissionRejected", "Predicate NodeResourcesFit failed"),
        event(UID, "ev-oocpu", 1.2, "OutOfcpu", REJECTED.removeprefix("Pod was rejected: "), type_="Warning"),
        pod(
            UID,
            102,
            1.3,
            phase="Failed",
            reason="OutOfcpu",
            message=REJECTED,
            conditions=[cond("PodScheduled", "True", 1)],
        ),
        worker(UID, 1.35, "first_seen"),
        worker(UID, 1.351, "termination_requested", cause="terminal_phase"),
        worker(UID, 1.36, "terminating_enter"),
        worker(UID, 1.37, "terminating_exit"),
        worker(UID, 1.3705, "containers_terminated"),
        worker(UID, 1.38, "terminated_enter"),
        worker(UID, 1.45, "terminated_exit"),
        worker(UID, 1.4505, "worker_done"),
    ]


def orphaned() -> list[Observation]:
    """Only kubelet lines: after a restart the kubelet finds a runtime pod nobody wants and kills it."""
    ref = "default/web-old-1"
    return [
        worker(
            UID, 0.5, "orphaned", pod_ref=ref, message="Pod is orphaned and still running, began terminating"
        ),
        worker(
            UID,
            0.501,
            "termination_requested",
            cause="orphaned",
            pod_ref=ref,
            message="Pod is orphaned and must be torn down",
        ),
        worker(UID, 0.51, "terminating_runtime_enter", pod_ref=ref),
        worker(UID, 1.8, "terminating_runtime_exit", pod_ref=ref),
        worker(UID, 1.8005, "orphan_containers_terminated", pod_ref=ref),
        worker(UID, 1.81, "worker_stopped", pod_ref=ref),
    ]


def static_uid_reuse() -> list[Observation]:
    """A static pod's manifest is removed and re-added with the same UID while the old pod terminates."""
    u = STATIC_UID
    a_run = {
        "static": True,
        "phase": "Running",
        "start_time": 0,
        "name": "etcd-node-a",
        "namespace": "kube-system",
    }
    ident = {"name": "etcd-node-a", "namespace": "kube-system", "static": True}
    ref = "kube-system/etcd-node-a"
    a_conds = [cond("PodScheduled", "True", 0), cond("Ready", "True", 2)]
    return [
        worker(u, 0.1, "first_seen", pod_ref=ref),
        worker(u, 0.11, "sync_enter", pod_ref=ref),
        pod(
            u,
            10,
            0.6,
            **a_run,
            conditions=[cond("PodScheduled", "True", 0), cond("Ready", "False", 0)],
            containers=[ctr("etcd", "running", started=1)],
        ),
        worker(u, 2.0, "sync_exit", is_terminal=False, pod_ref=ref),
        pod(
            u,
            11,
            2.2,
            **a_run,
            conditions=a_conds,
            containers=[ctr("etcd", "running", started=1, ready=True)],
        ),
        worker(u, 10.0, "termination_requested", cause="removed", pod_ref=ref),
        worker(u, 10.01, "terminating_enter", grace=30, pod_ref=ref),
        pod(
            u,
            12,
            10.05,
            **a_run,
            deletion=40,
            deletion_grace=30,
            conditions=a_conds,
            containers=[ctr("etcd", "running", started=1)],
        ),
        pod(
            u,
            13,
            10.3,
            **a_run,
            deletion=40,
            deletion_grace=30,
            conditions=a_conds,
            containers=[ctr("etcd", "running", started=1)],
            deleted=True,
        ),
        worker(u, 12.0, "restart_requested", pod_ref=ref),
        pod(u, 14, 12.6, **ident, created=12, watch="ADDED"),
        worker(u, 25.0, "containers_terminated", pod_ref=ref),
        worker(u, 25.01, "terminated_enter", pod_ref=ref),
        worker(u, 26.0, "worker_done", pod_ref=ref),
        worker(u, 27.0, "uid_reuse_restart", pod_ref=ref),
        worker(u, 27.1, "first_seen", pod_ref=ref),
        worker(u, 27.11, "sync_enter", pod_ref=ref),
        pod(
            u,
            15,
            28.3,
            **ident,
            created=12,
            phase="Running",
            start_time=28,
            containers=[ctr("etcd", "running", started=28)],
        ),
    ]


def crash_loop() -> list[Observation]:
    """app exits with 1 after 10 s, three times; the kubelet backs off between runs."""
    base = {"phase": "Running", "start_time": 1, "conditions": [cond("PodScheduled", "True", 0)]}
    backoff = "back-off 10s restarting failed container=app pod=web-1_default"
    return [
        pod(UID, 100, 2.5, **base, containers=[ctr(state="running", started=2)]),
        pod(
            UID,
            101,
            12.4,
            **base,
            containers=[
                ctr(reason="CrashLoopBackOff", message=backoff, restarts=1, last=last_terminated(2, 12))
            ],
        ),
        pod(
            UID,
            102,
            22.6,
            **base,
            containers=[ctr(state="running", started=22, restarts=1, last=last_terminated(2, 12))],
        ),
        pod(
            UID,
            103,
            32.5,
            **base,
            containers=[
                ctr(reason="CrashLoopBackOff", message=backoff, restarts=2, last=last_terminated(22, 32))
            ],
        ),
        pod(
            UID,
            104,
            62.4,
            **base,
            containers=[ctr(state="running", started=62, restarts=2, last=last_terminated(22, 32))],
        ),
        pod(
            UID,
            105,
            72.5,
            **base,
            containers=[
                ctr(reason="CrashLoopBackOff", message=backoff, restarts=3, last=last_terminated(62, 72))
            ],
        ),
        event(
            UID,
            "ev-backoff",
            72.5,
            "BackOff",
            "Back-off restarting failed container app in pod web-1_default(8f0c)",
            count=3,
            type_="Warning",
            rv=3,
            first=12.4,
        ),
        event(
            UID,
            "ev-backoff",
            32.5,
            "BackOff",
            "Back-off restarting failed container app in pod web-1_default(8f0c)",
            count=2,
            type_="Warning",
            rv=2,
            first=12.4,
        ),
    ]


def node_shutdown(*, failed: bool) -> list[Observation]:
    """Graceful node shutdown at 30. ``failed``: 1.26+ (phase Failed, DisruptionTarget); else 1.22 (stays Running)."""
    extra = [cond("DisruptionTarget", "True", 30, "TerminationByKubelet", SHUTDOWN)] if failed else []
    killed = [
        ctr(
            state="terminated",
            reason="Completed" if not failed else "Error",
            exit_code=0 if not failed else 143,
            started=4,
            finished=33,
        )
    ]
    return [
        *normal_start(),
        marker(UID, 30.1, "ShutdownKill", "Shutdown manager killing pod with gracePeriod", grace=20),
        worker(UID, 30.1, "termination_requested", cause="removed"),
        worker(UID, 30.11, "terminating_enter", grace=20),
        pod(
            UID,
            105,
            30.2,
            phase="Running",
            start_time=2,
            conditions=_conds("True", 5, extra=extra),
            containers=[ctr(state="running", started=4, ready=True)],
        ),
        worker(UID, 33.2, "containers_terminated"),
        worker(UID, 33.21, "terminated_enter"),
        pod(
            UID,
            106,
            33.4,
            phase="Failed" if failed else "Running",
            reason="Terminated",
            message=SHUTDOWN,
            start_time=2,
            conditions=_conds("False", 33, extra=extra),
            containers=killed,
        ),
        worker(UID, 33.5, "worker_done"),
    ]


def stuck_terminating() -> list[Observation]:
    """DELETE at 20 (grace 30); the runtime never kills app; still terminating at 200."""
    run = {"phase": "Running", "start_time": 2, "deletion": 50, "deletion_grace": 30}
    return [
        *normal_start(),
        pod(
            UID,
            105,
            20.4,
            **run,
            conditions=_conds("True", 5),
            containers=[ctr(state="running", started=4, ready=True)],
        ),
        worker(UID, 20.45, "termination_requested", cause="deletion"),
        worker(UID, 20.46, "terminating_enter", grace=30),
        event(
            UID,
            "ev-exceeded",
            65.0,
            "ExceededGracePeriod",
            "Container runtime did not kill the pod within specified grace period.",
            type_="Warning",
        ),
        event(
            UID,
            "ev-failedkill",
            65.1,
            "FailedKillPod",
            "error killing pod: rpc error: code = DeadlineExceeded",
            type_="Warning",
        ),
        worker(UID, 65.2, "sync_error", message="Error syncing pod, skipping"),
        pod(
            UID,
            106,
            200.0,
            **run,
            conditions=_conds("False", 21),
            containers=[ctr(state="running", started=4)],
        ),
    ]


ALL_SCENARIOS = {
    "normal_start": normal_start,
    "graceful_delete": graceful_delete,
    "api_only": api_only,
    "delete_during_setup": delete_during_setup,
    "rejected_at_admission": rejected_at_admission,
    "orphaned": orphaned,
    "static_uid_reuse": static_uid_reuse,
    "crash_loop": crash_loop,
    "node_shutdown_failed": lambda: node_shutdown(failed=True),
    "node_shutdown_not_failed": lambda: node_shutdown(failed=False),
    "stuck_terminating": stuck_terminating,
}
