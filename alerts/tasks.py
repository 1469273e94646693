"""The periodic alert task: scan for new and resolved findings, then send what is due.

Celery beat runs it every ``PODLIFE_ALERTS_SCAN_S`` (``CELERY_BEAT_SCHEDULE`` in settings); on the embedded default (no broker, no beat)
``alerts.loop.NotifierLoop`` runs the same ``run_once`` in a thread of the demo process.
"""

from __future__ import annotations

from typing import Any

from alerts.loop import run_once
from podlife_site.celery_types import task


@task(name="alerts.scan_and_deliver", ignore_result=True, time_limit=120, soft_time_limit=100)
def scan_and_deliver() -> dict[str, Any]:
    return run_once()
