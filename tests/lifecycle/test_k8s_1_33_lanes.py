"""Kubernetes 1.29–1.35 pod features on the lanes: sidecars, PodReadyToStartContainers, in-place resize,
observedGeneration and the preStop sleep (issue #33, deliverable 7).

The fixtures are synthetic (tests/fixtures/k8s/README.md) and follow the API reference: a Deployment pod
with a sidecar (an init container with ``restartPolicy: Always`` and a startupProbe) and a ``preStop``
sleep, deleted; and a pod resized in place (deferred, then applied) with the kubelet's resize events.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from collectors.parsers.audit import parse_audit
from collectors.parsers.kubectl import read_kubectl_output
from collectors.parsers.kubelet_log import parse_kubelet_log
from collectors.parsers.pod_wire import decode_pod_event, wire_pod_observation
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Kind
from timelines.lifecycle.timeline import Interval, PodTimeline

K8S = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _timeline(*names: str) -> PodTimeline:
    observations = []
    for name in names:
        result = read_kubectl_output((K8S / name).read_text(), origin=name)
        assert not result.errors, result.errors
        observations += result.observations
    return derive_pod_timeline(observations)


def _spans(lane: tuple[Interval, ...]) -> list[tuple[str, datetime, datetime | None]]:
    return [(iv.state, iv.start, iv.end) for iv in lane]


def test_a_sidecar_runs_beside_the_main_container_and_stops_after_it() -> None:
    t = _timeline("sidecar-watch-1.33.json")
    sidecar, app = t.lanes["container:log-shipper"], t.lanes["container:app"]
    run = [iv for iv in sidecar if iv.state == "running"]
    assert len(run) == 1 and run[0].attrs["kind"] == "init" and run[0].attrs["sidecar"] is True
    assert all(iv.attrs.get("sidecar") is True for iv in sidecar)
    assert "sidecar" not in app[0].attrs
    # It runs from 10:00:03 until 10:10:06, the whole life of app (10:00:07 - 10:10:05), not before it.
    assert (run[0].start, run[0].end) == (_at("2025-06-02T10:00:03"), _at("2025-06-02T10:10:06"))
    app_run = next(iv for iv in app if iv.state == "running")
    assert run[0].start < app_run.start and app_run.end is not None and run[0].end > app_run.end
    # Setup ends when the regular container started (after the sidecar started and passed its
    # startupProbe), not when the sidecar started.
    setup = next(iv for iv in t.lanes["worker"] if iv.state == "setup")
    assert setup.end == _at("2025-06-02T10:00:07")
    # Termination: the main container first, then the sidecar; the preStop sleep inside the 30 s grace.
    terminating = next(iv for iv in t.lanes["api"] if iv.state == "terminating")
    assert terminating.attrs["stop_order"] == ["app", "log-shipper"]
    assert terminating.attrs["prestop_sleep_seconds"] == {"app": 5}
    assert terminating.attrs["grace_seconds"] == 30
    # The phase became Succeeded once the sidecar had stopped too (10:10:06), not at app's exit.
    assert next(iv.start for iv in t.lanes["api"] if iv.state == "succeeded") == _at("2025-06-02T10:10:06")
    worker = [(iv.state, iv.end) for iv in t.lanes["worker"]]
    assert ("terminating", _at("2025-06-02T10:10:06")) in worker  # until the sidecar stopped


def test_pod_ready_to_start_containers_is_the_sandbox_lane() -> None:
    t = _timeline("sidecar-watch-1.33.json")
    lane = t.lanes["condition:PodReadyToStartContainers"]
    assert [(s, a) for s, a, _ in _spans(lane)] == [
        ("true", _at("2025-06-02T10:00:02")),  # sandbox created and networked
        ("false", _at("2025-06-02T10:10:07")),  # the sandbox gone after the containers stopped
    ]
    assert list(t.lanes).index("condition:PodReadyToStartContainers") < list(t.lanes).index(
        "condition:Initialized"
    )


def test_a_resize_shows_pending_then_in_progress_and_ends_when_the_conditions_go() -> None:
    t = _timeline("resize-watch-1.34.json", "resize-events-1.34.json")
    resize = t.lanes["resize"]
    assert _spans(resize) == [
        ("pending", _at("2025-09-10T08:30:01"), _at("2025-09-10T08:30:40")),
        ("in_progress", _at("2025-09-10T08:30:40"), _at("2025-09-10T08:30:42")),
    ]
    assert resize[0].attrs["reason"] == "Deferred"
    assert resize[0].attrs["allocated"] == {"pause": {"cpu": "500m", "memory": "128Mi"}}
    assert resize[1].attrs["allocated"] == {"pause": {"cpu": "1", "memory": "128Mi"}}
    # The conditions are removed when the resize is done: their lanes end there, not open for ever.
    assert _spans(t.lanes["condition:PodResizePending"]) == [
        ("true", _at("2025-09-10T08:30:01"), _at("2025-09-10T08:30:40"))
    ]
    assert _spans(t.lanes["condition:PodResizeInProgress"]) == [
        ("true", _at("2025-09-10T08:30:40"), _at("2025-09-10T08:30:42"))
    ]
    events = [(m.reason, m.at) for m in t.markers if m.kind == "event"]
    assert events == [
        ("ResizeDeferred", _at("2025-09-10T08:30:01")),
        ("ResizeStarted", _at("2025-09-10T08:30:40")),
        ("ResizeCompleted", _at("2025-09-10T08:30:42")),
    ]
    # The container ran on through the resize (NotRequired): one run.
    assert [iv.state for iv in t.lanes["container:pause"]] == ["running"]


def test_a_spec_change_the_kubelet_has_not_observed_yet_is_shown() -> None:
    t = _timeline("resize-watch-1.34.json")
    lane = t.lanes["generation"]
    assert [(iv.state, iv.start, iv.attrs) for iv in lane] == [
        ("observed", _at("2025-09-10T08:00:04"), {"generation": 1, "observed_generation": 1}),
        ("pending", _at("2025-09-10T08:30:00"), {"generation": 2, "observed_generation": 1}),
        ("observed", _at("2025-09-10T08:30:01"), {"generation": 2, "observed_generation": 2}),
    ]


def test_each_generation_stretch_lasts_until_the_next_and_cites_every_snapshot_showing_it() -> None:
    """GIVEN the resized pod's watch (generation 1 seen, generation 2 at 08:30:00 seen by the kubelet at
    08:30:01, then two more snapshots of that pair) WHEN its timeline is derived THEN each stretch ends
    where the next begins, the last is open (the pod still exists), and each cites the snapshots that
    showed its pair (resourceVersions 2001; 2050; 2052, 2080, 2082): a snapshot that repeats the pair
    is more evidence of the same stretch, not a new one."""
    lane = _timeline("resize-watch-1.34.json").lanes["generation"]
    rvs = [[key.rsplit(":", 1)[1] for key in iv.evidence] for iv in lane]
    assert [(iv.state, iv.start, iv.end, iv.source) for iv in lane] == [
        ("observed", _at("2025-09-10T08:00:04"), _at("2025-09-10T08:30:00"), "observed"),
        ("pending", _at("2025-09-10T08:30:00"), _at("2025-09-10T08:30:01"), "observed"),
        ("observed", _at("2025-09-10T08:30:01"), None, "observed"),
    ]
    assert rvs == [["2001"], ["2050"], ["2052", "2080", "2082"]]


def test_a_pod_without_1_33_fields_has_no_resize_or_generation_lane() -> None:
    t = _timeline("pods-watch.json")
    assert "resize" not in t.lanes and "generation" not in t.lanes
    assert all("stop_order" not in iv.attrs or iv.attrs["stop_order"] for iv in t.lanes["api"])


def test_the_typed_path_reads_the_new_fields_as_the_generic_one() -> None:
    for name in ("sidecar-watch-1.33.json", "resize-watch-1.34.json"):
        generic = read_kubectl_output((K8S / name).read_text(), origin=name).observations
        chunks = [c for c in (K8S / name).read_text().split("\n{") if c.strip()]
        lines = [json.dumps(json.loads(c if c.startswith("{") else "{" + c)).encode() for c in chunks]
        assert len(lines) == len(generic)
        for line, obs in zip(lines, generic, strict=True):
            decoded = decode_pod_event(line)
            assert decoded is not None
            wire = wire_pod_observation(
                decoded[1], watch_type=decoded[0], observed_at=obs.observed_at, source=obs.source
            )
            assert wire is not None and json.loads(wire.payload_json) == obs.payload
            assert obs.kind in (Kind.POD, Kind.POD_DELETED)
    resized = read_kubectl_output((K8S / "resize-watch-1.34.json").read_text(), origin="r").observations[-1]
    c = resized.payload["containers"][0]
    assert c["allocated_resources"] == {"cpu": "1", "memory": "128Mi"}
    assert c["resources"] == {
        "requests": {"cpu": "1", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "128Mi"},
    }
    assert (resized.payload["generation"], resized.payload["observed_generation"]) == (2, 2)


def _resize_request(code: int, stamp: str) -> bytes:
    """One ``audit.k8s.io/v1`` Event of ``kubectl patch pod --subresource resize`` (synthetic)."""
    doc = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": f"5d1c0b6e-0000-4000-8000-00000000{code:04d}",
        "stage": "ResponseComplete",
        "requestURI": "/api/v1/namespaces/qos-example/pods/resize-demo/resize",
        "verb": "patch",
        "user": {
            "username": "kubernetes-admin",
            "groups": ["kubeadm:cluster-admins", "system:authenticated"],
        },
        "sourceIPs": ["10.0.0.12"],
        "userAgent": "kubectl/v1.34.1 (linux/amd64) kubernetes/93248f9",
        "objectRef": {
            "resource": "pods",
            "namespace": "qos-example",
            "name": "resize-demo",
            "apiVersion": "v1",
            "subresource": "resize",
        },
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": stamp,
        "stageTimestamp": stamp,
    }
    return json.dumps(doc).encode() + b"\n"


def test_an_audited_resize_request_is_a_marker_where_the_span_was_asked_for() -> None:
    pods = read_kubectl_output((K8S / "resize-watch-1.34.json").read_text(), origin="r").observations
    audits = parse_audit(
        _resize_request(422, "2025-09-10T08:29:50.120000Z")
        + _resize_request(200, "2025-09-10T08:30:00.250000Z")
    ).observations
    assert [o.kind for o in audits] == [Kind.AUDIT, Kind.AUDIT]
    t = derive_pod_timeline([*pods, *audits])
    marks = [(m.reason, m.at, m.message) for m in t.markers if m.kind == "audit"]
    assert marks == [
        (
            "ResizeRefused",
            _at("2025-09-10T08:29:50.120000"),
            "resize by kubernetes-admin via kubectl refused (422)",
        ),
        (
            "ResizeRequested",
            _at("2025-09-10T08:30:00.250000"),
            "resize requested by kubernetes-admin via kubectl",
        ),
    ]


# Synthetic kubelet lines (messages and keys as docs/kubelet-lines.md lists them; the pod of the sidecar
# fixture): the preStop sleep of app, 5 s, inside the termination.
PRESTOP_LINES = [
    'I0602 10:10:00.012345    2310 kuberuntime_container.go:671] "Running preStop hook" pod="shop/shop-5f8c7d6b9-q4wzt" '
    'podUID="0c7e5a42-6d1b-4f7e-9a53-2b8f1d4c6e90" containerName="app" '
    'containerID="containerd://4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"',
    'I0602 10:10:05.014001    2310 kuberuntime_container.go:681] "PreStop hook completed" pod="shop/shop-5f8c7d6b9-q4wzt" '
    'podUID="0c7e5a42-6d1b-4f7e-9a53-2b8f1d4c6e90" containerName="app" '
    'containerID="containerd://4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c"',
]


def test_the_prestop_sleep_shows_inside_terminating() -> None:
    pods = read_kubectl_output((K8S / "sidecar-watch-1.33.json").read_text(), origin="s").observations
    lines = parse_kubelet_log(PRESTOP_LINES, node="worker-3", year=2025, tz=UTC).observations
    t = derive_pod_timeline([*pods, *lines])
    hooks = [(m.reason, m.at, m.attrs.get("container")) for m in t.markers if m.kind == "kubelet"]
    assert hooks == [
        ("PreStopHook", _at("2025-06-02T10:10:00.012345"), "app"),
        ("PreStopHookDone", _at("2025-06-02T10:10:05.014001"), "app"),
    ]
    terminating = next(iv for iv in t.lanes["api"] if iv.state == "terminating")
    assert all(terminating.start <= at <= (terminating.end or at) for _, at, _ in hooks)


def test_a_prestop_hook_cut_short_by_the_grace_period_is_a_marker_with_the_grace() -> None:
    line = (  # synthetic; message and keys as kuberuntime_container.go logs them (V2)
        'I0602 10:10:30.000100    2310 kuberuntime_container.go:677] "PreStop hook not completed in grace period" '
        'pod="shop/shop-5f8c7d6b9-q4wzt" podUID="0c7e5a42-6d1b-4f7e-9a53-2b8f1d4c6e90" containerName="app" '
        'containerID="containerd://4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c" gracePeriod=30'
    )
    [obs] = parse_kubelet_log([line], node="worker-3", year=2025, tz=UTC).observations
    assert (obs.kind, obs.payload["reason"], obs.payload["container"], obs.payload["grace_period"]) == (
        Kind.KUBELET_MARKER,
        "PreStopHookUnfinished",
        "app",
        30,
    )


def test_a_newer_generation_observed_at_once_is_a_stretch_of_its_own() -> None:
    """GIVEN the resized pod's watch without its one snapshot of the pending generation (resourceVersion
    2050: a watch that reconnected, or a list, misses an update that lasted a second) WHEN its timeline
    is derived THEN generation 1 observed and generation 2 observed are two stretches, the second from the
    first snapshot showing it (08:30:01) with its own numbers: a stretch is one spec observed, and the
    spec changed between them."""
    name = "resize-watch-1.34.json"
    result = read_kubectl_output((K8S / name).read_text(), origin=name)
    kept = [o for o in result.observations if not o.dedupe_key.endswith(":2050")]
    assert len(kept) == len(result.observations) - 1
    lane = derive_pod_timeline(kept).lanes["generation"]
    assert [(iv.state, iv.start, iv.end, iv.attrs) for iv in lane] == [
        (
            "observed",
            _at("2025-09-10T08:00:04"),
            _at("2025-09-10T08:30:01"),
            {"generation": 1, "observed_generation": 1},
        ),
        ("observed", _at("2025-09-10T08:30:01"), None, {"generation": 2, "observed_generation": 2}),
    ]
