"""collectors/parsers/otlp.py and the body limits without a server: decoding, extraction, inflation."""

from __future__ import annotations

import gzip
import zlib
from datetime import UTC, datetime

import orjson
import pytest

from collectors.ingest_http import BodyError, inflate, record_lines, record_time
from collectors.parsers import otlp


def kubelet_json(span: dict, service: str = "kubelet") -> bytes:
    return orjson.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [
                            {"key": "service.name", "value": {"stringValue": service}},
                            {"key": "host.name", "value": {"stringValue": "node-b"}},
                        ]
                    },
                    "scopeSpans": [{"scope": {"name": "k8s.io/kubernetes/pkg/kubelet"}, "spans": [span]}],
                    "someFutureField": {"ignored": True},
                }
            ]
        }
    )


SPAN = {
    "traceId": "5b8efff798038103d269b633813fc60c",
    "spanId": "eee19b7ec3c1b174",
    "name": "syncPod",
    "kind": 1,
    "startTimeUnixNano": "1700000000123456789",
    "endTimeUnixNano": 1700000000223456789,
    "attributes": [
        {"key": "k8s.pod.uid", "value": {"stringValue": "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"}},
        {"key": "k8s.pod", "value": {"stringValue": "shop/cart-0"}},
        {"key": "k8s.pod.update_type", "value": {"stringValue": "update"}},
    ],
    "status": {"code": 2, "message": 'failed to "StartContainer"'},
}


def test_otlp_json_span_becomes_a_span_observation():
    extraction = otlp.spans_to_observations(otlp.decode_request(kubelet_json(SPAN), "json"))
    [obs] = extraction.observations
    assert (obs.kind, obs.source, obs.dedupe_key) == ("span", "kubelet_span", "span:eee19b7ec3c1b174")
    assert (obs.pod_uid, obs.node, obs.namespace, obs.name) == (
        "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47",
        "node-b",
        "shop",
        "cart-0",
    )
    assert obs.observed_at == datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)
    assert obs.payload == {
        "name": "syncPod",
        "start": "2023-11-14T22:13:20.123456+00:00",
        "end": "2023-11-14T22:13:20.223456+00:00",
        "span_id": "eee19b7ec3c1b174",
        "trace_id": "5b8efff798038103d269b633813fc60c",
        "update_type": "update",
        "error": 'failed to "StartContainer"',
    }
    assert (extraction.spans, extraction.ignored, extraction.rejected_count) == (1, 0, 0)


def test_protobuf_round_trip_and_other_services_are_ignored():
    request = otlp.decode_request(kubelet_json(SPAN, service="containerd"), "json").request
    again = otlp.decode_request(request.SerializeToString(), "protobuf")
    extraction = otlp.spans_to_observations(again)
    assert (extraction.spans, extraction.ignored, extraction.observations) == (1, 1, [])


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"attributes": []}, "syncPod span without a k8s.pod.uid attribute"),
        ({"spanId": ""}, "syncPod span with a span id of 0 bytes (expected 8)"),
        ({"startTimeUnixNano": "0"}, "syncPod span without a start time"),
        ({"endTimeUnixNano": "1600000000000000000"}, "syncPod span that ends before it starts"),
    ],
)
def test_unusable_sync_spans_are_rejected_with_a_reason(change: dict, reason: str):
    extraction = otlp.spans_to_observations(otlp.decode_request(kubelet_json(SPAN | change), "json"))
    assert extraction.observations == []
    assert extraction.rejected == {reason: 1}
    assert extraction.rejection_message() == f"rejected kubelet spans: 1 {reason}"


def test_empty_bodies_are_empty_requests():
    assert otlp.decode_request(b"", "protobuf").request.resource_spans == []
    assert otlp.decode_request(b"", "json").request.resource_spans == []


def test_inflate_reads_concatenated_members_and_stops_bombs():
    assert inflate(gzip.compress(b"a" * 10) + gzip.compress(b"b" * 5), 100, gzip=True) == b"a" * 10 + b"b" * 5
    assert inflate(zlib.compress(b"x" * 50), 50, gzip=False) == b"x" * 50
    with pytest.raises(BodyError) as bomb:
        inflate(gzip.compress(b"\0" * 10_000_000), 1_000_000, gzip=True)
    assert bomb.value.status == 413
    with pytest.raises(BodyError) as trailing:
        inflate(zlib.compress(b"x") + b"junk", 100, gzip=False)
    assert trailing.value.status == 400


def test_record_lines_and_times():
    assert record_lines("", {"log": "I0101 line\n"}) == (["I0101 line"], None)
    assert record_lines("", {"MESSAGE": "a\n\tb\n >"}) == (["a", "\tb", " >"], None)
    assert record_lines("", {"message": "x", "_SYSTEMD_UNIT": "containerd.service"}) == ([], "not_kubelet")
    assert record_lines("", {"message": "x", "SYSLOG_IDENTIFIER": "k3s"}) == (["x"], None)
    raw = '{"ts":1.0,"msg":"SyncPod enter"}'
    assert record_lines(raw, orjson.loads(raw)) == ([raw], None)
    assert record_lines("", {"other": 1}) == ([], "no_log_field")
    assert record_time({"__REALTIME_TIMESTAMP": "1635948131402201"}).year == 2021
    assert record_time({"date": 1635948131.4}).year == 2021
    assert record_time({"timestamp": "2023-08-14T09:15:31.2Z"}) == datetime(
        2023, 8, 14, 9, 15, 31, 200000, tzinfo=UTC
    )
    assert record_time({"time": 1717743280101}).year == 2024
    assert record_time({}) is None


def test_a_span_without_an_end_time_is_stored_with_no_end():
    """OTLP's ``endTimeUnixNano`` 0 (or absent: proto3's default) is "not set": the span is kept, its start
    as sent and its end unknown (null), never an error and never the epoch."""
    unended = {k: v for k, v in SPAN.items() if k != "endTimeUnixNano"}
    [obs] = otlp.spans_to_observations(otlp.decode_request(kubelet_json(unended), "json")).observations
    assert (obs.payload["start"], obs.payload["end"]) == ("2023-11-14T22:13:20.123456+00:00", None)


def test_a_span_with_a_bad_id_is_refused_once_and_the_rest_read():
    """GIVEN an export with a good span and one whose spanId is not hex WHEN it is decoded THEN the bad one
    is refused once, by where it is and why, and the good one is read: one broken span never costs the
    batch, nor counts twice."""
    bad = {**SPAN, "spanId": "not-hex-at-all!!"}
    body = orjson.loads(kubelet_json(SPAN))
    body["resourceSpans"][0]["scopeSpans"][0]["spans"].append(bad)
    decoded = otlp.decode_request(orjson.dumps(body), "json")
    assert sum(decoded.refused.values()) == 1, decoded.refused
    assert "spans[1]" in next(iter(decoded.refused))
    assert len(otlp.spans_to_observations(decoded).observations) == 1


def test_a_bad_id_and_a_field_of_the_wrong_type_are_each_refused_once_and_the_rest_read() -> None:
    """GIVEN an export (hand-written, as SPAN) whose first span has an id cut to one hex digit (neither hex
    bytes nor base64), whose second has a field of the wrong type (a start time that is not a number: the
    protobuf mapping cannot read it, so the body is read again span by span) and whose third is sound WHEN
    it is decoded THEN each broken span is refused once, by where it is and why, and the sound one is read:
    the span-by-span pass neither stops at, nor counts again, a span already refused (decode_request's
    contract; issue #35)."""
    body = orjson.loads(kubelet_json({**SPAN, "spanId": "e"}))
    spans = body["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append({**SPAN, "spanId": "eee19b7ec3c1b175", "startTimeUnixNano": "soon"})
    spans.append({**SPAN, "spanId": "eee19b7ec3c1b176"})
    decoded = otlp.decode_request(orjson.dumps(body), "json")
    assert sorted(decoded.refused.values()) == [1, 1], decoded.refused
    first, second = sorted(decoded.refused)
    assert first == (
        "resourceSpans[0].scopeSpans[0].spans[0]: spanId 'e' is not a hex string (OTLP/JSON ids are hex)"
    )
    assert second.startswith("resourceSpans[0].scopeSpans[0].spans[1] is not an OTLP span (")
    [obs] = otlp.spans_to_observations(decoded).observations
    assert obs.payload["span_id"] == "eee19b7ec3c1b176"
