"""Scope resolution, the JSON / CSV bundles, and the export_incident command."""

from __future__ import annotations

import csv
import gzip
import io
import re
import zipfile
import zlib
from datetime import timedelta

import orjson
import pytest
from django.core.management import CommandError, call_command

from dashboard import queries, serialize, timeline_reads
from dashboard.export import Scope, ScopeError, export_incident, iter_export, reads, resolve
from dashboard.export.bundle import crc32_combine
from tests.export.conftest import HOSTILE, SINCE, UNTIL, uid_for
from tests.export.helpers import export_json
from tests.lifecycle.factories import T0
from tests.orm_timeline import orm_timeline
from timelines import observation_rows
from timelines.lifecycle import schema
from timelines.models import Pod

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]


def names(cluster, scope, since=SINCE, until=UNTIL, **kw):
    return [p.name for p in resolve(cluster, scope, since, until, **kw).pods]


def test_scopes_resolve_to_the_pods_alive_in_the_window(source_cluster):
    shop = ["web-a", "web-b", "web-c", "web-d", "web-e", HOSTILE]
    assert sorted(names(source_cluster, Scope.one("node", "node-a"))) == sorted(shop)
    assert names(source_cluster, Scope.one("node", "node-b")) == ["api-x"]
    assert sorted(names(source_cluster, Scope.one("namespace", "shop"))) == sorted(shop)
    # Deployment → ReplicaSet web-7d9 → pods (owner references)
    assert sorted(names(source_cluster, Scope.one("workload", "Deployment/shop/web"))) == sorted(shop)
    assert sorted(names(source_cluster, Scope.one("pdb", "shop/web-pdb"))) == sorted(shop)
    assert names(source_cluster, Scope.pods([uid_for("web-b")])) == ["web-b"]
    # Every pod was created at T0: a window that ends before it holds none, one after their deletion
    # holds the ones never deleted (web-a and web-b were deleted within seconds).
    assert names(source_cluster, Scope.one("node", "node-a"), T0 - timedelta(hours=3), T0) == []
    later = names(
        source_cluster, Scope.one("node", "node-a"), T0 + timedelta(hours=1), T0 + timedelta(hours=2)
    )
    assert "web-a" not in later and "web-b" not in later and "web-d" in later
    # readable namespaces narrow everything, and drop node lanes (they belong to no namespace)
    narrowed = resolve(source_cluster, Scope.one("node", "node-b"), SINCE, UNTIL, namespaces={"other"})
    assert [p.name for p in narrowed.pods] == ["api-x"] and narrowed.nodes == []
    # a node no readable pod ran on is as unknown as a node never seen (docs/security.md)
    with pytest.raises(queries.NotFound, match="no node 'node-b'"):
        resolve(source_cluster, Scope.one("node", "node-b"), SINCE, UNTIL, namespaces={"shop"})


@pytest.mark.parametrize(
    "scope, message",
    [
        (lambda: Scope.one("workload", "Deployment/web"), "KIND/NAMESPACE/NAME"),
        (lambda: Scope.one("pdb", "web-pdb"), "NAMESPACE/NAME"),
        (lambda: Scope.one("planet", "x"), "not one of"),
    ],
)
def test_malformed_scopes_name_what_was_expected(scope, message):
    with pytest.raises(ScopeError, match=message):
        scope()


def test_unknown_things_are_named(source_cluster):
    with pytest.raises(queries.NotFound, match="no pod with UID 'nope'"):
        resolve(source_cluster, Scope.pods(["nope"]), SINCE, UNTIL)
    with pytest.raises(queries.NotFound, match="no Deployment shop/api"):
        resolve(source_cluster, Scope.one("workload", "Deployment/shop/api"), SINCE, UNTIL)
    with pytest.raises(ScopeError, match="is not before"):
        export_incident(source_cluster, Scope.one("node", "node-a"), UNTIL, SINCE, "json", io.BytesIO())


def test_bulk_reader_gives_exactly_the_timeline_the_orm_reads(source_cluster, monkeypatch):
    """GIVEN every pod of a cluster
    WHEN they are read in bulk two pods a query (chunks straddled), and each alone (the pod page's read)
    THEN every document is the one the ORM reading of the same rows gives (times printed by Python,
    JSON decoded by Django, evidence translated one by one), byte for byte."""
    pods = list(Pod.objects.filter(cluster=source_cluster).order_by("uid"))
    assert len(pods) > 2
    monkeypatch.setattr(timeline_reads, "CHUNK", 2)
    bulk = dict(timeline_reads.pod_timelines(source_cluster, pods))
    for pod in pods:
        expected = orjson.dumps(
            schema.to_builtins(schema.write_timeline(orm_timeline(source_cluster, pod), "src"))
        )
        assert orjson.dumps(serialize.to_builtins(bulk[pod])) == expected  # the same keys in the same order
        assert (
            orjson.dumps(serialize.to_builtins(timeline_reads.pod_timeline(source_cluster, pod))) == expected
        )


def test_json_bundle_carries_timelines_evidence_and_a_digest(source_cluster):
    bundle = orjson.loads(export_json(source_cluster))
    meta = bundle["metadata"]
    assert bundle["schema"] == "podlife.incident/v1"
    assert meta["cluster"]["name"] == "src" and meta["scope"] == {
        "kind": "node",
        "values": ["node-a"],
        "label": "node node-a",
    }
    assert meta["window"] == {
        "since": "2024-06-07T05:54:40.000000+00:00",
        "until": "2024-06-07T08:54:40.000000+00:00",
    }
    assert meta["podlife_version"] and meta["generated_at"].endswith("+00:00")
    assert all(p["schema"] == "podlife.timeline/v2" for p in bundle["pods"])
    # every evidence reference of a pod is the dedupe key of an observation in the bundle
    keys = {o["dedupe_key"] for o in bundle["observations"]}
    refs = {e for p in bundle["pods"] for ivs in p["lanes"].values() for iv in ivs for e in iv["evidence"]}
    refs |= {e for p in bundle["pods"] for m in p["markers"] + p["findings"] for e in m["evidence"]}
    assert refs and refs <= keys
    # node, PDB and workload sections; the node's snapshot from before the window came along
    (node,) = bundle["nodes"]
    assert [iv["state"] for iv in node["lanes"]["node:cordoned"]] == ["cordoned"]
    assert [s["disruptions_allowed"] for s in bundle["pdbs"][0]["samples"]] == [1, 0, 1]
    assert {w["kind"] for w in bundle["workloads"]} == {"Deployment", "ReplicaSet"}
    assert {"pdb_blocking_drain", "stuck_terminating", "killed_during_setup"} <= {
        f["kind"] for f in bundle["findings"]
    }
    # Both digests as docs/incident-bundle.md ("Digests") defines them, computed here with the standard
    # library's json, not the exporter's own functions: the observations' contract fields as compact JSON
    # with sorted keys, a newline after each; the derived sections as "SECTION<TAB>compact JSON<LF>".
    import hashlib
    import json

    def compact(value: object, *, sort: bool) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort).encode()

    contract = (
        "kind",
        "source",
        "observed_at",
        "dedupe_key",
        "pod_uid",
        "node",
        "namespace",
        "name",
        "payload",
    )
    observed = hashlib.sha256()
    for o in bundle["observations"]:
        observed.update(compact({k: o[k] for k in contract}, sort=True) + b"\n")
    assert meta["digest"]["observations_sha256"] == observed.hexdigest()
    derived = hashlib.sha256()
    for section in ("pods", "nodes", "pdbs", "workloads", "findings"):
        for item in bundle[section]:
            derived.update(section.encode() + b"\t" + compact(item, sort=False) + b"\n")
    assert bundle["trailer"]["derived_sha256"] == derived.hexdigest()
    assert (
        bundle["trailer"]["counts"]["observations"]
        == len(bundle["observations"])
        == meta["counts"]["observations"]
    )


def test_evidence_is_cited_from_the_observations_the_bundle_read(source_cluster, monkeypatch):
    """GIVEN a node's bundle WHEN it is exported THEN its evidence (pods, node and PDB lanes, findings) is
    cited from the keys of the observations it has read, none of which is looked up again in the bodies;
    AND the bundle is the one written when every key is looked up (nothing held)."""
    asked: list[int] = []
    real = observation_rows.keys_by_id

    def keys_by_id(cluster, ids):
        ids = list(ids)
        asked.extend(ids)
        return real(cluster, ids)

    monkeypatch.setattr(observation_rows, "keys_by_id", keys_by_id)
    held = orjson.loads(export_json(source_cluster))
    carried = {o["id"] for o in held["observations"]}
    assert carried and not carried & set(asked), sorted(carried & set(asked))
    monkeypatch.setattr(reads.Carried, "KEYS_HELD", 0)
    asked.clear()
    looked_up = orjson.loads(export_json(source_cluster))
    assert set(asked) & carried  # the same evidence, every key from the bodies
    for bundle in (held, looked_up):
        del bundle["metadata"]["generated_at"]
    assert held == looked_up


def test_json_is_streamed_item_by_item(source_cluster):
    resolved = resolve(source_cluster, Scope.one("node", "node-a"), SINCE, UNTIL)
    chunks = list(iter_export(resolved, "json"))
    assert len(chunks) > 20  # a chunk per item, not one document
    assert max(len(c) for c in chunks[:-3]) < 64 * 1024
    progress = []
    list(iter_export(resolved, "json", progress=lambda *a: progress.append(a)))
    assert progress[-1] == ("done", 13, 13)


def test_csv_zip_has_one_file_per_kind_with_headers(source_cluster):
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.one("node", "node-a"), SINCE, UNTIL, "csv", buf)
    bundle = orjson.loads(export_json(source_cluster))
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        assert sorted(zf.namelist()) == sorted(
            ["intervals.csv", "markers.csv", "findings.csv", "observations.csv", "metadata.json"]
        )
        tables = {
            n: list(csv.DictReader(io.StringIO(zf.read(n).decode("utf-8-sig"))))
            for n in zf.namelist()
            if n.endswith(".csv")
        }
        meta = orjson.loads(zf.read("metadata.json"))
    pod_intervals = sum(len(ivs) for p in bundle["pods"] for ivs in p["lanes"].values())
    node_intervals = sum(len(ivs) for n in bundle["nodes"] for ivs in n["lanes"].values())
    pdb_intervals = sum(len(ivs) for n in bundle["pdbs"] for ivs in n["lanes"].values())
    assert len(tables["intervals.csv"]) == pod_intervals + node_intervals + pdb_intervals
    assert len(tables["markers.csv"]) == sum(len(p["markers"]) for p in bundle["pods"])
    assert len(tables["findings.csv"]) == len(bundle["findings"])
    assert len(tables["observations.csv"]) == len(bundle["observations"])
    assert meta["digest"] == bundle["metadata"]["digest"]
    row = next(r for r in tables["intervals.csv"] if r["pod_name"] == "web-a" and r["lane"] == "worker")
    assert row["start_utc"].endswith("+00:00") and len(row["start_utc"]) == 32  # microseconds, always
    assert float(row["duration_s"]) > 0
    obs = tables["observations.csv"][0]
    assert orjson.loads(obs["payload"]) == bundle["observations"][0]["payload"]


def test_csv_cells_cannot_become_formulas():
    from dashboard.export.csvzip import cell

    assert cell('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
    assert cell("-1") == "'-1" and cell("@SUM(A1)") == "'@SUM(A1)"
    assert cell("web-1") == "web-1" and cell(3) == 3 and cell(None) == ""


def test_command_writes_json_to_stdout_and_gzip_to_a_file(source_cluster, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    args = [
        "--cluster",
        "src",
        "--node",
        "node-a",
        "--since",
        SINCE.isoformat(),
        "--until",
        UNTIL.isoformat(),
    ]
    call_command("export_incident", *args, stdout=out, stderr=err)
    assert orjson.loads(out.getvalue())["metadata"]["counts"]["pods"] == 6
    assert err.getvalue() == ""  # no progress bar: stderr is not a terminal
    path = tmp_path / "incident.json.gz"
    call_command("export_incident", *args, "-o", str(path), "--progress", stdout=out, stderr=err)
    assert orjson.loads(gzip.decompress(path.read_bytes()))["schema"] == "podlife.incident/v1"
    assert "100%" in err.getvalue() and f"wrote {path}: 6 pods" in err.getvalue()
    assert not (tmp_path / "incident.json.gz.part").exists()
    call_command("export_incident", *args, "--format", "html", "-o", str(tmp_path / "i.html"), stderr=err)
    assert (tmp_path / "i.html").read_bytes().startswith(b"<!DOCTYPE html>")
    # --tz: the zone the HTML file opens in (data stay UTC); a name that is no zone is refused, naming it
    call_command(
        "export_incident", *args, "--format", "html", "--tz", "Europe/Paris", "-o", str(tmp_path / "p.html")
    )
    assert b'"tz":"Europe/Paris"' in (tmp_path / "p.html").read_bytes()
    with pytest.raises(CommandError, match="'Mars/Olympus' is not a time zone"):
        call_command(
            "export_incident",
            *args,
            "--format",
            "html",
            "--tz",
            "Mars/Olympus",
            "-o",
            str(tmp_path / "m.html"),
        )
    assert not (tmp_path / "m.html").exists()


def test_command_csv_output_is_a_zip_and_pod_takes_namespace_slash_name(source_cluster, tmp_path):
    """GIVEN the scenario cluster WHEN a pod is named NAMESPACE/NAME (as `timeline --pod`) and exported as
    CSV THEN the zip holds that pod, the same as by UID; a ``.csv`` output name is refused naming ``.zip``,
    and an unknown NAMESPACE/NAME names itself."""
    import zipfile

    from tests.export.conftest import uid_for

    base = ["--cluster", "src", "--since", SINCE.isoformat(), "--until", UNTIL.isoformat()]
    err = io.StringIO()
    with pytest.raises(
        CommandError, match=r"name the output \.zip, e\.g\. 'incident\.zip', not 'incident\.csv'"
    ):
        call_command(
            "export_incident",
            *base,
            "--pod",
            "shop/web-c",
            "--format",
            "csv",
            "-o",
            str(tmp_path / "incident.csv"),
        )
    assert not list(tmp_path.iterdir())  # nothing written
    by_name, by_uid = tmp_path / "by-name.zip", tmp_path / "by-uid.zip"
    call_command(
        "export_incident", *base, "--pod", "shop/web-c", "--format", "csv", "-o", str(by_name), stderr=err
    )
    call_command(
        "export_incident", *base, "--pod", uid_for("web-c"), "--format", "csv", "-o", str(by_uid), stderr=err
    )
    with zipfile.ZipFile(by_name) as a, zipfile.ZipFile(by_uid) as b:
        assert a.namelist() == b.namelist() and "intervals.csv" in a.namelist()
        intervals = a.read("intervals.csv").decode()
        assert uid_for("web-c") in intervals and uid_for("web-a") not in intervals
        assert intervals == b.read("intervals.csv").decode()
    assert f"wrote {by_name}: 1 pods" in err.getvalue()
    with pytest.raises(CommandError, match="no pod 'shop/nope' in cluster 'src'"):
        call_command("export_incident", *base, "--pod", "shop/nope", "-o", str(tmp_path / "x.json"))


def test_command_names_bad_input(source_cluster):
    base = ["--cluster", "src", "--since", SINCE.isoformat(), "--until", UNTIL.isoformat()]
    with pytest.raises(CommandError, match="no cluster named 'nope'"):
        call_command("export_incident", *base[:1], "nope", *base[2:], "--node", "n")
    with pytest.raises(CommandError, match="KIND/NAMESPACE/NAME"):
        call_command("export_incident", *base, "--workload", "web")
    with pytest.raises(CommandError, match="give -o PATH"):
        call_command("export_incident", *base, "--node", "node-a", "--format", "csv")
    with pytest.raises(CommandError, match="not ISO 8601"):
        call_command(
            "export_incident",
            "--cluster",
            "src",
            "--node",
            "node-a",
            "--since",
            "yesterday",
            "--until",
            UNTIL.isoformat(),
        )


def _without_generated_at(raw: bytes) -> bytes:
    return re.sub(rb'"generated_at":"[^"]*"', b'"generated_at":""', raw, count=1)


@pytest.mark.parametrize(
    "scope, namespaces",
    [
        (Scope.one("node", "node-a"), None),
        (Scope.one("namespace", "shop"), None),
        (Scope.one("node", "node-b"), {"other"}),
    ],
    ids=["node", "namespace", "node-lanes-left-out"],
)
def test_gzip_bundle_is_the_json_bundle_in_one_gzip_member(source_cluster, scope, namespaces):
    """GIVEN a scope WHEN it is exported as json.gz (observations compressed by a second thread, spliced)
    THEN it is one gzip member that decompresses to exactly the uncompressed export."""
    plain = export_json(source_cluster, scope, namespaces=namespaces)
    gz = export_json(source_cluster, scope, namespaces=namespaces, gzip_output=True)
    inflater = zlib.decompressobj(wbits=31)
    raw = inflater.decompress(gz)
    assert inflater.eof and inflater.unused_data == b""  # what the importer requires
    assert _without_generated_at(raw) == _without_generated_at(plain)
    assert gzip.decompress(gz) == raw  # the CRC and length in the gzip trailer are right


def test_crc32_combine_is_the_crc_of_the_concatenation():
    for a, b in [
        (b"", b"x"),
        (b"abc", b""),
        (b"metadata" * 999, bytes(range(256)) * 300),
        (b"x", b"y" * 70_001),
    ]:
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_a_failure_while_compressing_stops_the_export(source_cluster, monkeypatch):
    """GIVEN a spool that cannot be written WHEN a json.gz export runs THEN the error reaches the caller
    (the compressing thread neither hides it nor hangs)."""

    class FullDisk(io.BytesIO):
        def write(self, data):  # type: ignore[override]
            raise OSError(28, "No space left on device")

    monkeypatch.setattr("dashboard.export.bundle.tempfile.SpooledTemporaryFile", lambda **kw: FullDisk())
    with pytest.raises(OSError, match="No space left"):
        export_json(source_cluster, gzip_output=True)
