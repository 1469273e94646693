"""Rules stated from Kubernetes' semantics, each at its edge (issue #38: small wrong changes to these rules
were made one at a time and no test caught them).

The observations are hand-written (tests/lifecycle/factories.py), not real lines: what each test holds is
the rule its docstring states, with the source of that rule.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, cond, ctr, event, finding_rows, last_terminated, pod, rows, worker
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Kind, Observation
from timelines.lifecycle.timeline import format_time

UID = scenarios.UID


def two_containers_start(first: float, second: float) -> list[Observation]:
    """The API's view of a pod with two regular containers, ``app`` started at ``first`` and ``log`` at
    ``second`` (each snapshot 0.2 s after what it shows), then deleted with 30 s of grace at 20."""
    run = {"phase": "Running", "start_time": 2}
    return [
        pod(UID, 100, 0.05, node=None, watch="ADDED"),
        pod(UID, 101, 1.02, conditions=[cond("PodScheduled", "True", 1)]),
        pod(UID, 102, 2.3, start_time=2, containers=[ctr("app", reason="ContainerCreating"), ctr("log")]),
        pod(UID, 103, first + 0.2, **run, containers=[ctr("app", "running", started=first), ctr("log")]),
        pod(
            UID,
            104,
            second + 0.2,
            **run,
            containers=[ctr("app", "running", started=first), ctr("log", "running", started=second)],
        ),
    ]


def test_setup_lasts_until_every_regular_container_has_started() -> None:
    """GIVEN a pod whose two regular containers start at 4 s and at 9 s, and no kubelet line WHEN its
    timeline is derived THEN the worker's setup lasts until 9 s, when the last of them started: the
    kubelet's SyncPod starts every container of the pod (kuberuntime_manager.go SyncPod, step 7: "start
    the normal containers"), so setup is not over while one is still being created, whichever was first."""
    tl = derive_pod_timeline(two_containers_start(4, 9))
    assert rows(tl, "worker")[:2] == [
        ("setup", at(1), at(9), "inferred"),
        ("running", at(9), None, "inferred"),
    ]
    # Order-free: the later container first in the spec changes nothing.
    swapped = derive_pod_timeline(two_containers_start(9, 4))
    assert rows(swapped, "worker")[0] == ("setup", at(1), at(9), "inferred")


def deleted_with_grace(finished: float) -> list[Observation]:
    """A pod deleted at 20 s with a 5 s grace period (deletionTimestamp 25 s) whose container stopped at
    ``finished`` (the API's whole-second finishedAt)."""
    common = {"start_time": 2, "deletion": 25, "deletion_grace": 5}
    return scenarios.api_start() + [
        pod(UID, 105, 20.4, phase="Running", **common, containers=[ctr(state="running", started=4)]),
        pod(
            UID,
            106,
            finished + 0.5,
            phase="Failed",
            **common,
            containers=[ctr(state="terminated", reason="Error", exit_code=137, started=4, finished=finished)],
        ),
    ]


@pytest.mark.parametrize(
    ("finished", "exceeded"),
    [
        (25, False),  # stopped as the grace period ended
        (27, False),  # 2 s later: within what whole-second API times can make of a stop in time
        (28, True),  # 3 s later: more than rounding can explain
        (40, True),
    ],
)
def test_grace_exceeded_allows_the_api_times_rounding_and_no_more(finished: float, exceeded: bool) -> None:
    """GIVEN a pod whose termination was requested at 20 s with 5 s of grace WHEN its container stops at
    ``finished`` THEN grace_exceeded is raised only beyond 2 s of slack: the API writes deletionTimestamp
    and a container's finishedAt in whole seconds (metav1.Time is RFC 3339 to the second), so each may be
    up to a second off and a stop within the grace period can show as up to 2 s late, but not 3."""
    tl = derive_pod_timeline(deleted_with_grace(finished))
    kinds = [row[0] for row in finding_rows(tl)]
    assert ("grace_exceeded" in kinds) is exceeded, finding_rows(tl)


def test_a_termination_seen_only_in_the_api_carries_the_grace_it_was_given() -> None:
    """GIVEN a pod deleted with 5 s of grace (deletionGracePeriodSeconds: 5) and no kubelet line WHEN its
    timeline is derived THEN the worker's terminating interval says 5 s: the grace the kubelet was handed
    (the API server's deletionGracePeriodSeconds, k8s-facts), whatever the pod's own spec says (30 s)."""
    (terminating,) = [
        iv for iv in derive_pod_timeline(deleted_with_grace(24)).lane("worker") if iv.state == "terminating"
    ]
    assert terminating.attrs["grace_seconds"] == 5


def two_terminal_phases(first: str, second: str) -> list[Observation]:
    """A pod whose one container exited 0 at 10 s, then two snapshots: at 10.5 s the phase ``first``, at
    12 s the phase ``second``, both dated by that finish (synthetic: no real API shows two terminal phases;
    this is the inconsistent pair the rule below settles)."""
    done = ctr("app", "terminated", reason="Completed", exit_code=0, started=4, finished=10)
    return scenarios.api_start() + [
        pod(UID, 110, 10.5, phase=first, start_time=2, containers=[done]),
        pod(UID, 111, 12.0, phase=second, start_time=2, containers=[done]),
    ]


@pytest.mark.parametrize(("first", "second"), [("Succeeded", "Failed"), ("Failed", "Succeeded")])
def test_a_terminal_phase_once_shown_stands_even_at_the_same_instant(first: str, second: str) -> None:
    """GIVEN a pod the API showed in the terminal phase ``first`` and later in the other one, both dated
    by the same container finish WHEN its timeline is derived THEN the API lane ends in ``first`` alone,
    from that finish, citing the snapshot that showed it: a pod never leaves a terminal phase (the
    kubelet's generateAPIPodStatus, kubelet_pods.go: "pods are not allowed to transition out of terminal
    phases", it forces the API's phase back), so the phase shown first stands and the other is never a
    stage of its own, whichever name sorts first; and in any order of the observations."""
    for observations in (two_terminal_phases(first, second), two_terminal_phases(first, second)[::-1]):
        tl = derive_pod_timeline(observations)
        api = tl.lane("api")
        assert [(iv.state, format_time(iv.start), iv.end) for iv in api[-1:]] == [
            (first.lower(), at(10), None)
        ]
        assert api[-1].evidence == (f"pod:{UID}:110",)
        assert [iv.state for iv in api].count(second.lower()) == 0
        assert [iv.state for iv in api[:-1]] == ["pending", "scheduled", "initializing", "running", "running"]


def test_each_grace_report_belongs_to_the_termination_it_came_during() -> None:
    """GIVEN static pod etcd-node-a whose UID is reused (scenarios.static_uid_reuse: first termination
    10-25 s, the new pod's worker from 27 s), then removed again at 40 s (ended at 41 s), and the
    kubelet's ExceededGracePeriod event once during each termination (at 20 s and at 40.5 s; hand-written:
    the message is k8s-facts §1.4's killPodNow one) WHEN the timeline is derived THEN each termination has
    one grace_exceeded finding citing its own report and not the other's: the kubelet emits that event from
    the kill of the termination under way, so a report never speaks for an earlier or a later termination
    of the same UID."""
    u, ref = scenarios.STATIC_UID, "kube-system/etcd-node-a"
    said = "Container runtime did not kill the pod within specified grace period."
    tl = derive_pod_timeline(
        scenarios.static_uid_reuse()
        + [
            event(u, "ev-first", 20.0, "ExceededGracePeriod", said, type_="Warning"),
            worker(u, 40.0, "termination_requested", cause="removed", pod_ref=ref),
            worker(u, 40.01, "terminating_enter", grace=30, pod_ref=ref),
            event(u, "ev-second", 40.5, "ExceededGracePeriod", said, type_="Warning"),
            worker(u, 41.0, "containers_terminated", pod_ref=ref),
            worker(u, 41.01, "terminated_enter", pod_ref=ref),
            worker(u, 42.0, "worker_done", pod_ref=ref),
        ]
    )
    found = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert [(format_time(f.start), format_time(f.end), f.attrs["reports"]) for f in found] == [
        (at(10), at(25), 1),
        (at(40), at(41), 1),
    ]
    assert ["event:ev-first:1" in f.evidence for f in found] == [True, False]
    assert ["event:ev-second:1" in f.evidence for f in found] == [False, True]


def test_an_api_only_node_shutdown_terminates_from_the_kubelets_disruption_target() -> None:
    """GIVEN the API's view alone of a graceful node shutdown on 1.26+ (scenarios.node_shutdown: the
    kubelet set DisruptionTarget=True, reason TerminationByKubelet, at 30 s; the container finished at
    33 s; phase Failed) WHEN the timeline is derived THEN the worker terminates from 30 s, cause
    ``removed``, until 33 s, then cleans up: the kubelet adds that condition when it begins terminating
    the pod itself (no DELETE, no deletionTimestamp), so the condition's transition dates the request,
    before the terminal phase it leads to."""
    observations = [o for o in scenarios.node_shutdown(failed=True) if o.kind in (Kind.POD, Kind.EVENT)]
    lane = derive_pod_timeline(observations).lane("worker")
    assert [(iv.state, format_time(iv.start), format_time(iv.end)) for iv in lane] == [
        ("setup", at(1), at(4)),
        ("running", at(4), at(30)),
        ("terminating", at(30), at(33)),
        ("cleanup", at(33), None),
    ]
    terminating = lane[2]
    assert (terminating.attrs["cause"], terminating.attrs["start_from"]) == ("removed", "api:removed")
    assert terminating.attrs["start_evidence"] == f"pod:{UID}:105"


def failed_while_running(reason: str | None) -> list[Observation]:
    """The API's view of a pod reported Failed (with ``reason``) at 20.4 s while its container still ran
    (≤1.26 wrote the phase before the kill finished), the container finished at 22 s (synthetic message,
    the eviction manager's first sentence)."""
    said = "The node was low on resource: memory. "
    stopped = ctr("app", "terminated", reason="Error", exit_code=137, started=4, finished=22)
    return scenarios.api_start() + [
        pod(UID, rv, seen, phase="Failed", reason=reason, message=said, start_time=2, containers=[c])
        for rv, seen, c in ((110, 20.4, ctr("app", "running", started=4)), (111, 23.0, stopped))
    ]


@pytest.mark.parametrize(("reason", "cause"), [("Evicted", "evicted"), (None, "terminal_phase")])
def test_a_failed_phase_says_eviction_only_with_the_reason_evicted(reason: str | None, cause: str) -> None:
    """GIVEN a pod the API shows Failed at 20.4 s while its container still ran, reason ``reason``, and the
    container's finish at 22 s WHEN the timeline is derived THEN the worker terminates from 20.4 s to 22 s
    with cause ``cause``, and an evicted finding exists only for the reason Evicted: the eviction manager
    fails the pod with reason "Evicted" (eviction_manager.go evictPod), any other Failed is a terminal
    phase the containers reached."""
    tl = derive_pod_timeline(failed_while_running(reason))
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert (format_time(terminating.start), format_time(terminating.end)) == (at(20.4), at(22))
    assert (terminating.attrs["cause"], terminating.attrs["start_from"]) == (cause, "api:" + cause)
    assert terminating.attrs["start_evidence"] == f"pod:{UID}:110"
    evicted = [f for f in tl.findings if f.kind == "evicted"]
    assert [(format_time(f.start), f.attrs["resource"]) for f in evicted] == (
        [(at(20.4), "memory")] if reason == "Evicted" else []
    )


def readiness_changes() -> list[Observation]:
    """A pod without a readiness probe: app started at 4 s and Ready from that second (lastTransitionTime
    4), unready at 12 s (its container restarting), ready again at 15 s, shown by two snapshots (15.3 s
    and 18 s), deleted at 20 s."""
    ready, unready = ctr("app", "running", started=4, ready=True), ctr("app", "running", started=4)
    shown = [(103, 4.2, "True", 4, ready), (105, 12.3, "False", 12, unready), (106, 15.3, "True", 15, ready)]
    shown += [(108, 18.0, "True", 15, ready)]
    running = [
        pod(UID, rv, seen, phase="Running", start_time=2, conditions=scenarios._conds(r, lt), containers=[c])
        for rv, seen, r, lt, c in shown
    ]
    deleted = pod(
        UID,
        109,
        20.2,
        phase="Running",
        start_time=2,
        deletion=50,
        deletion_grace=30,
        conditions=scenarios._conds("True", 15),
        containers=[ready],
    )
    return scenarios.api_start()[:3] + running + [deleted]


def test_running_is_split_where_ready_changes_and_each_stretch_cites_its_snapshots() -> None:
    """GIVEN readiness_changes() WHEN the timeline is derived THEN the API's running stage is ready from
    its first instant (a Ready transition at the very second the container started is the state running
    begins in: a pod without a readiness probe is ready as soon as its containers run), unready from
    12 s to 15 s, ready again until the DELETE at 20 s; the unready stretch cites the snapshot that
    showed it, and the last one both snapshots that showed Ready=True since 15 s (a repeated condition
    is more evidence of the same stretch), not the terminating snapshot."""
    api = derive_pod_timeline(readiness_changes()).lane("api")
    running = [iv for iv in api if iv.state == "running"]
    assert [(format_time(iv.start), format_time(iv.end), iv.attrs["ready"]) for iv in running] == [
        (at(4), at(12), True),
        (at(12), at(15), False),
        (at(15), at(20), True),
    ]
    assert [list(iv.evidence) for iv in running[1:]] == [
        [f"pod:{UID}:105"],
        [f"pod:{UID}:106", f"pod:{UID}:108"],
    ]


def test_a_pod_known_only_from_reset_statuses_is_bound_from_the_first_restarts_start_time() -> None:
    """GIVEN only two statuses of a running pod, each rewritten from scratch by a restarted kubelet
    (startTime 100 s, then 200 s after a second restart, while app has run since 3 s: a container cannot
    start before startTime, so these startTimes are the restarts') WHEN the timeline is derived THEN the
    worker runs from 100 s, citing the snapshot with that startTime: a restarted kubelet sets startTime
    when it acknowledges the pod anew, so the earliest of them is the first restarted kubelet's worker,
    and the API says nothing of the worker before it."""

    def reset(rv: int, seen: float, start: float) -> Observation:
        return pod(
            UID, rv, seen, phase="Running", start_time=start, containers=[ctr("app", "running", started=3)]
        )

    tl = derive_pod_timeline([reset(120, 205, 200), reset(110, 105, 100)])
    assert [(iv.state, format_time(iv.start), iv.end) for iv in tl.lane("worker")] == [
        ("running", at(100), None)
    ]
    (running,) = tl.lane("worker")
    assert (running.attrs["start_from"], running.attrs["start_evidence"]) == ("api:bound", f"pod:{UID}:110")


@pytest.mark.parametrize("with_containers", [True, False])
def test_the_deleted_objects_containers_date_the_stop_only_when_it_carries_them(
    with_containers: bool,
) -> None:
    """GIVEN the API's view of a graceful DELETE at 20 s (scenarios.api_graceful_delete) without the
    Succeeded snapshot, so the watch's DELETED object (23.9 s) is the first to show app stopped, either
    whole (app terminated at 23 s) or without container statuses WHEN the timeline is derived THEN with
    them the worker terminates until 23 s and cleans up until the object went; without them terminating
    lasts until the object went, with no cleanup: a DELETED event carries the object as last stored, so
    its container finish dates the stop, and an object without statuses says nothing of the containers."""
    observations = [
        o for o in scenarios.api_start() + scenarios.api_graceful_delete() if o.dedupe_key != f"pod:{UID}:107"
    ]
    if not with_containers:
        observations = [
            replace(o, payload={**o.payload, "containers": []}) if o.dedupe_key.endswith(":deleted") else o
            for o in observations
        ]
    lane = derive_pod_timeline(observations).lane("worker")
    drawn = [(iv.state, format_time(iv.start), format_time(iv.end)) for iv in lane][2:]
    gone = f"pod:{UID}:108:deleted"
    if with_containers:
        assert drawn == [("terminating", at(20), at(23)), ("cleanup", at(23), at(23.9))]
        assert (lane[-2].attrs["end_from"], lane[-2].attrs["end_evidence"]) == (
            "api:containers_stopped",
            gone,
        )
    else:
        assert drawn == [("terminating", at(20), at(23.9))]
        assert (lane[-1].attrs["end_from"], lane[-1].attrs["end_evidence"]) == ("api:deleted", gone)


def test_a_container_the_kubelet_could_not_locate_stopped_by_the_status_that_says_so() -> None:
    """GIVEN a pod deleted at 20 s (30 s grace) while app ran, then shown Failed at 25.5 s with app
    terminated as ContainerStatusUnknown (exit 137, no start or finish time: the status manager's
    TerminatePod gives a container it cannot find "The container could not be located when the pod was
    terminated", pkg/kubelet/status/status_manager.go) WHEN the timeline is derived THEN the worker
    terminates from 20 s until that status (25.5 s), then cleans up: with no finish time, the first status
    showing no container running bounds the stop, never the request itself."""
    lost = "The container could not be located when the pod was terminated"
    unknown = ctr("app", "terminated", reason="ContainerStatusUnknown", message=lost, exit_code=137)
    shown = [(105, 20.4, "Running", ctr("app", "running", started=4)), (106, 25.5, "Failed", unknown)]
    tl = derive_pod_timeline(
        scenarios.api_start()
        + [
            pod(UID, rv, seen, phase=phase, start_time=2, deletion=50, deletion_grace=30, containers=[c])
            for rv, seen, phase, c in shown
        ]
    )
    lane = tl.lane("worker")
    assert [(iv.state, format_time(iv.start), format_time(iv.end)) for iv in lane][2:] == [
        ("terminating", at(20), at(25.5)),
        ("cleanup", at(25.5), None),
    ]
    assert (lane[2].attrs["end_from"], lane[2].attrs["end_evidence"]) == (
        "api:containers_stopped",
        f"pod:{UID}:106",
    )
    # app's lane: its run ends there too, and the terminated stretch (no start, no finish) says why.
    app = tl.lane("container:app")
    assert [(iv.state, format_time(iv.start), format_time(iv.end)) for iv in app][1:] == [
        ("running", at(4), at(25.5)),
        ("terminated", at(25.5), None),
    ]
    assert (app[-1].attrs["reason"], app[-1].attrs["exit_code"], app[-1].evidence) == (
        "ContainerStatusUnknown",
        137,
        (f"pod:{UID}:106",),
    )


def test_a_status_taken_just_before_a_start_the_api_truncated_changes_no_run() -> None:
    """GIVEN the crash loop of scenarios.crash_loop (runs 2-12 s, 22-32 s, 62-72 s, backing off between)
    and one more snapshot at 22.4 s still showing CrashLoopBackOff (taken before the second run began at,
    say, 22.6 s, which the API writes as 22: metav1.Time keeps whole seconds) WHEN the timeline is derived
    THEN app's lane is the same as without it: its own start time says the container was running then,
    so that waiting status is no stretch of its own, and every back-off after that run is still shown."""
    backoff = "back-off 10s restarting failed container=app pod=web-1_default"
    stale = pod(
        UID,
        110,
        22.4,
        phase="Running",
        start_time=1,
        conditions=[cond("PodScheduled", "True", 0)],
        containers=[ctr(reason="CrashLoopBackOff", message=backoff, restarts=1, last=last_terminated(2, 12))],
    )
    lane = rows(derive_pod_timeline(scenarios.crash_loop() + [stale]), "container:app")
    assert lane == rows(derive_pod_timeline(scenarios.crash_loop()), "container:app")
    assert [(state, start) for state, start, _, _ in lane if state != "terminated"] == [
        ("running", at(2)),
        ("waiting", at(12.4)),
        ("running", at(22)),
        ("waiting", at(32.5)),
        ("running", at(62)),
        ("waiting", at(72.5)),
    ]


def test_a_containers_state_changing_under_a_terminal_phase_is_a_status_after_terminal() -> None:
    """GIVEN failed_while_running("Evicted"): phase Failed at 20.4 s while app still ran, then app
    terminated (Error) at 23 s under the same phase WHEN the timeline is derived THEN status_after_terminal
    is raised at 23 s, naming the container's change and citing both snapshots: a terminal phase says
    every container stopped for good, so a container's state changing after it is a change of status,
    even with the phase unchanged."""
    found = [
        f
        for f in derive_pod_timeline(failed_while_running("Evicted")).findings
        if f.kind == "status_after_terminal"
    ]
    assert [(format_time(f.start), f.attrs["change"], f.evidence) for f in found] == [
        (at(23), "container app running → terminated(Error)", (f"pod:{UID}:110", f"pod:{UID}:111"))
    ]


@pytest.mark.parametrize(
    ("phase", "containers", "raised"), [("Succeeded", False, False), ("Running", True, True)]
)
def test_the_deleted_object_changes_the_status_only_by_what_it_carries(
    phase: str, containers: bool, raised: bool
) -> None:
    """GIVEN a pod Succeeded at 23.6 s (scenarios.api_graceful_delete) whose watch DELETED object (23.9 s)
    is either without container statuses and in that phase, or carries phase Running and a running app
    WHEN the timeline is derived THEN status_after_terminal is raised only for the second, at 23.9 s: a
    DELETED event without statuses says nothing of them (no change), one that carries a changed status
    is that change, deleted or not."""
    observations = scenarios.api_start() + scenarios.api_graceful_delete()
    gone = f"pod:{UID}:108:deleted"
    running = [ctr("app", "running", started=4)] if containers else []
    observations = [
        replace(o, payload={**o.payload, "phase": phase, "containers": [*running]})
        if o.dedupe_key == gone
        else o
        for o in observations
    ]
    found = [f for f in derive_pod_timeline(observations).findings if f.kind == "status_after_terminal"]
    assert [(format_time(f.start), f.evidence) for f in found] == (
        [(at(23.9), (f"pod:{UID}:107", gone))] if raised else []
    )


def test_the_first_change_after_a_terminal_phase_is_reported_once_whatever_repeats_before_it() -> None:
    """GIVEN a pod Succeeded at 10.2 s (app exited 0 at 10), the same status again at 11 s, then Running
    (app restarted at 11) at 12 s and Succeeded again at 15 s WHEN the timeline is derived THEN one
    status_after_terminal, at 12 s, phase Succeeded → Running: a repeated terminal status is no change and
    does not end the search, and the pod is reported once, at its first change (each later one follows
    from it)."""
    done = ctr("app", "terminated", reason="Completed", exit_code=0, started=2, finished=10)
    again = ctr("app", "terminated", reason="Completed", exit_code=0, started=11, finished=14)
    shown = [
        (100, 2.5, "Running", ctr("app", "running", started=2)),
        (101, 10.2, "Succeeded", done),
        (102, 11.0, "Succeeded", done),
        (103, 12.0, "Running", ctr("app", "running", started=11)),
        (104, 15.0, "Succeeded", again),
    ]
    tl = derive_pod_timeline(
        [
            pod(
                UID,
                rv,
                seen,
                phase=phase,
                start_time=1,
                conditions=[cond("PodScheduled", "True", 0)],
                containers=[c],
            )
            for rv, seen, phase, c in shown
        ]
    )
    found = [f for f in tl.findings if f.kind == "status_after_terminal"]
    assert [(format_time(f.start), f.attrs["change"], f.evidence) for f in found] == [
        (at(12), "phase Succeeded → Running", (f"pod:{UID}:101", f"pod:{UID}:103"))
    ]


def test_a_crash_loop_is_found_whatever_containers_are_listed_before_it() -> None:
    """GIVEN scenarios.crash_loop's app with a healthy container ``aaa-log`` (running since 2 s) listed
    before it in every status WHEN the timeline is derived THEN the crash_loop finding is app's alone and
    the same as without the other container: each container's restarts are its own (a pod's
    containerStatuses lists every container, in an order that says nothing of them)."""
    log = ctr("aaa-log", "running", started=2)
    observations = [
        replace(o, payload={**o.payload, "containers": [log, *o.payload["containers"]]})
        if o.kind == Kind.POD
        else o
        for o in scenarios.crash_loop()
    ]
    alone = [f for f in derive_pod_timeline(scenarios.crash_loop()).findings if f.kind == "crash_loop"]
    found = [f for f in derive_pod_timeline(observations).findings if f.kind == "crash_loop"]
    assert [f.attrs["container"] for f in found] == ["app"]
    assert [(f.start, f.end, f.attrs, f.evidence) for f in found] == [
        (f.start, f.end, f.attrs, f.evidence) for f in alone
    ]


def test_a_crash_loop_seen_only_running_begins_at_the_first_restarts_start() -> None:
    """GIVEN app seen only running: from 2 s (restartCount 0), then again at 22 s, 42 s and 62 s
    (restartCount 1, 2, 3; each status taken 0.6 s after the start, each naming the previous run in
    lastState), no CrashLoopBackOff status WHEN the timeline is derived THEN crash_loop begins at 22 s, the
    first restart (the second run's own startedAt, not the status that reported it at 22.6 s), lasts
    until the status showing the third restart (62.6 s), counts 3 restarts, and cites the three statuses
    with restarts: a restart is the start of a run after the first."""
    shown = [(100, 2, 0, None), (101, 22, 1, (2, 12)), (102, 42, 2, (22, 32)), (103, 62, 3, (42, 52))]
    tl = derive_pod_timeline(
        [
            pod(
                UID,
                rv,
                start + 0.6,
                phase="Running",
                start_time=1,
                containers=[
                    ctr(
                        "app",
                        "running",
                        started=start,
                        restarts=rc,
                        last=last_terminated(*prev) if prev else None,
                    )
                ],
            )
            for rv, start, rc, prev in shown
        ]
    )
    (loop,) = [f for f in tl.findings if f.kind == "crash_loop"]
    assert (format_time(loop.start), format_time(loop.end)) == (at(22), at(62.6))
    assert (loop.attrs["restarts_in_window"], loop.attrs["restart_count"], loop.attrs["backoffs"]) == (
        3,
        3,
        0,
    )
    assert loop.evidence == tuple(f"pod:{UID}:{rv}" for rv in (101, 102, 103))


def test_a_crash_loop_is_open_while_backing_off_and_ends_at_its_last_back_off() -> None:
    """GIVEN scenarios.crash_loop (back-offs seen at 12.4, 32.5 and 72.5 s, the last status a back-off),
    then, or not, a status at 82.6 s with app running again since 82 s WHEN the timeline is derived THEN
    crash_loop from 12.4 s is open while the newest status is a back-off, and ends at the last back-off
    seen (72.5 s) once app runs again: CrashLoopBackOff is the kubelet waiting before the next restart,
    so the loop lasts as long as it is seen waiting, and no longer than the last time it was."""
    recovered = pod(
        UID,
        106,
        82.6,
        phase="Running",
        start_time=1,
        conditions=[cond("PodScheduled", "True", 0)],
        containers=[ctr("app", "running", started=82, restarts=3, last=last_terminated(62, 72))],
    )
    spans = []
    for observations in (scenarios.crash_loop(), scenarios.crash_loop() + [recovered]):
        (loop,) = [f for f in derive_pod_timeline(observations).findings if f.kind == "crash_loop"]
        spans.append((format_time(loop.start), format_time(loop.end), loop.attrs["backoffs"]))
    assert spans == [(at(12.4), None, 3), (at(12.4), at(72.5), 3)]


def test_a_run_seen_only_as_the_last_state_is_numbered_from_the_restart_count() -> None:
    """GIVEN app first seen waiting in CrashLoopBackOff at 12.4 s with restartCount 1 and its previous
    run (2-12 s) in lastState, then running again from 22 s with restartCount 1 WHEN the timeline is
    derived THEN app's first run is restart 0 and the second restart 1: restartCount counts the restarts
    so far, so lastState is the run before the restartCount-th (the first run, never seen running, is
    number 0, not the count)."""
    backoff = "back-off 10s restarting failed container=app pod=web-1_default"
    first = last_terminated(2, 12)
    shown = [
        (101, 12.4, ctr(reason="CrashLoopBackOff", message=backoff, restarts=1, last=first)),
        (102, 22.6, ctr(state="running", started=22, restarts=1, last=first)),
    ]
    tl = derive_pod_timeline(
        [pod(UID, rv, seen, phase="Running", start_time=1, containers=[c]) for rv, seen, c in shown]
    )
    runs = [iv for iv in tl.lane("container:app") if iv.state == "running"]
    assert [(format_time(iv.start), format_time(iv.end), iv.attrs["restart"]) for iv in runs] == [
        (at(2), at(12), 0),
        (at(22), None, 1),
    ]
