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

from collectors.parsers.audit import parse_audit
from collectors.parsers.k8s_objects import pod_observation
from collectors.parsers.kubectl import reset_restart
from tests.lifecycle.factories import event, marker, span, worker
from timelines.lifecycle.facts import collect_facts
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.lifecycle.worker import sync_errors

AKKERIS = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "real"
    / "kubelet"
    / "akkeris-2022-pod-being-deleted.json"
)
NODE = "ip-10-84-25-128.us-west-2.compute.internal"
AUDIT = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "audit"


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


# ------------------------------------------------------------------------- collect_facts, round 2


def test_snapshots_seen_at_one_instant_are_in_resource_version_order() -> None:
    """GIVEN the real akkeris pod (resourceVersion 500400990) and, seen at the same instant, an older
    version of it (SYNTHETIC: resourceVersion 99, phase Pending; its key sorts after the real one's as
    text) THEN the snapshots are in resourceVersion order, the real one last: at one instant the higher
    version is the later write of the object (the API server's resourceVersion is the etcd revision of the
    write), not the one whose key sorts last."""
    real = _akkeris()
    older = replace(
        real,
        dedupe_key=real.dedupe_key.rsplit(":", 1)[0] + ":99",
        payload={**real.payload, "resource_version": "99", "phase": "Pending"},
    )
    assert older.dedupe_key > real.dedupe_key
    snaps = collect_facts([real, older]).snapshots
    assert [(s.resource_version, s.phase) for s in snaps] == [(99, "Pending"), (500400990, "Running")]


def test_a_kubelet_line_with_an_empty_transition_is_named_and_adds_no_worker_event() -> None:
    """GIVEN the akkeris pod and a pod-worker observation whose transition is the empty string (SYNTHETIC
    damage: the kubelet parser always names one) THEN no worker event is read from it and it is named
    among the problems: a step the worker took must have a name to be placed in the lane."""
    uid = _akkeris().pod_uid
    assert uid is not None
    base = worker(uid, 0, "syncloop_add")
    blank = replace(base, payload={**base.payload, "transition": ""})
    facts = collect_facts([_akkeris(), blank])
    assert facts.worker_events == ()
    assert facts.problems == (f"{blank.dedupe_key}: transition '' is not a Transition name",)


def test_audited_requests_about_another_pod_are_not_among_the_pods_observations() -> None:
    """GIVEN the real akkeris pod (sam/logs-c6f97b6bd-tl7t5) and the real audited deletes and creates of
    citadel/webapp-color (tests/fixtures/real/audit/kodekloud-2024-citadel-webapp-color-deletes.jsonl,
    2024; they carry no UID, so they are joined by name and time) THEN none of them is this pod's:
    neither among its audits nor among the observations its timeline is drawn from and cites."""
    audits = [
        o
        for o in parse_audit(
            (AUDIT / "kodekloud-2024-citadel-webapp-color-deletes.jsonl").read_bytes()
        ).observations
        if o.kind == Kind.AUDIT
    ]
    assert len(audits) == 10
    facts = collect_facts([_akkeris(), *audits])
    assert facts.audits == ()
    assert [o.kind for o in facts.observations] == [Kind.POD]


def _process(key: str, pid: int, first: datetime, last: datetime, *, seen: datetime) -> Observation:
    """SYNTHETIC kubelet process observation (the kubelet parser's shape), stored at ``seen``."""
    return Observation(
        kind=Kind.KUBELET_PROCESS,
        source=Source.KUBELET_LOG,
        observed_at=seen,
        dedupe_key=key,
        node=NODE,
        payload={
            "pid": pid,
            "first_at": first.isoformat(),
            "last_at": last.isoformat(),
            "started_at": None,
            "version": None,
            "starts": [],
        },
    )


def test_a_nodes_kubelet_processes_are_in_the_order_they_logged_first() -> None:
    """GIVEN the akkeris pod and two kubelet processes of its node (SYNTHETIC): pid 100 logging from 21:00
    to 21:40, stored when the log was read to its end at 22:00, and pid 200, the kubelet restarted,
    logging from 21:41, stored at its first line (so earlier than pid 100: a store's time is not when
    the process ran)
    THEN the processes read are pid 100 then pid 200: a restarted kubelet's process follows the one it
    replaced, by when each logged first."""

    def at(hour: int, minute: int) -> datetime:
        return datetime(2022, 1, 13, hour, minute, tzinfo=UTC)

    old = _process("process:z-old", 100, at(21, 0), at(21, 40), seen=at(22, 0))
    new = _process("process:a-new", 200, at(21, 41), at(21, 50), seen=at(21, 41))
    facts = collect_facts([_akkeris(), new, old])
    assert [p.pid for p in facts.processes] == [100, 200]


def test_an_undated_snapshot_seen_first_belongs_to_the_first_dated_object() -> None:
    """GIVEN the real akkeris pod and, seen a minute before it, a snapshot of the same UID with no
    creationTimestamp (SYNTHETIC: a partial object; resourceVersion 99)
    THEN both are one incarnation, created when the real object says: a UID names one object, and a
    snapshot that does not date its creation is not a second object."""
    real = _akkeris()
    undated = replace(
        real,
        dedupe_key=real.dedupe_key.rsplit(":", 1)[0] + ":99",
        observed_at=real.observed_at - timedelta(minutes=1),
        payload={**real.payload, "resource_version": "99", "created": None},
    )
    (inc,) = collect_facts([real, undated]).incarnations
    assert inc.created == datetime(2022, 1, 13, 21, 34, 30, tzinfo=UTC)
    assert [s.resource_version for s in inc.snapshots] == [99, 500400990]


def test_an_undated_snapshot_belongs_to_the_object_seen_just_before_it() -> None:
    """GIVEN under the akkeris pod's UID an earlier object (SYNTHETIC: created 20:00, seen 20:30,
    resourceVersion 98; a static pod's UID outlives its object), the real object (created 21:34:30, seen
    21:53:51), and a snapshot one minute after the real one with no creationTimestamp (SYNTHETIC,
    resourceVersion 500400991)
    THEN the undated snapshot is the real object's, the one seen just before it, not the first object's."""
    real = _akkeris()
    base = real.dedupe_key.rsplit(":", 1)[0]
    earlier = replace(
        real,
        dedupe_key=base + ":98",
        observed_at=datetime(2022, 1, 13, 20, 30, tzinfo=UTC),
        payload={**real.payload, "resource_version": "98", "created": "2022-01-13T20:00:00+00:00"},
    )
    undated = replace(
        real,
        dedupe_key=base + ":500400991",
        observed_at=real.observed_at + timedelta(minutes=1),
        payload={**real.payload, "resource_version": "500400991", "created": None},
    )
    first, second = collect_facts([undated, real, earlier]).incarnations
    assert [s.resource_version for s in first.snapshots] == [98]
    assert [s.resource_version for s in second.snapshots] == [500400990, 500400991]


def test_objects_under_one_uid_are_numbered_by_creation_not_by_when_they_were_seen() -> None:
    """GIVEN the real akkeris object (created 21:34:30, seen 21:53:51) and an older object under its UID
    (SYNTHETIC: created 20:00) whose only snapshot was seen later, at 22:00 (an import of an older file)
    THEN the older object is incarnation 0 and the real one incarnation 1: objects follow each other in
    the order they were created."""
    real = _akkeris()
    older = replace(
        real,
        dedupe_key=real.dedupe_key.rsplit(":", 1)[0] + ":98",
        observed_at=datetime(2022, 1, 13, 22, 0, tzinfo=UTC),
        payload={**real.payload, "resource_version": "98", "created": "2022-01-13T20:00:00+00:00"},
    )
    incs = collect_facts([real, older]).incarnations
    assert [(i.index, [s.resource_version for s in i.snapshots]) for i in incs] == [
        (0, [98]),
        (1, [500400990]),
    ]


def test_a_true_or_false_where_a_number_belongs_is_named_and_not_read_as_one_or_zero() -> None:
    """GIVEN the akkeris pod with its deletion grace as ``true`` (SYNTHETIC damage: JSON's true is not a
    number, though Python counts it as 1) THEN the grace is not read (None, not 1) and the value is named
    among the problems."""
    real = _akkeris()
    facts = collect_facts([replace(real, payload={**real.payload, "deletion_grace_seconds": True})])
    (snap,) = facts.snapshots
    assert snap.deletion_grace_seconds is None
    assert facts.problems == (f"{real.dedupe_key}: deletion_grace_seconds True is not an integer",)


def test_a_kubelet_process_seen_in_one_line_is_a_moment_and_no_problem() -> None:
    """GIVEN the akkeris pod and a kubelet process whose first and last lines are one instant (SYNTHETIC:
    an excerpt holding a single line of pid 300) THEN it is read from that instant to itself and nothing
    is named: a process seen once is not a process dated backwards."""
    once = datetime(2022, 1, 13, 21, 50, tzinfo=UTC)
    facts = collect_facts([_akkeris(), _process("process:once", 300, once, once, seen=once)])
    (read,) = facts.processes
    assert (read.first_at, read.last_at) == (once, once)
    assert facts.problems == ()


def test_a_kubelet_process_with_no_last_line_time_ends_at_its_first() -> None:
    """GIVEN the akkeris pod and a kubelet process with a first line at 21:50 and no last-line time,
    stored at 22:00 (SYNTHETIC) THEN it is read as the moment of its first line: where it ran is known
    from its lines, not from when it was stored."""
    first = datetime(2022, 1, 13, 21, 50, tzinfo=UTC)
    proc = _process("process:nolast", 300, first, first, seen=first.replace(hour=22, minute=0))
    proc = replace(proc, payload={**proc.payload, "last_at": None})
    (read,) = collect_facts([_akkeris(), proc]).processes
    assert (read.first_at, read.last_at) == (first, first)


def test_a_span_that_ends_as_it_starts_is_read_and_no_problem() -> None:
    """GIVEN the akkeris pod and a kubelet ``syncTerminatedPod`` span (SYNTHETIC, the span parser's shape)
    whose end is its start (a clock's resolution makes a fast call zero long) THEN its start and end are
    read at that instant and nothing is named: only an end before the start is wrong."""
    uid = _akkeris().pod_uid
    assert uid is not None
    base = span(uid, "syncTerminatedPod", 0, 1)
    start = datetime(2022, 1, 13, 21, 52, 51, 500000, tzinfo=UTC)
    zero = replace(base, payload={**base.payload, "start": start.isoformat(), "end": start.isoformat()})
    facts = collect_facts([_akkeris(), zero])
    assert sorted((e.name, e.at) for e in facts.worker_events) == [
        ("span:syncTerminatedPod:end", start),
        ("span:syncTerminatedPod:start", start),
    ]
    assert facts.problems == ()


def test_an_event_without_its_own_uid_is_known_by_its_key() -> None:
    """GIVEN the akkeris pod and an Event about it with no metadata.uid (SYNTHETIC: an event read from a
    text export that dropped it) THEN the event is still read, known by its observation's key: one event,
    never merged with another that also lacks a UID."""
    uid = _akkeris().pod_uid
    assert uid is not None
    base = event(uid, "ev-1", 0, "Killing", "Stopping container logs")
    a = replace(base, dedupe_key="event:a", payload={**base.payload, "uid": None})
    b = replace(base, dedupe_key="event:b", payload={**base.payload, "uid": None, "message": "again"})
    records = collect_facts([_akkeris(), a, b]).events
    assert sorted(r.uid for r in records) == ["event:a", "event:b"]


def test_an_error_syncing_pod_that_failed_a_kill_is_a_sync_error_of_its_kubelet_process() -> None:
    """GIVEN the akkeris pod and two kubelet lines about it (SYNTHETIC markers in the parser's shapes,
    docs/observations.md): an "Error syncing pod" at 21:52 (SyncError) and one at 21:54 whose err says
    KillPodSandbox failed (the parser's FailedKill), both of kubelet pid 4242
    THEN both are the pod's sync errors, each with its time and its process's pid: a sync that failed to
    kill is a failed sync all the same (the worker retries it)."""
    uid = _akkeris().pod_uid
    assert uid is not None
    at = [datetime(2022, 1, 13, 21, m, tzinfo=UTC) for m in (52, 54)]
    lines = []
    for when, reason in zip(at, ("SyncError", "FailedKill"), strict=True):
        m = marker(uid, 0, reason, "Error syncing pod, skipping")
        lines.append(
            replace(
                m, dedupe_key=f"{m.dedupe_key}{reason}", observed_at=when, payload={**m.payload, "pid": 4242}
            )
        )
    facts = collect_facts([_akkeris(), *lines])
    assert sync_errors(facts) == [(at[0], 4242), (at[1], 4242)]


def test_a_text_field_written_as_another_json_value_is_read_as_its_text() -> None:
    """GIVEN the akkeris pod with (SYNTHETIC: JSON from other tools writes them so) its Ready condition's
    status as JSON ``true`` and its ``logs`` container's last termination reason as the number 137 THEN
    they are read as the texts ``True`` (core/v1 ConditionStatus) and ``137``: a field the API types as a
    string is compared as one."""
    real = _akkeris()
    conditions = [{**c, "status": True} if c["type"] == "Ready" else c for c in real.payload["conditions"]]
    last = {"state": "terminated", "reason": 137, "exit_code": 137}
    status = {**real.payload["containers"][0], "last_state": last}
    seen = replace(real, payload={**real.payload, "conditions": conditions, "containers": [status]})
    facts = collect_facts([seen])
    (snap,) = facts.snapshots
    ready = snap.condition("Ready")
    assert ready is not None and ready.status == "True"
    assert [(c.name, c.last.reason if c.last else None) for c in snap.containers] == [("logs", "137")]
