"""A cluster known from its audit log alone (issue #16, done-when 2).

GIVEN the mixed demo cluster (every scenario) auditing itself while the collector watches it WHEN its
audit log file alone is read by ``manage.py ingest_audit_log`` into another cluster THEN that cluster has
browsable pod timelines, every scenario's finding is there as the collector has it, and the findings
that differ are only those docs/audit.md ("Audit alone, and what only a watch knows") explains.
"""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from collectors.kube.resources import ALL_RESOURCES
from collectors.kube.runner import Collector
from tests.stored import rows_of
from timelines import derivation
from timelines.lifecycle.observation import Kind, Source
from timelines.models import Finding, Interval, Pod

from .conftest import CLUSTER, FAST, catch_up, on_virtual_time
from .test_scenario_findings import EXPECTED

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

AUDITED = "audit-only"
KUBELET_SOURCES = {Source.KUBELET_LOG, Source.KUBELET_SPAN, Source.KUBELET_METRICS}


def findings(cluster: str) -> dict[tuple[str, str], Finding]:
    return {(f.kind, f.subject_name): f for f in Finding.objects.filter(cluster__name=cluster)}


def only_a_watch_knows(finding: Finding) -> bool:
    """Evidence the audit log cannot hold: the kubelet's lines, spans, metrics, Events; or an interval
    still open when the history stopped (an audit-only cluster is offline: 'now' is its last request)."""
    if finding.attrs.get("open"):
        return True
    cited = rows_of(finding.cluster_id, ids=finding.evidence)
    return any(o.source in KUBELET_SOURCES or o.kind == Kind.EVENT for o in cited)


def only_the_audit_log_knows(finding: Finding) -> bool:
    """Refused evictions (a watch sees none), and a deletion dated when the API server made it where the
    watch dated it when it received it (a finalizer's removal: the terminating span is longer by the
    watch's lag, and may cross the threshold)."""
    if finding.kind == "pdb_blocking_drain":
        return bool(finding.attrs.get("refused_evictions"))
    return finding.kind == "stuck_terminating" and bool(finding.attrs.get("finalizers"))


def test_audit_alone_gives_the_collectors_findings(make_sim, monkeypatch, derive_worker, tmp_path):
    log = tmp_path / "audit.log"
    sim = make_sim("mixed", advance=0, audit_log_path=log)
    engine = sim.server.cluster.engine
    # The watch stamps arrivals with the demo's clock, as the audit log does: a loaded machine's delivery
    # lag would otherwise lengthen the watched terminating spans alone (a stuck_terminating the log lacks).
    on_virtual_time(monkeypatch, engine)
    for resource in ALL_RESOURCES:  # the first lists, before anything happens: every pod from its start
        assert sim.step(resource).ok
    collector = Collector([CLUSTER], tunables=FAST).start()
    try:
        sim.advance_watched(170)  # virtual seconds: the longest scenario takes 137
    finally:
        collector.stop()
    catch_up(sim)
    derive_worker.stop()
    derivation.drain()
    out = io.StringIO()
    call_command("ingest_audit_log", "--cluster", AUDITED, str(log), stdout=out)
    assert " 0 rejected" in out.getvalue()
    derivation.drain()

    # Browsable: every pod the audit log shows has its API and worker lanes, and its page renders.
    pods = list(Pod.objects.filter(cluster__name=AUDITED))
    assert len(pods) >= 20
    lanes = set(
        Interval.objects.filter(cluster__name=AUDITED, pod_uid__isnull=False).values_list("pod_uid", "lane")
    )
    assert all((p.uid, "api") in lanes and (p.uid, "worker") in lanes for p in pods)
    client = Client()
    client.force_login(User.objects.create_superuser("cmp", "c@example.org", "pw-123456789"))
    for pod in pods[:5]:
        assert client.get(f"/c/{AUDITED}/pods/{pod.uid}/").status_code == 200

    watched, audited = findings(CLUSTER), findings(AUDITED)
    for scenario, (kind, where) in EXPECTED.items():
        assert any(k == kind and re.fullmatch(where, name) for k, name in audited), (
            f"{scenario}: no {kind} from audit"
        )
    missing = [f for key, f in watched.items() if key not in audited and not only_a_watch_knows(f)]
    assert not missing, [(f.kind, f.subject_name, f.message) for f in missing]
    extra = [f for key, f in audited.items() if key not in watched and not only_the_audit_log_knows(f)]
    assert not extra, [(f.kind, f.subject_name, f.message) for f in extra]
