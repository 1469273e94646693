"""The HTML bundle: one self-contained file that opens from disk, offline, with the interactive timeline.

Inside: ``templates/export/incident.html`` (the page), the data as JSON in a ``<script
type="application/json">`` block, the partial plotly.js bundle (``timelines/plotly_bundles.py``: bar and
scatter traces are all the export draws; it keeps a one-pod file near 1.2 MB), and
``templates/export/incident.js`` (draws the Gantt and the tables). A Content-Security-Policy allows
exactly those two scripts (by hash) and no network at all, so a hostile string in the data can neither run
nor fetch anything; on top of that the page puts every text into the DOM as text, and escapes what goes
into Plotly (which renders a subset of HTML in labels).

The data block is streamed pod by pod like the JSON bundle; ``<``, ``>`` and ``&`` are written as JSON
``\\u003c`` escapes so no string can close the block.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from django.template.loader import get_template
from django.utils import timezone

from timelines import plotly_bundles
from timelines.export.bundle import Progress, _Counter, _quiet, derived_sections, podlife_version
from timelines.export.scope import Resolved
from timelines.lifecycle.timeline import format_time
from timelines.plotly_bundles import PARTIAL_PATH

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "export"
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


def app_js() -> tuple[bytes, str]:
    code = (TEMPLATES / "incident.js").read_bytes()
    return code, _csp_hash(code)


def _rows(intervals: list[dict[str, Any]]) -> list[list[Any]]:
    return [[iv["state"], iv["start"], iv["end"], iv["source"]] for iv in intervals]


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
        "lanes": {lane: _rows(timeline["lanes"].get(lane, [])) for lane in HTML_LANES},
        "markers": [
            [m["at"], m["kind"], m["reason"], m["message"], m["attrs"].get("type")]
            for m in timeline["markers"]
        ],
        "findings": [
            [f["kind"], f["severity"], f["start"], f["end"], f["message"]] for f in timeline["findings"]
        ],
    }


def export_title(resolved: Resolved) -> str:
    """The page title: the pod's namespace/name when the export holds one pod, else the scope."""
    if len(resolved.pods) == 1:
        p = resolved.pods[0]
        return f"Pod {p.namespace}/{p.name or p.uid}"
    return resolved.scope.label()


def iter_html(resolved: Resolved, *, progress: Progress | None = None) -> Iterator[bytes]:
    counter = _Counter(progress or _quiet, len(resolved.pods) + 1)
    plotly_code, plotly_hash = plotly_js()
    app_code, app_hash = app_js()
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
    }
    page = get_template("export/incident.html").render(
        {
            "meta": meta,
            "csp": f"default-src 'none'; script-src {plotly_hash} {app_hash}; style-src 'unsafe-inline'; "
            "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'",
        }
    )
    head, rest = page.split(DATA_MARK)
    middle, tail = rest.split(SCRIPTS_MARK)
    yield head.encode()
    yield b'<script type="application/json" id="incident-data">{"meta":' + safe_json(meta)
    sections = {"pods": 0, "nodes": 0, "pdbs": 0, "findings": 0}
    current = None
    for section, item in derived_sections(resolved, set(), counter):
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
    yield b"<script>" + plotly_code + b"</script>\n<script>" + app_code + b"</script>\n"
    yield tail.encode()
    counter.add("done", counter.total)
