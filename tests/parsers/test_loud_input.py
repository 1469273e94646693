"""Loud offline input: `ingest_k8s_json` and `ingest_kubelet_log` end with a summary that names what was
lost and why, exit non-zero when an input object or file could not be read, and store what was readable.
Through the real store (PostgreSQL when DATABASE_URL is set, else SQLite)."""

from __future__ import annotations

import copy
import gzip
import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.stored import rows_of
from timelines import derivation
from timelines.models import Interval, Node, Pod

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run(command: str, *args: str) -> tuple[str, str, CommandError | None]:
    """The command, then the derive stage as a derive worker would run it (the command only stores, also
    when it ends in an error: what was readable is kept)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(command, *args, stdout=out, stderr=err)
    except CommandError as exc:
        derivation.drain()
        return out.getvalue(), err.getvalue(), exc
    derivation.drain()
    return out.getvalue(), err.getvalue(), None


def broken_dump(tmp_path: Path) -> Path:
    """A `kubectl cluster-info dump` (stdout form): a NodeList, then a PodList of 12 pods whose 5th item
    is broken mid-string (bytes lost from the middle of a name to the next item)."""
    template = json.loads((FIXTURES / "k8s" / "pods-list.json").read_text())["items"][0]
    pods = []
    for i in range(12):
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"web-{i}"
        pod["metadata"]["uid"] = f"6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e{i:02d}"
        pods.append(pod)
    nodes = (FIXTURES / "k8s" / "cluster-info-dump" / "nodes.json").read_text()
    podlist = json.dumps(
        {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}, "items": pods}, indent=4
    )
    cut = podlist.index('"name": "web-4"') + len('"name": "web')
    resume = podlist.index("\n        {", cut)
    path = tmp_path / "cluster-info-dump.txt"
    path.write_text(nodes.rstrip() + "\n" + podlist[:cut] + podlist[resume:] + "\n")
    return path


def test_a_damaged_dump_keeps_what_it_can_names_what_it_lost_and_fails(tmp_path: Path) -> None:
    """GIVEN a cluster-info dump whose PodList is broken mid-string (item 5 of 12)
    THEN the 11 readable pods and the node are stored, the summary says one Pod was lost and where, and
    the command fails.

    Before: the whole PodList was one JSON error, 12 pods lost, and the command exited 0."""
    out, err, failed = run("ingest_k8s_json", "--cluster", "damaged", str(broken_dump(tmp_path)))
    assert failed is not None and "1 object(s) could not be read (1 Pod)" in str(failed)
    assert Pod.objects.filter(cluster__name="damaged").count() == 11
    assert Node.objects.filter(cluster__name="damaged").exists()
    assert "lost: 1 Pod could not be read" in out
    assert "item 5 of a broken PodList could not be read" in err
    assert "lost: 1 object(s) could not be read (1 Pod); everything else read was stored" in out


def test_an_unreadable_file_fails_and_the_readable_ones_are_stored(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("this is not kubectl output {")
    missing = tmp_path / "gone.json"
    out, err, failed = run(
        "ingest_k8s_json",
        "--cluster",
        "mixed",
        str(FIXTURES / "k8s" / "pods-list.json"),
        str(junk),
        str(missing),
    )
    assert failed is not None and "2 of 3 input(s) could not be read at all" in str(failed)
    assert str(junk) in str(failed) and str(missing) in str(failed)
    assert Pod.objects.filter(cluster__name="mixed").exists()
    assert f"{missing}: expected kubectl output or a cluster-info dump folder, but it does not exist" in err


def test_a_complete_input_exits_quietly(tmp_path: Path) -> None:
    out, err, failed = run("ingest_k8s_json", "--cluster", "fine", str(FIXTURES / "k8s" / "pods-list.json"))
    assert failed is None and "lost:" not in out and err == ""


def test_a_mirror_pod_status_reset_marks_a_kubelet_restart_on_the_node() -> None:
    out, err, failed = run(
        "ingest_k8s_json", "--cluster", "cp", str(FIXTURES / "k8s" / "mirror-pod-status-reset.json")
    )
    assert failed is None, err
    (restart,) = Interval.objects.filter(cluster__name="cp", pod_uid=None, node="cp-1", lane="node:kubelet")
    assert restart.attrs["restart"] is True and restart.attrs["start_from"] == "start_line"
    worker = Interval.objects.get(cluster__name="cp", lane="worker")
    # The reset status describes the restarted kubelet's life of the pod: the worker lane begins there.
    assert worker.state == "unknown" and worker.start.isoformat() == "2024-06-07T06:51:02+00:00"


def test_kubelet_log_summary_counts_cut_lines_and_a_truncated_gzip_fails(tmp_path: Path) -> None:
    """GIVEN a kubelet log copied from `systemctl status` (long lines cut) and a gzip cut short
    THEN the summary names the cut lines and the file not read in full, what was read is stored, and
    the command fails for the truncated file."""
    cut = tmp_path / "status.txt"
    cut.write_text(
        'Mar 01 10:00:00 n1 kubelet[1043]: I0301 10:00:00.000001    1043 kubelet.go:2344] "SyncLoop ADD" source="api" pods=["cert-manager/cert>\n'
        'Mar 01 10:00:01 n1 kubelet[1043]: I0301 10:00:01.000001    1043 kubelet.go:1] "SyncPod enter" pod="default/web-0" podUID=4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f\n'
    )
    whole = (FIXTURES / "kubelet" / "v1.22-graceful-delete.journal").read_bytes()
    truncated = tmp_path / "kubelet.log.gz"
    truncated.write_bytes(gzip.compress(whole)[:-40])
    out, err, failed = run(
        "ingest_kubelet_log", "--cluster", "n", "--node", "n1", "--year", "2024", str(cut), str(truncated)
    )
    assert failed is not None and "1 of 2 file(s) could not be read" in str(failed)
    assert "lost: 1 line(s) cut off before their pod, UID or message ended" in out
    assert f"{truncated}: read stopped early" in out
    assert rows_of("n", pod_uids=["4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f"])
    assert not [o for o in rows_of("n") if o.name.startswith("cert>") or o.name == "cert"]


def test_kubelet_log_files_in_any_order_give_the_same_timelines(tmp_path: Path) -> None:
    """The newer file first: the same rows, UID-less lines attached the same way (through the store)."""
    lines = (
        (FIXTURES / "kubelet" / "v1.26-v2-eviction-shutdown.journal").read_text().splitlines(keepends=True)
    )
    half = len(lines) // 2

    def rows(cluster: str) -> list[tuple[object, ...]]:
        return sorted(
            Interval.objects.filter(cluster__name=cluster, lane="worker").values_list(
                "pod_uid", "state", "start", "end", "source"
            )
        )

    for cluster, order in (("fwd", (0, 1)), ("rev", (1, 0))):
        for part in order:
            chunk = lines[:half] if part == 0 else lines[half:]
            path = tmp_path / f"{cluster}-{part}.log"
            path.write_text("".join(chunk))
            out, err, failed = run(
                "ingest_kubelet_log", "--cluster", cluster, "--node", "worker-6", "--year", "2024", str(path)
            )
            assert failed is None, err
    assert rows("fwd") == rows("rev") and len(rows("fwd")) >= 8
    states = [r[1] for r in rows("fwd") if r[0] == "51d2e3f4-a5b6-4c7d-8e9f-a0b1c2d3e4f5"]
    assert states.count("terminating") == 1 and "cleanup" in states
