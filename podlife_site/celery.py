"""The Celery app. Tasks take ids and primitives and call into modules a test can drive without Celery.

Everything is configured in settings (``CELERY_*``): queues and routes, and the beat schedule.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")

app = Celery("podlife")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
