"""Worker-lane sources: spans alone, logs that begin mid-life, and kubelet lines that say nothing."""

from __future__ import annotations

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, rows, span, worker
from timelines.lifecycle.derive import derive_pod_timeline, worker_cycles
from timelines.lifecycle.facts import collect_facts

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
