"""The klog / journald / JSON wire formats, without meaning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.parsers.klog import (
    opens_block,
    parse_json_record,
    parse_klog_body,
    parse_klog_header,
    split_journald_prefix,
    unquote_go,
)


def test_header_with_pid_right_aligned_in_seven_columns():
    header, body = parse_klog_header(
        'I1019 00:23:45.896841     273 kubelet.go:1761] "syncTerminatingPod enter" pod="default/x"'
    )
    assert (header.severity, header.month, header.day) == ("I", 10, 19)
    assert (header.hour, header.minute, header.second, header.microsecond) == (0, 23, 45, 896841)
    assert header.pid == 273
    assert header.caller == "kubelet.go:1761"
    assert body == '"syncTerminatingPod enter" pod="default/x"'


def test_header_with_collapsed_spaces_and_long_pid():
    header, _ = parse_klog_header('E1119 22:48:13.914655 1675 kuberuntime_container.go:808] "x"')
    assert (header.severity, header.pid, header.caller) == ("E", 1675, "kuberuntime_container.go:808")
    header, _ = parse_klog_header('W0101 00:00:00.000001 123456789 a.go:1] "x"')
    assert header.pid == 123456789


def test_header_rejects_impossible_fields_and_non_klog_text():
    assert parse_klog_header('I1319 00:23:45.896841     273 kubelet.go:1761] "x"') is None
    assert parse_klog_header('I1019 25:23:45.896841     273 kubelet.go:1761] "x"') is None
    assert parse_klog_header('time="2021-11-03T14:07:15Z" level=info msg="StopContainer"') is None
    assert parse_klog_header("") is None


def test_journald_short_prefix():
    prefix, rest = split_journald_prefix(
        "Oct 19 00:23:45 kind-worker kubelet[273]: I1019 00:23:45.896841 ..."
    )
    assert prefix is not None
    assert (prefix.host, prefix.ident, prefix.pid, prefix.month, prefix.day) == (
        "kind-worker",
        "kubelet",
        273,
        10,
        19,
    )
    assert prefix.year is None
    assert rest == "I1019 00:23:45.896841 ..."


def test_journald_short_precise_and_space_padded_day():
    prefix, rest = split_journald_prefix(
        "Dec 30 15:33:13.375379 e2e-022435249c-674b9-minion-group-gdj4 kubelet[8362]: I1230 x"
    )
    assert prefix is not None and prefix.pid == 8362 and rest == "I1230 x"
    prefix, rest = split_journald_prefix("Nov  3 14:02:11 worker-1 kubelet[1043]: I1103 x")
    assert prefix is not None and (prefix.month, prefix.day) == (11, 3) and rest == "I1103 x"


def test_journald_short_iso_gives_year_and_offset_in_both_spellings():
    for text, offset in (
        ("2024-06-07T06:54:47+0000 host kubelet[1]: I0607 x", timedelta(0)),
        ("2024-06-07T06:54:47+00:00 host kubelet[1]: I0607 x", timedelta(0)),
        ("2024-06-07T08:54:47.123456+02:00 host kubelet[1]: I0607 x", timedelta(hours=2)),
    ):
        prefix, rest = split_journald_prefix(text)
        assert prefix is not None
        assert (prefix.year, prefix.month, prefix.day, prefix.utcoffset) == (2024, 6, 7, offset)
        assert rest == "I0607 x"


def test_no_journald_prefix_leaves_line_alone():
    line = 'I1019 00:23:45.896841     273 kubelet.go:1761] "x"'
    assert split_journald_prefix(line) == (None, line)


def test_body_quoted_bare_struct_json_and_map_values():
    body = parse_klog_body(
        '"SyncLoop (PLEG): event for pod" pod="default/nginx" '
        "event=&{ID:27aff94d-e0d9-43d1-84d6-9ab000aa57e2 Type:ContainerDied Data:4296b9e2} "
        'status={"phase":"Running","conditions":[{"type":"Ready"}]} pods=[default/a default/b] '
        'labels=map[app:web tier:front] isTerminal=false gracePeriod=30 err="a \\"quoted\\" \\\\ thing\\n"'
    )
    assert body.structured and not body.truncated
    assert body.message == "SyncLoop (PLEG): event for pod"
    assert body.values["pod"] == "default/nginx"
    assert (
        body.values["event"] == "&{ID:27aff94d-e0d9-43d1-84d6-9ab000aa57e2 Type:ContainerDied Data:4296b9e2}"
    )
    assert body.values["status"] == {"phase": "Running", "conditions": [{"type": "Ready"}]}
    assert body.values["pods"] == "[default/a default/b]"
    assert body.values["labels"] == "map[app:web tier:front]"
    assert body.values["isTerminal"] == "false"
    assert body.values["gracePeriod"] == "30"
    assert body.values["err"] == 'a "quoted" \\ thing\n'


def test_body_json_encoded_values_of_2024_kubelets():
    body = parse_klog_body('"SyncLoop ADD" source="api" pods=["kube-system/etcd-cp-1","default/cache-0"]')
    assert body.values["pods"] == ["kube-system/etcd-cp-1", "default/cache-0"]


def test_body_multi_line_block_then_more_keys():
    body = parse_klog_body(
        '"Error syncing pod, skipping" err=<\n pod="default/api" podUID=c3a1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e',
        [["first line", "second line"]],
    )
    assert body.values["err"] == "first line\nsecond line"
    assert body.values["pod"] == "default/api"
    assert body.values["podUID"] == "c3a1e2d4-5b6f-4a7c-8d9e-0f1a2b3c4d5e"


def test_unstructured_and_truncated_bodies_do_not_fail():
    body = parse_klog_body("Waited for 187.343394ms due to client-side throttling, not priority and fairness")
    assert not body.structured and body.message.startswith("Waited for 187.343394ms")
    body = parse_klog_body('"SyncPod enter" pod="default/unterminated')
    assert body.truncated and body.values["pod"] == "default/unterminated"
    body = parse_klog_body('"x" status={"phase": [')
    assert body.truncated and body.values["status"].startswith("{")


def test_go_unquote_escapes():
    assert unquote_go('"tab\\there \\u00e9 \\x41 \\101"') == "tab\there é A A"
    assert unquote_go("bare") == "bare"


def test_go_unquote_of_the_empty_string_and_of_a_lone_quote() -> None:
    """Go's ``strconv.Quote("")`` is ``""`` (two quotes), which reads back as the empty string (klog writes
    ``fieldPath=""`` so: the kubelet's "Event occurred" lines, tests/fixtures/real/kubelet); a lone quote
    is not a quoted string and stays as it is, and the empty text stays empty."""
    assert unquote_go('""') == ""
    assert unquote_go('"') == '"'
    assert unquote_go("") == ""


def test_opens_block():
    assert opens_block('"Error syncing pod, skipping" err=<')
    assert opens_block(" > other=<  ")
    assert not opens_block('"x" err="=<"')
    assert not opens_block('"x" pod="a"')


def test_json_record_time_in_epoch_milliseconds_and_error_severity():
    rec = parse_json_record(
        '{"ts":1655581336241.7104,"caller":"kubelet/kubelet.go:2102","msg":"SyncLoop REMOVE","v":2,'
        '"source":"api","pods":[{"name":"nettools","namespace":"dev"}]}'
    )
    assert rec is not None
    assert rec.observed_at == datetime(2022, 6, 18, 19, 42, 16, 241710, tzinfo=UTC)
    assert (rec.severity, rec.caller, rec.message) == ("I", "kubelet/kubelet.go:2102", "SyncLoop REMOVE")
    assert rec.values["pods"] == [{"name": "nettools", "namespace": "dev"}]
    assert rec.level == 2  # "v": the verbosity the kubelet logged the line at (a V2 line, kops 1.24)
    err = parse_json_record(
        '{"ts":1635266751595.943,"caller":"kubelet/kubelet.go:1703","msg":"Failed creating a mirror pod for",'
        '"pod":"kube-system/kube-controller-manager-talos-dev-qemu-master-1","err":"pods already exists"}'
    )
    assert err is not None and err.severity == "E"
    assert err.level is None  # an error line has no verbosity
    assert err.observed_at == datetime(2021, 10, 26, 16, 45, 51, 595943, tzinfo=UTC)


def test_json_record_rejects_non_records():
    assert parse_json_record('{"msg":"no ts"}') is None
    assert parse_json_record('{"ts":"soon","msg":"x"}') is None
    assert parse_json_record("[1,2]") is None
    assert parse_json_record("{not json") is None


@pytest.mark.parametrize(
    "prefix",
    [
        "<30>Nov 29 18:13:10 aks-np kubelet[3112]: ",  # RFC 3164, as a syslog daemon forwards it
        "<30>1 2024-11-29T18:13:10.313+02:00 aks-np kubelet 3112 - - ",  # RFC 5424
        '<30>1 2024-11-29T16:13:10.313Z aks-np kubelet 3112 ID47 [meta@32473 node="aks-np"] ',
    ],
)
def test_syslog_forwarded_kubelet_lines_are_read(prefix: str) -> None:
    """Synthetic lines in the two syslog shapes, the klog header in the node's zone (UTC+2)."""
    from datetime import UTC, datetime, timedelta, timezone

    from collectors.parsers.kubelet_log import parse_kubelet_log

    line = prefix + (
        'I1129 18:13:10.313421    3112 kubelet.go:2400] "SyncTerminatingPod exit" pod="default/nginx" '
        'podUID="5da5612b-9738-493c-af51-a213072997f6"'
    )
    tz = timezone(timedelta(hours=2))
    (obs,) = parse_kubelet_log([line], node="aks-np", year=2024, tz=tz).observations
    assert obs.observed_at == datetime(2024, 11, 29, 16, 13, 10, 313421, tzinfo=UTC)
    assert obs.payload["pid"] == 3112


def test_a_multi_line_value_whose_lines_are_missing_is_cut_and_named():
    """GIVEN the real AKS 1.31 "Probe failed" line, copied as a journal excerpt without the probe output's
    lines (``output=<`` ends it) WHEN its body is parsed THEN ``output`` is the one cut value, empty, and
    the rest of the line is read whole: a reader is told which value is missing, not that the line is."""
    journal = (
        Path(__file__).resolve().parents[1]
        / "fixtures/real/kubelet/aks-2025-1.31-liveness-probe-restart.journal"
    )
    line = next(x for x in journal.read_text(encoding="utf-8").splitlines() if '"Probe failed"' in x)
    body = parse_klog_body(line.split("] ", 1)[1])
    assert body.truncated and body.cut == {"output"}
    assert body.values["output"] == ""
    assert (body.values["containerName"], body.values["probeResult"]) == ("liveness", "failure")
