"""Ctrl-C stops ``make demo`` promptly (issue #15): a terminal's Ctrl-C sends SIGINT to the whole
foreground process group (make and the demo under it), here while a browser-like client holds the node
page's websocket open. Every process of the group must be gone within a generous 10 s; the time measured
is reported in docs/demo-cluster.md (0.7–2.5 s under load), not asserted tightly."""

from __future__ import annotations

import asyncio
import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.waits import wait_for

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def log_in(base: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(f"{base}/accounts/login/", timeout=10).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token, form[:500]
    data = {"username": "demo", "password": "demo", "csrfmiddlewaretoken": token.group(1)}
    opener.open(
        urllib.request.Request(
            f"{base}/accounts/login/",
            data=urllib.parse.urlencode(data).encode(),
            headers={"Referer": f"{base}/accounts/login/"},
        ),
        timeout=10,
    )
    return "; ".join(f"{c.name}={c.value}" for c in jar)


def test_ctrl_c_stops_make_demo_with_a_live_socket_open(tmp_path: Path) -> None:
    """GIVEN ``make demo`` serving, with a logged-in websocket on a node page WHEN the terminal's Ctrl-C
    (SIGINT to the process group) arrives THEN make, the demo, its collector and its demo cluster all exit
    within 10 s (measured: 0.7–2.5 s) and the socket is closed."""
    import websockets

    # The port is held by this test from the start: the demo serves the bound socket (make demo FD=...).
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    port = held.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'demo.sqlite3'}"
    log = (tmp_path / "demo.log").open("wb")
    # -o: the virtualenv is what runs this test; `make demo` must not try to reinstall it.
    proc = subprocess.Popen(
        [
            "make",
            "--no-print-directory",
            "-o",
            ".venv/.installed",
            "demo",
            f"FD={held.fileno()}",
            f"PY={sys.executable}",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        pass_fds=(held.fileno(),),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=1)
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "demo.log").read_text()
                assert time.monotonic() < deadline, "the demo did not start in 120 s"
                time.sleep(0.2)
        cookie = log_in(base)
        socket_state: dict[str, str] = {}

        async def hold() -> None:
            async with websockets.connect(
                f"ws://127.0.0.1:{port}/ws/v1/nodes/podlife-demo/node-1/",
                additional_headers={"Cookie": cookie, "Origin": base},
            ) as ws:
                socket_state["hello"] = str(await ws.recv())
                try:
                    while True:
                        await ws.recv()
                except websockets.ConnectionClosed:
                    socket_state["closed"] = "yes"

        holder = threading.Thread(target=lambda: asyncio.run(hold()), daemon=True)
        holder.start()
        wait_for(lambda: "hello" in socket_state, "the websocket's hello", 20, interval=0.1)
        assert '"type":"hello"' in socket_state["hello"]
        # Not a wait for a result: Ctrl-C is pressed while the collector and the demo cluster are busy (the
        # scenario), and what the test asserts after it is waited for on conditions.
        time.sleep(3)

        pressed = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        # poll() reaps make itself, which would otherwise linger as a zombie of the group
        while (proc.poll() is None or group_alive(proc.pid)) and time.monotonic() - pressed < 10:
            time.sleep(0.05)
        took = time.monotonic() - pressed
        left = subprocess.run(
            ["ps", "-o", "pid,stat,args", "-g", str(proc.pid)], capture_output=True, text=True
        )
        assert proc.poll() is not None and not group_alive(proc.pid), (
            f"processes of `make demo` still run {took:.1f} s after Ctrl-C:\n{left.stdout}"
        )
        holder.join(5)
        assert socket_state.get("closed") == "yes"
        print(f"make demo stopped {took:.2f} s after Ctrl-C")
    finally:
        if group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        held.close()


def test_demo_fd_names_the_inherited_sockets_address_and_refuses_what_is_not_a_bound_tcp_socket() -> None:
    """``manage.py demo --fd N`` (``make demo FD=N``) prints the address of the socket it serves, read from
    the descriptor; a descriptor that is not a bound TCP socket is refused with a reason, before anything
    starts."""
    from django.core.management.base import CommandError

    from demo_cluster.management.commands.demo import _bound_address

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        assert _bound_address(held.fileno()) == ("127.0.0.1", held.getsockname()[1])
    with socket.socket() as unbound, pytest.raises(CommandError, match="not bound to a port"):
        _bound_address(unbound.fileno())
    with socket.socket(type=socket.SOCK_DGRAM) as udp, pytest.raises(CommandError, match="not a TCP socket"):
        udp.bind(("127.0.0.1", 0))
        _bound_address(udp.fileno())
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(CommandError, match="is not an open socket"):
            _bound_address(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
