"""Celery tasks of the read side: large incident exports (``dashboard/export/jobs.py``).

* ``export_incident``: one export job, in steps a test drives without Celery (``run_export_job``);
  ``start_export`` records a job and queues it (here, beside the task: ``jobs`` imports nothing of this
  module, so the two form no import cycle).
* ``purge_export_jobs`` (beat, hourly): removes finished jobs' files past their keep time.

Tasks take ids and primitives; retrying an export that failed would fail the same way, so there is none.
"""

from __future__ import annotations

from typing import Any

from dashboard.export import Scope, jobs
from podlife_site.celery_types import bound_task, task


# An export of tens of thousands of pods takes minutes, past the default CELERY_TASK_TIME_LIMIT.
@bound_task(name="dashboard.export_incident", ignore_result=True, time_limit=3600, soft_time_limit=3500)
def export_incident_task(self: Any, job_id: str) -> dict[str, Any] | None:
    def report(meta: dict[str, Any]) -> None:
        if self.request.id and not self.request.is_eager:  # only a real worker has a state to update
            self.update_state(state="PROGRESS", meta=meta)

    return jobs.run_export_job(job_id, report=report)


@task(name="dashboard.purge_export_jobs", ignore_result=True)
def purge_export_jobs() -> int:
    return jobs.purge_old_jobs()


def start_export(
    cluster: str,
    scope: Scope,
    since: str,
    until: str,
    fmt: str,
    *,
    gz: bool = False,
    user_id: int | None = None,
    namespaces: set[str] | None = None,
    tz: str = "utc",
) -> str:
    """Record an export job (``jobs.record_job``) and queue it; returns the job id. A malformed request
    raises (ScopeError, NotFound) before anything is recorded or queued."""
    job_id = jobs.record_job(
        cluster, scope, since, until, fmt, gz=gz, user_id=user_id, namespaces=namespaces, tz=tz
    )
    export_incident_task.delay(job_id)
    return job_id
