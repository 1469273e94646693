"""What the pages draw: the colour of every lane state, the Gantt settings the browser uses, and the
Plotly figures that are drawn once on the server side (status over time of workloads and PDBs).

The Gantt itself is built in the browser (``static/podlife/gantt.js``) because live deltas change single
rows of it; this module is the one place its colours and thresholds come from (handed to the page with
``json_script``). Every text that can hold user data and goes into Plotly is escaped with ``plotly_text``:
Plotly renders a subset of HTML in hover text and labels.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from timelines.lifecycle.timeline import format_time

# One palette for every chart, safe for the common colour-vision deficiencies: the hues of Okabe & Ito's
# "Color Universal Design" set (https://jfly.uni-koeln.de/color/), with Paul Tol's indigo, wine and pale
# green for the few states that set lacks, and three greys of clearly different lightness (light: not
# happening / over; mid: not known; dark: gone). A state means the same in every lane it appears in
# (running is green in the API and container lanes as in the worker's); two states that sit side by side
# never share a colour ("running" green, a true condition indigo).
STATE_COLOURS: dict[str, str] = {
    # worker
    "setup": "#0072B2",  # blue
    "running": "#009E73",  # bluish green
    "terminating": "#E69F00",  # orange
    "cleanup": "#CC79A7",  # reddish purple
    "unknown": "#999999",  # mid grey: not known
    "done": "#DDDDDD",  # light grey: over
    # api
    "pending": "#F0E442",  # yellow: waiting for something
    "scheduled": "#56B4E9",  # sky blue
    "initializing": "#0072B2",  # the API's view of setup
    "succeeded": "#117733",  # dark green
    "failed": "#D55E00",  # vermillion
    "deleted": "#555555",  # dark grey: gone
    # containers
    "waiting": "#F0E442",
    "terminated": "#555555",
    # conditions: false is light grey (normal: not yet ready, or done); a strong colour only where it is an
    # anomaly, e.g. a pod that was Ready going not ready while it runs (pod.js names that state
    # "false (unexpected)")
    "true": "#332288",  # indigo
    "false": "#DDDDDD",
    "True": "#332288",
    "False": "#DDDDDD",
    "false (unexpected)": "#882255",  # wine: never the failed vermillion
    "False (unexpected)": "#882255",
    # pdb / node
    "allowed": "#009E73",
    "blocked": "#D55E00",
    "ready": "#009E73",
    "not_ready": "#D55E00",
    "cordoned": "#8E5B3C",  # brown: never the terminating orange
    "schedulable": "#CCDDAA",  # pale green
    "shutting_down": "#000000",
}
FALLBACK_COLOUR = "#6c7a89"
# info is teal, never the setup blue; warning amber, critical red (bands behind a row, at low opacity).
SEVERITY_COLOURS = {"info": "#44AA99", "warning": "#DDAA33", "critical": "#CC3311"}
# The legend's groups, in order: a lane's name → its group's title (gantt.js laneGroup does the mapping).
LEGEND_GROUPS = ["worker", "API", "containers", "conditions", "node", "markers", "findings"]
# The worker lane's tail while its node's kubelet evidence is older than the API's (dashboard/freshness.py).
PENDING_STYLE = {"label": "kubelet evidence pending", "colour": "#5a6270"}
# Minimum drawn width of a bar, in pixels at the current zoom (the hover keeps the true duration).
MIN_BAR_PX = 3

# Bars (SVG) up to this many segments; WebGL lines (scattergl) past it, so 10,000 pods draw in seconds.
WEBGL_THRESHOLD = 1000
# Row labels on the y axis only up to this many rows; up to it every row gets ROW_PX pixels of height, so
# no two labels overlap (a 243-pod namespace is a 4,000 px chart with every pod named, not a diagonal of
# 1-2 px bars). Past it (the level of detail's bands take over from 2,000 pods) hover names the pod.
LABEL_LIMIT = 600
ROW_PX = 16
# Markers (events, kubelet lines) of one row closer than this many pixels at the current zoom are drawn
# as one, with their count.
MARKER_CLUSTER_PX = 12
# The live consumer sends at most this many frames a second to one browser.
LIVE_MAX_FPS = 10

WORKER_ORDER = ("setup", "running", "unknown", "terminating", "cleanup", "done")
# The order of a lane group's legend entries: a pod's life from first to last (states not named here come
# after, by name).
STATE_ORDER = (
    *WORKER_ORDER,
    "pending",
    "scheduled",
    "initializing",
    "waiting",
    "succeeded",
    "failed",
    "terminated",
    "deleted",
    "true",
    "True",
    "false",
    "False",
    "false (unexpected)",
    "False (unexpected)",
)

# How each interval source is drawn (gantt.js), so a bound the kubelet logged, one inferred from its V0–V3
# lines and one inferred from the API never look alike: solid; cross-hatched with dashed WebGL lines;
# translucent, hatched, dotted. ``label`` is appended to the legend entry.
PROVENANCE_STYLES: dict[str, dict[str, Any]] = {
    "observed": {"label": "", "opacity": 1.0, "pattern": "", "dash": "solid"},
    "kubelet": {"label": "from kubelet lines", "opacity": 0.8, "pattern": "x", "dash": "dash"},
    "inferred": {"label": "inferred", "opacity": 0.55, "pattern": "/", "dash": "dot"},
}


def gantt_config() -> dict[str, Any]:
    """Settings the browser's Gantt reads (``json_script`` → ``gantt.js``)."""
    return {
        "colours": STATE_COLOURS,
        "fallback": FALLBACK_COLOUR,
        "severity": SEVERITY_COLOURS,
        "webgl_threshold": WEBGL_THRESHOLD,
        "label_limit": LABEL_LIMIT,
        "row_px": ROW_PX,
        "worker_order": list(WORKER_ORDER),
        "state_order": list(STATE_ORDER),
        "provenance": PROVENANCE_STYLES,
        "pending": PENDING_STYLE,
        "min_bar_px": MIN_BAR_PX,
        "legend_groups": LEGEND_GROUPS,
        "marker_cluster_px": MARKER_CLUSTER_PX,
    }


def plotly_text(value: object) -> str:
    """Escape for Plotly's HTML-like text (hover, labels): ``<img …>`` shows as text, never as markup."""
    return html.escape("" if value is None else str(value), quote=False)


def _times(rows: Sequence[Mapping[str, Any]]) -> list[str | None]:
    return [format_time(r["at"]) for r in rows]


def series_figure(
    rows: Sequence[Mapping[str, Any]],
    fields: Iterable[tuple[str, str]],
    *,
    title: str,
    until: datetime | None = None,
    shade: Iterable[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Step lines (one per ``(field, label)``) of samples over time, with shaded spans (e.g. PDB blocked).

    The last value is held until ``until`` (or the last sample) so the step shows how long it lasted.
    """
    x = _times(rows)
    if rows and until is not None and until > rows[-1]["at"]:
        x.append(format_time(until))
    traces = []
    palette = ["#0072B2", "#009E73", "#E69F00", "#CC79A7", "#D55E00"]  # the Gantt's palette
    for i, (field, label) in enumerate(fields):
        y = [r[field] for r in rows]
        if len(x) > len(y) and y:
            y.append(y[-1])
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": plotly_text(label),
                "x": x,
                "y": y,
                "line": {"shape": "hv", "color": palette[i % len(palette)]},
                "hovertemplate": f"{plotly_text(label)}: %{{y}}<br>%{{x|%Y-%m-%d %H:%M:%S.%f}}<extra></extra>",
            }
        )
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": format_time(s["start"]),
            "x1": format_time(s["end"] or until or (rows[-1]["at"] if rows else s["start"])),
            "y0": 0,
            "y1": 1,
            "fillcolor": "rgba(196,60,57,0.15)",
            "line": {"width": 0},
        }
        for s in shade
    ]
    return {
        "data": traces,
        "layout": {
            "title": {"text": plotly_text(title)},
            "height": 360,
            # The legend below the axis with room of its own (never clipped); the pages align the left
            # and right margins and the time range with the Gantt above (timeline-page.js drawStatus).
            "margin": {"l": 50, "r": 20, "t": 40, "b": 80},
            "xaxis": {"type": "date"},
            "yaxis": {"rangemode": "tozero", "dtick": 1 if rows and max_value(rows, fields) <= 10 else None},
            "shapes": shapes,
            "legend": {"orientation": "h", "yanchor": "top", "y": -0.22},
        },
    }


def max_value(rows: Sequence[Mapping[str, Any]], fields: Iterable[tuple[str, str]]) -> int:
    names = [f for f, _ in fields]
    return max((r[n] or 0 for r in rows for n in names), default=0)
