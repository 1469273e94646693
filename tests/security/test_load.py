"""Issue #18, deliverable 6: a bounded load test. A real uvicorn process on PostgreSQL and the Redis
channel layer; 40 websocket clients on one node's live view while two derive workers churn pods on that
node, and 10 REST clients, for a few seconds over loopback (the full figures: bench/load.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from dashboard.web.access import create_token
from tests.flow import ingest
from tests.loadgen import Load
from tests.security.conftest import deployment_env
from tests.web.factories import started_pod

CLUSTER, NODE = "loadtest", "node-load"


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_forty_live_pages_and_ten_api_clients_get_no_500_and_no_false_gap(serve: Any) -> None:
    """GIVEN a web process as deployed (pool and request limit at their defaults) WHEN 40 pages watch one
    node live while two derive workers store and push a new pod on it every 0.1 s each, and 10 API clients
    read without pause, for 5 s THEN no request answers 500, no page is told to refetch (no false gap),
    and every pushed pod reaches every page."""
    user = User.objects.create_superuser("loader", "loader@example.invalid", "pw")
    browser = Client()
    browser.force_login(user)
    ingest(CLUSTER, started_pod("load-seed", "seed", node=NODE))  # the cluster and its node exist
    s = settings.DATABASES["default"]
    server = serve(
        deployment_env(
            SECRET_KEY=settings.SECRET_KEY,  # the session signed here must hold there
            DATABASE_URL=f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}",
            REDIS_URL=os.environ["REDIS_URL"],
            PODLIFE_DEPLOYMENT=settings.PODLIFE_DEPLOYMENT,
        )
    )
    load = Load(
        server.url,
        server.proc.pid,
        CLUSTER,
        NODE,
        session_cookie=browser.cookies["sessionid"].value,
        token=create_token(user),
        seed_uid="load-seed",
        ws_clients=40,
        rest_clients=10,
        seconds=5.0,
    )
    result = load.run()
    print(result.report())
    assert result.connected == 40, result.ws_errors
    assert result.ws_errors == []
    assert 500 not in result.statuses() and set(result.statuses()) <= {200, 503}, result.statuses()
    assert result.rest_statuses[200] > 0 and result.rest_statuses[404] == 0
    assert result.refetches == 0
    assert result.pods >= 10 and result.missing == 0
