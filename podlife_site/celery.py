"""The Celery app. Tasks take ids and primitives and call into modules a test can drive without Celery.

Everything is configured in settings (``CELERY_*``): queues and routes, and the beat schedule. A worker
process starts as a collector (``start_worker``: its tuning, podlife_site/tuning.py).
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init

from podlife_site import tuning

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")

app = Celery("podlife")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def start_worker(**kwargs: Any) -> None:
    """A worker runs watch steps: it starts as a collector (podlife_site/tuning.py)."""
    tuning.start(tuning.Role.COLLECTOR)


# In the main process (where the solo and thread pools run tasks), and in each prefork child, so that no
# child depends on what its fork copied.
worker_init.connect(start_worker, weak=False)
worker_process_init.connect(start_worker, weak=False)
