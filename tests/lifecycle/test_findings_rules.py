"""Which kubelet reports say a pod outlived its grace period (issue #38, survivors of sample fresh-1207y in
findings._grace_signal).

The kubelet's word on it is killPodNow's (k8s-facts §1.4): when the runtime has not stopped the pod
within max(10 s, 1.5 x grace) it records the ExceededGracePeriod event, "Container runtime did not kill the
pod within specified grace period." Lines are written from the kubelet source's formats
(tests/lifecycle/kubelet_spec.py) and read by the real parser; hand-built observations use the parsers'
shapes (tests/lifecycle/factories.py). Neither is a sample: each is labelled SYNTHETIC."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

from tests.lifecycle import kubelet_spec as ks
from tests.lifecycle import scenarios
from tests.lifecycle.factories import ctr, event, marker, pod, t, worker
from tests.lifecycle.test_kubelet_spec import parse_files, timelines
from tests.lifecycle.test_kubelet_truth import parse
from tests.lifecycle.test_real_kubelet_corpus import REAL
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation

UID = scenarios.UID
EVICTED_UID = "8f0c2d9e-1111-4a5b-9c3d-0000000000e1"
KILL_TIMEOUT_TEXT = "Container runtime did not kill the pod within specified grace period."


def test_a_kubelet_line_saying_the_runtime_did_not_kill_the_pod_in_grace_is_a_grace_report() -> None:
    """GIVEN scenarios.stuck_terminating (DELETE at 20.45 s with grace 30, the container never stops, last
    seen still terminating at 200 s) with its ExceededGracePeriod event replaced by the kubelet's own line
    of that text at 65 s (SYNTHETIC: the parser's GraceExceeded marker, docs/observations.md, of a line
    saying killPodNow's "did not kill the pod within specified grace period")
    THEN the termination has a grace_exceeded finding citing that line: the kubelet's log says what its
    event says."""
    obs = [o for o in scenarios.stuck_terminating() if o.dedupe_key != "event:ev-exceeded:1"]
    line = marker(UID, 65.0, "GraceExceeded", KILL_TIMEOUT_TEXT)
    tl = derive_pod_timeline([*obs, line])
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert (found.start, found.end, found.attrs["reports"]) == (t(20.45), t(65.0), 1)
    assert line.dedupe_key in found.evidence
    assert "GraceExceeded" in found.message


def _evicted_with_cleanup_timeout() -> list[str]:
    """SYNTHETIC (kubelet_spec, 1.31, V4): a pod evicted by the kubelet's eviction manager (grace 1 s) whose
    container stops 0.5 s after the kill, and whose cleanup (volumes, cgroups) then takes 40 s, so the
    eviction manager's wait for it (podCleanupTimeout, 30 s after "pods evicted, waiting for pod to be
    cleaned up") ends with "Eviction manager: timed out waiting for pods to be cleaned up" instead of
    "... pods successfully cleaned up" (eviction_manager.go waitForPodsCleanup; docs/kubelet-lines.md)."""
    life = ks.new_life(random.Random(3), "evicted", EVICTED_UID)
    life.stop_s, life.cleanup_s = 0.5, 40.0
    lines = []
    for line in ks.life_lines(life, "1.31"):
        if line.message == "Eviction manager: pods successfully cleaned up":
            continue
        lines.append(line)
        if line.message == "Eviction manager: pods evicted, waiting for pod to be cleaned up":
            lines.append(
                replace(
                    line,
                    at=line.at + timedelta(seconds=30),
                    message="Eviction manager: timed out waiting for pods to be cleaned up",
                    caller="eviction_manager.go:471",
                )
            )
    return ks.render(ks.at_verbosity(lines, 4), "1.31", "klog")


def test_an_eviction_managers_cleanup_timeout_is_not_a_grace_period_report() -> None:
    """GIVEN the evicted pod above: its container died 0.5 s after a kill with a 1 s grace, and 30 s later
    the eviction manager timed out waiting for its cleanup
    THEN there is no grace_exceeded finding: that timeout says the pod's resources were not reclaimed 30 s
    after its kill returned (the kill, and so the grace period, was over), not that a container outlived
    its grace. The eviction itself is still found."""
    tl = timelines(parse_files([_evicted_with_cleanup_timeout()]))[EVICTED_UID]
    assert "EvictionCleanupTimeout" in {m.reason for m in tl.markers}
    assert [f.kind for f in tl.findings if f.kind in ("grace_exceeded", "evicted")] == ["evicted"]


# ------------------------------------------------------------------------- beyond the sample


def test_every_report_during_a_termination_is_counted_on_its_finding() -> None:
    """GIVEN scenarios.stuck_terminating (the ExceededGracePeriod event at 65 s) and (SYNTHETIC) the
    kubelet's GraceExceeded line at 66 s THEN the termination's one grace_exceeded finding counts both
    reports and cites both."""
    line = marker(UID, 66.0, "GraceExceeded", KILL_TIMEOUT_TEXT)
    tl = derive_pod_timeline([*scenarios.stuck_terminating(), line])
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert found.attrs["reports"] == 2
    assert {"event:ev-exceeded:1", line.dedupe_key} <= set(found.evidence)
    assert found.end == t(66.0)


def test_a_zero_grace_delete_still_gets_the_kubelets_one_second() -> None:
    """GIVEN scenarios.graceful_delete (the DELETE taken at 20.45 s, the container finished at 23 s) made
    a force delete (SYNTHETIC: ``--grace-period=0``: deletionGracePeriodSeconds 0, the kubelet's lines say
    gracePeriod=0) THEN no grace_exceeded: the kubelet gives every termination at least 1 s
    (calculateEffectiveGracePeriod's floor, k8s-facts §1.4), and 2.55 s is within that and the 2 s slack."""
    obs = []
    for o in scenarios.graceful_delete():
        p = o.payload
        if o.kind == "kubelet_marker" and p.get("grace_period") == 30:
            o = replace(o, payload={**p, "grace_period": 0})
        if o.kind == "pod" and p.get("deletion_grace_seconds") == 30:
            o = replace(
                o,
                payload={
                    **p,
                    "deletion_grace_seconds": 0,
                    "deletion_timestamp": "2024-06-07T06:55:00.000000+00:00",
                },
            )
        obs.append(o)
    tl = derive_pod_timeline(obs)
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert terminating.attrs["grace_seconds"] == 0
    assert [f.kind for f in tl.findings] == []


KUEUE = "8bb7de3e-72f0-4102-adbd-53897040775e"


def test_a_killed_container_dies_at_its_own_death_not_at_its_sandboxs() -> None:
    """GIVEN the real kind v1.31 journal of kueue#4669 at V3 (tests/fixtures/real/kubelet/
    kueue-4669-kind-1.31-v3.journal, facts.toml "kueue grace_exceeded"): container c killed at
    10:21:22.519925 with a 2 s grace (the V2 line; the V3 "override" line just before announced it with
    1 s), its ContainerDied at 10:21:59.648493, the sandbox's ContainerDied at 10:22:16.700503
    THEN the finding says c was killed with the 2 s grace and died 37.1 s later, and cites c's death line,
    not the sandbox's: a kill is matched to the death of the container ID it named."""
    lines = (REAL / "kueue-4669-kind-1.31-v3.journal").read_text(encoding="utf-8").splitlines()
    obs = parse([lines], node="kind-worker", year=2025)
    tl = timelines(obs)[KUEUE]
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert (
        "container c was killed at 2025-03-18 10:21:22.519 UTC with a 2s grace period and died 37.1s later"
        in (found.message)
    )
    deaths = {
        o.observed_at.strftime("%H:%M:%S.%f"): o.dedupe_key
        for o in obs
        if o.pod_uid == KUEUE and o.payload.get("transition") == "container_died"
    }
    assert deaths["10:21:59.648493"] in found.evidence
    assert deaths["10:22:16.700503"] not in found.evidence


def test_a_kill_is_timed_to_its_own_containers_death_not_to_another_containers() -> None:
    """GIVEN a running pod (scenarios.normal_start) deleted with grace 30 s (taken at 20.45 s), the kubelet
    killing ``app`` and ``sidecar`` at 20.463 s with 30 s each (SYNTHETIC lines in the kubelet parser's
    shapes: "Killing container with a grace period" naming containerID, PLEG ContainerDied naming the
    bare ID), the sidecar dying at 21 s and app only at 56 s
    THEN grace_exceeded says app died 35.5 s after its kill: the sidecar's quick death, the first after
    the kill, is not app's (a kill names its container ID; so does PLEG)."""
    tl = derive_pod_timeline(_kills({"sidecar": 21.0, "app": 56.0}))
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert "container app was killed at" in found.message and "died 35.5s later" in found.message
    assert "container sidecar" not in found.message


def test_a_container_whose_death_no_line_shows_is_not_dead_at_another_containers_death() -> None:
    """GIVEN the same two kills, the sidecar's death at 21 s, and no death line of app (its PLEG event
    not logged), the kubelet logging all containers terminated at 56.1 s
    THEN the termination took until 56.1 s, past the 30 s grace: one container's death does not say when
    the others died."""
    tl = derive_pod_timeline(_kills({"sidecar": 21.0}, killed=("app",), terminated=56.1))
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert found.attrs["seconds"] == 35.65


def test_an_api_objects_removal_does_not_date_its_containers_stop() -> None:
    """GIVEN only the API's view of a pod (scenarios.api_start; SYNTHETIC snapshots): deleted at T0+20
    with grace 1 s, last seen running at 20.1 s, and gone at 30 s, no container finish time shown
    THEN no grace_exceeded: the object's removal comes after the kubelet's last status, so it bounds the
    containers' stop from above and does not say they outlived their grace (the inferred terminating bar
    ends there, the kubelet's own word is missing)."""
    run = {"phase": "Running", "start_time": 2, "deletion": 21, "deletion_grace": 1}
    obs = [
        *scenarios.api_start(),
        pod(UID, 105, 20.1, **run, containers=[ctr(state="running", started=4, ready=True)]),
        pod(UID, 106, 30.0, **run, containers=[ctr(state="running", started=4)], deleted=True),
    ]
    tl = derive_pod_timeline(obs)
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert (terminating.source, terminating.end) == ("inferred", t(30.0))
    assert [f.kind for f in tl.findings if f.kind == "grace_exceeded"] == []


def _kills(
    deaths: dict[str, float],
    *,
    killed: tuple[str, ...] = (),
    terminated: float | None = None,
    named: bool = True,
) -> list[Observation]:
    """SYNTHETIC lines in the kubelet parser's shapes: a running pod (scenarios.normal_start) deleted with
    grace 30 s (taken at 20.45 s), the kubelet killing each container of ``deaths`` (and of ``killed``) at
    20.463 s with 30 s ("Killing container with a grace period" naming its containerID) and PLEG naming the
    death of each container of ``deaths`` at the time given (ContainerDied naming the bare ID), then all
    containers terminated at ``terminated`` (default: 0.1 s after the last death); with ``named=False`` the
    kill lines name the container ID only (no containerName)."""
    names = [*deaths, *(n for n in killed if n not in deaths)]
    ids = {name: f"{i + 1:x}" * 64 for i, name in enumerate(names)}
    end = terminated if terminated is not None else max(deaths.values()) + 0.1
    obs = [
        *scenarios.normal_start(),
        pod(
            UID,
            105,
            20.4,
            phase="Running",
            start_time=2,
            deletion=50,
            deletion_grace=30,
            containers=[ctr(name, "running", started=4) for name in names],
        ),
        worker(UID, 20.45, "termination_requested", cause="deletion"),
        worker(UID, 20.46, "terminating_enter", grace=30),
    ]
    for name, cid in ids.items():
        kill = marker(
            UID,
            20.463,
            "KillingContainer",
            "Killing container with a grace period",
            container=name if named else None,
            grace=30,
        )
        payload = {**kill.payload, "container_id": f"containerd://{cid}"}
        obs.append(replace(kill, dedupe_key=kill.dedupe_key + name, payload=payload))
    for name, seen in deaths.items():
        died = worker(UID, seen, "container_died")
        obs.append(
            replace(
                died, dedupe_key=died.dedupe_key + name, payload={**died.payload, "container_id": ids[name]}
            )
        )
    obs += [
        worker(UID, end, "containers_terminated"),
        worker(UID, end + 0.1, "terminated_enter"),
        worker(UID, end + 0.4, "worker_done"),
    ]
    return obs


def test_a_finding_names_at_most_three_slow_kills_and_cites_them_all() -> None:
    """GIVEN four containers (a, b, c, d) killed at 20.463 s with 30 s, dying at 56, 57, 58 and 59 s
    (SYNTHETIC kill and PLEG lines, see ``_kills``)
    THEN the termination's one grace_exceeded finding tells the first three kills (a reader wants the
    examples, not a list as long as the pod) and still cites all four deaths as evidence."""
    obs = _kills({"a": 56.0, "b": 57.0, "c": 58.0, "d": 59.0})
    tl = derive_pod_timeline(obs)
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert [f"container {n} was killed" in found.message for n in "abcd"] == [True, True, True, False]
    deaths = {o.dedupe_key for o in obs if o.payload.get("transition") == "container_died"}
    assert len(deaths) == 4 and deaths <= set(found.evidence)


def test_a_kill_line_naming_no_container_is_told_by_its_short_container_id() -> None:
    """GIVEN two containers killed with 30 s by lines naming only the container ID (SYNTHETIC: as the
    kubelet's <=1.18 "Killing container "docker://<id>" with a 30 second grace period" names it, real in
    tests/fixtures/real/kubelet/deckhouse-336-kubelet-forker-kill-unwanted-and-add.journal; here in the
    structured shape, containerID without containerName), one dying at 56 s
    THEN the finding names that container by its ID's first 12 characters (what ``docker ps`` and
    ``crictl ps`` show), without the runtime prefix."""
    tl = derive_pod_timeline(_kills({"a": 21.0, "b": 56.0}, named=False))
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert f"container {'2' * 12} was killed at" in found.message
    assert "container None" not in found.message and "containerd://" not in found.message


def test_a_termination_whose_request_the_log_does_not_show_is_not_timed() -> None:
    """GIVEN kubelet lines (SYNTHETIC, the parser's shapes) that begin with the pod worker already
    terminating at 20.46 s (its termination request not in the log) and end with its containers
    terminated at 56.1 s
    THEN no grace_exceeded: the termination began at an unknown moment before the first line, so how long
    the containers took is unknown (it could be less or more than 35.6 s)."""
    obs = [
        worker(UID, 20.46, "terminating_enter", grace=30),
        worker(UID, 56.1, "containers_terminated"),
        worker(UID, 56.2, "terminated_enter"),
        worker(UID, 56.5, "worker_done"),
    ]
    tl = derive_pod_timeline(obs)
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert not terminating.start_known
    assert [f.kind for f in tl.findings if f.kind == "grace_exceeded"] == []


def test_a_grace_report_with_no_message_is_told_by_its_reason_alone() -> None:
    """GIVEN scenarios.stuck_terminating whose ExceededGracePeriod event has an empty message (SYNTHETIC:
    an Event's message is optional in the API)
    THEN the finding says the kubelet reported ExceededGracePeriod, with no empty parentheses."""
    obs = [
        replace(o, payload={**o.payload, "message": ""}) if o.dedupe_key == "event:ev-exceeded:1" else o
        for o in scenarios.stuck_terminating()
    ]
    (found,) = [f for f in derive_pod_timeline(obs).findings if f.kind == "grace_exceeded"]
    assert found.message.endswith("the kubelet reported ExceededGracePeriod.")
    assert "()" not in found.message


def test_a_grace_report_outside_any_termination_is_its_own_finding() -> None:
    """GIVEN a pod started and running (scenarios.normal_start) and a kubelet line at 15 s saying the
    runtime did not kill the pod within its grace period (SYNTHETIC GraceExceeded marker), with no
    termination of the pod seen
    THEN it is still a grace_exceeded finding of its own, starting at the report, open-ended (when the
    termination it belongs to ended is unknown), counting that one report and citing it: a kubelet report
    is never dropped for want of its termination."""
    line = marker(UID, 15.0, "GraceExceeded", KILL_TIMEOUT_TEXT)
    tl = derive_pod_timeline([*scenarios.normal_start(), line])
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert (found.start, found.end, found.attrs["reports"]) == (t(15.0), None, 1)
    assert list(found.evidence) == [line.dedupe_key]
    assert "reported GraceExceeded at 2024-06-07 06:54:55 UTC" in found.message
    assert f"({KILL_TIMEOUT_TEXT})" in found.message


def test_an_eviction_cites_its_kill_first_evicted_status_events_and_the_reclaim_before_it() -> None:
    """GIVEN (SYNTHETIC, the kubelet's texts: eviction_manager.go, eviction/helpers.go) a running pod
    evicted for memory: the eviction manager's "attempting to reclaim" at 9 s and again at 11 s, the
    kubelet's Evicted line at 11.5 s, the pod's status written Failed / Evicted (seen at 12 s and again at
    13 s), the Evicted event at 12 s, and another "attempting to reclaim" at 40 s (the next pressure)
    THEN the evicted finding starts at the kill and cites the kill, the first status that says Evicted
    (the later one repeats it), the event, and the reclaim just before the kill (the one that chose this
    pod), not the earlier nor the later one."""
    message = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 82124Ki. "
    evicted_status = {"phase": "Failed", "start_time": 1.0, "reason": "Evicted", "message": message}
    running = pod(
        UID, 3, 5.0, phase="Running", start_time=1.0, containers=[ctr("app", "running", started=2.0)]
    )
    statuses = [
        pod(
            UID,
            rv,
            seen,
            containers=[ctr("app", "terminated", started=2.0, finished=11.8, exit_code=137)],
            **evicted_status,
        )
        for rv, seen in ((4, 12.0), (5, 13.0))
    ]
    kill = marker(UID, 11.5, "Evicted", "Eviction manager: pod is evicted successfully")
    evented = event(UID, "ev-evicted", 12.0, "Evicted", message, type_="Warning")
    reclaim = "Eviction manager: attempting to reclaim"
    reclaims = [
        replace(m, pod_uid=None, payload={**m.payload, "resource": "memory"})
        for m in (marker(UID, s, "EvictionReclaim", reclaim) for s in (9.0, 11.0, 40.0))
    ]
    tl = derive_pod_timeline([running, *statuses, kill, evented, *reclaims])
    (found,) = [f for f in tl.findings if f.kind == "evicted"]
    assert found.start == t(11.5)
    assert set(found.evidence) == {
        kill.dedupe_key,
        statuses[0].dedupe_key,
        evented.dedupe_key,
        reclaims[1].dedupe_key,
    }
    assert (found.attrs["resource"], found.attrs["threshold"], found.attrs["available"]) == (
        "memory",
        "100Mi",
        "82124Ki",
    )
