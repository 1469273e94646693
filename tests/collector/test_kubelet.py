"""Kubelet metrics and logs through the API server's node proxy."""

from __future__ import annotations

import re
from datetime import UTC

import pytest

from collectors.kube import kubelet
from collectors.kube.kubelet import metrics_payload, pull_kubelet_logs, pull_kubelet_metrics
from collectors.kube.state import KUBELET_LOGS, KUBELET_METRICS, node_logs_resource
from collectors.models import CollectorState
from timelines.lifecycle.observation import Kind, Source

from .conftest import CLUSTER, stored

pytestmark = pytest.mark.django_db

METRICS = """\
# HELP kubelet_working_pods [ALPHA] Number of pods the kubelet is actually running
# TYPE kubelet_working_pods gauge
kubelet_working_pods{config="desired",lifecycle="sync",static=""} 3
kubelet_working_pods{config="desired",lifecycle="sync",static="true"} 1
kubelet_working_pods{config="orphan",lifecycle="terminating",static=""} 2
kubelet_working_pods{config="runtime_only",lifecycle="terminated",static="unknown"} 0
# HELP kubelet_desired_pods [ALPHA] The number of pods the kubelet is being instructed to run.
# TYPE kubelet_desired_pods gauge
kubelet_desired_pods{static=""} 3
kubelet_desired_pods{static="true"} 1
# HELP kubelet_restarted_pods_total [ALPHA] Number of pods restarted because of UID reuse
# TYPE kubelet_restarted_pods_total counter
kubelet_restarted_pods_total{static=""} 0
kubelet_restarted_pods_total{static="true"} 2
"""


def state(resource: str) -> CollectorState:
    return CollectorState.objects.get(cluster__name=CLUSTER, resource=resource)


def test_metrics_payload_sums_working_pods_by_lifecycle():
    payload = metrics_payload(METRICS)
    assert payload["working_pods"] == {"sync": 4, "terminating": 2, "terminated": 0}
    assert payload["desired_pods"] == 4 and payload["restarted_pods_total"] == 2
    assert payload["mirror_pods"] is None  # not exported by this kubelet
    assert {"lifecycle": "sync", "config": "desired", "static": "true", "value": 1} in payload[
        "working_pods_detail"
    ]
    assert metrics_payload(METRICS)["fingerprint"] == payload["fingerprint"]
    assert metrics_payload(METRICS.replace("} 2\n", "} 3\n"))["fingerprint"] != payload["fingerprint"]


def test_metrics_pull_stores_one_observation_per_node_and_drops_unchanged(sim):
    nodes = sorted(sim.server.cluster.kubelets)
    result = pull_kubelet_metrics(CLUSTER)
    assert result.skipped is None and not result.errors
    assert result.stored == len(nodes)
    obs = {o.node: o for o in stored(Kind.NODE_METRICS)}
    assert set(obs) == set(nodes)
    sample = obs[nodes[0]]
    assert sample.source == Source.KUBELET_METRICS
    expected = sum(sim.server.cluster.kubelets[nodes[0]].working_pods().values())
    assert sum(sample.payload["working_pods"].values()) == expected

    again = pull_kubelet_metrics(CLUSTER)  # nothing changed on the kubelets
    assert again.stored == 0 and again.unchanged == len(nodes)


def test_log_pull_parses_kubelet_lines_and_remembers_where_it_stopped(sim):
    # A node whose kubelet logs in a zone other than UTC: only the UTC journald prefix of each line
    # tells it, and every stored time must still be the UTC instant the line was written.
    kubelets = sorted(sim.server.cluster.kubelets.items())
    node, kubelet = next((n, k) for n, k in kubelets if k.lines and k.log_zone.utcoffset(None))
    first = pull_kubelet_logs(CLUSTER, nodes=[node])
    assert first.skipped is None and not first.errors, first.errors
    assert first.lines > 0 and first.stored > 0
    # Lines, plus one kubelet_process observation per minute the kubelet logged in (restarts, coverage).
    assert len(stored((Kind.WORKER, Kind.KUBELET_MARKER, Kind.KUBELET_PROCESS), node=node)) == first.stored
    written = {t.astimezone(UTC) for t, _line in kubelet.lines}
    times = {o.observed_at for o in stored((Kind.WORKER, Kind.KUBELET_MARKER), node=node)}
    assert times and times <= written
    assert state(node_logs_resource(node)).resource_version  # the time pulled up to

    second = pull_kubelet_logs(CLUSTER, nodes=[node])
    assert second.stored == 0  # only the boundary second again: it dedupes


def test_a_pulled_log_line_says_which_pull_and_line_it_came_from(sim):
    """GIVEN a node's kubelet log pulled through the node log proxy
    WHEN its lines are stored
    THEN each says where it came from (`timeline --explain` prints it): the pull (node, sinceTime) and
    the line of its response, as a file's lines say FILE:N."""
    node = next(n for n, k in sorted(sim.server.cluster.kubelets.items()) if k.lines)
    assert pull_kubelet_logs(CLUSTER, nodes=[node]).stored > 0
    wheres = [o.payload.get("where") for o in stored((Kind.WORKER, Kind.KUBELET_MARKER), node=node)]
    assert wheres and all(
        re.fullmatch(
            rf"GET nodes/{re.escape(node)}/proxy/logs since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ:\d+", w
        )
        for w in wheres
    ), wheres[:3]
    assert min(int(w.rsplit(":", 1)[1]) for w in wheres) >= 1  # 1-based, as a file's


def test_forbidden_node_proxy_skips_with_a_status_note(make_sim):
    make_sim(forbidden=("nodes/proxy",))
    logs = pull_kubelet_logs(CLUSTER)
    metrics = pull_kubelet_metrics(CLUSTER)
    for result, resource in ((logs, KUBELET_LOGS), (metrics, KUBELET_METRICS)):
        assert result.skipped and "403" in result.skipped
        note = state(resource).note
        assert note.startswith("skipped:") and "HTTP 403" in note and "nodes/proxy" in note
    assert not stored((Kind.WORKER, Kind.NODE_METRICS))
    assert pull_kubelet_logs(CLUSTER).skipped == state(KUBELET_LOGS).note  # not asked again for a while


def test_a_node_the_proxy_cannot_reach_is_reported_and_the_others_are_stored(sim, monkeypatch):
    """GIVEN one node whose kubelet the API server's proxy cannot reach (the connection is refused)
    WHEN the metrics are pulled
    THEN that node's error is reported by name and the other nodes' metrics are stored."""
    nodes = sorted(sim.server.cluster.kubelets)
    real = kubelet._get_metrics

    def refuse_first(client, node):
        if node == nodes[0]:
            raise ConnectionRefusedError(111, "Connection refused")
        return real(client, node)

    monkeypatch.setattr(kubelet, "_get_metrics", refuse_first)
    result = pull_kubelet_metrics(CLUSTER)
    assert len(result.errors) == 1 and result.errors[0].startswith(f"metrics from {nodes[0]}: ")
    assert result.stored == len(nodes) - 1


def test_a_bug_in_a_pull_is_raised_not_counted_as_a_node_error(sim, monkeypatch):
    """GIVEN a kubelet fetch that fails with an error no network or API explains (a bug)
    WHEN the metrics are pulled
    THEN the error goes up to the caller (the task or the runner logs its traceback) instead of being
    recorded as that node's failure."""

    def broken(client, node):
        raise TypeError("a bug")

    monkeypatch.setattr(kubelet, "_get_metrics", broken)
    with pytest.raises(TypeError, match="a bug"):
        pull_kubelet_metrics(CLUSTER)
