"""Celery tasks of the pipeline (the timelines app). Each is a few lines around a module a test drives without Celery.

* ``derive_dirty``: the derive stage (``timelines/derivation.py``): claims dirty keys, derives, writes,
  pushes, for at most ~20 s, then hands what is left to a successor. Queued by the store's
  ``observations_stored`` signal (one queued at a time) and every few seconds by beat, which also picks up
  the keys of a worker that died holding them once their claim expired. It runs on its own queue
  (``<deployment>.derive``), so long watch steps never hold it up.
* ``mark_open_pods``: pods still terminating or cleaning up are marked dirty every minute (a termination
  becomes "stuck" with time, with no new observation).

The schedule is declared in settings (``CELERY_BEAT_SCHEDULE``). Tasks take ids and primitives; retrying
an export that failed would fail the same way, so there is none.
"""

from __future__ import annotations

from podlife_site.celery_types import task
from timelines import derivation


@task(name="timelines.derive_dirty", ignore_result=True, acks_late=True)
def derive_dirty_task() -> int:
    return derivation.run_task()


@task(name="timelines.mark_open_pods", ignore_result=True)
def mark_open_pods_task() -> int:
    marked = derivation.mark_open_pods()
    if marked:
        derivation.request()
    return marked
