"""Virtual time for the demo cluster: a clock, a queue of timed callbacks and generator "processes".

Everything the simulated cluster does happens at a virtual instant. Tests step the clock by hand
(``advance`` / ``run_until_idle``); the server drives it from the wall clock through ``RealtimeDriver``.
A process is a generator that yields how many virtual seconds to sleep before it resumes, so a scenario
reads top to bottom like the story it tells.

Housekeeping that never ends (node heartbeats, event expiry) is scheduled as *background* work: it runs
like anything else while time passes, but ``run_until_idle`` does not wait for it, so "idle" still means
"the story is over".
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Generator
from datetime import datetime, timedelta

Process = Generator[float, None, None]


class Engine:
    """A discrete-event loop over virtual time. Not thread-safe by itself: callers hold ``lock``."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("Engine start time must be timezone-aware (UTC)")
        self.start = start
        self.elapsed = 0.0  # virtual seconds since start
        self._queue: list[tuple[float, int, bool, Callable[[], None]]] = []
        self._seq = 0
        self._foreground = 0  # queued entries that are not background housekeeping
        self.lock = threading.RLock()

    @property
    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.elapsed)

    def schedule(self, delay: float, fn: Callable[[], None], background: bool = False) -> None:
        """Run ``fn`` ``delay`` virtual seconds from now (never in the past). ``background`` work does not
        keep ``run_until_idle`` going."""
        self._seq += 1
        if not background:
            self._foreground += 1
        heapq.heappush(self._queue, (self.elapsed + max(0.0, delay), self._seq, background, fn))

    def spawn(self, proc: Process, delay: float = 0.0, background: bool = False) -> None:
        """Start a generator process after ``delay`` seconds; each yielded number is a sleep."""

        def step() -> None:
            try:
                wait = next(proc)
            except StopIteration:
                return
            self.schedule(float(wait), step, background)

        self.schedule(delay, step, background)

    def pending(self) -> int:
        """Queued foreground callbacks (background housekeeping is not counted)."""
        return self._foreground

    def next_due(self) -> float | None:
        return self._queue[0][0] if self._queue else None

    def _pop_and_run(self) -> None:
        due, _, background, fn = heapq.heappop(self._queue)
        if not background:
            self._foreground -= 1
        self.elapsed = max(self.elapsed, due)
        fn()

    def advance(self, seconds: float) -> int:
        """Run everything due within the next ``seconds`` virtual seconds; returns callbacks run."""
        target = self.elapsed + seconds
        ran = 0
        with self.lock:
            while self._queue and self._queue[0][0] <= target:
                self._pop_and_run()
                ran += 1
            self.elapsed = max(self.elapsed, target)
        return ran

    def run_until_idle(self, max_seconds: float = 3600.0) -> float:
        """Run until no foreground work is queued or ``max_seconds`` of virtual time passed; returns the
        virtual time used. Background work due meanwhile runs in order with the rest."""
        begin = self.elapsed
        limit = begin + max_seconds
        with self.lock:
            while self._foreground and self._queue[0][0] <= limit:
                self._pop_and_run()
        return self.elapsed - begin


class RealtimeDriver:
    """Advances an Engine from the wall clock, ``speed`` virtual seconds per real second.

    Owns one daemon thread; ``stop()`` joins it. ``paused`` freezes virtual time (the hooks use it).
    """

    def __init__(self, engine: Engine, speed: float = 1.0, tick: float = 0.02) -> None:
        self.engine = engine
        self.speed = speed
        self.tick = tick
        self.paused = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick):
            now = time.monotonic()
            step = (now - last) * self.speed
            last = now
            if not self.paused:
                self.engine.advance(step)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
