"""The Celery app. Tasks take ids and primitives and call into modules a test can drive without Celery."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")

app = Celery("podlife")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
