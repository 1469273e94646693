"""The two plotly.js bundles podlife serves (never from a CDN: clusters are often air-gapped).

* **partial** — ``plotly.js-basic-dist-min`` from the npm registry (trace types ``bar``, ``pie``,
  ``scatter``), vendored under ``static/vendor/`` at the same plotly.js version as the installed ``plotly``
  package (a test keeps them equal; ``make vendor-plotly`` refreshes it). A quarter of the full bundle's
  size, so a page parses and compiles it in a quarter of the time: every page loads it first, and the HTML
  export inlines it.
* **full** — ``plotly.min.js`` of the installed ``plotly`` package (every trace type). Pages fetch it only
  when a figure needs WebGL (``scattergl``, past ``figures.WEBGL_THRESHOLD`` segments), which no node page
  of up to 110 pods does.
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly

PARTIAL_PATH = (
    Path(__file__).resolve().parents[1]
    / "static"
    / "vendor"
    / "plotly.js-basic-dist-min"
    / "plotly-basic.min.js"
)
FULL_PATH = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
PARTIAL_TRACES = ("bar", "pie", "scatter")
BUNDLES = {"partial": PARTIAL_PATH, "full": FULL_PATH}
_VERSION = re.compile(rb"plotly\.js (?:\([^)]*\) )?v(\d+\.\d+\.\d+)")


def version_of(path: Path) -> str:
    """The plotly.js version named in a bundle's banner; raises ValueError when it names none."""
    match = _VERSION.search(path.read_bytes()[:400])
    if match is None:
        raise ValueError(f"{path} does not start with a plotly.js banner naming its version")
    return match.group(1).decode()
