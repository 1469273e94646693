"""Process tuning (podlife_site/tuning.py): what each process sets at start-up, the web process's
allocator habits (its free memory handed back once idle, large blocks mapped, one heap), the writers'
switch interval, the collector's freeze and the GC pauses of a burst."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from podlife_site import tuning
from tests.waits import until


def test_trim_runs_once_after_the_last_request_or_socket_and_never_while_busy(monkeypatch: Any) -> None:
    """GIVEN IdleTrim around an application WHEN a socket stays open while requests come and go THEN
    nothing is trimmed; WHEN the socket closes and IDLE_S passes THEN the free memory is trimmed once;
    WHEN a request starts before IDLE_S THEN the trim waits for it."""
    monkeypatch.setattr(tuning, "IDLE_S", 1.0)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if "until" in scope:  # a websocket: open until told
            await scope["until"].wait()

    async def run() -> list[int]:
        trim = tuning.IdleTrim(app)
        seen = []
        closed = asyncio.Event()
        socket = asyncio.create_task(trim({"type": "websocket", "until": closed}, None, None))
        await asyncio.sleep(0)
        for _ in range(3):
            await trim({"type": "http"}, None, None)
            await asyncio.sleep(0.1)  # time passes (less than IDLE_S) while the socket is open
        seen.append(trim.trims)
        assert trim._timer is None  # the socket keeps it busy: no trim is even scheduled
        closed.set()
        await socket
        first = trim._timer
        assert first is not None  # the last socket closed: the trim is due IDLE_S from now
        await trim({"type": "http"}, None, None)  # a request before IDLE_S pushes the trim back
        assert first.cancelled() and trim._timer is not None and trim._timer is not first
        seen.append(trim.trims)
        await until(lambda: trim.trims > 0, "a trim")
        seen.append(trim.trims)
        assert trim._timer is None  # once: nothing more is due until the next request
        return seen

    assert tuning.trim()  # glibc, as in the image
    assert asyncio.run(run()) == [0, 0, 1]


def test_the_releases_run_when_idle_and_one_that_fails_does_not_stop_the_trim(monkeypatch: Any) -> None:
    """GIVEN IdleTrim with two releases, the first of which raises WHEN a request ends and IDLE_S passes
    THEN both ran once, before the trim, and the trim happened."""
    monkeypatch.setattr(tuning, "IDLE_S", 0.05)
    calls: list[str] = []

    def broken() -> None:
        calls.append("broken")
        raise RuntimeError("release failed")

    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    async def run() -> int:
        trim = tuning.IdleTrim(app, releases=[broken, lambda: calls.append("kept frames")])
        await trim({"type": "http"}, None, None)
        assert calls == []  # not while a request runs, nor right after it
        await until(lambda: trim.trims > 0, "a trim")
        return trim.trims

    assert asyncio.run(run()) == 1
    assert calls == ["broken", "kept frames"]


def test_gc_paused_restores_what_it_found_even_when_the_burst_raises() -> None:
    """GIVEN the cyclic GC enabled WHEN a burst runs under gc_paused THEN it is off inside and on after,
    also when the burst raises; GIVEN it disabled (a nested or concurrent burst) THEN it stays off after."""
    import gc

    assert gc.isenabled()
    with tuning.gc_paused():
        assert not gc.isenabled()
        with tuning.gc_paused():  # the inner burst found it off: it leaves it off
            pass
        assert not gc.isenabled()
    assert gc.isenabled()
    try:
        with tuning.gc_paused():
            raise ValueError("a burst that fails")
    except ValueError:
        pass
    assert gc.isenabled()
    gc.disable()
    try:
        with tuning.gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


_MAPPED_AFTER_A_LARGE_FREE = """
import ctypes, sys
from podlife_site import tuning

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
fixed = tuning.fix_mmap_threshold() if sys.argv[1] == "fix" else None
big = bytearray(8 << 20)  # mapped (over 128 KiB); freeing it raises glibc's threshold unless fixed
del big
before = libc.mallinfo2().hblkhd
held = [bytearray(1 << 20) for _ in range(4)]
print(fixed, libc.mallinfo2().hblkhd - before >= 4 << 20)
"""


def _mapped_after_a_large_free(mode: str, **env: str) -> list[str]:
    import os
    import subprocess
    import sys
    from pathlib import Path

    return subprocess.run(
        [sys.executable, "-c", _MAPPED_AFTER_A_LARGE_FREE, mode],
        cwd=Path(__file__).resolve().parent.parent,
        env={**{k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_")}, **env},
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip


def test_a_fixed_mmap_threshold_keeps_large_blocks_out_of_the_heaps_after_a_larger_one_was_freed() -> None:
    """GIVEN glibc (as in the image) WHEN an 8 MiB block was freed and then four 1 MiB blocks are made
    THEN by default they come from the heap (glibc raised its threshold to 8 MiB when the first was
    freed), and with ``fix_mmap_threshold()`` each is a mapping of its own (given back when freed);
    GIVEN the threshold set in the environment THEN the process leaves it as the operator set it."""
    assert _mapped_after_a_large_free("default") == ["None", "False"]
    assert _mapped_after_a_large_free("fix") == ["True", "True"]
    assert _mapped_after_a_large_free("fix", GLIBC_TUNABLES="glibc.malloc.mmap_threshold=262144") == [
        "False",
        "True",
    ]


_ARENAS_AFTER_THREADS = """
import ctypes, sys, threading
from podlife_site import tuning

mode = sys.argv[1]
chosen = tuning.one_arena() if mode == "one" else tuning.start(tuning.Role.WEB) if mode == "web" else None
together = threading.Barrier(4)
held = []

def allocate() -> None:
    held.append(bytearray(64 << 10))  # from glibc's heap (over pymalloc's 512 bytes, under the threshold)
    together.wait()  # all four threads alive at once: glibc gives each its own heap unless limited

threads = [threading.Thread(target=allocate) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(chosen)
ctypes.CDLL("libc.so.6").malloc_stats()  # "Arena N:" per heap, on stderr
"""


def _arenas_after_threads(mode: str, **env: str) -> tuple[str, int]:
    import os
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run(
        [sys.executable, "-c", _ARENAS_AFTER_THREADS, mode],
        cwd=Path(__file__).resolve().parent.parent,
        env={**{k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "MALLOC_ARENA_MAX")}, **env},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip(), sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_one_arena_keeps_every_thread_in_the_main_heap() -> None:
    """GIVEN glibc WHEN four threads allocate at once THEN by default glibc made heaps of their own beside
    the main one, and after ``one_arena()`` (or a web process's start-up) there is only the main heap;
    GIVEN the limit set in the
    environment THEN the process leaves it as the operator set it."""
    default, n_default = _arenas_after_threads("default")
    assert (default, n_default > 1) == ("None", True)
    assert _arenas_after_threads("one") == ("True", 1)
    assert _arenas_after_threads("web") == ("True", 1)  # what a web process starts with (asgi.py)
    chosen, n = _arenas_after_threads("one", MALLOC_ARENA_MAX="2")
    assert (chosen, n) == ("False", 2)


@pytest.fixture
def fresh_process(monkeypatch: Any) -> Iterator[None]:
    """This process as if nothing had started it yet, its switch interval restored after the test."""
    monkeypatch.setattr(tuning, "_started", set())
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("before", [0.005, 0.0001])
def test_a_collector_process_makes_the_gil_come_back_to_a_thread_within_half_a_millisecond(
    fresh_process: None, before: float
) -> None:
    """GIVEN the interpreter's default switch interval (5 ms) WHEN a process starts as a collector THEN
    it is at most WRITER_SWITCH_INTERVAL_S (0.5 ms), so a store writer the database answered does not wait
    up to 5 ms for the parsing thread to hand the GIL back, four times a batch; a shorter interval set
    before is kept, and a second start changes nothing."""
    sys.setswitchinterval(before)
    assert tuning.start(tuning.Role.COLLECTOR) is True
    assert tuning.WRITER_SWITCH_INTERVAL_S == 0.0005
    assert sys.getswitchinterval() == pytest.approx(min(before, tuning.WRITER_SWITCH_INTERVAL_S))
    sys.setswitchinterval(0.005)
    assert tuning.start(tuning.Role.COLLECTOR) is False
    assert sys.getswitchinterval() == pytest.approx(0.005)


@pytest.mark.parametrize("signal", ["worker_init", "worker_process_init"])
def test_a_celery_worker_starts_as_a_collector(fresh_process: None, signal: str) -> None:
    """GIVEN the Celery app WHEN a worker starts (its main process, or a prefork child) THEN the process
    is tuned as a collector: it runs watch steps, whose writer threads store while it parses."""
    from celery import Celery, signals

    import podlife_site.celery  # noqa: F401 - connects the worker's start signals

    sys.setswitchinterval(0.005)

    # A stand-in worker of another app: Celery's Django fixup, also listening, leaves another app's worker
    # alone (it would install its worker hooks into this test process). Not made the current app: the
    # product's shared tasks would be sent through it by every later test of this process.
    class StandIn:
        app = Celery("stand-in", set_as_current=False)

    getattr(signals, signal).send(sender=StandIn())
    assert sys.getswitchinterval() == pytest.approx(tuning.WRITER_SWITCH_INTERVAL_S)


def test_the_collector_freezes_what_its_first_step_left_alive_once(monkeypatch: Any) -> None:
    """GIVEN a process whose first watch step has ended WHEN ``freeze_after_warm_up`` runs THEN what is
    alive is frozen out of the cyclic GC's reach; WHEN later steps end THEN nothing more is frozen (what
    they allocate is collected as before)."""
    monkeypatch.setattr(tuning, "_frozen", False)
    gc.unfreeze()
    try:
        tuning.freeze_after_warm_up()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        later = [[i] for i in range(1000)]  # a later step's objects
        tuning.freeze_after_warm_up()
        # Nothing more frozen (frozen objects that other threads free leave the count: it may only drop).
        assert gc.get_freeze_count() <= frozen and later
    finally:
        gc.unfreeze()
