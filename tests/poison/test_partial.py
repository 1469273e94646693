"""Issue #35, deliverable 3: a batch stores every valid record and names what it refused.

The attack run lost whole kubelet-log batches to one record: ``"timestamp":"²"`` (``str.isdigit`` is true
and ``int`` refuses it), a 5,000-digit timestamp (past ``int``'s digit limit) or a record nested 500 deep
(past what orjson writes) answered 500 and stored none of the 50 valid records beside it, so a retry
could never succeed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collectors.models import IngestToken
from tests.stored import keys_of
from timelines import store

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "kubelet" / "v1.27-delete-during-setup.log"
URL = "/ingest/v1/kubelet-logs?cluster={cluster}"


def _records() -> list[dict[str, Any]]:
    """The log fixture's lines (hand-written in a 1.27 kubelet's format) as a Fluent Bit tail input ships them (``log``, ``host``, ``date``)."""
    return [{"date": 1692004378.5, "host": "worker-1", "log": line} for line in LOG.read_text().splitlines()]


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "deep"
    for _ in range(depth):
        value = {"k": value}
    return {"host": "worker-1", "log": "I0814 09:15:31.200417    2981 kubelet.go:2344] x", "extra": value}


POISON = {
    "superscript_two": {"timestamp": "²", "host": "worker-1", "log": "I0814 09:15:31.2 1 k.go:1] a"},
    "five_thousand_digits": {
        "timestamp": "9" * 5000,
        "host": "worker-1",
        "log": "I0814 09:15:31.2 1 k.go:1] b",
    },
    "year_one": {
        "timestamp": "0001-01-01T00:00:00Z",
        "host": "worker-1",
        "log": "I0814 09:15:31.2 1 k.go:1] c",
    },
    "nested_500": _nested(500),
    "bad_host": {"host": "evil\u202ehost", "log": "I0814 09:15:31.2 1 k.go:1] d"},
}


def _post(client: Any, cluster: str, records: list[dict[str, Any]], media: str) -> Any:
    _row, secret = IngestToken.issue(store.cluster_for(cluster))
    # The standard library's encoder: orjson refuses to write past 254 levels, as a sender need not.
    if media == "application/json":
        body = json.dumps(records).encode()
    else:
        body = "\n".join(json.dumps(r) for r in records).encode()
    return client.post(
        URL.format(cluster=cluster), body, content_type=media, HTTP_AUTHORIZATION=f"Bearer {secret}"
    )


def _keys(cluster: str) -> set[str]:
    return keys_of(cluster)


@pytest.mark.django_db
@pytest.mark.parametrize("media", ["application/x-ndjson", "application/json"])
@pytest.mark.parametrize("poison", sorted(POISON))
def test_one_poisoned_record_loses_nothing_valid_and_a_retry_is_idempotent(
    client: Any, poison: str, media: str
) -> None:
    """GIVEN the 49 records of a kubelet log fixture with one poisoned record among them WHEN the batch is
    posted THEN 200, every observation the clean batch gives is stored, the poisoned record is counted
    (and named, where it could not be read); posting it again stores nothing new."""
    clean = _records()
    assert _post(client, "reference", clean, media).status_code == 200
    expected = _keys("reference")
    assert len(expected) > 10

    mixed = clean[:20] + [POISON[poison]] + clean[20:]
    first = _post(client, "prod", mixed, media)
    assert first.status_code == 200, first.content
    report = first.json()
    assert _keys("prod") >= expected  # nothing valid lost
    assert report["lines_read"] == len(mixed)
    if poison == "nested_500" and media == "application/json":
        assert report["skipped"].get("bad_json") == 1  # past what a log record can be: refused as JSON
    if poison == "bad_host":
        assert report["skipped"]["bad_node"] == 1
        assert report["errors"] and report["errors"][0].startswith("record 21: host 'evil\\u202ehost'")

    again = _post(client, "prod", mixed, media)
    assert again.status_code == 200 and again.json()["stored"] == 0
    assert again.json()["already_stored"] == report["stored"] + report["already_stored"]


OTLP_POISON = {
    "bare_string": ("oops", "spans[1] is a string, not an object"),
    "null": (None, "spans[1] is null, not an object"),
    "number": (5, "spans[1] is a number, not an object"),
    "array": ([1], "spans[1] is an array, not an object"),
    # a sender writing the protobuf JSON mapping's base64 ids: read as hex they would be other ids
    "base64_id": ({"spanId": "AAAAAAAAAAE=", "name": "syncPod"}, "spans[1]: spanId 'AAAAAAAAAAE=' is not a hex"),
    "wrong_type": ({"name": {"not": "a string"}, "spanId": "00000000000000aa"}, "spans[1] is not an OTLP span"),
}  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("poison", sorted(OTLP_POISON))
def test_an_otlp_span_that_is_no_span_object_is_refused_by_name_and_the_rest_stored(
    client: Any, token: str, poison: str
) -> None:
    """GIVEN an OTLP/JSON export of three kubelet sync spans with one entry of ``spans`` that cannot be
    read as a span (a bare string, which the protobuf JSON mapping read as an empty span and counted as
    ignored; null, a number or an array, which made the whole body a 400; an id that is not hex, a field
    of the wrong type) WHEN it is posted THEN 200 with a partial success of one rejected span whose
    message names where it was, and the three valid spans are stored."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    from tests.poison.hostile import VALID_SPAN_START, otlp_document, otlp_span

    entry, named = OTLP_POISON[poison]
    uid = "3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b"
    valid = [
        otlp_span(uid, name, VALID_SPAN_START + i * 1_000_000_000)
        for i, name in enumerate(("syncPod", "syncTerminatingPod", "syncTerminatedPod"))
    ]
    body = json.dumps(otlp_document([valid[0], entry, *valid[1:]])).encode()
    answer = client.post(
        "/v1/traces", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert answer.status_code == 200, answer.content
    response = json_format.Parse(answer.content, ExportTraceServiceResponse())
    assert response.partial_success.rejected_spans == 1
    message = response.partial_success.error_message
    assert f"unreadable spans: 1 resourceSpans[0].scopeSpans[0].{named}" in message, message
    assert answer["X-Podlife-Ingest"].startswith("spans=4 stored=3 ")
    assert _keys("prod") == {f"span:{s['spanId']}" for s in valid}
