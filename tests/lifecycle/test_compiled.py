"""``make core-ext`` compiles the core's hot modules in place; a copy built from other sources never imports."""

from __future__ import annotations

import hashlib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from timelines.lifecycle._compiled import STAMP, stale_modules


def _module(here: Path, name: str, source: str) -> None:
    (here / f"{name}.py").write_text(source)
    (here / f"{name}{EXTENSION_SUFFIXES[0]}").write_bytes(b"compiled")
    (here / f"{name}__mypyc{EXTENSION_SUFFIXES[0]}").write_bytes(b"its shared part")


def _stamp(here: Path, *names: str) -> None:
    """The stamp ``make core-ext`` writes: each module's source digest, one line each."""
    (here / STAMP).write_text(
        "".join(f"{n} {hashlib.sha256((here / f'{n}.py').read_bytes()).hexdigest()}\n" for n in names)
    )


def test_a_compiled_module_is_stale_once_its_source_changes(tmp_path: Path) -> None:
    """GIVEN two compiled modules and the stamp of the sources they were built from WHEN one source is
    edited THEN that module (only) is stale; without any compiled module nothing is."""
    assert stale_modules(tmp_path) == []
    _module(tmp_path, "facts", "A = 1\n")
    _module(tmp_path, "worker", "B = 2\n")
    assert stale_modules(tmp_path) == ["facts", "worker"]  # no stamp: not built by make core-ext
    _stamp(tmp_path, "facts", "worker")
    assert stale_modules(tmp_path) == []
    (tmp_path / "facts.py").write_text("A = 3\n")
    assert stale_modules(tmp_path) == ["facts"]


def test_the_package_imports_no_stale_compiled_module() -> None:
    """Whatever this checkout holds (compiled or not), what the tests import is its sources."""
    assert stale_modules(Path(__file__).resolve().parents[2] / "timelines" / "lifecycle") == []


def test_compiled_modules_are_stale_once_a_module_they_were_compiled_against_changes(tmp_path: Path) -> None:
    """GIVEN a compiled module and the stamp of its source and of ``observation.py``, which it was compiled
    against (compiled code holds its ``Final`` constants as literals) but which is not compiled itself WHEN
    ``observation.py`` is edited THEN the package refuses the compiled copies; with no compiled copy left,
    nothing is refused."""
    _module(tmp_path, "facts", "from observation import Kind\n")
    (tmp_path / "observation.py").write_text('class Kind:\n    POD = "pod"\n')
    _stamp(tmp_path, "facts", "observation")
    assert stale_modules(tmp_path) == []
    (tmp_path / "observation.py").write_text('class Kind:\n    POD = "pods"\n')
    assert stale_modules(tmp_path) == ["observation"]
    for compiled in tmp_path.glob("*.so"):
        compiled.unlink()
    assert stale_modules(tmp_path) == []
