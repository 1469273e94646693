"""ingest_kubelet_log → store → derive stage → timeline, for kubelet logs of 1.22 to today.

GIVEN the realistic logs in tests/fixtures/kubelet (1.22 journald lowercase, 1.27 plain klog, 1.29 JSON,
a node upgraded from 1.26 to 1.29 across a graceful shutdown) WHEN they are ingested with the CLI THEN
`timeline --format json` shows each pod's worker phases with microsecond times and the findings a person
expects.
"""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command

from tests.stored import count_of, rows_of
from timelines.models import Pod
from timelines.observation_rows import field_is

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures" / "kubelet"


def ingest(node: str, name: str | Path, *extra: str) -> str:
    """Ingest a fixture (a name under tests/fixtures/kubelet, or any path) into cluster "lab", then derive."""
    out = io.StringIO()
    call_command(
        "ingest_kubelet_log", "--cluster", "lab", "--node", node, *extra, str(FIXTURES / name), stdout=out
    )
    call_command("derive", stdout=io.StringIO())  # what a worker does with what the command stored
    return out.getvalue()


def timeline(*which: str) -> dict:
    out = io.StringIO()
    call_command("timeline", "--cluster", "lab", *which, "--format", "json", stdout=out)
    return orjson.loads(out.getvalue())


def worker(tl: dict) -> list[tuple[str, str, str | None, str]]:
    return [(i["state"], i["start"], i["end"], i["source"]) for i in tl["lanes"]["worker"]]


def test_v122_graceful_delete_and_completed_job():
    report = ingest("worker-1", "v1.22-graceful-delete.journal", "--year", "2021")
    assert "69 lines read, 54 observations (54 stored" in report
    assert "not_kubelet 1" in report

    web = timeline("--pod", "default/web-7d9f8b6c4-x2k9p")
    assert web["schema"] == "podlife.timeline/v2"
    assert web["pod"] == web["pod"] | {"uid": "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47", "node": "worker-1"}
    # Setup ends where PLEG saw the last container of the start-up start (the sandbox, then nginx): a
    # bound inferred from kubelet lines, so both sides of it are "kubelet", not "observed".
    assert worker(web) == [
        ("setup", "2021-11-03T14:02:11.402201+00:00", "2021-11-03T14:02:13.771052+00:00", "kubelet"),
        ("running", "2021-11-03T14:02:13.771052+00:00", "2021-11-03T14:07:15.116122+00:00", "kubelet"),
        ("terminating", "2021-11-03T14:07:15.116122+00:00", "2021-11-03T14:07:17.519941+00:00", "observed"),
        ("cleanup", "2021-11-03T14:07:17.519941+00:00", "2021-11-03T14:07:18.734050+00:00", "observed"),
    ]
    assert {m["reason"] for m in web["markers"]} >= {"GracePeriod", "KillingContainer"}
    assert web["findings"] == []

    job = timeline("--pod", "default/report-27912345-7xk2m")
    assert [w[0] for w in worker(job)] == ["setup", "running", "terminating", "cleanup"]
    assert worker(job)[2][1] == "2021-11-03T14:06:02.210702+00:00"


def test_v127_delete_during_setup_is_flagged():
    ingest("worker-2", "v1.27-delete-during-setup.log", "--year", "2023")
    slow = timeline("--pod", "default/slow-start-0")
    assert worker(slow) == [
        ("setup", "2023-08-14T09:15:31.200502+00:00", "2023-08-14T09:15:41.507790+00:00", "observed"),
        ("terminating", "2023-08-14T09:15:41.507790+00:00", "2023-08-14T09:15:43.691044+00:00", "observed"),
        ("cleanup", "2023-08-14T09:15:43.691044+00:00", "2023-08-14T09:15:44.903741+00:00", "observed"),
    ]
    [finding] = slow["findings"]
    assert finding["kind"] == "killed_during_setup"
    assert finding["start"] == "2023-08-14T09:15:41.507790+00:00"
    assert "default/slow-start-0" in finding["message"] and "10.3s into setup" in finding["message"]


def test_v129_json_logs_eviction():
    ingest("worker-3", "v1.29-json.journal")
    hog = timeline("--pod", "batch/hog-6f7c9d8b5-r8v2n")
    assert worker(hog) == [
        ("terminating", "2024-06-07T06:54:47.001537+00:00", "2024-06-07T06:54:48.140950+00:00", "observed"),
        ("cleanup", "2024-06-07T06:54:48.140950+00:00", "2024-06-07T06:54:49.378066+00:00", "observed"),
    ]
    assert "Evicting" in {m["reason"] for m in hog["markers"]}


def test_mixed_versions_across_a_node_shutdown_and_new_year():
    ingest("cp-1", "mixed-upgrade-shutdown.journal", "--year", "2023")
    old_etcd = timeline("--uid", "d1c4757bcb230bf06ab7e866b62132a1")
    assert old_etcd["pod"]["static"] is True
    # The excerpt begins two seconds before the static pod's sync: whether it was still setting up or
    # long running is not in the log. Its termination is cut off by the reboot: it lasted at least until
    # its last line, how it ended is unknown (the kubelet that ran it is gone).
    assert worker(old_etcd) == [
        ("unknown", "2023-12-31T23:59:58.120087+00:00", "2024-01-01T00:00:03.503231+00:00", "observed"),
        ("terminating", "2024-01-01T00:00:03.503231+00:00", "2024-01-01T00:00:03.503655+00:00", "observed"),
    ]
    unknown, terminating = old_etcd["lanes"]["worker"]
    assert unknown["attrs"]["between"] == ["setup", "running"]
    assert (
        terminating["attrs"]["end_unknown"] is True and terminating["attrs"]["end_from"] == "kubelet_restart"
    )
    assert [f["kind"] for f in old_etcd["findings"]] == ["node_shutdown"]

    cache = timeline("--pod", "default/cache-0")  # the newest incarnation after the reboot
    assert cache["pod"]["uid"] == "a4c6e8f0-2b4d-4f6a-8c0e-2a4c6e8f0b2d"
    old_cache = timeline("--uid", "0d3b5f7a-9c1e-4a2b-8d4f-6e8a0c2e4f6a")
    assert "node_shutdown" in [f["kind"] for f in old_cache["findings"]]


def test_same_file_twice_stores_nothing_new():
    ingest("worker-1", "v1.22-graceful-delete.journal", "--year", "2021")
    count = count_of(None)
    again = ingest("worker-1", "v1.22-graceful-delete.journal", "--year", "2021")
    assert "(0 stored, 54 already stored" in again
    assert count_of(None) == count


def test_text_format_is_a_readable_table():
    ingest("worker-1", "v1.22-graceful-delete.journal", "--year", "2021")
    out = io.StringIO()
    call_command("timeline", "--cluster", "lab", "--pod", "default/web-7d9f8b6c4-x2k9p", stdout=out)
    text = out.getvalue()
    assert "LANE" in text and "worker  terminating  2021-11-03T14:07:15.116122+00:00" in text


def test_binary_and_missing_files_fail_with_one_line_each(tmp_path):
    binary = tmp_path / "core.dump"
    binary.write_bytes(b"\x7fELF\x00\x00\x01")
    good = tmp_path / "kubelet.log"
    good.write_text(
        'I0607 06:54:47.001537    1043 kubelet.go:1761] "SyncPod enter" pod="ns/p" podUID="6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"\n'
        "garbage \x01 that is not a klog line\n"
    )
    err = io.StringIO()
    with pytest.raises(CommandError, match="2 of 3 file"):
        call_command(
            "ingest_kubelet_log",
            "--cluster",
            "lab",
            "--node",
            "n",
            str(binary),
            str(tmp_path / "nope.log"),
            str(good),
            stdout=io.StringIO(),
            stderr=err,
        )
    lines = err.getvalue().strip().splitlines()
    assert lines[0].startswith(f"error: {binary}: binary data (NUL byte at offset 4)")
    assert lines[1].startswith(f"error: {tmp_path / 'nope.log'}: cannot read (No such file or directory)")
    # The good file was still read: its line, and its kubelet process (pid 1043, seen in that minute).
    assert sorted((o.kind, o.pod_uid) for o in rows_of(None)) == [
        ("kubelet_process", None),
        ("worker", "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"),
    ]


def test_unknown_zone_and_pod_are_clear_errors():
    with pytest.raises(CommandError, match="--tz 'Mars/Olympus' is not a known time zone"):
        call_command("ingest_kubelet_log", "--cluster", "lab", "--node", "n", "--tz", "Mars/Olympus", "-")
    ingest("worker-1", "v1.22-graceful-delete.journal", "--year", "2021")
    with pytest.raises(CommandError, match="no pod 'default/ghost' in cluster 'lab'"):
        timeline("--pod", "default/ghost")
    with pytest.raises(CommandError, match="no cluster named 'nope'"):
        call_command("timeline", "--cluster", "nope", "--uid", "x")


def test_explain_names_the_line_that_proves_each_worker_bound():
    """GIVEN the real kueue excerpt (--v=3, no V4 line) WHEN `timeline --explain` THEN setup's start is
    proved by the SyncLoop ADD line and cleanup's end by "The pod termination is finished as
    SyncTerminatedPod completes its execution", each cited as its stored observation; and the ingest
    summary lists the most frequent unrecognised texts."""
    real = Path(__file__).parent / "fixtures" / "real" / "kubelet" / "kueue-4669-kind-1.31-v3.journal"
    out = ingest("kind-worker", real, "--year", "2025")
    assert (
        "unrecognised messages (top 10 of 13 texts): 'Generating pod status' 5; 'Patch status for pod' 5"
        in out
    )
    out = io.StringIO()
    call_command(
        "timeline",
        "--cluster",
        "lab",
        "--uid",
        "8bb7de3e-72f0-4102-adbd-53897040775e",
        "--explain",
        stdout=out,
    )
    lines = out.getvalue().splitlines()
    (add,) = rows_of(None, field_is(("transition",), "syncloop_add"))
    (finished,) = rows_of(None, field_is(("transition",), "termination_finished"))
    assert any(
        line.strip().startswith("start  2025-03-18T10:21:19.149698+00:00  syncloop_add: proved by")
        and f"#{add.id} worker" in line
        and "SyncLoop ADD" in line
        for line in lines
    )
    assert any(
        line.strip().startswith("end    2025-03-18T10:22:16.784665+00:00  termination_finished: proved by")
        and f"#{finished.id} worker" in line
        for line in lines
    )


def test_explain_names_the_file_and_line_that_proves_each_bound(tmp_path):
    """GIVEN the real kueue excerpt ingested from its file WHEN `timeline --explain` THEN each bound names
    first the file and 1-based line that proves it: setup's start the pod's SyncLoop ADD line, cleanup's
    end its "The pod termination is finished" line (found here by reading the file, as a person would)."""
    name = "kueue-4669-kind-1.31-v3.journal"
    real = Path(__file__).parent / "fixtures" / "real" / "kubelet" / name
    uid = "8bb7de3e-72f0-4102-adbd-53897040775e"
    ingest("kind-worker", real, "--year", "2025")
    pod = Pod.objects.get(uid=uid)
    text = real.read_text().splitlines()
    add = next(
        n
        for n, line in enumerate(text, 1)
        if '"SyncLoop ADD"' in line and f"{pod.namespace}/{pod.name}" in line
    )
    done = next(
        n for n, line in enumerate(text, 1) if "The pod termination is finished" in line and uid in line
    )
    out = io.StringIO()
    call_command("timeline", "--cluster", "lab", "--uid", uid, "--explain", stdout=out)
    lines = out.getvalue().splitlines()
    assert any(
        line.strip().startswith("start") and f"syncloop_add: proved by {real}:{add} #" in line
        for line in lines
    )
    assert any(
        line.strip().startswith("end") and f"termination_finished: proved by {real}:{done} #" in line
        for line in lines
    )
    # The same lines from a second file stay the same observations: the first stored keeps its place.
    copy = tmp_path / "again.journal"
    copy.write_bytes(real.read_bytes())
    before = count_of(None)
    ingest("kind-worker", copy, "--year", "2025")
    assert count_of(None) == before
    wheres = [o.payload.get("where") for o in rows_of(None)]
    assert not any(isinstance(where, str) and where.startswith(str(copy)) for where in wheres)
    assert f"{real}:{add}" in wheres


def test_a_pod_only_uid_less_lines_name_has_a_timeline_on_request(tmp_path):
    """GIVEN the real 132001 eviction excerpt (no UID anywhere) THEN `timeline --pod` draws that pod from
    the lines naming it: evicted at 16:05:54.802914."""
    real = Path(__file__).parent / "fixtures" / "real" / "kubelet" / "k8s-132001-eviction-2025.journal"
    ingest("192-168-250-5", real, "--year", "2025")
    tl = timeline("--pod", "sre/infras-logstash-d484d57fc-rkx95")
    assert ("Evicted", "2025-05-28T16:05:54.802914+00:00") in {(m["reason"], m["at"]) for m in tl["markers"]}
    # It is stored (the dashboard and `find_pods` see it), under a synthetic identity.
    (pod,) = Pod.objects.filter(namespace="sre", name="infras-logstash-d484d57fc-rkx95")
    assert pod.uid.startswith("kubelet-") and tl["pod"]["uid"] == pod.uid
    # A line naming the pod's UID arrives (SYNTHETIC, in the 1.28 format): that incarnation takes the
    # lines over, and the kubelet-only one is gone.
    uid = "5d0c8a52-0a36-4a0e-9a57-1f0b8f4c2a11"
    extra = tmp_path / "synthetic-uid-line.journal"
    extra.write_text(
        "May 28 16:05:52 192-168-250-5 kubelet[2269385]: I0528 16:05:52.100000 2269385 pod_workers.go:866] "
        '"Pod is being evicted by the kubelet, begin teardown" pod="sre/infras-logstash-d484d57fc-rkx95" '
        f'podUID="{uid}" updateType="kill"\n',
        encoding="utf-8",
    )
    ingest("192-168-250-5", extra, "--year", "2025")
    (pod,) = Pod.objects.filter(namespace="sre", name="infras-logstash-d484d57fc-rkx95")
    assert pod.uid == uid
