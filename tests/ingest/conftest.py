"""Fixtures for the ingestion endpoints: a cluster with an ingest token, servers, kubelet-shaped spans."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from collectors.models import IngestToken
from dashboard import queries, timeline_reads
from tests.stored import count_of
from tests.web.conftest import held_socket
from timelines import derivation, store
from timelines.lifecycle import schema

CLUSTER = "prod"
KUBELET_SCOPE = "k8s.io/kubernetes/pkg/kubelet"


@pytest.fixture(autouse=True)
def ingest_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.ingest.urls"


@dataclass
class Ingest:
    """A running server with the ingestion endpoints and a token for cluster ``prod``."""

    url: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def post(self, path: str, body: bytes, content_type: str, **headers: str) -> requests.Response:
        sent = {"Content-Type": content_type, **self.auth, **headers}
        return requests.post(f"{self.url}{path}", data=body, headers=sent, timeout=30)

    def exporter(self, *, token: str | None = None, gzip: bool = True) -> OTLPSpanExporter:
        return OTLPSpanExporter(
            endpoint=f"{self.url}/v1/traces",
            headers={"Authorization": f"Bearer {token or self.token}"},
            compression=Compression.Gzip if gzip else Compression.NoCompression,
            timeout=10,
        )


def issue_token(cluster: str = CLUSTER) -> str:
    _row, token = IngestToken.issue(store.cluster_for(cluster))
    return token


@pytest.fixture
def ingest(live_server: object) -> Ingest:
    """The WSGI live server (pytest-django) with a fresh token."""
    return Ingest(url=live_server.url, token=issue_token())  # type: ignore[attr-defined]


@pytest.fixture
def asgi_ingest(transactional_db: None) -> Iterator[Ingest]:
    """podlife's ASGI application under uvicorn, in a thread, on a loopback port the fixture holds."""
    import uvicorn

    from podlife_site.asgi import application

    sock = held_socket()  # held from the start: no other test can take the port in between
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-ingest", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.01)
    try:
        yield Ingest(url=f"http://127.0.0.1:{port}", token=issue_token())
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


# --------------------------------------------------------------------------------------------- kubelet spans


def kubelet_provider(node: str = "node-a") -> TracerProvider:
    return TracerProvider(resource=Resource.create({"service.name": "kubelet", "host.name": node}))


@dataclass
class PodSpans:
    """The three sync spans of one pod, at fixed times (nanoseconds), as the kubelet makes them."""

    uid: str
    namespace: str
    name: str
    sync: tuple[int, int]
    terminating: tuple[int, int]
    terminated: tuple[int, int]

    @classmethod
    def at(cls, start_ns: int, *, name: str = "web-1", namespace: str = "default") -> PodSpans:
        ms = 1_000_000
        return cls(
            uid=str(uuid.uuid4()),
            namespace=namespace,
            name=name,
            sync=(start_ns, start_ns + 40 * ms),
            terminating=(start_ns + 500 * ms, start_ns + 2_500 * ms),
            terminated=(start_ns + 2_600 * ms, start_ns + 2_700 * ms),
        )

    def attributes(self) -> dict[str, str]:
        return {
            "k8s.pod.uid": self.uid,
            "k8s.pod": f"{self.namespace}/{self.name}",
            "k8s.pod.name": self.name,
            "k8s.namespace.name": self.namespace,
        }

    def emit(self, provider: TracerProvider, *, error: str | None = None) -> None:
        """Each sync as its own root span, like the kubelet (k8s-facts.md §2.2)."""
        tracer = provider.get_tracer(KUBELET_SCOPE)
        for name, (start, end), extra in (
            ("syncPod", self.sync, {"k8s.pod.update_type": "create"}),
            ("syncTerminatingPod", self.terminating, {}),
            ("syncTerminatedPod", self.terminated, {}),
        ):
            span = tracer.start_span(name, attributes={**self.attributes(), **extra}, start_time=start)
            if error and name == "syncTerminatingPod":
                span.set_status(Status(StatusCode.ERROR, error))
            span.end(end_time=end)


def recorded_spans(emit: Callable[[TracerProvider], None], node: str = "node-a") -> list[ReadableSpan]:
    """Spans made by the real SDK, kept in memory (to encode requests by hand)."""
    provider = kubelet_provider(node)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    emit(provider)
    provider.shutdown()
    return list(memory.get_finished_spans())


def to_dt(ns: int) -> datetime:
    """Nanoseconds since the epoch as podlife keeps them: UTC, microseconds."""
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)


def worker_lane(uid: str, cluster: str = CLUSTER) -> list[tuple[str, datetime, datetime | None]]:
    """The stored worker lane of pod ``uid`` (empty while the pod is unknown), through dashboard.queries,
    once the derive stage has run here (as a worker does with what the endpoints stored)."""
    derivation.drain()
    try:
        c = queries.get_cluster(cluster)
        pod = queries.resolve_pod(c, uid=uid)
    except queries.NotFound:
        return []
    timeline = schema.timeline_of(timeline_reads.pod_timeline(c, pod))
    return [(iv.state, iv.start, iv.end) for iv in timeline.lanes.get("worker", ())]


def observation_count() -> int:
    return count_of(None)
