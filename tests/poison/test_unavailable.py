"""Issue #35, deliverable 4: 503 with Retry-After, never 500, while the database or Redis is away.

The attack run terminated PostgreSQL backends (``pg_terminate_backend``) under OTLP load: the pre-body
token check raised outside Django and 4 of 2,088 requests got 500, which OTLP exporters do not retry
(their spans were lost). Here the same failures are raised where they happened: in the pre-body check
of each ingest route, and in a view (a page, the API, an ingest view).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.exceptions
from django.db import OperationalError
from django.test import Client

from collectors.models import IngestToken
from collectors.parsers import otlp
from podlife_site.body_limits import BodyLimits

TERMINATED = "terminating connection due to administrator command"


def _through_body_limits(path: str, content_type: str) -> tuple[int, dict[bytes, bytes], bytes]:
    """One POST through the pre-body middleware (the application behind it must never be reached)."""
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover - must not run
        raise AssertionError("the request reached the application")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "headers": [(b"content-type", content_type.encode()), (b"authorization", b"Bearer some-token")],
    }
    asyncio.run(BodyLimits(app)(scope, receive, send))
    start, body = sent[0], sent[1]
    return start["status"], dict(start["headers"]), body["body"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error",
    [OperationalError(TERMINATED), redis.exceptions.ConnectionError("Connection refused")],
    ids=["database", "redis"],
)
@pytest.mark.parametrize("path", ["/v1/traces", "/ingest/v1/kubelet-logs", "/ingest/v1/audit"])
def test_the_pre_body_token_check_answers_503_when_a_backend_is_away(
    monkeypatch: Any, path: str, error: Exception
) -> None:
    def away(header: str | None) -> Any:
        raise error

    monkeypatch.setattr(IngestToken, "authenticate", staticmethod(away))
    status, headers, body = _through_body_limits(path, "application/x-protobuf")
    assert status == 503
    assert int(headers[b"retry-after"]) > 0
    if path == "/v1/traces":  # OTLP/HTTP: a google.rpc.Status, UNAVAILABLE (the exporters retry it)
        from google.rpc.status_pb2 import Status  # type: ignore[import-untyped]

        status_message = Status()
        status_message.ParseFromString(body)
        assert status_message.code == otlp.RpcCode.UNAVAILABLE
        assert "unavailable" in status_message.message


@pytest.mark.django_db
@pytest.mark.parametrize(
    "error",
    [OperationalError(TERMINATED), redis.exceptions.ConnectionError("Connection refused")],
    ids=["database", "redis"],
)
def test_a_view_that_meets_a_backend_away_answers_503(
    admin_user: Any, monkeypatch: Any, error: Exception
) -> None:
    """GIVEN the database or Redis away while a page or the API reads WHEN it is asked THEN 503 with
    Retry-After (JSON under /api/), not 500."""
    from dashboard import queries

    def away(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(queries, "collector_health", away)
    monkeypatch.setattr(queries, "finding_counts", away)
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    page = client.get("/")
    assert page.status_code == 503 and int(page["Retry-After"]) > 0
    monkeypatch.setattr("dashboard.web.api.views.fleet.cluster_counts", away)
    api = client.get("/api/v1/clusters")
    assert api.status_code == 503 and api.json()["error"]["status"] == 503
