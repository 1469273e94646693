"""The lifecycle core: pure code from observations of one pod to its timeline and findings.

Imports no Django, Celery, Channels or kubernetes client (a test guards this).

Its hot modules may run compiled (``make core-ext``: mypyc, the same sources; ``_compiled`` checks the
copies are current). Entry points: ``derive_pod_timeline(observations, thresholds=..., now=...) -> PodTimeline`` and
``schema.write_timeline(timeline, cluster)`` / ``schema.read_timeline(data)`` (docs/timeline-schema.md).
"""

from __future__ import annotations

from timelines.lifecycle import _compiled  # noqa: F401  (first: refuses stale compiled modules)
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.findings import DEFAULT_THRESHOLDS, Thresholds, detect_findings
from timelines.lifecycle.timeline import (
    SCHEMA,
    ApiState,
    ContainerState,
    Finding,
    Interval,
    Marker,
    PodTimeline,
    WorkerPhase,
    format_time,
    parse_time,
)

__all__ = [
    "DEFAULT_THRESHOLDS",
    "SCHEMA",
    "ApiState",
    "ContainerState",
    "Finding",
    "Interval",
    "Marker",
    "PodTimeline",
    "Thresholds",
    "WorkerPhase",
    "derive_pod_timeline",
    "detect_findings",
    "format_time",
    "parse_time",
]
