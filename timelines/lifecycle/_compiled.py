"""Refuses compiled copies of the core's modules built from other sources than those beside them.

``make core-ext`` (``tools/compile_core.py``) compiles the hot modules with mypyc in place: Python then imports
``NAME.cpython-*.so`` before ``NAME.py``. An edited source would be shadowed silently by its old compiled
copy; the package's ``__init__`` imports this first, which raises ImportError instead. Without compiled
copies it does nothing.
"""

from __future__ import annotations

import hashlib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

STAMP = "_compiled.sha256"  # written by tools/compile_core.py: NAME SHA-256 of the source, one line each


def stale_modules(here: Path) -> list[str]:
    """The modules in ``here`` whose compiled copy was not built from the source beside it."""
    compiled = sorted(
        {
            p.name[: -len(next(s for s in EXTENSION_SUFFIXES if p.name.endswith(s)))]  # the most specific
            for p in here.glob("*.so")
            if "__mypyc" not in p.name
        }
    )
    if not compiled:
        return []
    stamp = here / STAMP
    built = dict(line.split() for line in stamp.read_text().splitlines()) if stamp.is_file() else {}
    return [
        name
        for name in compiled
        if built.get(name) != hashlib.sha256((here / f"{name}.py").read_bytes()).hexdigest()
    ]


if stale := stale_modules(Path(__file__).parent):
    raise ImportError(
        f"timelines/lifecycle: compiled {', '.join(stale)} not built from the sources beside them:"
        " run `make core-ext` again (or `make clean-core-ext` to run the sources as plain Python)"
    )
