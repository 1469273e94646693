"""Memory habits shared by the processes: give the C allocator's free memory back when the web process
goes idle (``IdleTrim``), keep glibc from serving large blocks out of its thread heaps in the web process
(``fix_mmap_threshold``) and its threads out of heaps of their own (``one_arena``), and pause the cyclic
GC for a burst of short-lived allocation (``gc_paused``: the watch, audit ingest and the derive stage).

Under load (bench/load.py: 200 live pages and 50 API clients) the web process grew by 30–50 MiB and kept
it after the clients left, yet its live Python objects grew by only 4–7 MiB (``bench/load.py
--tracemalloc``): the rest was free memory that glibc's malloc keeps in its heaps (one per thread that
allocated: each request runs in a worker thread) rather than return it, plus what PostgreSQL's client
library allocated outside Python. ``IdleTrim`` wraps the ASGI application: when the last request or
websocket of the process ends and nothing starts for ``IDLE_S``, it calls its ``releases`` (caches that
only a busy process needs: podlife_site/asgi.py passes the compressed frames kept for the next socket),
runs a full garbage collection (a closed socket's objects sit in reference cycles until one; tracemalloc
still saw the 200 pages' protocol objects 3 s after they left) and then ``malloc_trim(0)``, which hands
the free pages of every heap back. Busy, it never runs (each new request or socket pushes it back); on a
C library without ``malloc_trim`` (musl) it does nothing. What it cannot return: the database pool's
connections (kept by design), heaps too fragmented to have whole free pages, and pymalloc's arenas (1 MiB
each, returned only when wholly empty) that one object made at the load's peak still holds
(docs/performance-history.md "Load").
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the collectors import gc_paused: no Channels at run time
    from podlife_site.asgi_types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)
IDLE_S = 2.0  # quiet this long after the last request or socket ended: trim


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection for one burst of short-lived allocation; one pass may run after it.

    A watch page or segment being decoded and normalized, an audit input being parsed, a derive batch
    being read, folded and written: each allocates tens of thousands of small dicts, lists and records
    that all stay alive until the burst is stored, so the generational passes kept re-scanning them, and
    every few bursts a full pass walked the whole heap (a fifth of a relist's time, a seventh of a derive
    batch's). Reference counting frees them all the same (a burst makes few cycles, and those go at the
    next pass). Not counted across threads on purpose: whoever found the collector enabled re-enables
    it, so a concurrent burst can only see it enabled earlier than it wanted, and it never stays off.
    """
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _malloc_trim() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_trim = _malloc_trim()

M_MMAP_THRESHOLD = -3  # glibc's mallopt() parameters (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD = 128 * 1024  # glibc's own initial value, kept fixed


def _mallopt(param: int, value: int, *, tunable: str, variable: str) -> bool:
    """glibc's ``mallopt(param, value)``; False where the C library has none, or where the environment
    already chose (``GLIBC_TUNABLES=glibc.malloc.<tunable>=…`` or ``variable``): a deployment's own
    setting wins."""
    if tunable in os.environ.get("GLIBC_TUNABLES", "") or variable in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(param, value))


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Have glibc serve every allocation of ``threshold`` bytes or more with a mapping of its own, given
    back to the system when freed, from now on; False where the C library cannot, or where the
    environment already set it (``GLIBC_TUNABLES=glibc.malloc.mmap_threshold=…``, ``MALLOC_MMAP_THRESHOLD_``).

    By default glibc starts at 128 KiB and raises the threshold to the size of each mapped block that is
    freed (up to 32 MiB, mallopt(3)): once the web process had freed one node answer of a few MB, every
    later block up to that size (the next answers as they grow, their gzip copies, 256 KiB socket reads)
    came out of the heap of the thread that asked for it, so the heaps grew with the load's peak and kept
    what ``malloc_trim`` cannot hand back (pages with a live block in them). Setting the threshold turns
    that raise off; the 200-page load of bench/load.py then peaks about 16 MiB lower and ends about 3 lower
    (docs/performance-history.md "Load")."""
    return _mallopt(M_MMAP_THRESHOLD, threshold, tunable="mmap_threshold", variable="MALLOC_MMAP_THRESHOLD_")


def one_arena() -> bool:
    """Have every thread of the process allocate from glibc's one main heap from now on (no arena per
    thread); False where the C library cannot, or where the environment already chose
    (``GLIBC_TUNABLES=glibc.malloc.arena_max=…``, ``MALLOC_ARENA_MAX``).

    In the web process the threads are the request threads and the listeners' pool; almost all they
    allocate is Python's, under the interpreter lock, so one heap costs them no contention worth
    measuring (bench/load.py: no delivery or API latency lost), while each thread's own heap kept the free
    memory of its part of the peak (about 2–3 MiB after the 200-page load, docs/performance-history.md "Load")."""
    return _mallopt(M_ARENA_MAX, 1, tunable="arena_max", variable="MALLOC_ARENA_MAX")


def trim() -> bool:
    """Return the allocator's free memory to the system now; False where the C library cannot."""
    if _trim is None:
        return False
    _trim(0)
    return True


class IdleTrim:
    """ASGI middleware (outermost, podlife_site/asgi.py): ``trim()`` once the process has had no request
    and no websocket for ``IDLE_S``, after calling each of ``releases``: what drops what only a busy
    process needs (a cache of the last frames sent, which would otherwise stay until the next load)."""

    def __init__(self, app: ASGIApp, releases: Iterable[Callable[[], object]] = ()) -> None:
        self.app = app
        self.releases = tuple(releases)
        self.active = 0
        self.trims = 0  # counted for the tests
        self._timer: asyncio.TimerHandle | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or _trim is None:
            await self.app(scope, receive, send)
            return
        self.active += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            if self.active == 0:
                self._timer = asyncio.get_running_loop().call_later(IDLE_S, self._idle)

    def _idle(self) -> None:
        self._timer = None
        if self.active == 0:
            for release in self.releases:
                try:
                    release()
                except Exception:  # a release that fails must not stop the trim (nor the server)
                    log.exception("releasing %r when idle failed", release)
            gc.collect()  # the sockets just closed sit in reference cycles until a full collection
            trim()
            self.trims += 1
