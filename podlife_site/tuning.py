"""Process tuning, in one place: what each podlife process sets in the interpreter and the C allocator,
and why. Each process calls ``start`` once, at start-up, for what it is; the rest are called where the
moment comes.

| knob | processes | when | why |
|---|---|---|---|
| ``fix_mmap_threshold`` (glibc ``M_MMAP_THRESHOLD``) | web | ``start(Role.WEB)``: podlife_site/asgi.py | large blocks go back to the system when freed, not into a thread's heap |
| ``one_arena`` (glibc ``M_ARENA_MAX=1``) | web | ``start(Role.WEB)`` | no thread keeps its own heap with its part of a load's peak |
| ``IdleTrim`` (``malloc_trim``) | web | the ASGI app's outermost layer | the free memory of a load's peak is handed back once idle |
| ``short_switch_interval`` (``sys.setswitchinterval``) | collector: Celery worker, ``collect``, ``demo`` | ``start(Role.COLLECTOR)``: podlife_site/celery.py's worker signals, the commands | a store writer thread gets the GIL back within 0.5 ms of its database's answer, not 5 ms |
| ``freeze_after_warm_up`` (``gc.freeze``) | whoever runs watch steps | after the first step (``collectors/kube/watch.py``) | what a long-running collector keeps for good is out of the cyclic GC's reach |
| ``gc_paused`` (``gc.disable`` for a burst) | any | around a burst of short-lived allocation (the watch, audit parsing, a derive batch) | the generational passes stop re-scanning what the burst keeps until it is stored |

A deployment's own setting wins: the allocator knobs do nothing where ``GLIBC_TUNABLES`` or their
``MALLOC_*`` variable chose, and a switch interval already shorter is kept. A benchmark that stands in
for a process (bench/watch.py, bench/scale.py: the collector) calls ``start`` as that process does.

Memory in the web process. Under load (bench/load.py: 200 live pages and 50 API clients) the web process
grew by 30–50 MiB and kept it after the clients left, yet its live Python objects grew by only 4–7 MiB
(``bench/load.py --tracemalloc``): the rest was free memory that glibc's malloc keeps in its heaps (one per
thread that allocated: each request runs in a worker thread) rather than return it, plus what PostgreSQL's
client library allocated outside Python. ``IdleTrim`` wraps the ASGI application: when the last request or
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
import enum
import gc
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the collectors import gc_paused: no Channels at run time
    from podlife_site.asgi_types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)
IDLE_S = 2.0  # quiet this long after the last request or socket ended: trim


class Role(enum.Enum):
    """What a process is, for its start-up tuning (one process may be both: ``manage.py demo``)."""

    WEB = "web"  # serves HTTP and websockets (podlife_site/asgi.py)
    COLLECTOR = "collector"  # runs watch steps, whose writer threads store while it parses


_started: set[Role] = set()
_started_lock = threading.Lock()


def start(role: Role) -> bool:
    """Set the knobs of ``role`` (the table above), once per process and role; False when this process
    had started as ``role`` already."""
    with _started_lock:
        if role in _started:
            return False
        _started.add(role)
    if role is Role.WEB:
        fix_mmap_threshold()  # large blocks go back to the system when freed, not into a thread's heap
        one_arena()  # and the threads share one heap: none keeps its part of a peak
    elif role is Role.COLLECTOR:
        short_switch_interval()  # a writer thread the database answered gets the GIL back quickly
    return True


# The longest a thread waits for the GIL once it wants it back (``sys.setswitchinterval``; the
# interpreter's default is 5 ms). A store writer thread (timelines/writer.py) gives the GIL up at each
# exchange with a server (a batch has four with PostgreSQL: look-up with BEGIN and the marks, the COPY's
# start and end, COMMIT; then the derive stage's wake-up in Redis) and gets it back only when the step's
# thread, busy decoding the stream, is made to hand it over: up to 5 ms each time. A batch's store took
# 66-95 ms instead of the 53-65 ms of 7f87b14's two-exchange autocommit COPY, and the step's thread waited
# on its writers for two fifths of a replay (7f87b14: under a third; with 0.5 ms: 6-16 %;
# docs/performance-history.md, Watch). A process with one busy thread never switches, whatever the value.
WRITER_SWITCH_INTERVAL_S = 0.0005


def short_switch_interval() -> None:
    """At most ``WRITER_SWITCH_INTERVAL_S`` between GIL hand-overs from now on; a shorter one is kept."""
    if sys.getswitchinterval() > WRITER_SWITCH_INTERVAL_S:
        sys.setswitchinterval(WRITER_SWITCH_INTERVAL_S)


_frozen = False


def freeze_after_warm_up() -> None:
    """Once per process, after its first watch step: collect, then freeze what is alive (``gc.freeze``).

    A collector process is long-running, and after one step it holds everything it keeps for good: the
    modules of Django, the kubernetes client and psycopg, settings, clients, connections; several hundred
    thousand objects that every full collection walked again (a tenth of a step's time went to the cyclic
    GC). Frozen, they are out of its reach; what steps allocate later is collected as before.
    """
    global _frozen
    with _started_lock:
        if _frozen:
            return
        _frozen = True
    gc.collect()
    gc.freeze()


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
