"""Issue #35, deliverable 1: a key whose derivation keeps failing is set aside, and nothing else waits for it.

GIVEN pods of two clusters, one of whose derivation fails (a broken rule, a poisoned row stored before
the boundary) WHEN the derive stage drains THEN every other key of the batch and the other cluster is
derived, the failing key is retried a bounded number of times alone and then quarantined with its error,
its cluster and its first and last failure, ``/metrics`` and ``manage.py derive --quarantined`` show it,
and ``manage.py derive --retry`` derives it once the cause is fixed.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.management import call_command

from tests.stored import put
from tests.test_derive_stage import pod_history, uid
from timelines import derivation, dirty, store
from timelines.lifecycle import derive as core
from timelines.lifecycle.observation import Kind, Source
from timelines.models import DirtyKey, Pod, QuarantinedKey

pytestmark = pytest.mark.django_db

BAD = uid(99)


def _scrape(client: Any, settings: Any) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    settings.PODLIFE_METRICS_TOKEN = "scrape-token"
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token").content.decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_a_failing_pod_is_quarantined_and_the_rest_derive(
    derive_stage_off: None,
    quick_retries: None,
    monkeypatch: Any,
    client: Any,
    admin_client: Any,
    settings: Any,
) -> None:
    """GIVEN 4 pods of cluster a (one whose derivation raises) and 3 of cluster b, all in one batch
    WHEN the stage drains THEN the 6 others have their rows, the bad one is quarantined after 3 failures
    with its error; /metrics, --quarantined and --retry (after the fix) behave as documented."""
    monkeypatch.setattr(
        derivation, "derive_pod_timeline", _raising_for(BAD, "a rule that breaks on this pod")
    )
    for i in range(3):
        store.save_observations("a", pod_history(uid(i), f"web-{i}"))
        store.save_observations("b", pod_history(uid(10 + i), f"web-{i}"))
    store.save_observations("a", pod_history(BAD, "bad"))

    derivation.drain()

    assert set(Pod.objects.values_list("cluster__name", "uid")) == {
        ("a", uid(0)), ("a", uid(1)), ("a", uid(2)), ("b", uid(10)), ("b", uid(11)), ("b", uid(12))
    }  # fmt: skip
    row = QuarantinedKey.objects.get()
    assert (row.cluster.name, row.kind, row.key, row.failures) == ("a", dirty.POD, BAD, 3)
    assert "RuntimeError: a rule that breaks on this pod" in row.error
    assert row.first_failed_at <= row.last_failed_at and row.released_at is None
    assert not DirtyKey.objects.exists()  # nothing stuck in the derive stage

    samples = _scrape(client, settings)
    assert samples["podlife_derive_quarantined_keys"] == 1
    assert samples["podlife_derive_quarantine_moves_total"] == 1

    page = admin_client.get("/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="derive-quarantine"' in html and BAD in html and "a rule that breaks on this pod" in html

    listing = io.StringIO()
    call_command("derive", "--quarantined", stdout=listing)
    assert f"a\tpod\t'{BAD}'\tfailures=3" in listing.getvalue()
    assert "1 quarantined key" in listing.getvalue()

    # A new observation of the quarantined pod does not bring it back on its own.
    store.save_observations("a", pod_history(BAD, "bad", upto=4))
    derivation.drain()
    assert QuarantinedKey.objects.get().released_at is None and not DirtyKey.objects.exists()

    monkeypatch.setattr(derivation, "derive_pod_timeline", core.derive_pod_timeline)  # the fix
    out = io.StringIO()
    call_command("derive", "--retry", stdout=out)
    assert "put back 1 quarantined key" in out.getvalue()
    assert Pod.objects.filter(uid=BAD).exists()
    samples = _scrape(client, settings)
    assert samples["podlife_derive_quarantined_keys"] == 0
    assert samples["podlife_derive_quarantine_moves_total"] == 1  # a counter: the move happened


def test_a_failing_key_backs_off_and_is_retried_alone(
    derive_stage_off: None, monkeypatch: Any, settings: Any
) -> None:
    """GIVEN a failing pod WHEN its batch fails THEN it waits out its back-off, and later batches never
    claim it with other keys."""
    settings.PODLIFE_DERIVE_RETRY_S = 3600.0
    monkeypatch.setattr(derivation, "derive_pod_timeline", _raising_for(BAD))
    store.save_observations("a", pod_history(BAD, "bad"))
    store.save_observations("a", pod_history(uid(1), "web-1"))
    result = derivation.run_batch()
    assert result is not None and result.failed == 1 and result.claimed == 2
    key = DirtyKey.objects.get()
    assert key.failures == 1 and key.retry_at is not None and key.retry_at > key.first_failed_at
    store.save_observations("a", pod_history(uid(2), "web-2"))
    result = derivation.run_batch()
    assert result is not None and result.claimed == 1 and result.failed == 0  # uid(2) alone
    assert derivation.run_batch() is None  # the failing key is backing off: nothing to claim
    assert Pod.objects.filter(uid__in=[uid(1), uid(2)]).count() == 2


def _raising_for(bad: str, message: str = "boom") -> Any:
    """The lifecycle core, raising ``RuntimeError(message)`` for the pod ``bad``."""
    real = core.derive_pod_timeline

    def broken(observations: Any, **kwargs: Any) -> Any:
        observations = list(observations)
        if any(o.pod_uid == bad for o in observations):
            raise RuntimeError(message)
        return real(observations, **kwargs)

    return broken


def test_a_row_at_the_end_of_time_is_quarantined_not_fatal(
    derive_stage_off: None, quick_retries: None
) -> None:
    """GIVEN a pod observation at 9999-12-31T23:59:59Z stored before the boundary existed (issue #35:
    ``_nameless_facts`` widens the pod's span past the last datetime: OverflowError) WHEN the stage
    drains THEN that pod is quarantined and the other cluster's pod is derived."""
    cluster = store.cluster_for("a")
    end = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    put(cluster, [{
        "pod_uid": BAD, "kind": Kind.POD, "source": Source.AUDIT, "observed_at": end,
        "received_at": end, "dedupe_key": "old-row", "node": "node-a", "namespace": "shop", "name": "web",
        "payload": {"uid": BAD, "namespace": "shop", "name": "web", "node": "node-a", "phase": "Pending"},
    }])  # fmt: skip
    dirty.append_batch(cluster.pk, [(dirty.POD, BAD, None, None)])
    store.save_observations("b", pod_history(uid(1), "web-1"))
    derivation.drain()
    assert Pod.objects.filter(cluster__name="b", uid=uid(1)).exists()
    row = QuarantinedKey.objects.get()
    assert row.key == BAD and "OverflowError" in row.error


def test_keys_that_cannot_be_stored_are_set_aside_at_fold(derive_stage_off: None) -> None:
    """GIVEN dirty marks made before the boundary (issue #35): a podref whose namespace is a NUL
    (``evil%00ns/p``; PostgreSQL's text refuses it) and one whose namespace is 200 x U+202E (1,802
    characters quoted, past the 520 of its column) WHEN the stage drains THEN both are quarantined at
    once with the reason, and another cluster's pod is derived."""
    cluster = store.cluster_for("a")
    rtl = dirty.ref("\u202e" * 200, "p")
    assert len(rtl) == 1802
    dirty.append_batch(
        cluster.pk, [(dirty.PODREF, "evil%00ns/p", None, None), (dirty.PODREF, rtl, None, None)]
    )
    store.save_observations("b", pod_history(uid(1), "web-1"))
    derivation.drain()
    assert Pod.objects.filter(cluster__name="b").count() == 1
    reasons = dict(QuarantinedKey.objects.values_list("kind", "error").order_by("key"))
    errors = sorted(QuarantinedKey.objects.values_list("error", flat=True))
    assert len(errors) == 2 and reasons
    assert any("NUL" in e for e in errors) and any("1802 characters" in e for e in errors)
    assert not DirtyKey.objects.exists()
