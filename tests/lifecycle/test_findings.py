"""Finding rules on small hand-built timelines, plus the contract errors of derive / detect_findings."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, cond, ctr, finding_rows, last_terminated, only, pod, rows, t, worker
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.findings import DEFAULT_THRESHOLDS, Thresholds, detect_findings, human_duration
from timelines.lifecycle.observation import Kind, Observation, Source

UID = scenarios.UID


def F(kind: str, severity: str, start: float, end: float | None) -> tuple[str, str, str | None, str | None]:
    return (kind, severity, at(start), at(end))


def test_container_started_after_termination_request_is_the_race() -> None:
    obs = scenarios.delete_during_setup()[:7] + [
        # The sidecar still starts at 7, after the kubelet saw the deletion at 6.45.
        pod(
            UID,
            110,
            7.1,
            start_time=2,
            deletion=36,
            deletion_grace=30,
            containers=[ctr("app", reason="ContainerCreating"), ctr("sidecar", "running", started=7)],
        ),
    ]
    tl = derive_pod_timeline(obs)
    found = {f.kind: f for f in tl.findings}
    race = found["started_after_termination_requested"]
    assert (race.severity, race.start, race.end) == ("critical", t(6.45), t(7))
    assert race.message == (
        "Container sidecar of pod default/web-1 started at 2024-06-07 06:54:47 UTC, 0.6s after termination was "
        "requested at 2024-06-07 06:54:46.450 UTC; this is the race kubernetes PR #102344 fixed."
    )
    assert "pod:" + UID + ":110" in race.evidence
    assert found["killed_during_setup"].attrs["not_started"] == ["app", "sidecar"]


def test_status_change_after_terminal_phase() -> None:
    base = {"start_time": 1, "conditions": [cond("PodScheduled", "True", 0)]}
    obs = [
        pod(UID, 100, 2.5, phase="Running", **base, containers=[ctr(state="running", started=2)]),
        pod(
            UID,
            101,
            10.2,
            phase="Succeeded",
            **base,
            containers=[ctr(state="terminated", reason="Completed", exit_code=0, started=2, finished=10)],
        ),
        pod(UID, 102, 12.0, phase="Running", **base, containers=[ctr(state="running", started=11)]),
    ]
    tl = derive_pod_timeline(obs)
    assert finding_rows(tl) == [F("status_after_terminal", "warning", 12, None)]
    assert tl.findings[0].message == (
        "Pod default/web-1 changed status at 2024-06-07 06:54:52 UTC after reaching phase Succeeded at "
        "2024-06-07 06:54:50.200 UTC: phase Succeeded → Running."
    )
    assert tl.findings[0].evidence == (f"pod:{UID}:101", f"pod:{UID}:102")
    # The api lane stays terminal: a later report of an earlier stage does not move it back.
    assert rows(tl, "api")[-1] == ("succeeded", at(10), None, "observed")


def test_slow_cleanup_from_kubelet_lines() -> None:
    obs = [
        o
        for o in scenarios.graceful_delete()
        if not (o.kind == Kind.WORKER and o.payload["transition"] in ("worker_done", "terminated_exit"))
        and not (o.kind == Kind.SPAN and o.payload["name"] == "syncTerminatedPod")
    ]
    obs.append(worker(UID, 250.0, "worker_done"))
    tl = derive_pod_timeline(obs)
    assert rows(tl, "worker")[-1] == ("cleanup", at(23.2015), at(250), "observed")
    assert finding_rows(tl) == [F("slow_cleanup", "warning", 23.2015, 250)]
    assert tl.findings[0].message == (
        "Pod default/web-1 spent 3m46s in cleanup (volumes, cgroups) since 2024-06-07 06:55:03.201 UTC, "
        "more than the 2m00s threshold."
    )


def test_grace_exceeded_from_container_finish_times() -> None:
    obs = scenarios.api_start() + [
        pod(
            UID,
            105,
            20.4,
            phase="Running",
            start_time=2,
            deletion=25,
            deletion_grace=5,
            containers=[ctr(state="running", started=4)],
        ),
        pod(
            UID,
            106,
            40.5,
            phase="Failed",
            start_time=2,
            deletion=25,
            deletion_grace=5,
            containers=[ctr(state="terminated", reason="Error", exit_code=137, started=4, finished=40)],
        ),
    ]
    tl = derive_pod_timeline(obs)
    assert rows(tl, "worker") == [
        ("setup", at(1), at(4), "inferred"),
        ("running", at(4), at(20), "inferred"),
        ("terminating", at(20), at(40), "inferred"),
        ("cleanup", at(40), None, "inferred"),
    ]
    assert finding_rows(tl) == [F("grace_exceeded", "warning", 20, 40)]
    assert tl.findings[0].message == (
        "Pod default/web-1: its containers took 20.0s to stop after termination was requested at "
        "2024-06-07 06:55:00 UTC, longer than the 5.0s grace period."
    )
    # the numbers behind it (docs/timeline-schema.md, a finding's attrs): the grace it was given, how long
    # its containers took, and how many times the kubelet itself reported it (none here)
    assert tl.findings[0].attrs == {"grace_seconds": 5.0, "seconds": 20.0, "reports": 0}


def test_inferred_cleanup_of_an_undeleted_finished_pod_is_not_slow() -> None:
    obs = [
        pod(UID, 100, 2.5, phase="Running", start_time=1, containers=[ctr(state="running", started=2)]),
        pod(
            UID,
            101,
            10.2,
            phase="Succeeded",
            start_time=1,
            containers=[ctr(state="terminated", reason="Completed", exit_code=0, started=2, finished=10)],
        ),
        pod(
            UID,
            102,
            900.0,
            phase="Succeeded",
            start_time=1,
            containers=[ctr(state="terminated", reason="Completed", exit_code=0, started=2, finished=10)],
        ),
    ]
    tl = derive_pod_timeline(obs)
    # Terminating is empty (the containers had already exited); cleanup stays open as nobody deletes it.
    assert rows(tl, "worker") == [
        ("setup", at(1), at(2), "inferred"),
        ("running", at(2), at(10), "inferred"),
        ("cleanup", at(10), None, "inferred"),
    ]
    assert tl.findings == ()


def test_crash_loop_by_restart_count_alone() -> None:
    obs = [
        pod(
            UID,
            100,
            300.0,
            phase="Running",
            start_time=0,
            containers=[ctr(state="running", started=290, restarts=5, last=last_terminated(200, 280))],
        ),
    ]
    tl = derive_pod_timeline(obs)
    assert [f.kind for f in tl.findings] == ["crash_loop"]
    assert tl.findings[0].attrs["restarts_in_window"] == 5
    quiet = derive_pod_timeline(obs, thresholds=Thresholds(crash_loop_restarts=6))
    assert quiet.findings == ()
    # "This many restarts within the window": exactly the threshold is a crash loop.
    at_threshold = derive_pod_timeline(obs, thresholds=Thresholds(crash_loop_restarts=5))
    assert [(f.kind, f.attrs["restarts_in_window"]) for f in at_threshold.findings] == [("crash_loop", 5)]


def test_an_open_termination_is_measured_at_the_newest_observation_or_at_now() -> None:
    """GIVEN a pod whose deletion (30 s grace) the kubelet takes at 20.45 s, whose runtime never kills its
    container (ExceededGracePeriod at 65 s) and which is last seen still terminating at 200 s (hand-written
    scenario). THEN, measured at its newest observation (what ``derive`` attaches, and ``detect_findings``
    without ``now``), it has been terminating 179.55 s, past 30 s + the default 60 s slack: stuck, critical,
    open, beside the runtime's grace_exceeded report. Measured at 100 s, 79.55 s is within grace + slack:
    the report alone."""
    obs = scenarios.stuck_terminating()
    tl = derive_pod_timeline(obs)
    for found in (tl.findings, detect_findings(tl, obs)):
        assert [(f.kind, f.severity, f.start, f.end) for f in found] == [
            ("grace_exceeded", "warning", t(20.45), t(65.0)),
            ("stuck_terminating", "critical", t(20.45), None),
        ]
        assert found[1].attrs == {"seconds": 179.55, "grace_seconds": 30.0, "open": True}
    early = detect_findings(tl, obs, DEFAULT_THRESHOLDS, t(100))
    assert [f.kind for f in early] == ["grace_exceeded"]


def test_contract_errors_name_the_input() -> None:
    other = pod("another-uid", 1, 0.0)
    with pytest.raises(ValueError, match="pod UIDs"):
        derive_pod_timeline([pod(UID, 1, 0.0), other])
    with pytest.raises(ValueError, match="no observation names a pod UID"):
        derive_pod_timeline([])
    with pytest.raises(ValueError, match="naive"):
        derive_pod_timeline(scenarios.normal_start(), now=datetime(2024, 6, 7))
    with pytest.raises(ValueError, match="crash_loop_restarts"):
        Thresholds(crash_loop_restarts=0)
    with pytest.raises(ValueError, match="slow_cleanup"):
        Thresholds(slow_cleanup=timedelta(seconds=-1))


def test_unreadable_payload_values_are_reported_not_fatal() -> None:
    bad = Observation(
        kind=Kind.POD,
        source=Source.API,
        observed_at=t(1),
        dedupe_key=f"pod:{UID}:7",
        pod_uid=UID,
        payload={
            "uid": UID,
            "created": "yesterday",
            "start_time": "2024-06-07T06:54:41",
            "phase": "Running",
            "containers": "nope",
        },
    )
    tl = derive_pod_timeline([bad])
    assert tl.problems == (
        f"pod:{UID}:7: containers is not a list",
        f"pod:{UID}:7: created: time 'yesterday' is not ISO 8601; expected e.g. 2024-06-07T06:54:47.000000+00:00",
        f"pod:{UID}:7: start_time: time '2024-06-07T06:54:41' has no offset; expected e.g. 2024-06-07T06:54:47+00:00",
    )
    assert rows(tl, "api") == [("running", at(1), None, "observed")]


def test_human_duration() -> None:
    assert [human_duration(timedelta(seconds=s)) for s in (0.5, 89.9, 90, 3599, 7300)] == [
        "0.5s",
        "89.9s",
        "1m30s",
        "59m59s",
        "2h01m",
    ]


def test_the_kubelets_final_delete_is_not_the_grace_period() -> None:
    """GIVEN a pod deleted with a 10 s grace whose container stops 4 s later, then the kubelet's own final
    DELETE (gracePeriodSeconds=0) once it is done, as the watch and the audit log show it
    THEN the termination is judged against the 10 s it was given, not the final delete's 0: no grace_exceeded."""
    obs = scenarios.api_start() + [
        pod(
            UID,
            105,
            20.2,
            phase="Running",
            start_time=2,
            deletion=30,
            deletion_grace=10,
            containers=[ctr(state="running", started=4)],
        ),
        pod(
            UID,
            106,
            24.5,
            phase="Failed",
            start_time=2,
            deletion=30,
            deletion_grace=10,
            containers=[ctr(state="terminated", reason="Error", exit_code=143, started=4, finished=24)],
        ),
        pod(
            UID,
            107,
            24.7,
            phase="Failed",
            start_time=2,
            deletion=24.7,
            deletion_grace=0,
            deleted=True,
            containers=[ctr(state="terminated", reason="Error", exit_code=143, started=4, finished=24)],
        ),
    ]
    tl = derive_pod_timeline(obs)
    term = only(tl, "worker", "terminating")
    assert (term.start, term.end, term.attrs["grace_seconds"]) == (t(20), t(24), 10)
    assert "grace_exceeded" not in {f.kind for f in tl.findings}
    # A DELETE that shortens the grace while the container still runs does count.
    shortened = obs[:-2] + [
        pod(
            UID,
            106,
            21.0,
            phase="Running",
            start_time=2,
            deletion=22,
            deletion_grace=1,
            containers=[ctr(state="running", started=4)],
        ),
        *obs[-2:],
    ]
    late = derive_pod_timeline(shortened)
    assert only(late, "worker", "terminating").attrs["grace_seconds"] == 1
    assert "grace_exceeded" in {f.kind for f in late.findings}


def test_killed_during_setup_from_the_api_alone() -> None:
    """GIVEN only the API's view (no kubelet lines: a watch, or an audit log) of a pod deleted while its
    image was still pulling THEN the inferred worker lane goes from setup to cleanup, and the finding is
    made from that."""
    obs = [
        pod(
            UID,
            100,
            1.0,
            phase="Pending",
            created=0,
            start_time=1,
            containers=[ctr(reason="ContainerCreating")],
        ),
        pod(
            UID,
            101,
            3.0,
            phase="Pending",
            created=0,
            start_time=1,
            deletion=33,
            deletion_grace=30,
            containers=[ctr(reason="ContainerCreating")],
        ),
        pod(
            UID,
            102,
            3.2,
            phase="Failed",
            created=0,
            start_time=1,
            deletion=3.2,
            deletion_grace=0,
            deleted=True,
            containers=[ctr(state="terminated", reason="ContainerStatusUnknown", exit_code=137)],
        ),
    ]
    tl = derive_pod_timeline(obs)
    assert [r[0] for r in rows(tl, "worker")] == ["setup", "cleanup"]
    (found,) = [f for f in tl.findings if f.kind == "killed_during_setup"]
    assert (
        found.start == t(3) and found.attrs["not_started"] == ["app"] and found.attrs["cause"] == "deletion"
    )
