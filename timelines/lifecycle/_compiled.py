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
    """The modules in ``here`` whose compiled copy was not built from the source beside it, and the
    modules the compiled ones were built against (the stamp names them too) that changed since: compiled
    code holds their ``Final`` constants as literals (``Kind.POD`` is ``"pod"`` there)."""
    compiled = {
        p.name[: -len(next(s for s in EXTENSION_SUFFIXES if p.name.endswith(s)))]  # the most specific
        for p in here.glob("*.so")
        if "__mypyc" not in p.name
    }
    if not compiled:
        return []
    stamp = here / STAMP
    built = dict(line.split() for line in stamp.read_text().splitlines()) if stamp.is_file() else {}
    return [name for name in sorted(compiled | set(built)) if built.get(name) != _digest(here / f"{name}.py")]


def _digest(source: Path) -> str | None:
    return hashlib.sha256(source.read_bytes()).hexdigest() if source.is_file() else None


if stale := stale_modules(Path(__file__).parent):
    raise ImportError(
        f"timelines/lifecycle: the compiled modules were not built from the sources of {', '.join(stale)}:"
        " run `make core-ext` again (or `make clean-core-ext` to run the sources as plain Python)"
    )
