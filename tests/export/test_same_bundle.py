"""A bundle's bytes are what the podlife of ``data/node-a.*.golden`` wrote for the same observations.

A regression guard, not a statement of any rule: the golden file holds whatever the code wrote when it was
made. The rules a bundle follows are stated elsewhere, from the specification: docs/incident-bundle.md by
tests/export/test_export.py and test_round_trip.py (sections, times, evidence, the digest), the lanes by
tests/lifecycle/test_golden.py (hand-written expectations). This file catches an unintended change of bytes.

The golden file was written by the export as it was before its items were built through the Structs of
``dashboard/serialize.py`` (then dicts shaped by hand in ``dashboard/export/reads.py``): every derived
item (pods, nodes, PDBs, workloads, findings) as its compact JSON in document order, and the observations'
digest. Evidence ids (database ids, different in every test database) are written as the dedupe keys they
stand for; nothing else is changed, so a renamed or reordered key, another time spelling or lane order, or
another order of items fails here. One file per database: PostgreSQL's jsonb keeps an object's keys in its
own order (shorter keys first), SQLite in the order they were written, and ``attrs`` are written as stored.

When a change to the derivation rightly changes what is derived, write the file again and review its diff:
``PODLIFE_WRITE_GOLDEN=1 pytest tests/export/test_same_bundle.py`` (with ``DATABASE_URL`` set, and again
with it empty for SQLite).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import orjson
import pytest
from django.db import connection

from dashboard.export import Scope
from dashboard.export.bundle import SECTIONS
from tests.export.helpers import export_json
from timelines.models import Cluster

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]

DATA = Path(__file__).parent / "data"


def bundle_lines(raw: bytes) -> list[str]:
    """The digest and every derived item of a JSON bundle, one line each (evidence cites dedupe keys, so
    the lines do not depend on the database's ids)."""
    bundle = orjson.loads(raw)
    lines = [f"observations_sha256\t{bundle['metadata']['digest']['observations_sha256']}"]
    for section in SECTIONS:
        lines += [f"{section}\t{orjson.dumps(item).decode()}" for item in bundle[section]]
    return lines


def test_the_bundle_is_the_one_written_before_for_the_same_observations(source_cluster: Cluster) -> None:
    """GIVEN the export tests' source cluster WHEN node-a's day is exported as JSON
    THEN its derived sections and its observation digest are exactly those of the golden file."""
    lines = bundle_lines(export_json(source_cluster, Scope.one("node", "node-a")))
    assert len(lines) > 20 and {line.split("\t")[0] for line in lines} >= {*SECTIONS, "observations_sha256"}
    golden = DATA / f"node-a.{connection.vendor}.golden"
    if os.environ.get("PODLIFE_WRITE_GOLDEN"):
        golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = golden.read_text(encoding="utf-8").splitlines()
    diff = list(difflib.unified_diff(expected, lines, "golden", "now", lineterm="", n=0))
    assert not diff, "\n".join(diff[:40])
