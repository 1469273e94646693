"""Export an incident (a scope and a window) as a bundle, and import a bundle as a read-only cluster.

What callers use (the CLI, the Celery task, the dashboard's views):

* ``export_incident(cluster, scope, since, until, fmt, out)`` writes a bundle to a binary stream.
* ``iter_export(resolved, fmt)`` yields the same bytes in chunks (for a streaming HTTP response).
* ``resolve(cluster, scope, since, until, namespaces=...)`` (``scope.py``) says what a bundle will hold.
* ``import_incident(path_or_stream, name=...)`` (``importer.py``) loads a JSON bundle.

Formats: ``json`` (``podlife.incident/v1``, docs/incident-bundle.md; gzip when asked), ``csv`` (a zip of
CSV files) and ``html`` (one self-contained file with the interactive timeline).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from dashboard.export.bundle import SCHEMA, Progress, iter_json
from dashboard.export.scope import Resolved, Scope, ScopeError, parse_window, parse_zone, resolve
from timelines.models import Cluster

FORMATS = ("json", "csv", "html")
GZIP_LEVEL = 6  # zlib's default: a 10,000-pod day compresses 17:1; level 1 is twice as fast, 50% bigger
CONTENT_TYPES = {
    "json": "application/json",
    "json.gz": "application/gzip",
    "csv": "application/zip",
    "html": "text/html; charset=utf-8",
}


@dataclass(frozen=True)
class ExportSummary:
    pods: int
    nodes: int
    pdbs: int
    bytes_written: int


def iter_export(
    resolved: Resolved, fmt: str, *, progress: Progress | None = None, tz: str = "utc"
) -> Iterator[bytes]:
    """The bundle of ``resolved`` in format ``fmt`` as byte chunks (uncompressed; see ``gzip_chunks``).
    ``tz`` (``scope.parse_zone``): the zone an HTML file opens in; the data are UTC in every format."""
    if fmt == "json":
        return iter_json(resolved, progress=progress)
    if fmt == "csv":
        from dashboard.export.csvzip import iter_csv_zip

        return iter_csv_zip(resolved, progress=progress)
    if fmt == "html":
        from dashboard.export.html import iter_html

        return iter_html(resolved, progress=progress, tz=tz)
    raise ScopeError(f"format {fmt!r} is not one of {list(FORMATS)}")


class ByteSink(Protocol):
    """Where a bundle is written: a binary file, or the command's text stdout behind a decoder."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> object: ...


class _CountingWriter:
    def __init__(self, out: ByteSink) -> None:
        self.out, self.count = out, 0

    def write(self, data: bytes) -> int:
        self.out.write(data)
        self.count += len(data)
        return len(data)

    def flush(self) -> None:
        self.out.flush()


def gzip_chunks(chunks: Iterator[bytes], *, level: int = 6) -> Iterator[bytes]:
    """``chunks`` gzip-compressed, still streamed (for an HTTP response of a ``.json.gz``)."""
    import zlib

    deflater = zlib.compressobj(level, zlib.DEFLATED, 31)
    for chunk in chunks:
        if out := deflater.compress(chunk):
            yield out
    yield deflater.flush()


def export_incident(
    cluster: Cluster,
    scope: Scope,
    since: str | datetime,
    until: str | datetime,
    fmt: str,
    out: ByteSink,
    *,
    namespaces: set[str] | None = None,
    gzip_output: bool = False,
    progress: Progress | None = None,
    tz: str = "utc",
) -> ExportSummary:
    """Write the bundle of ``scope`` over ``[since, until)`` to the binary stream ``out``.

    ``namespaces`` narrows to readable namespaces (None: all). ``gzip_output`` compresses (the CLI sets
    it for a ``.gz`` name; JSON only makes sense, the others are compressed already or meant to open).
    ``tz``: the zone an HTML file opens in (``utc`` or an IANA name; the reader can switch).
    Raises ScopeError / ``queries.NotFound`` with a message naming the input.
    """
    if fmt not in FORMATS:
        raise ScopeError(f"format {fmt!r} is not one of {list(FORMATS)}")
    start, end = parse_window(since, until)
    zone = parse_zone(tz)
    resolved = resolve(cluster, scope, start, end, namespaces=namespaces)
    counter = _CountingWriter(out)
    if gzip_output and fmt == "json":
        # Compressed as it is produced, the observations by a second thread (bundle.py): the same bundle.
        for chunk in iter_json(resolved, progress=progress, gzip_level=GZIP_LEVEL):
            counter.write(chunk)
        out.flush()
        return ExportSummary(len(resolved.pods), len(resolved.nodes), len(resolved.pdbs), counter.count)
    gz = gzip.GzipFile(fileobj=counter, mode="wb", compresslevel=GZIP_LEVEL, mtime=0) if gzip_output else None
    sink: gzip.GzipFile | _CountingWriter = gz if gz is not None else counter
    try:
        for chunk in iter_export(resolved, fmt, progress=progress, tz=zone):
            sink.write(chunk)
    finally:
        if gz is not None:
            gz.close()
    out.flush()
    return ExportSummary(len(resolved.pods), len(resolved.nodes), len(resolved.pdbs), counter.count)


def filename(cluster: Cluster, scope: Scope, since: datetime, fmt: str, *, gz: bool = False) -> str:
    """A download name such as ``prod-eu_node-worker-1_20240607T0600Z.json.gz`` (ASCII, no slashes)."""
    import re

    what = re.sub(
        r"[^A-Za-z0-9.-]+", "-", scope.label() if scope.kind == "pods" else f"{scope.kind}-{scope.values[0]}"
    )
    ext = {"json": "json", "csv": "zip", "html": "html"}[fmt] + (".gz" if gz and fmt == "json" else "")
    return f"{cluster.name}_{what.strip('-')[:80]}_{since.strftime('%Y%m%dT%H%MZ')}.{ext}"


def import_incident(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See ``dashboard.export.importer.import_incident`` (imported lazily: it pulls in derivation)."""
    from dashboard.export.importer import import_incident as run

    return run(*args, **kwargs)


__all__ = [
    "CONTENT_TYPES",
    "FORMATS",
    "SCHEMA",
    "ExportSummary",
    "Resolved",
    "Scope",
    "ScopeError",
    "export_incident",
    "filename",
    "gzip_chunks",
    "import_incident",
    "iter_export",
    "parse_window",
    "parse_zone",
    "resolve",
]
