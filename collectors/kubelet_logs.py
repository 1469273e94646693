"""Kubelet log lines of one node into a cluster: the parser, batching and the store in one place.

Shared by ``manage.py ingest_kubelet_log`` and the HTTP endpoint for log shippers, so a line gives the same
observations (and dedupe keys) whichever way it arrives.
"""

from __future__ import annotations

from datetime import tzinfo

from collectors.parsers.kubelet_log import KubeletLogParser
from timelines import store
from timelines.lifecycle.observation import Observation
from timelines.models import Cluster

FLUSH_EVERY = 5_000  # observations per store batch: bounded memory for multi-GB logs


class KubeletLogIngest:
    """Kubelet log lines of one node into a cluster: the parser, batching and store in one place.

    Shared by ``manage.py ingest_kubelet_log`` and the HTTP endpoint, so a line gives the same
    observations (and dedupe keys) whichever way it arrives. ``feed`` lines in order, then ``close``;
    observations are stored every ``flush_every``; the store marks what they make dirty, and the derive
    stage derives each touched pod once however many batches touched it.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        node: str,
        year: int,
        tz: tzinfo,
        prefix_tz: tzinfo | None = None,
        source: str | None = None,
        flush_every: int = FLUSH_EVERY,
    ) -> None:
        self.cluster = cluster
        # ``source`` (a file's name): each observation's payload says ``where: "source:N"`` (--explain).
        self.parser = KubeletLogParser(node=node, year=year, tz=tz, prefix_tz=prefix_tz, source=source)
        self.result = store.SaveResult()
        self._pending: list[Observation] = []
        self._flush_every = flush_every

    def feed(self, line: str, where: str | None = None) -> None:
        """One physical line; ``where`` says where it came from when the parser's ``source:N`` cannot."""
        self._pending.extend(self.parser.feed(line, where))
        if len(self._pending) >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self.result.merge(store.save_observations(self.cluster, self._pending))
            self._pending.clear()

    def close(self) -> store.SaveResult:
        self._pending.extend(self.parser.close())
        # The kubelet processes the lines showed (pid, first / last line): restarts and log coverage.
        self._pending.extend(self.parser.processes())
        self.flush()
        return self.result
