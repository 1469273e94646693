"""Rules of the pod worker the lane states: a restarted kubelet's status, and the orphan lines of
SyncKnownPods (k8s-facts.md, V4 table: "Pod is orphaned and has not been started", "... still
terminating, notified the pod worker")."""

from __future__ import annotations

from typing import Any

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, cond, ctr, pod, rows, worker
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation

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
