"""HTTP ingestion: the OTLP/HTTP trace receiver and the kubelet log endpoint that shippers post to.

* ``POST /v1/traces``: OTLP/HTTP (protobuf or JSON, gzip or deflate or none). Kubelet sync spans become
  ``span`` observations (``collectors/parsers/otlp.py``); answers follow the OTLP/HTTP specification: 200 with an
  ExportTraceServiceResponse (``partial_success`` when spans were rejected), 4xx with a google.rpc.Status,
  both in the request's encoding.
* ``POST /ingest/v1/kubelet-logs?cluster=C&node=N``: klog / journald text, or NDJSON records from Fluent
  Bit or Vector, through the same parser and batching as ``manage.py ingest_kubelet_log``
  (``KubeletLogIngest``); answers a JSON report.

Both take a per-cluster ingest token (``Authorization: Bearer TOKEN``, ``collectors.models.IngestToken``).
A request is read, decompressed and decoded in full, within limits, before anything is stored, so a bad
request stores nothing and never touches what was stored before.

Limits (settings, with these defaults): ``PODLIFE_INGEST_MAX_BODY_BYTES`` (8 MiB) on the body as sent,
``PODLIFE_INGEST_MAX_DECODED_BYTES`` (64 MiB) on the body after decompression, which defeats gzip bombs:
inflation stops one byte past the cap. Django's ASGI handler buffers a whole request body (to a temporary
file) before a view runs, so a Content-Length over the limit is refused unread, but a chunked upload is
counted only as it is read: put a body-size limit on the reverse proxy in front of podlife too.
"""

from __future__ import annotations

import logging
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from collectors.kubelet_logs import KubeletLogIngest
from collectors.models import BadIngestToken, IngestToken
from collectors.parsers import otlp
from collectors.parsers.kubelet_log import is_kubelet_ident, top_unrecognized
from timelines import store
from timelines.lifecycle.observation import EARLIEST, LATEST, name_problem, time_problem
from timelines.writer import observation_writer

log = logging.getLogger(__name__)

MIB: Final = 1024 * 1024
READ_CHUNK: Final = 64 * 1024
RETRY_AFTER_SECONDS: Final = 5

# --------------------------------------------------------------------------------------------- shared: logs


# --------------------------------------------------------------------------------------------- bodies


class BodyError(Exception):
    """A request body that cannot be taken: ``status`` is the HTTP answer, the message says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def max_body_bytes() -> int:
    return int(settings.PODLIFE_INGEST_MAX_BODY_BYTES)


def max_decoded_bytes() -> int:
    return int(settings.PODLIFE_INGEST_MAX_DECODED_BYTES)


def read_body(request: HttpRequest) -> bytes:
    """The request body, decompressed per Content-Encoding, within the size limits; raises BodyError."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        raise BodyError(415, f"Content-Encoding {encoding!r} is not supported: send gzip, deflate or none")
    limit = max_body_bytes()
    declared = request.META.get("CONTENT_LENGTH") or ""
    if declared:
        try:
            length = int(declared)
        except ValueError:
            raise BodyError(400, f"Content-Length {declared!r} is not a number") from None
        if length > limit:
            raise BodyError(413, _too_large("body", length, limit, "PODLIFE_INGEST_MAX_BODY_BYTES"))
    raw = bytearray()
    while True:
        chunk = request.read(min(READ_CHUNK, limit + 1 - len(raw)))
        if not chunk:
            break
        raw += chunk
        if len(raw) > limit:
            raise BodyError(413, _too_large("body", None, limit, "PODLIFE_INGEST_MAX_BODY_BYTES"))
    cap = max_decoded_bytes()
    if encoding in ("gzip", "x-gzip"):
        return inflate(bytes(raw), cap, gzip=True)
    if encoding == "deflate":
        return inflate(bytes(raw), cap, gzip=False)
    if len(raw) > cap:
        raise BodyError(413, _too_large("body", len(raw), cap, "PODLIFE_INGEST_MAX_DECODED_BYTES"))
    return bytes(raw)


def inflate(data: bytes, cap: int, *, gzip: bool) -> bytes:
    """Decompress gzip (all members) or zlib ``data``, never holding more than ``cap`` + 1 bytes of output.

    Raises BodyError 413 past ``cap`` (a gzip bomb stops there), 400 for data that is not valid or is cut
    short.
    """
    name = "gzip" if gzip else "deflate"
    wbits = 16 + zlib.MAX_WBITS if gzip else zlib.MAX_WBITS
    out = bytearray()
    inflater = zlib.decompressobj(wbits)
    pending = data
    try:
        while True:
            chunk = inflater.decompress(pending, cap + 1 - len(out))
            pending = inflater.unconsumed_tail
            out += chunk
            if len(out) > cap:
                raise BodyError(
                    413,
                    f"body inflates past {cap} bytes ({name}); at most {cap} are accepted "
                    "(PODLIFE_INGEST_MAX_DECODED_BYTES): send smaller batches",
                )
            if inflater.eof:
                rest = inflater.unused_data
                if gzip and rest:  # another gzip member follows (concatenated gzip is valid gzip)
                    inflater, pending = zlib.decompressobj(wbits), rest
                    continue
                if rest:
                    raise BodyError(400, f"{len(rest)} bytes of trailing data after the {name} stream")
                return bytes(out)
            if not pending and not chunk:
                raise BodyError(400, f"Content-Encoding {name} but the {name} data is cut short")
    except zlib.error as exc:
        raise BodyError(
            400, f"Content-Encoding {name} but the body is not valid {name} data ({exc})"
        ) from None


def _too_large(what: str, size: int | None, limit: int, setting: str) -> str:
    told = f"{what} is {size} bytes" if size is not None else f"{what} is over {limit} bytes"
    return f"{told}; at most {limit} are accepted ({setting}): send smaller batches"


def _authenticate(request: HttpRequest) -> IngestToken:
    return IngestToken.authenticate(request.headers.get("Authorization"))


# --------------------------------------------------------------------------------------------- OTLP traces

OTLP_MEDIA_TYPES: Final[dict[str, otlp.Encoding]] = {
    "application/x-protobuf": "protobuf",
    "application/protobuf": "protobuf",
    "application/json": "json",
}


@csrf_exempt
def otlp_traces(request: HttpRequest) -> HttpResponse:
    """OTLP/HTTP ``POST /v1/traces``: store kubelet sync spans of the token's cluster."""
    media_type = (request.content_type or "").strip().lower()
    encoding = OTLP_MEDIA_TYPES.get(media_type)
    # Errors go back in the request's encoding; with none we can read, protobuf (the OTLP default) unless
    # the client asked for JSON.
    reply_type = media_type if encoding else _reply_type_for(request)
    reply: otlp.Encoding = OTLP_MEDIA_TYPES[reply_type]

    def error(status: int, code: int, message: str, **headers: str) -> HttpResponse:
        body = otlp.encode_response(otlp.rpc_status(code, message), reply)
        return HttpResponse(body, status=status, content_type=reply_type, headers=headers)

    if request.method != "POST":
        return error(405, otlp.RpcCode.UNIMPLEMENTED, f"{request.method} is not allowed: POST", Allow="POST")
    try:
        token = _authenticate(request)
    except BadIngestToken as exc:
        return error(401, otlp.RpcCode.UNAUTHENTICATED, str(exc), **{"WWW-Authenticate": "Bearer"})
    if encoding is None:
        shown = media_type or "(none)"
        return error(
            415,
            otlp.RpcCode.INVALID_ARGUMENT,
            f"Content-Type {shown} is not supported: send application/x-protobuf or application/json",
        )
    try:
        body = read_body(request)
    except BodyError as exc:
        code = otlp.RpcCode.RESOURCE_EXHAUSTED if exc.status == 413 else otlp.RpcCode.INVALID_ARGUMENT
        return error(exc.status, code, str(exc))
    try:
        export = otlp.decode_request(body, encoding)
    except otlp.MalformedRequest as exc:
        return error(400, otlp.RpcCode.INVALID_ARGUMENT, str(exc))

    extraction = otlp.spans_to_observations(export)
    cluster = token.cluster
    # One batch per request, as read: an export is stored whole or not at all, and retried whole.
    writer = observation_writer(cluster, batch_size=None)
    try:
        writer.hold(extraction.observations)
        result = writer.close()
    except PermissionError as exc:
        return error(403, otlp.RpcCode.PERMISSION_DENIED, str(exc))
    except DatabaseError:
        log.exception("storing %d kubelet spans for cluster %s failed", len(extraction.observations), cluster)
        return error(
            503,
            otlp.RpcCode.UNAVAILABLE,
            "the database is unavailable; retry later",
            **{"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    stored, duplicates, rejected_by_store = result.stored, result.duplicates, result.rejected
    rejected = extraction.rejected_count + len(rejected_by_store)
    messages = [m for m in (extraction.rejection_message(), _store_rejections(rejected_by_store)) if m]
    if rejected or extraction.ignored:
        log.info(
            "cluster %s: %d spans, %d kubelet spans stored, %d already stored, %d ignored, %d rejected%s",
            cluster,
            extraction.spans,
            stored,
            duplicates,
            extraction.ignored,
            rejected,
            f" ({'; '.join(messages)})" if messages else "",
        )
    response = otlp.export_response(rejected, "; ".join(messages))
    summary = (
        f"spans={extraction.spans} stored={stored} already_stored={duplicates} "
        f"ignored={extraction.ignored} rejected={rejected}"
    )
    return HttpResponse(
        otlp.encode_response(response, encoding),
        content_type=media_type,
        headers={"X-Podlife-Ingest": summary},
    )


def _reply_type_for(request: HttpRequest) -> str:
    accept = request.headers.get("Accept", "").lower()
    return "application/json" if "json" in accept and "protobuf" not in accept else "application/x-protobuf"


def _store_rejections(rejected: list[store.Rejected]) -> str:
    if not rejected:
        return ""
    return f"{len(rejected)} rejected by the store: " + "; ".join(str(r) for r in rejected[:3])


# --------------------------------------------------------------------------------------------- kubelet logs

TEXT_TYPES: Final = frozenset({"text/plain", "text/x-log"})
NDJSON_TYPES: Final = frozenset(
    {"application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines"}
)
JSON_TYPES: Final = frozenset({"application/json"})
# Where shippers put the kubelet line in a record: Fluent Bit tail/docker `log`, Vector `message`,
# journald `MESSAGE` (Fluent Bit's systemd input keeps journald's field names).
LINE_FIELDS: Final = ("log", "message", "MESSAGE")
IDENT_FIELDS: Final = ("SYSLOG_IDENTIFIER", "_COMM", "syslog_identifier")
UNIT_FIELDS: Final = ("_SYSTEMD_UNIT", "systemd_unit")
HOST_FIELDS: Final = ("_HOSTNAME", "host", "hostname", "HOSTNAME")
# Skip reasons of records, beside the parser's own (SKIP_REASONS in collectors/parsers/kubelet_log.py).
RECORD_SKIP_REASONS: Final = {
    "bad_json": "an NDJSON line that is not a JSON object",
    "no_log_field": "a record with no log / message / MESSAGE text and not a kubelet JSON log record",
    "not_kubelet": "a record from another process (SYSLOG_IDENTIFIER / _COMM / _SYSTEMD_UNIT)",
    "no_node": "a record with no host field, sent without ?node=",
    "bad_node": "a record whose host is not a node name Kubernetes accepts (a DNS-1123 subdomain)",
    "bad_record": "a record that could not be read (named in ``errors``: nesting too deep, a wrong type, ...)",
}
MAX_REPORTED_REJECTIONS: Final = 10
MAX_NODE_NAME: Final = 253  # a DNS subdomain, as Kubernetes names nodes; the store holds no longer one


@dataclass
class LogRequestReport:
    """The JSON answer of the kubelet log endpoint."""

    cluster: str
    format: str
    nodes: list[str] = field(default_factory=list)
    lines_read: int = 0  # text: physical lines; ndjson / json: records
    result: store.SaveResult = field(default_factory=store.SaveResult)
    skipped: Counter[str] = field(default_factory=Counter)
    unrecognized: Counter[str] = field(default_factory=Counter)  # unrecognised message text -> lines
    errors: list[str] = field(default_factory=list)  # the first records refused, each named

    def refuse(self, reason: str, message: str) -> None:
        """Count a record as skipped under ``reason``; keep the first messages that name it."""
        self.skipped[reason] += 1
        self.name(message)

    def name(self, message: str) -> None:
        """Keep ``message`` among the first ``MAX_REPORTED_REJECTIONS`` the answer names."""
        if len(self.errors) < MAX_REPORTED_REJECTIONS:
            self.errors.append(message)

    def as_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "cluster": self.cluster,
            "nodes": sorted(self.nodes),
            "format": self.format,
            "lines_read": self.lines_read,
            "observations": r.received,
            "stored": r.stored,
            "already_stored": r.duplicates,
            "rejected": len(r.rejected),
            "rejections": [str(x) for x in r.rejected[:MAX_REPORTED_REJECTIONS]],
            "pods_touched": len(r.pods_touched),
            "skipped": dict(self.skipped.most_common()),
            "unrecognized_messages": [
                {"message": text, "count": count} for text, count in top_unrecognized(self.unrecognized)
            ],
            "errors": self.errors,
        }


class LogRequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@csrf_exempt
def kubelet_logs(request: HttpRequest) -> HttpResponse:
    """``POST /ingest/v1/kubelet-logs?cluster=C&node=N[&year=Y][&tz=Z]``: kubelet log lines or records."""
    if request.method != "POST":
        return _log_error(405, f"{request.method} is not allowed: POST", Allow="POST")
    try:
        token = _authenticate(request)
    except BadIngestToken as exc:
        return _log_error(401, str(exc), **{"WWW-Authenticate": "Bearer"})
    try:
        report = _kubelet_logs(request, token)
    except LogRequestError as exc:
        return _log_error(exc.status, str(exc))
    except BodyError as exc:
        return _log_error(exc.status, str(exc))
    except PermissionError as exc:
        return _log_error(403, str(exc))
    except DatabaseError:
        log.exception("storing kubelet log lines for cluster %s failed", token.cluster)
        return _log_error(
            503, "the database is unavailable; retry later", **{"Retry-After": str(RETRY_AFTER_SECONDS)}
        )
    return JsonResponse(report.as_json())


def _log_error(status: int, message: str, **headers: str) -> HttpResponse:
    return JsonResponse({"error": message}, status=status, headers=headers)


_LOGS_WHERE = "POST /ingest/v1/kubelet-logs"  # each observation's payload ``where``: this, line or record N


def _kubelet_logs(request: HttpRequest, token: IngestToken) -> LogRequestReport:
    cluster = token.cluster
    asked = request.GET.get("cluster", "").strip()
    if not asked:
        raise LogRequestError(400, "query parameter cluster is required: ?cluster=NAME&node=NODE")
    if asked != cluster.name:
        raise LogRequestError(403, f"this ingest token writes cluster {cluster.name!r}, not {asked!r}")
    node = request.GET.get("node", "").strip() or None
    if node is not None and len(node) > MAX_NODE_NAME:
        # Refused here, once, rather than line by line by the store (docs/security.md).
        raise LogRequestError(
            400,
            f"query parameter node is {len(node)} characters long: a node name has at most {MAX_NODE_NAME}",
        )
    if node is not None and (problem := name_problem("node", node)) is not None:
        raise LogRequestError(400, f"query parameter {problem}")
    year = _year_param(request.GET.get("year"))
    tz = _tz_param(request.GET.get("tz"))
    media_type = (request.content_type or "").strip().lower()
    if media_type in TEXT_TYPES:
        kind = "text"
        if node is None:
            raise LogRequestError(400, "query parameter node is required for text: ?cluster=NAME&node=NODE")
    elif media_type in NDJSON_TYPES:
        kind = "ndjson"
    elif media_type in JSON_TYPES:
        kind = "json"
    else:
        raise LogRequestError(
            415,
            f"Content-Type {media_type or '(none)'} is not supported: send text/plain (klog or journald "
            "lines) or application/x-ndjson (Fluent Bit / Vector records, or kubelet JSON log lines)",
        )
    body = read_body(request)  # everything is read and checked before anything is stored
    if cluster.read_only:
        raise PermissionError(
            f"cluster {cluster.name!r} is read-only (an imported incident) and takes no data"
        )
    report = LogRequestReport(cluster=cluster.name, format=kind)
    ingests: dict[str, KubeletLogIngest] = {}

    def ingest_for(node_name: str, when: datetime | None) -> KubeletLogIngest:
        ingest = ingests.get(node_name)
        if ingest is None:
            first_year = year or (when.year if when is not None else timezone.now().year)
            ingest = ingests[node_name] = KubeletLogIngest(cluster, node=node_name, year=first_year, tz=tz)
        return ingest

    if kind == "text":
        nul = body.find(b"\x00")
        if nul != -1:
            raise LogRequestError(
                400,
                f"binary data (NUL byte at offset {nul}); expected kubelet log text (klog, journald or JSON lines)",
            )
        assert node is not None
        ingest = ingest_for(node, None)
        for number, line in enumerate(body_lines(body), 1):
            ingest.feed(line, f"{_LOGS_WHERE} line {number}")  # --explain names it
    else:
        records = _json_records(body) if kind == "json" else _ndjson_records(body)
        for text, record in records:
            report.lines_read += 1
            if record is None:
                report.skipped["bad_json"] += 1
                continue
            # One record that cannot be read is counted and named; the rest of the batch is stored
            # (issue #35: one record nested 500 deep, or with a timestamp "²", lost all 50 of its batch).
            try:
                lines, reason = record_lines(text, record)
                if reason:
                    report.skipped[reason] += 1
                    continue
                record_node = node or _record_host(record)
                if record_node is None:
                    report.skipped["no_node"] += 1
                    continue
                if (problem := name_problem("node", record_node)) is not None:
                    report.refuse("bad_node", f"record {report.lines_read}: host {problem[len('node ') :]}")
                    continue
                ingest = ingest_for(record_node, record_time(record))
            except Exception as exc:  # broad: a record is untrusted JSON of any shape; named in the answer
                report.refuse("bad_record", f"record {report.lines_read}: {type(exc).__name__}: {exc}"[:300])
                continue
            where = f"{_LOGS_WHERE} record {report.lines_read}"  # --explain names it
            for line in lines:
                ingest.feed(line, where)  # never raises: the parser counts what it cannot use

    for node_name, ingest in ingests.items():
        report.result.merge(ingest.close())
        if kind == "text":
            report.lines_read += ingest.parser.lines_read
        report.skipped.update(ingest.parser.skipped)
        report.unrecognized.update(ingest.parser.unrecognized)
        # Lines podlife failed on (a bug of podlife's, counted as ``parser_error``): named, with where.
        for error in ingest.parser.errors:
            report.name(f"podlife failed on {error}")
        report.nodes.append(node_name)
    return report


def body_lines(body: bytes) -> Iterator[str]:
    """Text lines as ``manage.py ingest_kubelet_log`` reads them from a file: split on LF, UTF-8 with
    replacement characters, line endings stripped."""
    lines = body.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for raw in lines:
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def _ndjson_records(body: bytes) -> Iterator[tuple[str, dict[str, Any] | None]]:
    for text in body_lines(body):
        if not text.strip():
            continue
        yield text, _as_record(text)


def _json_records(body: bytes) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """A JSON body: an array of records (Fluent Bit ``format json``) or one record; else NDJSON."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        yield from _ndjson_records(body)  # some shippers label NDJSON as application/json
        return
    items = document if isinstance(document, list) else [document]
    for item in items:
        if not isinstance(item, dict):
            yield "", None
            continue
        try:
            text = orjson.dumps(item).decode()
        except orjson.JSONEncodeError:  # nested deeper than orjson writes (254): not a log record
            yield "", None
            continue
        yield text, item


def _as_record(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def record_lines(text: str, record: dict[str, Any]) -> tuple[list[str], str | None]:
    """The kubelet line(s) a shipper record carries, or a skip reason.

    A kubelet ``--logging-format=json`` record (``ts`` and ``msg``) is itself the line: it is passed on
    as received, so it gets the same dedupe key as when read from a file. Otherwise the first of ``log``,
    ``message``, ``MESSAGE`` that holds text is the line (split on newlines: a ``key=<`` block may arrive
    in one record). Records that name another process are skipped.
    """
    if "ts" in record and isinstance(record.get("msg"), str):
        return [text], None
    ident = next((v for k in IDENT_FIELDS if isinstance(v := record.get(k), str) and v), None)
    if ident is not None:
        if not is_kubelet_ident(ident):
            return [], "not_kubelet"
    else:
        unit = next((v for k in UNIT_FIELDS if isinstance(v := record.get(k), str) and v), None)
        if unit is not None and not is_kubelet_ident(unit):
            return [], "not_kubelet"
    for key in LINE_FIELDS:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return [line.rstrip("\r") for line in value.rstrip("\n").split("\n")], None
    return [], "no_log_field"


def _record_host(record: dict[str, Any]) -> str | None:
    for key in HOST_FIELDS:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    kubernetes = record.get("kubernetes")
    if isinstance(kubernetes, dict):
        value = kubernetes.get("host")
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def record_time(record: dict[str, Any]) -> datetime | None:
    """When a shipper says the record was logged (for the year klog lines lack), or None."""
    for key in ("__REALTIME_TIMESTAMP", "timestamp", "date", "time", "@timestamp"):
        value = record.get(key)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            text = value.strip()
            if text.isascii() and text.isdigit():  # "²".isdigit() is true, and int() refuses it
                if len(text) > 20:  # past any epoch in micro- or nanoseconds (and int()'s digit limit)
                    continue
                value = int(text)
            else:
                try:
                    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
                    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
                except (ValueError, OverflowError):
                    continue
                if time_problem(key, parsed) is None:  # a year 1 or 9999 says nothing of the year
                    return parsed
                continue
        if isinstance(value, int | float):
            try:
                seconds = float(value)
            except OverflowError:  # an integer too large for a float
                continue
            if seconds > 1e14:  # journald's __REALTIME_TIMESTAMP: microseconds
                seconds /= 1e6
            elif seconds > 1e11:  # milliseconds
                seconds /= 1e3
            try:
                at = datetime.fromtimestamp(seconds, tz=UTC)
            except (OverflowError, OSError, ValueError):
                continue
            if time_problem(key, at) is None:
                return at
    return None


def _year_param(raw: str | None) -> int | None:
    if raw is None or not raw.strip():
        return None
    try:
        year = int(raw)
    except ValueError:
        year = 0
    if not EARLIEST.year <= year < LATEST.year:  # the supported range (docs/configuration.md)
        raise LogRequestError(
            400,
            f"query parameter year={raw!r} is not a plausible year ({EARLIEST.year} to {LATEST.year - 1}): "
            f"expected e.g. {timezone.now().year}",
        )
    return year


def _tz_param(raw: str | None) -> tzinfo:
    if raw is None or not raw.strip() or raw.strip().upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(raw.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise LogRequestError(
            400, f"query parameter tz={raw!r} is not a known time zone: expected e.g. UTC or Europe/Paris"
        ) from None
