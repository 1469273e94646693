"""Compile the lifecycle core's hot modules with mypyc, in place: ``make core-ext`` (``make clean`` removes them).

The derive stage spends about half of a key's CPU in ``timelines/lifecycle``; compiled, that part takes
about 40 % less (docs/performance-history.md, Derivation, seventh round). The sources are unchanged and stay the
truth: Python imports a module's compiled copy (``NAME.cpython-*.so`` beside ``NAME.py``) when there is one,
and ``timelines/lifecycle/__init__.py`` refuses a copy built from other sources than those beside it (the
stamp this writes), so an edit is never silently shadowed. Without a compiled copy everything runs as
plain Python, with the same results.

Not compiled: ``observation`` (the contract the collectors build by the million, as plain Python;
compiled code reads its ``Kind`` / ``Source`` / ``Transition`` constants as literals all the same, since
they are ``Final``), ``record``, ``schema`` and ``__init__`` (nothing hot). ``timeline`` is compiled since
its constant classes' attributes are ``Final`` (mypyc takes a class-body name only as a constant).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "timelines" / "lifecycle"
MODULES = (
    "timeline",
    "derive",
    "facts",
    "findings",
    "worker",
    "resolve",
    "audit_evidence",
    "cluster_objects",
)
# Not compiled, but compiled against: the compiled modules hold their ``Final`` constants as literals and
# their records' decorator decides which classes are native, so a change to them makes the copies stale.
INPUTS = ("observation", "record")
STAMP = CORE / "_compiled.sha256"  # one line a module: NAME SHA-256 of the source it was compiled from
BUILD = ROOT / "var" / "core-ext"  # mypyc's C sources, the objects and the built copies: nothing imports them


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    from mypyc.build import mypycify
    from setuptools import setup

    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")  # mypy's django plugin
    sources = [CORE / f"{name}.py" for name in MODULES]
    # Plain Python while it builds: mypy's Django plugin imports the package, which refuses stale copies.
    STAMP.unlink(missing_ok=True)
    for old in CORE.glob("*.so"):
        old.unlink()
    # What is compiled and what it is compiled against, read first.
    stamp = "".join(f"{p.stem} {source_digest(p)}\n" for p in [*sources, *(CORE / f"{n}.py" for n in INPUTS)])
    setup(
        name="podlife-core-ext",
        packages=[],
        ext_modules=mypycify(
            [str(p.relative_to(ROOT)) for p in sources],
            separate=True,
            target_dir=str(BUILD),
        ),
        script_args=[
            "build_ext",
            "--inplace",
            "--build-temp",
            str(BUILD / "temp"),
            "--build-lib",
            str(BUILD / "lib"),
        ],
    )
    STAMP.write_text(stamp)


if __name__ == "__main__":
    main()
