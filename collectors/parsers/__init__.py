"""Parsers: raw inputs (kubelet logs, API objects, kubectl output) to observations.

Pure: imports no Django, Celery, Channels or kubernetes client (a test guards this); only the standard
library, orjson, PyYAML and ``timelines.lifecycle.observation``.

* ``kubelet_log``: kubelet log lines (klog text, JSON logging, journald prefixes) to WORKER and
  KUBELET_MARKER observations (``parse_kubelet_log``, ``parse_kubelet_line``).
* ``klog``: the klog / journald / JSON wire formats, with no knowledge of what messages mean.
* ``k8s_objects``: Pods, Events, Nodes, PDBs and apps/v1 workloads to normalized payloads and
  observations (``object_observation`` dispatches on kind).
* ``kubectl``: ``kubectl get -o json|yaml``, ``get -w`` streams and ``cluster-info dump`` output.
"""

from __future__ import annotations

from .k8s_objects import (
    event_observation,
    node_observation,
    normalize_event,
    normalize_node,
    normalize_pdb,
    normalize_pod,
    normalize_workload,
    object_observation,
    pdb_observation,
    pod_observation,
    workload_observation,
)
from .kubectl import OfflineResult, dump_member, read_kubectl_output
from .kubelet_log import (
    SKIP_REASONS,
    KubeletLogParser,
    LogParseResult,
    MarkerReason,
    parse_kubelet_line,
    parse_kubelet_log,
)

__all__ = [
    "SKIP_REASONS",
    "KubeletLogParser",
    "LogParseResult",
    "MarkerReason",
    "OfflineResult",
    "event_observation",
    "node_observation",
    "normalize_event",
    "normalize_node",
    "normalize_pdb",
    "normalize_pod",
    "normalize_workload",
    "object_observation",
    "parse_kubelet_line",
    "parse_kubelet_log",
    "pdb_observation",
    "pod_observation",
    "dump_member",
    "read_kubectl_output",
    "workload_observation",
]
