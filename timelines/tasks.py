"""Celery tasks of the timelines app. Each is a few lines around a module a test drives without Celery.

* ``derive_dirty``: the derive stage (``timelines/derivation.py``): claims dirty keys, derives, writes,
  pushes, for at most ~20 s, then hands what is left to a successor. Queued by the store's
  ``observations_stored`` signal (one queued at a time) and every few seconds by beat, which also picks up
  the keys of a worker that died holding them once their claim expired. It runs on its own queue
  (``<deployment>.derive``), so long watch steps never hold it up.
* ``mark_open_pods``: pods still terminating or cleaning up are marked dirty every minute (a termination
  becomes "stuck" with time, with no new observation).
* ``export_incident`` / ``purge_export_jobs``: large incident exports (``timelines/export/jobs.py``).

The schedule is declared in settings (``CELERY_BEAT_SCHEDULE``). Tasks take ids and primitives; retrying
an export that failed would fail the same way, so there is none.
"""

from __future__ import annotations

from typing import Any

from podlife_site.celery_types import bound_task, task
from timelines import derivation
from timelines.export import jobs


@task(name="timelines.derive_dirty", ignore_result=True, acks_late=True)
def derive_dirty_task() -> int:
    return derivation.run_task()


@task(name="timelines.mark_open_pods", ignore_result=True)
def mark_open_pods_task() -> int:
    marked = derivation.mark_open_pods()
    if marked:
        derivation.request()
    return marked


# An export of tens of thousands of pods takes minutes, past the default CELERY_TASK_TIME_LIMIT.
@bound_task(name="timelines.export_incident", ignore_result=True, time_limit=3600, soft_time_limit=3500)
def export_incident_task(self: Any, job_id: str) -> dict[str, Any] | None:
    def report(meta: dict[str, Any]) -> None:
        if self.request.id and not self.request.is_eager:  # only a real worker has a state to update
            self.update_state(state="PROGRESS", meta=meta)

    return jobs.run_export_job(job_id, report=report)


@task(name="timelines.purge_export_jobs", ignore_result=True)
def purge_export_jobs() -> int:
    return jobs.purge_old_jobs()
