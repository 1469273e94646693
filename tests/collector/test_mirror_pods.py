"""A static pod is one pod, with its phase and its deletion, whatever UID its events name (issue #35, 6).

GIVEN the demo cluster's static-pod scenario (a manifest added, removed, put back while the old worker
still terminates, so the same config-hash UID is reused, and removed again: the API server gives each
mirror pod a new ``metadata.uid``, and the kubelet's events name that mirror) WHEN the collector watches
it and a derive worker derives what it stores THEN the live pods podlife counts are the pods the API
server holds, no pod is keyed by a mirror's API UID, and the mirrors' events are on the static pod's
timeline.

Before the fix each mirror's events made a pod of their own that never got a phase or a deletion
(kube-system counted 40 live pods against 1 real after 35 minutes of the demo).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.utils import timezone

from collectors.kube.runner import Collector
from collectors.models import CollectorState
from tests.waits import wait_for
from timelines.lifecycle.observation import Kind
from timelines.models import DirtyBatch, DirtyKey, Marker, Pod
from timelines.observation_rows import field_is

from .conftest import CLUSTER, FAST, SimCluster, stored

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _settled(ready: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait (on conditions, not a clock) until nothing is left to derive and ``ready`` holds."""
    wait_for(
        lambda: not DirtyBatch.objects.exists() and not DirtyKey.objects.exists() and ready(),
        "nothing left to derive, and the pods ready",
        timeout,
        interval=0.2,
    )


def _watching(*resources: str, timeout: float = 30.0) -> None:
    listed = CollectorState.objects.filter(cluster__name=CLUSTER, resource__in=resources).exclude(
        resource_version=""
    )
    wait_for(lambda: listed.count() == len(resources), f"the collector listing {resources}", timeout)


def _real_pods(sim: SimCluster) -> set[str]:
    """The pods the API server holds now, keyed as podlife keys them (a mirror by its static pod's UID)."""
    return sim.uids("pods")


def _live_pods() -> set[str]:
    return set(
        Pod.objects.filter(cluster__name=CLUSTER, deleted_at__isnull=True).values_list("uid", flat=True)
    )


def _mirror_api_uids() -> set[str]:
    snaps = stored((Kind.POD, Kind.POD_DELETED), field_is(("static",), True))
    return {o.payload["api_uid"] for o in snaps if o.payload["api_uid"] != o.payload["uid"]}


def test_mirror_pods_count_once_with_their_phase_and_deletion(make_sim, monkeypatch, derive_worker):
    sim = make_sim("static-pod-uid-reuse", advance=0)
    engine = sim.server.cluster.engine
    monkeypatch.setattr(timezone, "now", lambda: engine.now)
    collector = Collector([CLUSTER], tunables=FAST).start()
    try:
        _watching("pods", "events")  # the first mirror lives 10 virtual seconds: the watches see it
        # The second incarnation runs (the manifest was put back at 12 s): one real pod in kube-system.
        sim.advance_watched(30)  # a virtual second at a time, each once the collector stored its pod events
        real = _real_pods(sim)
        _settled(lambda: _live_pods() == real and len(_mirror_api_uids()) >= 2)
        assert len([u for u in real if Pod.objects.filter(uid=u, namespace="kube-system").exists()]) == 1
        assert _live_pods() == real, list(Pod.objects.values_list("uid", "name", "static", "phase"))
        # The rest of the story: removed at 52 s, its mirror deleted; nothing is left running.
        sim.advance_watched(60)
        real = _real_pods(sim)
        _settled(lambda: _live_pods() == real)
    finally:
        collector.stop()
    assert _live_pods() == real
    mirrors = _mirror_api_uids()
    assert len(mirrors) >= 2  # one mirror per incarnation, each with its own API UID
    assert not Pod.objects.filter(cluster__name=CLUSTER, uid__in=mirrors).exists()
    (static,) = Pod.objects.filter(cluster__name=CLUSTER, namespace="kube-system", static=True)
    assert static.phase and static.deleted_at is not None
    # The kubelet's events about the mirrors (their involvedObject.uid is the mirror's) are the static
    # pod's markers: its containers started once per incarnation.
    assert stored(Kind.EVENT, pod_uids=mirrors)
    started = Marker.objects.filter(cluster__name=CLUSTER, pod_uid=static.uid, kind="event", reason="Started")
    assert started.count() >= 2
    assert not Marker.objects.filter(cluster__name=CLUSTER, pod_uid__in=mirrors).exists()
