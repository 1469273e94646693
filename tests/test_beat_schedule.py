"""The beat schedule (settings' ``CELERY_BEAT_SCHEDULE``) names tasks a worker has: a task that moves between
apps (the pipeline's upkeep went from ``collectors.*`` to ``timelines.*``, issue #36) moves in the schedule
too, or beat would send, every hour, a name no worker knows."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.stored import put, rows_of
from timelines.models import Cluster


def registered_tasks() -> set[str]:
    from podlife_site.celery import app

    app.loader.import_default_modules()  # what a worker does as it starts: each app's tasks module
    return set(app.tasks)


def test_every_scheduled_task_is_registered_by_a_worker(settings: Any) -> None:
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"timelines.apply_retention", "timelines.ensure_partitions"} <= scheduled
    assert not scheduled - registered_tasks(), "beat would send tasks no worker registers"


@pytest.mark.django_db
def test_the_retention_task_drops_what_is_older_than_the_setting(settings: Any) -> None:
    """GIVEN a live cluster's observation older than PODLIFE_RETENTION_DAYS and one within it WHEN beat's
    retention task runs (by the name beat sends) THEN only the old one is gone."""
    from podlife_site.celery import app

    registered_tasks()
    settings.PODLIFE_RETENTION_DAYS = 7
    cluster = Cluster.objects.create(name="c1")
    now = timezone.now()
    put(  # synthetic rows: only their time matters here
        cluster,
        [
            {
                "kind": "worker",
                "source": "kubelet_log",
                "observed_at": now - age,
                "received_at": now,
                "dedupe_key": key,
            }
            for key, age in (("old", timedelta(days=8)), ("recent", timedelta(days=6)))
        ],
    )
    assert app.tasks["timelines.apply_retention"].apply().get() == 1
    assert [o.dedupe_key for o in rows_of(None)] == ["recent"]
