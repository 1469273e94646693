"""What really happened in the demo cluster: the record findings are measured against.

The cluster appends a ``TruthEntry`` where it acts (never from what podlife derived): every eviction the
eviction subresource answered (granted, or refused by which PodDisruptionBudget), every pod DELETE a
client made (and whether the kubelet had started the pod's containers), every pod object removed (with
when its deletion was requested and its grace period), node shutdowns (with the pods they kill), static
pod manifests removed and put back (with whether the old incarnation was still terminating), and PDBs
created over pods with no controller. ``SimCluster.truth()`` returns them in order.

Times are the cluster's virtual clock, timezone-aware.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class TruthEntry:
    """One thing the cluster did, at ``at``.

    ``action`` is one of:

    * ``eviction``: ``outcome`` ``granted`` / ``refused`` (``detail["pdb"]`` names the budget) /
      ``not_found`` / ``error``; ``detail["actor"]`` who asked;
    * ``delete``: a client's DELETE of a live pod; ``detail["started"]`` whether the kubelet had started
      its containers, ``detail["grace"]`` the grace period, ``detail["via"]`` ``delete`` or ``eviction``;
    * ``removed``: the pod object is gone; ``detail["deletion_requested"]`` (when its termination began,
      or None) and ``detail["grace"]``;
    * ``containers_stopped``: the kubelet saw the pod's containers die; ``detail["requested"]`` when their
      termination began, ``detail["grace"]`` its grace period, ``detail["killed"]`` whether SIGKILL did it;
    * ``node_shutdown``: graceful shutdown of ``node``; ``detail["pods"]`` its pods (``namespace/name``);
    * ``static_pod_removed`` / ``static_pod_added``: a manifest of ``node`` (``uid`` its 32-hex UID);
      on ``added``, ``detail["old_still_terminating"]`` whether the same UID's previous incarnation was
      still being torn down;
    * ``pdb_created``: ``name`` the budget; ``detail["unmanaged"]`` the names of the bare pods it selects,
      ``detail["uses_scale"]`` whether it has maxUnavailable or a percentage minAvailable.
    """

    at: datetime
    action: str
    namespace: str
    name: str
    uid: str | None = None
    node: str | None = None
    outcome: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)


class TruthLog:
    """The entries of one cluster, in the order they happened."""

    def __init__(self) -> None:
        self._entries: list[TruthEntry] = []

    def record(self, entry: TruthEntry) -> None:
        self._entries.append(entry)

    def entries(self) -> list[TruthEntry]:
        return list(self._entries)
