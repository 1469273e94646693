"""What the parsers read from real kubelet lines and Kubernetes objects, each read back (issue #38: a fresh
mutation sample of ``collectors/parsers/``, seed fresh-1206q, found these fields read and never checked).

Real lines from tests/fixtures/real/kubelet (its README and SOURCES.md name where each was copied from);
the hand-written inputs say so.
"""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from collectors.parsers.k8s_objects import normalize_workload
from collectors.parsers.klog import parse_json_record
from collectors.parsers.kubelet_log import parse_kubelet_log
from timelines.lifecycle.observation import Kind

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"


def real(name: str) -> list[str]:
    return (REAL / name).read_text(encoding="utf-8").splitlines()


def test_a_kubelet_process_is_one_per_node_and_start() -> None:
    """GIVEN the same real kubelet lines read as two nodes' logs, and as one node's log a year apart (a pid
    is reused after a reboot) WHEN their kubelet processes are read THEN each is its own process, with its
    own key: a fleet's kubelets share pids, and a node reuses them."""
    lines = real("kueue-4669-kind-1.31-v3.journal")
    keys = {
        (node, year): {p.dedupe_key for p in parse_kubelet_log(lines, node=node, year=year, tz=UTC).processes}
        for node, year in (("kind-worker", 2025), ("kind-worker2", 2025), ("kind-worker", 2026))
    }
    assert all(len(k) == 2 for k in keys.values())  # one a minute the process logged in: two minutes
    assert len(set().union(*keys.values())) == 6


def test_lines_that_are_not_klog_are_counted_apart_from_a_cut_header() -> None:
    """A line that begins as a klog header does (a severity letter, then the month and day) and does not
    parse is a klog line cut short (``malformed``: the reader knows the excerpt lost a line); any other
    text is not a klog line at all (``not_klog``: a shell prompt, a word that begins with I, W, E or F, a
    header with another letter). Hand-written lines."""
    lines = {
        "I0318 10:21:2": "malformed",  # cut inside its header
        "W0318": "malformed",  # cut after the date
        "Istanbul is not a kubelet line": "not_klog",
        "Ia318 10:21:22.622680     246 status_manager.go:937] a letter where the month is": "not_klog",
        "X0318 10:21:22.622680     246 status_manager.go:937] no severity X": "not_klog",
        "i0318 10:21:22.622680     246 status_manager.go:937] severities are capitals": "not_klog",
    }
    for line, counted in lines.items():
        skipped = parse_kubelet_log([line], node="n", year=2025, tz=UTC).skipped
        assert dict(skipped) == {counted: 1}, line


def test_journal_lines_of_other_units_are_each_counted_not_kubelet() -> None:
    """GIVEN a journal excerpt with systemd's lines about another unit among the kubelet's (hand-written in
    journalctl's short format) WHEN it is parsed THEN each such line counts once as ``not_kubelet``, and
    none is taken for the kubelet unit starting or stopping (a unit whose name merely contains the word
    was: "Started nodekubeletcheck.timer" read as a kubelet start)."""
    lines = [
        "Mar 18 10:21:20 kind-worker systemd[1]: Started containerd.service - containerd container runtime.",
        "Mar 18 10:21:21 kind-worker systemd[1]: Stopping ssh.service - OpenBSD Secure Shell server...",
        # systemd about a unit whose name only contains the word: not the kubelet's unit either
        "Mar 18 10:21:21 kind-worker systemd[1]: Started nodekubeletcheck.timer - Daily node check.",
        *real("kueue-4669-kind-1.31-v3.journal")[:3],
    ]
    result = parse_kubelet_log(lines, node="kind-worker", year=2025, tz=UTC)
    assert result.skipped["not_kubelet"] == 3


def test_a_denied_admission_says_why_the_kubelet_gave() -> None:
    """GIVEN the real 1.32 "Pod admission denied" line (reason="UnexpectedAdmissionError" message="...")
    WHEN it is parsed THEN the rejection's detail is the reason, then the message, as the kubelet gave
    them: the reason is the one word a reader searches for."""
    result = parse_kubelet_log(
        real("cka-1.32-static-scheduler-admission-denied.journal"), node="master01", year=2025, tz=UTC
    )
    details = [
        o.payload["detail"]
        for o in result.observations
        if o.kind == Kind.KUBELET_MARKER and o.payload["message"] == "Pod admission denied"
    ]
    assert len(details) == 1 and details[0].startswith(
        "UnexpectedAdmissionError: Unexpected error while attempting to recover from admission failure"
    )


def test_each_pod_an_eviction_ranking_lists_keeps_the_lines_message() -> None:
    """GIVEN the real 2025 "Eviction manager: pods ranked for eviction" line listing three pods WHEN it is
    parsed THEN each pod's marker carries the line's message and the pod's place in the list."""
    result = parse_kubelet_log(
        real("k8s-132001-eviction-2025.journal")[:1], node="192-168-250-5", year=2025, tz=UTC
    )
    ranked = [o for o in result.observations if o.kind == Kind.KUBELET_MARKER]
    assert [o.payload["message"] for o in ranked] == ["Eviction manager: pods ranked for eviction"] * 3
    assert [o.payload["pod_ref"] for o in ranked] == [
        "sre/infras-logstash-d484d57fc-rkx95",
        "sre/admin-api-server-847868d7b-7sqdm",
        "scrm/portal-h5-7c46694b8f-bkz95",
    ]


def test_a_lines_time_is_utc_whatever_zone_the_node_logged_in() -> None:
    """GIVEN the real kueue journal read as logged in Asia/Tokyo WHEN it is parsed THEN every observation's
    time is the same instant, in UTC: times are stored in one zone and shown in the user's."""
    result = parse_kubelet_log(
        real("kueue-4669-kind-1.31-v3.journal"), node="kind-worker", year=2025, tz=ZoneInfo("Asia/Tokyo")
    )
    assert result.observations
    assert {o.observed_at.tzinfo for o in result.observations} == {UTC}


@pytest.mark.parametrize("v", [True, "2", 2.0, None])
def test_a_json_lines_verbosity_is_an_integer_or_unknown(v: object) -> None:
    """``--logging-format=json`` writes ``"v"`` as an integer; anything else (a boolean, a string, a float)
    is no verbosity a reader can trust: unknown. Hand-written lines in the kubelet's JSON shape."""
    record = {"ts": 1710757282622.68, "caller": "status_manager.go:937", "msg": "Delaying pod deletion"}
    if v is not None:
        record["v"] = v
    parsed = parse_json_record(json.dumps(record))
    assert parsed is not None and parsed.level is None


def test_an_unsupported_workload_is_refused_naming_it() -> None:
    """An object that is not a Deployment, StatefulSet, DaemonSet or ReplicaSet is refused with its kind,
    namespace and name, so the user knows which object of a dump was not read (hand-written CronJob)."""
    cron = {"kind": "CronJob", "metadata": {"namespace": "ops", "name": "backup", "uid": "u-1"}}
    with pytest.raises(ValueError) as refused:
        normalize_workload(cron)
    assert str(refused.value) == (
        "CronJob ops/backup: expected kind Deployment, StatefulSet, DaemonSet or ReplicaSet"
    )
    with pytest.raises(ValueError, match=r"^object \(a list, not an object\): expected kind"):
        normalize_workload([])  # type: ignore[arg-type]


@pytest.mark.parametrize(("length", "read"), [(36, True), (64, True), (65, False), (4096, False)])
def test_a_workloads_uid_is_one_to_64_characters(length: int, read: bool) -> None:
    """An object's UID is what podlife keys its rows on: an API server's is a 36-character UUID; one over
    64 characters (a hand-edited dump, a hostile body) is refused naming the object, never stored as a key
    of any length (hand-written Deployment)."""
    deployment = {"kind": "Deployment", "metadata": {"namespace": "shop", "name": "web", "uid": "u" * length}}
    if read:
        assert normalize_workload(deployment)["kind"] == "Deployment"
    else:
        with pytest.raises(ValueError, match=r"^Deployment shop/web: expected metadata.uid"):
            normalize_workload(deployment)
