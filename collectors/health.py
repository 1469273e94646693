"""Collector health per (cluster, resource), read from CollectorState, as Prometheus metrics.

``CollectorHealth`` is a custom prometheus_client collector: every scrape reads the CollectorState rows,
so any number of web servers export the same numbers whichever worker wrote them. ``health_rows`` gives
the same figures to views and tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from timelines.models import CollectorState


@dataclass(frozen=True)
class Health:
    cluster: str
    resource: str
    resource_version: str
    last_event_at: datetime | None
    lag_seconds: float | None  # now - last event; None before the first event
    events_total: int
    events_per_second: float
    errors_total: int
    relists_total: int
    last_error: str
    note: str
    lease_owner: str
    lease_expires: datetime | None


def health_rows(*, now: datetime | None = None) -> list[Health]:
    """One Health per CollectorState row (watches and kubelet pulls), ordered by cluster and resource."""
    now = now or timezone.now()
    rows = CollectorState.objects.select_related("cluster").order_by("cluster__name", "resource")
    out = []
    for row in rows:
        if ":" in row.resource:  # per-node bookkeeping of log pulls, summarized by the cluster row
            continue
        lag = (now - row.last_event_at).total_seconds() if row.last_event_at else None
        out.append(
            Health(
                cluster=row.cluster.name,
                resource=row.resource,
                resource_version=row.resource_version,
                last_event_at=row.last_event_at,
                lag_seconds=max(0.0, lag) if lag is not None else None,
                events_total=row.events_total,
                events_per_second=row.events_per_second,
                errors_total=row.errors_total,
                relists_total=row.relists_total,
                last_error=row.last_error,
                note=row.note,
                lease_owner=row.lease_owner,
                lease_expires=row.lease_expires,
            )
        )
    return out


class CollectorHealth(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        labels = ["cluster", "resource"]
        lag = GaugeMetricFamily(
            "podlife_collector_lag_seconds",
            "Seconds since the last event of this watch (now - last event).",
            labels=labels,
        )
        last = GaugeMetricFamily(
            "podlife_collector_last_event_timestamp_seconds",
            "Unix time of the last event of this watch.",
            labels=labels,
        )
        events = CounterMetricFamily(
            "podlife_collector_events", "Watch events and listed objects applied.", labels=labels
        )
        rate = GaugeMetricFamily(
            "podlife_collector_events_per_second", "Events per second over the last step.", labels=labels
        )
        errors = CounterMetricFamily(
            "podlife_collector_errors",
            "Errors (all logged, none fatal): connection, malformed lines, ...",
            labels=labels,
        )
        relists = CounterMetricFamily(
            "podlife_collector_relists",
            "Full lists: the first one and each after a 410 Expired.",
            labels=labels,
        )
        up = GaugeMetricFamily(
            "podlife_collector_lease_held", "1 while a live chain holds this watch's lease.", labels=labels
        )
        skipped = GaugeMetricFamily(
            "podlife_collector_skipped",
            "1 when this pull is skipped (see the note in CollectorState).",
            labels=labels,
        )
        for h in health_rows(now=now):
            values = [h.cluster, h.resource]
            if h.lag_seconds is not None:
                lag.add_metric(values, h.lag_seconds)
            if h.last_event_at is not None:
                last.add_metric(values, h.last_event_at.timestamp())
            events.add_metric(values, h.events_total)
            rate.add_metric(values, h.events_per_second)
            errors.add_metric(values, h.errors_total)
            relists.add_metric(values, h.relists_total)
            up.add_metric(values, 1.0 if h.lease_expires and h.lease_expires > now else 0.0)
            skipped.add_metric(values, 1.0 if h.note.startswith("skipped:") else 0.0)
        yield from (lag, last, events, rate, errors, relists, up, skipped)
