"""The Celery app. Tasks take ids and primitives and call into modules a test can drive without Celery."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")

app = Celery("podlife")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def add_beat_entries(entries: dict[str, dict[str, Any]]) -> None:
    """Merge an app's periodic tasks into the beat schedule (entries already there win).

    Each task module registers its own entries when Celery imports it (autodiscovery runs before beat
    builds its scheduler), so the schedule sits beside the tasks it runs.
    """
    app.conf.beat_schedule = {**entries, **(app.conf.beat_schedule or {})}
