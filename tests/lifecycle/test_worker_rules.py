"""Rules of the pod worker the lane states: a restarted kubelet's status, the orphan lines of
SyncKnownPods (k8s-facts.md, V4 table: "Pod is orphaned and has not been started", "... still
terminating, notified the pod worker"), where running begins, and a pod rejected at admission.

The observations are hand-built in the parsers' shapes (tests/lifecycle/factories.py); the message
texts are the kubelet's, as listed in /work/shared/k8s-facts.md."""

from __future__ import annotations

from typing import Any

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, cond, ctr, marker, pod, rows, t, worker
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Kind, Observation

UID = scenarios.UID
STATIC_UID = "static-uid-1"


def _restarted_static(containers: list[dict[str, Any]]) -> list[Observation]:
    """A static pod's mirror seen only after its kubelet restarted: created at 0 by an earlier kubelet,
    its startTime (700) rewritten by the new one, which is long after the creation (a reset status)."""
    conditions = [
        cond("PodScheduled", "True", 700),
        cond("Initialized", "True", 702),
        cond("Ready", "True", 705),
    ]
    return [
        pod(
            STATIC_UID,
            200,
            706,
            static=True,
            created=0,
            start_time=700,
            phase="Running",
            conditions=conditions,
            containers=containers,
            namespace="kube-system",
            name="etcd-node-a",
        )
    ]


def test_restarted_kubelets_status_dates_running_by_regular_containers_behind_an_init_container() -> None:
    """A reset status dates running by when every regular container's current run started; an init
    container (listed first, as initContainerStatuses come before containerStatuses) is not one of them
    and does not hide the regular ones."""
    containers = [
        ctr("setup", "terminated", kind="init", started=701, finished=702, exit_code=0, reason="Completed"),
        ctr("app", "running", started=703, ready=True),
    ]
    tl = derive_pod_timeline(_restarted_static(containers))
    assert rows(tl, "worker") == [
        ("setup", at(700), at(703), "inferred"),
        ("running", at(703), None, "inferred"),
    ]


def test_restarted_kubelets_status_without_container_statuses_dates_no_start() -> None:
    """A reset status that lists no container yet says nothing about when containers started: the lane
    stays unknown from the new startTime (and derivation does not fail)."""
    tl = derive_pod_timeline(_restarted_static([]))
    assert rows(tl, "worker") == [("unknown", at(700), None, "inferred")]


def test_orphaned_and_still_terminating_line_does_not_end_the_termination() -> None:
    """SyncKnownPods' "Pod is orphaned and still terminating, notified the pod worker" is logged while
    the worker is still terminating: termination runs on to "Pod terminated all containers successfully"."""
    message = "Pod is orphaned and still terminating, notified the pod worker"  # k8s-facts.md, V4
    obs = scenarios.graceful_delete() + [worker(UID, 21.0, "orphaned", message=message)]
    tl = derive_pod_timeline(obs)
    assert rows(tl, "worker")[2:] == [
        ("terminating", at(20.45), at(23.2015), "observed"),
        ("cleanup", at(23.2015), at(23.6005), "observed"),
    ]


def test_orphaned_pod_that_has_not_been_started_is_never_terminated() -> None:
    """ "Pod is orphaned and has not been started": the worker never started the pod and stops without a
    sync (no containers to kill), so no termination is drawn."""
    message = "Pod is orphaned and has not been started"  # k8s-facts.md, V4
    obs = scenarios.api_start()[:2] + [worker(UID, 1.05, "orphaned", message=message)]
    tl = derive_pod_timeline(obs)
    assert [row[0] for row in rows(tl, "worker")] == ["unknown"]


def test_pleg_container_started_ending_the_evidence_of_setup_dates_the_end_of_setup() -> None:
    """A V2 log (SyncLoop and PLEG lines only): the PLEG ContainerStarted of the pod's container, the
    last line of its start-up, is the kubelet's own sight of the start and ends setup there; the API's
    startedAt (RFC 3339 seconds, truncated) does not move it earlier."""
    pleg = "SyncLoop (PLEG): event for pod"  # k8s-facts.md, V2
    kill = "Killing container with a grace period"  # k8s-facts.md, V2
    obs = scenarios.api_start() + [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        worker(UID, 4.3, "container_started", message=pleg),
        marker(UID, 20.463, "KillingContainer", kill, container="app", grace=30),
    ]
    lane = rows(derive_pod_timeline(obs), "worker")
    assert lane[0] == ("setup", at(1.1), at(4.3), "kubelet")
    assert all(row[1] != at(4) for row in lane)


def test_container_start_in_the_second_of_a_static_pods_new_first_sight_is_that_lifes() -> None:
    """A static pod's UID comes back (same manifest): the new life begins at its worker's first sight.
    The API dates its container's start to the second (RFC 3339, truncated), here the very instant of
    that first sight: the start is the new life's, so it is running from there."""
    u = scenarios.STATIC_UID
    ref = "kube-system/etcd-node-a"
    ident: dict[str, Any] = {"name": "etcd-node-a", "namespace": "kube-system", "static": True}
    first_life = [o for o in scenarios.static_uid_reuse() if o.observed_at < t(27.05)]
    obs = first_life + [
        worker(u, 28.0, "first_seen", pod_ref=ref),
        worker(u, 28.01, "sync_enter", pod_ref=ref),
        pod(
            u,
            15,
            28.9,
            **ident,
            created=12,
            phase="Running",
            start_time=28,
            containers=[ctr("etcd", "running", started=28)],
        ),
    ]
    lane = rows(derive_pod_timeline(obs), "worker")
    assert lane[-1][:3] == ("running", at(28), None)


def test_delete_logged_in_the_instant_of_the_admission_denial_begins_no_termination() -> None:
    """A pod rejected at admission never had a worker: the DELETE that follows the denial (the
    controller deleting the Failed pod) begins no termination, even logged in the same instant
    (synthetic: both lines share one timestamp)."""
    api = [o for o in scenarios.rejected_at_admission() if o.kind != Kind.WORKER]
    obs = api + [
        worker(UID, 1.19, "syncloop_add", message="SyncLoop ADD"),
        worker(UID, 1.2, "syncloop_delete", message="SyncLoop DELETE"),
    ]
    lane = rows(derive_pod_timeline(obs), "worker")
    assert "terminating" not in [row[0] for row in lane]
