"""Two podlife deployments on one Redis server never see each other's live deltas or tasks (issue #15).

Each deployment's settings are read by a subprocess with that deployment's environment (PODLIFE_DEPLOYMENT,
REDIS_URL), exactly as its web servers and workers would read them; this test then builds the real Redis
pub/sub channel layers and Celery apps from those settings and talks through the real Redis server.

Both deployments use this test run's Redis database: Redis pub/sub ignores the database index, so for live
deltas two indexes are the same case as one; for Celery's queues (lists in the database) one shared index is
the harder case (docs/configuration.md "Several deployments on one Redis").
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from celery import Celery
from channels_redis.pubsub import RedisPubSubChannelLayer
from kombu import Exchange, Queue

from tests.waits import subscribed
from timelines.live import group_name

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.redis]

READ_SETTINGS = """
import json
from django.conf import settings
print(json.dumps({
    "channel_layer": settings.CHANNEL_LAYERS["default"],
    "broker": settings.CELERY_BROKER_URL,
    "default_queue": settings.CELERY_TASK_DEFAULT_QUEUE,
    "queues": [[q.name, q.exchange.name, q.routing_key] for q in settings.CELERY_TASK_QUEUES],
    "routes": settings.CELERY_TASK_ROUTES,
}))
"""


def deployment_settings(name: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "PODLIFE_DEPLOYMENT": name,
        "DJANGO_SETTINGS_MODULE": "podlife_site.settings",
    }
    out = subprocess.run(
        [sys.executable, "-c", READ_SETTINGS], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout))


def layer_of(config: dict[str, Any]) -> RedisPubSubChannelLayer:
    assert config["channel_layer"]["BACKEND"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    return RedisPubSubChannelLayer(**config["channel_layer"]["CONFIG"])


def celery_of(name: str, config: dict[str, Any]) -> tuple[Celery, list[Queue]]:
    queues = [Queue(q, Exchange(ex, type="direct"), routing_key=key) for q, ex, key in config["queues"]]
    app = Celery(name, broker=config["broker"], set_as_current=False)
    app.conf.update(
        task_default_queue=config["default_queue"],
        task_queues=queues,
        task_routes=config["routes"],
        task_serializer="json",
    )
    return app, queues


@pytest.fixture
def two_deployments() -> dict[str, dict[str, Any]]:
    suffix = uuid.uuid4().hex[:8]
    return {name: deployment_settings(name) for name in (f"iso-a-{suffix}", f"iso-b-{suffix}")}


def test_live_deltas_stay_within_their_deployment(two_deployments: dict[str, dict[str, Any]]) -> None:
    """GIVEN deployments A (two ASGI servers) and B, each with a browser on node-a of cluster lab (the
    same group name) WHEN each publishes a delta to that group THEN both of A's servers get A's delta
    only and B's server gets B's only; a layer with A's prefix on B's side (the control) would hear A."""
    (a_name, a), (b_name, b) = two_deployments.items()
    assert a["channel_layer"]["CONFIG"]["prefix"] == f"{a_name}:asgi"
    group = group_name("node", "lab", "node-a")

    async def run() -> None:
        servers = {"a1": layer_of(a), "a2": layer_of(a), "b": layer_of(b)}
        channels = {key: await layer.new_channel() for key, layer in servers.items()}
        for key, layer in servers.items():
            await layer.group_add(group, channels[key])
        await subscribed(servers["a1"], group, 2)  # Redis took A's two servers' SUBSCRIBEs
        await subscribed(servers["b"], group, 1)
        # Then a last message from each (seq 2). Redis delivers in the order it took the publishes (each
        # awaited): a server of A that heard A's last has heard anything B published before it, and B's
        # server, once it heard B's last, anything A published at all.
        for seq in (1, 2):
            await servers["a1"].group_send(group, {"type": "timeline.delta", "from": a_name, "seq": seq})
            await servers["b"].group_send(group, {"type": "timeline.delta", "from": b_name, "seq": seq})
        own = {"a1": a_name, "a2": a_name, "b": b_name}
        heard: dict[str, list[tuple[str, int]]] = {key: [] for key in servers}

        async def listen(key: str) -> None:
            while (own[key], 2) not in heard[key]:
                message = await servers[key].receive(channels[key])
                heard[key].append((message["from"], message["seq"]))

        await asyncio.wait_for(asyncio.gather(*(listen(key) for key in servers)), 10)
        for key, layer in servers.items():
            await layer.group_discard(group, channels[key])
            await layer.flush()
        assert heard == {key: [(name, 1), (name, 2)] for key, name in own.items()}

    asyncio.run(run())


def test_control_a_layer_without_its_own_prefix_hears_the_other_deployment(
    two_deployments: dict[str, dict[str, Any]],
) -> None:
    """The test above can fail: B configured with A's prefix (what one shared default prefix would give),
    on another database index, hears A's delta, because Redis pub/sub ignores the index."""
    (a_name, a), (_, b) = two_deployments.items()
    # Another database index: the pub/sub layer subscribes and publishes, it writes no key there.
    url = urlsplit(b["channel_layer"]["CONFIG"]["hosts"][0])
    other_index = (int(url.path.strip("/") or 0) + 1) % 16
    host = urlunsplit((url.scheme, url.netloc, f"/{other_index}", url.query, url.fragment))
    leaky = {"hosts": [host], "prefix": a["channel_layer"]["CONFIG"]["prefix"]}
    group = group_name("node", "lab", "node-a")

    async def run() -> list[str]:
        sender, receiver = layer_of(a), RedisPubSubChannelLayer(**leaky)
        channel = await receiver.new_channel()
        await receiver.group_add(group, channel)
        await subscribed(receiver, group)
        await sender.group_send(group, {"type": "timeline.delta", "from": a_name})
        message = await asyncio.wait_for(receiver.receive(channel), 5)
        await receiver.group_discard(group, channel)
        await receiver.flush()
        await sender.flush()
        return [message["from"]]

    assert asyncio.run(run()) == [a_name]


def test_tasks_stay_on_their_deployments_queues(two_deployments: dict[str, dict[str, Any]]) -> None:
    """GIVEN deployments A and B on the same Redis database WHEN each queues a watch step and a derive
    run THEN each lands on its own deployment's queue (the derive run on ``<deployment>.derive``) and the
    other deployment's queues stay empty."""
    apps = {name: celery_of(name, config) for name, config in two_deployments.items()}
    try:
        for name, (app, _) in apps.items():
            app.send_task("collectors.watch_step", args=["lab", "pods", "", f"token-{name}", 0])
            app.send_task("timelines.derive_dirty")
        for name, (app, queues) in apps.items():
            got: dict[str, list[tuple[str, str]]] = {}
            with app.connection_for_read() as conn:
                for queue in queues:
                    bound = queue(conn.default_channel)
                    got[queue.name] = []
                    while (message := bound.get(no_ack=True)) is not None:
                        headers = message.headers
                        token = (
                            json.loads(message.body)[0][3]
                            if headers["task"] == "collectors.watch_step"
                            else ""
                        )
                        got[queue.name].append((headers["task"], token))
            assert got == {
                name: [("collectors.watch_step", f"token-{name}")],
                f"{name}.derive": [("timelines.derive_dirty", "")],
            }
    finally:
        for app, queues in apps.values():
            with app.connection_for_write() as conn:
                for queue in queues:
                    queue(conn.default_channel).delete()
            app.close()
