"""Which kubelet reports say a pod outlived its grace period (issue #38, survivors of sample fresh-1207y in
findings._grace_signal).

The kubelet's word on it is killPodNow's (k8s-facts §1.4): when the runtime has not stopped the pod
within max(10 s, 1.5 x grace) it records the ExceededGracePeriod event, "Container runtime did not kill the
pod within specified grace period." Lines are written from the kubelet source's formats
(tests/lifecycle/kubelet_spec.py) and read by the real parser; hand-built observations use the parsers'
shapes (tests/lifecycle/factories.py). Neither is a sample: each is labelled SYNTHETIC."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

from tests.lifecycle import kubelet_spec as ks
from tests.lifecycle import scenarios
from tests.lifecycle.factories import marker, t
from tests.lifecycle.test_kubelet_spec import parse_files, timelines
from timelines.lifecycle.derive import derive_pod_timeline

UID = scenarios.UID
EVICTED_UID = "8f0c2d9e-1111-4a5b-9c3d-0000000000e1"
KILL_TIMEOUT_TEXT = "Container runtime did not kill the pod within specified grace period."


def test_a_kubelet_line_saying_the_runtime_did_not_kill_the_pod_in_grace_is_a_grace_report() -> None:
    """GIVEN scenarios.stuck_terminating (DELETE at 20.45 s with grace 30, the container never stops, last
    seen still terminating at 200 s) with its ExceededGracePeriod event replaced by the kubelet's own line
    of that text at 65 s (SYNTHETIC: the parser's GraceExceeded marker, docs/observations.md, of a line
    saying killPodNow's "did not kill the pod within specified grace period")
    THEN the termination has a grace_exceeded finding citing that line: the kubelet's log says what its
    event says."""
    obs = [o for o in scenarios.stuck_terminating() if o.dedupe_key != "event:ev-exceeded:1"]
    line = marker(UID, 65.0, "GraceExceeded", KILL_TIMEOUT_TEXT)
    tl = derive_pod_timeline([*obs, line])
    (found,) = [f for f in tl.findings if f.kind == "grace_exceeded"]
    assert (found.start, found.end, found.attrs["reports"]) == (t(20.45), t(65.0), 1)
    assert line.dedupe_key in found.evidence
    assert "GraceExceeded" in found.message


def _evicted_with_cleanup_timeout() -> list[str]:
    """SYNTHETIC (kubelet_spec, 1.31, V4): a pod evicted by the kubelet's eviction manager (grace 1 s) whose
    container stops 0.5 s after the kill, and whose cleanup (volumes, cgroups) then takes 40 s, so the
    eviction manager's wait for it (podCleanupTimeout, 30 s after "pods evicted, waiting for pod to be
    cleaned up") ends with "Eviction manager: timed out waiting for pods to be cleaned up" instead of
    "... pods successfully cleaned up" (eviction_manager.go waitForPodsCleanup; docs/kubelet-lines.md)."""
    life = ks.new_life(random.Random(3), "evicted", EVICTED_UID)
    life.stop_s, life.cleanup_s = 0.5, 40.0
    lines = []
    for line in ks.life_lines(life, "1.31"):
        if line.message == "Eviction manager: pods successfully cleaned up":
            continue
        lines.append(line)
        if line.message == "Eviction manager: pods evicted, waiting for pod to be cleaned up":
            lines.append(
                replace(
                    line,
                    at=line.at + timedelta(seconds=30),
                    message="Eviction manager: timed out waiting for pods to be cleaned up",
                    caller="eviction_manager.go:471",
                )
            )
    return ks.render(ks.at_verbosity(lines, 4), "1.31", "klog")


def test_an_eviction_managers_cleanup_timeout_is_not_a_grace_period_report() -> None:
    """GIVEN the evicted pod above: its container died 0.5 s after a kill with a 1 s grace, and 30 s later
    the eviction manager timed out waiting for its cleanup
    THEN there is no grace_exceeded finding: that timeout says the pod's resources were not reclaimed 30 s
    after its kill returned (the kill, and so the grace period, was over), not that a container outlived
    its grace. The eviction itself is still found."""
    tl = timelines(parse_files([_evicted_with_cleanup_timeout()]))[EVICTED_UID]
    assert "EvictionCleanupTimeout" in {m.reason for m in tl.markers}
    assert [f.kind for f in tl.findings if f.kind in ("grace_exceeded", "evicted")] == ["evicted"]
