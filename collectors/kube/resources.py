"""The resources the collector watches, and how to reach each through the official client.

A resource is named by its plural (as in the API path). Each maps to the generated ``list_*`` method
that serves both its list and its watch; the collector calls it with ``_preload_content=False`` and
parses the body itself, so the client never builds its model objects on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

from timelines.lifecycle.observation import Kind


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    name: str  # plural, as in the API path; the CollectorState.resource of its watch
    kind: str  # the object kind (typed list items carry none, so it is passed as a hint)
    api: str  # the kubernetes.client API class
    method: str  # its list-for-all-namespaces method
    live_kind: str  # the observation kind of a live snapshot
    deleted_kind: str  # and of its deletion
    reconcile: bool = True  # relist gaps end in synthetic deletions (not for events: they expire)
    fallback_api: str = ""  # used when ``api`` answers 404 (events.k8s.io/v1 missing)
    fallback_method: str = ""


RESOURCES: dict[str, ResourceSpec] = {
    spec.name: spec
    for spec in (
        ResourceSpec("pods", "Pod", "CoreV1Api", "list_pod_for_all_namespaces", Kind.POD, Kind.POD_DELETED),
        ResourceSpec(
            "events",
            "Event",
            "EventsV1Api",
            "list_event_for_all_namespaces",
            Kind.EVENT,
            Kind.EVENT,
            reconcile=False,
            fallback_api="CoreV1Api",
            fallback_method="list_event_for_all_namespaces",
        ),
        ResourceSpec(
            "poddisruptionbudgets",
            "PodDisruptionBudget",
            "PolicyV1Api",
            "list_pod_disruption_budget_for_all_namespaces",
            Kind.PDB,
            Kind.PDB_DELETED,
        ),
        ResourceSpec("nodes", "Node", "CoreV1Api", "list_node", Kind.NODE, Kind.NODE_DELETED),
        ResourceSpec(
            "deployments",
            "Deployment",
            "AppsV1Api",
            "list_deployment_for_all_namespaces",
            Kind.WORKLOAD,
            Kind.WORKLOAD_DELETED,
        ),
        ResourceSpec(
            "statefulsets",
            "StatefulSet",
            "AppsV1Api",
            "list_stateful_set_for_all_namespaces",
            Kind.WORKLOAD,
            Kind.WORKLOAD_DELETED,
        ),
        ResourceSpec(
            "daemonsets",
            "DaemonSet",
            "AppsV1Api",
            "list_daemon_set_for_all_namespaces",
            Kind.WORKLOAD,
            Kind.WORKLOAD_DELETED,
        ),
        ResourceSpec(
            "replicasets",
            "ReplicaSet",
            "AppsV1Api",
            "list_replica_set_for_all_namespaces",
            Kind.WORKLOAD,
            Kind.WORKLOAD_DELETED,
        ),
    )
}

ALL_RESOURCES: tuple[str, ...] = tuple(RESOURCES)


def resource_spec(name: str) -> ResourceSpec:
    """The spec of ``name``; raises ValueError naming the known resources otherwise."""
    try:
        return RESOURCES[name]
    except KeyError:
        raise ValueError(f"unknown resource {name!r}: expected one of {', '.join(ALL_RESOURCES)}") from None
