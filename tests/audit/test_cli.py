"""``manage.py ingest_audit_log``: files, folders, stdin, gzip; the summary names what was lost; the exit
code says when an input could not be read at all; a cluster built from audit logs alone is browsable."""

from __future__ import annotations

import gzip
import io
import shutil
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from dashboard import queries, timeline_reads
from tests import stored
from tests.audit.helpers import FIXTURES, parsed
from timelines import derivation
from timelines.lifecycle import schema
from timelines.lifecycle.observation import Kind
from timelines.models import Node, PodDisruptionBudget

# The command stores from a writer thread, on its own connection: only committed rows are seen by both.
pytestmark = pytest.mark.django_db(transaction=True)

SCENARIOS = [
    "drain-refused-evictions.jsonl",
    "gc-delete.jsonl",
    "kubectl-delete-grace.jsonl",
    "kubelet-status-patches.jsonl",
    "cordon.jsonl",
]


def run(*args: str, stdin: bytes | None = None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        saved = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        try:
            call_command("ingest_audit_log", *args, stdout=out, stderr=err)
        finally:
            sys.stdin = saved
    else:
        call_command("ingest_audit_log", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    """A folder as an API server leaves it: the current log, rotated gzip logs in a subfolder, a hidden file."""
    (tmp_path / "rotated").mkdir()
    shutil.copy(FIXTURES / "drain-refused-evictions.jsonl", tmp_path / "audit.log")
    for name in SCENARIOS[1:]:
        (tmp_path / "rotated" / f"audit-{name}.gz").write_bytes(gzip.compress((FIXTURES / name).read_bytes()))
    (tmp_path / ".audit.log.swp").write_bytes(b"\x00vim swap")
    return tmp_path


def expected_keys() -> set[str]:
    return {o.dedupe_key for name in SCENARIOS for o in parsed(name).observations}


def test_a_folder_of_rotated_gzip_logs(logs: Path) -> None:
    out, err = run("--cluster", "offline-1", str(logs))
    assert stored.keys_of(None) == expected_keys()
    assert (
        f"{logs / 'audit.log'}: 30 audit events, 20 observations (20 stored, 0 already stored, 0 rejected)"
        in out
    )
    assert "skipped by reason: other_resource 5, request_received 3, read_verb 2" in out
    assert "1 request(s) received and never completed in these inputs: their outcome is unknown" in out
    assert ".swp" not in out + err
    again, _ = run("--cluster", "offline-1", str(logs))
    assert "total: 81 audit events, 0 observations stored (49 already stored, 0 rejected)" in again


def test_a_cluster_from_audit_logs_alone_is_browsable(logs: Path) -> None:
    """GIVEN only the audit logs of the drain WHEN they are ingested THEN the evicted pod has api, container
    and condition lanes, its DisruptionTarget, its deletion, the PDB blocking the drain, and the nodes and
    PDB exist as rows."""
    run("--cluster", "offline-1", str(logs))
    derivation.drain()  # the command stores; the derive stage (a worker, or this) derives
    cluster = queries.get_cluster("offline-1")
    pod = queries.resolve_pod(cluster, uid="0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3")
    timeline = schema.timeline_of(timeline_reads.pod_timeline(cluster, pod))
    assert [iv.state for iv in timeline.lanes["api"]][-3:] == ["terminating", "succeeded", "deleted"]
    container = timeline.lanes["container:app"]
    assert [(iv.state, iv.attrs.get("reason")) for iv in container] == [
        ("running", None),
        ("terminated", "Completed"),
    ]
    target = timeline.lanes["condition:DisruptionTarget"][0]
    assert (target.state, target.attrs.get("reason"), target.start.isoformat()) == (
        "true",
        "EvictionByEvictionAPI",
        "2024-06-07T06:54:20+00:00",
    )
    assert {iv.source for iv in timeline.lanes["worker"]} == {"inferred"}
    assert "pdb_blocking_drain" in {f.kind for f in timeline.findings}
    pdb = PodDisruptionBudget.objects.get(cluster=cluster, namespace="shop", name="web")
    assert [s.disruptions_allowed for s in pdb.samples.order_by("at")] == [1, 0]
    assert Node.objects.get(cluster=cluster, name="worker-2").unschedulable is True


def test_stdin_and_the_summary_of_losses() -> None:
    good = (FIXTURES / "kubectl-delete-grace.jsonl").read_bytes().splitlines()
    body = b"\n".join([good[0], b'{"auditID": "broken"', good[1], b"not json at all", *good[2:]])
    out, err = run("--cluster", "offline-2", "-", stdin=body)
    assert "-: 12 audit events, 9 observations (9 stored, 0 already stored, 0 rejected)" in out
    assert "unreadable, lost: bad_json 2" in out
    assert "bad_json: line 2:" in err and "bad_json: line 4:" in err
    assert stored.count_of(None, kinds=[Kind.AUDIT]) == 7


def test_inputs_that_cannot_be_read_fail_the_command_and_the_rest_is_kept(tmp_path: Path) -> None:
    (tmp_path / "pods.json").write_bytes(b'{"kind": "PodList", "apiVersion": "v1", "items": []}')
    (tmp_path / "core.bin").write_bytes(b"\x7fELF\x00\x00binary")
    (tmp_path / "empty-dir").mkdir()
    (tmp_path / "empty.log").write_bytes(b"")
    ok = FIXTURES / "cordon.jsonl"
    with pytest.raises(CommandError, match=r"4 of 6 input\(s\) could not be read"):
        run(
            "--cluster",
            "offline-3",
            str(tmp_path / "nope.log"),
            str(tmp_path / "pods.json"),
            str(tmp_path / "core.bin"),
            str(tmp_path / "empty-dir"),
            str(tmp_path / "empty.log"),
            str(ok),
        )
    assert stored.count_of(None, kinds=[Kind.NODE]) == 2  # cordon.jsonl was stored all the same


def test_a_truncated_gzip_keeps_what_came_before(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = gzip.compress((FIXTURES / "drain-refused-evictions.jsonl").read_bytes())
    (tmp_path / "cut.log.gz").write_bytes(data[: len(data) * 2 // 3])
    out, err = run("--cluster", "offline-4", str(tmp_path / "cut.log.gz"))
    assert "reading stopped early" in err
    kept = stored.count_of(None)
    assert 0 < kept < 20


def test_a_read_only_cluster_is_refused() -> None:
    from django.db import transaction

    from timelines import store

    with transaction.atomic():
        store.begin_import("bundle-1")
    with pytest.raises(CommandError, match="read-only"):
        run("--cluster", "bundle-1", str(FIXTURES / "cordon.jsonl"))
