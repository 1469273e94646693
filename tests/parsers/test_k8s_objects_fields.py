"""What ``collectors.parsers.k8s_objects`` reads from real API objects, each field read back (issue #38: fields
the normalizers set and no test checked, so a mutation sample could change them freely).

The objects are real ones from tests/fixtures/real/kubelet (README.md there and ../SOURCES.md name where each
was copied from); every expected value is read off the object by the API's meaning (core/v1 Pod, Node, Event),
never copied from the normalizer's output. Hand-written inputs say so ("synthetic:").
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.parsers.k8s_objects import (
    event_observation,
    node_observation,
    normalize_node,
    normalize_pod,
    normalize_time,
    normalize_workload,
    parse_time,
    pod_observation,
)
from timelines.lifecycle.observation import Kind, Source

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"


def real_object(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((REAL / name).read_text(encoding="utf-8"))
    return obj


def test_a_pod_being_deleted_reads_back_every_field_it_carries() -> None:
    """GIVEN akkeris's real pod pipline-test-space1/pl1-6c9b4c75b6-952tg (2019, ~1.12) as the API returned
    it while deleting it: deletionTimestamp 19:27:42 with 30 s of grace, five labels, no owner reference,
    phase still Running, its one container terminated Completed (exit 0) at 19:27:12, never restarted
    WHEN normalized THEN each field is the object's own: identity and version, node, labels, creation,
    the deletion deadline and its grace, the spec's grace, no finalizers, not static (no config.mirror /
    config.source annotation), no owner, the status and its four conditions, and the container's state,
    with what a 2019 API server did not write (started, restartPolicy, resources) left None."""
    pod = normalize_pod(real_object("akkeris-2019-pod-being-deleted.json"))
    uid = "c6090dfe-1f44-11e9-902b-062291b3f7b2"
    assert pod == {
        "watch": "SNAPSHOT",
        "resource_version": "99727471",
        "uid": uid,
        "api_uid": uid,
        "namespace": "pipline-test-space1",
        "name": "pl1-6c9b4c75b6-952tg",
        "node": "ip-10-84-15-202.us-west-2.compute.internal",
        "labels": {
            "akkeris.io/app-name": "pl1",
            "app": "pl1",
            "name": "pl1",
            "pod-template-hash": "2756073162",
            "version": "v1",
        },
        "created": "2019-01-23T19:26:25+00:00",
        "deletion_timestamp": "2019-01-23T19:27:42+00:00",
        "deletion_grace_seconds": 30,
        "grace_seconds": 30,
        "finalizers": [],
        "static": False,
        "owner": None,
        "phase": "Running",
        "reason": None,
        "message": None,
        "start_time": "2019-01-23T19:26:25+00:00",
        "conditions": [
            {
                "type": "Initialized",
                "status": "True",
                "reason": None,
                "message": None,
                "last_transition": "2019-01-23T19:26:25+00:00",
            },
            {
                "type": "Ready",
                "status": "False",
                "reason": "ContainersNotReady",
                "message": "containers with unready status: [pl1]",
                "last_transition": "2019-01-23T19:27:13+00:00",
            },
            {
                "type": "ContainersReady",
                "status": "False",
                "reason": "ContainersNotReady",
                "message": "containers with unready status: [pl1]",
                "last_transition": None,
            },
            {
                "type": "PodScheduled",
                "status": "True",
                "reason": None,
                "message": None,
                "last_transition": "2019-01-23T19:26:25+00:00",
            },
        ],
        "containers": [
            {
                "name": "pl1",
                "kind": "regular",
                "state": "terminated",
                "reason": "Completed",
                "message": None,
                "exit_code": 0,
                "signal": None,
                "started_at": "2019-01-23T19:26:29+00:00",
                "finished_at": "2019-01-23T19:27:12+00:00",
                "ready": False,
                "started": None,
                "restart_count": 0,
                "last_state": None,
                "restart_policy": None,
                "prestop_sleep_seconds": None,
                "resources": None,
                "allocated_resources": None,
            }
        ],
        "generation": None,
        "observed_generation": None,
    }


def test_a_mirror_pod_reads_back_its_restarts_and_the_run_before() -> None:
    """GIVEN minikube's real mirror pod kube-system/kube-apiserver-minikube (1.20: config.source file,
    config.mirror = the static pod's hash, owned by Node minikube; 23 restarts, running since 06:58:54,
    the run before ended Error with exit 255) WHEN normalized THEN it is static and keyed on the hash,
    its API uid kept beside it, its owner is the Node, and the container is ready, started, restarted
    23 times, with the last run's start, end, reason and exit code."""
    pod = normalize_pod(real_object("minikube-1.20-mirror-pod-kube-apiserver.json"))
    assert (pod["uid"], pod["api_uid"], pod["static"]) == (
        "01d7e312da0f9c4176daa8464d4d1a50",
        "7a26335b-a3d4-458c-ad4a-d90ebe1f36ed",
        True,
    )
    assert pod["owner"] == {"kind": "Node", "name": "minikube", "uid": "a7fb33a8-c44d-48cd-a000-d49727cc78e4"}
    assert pod["labels"] == {"component": "kube-apiserver", "tier": "control-plane"}
    (c,) = pod["containers"]
    assert (c["name"], c["state"], c["started_at"], c["ready"], c["started"], c["restart_count"]) == (
        "kube-apiserver",
        "running",
        "2021-11-17T06:58:54+00:00",
        True,
        True,
        23,
    )
    assert c["last_state"] == {
        "state": "terminated",
        "reason": "Error",
        "exit_code": 255,
        "started_at": "2021-11-16T06:55:06+00:00",
        "finished_at": "2021-11-17T06:58:27+00:00",
    }


def test_a_deleted_pods_observation_is_keyed_on_its_version_and_says_deleted() -> None:
    """GIVEN akkeris's real pod delivered by a watch as DELETED WHEN observed THEN the observation is a
    POD_DELETED keyed ``pod:<uid>:<resourceVersion>:deleted``, placed at the delivery time, with the
    pod's uid, node, namespace and name."""
    at = datetime(2019, 1, 23, 19, 27, 43, tzinfo=UTC)
    obs = pod_observation(
        real_object("akkeris-2019-pod-being-deleted.json"),
        watch_type="DELETED",
        observed_at=at,
        source=Source.API,
    )
    assert (obs.kind, obs.dedupe_key, obs.observed_at, obs.source) == (
        Kind.POD_DELETED,
        "pod:c6090dfe-1f44-11e9-902b-062291b3f7b2:99727471:deleted",
        at,
        Source.API,
    )
    assert (obs.pod_uid, obs.node, obs.namespace, obs.name) == (
        "c6090dfe-1f44-11e9-902b-062291b3f7b2",
        "ip-10-84-15-202.us-west-2.compute.internal",
        "pipline-test-space1",
        "pl1-6c9b4c75b6-952tg",
    )
    assert obs.payload["watch"] == "DELETED"


DUMP = "minikube-1.31-cluster-info-dump.txt"


def dump_lists(kind: str) -> list[dict[str, Any]]:
    """The ``kind`` lists of minikube's real ``kubectl cluster-info dump`` stdout (SOURCES.md: lists back to
    back; the PodList is broken by the console, the NodeList and EventLists are intact)."""
    text = (REAL / DUMP).read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    at = text.find("{")
    while at != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict) and value.get("kind") == kind:
            out.append(value)
        at = text.find("{", end)
    return out


def test_a_node_reads_back_its_identity_labels_conditions_and_kubelet_version() -> None:
    """GIVEN minikube's real Node (cluster-info dump, v1.31.0): created 10:19:31, 12 labels, not cordoned,
    no taints, four conditions whose last heartbeat is 10:24:54 WHEN normalized and observed (offline)
    THEN the payload is the node's own fields with the kubelet's version from nodeInfo, and the
    observation is placed at the last heartbeat, keyed ``node:<uid>:<resourceVersion>``."""
    ((node,),) = [nodes["items"] for nodes in dump_lists("NodeList")]
    payload = normalize_node(node)
    assert isinstance(payload.pop("fingerprint"), str)
    conditions = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ]
    assert payload == {
        "name": "minikube",
        "uid": "e5133637-7adb-4118-ab1c-9c1e4d46b6fa",
        "resource_version": "682",
        "created": "2024-11-17T10:19:31+00:00",
        "deletion_timestamp": None,
        "unschedulable": False,
        "taints": [],
        "conditions": [
            *(
                {
                    "type": kind,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "last_transition": "2024-11-17T10:19:24+00:00",
                }
                for kind, status, reason, message in conditions
            ),
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "last_transition": "2024-11-17T10:19:39+00:00",
            },
        ],
        "labels": node["metadata"]["labels"],
        "kubelet_version": "v1.31.0",
    }
    assert len(payload["labels"]) == 12 and payload["labels"]["node-role.kubernetes.io/control-plane"] == ""
    obs = node_observation(node, watch_type="LIST", observed_at=None, source=Source.OFFLINE)
    assert (obs.kind, obs.dedupe_key, obs.observed_at, obs.node, obs.pod_uid) == (
        Kind.NODE,
        "node:e5133637-7adb-4118-ab1c-9c1e4d46b6fa:682",
        datetime(2024, 11, 17, 10, 24, 54, tzinfo=UTC),
        "minikube",
        None,
    )
    assert obs.payload["watch"] == "LIST"


def _coredns_event(reason: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        e
        for events in dump_lists("EventList")
        for e in events["items"]
        if e["involvedObject"]["name"] == "coredns-6f6b679f8f-5m7kq" and e["reason"] == reason
    ]
    (event,) = found
    return event


def test_a_kubelet_event_reads_back_every_field_and_names_its_pod_and_node() -> None:
    """GIVEN the kubelet's real core/v1 Killing event of kube-system/coredns-6f6b679f8f-5m7kq (minikube
    1.31 dump; an item of a typed EventList, so it carries no apiVersion; source kubelet on host minikube;
    once at 10:19:49) WHEN observed THEN the payload is the event's own fields, the observation is keyed
    ``event:<uid>:<resourceVersion>``, placed at lastTimestamp, and joined to the pod's uid, its
    namespace and name, and the node the kubelet runs on."""
    obs = event_observation(_coredns_event("Killing"), source=Source.OFFLINE)
    assert obs is not None
    assert obs.payload == {
        "uid": "4b2e728d-a508-4aaa-b9dd-a05a8b605c2a",
        "resource_version": "432",
        "api_version": None,
        "reason": "Killing",
        "type": "Normal",
        "message": "Stopping container coredns",
        "count": 1,
        "action": None,
        "component": "kubelet",
        "host": "minikube",
        "first": "2024-11-17T10:19:49+00:00",
        "last": "2024-11-17T10:19:49+00:00",
        "involved": {
            "kind": "Pod",
            "namespace": "kube-system",
            "name": "coredns-6f6b679f8f-5m7kq",
            "uid": "039e0c2f-3dbe-4622-ae3f-ce05113b939e",
            "field_path": "spec.containers{coredns}",
        },
    }
    assert (obs.kind, obs.dedupe_key, obs.observed_at) == (
        Kind.EVENT,
        "event:4b2e728d-a508-4aaa-b9dd-a05a8b605c2a:432",
        datetime(2024, 11, 17, 10, 19, 49, tzinfo=UTC),
    )
    assert (obs.pod_uid, obs.node, obs.namespace, obs.name) == (
        "039e0c2f-3dbe-4622-ae3f-ce05113b939e",
        "minikube",
        "kube-system",
        "coredns-6f6b679f8f-5m7kq",
    )


def test_the_schedulers_event_names_no_host() -> None:
    """GIVEN the scheduler's real Scheduled event of the same pod (source.component default-scheduler, no
    source.host, reportingInstance "") WHEN observed THEN its component is the scheduler and it names no
    host, so the observation names no node: the pod's node is in the message, not the event's source."""
    obs = event_observation(_coredns_event("Scheduled"), source=Source.OFFLINE)
    assert obs is not None
    assert (obs.payload["component"], obs.payload["host"], obs.node) == ("default-scheduler", None, None)
    assert obs.payload["involved"]["field_path"] is None
    assert obs.pod_uid == "039e0c2f-3dbe-4622-ae3f-ce05113b939e"


@pytest.mark.parametrize(
    ("written", "instant"),
    [
        # synthetic values, each an RFC 3339 time as the API and Go's time.RFC3339Nano write them
        ("2024-06-07T01:54:47.5-05:00", datetime(2024, 6, 7, 6, 54, 47, 500000, tzinfo=UTC)),
        ("2024-06-07T12:24:47.123456789+05:30", datetime(2024, 6, 7, 6, 54, 47, 123456, tzinfo=UTC)),
        ("2024-06-07 06:54:47.25 +0000 UTC", datetime(2024, 6, 7, 6, 54, 47, 250000, tzinfo=UTC)),
        # YAML loads an unquoted date as a date, and a Go zero time as year 1
        (date(2024, 6, 7), datetime(2024, 6, 7, tzinfo=UTC)),
        (datetime(1, 1, 1, tzinfo=UTC), None),
    ],
)
def test_a_time_is_the_instant_its_offset_and_fraction_say(written: object, instant: datetime | None) -> None:
    """RFC 3339: the offset is subtracted (a negative one added), hours and minutes both (+05:30); a
    fraction is a fraction of a second (".5" is 500 ms, digits past microseconds dropped); a date is its
    midnight UTC; Go's zero time is no time."""
    assert parse_time(written) == instant


def dump_items(kind: str) -> list[dict[str, Any]]:
    return [item for listed in dump_lists(f"{kind}List") for item in listed["items"]]


def test_a_daemonsets_status_is_its_own_fields_and_none_for_what_it_left_out() -> None:
    """GIVEN minikube's real DaemonSet kube-system/kube-proxy (an item of a typed DaemonSetList: no kind on
    it, so the list's kind is the hint; updateStrategy RollingUpdate; status without numberUnavailable and
    collisionCount) WHEN normalized THEN the status is the DaemonSet's fields in snake_case, None for the
    two it left out, the strategy comes from updateStrategy, and a DaemonSet has no replicas in its spec."""
    (proxy,) = dump_items("DaemonSet")
    workload = normalize_workload(proxy, kind_hint="DaemonSet")
    assert (workload["kind"], workload["namespace"], workload["name"], workload["generation"]) == (
        "DaemonSet",
        "kube-system",
        "kube-proxy",
        1,
    )
    assert (workload["strategy"], workload["spec_replicas"], workload["owner"]) == (
        "RollingUpdate",
        None,
        None,
    )
    assert workload["selector"] == {"match_labels": {"k8s-app": "kube-proxy"}, "match_expressions": []}
    assert workload["status"] == {
        "current_number_scheduled": 1,
        "number_misscheduled": 0,
        "desired_number_scheduled": 1,
        "number_ready": 1,
        "observed_generation": 1,
        "updated_number_scheduled": 1,
        "number_available": 1,
        "number_unavailable": None,
        "collision_count": None,
        "conditions": [],
    }


def test_a_replicaset_names_the_deployment_that_controls_it() -> None:
    """GIVEN minikube's real ReplicaSet kube-system/coredns-6f6b679f8f, controlled by Deployment coredns
    (ownerReferences controller true), 1 replica of 1, selector with the pod-template-hash WHEN normalized
    THEN its owner is that Deployment with its uid, the spec's replicas and the status's counts are its
    own, and a ReplicaSet has no update strategy."""
    (replica_set,) = dump_items("ReplicaSet")
    workload = normalize_workload(replica_set, kind_hint="ReplicaSet")
    assert workload["owner"] == {
        "kind": "Deployment",
        "name": "coredns",
        "uid": "5fda9559-feef-4cfc-9dea-5bbb97615edb",
    }
    assert (workload["spec_replicas"], workload["strategy"], workload["generation"]) == (1, None, 2)
    assert workload["selector"] == {
        "match_labels": {"k8s-app": "kube-dns", "pod-template-hash": "6f6b679f8f"},
        "match_expressions": [],
    }
    assert workload["status"] == {
        "replicas": 1,
        "fully_labeled_replicas": 1,
        "ready_replicas": 1,
        "available_replicas": 1,
        "terminating_replicas": None,
        "observed_generation": 2,
        "conditions": [],
    }


def test_a_deployments_conditions_are_read_back() -> None:
    """GIVEN minikube's real Deployment kube-system/coredns (generation 2 observed, strategy RollingUpdate,
    conditions Available and Progressing) WHEN normalized THEN its status counts and both conditions,
    with reason, message and transition time, are the Deployment's own."""
    (deployment,) = dump_items("Deployment")
    workload = normalize_workload(deployment, kind_hint="Deployment")
    assert (workload["strategy"], workload["spec_replicas"]) == ("RollingUpdate", 1)
    status = workload["status"]
    assert (status["observed_generation"], status["replicas"], status["unavailable_replicas"]) == (2, 1, None)
    assert status["conditions"] == [
        {
            "type": "Available",
            "status": "True",
            "reason": "MinimumReplicasAvailable",
            "message": "Deployment has minimum availability.",
            "last_transition": "2024-11-17T10:19:43+00:00",
        },
        {
            "type": "Progressing",
            "status": "True",
            "reason": "NewReplicaSetAvailable",
            "message": 'ReplicaSet "coredns-6f6b679f8f" has successfully progressed.',
            "last_transition": "2024-11-17T10:19:40+00:00",
        },
    ]


def test_gos_zero_time_in_rfc_3339_is_no_time() -> None:
    """Go marshals an unset ``metav1.Time`` field it does not omit as ``0001-01-01T00:00:00Z`` (the zero
    ``time.Time``): it says no time, so it normalizes to None like the absent field, not to year 1."""
    assert normalize_time("0001-01-01T00:00:00Z") is None
    assert normalize_time("2024-11-17T10:19:31Z") == "2024-11-17T10:19:31+00:00"


def test_an_object_without_a_name_is_refused_saying_it_has_none() -> None:
    """GIVEN a Node whose metadata has no name (synthetic: a damaged dump) WHEN normalized THEN the
    refusal names the kind and says the object has no name, and what was expected."""
    with pytest.raises(ValueError) as refused:
        normalize_node({"kind": "Node", "metadata": {"uid": "e5133637-7adb-4118-ab1c-9c1e4d46b6fa"}})
    assert str(refused.value) == "Node <no name>: expected metadata.name (a non-empty string)"


def test_a_kubelets_node_event_names_the_node_and_no_pod() -> None:
    """GIVEN the kubelet's real NodeHasSufficientMemory event of node minikube (minikube 1.31 dump: the
    involvedObject is the cluster-scoped Node, no namespace, its uid the node's name as the kubelet sets
    it; the event itself in namespace default; seen 8 times, the last at 10:19:21) WHEN observed THEN it
    names the node from its source host, sits in the event's own namespace, names no pod, and keeps the
    count and the time of the last occurrence."""
    (event,) = [
        e
        for events in dump_lists("EventList")
        for e in events["items"]
        if e["metadata"]["uid"] == "a97a422a-60d8-4390-9972-3b02973bd855"
    ]
    assert (event["involvedObject"]["kind"], event["reason"]) == ("Node", "NodeHasSufficientMemory")
    obs = event_observation(event, source=Source.OFFLINE)
    assert obs is not None
    assert (obs.node, obs.namespace, obs.name, obs.pod_uid) == ("minikube", "default", "minikube", None)
    assert (obs.payload["count"], obs.payload["involved"]["kind"]) == (8, "Node")
    assert obs.observed_at == datetime(2024, 11, 17, 10, 19, 21, tzinfo=UTC)


@settings(max_examples=300, deadline=None)
@given(
    at=st.one_of(
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
        st.sampled_from([datetime(1, 1, 1), datetime(1, 12, 31, 23, 59, 59), datetime(2, 1, 1, 0, 0, 1)]),
    ),
    offset_minutes=st.sampled_from([0, 0, 0, 330, -300]),
    form=st.sampled_from(["api", "api-space", "fraction", "offset", "space"]),
)
def test_a_time_text_normalizes_to_its_instant_in_utc(at: datetime, offset_minutes: int, form: str) -> None:
    """Whatever RFC 3339 form a time is written in (the API's own ``...Z`` in whole seconds, a fraction,
    an offset, a space for the T), it normalizes to the ISO 8601 text of its instant in UTC (``+00:00``,
    microseconds only when not zero), and Go's zero time (year 1) to None."""
    zone = (
        UTC
        if form in ("api", "api-space", "fraction") or offset_minutes == 0
        else timezone(timedelta(minutes=offset_minutes))
    )
    instant = at.replace(tzinfo=zone, microsecond=0 if form.startswith("api") else at.microsecond)
    if form.startswith("api"):  # the API server's own form (and with a space for the T)
        text = f"{instant.year:04d}-" + instant.strftime("%m-%dT%H:%M:%S") + "Z"
        text = text.replace("T", " ") if form == "api-space" else text
    elif form == "fraction":  # Go's RFC3339Nano in UTC
        text = instant.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    else:
        text = instant.isoformat(sep=" " if form == "space" else "T")
    try:
        utc = instant.astimezone(UTC)
    except OverflowError:  # an offset that moves it past year 9999 or before year 1: no such instant
        return
    expected = None if utc.year <= 1 else utc.isoformat()
    assert normalize_time(text) == expected, text


def test_an_iso_week_date_normalizes_to_its_calendar_day() -> None:
    """ISO 8601 also writes a day as year, week and weekday (``2026-W49-1``: the Monday of week 49, in
    the text as long as the API's own form): it normalizes to that calendar day's time."""
    monday = date.fromisocalendar(2026, 49, 1)
    assert normalize_time("2026-W49-1T07:00:00Z") == f"{monday.isoformat()}T07:00:00+00:00"
