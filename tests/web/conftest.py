"""Dashboard fixtures: users with and without grants, a small cluster with a hostile pod name, a real
ASGI server (uvicorn in a thread of the test process, so the in-memory channel layer reaches it)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User

from dashboard.models import ClusterGrant
from tests.flow import ingest as ingest_observations
from tests.waits import wait_for
from tests.web.factories import HOSTILE, killed_during_setup, started_pod
from timelines.models import Cluster

# channels.testing's __init__ imports its Daphne live-server helper (daphne.testing.DaphneProcess); podlife
# serves with uvicorn and never uses it, so a stand-in lets WebsocketCommunicator import without Daphne.
if importlib.util.find_spec("daphne") is None and "daphne.testing" not in sys.modules:
    _daphne, _daphne_testing = types.ModuleType("daphne"), types.ModuleType("daphne.testing")
    _daphne_testing.DaphneProcess = None  # type: ignore[attr-defined]
    sys.modules.update({"daphne": _daphne, "daphne.testing": _daphne_testing})

PASSWORD = "correct-horse-battery-9"
UID_OK = "aaaaaaaa-0000-4000-8000-000000000001"
UID_KILLED = "aaaaaaaa-0000-4000-8000-000000000002"
UID_EVIL = "aaaaaaaa-0000-4000-8000-000000000003"
UID_SECRET = "aaaaaaaa-0000-4000-8000-000000000004"
UID_OTHER_CLUSTER = "aaaaaaaa-0000-4000-8000-000000000005"


@pytest.fixture
def inmemory_layer(settings: Any) -> Iterator[None]:
    """The in-memory channel layer and process-local sequence numbers, whatever REDIS_URL says."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.REDIS_URL = ""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def lab(inmemory_layer: None) -> dict[str, Any]:
    """Cluster ``lab``: node-a with pods in default (a healthy one, one killed during setup), in ``evil``
    (a hostile name) and in ``secret``; cluster ``other`` with one pod."""
    ingest_observations("lab", started_pod(UID_OK, "web-ok"))
    ingest_observations("lab", killed_during_setup(UID_KILLED, "web-killed"))
    ingest_observations("lab", started_pod(UID_EVIL, HOSTILE, namespace="evil"))
    ingest_observations("lab", started_pod(UID_SECRET, "vault-0", namespace="secret"))
    ingest_observations("other", started_pod(UID_OTHER_CLUSTER, "elsewhere", node="node-z"))
    return {"lab": Cluster.objects.get(name="lab"), "other": Cluster.objects.get(name="other")}


def grant(user: User, cluster: Cluster, namespace: str = "") -> None:
    group, _ = Group.objects.get_or_create(name=f"g-{user.username}")
    user.groups.add(group)
    ClusterGrant.objects.get_or_create(group=group, cluster=cluster, namespace=namespace)


@pytest.fixture
def admin_user(db: Any) -> User:
    return User.objects.create_superuser("root", "root@example.invalid", PASSWORD)


@pytest.fixture
def viewer(lab: dict[str, Any]) -> User:
    """Reads namespaces ``default`` and ``evil`` of ``lab`` only."""
    user = User.objects.create_user("viewer", password=PASSWORD)
    grant(user, lab["lab"], "default")
    grant(user, lab["lab"], "evil")
    return user


@pytest.fixture
def nobody(db: Any) -> User:
    return User.objects.create_user("nobody", password=PASSWORD)


# --- a real ASGI server ---------------------------------------------------------------------------------------
def held_socket() -> socket.socket:
    """A socket bound to a free loopback port and kept, for uvicorn to serve on: in this process
    (``Server.serve(sockets=[...])``) or in a subprocess it is handed to (``--fd``, tests/security/conftest.py):
    no other test can take the port between choosing and listening."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


class LiveServer:
    """uvicorn serving podlife_site.asgi in a thread; ``run_in_loop`` runs sync code as the server would
    (e.g. ingestion whose live push must reach the server's in-memory channel layer)."""

    def __init__(self) -> None:
        import uvicorn

        from podlife_site.asgi import application

        self.socket = held_socket()
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            application,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
            ws="websockets-sansio",
        )
        self.server = uvicorn.Server(config)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, name="uvicorn", daemon=True)

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve(sockets=[self.socket]))

    def start(self) -> None:
        self.thread.start()
        wait_for(lambda: self.server.started, "uvicorn started", 15)

    def run_in_loop(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from asgiref.sync import sync_to_async

        assert self.loop is not None
        from django.db import connections

        def call() -> Any:
            try:
                return fn(*args, **kwargs)
            finally:
                connections.close_all()  # this worker thread's connection would outlive the test database

        future = asyncio.run_coroutine_threadsafe(sync_to_async(call, thread_sensitive=False)(), self.loop)
        return future.result(timeout=30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


@pytest.fixture
def live_server_asgi(transactional_db: Any, inmemory_layer: None, settings: Any) -> Iterator[LiveServer]:
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    server = LiveServer()
    server.start()
    yield server
    server.stop()


# --- Chromium through Playwright ------------------------------------------------------------------------------
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def browser_page(live_server_asgi: Any) -> Any:
    # Playwright's sync API keeps an event loop running in this thread; Django's ORM refuses to run beside
    # one unless told. Database work in the test body goes through the server's thread pool anyway.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.dialogs = []  # type: ignore[attr-defined]
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))  # type: ignore[attr-defined]
        page.errors = []  # type: ignore[attr-defined]
        page.on("pageerror", lambda e: page.errors.append(str(e)))  # type: ignore[attr-defined]
        yield page
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


def wait_for_js(page: Any, expression: str, timeout_s: float = 20.0) -> None:
    """Poll ``expression`` in the page until it is truthy. ``page.wait_for_function`` turns its string into
    code inside the page, which the site's Content-Security-Policy (no 'unsafe-eval') refuses as soon as
    the first check is false; ``page.evaluate`` goes through the DevTools protocol, outside the policy."""
    wait_for(lambda: page.evaluate(expression), repr(expression), timeout_s)


def login(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_url(f"{base}/")
