"""Re-derive pods: read a pod's observations, run the pure lifecycle core, replace what was derived.

Called by the ingestion pipeline for every pod that got a new observation, by ``manage.py rederive`` to
rebuild from the source of truth, and on a schedule for pods still open (a terminating pod becomes
"stuck" as time passes, with no new observation).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from timelines import store
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.findings import Thresholds
from timelines.lifecycle.observation import Kind, Observation
from timelines.lifecycle.timeline import PodTimeline
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow


def thresholds_from_settings() -> Thresholds:
    """The finding thresholds, from settings (which read them from the environment)."""
    return Thresholds(
        stuck_terminating_slack=timedelta(seconds=settings.PODLIFE_STUCK_TERMINATING_SLACK_S),
        grace_exceeded_slack=timedelta(seconds=settings.PODLIFE_GRACE_EXCEEDED_SLACK_S),
        slow_cleanup=timedelta(seconds=settings.PODLIFE_SLOW_CLEANUP_S),
        crash_loop_restarts=settings.PODLIFE_CRASH_LOOP_RESTARTS,
        crash_loop_window=timedelta(seconds=settings.PODLIFE_CRASH_LOOP_WINDOW_S),
    )


def observation_from_row(row: ObservationRow) -> Observation:
    return Observation(
        kind=row.kind,
        source=row.source,
        observed_at=row.observed_at,
        dedupe_key=row.dedupe_key,
        pod_uid=row.pod_uid,
        node=row.node or None,
        namespace=row.namespace or None,
        name=row.name or None,
        payload=row.payload,
    )


def rederive_pods(cluster: Cluster, uids: Iterable[str], *, now: datetime | None = None) -> list[PodTimeline]:
    """Re-derive each pod in ``uids`` from all its stored observations; returns the new timelines."""
    now = now or timezone.now()
    thresholds = thresholds_from_settings()
    derived: list[PodTimeline] = []
    for uid in sorted(set(uids)):
        rows = list(ObservationRow.objects.filter(cluster=cluster, pod_uid=uid).order_by("observed_at", "id"))
        if not rows:
            continue
        observations = [observation_from_row(r) for r in rows]
        timeline = derive_pod_timeline(observations, thresholds=thresholds, now=now)
        ids_by_key = {r.dedupe_key: r.id for r in rows}
        labels = next(
            (r.payload.get("labels") or {} for r in reversed(rows) if r.kind in (Kind.POD, Kind.POD_DELETED)),
            {},
        )
        store.replace_pod_timeline(cluster, timeline, ids_by_key, labels=labels)
        derived.append(timeline)
    return derived


def rederive_cluster(cluster: Cluster, *, now: datetime | None = None) -> list[PodTimeline]:
    """Rebuild every pod of ``cluster`` from its observations."""
    uids = (
        ObservationRow.objects.filter(cluster=cluster, pod_uid__isnull=False)
        .values_list("pod_uid", flat=True)
        .distinct()
    )
    return rederive_pods(cluster, list(uids), now=now)
