"""``{{ at|wall }}``: an instant as the pages print it before (or without) their script, the same text
``display`` in ``static/podlife/common.js`` gives under UTC: ``2024-06-07 06:54:47.250``, the fraction
trimmed to its precision in groups of three digits (a whole second has none), never rounded."""

from __future__ import annotations

from datetime import UTC, datetime

from django import template

register = template.Library()


def wall_time(at: datetime | None) -> str:
    """UTC wall time of an aware ``at`` with its fraction trimmed to its precision; "" for None."""
    if at is None:
        return ""
    at = at.astimezone(UTC)
    text = at.strftime("%Y-%m-%d %H:%M:%S")
    us = at.microsecond
    if us % 1000:
        return f"{text}.{us:06d}"
    if us:
        return f"{text}.{us // 1000:03d}"
    return text


register.filter("wall", wall_time)
