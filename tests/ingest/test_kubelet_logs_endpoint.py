"""POST /ingest/v1/kubelet-logs: klog / journald text and Fluent Bit / Vector NDJSON, through the CLI's parser.

GIVEN the kubelet log fixtures (tests/fixtures/kubelet) WHEN they are posted as text or as shipper records
THEN the observations are exactly those ``manage.py ingest_kubelet_log`` stores for the same lines (same
dedupe keys, so a line shipped twice, or shipped and also loaded from a file, is stored once), and the
reply counts lines, observations, pods and skips.
"""

from __future__ import annotations

import gzip
import io
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests
from django.core.management import call_command
from opentelemetry.sdk.trace.export import SpanExportResult

from collectors.parsers.klog import split_journald_prefix
from tests.ingest.conftest import CLUSTER, Ingest, PodSpans, issue_token, recorded_spans, to_dt, worker_lane
from tests.stored import count_of, forget_all, rows_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "kubelet"
LOGS = "/ingest/v1/kubelet-logs"


def cli_ingest(cluster: str, node: str, name: str, *extra: str) -> str:
    out = io.StringIO()
    call_command(
        "ingest_kubelet_log", "--cluster", cluster, "--node", node, *extra, str(FIXTURES / name), stdout=out
    )
    return out.getvalue()


def stored(cluster: str) -> set[tuple[Any, ...]]:
    rows = rows_of(cluster)
    return {(r.dedupe_key, r.kind, r.pod_uid, r.node, r.observed_at, orjson.dumps(r.payload)) for r in rows}


def fluent_bit_records(name: str, host: str) -> list[dict[str, Any]]:
    """A journald file as Fluent Bit's systemd input ships it (json_lines): journald fields, MESSAGE."""
    records = []
    for line in (FIXTURES / name).read_text().splitlines():
        prefix, message = split_journald_prefix(line)
        assert prefix is not None
        records.append(
            {
                "date": 1635948131.402201,
                "__REALTIME_TIMESTAMP": "1635948131402201",  # 2021-11-03: the year klog lines lack
                "_HOSTNAME": host,
                "SYSLOG_IDENTIFIER": prefix.ident,
                "_SYSTEMD_UNIT": "kubelet.service"
                if prefix.ident == "kubelet"
                else f"{prefix.ident}.service",
                "MESSAGE": message,
            }
        )
    return records


def ndjson(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


# --------------------------------------------------------------------------------------------- text


def test_text_matches_the_cli_line_for_line(ingest: Ingest):
    """GIVEN the 1.27 plain klog fixture WHEN posted gzipped as text/plain THEN the same observations as
    the CLI, the reply counts them, and a second post stores nothing new."""
    cli_report = cli_ingest("from-cli", "worker-2", "v1.27-delete-during-setup.log", "--year", "2023")
    body = gzip.compress((FIXTURES / "v1.27-delete-during-setup.log").read_bytes())
    url = f"{LOGS}?cluster={CLUSTER}&node=worker-2&year=2023"

    answer = ingest.post(url, body, "text/plain; charset=utf-8", **{"Content-Encoding": "gzip"})

    assert answer.status_code == 200, answer.content
    report = answer.json()
    assert f"{report['lines_read']} lines read, {report['observations']} observations" in cli_report
    assert report | {"skipped": None, "unrecognized_messages": None} == {
        "cluster": CLUSTER,
        "nodes": ["worker-2"],
        "format": "text",
        "lines_read": 49,
        "observations": report["observations"],
        "stored": report["observations"],
        "already_stored": 0,
        "rejected": 0,
        "rejections": [],
        "pods_touched": 2,
        "skipped": None,
        "unrecognized_messages": None,
        "errors": [],  # no record refused (issue #35: each refused record is named here)
    }
    assert report["observations"] > 10
    # The most frequent texts no rule reads, as the CLI lists them (what to teach the parser next).
    top = report["unrecognized_messages"]
    assert 0 < len(top) <= 10 and [t["count"] for t in top] == sorted((t["count"] for t in top), reverse=True)
    assert sum(t["count"] for t in top) <= report["skipped"]["unrecognized_message"]
    assert all(repr(t["message"]) in cli_report for t in top)
    assert sum(report["skipped"].values()) > 0 and set(report["skipped"]) <= {
        "unrecognized_message",
        "untracked_worker_message",
        "not_klog",
        "blank",
    }
    assert {k[:-1] for k in stored(CLUSTER)} == {k[:-1] for k in stored("from-cli")}
    assert [s for s, _a, _b in worker_lane("9a7c5e3b-1d2f-4e6a-b8c0-d2e4f6a8b0c1")] == [
        "setup",
        "terminating",
        "cleanup",
    ]

    again = ingest.post(url, body, "text/plain", **{"Content-Encoding": "gzip"}).json()
    assert (again["stored"], again["already_stored"]) == (0, report["observations"])


def test_tz_moves_klog_times(ingest: Ingest):
    line = (
        b'I0814 09:15:31.200734    2981 kubelet.go:1683] "SyncPod enter" pod="default/p" '
        b"podUID=9a7c5e3b-1d2f-4e6a-b8c0-d2e4f6a8b0c1\n"
    )
    answer = ingest.post(f"{LOGS}?cluster={CLUSTER}&node=n&year=2023&tz=Europe/Paris", line, "text/plain")
    assert answer.json()["stored"] == 2  # the line, and the kubelet process (pid 2981) it shows
    (worker,) = rows_of(None, kinds=["worker"])
    assert worker.observed_at == datetime(2023, 8, 14, 7, 15, 31, 200734, tzinfo=UTC)
    (process,) = rows_of(None, kinds=["kubelet_process"])
    assert process.payload["pid"] == 2981
    assert process.payload["first_at"] == "2023-08-14T07:15:00.000000+00:00"  # the minute it logged in


def test_each_line_says_where_in_the_request_it_came_from(ingest: Ingest):
    """GIVEN a text body and an NDJSON body (synthetic lines) WHEN posted THEN each stored line names its
    position in its request (`timeline --explain` prints it): the text line, or the NDJSON record."""
    line = (
        'I0814 09:15:31.200734    2981 kubelet.go:1683] "SyncPod enter" pod="default/p" '
        "podUID=9a7c5e3b-1d2f-4e6a-b8c0-d2e4f6a8b0c1"
    )
    ingest.post(f"{LOGS}?cluster={CLUSTER}&node=n&year=2023", f"\n{line}\n".encode(), "text/plain")
    (worker,) = rows_of(None, kinds=["worker"])
    assert worker.payload["where"] == "POST /ingest/v1/kubelet-logs line 2"
    forget_all()
    body = b"\n".join(orjson.dumps({"log": text}) for text in ("not kubelet", line.replace("31.2", "32.2")))
    ingest.post(f"{LOGS}?cluster={CLUSTER}&node=n&year=2023", body, "application/x-ndjson")
    (worker,) = rows_of(None, kinds=["worker"])
    assert worker.payload["where"] == "POST /ingest/v1/kubelet-logs record 2"


# --------------------------------------------------------------------------------------------- NDJSON


def test_fluent_bit_journald_records(ingest: Ingest):
    """Fluent Bit systemd records, no ?node= (each names its _HOSTNAME), no ?year= (from the timestamp)."""
    cli_ingest("from-cli", "worker-1", "v1.22-graceful-delete.journal", "--year", "2021")
    body = ndjson(fluent_bit_records("v1.22-graceful-delete.journal", host="worker-1"))

    report = ingest.post(f"{LOGS}?cluster={CLUSTER}", body, "application/x-ndjson").json()

    assert (report["format"], report["nodes"], report["lines_read"]) == ("ndjson", ["worker-1"], 69)
    assert (report["observations"], report["stored"]) == (54, 54)  # as the CLI: "54 observations"
    assert report["skipped"]["not_kubelet"] == 1  # the containerd record
    assert {k[:-1] for k in stored(CLUSTER)} == {k[:-1] for k in stored("from-cli")}
    assert worker_lane("6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47")[:2] == [
        (
            "setup",
            datetime(2021, 11, 3, 14, 2, 11, 402201, tzinfo=UTC),
            datetime(2021, 11, 3, 14, 2, 13, 771052, tzinfo=UTC),
        ),
        (
            "running",
            datetime(2021, 11, 3, 14, 2, 13, 771052, tzinfo=UTC),
            datetime(2021, 11, 3, 14, 7, 15, 116122, tzinfo=UTC),
        ),
    ]


def test_vector_records_and_bad_lines_are_counted(ingest: Ingest):
    records: list[Any] = [
        {"message": line, "host": "ignored-when-node-given", "timestamp": "2023-08-14T09:15:31.200417Z"}
        for line in (FIXTURES / "v1.27-delete-during-setup.log").read_text().splitlines()
    ]
    body = ndjson(records) + b"not json at all\n[1, 2]\n\n" + orjson.dumps({"level": "info"}) + b"\n"
    body += orjson.dumps({"message": "x", "SYSLOG_IDENTIFIER": "containerd"}) + b"\n"

    report = ingest.post(f"{LOGS}?cluster={CLUSTER}&node=worker-2", body, "application/x-ndjson").json()

    cli = cli_ingest("from-cli", "worker-2", "v1.27-delete-during-setup.log", "--year", "2023")
    assert f"{report['observations']} observations ({report['stored']} stored" in cli
    assert report["nodes"] == ["worker-2"]
    assert report["lines_read"] == 49 + 4  # records; the blank line is not one
    assert report["skipped"]["bad_json"] == 2
    assert report["skipped"]["no_log_field"] == 1
    assert report["skipped"]["not_kubelet"] == 1


def test_kubelet_json_logging_records(ingest: Ingest):
    """``--logging-format=json`` lines are themselves NDJSON records: stored as from a file."""
    cli_ingest("from-cli", "worker-3", "v1.29-json.journal")
    lines = [
        split_journald_prefix(line)[1] for line in (FIXTURES / "v1.29-json.journal").read_text().splitlines()
    ]
    kubelet = [line for line in lines if line.startswith("{")]
    body = "\n".join(kubelet).encode() + b"\n"

    report = ingest.post(f"{LOGS}?cluster={CLUSTER}&node=worker-3", body, "application/x-ndjson").json()

    assert report["lines_read"] == len(kubelet)

    # Bare JSON records carry no pid (journald's ``kubelet[1043]`` gave the CLI one): the same pod
    # observations, but no kubelet process to tell restarts by.
    def pods(cluster: str) -> set[tuple[Any, ...]]:
        return {k[:-1] for k in stored(cluster) if k[1] != "kubelet_process"}

    def pids(cluster: str) -> set[Any]:
        return {orjson.loads(k[-1])["pid"] for k in stored(cluster) if k[1] == "kubelet_process"}

    assert pods(CLUSTER) == pods("from-cli")
    assert pids(CLUSTER) == {None} and 1187 in pids("from-cli")


def test_fluent_bit_json_array(ingest: Ingest):
    records = fluent_bit_records("v1.22-graceful-delete.journal", host="worker-1")
    report = ingest.post(f"{LOGS}?cluster={CLUSTER}", orjson.dumps(records), "application/json").json()
    assert (report["format"], report["stored"]) == ("json", 54)


# --------------------------------------------------------------------------------------------- both sources


def klog(at: datetime, message: str, pod: PodSpans, extra: str = "") -> str:
    stamp = at.strftime("%m%d %H:%M:%S.%f")
    ref = f"{pod.namespace}/{pod.name}"
    return f'I{stamp}    2981 kubelet.go:1683] "{message}" pod="{ref}" podUID={pod.uid}{extra}'


def test_spans_and_log_lines_for_the_same_phases_give_one_interval_each(ingest: Ingest):
    """GIVEN a pod whose kubelet both traced and logged its syncs (log lines a few µs after each span
    start, before each span end) WHEN both arrive THEN one sync, one terminating and one cleanup interval,
    each citing the span and the log line, timed from the span where it is the earlier (more precise) edge."""
    pod = PodSpans.at(time.time_ns() - 10_000_000_000)
    assert ingest.exporter().export(recorded_spans(pod.emit)) == SpanExportResult.SUCCESS
    us = 1_000
    logged = [
        (to_dt(pod.sync[0] + 30 * us), "SyncPod enter", ""),
        (to_dt(pod.sync[1] - 30 * us), "SyncPod exit", " isTerminal=false"),
        (to_dt(pod.terminating[0] + 30 * us), "SyncTerminatingPod enter", ""),
        (to_dt(pod.terminating[1] - 30 * us), "SyncTerminatingPod exit", ""),
        (to_dt(pod.terminated[0] + 30 * us), "SyncTerminatedPod enter", ""),
        (to_dt(pod.terminated[1] - 30 * us), "SyncTerminatedPod exit", ""),
    ]
    lines = [klog(at, message, pod, extra) for at, message, extra in logged]
    year = to_dt(pod.sync[0]).year
    answer = ingest.post(
        f"{LOGS}?cluster={CLUSTER}&node=node-a&year={year}", "\n".join(lines).encode(), "text/plain"
    )
    # Six lines, and the kubelet process (pid 2981) they show: one observation per UTC minute it logged
    # in, so two when the pod's few seconds straddle a minute (the test runs at any time of day).
    minutes = {at.replace(second=0, microsecond=0) for at, _message, _extra in logged}
    assert answer.json()["stored"] == 6 + len(minutes)

    lane = worker_lane(pod.uid)
    # The first sync is setup until it returned; then neither spans nor V4 lines say when the containers
    # had all started: setup or running, unknown.
    assert [state for state, _s, _e in lane] == ["setup", "unknown", "terminating", "cleanup"]
    assert lane[0][1] == to_dt(pod.sync[0])  # the span starts before the "enter" line
    assert lane[1][1] == to_dt(pod.sync[1])  # the span ends after the "exit" line
    assert lane[2][1] == to_dt(pod.terminating[0])
    assert lane[3][2] == to_dt(pod.terminated[1])  # the span ends after the "exit" line

    from timelines.models import Interval

    kinds_per_phase = {
        iv.state: {o.kind for o in rows_of(iv.cluster_id, ids=iv.evidence)}
        for iv in Interval.objects.filter(pod_uid=pod.uid, lane="worker")
    }
    assert kinds_per_phase == {
        "setup": {"span", "worker"},
        "unknown": {"span", "worker"},
        "terminating": {"span", "worker"},
        "cleanup": {"span", "worker"},
    }


# --------------------------------------------------------------------------------------------- bad requests

ONE_LINE = b'I0814 09:15:31.200734    2981 kubelet.go:1683] "SyncPod enter" pod="d/p" podUID=9a7c5e3b-1d2f-4e6a-b8c0-d2e4f6a8b0c1\n'

BAD = {
    # name: (query, body, content type, headers, settings, status, fragment)
    "no-cluster": ("node=n", ONE_LINE, "text/plain", {}, {}, 400, "cluster is required"),
    "other-cluster": ("cluster=staging&node=n", ONE_LINE, "text/plain", {}, {}, 403, "writes cluster 'prod', not 'staging'"),
    "text-without-node": (f"cluster={CLUSTER}", ONE_LINE, "text/plain", {}, {}, 400, "node is required"),
    "bad-year": (f"cluster={CLUSTER}&node=n&year=21", ONE_LINE, "text/plain", {}, {}, 400, "not a plausible year"),
    "bad-tz": (f"cluster={CLUSTER}&node=n&tz=Mars/Olympus", ONE_LINE, "text/plain", {}, {}, 400, "not a known time zone"),
    "form-encoded": (f"cluster={CLUSTER}&node=n", ONE_LINE, "application/x-www-form-urlencoded", {}, {}, 415, "send text/plain"),
    "binary": (f"cluster={CLUSTER}&node=n", b"\x7fELF\x00\x01", "text/plain", {}, {}, 400, "NUL byte at offset 4"),
    "bad-gzip": (f"cluster={CLUSTER}&node=n", b"nope", "text/plain", {"Content-Encoding": "gzip"}, {}, 400, "not valid gzip"),
    "oversized": (
        f"cluster={CLUSTER}&node=n", ONE_LINE * 1000, "text/plain", {},
        {"PODLIFE_INGEST_MAX_BODY_BYTES": 10_000}, 413, "at most 10000",
    ),
    "bomb": (
        f"cluster={CLUSTER}&node=n", gzip.compress(ONE_LINE * 200_000), "text/plain", {"Content-Encoding": "gzip"},
        {"PODLIFE_INGEST_MAX_DECODED_BYTES": 1 << 20}, 413, "inflates past 1048576",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_log_request_is_answered_and_stores_nothing(ingest: Ingest, settings: Any, case: str):
    query, body, content_type, headers, overrides, status, fragment = BAD[case]
    for name, value in overrides.items():
        setattr(settings, name, value)
    issue_token("staging")
    answer = ingest.post(f"{LOGS}?{query}", body, content_type, **headers)
    assert answer.status_code == status, answer.content
    assert fragment in answer.json()["error"]
    assert count_of(None) == 0


def test_log_endpoint_needs_a_token(ingest: Ingest):
    url = f"{ingest.url}{LOGS}?cluster={CLUSTER}&node=n"
    answer = requests.post(url, data=ONE_LINE, headers={"Content-Type": "text/plain"}, timeout=10)
    assert answer.status_code == 401
    assert "missing Authorization header" in answer.json()["error"]
    wrong = {"Content-Type": "text/plain", "Authorization": "Bearer pli_123456789abc_nope"}
    assert requests.post(url, data=ONE_LINE, headers=wrong, timeout=10).status_code == 401
    assert requests.get(url, headers=ingest.auth, timeout=10).status_code == 405
    assert count_of(None) == 0
