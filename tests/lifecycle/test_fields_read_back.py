"""Fields the lifecycle core reads from stored observations, each read back where a user sees it (issue #38:
a fresh mutation sample of ``timelines/lifecycle/`` found them read and never checked).

Real data where a real line or request holds the field (tests/fixtures/real/audit, its SOURCES.md); the
rest are hand-written observations (tests/lifecycle/factories.py), each test stating the rule it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.parsers.audit import parse_audit
from tests.lifecycle import scenarios
from tests.lifecycle.factories import NODE, Row, at, ctr, marker, pod, rows, span, t, worker
from timelines.lifecycle.audit_evidence import audit_lives, audit_snapshots, marker_of, read_audit
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.facts import canonical_observations, collect_facts
from timelines.lifecycle.observation import (
    InvalidObservation,
    Kind,
    Observation,
    Source,
    Transition,
    name_problem,
)
from timelines.lifecycle.resolve import Anchor, resolve_names
from timelines.lifecycle.schema import FindingDoc, PodDoc, read_timeline

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "audit"
UID = scenarios.UID


def audits(name: str) -> list[Observation]:
    return [o for o in parse_audit((REAL / name).read_bytes()).observations if o.kind == Kind.AUDIT]


# --- audited requests ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("log", "node"),
    [
        ("eks-2021-kubelet-status-patch-oomkilled.jsonl", "ip-00-00-00-00.eu-west-1.compute.internal"),
        ("kubeadm-1.20-kubelet-status-patch-running-malformed-line.jsonl", "node2"),
    ],
)
def test_a_kubelets_status_write_places_the_pod_on_its_node(log: str, node: str) -> None:
    """GIVEN a real audit log where a kubelet (``system:node:<node>``) patches a pod's status WHEN the pod's
    snapshots are read back from the requests alone THEN the pod is on that node: only the kubelet of the
    node a pod is bound to writes its status (the NodeRestriction admission plugin refuses any other
    node's), so the writer is the node."""
    obs = audits(log)
    records = [r for r in map(read_audit, obs) if r is not None]
    assert records and {r.actor_kind for r in records} == {"kubelet"}
    uid = next(r.uid for r in records if r.uid) if any(r.uid for r in records) else "audit-only"
    snapshots = audit_snapshots(uid, records)
    assert snapshots and {s.payload["node"] for s in snapshots} == {node}


def test_a_status_write_by_anyone_but_a_kubelet_places_the_pod_nowhere() -> None:
    """GIVEN the same real kubelet status patch, its actor taken to be a controller (a controller writes a
    pod's conditions too: the DisruptionTarget condition) WHEN the snapshots are read back THEN the pod
    is on no node: a controller's request names no node the pod runs on."""
    obs = audits("eks-2021-kubelet-status-patch-oomkilled.jsonl")
    as_controller = [
        replace(
            o, payload={**o.payload, "actor": {"kind": "controller", "name": "taint-eviction-controller"}}
        )
        for o in obs
    ]
    records = [r for r in map(read_audit, as_controller) if r is not None]
    assert {r.actor_kind for r in records} == {"controller"}
    assert {s.payload["node"] for s in audit_snapshots("audit-only", records)} == {None}


def test_a_deletions_marker_names_the_kind_of_actor() -> None:
    """GIVEN the real KodeKloud log, where a user (kubernetes-admin impersonating agent-smith) deletes a pod
    with kubectl WHEN the deletion's marker is made THEN it says the actor is a user, beside who it was,
    and the client the request came from (its User-Agent, an audit marker's ``user_agent`` attribute in
    docs/timeline-schema.md)."""
    obs = audits("kodekloud-2022-citadel-webapp-color-delete.jsonl")
    lives = audit_lives("citadel", "webapp-color", obs, [])
    records = [r for life in lives for r in map(read_audit, life.observations) if r is not None]
    deletes = [r for r in records if r.is_delete]
    assert deletes
    made = marker_of(deletes[0], records)
    assert made is not None
    assert made[2]["actor"] == "user"
    assert made[2]["who"].startswith("agent-smith, as kubernetes-admin")
    assert made[2]["user_agent"] == "kubectl/v1.20.0 (linux/amd64) kubernetes/af46c47"


def audited(payload: dict[str, Any]) -> Observation:
    """A stored audited request about default/web-1 (hand-written), its payload as given."""
    return Observation(
        kind=Kind.AUDIT,
        source=Source.AUDIT,
        observed_at=t(1),
        dedupe_key="audit:1",
        pod_uid=None,
        node=None,
        namespace="default",
        name="web-1",
        payload=payload,
    )


ACTORS = st.one_of(
    st.none(),
    st.text(max_size=5),
    st.lists(st.text(max_size=3), max_size=2),
    st.dictionaries(st.sampled_from(["kind", "name"]), st.one_of(st.none(), st.text(max_size=8)), max_size=2),
)


@given(actor=ACTORS, has_actor=st.booleans())
def test_any_stored_actor_reads_without_error(actor: Any, has_actor: bool) -> None:
    """GIVEN a stored audited pod request whose ``actor`` is anything JSON holds (a row stored by an older
    podlife, or a hand-edited bundle), or none WHEN it is read THEN reading never fails, and the actor's
    kind is the ``kind`` it names, or None when it names none."""
    payload: dict[str, Any] = {"resource": "pods", "verb": "delete"}
    if has_actor:
        payload["actor"] = actor
    record = read_audit(audited(payload))
    assert record is not None
    expected = actor.get("kind") or None if has_actor and isinstance(actor, dict) else None
    assert record.actor_kind == expected


@pytest.mark.parametrize("resource", ["poddisruptionbudgets", "nodes", None])
def test_a_request_on_another_resource_is_no_pods_record(resource: str | None) -> None:
    """GIVEN an audited request on a PodDisruptionBudget or a node that has a pod's namespace and name (a
    PDB is often named after its workload) WHEN the pod's requests are read THEN it is not one of them;
    nor is an observation of another kind that says ``resource: pods``. (Hand-written observations.)"""
    request = audited({"resource": resource, "verb": "delete", "actor": {"kind": "user", "name": "alice"}})
    assert read_audit(request) is None
    an_event = replace(request, kind=Kind.EVENT, payload={**request.payload, "resource": "pods"})
    assert read_audit(an_event) is None


# --- names --------------------------------------------------------------------------------------------------
def test_an_empty_uid_is_a_problem_and_an_empty_name_is_not_given() -> None:
    """An empty text is how the store keeps a namespace, node or name that was not given (a node-level line
    names none): not a problem. A pod UID is never empty (the API server sets one on every object), so an
    empty one names no incarnation and is a problem."""
    for field in ("namespace", "node", "name"):
        assert name_problem(field, "") is None
    assert name_problem("pod_uid", "") is not None
    assert name_problem("namespace", "Not_A_Label") is not None  # the rules still apply to a given one


def test_every_bad_name_of_an_observation_is_named_even_beside_a_list() -> None:
    """GIVEN an observation (SYNTHETIC, a hostile mapping record) whose pod UID is empty, namespace has a
    space, node is a list and name holds a slash WHEN it is made THEN it is refused naming each of the four,
    in that order: a list, which cannot be remembered as an answer, is no name either, and it does not
    hide the other names' problems."""
    with pytest.raises(InvalidObservation) as refused:
        Observation(
            kind=Kind.POD,
            source=Source.API,
            observed_at=t(1),
            dedupe_key="pod:x",
            pod_uid="",
            namespace="my shop",
            node=["node-1"],  # type: ignore[arg-type]
            name="web/1",
            payload={},
        )
    problems = refused.value.problems
    assert [p.split(" ", 1)[0] for p in problems] == ["pod_uid", "namespace", "node", "name"]
    assert problems[2] == "node must be a string, got list"


# --- timeline documents -------------------------------------------------------------------------------------
def test_a_timeline_that_is_not_an_object_is_refused_naming_what_it_is() -> None:
    """A timeline document (an API answer, a bundle's line) is a JSON object; anything else is refused with
    what it was, so a user reading the error knows which input was wrong."""
    with pytest.raises(ValueError, match=r"^timeline must be a JSON object, got list$"):
        read_timeline([])  # type: ignore[arg-type]


def test_a_finding_without_a_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^kind must be a non-empty string$"):
        FindingDoc(kind="", severity="warning", message="m", start="2024-01-01T00:00:00+00:00", end=None)


@pytest.mark.parametrize("field", ["created_at", "deleted_at", "first_observed", "last_observed"])
def test_a_pods_times_carry_their_offset(field: str) -> None:
    """Every time of a document is ISO 8601 with an offset (timezone-aware everywhere): a pod's creation,
    deletion and first and last sight without one are refused, naming the field."""
    aware: dict[str, Any] = {field: "2024-01-01T00:00:00.000001+02:00"}
    assert getattr(PodDoc(uid="u", namespace="default", name="web-1", node=None, **aware), field)
    naive: dict[str, Any] = {field: "2024-01-01T00:00:00"}
    with pytest.raises(ValueError, match=field):
        PodDoc(uid="u", namespace="default", name="web-1", node=None, **naive)


# --- facts --------------------------------------------------------------------------------------------------
def test_duplicates_that_differ_keep_the_same_one_whatever_their_order() -> None:
    """GIVEN two observations with one dedupe key and one time that differ in their payload (the store
    forbids it; a hand-edited bundle can hold it) WHEN they are made canonical in either order THEN the
    same one is kept: the derived timeline never depends on the order rows were read."""
    first = pod(UID, 100, 1.0, phase="Pending")
    second = replace(first, payload={**first.payload, "phase": "Running"})
    kept = [canonical_observations(order) for order in ([first, second], [second, first])]
    assert [len(k) for k in kept] == [1, 1]
    assert kept[0][0].payload == kept[1][0].payload  # (observations are equal by their key alone)


def test_an_unreadable_span_end_or_kubelet_start_is_a_problem_naming_its_observation() -> None:
    """GIVEN (SYNTHETIC: rows a hostile or broken ingest stored) a syncPod span whose ``end`` is not a time
    and a kubelet process whose ``started_at`` is not a time WHEN the pod's facts are read THEN both are
    still read (the span by its start alone, the process without a start line) and each problem
    names its observation (dedupe key) and the field."""
    good = span(UID, "syncPod", 1.0, 2.0)
    bad_span = replace(good, payload={**good.payload, "end": "later"})
    process = Observation(
        kind=Kind.KUBELET_PROCESS,
        source=Source.KUBELET_LOG,
        observed_at=t(0.5),
        dedupe_key="process:node-a:4321",
        node=NODE,
        payload={"pid": 4321, "first_at": at(0.5), "last_at": at(9.0), "started_at": "at boot", "starts": []},
    )
    facts = collect_facts([bad_span, process])
    assert [(e.name, e.at) for e in facts.worker_events] == [("span:syncPod:start", t(1.0))]
    assert [p.started_at for p in facts.processes] == [None]
    assert any(p.startswith(f"{bad_span.dedupe_key}: end") for p in facts.problems), facts.problems
    assert any(p.startswith("process:node-a:4321: started_at") for p in facts.problems), facts.problems


def test_a_containers_unreadable_start_is_a_problem_naming_its_observation() -> None:
    """GIVEN a pod snapshot whose container's ``started_at`` is not a time WHEN its facts are read THEN the
    snapshot is still read and the problem names the observation (its dedupe key) and the field."""
    bad = pod(UID, 105, 3.0, phase="Running", start_time=2, containers=[ctr("app", "running", started=2)])
    containers = [{**bad.payload["containers"][0], "started_at": "yesterday"}]
    bad = replace(bad, payload={**bad.payload, "containers": containers})
    facts = collect_facts([*scenarios.api_start(), bad])
    assert any(p.startswith(f"{bad.dedupe_key}: started_at") for p in facts.problems), facts.problems


def test_both_ends_of_a_span_are_on_the_spans_node() -> None:
    """A kubelet span's start and end are the pod worker's, on the node whose kubelet sent the span."""
    facts = collect_facts([span(UID, "syncPod", 1.0, 2.5)])
    assert [(e.name, e.node) for e in facts.worker_events] == [
        ("span:syncPod:start", NODE),
        ("span:syncPod:end", NODE),
    ]


# --- kubelet lines without a UID ----------------------------------------------------------------------------
OLD, NEW = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"


def owners(
    lines: Sequence[tuple[float, str]], evidence: Sequence[tuple[str, float, float]]
) -> list[str | None]:
    """Which incarnation each of ``lines`` (V2 ``SyncLoop`` lines naming ``default/web-0`` and no UID, at
    their second) is attached to, given each incarnation's kubelet evidence on the node (UID, first and
    last second). Hand-written lines."""
    nameless = [replace(worker(OLD, at_, tr, pod_ref="default/web-0"), pod_uid=None) for at_, tr in lines]
    anchors = [Anchor(uid, NODE, t(lo), t(hi), True, "default", "web-0") for uid, lo, hi in evidence]
    found = resolve_names(nameless, anchors)
    return [found.get(o.dedupe_key) for o in nameless]


def test_an_add_after_a_remove_begins_the_next_incarnations_lines() -> None:
    """GIVEN StatefulSet pod default/web-0 replaced on the same node: the old one's SyncLoop ADD, its
    containers seen until 20 s, its REMOVE at 50 s (the API object went), the new one's ADD at 51 s and its
    containers from 53 s WHEN the UID-less lines are attached THEN the REMOVE is the old incarnation's (it
    ends the life its ADD began, however near the new one's evidence), and the ADD after it the new one's."""
    lines = [(0, Transition.SYNCLOOP_ADD), (50, Transition.SYNCLOOP_REMOVE), (51, Transition.SYNCLOOP_ADD)]
    assert owners(lines, [(OLD, 1, 20), (NEW, 53, 60)]) == [OLD, OLD, NEW]


def test_each_part_of_a_life_split_by_a_lost_remove_goes_to_its_own_incarnation() -> None:
    """GIVEN web-0's lines on one node where the old incarnation's REMOVE is missing (a log rotated, or a
    kubelet restart between them): ADD at 0 s, an UPDATE at 10 s, then the new one's ADD at 30 s and an
    UPDATE at 40 s WHEN they are attached THEN the ADD inside the life splits it: the first part is the old
    incarnation's, the second the new one's (each part claimed by one incarnation's evidence)."""
    lines = [
        (0, Transition.SYNCLOOP_ADD),
        (10, Transition.SYNCLOOP_UPDATE),
        (30, Transition.SYNCLOOP_ADD),
        (40, Transition.SYNCLOOP_UPDATE),
    ]
    assert owners(lines, [(OLD, 1, 12), (NEW, 32, 45)]) == [OLD, OLD, NEW, NEW]


def test_lines_of_a_life_two_incarnations_share_go_to_the_one_whose_kubelet_evidence_is_nearest() -> None:
    """GIVEN web-0's UID-less UPDATE lines on one node with no ADD or REMOVE between the two incarnations (an
    excerpt that cut both: the old one's kubelet evidence 10-20 s, the new one's 30-40 s) WHEN they are
    attached THEN a line inside an incarnation's evidence, or nearer to it than to the other's, is that
    one's (5 s and 22 s: the old; 35 s and 41 s: the new), and a line as near to both (25 s) is nobody's:
    never guessed. Evidence from API snapshots (not on the kubelet's clock) does not place a line."""
    update = Transition.SYNCLOOP_UPDATE
    lines = [(5, update), (22, update), (25, update), (35, update), (41, update)]
    assert owners(lines, [(OLD, 10, 20), (NEW, 30, 40)]) == [OLD, OLD, None, NEW, NEW]
    # the same with an API-only third incarnation on the node: it claims nothing, and breaks no tie
    nameless = [replace(worker(OLD, at_, tr, pod_ref="default/web-0"), pod_uid=None) for at_, tr in lines]
    anchors = [
        Anchor(uid, NODE, t(lo), t(hi), True, "default", "web-0")
        for uid, lo, hi in ((OLD, 10, 20), (NEW, 30, 40))
    ]
    anchors.append(Anchor("api-only", NODE, t(24), t(26), False, "default", "web-0"))
    found = resolve_names(nameless, anchors)
    assert [found.get(o.dedupe_key) for o in nameless] == [OLD, OLD, None, NEW, NEW]


def test_a_lost_remove_splits_a_life_at_the_next_add_even_where_the_line_lies_nearer_the_new_one() -> None:
    """GIVEN the lines above with the new incarnation's SyncLoop ADD at 28 s (its REMOVE lost) WHEN they are
    attached THEN the ADD splits the life: the line at 25 s is before it and so the old incarnation's (the
    only one with evidence before the ADD), the ADD and what follows the new one's."""
    update = Transition.SYNCLOOP_UPDATE
    lines = [(22, update), (25, update), (28, Transition.SYNCLOOP_ADD), (35, update)]
    assert owners(lines, [(OLD, 10, 20), (NEW, 30, 40)]) == [OLD, OLD, NEW, NEW]


def test_a_line_whose_transition_is_no_text_neither_opens_nor_closes_a_life() -> None:
    """GIVEN web-0's lines of the lost-REMOVE case above, with (SYNTHETIC: a stored row from a hostile or
    broken ingest) a line between them whose ``transition`` is an object, not a name WHEN they are attached
    THEN it is a line of the life it falls in, like any UPDATE, and the rest are attached as before: a
    payload the parser did not write costs no read of the node's lines."""
    lines = [(0, Transition.SYNCLOOP_ADD), (10, Transition.SYNCLOOP_UPDATE), (30, Transition.SYNCLOOP_ADD)]
    nameless = [replace(worker(OLD, at_, tr, pod_ref="default/web-0"), pod_uid=None) for at_, tr in lines]
    odd = replace(nameless[1], dedupe_key="odd", payload={**nameless[1].payload, "transition": {"ADD": 1}})
    anchors = [Anchor(OLD, NODE, t(1), t(12), True, "default", "web-0")]
    anchors.append(Anchor(NEW, NODE, t(32), t(45), True, "default", "web-0"))
    found = resolve_names([*nameless, odd], anchors)
    assert [found.get(o.dedupe_key) for o in [*nameless, odd]] == [OLD, OLD, NEW, OLD]


def test_a_pod_known_from_its_requests_alone_keeps_its_name() -> None:
    """GIVEN the real KodeKloud log (no watch: only the requests about citadel/webapp-color) WHEN each
    incarnation's snapshots are read back from its requests THEN every snapshot names the pod: the name a
    user searches by, and the one the node and namespace pages list."""
    obs = audits("kodekloud-2024-citadel-webapp-color-deletes.jsonl")
    for life in audit_lives("citadel", "webapp-color", obs, []):
        records = [r for r in map(read_audit, life.observations) if r is not None]
        snapshots = audit_snapshots(life.uid, records, life.gone_by)
        assert snapshots and {(s.namespace, s.name) for s in snapshots} == {("citadel", "webapp-color")}


# --- a sync function's exit ---------------------------------------------------------------------------------
def terminating_exit(*error_at: float) -> list[Row]:
    """The worker lane of "SyncTerminatingPod enter" at 5 s and "SyncTerminatingPod exit" at 10 s, with an
    "Error syncing pod, skipping" at each of ``error_at`` (hand-written V4 lines, one kubelet process)."""
    lines = [worker(UID, 5.0, Transition.TERMINATING_ENTER), worker(UID, 10.0, Transition.TERMINATING_EXIT)]
    lines += [marker(UID, at_, "SyncError", "Error syncing pod, skipping") for at_ in error_at]
    return rows(derive_pod_timeline(lines), "worker")


def test_an_exit_ends_its_phase_unless_its_own_error_follows_at_once() -> None:
    """The pod worker logs "Error syncing pod, skipping" right after the sync function it called returned
    an error (pod_workers.go), and retries the same phase: an exit followed at once by an error (even in
    the same microsecond) did not end terminating; an error logged later belongs to a later sync and does
    not undo this exit."""
    ended = ("terminating", at(5.0), at(10.0), "observed")
    assert terminating_exit() == [ended]
    assert terminating_exit(40.0) == [ended]
    assert terminating_exit(10.0) == [("terminating", at(5.0), None, "observed")]


def test_an_add_after_a_remove_is_never_the_old_incarnations_even_alone() -> None:
    """GIVEN web-0's lines on one node: ADD at 0 s, REMOVE at 50 s, then ADD at 51 s and an UPDATE at 55 s,
    and evidence only of the old incarnation (its containers until 20 s) WHEN the lines are attached THEN
    the old one has its ADD and REMOVE, and the lines after the REMOVE belong to nobody yet: the API had
    removed the old pod, so what the kubelet was given next is another pod of that name (attached once
    its own evidence arrives, never guessed)."""
    lines = [
        (0, Transition.SYNCLOOP_ADD),
        (50, Transition.SYNCLOOP_REMOVE),
        (51, Transition.SYNCLOOP_ADD),
        (55, Transition.SYNCLOOP_UPDATE),
    ]
    assert owners(lines, [(OLD, 1, 20)]) == [OLD, OLD, None, None]
