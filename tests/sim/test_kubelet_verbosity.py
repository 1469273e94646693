"""The demo cluster's kubelets at the verbosity production runs (``kubelet_verbosity=2``).

GIVEN a scenario run twice with the same seed, its kubelets at ``--v=4`` and at ``--v=2`` WHEN their
journals are read THEN the V2 journal is exactly the V4 one without the lines above level 2 (no pod-worker
line at all), and podlife's parser and lifecycle core, fed the V2 journal and the API's watch history,
draw the worker phases the V4 lines observe: graded "inferred from kubelet lines", every known bound
where V4 puts it, nothing V4 contradicts.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from collectors.parsers.kubectl import read_kubectl_output
from collectors.parsers.kubelet_log import KubeletLogParser
from demo_cluster import SCENARIOS, SimCluster, install, run_sim
from demo_cluster.cli import add_arguments, build
from demo_cluster.kubelet import LEVELS
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation
from timelines.lifecycle.resolve import anchors_of, resolve_pod_observations
from timelines.lifecycle.timeline import PodTimeline

from .conftest import KHI_RE

# Pod-worker messages (V4): none of them may reach a V2 journal.
WORKER_MESSAGES = {
    "Pod is being synced for the first time",
    "SyncPod enter",
    "SyncPod exit",
    "SyncTerminatingPod enter",
    "SyncTerminatedPod exit",
    "Pod terminated all containers successfully",
    "Pod is complete and the worker can now stop",
    "Processing pod event",
}
TOLERANCE = timedelta(milliseconds=1)  # the sim logs a transition's lines a few µs apart


def run(name: str, verbosity: int, seed: int = 3) -> SimCluster:
    c = SimCluster(seed=seed)
    install(c, name, kubelet_verbosity=verbosity)
    c.run_until_idle(600)
    return c


def message(line: str) -> str:
    m = KHI_RE.match(line)
    assert m, line
    return str(json.JSONDecoder().raw_decode(m.group(6))[0])


def body(line: str) -> str:
    """A klog line without its header (times shift by a µs where fewer lines share an instant)."""
    return line.split("] ", 1)[1]


def timelines(c: SimCluster) -> dict[str, PodTimeline]:
    """Every pod's timeline from the kubelets' journals and the API's watch history, through the real
    parsers, the resolver and the lifecycle core (as the collector and the derive stage do)."""
    obs: list[Observation] = []
    for node, kubelet in c.kubelets.items():
        parser = KubeletLogParser(node=node, year=c.now.year, tz=UTC, prefix_tz=UTC)
        for line in kubelet.journal_since(None):
            obs.extend(parser.feed(line))
        obs.extend(parser.close())
        obs.extend(parser.processes())
        assert not parser.skipped.get("malformed"), node
    watch = "\n".join(
        orjson.dumps(
            {"type": e.type, "object": {"kind": "Pod", "apiVersion": "v1", **orjson.loads(e.data)}}
        ).decode()
        for e in c.store._hist
        if e.resource == "pods"
    )
    api = read_kubectl_output(watch, origin="watch")
    assert api.observations and not api.errors
    obs.extend(api.observations)
    unique = list({o.dedupe_key: o for o in obs}.values())
    candidates = [o for o in unique if o.pod_uid is None]
    anchors = anchors_of(o for o in unique if o.pod_uid)
    return {
        uid: derive_pod_timeline(
            resolve_pod_observations(uid, [o for o in unique if o.pod_uid == uid], candidates, anchors)
        )
        for uid in sorted({o.pod_uid for o in unique if o.pod_uid})
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_v2_journal_is_the_v4_one_without_the_lines_above_level_2(name: str) -> None:
    v4, v2 = run(name, 4), run(name, 2)
    assert list(v2.kubelets) == list(v4.kubelets)
    printed = 0
    for node in v4.kubelets:
        full = v4.kubelets[node].logs_since(None)
        low = v2.kubelets[node].logs_since(None)
        assert [body(ln) for ln in low] == [body(ln) for ln in full if LEVELS.get(message(ln), 4) <= 2]
        assert not {message(ln) for ln in low} & WORKER_MESSAGES
        printed += len(low)
    messages = {message(ln) for k in v2.kubelets.values() for ln in k.logs_since(None)}
    assert {"Kubelet version", "SyncLoop ADD", "SyncLoop (PLEG): event for pod"} <= messages
    assert printed < sum(len(k.lines) for k in v4.kubelets.values())


def test_v2_prints_what_v2_kubelets_print_for_a_start_and_a_kill() -> None:
    lines = [ln for k in run("stuck-terminating", 2).kubelets.values() for ln in k.logs_since(None)]
    pleg = [json.loads(ln.split("event=", 1)[1]) for ln in lines if "event=" in ln]
    # The sandbox starts first (PLEG reports it as a container), then the container; both die.
    assert [e["Type"] for e in pleg] == [
        "ContainerStarted",
        "ContainerStarted",
        "ContainerDied",
        "ContainerDied",
    ]
    assert pleg[0]["Data"] == pleg[3]["Data"] and pleg[1]["Data"] == pleg[2]["Data"]
    finished = [ln for ln in lines if '"Generic (PLEG): container finished"' in ln]
    assert len(finished) == 1 and "exitCode=137" in finished[0]  # it ignored SIGTERM
    assert sum('"Killing container with a grace period"' in ln for ln in lines) == 1
    assert sum('"Observed pod startup duration"' in ln for ln in lines) == 1


@pytest.mark.parametrize("name", ["delete-during-setup", "rollout", "node-shutdown", "stuck-terminating"])
def test_v2_lines_give_the_phases_v4_lines_observe(name: str) -> None:
    observed, inferred = timelines(run(name, 4)), timelines(run(name, 2))
    assert set(inferred) == set(observed)
    checked = 0
    for uid, tl in inferred.items():
        truth = observed[uid].lane("worker")
        lane = tl.lane("worker")
        assert lane, uid
        # No pod-worker line, so nothing is "observed"; the bounds come from V0–V2 lines (or the API).
        assert all(iv.source in ("kubelet", "inferred") for iv in lane), lane
        for iv in lane:
            if iv.state == "unknown":
                continue
            same = [t for t in truth if t.state == iv.state]
            assert same, (uid, iv.state, truth)
            if not iv.attrs.get("start_unknown"):
                assert any(abs(t.start - iv.start) <= TOLERANCE for t in same), (uid, iv, truth)
                checked += 1
            if iv.end is not None and not iv.attrs.get("end_unknown"):
                assert any(t.end is not None and abs(t.end - iv.end) <= TOLERANCE for t in same), (uid, iv)
                checked += 1
            elif iv.attrs.get("end_unknown"):
                # It lasted at least until its end (or its last evidence): V4 agrees.
                seen = iv.end or datetime.fromisoformat(iv.attrs["seen_until"])
                assert any(t.end is None or t.end >= seen - TOLERANCE for t in same), (uid, iv)
        assert {f.kind for f in tl.findings} >= {f.kind for f in observed[uid].findings} - {"slow_cleanup"}
    assert checked >= 3 * len(inferred)


def test_the_option_reaches_the_served_cluster_and_bad_levels_are_refused(tmp_path) -> None:
    with run_sim("delete-during-setup", kubeconfig_path=tmp_path / "kc", kubelet_verbosity=2) as sim:
        sim.cluster.advance(20)
        assert {k.verbosity for k in sim.cluster.kubelets.values()} == {2}
        assert sim.cluster.kubelet_verbosity == 2
    with pytest.raises(ValueError, match="kubelet_verbosity 11: expected a klog level from 0 to 10"):
        install(SimCluster(), "rollout", kubelet_verbosity=11)


def test_the_command_line_option_builds_v2_kubelets() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cluster = build(parser.parse_args(["--scenario", "rollout", "--kubelet-verbosity", "2"]))
    with cluster.engine.lock:
        cluster.advance(30)
    lines = [ln for k in cluster.kubelets.values() for ln in k.logs_since(None)]
    assert lines and max(LEVELS.get(message(ln), 4) for ln in lines) == 2
    assert parser.parse_args([]).kubelet_verbosity == 4
    with pytest.raises(SystemExit):
        parser.parse_args(["--kubelet-verbosity", "12"])


def test_manage_py_demo_takes_the_option() -> None:
    from demo_cluster.management.commands.demo import Command

    parser = Command().create_parser("manage.py", "demo")
    assert parser.parse_args(["--kubelet-verbosity", "2"]).kubelet_verbosity == 2
    assert parser.parse_args([]).kubelet_verbosity == 4
