"""What ``collectors.parsers.otlp`` reads from kubelet trace exports and says about what it cannot read, each
field read back (issue #38: fields and refusals no test checked, so a mutation sample could change them).

No real kubelet export is stored in tests/fixtures/real: every request here is synthetic, built field by
field from what the kubelet sends (k8s-facts.md §2.2: resource ``service.name=kubelet`` and ``host.name``;
root spans ``syncPod`` / ``syncTerminatingPod`` / ``syncTerminatedPod`` with ``k8s.pod.uid``, ``k8s.pod``,
``k8s.pod.name``, ``k8s.namespace.name`` and, on syncPod, ``k8s.pod.update_type``; ``RecordError`` +
``SetStatus(codes.Error, …)`` on failure; CRI client spans named after the gRPC method) and from the OTLP
specification (OTLP/JSON ids are hex; ``partial_success`` on rejected spans).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from collectors.parsers import otlp

UID = "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"
START = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z
SPAN_ID = bytes.fromhex("eee19b7ec3c1b174")
TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")


def attr(key: str, value: str | bytes | list[str]) -> KeyValue:
    if isinstance(value, bytes):
        return KeyValue(key=key, value=AnyValue(bytes_value=value))
    if isinstance(value, list):
        items = [AnyValue(string_value=v) for v in value]
        return KeyValue(key=key, value=AnyValue(array_value=ArrayValue(values=items)))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def pod_attrs(uid: str | bytes | list[str] = UID) -> list[KeyValue]:
    """synthetic: the four attributes every kubelet sync span carries (k8s-facts.md §2.2)."""
    return [
        attr("k8s.pod.uid", uid),
        attr("k8s.pod", "shop/cart-0"),
        attr("k8s.pod.name", "cart-0"),
        attr("k8s.namespace.name", "shop"),
    ]


def sync_span(name: str = "syncPod", **fields: Any) -> Span:
    """synthetic: a kubelet root sync span as the kubelet's tracer exports it."""
    span = Span(
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        name=name,
        kind=Span.SPAN_KIND_INTERNAL,
        start_time_unix_nano=START,
        end_time_unix_nano=START + 100_000_000,
    )
    span.attributes.extend(fields.pop("attributes", pod_attrs()))
    for key, value in fields.items():
        if key == "status":
            span.status.CopyFrom(value)
        elif key == "events":
            span.events.extend(value)
        else:
            setattr(span, key, value)
    return span


def export(*spans: Span, service: str = "kubelet") -> otlp.SpanExtraction:
    """The extraction of one protobuf export (the kubelet exports OTLP/gRPC: protobuf) of ``spans``."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend([attr("service.name", service), attr("host.name", "node-b")])
    scope = resource_spans.scope_spans.add()
    scope.scope.name = "k8s.io/kubernetes/pkg/kubelet"
    scope.spans.extend(spans)
    return otlp.spans_to_observations(otlp.decode_request(request.SerializeToString(), "protobuf"))


@pytest.mark.parametrize("name", ["syncPod", "syncTerminatingPod", "syncTerminatedPod"])
def test_each_sync_phase_is_a_span_observation_under_its_own_name(name: str) -> None:
    """GIVEN one kubelet root span of each pod-worker phase WHEN extracted THEN each is a span observation
    named as the kubelet names it, at its start, keyed on its span id, with the pod and the node."""
    extraction = export(sync_span(name))
    (obs,) = extraction.observations
    assert obs.payload["name"] == name
    assert (obs.pod_uid, obs.node, obs.namespace, obs.name) == (UID, "node-b", "shop", "cart-0")
    assert (obs.payload["span_id"], obs.payload["trace_id"]) == (SPAN_ID.hex(), TRACE_ID.hex())
    assert (extraction.spans, extraction.ignored, extraction.rejected_count) == (1, 0, 0)


@pytest.mark.parametrize(
    ("sent", "name"),
    [
        ("SyncPod", "syncPod"),
        ("SYNCTERMINATINGPOD", "syncTerminatingPod"),
        ("syncterminatedpod", "syncTerminatedPod"),
    ],
)
def test_a_sync_span_is_named_as_the_kubelet_spells_it_whatever_case_it_came_in(sent: str, name: str) -> None:
    """The kubelet's span names are lowercase-first (``syncPod``) even where its Go methods are capitalised
    (k8s-facts.md §2.2); a span read in another case (a collector that renames, an older exporter) is the
    same phase, and its observation carries the kubelet's spelling."""
    (obs,) = export(sync_span(sent)).observations
    assert obs.payload["name"] == name


def test_the_kubelets_cri_client_spans_are_counted_and_ignored() -> None:
    """GIVEN a syncPod span and two CRI client spans the otelgrpc interceptor makes under it (named after
    the gRPC method) WHEN extracted THEN all three are counted, each CRI span ignored, none refused."""
    sandbox = sync_span("runtime.v1.RuntimeService/RunPodSandbox", span_id=bytes.fromhex("0102030405060708"))
    pull = sync_span("runtime.v1.ImageService/PullImage", span_id=bytes.fromhex("0807060504030201"))
    extraction = export(sync_span(), sandbox, pull)
    assert (extraction.spans, extraction.ignored, extraction.rejected_count) == (3, 2, 0)
    assert [o.payload["name"] for o in extraction.observations] == ["syncPod"]


def test_the_pods_name_and_namespace_come_from_their_own_attributes() -> None:
    """GIVEN a sync span with k8s.pod.name and k8s.namespace.name and no ``k8s.pod`` WHEN extracted THEN the
    pod's namespace and name are those attributes'."""
    attributes = [
        attr("k8s.pod.uid", UID),
        attr("k8s.pod.name", "cart-0"),
        attr("k8s.namespace.name", "shop"),
    ]
    (obs,) = export(sync_span(attributes=attributes)).observations
    assert (obs.namespace, obs.name) == ("shop", "cart-0")


def test_a_failed_sync_carries_its_status_message_as_the_error() -> None:
    """GIVEN a syncPod span the kubelet ended with SetStatus(codes.Error, err.Error()) WHEN extracted THEN
    the observation's error is that message; a span with status Ok or unset has no error."""
    failed = sync_span(status=Status(code=Status.STATUS_CODE_ERROR, message="failed to mount volume"))
    ok = sync_span(status=Status(code=Status.STATUS_CODE_OK), span_id=bytes.fromhex("0102030405060708"))
    unset = sync_span(span_id=bytes.fromhex("0807060504030201"))
    errors = [o.payload["error"] for o in export(failed, ok, unset).observations]
    assert errors == ["failed to mount volume", None, None]


def test_a_failed_sync_without_a_status_message_takes_the_recorded_exceptions() -> None:
    """GIVEN a span with status Error and no message, where RecordError added an ``exception`` event with
    ``exception.message`` WHEN extracted THEN the error is that exception's message; with no such event,
    the error is just "error" (the status says it failed, nothing says why)."""
    event = Span.Event(name="exception", time_unix_nano=START + 1)
    event.attributes.append(attr("exception.message", "context deadline exceeded"))
    recorded = sync_span(status=Status(code=Status.STATUS_CODE_ERROR), events=[event])
    bare = sync_span(status=Status(code=Status.STATUS_CODE_ERROR), span_id=bytes.fromhex("0102030405060708"))
    errors = [o.payload["error"] for o in export(recorded, bare).observations]
    assert errors == ["context deadline exceeded", "error"]


def test_a_pod_uid_longer_than_64_characters_is_refused_by_name() -> None:
    """GIVEN a sync span whose k8s.pod.uid is 65 characters (a pod UID is a UUID; the observation contract
    takes at most 64) WHEN extracted THEN the span is refused with that reason, not stored."""
    extraction = export(sync_span("syncTerminatedPod", attributes=pod_attrs("u" * 65)))
    assert extraction.observations == []
    assert extraction.rejected == {"syncTerminatedPod span with a k8s.pod.uid longer than 64 characters": 1}


def test_a_pod_uid_that_is_not_text_is_no_pod_uid() -> None:
    """GIVEN sync spans whose k8s.pod.uid is an array, or blanks WHEN extracted THEN neither names a pod:
    each is refused as a span without a k8s.pod.uid attribute."""
    extraction = export(
        sync_span(attributes=pod_attrs([UID])),
        sync_span(attributes=pod_attrs("   "), span_id=bytes.fromhex("0102030405060708")),
    )
    assert extraction.rejected == {"syncPod span without a k8s.pod.uid attribute": 2}


def test_a_bytes_attribute_is_read_as_hex() -> None:
    """GIVEN a sync span whose k8s.pod.uid is sent as bytes WHEN extracted THEN it reads as their hex text."""
    (obs,) = export(
        sync_span(attributes=pod_attrs(bytes.fromhex("d1c4757bcb230bf06ab7e866b62132a1")))
    ).observations
    assert obs.pod_uid == "d1c4757bcb230bf06ab7e866b62132a1"


def test_the_partial_success_names_both_kinds_of_refusal_with_their_counts() -> None:
    """GIVEN an OTLP/JSON export with one span that is not an object and one sync span without a pod UID
    WHEN extracted THEN both count as rejected (OTLP partial success), and the message names each kind
    with its count; the export's answer carries both."""
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "kubelet"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            "not a span",
                            {"spanId": SPAN_ID.hex(), "name": "syncPod", "startTimeUnixNano": str(START)},
                        ]
                    }
                ],
            }
        ]
    }
    extraction = otlp.spans_to_observations(otlp.decode_request(orjson.dumps(body), "json"))
    assert (extraction.spans, extraction.rejected_count) == (2, 2)
    assert extraction.rejection_message() == (
        "unreadable spans: 1 resourceSpans[0].scopeSpans[0].spans[0] is a string, not an object; "
        "rejected kubelet spans: 1 syncPod span without a k8s.pod.uid attribute"
    )
    answer = otlp.export_response(extraction.rejected_count, extraction.rejection_message())
    assert answer.partial_success.rejected_spans == 2
    assert answer.partial_success.error_message == extraction.rejection_message()
    one = otlp.export_response(1, "rejected kubelet spans: 1 syncPod span without a start time")
    assert one.partial_success.rejected_spans == 1
    assert not otlp.export_response(0, "").HasField("partial_success")


@pytest.mark.parametrize(
    ("entry", "said"),
    [(None, "null"), (True, "a boolean"), (3, "a number"), ("x", "a string"), ([], "an array")],
)
def test_an_entry_that_is_not_an_object_is_refused_naming_where_and_what_it_is(entry: Any, said: str) -> None:
    """GIVEN an OTLP/JSON body whose resourceSpans hold a JSON value that is not an object WHEN decoded THEN
    it is refused once, naming where it was and what JSON type it is."""
    decoded = otlp.decode_request(orjson.dumps({"resourceSpans": [entry]}), "json")
    assert dict(decoded.refused) == {f"resourceSpans[0] is {said}, not an object": 1}


@pytest.mark.parametrize(
    ("body", "encoding", "said"),
    [
        (b"\xff\xff\xff", "protobuf", "body is not a protobuf ExportTraceServiceRequest"),
        (b"{not json", "json", "body is not JSON"),
        (b"[]", "json", "OTLP/JSON body must be an object with resourceSpans, got list"),
    ],
)
def test_a_body_that_is_not_an_export_request_is_malformed_saying_why(
    body: bytes, encoding: str, said: str
) -> None:
    """GIVEN bodies that are not an ExportTraceServiceRequest in their encoding WHEN decoded THEN decoding
    raises MalformedRequest whose message says what the body is not."""
    with pytest.raises(otlp.MalformedRequest) as refused:
        otlp.decode_request(body, encoding)  # type: ignore[arg-type]
    assert str(refused.value).startswith(said)
