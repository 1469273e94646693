"""One read for a herd (issue #18, finding 5): requests for the same timeline view share one result.

When a node's live group skips a sequence number, or the server restarts, every page watching that node
refetches its timeline at once: 200 pages asked for 200 identical reads of the same window. Here the
first request of a view reads (the leader); requests for the same view that arrive meanwhile wait for its
result instead of reading themselves, and those that arrive within ``PODLIFE_SHARED_READ_S`` after it are
served the same bytes.

A shared result is never older than what its reader knows. The key holds the live group's sequence number
read when the request arrived (``timelines.live.current_sequence``): a page refetches after it saw number
N, so its request reads N or later and only joins a read that also began at that number; the derive stage
commits a pod's timeline before the number is taken, so that read holds everything up to N. A new delta
for the node makes a new number, and the next request reads again. The key also holds the reader's
namespace filter and node-lane visibility, so a result is shared only among readers who may see all of
it, and the query parameters as sent (a view without an end follows "now"; for these few seconds it
follows the leader's "now").

Per process and in memory: each web process reads once per herd. A kept result is dropped when its
``PODLIFE_SHARED_READ_S`` are up, by a reaper thread (one per process, started with the first kept
result), not when the next request happens to come: a node's answer is megabytes, and after a load the
last few were kept until the next request (8.3 MB of a web process's memory after bench/load.py, found
with heaptrack; docs/performance-history.md "Load"). ``stats`` counts reads and shared answers (tests,
bench/load.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

MAX_KEPT = 256  # finished results kept at once; past it a result serves only the requests that waited for it
WAIT_S = 120.0  # a follower gives up waiting for a leader after this and reads itself


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    value: bytes = b""
    error: BaseException | None = None
    finished: float | None = None  # monotonic time the read ended
    expires: float | None = None  # monotonic time after which the result is no longer handed out


@dataclass
class Stats:
    reads: int = 0  # results computed
    shared: int = 0  # answers served from another request's read


class SharedReads:
    """Single-flight with a short memory: ``get(key, ttl_s, read)`` runs ``read`` once for all callers of
    one key at a time, and hands its bytes to callers of the same key for ``ttl_s`` after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._due = threading.Condition(self._lock)  # the reaper waits on it for the next expiry
        self._reaper: threading.Thread | None = None
        self._flights: dict[Hashable, _Flight] = {}
        self.stats = Stats()

    def get(self, key: Hashable, ttl_s: float, read: Callable[[], bytes]) -> bytes:
        now = time.monotonic()
        with self._lock:
            self._forget(now)
            flight = self._flights.get(key)
            lead = flight is None
            if flight is None:
                flight = self._flights[key] = _Flight()
        if not lead and flight.done.wait(WAIT_S) and flight.error is None:
            with self._lock:
                self.stats.shared += 1
            return flight.value
        if not lead:
            # The leader failed or hung: read for ourselves (its error, if it was the request's own fault,
            # comes again here, and is the same answer).
            return self._read(read)
        try:
            flight.value = self._read(read)
            return flight.value
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            flight.finished = time.monotonic()
            flight.done.set()
            with self._lock:
                if flight.error is not None or len(self._flights) > MAX_KEPT or ttl_s <= 0:
                    self._flights.pop(key, None)
                else:
                    flight.expires = flight.finished + ttl_s
                    self._keep_reaping()

    def _read(self, read: Callable[[], bytes]) -> bytes:
        value = read()
        with self._lock:
            self.stats.reads += 1
        return value

    def _forget(self, now: float) -> None:
        stale = [k for k, f in self._flights.items() if f.expires is not None and now >= f.expires]
        for k in stale:
            del self._flights[k]

    def _keep_reaping(self) -> None:
        """(Under the lock.) A result was kept: the reaper drops it when it expires."""
        if self._reaper is None:
            self._reaper = threading.Thread(target=self._reap, name="shared-reads-reaper", daemon=True)
            self._reaper.start()
        self._due.notify()

    def _reap(self) -> None:
        """The reaper: drops each kept result as it expires, then sleeps until the next one is due (or, with
        none kept, until one is)."""
        with self._lock:
            while True:
                now = time.monotonic()
                self._forget(now)
                due = min((f.expires for f in self._flights.values() if f.expires is not None), default=None)
                self._due.wait(None if due is None else due - now)

    def clear(self) -> None:
        with self._lock:
            self._flights.clear()
            self.stats = Stats()


timeline_reads = SharedReads()  # the node and namespace timeline API (dashboard/web/api/views.py)
