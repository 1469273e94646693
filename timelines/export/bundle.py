"""The ``podlife.incident/v1`` JSON bundle: written item by item, read back and verified.

Layout (one item per line, so ``head`` shows the metadata and ``grep`` finds a pod)::

    {"schema":"podlife.incident/v1",
    "metadata":{...,"digest":{"observations_sha256":"…"}},
    "pods":[
    {timeline/v1 of one pod},
    …],
    "nodes":[…],
    "pdbs":[…],
    "workloads":[…],
    "findings":[…],
    "observations":[
    {one observation},
    …],
    "trailer":{"complete":true,"derived_sha256":"…","counts":{…}}}

The observation digest must be in the metadata, which comes first, while the observations come last: the
observations are read once, hashed and spooled (memory up to ``SPOOL_MEMORY``, then a temporary file),
then copied out after the derived sections. Nothing else is held: pods are read ``reads.CHUNK`` at a time.
docs/incident-bundle.md is the schema.
"""

from __future__ import annotations

import hashlib
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from django.utils import timezone

from timelines.export import reads
from timelines.export.scope import Resolved
from timelines.lifecycle.timeline import SCHEMA as TIMELINE_SCHEMA
from timelines.lifecycle.timeline import format_time

SCHEMA = "podlife.incident/v1"
SCHEMA_FAMILY = "podlife.incident/"
SPOOL_MEMORY = 32 * 1024 * 1024
SECTIONS = ("pods", "nodes", "pdbs", "workloads", "findings")

# progress(stage, done, total): called between items, never more than a few hundred times per export.
Progress = Callable[[str, int, int], None]


@cache
def podlife_version() -> str:
    try:
        data = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
        return str(data["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def canonical_observation(item: Mapping[str, Any]) -> bytes:
    """The bytes the observation digest covers: the contract fields only (not the bundle-local ``id``
    nor ``received_at``), keys sorted, orjson's compact spelling, then a newline."""
    return orjson.dumps({k: item.get(k) for k in reads.CONTRACT_FIELDS}, option=orjson.OPT_SORT_KEYS) + b"\n"


def derived_line(section: str, item: Any) -> bytes:
    """What the derived digest covers for one item of ``section`` (keys in document order)."""
    return section.encode() + b"\t" + orjson.dumps(item) + b"\n"


def _quiet(stage: str, done: int, total: int) -> None:
    return None


class _Counter:
    """Reports progress at most every ``step`` units so a callback that writes a file stays cheap."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress, self.total, self.done = progress, max(total, 1), 0
        self.step = max(1, self.total // 200)
        self._last = -1

    def add(self, stage: str, n: int = 1) -> None:
        self.done += n
        if self.done - self._last >= self.step or self.done >= self.total:
            self._last = self.done
            self.progress(stage, min(self.done, self.total), self.total)


def metadata(resolved: Resolved, *, digest: str, counts: Mapping[str, int]) -> dict[str, Any]:
    cluster = resolved.cluster
    return {
        "cluster": {"name": cluster.name, "origin": cluster.origin, "description": cluster.description},
        "scope": {**resolved.scope.to_json(), "label": resolved.scope.label()},
        "window": {"since": format_time(resolved.since), "until": format_time(resolved.until)},
        "generated_at": format_time(timezone.now()),
        "podlife_version": podlife_version(),
        "timeline_schema": TIMELINE_SCHEMA,
        "namespaces": None if resolved.namespaces is None else sorted(resolved.namespaces),
        "counts": dict(counts),
        "evidence": "evidence lists hold observations[].id values of this bundle, as strings",
        "notes": list(resolved.notes),
        "digest": {"algorithm": "sha256", "over": "observations", "observations_sha256": digest},
    }


class SpooledObservations:
    """Observations read once: hashed, counted, serialized into a spool to be copied out later."""

    def __init__(self) -> None:
        self.spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)  # noqa: SIM115 (closed in close())
        self.sha = hashlib.sha256()
        self.count = 0
        self.side_ids: set[int] = set()

    def add(self, item: dict[str, Any], *, side: bool = False) -> None:
        self.sha.update(canonical_observation(item))
        self.spool.write((b",\n" if self.count else b"") + orjson.dumps(item))
        self.count += 1
        if side:
            self.side_ids.add(item["id"])

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        self.spool.seek(0)
        while chunk := self.spool.read(size):
            yield chunk

    def close(self) -> None:
        self.spool.close()


def collect_observations(resolved: Resolved, counter: _Counter) -> SpooledObservations:
    spooled = SpooledObservations()
    try:
        done_pods: set[str] = set()
        for item in reads.pod_observations(resolved.cluster, resolved.pods):
            spooled.add(item)
            if item["pod_uid"] not in done_pods:
                done_pods.add(item["pod_uid"])
                counter.add("observations")
        side = reads.side_observation_ids(
            resolved.cluster,
            resolved.since,
            resolved.until,
            nodes=resolved.nodes,
            pdbs=resolved.pdbs,
            workloads=resolved.workloads,
        )
        for item in reads.observations_by_ids(resolved.cluster, side):
            spooled.add(item, side=True)
        counter.add("observations", len(resolved.pods) - len(done_pods))
    except BaseException:
        spooled.close()
        raise
    return spooled


def derived_sections(resolved: Resolved, side_ids: set[int], counter: _Counter) -> Iterator[tuple[str, Any]]:
    """``(section, item)`` in document order; what the JSON, CSV and HTML writers all draw from."""
    cluster, since, until = resolved.cluster, resolved.since, resolved.until
    for _pod, timeline in reads.pod_timelines(cluster, resolved.pods):
        yield "pods", timeline
        counter.add("pods")
    for node in resolved.nodes:
        yield "nodes", reads.node_json(cluster, node, since, until, side_ids)
    uids_by_ns: dict[str, list[Any]] = {}
    for p in resolved.pods:
        uids_by_ns.setdefault(p.namespace, []).append(p)
    from timelines.queries import selector_matches

    for pdb in resolved.pdbs:
        covered = [
            p.uid
            for p in uids_by_ns.get(pdb.namespace, [])
            if selector_matches(pdb.selector or {}, p.labels or {})
        ]
        yield "pdbs", reads.pdb_json(cluster, pdb, since, until, side_ids, covered)
    for w in resolved.workloads:
        yield "workloads", reads.workload_json(w, since, until)
    for f in reads.findings(
        cluster, resolved.pod_uids, [p.uid for p in resolved.pdbs], since, until, side_ids
    ):
        yield "findings", f


def iter_json(resolved: Resolved, *, progress: Progress | None = None) -> Iterator[bytes]:
    """The bundle as a stream of byte chunks (a few KB each; the observations in 1 MB pieces)."""
    counter = _Counter(progress or _quiet, 2 * len(resolved.pods) + 1)
    spooled = collect_observations(resolved, counter)
    try:
        counts = {
            "pods": len(resolved.pods),
            "nodes": len(resolved.nodes),
            "pdbs": len(resolved.pdbs),
            "workloads": len(resolved.workloads),
            "observations": spooled.count,
        }
        meta = metadata(resolved, digest=spooled.sha.hexdigest(), counts=counts)
        yield b'{"schema":"' + SCHEMA.encode() + b'",\n"metadata":' + orjson.dumps(meta)
        derived = hashlib.sha256()
        section_counts = dict.fromkeys(SECTIONS, 0)
        current = None
        for section, item in derived_sections(resolved, spooled.side_ids, counter):
            while current != section:
                current = SECTIONS[0] if current is None else SECTIONS[SECTIONS.index(current) + 1]
                yield (b"" if current == SECTIONS[0] else b"]") + b',\n"' + current.encode() + b'":['
            derived.update(derived_line(section, item))
            yield (b",\n" if section_counts[section] else b"\n") + orjson.dumps(item)
            section_counts[section] += 1
        while current != SECTIONS[-1]:
            current = SECTIONS[0] if current is None else SECTIONS[SECTIONS.index(current) + 1]
            yield (b"" if current == SECTIONS[0] else b"]") + b',\n"' + current.encode() + b'":['
        yield b'],\n"observations":[\n'
        yield from spooled.chunks()
        trailer = {
            "complete": True,
            "counts": {**section_counts, "observations": spooled.count},
            "derived_sha256": derived.hexdigest(),
        }
        yield b'],\n"trailer":' + orjson.dumps(trailer) + b"}\n"
        counter.add("done")
    finally:
        spooled.close()
