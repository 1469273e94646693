"""The lifecycle core and the kubelet parsers stay pure: no Django, Celery, Channels or kubernetes client."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE_PACKAGES = ("timelines/lifecycle", "collectors/parsers")
FORBIDDEN = ("django", "celery", "channels", "channels_redis", "kubernetes")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module an import statement in ``path`` names, with its line (dynamic imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def python_files() -> list[Path]:
    files: list[Path] = []
    for package in PURE_PACKAGES:
        files.extend(sorted((ROOT / package).rglob("*.py")))
    return files


def test_pure_packages_exist() -> None:
    assert (ROOT / "timelines/lifecycle/derive.py").is_file()
    assert python_files()


@pytest.mark.parametrize("path", python_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_framework_imports(path: Path) -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for line, module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN
    ]
    assert not bad, "pure code must not import frameworks: " + "; ".join(bad)


def test_the_guard_catches_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nfrom django.db import models\nimportlib.import_module('celery')\n")
    assert [m for _, m in imported_modules(sample)] == ["os", "django.db", "celery"]
