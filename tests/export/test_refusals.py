"""A file that is not an intact podlife.incident/v1 bundle is refused, says why, and writes nothing."""

from __future__ import annotations

import gzip
import hashlib
import re
from datetime import timedelta

import orjson
import pytest
from django.core.management import CommandError, call_command

from dashboard.export.bundle import SECTIONS, derived_line
from dashboard.export.importer import BundleError, import_incident
from tests.export.conftest import uid_for
from tests.export.helpers import export_json, row_counts
from timelines.lifecycle.timeline import parse_time
from timelines.models import Cluster

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
    with pytest.raises(BundleError, match=r"could not be derived \(RuntimeError: disk full\)"):
        import_incident(path, name="copy")
    assert row_counts() == before


def reseal(data: dict) -> bytes:
    """The bundle with its derived digest and counts made to match what it now holds, as a buggy exporter
    or someone editing a bundle would: the derived sections then pass every digest check, and only
    re-deriving from the observations can tell."""
    derived = hashlib.sha256()
    for section in SECTIONS:
        for item in data[section]:
            derived.update(derived_line(section, item))
    data["trailer"]["derived_sha256"] = derived.hexdigest()
    for section in (*SECTIONS, "observations"):
        data["trailer"]["counts"][section] = data["metadata"]["counts"][section] = len(data[section])
    return orjson.dumps(data)


def pod_in(data: dict, name: str) -> dict:
    return next(tl for tl in data["pods"] if tl["pod"]["name"] == name)


def misdrawn(raw: bytes) -> tuple[bytes, list[str]]:
    """A bundle whose stored timelines differ from what its observations re-derive to, resealed; and the
    differences an import must name, one line per pod in UID order."""
    data = orjson.loads(raw)
    # web-a: the worker's termination drawn 2 s shorter (an interval boundary moved)
    worker = pod_in(data, "web-a")["lanes"]["worker"]
    at = next(i for i, iv in enumerate(worker) if iv["state"] == "terminating")
    terminating, cleanup = worker[at : at + 2]
    assert (terminating["state"], cleanup["state"]) == ("terminating", "cleanup")
    earlier = (parse_time(cleanup["start"]) - timedelta(seconds=2)).isoformat()
    terminating["end"] = cleanup["start"] = earlier
    # web-b: its "killed during setup" finding left out
    web_b = pod_in(data, "web-b")
    assert "killed_during_setup" in [f["kind"] for f in web_b["findings"]]
    web_b["findings"] = [f for f in web_b["findings"] if f["kind"] != "killed_during_setup"]
    # web-c: missing from the bundle's pods though its observations are there
    web_c = pod_in(data, "web-c")
    data["pods"].remove(web_c)
    # a pod with a timeline but not one observation
    ghost = orjson.loads(orjson.dumps(pod_in(data, "web-e")))
    ghost["pod"].update(uid="00000000-0000-4000-8000-0000000000ff", name="ghost")
    data["pods"].append(ghost)
    expected = [
        f"pod shop/web-a ({uid_for('web-a')}): re-derived timeline differs from the bundle's (lanes worker)",
        f"pod shop/web-b ({uid_for('web-b')}): re-derived timeline differs from the bundle's (findings)",
        f"pod shop/web-c ({uid_for('web-c')}): re-derived, but not in the bundle",
        "pod shop/ghost (00000000-0000-4000-8000-0000000000ff): in the bundle, but nothing re-derived "
        "(no observations)",
    ]
    return reseal(data), expected


def test_intact_bundle_reseals_to_itself(bundle):
    """The resealing helper changes nothing in an intact bundle: the differences below are the tampering."""
    data = orjson.loads(bundle)
    assert orjson.loads(reseal(orjson.loads(bundle)))["trailer"] == data["trailer"]


def test_timelines_that_differ_from_their_observations_are_named_and_strict_refuses(bundle, tmp_path):
    """GIVEN a bundle whose stored timelines were changed and its digests recomputed WHEN it is imported
    THEN re-deriving from its observations names every pod that differs and how; a strict import refuses
    it and writes nothing; a lenient one imports it and records the differences."""
    raw, expected = misdrawn(bundle)
    path = tmp_path / "misdrawn.json"
    path.write_bytes(raw)
    before = row_counts()

    with pytest.raises(BundleError) as refused:
        import_incident(path, name="copy", strict=True)
    assert str(refused.value) == (
        f"4 re-derived pod timeline(s) differ from the bundle (strict): {expected[0]}"
    )
    with pytest.raises(CommandError, match=re.escape(expected[0])):
        call_command("import_incident", str(path), "--as", "copy", "--strict")
    assert row_counts() == before

    result = import_incident(path, name="lenient")
    assert result.differences == expected
    cluster = Cluster.objects.get(name="lenient")
    assert cluster.read_only and " | ".join(expected) in cluster.description
    assert "4 differ from the bundle" in cluster.description


def _break_start(data: dict) -> None:
    data["pods"][1]["lanes"]["worker"][0]["start"] = "yesterday"


def _drop_pod(data: dict) -> None:
    del data["pods"][0]["pod"]


def _bad_source(data: dict) -> None:
    data["pods"][0]["lanes"]["worker"][0]["source"] = "guessed"


def _bad_severity(data: dict) -> None:
    data["pods"][0]["findings"].append(
        {"kind": "x", "severity": "fatal", "message": "", "start": "2024-06-07T06:54:40+00:00", "end": None}
    )


def _nameless_node(data: dict) -> None:
    del data["nodes"][0]["name"]


def _bad_sample_time(data: dict) -> None:
    data["pdbs"][0]["samples"][1]["at"] = "soon"


def _bad_pdb_interval(data: dict) -> None:
    next(iter(data["pdbs"][0]["lanes"].values()))[0]["source"] = "guessed"


def _bad_finding_end(data: dict) -> None:
    data["findings"][0]["end"] = "later"


MALFORMED = {
    "nameless_node": (
        _nameless_node,
        r"nodes\[0\] \(.+\) is not a bundle's nodes item: Object missing required field `name`$",
    ),
    "bad_sample_time": (
        _bad_sample_time,
        r"pdbs\[0\] \(.+\) is not a bundle's pdbs item: at: time 'soon' is not ISO 8601.* - at `\$.samples\[1\]`",
    ),
    "bad_pdb_interval": (
        _bad_pdb_interval,
        r"pdbs\[0\] \(.+\) is not a bundle's pdbs item: source is 'guessed'; .* - at `\$.lanes\[...\]\[0\]`",
    ),
    "bad_finding_end": (
        _bad_finding_end,
        r"findings\[0\] is not a bundle's findings item: end: time 'later' is not ISO 8601; expected e\.g\. [\dT:.+-]+$",
    ),
    "bad_time": (
        _break_start,
        r"pods\[1\] \(.+\) is not a podlife.timeline document: start: time 'yesterday' "
        r"is not ISO 8601.* - at `\$.lanes\['worker'\]\[0\]`",
    ),
    "no_pod": (
        _drop_pod,
        r"pods\[0\] is not a podlife.timeline document: Object missing required field `pod`",
    ),
    "bad_source": (
        _bad_source,
        r"pods\[0\] \(.+\) .*source is 'guessed'; expected one of \['inferred', 'kubelet', 'observed'\] "
        r"- at `\$.lanes\['worker'\]\[0\]`",
    ),
    "bad_severity": (
        _bad_severity,
        r"pods\[0\] \(.+\) .*severity is 'fatal'; expected one of \['info', 'warning', 'critical'\] - at `\$.findings\[\d+\]`",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_timeline_with_good_digests_is_refused_naming_the_field(bundle, tmp_path, case):
    """GIVEN a bundle whose pod timeline breaks podlife.timeline/v2 (a time that is not one, a missing
    stable key, a value outside its set), or whose node, PDB (its samples, its lane's intervals) or finding
    does not fit its Struct, and whose digests were recomputed to match WHEN it is imported
    THEN it is refused before anything is written, naming the item and the field's path."""
    break_it, reason = MALFORMED[case]
    data = orjson.loads(bundle)
    break_it(data)
    path = tmp_path / "malformed.json"
    path.write_bytes(reseal(data))
    before = row_counts()

    with pytest.raises(BundleError, match=reason):
        import_incident(path, name="copy")
    assert row_counts() == before
