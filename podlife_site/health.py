"""Probe endpoints for an orchestrator (deploy/: the web Deployment's liveness and readiness probes).

* ``/healthz`` — liveness: the process answers. It touches nothing else, so a database or Redis outage
  never makes Kubernetes restart every web pod at once (a restart fixes neither).
* ``/readyz`` — readiness: the database answers, every migration this code knows is applied (a new pod
  of an upgrade stays out of the Service until the migration Job is done), and, when REDIS_URL is set,
  Redis answers. 503 names what is not ready, never a URL or a password.

Both need no login: a probe cannot log in, and neither says more than "ok" or what is down.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from podlife_site.overload import backend_unavailable

log = logging.getLogger(__name__)

# Seconds a probe waits for Redis; the kubelet's probe timeout (deploy/) is longer.
REDIS_TIMEOUT_S = 2.0


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@require_GET
@never_cache
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _check("database", _database)}
    if checks["database"] == "ok":
        checks["migrations"] = _check("migrations", _migrations)
    if settings.REDIS_URL:
        checks["redis"] = _check("redis", functools.partial(_redis, settings.REDIS_URL))
    ready = all(v == "ok" for v in checks.values())
    body = {"status": "ok" if ready else "unavailable", "checks": checks}
    return JsonResponse(body, status=200 if ready else 503)


def _check(name: str, probe: Callable[[], str]) -> str:
    try:
        return probe()
    except Exception as exc:  # broad: a probe reports, never raises; the class name says what kind of failure
        if backend_unavailable(exc) is not None:  # an outage: one line a probe while it lasts
            log.warning("readiness check %s failed: %s", name, exc)
        else:  # anything else may be a bug: its traceback
            log.exception("readiness check %s failed", name)
        return f"unavailable ({type(exc).__name__})"


def _database() -> str:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


class _Migrations:
    """Whether the database holds every migration of this code; once it does, it stays so for this
    process (migrations are not rolled back under a running pod), so later probes cost nothing."""

    def __init__(self) -> None:
        self._applied = False
        self._lock = threading.Lock()

    def __call__(self) -> str:
        if self._applied:
            return "ok"
        with self._lock:
            executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
            pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
            if pending:
                return f"pending ({len(pending)} not applied: run manage.py migrate)"
            self._applied = True
            return "ok"


# One per process: the cached "all applied" answer and Redis' connection pool outlive a request.
_migrations = _Migrations()


@functools.cache
def _redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)


def _redis(url: str) -> str:
    _redis_client(url).ping()
    return "ok"
