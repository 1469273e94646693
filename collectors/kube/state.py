"""The collector's own rows: ``CollectorState`` per (cluster, resource), and nothing else.

Where each watch stands (resourceVersion), who holds its lease, and how healthy it is (last event, events,
errors, relists, a status note). Counters are bumped with ``F()`` updates so concurrent writers (a step and
the beat re-arming) never lose an increment. Kubelet pulls keep their rows here too, under the resource
names ``kubelet-metrics`` / ``kubelet-logs`` (cluster-wide status) and ``kubelet-logs:NODE`` (the last time
pulled from that node).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db.models import F
from django.utils import timezone

from collectors.models import CollectorState
from timelines.models import Cluster

log = logging.getLogger(__name__)

KUBELET_METRICS = "kubelet-metrics"
KUBELET_LOGS = "kubelet-logs"
_MAX_ERROR = 2000
_MAX_NOTE = 300


def node_logs_resource(node: str) -> str:
    """The CollectorState.resource remembering the last log pull from ``node`` (at most 64 chars)."""
    name = f"{KUBELET_LOGS}:{node}"
    if len(name) <= 64:
        return name
    from timelines.lifecycle.observation import digest_key

    return f"{KUBELET_LOGS}:{node[:30]}~{digest_key(node)[:16]}"


def get(cluster: Cluster, resource: str) -> CollectorState:
    state, _ = CollectorState.objects.get_or_create(cluster=cluster, resource=resource)
    return state


def _update(cluster: Cluster, resource: str, **fields: object) -> None:
    updated = CollectorState.objects.filter(cluster=cluster, resource=resource).update(**fields)
    if not updated:
        get(cluster, resource)
        CollectorState.objects.filter(cluster=cluster, resource=resource).update(**fields)


def save_resource_version(cluster: Cluster, resource: str, resource_version: str) -> None:
    _update(cluster, resource, resource_version=resource_version[:64])


def record_events(
    cluster: Cluster,
    resource: str,
    count: int,
    *,
    resource_version: str | None = None,
    at: datetime | None = None,
) -> None:
    """``count`` watch events were applied (stored or found duplicate); optionally move the version."""
    fields: dict[str, object] = {}
    if count:
        fields["events_total"] = F("events_total") + count
        fields["last_event_at"] = at or timezone.now()
    if resource_version is not None:
        fields["resource_version"] = resource_version[:64]
    if fields:
        _update(cluster, resource, **fields)


def record_step(
    cluster: Cluster, resource: str, *, events: int, seconds: float, at: datetime | None = None
) -> None:
    """A step ended; ``events`` in ``seconds`` gives its rate."""
    rate = events / seconds if seconds > 0 else 0.0
    _update(cluster, resource, last_step_at=at or timezone.now(), events_per_second=rate)


def record_error(cluster: Cluster, resource: str, message: str, *, at: datetime | None = None) -> None:
    """Count and keep an error; it is never fatal, the caller backs off and retries."""
    _update(
        cluster,
        resource,
        errors_total=F("errors_total") + 1,
        last_error=message[:_MAX_ERROR],
        last_error_at=at or timezone.now(),
    )


def record_relist(cluster: Cluster, resource: str) -> None:
    _update(cluster, resource, relists_total=F("relists_total") + 1)


def set_note(cluster: Cluster, resource: str, note: str) -> None:
    _update(cluster, resource, note=note[:_MAX_NOTE])


def set_lease(cluster: Cluster, resource: str, owner: str, expires: datetime | None) -> None:
    _update(cluster, resource, lease_owner=owner[:128], lease_expires=expires)


def clear_lease(cluster: Cluster, resource: str, owner: str) -> None:
    CollectorState.objects.filter(cluster=cluster, resource=resource, lease_owner=owner[:128]).update(
        lease_owner="", lease_expires=None
    )
