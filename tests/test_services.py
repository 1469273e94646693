"""The real services the production set-up uses: the Redis channel layer, Celery's broker, PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from podlife_site.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.redis
def test_redis_pubsub_channel_layer_round_trip():
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.pubsub.RedisPubSubChannelLayer"

    async def scenario() -> dict:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add("node.test.node-a", channel)
        await layer.group_send("node.test.node-a", {"type": "timeline.delta", "seq": 1})
        try:
            return await asyncio.wait_for(layer.receive(channel), timeout=5)
        finally:
            await layer.group_discard("node.test.node-a", channel)

    assert asyncio.run(scenario()) == {"type": "timeline.delta", "seq": 1}


@pytest.mark.redis
def test_celery_uses_redis_as_broker():
    assert not celery_app.conf.task_always_eager
    assert celery_app.conf.broker_url == settings.REDIS_URL
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=2)


EMBEDDED_DEFAULT = """
import os, time
import django
django.setup()
from channels.layers import get_channel_layer
from django.conf import settings
from podlife_site.celery import app
from dashboard.tasks import purge_export_jobs

old = settings.PODLIFE_EXPORT_DIR / "old-job.json"
old.write_text("{}")
os.utime(old, (time.time() - 3 * 86400,) * 2)
result = purge_export_jobs.delay()  # no worker exists: only an in-process run can purge the file
print(repr(settings.REDIS_URL), app.conf.broker_url, app.conf.task_always_eager, type(result).__name__,
      result.get(timeout=1), old.exists(), type(get_channel_layer()).__name__, settings.DATABASES["default"]["ENGINE"])
"""


def test_embedded_default_runs_tasks_in_process(tmp_path):
    """GIVEN the environment of the embedded default (no REDIS_URL, no DATABASE_URL), whatever this run's
    WHEN a process starts podlife and queues a task THEN the task has run in that process before
    ``delay`` returns, on the in-memory broker, and the channel layer is the in-process one."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(DJANGO_SETTINGS_MODULE="podlife_site.settings", PODLIFE_EXPORT_DIR=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-c", EMBEDDED_DEFAULT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == [
        "None", "memory://", "True", "EagerResult", "1", "False", "InMemoryChannelLayer",
        "django.db.backends.sqlite3",
    ]  # fmt: skip


@pytest.mark.postgres
@pytest.mark.django_db
def test_postgres_is_the_database():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        assert int(cursor.fetchone()[0]) >= 130000
