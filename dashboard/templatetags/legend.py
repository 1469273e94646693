"""``{% worker_phase_css %}``: the legend's swatches of the worker phases (``<span class="lane setup">``),
coloured from the figures' own table (``dashboard/web/figures.py`` ``STATE_COLOURS``), so the legend and
the Gantt cannot drift apart. Each swatch's text is white or the pages' dark ink, whichever contrasts more
with its colour (WCAG 2 relative luminance)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from dashboard.web.figures import STATE_COLOURS
from timelines.lifecycle.timeline import WorkerPhase

register = template.Library()

INK = "#1d2330"  # the pages' text colour (templates/base.html)


def luminance(hex_colour: str) -> float:
    """The WCAG 2 relative luminance of ``#RRGGBB``."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """The WCAG 2 contrast ratio of two colours (1 to 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_colour(background: str) -> str:
    return "#ffffff" if contrast(background, "#ffffff") >= contrast(background, INK) else INK


@register.simple_tag
def worker_phase_css() -> SafeString:
    """CSS rules ``.lane.PHASE { background; color }`` for the worker lane's states."""
    rules = []
    for phase in (*WorkerPhase.ORDER, WorkerPhase.UNKNOWN):
        colour = STATE_COLOURS[phase]
        rules.append(f".lane.{phase} {{ background: {colour}; color: {text_colour(colour)}; }}")
    # Only names and #RRGGBB colours from our own tables: nothing to escape.
    return mark_safe("\n    ".join(rules))
