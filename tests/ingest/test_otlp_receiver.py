"""The OTLP/HTTP receiver, fed by the real OpenTelemetry SDK and its OTLP HTTP exporter over loopback.

GIVEN a running podlife (pytest-django's WSGI live server, or the ASGI application under uvicorn) and an
ingest token WHEN the SDK exports kubelet-shaped sync spans THEN they show up as the pod's worker phases
within a second; bad requests get the OTLP/HTTP answer the specification asks for and change nothing.
"""

from __future__ import annotations

import base64
import gzip
import time
import zlib
from typing import Any

import orjson
import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status as RpcStatus
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

from collectors.models import IngestToken
from tests.ingest.conftest import (
    CLUSTER,
    Ingest,
    PodSpans,
    kubelet_provider,
    observation_count,
    recorded_spans,
    to_dt,
    worker_lane,
)
from tests.stored import keys_of, rows_of
from tests.waits import wait_for

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


def expected_phases(pod: PodSpans) -> list[tuple[str, Any, Any]]:
    # docs/kubelet-lines.md, the rule: the first syncPod (update_type=create) is setup for its length; after
    # it returned no span says when the containers had all started (init containers may still be running),
    # so until termination starts it is setup or running: "unknown" between the two. Cleanup follows the
    # end of terminating.
    return [
        ("setup", to_dt(pod.sync[0]), to_dt(pod.sync[1])),
        ("unknown", to_dt(pod.sync[1]), to_dt(pod.terminating[0])),
        ("terminating", to_dt(pod.terminating[0]), to_dt(pod.terminating[1])),
        ("cleanup", to_dt(pod.terminating[1]), to_dt(pod.terminated[1])),
    ]


def wait_for_phases(uid: str, count: int) -> list[Any]:
    """The pod's worker lane once it has ``count`` bars (a deadline, not a latency: how soon spans reach a
    timeline is measured by bench/live.py (c), against a baseline of the same run)."""
    return wait_for(
        lambda: lane if len(lane := worker_lane(uid)) >= count else None, f"{count} bars of {uid}"
    )


def otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """OTLP/JSON as a collector sends it: lowerCamelCase, integer enums, hex trace and span ids."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for rs in document.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return orjson.dumps(document)


def pod_request(pod: PodSpans, node: str = "node-a") -> ExportTraceServiceRequest:
    return encode_spans(recorded_spans(pod.emit, node))


def status_of(response: Any, encoding: str) -> RpcStatus:
    status = RpcStatus()
    if encoding == JSON:
        json_format.Parse(response.content, status)
    else:
        status.ParseFromString(response.content)
    return status


# --------------------------------------------------------------------------------------------- the done test


@pytest.mark.parametrize(
    "server",
    [
        "ingest",
        # SQLite's in-memory test database is one shared-cache database; the ASGI server's threads open
        # their own connections to it and fail on its table locks while the test reads. PostgreSQL only.
        pytest.param("asgi_ingest", marks=pytest.mark.postgres),
    ],
    ids=["wsgi-live-server", "asgi-uvicorn"],
)
def test_exported_kubelet_spans_are_worker_phases_within_a_second(
    server: str, request: pytest.FixtureRequest, transactional_db: None
):
    """GIVEN the SDK with a batch processor and the OTLP HTTP exporter (gzip) pointed at podlife
    WHEN the kubelet-shaped syncPod / syncTerminatingPod / syncTerminatedPod spans end
    THEN within a second the pod's timeline has setup (the first syncPod), terminating and cleanup at the
    spans' times."""
    ingest: Ingest = request.getfixturevalue(server)
    provider = kubelet_provider("node-a")
    provider.add_span_processor(BatchSpanProcessor(ingest.exporter(), schedule_delay_millis=50))
    pod = PodSpans.at(time.time_ns() - 3_000_000_000)
    try:
        pod.emit(provider)
        lane = wait_for_phases(pod.uid, 4)
    finally:
        provider.shutdown()
    assert lane == expected_phases(pod)

    rows = rows_of(CLUSTER, pod_uids=[pod.uid], order=("observed_at",))
    assert [(r.kind, r.source, r.node, r.namespace, r.name) for r in rows] == [
        ("span", "kubelet_span", "node-a", "default", "web-1")
    ] * 3
    first = rows[0]
    assert first.payload["name"] == "syncPod"
    assert first.payload["update_type"] == "create"
    assert first.dedupe_key == f"span:{first.payload['span_id']}"
    assert len(first.payload["span_id"]) == 16 and len(first.payload["trace_id"]) == 32
    assert first.payload["error"] is None
    assert rows == rows_of(None, pod_uids=[pod.uid], order=("observed_at",))  # all of them in CLUSTER


def test_resent_spans_are_stored_once(ingest: Ingest):
    spans = recorded_spans(PodSpans.at(1_700_000_000_000_000_000).emit)
    exporter = ingest.exporter()
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    before = observation_count()
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert observation_count() == before == 3

    answer = ingest.post("/v1/traces", encode_spans(spans).SerializeToString(), PROTOBUF)
    assert answer.status_code == 200
    assert answer.headers["X-Podlife-Ingest"] == "spans=3 stored=0 already_stored=3 ignored=0 rejected=0"
    assert ExportTraceServiceResponse.FromString(answer.content) == ExportTraceServiceResponse()


def test_otlp_json_with_hex_ids(ingest: Ingest):
    """OTLP/JSON ids are hex: the span id stored is the one sent, not a base64 misreading of it."""
    pod = PodSpans.at(1_700_000_000_000_000_000, name="api-0", namespace="shop")
    request = pod_request(pod)
    body = otlp_json(request)
    sent_ids = {
        s["spanId"]
        for rs in orjson.loads(body)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for s in ss["spans"]
    }
    answer = ingest.post("/v1/traces", body, JSON)
    assert answer.status_code == 200, answer.content
    assert answer.headers["Content-Type"] == JSON
    assert orjson.loads(answer.content) == {}
    assert keys_of(None, pod_uids=[pod.uid]) == {f"span:{i}" for i in sent_ids}
    assert worker_lane(pod.uid) == expected_phases(pod)


def test_gzip_json_is_accepted(ingest: Ingest):
    pod = PodSpans.at(1_700_000_100_000_000_000)
    answer = ingest.post(
        "/v1/traces", gzip.compress(otlp_json(pod_request(pod))), JSON, **{"Content-Encoding": "gzip"}
    )
    assert answer.status_code == 200
    assert [s for s, _a, _b in worker_lane(pod.uid)] == ["setup", "unknown", "terminating", "cleanup"]


def test_error_status_is_kept_as_the_span_error(ingest: Ingest):
    pod = PodSpans.at(1_700_000_200_000_000_000)
    spans = recorded_spans(lambda p: pod.emit(p, error="KillPodSandbox: rpc error: deadline exceeded"))
    assert ingest.exporter().export(spans) == SpanExportResult.SUCCESS
    errors = {o.payload.get("name"): o.payload.get("error") for o in rows_of(None, pod_uids=[pod.uid])}
    assert errors == {
        "syncPod": None,
        "syncTerminatingPod": "KillPodSandbox: rpc error: deadline exceeded",
        "syncTerminatedPod": None,
    }


def test_other_spans_are_counted_and_ignored(ingest: Ingest):
    """CRI client spans under syncPod and other services' spans are not kubelet syncs: no error either."""

    def emit(provider: Any) -> None:
        tracer = provider.get_tracer("k8s.io/kubernetes/pkg/kubelet/kuberuntime")
        tracer.start_span("runtime.v1.RuntimeService/RunPodSandbox").end()

    kubelet_cri = encode_spans(recorded_spans(emit))
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    other = TracerProvider(resource=Resource.create({"service.name": "containerd", "host.name": "node-a"}))
    other.add_span_processor(SimpleSpanProcessor(memory))
    other.get_tracer("x").start_span("syncPod", attributes={"k8s.pod.uid": "not-a-kubelet-span"}).end()
    request = ExportTraceServiceRequest()
    request.MergeFrom(kubelet_cri)
    request.MergeFrom(encode_spans(memory.get_finished_spans()))

    answer = ingest.post("/v1/traces", request.SerializeToString(), PROTOBUF)
    assert answer.status_code == 200
    assert answer.headers["X-Podlife-Ingest"] == "spans=2 stored=0 already_stored=0 ignored=2 rejected=0"
    assert not ExportTraceServiceResponse.FromString(answer.content).HasField("partial_success")
    assert observation_count() == 0


@pytest.mark.parametrize("encoding", [PROTOBUF, JSON])
def test_unusable_kubelet_spans_are_a_partial_success(ingest: Ingest, encoding: str):
    pod = PodSpans.at(1_700_000_300_000_000_000)
    request = pod_request(pod)
    spans = request.resource_spans[0].scope_spans[0].spans
    no_uid = spans.add()
    no_uid.CopyFrom(spans[0])
    no_uid.span_id = bytes.fromhex("00000000000000aa")
    del no_uid.attributes[:]
    short_id = spans.add()
    short_id.CopyFrom(spans[1])
    short_id.span_id = b"\x01\x02\x03\x04"
    body = request.SerializeToString() if encoding == PROTOBUF else otlp_json(request)

    answer = ingest.post("/v1/traces", body, encoding)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == encoding
    response = ExportTraceServiceResponse()
    if encoding == JSON:
        json_format.Parse(answer.content, response)
    else:
        response.ParseFromString(answer.content)
    assert response.partial_success.rejected_spans == 2
    message = response.partial_success.error_message
    assert "1 syncPod span without a k8s.pod.uid attribute" in message
    assert "1 syncTerminatingPod span with a span id of 4 bytes (expected 8)" in message
    assert [s for s, _a, _b in worker_lane(pod.uid)] == ["setup", "unknown", "terminating", "cleanup"]


# --------------------------------------------------------------------------------------------- bad requests


@pytest.fixture
def stored_pod(ingest: Ingest) -> PodSpans:
    """A pod already stored, so each bad request can prove it loses nothing."""
    pod = PodSpans.at(1_700_001_000_000_000_000, name="keep-me")
    assert ingest.exporter().export(recorded_spans(pod.emit)) == SpanExportResult.SUCCESS
    return pod


def gzip_bomb(total: int, *, members: int = 1) -> bytes:
    """Zeros that inflate to ``total`` bytes (one gzip member, or ``members`` identical ones)."""
    size = total // members
    deflater = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    out = [deflater.compress(block) for _ in range(size // len(block))]
    out.append(deflater.flush())
    return b"".join(out) * members


BAD_REQUESTS = {
    # name: (body, content type, extra headers, settings, status, message fragment)
    "truncated-protobuf": (b"\x0a\x05ab", PROTOBUF, {}, {}, 400, "not a protobuf ExportTraceServiceRequest"),
    "garbage-protobuf": (b"\xff\xff\xff\xff", PROTOBUF, {}, {}, 400, "not a protobuf ExportTraceServiceRequest"),
    "not-json": (b'{"resourceSpans": [', JSON, {}, {}, 400, "body is not JSON"),
    "json-array": (b"[]", JSON, {}, {}, 400, "must be an object with resourceSpans"),
    "json-wrong-shape": (b'{"resourceSpans": "x"}', JSON, {}, {}, 400, "not an OTLP/JSON ExportTraceServiceRequest"),
    "text-plain": (b"hello", "text/plain", {}, {}, 415, "Content-Type text/plain is not supported"),
    "no-content-type": (b"x", "", {}, {}, 415, "Content-Type (none) is not supported"),
    "brotli": (b"x", PROTOBUF, {"Content-Encoding": "br"}, {}, 415, "Content-Encoding 'br' is not supported"),
    "not-gzip": (b"plain", PROTOBUF, {"Content-Encoding": "gzip"}, {}, 400, "not valid gzip data"),
    "truncated-gzip": (gzip.compress(b"x" * 1000)[:-12], PROTOBUF, {"Content-Encoding": "gzip"}, {}, 400, "cut short"),
    "oversized": (b"\0" * 70_000, PROTOBUF, {}, {"PODLIFE_INGEST_MAX_BODY_BYTES": 65_536}, 413, "at most 65536"),
    "bomb-single-member": (
        gzip_bomb(64 << 20), PROTOBUF, {"Content-Encoding": "gzip"},
        {"PODLIFE_INGEST_MAX_DECODED_BYTES": 4 << 20}, 413, "inflates past 4194304 bytes",
    ),
    "bomb-1gib-default-limits": (
        gzip_bomb(1 << 30, members=1024), PROTOBUF, {"Content-Encoding": "gzip"}, {}, 413, "inflates past 67108864",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD_REQUESTS), ids=list(BAD_REQUESTS))
def test_bad_request_is_answered_and_loses_nothing(
    ingest: Ingest, stored_pod: PodSpans, settings: Any, case: str
):
    body, content_type, headers, overrides, status, fragment = BAD_REQUESTS[case]
    for name, value in overrides.items():
        setattr(settings, name, value)
    before, lane = observation_count(), worker_lane(stored_pod.uid)

    answer = ingest.post("/v1/traces", body, content_type, **headers)

    assert answer.status_code == status, answer.content[:300]
    reply = content_type if content_type in (PROTOBUF, JSON) else PROTOBUF
    assert answer.headers["Content-Type"] == reply
    assert fragment in status_of(answer, reply).message
    assert observation_count() == before
    assert worker_lane(stored_pod.uid) == lane == expected_phases(stored_pod)


@pytest.mark.parametrize("encoding", [PROTOBUF, JSON])
@pytest.mark.parametrize(
    ("authorization", "fragment"),
    [
        (None, "missing Authorization header"),
        ("Basic dXNlcjpwYXNz", "must be 'Bearer <ingest token>'"),
        ("Bearer pli_000000000000_wrong", "unknown"),
        ("Bearer not-even-shaped-like-a-token", "unknown"),
    ],
    ids=["missing", "basic", "unknown-key", "garbage"],
)
def test_wrong_token_is_401(
    ingest: Ingest, stored_pod: PodSpans, encoding: str, authorization: str | None, fragment: str
):
    import requests

    body = pod_request(PodSpans.at(1_700_002_000_000_000_000)).SerializeToString()
    if encoding == JSON:
        body = otlp_json(ExportTraceServiceRequest.FromString(body))
    headers = {"Content-Type": encoding} | ({"Authorization": authorization} if authorization else {})
    before = observation_count()
    answer = requests.post(f"{ingest.url}/v1/traces", data=body, headers=headers, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert answer.headers["Content-Type"] == encoding
    assert fragment in status_of(answer, encoding).message
    assert observation_count() == before


def test_exporter_with_a_wrong_or_revoked_token_fails(ingest: Ingest):
    spans = recorded_spans(PodSpans.at(1_700_003_000_000_000_000).emit)
    good_secret = ingest.token.split("_", 2)[2]  # pli_<hex key id>_<secret>; the secret may hold "_"
    assert ingest.exporter(token=f"pli_ffffffffffff_{good_secret}").export(spans) == SpanExportResult.FAILURE
    IngestToken.objects.update(revoked_at="2024-01-01T00:00:00Z")
    assert ingest.exporter().export(spans) == SpanExportResult.FAILURE
    assert observation_count() == 0


def test_a_token_of_one_cluster_writes_that_cluster(ingest: Ingest):
    from tests.ingest.conftest import issue_token

    other = issue_token("staging")
    pod = PodSpans.at(1_700_004_000_000_000_000)
    assert ingest.exporter(token=other).export(recorded_spans(pod.emit)) == SpanExportResult.SUCCESS
    assert worker_lane(pod.uid, "staging") != [] and worker_lane(pod.uid, CLUSTER) == []


def test_get_is_405(ingest: Ingest):
    import requests

    answer = requests.get(f"{ingest.url}/v1/traces", headers=ingest.auth, timeout=10)
    assert answer.status_code == 405
    assert answer.headers["Allow"] == "POST"
