"""Settings come from the environment; a malformed value names the variable and the expected form."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from podlife_site import env

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("name", "value", "reader", "needle"),
    [
        ("DEBUG", "maybe", lambda: env.env_bool("DEBUG", True), "DEBUG='maybe' is not a boolean"),
        ("PODLIFE_RETENTION_DAYS", "ten", lambda: env.env_int("PODLIFE_RETENTION_DAYS", 14), "whole number"),
        (
            "PODLIFE_RETENTION_DAYS",
            "-1",
            lambda: env.env_int("PODLIFE_RETENTION_DAYS", 14, minimum=0),
            "at least 0",
        ),
        ("ALLOWED_HOSTS", "a,,b", lambda: env.env_list("ALLOWED_HOSTS", []), "empty item"),
    ],
)
def test_malformed_values_name_the_variable(monkeypatch, name, value, reader, needle):
    monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=needle):
        reader()


def test_database_urls():
    pg = env.database_from_url("DATABASE_URL", "postgres://u:p%40ss@db.local:5433/podlife?sslmode=require")
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["NAME"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"]) == (
        "podlife",
        "u",
        "p@ss",
        "db.local",
        "5433",
    )
    assert pg["OPTIONS"] == {"sslmode": "require"}
    lite = env.database_from_url("DATABASE_URL", "sqlite:////tmp/x.sqlite3")
    assert lite["NAME"] == "/tmp/x.sqlite3"
    assert lite["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    for bad in ["mysql://x/y", "postgres://host:notaport/db", "postgres:///", "sqlite://"]:
        with pytest.raises(ImproperlyConfigured, match="DATABASE_URL="):
            env.database_from_url("DATABASE_URL", bad)


def test_redis_url(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "http://nope")
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL='http://nope' is not a Redis URL"):
        env.redis_url("REDIS_URL")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    assert env.redis_url("REDIS_URL") == "redis://127.0.0.1:6379/0"


def test_each_pytest_xdist_worker_gets_its_own_redis_database_and_deployment_name():
    """GIVEN the environment of pytest-xdist worker gw1 (REDIS_URL naming database 14) THEN it uses database
    15 and deployment ``<name>-gw1``, once: what it starts inherits that and is not moved again; gw0 keeps
    database 14; outside xdist nothing changes."""
    worker = {
        "PYTEST_XDIST_WORKER": "gw1",
        "REDIS_URL": "redis://127.0.0.1:6379/14",
        "PODLIFE_DEPLOYMENT": "ci",
    }
    env.isolate_test_worker(worker)
    assert worker["REDIS_URL"] == "redis://127.0.0.1:6379/15"
    assert worker["PODLIFE_DEPLOYMENT"] == "ci-gw1"
    child = dict(worker)  # a Celery worker or server the test worker starts
    env.isolate_test_worker(child)
    assert child == worker
    first = {"PYTEST_XDIST_WORKER": "gw0", "REDIS_URL": "redis://127.0.0.1:6379/14"}
    env.isolate_test_worker(first)
    assert first["REDIS_URL"] == "redis://127.0.0.1:6379/14" and first["PODLIFE_DEPLOYMENT"] == "podlife-gw0"
    socket_url = {"PYTEST_XDIST_WORKER": "gw2", "REDIS_URL": "unix:///run/redis.sock?db=3"}
    env.isolate_test_worker(socket_url)
    assert socket_url["REDIS_URL"] == "unix:///run/redis.sock?db=5"
    alone = {"REDIS_URL": "redis://127.0.0.1:6379/14"}
    env.isolate_test_worker(alone)
    assert alone == {"REDIS_URL": "redis://127.0.0.1:6379/14"}


def test_secret_key_generated_once_in_debug_and_required_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    key_file = tmp_path / ".secret_key"
    first = env.secret_key("SECRET_KEY", debug=True, key_file=key_file)
    second = env.secret_key("SECRET_KEY", debug=True, key_file=key_file)
    assert first.generated and not second.generated and first.value == second.value
    unset = env.secret_key("SECRET_KEY", debug=False, key_file=tmp_path / "other")
    assert unset.value == "" and not (tmp_path / "other").exists()
    with pytest.raises(ImproperlyConfigured, match="the web server needs one when DEBUG is off"):
        env.require_secret_key(bool(unset.value))
    monkeypatch.setenv("SECRET_KEY", "short")
    with pytest.raises(ImproperlyConfigured, match="at least 50"):
        env.secret_key("SECRET_KEY", debug=False, key_file=key_file)


def test_start_up_stops_on_a_malformed_variable():
    """GIVEN a malformed DATABASE_URL WHEN manage.py starts THEN it exits naming the variable."""
    environ = {**os.environ, "DATABASE_URL": "mysql://db/podlife"}
    proc = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "DATABASE_URL='mysql://db/podlife' has an unsupported scheme" in proc.stderr


def worker_settings(**environ: str) -> dict[str, object]:
    """The Celery worker's concurrency and the celery app's view of it, as a worker started with ``environ``."""
    code = (
        "import json; from podlife_site.celery import app; from django.conf import settings; "
        "print(json.dumps([settings.CELERY_WORKER_CONCURRENCY, app.conf.worker_concurrency]))"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("PODLIFE_")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "podlife_site.settings", **environ},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    import json

    return dict(zip(("setting", "app"), json.loads(out.stdout), strict=True))


def test_worker_pool_holds_every_watch_chain_and_pull_of_every_cluster(tmp_path):
    """GIVEN the clusters a worker collects from WHEN its settings load THEN its pool has a process for
    each (cluster, resource) watch chain and each kubelet pull, plus spares; an explicit value wins."""
    from collectors.kube.resources import ALL_RESOURCES
    from podlife_site import settings as site

    assert len(ALL_RESOURCES) == site.WATCH_CHAINS_PER_CLUSTER
    per_cluster = len(ALL_RESOURCES) + 2  # + kubelet metrics and logs pulls
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    one = worker_settings(PODLIFE_KUBECONFIG=str(kubeconfig))
    assert one == {"setting": per_cluster + 2, "app": per_cluster + 2}
    three = worker_settings(
        PODLIFE_KUBECONFIG=str(kubeconfig), PODLIFE_KUBE_CONTEXTS="a,b", PODLIFE_IN_CLUSTER="1"
    )
    assert three["app"] == 3 * per_cluster + 2
    assert worker_settings(PODLIFE_WORKER_CONCURRENCY="5")["app"] == 5


def test_readme_says_how_to_run_manage_py_and_that_way_works():
    """The README tells a new user to run manage.py with the virtualenv `make` creates, and that command
    runs as written."""
    readme = (ROOT / "README.md").read_text()
    venv = next(
        line.split("?=")[1].strip()
        for line in (ROOT / "Makefile").read_text().splitlines()
        if line.startswith("VENV ?=")
    )
    assert f"`{venv}/bin/python manage.py COMMAND`" in readme
    assert f"`source {venv}/bin/activate`" in readme
    python = ROOT / venv / "bin" / "python"
    assert python.exists(), f"{python}: run `make test` or `make demo` first"
    proc = subprocess.run(
        [str(python), "manage.py", "help", "export_incident"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "NAMESPACE/NAME" in proc.stdout
