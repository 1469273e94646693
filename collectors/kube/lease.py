"""Leases: at most one live watch chain (or kubelet pull) per key, across any number of workers.

With Redis (``REDIS_URL``) a lease is ``SET key token NX PX ttl``; renewing and releasing check the token
in a Lua script, so a chain that lost its lease (it expired while the worker was stuck or dead, and a new
chain took it) can never renew or release the new owner's. Without Redis (the embedded default: tasks
run eagerly in one process) the same contract is kept by a process-local table under a lock.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Protocol

from django.conf import settings

KEY_PREFIX = "podlife:lease:"

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def new_token() -> str:
    return secrets.token_hex(8)


class Leases(Protocol):
    def acquire(self, key: str, token: str, ttl_s: float) -> bool: ...

    def renew(self, key: str, token: str, ttl_s: float) -> bool: ...

    def release(self, key: str, token: str) -> bool: ...

    def holder(self, key: str) -> str | None: ...


class RedisLeases:
    def __init__(self, url: str) -> None:
        import redis

        self.redis = redis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)
        self._renew = self.redis.register_script(_RENEW)
        self._release = self.redis.register_script(_RELEASE)

    def acquire(self, key: str, token: str, ttl_s: float) -> bool:
        return bool(self.redis.set(KEY_PREFIX + key, token, nx=True, px=max(1, int(ttl_s * 1000))))

    def renew(self, key: str, token: str, ttl_s: float) -> bool:
        return bool(self._renew(keys=[KEY_PREFIX + key], args=[token, max(1, int(ttl_s * 1000))]))

    def release(self, key: str, token: str) -> bool:
        return bool(self._release(keys=[KEY_PREFIX + key], args=[token]))

    def holder(self, key: str) -> str | None:
        value = self.redis.get(KEY_PREFIX + key)
        return value.decode() if isinstance(value, bytes) else value


class LocalLeases:
    """The process-local fallback: the same contract, for one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[str, float]] = {}

    def _current(self, key: str) -> str | None:
        held = self._held.get(key)
        if held is None:
            return None
        if held[1] <= time.monotonic():
            del self._held[key]
            return None
        return held[0]

    def acquire(self, key: str, token: str, ttl_s: float) -> bool:
        with self._lock:
            if self._current(key) is not None:
                return False
            self._held[key] = (token, time.monotonic() + ttl_s)
            return True

    def renew(self, key: str, token: str, ttl_s: float) -> bool:
        with self._lock:
            if self._current(key) != token:
                return False
            self._held[key] = (token, time.monotonic() + ttl_s)
            return True

    def release(self, key: str, token: str) -> bool:
        with self._lock:
            if self._current(key) != token:
                return False
            del self._held[key]
            return True

    def holder(self, key: str) -> str | None:
        with self._lock:
            return self._current(key)


_backend: Leases | None = None
_backend_url: str | None = None
_backend_lock = threading.Lock()


def leases() -> Leases:
    """Redis leases when ``REDIS_URL`` is set, else the process-local table (one per process)."""
    global _backend, _backend_url
    url = settings.REDIS_URL or ""
    with _backend_lock:
        if _backend is None or _backend_url != url:
            _backend = RedisLeases(url) if url else LocalLeases()
            _backend_url = url
        return _backend


def watch_key(cluster: str, resource: str) -> str:
    return f"watch:{cluster}:{resource}"


def pull_key(cluster: str, what: str) -> str:
    return f"pull:{cluster}:{what}"
