"""Helpers of the deployment tests: the checker of .ci/deploy_check.py, imported from its file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_deploy_check() -> ModuleType:
    name = "podlife_deploy_check"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / ".ci" / "deploy_check.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def deploy_check() -> ModuleType:
    return load_deploy_check()


@pytest.fixture(scope="session")
def rendered(deploy_check: ModuleType) -> dict[str, list[dict]]:
    """Every rendering of deploy/ (overlays alone and with each component), by name."""
    return {r.name: r.objects for r in deploy_check.renderings()}


def find(objects: list[dict], kind: str, name: str) -> dict:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"].startswith(name):
            return obj
    raise AssertionError(f"no {kind} {name} among {[(o['kind'], o['metadata']['name']) for o in objects]}")
