"""stuck_terminating on the API side: the kubelet is done, a finalizer keeps the object Terminating."""

from __future__ import annotations

from tests.lifecycle.factories import ctr, pod, t
from timelines.lifecycle.derive import derive_pod_timeline

UID = "5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
RUNNING = [ctr("app", "running", started=5.0, ready=True)]
STOPPED = [ctr("app", "terminated", reason="Error", exit_code=137, started=5.0, finished=112.0)]


def observations(*, finalizer_removed_at: float | None):
    obs = [
        pod(UID, 1, 1.0, phase="Pending", start_time=1.0),
        pod(UID, 2, 6.0, phase="Running", start_time=1.0, containers=RUNNING),
        # DELETE at 100 with a 10 s grace: deletionTimestamp 110; the finalizer stays on the object.
        pod(
            UID,
            3,
            100.0,
            phase="Running",
            start_time=1.0,
            deletion=110.0,
            deletion_grace=10,
            containers=RUNNING,
            finalizers=["podlife.dev/cleanup"],
        ),
        pod(
            UID,
            4,
            113.0,
            phase="Failed",
            start_time=1.0,
            deletion=110.0,
            deletion_grace=10,
            containers=STOPPED,
            finalizers=["podlife.dev/cleanup"],
        ),
    ]
    if finalizer_removed_at is not None:
        obs.append(
            pod(
                UID,
                5,
                finalizer_removed_at,
                phase="Failed",
                start_time=1.0,
                deletion=110.0,
                deletion_grace=10,
                containers=STOPPED,
                deleted=True,
            )
        )
    return obs


def test_finalizer_keeping_a_terminating_pod_is_stuck_and_named():
    timeline = derive_pod_timeline(observations(finalizer_removed_at=None), now=t(400.0))
    [finding] = [f for f in timeline.findings if f.kind == "stuck_terminating"]
    assert finding.attrs["side"] == "api" and finding.attrs["open"] is True
    assert finding.start == t(100.0) and finding.end is None
    assert not [f for f in timeline.findings if f.kind == "slow_cleanup"]  # the finalizer waits, not cleanup
    assert finding.severity == "critical"
    assert "Terminating in the API for 5m00s" in finding.message
    assert "finalizers podlife.dev/cleanup keep the object" in finding.message
    assert finding.attrs["finalizers"] == ["podlife.dev/cleanup"]


def test_a_prompt_finalizer_is_not_stuck():
    timeline = derive_pod_timeline(observations(finalizer_removed_at=130.0), now=t(400.0))
    assert not [f for f in timeline.findings if f.kind == "stuck_terminating"]
    api = timeline.lane("api")
    assert any(iv.state == "deleted" and iv.start == t(130.0) for iv in api)


def test_the_limit_is_grace_plus_slack_from_the_delete():
    """DELETE at 100 with a 10 s grace and the default 60 s slack: a finalizer gone by 170 is prompt, one
    gone at 171 kept the object Terminating for 71 s (a closed, warning-level finding)."""
    at_limit = derive_pod_timeline(observations(finalizer_removed_at=170.0), now=t(400.0))
    assert not [f for f in at_limit.findings if f.kind == "stuck_terminating"]
    late = derive_pod_timeline(observations(finalizer_removed_at=171.0), now=t(400.0))
    [finding] = [f for f in late.findings if f.kind == "stuck_terminating"]
    assert (finding.start, finding.end, finding.severity) == (t(100.0), t(171.0), "warning")
    assert finding.attrs["seconds"] == 71.0 and finding.attrs["grace_seconds"] == 10.0
    assert finding.attrs["open"] is False and finding.attrs["finalizers"] == ["podlife.dev/cleanup"]


def _earlier_object(*, deleted_at: float | None) -> list:
    """An earlier API object under the same UID (SYNTHETIC: a static pod's mirror pod, which the kubelet
    recreates under the static pod's UID; created at -500 s), seen running, and deleted promptly (DELETE at
    -400 s with a 30 s grace, gone at ``deleted_at``) or never seen deleted (None: the collector lost it)."""
    running = [ctr("app", "running", started=-495.0, ready=True)]
    obs = [pod(UID, 0, -490.0, phase="Running", created=-500.0, start_time=-499.0, containers=running)]
    if deleted_at is not None:
        for rv, seen, deleted in ((1, -400.0, False), (2, deleted_at, True)):
            obs.append(
                pod(
                    UID,
                    rv,
                    seen,
                    phase="Running",
                    created=-500.0,
                    start_time=-499.0,
                    deletion=-370.0,
                    deletion_grace=30,
                    containers=running,
                    deleted=deleted,
                )
            )
    return obs


def test_each_api_object_under_the_uid_is_judged_on_its_own_deletion():
    """GIVEN the stuck object above (DELETE at 100, kept by its finalizer) after an earlier object under the
    same UID that was never seen deleted, or one deleted promptly (gone 10 s into its 30 s grace) THEN the
    stuck one is found either way, from its own DELETE: an earlier object with no deletion, or one that
    went in time, neither hides nor dates the later one's."""
    for earlier in (_earlier_object(deleted_at=None), _earlier_object(deleted_at=-390.0)):
        timeline = derive_pod_timeline(earlier + observations(finalizer_removed_at=None), now=t(400.0))
        [finding] = [f for f in timeline.findings if f.kind == "stuck_terminating"]
        assert (finding.start, finding.end, finding.attrs["side"]) == (t(100.0), None, "api")
