from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from timelines.models import Cluster, Finding

from .receiver import Receiver

T0 = datetime(2026, 11, 30, 10, 0, 0, 123456, tzinfo=UTC)


@pytest.fixture
def allow_loopback(settings) -> None:
    """The test receivers listen on 127.0.0.1, which webhooks may reach only when allowed (issue #35)."""
    settings.PODLIFE_WEBHOOK_ALLOW = "127.0.0.1/32"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def live_cluster(db) -> Cluster:
    return Cluster.objects.create(name="prod", origin=Cluster.Origin.LIVE)


def make_finding(cluster: Cluster, **overrides) -> Finding:
    values = {
        "cluster": cluster,
        "pod_uid": "uid-1",
        "node": "node-a",
        "namespace": "shop",
        "subject": "pod",
        "subject_name": "shop/cart-0",
        "kind": "stuck_terminating",
        "severity": "critical",
        "message": "Pod shop/cart-0 has been terminating for 5 min.",
        "start": T0,
        "end": None,
    }
    values.update(overrides)
    return Finding.objects.create(**values)


def later(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)
