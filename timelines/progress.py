"""A progress bar for management commands (an export, the observations' move to their compact form)."""

from __future__ import annotations

import time
from typing import Protocol


class TextStream(Protocol):
    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


class ProgressBar:
    """``stage  done/total [#####     ] 42%`` redrawn in place on a terminal, at most ten times a second."""

    def __init__(self, stream: TextStream, width: int = 30) -> None:
        self.stream, self.width, self._last = stream, width, 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < 0.1:
            return
        self._last = now
        filled = int(self.width * done / max(total, 1))
        bar = "#" * filled + " " * (self.width - filled)
        self.stream.write(f"\r{stage:<12} {done:>7}/{total:<7} [{bar}] {100 * done // max(total, 1):3d}%")
        if done >= total and stage == "done":
            self.stream.write("\n")
        self.stream.flush()
