"""The demo cluster's modules form no import cycle (issue #14 d5): ``kubelet.py`` and ``workloads.py``
declare what they need of their cluster (``KubeletHost``, ``WorkloadHost``) instead of importing
``cluster.py``, which imports them. Every import counts, those under ``TYPE_CHECKING`` too."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[2] / "demo_cluster"
PACKAGE = "demo_cluster"


def imports_of(path: Path) -> set[str]:
    """The modules of ``demo_cluster`` that ``path`` imports, anywhere in it (TYPE_CHECKING blocks and
    function bodies included), as module names relative to the package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                base = node.module or ""
            elif node.level == 0 and node.module and node.module.startswith(PACKAGE + "."):
                base = node.module[len(PACKAGE) + 1 :]
            elif node.level == 0 and node.module == PACKAGE:
                base = ""
            else:
                continue
            if base:
                found.add(base.split(".")[0])
            else:  # from . import workloads, writes
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name[len(PACKAGE) + 1 :].split(".")[0])
    modules = {p.stem for p in SIM.glob("*.py")}
    return (found & modules) - {path.stem}


def graph() -> dict[str, set[str]]:
    return {p.stem: imports_of(p) for p in SIM.glob("*.py") if p.stem not in ("__init__", "__main__")}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle found by a depth-first walk (each reported once, from its smallest member)."""
    found: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(edges.get(node, ())):
            if nxt == path[0]:
                if path[0] == min(path):
                    found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                walk(nxt, [*path, nxt])

    for start in sorted(edges):
        walk(start, [start])
    return found


def test_the_walk_finds_a_cycle_when_there_is_one() -> None:
    assert cycles({"cluster": {"kubelet"}, "kubelet": {"cluster"}}) == [["cluster", "kubelet", "cluster"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_demo_cluster() -> None:
    edges = graph()
    assert {"kubelet", "workloads"} <= edges["cluster"]  # the edges the cycle went through are there
    assert "cluster" not in edges["kubelet"] and "cluster" not in edges["workloads"]
    assert cycles(edges) == []


@pytest.mark.parametrize("module", ["kubelet", "workloads", "cluster", "audit", "scenarios", "server"])
def test_each_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import {PACKAGE}.{module}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=SIM.parent,
    )
    assert done.returncode == 0, done.stderr


def test_the_cluster_is_what_its_modules_ask_for() -> None:
    """SimCluster satisfies both declared interfaces (mypy checks it statically; this at run time)."""
    from demo_cluster import SimCluster
    from demo_cluster.kubelet import KubeletHost
    from demo_cluster.workloads import WorkloadHost

    cluster = SimCluster(seed=1)
    for protocol in (KubeletHost, WorkloadHost):
        members = {
            name
            for klass in protocol.__mro__
            if klass.__name__.endswith("Host")
            for name in [*klass.__dict__.get("__annotations__", {}), *klass.__dict__]
            if not name.startswith("__") and name not in ("_abc_impl", "_is_protocol", "_is_runtime_protocol")
        }
        assert members and all(hasattr(cluster, name) for name in members), protocol
