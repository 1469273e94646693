"""No import cycle anywhere in the product (issue #36): between modules of one room or of two, at module level
or inside a function. A function-level import only hides a cycle from Python's import machinery; the two
modules still need each other, so neither can be read, tested or moved alone.

The graph is grimp's (the library import-linter is built on): every ``import`` statement of every module,
those inside functions and under ``TYPE_CHECKING`` included. The one-way arrows between the rooms are
import-linter's contracts (pyproject.toml ``[tool.importlinter]``, run by ``make test``)."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("collectors", "timelines", "dashboard", "demo_cluster", "alerts", "podlife_site")


def product_graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PRODUCT, cache_dir=None)


def strongly_connected(graph: grimp.ImportGraph, modules: set[str]) -> list[set[str]]:
    """The groups of ``modules`` that import each other, directly or round a chain (Tarjan's algorithm,
    without recursion): every cycle lies inside one group of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[set[str]] = []
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt) & modules))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
    return groups


def describe(graph: grimp.ImportGraph, group: set[str]) -> str:
    """One cycle through ``group``, each import with its line: ``a:12 -> b``, ``b:40 -> a``."""
    start = min(group)
    chain = [start]
    for nxt in sorted(graph.find_modules_directly_imported_by(start) & group):
        back = graph.find_shortest_chain(importer=nxt, imported=start)
        if back is not None and set(back) <= group:
            chain = [start, *back]
            break
    steps = []
    for importer, imported in zip(chain, chain[1:], strict=False):
        lines = sorted(
            {d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)}
        )
        steps.append(f"{importer}:{','.join(map(str, lines))} -> {imported}")
    return "; ".join(steps)


def test_every_product_module_is_in_the_graph() -> None:
    """GIVEN the product's Python files WHEN grimp reads the packages THEN each is a module of its graph (a
    folder without ``__init__.py`` would be skipped, and its cycles and contracts with it)."""
    on_disk = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert on_disk - product_graph().modules == set()


def test_no_import_cycle_in_the_product() -> None:
    graph = product_graph()
    groups = strongly_connected(graph, set(graph.modules))
    found = [describe(graph, g) for g in groups]
    assert not found, "import cycles (module:line -> module): " + " | ".join(found)


def test_a_cycle_through_a_function_level_import_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a package whose ``a`` imports ``b`` at module level and whose ``c`` imports ``a`` inside a
    function, ``b`` importing ``c`` WHEN its graph is searched THEN the cycle is found and named with its
    lines; a package without it shows none."""
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic import b\n")
    (package / "b.py").write_text("import os\n\nfrom cyclic import c\n")
    (package / "c.py").write_text("def late():\n    from cyclic import a\n\n    return a\n")
    (package / "d.py").write_text("from cyclic import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclic", cache_dir=None)
    groups = strongly_connected(graph, set(graph.modules))
    assert groups == [{"cyclic.a", "cyclic.b", "cyclic.c"}]
    assert (
        describe(graph, groups[0]) == "cyclic.a:1 -> cyclic.b; cyclic.b:3 -> cyclic.c; cyclic.c:2 -> cyclic.a"
    )
    (package / "c.py").write_text("def late():\n    return None\n")
    assert strongly_connected(grimp.build_graph("cyclic", cache_dir=None), set(graph.modules)) == []
