"""The ``podlife.incident/v1`` JSON bundle: written item by item, read back and verified.

Layout (one item per line, so ``head`` shows the metadata and ``grep`` finds a pod)::

    {"schema":"podlife.incident/v1",
    "metadata":{...,"digest":{"observations_sha256":"…"}},
    "pods":[
    {timeline/v2 of one pod},
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
then copied out after the derived sections. Nothing else is held: pods are read ``timeline_reads.CHUNK`` at a time.
docs/incident-bundle.md is the schema.

Gzip (``iter_json(..., gzip_level=6)``, what ``export_incident`` uses for a ``.json.gz``): the observations
are most of a bundle, so they are compressed while they are read, by a second thread (zlib lets go of the
GIL while it compresses), and spooled compressed. The output is one gzip member whose deflate stream is
the head (schema, metadata, derived sections) compressed as it is written, the spooled observations, and
the trailer, each piece ending on a byte boundary (``Z_SYNC_FLUSH``); the CRC of the whole is combined
from the pieces' CRCs. It decompresses to exactly the bytes of the uncompressed bundle.
"""

from __future__ import annotations

import hashlib
import queue
import struct
import tempfile
import threading
import tomllib
import zlib
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import IO, Any

import msgspec
import orjson
from django.utils import timezone

from dashboard import serialize, timeline_reads
from dashboard.export import reads
from dashboard.export.scope import Resolved
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
    get = item.get
    return orjson.dumps({k: get(k) for k in reads.CONTRACT_FIELDS}, option=orjson.OPT_SORT_KEYS) + b"\n"


def derived_line(section: str, item: Any) -> bytes:
    """What the derived digest covers for one item of ``section`` (keys in document order)."""
    return derived_line_of(section, orjson.dumps(item))


def derived_line_of(section: str, encoded: bytes) -> bytes:
    """``derived_line`` of an item already serialized (the writer hashes the bytes it writes)."""
    return section.encode() + b"\t" + encoded + b"\n"


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
        "evidence": "evidence lists hold observations[].dedupe_key values (sorted; a key may name an "
        "observation the bundle does not carry)",
        "notes": list(resolved.notes),
        "digest": {"algorithm": "sha256", "over": "observations", "observations_sha256": digest},
    }


class _BackgroundDeflate:
    """Raw deflate of the blocks given to ``feed``, written to ``out`` by a second thread; ends on a byte
    boundary (``Z_SYNC_FLUSH``) so another deflate stream's output may follow it. ``crc`` and ``length``
    are those of the uncompressed blocks. The thread owns ``out`` until ``finish`` returns."""

    def __init__(self, out: IO[bytes], level: int) -> None:
        self.out, self.crc, self.length = out, 0, 0
        self._deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._blocks: queue.Queue[bytes | None] = queue.Queue(maxsize=8)  # a few MB in flight at most
        self._error: BaseException | None = None
        self._finished = False
        self._thread = threading.Thread(target=self._run, name="export-deflate", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while (block := self._blocks.get()) is not None:
                self.crc = zlib.crc32(block, self.crc)
                self.out.write(self._deflater.compress(block))
            self.out.write(self._deflater.flush(zlib.Z_SYNC_FLUSH))
        except BaseException as exc:  # handed to the reading thread by feed() / finish()
            self._error = exc
            while self._blocks.get() is not None:  # keep feed() from blocking until finish()
                pass

    def feed(self, block: bytes) -> None:
        if self._error is not None:
            raise self._error
        self.length += len(block)
        self._blocks.put(block)

    def finish(self) -> None:
        """Wait for the thread to write the end; raises what stopped it."""
        self.stop()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Wait for the thread (also after a failure, so that nothing writes to ``out`` any more)."""
        if not self._finished:
            self._finished = True
            self._blocks.put(None)
            self._thread.join()


class SpooledObservations:
    """Observations read once: hashed, counted, serialized into a spool to be copied out later.

    Each observation is serialized twice, no more: as the bundle writes it and in the digest's canonical
    form (sorted keys, which the payload as stored does not have). Both are buffered and handed to the
    spool and the hash ``BATCH`` at a time (the same bytes as one at a time, in fewer calls). With
    ``gzip_level`` the spool holds them deflated (``_BackgroundDeflate``), not as written.
    """

    BATCH = 1024

    def __init__(self, *, gzip_level: int | None = None) -> None:
        self.spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)  # noqa: SIM115 (closed in close())
        self.sha = hashlib.sha256()
        self.count = 0
        self.carried = reads.Carried()
        self._written: list[bytes] = []
        self._canonical: list[bytes] = []
        self.deflate = _BackgroundDeflate(self.spool, gzip_level) if gzip_level is not None else None

    def add(self, item: dict[str, Any], *, side: bool = False) -> None:
        self._canonical.append(canonical_observation(item))
        self._written.append(orjson.dumps(item))
        self.count += 1
        self.carried.note(item, side=side)
        if len(self._written) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self._written:
            return
        first = self.count == len(self._written)  # nothing spooled yet: no separator before the first
        block = (b"" if first else b",\n") + b",\n".join(self._written)
        self.sha.update(b"".join(self._canonical))
        self._written, self._canonical = [], []
        if self.deflate is not None:
            self.deflate.feed(block)
        else:
            self.spool.write(block)

    def finish(self) -> None:
        """Everything read: spool what is buffered (and wait for the compressing thread)."""
        self._flush()
        if self.deflate is not None:
            self.deflate.finish()

    def digest(self) -> str:
        return self.sha.hexdigest()

    def chunks(self, size: int = 1 << 20) -> Iterator[bytes]:
        """The spool from the start: the observations as written (deflated with ``gzip_level``)."""
        self.spool.seek(0)
        while chunk := self.spool.read(size):
            yield chunk

    def close(self) -> None:
        if self.deflate is not None:
            self.deflate.stop()  # its error, if any, reached the reader through feed() or finish()
        self.spool.close()


def collect_observations(
    resolved: Resolved, counter: _Counter, *, gzip_level: int | None = None
) -> SpooledObservations:
    spooled = SpooledObservations(gzip_level=gzip_level)
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
        side = sorted(set(side) | set(reads.resolved_context_ids(resolved.cluster, resolved.pods)))
        for item in reads.observations_by_ids(resolved.cluster, side):
            spooled.add(item, side=True)
        spooled.finish()
        counter.add("observations", len(resolved.pods) - len(done_pods))
    except BaseException:  # re-raised: the spool's files are closed (deleted) first
        spooled.close()
        raise
    return spooled


def derived_sections(
    resolved: Resolved, carried: reads.Carried, counter: _Counter
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(section, item)`` in document order; what the JSON, CSV and HTML writers all draw from. Each item
    is a Struct of ``dashboard/serialize.py`` (``serialize.BUNDLE_SECTIONS``: the import reads them back
    through the same ones) as the plain dict orjson writes."""
    for section, doc in _derived_docs(resolved, carried, counter):
        yield section, serialize.to_builtins(doc)


def _derived_docs(
    resolved: Resolved, carried: reads.Carried, counter: _Counter
) -> Iterator[tuple[str, msgspec.Struct]]:
    cluster, since, until = resolved.cluster, resolved.since, resolved.until
    for _pod, timeline in timeline_reads.pod_timelines(cluster, resolved.pods, carried.keys):
        yield "pods", timeline
        counter.add("pods")
    for node in resolved.nodes:
        yield "nodes", reads.node_doc(cluster, node, since, until, carried)
    uids_by_ns: dict[str, list[Any]] = {}
    for p in resolved.pods:
        uids_by_ns.setdefault(p.namespace, []).append(p)
    from dashboard.queries import selector_matches

    for pdb in resolved.pdbs:
        covered = [
            p.uid
            for p in uids_by_ns.get(pdb.namespace, [])
            if selector_matches(pdb.selector or {}, p.labels or {})
        ]
        yield "pdbs", reads.pdb_doc(cluster, pdb, since, until, carried, covered)
    for w in resolved.workloads:
        yield "workloads", reads.workload_doc(w, since, until)
    for f in reads.findings(
        cluster, resolved.pod_uids, [p.uid for p in resolved.pdbs], since, until, carried
    ):
        yield "findings", f


def iter_json(
    resolved: Resolved, *, progress: Progress | None = None, gzip_level: int | None = None
) -> Iterator[bytes]:
    """The bundle as a stream of byte chunks (a few KB each; the observations in 1 MB pieces).

    With ``gzip_level`` the chunks are a gzip file of it instead (see the module docstring)."""
    counter = _Counter(progress or _quiet, 2 * len(resolved.pods) + 1)
    spooled = collect_observations(resolved, counter, gzip_level=gzip_level)
    try:
        if gzip_level is None:
            tail: list[bytes] = []
            yield from _head(resolved, spooled, counter, tail)
            yield from spooled.chunks()
            yield from tail
        else:
            yield from _gzipped(resolved, spooled, counter, gzip_level)
        counter.add("done")
    finally:
        spooled.close()


def _head(
    resolved: Resolved, spooled: SpooledObservations, counter: _Counter, tail: list[bytes]
) -> Iterator[bytes]:
    """Everything before the observations; then puts what comes after them (the trailer) in ``tail``."""
    counts = {
        "pods": len(resolved.pods),
        "nodes": len(resolved.nodes),
        "pdbs": len(resolved.pdbs),
        "workloads": len(resolved.workloads),
        "observations": spooled.count,
    }
    meta = metadata(resolved, digest=spooled.digest(), counts=counts)
    yield b'{"schema":"' + SCHEMA.encode() + b'",\n"metadata":' + orjson.dumps(meta)
    derived = hashlib.sha256()
    section_counts = dict.fromkeys(SECTIONS, 0)
    current = None
    for section, item in derived_sections(resolved, spooled.carried, counter):
        while current != section:
            current = SECTIONS[0] if current is None else SECTIONS[SECTIONS.index(current) + 1]
            yield (b"" if current == SECTIONS[0] else b"]") + b',\n"' + current.encode() + b'":['
        encoded = orjson.dumps(item)  # once: the same bytes are hashed and written
        derived.update(derived_line_of(section, encoded))
        yield (b",\n" if section_counts[section] else b"\n") + encoded
        section_counts[section] += 1
    while current != SECTIONS[-1]:
        current = SECTIONS[0] if current is None else SECTIONS[SECTIONS.index(current) + 1]
        yield (b"" if current == SECTIONS[0] else b"]") + b',\n"' + current.encode() + b'":['
    yield b'],\n"observations":[\n'
    trailer = {
        "complete": True,
        "counts": {**section_counts, "observations": spooled.count},
        "derived_sha256": derived.hexdigest(),
    }
    tail.append(b'],\n"trailer":' + orjson.dumps(trailer) + b"}\n")


def _gzipped(
    resolved: Resolved, spooled: SpooledObservations, counter: _Counter, level: int
) -> Iterator[bytes]:
    """One gzip member: the head deflated here, the observations deflated already, then the trailer."""
    assert spooled.deflate is not None
    xfl = {9: b"\x02", 1: b"\x04"}.get(level, b"\x00")  # as gzip.GzipFile writes them; mtime 0, OS unknown
    yield b"\x1f\x8b\x08\x00\x00\x00\x00\x00" + xfl + b"\xff"
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    crc, length = 0, 0
    tail: list[bytes] = []
    for chunk in _head(resolved, spooled, counter, tail):
        crc, length = zlib.crc32(chunk, crc), length + len(chunk)
        if out := deflater.compress(chunk):
            yield out
    yield deflater.flush(zlib.Z_SYNC_FLUSH)
    yield from spooled.chunks()
    crc = crc32_combine(crc, spooled.deflate.crc, spooled.deflate.length)
    length += spooled.deflate.length
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    yield deflater.compress(tail[0]) + deflater.flush(zlib.Z_FINISH)
    crc, length = zlib.crc32(tail[0], crc), length + len(tail[0])
    yield struct.pack("<II", crc, length & 0xFFFFFFFF)


def _gf2_times(matrix: list[int], vector: int) -> int:
    total, i = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[i]
        vector >>= 1
        i += 1
    return total


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of ``A + B`` from ``crc32(A)``, ``crc32(B)`` and ``len(B)`` (zlib's ``crc32_combine``,
    which Python's zlib does not expose): append ``len(B)`` zero bytes to ``A``'s CRC by squaring the
    one-zero-bit operator, then add ``B``'s."""
    if length2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # the operator for one zero bit
    even = [_gf2_times(odd, v) for v in odd]  # two zero bits
    odd = [_gf2_times(even, v) for v in even]  # four zero bits
    while True:
        even = [_gf2_times(odd, v) for v in odd]
        if length2 & 1:
            crc1 = _gf2_times(even, crc1)
        length2 >>= 1
        if not length2:
            break
        odd = [_gf2_times(even, v) for v in even]
        if length2 & 1:
            crc1 = _gf2_times(odd, crc1)
        length2 >>= 1
        if not length2:
            break
    return crc1 ^ crc2
