"""Rules of the worker lane's evidence (timelines/lifecycle/worker.py), continued from
test_worker_pieces.py: what begins a termination in the eviction manager's lines, what setup cites.

Each rule comes from the kubelet's semantics (/work/shared/k8s-facts.md, docs/kubelet-lines.md) or from a
real excerpt (tests/fixtures/real/kubelet, tests/fixtures/real/SOURCES.md); a line added to a real excerpt
is SYNTHETIC and says so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.lifecycle import scenarios
from tests.lifecycle.factories import at, cond, ctr, finding_rows, marker, pod, rows, t, worker
from tests.lifecycle.test_kubelet_truth import parse, timelines
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation

UID = scenarios.UID
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"
NGINX = "27aff94d-e0d9-43d1-84d6-9ab000aa57e2"
# SYNTHETIC: a volume mount of the nginx pod's start-up, in the real format of MountVolume.SetUp (as in
# SOURCES.md's kubelet excerpts), before the real AKS eviction excerpt.
MOUNT = (
    "Oct 12 19:30:00 aks-nodepool1-24207654-vmss000002 kubelet[2480]: I1012 19:30:00.100000    2480 "
    'operation_generator.go:740] "MountVolume.SetUp succeeded for volume \\"kube-api-access-x7k2p\\" '
    '(UniqueName: \\"kubernetes.io/projected/' + NGINX + '-kube-api-access-x7k2p\\") pod \\"nginx\\" '
    '(UID: \\"' + NGINX + '\\") " pod="default/nginx"'
)


def test_the_eviction_ranking_begins_termination_whatever_kubelet_lines_of_the_pod_came_before() -> None:
    """docs/kubelet-lines.md: "Eviction manager: pods ranked for eviction" lists the pods, and the first
    one it may kill is evicted at once: the ranking begins that pod's termination (cause evicted) when its
    kill follows. In the real AKS excerpt (SOURCES.md: aks-1.27-memory-eviction-nginx.syslog) nginx is
    ranked first at 19:34:44.999261 and killed at 19:34:45.000152; an earlier line of the pod (its volume
    mounted at start-up) changes nothing of that.

    SYNTHETIC: the mount line above, before the real excerpt."""
    lines = [MOUNT] + (REAL / "aks-1.27-memory-eviction-nginx.syslog").read_text(
        encoding="utf-8"
    ).splitlines()
    tl = timelines(parse([lines], node="aks-nodepool1-24207654-vmss000002", year=2023))[NGINX]
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert terminating.start.isoformat() == "2023-10-12T19:34:44.999261+00:00"
    assert (terminating.attrs["start_from"], terminating.attrs["cause"]) == ("EvictionRanked", "evicted")


def test_setup_cites_the_syncloop_add_its_worker_first_saw_the_pod_after() -> None:
    """The kubelet admits a pod between its SyncLoop ADD and its worker's first sync (docs/kubelet-lines.md;
    HandlePodAdditions): an ADD followed within moments by "Pod is being synced for the first time" in
    sync is that pod's admission, so the ADD is evidence of its setup and the setup interval cites it
    (docs/timeline-schema.md, ``evidence``), its start dated by the worker's own first sight.

    SYNTHETIC: V2 SyncLoop ADD, V4 first sight and SyncPod enter / exit, then the graceful deletion of
    tests/lifecycle/scenarios.py; no API object."""
    add = worker(UID, 1.09, "syncloop_add", message="SyncLoop ADD")
    first = [worker(UID, 1.1, "first_seen"), worker(UID, 1.11, "sync_enter"), worker(UID, 1.5, "sync_exit")]
    setup = derive_pod_timeline([add, *first, *scenarios.kubelet_graceful_delete()]).lane("worker")[0]
    assert (setup.state, setup.start, setup.attrs["start_from"]) == ("setup", t(1.1), "first_seen")
    assert add.dedupe_key in setup.evidence


PLEG = "SyncLoop (PLEG): event for pod"


def _pleg(seen: float, transition: str, container_id: str) -> Observation:
    """SYNTHETIC: a V2 PLEG line of the pod (its container or sandbox ID in the payload, as the parser
    gives it)."""
    obs = worker(UID, seen, transition, message=PLEG)
    return replace(obs, payload={**obs.payload, "container_id": container_id})


def test_a_completed_pods_cleanup_is_dated_by_the_first_report_of_each_death() -> None:
    """A RestartNever pod completed with no kill line (door 2): cleanup begins at the last death PLEG saw
    (the sandbox's, last in SyncTerminatingPod). A kubelet restarted later re-reports every exited
    container still present as ContainerDied on its first relist (generic PLEG: no old state, exited now;
    docs/kubelet-lines.md: a new kubelet re-lists every pod), the same deaths told again: a death is dated
    by its first report, so cleanup still begins at the sandbox's death at 10.5, not at the re-report.

    SYNTHETIC: V2 SyncLoop ADD, PLEG ContainerStarted / ContainerDied of the sandbox "5a1d" and the app
    "a1", the same two deaths reported again at 60, no API object."""
    obs = [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        _pleg(2.0, "container_started", "5a1d"),
        _pleg(3.0, "container_started", "a1"),
        _pleg(10.0, "container_died", "a1"),
        _pleg(10.5, "container_died", "5a1d"),
        _pleg(60.0, "container_died", "a1"),
        _pleg(60.0, "container_died", "5a1d"),
    ]
    (cleanup,) = [iv for iv in derive_pod_timeline(obs).lane("worker") if iv.state == "cleanup"]
    assert (cleanup.start, cleanup.attrs["start_from"]) == (t(10.5), "all_containers_died")


def test_deaths_its_kill_lines_explain_leave_the_deletion_and_its_remove_standing() -> None:
    """An excerpt that begins after the containers started: a SyncLoop DELETE, the kill line ("Killing
    container with a grace period", V2), the app's and the sandbox's deaths, the REMOVE. The kill explains
    the deaths (the deletion killed them): this is no pod that completed on its own, so the DELETE begins
    termination and the REMOVE still ends the worker's life in the timeline (at 8.0).

    SYNTHETIC: V2 config, kill and PLEG lines, no API object."""
    obs = [
        worker(UID, 4.0, "syncloop_delete", message="SyncLoop DELETE"),
        marker(
            UID, 4.01, "KillingContainer", "Killing container with a grace period", container="app", grace=30
        ),
        _pleg(6.0, "container_died", "a1"),
        _pleg(6.5, "container_died", "5a1d"),
        worker(UID, 8.0, "syncloop_remove", message="SyncLoop REMOVE"),
    ]
    lane = derive_pod_timeline(obs).lane("worker")
    assert (lane[0].state, lane[0].start, lane[0].attrs["start_from"]) == (
        "terminating",
        t(4.0),
        "syncloop_delete",
    )
    assert lane[-1].end == t(8.0)


def test_after_deaths_no_kill_explains_the_workers_own_teardown_lines_stand() -> None:
    """An excerpt that begins as a RestartNever pod completed: the app's and the sandbox's deaths with no
    kill line, then the worker's own V4 lines of SyncTerminatedPod up to "Pod worker has stopped", and
    long after, the Job controller's DELETE and REMOVE. The containers exited on their own, so the DELETE
    begins no termination (it is dropped); but only the config lines are: the worker's lines after the
    deaths still show cleanup from SyncTerminatedPod's enter (7.0) to the worker's end (7.6).

    SYNTHETIC: V2 PLEG and config lines, V4 pod worker lines, no API object."""
    obs = [
        _pleg(6.0, "container_died", "a1"),
        _pleg(6.5, "container_died", "5a1d"),
        worker(UID, 7.0, "terminated_enter"),
        worker(UID, 7.5, "terminated_exit"),
        worker(UID, 7.6, "worker_done"),
        worker(UID, 100.0, "syncloop_delete", message="SyncLoop DELETE"),
        worker(UID, 100.1, "syncloop_remove", message="SyncLoop REMOVE"),
    ]
    assert rows(derive_pod_timeline(obs), "worker") == [("cleanup", at(7.0), at(7.6), "observed")]


def test_an_api_only_eviction_terminates_from_the_kubelets_disruption_target_cause_evicted() -> None:
    """k8s-facts.md (DisruptionTarget): on 1.26+ the kubelet's node-pressure eviction sets
    DisruptionTarget=True, reason TerminationByKubelet, with the eviction message, as it begins the
    eviction, and the pod ends Failed with reason Evicted. Seen by the API alone, the condition's transition
    (30 s) dates the termination request, and its cause is the eviction (as "Evicting pod" would say in
    the kubelet's lines), not a kill of another kind (node shutdown, critical-pod preemption).

    SYNTHETIC: the API's view of a start (scenarios.api_start), a status at 30.2 with the condition while
    the container still runs (the phase is written once it stopped), Failed / Evicted at 31.4 with the
    container finished (exit 137) at 31; the message is the eviction manager's first sentence."""
    said = "The node was low on resource: memory. "
    target = cond("DisruptionTarget", "True", 30, "TerminationByKubelet", said)
    obs = [
        *scenarios.api_start(),
        pod(
            UID,
            105,
            30.2,
            phase="Running",
            start_time=2,
            conditions=[cond("PodScheduled", "True", 1), target],
            containers=[ctr(state="running", started=4, ready=True)],
        ),
        pod(
            UID,
            106,
            31.4,
            phase="Failed",
            reason="Evicted",
            message=said,
            start_time=2,
            conditions=[cond("PodScheduled", "True", 1), target],
            containers=[ctr("app", "terminated", reason="Error", exit_code=137, started=4, finished=31)],
        ),
    ]
    tl = derive_pod_timeline(obs)
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert (terminating.start, terminating.end) == (t(30), t(31))
    assert terminating.attrs["cause"] == "evicted"
    # The eviction finding dates the eviction where the worker began it, not at the Failed status.
    assert ("evicted", "warning", at(30), None) in finding_rows(tl)


# SYNTHETIC: the eviction manager's V3 "Evicting pod" line (format of tests/parsers/test_kubelet_log.py's
# sample, eviction_manager.go) for nginx, between the real ranking line and the real success line.
EVICTING = (
    "Oct 12 19:34:44 aks-nodepool1-24207654-vmss000002 kubelet[2480]: I1012 19:34:44.999500    2480 "
    'eviction_manager.go:608] "Evicting pod" pod="default/nginx" podUID="' + NGINX + '" '
    'message="The node was low on resource: memory. "'
)


def test_the_eviction_ranking_begins_termination_when_evicting_pod_follows_without_a_kill() -> None:
    """docs/kubelet-lines.md: the ranking's first pod is evicted at once; "Evicting pod" (V3) says so even
    when no "Killing container" line follows (a pod whose containers had all exited already has none to
    kill): the ranking line still begins the pod's termination, cause evicted, not the later "Evicting
    pod".

    The real AKS excerpt (SOURCES.md: aks-1.27-memory-eviction-nginx.syslog), its ranking and success
    lines; SYNTHETIC: the "Evicting pod" line above in place of its kill and ContainerDied lines."""
    real = (REAL / "aks-1.27-memory-eviction-nginx.syslog").read_text(encoding="utf-8").splitlines()
    lines = [real[0], EVICTING, real[3]]
    tl = timelines(parse([lines], node="aks-nodepool1-24207654-vmss000002", year=2023))[NGINX]
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert terminating.start.isoformat() == "2023-10-12T19:34:44.999261+00:00"
    assert (terminating.attrs["start_from"], terminating.attrs["cause"]) == ("EvictionRanked", "evicted")


def _deleted_with_grace_1(kill: bool) -> list[Observation]:
    """SYNTHETIC: the API's view of a start (scenarios.api_start), a DELETE with grace 1 at 20 (deletion
    timestamp 21) while the app runs, the app finished at 22; the V2 SyncLoop DELETE at 20.05 and, with
    ``kill``, the V2 kill line at 20.06 saying the grace the kubelet applied (2)."""
    deleting = {"start_time": 2, "deletion": 21, "deletion_grace": 1}
    obs = [
        *scenarios.api_start(),
        pod(UID, 105, 20.04, phase="Running", **deleting, containers=[ctr(state="running", started=4)]),
        worker(UID, 20.05, "syncloop_delete", message="SyncLoop DELETE"),
        pod(
            UID,
            106,
            22.5,
            phase="Succeeded",
            **deleting,
            containers=[ctr(state="terminated", reason="Completed", exit_code=0, started=4, finished=22)],
        ),
    ]
    if kill:
        obs.append(
            marker(
                UID,
                20.06,
                "KillingContainer",
                "Killing container with a grace period",
                container="app",
                grace=2,
            )
        )
    return obs


def test_a_termination_without_a_grace_on_its_lines_has_the_deletions_grace() -> None:
    """A termination begun by a SyncLoop DELETE (V2: the line gives no grace) was given the grace of the
    deletion that began it (its deletionGracePeriodSeconds, 1 here): its terminating interval says so."""
    (terminating,) = [
        iv
        for iv in derive_pod_timeline(_deleted_with_grace_1(False)).lane("worker")
        if iv.state == "terminating"
    ]
    assert terminating.attrs["grace_seconds"] == 1


def test_the_grace_a_kill_line_says_is_the_one_the_termination_was_given() -> None:
    """The kubelet's kill line says the grace it applied: from 1.22 on at least 2 (StopContainer's floor,
    applied before the line; docs/testing.md), though the DELETE asked for 1. The termination was given
    what the kill line says, 2."""
    (terminating,) = [
        iv
        for iv in derive_pod_timeline(_deleted_with_grace_1(True)).lane("worker")
        if iv.state == "terminating"
    ]
    assert terminating.attrs["grace_seconds"] == 2


def test_a_completed_pods_cleanup_ends_at_the_status_managers_termination_finished() -> None:
    """A RestartNever pod whose app and sandbox PLEG saw start and die, with no kill line (door 2):
    cleanup begins at the last death (the sandbox's, 10.5). The Job controller's later DELETE and REMOVE
    request nothing and are dropped, but only they: the status manager's V3 "The pod termination is
    finished as SyncTerminatedPod completes" (1.27+) after the deaths still ends cleanup, at 11.1.

    SYNTHETIC: V2 SyncLoop ADD / DELETE / REMOVE and PLEG lines, the V3 status manager line, no API
    object."""
    obs = [
        worker(UID, 1.1, "syncloop_add", message="SyncLoop ADD"),
        _pleg(2.0, "container_started", "5a1d"),
        _pleg(3.0, "container_started", "a1"),
        _pleg(10.0, "container_died", "a1"),
        _pleg(10.5, "container_died", "5a1d"),
        worker(
            UID,
            11.1,
            "termination_finished",
            message="The pod termination is finished as SyncTerminatedPod completes its execution",
        ),
        worker(UID, 100.0, "syncloop_delete", message="SyncLoop DELETE"),
        worker(UID, 100.1, "syncloop_remove", message="SyncLoop REMOVE"),
    ]
    (cleanup,) = [iv for iv in derive_pod_timeline(obs).lane("worker") if iv.state == "cleanup"]
    assert (cleanup.start, cleanup.end, cleanup.attrs["end_from"]) == (
        t(10.5),
        t(11.1),
        "termination_finished",
    )
