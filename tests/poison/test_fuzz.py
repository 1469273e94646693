"""Issue #35, deliverable 7: hostile bodies on every ingest route and the import, as property tests.

GIVEN batches of real records with hostile ones mixed in (``tests/poison/hostile.py``: NUL, right-to-left
overrides, oversize names, times at and past the calendar's ends, malformed times, deep nesting, values
of the wrong type) WHEN they are posted to ``/ingest/v1/audit``, ``/ingest/v1/kubelet-logs``,
``/v1/traces`` and ``/import`` THEN no answer is a 500, nothing valid of a mixed batch is lost, no key
is left stuck in the derive stage (a key whose derivation fails is visibly backing off or quarantined),
and another cluster's timelines still derive. A bounded run (a few hundred bodies); ``bench/fuzz.py``
runs the same strategies for as long as asked.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings

from collectors.models import IngestToken
from tests.poison import hostile
from tests.stored import keys_of
from tests.test_derive_stage import pod_history, uid
from timelines import derivation, store
from timelines.models import DirtyKey, Pod, QuarantinedKey

pytestmark = pytest.mark.django_db(transaction=True)

BOUNDED = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _client(cluster: str) -> tuple[Client, dict[str, str]]:
    _row, secret = IngestToken.issue(store.cluster_for(cluster))
    return Client(), {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def _keys(cluster: str) -> set[str]:
    return keys_of(cluster)


def _nothing_stuck_and_others_derive() -> None:
    """The derive stage drains; every key left is visibly failing (backing off, its error kept) or
    quarantined; and a pod of a cluster no hostile body touched is derived."""
    derivation.drain()
    stuck = DirtyKey.objects.filter(failures=0)
    assert not stuck.exists(), list(stuck.values_list("kind", "key")[:5])
    assert not DirtyKey.objects.filter(failures__gt=0, last_error="").exists()
    store.save_observations("bystander", pod_history(uid(7), "web-7"))
    derivation.drain()
    assert Pod.objects.filter(cluster__name="bystander", uid=uid(7)).exists()
    for row in QuarantinedKey.objects.all():  # visible: what, where, why and when
        assert row.error and row.first_failed_at <= row.last_failed_at


def test_hostile_audit_event_lists(quick_retries: None) -> None:
    client, auth = _client("prod")
    reference, ref_auth = _client("reference")
    clean = hostile.dumps(
        {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": hostile.audit_events()}
    )
    assert (
        reference.post("/ingest/v1/audit", clean, content_type="application/json", **ref_auth).status_code
        == 200
    )
    expected = _keys("reference")
    assert expected

    @BOUNDED
    @given(case=hostile.audit_body())
    def check(case: tuple[bytes, Any]) -> None:
        body, _valid = case
        answer = client.post("/ingest/v1/audit", body, content_type="application/json", **auth)
        assert answer.status_code == 200, answer.content[:500]
        assert _keys("prod") >= expected

    check()
    _nothing_stuck_and_others_derive()


def test_hostile_kubelet_log_batches(quick_retries: None) -> None:
    client, auth = _client("prod")
    reference, ref_auth = _client("reference")
    clean = b"\n".join(hostile.dumps(r) for r in hostile.kubelet_records())
    url = "/ingest/v1/kubelet-logs?cluster={}"
    assert (
        reference.post(
            url.format("reference"), clean, content_type="application/x-ndjson", **ref_auth
        ).status_code
        == 200
    )
    expected = _keys("reference")
    assert len(expected) > 10

    @BOUNDED
    @given(case=hostile.kubelet_body())
    def check(case: tuple[bytes, str]) -> None:
        body, media = case
        answer = client.post(url.format("prod"), body, content_type=media, **auth)
        assert answer.status_code == 200, answer.content[:500]
        assert _keys("prod") >= expected

    check()
    _nothing_stuck_and_others_derive()


def test_hostile_otlp_exports(quick_retries: None) -> None:
    client, auth = _client("prod")

    @BOUNDED
    @given(case=hostile.otlp_body())
    def check(case: tuple[bytes, list[str]]) -> None:
        body, keys = case
        answer = client.post("/v1/traces", body, content_type="application/json", **auth)
        assert answer.status_code in (200, 400), answer.content[:500]
        if answer.status_code == 200:  # a readable export: every valid span stored
            assert _keys("prod") >= set(keys)

    check()
    _nothing_stuck_and_others_derive()


def test_hostile_bundles_are_refused_with_a_4xx(admin_user: Any, quick_retries: None) -> None:
    from tests.export.conftest import ingest_observations, source_observations
    from tests.export.helpers import export_json
    from timelines.models import Cluster

    source = store.cluster_for("src", origin=Cluster.Origin.OFFLINE)
    ingest_observations(source, source_observations())
    valid = orjson.loads(export_json(source))
    client = Client()
    client.force_login(admin_user)
    names = iter(range(10_000))

    @settings(BOUNDED, max_examples=40)
    @given(body=hostile.bundle_body(valid))
    def check(body: bytes) -> None:
        from django.core.files.uploadedfile import SimpleUploadedFile

        upload = SimpleUploadedFile("bundle.json", body, content_type="application/json")
        name = f"copy-{next(names)}"
        answer = client.post("/import", {"bundle": upload, "name": name})
        assert answer.status_code < 500, answer.content[:500]
        if answer.status_code >= 400:
            assert not Cluster.objects.filter(name=name).exists()  # all or nothing

    check()
    _nothing_stuck_and_others_derive()
