"""Rules of the timeline's assembly (timelines/lifecycle/derive.py): its identity, how a lane is settled,
its markers. Lines are SYNTHETIC unless a test names a real fixture: written in the kubelet's own message
formats (k8s-facts.md), through the parser as `ingest_kubelet_log` reads them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from tests.lifecycle.test_kubelet_truth import parse, timelines
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation
from timelines.lifecycle.timeline import Marker

UID = "8bb7de3e-72f0-4102-adbd-53897040775e"
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"


def test_a_pod_logged_without_a_namespace_is_named_and_no_namespace_is_made_up() -> None:
    """klog's KObj prints a pod whose namespace is empty as its bare name (`pod="web-1"`): the timeline
    is named web-1, and its namespace stays unknown rather than being read out of a reference that has
    none (SYNTHETIC lines, V4 SyncPod formats)."""
    lines = [
        f'I0318 10:21:19.149698     206 kubelet.go:1888] "SyncPod enter" pod="web-1" podUID="{UID}"',
        f'I0318 10:21:19.249698     206 kubelet.go:1888] "SyncPod exit" pod="web-1" podUID="{UID}" '
        "isTerminal=false",
    ]
    tl = timelines(parse([lines], node="node-a", year=2025))[UID]
    assert (tl.namespace, tl.name) == (None, "web-1")


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def kubelet_markers(
    obs: list[Observation], uid: str, *reasons: str
) -> list[tuple[datetime, str, str, dict[str, object]]]:
    """The pod's kubelet markers of these reasons, its UID-less lines resolved as the derive stage does."""
    tl = timelines(obs)[uid]
    found = [m for m in tl.markers if m.kind == "kubelet" and m.reason in reasons]
    for m in found:
        _cites_its_own_line(m, obs)
    return [(m.at, m.reason, m.message, dict(m.attrs)) for m in found]


def _cites_its_own_line(m: Marker, obs: list[Observation]) -> None:
    """A kubelet marker is evidenced by the one line it was read from."""
    (key,) = m.evidence
    assert key in {o.dedupe_key for o in obs}


def test_pleg_and_syncloop_remove_lines_are_markers_read_back_whole() -> None:
    """REAL (aks-2024-v2.syslog, read at UTC+2 as its facts say): PLEG's ContainerStarted / ContainerDied and
    "Generic (PLEG): container finished" name the container by its ID (the first 12 characters, as
    `crictl ps` shows it) and the exit code where the line gives one; "SyncLoop REMOVE" source="api" is the
    moment the pod left the kubelet's config. The duplicated ContainerStarted line (the excerpt repeats it)
    is one marker."""
    lines = (REAL / "aks-2024-v2.syslog").read_text(encoding="utf-8").splitlines()
    obs = parse([lines], node="aks-np2-39852331-vmss000000", year=2024, tz=ZoneInfo("Etc/GMT-2"))
    uid = "5da5612b-9738-493c-af51-a213072997f6"
    nginx = "c65a36d4090569f70b6badb5b6127ad773ebd7e5ce18d3872b8e93ee4fb52cab"
    pause = "3cfe7b007c290255f1a416b2bd9404604e6ef5967348211d30cd41e00912fe17"
    pleg = {"exit_code": None, "from": "pleg"}
    assert kubelet_markers(obs, uid, "ContainerStarted", "ContainerDied", "ContainerFinished", "Removed") == [
        (utc("2024-11-29T16:13:10.923963"), "ContainerStarted", "container 3cfe7b007c29 started (PLEG)",
         {"container_id": pause, **pleg}),
        (utc("2024-11-29T16:13:11.927120"), "ContainerStarted", "container c65a36d40905 started (PLEG)",
         {"container_id": nginx, **pleg}),
        (utc("2024-11-29T16:20:18.668292"), "ContainerFinished", "container c65a36d40905 exited (0) (PLEG)",
         {"container_id": nginx, "exit_code": 0, "from": "pleg"}),
        (utc("2024-11-29T16:20:18.668321"), "ContainerDied", "container c65a36d40905 died (PLEG)",
         {"container_id": nginx, **pleg}),
        (utc("2024-11-29T16:20:18.668339"), "ContainerDied", "container 3cfe7b007c29 died (PLEG)",
         {"container_id": pause, **pleg}),
        (utc("2024-11-29T16:20:18.690409"), "Removed",
         "SyncLoop REMOVE (source api): the pod left the kubelet's config",
         {"config_source": "api", "from": "syncloop"}),
    ]  # fmt: skip


def test_post_termination_container_state_gives_each_containers_own_finish() -> None:
    """REAL (k8s-107730-v1.23-terminating-exit.journal): "Post-termination container state" lists
    `(nginx state=exited exitCode=0 finishedAt=2022-01-27T07:57:17.377710677Z)`: the container finished at
    07:57:17.377710 (the runtime's own time, to the microsecond), 307 ms before the line was logged."""
    lines = (REAL / "k8s-107730-v1.23-terminating-exit.journal").read_text(encoding="utf-8").splitlines()
    obs = parse([lines], node="bm02", year=2022)
    assert kubelet_markers(obs, "68aaedee-7ebd-44fd-ad66-0febb9a0b509", "ContainerFinished") == [
        (
            utc("2022-01-27T07:57:17.377710"),
            "ContainerFinished",
            "container nginx exited (0)",
            {"container": "nginx", "exit_code": 0, "from": "post_termination_state"},
        )
    ]


def test_post_termination_container_state_reads_every_exited_container_past_one_that_is_not() -> None:
    """GIVEN the real k8s-107730 line with (SYNTHETIC) two containers listed before nginx: one that had not
    exited (``state=running``, Go's zero finishedAt: kubelet.go writes one ``(name state=… exitCode=…
    finishedAt=…)`` per container status, in the status's order) and one whose finishedAt is cut (no
    zone) THEN nginx's finish is still read: a container that did not exit, or whose finish cannot be
    read, gives no finish and ends nothing of the others'."""
    lines = (REAL / "k8s-107730-v1.23-terminating-exit.journal").read_text(encoding="utf-8").splitlines()
    other = (
        "(sidecar state=running exitCode=0 finishedAt=0001-01-01T00:00:00Z), "
        "(cut state=exited exitCode=0 finishedAt=2022-01-27T07:57:17), "
    )
    lines = [line.replace('containers="(nginx', f'containers="{other}(nginx') for line in lines]
    assert any(other in line for line in lines)
    obs = parse([lines], node="bm02", year=2022)
    found = kubelet_markers(obs, "68aaedee-7ebd-44fd-ad66-0febb9a0b509", "ContainerFinished")
    assert [(at, attrs["container"]) for at, _, _, attrs in found] == [
        (utc("2022-01-27T07:57:17.377710"), "nginx")
    ]


def test_only_the_termination_names_who_requested_it() -> None:
    """The audited request that began a termination (here a granted eviction after four refusals) is named
    on the terminating intervals, and on no other: the pod's running and cleanup were nobody's request.
    SYNTHETIC audit events written from the audit API's specification (tests/fixtures/audit/README)."""
    from tests.audit.helpers import parsed as audit_parsed
    from tests.lifecycle.test_audit_evidence import EVICTED, _of_pod

    timeline = derive_pod_timeline(
        _of_pod(audit_parsed("drain-refused-evictions.jsonl").observations, EVICTED)
    )
    for lane in ("api", "worker"):
        named = {
            (iv.state, iv.attrs["who"])
            for iv in timeline.lane(lane)
            if "who" in iv.attrs or "request" in iv.attrs
        }
        assert named == {("terminating", "kubernetes-admin via kubectl")}, lane
        assert len(timeline.lane(lane)) > 1, lane


def test_each_api_object_under_one_uid_names_its_own_deleter() -> None:
    """One UID, two API objects (a static pod's mirror is re-created under the static pod's UID with a new
    creationTimestamp: two incarnations), each deleted by its own request: each termination names the
    request made during its own object's life, not the first one of the UID. SYNTHETIC snapshots and
    audit events (tests/lifecycle/test_audit_evidence.py's shapes)."""
    from tests.lifecycle.test_audit_evidence import GC, KCM, KUBECTL, _web_pod, audits_of, pod_delete

    uid = "static-uid-1"
    snapshots = [*_web_pod(uid, 0, deletion=20, gone=25), *_web_pod(uid, 40, deletion=80)]
    requests = audits_of(
        pod_delete("a-1", 20.000120, "web-0", user="system:admin", agent=KUBECTL, grace=None),
        pod_delete(
            "a-2", 80.000300, "web-0", user=GC, agent=KCM.format("generic-garbage-collector"), grace=None
        ),
    )
    timeline = derive_pod_timeline([*snapshots, *requests])
    for lane in ("api", "worker"):
        named = [iv.attrs.get("who") for iv in timeline.lane(lane) if iv.state == "terminating"]
        assert named == ["system:admin via kubectl", GC], lane


def _sidecar_pod_with(renames: dict[str, str], first_init: dict[str, object] | None) -> list[Observation]:
    """tests/fixtures/k8s/sidecar-watch-1.33.json (SYNTHETIC, after the v1.33 API reference: `app` stops,
    then the sidecar `log-shipper`), its containers renamed, and a plain init container that completed
    before them listed first in each status, as the API lists init containers."""
    import json

    from collectors.parsers.kubectl import read_kubectl_output

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "k8s" / "sidecar-watch-1.33.json").read_text()
    for old, new in renames.items():
        text = text.replace(f'"name": "{old}"', f'"name": "{new}"')
    decoder, at, docs = json.JSONDecoder(), 0, []
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        doc, at = decoder.raw_decode(text, at)
        statuses = doc["object"].get("status", {}).get("initContainerStatuses")
        if first_init is not None and statuses is not None:
            statuses.insert(0, first_init)
        docs.append(json.dumps(doc))
    result = read_kubectl_output("\n".join(docs), origin="sidecar")
    assert not result.errors, result.errors
    return result.observations


def test_containers_stop_regular_first_then_sidecars_whatever_their_names() -> None:
    """A pod with sidecars stops its regular containers first, then its sidecars (KEP-753, 1.29+): the
    stop order is the order of their finishes, not of their names (`web` stops before `log-shipper`), and
    a plain init container that completed long before is no part of it."""
    migrate = {
        "name": "migrate",
        "image": "registry.example/migrate:1",
        "ready": False,
        "restartCount": 0,
        "started": False,
        "state": {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": "2025-06-02T10:00:01Z",
                "finishedAt": "2025-06-02T10:00:02Z",
            }
        },
    }
    timeline = derive_pod_timeline(_sidecar_pod_with({"app": "web"}, migrate))
    (terminating,) = [iv for iv in timeline.lane("api") if iv.state == "terminating"]
    assert terminating.attrs["stop_order"] == ["web", "log-shipper"]


def test_a_condition_that_flips_and_back_within_its_second_shows_no_change_and_cites_every_status() -> None:
    """lastTransitionTime has whole seconds (RFC 3339): Ready True since 3 s, then False at 5 s and True
    again at 5 s (two statuses within that second) dates no change a user could see; the later report of
    that second wins and the lane is Ready from 3 s, citing the three statuses it rests on, until it
    turns False at 9 s. SYNTHETIC statuses (tests/lifecycle/factories.py)."""
    from tests.lifecycle.factories import cond, pod, t

    uid = "uid-flap"
    obs = [
        pod(uid, 1, 3.2, phase="Running", conditions=[cond("Ready", "True", 3)]),
        pod(uid, 2, 5.3, phase="Running", conditions=[cond("Ready", "False", 5)]),
        pod(uid, 3, 5.8, phase="Running", conditions=[cond("Ready", "True", 5)]),
        pod(uid, 4, 9.1, phase="Running", conditions=[cond("Ready", "False", 9)]),
    ]
    ready, not_ready = derive_pod_timeline(obs).lane("condition:Ready")
    assert (ready.state, ready.start, ready.end) == ("true", t(3), t(9))
    assert ready.evidence == tuple(sorted(o.dedupe_key for o in obs[:3]))
    assert (not_ready.state, not_ready.start, not_ready.end) == ("false", t(9), None)
