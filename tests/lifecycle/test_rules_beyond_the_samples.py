"""Rules no test stated (issue #38): found by reading which lines of timelines/lifecycle/ the tests mutmut
runs never executed (coverage), and by the survivors of the samples fresh-1210a and fresh-1210m. Pods, markers and events are hand-built
(SYNTHETIC) in the collector's normalized shapes (tests/lifecycle/factories.py); the texts are the
kubelet's (pkg/kubelet/eviction/helpers.go, k8s.io/api core/v1)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.lifecycle import scenarios
from tests.lifecycle.factories import ctr, event, last_terminated, marker, pod, t, worker
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.facts import collect_facts
from timelines.lifecycle.observation import EARLIEST, LATEST, InvalidObservation, Observation
from timelines.lifecycle.observation import Transition as T
from timelines.lifecycle.resolve import anchors_of, resolve_pod_observations

UID = "7a1e9c3d-0000-4b2a-8c1d-00000000b001"


def test_a_container_killed_by_a_signal_says_which() -> None:
    """GIVEN a container whose terminated state carries the signal that ended it (ContainerStateTerminated
    .signal: 9) and exit code 137 THEN its terminated interval says signal 9 beside the exit code; one
    that exited by itself (exit code 1, no signal) carries no signal at all (not a null: it was not said)."""
    killed = ctr("app", "terminated", reason="Error", started=2.0, finished=9.0, exit_code=137)
    killed["signal"] = 9
    exited = ctr("side", "terminated", reason="Error", started=2.0, finished=8.0, exit_code=1)
    snap = pod(UID, 5, 10.0, phase="Failed", start_time=1.0, containers=[killed, exited])
    tl = derive_pod_timeline([snap])
    (app,) = [iv for iv in tl.lane("container:app") if iv.state == "terminated"]
    (side,) = [iv for iv in tl.lane("container:side") if iv.state == "terminated"]
    assert (app.attrs["exit_code"], app.attrs["signal"]) == (137, 9)
    assert side.attrs["exit_code"] == 1 and "signal" not in side.attrs


def test_an_eviction_for_a_node_condition_names_the_condition() -> None:
    """GIVEN a pod evicted for a node condition with no resource named: its status Failed / Evicted with the
    kubelet's nodeConditionMessageFmt, "The node had condition: [DiskPressure]. ", and the Evicted event
    THEN the evicted finding says the node had condition [DiskPressure] and names no resource nor
    threshold (the message gives none)."""
    message = "The node had condition: [DiskPressure]. "
    running = pod(
        UID, 3, 5.0, phase="Running", start_time=1.0, containers=[ctr("app", "running", started=2.0)]
    )
    evicted = pod(
        UID,
        4,
        12.0,
        phase="Failed",
        start_time=1.0,
        reason="Evicted",
        message=message,
        containers=[ctr("app", "terminated", started=2.0, finished=11.0, exit_code=137)],
    )
    tl = derive_pod_timeline(
        [running, evicted, event(UID, "ev-1", 12.0, "Evicted", message, type_="Warning")]
    )
    (found,) = [f for f in tl.findings if f.kind == "evicted"]
    assert (found.attrs["condition"], found.attrs["resource"], found.attrs["threshold"]) == (
        "[DiskPressure]",
        None,
        None,
    )
    assert ": the node had condition [DiskPressure]." in found.message


def test_a_finished_containers_rewritten_times_are_a_status_change_after_the_terminal_phase() -> None:
    """GIVEN a pod seen Succeeded at 10 s (its container terminated 2-9 s, exit 0), then seen at 20 s still
    Succeeded with the same state and reason but the container's finish rewritten to 15 s (a status a
    restarted kubelet wrote again) THEN status_after_terminal finds it at 20 s and says the container's
    times changed: a terminal pod's status is final (the kubelet never moves it out of a terminal phase)."""

    def done(rv: int, seen: float, finished: float):
        c = ctr("app", "terminated", reason="Completed", started=2.0, finished=finished, exit_code=0)
        return pod(UID, rv, seen, phase="Succeeded", start_time=1.0, containers=[c])

    tl = derive_pod_timeline([done(4, 10.0, 9.0), done(5, 20.0, 15.0)])
    (found,) = [f for f in tl.findings if f.kind == "status_after_terminal"]
    assert found.start == t(20.0)
    assert found.attrs == {
        "terminal_phase": "Succeeded",
        "change": "container app times / restart count changed",
    }


def test_a_remove_with_no_delete_before_it_is_a_force_delete_that_begins_termination() -> None:
    """GIVEN a kubelet's V2 lines of a pod (SYNTHETIC, the messages of kubelet.go syncLoopIteration and
    PLEG): SyncLoop ADD at 1 s, PLEG ContainerStarted at 2 s (the sandbox: PLEG reports it as a container)
    and 3 s (the container), then SyncLoop REMOVE at 20 s with no SyncLoop DELETE before it (``kubectl
    delete --force --grace-period=0``: the object is gone at once, the kubelet learns it from the REMOVE)
    THEN the worker set up from 1 s, ran from 3 s, and began terminating at the REMOVE, its cause
    "removed" (the kubelet kills a pod it still runs when its object is gone, HandlePodRemoves)."""
    obs = [
        worker(UID, 1.0, T.SYNCLOOP_ADD),
        worker(UID, 2.0, T.CONTAINER_STARTED),
        worker(UID, 3.0, T.CONTAINER_STARTED, message="ContainerStarted app"),
        worker(UID, 20.0, T.SYNCLOOP_REMOVE),
    ]
    lane = derive_pod_timeline(obs).lane("worker")
    assert [(iv.state, iv.start) for iv in lane] == [
        ("setup", t(1.0)),
        ("running", t(3.0)),
        ("terminating", t(20.0)),
    ]
    assert (lane[-1].attrs["cause"], lane[-1].attrs["start_from"]) == ("removed", "syncloop_remove")


def test_node_level_lines_are_context_only_from_the_pods_own_nodes_and_near_its_evidence() -> None:
    """GIVEN a pod's own kubelet lines on node-a from 100 s to 200 s and UID-less lines that name no pod
    (the eviction manager's "attempting to reclaim", SYNTHETIC): on node-a at 150 s, at 100 - 300 s and
    at 200 + 300 s (CONTEXT_MARGIN, 5 minutes, on either side), at 200 + 301 s, and on node-b at 150 s
    THEN the pod's observations take those of its own node within 5 minutes of its evidence (bounds
    included) and no other: another node's reclaim says nothing of this pod."""
    own = [worker(UID, 100.0, T.FIRST_SEEN), worker(UID, 200.0, T.SYNC_EXIT)]
    reclaim = "Eviction manager: attempting to reclaim"

    def node_line(seen: float, node: str) -> Observation:
        m = marker(UID, seen, "EvictionReclaim", reclaim)
        return replace(m, pod_uid=None, namespace=None, name=None, node=node, dedupe_key=f"{node}:{seen}")

    near = [node_line(150.0, "node-a"), node_line(-200.0, "node-a"), node_line(500.0, "node-a")]
    far = [node_line(501.0, "node-a"), node_line(150.0, "node-b")]
    got = resolve_pod_observations(UID, own, [*far, *near], anchors_of(own))
    assert {o.dedupe_key for o in got} == {o.dedupe_key for o in own + near}


def test_a_pod_known_only_from_lines_whose_columns_name_it_not_is_named_by_their_pod_reference() -> None:
    """GIVEN a pod known only from V4 worker lines whose stored rows carry its UID but no namespace or name
    (SYNTHETIC: a row an older ingest stored with the name only in the line's ``pod="ns/name"``, kept as
    the payload's ``pod_ref``) THEN its timeline is named by that reference: namespace and name split at
    the first '/', so a user finds the pod by the name the kubelet logged."""
    lines = [
        replace(worker(UID, s, tr, pod_ref="shop/web-7d9f8b6c4-x2k9p"), namespace=None, name=None)
        for s, tr in ((1.0, T.FIRST_SEEN), (2.0, T.SYNC_EXIT))
    ]
    tl = derive_pod_timeline(lines)
    assert (tl.namespace, tl.name) == ("shop", "web-7d9f8b6c4-x2k9p")


def test_a_crash_loop_begins_at_the_first_restart_seen_even_before_a_snapshot_counts_it() -> None:
    """GIVEN a container seen running at 10 s (started 2 s, restartCount 0), then at 100 s with restartCount
    3: running since 90 s, its last run 80-85 s (exit 1) THEN crash_loop finds 3 restarts within its window
    and begins at 80 s, when the earliest restart the statuses show (its last run) began, not at 100 s,
    when a snapshot first counted one; and it cites the snapshot that counted them."""
    first = pod(
        UID, 3, 10.0, phase="Running", start_time=1.0, containers=[ctr("app", "running", started=2.0)]
    )
    again = pod(
        UID,
        4,
        100.0,
        phase="Running",
        start_time=1.0,
        containers=[ctr("app", "running", started=90.0, restarts=3, last=last_terminated(80.0, 85.0))],
    )
    tl = derive_pod_timeline([first, again])
    (found,) = [f for f in tl.findings if f.kind == "crash_loop"]
    assert found.start == t(80.0)
    assert (found.attrs["restarts_in_window"], found.attrs["restart_count"]) == (3, 3)
    assert set(found.evidence) == {again.dedupe_key}


def test_restarts_exactly_a_window_apart_are_within_the_crash_loop_window() -> None:
    """GIVEN a container whose runs began at 0, 200, 400 and 600 s (each seen in a later snapshot: 150,
    350, 550 and 760 s, restartCount 0 to 3) THEN crash_loop counts 3 restarts within its 10-minute
    window: the first and the fourth start are 10 minutes apart, which is within it (a window is closed),
    though no two snapshots 10 minutes apart counted 3."""
    snaps = []
    for rv, (started, seen) in enumerate(((0.0, 150.0), (200.0, 350.0), (400.0, 550.0), (600.0, 760.0))):
        last = last_terminated(started - 200.0, started - 50.0) if rv else None
        container = ctr("app", "running", started=started, restarts=rv, last=last)
        snaps.append(pod(UID, rv + 3, seen, phase="Running", start_time=0.0, containers=[container]))
    tl = derive_pod_timeline(snaps)
    (found,) = [f for f in tl.findings if f.kind == "crash_loop"]
    assert found.attrs["restarts_in_window"] == 3
    assert found.message.startswith(
        "Container app of pod default/web-1 is crash looping: restarted 3 times within"
    )


def test_a_pod_whose_init_container_failed_was_not_killed_during_setup() -> None:
    """GIVEN a pod (restartPolicy Never) whose init container failed: seen Pending with its init container
    running from 1.5 s, then Failed at 5 s (init exit 1, the app container still PodInitializing), and no
    deletion THEN its setup ended with the terminal phase and cleanup followed, and there is no
    killed_during_setup finding: nobody asked it to terminate, the pod failed on its own."""
    init_running = ctr("init", "running", kind="init", started=1.5)
    init_failed = ctr(
        "init", "terminated", kind="init", started=1.5, finished=4.0, exit_code=1, reason="Error"
    )
    app = ctr("app", "waiting", reason="PodInitializing")
    obs = [
        pod(UID, 2, 0.5, phase="Pending"),
        pod(UID, 3, 2.0, phase="Pending", start_time=1.0, containers=[init_running, app]),
        pod(UID, 4, 5.0, phase="Failed", start_time=1.0, containers=[init_failed, app]),
    ]
    tl = derive_pod_timeline(obs)
    assert [(iv.state, iv.attrs.get("end_from")) for iv in tl.lane("worker")] == [
        ("setup", "api:terminal_phase"),
        ("cleanup", None),
    ]
    assert "killed_during_setup" not in {f.kind for f in tl.findings}


def test_a_status_change_after_the_terminal_phase_is_found_on_a_later_api_object_under_the_uid() -> None:
    """GIVEN two API objects under one UID (SYNTHETIC: a static pod's mirror pod recreated; created at 0 s
    and at 100 s): the first seen running and never finished, the second seen Succeeded at 110 s and then
    Running again at 120 s THEN status_after_terminal is found on the second, at 120 s: each object's
    terminal phase is its own, and one that never had one hides nothing of the next."""
    running = [ctr("app", "running", started=2.0)]
    first = pod(UID, 3, 10.0, phase="Running", start_time=1.0, containers=running)
    done = ctr("app", "terminated", reason="Completed", started=102.0, finished=108.0, exit_code=0)
    again = ctr("app", "running", started=115.0, restarts=1)
    second = [
        pod(UID, 5, 110.0, phase="Succeeded", created=100.0, start_time=101.0, containers=[done]),
        pod(UID, 6, 120.0, phase="Running", created=100.0, start_time=101.0, containers=[again]),
    ]
    tl = derive_pod_timeline([first, *second])
    (found,) = [f for f in tl.findings if f.kind == "status_after_terminal"]
    assert (found.start, found.attrs["change"]) == (t(120.0), "phase Succeeded → Running")


def test_at_one_instant_a_snapshot_without_a_resource_version_comes_before_the_api_servers_version() -> None:
    """GIVEN two snapshots of a pod observed at the same instant (10 s): one without a resourceVersion
    (SYNTHETIC: a row an older or hostile ingest stored without it) and the API server's version
    (resourceVersion 7) THEN they are read in that order, whichever order they are given in (the versioned
    one is the later word: the pod's last state is the API server's), and a missing version fails
    nothing (it is never compared with a number)."""
    running = pod(
        UID, 6, 10.0, phase="Running", start_time=1.0, containers=[ctr("app", "running", started=2.0)]
    )
    unversioned = replace(running, payload={**running.payload, "resource_version": None}, dedupe_key="no-rv")
    done = ctr("app", "terminated", reason="Completed", started=2.0, finished=9.0, exit_code=0)
    succeeded = pod(UID, 7, 10.0, phase="Succeeded", start_time=1.0, containers=[done])
    for given in ([unversioned, succeeded], [succeeded, unversioned]):
        facts = collect_facts(given)
        assert [(s.resource_version, s.phase) for s in facts.snapshots] == [
            (None, "Running"),
            (7, "Succeeded"),
        ]
        assert derive_pod_timeline(given).lane("api")[-1].state == "succeeded"


def test_the_supported_time_range_includes_its_start_and_excludes_its_end() -> None:
    """The times podlife stores run from the Unix epoch to the start of the year 9000, exclusive
    (docs/configuration.md, "Supported time range"): an observation at 1970-01-01T00:00:00Z is accepted,
    one a microsecond before it or at 9000-01-01T00:00:00Z is refused, and the refusal names the field,
    the value and the range."""
    base = pod(UID, 3, 1.0)
    assert replace(base, observed_at=EARLIEST).observed_at == EARLIEST
    for bad in (EARLIEST - timedelta(microseconds=1), LATEST):
        with pytest.raises(InvalidObservation) as refused:
            replace(base, observed_at=bad)
        assert refused.value.problems == [
            f"observed_at {bad.isoformat()} is outside the supported range "
            f"{EARLIEST.isoformat()} .. {LATEST.isoformat()} (exclusive)"
        ]
    assert replace(base, observed_at=LATEST - timedelta(microseconds=1)).observed_at < LATEST


def test_an_observation_without_a_dedupe_key_is_refused_as_one_without_a_key() -> None:
    """An observation whose dedupe key is empty is refused, and the refusal names it "<no dedupe key>" (there
    is no key to name it by) beside every problem found."""
    with pytest.raises(InvalidObservation) as refused:
        replace(pod(UID, 3, 1.0), dedupe_key="")
    assert refused.value.key == "<no dedupe key>"
    assert (
        str(refused.value) == "invalid observation '<no dedupe key>': dedupe_key must be a non-empty string"
    )


def test_a_static_pods_later_life_killed_during_setup_is_found_after_an_earlier_life_that_completed() -> None:
    """GIVEN a static pod's V4 worker lines (SYNTHETIC, pod_workers.go's messages): a first life that ran
    and completed on its own at 20 s (its terminating caused by the terminal phase), then, its manifest
    back (the same UID: a static pod's UID is its manifest's hash), a second life whose first sync began
    at 50 s and which was asked to terminate at 52 s, its manifest removed, before it returned THEN
    killed_during_setup is found for the second life: the first life's natural end is no request to
    terminate, and says nothing of the lives after it."""
    static = scenarios.STATIC_UID
    obs = [
        worker(static, 1.0, T.FIRST_SEEN),
        worker(static, 1.1, T.SYNC_ENTER),
        worker(static, 1.2, T.SYNC_EXIT),
        worker(static, 20.0, T.COMPLETED_NATURALLY),
        worker(static, 20.1, T.TERMINATING_ENTER),
        worker(static, 21.0, T.CONTAINERS_TERMINATED),
        worker(static, 21.5, T.WORKER_DONE, message="Pod is complete and the worker can now stop"),
        worker(static, 50.0, T.FIRST_SEEN),
        worker(static, 50.1, T.SYNC_ENTER),
        worker(static, 52.0, T.TERMINATION_REQUESTED, cause="removed"),
        worker(static, 52.1, T.TERMINATING_ENTER, grace=30),
    ]
    (found,) = [f for f in derive_pod_timeline(obs).findings if f.kind == "killed_during_setup"]
    assert (found.start, found.attrs["cause"], found.attrs["cycle"]) == (t(52.0), "removed", 1)


def test_a_shutdown_kill_belongs_to_the_api_object_that_existed_then_though_first_seen_later() -> None:
    """GIVEN two API objects under one UID (SYNTHETIC: a static pod's mirror pod recreated): the first
    created at 0 s and seen at 10 s, the second created at 100 s and first seen at 200 s (the collector
    saw it late), and the kubelet's shutdown kill of the pod at 150 s THEN there is one node_shutdown
    finding, the second object's: an object exists from its creation, not from when it was first seen,
    so the kill after the second's creation is not the first's."""
    running = [ctr("app", "running", started=2.0)]
    first = pod(UID, 3, 10.0, phase="Running", start_time=1.0, containers=running)
    second = pod(UID, 9, 200.0, phase="Failed", created=100.0, start_time=101.0, containers=running)
    kill = marker(UID, 150.0, "ShutdownKill", "Shutdown manager killing pod with gracePeriod", grace=30)
    found = [f for f in derive_pod_timeline([first, second, kill]).findings if f.kind == "node_shutdown"]
    assert [kill.dedupe_key in f.evidence for f in found] == [True]
    assert found[0].start >= t(100.0)
