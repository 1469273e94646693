"""Rules of the worker lane's pieces (timelines/lifecycle/worker.py): where an API bound fits between the
kubelet's evidence, what evidence an interval cites, when a state begun by a config line is drawn as an
instant, and how SyncPod splits into setup and running.

Each rule comes from the kubelet's semantics (/work/shared/k8s-facts.md, docs/kubelet-lines.md,
docs/timeline-schema.md) or from a real excerpt (tests/fixtures/real/kubelet, its README). Observations built
with tests/lifecycle/factories.py are SYNTHETIC: hand-made in the parsers' shapes, with the kubelet's message
texts (k8s-facts.md, docs/kubelet-lines.md); each test says which of its lines are such.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, cond, ctr, marker, pod, rows, span, t, worker
from tests.lifecycle.test_kubelet_truth import parse, timelines
from tests.lifecycle.test_worker_lane import process, with_pid
from tests.lifecycle.test_worker_rules import _restarted_static
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Kind, Observation
from timelines.lifecycle.timeline import PodTimeline

UID = scenarios.UID
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"
PLEG = "SyncLoop (PLEG): event for pod"  # k8s-facts.md, V2
KILL = "Killing container with a grace period"  # k8s-facts.md, V2


def _lane(obs: list[Observation]) -> PodTimeline:
    return derive_pod_timeline(obs)


def _states(tl: PodTimeline) -> list[tuple[str, str | None, str | None, str, bool, bool]]:
    """(state, start, end, source, start_unknown, end_unknown) of each worker interval."""
    return [
        (state, start, end, source, bool(iv.attrs.get("start_unknown")), bool(iv.attrs.get("end_unknown")))
        for (state, start, end, source), iv in zip(rows(tl, "worker"), tl.lane("worker"), strict=True)
    ]


# ------------------------------------------------------------------------- an API begin between kubelet lines


def test_a_deletion_requested_at_the_instant_of_the_first_kill_line_dates_termination() -> None:
    """docs/timeline-schema.md: an API bound fills a boundary the kubelet evidence leaves unknown where it
    fits between the kubelet evidence on both sides. A state began at or before its first evidence, so a
    termination request (deletionTimestamp minus the grace: 20 s) at the very instant of the first kill
    line (20.000000) fits: termination is dated from the request, not left start-unknown at the kill.

    SYNTHETIC: an excerpt of the pod's V2 lines without its SyncLoop DELETE (SyncLoop ADD, one PLEG
    event, the kill line), and the API updates of tests/lifecycle/scenarios.py (deleted at 20, grace 30)."""
    obs = (
        scenarios.api_start()
        + scenarios.api_graceful_delete()
        + [
            worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
            worker(UID, 4.3, "container_started", message=PLEG),
            marker(UID, 20.0, "KillingContainer", KILL, container="app", grace=30),
        ]
    )
    terminating = [row for row in _states(_lane(obs)) if row[0] == "terminating"]
    assert terminating == [("terminating", at(20), at(23), "inferred", False, False)]


def test_a_deletion_requested_at_the_instant_of_the_last_sync_line_dates_termination() -> None:
    """The other side of the window: the request (20 s) at the very instant of the last line of SyncPod
    (a PLEG event at 20.000000) still fits after it (the line shows the worker syncing at that instant,
    and the transition may come right after it in the same microsecond): termination is dated from the
    request, not from the kill line 0.463 s later with an unknown stretch before it.

    SYNTHETIC: SyncLoop ADD, a PLEG event at 20.0, a kill line at 20.463 (V2 formats, no DELETE line in
    the excerpt), and the API updates of tests/lifecycle/scenarios.py (deleted at 20, grace 30)."""
    obs = (
        scenarios.api_start()
        + scenarios.api_graceful_delete()
        + [
            worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
            worker(UID, 20.0, "container_started", message=PLEG),
            marker(UID, 20.463, "KillingContainer", KILL, container="app", grace=30),
        ]
    )
    lane = _states(_lane(obs))
    assert [row[0] for row in lane] == ["setup", "running", "terminating", "cleanup"]
    assert lane[2] == ("terminating", at(20), at(23), "inferred", False, False)


def test_a_deletion_requested_after_the_first_kill_line_does_not_date_termination() -> None:
    """A state began at or before its first evidence: a termination request the API dates after the
    first kill line (the request at 21, the kill at 20) cannot be when termination began, so it is not
    taken: terminating starts at the kill with its start unknown (docs/timeline-schema.md).

    SYNTHETIC: V2 lines (SyncLoop ADD, a PLEG event, the kill line at 20) and the API updates of a normal
    start (tests/lifecycle/scenarios.py), then deleted at 21 (grace 30)."""
    run: dict[str, Any] = {"phase": "Running", "start_time": 2, "deletion": 51, "deletion_grace": 30}
    running = [ctr("app", "running", started=4, ready=True)]
    api = scenarios.api_start() + [
        pod(UID, 105, 21.4, **run, conditions=[cond("PodScheduled", "True", 1)], containers=running)
    ]
    obs = api + [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        worker(UID, 4.3, "container_started", message=PLEG),
        marker(UID, 20.0, "KillingContainer", KILL, container="app", grace=30),
    ]
    (terminating,) = [iv for iv in _lane(obs).lane("worker") if iv.state == "terminating"]
    assert (terminating.start, terminating.attrs["start_from"]) == (t(20), "KillingContainer")
    assert terminating.attrs.get("start_unknown") is True


# ------------------------------------------------------------------------------------ evidence of a bound


def test_an_api_only_lanes_intervals_cite_the_updates_that_prove_both_their_bounds() -> None:
    """docs/timeline-schema.md: an interval's ``evidence`` lists the observations that made it, and
    ``start_evidence`` / ``end_evidence`` the one that proves each bound. Without kubelet lines the lane is
    the API's: setup from the binding (update 101) to the containers' start (103), running to the deletion
    request (105), terminating to the containers' stop (107), cleanup to the object gone (108): each
    interval cites the update of its start and the one of its end.

    SYNTHETIC: the API updates of tests/lifecycle/scenarios.py (a normal start, deleted at 20)."""
    tl = _lane(scenarios.api_only())
    key = f"pod:{UID}:"
    cited = [
        (iv.state, iv.attrs["start_evidence"], iv.attrs["end_evidence"], set(iv.evidence))
        for iv in tl.lane("worker")
    ]
    assert [c[:3] for c in cited] == [
        ("setup", key + "101", key + "103"),
        ("running", key + "103", key + "105"),
        ("terminating", key + "105", key + "107"),
        ("cleanup", key + "107", key + "108:deleted"),
    ]
    for state, start, end, evidence in cited:
        assert {start, end} <= evidence, state


def test_a_states_unknown_end_is_its_last_line_and_cites_it() -> None:
    """docs/timeline-schema.md: a state whose next state's begin is not in the evidence ended at an unknown
    moment after its last evidence (``end_unknown``), and ``end_evidence`` names the line that last shows
    it. Terminating, begun by the DELETE (20.45), is last shown by the kill line (20.463); cleanup's first
    sign is the volume torn down at 23.5.

    SYNTHETIC: V2 lines (SyncLoop ADD, PLEG, DELETE, the kill line, "UnmountVolume.TearDown succeeded",
    REMOVE), no API object."""
    kill = marker(UID, 20.463, "KillingContainer", KILL, container="app", grace=30)
    obs = [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        worker(UID, 4.3, "container_started", message=PLEG),
        worker(UID, 20.45, "syncloop_delete", message="SyncLoop DELETE"),
        kill,
        marker(UID, 23.5, "VolumeTornDown", "UnmountVolume.TearDown succeeded for volume"),
        worker(UID, 23.95, "syncloop_remove", message="SyncLoop REMOVE"),
    ]
    (terminating,) = [iv for iv in _lane(obs).lane("worker") if iv.state == "terminating"]
    assert (terminating.start, terminating.end) == (t(20.45), t(20.463))
    assert terminating.attrs["end_unknown"] is True
    assert (terminating.attrs["end_from"], terminating.attrs["end_evidence"]) == (
        "KillingContainer",
        kill.dedupe_key,
    )


# --------------------------------------------------------------------- instants a config line begins


def test_a_delete_alone_in_terminating_is_an_instant_of_it_once_the_pod_was_admitted() -> None:
    """A config line says what the API asked; the pod worker acted on it only once the pod was admitted.
    Here the PLEG event shows the pod's containers starting (admitted), so the SyncLoop DELETE, the only
    line of termination, is an instant of terminating (it began there; end unknown), followed by an
    unknown stretch up to the volume torn down (docs/kubelet-lines.md: inside cleanup) and the REMOVE
    that ends the graceful deletion's cleanup.

    SYNTHETIC: V2 lines (SyncLoop ADD, PLEG, DELETE, "UnmountVolume.TearDown succeeded", REMOVE), no
    API object."""
    obs = [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        worker(UID, 4.3, "container_started", message=PLEG),
        worker(UID, 20.45, "syncloop_delete", message="SyncLoop DELETE"),
        marker(UID, 23.5, "VolumeTornDown", "UnmountVolume.TearDown succeeded for volume"),
        worker(UID, 23.95, "syncloop_remove", message="SyncLoop REMOVE"),
    ]
    lane = _states(_lane(obs))
    assert lane[1:] == [
        ("terminating", at(20.45), at(20.45), "kubelet", False, True),
        ("unknown", at(20.45), at(23.5), "kubelet", False, False),
        ("cleanup", at(23.5), at(23.95), "kubelet", True, False),
    ]


# ------------------------------------------------------------------------------- setup, running, unknown


def test_the_stretch_after_a_first_sync_returned_begins_at_its_return_and_cites_that_line() -> None:
    """docs/kubelet-lines.md, "Every bound where a line proves it": the first sync is setup until it
    returns; with no line dating the containers' start, what follows is ``unknown`` between setup and
    running. Both bounds at the return cite the "SyncPod exit" line (docs/timeline-schema.md,
    ``start_evidence`` / ``end_evidence``): setup ends there (end unknown), the unknown stretch begins
    there and ends at the termination request.

    SYNTHETIC: V4 lines (first sight, SyncPod enter / exit, then the graceful deletion of
    tests/lifecycle/scenarios.py), no API object."""
    first = [worker(UID, 1.1, "first_seen"), worker(UID, 1.11, "sync_enter"), worker(UID, 1.6, "sync_exit")]
    exit_key = first[2].dedupe_key
    tl = _lane(first + scenarios.kubelet_graceful_delete())
    assert _states(tl)[:2] == [
        ("setup", at(1.1), at(1.6), "observed", False, True),
        ("unknown", at(1.6), at(20.45), "observed", False, False),
    ]
    setup, unknown = tl.lane("worker")[:2]
    assert setup.attrs["end_evidence"] == exit_key
    assert unknown.attrs["start_evidence"] == exit_key
    assert unknown.attrs["between"] == ["setup", "running"]


def test_a_startup_line_without_its_observed_running_time_does_not_date_the_start_of_running() -> None:
    """ "Observed pod startup duration" (docs/kubelet-lines.md) says the pod was running; its
    ``observedRunningTime`` dates when. Without one (Go's zero time, which the parser reads as none) the
    line dates only itself: an excerpt that begins with it shows the pod running from the line at the
    latest, its start not in the evidence (``start_unknown``), never a start proven at the line.

    SYNTHETIC: the startup line without observedRunningTime, then the V4 graceful deletion of
    tests/lifecycle/scenarios.py; no API object."""
    startup = worker(UID, 10.0, "startup_observed", message="Observed pod startup duration")
    lane = _states(_lane([startup] + scenarios.kubelet_graceful_delete()))
    assert lane[0] == ("running", at(10), at(20.45), "observed", True, False)


def test_a_container_start_the_api_dated_to_the_second_a_static_pods_new_life_began_in_is_that_lifes() -> (
    None
):
    """A static pod's UID comes back (same manifest): its new life begins at the worker's first sight
    (28.4). The API dates its container's start to the second, truncated (RFC 3339: startedAt 28 means
    28.0-28.999), so the start lies in the second of that first sight and after it, never in the life
    before (which ended at 26): it is the new life's, and the lane shows it running, from the first
    sight at the earliest. Before, the start (dated 28 < 28.4) fell outside the cycle and setup stayed
    open with no running at all.

    SYNTHETIC: the static pod of tests/lifecycle/scenarios.py (V4 lines, mirror pod updates), then the
    new life's first sight and SyncPod enter, and a mirror update with the container running."""
    u = scenarios.STATIC_UID
    ref = "kube-system/etcd-node-a"
    first_life = [o for o in scenarios.static_uid_reuse() if o.observed_at < t(27.05)]
    obs = first_life + [
        worker(u, 28.4, "first_seen", pod_ref=ref),
        worker(u, 28.41, "sync_enter", pod_ref=ref),
        pod(
            u,
            15,
            28.9,
            name="etcd-node-a",
            namespace="kube-system",
            static=True,
            created=12,
            phase="Running",
            start_time=28,
            containers=[ctr("etcd", "running", started=28)],
        ),
    ]
    lane = rows(_lane(obs), "worker")
    assert lane[-1] == ("running", at(28.4), None, "observed")
    assert [row for row in lane if row[1] is not None and row[1] >= at(28.4)] == [lane[-1]]


def test_a_container_the_kubelet_restarted_after_a_failed_liveness_probe_is_no_part_of_the_start_up() -> None:
    """PLEG alone dates the end of the start-up by its last ContainerStarted (docs/kubelet-lines.md); a
    container started again after it ran and died is not starting up. In the real AKS excerpt
    (SOURCES.md: aks-2025-1.31-liveness-probe-restart.journal) the liveness probe fails, "Message for
    Container of pod" and the kill restart the container (18:34:49.885621), it dies (ContainerDied
    18:35:20) and starts again (ContainerStarted 18:35:21.078268): a restart, so setup does not last until
    then and running does not begin there. The start-up left in the excerpt is a single ContainerStarted
    (perhaps the sandbox's): setup began at the ADD, and its end is unknown.

    SYNTHETIC: the real excerpt without its "Observed pod startup duration" line (as a log whose
    verbosity or grep leaves it out), so that PLEG is all that can date the start."""
    text = (REAL / "aks-2025-1.31-liveness-probe-restart.journal").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if "Observed pod startup duration" not in line]
    tl = timelines(parse([lines], node="aks-nodepool1-29985679-vmss00000A", year=2025))[
        "93e17ecc-ab55-461a-b526-29248d2554ad"
    ]
    restart = "2025-05-16T18:35:21.078268+00:00"
    lane = rows(tl, "worker")
    assert all(restart not in (start, end) for _, start, end, _ in lane)
    assert [row[0] for row in lane] == ["setup", "unknown"]
    assert lane[0][1] == "2025-05-16T18:34:04.558677+00:00"


def _with(obs: Observation, **payload: Any) -> Observation:
    """The observation with more payload fields (a PLEG line's container ID and exit code)."""
    return replace(obs, payload={**obs.payload, **payload})


def test_a_container_started_again_after_it_crashed_does_not_end_the_start_up() -> None:
    """docs/kubelet-lines.md (PLEG): the last ContainerStarted of the start-up marks the containers
    started; a container started again after it crashed ("container finished" with a non-zero exit code)
    does not count. The sandbox (2.0) and the app (3.0) start, the app crashes (exit 1 at 10), and starts
    again at 20: running began at 3.0, not at the restart.

    SYNTHETIC: V2/V4 lines (SyncLoop ADD, PLEG ContainerStarted / "container finished" / ContainerDied
    with their container IDs), no API object."""
    pleg = "SyncLoop (PLEG): event for pod"
    obs = [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        _with(worker(UID, 2.0, "container_started", message=pleg), container_id="5a1d"),
        _with(worker(UID, 3.0, "container_started", message=pleg), container_id="a1"),
        _with(
            worker(UID, 10.0, "container_finished", message="Generic (PLEG): container finished"),
            container_id="a1",
            exit_code=1,
        ),
        _with(worker(UID, 10.1, "container_died", message=pleg), container_id="a1"),
        _with(worker(UID, 20.0, "container_started", message=pleg), container_id="a2"),
    ]
    lane = rows(_lane(obs), "worker")
    assert lane == [("setup", at(1.1), at(3), "kubelet"), ("running", at(3), None, "kubelet")]


def test_the_later_record_of_the_first_syncs_return_dates_the_end_of_proven_setup() -> None:
    """One return of SyncPod is recorded twice, moments apart: its "SyncPod exit" line and the end of its
    ``syncPod`` span (both written as the function returns). The function had returned only once both
    were written: the later (the span's end, 0.4 ms after the line) dates where proven setup ends.

    SYNTHETIC: V4 lines (first sight, SyncPod enter / exit) and the kubelet's syncPod span, then the
    graceful deletion of tests/lifecycle/scenarios.py; no API object."""
    obs = [
        worker(UID, 1.1, "first_seen"),
        span(UID, "syncPod", 1.1001, 1.5004),
        worker(UID, 1.1002, "sync_enter"),
        worker(UID, 1.5, "sync_exit"),
    ] + scenarios.kubelet_graceful_delete()
    setup = _lane(obs).lane("worker")[0]
    assert (setup.state, setup.attrs["end_from"]) == ("setup", "span:syncPod:end")
    assert setup.end == t(1.5004)


def test_a_sync_line_after_a_log_that_began_past_the_first_sight_proves_no_setup() -> None:
    """docs/kubelet-lines.md, "Every bound where a line proves it": setup is proven from the worker's first
    sight. A log that begins past it (the pod bound at 1, per the API) shows a "SyncPod enter" at 30: a
    sync of a pod that may have been running for long (the worker re-syncs every pod periodically), so
    nothing says whether the pod was still being set up: the stretch from the binding is unknown between
    setup and running, never proven setup.

    SYNTHETIC: the API's creation and binding (tests/lifecycle/scenarios.py), V4 "SyncPod enter" / "SyncPod
    exit" at 30."""
    obs = scenarios.api_start()[:2] + [worker(UID, 30.0, "sync_enter"), worker(UID, 30.2, "sync_exit")]
    tl = _lane(obs)
    assert rows(tl, "worker") == [("unknown", at(1), None, "inferred")]
    assert tl.lane("worker")[0].attrs["between"] == ["setup", "running"]


def test_a_pod_whose_containers_never_started_was_in_setup_all_along() -> None:
    """The API shows the pod's containers waiting (ContainerCreating) and then gone without ever running
    (ContainerStatusUnknown, no startedAt): its SyncPod never got them started, so all of it, from the
    ADD to the DELETE, was setup (docs/kubelet-lines.md), not an instant of setup and then unknown.

    SYNTHETIC: the API updates of tests/lifecycle/scenarios.py's delete during setup, with V2 SyncLoop ADD
    and DELETE lines."""
    api = [o for o in scenarios.delete_during_setup() if o.kind != Kind.WORKER]
    obs = api + [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        worker(UID, 6.45, "syncloop_delete", message="SyncLoop DELETE"),
    ]
    assert rows(_lane(obs), "worker")[0] == ("setup", at(1.1), at(6.45), "kubelet")


def test_a_pod_that_completed_on_its_own_with_no_first_sync_return_has_no_dated_running() -> None:
    """A pod that completed on its own ("Pod indicated lifecycle completed naturally") ran its containers,
    and its first sync's return dates their start at the latest. Without that return in the evidence
    (only the first sight), nothing dates the start: after the first sight the lane is unknown between
    setup and running up to the termination, never running from the first sight.

    SYNTHETIC: V4 lines (first sight at 1.1, completed naturally at 30, SyncTerminatingPod), no API."""
    obs = [
        worker(UID, 1.1, "first_seen"),
        worker(UID, 30.0, "completed_naturally"),
        worker(UID, 30.01, "terminating_enter"),
        worker(UID, 30.2, "terminating_exit"),
        worker(UID, 30.21, "containers_terminated"),
    ]
    lane = rows(_lane(obs), "worker")
    assert "running" not in [row[0] for row in lane]
    assert lane[1] == ("unknown", at(1.1), at(30), "observed")


def test_a_first_sync_whose_span_ended_in_an_error_is_retried_and_setup_runs_to_the_retrys_return() -> None:
    """docs/kubelet-lines.md: the first sync is setup until it returns without an error; one that failed
    (the containers did not all start) is retried by the worker. The first ``syncPod`` span ends with an
    error at 1.5 (its span status says so, with no "Error syncing pod" line in the evidence): setup runs on
    to the retry's return at 3.5.

    SYNTHETIC: V4 first sight, the kubelet's two syncPod spans (the first with an error), then the
    graceful deletion of tests/lifecycle/scenarios.py; no API object."""
    failed = _with(span(UID, "syncPod", 1.1001, 1.5), error='failed to "StartContainer" for "app"')
    obs = [worker(UID, 1.1, "first_seen"), failed, span(UID, "syncPod", 3.0, 3.5)]
    lane = rows(_lane(obs + scenarios.kubelet_graceful_delete()), "worker")
    assert lane[0] == ("setup", at(1.1), at(3.5), "observed")


def test_an_api_terminal_phase_before_the_workers_last_sync_evidence_did_not_begin_its_termination() -> None:
    """The API shows the pod Succeeded (its container finished at 10), and the kubelet a DELETE at 20.45.
    An earlier door the API shows begins termination only where it fits after the evidence of the worker
    still syncing: "MountVolume.SetUp succeeded" at 12 (docs/kubelet-lines.md: the pod is set up or
    running; the volume manager's populator skips a pod whose containers should be terminating) says the
    worker had not begun terminating by then, so termination is the DELETE's, not dated back to 10.

    SYNTHETIC: the API updates of a normal start (tests/lifecycle/scenarios.py), then Succeeded, deleted
    at 20 (grace 30) and gone; V2 SyncLoop ADD / DELETE / REMOVE and the volume line."""
    run: dict[str, Any] = {"start_time": 2, "conditions": [cond("PodScheduled", "True", 1)]}
    done = [ctr("app", "terminated", reason="Completed", exit_code=0, started=4, finished=10)]
    gone = {"phase": "Succeeded", "deletion": 50, "deletion_grace": 30, **run, "containers": done}
    api = scenarios.api_start() + [
        pod(UID, 105, 10.5, phase="Succeeded", **run, containers=done),
        pod(UID, 106, 20.4, **gone),
        pod(UID, 107, 23.9, **gone, deleted=True),
    ]
    kubelet = [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        marker(UID, 12.0, "VolumeMounted", "MountVolume.SetUp succeeded for volume"),
        worker(UID, 20.45, "syncloop_delete", message="SyncLoop DELETE"),
        worker(UID, 23.95, "syncloop_remove", message="SyncLoop REMOVE"),
    ]
    lane = _lane(api + kubelet).lane("worker")
    (terminating,) = [iv for iv in lane if iv.state == "terminating"]
    assert (terminating.start, terminating.attrs["start_from"]) == (t(20.45), "syncloop_delete")
    assert terminating.attrs["cause"] == "deletion"


def test_pleg_starts_in_an_excerpt_that_began_after_the_pods_first_sight_do_not_date_its_start_up() -> None:
    """docs/kubelet-lines.md (PLEG): the last ContainerStarted of the start-up marks the containers
    started, only after a first sight in the evidence (else the start-up's own events may be cut off). Here
    the excerpt begins long after the binding (1) and the containers' start (the API: 4): its two
    ContainerStarted events (10, 11; containers started again) are no start-up, and running is dated by
    the API's start.

    SYNTHETIC: the API updates of a normal start (tests/lifecycle/scenarios.py) and two V2 PLEG lines."""
    obs = scenarios.api_start() + [
        worker(UID, 10.0, "container_started", message=PLEG),
        worker(UID, 11.0, "container_started", message=PLEG),
    ]
    lane = rows(_lane(obs), "worker")
    assert ("running", at(4)) in [row[:2] for row in lane]
    assert all(at(11) not in (start, end) for _, start, end, _ in lane)


def test_a_pod_its_worker_found_terminal_ran_from_its_first_syncs_return_though_deleted() -> None:
    """ "Pod is terminal" (docs/kubelet-lines.md, V4): a sync found the pod's phase terminal, so its
    containers ran; its first sync's return (1.5) dates their start at the latest, and the pod is running
    from there, though a deletion logged just after (the teardown's begin) is what ends SyncPod.

    SYNTHETIC: V4 lines (first sight, SyncPod enter / exit, "Pod is terminal" at 29.9, the graceful
    deletion's teardown from 30); no API object."""
    obs = [
        worker(UID, 1.1, "first_seen"),
        worker(UID, 1.11, "sync_enter"),
        worker(UID, 1.5, "sync_exit"),
        worker(UID, 29.9, "pod_terminal", message="Pod is terminal"),
        worker(UID, 30.0, "termination_requested", cause="deletion"),
        worker(UID, 30.01, "terminating_enter"),
        worker(UID, 30.2, "terminating_exit"),
        worker(UID, 30.21, "containers_terminated"),
    ]
    assert rows(_lane(obs), "worker")[:2] == [
        ("setup", at(1.1), at(1.5), "kubelet"),
        ("running", at(1.5), at(30), "kubelet"),
    ]


# ------------------------------------------------------------------------------- a pod shown admitted


_CONFIG_ONLY = [
    worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
    worker(UID, 20.45, "syncloop_delete", message="SyncLoop DELETE"),
    worker(UID, 20.5, "syncloop_remove", message="SyncLoop REMOVE"),
]


def test_the_configs_own_lines_do_not_show_a_pod_admitted() -> None:
    """SyncLoop ADD / DELETE / REMOVE say what the API asked of the kubelet, not what its worker did: a pod
    rejected at admission gets them too (HandlePodAdditions rejects after the ADD). With nothing else of
    the pod, the DELETE is not drawn as an instant of terminating: no worker is shown terminating it.

    SYNTHETIC: V2 SyncLoop lines only."""
    lane = rows(_lane(list(_CONFIG_ONLY)), "worker")
    assert "terminating" not in [row[0] for row in lane]


def test_a_device_allocation_alone_does_not_show_a_pod_admitted() -> None:
    """ "Need devices to allocate for pod" is the device manager at admission, before the pod has a worker:
    admission under way, not done (docs/kubelet-lines.md). With only that besides the config's lines, the
    DELETE is not drawn as an instant of terminating.

    SYNTHETIC: V2 SyncLoop lines and the device manager's line."""
    obs = _CONFIG_ONLY[:1] + [marker(UID, 1.105, "DeviceAllocation", "Need devices to allocate for pod")]
    lane = rows(_lane(obs + _CONFIG_ONLY[1:]), "worker")
    assert "terminating" not in [row[0] for row in lane]
    assert lane[0][:3] == ("setup", at(1.1), at(20.45))


# ----------------------------------------------------------------------------------- the API alone


def test_an_api_only_pod_deleted_before_any_container_ran_ends_setup_at_the_deletion_request() -> None:
    """Without kubelet lines the lane is the API's (docs/timeline-schema.md). A pod deleted at 6 (grace
    30) before any container ran: the request and "no container runs" fall at one instant (no container
    ever ran, so none had to stop). The deletion begins termination, which ends setup; termination is the
    one state between, of no length, so setup's end is the request's, then cleanup from there.

    SYNTHETIC: the API updates of tests/lifecycle/scenarios.py's delete during setup."""
    obs = [o for o in scenarios.delete_during_setup() if o.kind != Kind.WORKER]
    lane = _lane(obs).lane("worker")
    assert [(iv.state, iv.attrs["start_from"], iv.attrs["end_from"]) for iv in lane] == [
        ("setup", "api:bound", "api:deletion"),
        ("cleanup", "api:containers_stopped", "api:deleted"),
    ]
    assert lane[0].end == lane[1].start == t(6)


def test_a_remove_long_after_a_pod_completed_on_its_own_does_not_date_the_workers_end() -> None:
    """The kubelet deletes a gracefully deleted pod's object as soon as its worker is done, so that REMOVE
    dates the worker's end; a pod that completed on its own is deleted whenever its owner (a Job's
    controller, a TTL) decides. Its REMOVE 70 s later only says the worker was done by then: cleanup,
    last seen at SyncTerminatedPod enter, ended at an unknown moment after it, and the stretch to the
    REMOVE is unknown.

    SYNTHETIC: V4 lines (first sight, completed naturally, SyncTerminatingPod, all containers terminated,
    SyncTerminatedPod enter) and a V2 SyncLoop REMOVE at 100; no API object."""
    obs = [
        worker(UID, 1.1, "first_seen"),
        worker(UID, 1.11, "sync_enter"),
        worker(UID, 30.0, "completed_naturally"),
        worker(UID, 30.01, "terminating_enter"),
        worker(UID, 30.2, "terminating_exit"),
        worker(UID, 30.21, "containers_terminated"),
        worker(UID, 30.3, "terminated_enter"),
        worker(UID, 100.0, "syncloop_remove", message="SyncLoop REMOVE"),
    ]
    assert _states(_lane(obs))[-2:] == [
        ("cleanup", at(30.21), at(30.3), "observed", False, True),
        ("unknown", at(30.3), at(100), "kubelet", False, False),
    ]


def test_a_debug_container_started_later_is_no_part_of_a_restarted_kubelets_start_of_the_pod() -> None:
    """A status a restarted kubelet rewrote from scratch dates running by when every regular container's
    current run started (the pod's spec containers). An ephemeral container (``kubectl debug``) added at
    705.5 is no part of the pod's start-up: running began when the regular container started (703).

    SYNTHETIC: the restarted static pod of tests/lifecycle/test_worker_rules.py with an ephemeral
    container in its status."""
    containers = [
        ctr("app", "running", started=703, ready=True),
        ctr("debugger", "running", kind="ephemeral", started=705.5),
    ]
    assert rows(_lane(_restarted_static(containers)), "worker") == [
        ("setup", at(700), at(703), "inferred"),
        ("running", at(703), None, "inferred"),
    ]


# ----------------------------------------------------------------------------------- kubelet restarts


def test_cleanup_under_way_when_its_kubelet_restarted_is_not_ended_by_a_later_api_removal() -> None:
    """The worker was cleaning up (SyncTerminatedPod entered at 25.1) when its kubelet process went; a new
    one started at 60 and says nothing of the pod; the API object went at 70. The old worker went with
    its process: cleanup lasted at least until its last line and how it ended is not known; the removal
    after the restart only says the worker was gone by then (docs/timeline-schema.md: an API end after the
    restart is no more the state's end than an open one).

    SYNTHETIC: V4 lines of kubelet 100, kubelet 200's start at 60 (the processes as the parser reports
    them), and the API updates of a normal start, then deleted at 20 (grace 30), Succeeded, gone at 70."""
    run: dict[str, Any] = {"start_time": 2, "deletion": 50, "deletion_grace": 30}
    run["conditions"] = [cond("PodScheduled", "True", 1)]
    done = [ctr("app", "terminated", reason="Completed", exit_code=0, started=4, finished=24)]
    api = scenarios.api_start() + [
        pod(UID, 105, 20.4, phase="Running", **run, containers=[ctr("app", "running", started=4)]),
        pod(UID, 106, 24.5, phase="Succeeded", **run, containers=done),
        pod(UID, 107, 70.0, phase="Succeeded", **run, containers=done, deleted=True),
    ]
    lines = [
        (1.0, "first_seen"),
        (1.1, "sync_enter"),
        (20.0, "termination_requested"),
        (20.1, "terminating_enter"),
        (25.0, "containers_terminated"),
        (25.1, "terminated_enter"),
    ]
    kubelet = [with_pid(worker(UID, s, name), 100) for s, name in lines]
    obs = api + kubelet + [process(100, -600.0, 50.0), process(200, 60.0, 100.0, started=60.0)]
    cleanup = _lane(obs).lane("worker")[-1]
    assert (cleanup.state, cleanup.start, cleanup.end) == ("cleanup", t(25), t(25.1))
    assert (cleanup.attrs["end_from"], cleanup.attrs["end_unknown"]) == ("kubelet_restart", True)


def test_a_v4_excerpt_that_ends_during_cleanup_shows_cleanup_still_going_on() -> None:
    """At V4 the worker's end is logged ("Pod is complete and the worker can now stop", k8s-facts.md): an
    excerpt that ends after "SyncTerminatedPod enter" and before that line shows cleanup under way, open
    (``seen_until`` its last line), not ended at an unknown moment (docs/timeline-schema.md; below V4 the
    end could not have been seen, and only there is an open cleanup ``end_unknown``).

    SYNTHETIC: the V4 graceful deletion of tests/lifecycle/scenarios.py cut at 23.3 (without its
    syncTerminatedPod span, which ends later)."""
    obs = [
        o
        for o in scenarios.kubelet_graceful_delete()
        if o.observed_at < t(23.3) and o.payload.get("name") != "syncTerminatedPod"
    ]
    cleanup = _lane(obs).lane("worker")[-1]
    assert (cleanup.state, cleanup.start, cleanup.end) == ("cleanup", t(23.2015), None)
    assert "end_unknown" not in cleanup.attrs
    assert cleanup.attrs["seen_until"] == t(23.21).isoformat(timespec="microseconds")
