"""Every reader of stored observations reads their payloads through ``timelines/observation_rows.py``
(issue #37: the compact form of an observation changes how a payload is stored; one decode function, and
no SQL that looks into the payload column, keep that change to the store and that module).

A static check of the product's code: no ORM lookup into the payload (``payload__…``), no ``payload`` column
named to the ORM's value reads, and no SQL text that reads the payload column, outside the store (which
writes it) and ``observation_rows`` (which decodes it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("timelines", "collectors", "dashboard", "alerts", "podlife_site")
ALLOWED = {"timelines/store.py", "timelines/observation_rows.py"}
# Pure code never touches the database; migrations are history.
SKIPPED = ("timelines/lifecycle/", "collectors/parsers/", "/migrations/")
ORM_READS = {"values", "values_list", "only", "defer", "order_by", "annotate", "F", "Cast", "json_text"}
# SQL operators on the payload (anywhere), or the payload column read in a statement.
SQL_OPERATOR = re.compile(r"\bpayload\s*(->|#>|@>|\?|::\s*(text|jsonb?)\b)", re.IGNORECASE)
SQL_READ = re.compile(r"(\.payload\b|\bpayload\s+AS\b)", re.IGNORECASE)
SQL_WORDS = re.compile(r"\b(SELECT|WHERE|FROM|CAST)\b")


def offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += [
                f"{node.lineno}: lookup {kw.arg}"
                for kw in node.keywords
                if (kw.arg or "").startswith("payload__")
            ]
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in ORM_READS:
                found += [
                    f"{node.lineno}: {name}({arg.value!r})"
                    for arg in node.args
                    if isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and (arg.value == "payload" or arg.value.startswith("payload__"))
                ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if SQL_OPERATOR.search(text) or (SQL_READ.search(text) and SQL_WORDS.search(text)):
                found.append(f"{node.lineno}: SQL {text[:60]!r}")
    return found


def test_no_reader_looks_into_the_payload_column_but_the_one_decode() -> None:
    checked, bad = 0, {}
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in ALLOWED or any(part in f"/{rel}" for part in SKIPPED):
                continue
            checked += 1
            if found := offences(path):
                bad[rel] = found
    assert checked > 50
    assert not bad, bad


def test_the_check_finds_what_it_forbids() -> None:
    """The check itself: each form it forbids, written as a reader would, is found."""
    sample = ROOT / "tests" / "_one_decode_sample.py"
    sample.write_text(
        "rows.filter(payload__kind='Deployment')\n"
        "rows.values_list('node', 'payload')\n"
        "rows.values_list('payload__uid')\n"
        'sql = "SELECT o.payload::text FROM timelines_observation o"\n'
        "sql2 = \"AND o.payload->>'resource' = 'pods' \"\n"
        'sql3 = "SELECT CAST(t.payload AS TEXT) FROM timelines_observation t"\n',
        encoding="utf-8",
    )
    try:
        assert len(offences(sample)) == 6, offences(sample)
    finally:
        sample.unlink()
