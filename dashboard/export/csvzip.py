"""The CSV bundle: a zip with ``intervals.csv``, ``markers.csv``, ``findings.csv``, ``observations.csv``
and ``metadata.json`` (the same metadata and digest as the JSON bundle).

Every file has a header row; times are UTC ISO 8601 with microseconds; the files are UTF-8 with a byte
order mark so a spreadsheet opens them as UTF-8. A text cell that a spreadsheet would run as a formula
(starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return) gets a leading ``'``: messages and
payloads can carry text a pod chose. The zip is written as a stream (no seeking), entry by entry.
"""

from __future__ import annotations

import csv
import hashlib
import io
import tempfile
import zipfile
from collections.abc import Iterator
from typing import Any

import orjson

from dashboard.export import reads
from dashboard.export.bundle import (
    Progress,
    _Counter,
    _quiet,
    canonical_observation,
    derived_sections,
    metadata,
)
from dashboard.export.scope import Resolved
from timelines.lifecycle.timeline import parse_time

INTERVAL_COLUMNS = (
    "subject", "pod_uid", "namespace", "pod_name", "node", "lane", "state",
    "start_utc", "end_utc", "duration_s", "source", "attrs", "evidence",
)  # fmt: skip
MARKER_COLUMNS = (
    "pod_uid",
    "namespace",
    "pod_name",
    "node",
    "at_utc",
    "kind",
    "reason",
    "message",
    "attrs",
    "evidence",
)
FINDING_COLUMNS = (
    "subject", "subject_name", "pod_uid", "namespace", "node", "kind", "severity",
    "start_utc", "end_utc", "message", "attrs", "evidence",
)  # fmt: skip
OBSERVATION_COLUMNS = (
    "id", "kind", "source", "observed_at_utc", "received_at_utc", "dedupe_key",
    "pod_uid", "node", "namespace", "name", "payload",
)  # fmt: skip
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(value: Any) -> Any:
    """A CSV cell: JSON for objects, a leading ``'`` for text a spreadsheet would evaluate."""
    if value is None:
        return ""
    if isinstance(value, dict | list):
        value = orjson.dumps(value).decode()
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _duration(start: str, end: str | None) -> str:
    if end is None:
        return ""
    a, b = parse_time(start), parse_time(end)
    assert a is not None and b is not None
    return f"{(b - a).total_seconds():.6f}"


class _Sink:
    """A write-only, non-seekable stream whose bytes the generator hands on (zipfile streams into it)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:  # zipfile's types ask for it; ZipFile never closes a stream it was handed
        return None

    def drain(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def _writer(binary: Any) -> tuple[io.TextIOWrapper, Any]:
    text = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="", write_through=True)
    return text, csv.writer(text, lineterminator="\r\n")


def _interval_rows(
    subject: str, ident: dict[str, Any], lanes: dict[str, list[dict[str, Any]]]
) -> Iterator[list[Any]]:
    for lane, intervals in lanes.items():
        for iv in intervals:
            yield [
                subject,
                ident.get("uid"),
                cell(ident.get("namespace")),
                cell(ident.get("name")),
                cell(ident.get("node")),
                cell(lane),
                cell(iv["state"]),
                iv["start"],
                iv["end"] or "",
                _duration(iv["start"], iv["end"]),
                iv["source"],
                cell(iv["attrs"]),
                " ".join(iv["evidence"]),
            ]


def iter_csv_zip(resolved: Resolved, *, progress: Progress | None = None) -> Iterator[bytes]:
    counter = _Counter(progress or _quiet, 2 * len(resolved.pods) + 1)
    side_ids = reads.side_observation_ids(
        resolved.cluster,
        resolved.since,
        resolved.until,
        nodes=resolved.nodes,
        pdbs=resolved.pdbs,
        workloads=resolved.workloads,
    )
    carried = reads.Carried(side_ids=set(side_ids))  # derived first: no keys read yet
    sink = _Sink()
    zf = zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6)
    with (
        tempfile.SpooledTemporaryFile(max_size=8 << 20) as markers_spool,
        tempfile.SpooledTemporaryFile(max_size=8 << 20) as findings_spool,
    ):
        markers_text, markers = _writer(markers_spool)
        markers.writerow(MARKER_COLUMNS)
        findings_text, findings = _writer(findings_spool)
        findings.writerow(FINDING_COLUMNS)
        with zf.open("intervals.csv", "w", force_zip64=True) as entry:
            text, intervals = _writer(entry)
            intervals.writerow(INTERVAL_COLUMNS)
            for section, item in derived_sections(resolved, carried, counter):
                if section == "pods":
                    pod = item["pod"]
                    intervals.writerows(_interval_rows("pod", pod, item["lanes"]))
                    for m in item["markers"]:
                        markers.writerow(
                            [
                                pod["uid"],
                                cell(pod["namespace"]),
                                cell(pod["name"]),
                                cell(pod["node"]),
                                m["at"],
                                m["kind"],
                                cell(m["reason"]),
                                cell(m["message"]),
                                cell(m["attrs"]),
                                " ".join(m["evidence"]),
                            ]  # fmt: skip
                        )
                elif section == "nodes":
                    intervals.writerows(_interval_rows("node", {"node": item["name"]}, item["lanes"]))
                elif section == "pdbs":
                    ident = {"namespace": item["namespace"], "name": item["name"]}
                    intervals.writerows(_interval_rows("pdb", ident, item["lanes"]))
                elif section == "findings":
                    f = item
                    findings.writerow(
                        [
                            f["subject"],
                            cell(f["subject_name"]),
                            f["pod_uid"] or "",
                            cell(f["namespace"]),
                            cell(f["node"]),
                            f["kind"],
                            f["severity"],
                            f["start"],
                            f["end"] or "",
                            cell(f["message"]),
                            cell(f["attrs"]),
                            " ".join(f["evidence"]),
                        ]  # fmt: skip
                    )
                if len(sink.parts) > 64:
                    yield sink.drain()
            text.detach()
        for name, spool, text_wrapper in (
            ("markers.csv", markers_spool, markers_text),
            ("findings.csv", findings_spool, findings_text),
        ):
            text_wrapper.flush()
            text_wrapper.detach()
            spool.seek(0)
            with zf.open(name, "w") as entry:
                while chunk := spool.read(1 << 20):
                    entry.write(chunk)
                    yield sink.drain()
    sha = hashlib.sha256()
    count = 0
    with zf.open("observations.csv", "w", force_zip64=True) as entry:
        text, writer = _writer(entry)
        writer.writerow(OBSERVATION_COLUMNS)
        done_pods: set[str] = set()

        def all_observations() -> Iterator[dict[str, Any]]:
            yield from reads.pod_observations(resolved.cluster, resolved.pods)
            yield from reads.observations_by_ids(resolved.cluster, side_ids)

        for o in all_observations():
            sha.update(canonical_observation(o))
            count += 1
            writer.writerow(
                [
                    o["id"],
                    o["kind"],
                    o["source"],
                    o["observed_at"],
                    o["received_at"],
                    cell(o["dedupe_key"]),
                    o["pod_uid"] or "",
                    cell(o["node"]),
                    cell(o["namespace"]),
                    cell(o["name"]),
                    cell(o["payload"]),
                ]  # fmt: skip
            )
            if o["pod_uid"] and o["pod_uid"] not in done_pods:
                done_pods.add(o["pod_uid"])
                counter.add("observations")
            if len(sink.parts) > 64:
                yield sink.drain()
        text.detach()
    counts = {
        "pods": len(resolved.pods),
        "nodes": len(resolved.nodes),
        "pdbs": len(resolved.pdbs),
        "workloads": len(resolved.workloads),
        "observations": count,
    }
    meta = metadata(resolved, digest=sha.hexdigest(), counts=counts)
    meta["format"] = "csv"
    meta["files"] = {
        "intervals.csv": list(INTERVAL_COLUMNS),
        "markers.csv": list(MARKER_COLUMNS),
        "findings.csv": list(FINDING_COLUMNS),
        "observations.csv": list(OBSERVATION_COLUMNS),
    }
    zf.writestr("metadata.json", orjson.dumps(meta, option=orjson.OPT_INDENT_2))
    zf.close()
    counter.add("done", counter.total)
    yield sink.drain()
