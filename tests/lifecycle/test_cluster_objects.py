"""Node and PDB timelines: golden lanes and findings, order independence."""

from __future__ import annotations

import random
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


def test_pdb_blocking_a_pod_with_disruption_target():
    obs = [pdb(0, 0)]
    timeline = derive_pdb_timeline(obs, pods=[pod("u1", "web-1", node=None, target=[(at(30), at(50))])])
    [finding] = timeline.findings
    assert (finding.kind, finding.start, finding.end) == ("pdb_blocking_drain", at(30), at(50))
    assert "carries DisruptionTarget" in finding.message


def test_unmanaged_pods_flagged_only_where_the_controller_lookup_happens():
    pods = [pod("u1", "solo-1", controller=False), pod("u2", "web-2")]
    with_int_min = derive_pdb_timeline([pdb(0, 1)], pods=pods)
    assert with_int_min.unmanaged == ("u1",)
    assert not [f for f in with_int_min.findings if f.kind == "pdb_unmanaged_pods"]

    scaled = derive_pdb_timeline([pdb(0, 1, max_unavailable=1)], pods=pods)
    [finding] = [f for f in scaled.findings if f.kind == "pdb_unmanaged_pods"]
    assert "shop/solo-1" in finding.message and finding.attrs["pods"] == ["u1"]


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
    ],
)
def test_selector_semantics(selector, labels, expected):
    assert selector_matches(selector, labels) is expected


def test_one_finding_per_pod_for_a_budget_that_stays_zero():
    """The healthy count moves (two blocked intervals back to back) and the pod both carries
    DisruptionTarget and sits on a cordoned node: still one finding for the pod, naming both causes."""
    obs = [pdb(0, 0, healthy=2), pdb(30, 0, healthy=1), pdb(90, 1, healthy=3)]
    pods = [pod("u1", "web-1", target=[(at(10), at(60))])]
    timeline = derive_pdb_timeline(obs, pods=pods, cordons={"node-a": [(at(5), None)]})
    assert [iv.state for iv in timeline.intervals] == ["blocked", "blocked", "allowed"]
    [finding] = timeline.findings
    assert (finding.start, finding.end) == (at(5), at(90))
    assert "carries DisruptionTarget and runs on cordoned node node-a" in finding.message
    assert set(finding.evidence) == {"pdb:pdb-uid-1:0", "pdb:pdb-uid-1:30000"}
