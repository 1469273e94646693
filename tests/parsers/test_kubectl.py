"""Offline kubectl output to observations."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from collectors.management.commands.ingest_k8s_json import read_path
from collectors.parsers.kubectl import dump_member, read_kubectl_output
from timelines.lifecycle.observation import Kind, Source

WEB = "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"


def test_typed_list(k8s_fixture: Path):
    result = read_kubectl_output((k8s_fixture / "pods-list.json").read_text(), origin="pods-list.json")
    assert result.errors == [] and result.read == Counter(Pod=2)
    assert [o.payload["name"] for o in result.observations] == [
        "web-7d9f8b6c4-x2k9p",
        "report-27912345-7xk2m",
    ]
    assert all(o.source == Source.OFFLINE and o.payload["watch"] == "LIST" for o in result.observations)


def test_mixed_list_counts_unsupported_kinds(k8s_fixture: Path):
    result = read_kubectl_output((k8s_fixture / "mixed-list.json").read_text(), origin="mixed")
    assert result.read == Counter(Pod=1, Node=1, PodDisruptionBudget=1, Deployment=1, Event=1, Service=1)
    assert [o.kind for o in result.observations] == [Kind.POD, Kind.NODE, Kind.PDB, Kind.WORKLOAD, Kind.EVENT]
    assert result.skipped == Counter(unsupported_kind=1) and result.errors == []


def test_multi_document_yaml_keeps_good_documents_and_names_the_bad_one(k8s_fixture: Path):
    result = read_kubectl_output((k8s_fixture / "pods.yaml").read_text(), origin="pods.yaml")
    assert [o.name for o in result.observations] == ["etcd-cp-1", "cache-0"]
    assert result.skipped == Counter(invalid_object=1)
    assert result.errors == [
        "pods.yaml: document 3: Pod default/no-uid: expected metadata.uid (a string of 1-64 characters)"
    ]


def test_watch_stream_with_event_wrappers(k8s_fixture: Path):
    result = read_kubectl_output((k8s_fixture / "pods-watch.json").read_text(), origin="watch")
    assert [(o.kind, o.payload["watch"], o.payload["resource_version"]) for o in result.observations] == [
        (Kind.POD, "ADDED", "48213"),
        (Kind.POD, "MODIFIED", "48877"),
        (Kind.POD, "MODIFIED", "48902"),
        (Kind.POD_DELETED, "DELETED", "48902"),
    ]
    assert result.skipped == Counter(bookmark=1)
    assert result.observations[1].payload["deletion_timestamp"] == "2021-11-03T14:07:45+00:00"


def test_plain_watch_stream_of_pretty_objects(k8s_fixture: Path):
    result = read_kubectl_output((k8s_fixture / "pods-watch-plain.json").read_text(), origin="w")
    assert [o.dedupe_key for o in result.observations] == [f"pod:{WEB}:48213", f"pod:{WEB}:48877"]


def test_truncated_stream_keeps_what_was_read_and_reports_the_line(k8s_fixture: Path):
    text = (k8s_fixture / "pods-watch-plain.json").read_text()
    cut = text[: len(text) - 200]
    result = read_kubectl_output(cut, origin="cut.json")
    assert len(result.observations) == 1
    assert len(result.errors) == 1 and result.errors[0].startswith("cut.json: line ")
    assert "expected a JSON object or list" in result.errors[0]


def test_watch_error_event_and_garbage():
    text = '{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 123 (456)","reason":"Expired","code":410}}\n42\n'
    result = read_kubectl_output(text, origin="s")
    assert result.skipped == Counter(watch_error=1, not_an_object=1)
    assert "code 410" in result.errors[0] and "too old resource version" in result.errors[0]
    assert read_kubectl_output("", origin="e").skipped == Counter(empty=1)
    bad_yaml = read_kubectl_output("kind: Pod\n  bad: [", origin="b.yaml")
    assert bad_yaml.skipped["invalid_yaml"] == 1 and bad_yaml.errors[0].startswith("b.yaml: line ")


def test_cluster_info_dump_folder(k8s_fixture: Path):
    result = read_path(k8s_fixture / "cluster-info-dump")
    assert result.errors == []
    assert result.read == Counter(Node=1, Pod=2, Event=1, Deployment=1, ReplicaSet=1, DaemonSet=1)
    assert result.skipped["container_logs"] == 1
    kinds = Counter(o.kind for o in result.observations)
    assert kinds == Counter({Kind.POD: 2, Kind.NODE: 1, Kind.EVENT: 1, Kind.WORKLOAD: 3})
    ds = next(o for o in result.observations if o.payload.get("kind") == "DaemonSet")
    assert ds.payload["status"]["desired_number_scheduled"] == 3 and ds.payload["spec_replicas"] is None


def test_cluster_info_dump_stdout_skips_log_blocks(k8s_fixture: Path):
    result = read_path(k8s_fixture / "cluster-info-dump.txt")
    assert result.errors == []
    assert result.read == Counter(Node=1, Event=1, ReplicaSet=1, Pod=2, DaemonSet=1)
    assert result.skipped["container_logs"] == 1


def test_missing_dump_is_an_error_not_an_exception(tmp_path: Path):
    result = read_path(tmp_path / "nope")
    assert result.observations == [] and "does not exist" in result.errors[0]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "nodes.json").write_text('{"kind": "NodeList", "items": [')
    result = read_path(tmp_path / "d")
    assert result.errors and result.errors[0].startswith("nodes.json: line 1")


def test_which_files_of_a_dump_folder_are_read():
    """GIVEN the names in a `kubectl cluster-info dump --output-directory` folder WHEN classified THEN the
    JSON/YAML files are read and the container logs and anything else are skipped, each by its reason
    (the folder is walked by the caller: parsers do no I/O)."""
    assert dump_member("nodes.json") is None and dump_member("shop/pods.JSON") is None
    assert dump_member("shop/web-1/logs.txt") == "container_logs"
    assert dump_member("README") == "other_file" and dump_member("shop/pods.json.gz") == "other_file"


def test_a_lists_bad_item_is_named_by_the_number_a_reader_counts():
    """A List whose second item is not an object: the error names ``item 2`` (items counted from 1, as a
    person scrolling the file counts them), the first item is kept."""
    text = '{"kind":"List","apiVersion":"v1","items":[' + (
        '{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","uid":"u1","resourceVersion":"1"}},42]}'
    )
    result = read_kubectl_output(text, origin="list.json")
    assert result.skipped["not_an_object"] == 1
    (error,) = [e for e in result.errors if "expected a Kubernetes object" in e]
    assert error.startswith("list.json: ") and error.endswith(" item 2: expected a Kubernetes object")
    assert result.read["Node"] == 1


def test_a_list_broken_inside_one_item_keeps_the_others_and_names_file_line_and_item(
    k8s_fixture: Path,
) -> None:
    """kubectl pretty-prints a list one item per block: when one item is broken (here a line of the first
    pod's metadata cut off, as a console cuts a pasted dump), the other items are read and the broken one
    is lost, named by its file, line and place in the list (the fixture's PodList, cut by hand)."""
    lines = (k8s_fixture / "pods-list.json").read_text().splitlines()
    assert lines[10].strip().startswith('"namespace": "default"')
    lines[10] = lines[10][:20]  # cut mid-string
    result = read_kubectl_output("\n".join(lines), origin="pods.json")
    assert result.read == Counter(Pod=1) and result.lost == Counter(Pod=1)
    (error,) = result.errors
    assert error.startswith("pods.json: line 8: item 1 of a broken PodList could not be read (")
    assert error.endswith("); the items around it are kept")


def test_a_real_mirror_pod_is_read_whole_and_its_reset_status_marks_the_kubelet_restart() -> None:
    """The real minikube 1.20 mirror of the static kube-apiserver (tests/fixtures/real/kubelet, SOURCES.md):
    created 2021-10-20 13:57:15 from a manifest (config source ``file``, hash 01d7e312…, which is the pod
    the kubelet runs: its UID; the API's UID apart), owned by its Node, grace 30 s, Running, 23 restarts:
    the run before ended 06:58:27 with exit 255, the current one started 06:58:54. Its startTime and
    PodScheduled (06:58:52) are the restarted kubelet's: the status was rewritten from scratch, so a kubelet
    (re)started then on node minikube. The snapshot is as late as its newest time (Ready, 11:32:59)."""
    real = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"
    text = (real / "minikube-1.20-mirror-pod-kube-apiserver.json").read_text()
    result = read_kubectl_output(text, origin="mirror.json")
    assert (result.read, result.skipped, result.errors) == (Counter(Pod=1), Counter(), [])
    pod, restart = result.observations
    static_uid = "01d7e312da0f9c4176daa8464d4d1a50"
    assert (pod.kind, pod.observed_at, pod.node, pod.pod_uid, pod.namespace, pod.name) == (
        Kind.POD,
        datetime(2021, 11, 17, 11, 32, 59, tzinfo=UTC),
        "minikube",
        static_uid,
        "kube-system",
        "kube-apiserver-minikube",
    )

    def condition(kind: str, at: str) -> dict[str, object]:
        return {"type": kind, "status": "True", "reason": None, "message": None, "last_transition": at}

    assert pod.payload == {
        "watch": "SNAPSHOT",
        "resource_version": "218397",
        "uid": static_uid,
        "api_uid": "7a26335b-a3d4-458c-ad4a-d90ebe1f36ed",
        "namespace": "kube-system",
        "name": "kube-apiserver-minikube",
        "node": "minikube",
        "labels": {"component": "kube-apiserver", "tier": "control-plane"},
        "created": "2021-10-20T13:57:15+00:00",
        "deletion_timestamp": None,
        "deletion_grace_seconds": None,
        "grace_seconds": 30,
        "finalizers": [],
        "static": True,
        "owner": {"kind": "Node", "name": "minikube", "uid": "a7fb33a8-c44d-48cd-a000-d49727cc78e4"},
        "phase": "Running",
        "reason": None,
        "message": None,
        "start_time": "2021-11-17T06:58:52+00:00",
        "conditions": [
            condition("Initialized", "2021-11-17T06:58:52+00:00"),
            condition("Ready", "2021-11-17T11:32:59+00:00"),
            condition("ContainersReady", "2021-11-17T11:32:59+00:00"),
            condition("PodScheduled", "2021-11-17T06:58:52+00:00"),
        ],
        "containers": [
            {
                "name": "kube-apiserver",
                "kind": "regular",
                "state": "running",
                "reason": None,
                "message": None,
                "exit_code": None,
                "signal": None,
                "started_at": "2021-11-17T06:58:54+00:00",
                "finished_at": None,
                "ready": True,
                "started": True,
                "restart_count": 23,
                "last_state": {
                    "state": "terminated",
                    "exit_code": 255,
                    "reason": "Error",
                    "started_at": "2021-11-16T06:55:06+00:00",
                    "finished_at": "2021-11-17T06:58:27+00:00",
                },
                "allocated_resources": None,
                "resources": None,
                "restart_policy": None,
                "prestop_sleep_seconds": None,
            }
        ],
        "generation": None,
        "observed_generation": None,
    }
    restarted = "2021-11-17T06:58:52.000000+00:00"
    assert (restart.kind, restart.observed_at, restart.node, restart.pod_uid) == (
        Kind.KUBELET_PROCESS,
        datetime(2021, 11, 17, 6, 58, 52, tzinfo=UTC),
        "minikube",
        None,
    )
    assert restart.payload == {
        "pid": None,
        "first_at": restarted,
        "last_at": restarted,
        "lines": 0,
        "started_at": restarted,
        "version": None,
        "verbosity": None,
        "starts": [restarted],
        "from_status_reset": "kube-system/kube-apiserver-minikube",
    }


def test_the_real_minikube_dumps_node_event_and_daemonset_are_read_whole() -> None:
    """The real `kubectl cluster-info dump` of minikube v1.31.0 (tests/fixtures/real/kubelet, SOURCES.md):
    node minikube (kubelet v1.31.0, no taints, schedulable, Ready since 10:19:39, its last heartbeat
    10:24:54 dating the snapshot); the scheduler's Event placing coredns-6f6b679f8f-5m7kq on it (the
    Event item carries no apiVersion in its list, and no host: the scheduler reports none); kube-proxy's
    DaemonSet (RollingUpdate, one pod desired, scheduled, ready, available)."""
    real = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"
    text = (real / "minikube-1.31-cluster-info-dump.txt").read_bytes().decode("utf-8")  # its CRLF kept
    result = read_kubectl_output(text, origin="dump.txt")
    node = next(o for o in result.observations if o.kind == Kind.NODE)
    event = next(o for o in result.observations if o.kind == Kind.EVENT)
    daemonset = next(o for o in result.observations if o.kind == Kind.WORKLOAD)

    assert (node.observed_at, node.node, node.pod_uid, node.namespace, node.name) == (
        datetime(2024, 11, 17, 10, 24, 54, tzinfo=UTC),
        "minikube",
        None,
        None,
        "minikube",
    )
    payload = dict(node.payload)
    payload.pop("fingerprint")  # podlife's digest of what changes a node (tested apart)
    labels = payload.pop("labels")
    assert labels["kubernetes.io/hostname"] == "minikube" and labels["minikube.k8s.io/version"] == "v1.34.0"
    assert len(labels) == 12

    def pressure(kind: str, reason: str, message: str) -> dict[str, object]:
        return {
            "type": kind,
            "status": "False",
            "reason": reason,
            "message": message,
            "last_transition": "2024-11-17T10:19:24+00:00",
        }

    assert payload == {
        "watch": "LIST",
        "uid": "e5133637-7adb-4118-ab1c-9c1e4d46b6fa",
        "name": "minikube",
        "resource_version": "682",
        "created": "2024-11-17T10:19:31+00:00",
        "deletion_timestamp": None,
        "kubelet_version": "v1.31.0",
        "taints": [],
        "unschedulable": False,
        "conditions": [
            pressure(
                "MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"
            ),
            pressure("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            pressure("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "last_transition": "2024-11-17T10:19:39+00:00",
            },
        ],
    }

    coredns = "039e0c2f-3dbe-4622-ae3f-ce05113b939e"
    assert (event.observed_at, event.node, event.pod_uid, event.namespace, event.name) == (
        datetime(2024, 11, 17, 10, 19, 41, tzinfo=UTC),
        None,
        coredns,
        "kube-system",
        "coredns-6f6b679f8f-5m7kq",
    )
    assert event.payload == {
        "uid": "1c4be87e-8e30-425c-b107-2303e71ea325",
        "resource_version": "374",
        "api_version": None,
        "reason": "Scheduled",
        "type": "Normal",
        "message": "Successfully assigned kube-system/coredns-6f6b679f8f-5m7kq to minikube",
        "action": None,
        "component": "default-scheduler",
        "host": None,
        "count": 1,
        "first": "2024-11-17T10:19:41+00:00",
        "last": "2024-11-17T10:19:41+00:00",
        "involved": {
            "kind": "Pod",
            "namespace": "kube-system",
            "name": "coredns-6f6b679f8f-5m7kq",
            "uid": coredns,
            "field_path": None,
        },
    }

    assert (daemonset.observed_at, daemonset.namespace, daemonset.name) == (
        datetime(2024, 11, 17, 10, 19, 36, tzinfo=UTC),
        "kube-system",
        "kube-proxy",
    )
    assert daemonset.payload == {
        "watch": "LIST",
        "kind": "DaemonSet",
        "uid": "509c853f-f02c-48b4-aa10-c09f5e09ef43",
        "namespace": "kube-system",
        "name": "kube-proxy",
        "resource_version": "424",
        "generation": 1,
        "created": "2024-11-17T10:19:36+00:00",
        "deletion_timestamp": None,
        "labels": {"k8s-app": "kube-proxy"},
        "owner": None,
        "selector": {"match_labels": {"k8s-app": "kube-proxy"}, "match_expressions": []},
        "spec_replicas": None,
        "strategy": "RollingUpdate",
        "status": {
            "observed_generation": 1,
            "desired_number_scheduled": 1,
            "current_number_scheduled": 1,
            "updated_number_scheduled": 1,
            "number_ready": 1,
            "number_available": 1,
            "number_unavailable": None,
            "number_misscheduled": 0,
            "collision_count": None,
            "conditions": [],
        },
    }
