"""How fresh each pod's worker lane is, computed when a page or the API reads it (never stored).

Kubelet evidence (pod-worker lines, spans, notable lines, process lines) reaches podlife later than the
API's view: log pulls and shippers lag 30–60 s behind the watch. Until a node's kubelet evidence catches
up, the derive stage can only show the worker state it last saw (``setup`` beside phase ``Succeeded``).
This module says, per pod, since when its worker lane is waiting for kubelet evidence, so the pages draw
a hatched "pending" tail and say so instead of a confident state.

A pod's worker evidence is *pending* when its node has kubelet evidence at all and the pod's newest
observation (``Pod.last_seen``: API snapshots, events, audit) is more than
``PODLIFE_KUBELET_PENDING_SLACK_S`` newer than the newest kubelet evidence of that node: then the API has
seen something the kubelet's logs have not reached yet. The tail starts at that newest kubelet evidence.
A node with no kubelet evidence at all has a worker lane inferred from the API, drawn as such already.

A reader without the whole cluster gets the answer from the kubelet evidence of the pods they may read
only (never another namespace's activity on the node). Read-time only, two small queries per page: the newest kubelet evidence per node (bounded to a day before
the window so the time index is used) and ``last_seen`` of the pods on the page.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Max

from timelines.lifecycle.observation import Kind
from timelines.lifecycle.timeline import format_time
from timelines.models import Cluster, Observation, Pod

KUBELET_KINDS = (Kind.WORKER, Kind.SPAN, Kind.KUBELET_MARKER, Kind.KUBELET_PROCESS)
# Kubelet evidence is looked for from this long before the window on (the time index bounds the scan).
LOOKBACK = timedelta(days=1)


def kubelet_evidence_until(
    cluster: Cluster, nodes: Iterable[str], *, since: datetime, namespaces: set[str] | None = None
) -> dict[str, datetime]:
    """The newest ``observed_at`` of kubelet evidence per node (nodes without any since ``since`` left out).

    ``namespaces`` (a reader without the whole cluster): only the evidence of pods in those namespaces, so
    the answer tells nothing about other namespaces' pods or the node's own lines."""
    names = sorted({n for n in nodes if n})
    out: dict[str, datetime] = {}
    for i in range(0, len(names), 500):
        qs = Observation.objects.filter(
            cluster=cluster, kind__in=KUBELET_KINDS, node__in=names[i : i + 500], observed_at__gte=since
        )
        if namespaces is not None:
            qs = qs.filter(namespace__in=sorted(namespaces))
        rows = qs.values("node").annotate(until=Max("observed_at"))
        out.update({r["node"]: r["until"] for r in rows})
    return out


def pending_since(last_seen: datetime | None, kubelet_until: datetime | None) -> datetime | None:
    """Since when the worker lane waits for kubelet evidence, or None when it is as fresh as the API."""
    if last_seen is None or kubelet_until is None:
        return None
    slack = timedelta(seconds=settings.PODLIFE_KUBELET_PENDING_SLACK_S)
    return kubelet_until if last_seen - kubelet_until > slack else None


def freshness_of(last_seen: datetime | None, kubelet_until: datetime | None) -> dict[str, Any]:
    """A pod's ``freshness`` as the pages and the API send it: ``{kubelet_until, pending_since}`` (either
    null), from its ``last_seen`` and the newest kubelet evidence of its node (``kubelet_evidence_until``).
    ``queries.window_json`` adds it to every pod of a window, and ``kubelet_until`` per node beside them."""
    pending = pending_since(last_seen, kubelet_until)
    return {
        "kubelet_until": format_time(kubelet_until) if kubelet_until else None,
        "pending_since": format_time(pending) if pending else None,
    }


def pod_freshness(cluster: Cluster, pod: Pod, *, namespaces: set[str] | None = None) -> dict[str, Any]:
    """``{kubelet_until, pending_since}`` of one pod (its page). ``namespaces``: as in
    ``kubelet_evidence_until``."""
    if not pod.node:
        return freshness_of(None, None)
    since = (pod.created_at or pod.last_seen or datetime.now().astimezone()) - LOOKBACK
    until = kubelet_evidence_until(cluster, [pod.node], since=since, namespaces=namespaces).get(pod.node)
    return freshness_of(pod.last_seen, until)
