"""The ingestion pipeline: store observations, then bring everything derived from them up to date.

Every source (API watch, kubelet logs, spans, metrics, offline kubectl output) enters here:
``ingest_observations(cluster, observations)`` appends them (``store.save_observations``), updates the
current-state rows they describe (nodes, PDBs, workloads), re-derives every pod, node and PDB that got
something new, and hands the changed pods to live push. Nothing here is Celery- or HTTP-specific, so a
task, a management command or a test calls the same function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from timelines import store
from timelines.derivation import NODE_KINDS, rederive_cluster, rederive_nodes, rederive_pdbs, rederive_pods
from timelines.lifecycle.observation import AnyObservation, EncodedObservation, Kind, Observation
from timelines.live import publish_timelines
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow

PDB_INPUTS = (Kind.PDB, Kind.PDB_DELETED, Kind.EVENT)


def ingest_observations(
    cluster: Cluster | str, observations: Iterable[AnyObservation | Mapping[str, Any]], *, derive: bool = True
) -> store.SaveResult:
    """Store ``observations`` and update what derives from them; returns what was stored and rejected.

    With ``derive=False`` only the observations and current-state rows are written; the caller calls
    ``derive_new`` once at the end (bulk loads re-derive each pod once, not once per batch).
    """
    cluster = store.cluster_for(cluster)
    batch = list(observations)
    result = store.save_observations(cluster, batch)
    after_save(cluster, batch, result, derive=derive)
    return result


def after_save(
    cluster: Cluster,
    batch: Sequence[AnyObservation | Mapping[str, Any]],
    result: store.SaveResult,
    *,
    derive: bool,
) -> None:
    """What follows storing ``batch`` (``result`` is what ``save_observations`` did with it): the
    current-state rows and, with ``derive``, the timelines that its new observations change.

    Appending observations commutes, this does not (a row keeps the newest snapshot it was given; two
    derivations of one pod must not interleave): a caller that stores batches concurrently (the watch
    step's writers) calls this once per batch, one at a time, in the order the batches were received.
    """
    if result.stored:
        new = [
            o
            for o in batch
            if isinstance(o, Observation | EncodedObservation) and o.dedupe_key in result.stored_keys
        ]
        store.update_current_state(cluster, new)
        if derive:
            derive_new(cluster, result.pods_touched, new)


def derive_new(cluster: Cluster, pods: Iterable[str], new: Iterable[AnyObservation]) -> int:
    """Re-derive the pods in ``pods`` and the nodes and PDBs that ``new`` observations concern, then
    push the changed pods live. Returns how many pods were re-derived."""
    timelines = rederive_pods(cluster, pods)
    nodes: set[str] = set()
    pdb_namespaces = {t.namespace for t in timelines if t.namespace}
    for o in new:
        if o.kind in NODE_KINDS and o.node:
            nodes.add(o.node)
        elif o.kind in PDB_INPUTS and o.namespace:
            pdb_namespaces.add(o.namespace)
    if nodes:
        rederive_nodes(cluster, nodes)
        rederive_pdbs(cluster)  # a cordon changes which PDBs block a drain, in any namespace
    elif pdb_namespaces:
        rederive_pdbs(cluster, namespaces=pdb_namespaces)
    publish_timelines(cluster.name, timelines)
    return len(timelines)


def rederive_everything(cluster: Cluster) -> int:
    """Rebuild pods, nodes and PDBs of ``cluster`` from its observations (``manage.py rederive``)."""
    pods = rederive_cluster(cluster)
    nodes = ObservationRow.objects.filter(cluster=cluster, kind__in=NODE_KINDS).values_list("node", flat=True)
    rederive_nodes(cluster, set(nodes))
    rederive_pdbs(cluster)
    return len(pods)
