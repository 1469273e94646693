"""The audit webhook receiver (``POST /ingest/v1/audit``), over HTTP against a running podlife.

GIVEN a running podlife (pytest-django's live server, or the ASGI application under uvicorn) and an ingest
token WHEN batches arrive as the API server's webhook backend sends them THEN they are stored once, the
sender is told to come back later when podlife is busy, and a bad request changes nothing.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests
import yaml
from django.db import connection, transaction

from collectors.ingest_audit import admission
from dashboard import queries, timeline_reads
from tests.audit.helpers import fixture, parsed
from tests.ingest.conftest import CLUSTER, Ingest, issue_token
from tests.stored import count_of, keys_of, rows_of
from timelines import derivation, store
from timelines.lifecycle import schema
from timelines.lifecycle.observation import Kind
from timelines.observation_rows import field_is

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "audit.md"
EVENTLIST = "webhook-eventlist.json"
JSON = "application/json"

SERVERS = pytest.mark.parametrize(
    "server",
    ["ingest", pytest.param("asgi_ingest", marks=pytest.mark.postgres)],
    ids=["wsgi-live-server", "asgi-uvicorn"],
)


def post(ingest: Ingest, body: bytes, **headers: str) -> requests.Response:
    return ingest.post("/ingest/v1/audit", body, headers.pop("content_type", JSON), **headers)


@SERVERS
def test_a_webhook_batch_is_stored_once_and_derived(server: str, request: pytest.FixtureRequest) -> None:
    """GIVEN the drain scenario as one EventList WHEN it is posted twice THEN the first stores every
    observation the parser makes of it, the second none, and the evicted pod's timeline exists."""
    ingest: Ingest = request.getfixturevalue(server)
    expected = parsed(EVENTLIST)
    first = post(ingest, fixture(EVENTLIST))
    assert first.status_code == 200, first.text
    report = first.json()
    assert report["cluster"] == CLUSTER
    assert (report["events"], report["observations"], report["stored"]) == (30, 20, 20)
    assert report["skipped"] == {"request_received": 15, "read_verb": 1}
    assert report["unpaired_requests"] == 1
    assert keys_of(CLUSTER) == {o.dedupe_key for o in expected.observations}
    again = post(ingest, fixture(EVENTLIST)).json()
    assert (again["stored"], again["already_stored"]) == (0, 20)
    derivation.drain()  # the endpoint stores; the derive stage (a worker, or this) derives
    cluster = queries.get_cluster(CLUSTER)
    timeline = schema.timeline_of(
        timeline_reads.pod_timeline(
            cluster, queries.resolve_pod(cluster, uid="0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3")
        )
    )
    assert [iv.state for iv in timeline.lanes["api"]][-1] == "deleted"


def test_gzip_and_ndjson_bodies(ingest: Ingest) -> None:
    body = gzip.compress(fixture("kubelet-status-patches.jsonl"))
    response = post(ingest, body, content_type="application/x-ndjson", **{"Content-Encoding": "gzip"})
    assert response.status_code == 200, response.text
    assert response.json()["stored"] == 7
    assert len(rows_of(None, field_is(("actor", "kind"), "kubelet"), kinds=[Kind.AUDIT])) == 5


def test_the_documented_webhook_kubeconfig_works_with_the_kubernetes_client(ingest: Ingest) -> None:
    """The kubeconfig in docs/audit.md, with this server and token filled in, loaded by the official
    client (the same format --audit-webhook-config-file takes), delivers an EventList."""
    from kubernetes import client, config

    block = re.search(r"```yaml\n(# --audit-webhook-config-file.*?)```", DOCS.read_text(), re.S)
    assert block is not None, "docs/audit.md lost its webhook kubeconfig"
    document = yaml.safe_load(block.group(1))
    document["clusters"][0]["cluster"] = {"server": f"{ingest.url}/ingest/v1/audit"}
    document["users"][0]["user"]["token"] = ingest.token
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as handle:
        yaml.safe_dump(document, handle)
        handle.flush()
        api = config.new_client_from_config(config_file=handle.name)
    assert isinstance(api, client.ApiClient)
    body = orjson.loads(fixture("webhook-eventlist.json"))
    response = api.call_api(
        "",
        "POST",
        header_params={"Content-Type": JSON},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    assert response.status == 200
    data = orjson.loads(response.data)
    assert data["stored"] == 20


def test_refusals_change_nothing(ingest: Ingest, settings: Any) -> None:
    body = fixture(EVENTLIST)
    assert post(ingest, body, Authorization="Bearer pli_nope_nope").status_code == 401
    missing = requests.post(
        f"{ingest.url}/ingest/v1/audit", data=body, headers={"Content-Type": JSON}, timeout=10
    )
    assert (missing.status_code, missing.headers["WWW-Authenticate"]) == (401, "Bearer")
    assert requests.get(f"{ingest.url}/ingest/v1/audit", headers=ingest.auth, timeout=10).status_code == 405
    wrong = ingest.post("/ingest/v1/audit?cluster=other", body, JSON)
    assert (wrong.status_code, wrong.json()["error"]) == (
        403,
        "this ingest token writes cluster 'prod', not 'other'",
    )
    assert post(ingest, body, content_type="application/x-protobuf").status_code == 415
    garbage = post(ingest, b'{"kind": "EventList", "items": [')
    assert garbage.status_code == 400
    assert "no readable audit event" in garbage.json()["error"]
    not_audit = post(ingest, orjson.dumps({"kind": "PodList", "apiVersion": "v1", "items": []}))
    assert not_audit.status_code == 400
    settings.PODLIFE_INGEST_MAX_BODY_BYTES = 4096
    too_big = post(ingest, body)
    assert too_big.status_code == 413 and "PODLIFE_INGEST_MAX_BODY_BYTES" in too_big.json()["error"]
    assert count_of(None) == 0


def test_an_imported_cluster_takes_no_audit_events(ingest: Ingest) -> None:
    with transaction.atomic():
        store.begin_import("incident-7")
    token = issue_token("incident-7")
    response = ingest.post("/ingest/v1/audit", fixture(EVENTLIST), JSON, Authorization=f"Bearer {token}")
    assert response.status_code == 403
    assert "read-only" in response.json()["error"]
    assert count_of(None) == 0


@contextlib.contextmanager
def writes_blocked() -> Iterator[None]:
    """Another database client holds a lock that makes every observation write wait (a busy database)."""
    if connection.vendor == "postgresql":
        import psycopg

        params = connection.get_connection_params()
        with psycopg.connect(**params, autocommit=False) as other:
            other.execute("LOCK TABLE timelines_observation IN SHARE MODE")
            yield
            other.rollback()
    else:
        other = sqlite3.connect(connection.settings_dict["NAME"], timeout=30, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            yield
            other.execute("ROLLBACK")
        finally:
            other.close()


@SERVERS
def test_a_busy_receiver_answers_429_with_retry_after(
    server: str, request: pytest.FixtureRequest, settings: Any
) -> None:
    """GIVEN one worker and no queue, and a database that makes the first batch wait WHEN a second batch
    arrives THEN it is answered 429 with Retry-After at once; once the first is stored, the sender that
    waited as told gets 200, and both batches are stored in full."""
    ingest: Ingest = request.getfixturevalue(server)
    settings.PODLIFE_AUDIT_WORKERS, settings.PODLIFE_AUDIT_QUEUE, settings.PODLIFE_AUDIT_RETRY_AFTER_S = (
        1,
        0,
        1,
    )
    gate = admission()
    first: dict[str, requests.Response] = {}
    with writes_blocked():
        sender = threading.Thread(target=lambda: first.setdefault("r", post(ingest, fixture(EVENTLIST))))
        sender.start()
        deadline = time.monotonic() + 10
        while gate.busy < 1:
            assert time.monotonic() < deadline, "the first batch never reached a worker"
            time.sleep(0.01)
        # Turned away, not queued behind the lock: a request queued there would wait for the end of this
        # block, which waits for it (the post's own timeout would fail the test).
        busy = post(ingest, fixture("gc-delete.jsonl"), content_type="application/x-ndjson")
        assert busy.status_code == 429
        assert busy.headers["Retry-After"] == "1"
        assert "retry after 1 s" in busy.json()["error"]
    sender.join(timeout=30)
    assert first["r"].status_code == 200 and first["r"].json()["stored"] == 20
    for _attempt in range(10):  # what client-go does with a 429 and Retry-After
        retried = post(ingest, fixture("gc-delete.jsonl"), content_type="application/x-ndjson")
        if retried.status_code != 429:
            break
        time.sleep(int(retried.headers["Retry-After"]))
    assert retried.status_code == 200 and retried.json()["stored"] == 5
    assert gate.busy == 0
    assert count_of(None) == 25
