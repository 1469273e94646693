"""Rules at the bounds of the findings (issue #38, survivors of sample fresh-1207z): the kubelet line that
says a pod never started, and how long a killed container may take to die.

Kubelet lines are written from the kubelet source's message formats (tests/lifecycle/kubelet_spec.py,
k8s-facts.md) and read through the real parser; hand-built observations use the parsers' shapes
(tests/lifecycle/factories.py). Neither is a sample: each test cites the rule it states."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.lifecycle import kubelet_spec as ks
from tests.lifecycle import scenarios
from tests.lifecycle.factories import cond, ctr, last_terminated, pod, t
from tests.lifecycle.test_kubelet_spec import parse_files, timelines
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.findings import Thresholds, detect_findings
from timelines.lifecycle.observation import Kind

UID = scenarios.UID

STATIC_UID = "5e8f0c4b1d9a2f3e6c7b8a9d0e1f2a3b"  # a static pod's UID: the hash of its manifest


def _static_pod_removed_before_it_could_start(version: str) -> list[str]:
    """The V4 lines (pod_workers.go of 1.23-1.26) of a static pod that waits to start behind another pod of
    the same full name and is removed (its manifest changed) before it may: UpdatePod logs the first sync,
    managePodLoop "Pod cannot start yet" (allowPodStart: another static pod of that name is started); the
    REMOVE's kill (deletePod, SyncPodKill without eviction) "Pod is being removed by the kubelet, begin
    teardown"; then managePodLoop finds termination requested before the start (canEverStart false) and
    completeUnstartedTerminated logs "Pod never started and the worker can now stop"."""
    life = ks.Life(kind="static", uid=STATIC_UID, namespace="kube-system", name="kube-apiserver-node-a")
    w = ks._Writer(life, version)
    us = timedelta(microseconds=1)
    add = life.t(0)
    w.syncloop(add, "ADD", source="file")
    w.add(
        add + 40 * us,
        4,
        "Pod is being synced for the first time",
        w.pod(),
        w.uid(),
        caller="pod_workers.go:585",
    )
    w.add(add + 90 * us, 4, "Pod cannot start yet", w.pod(), w.uid(), caller="pod_workers.go:867")
    removed = life.t(3)
    w.syncloop(removed, "REMOVE", source="file")
    w.add(
        removed + 30 * us,
        4,
        "Pod is being removed by the kubelet, begin teardown",
        w.pod(),
        w.uid(),
        caller="pod_workers.go:652",
    )
    w.add(
        removed + 70 * us,
        4,
        "Pod never started and the worker can now stop",
        w.pod(),
        w.uid(),
        caller="pod_workers.go:1079",
    )
    w.processing(removed + 80 * us, "terminating", done=True)
    return ks.render(w.lines, version, "journald-precise")


def test_a_worker_that_logs_pod_never_started_is_a_pod_that_never_started_a_container() -> None:
    """GIVEN a 1.24 static pod removed before its worker may start it WHEN its timeline is derived THEN
    never_started is raised, naming the kubelet's own line: "Pod never started and the worker can now stop"
    (pod_workers.go completeUnstartedTerminated, 1.23-1.26, docs/kubelet-lines.md) is logged only for a pod
    whose termination was requested before the worker ever ran it, so no container of it started. Here
    it is the only sign: no API object, no admission rejection, no "Pod cannot start ever" (1.27+)."""
    tl = timelines(parse_files([_static_pod_removed_before_it_could_start("1.24")]))[STATIC_UID]
    (finding,) = [f for f in tl.findings if f.kind == "never_started"]
    assert finding.attrs["signals"] == ["the kubelet logged 'Pod never started and the worker can now stop'"]
    assert "never started a container: the kubelet logged 'Pod never started" in finding.message


CONTAINER_ID = "62e04a72b1c5bb855056e55b44513a36a9f338baa5ee997b5ea20858b61fa058"
POD_UID = "4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f"


def _kill_then_death(died_after: float) -> list[str]:
    """A 1.29 V2 excerpt that begins at a kill: "Killing container with a grace period" gracePeriod=2 (the
    grace StopContainer was given: what the preStop hook left, floored at 2 s, k8s-facts "Kill-line
    history"), then PLEG's ContainerDied and "Generic (PLEG): container finished" ``died_after`` seconds
    later. The termination's start is not in the excerpt, so only the kill itself can be judged."""
    life = ks.Life(kind="delete", uid=POD_UID)
    w = ks._Writer(life, "1.29")
    kill = life.t(10)
    w.add(
        kill,
        2,
        "Killing container with a grace period",
        w.pod(),
        w.uid(),
        ("containerName", ("str", "app")),
        ("containerID", ("str", "containerd://" + CONTAINER_ID)),
        ("gracePeriod", ("int", 2)),
        caller="kuberuntime_container.go:809",
    )
    died = kill + timedelta(seconds=died_after)
    w.pleg(died, "ContainerDied", CONTAINER_ID)
    w.finished(died + timedelta(microseconds=30), CONTAINER_ID, 137)
    return ks.render(w.lines, "1.29", "journald-precise")


@pytest.mark.parametrize(
    ("died_after", "slow"),
    [
        (0.7, False),  # died on SIGTERM, well within its 2 s
        (4.0, False),  # exactly grace + 2 s: the latest a death in time can be seen
        (4.5, True),  # more than the relist lag can explain
    ],
)
def test_a_killed_container_is_late_only_past_its_grace_and_the_relist_slack(
    died_after: float, slow: bool
) -> None:
    """GIVEN a container killed with gracePeriod=2 whose death the PLEG reports ``died_after`` s later
    WHEN the timeline is derived THEN grace_exceeded names the kill only when the death came more than the
    grace plus 2 s after it: the runtime sends SIGKILL once the grace StopContainer was given runs out
    (kuberuntime_container.go killContainer), and PLEG sees a death at its next relist (every second),
    so a death in time can show up to the slack later but no more; a death within the grace is never
    late, however small the grace."""
    tl = timelines(parse_files([_kill_then_death(died_after)]))[POD_UID]
    late = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert bool(late) is slow, [f.message for f in late]
    if slow:
        assert "container app was killed at 2024-03-05 10:00:10 UTC with a 2s grace period" in late[0].message


def test_a_slow_kill_dates_the_findings_end_though_another_containers_death_is_not_seen() -> None:
    """GIVEN the excerpt above with app dying 4.5 s after its 2 s kill, and a second container, side,
    killed at the same instant whose death the excerpt does not show WHEN the timeline is derived THEN
    grace_exceeded ends at app's death: the slow kill's own end is known, though when every container had
    stopped is not."""
    lines = _kill_then_death(4.5)
    kill = next(line for line in lines if "Killing container with a grace period" in line)
    side = kill.replace('containerName="app"', 'containerName="side"').replace(CONTAINER_ID, "7" * 64)
    assert side != kill
    tl = timelines(parse_files([[*lines, side]]))[POD_UID]
    (late,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    died = next(m.at for m in tl.markers if m.reason == "ContainerDied")
    assert late.end == died


# --------------------------------------------------------------------------------------- crash loop window


def test_a_container_that_never_restarted_is_not_crash_looping_at_any_threshold() -> None:
    """GIVEN a pod whose container has run since its start with restartCount 0 in every status WHEN its
    findings are detected with the most sensitive threshold allowed (one restart) THEN no crash_loop: the
    kubelet raises restartCount by one for every restart of a container (kuberuntime_manager
    computePodActions), so a count that never rose is no restart at all."""
    base: dict[str, Any] = {
        "phase": "Running",
        "start_time": 1,
        "conditions": [cond("PodScheduled", "True", 0)],
    }
    obs = [
        pod(UID, 100, 1.5, **base, containers=[ctr(state="running", started=1.2)]),
        pod(UID, 101, 300, **base, containers=[ctr(state="running", started=1.2, ready=True)]),
    ]
    found = detect_findings(derive_pod_timeline(obs), obs, Thresholds(crash_loop_restarts=1))
    assert [f.kind for f in found] == []


def test_restarts_counted_exactly_the_window_apart_are_within_it() -> None:
    """GIVEN a pod started at 1 s whose only status, 10 minutes later (601 s), shows restartCount 3 WHEN its
    timeline is derived THEN crash_loop is raised with 3 restarts: the pod's startTime is restartCount 0
    (the kubelet starts every container with count 0), and a rise between two points at most the window
    (10 minutes) apart is "within" it, the window's last instant included."""
    running = ctr(state="running", started=590, restarts=3, last=last_terminated(500, 580))
    obs = [
        pod(
            UID,
            101,
            601,
            phase="Running",
            start_time=1,
            conditions=[cond("PodScheduled", "True", 0)],
            containers=[running],
        )
    ]
    (loop,) = [f for f in derive_pod_timeline(obs).findings if f.kind == "crash_loop"]
    assert loop.attrs["restarts_in_window"] == 3
    assert "restarted 3 times within 10m00s" in loop.message


# --------------------------------------------------------------------------------------- late starts


def test_a_start_in_the_uids_next_life_is_not_a_start_after_the_earlier_termination() -> None:
    """GIVEN static pod etcd-node-a terminated from 10 s (scenarios.static_uid_reuse: the kubelet's "Pod has
    been terminated but another pod with the same UID was created" at 27 s, its new worker's first sync at
    27.1 s) whose mirror pod object stays the same (synthetic: no deletion of it is seen), the API then
    showing etcd started at 28 s WHEN the timeline is derived THEN no started_after_termination_requested:
    the start belongs to the UID's next worker life, which began after the earlier termination had ended
    (pod_workers.go lets a UID start again only once its previous worker finished), so it is not the race
    kubernetes PR #102344 closed."""
    u = scenarios.STATIC_UID
    mirror: dict[str, Any] = {
        "static": True,
        "phase": "Running",
        "name": "etcd-node-a",
        "namespace": "kube-system",
    }
    first = [o for o in scenarios.static_uid_reuse() if not (o.kind == Kind.POD and o.observed_at >= t(10.2))]
    again = ctr("etcd", "running", started=28)
    obs = first + [
        pod(
            u,
            15,
            28.3,
            **mirror,
            start_time=28,
            conditions=[cond("PodScheduled", "True", 0)],
            containers=[again],
        )
    ]
    kinds = [f.kind for f in derive_pod_timeline(obs).findings]
    assert kinds == ["uid_reuse"]
