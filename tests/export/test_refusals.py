"""A file that is not an intact podlife.incident/v1 bundle is refused, says why, and writes nothing."""

from __future__ import annotations

import gzip

import orjson
import pytest
from django.core.management import CommandError, call_command

from tests.export.helpers import export_json, row_counts
from timelines.export.importer import BundleError, import_incident

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]


@pytest.fixture
def bundle(source_cluster) -> bytes:
    return export_json(source_cluster)


def tamper_observation(raw: bytes) -> bytes:
    data = orjson.loads(raw)
    data["observations"][3]["payload"]["phase"] = "Succeeded"
    return orjson.dumps(data)


def tamper_timeline(raw: bytes) -> bytes:
    data = orjson.loads(raw)
    data["pods"][0]["lanes"]["worker"][0]["state"] = "cleanup"
    return orjson.dumps(data)


def other_version(raw: bytes) -> bytes:
    return raw.replace(b'"podlife.incident/v1"', b'"podlife.incident/v2"', 1)


CASES = {
    "truncated": (lambda raw: raw[: len(raw) // 2], "truncated"),
    "truncated_gzip": (lambda raw: gzip.compress(raw)[:-200], "truncated"),
    "tampered_observation": (tamper_observation, "digest mismatch"),
    "tampered_timeline": (tamper_timeline, "digest mismatch"),
    "other_version": (other_version, "podlife.incident/v2 bundle; this podlife reads podlife.incident/v1"),
    "foreign_json": (
        lambda raw: orjson.dumps({"schema": "something/else", "items": []}),
        "not a podlife incident",
    ),
    "json_without_schema": (lambda raw: b'{"kind": "List", "items": []}', 'no "schema" key'),
    "json_list": (lambda raw: b"[1, 2, 3]", "top level is a list"),
    "not_json": (lambda raw: b"apiVersion: v1\nkind: Pod\n", "not JSON"),
    "empty": (lambda raw: b"", "empty"),
    "no_trailer": (
        lambda raw: orjson.dumps({k: v for k, v in orjson.loads(raw).items() if k != "trailer"}),
        "no complete trailer",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_bundle_is_refused_with_a_reason_and_nothing_is_written(bundle, tmp_path, case):
    damage, reason = CASES[case]
    path = tmp_path / ("bad.json.gz" if case.endswith("gzip") else "bad.json")
    path.write_bytes(damage(bundle))
    before = row_counts()

    with pytest.raises(BundleError, match=reason):
        import_incident(path, name="copy")
    with pytest.raises(CommandError, match=reason):
        call_command("import_incident", str(path), "--as", "copy")

    assert row_counts() == before


def test_oversized_file_is_refused(bundle, tmp_path, settings):
    settings.PODLIFE_IMPORT_MAX_BYTES = len(bundle) - 1
    path = tmp_path / "big.json"
    path.write_bytes(bundle)
    before = row_counts()
    with pytest.raises(BundleError, match="larger than the import limit"):
        import_incident(path, name="copy")
    gz = tmp_path / "big.json.gz"  # small on disk, too big once decompressed (a gzip bomb is refused too)
    gz.write_bytes(gzip.compress(bundle))
    with pytest.raises(BundleError, match="once decompressed"):
        import_incident(gz, name="copy")
    assert row_counts() == before


def test_existing_cluster_name_is_refused(bundle, tmp_path):
    path = tmp_path / "incident.json"
    path.write_bytes(bundle)
    before = row_counts()
    with pytest.raises(BundleError, match="already exists; import under another name with --as"):
        import_incident(path)  # the bundle's own name, "src", is taken here
    assert row_counts() == before


def test_failure_during_the_import_rolls_everything_back(bundle, tmp_path, monkeypatch):
    """GIVEN a valid bundle WHEN re-derivation fails half-way THEN no cluster, observation or row remains."""
    path = tmp_path / "incident.json"
    path.write_bytes(bundle)
    before = row_counts()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("timelines.derivation.derive_node", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        import_incident(path, name="copy")
    assert row_counts() == before


def test_strict_import_refuses_when_a_timeline_would_differ(bundle, tmp_path, monkeypatch):
    path = tmp_path / "incident.json"
    path.write_bytes(bundle)
    before = row_counts()
    monkeypatch.setattr(
        "timelines.export.importer.compare_pods", lambda *a: ["pod shop/web-a (x): lanes worker differ"]
    )
    with pytest.raises(BundleError, match="strict"):
        import_incident(path, name="copy", strict=True)
    assert row_counts() == before
