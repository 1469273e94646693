"""Safe defaults (issue #18 finding 1 and deliverable 2, issue #15 deliverable 6): DEBUG off unless asked
for, error pages that never carry settings, a SECRET_KEY that is really random, `check --deploy` clean
with the production settings of docs/security.md."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import requests
from django.test import Client

from tests.security.conftest import ROOT, deployment_env, strong_key
from tests.security.urls_boom import SECRET_IN_ERROR

DB_PASSWORD, REDIS_PASSWORD = "s3cret-db-pw", "s3cret-redis-pw"


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


SHOW_DEBUG = (
    "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'podlife_site.settings'); "
    "django.setup(); from django.conf import settings; print(settings.DEBUG, settings.ALLOWED_HOSTS)"
)


def test_debug_is_off_unless_asked_for() -> None:
    off = run_python(SHOW_DEBUG, deployment_env(SECRET_KEY=strong_key()))
    assert off.returncode == 0, off.stderr
    assert off.stdout.split()[0] == "False"
    on = run_python(SHOW_DEBUG, deployment_env(DEBUG="1"))
    assert on.returncode == 0, on.stderr
    assert on.stdout.split()[0] == "True"


def test_the_demo_turns_debug_on_and_opens_metrics_unless_told_otherwise() -> None:
    import manage as manage_py

    env: dict[str, str] = {}
    manage_py.demo_defaults(["manage.py", "demo", "--port", "8000"], env)
    assert env == {"DEBUG": "1", "PODLIFE_METRICS_PUBLIC": "1"}
    env = {"DEBUG": "0"}
    manage_py.demo_defaults(["manage.py", "demo"], env)
    assert env["DEBUG"] == "0"
    env = {}
    manage_py.demo_defaults(["manage.py", "migrate"], env)
    assert env == {}


def test_without_a_secret_key_and_debug_off_the_web_server_does_not_start() -> None:
    """Commands that sign nothing run without a key; the ASGI application refuses to load, saying why."""
    web = run_python("import podlife_site.asgi", deployment_env())
    assert web.returncode != 0
    assert "SECRET_KEY is not set: the web server needs one when DEBUG is off" in web.stderr
    assert "DEBUG=1" in web.stderr  # says how to run it for development
    command = manage("check", env=deployment_env())
    assert command.returncode == 0, command.stderr


@pytest.mark.parametrize(
    ("key", "needle"),
    [
        ("a" * 36, "SECRET_KEY is 36 characters long: expected at least 50 random characters"),
        ("a" * 64, "SECRET_KEY is not random enough: 1 distinct characters"),
        ("abcde" * 12, "SECRET_KEY is not random enough: 5 distinct characters"),
        ("django-insecure-" + "k3yZ" * 12, "starts with 'django-insecure-'"),
    ],
    ids=["one-letter-36", "one-letter-64", "short-pattern", "django-insecure"],
)
def test_a_weak_secret_key_stops_start_up_naming_the_problem(key: str, needle: str) -> None:
    proc = manage("check", env=deployment_env(SECRET_KEY=key))
    assert proc.returncode != 0, f"SECRET_KEY {key!r} was accepted"
    assert needle in proc.stderr
    assert "secrets.token_urlsafe(50)" in proc.stderr  # and how to make a good one


PRODUCTION = {
    "ALLOWED_HOSTS": "podlife.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://podlife.example.org",
    "PODLIFE_HTTPS": "1",
}


def test_check_deploy_is_clean_with_the_production_settings() -> None:
    """GIVEN the production settings of docs/security.md (DEBUG unset, a random key, TLS on)
    WHEN `manage.py check --deploy` runs THEN it reports no issue at all."""
    proc = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env=deployment_env(SECRET_KEY=strong_key(), **PRODUCTION),
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "System check identified no issues (0 silenced)." in proc.stdout


def test_without_the_tls_switch_check_deploy_names_exactly_the_tls_settings() -> None:
    env = deployment_env(SECRET_KEY=strong_key(), ALLOWED_HOSTS="podlife.example.org")
    proc = manage("check", "--deploy", env=env)
    found = {
        code
        for code in ("W004", "W008", "W012", "W016", "W009", "W018", "W020")
        if f"security.{code}" in proc.stderr + proc.stdout
    }
    assert found == {"W004", "W008", "W012", "W016"}


def test_tls_settings_follow_the_switch_and_can_be_set_one_by_one() -> None:
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'podlife_site.settings'); "
        "django.setup(); from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, "
        "getattr(s, 'SECURE_PROXY_SSL_HEADER', None))"
    )
    on = run_python(code, deployment_env(SECRET_KEY=strong_key(), PODLIFE_HTTPS="1", SECURE_SSL_REDIRECT="0"))
    assert on.stdout.split() == ["False", "True", "True", "31536000", "None"], on.stderr
    proxy = run_python(code, deployment_env(SECRET_KEY=strong_key(), PODLIFE_TRUST_X_FORWARDED_PROTO="1"))
    assert proxy.stdout.strip() == "False False False 0 ('HTTP_X_FORWARDED_PROTO', 'https')", proxy.stderr


def test_error_pages_of_a_deployment_never_show_its_settings(serve: Any) -> None:
    """GIVEN podlife served as the README's PostgreSQL/Redis setup says, with passwords in both URLs, and the
    database down WHEN a page fails (500) or is missing (404) THEN neither answer names a setting."""
    dead = "127.0.0.1:9"  # discard port: nothing listens, every query fails
    env = deployment_env(
        SECRET_KEY=strong_key(),
        DATABASE_URL=f"postgres://podlife:{DB_PASSWORD}@{dead}/podlife",
        REDIS_URL=f"redis://:{REDIS_PASSWORD}@{dead}/0",
        # Without the pool a dead database fails at once (500); with it, after the pool's wait, as 503
        # (tests/security/test_overload.py checks that answer names no setting either).
        PODLIFE_DB_POOL_MAX="0",
    )
    server = serve(env)
    # A session cookie makes the overview look its session up in the (dead) database: since issue #35 a
    # 503 with Retry-After (the database is away; the client may retry), which must name no setting either.
    failed = requests.get(f"{server.url}/", cookies={"sessionid": "x" * 32}, timeout=30)
    missing = requests.get(f"{server.url}/no/such/page", timeout=30)
    unready = requests.get(f"{server.url}/readyz", timeout=30)
    assert failed.status_code == 503 and int(failed.headers["Retry-After"]) > 0
    assert missing.status_code == 404
    assert unready.status_code == 503
    for response in (failed, missing, unready):
        body = response.text
        for secret in (DB_PASSWORD, REDIS_PASSWORD, "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "Traceback"):
            assert secret not in body, (response.status_code, secret)
    assert "the database is unavailable; retry in" in failed.text
    assert "Not found" in missing.text and "URLconf" not in missing.text


@pytest.mark.django_db
def test_500_never_shows_the_exception_and_stays_json_under_the_api(settings: Any, admin_user: Any) -> None:
    settings.ROOT_URLCONF = "tests.security.urls_boom"
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    page = client.get("/boom")
    assert page.status_code == 500 and b"Server error" in page.content
    assert SECRET_IN_ERROR.encode() not in page.content and b"RuntimeError" not in page.content
    api = client.get("/api/v1/boom")
    assert api.status_code == 500 and api["Content-Type"] == "application/json"
    assert api.json()["error"]["status"] == 500 and SECRET_IN_ERROR not in api.content.decode()


@pytest.mark.django_db
def test_404_page_names_what_was_not_found_and_nothing_else(admin_user: Any) -> None:
    client = Client()
    client.force_login(admin_user)
    response = client.get("/c/nope/")
    assert response.status_code == 404
    text = response.content.decode()
    assert "no cluster named &#x27;nope&#x27; that you may read" in text
    assert "<h1>Not found</h1>" in text and "Using the URLconf" not in text
