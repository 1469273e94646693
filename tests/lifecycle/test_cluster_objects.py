"""Node and PDB timelines: golden lanes and findings, order independence."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest

from tests.lifecycle.factories import T0, node, node_metrics, pdb
from tests.lifecycle.factories import t as at
from timelines.lifecycle.cluster_objects import (
    CoveredPod,
    derive_node_timeline,
    derive_pdb_timeline,
    selector_matches,
)
from timelines.lifecycle.observation import Kind, Observation, Source


def test_node_lanes_ready_cordon_shutdown_and_working_pods():
    obs = [
        node(0),
        node(10),  # heartbeat-like duplicate state: merged into one interval
        node(20, unschedulable=True),
        node(30, ready="False", unschedulable=True, message="node is shutting down"),
        node_metrics(5, 10, 0, 0),
        node_metrics(25, 8, 2, 0),
        node_metrics(35, 8, 2, 0),
    ]
    timeline = derive_node_timeline(obs)
    ready = timeline.lanes["node:ready"]
    assert [(iv.state, iv.start, iv.end) for iv in ready] == [
        ("ready", at(0), at(30)),
        ("not_ready", at(30), None),
    ]
    assert timeline.spans("node:cordoned", "cordoned") == [(at(20), None)]
    assert timeline.spans("node:shutdown", "shutting_down") == [(at(30), None)]
    working = timeline.lanes["node:working_pods"]
    assert [(iv.start, iv.attrs) for iv in working] == [
        (at(5), {"sync": 10, "terminated": 0, "terminating": 0}),
        (at(25), {"sync": 8, "terminated": 0, "terminating": 2}),
    ]
    shuffled = list(obs) + obs[:3]
    random.Random(3).shuffle(shuffled)
    assert derive_node_timeline(shuffled) == timeline


def pod(
    uid: str, name: str, *, node: str = "node-a", controller: bool = True, target=(), labels=None
) -> CoveredPod:
    return CoveredPod(
        uid=uid,
        namespace="shop",
        name=name,
        node=node,
        labels=labels if labels is not None else {"app": "web"},
        has_controller=controller,
        created_at=T0 - timedelta(hours=1),
        disruption_target=tuple(target),
    )


def test_pdb_blocked_while_node_cordoned_is_a_blocking_drain():
    obs = [pdb(0, 1, healthy=3), pdb(60, 0), pdb(180, 1, healthy=3)]
    pods = [pod("u1", "web-1"), pod("u2", "web-2", node="node-b"), pod("x", "other", labels={"app": "db"})]
    timeline = derive_pdb_timeline(obs, pods=pods, cordons={"node-a": [(at(90), None)]})
    assert [(iv.state, iv.start, iv.end, iv.attrs["reason"]) for iv in timeline.intervals] == [
        ("allowed", at(0), at(60), "SufficientPods"),
        ("blocked", at(60), at(180), "InsufficientPods"),
        ("allowed", at(180), None, "SufficientPods"),
    ]
    assert timeline.covered == ("u1", "u2")
    [finding] = timeline.findings
    assert finding.kind == "pdb_blocking_drain"
    assert (finding.start, finding.end) == (at(90), at(180))
    assert finding.attrs["pod_uid"] == "u1"
    assert "shop/web-pdb allowed 0 disruptions (2 healthy, 2 needed)" in finding.message
    assert "cordoned node node-a" in finding.message


def test_a_pod_whose_own_granted_eviction_took_the_budget_to_zero_is_not_blocked():
    """GIVEN web-pdb (minAvailable 2) allowing 1 disruption with 3 healthy pods, and web-1's node cordoned
    WHEN a drain's eviction of web-1 is granted: the API server puts web-1 in status.disruptedPods and the
    budget drops to 0 (2 healthy, 2 needed), web-1 gets DisruptionTarget and terminates
    THEN nothing blocked the drain: the budget is 0 because web-1's own eviction consumed it (issue #34's
    false page). A second pod on the same node that the drain still has to evict is waiting, and flagged."""
    obs = [
        pdb(0, 1, healthy=3),
        pdb(31, 0, healthy=2, disrupted={"web-1": at(30)}),
        pdb(60, 1, healthy=3),
    ]
    pods = [
        pod("u1", "web-1", target=[(at(30), None)]),
        pod("u3", "web-3", node="node-b"),  # on another, uncordoned node: no drain waits on it
    ]
    timeline = derive_pdb_timeline(obs, pods=pods, cordons={"node-a": [(at(20), None)]})
    assert [iv.state for iv in timeline.intervals] == ["allowed", "blocked", "allowed"]
    assert not [f for f in timeline.findings if f.kind == "pdb_blocking_drain"]

    # disruptedPods alone (the pod's condition not seen yet) shows the same
    alone = derive_pdb_timeline(obs, pods=[pod("u1", "web-1")], cordons={"node-a": [(at(20), None)]})
    assert not alone.findings

    # another pod of the cordoned node, not evicted yet, is what the drain waits on while the budget is 0
    waiting = derive_pdb_timeline(
        obs,
        pods=[pod("u1", "web-1", target=[(at(30), None)]), pod("u2", "web-2")],
        cordons={"node-a": [(at(20), None)]},
    )
    [finding] = waiting.findings
    assert finding.attrs["pod_uid"] == "u2" and (finding.start, finding.end) == (at(31), at(60))


def test_a_pod_carrying_disruption_target_is_being_disrupted_not_blocked():
    """DisruptionTarget (set by a granted eviction, a preemption, the taint manager) says the pod is
    going: with the budget at 0 the whole time and its node cordoned, the drain waited on it only until
    the condition appeared."""
    obs = [pdb(0, 0)]
    timeline = derive_pdb_timeline(
        obs, pods=[pod("u1", "web-1", target=[(at(30), None)])], cordons={"node-a": [(at(10), None)]}
    )
    [finding] = timeline.findings
    assert (finding.kind, finding.start, finding.end) == ("pdb_blocking_drain", at(10), at(30))
    assert "cordoned node node-a" in finding.message


def test_unmanaged_pods_flagged_only_where_the_controller_lookup_happens():
    pods = [pod("u1", "solo-1", controller=False), pod("u2", "web-2")]
    with_int_min = derive_pdb_timeline([pdb(0, 1)], pods=pods)
    assert with_int_min.unmanaged == ("u1",)
    assert not [f for f in with_int_min.findings if f.kind == "pdb_unmanaged_pods"]

    scaled = derive_pdb_timeline([pdb(0, 1, max_unavailable=1)], pods=pods)
    [finding] = [f for f in scaled.findings if f.kind == "pdb_unmanaged_pods"]
    assert "shop/solo-1" in finding.message and finding.attrs["pods"] == ["u1"]


def test_a_percentage_min_available_looks_for_controllers_and_meets_the_unmanaged_pods():
    """GIVEN a PDB with ``minAvailable: "50%"`` over a pod with no controller WHEN it is derived THEN
    pdb_unmanaged_pods is raised: the disruption controller's getExpectedScale runs for maxUnavailable
    and for a percentage minAvailable (its expected count is the controllers' scale), and collects the
    pods without a controller there (k8s-facts §7, PR #103414); only an integer minAvailable skips it."""
    pods = [pod("u1", "solo-1", controller=False), pod("u2", "web-2")]
    plain = pdb(0, 1)
    percent = replace(plain, payload={**plain.payload, "min_available": "50%"})
    [finding] = [
        f for f in derive_pdb_timeline([percent], pods=pods).findings if f.kind == "pdb_unmanaged_pods"
    ]
    assert finding.attrs["pods"] == ["u1"]


def test_unmanaged_pods_event_is_a_finding():
    event = Observation(
        kind=Kind.EVENT,
        source=Source.API,
        observed_at=at(5),
        dedupe_key="event:e1:1",
        namespace="shop",
        name="web-pdb",
        payload={"reason": "UnmanagedPods", "type": "Warning", "message": "Pods selected by this ..."},
    )
    timeline = derive_pdb_timeline([pdb(0, 1), event], pods=[])
    [finding] = timeline.findings
    assert finding.kind == "pdb_unmanaged_pods" and finding.start == at(5)
    assert "event:e1:1" in finding.evidence
    # the finding carries the disruption controller's own words, the latest event's (the text of
    # pkg/controller/disruption: which selector, and what to set)
    later = Observation(
        kind=Kind.EVENT,
        source=Source.API,
        observed_at=at(9),
        dedupe_key="event:e1:2",
        namespace="shop",
        name="web-pdb",
        payload={"reason": "UnmanagedPods", "type": "Warning", "message": UNMANAGED_TEXT},
    )
    [finding] = derive_pdb_timeline([pdb(0, 1), event, later], pods=[]).findings
    assert finding.attrs == {"pods": [], "event": UNMANAGED_TEXT}


UNMANAGED_TEXT = (
    "Pods selected by this PodDisruptionBudget (selector: &LabelSelector{MatchLabels:map[string]string{app: "
    "web,},MatchExpressions:[]LabelSelectorRequirement{},}) were found to be unmanaged. As a result, the "
    "status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for "
    'these pods please set ".spec.minAvailable" field of the PDB to an integer value.'
)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({"match_labels": {"app": "web"}}, {"app": "web", "x": "1"}, True),
        ({"match_labels": {"app": "web"}}, {"app": "db"}, False),
        ({}, {"anything": "goes"}, True),
        (None, {"app": "web"}, False),
        (
            {"match_expressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            {"tier": "b"},
            True,
        ),
        (
            {"match_expressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]},
            {"tier": "a"},
            False,
        ),
        ({"match_expressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
        ({"match_expressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web"}, True),
        # labels.Requirement.Matches: NotIn matches a pod without the key, or with another value; In
        # needs the key; Exists / DoesNotExist ask for the key alone.
        ({"match_expressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"match_expressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {"tier": "b"}, True),
        ({"match_expressions": [{"key": "tier", "operator": "In", "values": ["a"]}]}, {}, False),
        ({"match_expressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"match_expressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": "a"}, False),
        # Every requirement must hold (matchLabels and matchExpressions are ANDed).
        (
            {
                "match_labels": {"app": "web"},
                "match_expressions": [
                    {"key": "tier", "operator": "Exists"},
                    {"key": "canary", "operator": "DoesNotExist"},
                ],
            },
            {"app": "web", "tier": "a", "canary": "yes"},
            False,
        ),
        (
            {"match_labels": {"app": "web"}, "match_expressions": [{"key": "tier", "operator": "Exists"}]},
            {"app": "db", "tier": "a"},
            False,
        ),
        # An operator LabelSelectorAsSelector refuses ("is not a valid label selector operator") selects
        # nothing, whatever the labels.
        ({"match_expressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}, {"tier": "2"}, False),
    ],
)
def test_selector_semantics(selector, labels, expected):
    assert selector_matches(selector, labels) is expected


def test_one_finding_per_pod_for_a_budget_that_stays_zero():
    """The healthy count moves (two blocked intervals back to back) while the pod sits on a cordoned node
    and is not evicted: one finding for the pod over both, citing both status writes."""
    obs = [pdb(0, 0, healthy=2), pdb(30, 0, healthy=1), pdb(90, 1, healthy=3)]
    pods = [pod("u1", "web-1")]
    timeline = derive_pdb_timeline(obs, pods=pods, cordons={"node-a": [(at(5), None)]})
    assert [iv.state for iv in timeline.intervals] == ["blocked", "blocked", "allowed"]
    [finding] = timeline.findings
    assert (finding.start, finding.end) == (at(5), at(90))
    assert "runs on cordoned node node-a, not yet evicted" in finding.message
    assert set(finding.evidence) == {"pdb:pdb-uid-1:0", "pdb:pdb-uid-1:30000"}


def test_one_finding_per_pod_for_two_blocked_spells_and_refusals():
    """Two separate spells at 0 (a replacement became ready between them) and refused evictions in both:
    still one pdb_blocking_drain for the pod, from the first wait to the last refusal."""
    from tests.lifecycle.test_audit_evidence import audits_of, eviction

    obs = [pdb(0, 0), pdb(40, 1, healthy=3), pdb(41, 0), pdb(90, 1, healthy=3)]
    refused = audits_of(
        eviction("e-1", 12, "web-1", refused=True), eviction("e-2", 50, "web-1", refused=True)
    )
    timeline = derive_pdb_timeline(
        [*obs, *refused], pods=[pod("u1", "web-1")], cordons={"node-a": [(at(10), None)]}
    )
    [finding] = timeline.findings
    assert (finding.start, finding.end, finding.attrs["refused_evictions"]) == (at(10), at(90), 2)


def test_a_drain_waits_on_a_pod_only_from_its_creation():
    """A pod created on the node after the cordon (a DaemonSet's pod tolerates unschedulable) cannot have
    been waited on before it existed: its finding starts when it was created."""
    late = CoveredPod(
        uid="u9",
        namespace="shop",
        name="web-9",
        node="node-a",
        labels={"app": "web"},
        created_at=at(40),
    )
    timeline = derive_pdb_timeline([pdb(0, 0)], pods=[late], cordons={"node-a": [(at(10), None)]})
    [finding] = timeline.findings
    assert (finding.start, finding.end) == (at(40), None)


def test_a_deleted_pdb_names_itself_and_ends_when_it_was_deleted():
    """GIVEN PDB shop/web-pdb seen allowing 1 disruption at T0, blocking at T0+10, and its deletion
    (a watch's DELETED) at T0+30 THEN its timeline names that PDB (uid, namespace, name: what the pages
    and the store key it by), says it was deleted at T0+30, and its lane ends there."""
    deleted = replace(pdb(30, 0), kind=Kind.PDB_DELETED, dedupe_key="pdb-deleted:pdb-uid-1")
    timeline = derive_pdb_timeline([pdb(0, 1), pdb(10, 0), deleted])
    assert (timeline.uid, timeline.namespace, timeline.name) == ("pdb-uid-1", "shop", "web-pdb")
    assert timeline.deleted_at == at(30)
    assert [(iv.lane, iv.state, iv.start, iv.end) for iv in timeline.intervals] == [
        ("pdb:web-pdb", "allowed", at(0), at(10)),
        ("pdb:web-pdb", "blocked", at(10), at(30)),
    ]


def test_the_kubelet_lane_bars_each_process_from_its_start_to_its_last_line():
    """GIVEN the node's kubelet pid 100 logging from T0 to T0+50 (its start line at T0), then pid 200
    started at T0+60 and logging to T0+90 THEN the node's kubelet lane has one bar per process, each from
    its start to its last line, the second a restart (it started after the first one's last line)."""
    from tests.lifecycle.test_worker_lane import process

    timeline = derive_node_timeline(
        [node(0), process(100, 0, 50, started=0), process(200, 60, 90, started=60)]
    )
    bars = timeline.lanes["node:kubelet"]
    assert [(iv.attrs["pid"], iv.start, iv.end, iv.attrs["restart"]) for iv in bars] == [
        (100, at(0), at(50), False),
        (200, at(60), at(90), True),
    ]
