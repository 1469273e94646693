"""Collector health per (cluster, resource), read from CollectorState, as Prometheus metrics.

``CollectorHealth`` is a custom prometheus_client collector: every scrape reads the CollectorState rows
(through ``dashboard.queries.collector_health``, the one computation the pages and the API read too), so
any number of web servers export the same numbers whichever worker wrote them.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from dashboard import queries
from timelines.dirty import backlog


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
        for h in queries.collector_health(now=now):  # through the module: a stand-in set on it is seen
            values = [h["cluster"], h["resource"]]
            if h["lag_seconds"] is not None:
                lag.add_metric(values, h["lag_seconds"])
            if h["last_event_at"] is not None:
                last.add_metric(values, h["last_event_at"].timestamp())
            events.add_metric(values, h["events_total"])
            rate.add_metric(values, h["events_per_second"])
            errors.add_metric(values, h["errors_total"])
            relists.add_metric(values, h["relists_total"])
            up.add_metric(values, 1.0 if h["lease_expires"] and h["lease_expires"] > now else 0.0)
            skipped.add_metric(values, 1.0 if h["note"].startswith("skipped:") else 0.0)
        yield from (lag, last, events, rate, errors, relists, up, skipped)
        # The derive stage's backlog: what the store marked and no derive worker finished yet.
        waiting = backlog()
        yield GaugeMetricFamily(
            "podlife_derive_dirty_keys",
            "Dirty keys (folded) waiting for the derive stage.",
            value=waiting.keys,
        )
        yield GaugeMetricFamily(
            "podlife_derive_dirty_batches",
            "Stored batches whose keys are not folded yet.",
            value=waiting.batches,
        )
        yield GaugeMetricFamily(
            "podlife_derive_failing_keys",
            "Dirty keys whose derivation failed and that wait, backing off, to be tried again alone.",
            value=waiting.failing,
        )
        yield GaugeMetricFamily(
            "podlife_derive_quarantined_keys",
            "Keys set aside after their derivation kept failing (manage.py derive --quarantined).",
            value=waiting.quarantined,
        )
        yield CounterMetricFamily(
            "podlife_derive_quarantine_moves",
            "Times a key was moved to the quarantine.",
            value=waiting.quarantine_moves,
        )
        yield GaugeMetricFamily(
            "podlife_derive_oldest_seconds",
            "Age of the oldest dirty mark (0 when nothing waits): how far the derive stage lags.",
            value=(now - waiting.oldest).total_seconds() if waiting.oldest else 0.0,
        )
