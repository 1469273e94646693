"""uvicorn under tracemalloc, for ``bench/load.py --tracemalloc``: on SIGUSR1 the server writes a snapshot
of its live Python allocations to ``$PODLIFE_TRACEMALLOC_DIR/<n>.snap`` (n = 0, 1, …), then writes
the memory tracemalloc itself uses (bytes) to ``<n>.done``."""

from __future__ import annotations

import itertools
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from typing import Any

tracemalloc.start(8)
_out = Path(os.environ["PODLIFE_TRACEMALLOC_DIR"])
_numbers = itertools.count()


def _dump(signum: int, frame: Any) -> None:
    n = next(_numbers)
    tracemalloc.take_snapshot().dump(str(_out / f"{n}.snap"))
    (_out / f"{n}.done").write_text(str(tracemalloc.get_tracemalloc_memory()))  # tracemalloc's own


signal.signal(signal.SIGUSR1, _dump)

if __name__ == "__main__":
    import uvicorn

    sys.argv[0] = "uvicorn"
    uvicorn.main()
