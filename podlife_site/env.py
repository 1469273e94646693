"""Tiny typed readers for settings from the environment.

Every reader names the variable and the expected form when a value is malformed, so a bad deployment
stops at start-up with a sentence an operator can act on instead of failing later in a stranger place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

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


def database_from_url(name: str, url: str) -> dict[str, object]:
    """A Django DATABASES entry from a database URL (PostgreSQL or SQLite)."""
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
        options = dict(parse_qsl(parts.query))
        host = options.pop("host", None) or unquote(parts.hostname or "")
        return {
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


@dataclass(frozen=True)
class SecretKey:
    value: str
    generated: bool


def secret_key(name: str, *, debug: bool, key_file: Path) -> SecretKey:
    """SECRET_KEY from the environment; in development, generated once into a git-ignored file."""
    value = _raw(name)
    if value:
        if len(value) < 32:
            raise ImproperlyConfigured(
                f"{name} is {len(value)} characters long: expected at least 32 random characters"
            )
        return SecretKey(value, generated=False)
    if not debug:
        raise ImproperlyConfigured(
            f"{name} is not set: it is required when DEBUG is off (set 50 random characters)"
        )
    if key_file.exists():
        return SecretKey(key_file.read_text(encoding="ascii").strip(), generated=False)
    from django.core.management.utils import get_random_secret_key

    generated = get_random_secret_key()
    key_file.write_text(generated + "\n", encoding="ascii")
    key_file.chmod(0o600)
    return SecretKey(generated, generated=True)
