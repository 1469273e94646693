"""How a pod snapshot is read into facts (issue #38, survivors of sample fresh-1207y in facts._Reader):
which node a snapshot puts the pod on, and what a malformed entry costs the rest of the snapshot.

Input: the real pod of tests/fixtures/real/kubelet/akkeris-2022-pod-being-deleted.json (README there:
``sam/logs-c6f97b6bd-tl7t5`` on ``ip-10-84-25-128.us-west-2.compute.internal``, its container ``logs``
running, deletion requested), read by the collector's own ``pod_observation``. Where a test damages it,
the damage is SYNTHETIC and says so."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from collectors.parsers.k8s_objects import pod_observation
from collectors.parsers.kubectl import reset_restart
from tests.lifecycle.factories import event, span
from timelines.lifecycle.facts import collect_facts
from timelines.lifecycle.observation import Kind, Observation, Source

AKKERIS = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "real"
    / "kubelet"
    / "akkeris-2022-pod-being-deleted.json"
)
NODE = "ip-10-84-25-128.us-west-2.compute.internal"


def _akkeris() -> Observation:
    obj = json.loads(AKKERIS.read_text(encoding="utf-8"))
    return pod_observation(obj, watch_type="SNAPSHOT", observed_at=None, source=Source.OFFLINE)


def test_a_snapshot_puts_the_pod_on_the_node_its_spec_names() -> None:
    """GIVEN the real akkeris pod (``spec.nodeName`` ip-10-84-25-128...) stored with no node in the
    observation's own columns (SYNTHETIC: ``node`` cleared, as for a row whose index column was not
    filled) THEN its snapshot is on the node the pod's spec names: the payload is the object, the
    columns only index it."""
    seen = replace(_akkeris(), node=None)
    (snap,) = collect_facts([seen]).snapshots
    assert snap.node == NODE


def test_a_snapshot_is_on_its_specs_node_even_when_the_columns_disagree() -> None:
    """GIVEN the same pod with its observation's ``node`` column naming another node (SYNTHETIC)
    THEN the snapshot still says the pod's own ``spec.nodeName``: the object is the source of truth."""
    seen = replace(_akkeris(), node="some-other-node")
    (snap,) = collect_facts([seen]).snapshots
    assert snap.node == NODE


def test_a_container_status_with_no_name_costs_only_itself() -> None:
    """GIVEN the real akkeris pod with a container status that has no name put before its ``logs`` status
    (SYNTHETIC damage: every real status names its container)
    THEN the nameless one is skipped and named among the problems, and ``logs`` is still read, running:
    a value that cannot be read is skipped and named, never the rest of the record with it."""
    real = _akkeris()
    damaged = {**real.payload["containers"][0], "name": None}
    seen = replace(real, payload={**real.payload, "containers": [damaged, *real.payload["containers"]]})
    facts = collect_facts([seen])
    (snap,) = facts.snapshots
    assert [(c.name, c.state) for c in snap.containers] == [("logs", "running")]
    assert facts.problems == (f"{seen.dedupe_key}: a container status has no name",)


def test_a_snapshot_names_the_pod_as_its_object_does() -> None:
    """GIVEN the real akkeris pod stored with its observation's namespace and name columns cleared
    (SYNTHETIC) THEN the snapshot names it sam/logs-c6f97b6bd-tl7t5, from the object itself."""
    seen = replace(_akkeris(), namespace=None, name=None)
    (snap,) = collect_facts([seen]).snapshots
    assert (snap.uid, snap.namespace, snap.name) == (seen.pod_uid, "sam", "logs-c6f97b6bd-tl7t5")


MINIKUBE_MIRROR = AKKERIS.parent / "minikube-1.20-mirror-pod-kube-apiserver.json"


def _mirror() -> Observation:
    obj = json.loads(MINIKUBE_MIRROR.read_text(encoding="utf-8"))
    return pod_observation(obj, watch_type="SNAPSHOT", observed_at=None, source=Source.OFFLINE)


def test_a_containers_last_termination_is_read_as_its_previous_run() -> None:
    """GIVEN the real minikube v1.20 mirror pod kube-apiserver-minikube (README: its previous run ran from
    2021-11-16T06:55:06 to 2021-11-17T06:58:27 and exited 255) THEN its container's previous run is that
    run, with its reason and exit code: ``lastState.terminated`` is the last termination."""
    (snap,) = collect_facts([_mirror()]).snapshots
    (container,) = snap.containers
    last = container.last
    assert last is not None
    assert (last.started_at, last.finished_at, last.reason, last.exit_code) == (
        datetime(2021, 11, 16, 6, 55, 6, tzinfo=UTC),
        datetime(2021, 11, 17, 6, 58, 27, tzinfo=UTC),
        "Error",
        255,
    )
    assert (container.kind, container.restart_count) == ("regular", 23)


def test_a_status_rewritten_by_a_restarted_kubelet_is_read_as_a_restart() -> None:
    """GIVEN the real minikube mirror pod and the kubelet start its reset status tells (collectors'
    ``reset_restart``) THEN the pod's facts hold that kubelet process, known to be a restart."""
    mirror = _mirror()
    started = reset_restart(mirror)
    assert started is not None
    (process,) = collect_facts([mirror, started]).processes
    assert (process.started_at, process.restart) == (datetime(2021, 11, 17, 6, 58, 52, tzinfo=UTC), True)


def _damaged(**container: Any) -> tuple[Observation, Any]:
    """The real akkeris pod with its ``logs`` status changed by ``container`` (SYNTHETIC damage)."""
    real = _akkeris()
    status = {**real.payload["containers"][0], **container}
    seen = replace(real, payload={**real.payload, "containers": [status]})
    facts = collect_facts([seen])
    (snap,) = facts.snapshots
    return seen, (facts, snap)


def test_a_container_state_kubernetes_does_not_have_is_named_and_read_as_unknown() -> None:
    """GIVEN the akkeris ``logs`` status with state ``crashed`` (SYNTHETIC: a container state is waiting,
    running or terminated, core/v1 ContainerState) THEN it is read with no state and the problem names
    the container and the value."""
    seen, (facts, snap) = _damaged(state="crashed")
    assert [(c.name, c.state) for c in snap.containers] == [("logs", None)]
    assert facts.problems == (
        f"{seen.dedupe_key}: container logs state 'crashed' is not waiting|running|terminated",
    )


def test_a_last_state_that_is_not_an_object_is_named_and_dropped() -> None:
    """GIVEN the akkeris ``logs`` status whose last_state is a list (SYNTHETIC) THEN the container is read
    with no previous run and the problem is named."""
    seen, (facts, snap) = _damaged(last_state=["terminated"])
    assert [(c.name, c.last) for c in snap.containers] == [("logs", None)]
    assert facts.problems == (f"{seen.dedupe_key}: last_state is not an object",)


def test_a_container_status_missing_its_kind_and_restarts_is_a_regular_container_never_restarted() -> None:
    """GIVEN the akkeris ``logs`` status without ``kind`` and ``restart_count`` (SYNTHETIC: a row written
    before those fields) THEN it is a regular container (spec.containers) that has not restarted
    (restartCount starts at 0)."""
    _, (facts, snap) = _damaged(kind=None, restart_count=None)
    assert [(c.kind, c.restart_count) for c in snap.containers] == [("regular", 0)]
    assert facts.problems == ()


def test_numbers_written_as_text_or_as_whole_floats_are_read() -> None:
    """GIVEN the akkeris pod with its restart count as 2.0 and its deletion grace as "60" (SYNTHETIC: JSON
    from other tools writes numbers so) THEN both are read as the integers they are."""
    real = _akkeris()
    status = {**real.payload["containers"][0], "restart_count": 2.0}
    seen = replace(real, payload={**real.payload, "containers": [status], "deletion_grace_seconds": "60"})
    facts = collect_facts([seen])
    (snap,) = facts.snapshots
    assert (snap.containers[0].restart_count, snap.deletion_grace_seconds) == (2, 60)
    assert facts.problems == ()


def test_a_condition_without_a_status_is_unknown_and_entries_that_are_not_objects_are_named() -> None:
    """GIVEN the akkeris pod with (SYNTHETIC) a Ready condition that has no status and a bare string among
    its conditions THEN Ready reads as ``Unknown`` (core/v1 ConditionStatus: True, False or Unknown), the
    string is skipped and named, and the other conditions are kept."""
    real = _akkeris()
    conditions = [{**c, "status": None} if c["type"] == "Ready" else c for c in real.payload["conditions"]]
    seen = replace(real, payload={**real.payload, "conditions": [*conditions, "Ready"]})
    facts = collect_facts([seen])
    (snap,) = facts.snapshots
    assert len(snap.conditions) == len(real.payload["conditions"])
    ready = snap.condition("Ready")
    assert ready is not None and ready.status == "Unknown"
    assert facts.problems == (f"{seen.dedupe_key}: conditions has 1 entries that are not objects",)


def test_finalizers_are_the_names_listed() -> None:
    """GIVEN the akkeris pod with finalizers ``["example.com/keep", 7]`` (SYNTHETIC: a finalizer is a
    qualified name, a string) THEN its finalizers are the string only."""
    real = _akkeris()
    seen = replace(real, payload={**real.payload, "finalizers": ["example.com/keep", 7]})
    (snap,) = collect_facts([seen]).snapshots
    assert snap.finalizers == ("example.com/keep",)


def test_a_span_named_outside_the_pod_workers_three_and_one_ending_before_it_starts_are_named() -> None:
    """GIVEN the akkeris pod with two kubelet OTLP spans (SYNTHETIC, the span parser's shape): ``syncPod``
    from 21:52:51.5 that ends 1 s before it starts, and ``podSandbox`` THEN the first is read from its
    own start, ending there, and named; the second is not a pod-worker span and is named and skipped."""
    uid = _akkeris().pod_uid
    assert uid is not None
    base = span(uid, "syncPod", 0, 1)
    start = datetime(2022, 1, 13, 21, 52, 51, 500000, tzinfo=UTC)
    backwards = replace(
        base,
        observed_at=start + timedelta(seconds=5),
        payload={
            **base.payload,
            "start": start.isoformat(),
            "end": (start - timedelta(seconds=1)).isoformat(),
        },
    )
    other = replace(base, dedupe_key="span:other", payload={**base.payload, "name": "podSandbox"})
    facts = collect_facts([_akkeris(), backwards, other])
    assert [(e.name, e.at) for e in facts.worker_events] == [
        ("span:syncPod:end", start),
        ("span:syncPod:start", start),
    ]
    assert facts.problems == (
        f"{backwards.dedupe_key}: span ends ({(start - timedelta(seconds=1)).isoformat()}) before it "
        f"starts ({start.isoformat()})",
        "span:other: span name 'podSandbox' is not syncPod, syncTerminatingPod or syncTerminatedPod",
    )


def test_an_event_with_no_count_or_type_happened_once_and_is_normal() -> None:
    """GIVEN an Event about the akkeris pod with no count and no type (SYNTHETIC: events.k8s.io/v1 has no
    count, only a series once repeated; type defaults to Normal) THEN it is read as one Normal event."""
    uid = _akkeris().pod_uid
    assert uid is not None
    base = event(uid, "ev-1", 0, "Killing", "Stopping container logs")
    ev = replace(base, payload={**base.payload, "count": None, "type": None})
    (record,) = collect_facts([_akkeris(), ev]).events
    assert (record.count, record.type) == (1, "Normal")


def test_a_kubelet_process_whose_last_line_is_before_its_first_is_named_and_kept_as_a_moment() -> None:
    """GIVEN a kubelet process observation (SYNTHETIC) whose last line is dated before its first, beside
    the akkeris pod THEN the process is kept from its first line to that same instant, and named."""
    first = datetime(2022, 1, 13, 21, 50, tzinfo=UTC)
    process = Observation(
        kind=Kind.KUBELET_PROCESS,
        source=Source.KUBELET_LOG,
        observed_at=first,
        dedupe_key="process:backwards",
        node=NODE,
        payload={
            "pid": 4242,
            "first_at": first.isoformat(),
            "last_at": (first - timedelta(seconds=30)).isoformat(),
            "started_at": None,
            "version": None,
            "starts": [(first + timedelta(seconds=2)).isoformat(), first.isoformat()],
        },
    )
    facts = collect_facts([_akkeris(), process])
    (read,) = facts.processes
    assert (read.first_at, read.last_at) == (first, first)
    assert read.starts == (first, first + timedelta(seconds=2))
    assert facts.problems == ("process:backwards: last_at is before first_at",)
