"""Security tests: the dashboard fixtures (users, grants, the lab cluster, a real uvicorn, Chromium) and a
helper that runs podlife in a subprocess with exactly the environment a deployment would give it."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.conftest import (  # noqa: F401  (fixtures)
    admin_user,
    browser_page,
    held_socket,
    inmemory_layer,
    lab,
    live_server_asgi,
    nobody,
    viewer,
)

ROOT = Path(__file__).resolve().parents[2]
# Variables a deployment sets that must not leak in from the test run's own environment.
DEPLOYMENT_VARIABLES = (
    "DEBUG",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "REDIS_URL",
    "PODLIFE_HTTPS",
    "PODLIFE_METRICS_PUBLIC",
    "PODLIFE_METRICS_TOKEN",
    "DJANGO_SETTINGS_MODULE",
    "PODLIFE_PROCESS",  # set to "web" in this process once podlife_site.asgi is imported
)


def deployment_env(**variables: str) -> dict[str, str]:
    """The test process's environment without any deployment variable, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if k not in DEPLOYMENT_VARIABLES}
    return {**env, **variables}


def strong_key() -> str:
    return secrets.token_urlsafe(50)


class Served:
    """``uvicorn podlife_site.asgi:application`` in a subprocess (a real deployment's process), serving on a
    socket this process bound and holds until ``stop`` (``held_socket``), handed to it as ``--fd``: no other
    test or process can take the port between choosing it and the server listening."""

    def __init__(self, env: dict[str, str]) -> None:
        self.socket = held_socket()
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        fd = self.socket.fileno()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "podlife_site.asgi:application", "--fd", str(fd),
             "--log-level", "warning", "--lifespan", "off"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, pass_fds=(fd,),
        )  # fmt: skip
        # Bound, not listening: a connection is refused until uvicorn listens on it.
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                self.socket.close()
                raise RuntimeError(f"uvicorn exited: {self.proc.stdout.read() if self.proc.stdout else ''}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("uvicorn did not listen within 30 s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.socket.close()


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    started: list[Served] = []

    class Tracked(Served):
        def __init__(self, env: dict[str, str]) -> None:
            super().__init__(env)
            started.append(self)

    yield Tracked
    for server in started:
        server.stop()
