"""Tiny typed readers for settings from the environment.

Every reader names the variable and the expected form when a value is malformed, so a bad deployment
stops at start-up with a sentence an operator can act on instead of failing later in a stranger place.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections import Counter
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None else value.strip()


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={value!r} is not a boolean: expected one of 1/0, true/false, yes/no, on/off"
    )


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a whole number: expected e.g. {default}"
        ) from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is too small: expected at least {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is too large: expected at most {maximum}")
    return number


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number: expected e.g. {default}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is too small: expected at least {minimum}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None:
        return list(default)
    if value == "":
        return []
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(
            f"{name}={value!r} has an empty item: expected a comma-separated list, e.g. a,b"
        )
    return items


# Several threads write in the demo (one per watched resource): WAL lets readers go on during a write, and
# IMMEDIATE transactions take the write lock up front, so two writers queue for `timeout` seconds instead of
# failing at once with "database is locked" when both try to upgrade a read lock.
# https://docs.djangoproject.com/en/5.2/ref/databases/#database-is-locked-errors
SQLITE_OPTIONS = {
    "timeout": 30,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}

_DB_FORM = "postgres://USER:PASSWORD@HOST:PORT/NAME, postgresql://…, or sqlite:////ABSOLUTE/PATH"


def database_from_url(
    name: str, url: str, *, pool_max: int = 0, pool_min: int = 1, pool_timeout_s: float = 30.0
) -> dict[str, object]:
    """A Django DATABASES entry from a database URL (PostgreSQL or SQLite).

    ``pool_max`` > 0 (PostgreSQL only): psycopg's connection pool through Django's backend, at most that
    many connections per process; a request holds one only while it runs queries of its own. A caller that
    waits ``pool_timeout_s`` for one gets ``PoolTimeout`` (the web answers 503, podlife_site/overload.py)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={url!r} is malformed ({exc}): expected {_DB_FORM}") from None
    scheme = parts.scheme.lower()
    if scheme in {"postgres", "postgresql", "pgsql"}:
        db_name = unquote(parts.path.lstrip("/"))
        if not db_name or not parts.hostname and not dict(parse_qsl(parts.query)).get("host"):
            raise ImproperlyConfigured(f"{name}={url!r} lacks a host or a database name: expected {_DB_FORM}")
        options: dict[str, object] = dict(parse_qsl(parts.query))
        host = options.pop("host", None) or unquote(parts.hostname or "")
        entry: dict[str, object] = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": db_name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": host,
            "PORT": str(port or ""),
            "OPTIONS": options,
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
        if pool_max:
            if importlib.util.find_spec("psycopg_pool") is None:
                raise ImproperlyConfigured(
                    "PODLIFE_DB_POOL_MAX is set but psycopg_pool is not installed: pip install psycopg-pool"
                )
            # https://docs.djangoproject.com/en/5.2/ref/databases/#connection-pool: the pool keeps the
            # connections, so Django's own persistence is off (it refuses both at once).
            # CONN_HEALTH_CHECKS: Django then gives the pool psycopg's connection check, so a connection the
            # server dropped while it idled in the pool (a restart, pg_terminate_backend) is replaced before
            # anyone gets it.
            options["pool"] = {
                "min_size": max(1, min(pool_min, pool_max)),
                "max_size": pool_max,
                "timeout": pool_timeout_s,
            }
            entry.update(CONN_MAX_AGE=0, CONN_HEALTH_CHECKS=True)
        return entry
    if scheme == "sqlite":
        path = unquote(parts.path)[1:]  # sqlite:///relative.db, sqlite:////absolute/path.db
        if parts.netloc or not path:
            raise ImproperlyConfigured(
                f"{name}={url!r} is not an SQLite URL with a path: expected {_DB_FORM}"
            )
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": path, "OPTIONS": dict(SQLITE_OPTIONS)}
    raise ImproperlyConfigured(f"{name}={url!r} has an unsupported scheme {scheme!r}: expected {_DB_FORM}")


def redis_url(name: str) -> str | None:
    """REDIS_URL or None; a value that is not a redis:// or rediss:// URL stops start-up."""
    value = _raw(name)
    if not value:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"{name}={value!r} is malformed ({exc}): expected redis://HOST:PORT/DB"
        ) from None
    if parts.scheme not in {"redis", "rediss", "unix"} or not (parts.hostname or parts.path):
        raise ImproperlyConfigured(f"{name}={value!r} is not a Redis URL: expected redis://HOST:PORT/DB")
    return value


def isolate_test_worker(environ: MutableMapping[str, str]) -> None:
    """A pytest-xdist worker (``make test WORKERS=2``: README.md) acts as its own deployment, so that two
    workers running at once never share, nor clear, each other's Redis keys: the collector's tests delete
    every lease key and Celery's queue keys when they start, and Redis pub/sub ignores the database index.
    Worker ``gwN`` (``PYTEST_XDIST_WORKER``, which xdist sets in its worker processes only) uses Redis
    database ``D + N`` where ``REDIS_URL`` names ``D`` (an index Redis lacks fails on the first command) and
    deployment name ``<PODLIFE_DEPLOYMENT>-gwN`` (channel-layer prefix, Celery queues, beat schedule).

    Written to ``environ`` once (marked by ``PODLIFE_TEST_WORKER``), before the settings read it: what the
    worker starts (Celery workers, uvicorn, manage.py) inherits the result and is not moved again. Its test
    databases are pytest-django's per worker (``test_<name>_gwN``), its ``tmp_path`` xdist's."""
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    if (
        not worker.startswith("gw")
        or not worker[2:].isdigit()
        or environ.get("PODLIFE_TEST_WORKER") == worker
    ):
        return
    number = int(worker[2:])
    if url := environ.get("REDIS_URL", "").strip():
        parts = urlsplit(url)
        if parts.scheme == "unix":  # unix:///run/redis.sock?db=D
            query = dict(parse_qsl(parts.query))
            query["db"] = str(int(query.get("db") or 0) + number)
            environ["REDIS_URL"] = f"unix://{parts.netloc}{parts.path}?{urlencode(query)}"
        else:  # redis://HOST:PORT/D
            environ["REDIS_URL"] = parts._replace(
                path=f"/{int(parts.path.strip('/') or 0) + number}"
            ).geturl()
    environ["PODLIFE_DEPLOYMENT"] = f"{environ.get('PODLIFE_DEPLOYMENT', '').strip() or 'podlife'}-{worker}"
    environ["PODLIFE_TEST_WORKER"] = worker


@dataclass(frozen=True)
class SecretKey:
    value: str
    generated: bool


# Django's own deployment check (security.W009) wants 50 characters, 5 distinct ones and no
# "django-insecure-" prefix; a key that passes here passes there too. 128 bits by a character-frequency
# estimate (and 3 bits a character) refuses what an operator types by hand (one letter repeated, a short
# pattern, a word); it cannot prove a key random, so the message says how to make one.
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_BITS = 128
SECRET_KEY_MIN_BITS_PER_CHARACTER = 3  # random hex has 4, base64 6: a short pattern repeated has less
_MAKE_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"


def estimated_bits(value: str) -> float:
    """Shannon entropy of the key's character frequencies times its length (an upper bound)."""
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values()) * n if n else 0.0


def check_secret_key(name: str, value: str) -> str:
    """``value`` if it is long and varied enough to sign sessions; else ImproperlyConfigured saying why."""
    if len(value) < SECRET_KEY_MIN_LENGTH:
        raise ImproperlyConfigured(
            f"{name} is {len(value)} characters long: expected at least {SECRET_KEY_MIN_LENGTH} random "
            f"characters, e.g. from {_MAKE_KEY}"
        )
    if value.startswith("django-insecure-"):
        raise ImproperlyConfigured(
            f"{name} starts with 'django-insecure-' (a development key): make one with {_MAKE_KEY}"
        )
    bits = estimated_bits(value)
    per_character = bits / len(value)
    if bits < SECRET_KEY_MIN_BITS or per_character < SECRET_KEY_MIN_BITS_PER_CHARACTER or len(set(value)) < 5:
        raise ImproperlyConfigured(
            f"{name} is not random enough: {len(set(value))} distinct characters, about {bits:.0f} bits "
            f"({per_character:.1f} a character; expected at least {SECRET_KEY_MIN_BITS} bits and "
            f"{SECRET_KEY_MIN_BITS_PER_CHARACTER} a character); make one with {_MAKE_KEY}"
        )
    return value


def require_secret_key(present: bool, name: str = "SECRET_KEY") -> None:
    """Stop a process that serves HTTP (sessions, CSRF) when it has no key, saying what to do."""
    if not present:
        raise ImproperlyConfigured(
            f"{name} is not set: the web server needs one when DEBUG is off (make one with {_MAKE_KEY}); "
            "for development on this machine, set DEBUG=1 instead"
        )


def secret_key(name: str, *, debug: bool, key_file: Path) -> SecretKey:
    """SECRET_KEY from the environment; in development, generated once into a git-ignored file.

    Unset with DEBUG off: empty. Commands that sign nothing (collect, ingest, timeline, export, the Celery
    worker) run without one; the web server refuses to start (``require_secret_key`` in asgi.py), and
    anything else that signs fails with Django's "The SECRET_KEY setting must not be empty"."""
    value = _raw(name)
    if value:
        return SecretKey(check_secret_key(name, value), generated=False)
    if not debug:
        return SecretKey("", generated=False)
    if key_file.exists():
        return SecretKey(key_file.read_text(encoding="ascii").strip(), generated=False)
    from django.core.management.utils import get_random_secret_key

    generated = get_random_secret_key()
    key_file.write_text(generated + "\n", encoding="ascii")
    key_file.chmod(0o600)
    return SecretKey(generated, generated=True)
