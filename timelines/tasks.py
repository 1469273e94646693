"""Celery tasks of the timelines app: large incident exports (``timelines/export/jobs.py`` does the work),
their clean-up, and re-deriving pods whose open intervals age (a termination becomes "stuck" with time,
with no new observation).

Tasks take ids and primitives; retrying an export that failed would fail the same way, so there is none.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from podlife_site.celery import add_beat_entries
from timelines.derivation import rederive_open_pods
from timelines.export import jobs

REDERIVE_OPEN_EVERY_S = 60.0
PURGE_EXPORTS_EVERY_S = 3600.0


# An export of tens of thousands of pods takes minutes, past the default CELERY_TASK_TIME_LIMIT.
@shared_task(
    name="timelines.export_incident", bind=True, ignore_result=True, time_limit=3600, soft_time_limit=3500
)
def export_incident_task(self: Any, job_id: str) -> dict[str, Any] | None:
    def report(meta: dict[str, Any]) -> None:
        if self.request.id and not self.request.is_eager:  # only a real worker has a state to update
            self.update_state(state="PROGRESS", meta=meta)

    return jobs.run_export_job(job_id, report=report)


@shared_task(name="timelines.purge_export_jobs", ignore_result=True)
def purge_export_jobs() -> int:
    return jobs.purge_old_jobs()


@shared_task(name="timelines.rederive_open_pods", ignore_result=True)
def rederive_open_pods_task() -> int:
    return rederive_open_pods()


add_beat_entries(
    {
        "podlife-rederive-open-pods": {
            "task": "timelines.rederive_open_pods",
            "schedule": REDERIVE_OPEN_EVERY_S,
        },
        "podlife-purge-export-jobs": {
            "task": "timelines.purge_export_jobs",
            "schedule": PURGE_EXPORTS_EVERY_S,
        },
    }
)
