"""The HTML bundle: one self-contained file that opens from disk, offline, with the interactive timeline.

One renderer: the Gantt is drawn by the pages' own ``static/podlife/gantt.js``, read from ``static/`` at
export time and inlined byte for byte, with the export's page code (``templates/export/incident.js``)
appended in the same inline module (an inline module's exports cannot be imported, so the page code must
share its scope). gantt.js imports ``./common.js``; an import map resolves that to a ``data:`` URL of
``static/podlife/common.js``, byte for byte too, with its SRI hash (the import map's ``integrity``), which
the Content-Security-Policy lists: no ``data:`` wildcard, nothing fetched. Needs a browser with import
maps and their ``integrity`` (Chromium 127 and later); elsewhere the page says it could not draw.

Inside: ``templates/export/incident.html`` (the page), the data as JSON in a ``<script
type="application/json">`` block, the import map, the partial plotly.js bundle
(``dashboard/plotly_bundles.py``: bar and scatter traces, all the export draws, since it never switches to
WebGL; it keeps a one-pod file near 1.2 MB), and the module. The CSP allows exactly those scripts (by hash)
and no network at all, so a hostile string in the data can neither run nor fetch anything; on top of that
the page puts every text into the DOM as text, and gantt.js escapes what goes into Plotly (which renders a
subset of HTML in labels).

The data block is streamed pod by pod like the JSON bundle; ``<``, ``>`` and ``&`` are written as JSON
``\\u003c`` escapes so no string can close the block. Pods are in the row shape gantt.js draws, as
pod.js builds it from a timeline (``intervals``: ``[lane, state, start, end, source, evidence, attrs]``,
the attrs turned into hover text by gantt.js's ``unknownBounds`` in the page; ``markers``; ``findings``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from django.template.loader import get_template
from django.utils import timezone

from dashboard import plotly_bundles
from dashboard.export import reads
from dashboard.export.bundle import Progress, _Counter, _quiet, derived_sections, podlife_version
from dashboard.export.scope import Resolved
from dashboard.plotly_bundles import PARTIAL_PATH
from dashboard.web import figures
from timelines.lifecycle.timeline import format_time

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "export"
STATIC = Path(__file__).resolve().parents[2] / "static" / "podlife"
PLOTLY_PATH = PARTIAL_PATH
DATA_MARK = "<!--PODLIFE-DATA-->"
SCRIPTS_MARK = "<!--PODLIFE-SCRIPTS-->"
HTML_LANES = ("worker", "api")  # drawn in the Gantt; the JSON bundle has every lane


def safe_json(value: Any) -> bytes:
    """JSON that cannot end a ``<script>`` element or open a comment in it."""
    return orjson.dumps(value).replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


def _csp_hash(code: bytes) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(code).digest()).decode() + "'"


@cache
def _plotly(mtime: float) -> tuple[bytes, str]:
    code = plotly_bundles.code("partial")
    if b"</script" in code.lower():  # never true for plotly.min.js today; a script block must not hold it
        raise RuntimeError(f"{PLOTLY_PATH} contains '</script' and cannot be inlined")
    return code, _csp_hash(code)


def plotly_js() -> tuple[bytes, str]:
    """The partial plotly.js bundle and its CSP hash (read once per process)."""
    return _plotly(PLOTLY_PATH.stat().st_mtime)


def _inlinable(path: Path) -> bytes:
    code = path.read_bytes()
    # Inside <script>, "</script" ends the element and "<!--" changes how the parser reads what follows.
    if b"</script" in code.lower() or b"<!--" in code:
        raise RuntimeError(f"{path} contains '</script' or '<!--' and cannot be inlined")
    return code


# A static import of a module next to the importer: `... from "./name.js"` (also `export ... from`).
RELATIVE_IMPORT = re.compile(rb"""\bfrom\s*["'](\./[\w.-]+\.js)["']""")


def app_js() -> tuple[bytes, bytes, str]:
    """The inline module (gantt.js as it is in static/, then the export's page code) and its CSP hash; and
    the import map that resolves each module gantt.js imports (``./common.js``) to that file as it is in
    static/, with its SRI hash, plus those hashes. Read at every export, so the file holds the renderer the
    pages serve at that moment."""
    gantt = _inlinable(STATIC / "gantt.js")
    module = gantt + b"\n" + _inlinable(TEMPLATES / "incident.js")
    imports: dict[str, str] = {}
    integrity: dict[str, str] = {}
    for specifier in sorted({m.decode() for m in RELATIVE_IMPORT.findall(module)}):
        code = (STATIC / specifier).read_bytes()
        if RELATIVE_IMPORT.search(code):
            # A data: URL is no base for a relative specifier: such an import could not resolve offline.
            raise RuntimeError(f"{STATIC / specifier} imports another module and cannot be inlined as data:")
        url = "data:text/javascript;base64," + base64.b64encode(code).decode()
        imports[specifier] = url
        integrity[url] = _csp_hash(code).strip("'")
    importmap = orjson.dumps({"imports": imports, "integrity": integrity})
    # The module's hash, the import map's, and each imported file's (a hash source allows a fetched script
    # whose integrity metadata it matches: CSP 3, "external scripts with hash").
    hashes = [_csp_hash(module), _csp_hash(importmap), *(f"'{h}'" for h in integrity.values())]
    return module, importmap, " ".join(hashes)


def _rows(lane: str, intervals: list[dict[str, Any]]) -> list[list[Any]]:
    # attrs as they are (gantt.js's unknownBounds reads them), or 0 when empty (most intervals).
    return [
        [lane, iv["state"], iv["start"], iv["end"], iv["source"], iv["evidence"], iv.get("attrs") or 0]
        for iv in intervals
    ]


def compact_pod(timeline: dict[str, Any]) -> dict[str, Any]:
    pod = timeline["pod"]
    return {
        "uid": pod["uid"],
        "namespace": pod["namespace"],
        "name": pod["name"],
        "node": pod["node"],
        "phase": pod["phase"],
        "owner": pod["owner"],
        "created_at": pod["created_at"],
        "deleted_at": pod["deleted_at"],
        "last_observed": pod["last_observed"],
        "intervals": [row for lane in HTML_LANES for row in _rows(lane, timeline["lanes"].get(lane, []))],
        "markers": [
            [m["at"], m["kind"], m["reason"], m["message"], m["evidence"]] for m in timeline["markers"]
        ],
        "findings": [
            [f["kind"], f["severity"], f["message"], f["start"], f["end"], f["evidence"]]
            for f in timeline["findings"]
        ],
    }


def export_title(resolved: Resolved) -> str:
    """The page title: the pod's namespace/name when the export holds one pod, else the scope."""
    if len(resolved.pods) == 1:
        p = resolved.pods[0]
        return f"Pod {p.namespace}/{p.name or p.uid}"
    return resolved.scope.label()


def iter_html(resolved: Resolved, *, progress: Progress | None = None, tz: str = "utc") -> Iterator[bytes]:
    counter = _Counter(progress or _quiet, len(resolved.pods) + 1)
    plotly_code, plotly_hash = plotly_js()
    module, importmap, module_hashes = app_js()
    cluster = resolved.cluster
    meta = {
        "cluster": cluster.name,
        "scope": resolved.scope.label(),
        "since": format_time(resolved.since),
        "until": format_time(resolved.until),
        "generated_at": format_time(timezone.now()),
        "podlife_version": podlife_version(),
        "notes": resolved.notes,
        "title": export_title(resolved),
        "tz": tz,  # the zone the file opens in: the exporter's (scope.parse_zone)
    }
    page = get_template("export/incident.html").render(
        {
            "meta": meta,
            "csp": f"default-src 'none'; script-src {plotly_hash} {module_hashes}; style-src 'unsafe-inline'; "
            "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'",
        }
    )
    head, rest = page.split(DATA_MARK)
    middle, tail = rest.split(SCRIPTS_MARK)
    yield head.encode()
    yield b'<script type="application/json" id="incident-data">{"meta":' + safe_json(meta)
    yield b',"gantt":' + safe_json(figures.gantt_config())
    sections = {"pods": 0, "nodes": 0, "pdbs": 0, "findings": 0}
    current = None
    for section, item in derived_sections(resolved, reads.Carried(), counter):
        if section == "workloads":
            continue
        if section != current:
            yield (b"]" if current else b"") + b',"' + section.encode() + b'":['
            current = section
        if section == "pods":
            item = compact_pod(item)
        elif section in ("nodes", "pdbs"):
            item = {k: v for k, v in item.items() if k not in ("samples", "labels", "selector")}
        yield (b"," if sections[section] else b"") + safe_json(item)
        sections[section] += 1
    yield (b"]" if current else b"") + b"}</script>\n"
    yield middle.encode()
    yield b'<script type="importmap">' + importmap + b"</script>\n"
    yield b"<script>" + plotly_code + b'</script>\n<script type="module">' + module + b"</script>\n"
    yield tail.encode()
    counter.add("done", counter.total)
