"""The two plotly.js bundles podlife serves (never from a CDN: clusters are often air-gapped).

* **partial** — ``plotly.js-basic-dist-min`` from the npm registry (trace types ``bar``, ``pie``,
  ``scatter``), vendored under ``static/vendor/`` at the same plotly.js version as the installed ``plotly``
  package (a test keeps them equal; ``make vendor-plotly`` refreshes it). A quarter of the full bundle's
  size, so a page parses and compiles it in a quarter of the time: every page loads it first, and the HTML
  export inlines it.
* **full** — ``plotly.min.js`` of the installed ``plotly`` package (every trace type). Pages fetch it only
  when a figure needs WebGL (``scattergl``, past ``figures.WEBGL_THRESHOLD`` segments), which no node page
  of up to 110 pods does.

Both are served and inlined through ``code``, which points plotly.js's remote defaults at this site: the
published code names remote hosts for data that trace types podlife never draws would fetch (geo maps'
topojson, map styles and tiles, icons and fonts). Every absolute URL a string literal starts with is made
site-relative (``REMOTE_URL``), so no host needs naming here and none is missed. The vendored file is stored
so rewritten (``make vendor-plotly``), and the pages' Content-Security-Policy refuses any other origin besides.
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
# The scheme and host of an absolute URL that starts one of plotly.js's string literals: the remote defaults
# its geo and map traces would fetch (topojson, map styles, tiles, icons, fonts), which podlife never draws,
# and the links of its attributions and buttons. Each becomes ``.``, site-relative: a fetch of it would ask
# this site and get a 404 instead of leaving an air-gapped network. XML namespace names (``www.w3.org``)
# are identifiers, never fetched, and stay; URLs inside prose and license comments are not literals.
REMOTE_URL = re.compile(rb"""(?<=["'`])https?://(?!www\.w3\.org/)[A-Za-z0-9.-]+(?=[/"'`])""")
CDN_URL = re.compile(
    rb"https?://[\w.-]*cdn[\w.-]*"
)  # what must not be left anywhere (tests/web/test_views.py)


def localized(code: bytes) -> bytes:
    """plotly.js code with its remote defaults pointed at this site."""
    return REMOTE_URL.sub(b".", code)


def code(bundle: str) -> bytes:
    """The code of the ``partial`` or ``full`` bundle, as pages and exports get it."""
    return localized(BUNDLES[bundle].read_bytes())


def localize_vendored() -> None:
    """Rewrite the vendored file so (``make vendor-plotly``, after it copies the published one)."""
    PARTIAL_PATH.write_bytes(localized(PARTIAL_PATH.read_bytes()))


def version_of(path: Path) -> str:
    """The plotly.js version named in a bundle's banner; raises ValueError when it names none."""
    match = _VERSION.search(path.read_bytes()[:400])
    if match is None:
        raise ValueError(f"{path} does not start with a plotly.js banner naming its version")
    return match.group(1).decode()
