"""PODLIFE_DB_POOL_MAX: psycopg's pool through Django's PostgreSQL backend bounds one server process's
database connections, however many requests run at once (a settings-only step towards issue #18,
finding 4; on by default on PostgreSQL since, with the 503 limit: tests/security/test_overload.py)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User
from django.db import connection

from dashboard.web.access import create_token
from podlife_site.env import database_from_url
from tests.pg import admin_connection
from tests.security.conftest import deployment_env, strong_key

CLIENTS = 24
POOL = 3


def test_the_pool_setting_turns_persistent_connections_off() -> None:
    url = "postgres://u:p@db:5432/podlife"
    assert database_from_url("DATABASE_URL", url)["CONN_MAX_AGE"] == 60
    pooled = database_from_url("DATABASE_URL", url, pool_max=5, pool_timeout_s=2.5)
    assert pooled["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 5, "timeout": 2.5}  # type: ignore[index]
    whole = database_from_url("DATABASE_URL", url, pool_max=5, pool_min=5, pool_timeout_s=2.5)
    assert whole["OPTIONS"]["pool"]["min_size"] == 5  # type: ignore[index]
    capped = database_from_url("DATABASE_URL", url, pool_max=5, pool_min=50)
    assert capped["OPTIONS"]["pool"]["min_size"] == 5  # type: ignore[index]
    # Django's own persistence off (the pool keeps connections); its health check becomes the pool's.
    assert pooled["CONN_MAX_AGE"] == 0 and pooled["CONN_HEALTH_CHECKS"] is True


def storm(serve: Any, database: str, pool_max: int, token: str) -> tuple[list[int], int]:
    """``CLIENTS`` concurrent API requests against a uvicorn subprocess; (statuses, most connections the
    server held at once, sampled from pg_stat_activity by its application_name)."""
    name = f"podlife-pool-test-{pool_max}"
    s = connection.settings_dict
    url = f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{database}?application_name={name}"
    server = serve(
        deployment_env(SECRET_KEY=strong_key(), DATABASE_URL=url, PODLIFE_DB_POOL_MAX=str(pool_max))
    )
    most, done = 0, threading.Event()

    def sample() -> None:
        nonlocal most
        with admin_connection(database) as watcher:
            while not done.is_set():
                count = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]
                ).fetchone()
                most = max(most, count[0] if count else 0)
                time.sleep(0.01)

    watcher = threading.Thread(target=sample)
    watcher.start()
    start = threading.Barrier(CLIENTS)

    def get(_: int) -> int:
        start.wait()
        answer = requests.get(
            f"{server.url}/api/v1/clusters", headers={"Authorization": f"Bearer {token}"}, timeout=120
        )
        return answer.status_code

    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = list(pool.map(get, range(CLIENTS)))
    finally:
        done.set()
        watcher.join()
    return statuses, most


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_many_concurrent_requests_use_at_most_the_pools_connections(serve: Any, lab: Any) -> None:
    """GIVEN a server process with PODLIFE_DB_POOL_MAX=3 WHEN 24 clients ask at once THEN every answer is
    200 and the process never holds more than 3 connections (without the pool it holds one per request
    thread: the figure is printed beside it)."""
    token = create_token(User.objects.create_superuser("root", "root@example.invalid", "pw"))
    database = connection.settings_dict["NAME"]
    statuses, pooled_most = storm(serve, database, POOL, token)
    assert statuses == [200] * CLIENTS
    assert 1 <= pooled_most <= POOL
    statuses, unpooled_most = storm(serve, database, 0, token)
    assert statuses == [200] * CLIENTS
    print(f"connections held at most: pooled {pooled_most} (max {POOL}), unpooled {unpooled_most}")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_web_server_opens_its_whole_pool_when_it_first_uses_the_database(serve: Any, lab: Any) -> None:
    """GIVEN a web server process with PODLIFE_DB_POOL_MAX=3 (PODLIFE_DB_POOL_MIN unset) WHEN one request
    is answered, one at a time THEN the process soon holds all 3 connections, not only the one that
    request used: they are made before any load, not at its peak (docs/performance-history.md "Load")."""
    token = create_token(User.objects.create_superuser("root", "root@example.invalid", "pw"))
    s = connection.settings_dict
    name = "podlife-pool-test-whole"
    url = f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}?application_name={name}"
    server = serve(deployment_env(SECRET_KEY=strong_key(), DATABASE_URL=url, PODLIFE_DB_POOL_MAX=str(POOL)))
    answer = requests.get(
        f"{server.url}/api/v1/clusters", headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert answer.status_code == 200
    held = 0
    with admin_connection() as watcher:
        deadline = time.monotonic() + 20
        while held < POOL and time.monotonic() < deadline:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [name]
            ).fetchone()
            held = row[0] if row else 0
            time.sleep(0.1)
    assert held == POOL
