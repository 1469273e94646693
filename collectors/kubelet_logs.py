"""Kubelet log lines of one node into a cluster: the parser and its store writer in one place.

Shared by ``manage.py ingest_kubelet_log``, the HTTP endpoint for log shippers and the node-proxy pull
(``collectors/kube/kubelet.py``), so a line gives the same observations (and dedupe keys) whichever way
it arrives.
"""

from __future__ import annotations

from datetime import tzinfo

from collectors.parsers.kubelet_log import KubeletLogParser
from timelines import store
from timelines.models import Cluster
from timelines.writer import BATCH_SIZE, observation_writer


class KubeletLogIngest:
    """Kubelet log lines of one node into a cluster: the parser and its store writer in one place.

    ``feed`` lines in order, then ``close``; the writer (``timelines/writer.py``) stores the observations
    in batches of ``batch_size`` (bounded memory for multi-GB logs) on the caller's thread; the store
    marks what they make dirty, and the derive stage derives each touched pod (once however many batches
    touched it, where a worker derives; after each batch on the embedded default).
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
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.cluster = cluster
        # ``source`` (a file's name): each observation's payload says ``where: "source:N"`` (--explain).
        self.parser = KubeletLogParser(node=node, year=year, tz=tz, prefix_tz=prefix_tz, source=source)
        self.writer = observation_writer(cluster, batch_size=batch_size)

    @property
    def result(self) -> store.SaveResult:
        """What the batches stored so far did (complete after ``close``)."""
        return self.writer.result

    def feed(self, line: str, where: str | None = None) -> None:
        """One physical line; ``where`` says where it came from when the parser's ``source:N`` cannot."""
        self.writer.hold(self.parser.feed(line, where))

    def close(self) -> store.SaveResult:
        self.writer.hold(self.parser.close())
        # The kubelet processes the lines showed (pid, first / last line): restarts and log coverage.
        self.writer.hold(self.parser.processes())
        return self.writer.close()
