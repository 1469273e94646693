"""The real services the production set-up uses: the Redis channel layer, Celery's broker, PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

from podlife_site.celery import app as celery_app


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


def test_embedded_default_runs_tasks_in_process(settings):
    if settings.REDIS_URL:
        pytest.skip("REDIS_URL is set: tasks go to the broker")
    assert celery_app.conf.task_always_eager


@pytest.mark.postgres
@pytest.mark.django_db
def test_postgres_is_the_database():
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        assert int(cursor.fetchone()[0]) >= 130000
