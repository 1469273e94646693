"""How a pod snapshot is read into facts (issue #38, survivors of sample fresh-1207y in facts._Reader):
which node a snapshot puts the pod on, and what a malformed entry costs the rest of the snapshot.

Input: the real pod of tests/fixtures/real/kubelet/akkeris-2022-pod-being-deleted.json (README there:
``sam/logs-c6f97b6bd-tl7t5`` on ``ip-10-84-25-128.us-west-2.compute.internal``, its container ``logs``
running, deletion requested), read by the collector's own ``pod_observation``. Where a test damages it,
the damage is SYNTHETIC and says so."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from collectors.parsers.k8s_objects import pod_observation
from timelines.lifecycle.facts import collect_facts
from timelines.lifecycle.observation import Observation, Source

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
