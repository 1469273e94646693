"""Worker-lane sources: spans alone, logs that begin mid-life, and kubelet lines that say nothing."""

from __future__ import annotations

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, rows, span, worker
from timelines.lifecycle.derive import derive_pod_timeline, worker_cycles
from timelines.lifecycle.facts import collect_facts
from timelines.lifecycle.observation import Transition

UID = scenarios.UID


def test_spans_alone_give_observed_phases() -> None:
    obs = scenarios.api_only() + [
        span(UID, "syncPod", 1.1, 4.1),
        span(UID, "syncPod", 14.1, 14.2),
        span(UID, "syncTerminatingPod", 20.46, 23.2),
        span(UID, "syncTerminatedPod", 23.21, 23.6),
    ]
    tl = derive_pod_timeline(obs)
    assert rows(tl, "worker") == [
        ("setup", at(1.1), at(20.46), "observed"),
        ("terminating", at(20.46), at(23.2), "observed"),
        ("cleanup", at(23.2), at(23.6), "observed"),
    ]
    assert [iv.attrs["start_from"] for iv in tl.lane("worker")] == [
        "span:syncPod:start",
        "span:syncTerminatingPod:start",
        "span:syncTerminatingPod:end",
    ]


def test_log_that_begins_mid_life_fills_setup_from_the_api() -> None:
    tl = derive_pod_timeline(scenarios.api_only() + scenarios.kubelet_graceful_delete())
    assert rows(tl, "worker") == [
        ("setup", at(1), at(4), "inferred"),
        ("terminating", at(20.45), at(23.2015), "observed"),
        ("cleanup", at(23.2015), at(23.6005), "observed"),
    ]


def test_kubelet_lines_without_transitions_fall_back_to_inference() -> None:
    obs = scenarios.api_only() + [worker(UID, 14.0, "sync_error", message="Error syncing pod, skipping")]
    assert rows(derive_pod_timeline(obs), "worker") == rows(
        derive_pod_timeline(scenarios.api_only()), "worker"
    )


def test_a_new_cycle_starts_only_when_setup_follows_termination() -> None:
    facts = collect_facts(scenarios.static_uid_reuse())
    cycles = worker_cycles(facts.worker_events)
    assert [(c[0].name, c[-1].name) for c in cycles] == [
        ("first_seen", "uid_reuse_restart"),
        ("first_seen", "sync_enter"),
    ]


def test_a_phase_left_open_when_the_worker_starts_over_ends_there() -> None:
    """GIVEN a static pod whose worker was terminating when its node rebooted (no exit line ever came)
    WHEN the restarted kubelet syncs the same UID from the first time again
    THEN the old terminating phase ends where the new cycle begins, and the new setup is open."""
    obs = [
        worker(UID, 1.0, Transition.FIRST_SEEN),
        worker(UID, 1.1, Transition.SYNC_ENTER),
        worker(UID, 1.2, Transition.SYNC_EXIT),
        worker(UID, 20.0, Transition.TERMINATING_ENTER, grace=30),
        # reboot: nothing from the old kubelet after this
        worker(UID, 95.0, Transition.FIRST_SEEN),
        worker(UID, 95.1, Transition.SYNC_ENTER),
    ]
    tl = derive_pod_timeline(obs)
    assert rows(tl, "worker") == [
        ("setup", at(1.0), at(20.0), "observed"),
        ("terminating", at(20.0), at(95.0), "observed"),
        ("setup", at(95.0), None, "observed"),
    ]
    assert [iv.attrs["end_from"] for iv in tl.lane("worker")] == [
        Transition.TERMINATING_ENTER,
        "next_cycle",
        None,
    ]
    # In any order, the same timeline.
    assert rows(derive_pod_timeline(list(reversed(obs))), "worker") == rows(tl, "worker")
