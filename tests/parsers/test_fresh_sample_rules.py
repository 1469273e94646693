"""Rules of the world that a fresh mutation sample of ``collectors/parsers/`` (seed fresh-1207z, issue #38)
showed unstated: a GKE resourceName that names a cluster-scoped collection, the time of a PodDisruptionBudget
snapshot an audit event shows, the kubelet's Killing event of a restart, the count of lines the parser
failed on, and the source line of the eviction manager's ranking.

Real lines come from tests/fixtures/real (tests/fixtures/real/SOURCES.md names each source); the GKE entry
and the drain are the hand-written fixtures of tests/fixtures/audit (its README says so); hand-changed
lines are labelled synthetic.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from collectors.parsers.audit import parse_audit
from collectors.parsers.kubelet_log import KubeletLogParser, MarkerReason, parse_kubelet_log
from timelines.lifecycle.observation import Kind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REAL_KUBELET = FIXTURES / "real" / "kubelet"


def _real_line(name: str, number: int) -> str:
    return (REAL_KUBELET / name).read_text(encoding="utf-8").splitlines()[number - 1]


# -- audit ---------------------------------------------------------------------------------------------


def test_a_gke_resource_name_of_group_version_resource_is_a_cluster_scoped_collection() -> None:
    """GKE writes ``resourceName`` as ``<group>/<version>[/namespaces/<ns>]/<resource>[/<name>[/<sub>]]``
    (k8s-facts.md §13.7; the create of a pod names its collection, ``core/v1/namespaces/shop/pods``). A
    create of a cluster-scoped object names its collection with three parts, ``core/v1/nodes``: a resource
    request on nodes, whose Node answer is read as a snapshot, not a non-resource URL.

    synthetic: the hand-written GKE fixture's first entry (a cordon of worker-1) turned into the create of
    Node worker-2, as GKE would log a node registering."""
    entries = json.loads((FIXTURES / "audit" / "gke-logentries.json").read_text())
    entry = json.loads(json.dumps(entries[0]))
    proto = entry["protoPayload"]
    proto["methodName"] = "io.k8s.core.v1.nodes.create"
    proto["resourceName"] = "core/v1/nodes"
    node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "worker-2"}}
    proto["request"] = {"@type": "core.k8s.io/v1.Node", **node}
    proto["response"] = {
        "@type": "core.k8s.io/v1.Node",
        **node,
        "metadata": {
            "name": "worker-2",
            "uid": "8e0f8a7c-1b7e-4f0e-9a57-2f4c1f6d2a10",
            "resourceVersion": "100",
        },
    }
    result = parse_audit(json.dumps([entry]).encode())
    assert (result.events, result.used, result.skipped) == (1, 1, Counter())
    (audit,) = [o for o in result.observations if o.kind == Kind.AUDIT]
    # the collection names no object: the created one is named by the Node the API server answered with
    assert (audit.payload["verb"], audit.payload["resource"], audit.name) == ("create", "nodes", "worker-2")
    assert [(o.kind, o.name) for o in result.observations if o.kind != Kind.AUDIT] == [
        (Kind.NODE, "worker-2")
    ]


def test_a_budgets_snapshot_in_an_audit_event_is_observed_when_the_write_completed() -> None:
    """An audit event's object is the state the API server answered with when the request completed: the
    PodDisruptionBudget ``shop/web`` the disruption controller's status writes return (tests/fixtures/audit
    drain, RequestResponse level) is observed at each write's ``stageTimestamp`` (ResponseComplete), as a
    Pod's or a Node's is."""
    result = parse_audit((FIXTURES / "audit" / "drain-refused-evictions.jsonl").read_bytes())
    budgets = [o for o in result.observations if o.kind == Kind.PDB]
    assert [(o.namespace, o.name, o.observed_at) for o in budgets] == [
        ("shop", "web", datetime(2024, 6, 7, 6, 54, 18, 329363, tzinfo=UTC)),
        ("shop", "web", datetime(2024, 6, 7, 6, 54, 20, 221708, tzinfo=UTC)),
    ]


# -- kubelet log ---------------------------------------------------------------------------------------

KILLING_ECHO = _real_line("kueue-4669-kind-1.31-v3.journal", 32)


def test_a_killing_event_is_a_termination_only_when_it_stops_the_container() -> None:
    """kuberuntime_container.go's killContainer records reason ``Killing`` with ``Stopping container C``
    when the pod's containers are stopped (kueue#4669, kind 1.31: group-0's container c), but with the
    reason computePodActions gave when the container is to be restarted: ``Container C failed liveness
    probe, will be restarted`` (the containerMessage of aks-2025-1.31-liveness-probe-restart.journal line
    9). Only the first is a KillingContainer marker; a restart's Killing says nothing of termination."""
    (marker,) = parse_kubelet_log([KILLING_ECHO], node="kind-worker", year=2025, tz=UTC).observations
    assert (marker.kind, marker.namespace, marker.name) == (Kind.KUBELET_MARKER, "pod-e2e-dx5dg", "group-0")
    assert (marker.payload["reason"], marker.payload["container"]) == (MarkerReason.KILLING_CONTAINER, "c")
    # synthetic: the same echo with the liveness restart's message (aks-2025 line 9's containerMessage).
    restart = KILLING_ECHO.replace(
        'message="Stopping container c"', 'message="Container c failed liveness probe, will be restarted"'
    )
    assert restart != KILLING_ECHO
    assert parse_kubelet_log([restart], node="kind-worker", year=2025, tz=UTC).observations == []


def test_every_line_the_parser_fails_on_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """``skipped`` counts the lines that gave nothing, one each: when the parser fails on every line of a
    real log (a bug of podlife's, simulated here since a known one would be fixed), each is counted as
    ``parser_error`` and each is named with where it was."""
    lines = (REAL_KUBELET / "kueue-4669-kind-1.31-v3.journal").read_text(encoding="utf-8").splitlines()[13:16]

    def failing(self: KubeletLogParser, line: str | bytes) -> list[Any]:
        raise KeyError("transition")

    monkeypatch.setattr(KubeletLogParser, "_feed", failing)
    result = parse_kubelet_log(lines, node="kind-worker", year=2025, tz=UTC, source="kubelet.log")
    assert result.observations == [] and result.lines_read == 3
    assert result.skipped == Counter(parser_error=3)
    assert result.errors == [f"kubelet.log:{n}: KeyError: 'transition'" for n in (1, 2, 3)]


def test_each_pod_the_eviction_manager_ranks_names_the_source_line_that_ranked_it() -> None:
    """kubernetes#132001: ``eviction_manager.go:405] "Eviction manager: pods ranked for eviction"`` lists
    three pods; each is a marker with its place in the list, and each keeps the klog header's caller
    (eviction_manager.go:405), the kubelet source line that wrote it, as every marker does."""
    line = _real_line("k8s-132001-eviction-2025.journal", 1)
    result = parse_kubelet_log([line], node="192-168-250-5", year=2025, tz=UTC)
    assert [
        (o.namespace, o.name, o.payload["rank"], o.payload["ranked"], o.payload["caller"])
        for o in result.observations
    ] == [
        ("sre", "infras-logstash-d484d57fc-rkx95", 0, 3, "eviction_manager.go:405"),
        ("sre", "admin-api-server-847868d7b-7sqdm", 1, 3, "eviction_manager.go:405"),
        ("scrm", "portal-h5-7c46694b8f-bkz95", 2, 3, "eviction_manager.go:405"),
    ]


# -- syslog ----------------------------------------------------------------------------------------------


def test_an_rfc5424_line_without_an_app_name_names_no_process() -> None:
    """RFC 5424 §6.2.5: APP-NAME is the NILVALUE ``-`` when the sender does not know it. Such a header
    names no process (no ident to tell a kubelet's line from another's): it gives no journald prefix, and
    the text after the header is read as it is, so a klog line behind it is still a klog line.

    synthetic: the RFC 5424 header of test_klog_format's forwarded kubelet line with APP-NAME ``-``."""
    from collectors.parsers.klog import split_journald_prefix

    text = 'I1129 18:13:10.313421    3112 kubelet.go:2400] "SyncTerminatingPod exit" pod="default/nginx"'
    named, named_text = split_journald_prefix(
        "<30>1 2024-11-29T18:13:10.313+02:00 aks-np kubelet 3112 - - " + text
    )
    assert named is not None and (named.ident, named_text) == ("kubelet", text)
    assert split_journald_prefix("<30>1 2024-11-29T18:13:10.313+02:00 aks-np - 3112 - - " + text) == (
        None,
        text,
    )
