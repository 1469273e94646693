"""The ingestion pipeline: store observations, then bring everything derived from them up to date.

Every source (API watch, kubelet logs, spans, metrics, offline kubectl output) enters here:
``ingest_observations(cluster, observations)`` appends them (``store.save_observations``), updates the
current-state rows they describe (pods, nodes, PDBs, workloads), re-derives the timeline of every pod that
got something new, and hands the changes to live push. Nothing here is Celery- or HTTP-specific, so a
task, a management command or a test calls the same function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from timelines import store
from timelines.derivation import rederive_pods
from timelines.lifecycle.observation import Observation
from timelines.live import publish_timelines
from timelines.models import Cluster


def ingest_observations(
    cluster: Cluster | str, observations: Iterable[Observation | Mapping[str, Any]], *, derive: bool = True
) -> store.SaveResult:
    """Store ``observations`` and update what derives from them; returns what was stored and rejected."""
    cluster = store.cluster_for(cluster)
    batch = list(observations)
    result = store.save_observations(cluster, batch)
    if result.stored:
        new = [o for o in batch if isinstance(o, Observation)]
        store.update_current_state(cluster, new)
        if derive and result.pods_touched:
            publish_timelines(cluster.name, rederive_pods(cluster, result.pods_touched))
    return result
