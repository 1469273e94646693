"""Rules of the worker lane's evidence (timelines/lifecycle/worker.py), continued from
test_worker_pieces.py: what begins a termination in the eviction manager's lines, what setup cites.

Each rule comes from the kubelet's semantics (/work/shared/k8s-facts.md, docs/kubelet-lines.md) or from a
real excerpt (tests/fixtures/real/kubelet, tests/fixtures/real/SOURCES.md); a line added to a real excerpt
is SYNTHETIC and says so.
"""

from __future__ import annotations

from pathlib import Path

from tests.lifecycle import scenarios
from tests.lifecycle.factories import t, worker
from tests.lifecycle.test_kubelet_truth import parse, timelines
from timelines.lifecycle.derive import derive_pod_timeline

UID = scenarios.UID
REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"
NGINX = "27aff94d-e0d9-43d1-84d6-9ab000aa57e2"
# SYNTHETIC: a volume mount of the nginx pod's start-up, in the real format of MountVolume.SetUp (as in
# SOURCES.md's kubelet excerpts), before the real AKS eviction excerpt.
MOUNT = (
    "Oct 12 19:30:00 aks-nodepool1-24207654-vmss000002 kubelet[2480]: I1012 19:30:00.100000    2480 "
    'operation_generator.go:740] "MountVolume.SetUp succeeded for volume \\"kube-api-access-x7k2p\\" '
    '(UniqueName: \\"kubernetes.io/projected/' + NGINX + '-kube-api-access-x7k2p\\") pod \\"nginx\\" '
    '(UID: \\"' + NGINX + '\\") " pod="default/nginx"'
)


def test_the_eviction_ranking_begins_termination_whatever_kubelet_lines_of_the_pod_came_before() -> None:
    """docs/kubelet-lines.md: "Eviction manager: pods ranked for eviction" lists the pods, and the first
    one it may kill is evicted at once: the ranking begins that pod's termination (cause evicted) when its
    kill follows. In the real AKS excerpt (SOURCES.md: aks-1.27-memory-eviction-nginx.syslog) nginx is
    ranked first at 19:34:44.999261 and killed at 19:34:45.000152; an earlier line of the pod (its volume
    mounted at start-up) changes nothing of that.

    SYNTHETIC: the mount line above, before the real excerpt."""
    lines = [MOUNT] + (REAL / "aks-1.27-memory-eviction-nginx.syslog").read_text(
        encoding="utf-8"
    ).splitlines()
    tl = timelines(parse([lines], node="aks-nodepool1-24207654-vmss000002", year=2023))[NGINX]
    (terminating,) = [iv for iv in tl.lane("worker") if iv.state == "terminating"]
    assert terminating.start.isoformat() == "2023-10-12T19:34:44.999261+00:00"
    assert (terminating.attrs["start_from"], terminating.attrs["cause"]) == ("EvictionRanked", "evicted")


def test_setup_cites_the_syncloop_add_its_worker_first_saw_the_pod_after() -> None:
    """The kubelet admits a pod between its SyncLoop ADD and its worker's first sync (docs/kubelet-lines.md;
    HandlePodAdditions): an ADD followed within moments by "Pod is being synced for the first time" in
    sync is that pod's admission, so the ADD is evidence of its setup and the setup interval cites it
    (docs/timeline-schema.md, ``evidence``), its start dated by the worker's own first sight.

    SYNTHETIC: V2 SyncLoop ADD, V4 first sight and SyncPod enter / exit, then the graceful deletion of
    tests/lifecycle/scenarios.py; no API object."""
    add = worker(UID, 1.09, "syncloop_add", message="SyncLoop ADD")
    first = [worker(UID, 1.1, "first_seen"), worker(UID, 1.11, "sync_enter"), worker(UID, 1.5, "sync_exit")]
    setup = derive_pod_timeline([add, *first, *scenarios.kubelet_graceful_delete()]).lane("worker")[0]
    assert (setup.state, setup.start, setup.attrs["start_from"]) == ("setup", t(1.1), "first_seen")
    assert add.dedupe_key in setup.evidence
