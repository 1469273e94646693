"""/healthz and /readyz: what the web Deployment's probes (deploy/base/web.yaml) ask."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
from django.db import OperationalError
from django.db.migrations.recorder import MigrationRecorder

from podlife_site import health


@pytest.fixture(autouse=True)
def _fresh_probe_state(monkeypatch):
    # Each test starts from a process that has not yet seen every migration applied, with no Redis client.
    monkeypatch.setattr(health, "_migrations", health._Migrations())
    health._redis_client.cache_clear()
    yield
    health._redis_client.cache_clear()


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port this test holds bound but never listens on: a connection to it is refused, and no
    other test or process can start listening there while the test runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_healthz_answers_without_touching_the_database(client):
    # No django_db mark: a query here would raise pytest-django's "Database access not allowed".
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
def test_readyz_is_ready_with_a_migrated_database(client, settings):
    settings.REDIS_URL = None
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "migrations": "ok"}}


@pytest.mark.django_db
def test_readyz_is_not_ready_while_a_migration_is_pending(client, settings):
    """GIVEN a database missing the newest migration of this code (a new pod before the migration Job)
    THEN the pod is not ready, and says which check failed and what to do."""
    settings.REDIS_URL = None
    newest = MigrationRecorder.Migration.objects.filter(app="timelines").order_by("-applied").first()
    MigrationRecorder.Migration.objects.filter(pk=newest.pk).delete()  # rolled back with the test
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["migrations"].startswith("pending (1 not applied: run manage.py migrate)")


@pytest.mark.django_db
def test_readyz_reports_unreachable_redis_without_its_url(client, settings, refusing_port):
    settings.REDIS_URL = f"redis://:hunter2-secret@127.0.0.1:{refusing_port}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["redis"] == "unavailable (ConnectionError)"
    assert body["checks"]["database"] == "ok"
    assert b"hunter2" not in response.content


@pytest.mark.redis
@pytest.mark.django_db
def test_readyz_is_ready_with_real_redis(client, settings):
    assert settings.REDIS_URL
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "migrations": "ok", "redis": "ok"}


def test_readyz_without_a_database_is_unavailable(client, monkeypatch, settings):
    """The database is down: 503 naming it, no exception page."""
    settings.REDIS_URL = None

    def refuse() -> str:
        raise OSError("connection refused")

    monkeypatch.setattr(health, "_database", refuse)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "checks": {"database": "unavailable (OSError)"}}


def test_readyz_logs_an_unexpected_probe_error_with_its_traceback(client, monkeypatch, settings, caplog):
    """GIVEN a probe that fails with an error no outage explains (a bug)
    WHEN /readyz is asked
    THEN it still answers 503 naming the class, and the log holds the error's traceback (not one warning line)."""
    settings.REDIS_URL = None

    def broken() -> str:
        raise KeyError("no such setting")

    monkeypatch.setattr(health, "_database", broken)
    with caplog.at_level(logging.WARNING, logger=health.log.name):
        response = client.get("/readyz")
    assert response.json()["checks"] == {"database": "unavailable (KeyError)"}
    (record,) = [r for r in caplog.records if r.name == health.log.name]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.exc_info[0] is KeyError


def test_readyz_logs_a_database_outage_as_one_line(client, monkeypatch, settings, caplog):
    """GIVEN the database refusing connections (Django's OperationalError)
    WHEN /readyz is asked
    THEN it answers 503 and logs one warning line without a traceback (it repeats every probe)."""
    settings.REDIS_URL = None

    def refuse() -> str:
        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "_database", refuse)
    with caplog.at_level(logging.WARNING, logger=health.log.name):
        response = client.get("/readyz")
    assert response.status_code == 503
    (record,) = [r for r in caplog.records if r.name == health.log.name]
    assert record.levelno == logging.WARNING and record.exc_info is None
