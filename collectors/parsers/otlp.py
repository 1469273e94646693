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
    "Decoded",
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


@dataclass
class Decoded:
    """A decoded export request, and what of an OTLP/JSON body could not be read as a span: by reason,
    each naming where it was (``resourceSpans[0].scopeSpans[0].spans[3] is a string, not an object``)."""

    request: ExportTraceServiceRequest
    refused: Counter[str] = field(default_factory=Counter)


_PARSE_ERRORS: Final = (json_format.ParseError, ValueError, TypeError, AttributeError, RecursionError)
MAX_REASON_CHARS: Final = 200


def decode_request(body: bytes, encoding: Encoding) -> Decoded:
    """Decode an (already decompressed) OTLP/HTTP trace export body.

    Raises ``MalformedRequest`` naming the problem when ``body`` is not a valid request in ``encoding``.
    An empty body is a valid, empty request (protobuf encodes an empty message as zero bytes).

    In OTLP/JSON a span the protobuf mapping cannot read (one that is not an object: a bare string would
    otherwise be read as an empty span and vanish uncounted; an id that is not hex; a field of the wrong
    type), or an entry of ``resourceSpans``/``scopeSpans`` that is not an object, is left out and counted
    in ``refused`` under a reason naming it; the rest of the body is read (issue #35: one bad record
    never costs the batch). Only what lies outside every span can still make the body malformed.
    """
    request = ExportTraceServiceRequest()
    if encoding == "protobuf":
        try:
            request.ParseFromString(body)
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise MalformedRequest(f"body is not a protobuf ExportTraceServiceRequest ({exc})") from None
        return Decoded(request)
    try:
        document = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise MalformedRequest(f"body is not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise MalformedRequest(
            f"OTLP/JSON body must be an object with resourceSpans, got {type(document).__name__}"
        )
    refused: Counter[str] = Counter()
    spans = _json_spans(document, refused)
    bad: set[int] = set()
    for where, span, _scope in spans:
        try:
            _span_ids_to_base64(span)
        except MalformedRequest as exc:
            refused[_reason(f"{where}: {exc}")] += 1
            bad.add(id(span))
    _leave_out(spans, bad)
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
        return Decoded(request, refused)
    except _PARSE_ERRORS:
        pass
    # Some span the mapping cannot read: try each alone, leave out those that fail, read the rest. Only a
    # broken or hostile body comes here; a sound one is read in the one pass above.
    for where, span, _scope in spans:
        if id(span) in bad:
            continue
        try:
            json_format.ParseDict(span, Span(), ignore_unknown_fields=True)
        except _PARSE_ERRORS as exc:
            refused[_reason(f"{where} is not an OTLP span ({exc})")] += 1
            bad.add(id(span))
    _leave_out(spans, bad)
    request = ExportTraceServiceRequest()  # the failed pass may have filled part of the first one
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except _PARSE_ERRORS as exc:
        raise MalformedRequest(f"body is not an OTLP/JSON ExportTraceServiceRequest ({exc})") from None
    return Decoded(request, refused)


def _reason(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else type(value).__name__


def _entries(
    parent: dict[str, Any], keys: tuple[str, ...], where: str, refused: Counter[str]
) -> list[tuple[str, dict[str, Any]]]:
    """The objects of the list under the first of ``keys`` that ``parent`` holds as a list, each with
    where it is; what is not an object is taken out of the list and counted in ``refused``."""
    for key in keys:
        value = parent.get(key)
        if not isinstance(value, list):
            continue
        kept: list[tuple[str, dict[str, Any]]] = []
        for i, item in enumerate(value):
            here = f"{where}{key}[{i}]"
            if isinstance(item, dict):
                kept.append((here, item))
            else:
                refused[_reason(f"{here} is {_json_type(item)}, not an object")] += 1
        parent[key] = [item for _, item in kept]
        return kept
    return []


Located = tuple[str, dict[str, Any], dict[str, Any]]  # where, the span, its scopeSpans entry


def _json_spans(document: dict[str, Any], refused: Counter[str]) -> list[Located]:
    out: list[Located] = []
    for rs_where, resource_spans in _entries(document, ("resourceSpans", "resource_spans"), "", refused):
        scopes = _entries(resource_spans, ("scopeSpans", "scope_spans"), f"{rs_where}.", refused)
        for ss_where, scope_spans in scopes:
            for where, span in _entries(scope_spans, ("spans",), f"{ss_where}.", refused):
                out.append((where, span, scope_spans))
    return out


def _leave_out(spans: list[Located], bad: set[int]) -> None:
    """Take the spans whose ``id`` is in ``bad`` out of their scopeSpans entries."""
    for scope in {id(scope): scope for _, span, scope in spans if id(span) in bad}.values():
        scope["spans"] = [span for span in scope["spans"] if id(span) not in bad]


def _span_ids_to_base64(span: dict[str, Any]) -> None:
    """Rewrite OTLP/JSON's hex trace/span ids of ``span`` (and its links) in place into the base64 the
    protobuf JSON mapping reads."""
    _rewrite_ids(span, ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"))
    links = span.get("links")
    for link in links if isinstance(links, list) else ():
        if isinstance(link, dict):
            _rewrite_ids(link, ("traceId", "trace_id", "spanId", "span_id"))


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
    unreadable: Counter[str] = field(default_factory=Counter)  # what decoding refused (``Decoded.refused``)

    @property
    def rejected_count(self) -> int:
        return sum(self.rejected.values()) + sum(self.unreadable.values())

    def rejection_message(self) -> str:
        """One line for ``partial_success.error_message``: the most common reasons with their counts."""
        parts = []
        for title, reasons in (
            ("unreadable spans", self.unreadable),
            ("rejected kubelet spans", self.rejected),
        ):
            top = [f"{count} {reason}" for reason, count in reasons.most_common(MAX_REJECTION_MESSAGES)]
            if top:
                parts.append(f"{title}: " + "; ".join(top))
        return "; ".join(parts)


def spans_to_observations(decoded: Decoded) -> SpanExtraction:
    """The kubelet sync spans of ``request`` as ``span`` observations (docs/observations.md).

    Contract: a span becomes an observation when its resource has ``service.name=kubelet`` and its name
    is syncPod / syncTerminatingPod / syncTerminatedPod (any case). ``observed_at`` is the span start,
    ``dedupe_key`` is ``span:<span id hex>``, ``node`` is the resource's ``host.name``; pod identity comes
    from ``k8s.pod.uid``, ``k8s.namespace.name``, ``k8s.pod.name`` (or ``k8s.pod`` = ``ns/name``). A span
    with status ERROR carries its status message (or its exception event's message) as ``error``. Other
    spans are counted in ``ignored``; unusable sync spans are counted in ``rejected`` by reason, and what
    decoding could not read as a span in ``unreadable`` (both are refused: ``rejected_count``). Never
    raises.
    """
    out = SpanExtraction(unreadable=Counter(decoded.refused))
    out.spans = out.unreadable.total()
    for resource_spans in decoded.request.resource_spans:
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
