"""Reading a watch response: lines off the raw urllib3 body in a reader thread, and jittered backoff.

The reader thread owns the socket read; the step's thread owns the database. Lines cross over in a queue
one received segment at a time, so the step can flush a half-full batch when the stream goes quiet
(``get`` with a timeout) instead of holding observations until the next line or the end of the watch.
Shutdown order: whoever ends the step closes the response; the reader then sees an error or the end of
the body, posts ``END`` and exits.
"""

from __future__ import annotations

import contextlib
import enum
import queue
import random
import socket
import threading
from collections.abc import Iterator
from typing import Any, Final, Literal


class _End(enum.Enum):
    END = enum.auto()


# Posted after the last lines of a body (an enum member, so ``lines is END`` narrows ``get``'s type).
END: Final = _End.END


def split_lines(segments: Iterator[bytes], max_lines: int = 100) -> Iterator[list[bytes]]:
    """Complete lines (without the newline, blank ones dropped) per segment of a chunked body, at most
    ``max_lines`` per list: a server flushes a burst (a watch replaying its backlog) as one huge chunk,
    and the step must be able to store the start of it while it parses the rest."""
    pending = b""
    for segment in segments:
        if not segment:
            continue
        data = pending + segment if pending else segment
        parts = data.split(b"\n")
        pending = parts.pop()
        lines = [p for p in parts if p.strip()]
        for start in range(0, len(lines), max_lines):
            yield lines[start : start + max_lines]
    if pending.strip():
        yield [pending]


class LineReader:
    """Reads ``response`` in a daemon thread; ``get(timeout)`` returns a list of lines, END, or raises.

    An exception in the reader (a dropped connection, a read timeout) is re-raised by ``get`` after the
    lines read before it, so nothing that arrived is lost.
    """

    def __init__(self, response: Any, *, name: str = "watch-reader", max_lines: int = 100) -> None:
        self.response = response
        self.max_lines = max_lines
        self._queue: queue.Queue[list[bytes] | Literal[_End.END] | BaseException] = queue.Queue(maxsize=64)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            segments = self.response.stream(amt=None, decode_content=True)
            for lines in split_lines(segments, self.max_lines):
                while not self._closed.is_set():
                    try:
                        self._queue.put(lines, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if self._closed.is_set():
                    return
            self._put_final(END)
        except BaseException as exc:  # posted to the step's thread, which logs and counts it
            self._put_final(exc)

    def _put_final(self, item: Literal[_End.END] | BaseException) -> None:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def get(self, timeout: float | None) -> list[bytes] | Literal[_End.END] | None:
        """The next lines, END at the end of the body, or None when nothing came within ``timeout``."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        """Stop reading and release the connection (safe to call twice, from any thread)."""
        self._closed.set()
        close_response(self.response)
        self._thread.join(timeout=5)


def close_response(response: Any) -> None:
    """Close ``response`` even while another thread is blocked reading it.

    Closing a socket does not wake a thread blocked in ``recv`` on every platform; shutting it down does.
    Errors are ignored: the connection is being dropped on purpose, and may already be broken.
    """
    sock = getattr(getattr(response, "connection", None), "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        response.close()
    with contextlib.suppress(Exception):
        response.release_conn()


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): exponential, capped, with equal jitter.

    Half the delay is fixed and half random, so many watchers failing together spread out but none
    retries immediately. Attempt 0 (no failure) waits 0.
    """
    if attempt <= 0 or base <= 0:
        return 0.0
    ceiling = min(cap, base * (2.0 ** min(attempt - 1, 30)))
    jitter = rng.uniform(0, ceiling / 2) if rng is not None else random.uniform(0, ceiling / 2)
    return ceiling / 2 + jitter
