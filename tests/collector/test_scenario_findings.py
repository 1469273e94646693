"""Every demo scenario, collected through the real client, yields the findings a person would expect.

GIVEN the mixed demo cluster (every scenario at once) WHEN the collector's threads watch it and pull the
kubelet's metrics and logs while the scenarios play out, and a derive worker derives what they store, THEN each scenario's anomaly is flagged on the
right pod or PDB, from evidence the collector stored.

The demo cluster runs on virtual time, stepped by the test; the whole process reads that clock (the
collector stamps what it receives, the lifecycle core measures open intervals against "now"), so the
story is the one a real cluster would tell at one second per second, only faster.
"""

from __future__ import annotations

import re
import time

import pytest

from collectors.kube.resources import ALL_RESOURCES
from collectors.kube.runner import Collector
from timelines.models import Finding, Interval

from .conftest import CLUSTER, FAST, on_virtual_time

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# scenario → (finding kind, the subject it must name: namespace/name; "-N" is a later loop of the scenario)
EXPECTED = {
    "delete-during-setup": ("killed_during_setup", r"demo/slow-start(-\d+)?-[a-z0-9]{5}"),
    "stuck-terminating": ("stuck_terminating", r"demo/stubborn(-\d+)?-[a-z0-9]{5}"),
    "node-shutdown": ("node_shutdown", r"demo/worker(-\d+)?-[a-z0-9]{10}-[a-z0-9]{5}"),  # Deployment pods
    "static-pod-uid-reuse": ("uid_reuse", r"kube-system/etcd-backup(-\d+)?-static-node-\d+"),
    "pdb-unmanaged-pods": ("pdb_unmanaged_pods", r"demo/consul(-\d+)?-pdb"),
    "drain-blocked-by-pdb": ("pdb_blocking_drain", r"demo/api(-\d+)?-pdb"),
}


def test_every_scenario_produces_its_findings(make_sim, monkeypatch, derive_worker):
    sim = make_sim("mixed", advance=0)
    engine = sim.server.cluster.engine
    on_virtual_time(monkeypatch, engine)
    for resource in ALL_RESOURCES:  # the first lists, before anything happens: every pod from its start
        assert sim.step(resource).ok
    collector = Collector([CLUSTER], tunables=FAST).start()
    try:
        sim.advance_watched(170)  # virtual seconds: the longest scenario takes 137
        deadline = time.monotonic() + 60  # the derive worker's last batches
        while not _all_found() and time.monotonic() < deadline:
            sim.advance_watched(1.0)
    finally:
        collector.stop()
    found = {(f.kind, f.subject_name) for f in Finding.objects.filter(cluster__name=CLUSTER)}
    for scenario, (kind, where) in EXPECTED.items():
        assert any(k == kind and re.fullmatch(where, name) for k, name in found), (
            f"{scenario}: no {kind} in {sorted(found)}"
        )
    # The kubelet's own account reached the timelines: worker phases observed from its log lines.
    assert Interval.objects.filter(cluster__name=CLUSTER, lane="worker", source="observed").exists()
    assert Interval.objects.filter(cluster__name=CLUSTER, pod_uid=None, lane="node:working_pods").exists()


def _all_found() -> bool:
    kinds = set(Finding.objects.filter(cluster__name=CLUSTER).values_list("kind", flat=True))
    return all(kind in kinds for kind, _ in EXPECTED.values())
