"""Events about a mirror pod belong to its static pod, whichever is stored or derived first (issue #35, 6).

The objects here are synthetic, in the shape of the real mirror pod of
tests/fixtures/real/kubelet/minikube-1.31-cluster-info-dump.txt (``etcd-minikube``: ``metadata.uid`` the
API server's, ``kubernetes.io/config.mirror`` the config hash, owned by its Node). The kubelet's own
events there name the config hash; events written from the API object (the node lifecycle controller's
``NodeNotReady``, the demo cluster's kubelet) name the mirror's ``metadata.uid``.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from collectors.parsers.k8s_objects import event_observation, pod_observation
from timelines import derivation, store
from timelines.lifecycle.observation import Observation
from timelines.models import Cluster, Marker, Pod

pytestmark = pytest.mark.django_db

STATIC = "5ede50c3cbbe94c4cec7017c71e46240"  # the config hash: the static pod's own UID
MIRROR_1 = "2646df64-d9d6-415a-8f27-06ffb69e06f0"  # the first mirror's metadata.uid
MIRROR_2 = "7f1c9a55-3b0e-4c52-9d1e-8a6b2f4e0c31"  # the API server's UID for the recreated mirror
T0 = datetime(2024, 11, 17, 10, 19, 34, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def mirror(
    api_uid: str, rv: int, seconds: float, *, phase: str = "Running", deleted: bool = False
) -> Observation:
    obj: dict[str, Any] = {
        "kind": "Pod",
        "metadata": {
            "name": "etcd-minikube",
            "namespace": "kube-system",
            "uid": api_uid,
            "resourceVersion": str(rv),
            "creationTimestamp": stamp(seconds),
            "annotations": {
                "kubernetes.io/config.hash": STATIC,
                "kubernetes.io/config.mirror": STATIC,
                "kubernetes.io/config.source": "file",
            },
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "minikube", "uid": "n-1", "controller": True}
            ],
        },
        "spec": {
            "nodeName": "minikube",
            "containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.5.15-0"}],
        },
        "status": {"phase": phase, "startTime": stamp(seconds)},
    }
    return pod_observation(
        obj, watch_type="DELETED" if deleted else "MODIFIED", observed_at=at(seconds), source="api"
    )


def event(
    involved_uid: str, n: int, seconds: float, reason: str = "NodeNotReady", *, host: str | None = None
) -> Observation:
    obj = {
        "kind": "Event",
        "metadata": {
            "name": f"etcd-minikube.{n:x}",
            "namespace": "kube-system",
            "uid": f"ev-{n}",
            "resourceVersion": str(900 + n),
        },
        "involvedObject": {
            "kind": "Pod",
            "namespace": "kube-system",
            "name": "etcd-minikube",
            "uid": involved_uid,
        },
        "reason": reason,
        "message": "Node is not ready",
        "source": {"component": "kubelet", "host": host} if host else {"component": "node-controller"},
        "firstTimestamp": stamp(seconds),
        "lastTimestamp": stamp(seconds),
        "count": 1,
        "type": "Warning",
    }
    found = event_observation(obj, source="api")
    assert found is not None
    return found


def pods() -> dict[str, tuple[str, bool]]:
    return {p.uid: (p.phase, p.deleted_at is not None) for p in Pod.objects.all()}


def markers_of(uid: str) -> list[str]:
    return sorted(Marker.objects.filter(pod_uid=uid, kind="event").values_list("reason", flat=True))


def save(*batch: Observation) -> None:
    store.save_observations("minikube", list(batch))
    derivation.drain()


def test_events_naming_a_mirror_are_the_static_pods_when_the_snapshot_came_first() -> None:
    save(mirror(MIRROR_1, 428, 0))
    save(event(MIRROR_1, 1, 5))
    assert pods() == {STATIC: ("Running", False)}
    assert markers_of(STATIC) == ["NodeNotReady"]


def test_a_pod_derived_from_a_mirrors_events_alone_goes_once_the_snapshot_says_whose_they_are() -> None:
    """GIVEN the events about a mirror derived before any snapshot of it (another watch, stored first)
    WHEN the mirror's snapshot arrives THEN the events join the static pod and no other pod remains."""
    save(event(MIRROR_1, 1, 5))
    assert set(pods()) == {MIRROR_1}  # nothing says yet that this UID is a mirror's
    save(mirror(MIRROR_1, 428, 0))
    assert pods() == {STATIC: ("Running", False)}
    assert markers_of(STATIC) == ["NodeNotReady"] and markers_of(MIRROR_1) == []


def test_every_mirror_of_a_reused_static_uid_maps_to_it_and_its_deletion_counts() -> None:
    save(mirror(MIRROR_1, 428, 0), event(MIRROR_1, 1, 5))
    save(mirror(MIRROR_1, 440, 10, deleted=True))
    save(mirror(MIRROR_2, 450, 12), event(MIRROR_2, 2, 14, reason="Started"))
    save(mirror(MIRROR_2, 470, 52, phase="Running", deleted=True), event(MIRROR_2, 3, 53, reason="Killing"))
    assert pods() == {STATIC: ("Running", True)}
    assert markers_of(STATIC) == ["Killing", "NodeNotReady", "Started"]
    live = Pod.objects.filter(cluster__name="minikube", deleted_at__isnull=True).count()
    assert live == 0


def test_rederive_forgets_a_pod_kept_from_before_the_mapping() -> None:
    cluster = Cluster.objects.create(name="minikube")
    store.save_observations(cluster, [mirror(MIRROR_1, 428, 0), event(MIRROR_1, 1, 5)])
    # A pod of the mirror's own UID, as the derive stage made them before this fix.
    Pod.objects.create(cluster=cluster, uid=MIRROR_1, namespace="kube-system", name="etcd-minikube")
    derivation.rederive_cluster(cluster)
    assert pods() == {STATIC: ("Running", False)}


MIRROR_OLD = "c4e1f0a2-5b6d-4e7f-8a9b-0c1d2e3f4a5b"  # a mirror the API server replaced before the watch began
ORDINARY = "0b7d3e9c-4c1a-4b7e-9f55-2f0e8d6a1c42"  # an ordinary pod, later, of the same name


def _in_every_order(batches: list[list[Observation]], check: Any) -> None:
    """Store ``batches`` in every order (a fresh cluster each time) and ``check`` the derived pods."""
    for n, order in enumerate(itertools.permutations(batches)):
        Cluster.objects.filter(name="minikube").delete()
        for batch in order:
            save(*batch)
        check(n)


def test_events_of_a_mirror_no_snapshot_names_are_the_static_pods_in_any_order() -> None:
    """GIVEN a static pod's mirror (a snapshot at 0), events naming it, and events naming a mirror no
    snapshot names (MIRROR_2: the API server recreated the mirror and the watch never saw that one; its
    events do come, with the list of events) WHEN they are stored in any order THEN there is one pod, the
    static one, live and Running, with every event: the name was held by the static pod's mirror then,
    so MIRROR_2 can have been nothing else (before, it was a pod with events only, never a phase or a
    deletion: counted live for ever)."""

    def check(n: int) -> None:
        assert pods() == {STATIC: ("Running", False)}, n
        assert markers_of(STATIC) == ["NodeNotReady", "Started"], n

    _in_every_order(
        [[mirror(MIRROR_1, 428, 0)], [event(MIRROR_1, 1, 5)], [event(MIRROR_2, 2, 30, reason="Started")]],
        check,
    )


def test_events_of_a_mirror_replaced_before_the_watch_began_are_the_static_pods() -> None:
    """GIVEN events of a mirror replaced before the collector started (older than the first snapshot of
    the static pod, as the first list of events holds them) WHEN stored before or after the snapshot
    THEN they are the static pod's."""

    def check(n: int) -> None:
        assert pods() == {STATIC: ("Running", False)}, n
        assert markers_of(STATIC) == ["NodeNotReady"], n

    _in_every_order([[mirror(MIRROR_1, 428, 0)], [event(MIRROR_OLD, 1, -600)]], check)


def test_a_pod_that_only_shares_the_name_is_not_taken() -> None:
    """GIVEN a static pod whose mirror was deleted at 10 (its manifest removed) and, ten minutes later,
    events about an ordinary pod of the same name (the name was free again) WHEN stored in any order
    THEN the ordinary pod is a pod of its own and the static pod stays deleted: also when its events
    were taken for the static pod's before its deletion was stored (they are derived again then)."""

    def check(n: int) -> None:
        assert set(pods()) == {STATIC, ORDINARY}, n
        assert pods()[STATIC][1] is True, n
        assert markers_of(STATIC) == [] and markers_of(ORDINARY) == ["Scheduled"], n

    _in_every_order(
        [
            [mirror(MIRROR_1, 428, 0)],
            [mirror(MIRROR_1, 440, 10, deleted=True)],
            [event(ORDINARY, 1, 600, reason="Scheduled")],
        ],
        check,
    )


def test_an_ordinary_pod_of_the_name_on_another_node_is_not_taken() -> None:
    """GIVEN events about a pod of the static pod's name whose kubelet (the event's source host) is
    another node WHEN stored THEN it is a pod of its own."""
    save(mirror(MIRROR_1, 428, 0))
    save(event(ORDINARY, 1, 5, reason="Started", host="worker-2"))
    assert set(pods()) == {STATIC, ORDINARY}
    save(event(MIRROR_2, 2, 6, reason="Started", host="minikube"))  # the static pod's node: its mirror
    assert set(pods()) == {STATIC, ORDINARY}
