"""A bundle written before podlife.timeline/v2 (its pods' timelines are v1) still imports.

GIVEN a bundle whose metadata says ``timeline_schema: podlife.timeline/v1`` and whose pods are v1
documents (setup running until termination, no ``running`` phase, no ``kubelet`` grade) WHEN it is
imported, even with ``strict`` THEN its observations are stored and re-derived as v2, the same timelines
a v2 bundle of the same observations gives, and the import says the v1 timelines were not compared.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest

from dashboard.export import Scope
from dashboard.export.bundle import SECTIONS, derived_line
from dashboard.export.importer import import_incident
from tests.export.helpers import export_json, normalized_pods
from timelines.models import Cluster

pytestmark = [pytest.mark.django_db(transaction=True)]


def as_v1(bundle: dict[str, Any]) -> dict[str, Any]:
    """The bundle as podlife wrote it with timeline/v1: setup and running one ``setup`` interval."""
    for tl in bundle["pods"]:
        tl["schema"] = "podlife.timeline/v1"
        merged: list[dict[str, Any]] = []
        for iv in tl["lanes"].get("worker", []):
            iv = {**iv, "source": "inferred" if iv["source"] == "kubelet" else iv["source"]}
            if iv["state"] in ("running", "unknown") and merged and merged[-1]["state"] == "setup":
                merged[-1]["end"] = iv["end"]
                continue
            merged.append({**iv, "state": "setup" if iv["state"] in ("running", "unknown") else iv["state"]})
        tl["lanes"]["worker"] = merged
    bundle["metadata"]["timeline_schema"] = "podlife.timeline/v1"
    derived = hashlib.sha256()
    for section in SECTIONS:
        for item in bundle[section]:
            derived.update(derived_line(section, item))
    bundle["trailer"]["derived_sha256"] = derived.hexdigest()
    return bundle


def test_a_v1_bundle_imports_and_is_re_derived_as_v2(source_cluster, tmp_path):
    scope = Scope.one("node", "node-a")
    v2 = orjson.loads(export_json(source_cluster, scope))
    assert v2["metadata"]["timeline_schema"] == "podlife.timeline/v2"
    v1 = as_v1(orjson.loads(orjson.dumps(v2)))
    assert any(iv["state"] == "running" for tl in v2["pods"] for iv in tl["lanes"].get("worker", []))
    assert not any(iv["state"] == "running" for tl in v1["pods"] for iv in tl["lanes"].get("worker", []))
    path = tmp_path / "old.json"
    path.write_bytes(orjson.dumps(v1))

    result = import_incident(path, name="old-copy", strict=True)

    assert result.differences == []
    assert result.notes[0] == (
        "the bundle's pod timelines are podlife.timeline/v1: re-derived as podlife.timeline/v2, not compared"
    )
    copy = Cluster.objects.get(name="old-copy")
    assert "the bundle's are podlife.timeline/v1, not compared" in copy.description
    again = orjson.loads(export_json(copy, scope))
    assert again["metadata"]["timeline_schema"] == "podlife.timeline/v2"
    assert normalized_pods(again) == normalized_pods(v2)
