"""OTLP trace export requests to kubelet SPAN observations: decoding and extraction, no I/O.

The kubelet exports one root span per pod-worker sync (k8s-facts.md §2.2): ``syncPod`` (with
``k8s.pod.update_type``), ``syncTerminatingPod`` and ``syncTerminatedPod``, under a resource with
``service.name=kubelet`` and ``host.name=<node>``. ``spans_to_observations`` turns those into ``span``
observations (docs/observations.md); every other span (CRI client spans, other services) is counted and
ignored. A kubelet sync span that cannot become an observation (no pod UID, a malformed span id, no start
time) is *rejected* with a reason, which the receiver reports as an OTLP partial success.

Wire formats (OTLP/HTTP): binary protobuf, or OTLP/JSON. OTLP/JSON is the protobuf JSON mapping with two
differences that ``google.protobuf.json_format`` does not know about: trace and span ids are hex strings
(the mapping would read them as base64, silently, since hex digits are valid base64), and unknown fields
must be ignored. ``decode_request`` handles both.

The HTTP side (auth, limits, answers) is ``collectors/ingest_http.py``.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FieldType
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from timelines.lifecycle.observation import Kind, Observation, Source

__all__ = [
    "KUBELET_SERVICE",
    "SYNC_SPANS",
    "Encoding",
    "MalformedRequest",
    "RpcCode",
    "RpcStatus",
    "SpanExtraction",
    "decode_request",
    "encode_response",
    "export_response",
    "rpc_status",
    "spans_to_observations",
]

Encoding = Literal["protobuf", "json"]

KUBELET_SERVICE: Final = "kubelet"
# Span names as the kubelet spells them, keyed by their lowercase form (the lifecycle core matches
# case-insensitively too, see timelines/lifecycle/facts.py).
SYNC_SPANS: Final = {
    "syncpod": "syncPod",
    "syncterminatingpod": "syncTerminatingPod",
    "syncterminatedpod": "syncTerminatedPod",
}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
MAX_REJECTION_MESSAGES: Final = 5  # distinct reasons quoted in a partial-success message


class MalformedRequest(ValueError):
    """The body is not an ExportTraceServiceRequest in the given encoding; the message says why."""


# --------------------------------------------------------------------------------------------- decoding


def decode_request(body: bytes, encoding: Encoding) -> ExportTraceServiceRequest:
    """Decode an (already decompressed) OTLP/HTTP trace export body.

    Raises ``MalformedRequest`` naming the problem when ``body`` is not a valid request in ``encoding``.
    An empty body is a valid, empty request (protobuf encodes an empty message as zero bytes).
    """
    request = ExportTraceServiceRequest()
    if encoding == "protobuf":
        try:
            request.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise MalformedRequest(f"body is not a protobuf ExportTraceServiceRequest ({exc})") from None
        return request
    try:
        document = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise MalformedRequest(f"body is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise MalformedRequest(
            f"OTLP/JSON body must be an object with resourceSpans, got {type(document).__name__}"
        )
    try:
        _hex_ids_to_base64(document)
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        raise MalformedRequest(f"body is not an OTLP/JSON ExportTraceServiceRequest ({exc})") from None
    return request


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """Rewrite OTLP/JSON's hex trace/span ids in place into the base64 the protobuf JSON mapping reads."""
    for resource_spans in _objects(document, "resourceSpans", "resource_spans"):
        for scope_spans in _objects(resource_spans, "scopeSpans", "scope_spans"):
            for span in _objects(scope_spans, "spans"):
                _rewrite_ids(
                    span, ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id")
                )
                for link in _objects(span, "links"):
                    _rewrite_ids(link, ("traceId", "trace_id", "spanId", "span_id"))


def _objects(parent: Any, *keys: str) -> Iterable[dict[str, Any]]:
    if not isinstance(parent, dict):
        return ()
    for key in keys:
        value = parent.get(key)
        if isinstance(value, list):
            return [v for v in value if isinstance(v, dict)]
    return ()


def _rewrite_ids(obj: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            continue
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise MalformedRequest(
                f"{key} {value[:40]!r} is not a hex string (OTLP/JSON ids are hex)"
            ) from None
        obj[key] = base64.b64encode(raw).decode("ascii")


def encode_response(message: Any, encoding: Encoding) -> bytes:
    """A protobuf message (ExportTraceServiceResponse, google.rpc.Status) in the request's encoding."""
    if encoding == "protobuf":
        return bytes(message.SerializeToString())
    return orjson.dumps(json_format.MessageToDict(message))


# google.rpc.Status, the body of OTLP/HTTP error answers. opentelemetry-proto does not ship it and the
# runtime needs no other protobuf package for one three-field message, so it is declared here, in a
# private descriptor pool (no clash with googleapis-common-protos when that is installed too). Same wire
# format and JSON as the real one; ``details`` (repeated Any) is left out: podlife never sends any.
def _status_class() -> type[Any]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="podlife/google/rpc/status.proto", package="google.rpc", syntax="proto3"
    )
    message = proto.message_type.add(name="Status")
    message.field.add(name="code", number=1, type=FieldType.TYPE_INT32, label=FieldType.LABEL_OPTIONAL)
    message.field.add(name="message", number=2, type=FieldType.TYPE_STRING, label=FieldType.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status"))


RpcStatus: Final = _status_class()


class RpcCode:
    """google.rpc.Code values used in error answers (the OTLP/HTTP spec lets servers omit the code)."""

    INVALID_ARGUMENT = 3
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    UNAUTHENTICATED = 16


def rpc_status(code: int, message: str) -> Any:
    """A google.rpc.Status message."""
    return RpcStatus(code=code, message=message)


def export_response(rejected: int, error_message: str) -> ExportTraceServiceResponse:
    """The success answer; ``partial_success`` is set only when spans were rejected (OTLP/HTTP spec)."""
    response = ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = error_message
    return response


# --------------------------------------------------------------------------------------------- extraction


@dataclass
class SpanExtraction:
    """What one request held: kubelet sync spans as observations, and counts of the rest."""

    observations: list[Observation] = field(default_factory=list)
    spans: int = 0  # every span in the request
    ignored: int = 0  # spans that are not kubelet sync spans: counted, not stored, not an error
    rejected: Counter[str] = field(default_factory=Counter)  # kubelet sync spans unusable, by reason

    @property
    def rejected_count(self) -> int:
        return sum(self.rejected.values())

    def rejection_message(self) -> str:
        """One line for ``partial_success.error_message``: the most common reasons with their counts."""
        parts = [f"{count} {reason}" for reason, count in self.rejected.most_common(MAX_REJECTION_MESSAGES)]
        return "rejected kubelet spans: " + "; ".join(parts) if parts else ""


def spans_to_observations(request: ExportTraceServiceRequest) -> SpanExtraction:
    """The kubelet sync spans of ``request`` as ``span`` observations (docs/observations.md).

    Contract: a span becomes an observation when its resource has ``service.name=kubelet`` and its name
    is syncPod / syncTerminatingPod / syncTerminatedPod (any case). ``observed_at`` is the span start,
    ``dedupe_key`` is ``span:<span id hex>``, ``node`` is the resource's ``host.name``; pod identity comes
    from ``k8s.pod.uid``, ``k8s.namespace.name``, ``k8s.pod.name`` (or ``k8s.pod`` = ``ns/name``). A span
    with status ERROR carries its status message (or its exception event's message) as ``error``. Other
    spans are counted in ``ignored``; unusable sync spans are counted in ``rejected`` by reason. Never
    raises.
    """
    out = SpanExtraction()
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        is_kubelet = resource.get("service.name") == KUBELET_SERVICE
        host = _text(resource.get("host.name"))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.spans += 1
                name = SYNC_SPANS.get(span.name.lower()) if is_kubelet else None
                if name is None:
                    out.ignored += 1
                    continue
                obs, reason = _span_observation(span, name, host)
                if obs is None:
                    out.rejected[reason] += 1
                else:
                    out.observations.append(obs)
    return out


def _span_observation(span: Span, name: str, host: str | None) -> tuple[Observation | None, str]:
    attrs = _attributes(span.attributes)
    uid = _text(attrs.get("k8s.pod.uid"))
    if not uid:
        return None, f"{name} span without a k8s.pod.uid attribute"
    if len(uid) > 64:
        return None, f"{name} span with a k8s.pod.uid longer than 64 characters"
    if len(span.span_id) != 8:
        return None, f"{name} span with a span id of {len(span.span_id)} bytes (expected 8)"
    if not span.start_time_unix_nano:
        return None, f"{name} span without a start time"
    start = _time(span.start_time_unix_nano)
    end = _time(span.end_time_unix_nano) if span.end_time_unix_nano else None
    if start is None or (span.end_time_unix_nano and end is None):
        return None, f"{name} span with a time outside the years 1970-9999"
    if end is not None and end < start:
        return None, f"{name} span that ends before it starts"
    namespace = _text(attrs.get("k8s.namespace.name"))
    pod_name = _text(attrs.get("k8s.pod.name"))
    ref = _text(attrs.get("k8s.pod"))
    if ref and "/" in ref:
        ref_ns, _, ref_name = ref.partition("/")
        namespace, pod_name = namespace or ref_ns or None, pod_name or ref_name or None
    span_id = span.span_id.hex()
    payload = {
        "name": name,
        "start": start.isoformat(),
        "end": end.isoformat() if end is not None else None,
        "span_id": span_id,
        "trace_id": span.trace_id.hex(),
        "update_type": _text(attrs.get("k8s.pod.update_type")),
        "error": _error(span),
    }
    try:
        obs = Observation(
            kind=Kind.SPAN,
            source=Source.KUBELET_SPAN,
            observed_at=start,
            dedupe_key=f"span:{span_id}",
            pod_uid=uid,
            node=host,
            namespace=namespace,
            name=pod_name,
            payload=payload,
        )
    except ValueError as exc:  # InvalidObservation: the contract names the problem
        return None, f"{name} span is not a valid observation ({exc})"
    return obs, ""


def _error(span: Span) -> str | None:
    if span.status.code != Status.STATUS_CODE_ERROR:
        return None
    if span.status.message:
        return span.status.message
    for event in span.events:  # RecordError adds an "exception" event
        if event.name == "exception":
            message = _text(_attributes(event.attributes).get("exception.message"))
            if message:
                return message
    return "error"


def _time(unix_nano: int) -> datetime | None:
    """Nanoseconds since the epoch as an aware UTC datetime (microseconds kept, nanoseconds dropped)."""
    try:
        return _EPOCH + timedelta(microseconds=unix_nano // 1000)
    except OverflowError:
        return None


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, list | Mapping):
        return None
    text = str(value).strip()
    return text or None
