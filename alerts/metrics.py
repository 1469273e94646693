"""Findings as Prometheus gauges on ``/metrics``, for Alertmanager rules (deploy/components/prometheus).

Every scrape runs a few aggregate queries (GROUP BY in the database; no finding row reaches Python), so
any number of web pods export the same numbers:

* ``podlife_findings_open{cluster,namespace,kind,severity}``: findings still open (no end).
* ``podlife_findings_recent{cluster,namespace,kind,severity}``: open, or ended within
  ``PODLIFE_METRICS_RECENT_S``: what a rule needs for findings that come and go between scrapes
  (a pod that never started ends within seconds).
* ``podlife_node_drain_blocked{cluster,node}``: 1 while a PodDisruptionBudget refuses evictions of pods
  on the node (open ``pdb_blocking_drain`` findings), 0 for a cordoned node that nothing blocks.
* ``podlife_node_drain_blocked_pods{cluster,node}`` and ``podlife_node_drain_blocked_since_timestamp_seconds``.
* ``podlife_alert_deliveries{destination,status}`` and ``podlife_alert_destination_failures{destination}``:
  the webhooks' own health.

Only live clusters count: imported and offline clusters are history, not something to page about.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from alerts.models import Delivery, Destination
from timelines.models import Cluster, Finding, Node

BLOCKING_KIND = "pdb_blocking_drain"
LABELS = ["cluster", "namespace", "kind", "severity"]


class FindingsMetrics(Collector):
    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        live = Finding.objects.filter(cluster__origin=Cluster.Origin.LIVE)
        group = ("cluster__name", "namespace", "kind", "severity")

        open_ = GaugeMetricFamily("podlife_findings_open", "Open findings (no end yet).", labels=LABELS)
        for row in live.filter(end__isnull=True).values(*group).annotate(n=Count("id")).order_by(*group):
            open_.add_metric([row[g] for g in group], row["n"])
        yield open_

        recent = GaugeMetricFamily(
            "podlife_findings_recent",
            f"Findings open now or ended within the last {settings.PODLIFE_METRICS_RECENT_S} s.",
            labels=LABELS,
        )
        since = now - timedelta(seconds=settings.PODLIFE_METRICS_RECENT_S)
        rows = live.filter(Q(end__isnull=True) | Q(end__gte=since)).values(*group).annotate(n=Count("id"))
        for row in rows.order_by(*group):
            recent.add_metric([row[g] for g in group], row["n"])
        yield recent

        yield from self._nodes()
        yield from self._deliveries()

    def _nodes(self) -> Iterator[Metric]:
        labels = ["cluster", "node"]
        blocked = GaugeMetricFamily(
            "podlife_node_drain_blocked",
            "1 while a PodDisruptionBudget refuses evictions of pods on this node (0: cordoned, nothing blocks).",
            labels=labels,
        )
        pods = GaugeMetricFamily(
            "podlife_node_drain_blocked_pods",
            "Pods on this node whose eviction a PDB refuses.",
            labels=labels,
        )
        since = GaugeMetricFamily(
            "podlife_node_drain_blocked_since_timestamp_seconds",
            "Unix time since when a PDB refuses evictions from this node.",
            labels=labels,
        )
        rows = (
            Finding.objects.filter(cluster__origin=Cluster.Origin.LIVE, kind=BLOCKING_KIND, end__isnull=True)
            .exclude(node="")
            .values("cluster__name", "node")
            .annotate(n=Count("pod_uid", distinct=True), first=Min("start"))
        )
        seen: set[tuple[str, str]] = set()
        for row in rows.order_by("cluster__name", "node"):
            key = (row["cluster__name"], row["node"])
            seen.add(key)
            blocked.add_metric(list(key), 1)
            pods.add_metric(list(key), row["n"])
            since.add_metric(list(key), row["first"].timestamp())
        cordoned = Node.objects.filter(
            cluster__origin=Cluster.Origin.LIVE, unschedulable=True, deleted_at__isnull=True
        ).values_list("cluster__name", "name")
        for key in cordoned.order_by("cluster__name", "name"):
            if key not in seen:
                blocked.add_metric(list(key), 0)
        yield from (blocked, pods, since)

    def _deliveries(self) -> Iterator[Metric]:
        deliveries = GaugeMetricFamily(
            "podlife_alert_deliveries",
            "Webhook deliveries by destination and status.",
            labels=["destination", "status"],
        )
        rows = Delivery.objects.values("destination__name", "status").annotate(n=Count("id"))
        for row in rows.order_by("destination__name", "status"):
            deliveries.add_metric([row["destination__name"], row["status"]], row["n"])
        failures = GaugeMetricFamily(
            "podlife_alert_destination_failures",
            "Consecutive failed sends to this destination (0: the last one was accepted).",
            labels=["destination"],
        )
        for name, n in (
            Destination.objects.filter(enabled=True).values_list("name", "failures").order_by("name")
        ):
            failures.add_metric([name], n)
        yield from (deliveries, failures)
