"""The docs a newcomer reads stay true to the tree (issue #36, deliverable 5).

docs/architecture.md gives every module of the product packages its job in a line, and names no module
or folder that does not exist; docs/performance.md is one short table of the latest figures (the lab
notebook is docs/performance-history.md); every relative link in README.md and docs/*.md resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PRODUCT_PACKAGES = ("timelines", "collectors", "dashboard", "demo_cluster", "alerts", "podlife_site")
# A path written in backticks, as the docs name files and folders: `timelines/store.py`, `dashboard/web/`.
NAMED_PATH = re.compile(
    r"`((?:timelines|collectors|dashboard|demo_cluster|alerts|podlife_site|tests|tools|bench|templates|static|deploy)"
    r"/[\w./-]*)`"
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def product_modules() -> set[str]:
    """Every Python module of the product packages, as a path from the repository root; a package's
    ``__init__.py`` is named by its folder instead (see ``product_packages``)."""
    found = set()
    for package in PRODUCT_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).parts
            if "migrations" in parts or "__pycache__" in parts or path.name == "__init__.py":
                continue
            found.add("/".join(parts))
    return found


def product_packages() -> set[str]:
    """The subpackages whose ``__init__.py`` holds code or a docstring, as ``folder/``."""
    found = set()
    for package in PRODUCT_PACKAGES:
        for init in (ROOT / package).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            if "migrations" in parts or not init.read_text(encoding="utf-8").strip():
                continue
            found.add("/".join(parts) + "/")
    return found


def test_architecture_names_every_product_module_and_package() -> None:
    """GIVEN the product packages on disk WHEN docs/architecture.md is read THEN each module (and each
    subpackage with an ``__init__.py`` of its own) is named there by its path."""
    named = set(NAMED_PATH.findall((DOCS / "architecture.md").read_text(encoding="utf-8")))
    missing = sorted((product_modules() | product_packages()) - named)
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_architecture_names_nothing_that_does_not_exist() -> None:
    """GIVEN docs/architecture.md WHEN every path it names in backticks is looked up THEN each exists: a
    module removed or renamed is removed or renamed there too."""
    named = set(NAMED_PATH.findall((DOCS / "architecture.md").read_text(encoding="utf-8")))
    absent = sorted(p for p in named if not (ROOT / p).exists())
    assert not absent, f"docs/architecture.md names paths that do not exist: {absent}"


def table_blocks(lines: list[str]) -> list[list[str]]:
    """Runs of consecutive Markdown table lines."""
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in lines + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    return blocks


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def test_performance_is_one_short_table_of_latest_figures() -> None:
    """GIVEN docs/performance.md WHEN it is read THEN it has at most 150 lines and one table whose header is
    benchmark, goal, latest figure, date, load, and whose every row has those five cells, each short
    enough to read at a glance (a cell is not a paragraph) and dated."""
    lines = (DOCS / "performance.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"docs/performance.md has {len(lines)} lines (at most 150)"
    blocks = table_blocks(lines)
    assert len(blocks) == 1, f"docs/performance.md has {len(blocks)} tables (one)"
    header, rule, *rows = blocks[0]
    assert cells(header) == ["benchmark", "goal", "latest figure", "date", "load"]
    assert set(rule.replace("|", "").strip()) <= {"-", " ", ":"}
    assert len(rows) >= 10
    for row in rows:
        row_cells = cells(row)
        assert len(row_cells) == 5, row
        assert all(len(c) <= 130 for c in row_cells), f"a cell longer than a line: {row}"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row_cells[3]), f"not a date: {row}"
        assert row_cells[0].startswith("`bench/") or "demo_cluster" in row_cells[0], row


def anchors(markdown: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped, spaces to '-')."""
    found = set()
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_relative_links_of_readme_and_docs_resolve() -> None:
    """GIVEN README.md and docs/*.md WHEN each relative link is followed THEN its file exists and, where it
    names an anchor in a Markdown file, that file has such a heading."""
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken
