"""The real kubelet excerpts of tests/fixtures/real/kubelet (verbatim, with their sources in its README),
through the parser, the resolver and the lifecycle core: what a kubelet engineer reads from each file.

Each expectation is the README's (the kubelet's semantics for those lines), not the code's output. The
variants/ files are marked synthetic there; they are written from real message formats.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from collectors.parsers.kubectl import read_kubectl_output
from collectors.parsers.kubelet_log import KubeletLogParser
from tests.lifecycle.test_kubelet_truth import parse, timelines
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.resolve import Anchor, nameless_lives, unclaimed_life
from timelines.lifecycle.timeline import Interval, PodTimeline

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"


def pods(name: str, *, node: str, year: int) -> dict[str, PodTimeline]:
    lines = (REAL / name).read_text(encoding="utf-8").splitlines()
    return timelines(parse([lines], node=node, year=year))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def worker(tl: PodTimeline, *states: str) -> list[Interval]:
    return [iv for iv in tl.lane("worker") if not states or iv.state in states]


def life(tl: PodTimeline) -> list[str]:
    """The worker's states, ``running`` counted as part of setup's life (SyncPod split in two)."""
    return [iv.state for iv in tl.lane("worker") if iv.state != "running"]


def test_kueue_v3_setup_from_the_add_and_cleanup_until_the_status_manager_saw_it_finish() -> None:
    """No V4 line: SyncLoop ADD begins setup (no kubelet start is in the log, so it is no re-list);
    "The pod termination is finished as SyncTerminatedPod completes its execution" ends cleanup."""
    tl = pods("kueue-4669-kind-1.31-v3.journal", node="kind-worker", year=2025)[
        "8bb7de3e-72f0-4102-adbd-53897040775e"
    ]
    assert life(tl) == ["setup", "terminating", "cleanup"]
    setup, *_ = worker(tl, "setup")
    (terminating,) = worker(tl, "terminating")
    (cleanup,) = worker(tl, "cleanup")
    assert setup.start == at("2025-03-18T10:21:19.149698")
    assert abs((terminating.start - at("2025-03-18T10:21:21.68")).total_seconds()) < 0.01
    assert abs((terminating.end - at("2025-03-18T10:21:59.5")).total_seconds()) <= 0.5  # type: ignore[operator]
    assert cleanup.start == terminating.end
    assert cleanup.end == at("2025-03-18T10:22:16.784665")
    assert "grace_exceeded" in {f.kind for f in tl.findings}


def test_107730_an_exit_line_alone_ends_terminating_and_the_container_state_dates_the_finish() -> None:
    tl = pods("k8s-107730-v1.23-terminating-exit.journal", node="bm02", year=2022)[
        "68aaedee-7ebd-44fd-ad66-0febb9a0b509"
    ]
    (terminating,) = worker(tl, "terminating")
    assert terminating.start <= at("2022-01-27T07:57:17.266405")
    assert terminating.end == at("2022-01-27T07:57:17.685027")  # lowercase `syncTerminatingPod exit`
    finished = [m for m in tl.markers if m.reason == "ContainerFinished"]
    assert [(m.at, m.attrs["container"], m.attrs["exit_code"]) for m in finished] == [
        (at("2022-01-27T07:57:17.377710"), "nginx", 0)
    ]


def test_105462_a_first_sync_that_has_not_returned_is_setup_until_the_excerpt_ends() -> None:
    tl = pods("k8s-105462-kind-1.23-first-sync.journal", node="kind-worker", year=2021)[
        "a409f0f6-ac57-4d5e-95e1-97e074ea74b7"
    ]
    assert [(iv.state, iv.start, iv.end) for iv in tl.lane("worker")] == [
        ("setup", at("2021-10-05T17:41:03.669398"), None)
    ]


def test_110181_plain_klog_the_worker_done_line_ends_cleanup() -> None:
    tl = pods("k8s-110181-plain-klog-1.23-worker-done.log", node="n", year=2022)[
        "1e8f53a0-a61f-4d6d-a484-36b666ce0cd7"
    ]
    (cleanup,) = worker(tl, "cleanup")
    assert cleanup.end == at("2022-05-18T08:10:43.697353")
    assert cleanup.start <= cleanup.end and cleanup.attrs.get("start_unknown")


def test_110755_cloud_logging_copy_puts_the_shutdown_kill_on_the_uid_of_the_later_line() -> None:
    """A Cloud Logging copy (time and host on lines of their own) whose namespace the reporter redacted
    as `XX`: the shutdown manager's kill names the pod only by name; the UID comes from the post-reboot
    sync error."""
    tl = pods("k8s-110755-gke-node-shutdown.txt", node="gke-node", year=2022)[
        "4ee81e47-0e79-42fb-a7f6-40cd8e1a47a9"
    ]
    marks = {(m.reason, m.at) for m in tl.markers}
    assert ("ShutdownKill", at("2022-06-23T15:42:16.744070")) in marks
    assert ("SyncError", at("2022-06-23T15:44:33.989839")) in marks
    assert any(f.kind == "node_shutdown" and f.severity == "warning" for f in tl.findings)
    # The node rebooted under the kill: how terminating ended is not known, never read as stuck.
    (terminating,) = worker(tl, "terminating")
    assert terminating.end is None and terminating.attrs.get("end_unknown")
    assert "stuck_terminating" not in {f.kind for f in tl.findings}


def test_132001_an_eviction_naming_the_pod_only_by_name_is_on_that_pods_timeline() -> None:
    lines = (REAL / "k8s-132001-eviction-2025.journal").read_text(encoding="utf-8").splitlines()
    observations = parse([lines], node="192-168-250-5", year=2025)
    assert not any(o.pod_uid for o in observations)  # no UID anywhere in the excerpt
    named = [o for o in observations if (o.namespace, o.name) == ("sre", "infras-logstash-d484d57fc-rkx95")]
    tl = derive_pod_timeline(unclaimed_life(named))
    assert ("Evicted", at("2025-05-28T16:05:54.802914")) in {(m.reason, m.at) for m in tl.markers}
    # The same lines in any order give the same life.
    assert derive_pod_timeline(unclaimed_life(reversed(named))) == tl


def test_132001_a_pod_only_uid_less_lines_name_is_one_stored_life_unless_a_known_pod_takes_them() -> None:
    """The kubelet names the evicted pod only as ns/name: with no incarnation of that name on the node,
    its lines are one life of their own, with a synthetic identity the same lines give in any order; an
    incarnation with evidence on that node then (a UID that arrives later) takes them, and the life is none."""
    lines = (REAL / "k8s-132001-eviction-2025.journal").read_text(encoding="utf-8").splitlines()
    observations = parse([lines], node="192-168-250-5", year=2025)
    named = [o for o in observations if (o.namespace, o.name) == ("sre", "infras-logstash-d484d57fc-rkx95")]
    (life,) = nameless_lives(named, [])
    uid = life[0].pod_uid or ""
    assert uid.startswith("kubelet-") and {o.pod_uid for o in life} == {uid}
    assert nameless_lives(reversed(named), []) == (life,)
    tl = derive_pod_timeline(life)
    assert ("Evicted", at("2025-05-28T16:05:54.802914")) in {(m.reason, m.at) for m in tl.markers}
    first, last = named[0].observed_at, named[-1].observed_at
    known = Anchor("1b2c", "192-168-250-5", first, last, True, "sre", "infras-logstash-d484d57fc-rkx95")
    assert nameless_lives(named, [known]) == ()


@pytest.mark.parametrize(
    ("name", "year"),
    [
        ("k3s-1.30-homelab-disk-pressure-critical-pod.journal", 2024),
        ("kubeadm-1.23-worker1-eviction-before-kubelet-stop.journal", 2022),
    ],
)
def test_an_eviction_ranking_or_a_refused_critical_pod_alone_makes_no_pod(name: str, year: int) -> None:
    """The eviction manager ranks every pod on the node and refuses to evict a critical one: those lines do
    nothing to a pod, so they are no evidence of a life of their own."""
    lines = (REAL / name).read_text(encoding="utf-8").splitlines()
    observations = parse([lines], node="n", year=year)
    assert any(o.namespace and o.name and o.pod_uid is None for o in observations)
    assert nameless_lives(observations, []) == ()


def test_kind_1_35_running_is_proven_from_the_observed_running_time_before_the_first_line() -> None:
    """ "Observed pod startup duration" is logged after the pod was seen running, and says since when
    (observedRunningTime): in an excerpt that starts with it, running is proven from that time."""
    lines = (REAL / "kind-1.35-observed-startup-pod-update-broadcasted.journal").read_text(encoding="utf-8")
    observations = parse([lines.splitlines()], node="devops-hw-control-plane", year=2026)
    named = [o for o in observations if (o.namespace, o.name) == ("kube-system", "coredns-559f6c778d-bvm4l")]
    (life,) = nameless_lives(named, [])
    (running,) = worker(derive_pod_timeline(life), "running")
    assert running.start == at("2026-09-17T13:28:49.216680")


def test_pleg_container_events_are_on_the_pods_timeline() -> None:
    """PLEG's ContainerDied (the OOM-killed container, a pre-1.20 line) and an init container's
    "container finished" with exit code 0 are the pod's history: each is a marker at its line's time."""
    (tl,) = pods("k8s-98157-plain-klog-docker-oomkilled-pleg-died.log", node="n", year=2021).values()
    died = [m for m in tl.markers if m.reason == "ContainerDied"]
    assert [(m.at, m.attrs["container_id"][:12]) for m in died] == [
        (at("2021-01-19T11:43:14.742162"), "d01a562554dc")
    ]
    gke = pods("gke-1.26-multus-init-container-startup.journal", node="n", year=2023)
    finished = [m for tl in gke.values() for m in tl.markers if m.reason == "ContainerFinished"]
    assert (at("2023-05-02T08:56:09.232422"), 0) in {(m.at, m.attrs["exit_code"]) for m in finished}


def test_125050_deleted_during_the_pull_is_setup_then_an_unknown_gap_then_cleanup() -> None:
    tl = pods("k8s-125050-kind-1.29-v6-deleted-during-pull.journal", node="kind-worker", year=2024)[
        "4a2edca4-18e7-41ee-94c6-170d1498fe93"
    ]
    (setup,) = worker(tl, "setup")
    (cleanup,) = worker(tl, "cleanup")
    assert setup.start == at("2024-05-23T09:50:58.441696")
    assert cleanup.start == at("2024-05-23T09:51:46.991895")
    assert setup.end is not None and setup.end < cleanup.start  # no 48 s of observed setup
    assert not worker(tl, "terminating")  # the terminating lines are not in the excerpt
    assert [iv.state for iv in tl.lane("worker")] == ["setup", "unknown", "cleanup"]


def test_v3_interleaved_pods_setup_until_termination_and_a_failed_first_sync_keeps_setup_open() -> None:
    found = pods("variants/v3-interleaved-utc-prefix-local-klog.journal", node="node-b", year=2024)
    api = found["5a1c3e7f-2b4d-4f60-8e9a-1c3b5d7f9a2e"]
    assert [(iv.state, iv.start, iv.end) for iv in api.lane("worker")] == [
        ("setup", at("2024-02-14T15:02:11.201610"), at("2024-02-14T15:02:15.318466")),
        ("terminating", at("2024-02-14T15:02:15.318466"), at("2024-02-14T15:02:15.402915")),
        ("cleanup", at("2024-02-14T15:02:15.402915"), at("2024-02-14T15:02:15.505310")),
    ]
    assert "killed_during_setup" in {f.kind for f in api.findings}
    w0 = found["e4d2c0b8-a6f4-4e2c-9b0d-8f6e4c2a0b1d"]
    assert [(iv.state, iv.start, iv.end) for iv in w0.lane("worker")] == [
        ("setup", at("2024-02-14T15:02:11.640177"), None)
    ]
    assert ("SyncError", at("2024-02-14T15:02:13.902180")) in {(m.reason, m.at) for m in w0.markers}


def test_v4_a_restarted_kubelet_resyncing_a_finished_pod_starts_no_new_setup() -> None:
    (tl,) = pods("variants/v4-kubelet-restart-after-job-completed.journal", node="node-c", year=2024).values()
    cut = at("2024-01-21T09:00:00")
    first = [iv for iv in tl.lane("worker") if iv.start < cut]
    assert [(iv.state, iv.start, iv.end) for iv in first] == [
        ("setup", at("2024-01-21T02:30:00.412301"), at("2024-01-21T02:30:02.118502")),
        # The Job's pod completed on its own: its containers ran from the first sync's return.
        ("running", at("2024-01-21T02:30:02.118502"), at("2024-01-21T02:30:09.560114")),
        ("terminating", at("2024-01-21T02:30:09.560114"), at("2024-01-21T02:30:09.571377")),
        ("cleanup", at("2024-01-21T02:30:09.571377"), at("2024-01-21T02:30:09.672591")),
    ]
    assert not [iv for iv in tl.lane("worker") if iv.start >= cut and iv.state != "cleanup"]
    assert "uid_reuse" not in {f.kind for f in tl.findings}


def test_mirror_pod_reset_by_a_kubelet_restart_is_two_seconds_of_setup_not_26_days() -> None:
    result = read_kubectl_output(
        (REAL / "minikube-1.20-mirror-pod-kube-apiserver.json").read_text(), origin="mirror.json"
    )
    (tl,) = timelines(result.observations).values()
    setup = [(iv.start, iv.end, iv.source) for iv in tl.lane("worker") if iv.state == "setup"]
    assert setup == [(at("2021-11-17T06:58:52"), at("2021-11-17T06:58:54"), "inferred")]


def test_mirror_pods_previous_run_keeps_how_it_ended() -> None:
    """GIVEN the real kube-apiserver mirror pod (restartCount 23) whose ``lastState`` says its previous run
    (started 2021-11-16T06:55:06Z) terminated at 06:58:27 with reason Error and exit code 255 WHEN its
    timeline is derived THEN the container lane ends that run there, with that reason and exit code: the
    only record of why the container restarted is the last state the kubelet reported."""
    result = read_kubectl_output(
        (REAL / "minikube-1.20-mirror-pod-kube-apiserver.json").read_text(), origin="mirror.json"
    )
    (tl,) = timelines(result.observations).values()
    ended = [
        (iv.start, iv.attrs.get("reason"), iv.attrs.get("exit_code"), iv.attrs.get("restart"))
        for iv in tl.lane("container:kube-apiserver")
        if iv.state == "terminated"
    ]
    assert ended == [(at("2021-11-17T06:58:27"), "Error", 255, 22)]


def test_a_liveness_probes_kill_restarts_the_container_and_never_terminates_the_pod() -> None:
    """GIVEN the real AKS 1.31 journal where the liveness probe fails three times, the kubelet says
    "Container liveness failed liveness probe, will be restarted" and then "Killing container with a grace
    period" (no override: a restart's kill) WHEN the pod's timeline is derived THEN the worker stays
    running from its first sync on (a container restart is SyncPod's work, kuberuntime_manager.go
    computePodActions): no termination, no finding; the kill is a marker."""
    tl = pods(
        "aks-2025-1.31-liveness-probe-restart.journal", node="aks-nodepool1-29985679-vmss00000A", year=2025
    )["93e17ecc-ab55-461a-b526-29248d2554ad"]
    assert [(iv.state, iv.end) for iv in tl.lane("worker")] == [
        ("setup", at("2025-05-16T18:34:06.965398")),
        ("running", None),
    ]
    assert not tl.findings
    assert [m.at for m in tl.markers if m.reason == "KillingContainer"] == [at("2025-05-16T18:34:49.885621")]
    # Setup ends where "Observed pod startup duration" proves every container started, a known bound that
    # cites that line, and running begins there citing it too.
    setup, running = tl.lane("worker")
    assert setup.end_known and setup.attrs["end_from"] == "startup_observed"
    assert setup.attrs["end_evidence"] == running.attrs["start_evidence"]
    assert setup.attrs["end_evidence"] in setup.evidence


def test_a_kill_with_a_grace_period_override_terminates_even_beside_a_liveness_restart() -> None:
    """GIVEN the real AKS 1.31 liveness journal with one line added (SYNTHETIC, written from the real 1.31
    format of kueue-4669's journal): "Killing container with a grace period override" just before the
    restart's kill, as the kubelet logs when the pod is deleted with a shorter grace at that moment
    WHEN the timeline is derived THEN the worker is terminating from that line: an override comes only
    from killPodWithSyncResult's termination path (a restart's kill carries none), however near a
    "will be restarted" message it falls."""
    lines = (REAL / "aks-2025-1.31-liveness-probe-restart.journal").read_text(encoding="utf-8").splitlines()
    i = next(i for i, line in enumerate(lines) if '"Killing container with a grace period"' in line)
    override = (
        lines[i]
        .replace("18:34:49.885621", "18:34:49.885600")
        .replace(
            ':808] "Killing container with a grace period"',
            ':787] "Killing container with a grace period override"',
        )
        .replace("gracePeriod=30", "gracePeriod=1")
    )
    assert override != lines[i] and "override" in override
    lines.insert(i, override)
    tl = timelines(parse([lines], node="aks-nodepool1-29985679-vmss00000A", year=2025))[
        "93e17ecc-ab55-461a-b526-29248d2554ad"
    ]
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert terminating.start == at("2025-05-16T18:34:49.885600")
    # Nothing tells when the running worker was last sure to be running: the stretch before the kill is
    # unknown, and it ends at the line that proves the termination, citing it.
    (gap,) = [iv for iv in tl.lane("worker") if iv.state == "unknown"]
    assert (gap.end, gap.attrs["end_from"]) == (terminating.start, "KillingContainer")
    assert gap.attrs["end_evidence"] == terminating.attrs["start_evidence"]
    assert gap.attrs["end_evidence"] in gap.evidence


@pytest.mark.parametrize(
    "name",
    ["kueue-4669-kind-1.31-v3.journal", "k8s-125050-kind-1.29-v6-deleted-during-pull.journal"],
)
def test_any_ingest_order_gives_the_same_timelines(name: str) -> None:
    lines = (REAL / name).read_text(encoding="utf-8").splitlines()
    forward = parse([lines], node="n", year=2025)
    assert timelines(list(reversed(forward))) == timelines(forward)


def test_otlp_create_span_is_observed_setup_for_its_length_then_unknown_until_termination() -> None:
    """GIVEN an OTLP/JSON export (synthetic, in the kubelet's span shape) of a `syncPod` span with
    `k8s.pod.update_type=create`, then `syncTerminatingPod` and `syncTerminatedPod` spans
    THEN setup is observed for the span's length (the first sync), and only the stretch after it, where
    nothing says whether the containers started, is unknown until termination.

    Before: one `unknown` "between setup and running" from the span's start to termination."""
    from collectors.parsers.otlp import decode_request, spans_to_observations

    uid = "0c7f5a2e-3b1d-4e8f-9a6c-2d4b6f8a0e1c"
    base = 1_717_743_281_000_000_000  # 2024-06-07T06:54:41Z in Unix nanoseconds

    def sync(name: str, span_id: str, start_s: float, end_s: float, **extra: str) -> dict[str, object]:
        attrs = {"k8s.pod.uid": uid, "k8s.pod": "default/web-1", **extra}
        return {
            "traceId": f"{int(start_s * 10):032x}",
            "spanId": span_id,
            "name": name,
            "kind": 1,
            "startTimeUnixNano": str(base + int(start_s * 1e9)),
            "endTimeUnixNano": str(base + int(end_s * 1e9)),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
        }

    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "kubelet"}},
                        {"key": "host.name", "value": {"stringValue": "node-a"}},
                    ]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            sync(
                                "syncPod", "00000000000000a1", 0.0, 2.5, **{"k8s.pod.update_type": "create"}
                            ),
                            sync("syncTerminatingPod", "00000000000000a2", 20.0, 21.0),
                            sync("syncTerminatedPod", "00000000000000a3", 21.0, 21.2),
                        ]
                    }
                ],
            }
        ]
    }
    import orjson

    extraction = spans_to_observations(decode_request(orjson.dumps(body), "json"))
    assert len(extraction.observations) == 3
    tl = derive_pod_timeline(extraction.observations)
    t0 = datetime(2024, 6, 7, 6, 54, 41, tzinfo=UTC)
    from datetime import timedelta

    def s(x: float) -> datetime:
        return t0 + timedelta(seconds=x)

    assert [(iv.state, iv.start, iv.end, iv.source) for iv in tl.lane("worker")] == [
        ("setup", s(0.0), s(2.5), "observed"),
        ("unknown", s(2.5), s(20.0), "observed"),
        ("terminating", s(20.0), s(21.0), "observed"),
        ("cleanup", s(21.0), s(21.2), "observed"),
    ]


@pytest.mark.parametrize(
    ("name", "node", "uid", "removed"),
    [
        (
            "k8s-92442-ocp-hyperkube-1.18-static-apiserver-manifest-removed.journal",
            "ip-10-0-147-205",
            "90ab8003b28fbeda6bc89e35f6582ecc",
            "2020-07-08T21:56:53.529796",
        ),
        (
            "k8s-92442-plain-klog-1.18-static-pod-file-remove.log",
            "node-92442",
            "5fda0b7885755b311057b80f00dfae7b",
            "2020-07-09T09:39:59.637011",
        ),
    ],
)
def test_92442_a_static_pods_manifest_removed_is_its_termination_request(
    name: str, node: str, uid: str, removed: str
) -> None:
    """GIVEN a 1.18 kubelet's `SyncLoop (REMOVE, "file")` of a static pod (its manifest is gone), the first
    line of the excerpt
    WHEN the lane is derived
    THEN the pod terminates from that line (cause removed): nothing but the manifest asks the kubelet to
    stop a static pod, so its removal is the request (the kubelet kills the pod right after)."""
    tl = pods(name, node=node, year=2020)[uid]
    (terminating,) = worker(tl)
    assert terminating.state == "terminating"
    assert terminating.start == at(removed) and terminating.end is None
    assert terminating.attrs["cause"] == "removed" and terminating.attrs["start_from"] == "syncloop_remove"


def test_deckhouse_336_an_add_with_nothing_after_it_is_setup_beginning_there() -> None:
    """GIVEN a V2 excerpt whose last line of pod 6c1ffa82 is its `SyncLoop (ADD, "api")` (16:20:36.931613
    MSK; the kubelet's admission handler follows, no sync line)
    WHEN the lane is derived
    THEN setup begins at the ADD (an instant: the ADD proves its begin, no line how long it lasted), and
    what follows is unknown between setup and running, still open."""
    lines = (REAL / "deckhouse-336-kubelet-forker-kill-unwanted-and-add.journal").read_text().splitlines()
    parser = KubeletLogParser(node="kube-master-3", year=2021, tz=ZoneInfo("Europe/Moscow"))
    obs = [o for line in lines for o in parser.feed(line)] + parser.close() + parser.processes()
    tl = timelines(obs)["6c1ffa82-fa70-4292-a772-8a0413771631"]
    added = at("2021-11-30T13:20:36.931613")
    assert [(iv.state, iv.start, iv.end) for iv in worker(tl)] == [
        ("setup", added, added),
        ("unknown", added, None),
    ]
    assert worker(tl)[0].attrs.get("end_unknown") and worker(tl)[1].attrs["between"] == ["setup", "running"]


@pytest.mark.parametrize(
    ("name", "node", "year", "uid", "added"),
    [
        (
            "crio-1515-1.10-crio-1.9-add-volumes.journal",
            "hardway-worker-1",
            2018,
            "6084349d-416f-11e8-9969-fa163e583850",
            "2018-04-16T12:12:05.410464",
        ),
        (
            "k8s-91914-1.18-docker-delete-add.syslog",
            "ip-10-1-73-214",
            2020,
            "57f42639-a88d-4174-8fc1-58f56d572891",
            "2020-06-08T15:36:12.702079",
        ),
    ],
)
def test_a_volume_mount_begun_and_not_finished_keeps_setup_open_from_the_add(
    name: str, node: str, year: int, uid: str, added: str
) -> None:
    """GIVEN a V2 excerpt (1.10, 1.18) whose pod is added (`SyncLoop (ADD, "api")`) and then has its secret
    volume checked and a mount begun (`operationExecutor.MountVolume started`), with no `MountVolume.SetUp
    succeeded` after it
    WHEN the lane is derived
    THEN it is setup from the ADD, still open: the containers wait for every volume, as for a first sync
    that has not returned."""
    tl = pods(name, node=node, year=year)[uid]
    assert [(iv.state, iv.start, iv.end) for iv in worker(tl)] == [("setup", at(added), None)]


def test_kueue_3901_the_volume_manager_ends_a_pod_only_uid_less_lines_and_volume_lines_name() -> None:
    """GIVEN a 1.31 V0-V2 excerpt where pod db7f7520 is named with its UID only by the volume manager
    (`VerifyControllerAttachedVolume started`, `UnmountVolume started`, `UnmountVolume.TearDown succeeded`,
    `Cleaned up orphaned pod volumes dir`) and by name by "Observed pod startup duration"
    WHEN the lane is derived
    THEN it runs from observedRunningTime, is in cleanup while its volume is torn down, and nothing of it
    is open after its pod directory was removed (the worker was done by then)."""
    tl = pods("kueue-3901-kind-1.31-tas-pod-finishing.journal", node="kind-worker", year=2024)[
        "db7f7520-c7b0-49bf-b701-51df87cb2f9c"
    ]
    lane = worker(tl)
    (running,) = worker(tl, "running")
    assert running.start == at("2024-12-20T04:51:23.154384")
    (cleanup,) = worker(tl, "cleanup")
    assert cleanup.start == at("2024-12-20T04:51:23.589635") and cleanup.attrs.get("start_unknown")
    assert cleanup.end == at("2024-12-20T04:51:23.593241")
    assert lane[-1].end == at("2024-12-20T04:51:24.556603")
    assert all(iv.end is not None for iv in lane)


def test_115331_a_pod_deleted_while_pending_is_in_cleanup_at_its_sync_terminated_pod_enter() -> None:
    """GIVEN a 1.27-development V4 excerpt whose only worker line of the pod is `syncTerminatedPod enter`
    (09:34:27.468879), then its `SyncLoop DELETE` and the status manager's "Pod fully terminated and
    removed from etcd" (which 1.27 logs only once SyncTerminatedPod has finished)
    WHEN the lane is derived
    THEN the pod is in cleanup at the enter line (an instant: neither bound is in the excerpt), and the
    stretch to the final delete is unknown between cleanup and done."""
    tl = pods("k8s-115331-plain-klog-1.27-deleted-while-pending.log", node="node-115331", year=2023)[
        "88b8e8f0-1527-4147-9f8e-5913d2c62459"
    ]
    entered, removed = at("2023-03-09T09:34:27.468879"), at("2023-03-09T09:34:27.469895")
    assert [(iv.state, iv.start, iv.end) for iv in worker(tl)] == [
        ("cleanup", entered, entered),
        ("unknown", entered, removed),
    ]
    cleanup = worker(tl)[0]
    assert cleanup.attrs.get("start_unknown") and cleanup.attrs.get("end_unknown")
    assert worker(tl)[1].attrs["between"] == ["cleanup", "done"]


def test_92126_a_remove_while_the_containers_run_is_no_end_of_the_worker() -> None:
    """GIVEN a 1.16 excerpt: `SyncLoop (DELETE, "api")`, 1.8 ms later `SyncLoop (REMOVE, "api")`, then the
    kubelet killing the pod ("Killing unwanted pod", and its `Killing` event: Stopping container
    metrics-server)
    WHEN the lane is derived
    THEN the pod terminates from the DELETE and is still terminating (the REMOVE came while its containers
    ran: the worker was not done there), and the removal is a `Removed` marker at its line."""
    tl = pods("k8s-92126-1.16-crio-delete-remove-same-ms.journal", node="HOST1", year=2020)[
        "27ce04fc-48f9-4f39-a805-12f57727d730"
    ]
    (terminating,) = worker(tl)
    assert terminating.state == "terminating" and terminating.attrs["cause"] == "deletion"
    assert terminating.start == at("2020-06-15T00:03:23.996993") and terminating.end is None
    removed = [m for m in tl.markers if m.reason == "Removed"]
    assert [(m.at, m.attrs["config_source"]) for m in removed] == [(at("2020-06-15T00:03:23.998835"), "api")]
    assert ("KillingContainer", at("2020-06-15T00:03:23.999097")) in {(m.reason, m.at) for m in tl.markers}


def test_gpu_mig_admission_blocked_in_the_device_manager_is_setup_still_open() -> None:
    """GIVEN the two excerpts of one GPU node's V10 journal (kubelet pid 26361, then pid 45878 an hour
    later): pod 69e0758e's devices are being allocated ("Need devices to allocate for pod", "Issuing a
    GetPreferredAllocation call for container") and no worker line of it follows; pod cf97dd7e's
    allocation is followed by its first sync
    WHEN the lanes are derived
    THEN 69e0758e is in setup from its admission, still open (the later process's estimated start, the
    end of the first minute it logged in, ends nothing it logged itself); cf97dd7e is set up from its
    first sync (the allocation before it does not move that), still open."""
    files = ["blog-gpu-mig-1.27-v10-first-sync.journal", "blog-gpu-mig-1.27-v10-admission-stuck.journal"]
    lanes = timelines(parse([(REAL / f).read_text().splitlines() for f in files], node="n", year=2025))
    stuck = worker(lanes["69e0758e-d625-4013-9258-df8b7ddf04e2"])
    assert [(iv.state, iv.start, iv.end) for iv in stuck] == [
        ("setup", at("2025-07-30T20:39:03.752987"), None)
    ]
    assert stuck[0].attrs["start_from"] == "DeviceAllocation"
    first = worker(lanes["cf97dd7e-bc61-44c1-8241-b47204a2e9b1"])
    assert [(iv.state, iv.start, iv.end) for iv in first] == [
        ("setup", at("2025-07-30T19:37:03.954888"), None)
    ]


def test_kueue_v3_a_deletion_the_status_manager_delays_is_terminating_while_the_local_phase_runs() -> None:
    """1.27+, V3: the status manager delays deleting a pod whose API phase is non-terminal. While the
    kubelet's own phase (``localPhase``) is still Running, its worker is still killing the containers:
    an excerpt that holds only those lines shows the worker terminating from the first (its start not
    known) and seen until the last. Once the local phase is terminal (Succeeded, Failed: a synthetic edit
    of the same real line, which the excerpt does not hold) the containers are gone: cleanup."""
    real = [
        line
        for line in (REAL / "kueue-4669-kind-1.31-v3.journal").read_text(encoding="utf-8").splitlines()
        if "Delaying pod deletion" in line
    ][:2]
    uid = "8bb7de3e-72f0-4102-adbd-53897040775e"
    (terminating,) = timelines(parse([real], node="kind-worker", year=2025))[uid].lane("worker")
    assert (terminating.state, terminating.start, terminating.end) == (
        "terminating",
        at("2025-03-18T10:21:22.622680"),
        None,
    )
    assert (
        terminating.attrs["start_unknown"]
        and terminating.attrs["seen_until"] == "2025-03-18T10:21:27.622036+00:00"
    )
    for local in ("Succeeded", "Failed"):
        edited = [line.replace('localPhase="Running"', f'localPhase="{local}"') for line in real]
        (cleanup,) = timelines(parse([edited], node="kind-worker", year=2025))[uid].lane("worker")
        assert (cleanup.state, cleanup.start) == ("cleanup", at("2025-03-18T10:21:22.622680")), local


def test_kueue_v3_a_kill_is_paired_with_its_own_containers_death_not_the_sandboxs() -> None:
    """GIVEN the real kueue-4669 journal: container c (62e04a72…) killed at 10:21:22.52 with a 2 s grace,
    its PLEG ContainerDied at 10:21:59.648493, and the sandbox's (86c8014e…) at 10:22:16.700503 WHEN the
    timeline is derived THEN grace_exceeded ends at c's death and cites that line and not the sandbox's:
    a kill is answered by the death of the container it named (the PLEG event's Data is that container's
    ID), whatever else of the pod dies later; and with no API finish time, the containers stopped at the
    last killed one's death."""
    tl = pods("kueue-4669-kind-1.31-v3.journal", node="kind-worker", year=2025)[
        "8bb7de3e-72f0-4102-adbd-53897040775e"
    ]
    died = {m.attrs["container_id"][:8]: m for m in tl.markers if m.reason == "ContainerDied"}
    assert [(cid, m.at) for cid, m in died.items()] == [
        ("62e04a72", at("2025-03-18T10:21:59.648493")),
        ("86c8014e", at("2025-03-18T10:22:16.700503")),
    ]
    (late,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert (late.start, late.end) == (at("2025-03-18T10:21:21.676696"), at("2025-03-18T10:21:59.648493"))
    assert set(died["62e04a72"].evidence) <= set(late.evidence)
    assert not set(died["86c8014e"].evidence) & set(late.evidence)
    assert "with a 2s grace period and died 37.1s later (kubelet lines)" in late.message
    # With no API finish time, the containers stopped when the last one killed died (its PLEG line): the
    # termination took from the DELETE (10:21:21.676696) to that death.
    assert late.attrs["seconds"] == 37.971797
    assert "its containers took 38.0s to stop after termination was requested at 2025-03-18 10:21:21.676" in (
        late.message
    )


def test_aks_eviction_the_ranking_begins_the_termination_and_the_finding_reads_it_back() -> None:
    """GIVEN the real AKS 1.27 eviction syslog (4 lines): "pods ranked for eviction" with default/nginx
    first of 7 (19:34:44.999261), its container killed 1 ms later, its PLEG ContainerDied (19:34:45.357018)
    and "pod is evicted successfully" WHEN the timeline is derived THEN the worker terminates from the
    ranking (the eviction manager kills the first pod it may, at most one per pass: a kill right after the
    ranking is that pod's eviction), until the container died, then cleans up (its end not in the
    excerpt); and the evicted finding starts there, says it ranked 1 of 7 (the list's order is the
    manager's), did not fail, and cites the ranking and the "evicted successfully" lines."""
    (tl,) = pods(
        "aks-1.27-memory-eviction-nginx.syslog", node="aks-nodepool1-24207654-vmss000002", year=2023
    ).values()
    marker = {m.reason: m for m in tl.markers}
    ranked, died, evicted = marker["EvictionRanked"], marker["ContainerDied"], marker["Evicted"]
    assert (ranked.at, died.at, evicted.at) == (
        at("2023-10-12T19:34:44.999261"),
        at("2023-10-12T19:34:45.357018"),
        at("2023-10-12T19:34:45.445172"),
    )
    terminating, cleanup = tl.lane("worker")
    assert (terminating.state, terminating.start, terminating.end) == ("terminating", ranked.at, died.at)
    assert (terminating.attrs["cause"], terminating.attrs["start_from"], terminating.attrs["end_from"]) == (
        "evicted",
        "EvictionRanked",
        "containers_died",
    )
    assert (terminating.attrs["start_evidence"],) == ranked.evidence
    assert (cleanup.state, cleanup.start, cleanup.end, cleanup.attrs.get("end_unknown")) == (
        "cleanup",
        died.at,
        None,
        True,
    )
    (finding,) = [f for f in tl.findings if f.kind == "evicted"]
    assert (finding.start, finding.end) == (ranked.at, None)
    assert (finding.attrs["rank"], finding.attrs["ranked"], finding.attrs["failed"]) == (0, 7, False)
    assert "it ranked 1 of 7 pods for eviction" in finding.message
    assert set(finding.evidence) == set(ranked.evidence) | set(evicted.evidence)


def test_kueue_v3_one_kill_logged_twice_is_one_kill_with_the_grace_stopcontainer_was_given() -> None:
    """GIVEN the real kueue-4669 journal (1.31, V3): container c's kill logged as "Killing container with a
    grace period override" gracePeriod=1 (the termination's override) and, 147 µs later, "Killing
    container with a grace period" gracePeriod=2 (StopContainer's: the kubelet gives a container at least
    2 s, k8s-facts "Kill-line history") THEN grace_exceeded names that kill once, with the 2 s grace it
    ran under, never as a second kill with 1 s (a container that died 1.5 s after such a kill would have
    been reported late)."""
    tl = pods("kueue-4669-kind-1.31-v3.journal", node="kind-worker", year=2025)[
        "8bb7de3e-72f0-4102-adbd-53897040775e"
    ]
    (late,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert late.message.count("container c was killed") == 1, late.message
    assert "container c was killed at 2025-03-18 10:21:22.519 UTC with a 2s grace period" in late.message
    assert "with a 1s grace period" not in late.message
