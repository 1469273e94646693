"""Worker-lane evidence: spans alone, logs that begin or end mid-phase, holes, restarts, UID reuse."""

from __future__ import annotations

from datetime import timedelta

from tests.lifecycle import scenarios
from tests.lifecycle.factories import NODE, at, marker, pod, rows, span, t, worker
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Kind, Observation, Source, Transition, digest_key

UID = scenarios.UID


def process(pid: int, first: float, last: float, *, started: float | None = None) -> Observation:
    """A ``kubelet_process`` observation: the kubelet ``pid`` logged from T0+first to T0+last."""
    return Observation(
        kind=Kind.KUBELET_PROCESS,
        source=Source.KUBELET_LOG,
        observed_at=t(first),
        dedupe_key=digest_key("process", pid, first, last),
        node=NODE,
        payload={
            "pid": pid,
            "first_at": t(first).isoformat(),
            "last_at": t(last).isoformat(),
            "lines": 100,
            "started_at": t(started).isoformat() if started is not None else None,
            "version": None,
            "verbosity": 4,
            "starts": [t(started).isoformat()] if started is not None else [],
        },
    )


def with_pid(obs: Observation, pid: int) -> Observation:
    return Observation(
        obs.kind,
        obs.source,
        obs.observed_at,
        obs.dedupe_key,
        obs.pod_uid,
        obs.node,
        obs.namespace,
        obs.name,
        {**obs.payload, "pid": pid},
    )


def test_spans_alone_give_observed_phases() -> None:
    obs = scenarios.api_only() + [
        span(UID, "syncPod", 1.1, 4.1, update_type="create"),
        span(UID, "syncPod", 14.1, 14.2),
        span(UID, "syncTerminatingPod", 20.46, 23.2),
        span(UID, "syncTerminatedPod", 23.21, 23.6),
    ]
    tl = derive_pod_timeline(obs)
    # syncPod spans pin SyncPod; the API's container start splits it into setup and running. The worker
    # marks the pod terminated as a clean syncTerminatingPod span ends: cleanup begins there.
    assert rows(tl, "worker") == [
        ("setup", at(1.1), at(4), "inferred"),
        ("running", at(4), at(20.46), "inferred"),
        ("terminating", at(20.46), at(23.2), "observed"),
        ("cleanup", at(23.2), at(23.6), "observed"),
    ]
    assert [iv.attrs["start_from"] for iv in tl.lane("worker")] == [
        "span:syncPod:start",
        "all_containers_started",
        "span:syncTerminatingPod:start",
        "span:syncTerminatingPod:end",
    ]


def test_log_that_begins_mid_life_fills_what_came_before_from_the_api() -> None:
    """The kubelet lines begin at the termination request: setup and running come from the API."""
    tl = derive_pod_timeline(scenarios.api_only() + scenarios.kubelet_graceful_delete())
    assert rows(tl, "worker") == [
        ("setup", at(1), at(4), "inferred"),
        ("running", at(4), at(20.45), "inferred"),
        ("terminating", at(20.45), at(23.2015), "observed"),
        ("cleanup", at(23.2015), at(23.6005), "observed"),
    ]


def test_kubelet_lines_without_transitions_fall_back_to_inference() -> None:
    obs = scenarios.api_only() + [worker(UID, 14.0, "sync_error", message="Error syncing pod, skipping")]
    assert rows(derive_pod_timeline(obs), "worker") == rows(
        derive_pod_timeline(scenarios.api_only()), "worker"
    )


def test_an_excerpt_that_begins_mid_phase_draws_the_phase_with_an_unknown_start() -> None:
    """GIVEN only "SyncTerminatingPod exit", "Pod terminated all containers successfully",
    "SyncTerminatedPod exit" and "Pod is complete and the worker can now stop"
    THEN terminating is drawn from its first line with an unknown start, cleanup with known bounds."""
    obs = [
        worker(UID, 10.0, Transition.TERMINATING_EXIT),
        worker(UID, 10.1, Transition.CONTAINERS_TERMINATED),
        worker(UID, 12.0, Transition.TERMINATED_EXIT),
        worker(UID, 12.1, Transition.WORKER_DONE),
    ]
    tl = derive_pod_timeline(obs)
    assert rows(tl, "worker") == [
        ("terminating", at(10.0), at(10.1), "observed"),
        ("cleanup", at(10.1), at(12.1), "observed"),
    ]
    terminating, cleanup = tl.lane("worker")
    assert terminating.attrs["start_unknown"] is True and terminating.start_known is False
    assert cleanup.start_known and cleanup.end_known


def test_only_exit_lines_give_phases_with_unknown_bounds_and_an_unknown_stretch() -> None:
    obs = [worker(UID, 10.0, Transition.TERMINATING_EXIT), worker(UID, 12.0, Transition.TERMINATED_EXIT)]
    tl = derive_pod_timeline(obs)
    # Terminating and cleanup were seen once each: each is drawn where it was seen (terminating an
    # instant, neither bound known); between them the boundary is not known.
    # The exit line alone proves cleanup ran until then (its start is not in the evidence).
    assert [(iv.state, iv.start, iv.end) for iv in tl.lane("worker")] == [
        ("terminating", t(10.0), t(10.0)),
        ("unknown", t(10.0), t(12.0)),
        ("cleanup", t(12.0), t(12.0)),
    ]
    assert tl.lane("worker")[0].attrs["start_unknown"] and tl.lane("worker")[0].attrs["end_unknown"]
    assert tl.lane("worker")[1].attrs["between"] == ["terminating", "cleanup"]
    assert tl.lane("worker")[2].attrs["start_unknown"] is True


def test_a_gap_in_the_log_is_an_unknown_stretch_not_an_observed_setup() -> None:
    """GIVEN setup lines, then (lines missing) the cleanup lines
    THEN setup ends at its last line (end unknown), an unknown stretch covers the hole, and cleanup starts
    at its first line (start unknown): nothing claims setup lasted until cleanup."""
    obs = [
        worker(UID, 1.0, Transition.FIRST_SEEN),
        worker(UID, 1.1, Transition.SYNC_ENTER),
        worker(UID, 3.0, Transition.SYNC_EXIT),
        # hole: the termination request and SyncTerminatingPod lines are missing
        worker(UID, 40.0, Transition.TERMINATED_ENTER),
        worker(UID, 40.5, Transition.WORKER_DONE),
    ]
    tl = derive_pod_timeline(obs)
    assert [
        (iv.state, iv.start, iv.end, iv.attrs.get("start_unknown"), iv.attrs.get("end_unknown"))
        for iv in tl.lane("worker")
    ] == [
        ("setup", t(1.0), t(3.0), None, True),  # the first sync, until it returned
        ("unknown", t(3.0), t(40.0), None, None),
        ("cleanup", t(40.0), t(40.5), True, None),
    ]
    assert tl.lane("worker")[1].attrs["between"] == ["sync", "cleanup"]


def test_a_gap_is_filled_from_the_api_where_its_bounds_fit() -> None:
    obs = scenarios.api_only() + [
        worker(UID, 1.1, Transition.FIRST_SEEN),
        worker(UID, 1.2, Transition.SYNC_ENTER),
        worker(UID, 23.3, Transition.TERMINATED_ENTER),
        worker(UID, 23.6, Transition.WORKER_DONE),
    ]
    tl = derive_pod_timeline(obs)
    assert rows(tl, "worker") == [
        ("setup", at(1.1), at(4), "inferred"),
        ("running", at(4), at(20), "inferred"),
        ("terminating", at(20), at(23), "inferred"),
        ("cleanup", at(23), at(23.6), "inferred"),
    ]


def test_a_restarted_kubelet_resyncing_a_running_pod_is_not_a_new_life() -> None:
    """GIVEN a pod set up and running under kubelet 100, and kubelet 200 (started at 500 s) syncing it
    "for the first time" again
    THEN running continues across the restart (marked on it), no new setup, no new cycle, no uid_reuse."""
    obs = scenarios.api_start() + [
        with_pid(worker(UID, 1.1, Transition.FIRST_SEEN), 100),
        with_pid(worker(UID, 1.2, Transition.SYNC_ENTER), 100),
        with_pid(worker(UID, 4.2, Transition.SYNC_EXIT), 100),
        with_pid(worker(UID, 501.0, Transition.FIRST_SEEN), 200),
        with_pid(worker(UID, 501.1, Transition.SYNC_ENTER), 200),
        with_pid(worker(UID, 501.4, Transition.SYNC_EXIT), 200),
        process(100, -300.0, 450.0),
        process(200, 500.0, 600.0, started=500.0),
    ]
    tl = derive_pod_timeline(obs)
    assert [(iv.state, iv.start, iv.end) for iv in tl.lane("worker")] == [
        ("setup", t(1.1), t(4)),
        ("running", t(4), None),
    ]
    assert {iv.attrs["cycle"] for iv in tl.lane("worker")} == {0}
    assert tl.lane("worker")[1].attrs["kubelet_restarts"] == [t(500.0).isoformat(timespec="microseconds")]
    assert "uid_reuse" not in {f.kind for f in tl.findings}


def test_a_restarted_kubelets_relist_add_says_the_pod_is_there_and_the_delete_after_it_still_counts() -> None:
    """GIVEN a pod's V2 lines under kubelet 100 (SyncLoop ADD at 1 s, PLEG starts of the sandbox and the
    container at 2 s and 3 s), kubelet 200 started at 500 s, its initial list's SyncLoop ADD of the pod at
    501 s and a SyncLoop DELETE at 502 s THEN the pod ran from 3 s through the restart (the re-list's ADD
    only says it was there: no new setup), and terminating begins at the DELETE right after it."""
    obs = [
        with_pid(worker(UID, 1.0, Transition.SYNCLOOP_ADD), 100),
        with_pid(worker(UID, 2.0, Transition.CONTAINER_STARTED), 100),
        with_pid(worker(UID, 3.0, Transition.CONTAINER_STARTED), 100),
        with_pid(worker(UID, 501.0, Transition.SYNCLOOP_ADD), 200),
        with_pid(worker(UID, 502.0, Transition.SYNCLOOP_DELETE), 200),
        process(100, -300.0, 450.0),
        process(200, 500.0, 600.0, started=500.0),
    ]
    tl = derive_pod_timeline(obs)
    assert [(iv.state, iv.start, iv.end) for iv in tl.lane("worker")] == [
        ("setup", t(1.0), t(3.0)),
        ("running", t(3.0), t(502.0)),
        ("terminating", t(502.0), None),
    ]


def test_a_pod_the_new_kubelet_started_is_set_up_by_it_not_relisted() -> None:
    """GIVEN kubelet 200 started at 500.3 s (kubelet 100 logged until 450 s), a pod created at 499 s while it
    restarted, whose status's startTime is 500 s (the kubelet that first syncs a pod sets it, in whole
    seconds: the sync at 500.6 s reads 500), and kubelet 200's first sync of it at 500.6 s THEN that first
    sync begins setup: the startTime, up to a second early, says this kubelet was the first to take the
    pod, so its first sight is no re-list of a pod it found at its start."""
    obs = [
        pod(UID, 5, 499.5, phase="Pending", created=499.0),
        pod(UID, 6, 502.0, phase="Pending", created=499.0, start_time=500.0),
        with_pid(worker(UID, 500.6, Transition.FIRST_SEEN), 200),
        with_pid(worker(UID, 500.7, Transition.SYNC_ENTER), 200),
        process(100, -300.0, 450.0),
        process(200, 500.3, 600.0, started=500.3),
    ]
    (setup,) = derive_pod_timeline(obs).lane("worker")
    assert (setup.state, setup.start, setup.source, setup.attrs["start_from"]) == (
        "setup",
        t(500.6),
        "observed",
        "first_seen",
    )


def _restart_mid_termination() -> list[Observation]:
    """A pod deleted at 20 s under kubelet 100, kubelet 200 started at 60 s, the containers gone at 90 s."""
    return [
        with_pid(worker(UID, 1.0, Transition.FIRST_SEEN), 100),
        with_pid(worker(UID, 1.1, Transition.SYNC_ENTER), 100),
        with_pid(worker(UID, 20.0, Transition.TERMINATION_REQUESTED, cause="deletion"), 100),
        with_pid(worker(UID, 20.1, Transition.TERMINATING_ENTER, grace=300), 100),
        # kubelet 200 starts at 60 s: it sees the pod (deletionTimestamp set) for the first time
        with_pid(worker(UID, 61.0, Transition.FIRST_SEEN), 200),
        with_pid(worker(UID, 61.0001, Transition.TERMINATION_REQUESTED, cause="deletion"), 200),
        with_pid(worker(UID, 61.1, Transition.TERMINATING_ENTER, grace=300), 200),
        with_pid(worker(UID, 90.0, Transition.CONTAINERS_TERMINATED), 200),
        with_pid(worker(UID, 90.5, Transition.WORKER_DONE), 200),
        process(100, -600.0, 50.0),
        process(200, 60.0, 100.0, started=60.0),
    ]


def test_a_restart_mid_termination_continues_the_phase() -> None:
    obs = _restart_mid_termination()
    tl = derive_pod_timeline(obs)
    terminating = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert [(iv.start, iv.end) for iv in terminating] == [(t(20.0), t(90.0))]
    assert terminating[0].attrs["kubelet_restarts"] == [t(60.0).isoformat(timespec="microseconds")]
    assert "setup" not in [iv.state for iv in tl.lane("worker") if iv.start > t(50)]


def test_a_kubelet_restart_is_listed_on_the_interval_it_fell_inside_and_not_on_one_it_bounds() -> None:
    """GIVEN the restart mid-termination above (kubelet 200 started at 60 s, inside terminating 20-90 s) and
    (SYNTHETIC) two more kubelet starts on the node at exactly 20 s and 90 s, the instants terminating began
    and ended THEN only 60 s is listed, on terminating: docs/timeline-schema.md's ``kubelet_restarts`` are
    the starts inside an interval, and one at an interval's bound is that bound (a bound can be a kubelet
    restart: ``start_from`` / ``end_from``), listed on neither side."""
    obs = [
        *_restart_mid_termination(),
        process(300, 20.0, 20.0, started=20.0),
        process(400, 90.0, 90.0, started=90.0),
    ]
    tl = derive_pod_timeline(obs)
    assert [(iv.state, iv.attrs.get("kubelet_restarts")) for iv in tl.lane("worker")] == [
        ("setup", None),
        ("terminating", [t(60.0).isoformat(timespec="microseconds")]),
        ("cleanup", None),
    ]


def test_a_static_pod_whose_uid_comes_back_starts_a_new_cycle() -> None:
    tl = derive_pod_timeline(scenarios.static_uid_reuse())
    assert [iv.attrs["cycle"] for iv in tl.lane("worker")] == [0, 0, 0, 0, 1, 1]
    assert [f.kind for f in tl.findings] == ["uid_reuse"]


def test_a_phase_left_open_when_the_static_pods_worker_starts_over_ends_there() -> None:
    """GIVEN a static pod whose worker was terminating when its node rebooted (no exit line ever came)
    WHEN the restarted kubelet syncs the same UID from the first time again (a new life: static pods'
    UIDs come back)
    THEN the old terminating phase ends, unknown, where the new cycle begins."""
    static = scenarios.STATIC_UID
    obs = [
        worker(static, 1.0, Transition.FIRST_SEEN),
        worker(static, 1.1, Transition.SYNC_ENTER),
        worker(static, 1.2, Transition.SYNC_EXIT),
        worker(static, 20.0, Transition.TERMINATION_REQUESTED, cause="removed"),
        worker(static, 20.1, Transition.TERMINATING_ENTER, grace=30),
        # reboot: nothing from the old kubelet after this
        worker(static, 95.0, Transition.FIRST_SEEN),
        worker(static, 95.1, Transition.SYNC_ENTER),
    ]
    tl = derive_pod_timeline(obs)
    got = [(iv.state, iv.start, iv.end, iv.attrs["cycle"]) for iv in tl.lane("worker")]
    assert got == [
        ("setup", t(1.0), t(1.2), 0),  # the first sync, until it returned
        ("unknown", t(1.2), t(20.0), 0),  # no word on the containers: setup or running
        ("terminating", t(20.0), t(95.0), 0),
        ("setup", t(95.0), None, 1),  # the new life's first sync has not returned
    ]
    assert (
        tl.lane("worker")[2].attrs["end_from"] == "next_cycle" and tl.lane("worker")[2].attrs["end_unknown"]
    )
    # In any order, the same timeline.
    assert derive_pod_timeline(list(reversed(obs))).lanes == tl.lanes


def test_an_ordinary_pods_worker_never_starts_a_second_cycle() -> None:
    """A first sync after termination for an API pod (its UID never comes back) is out of order, not a life."""
    obs = [
        worker(UID, 1.0, Transition.FIRST_SEEN),
        worker(UID, 1.1, Transition.SYNC_ENTER),
        worker(UID, 20.0, Transition.TERMINATION_REQUESTED, cause="deletion"),
        worker(UID, 22.0, Transition.CONTAINERS_TERMINATED),
        worker(UID, 23.0, Transition.WORKER_DONE),
        worker(UID, 95.0, Transition.FIRST_SEEN),
        worker(UID, 95.1, Transition.SYNC_ENTER),
    ]
    tl = derive_pod_timeline(obs)
    assert {iv.attrs["cycle"] for iv in tl.lane("worker")} == {0}
    # The first sync never returned before termination: setup until then.
    assert [iv.state for iv in tl.lane("worker")] == ["setup", "terminating", "cleanup"]
    assert "uid_reuse" not in {f.kind for f in tl.findings}


def test_open_phase_records_how_long_it_was_seen() -> None:
    obs = [
        worker(UID, 1.0, Transition.FIRST_SEEN),
        worker(UID, 1.1, Transition.SYNC_ENTER),
        worker(UID, 20.0, Transition.TERMINATION_REQUESTED, cause="deletion"),
        worker(UID, 20.1, Transition.TERMINATING_ENTER, grace=30),
        # The sync failed and is retried: the phase goes on past its exit line.
        worker(UID, 300.0, Transition.TERMINATING_EXIT),
        marker(UID, 300.0005, "SyncError", "Error syncing pod, skipping"),
    ]
    terminating = derive_pod_timeline(obs).lane("worker")[-1]
    assert (terminating.state, terminating.end) == ("terminating", None)
    assert terminating.attrs["seen_until"] == t(300.0).isoformat(timespec="microseconds")
    assert t(300.0) - terminating.start == timedelta(seconds=280)


def test_a_kubelet_restart_known_only_from_a_reset_status_is_marked_on_the_running_worker():
    """GIVEN a pod running on node-a since T0+3, and, with no kubelet log, another pod's status that the
    node's kubelet rewrote from scratch at T0+100 (the ``kubelet_process`` collectors/parsers/kubectl.py
    reads from it: the restarted kubelet's start, ``from_status_reset``) THEN the worker's running bar
    carries that restart: the kubelet that runs the pod restarted under it (a restarted kubelet re-ADDs
    every pod, k8s-facts.md; the reset status is what the API shows of it)."""
    from dataclasses import replace

    from tests.lifecycle.factories import ctr, pod

    run = {"phase": "Running", "start_time": 1, "containers": [ctr("app", "running", started=3)]}
    snaps = [pod("u1", 1, 1), pod("u1", 2, 5, **run), pod("u1", 3, 200, **run)]
    reset = process(0, 100, 100, started=100)
    reset = replace(
        reset, payload={**reset.payload, "pid": None, "from_status_reset": "kube-system/etcd-node-a"}
    )
    (running,) = [iv for iv in derive_pod_timeline([*snaps, reset]).lane("worker") if iv.state == "running"]
    assert running.attrs["kubelet_restarts"] == [t(100).isoformat(timespec="microseconds")]
