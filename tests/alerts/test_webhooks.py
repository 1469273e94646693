"""Outgoing webhooks: new and resolved findings reach a real HTTP receiver on loopback, signed, once,
filtered, rate-limited, and retried with backoff while the receiver is down."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

import pytest
from django.utils import timezone

from alerts.delivery import BACKOFF_BASE_S, deliver_due
from alerts.models import Delivery, Destination, NotifiedFinding
from alerts.notifier import ScanResult, scan
from timelines.models import Cluster, Finding

from ..waits import wait_for
from .conftest import later, make_finding

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("allow_loopback")]


def destination(receiver, **fields) -> Destination:
    fields.setdefault("name", "pager")
    fields.setdefault("min_severity", "info")
    return Destination.objects.create(url=receiver.url, **fields)


def round_at(t, **kw):
    """One alert round at virtual time ``t``: scan, then send what is due."""
    found = scan(now=t)
    sent = deliver_due(now=lambda: t, **kw)
    return found, sent


def verify(received, secret: str) -> bool:
    stamp = received.headers["X-Podlife-Timestamp"]
    expected = hmac.new(secret.encode(), stamp.encode() + b"." + received.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(received.headers["X-Podlife-Signature"], f"sha256={expected}")


def test_new_finding_is_posted_once_signed_in_the_versioned_schema(receiver, live_cluster, settings):
    settings.PODLIFE_EXTERNAL_URL = "https://podlife.example.org"
    dest = destination(receiver)
    make_finding(live_cluster)
    found, sent = round_at(later(60))
    assert (found.new, found.resolved, sent.sent) == (1, 0, 1)
    (got,) = receiver.received
    body = got.json()
    assert body == {
        "schema": "podlife.alert/v1",
        "id": body["finding"]["identity"] + ".new",
        "event": "new",
        "created_at": "2026-11-30T10:01:00.123456+00:00",
        "finding": {
            "identity": body["finding"]["identity"],
            "cluster": "prod",
            "subject": "pod",
            "subject_name": "shop/cart-0",
            "namespace": "shop",
            "node": "node-a",
            "pod_uid": "uid-1",
            "kind": "stuck_terminating",
            "severity": "critical",
            "message": "Pod shop/cart-0 has been terminating for 5 min.",
            "start": "2026-11-30T10:00:00.123456+00:00",
            "end": None,
            "open": True,
            "url": "https://podlife.example.org/c/prod/pods/uid-1/",
        },
    }
    assert len(body["finding"]["identity"]) == 64
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["X-Podlife-Event"] == "new"
    assert got.headers["X-Podlife-Delivery"] == body["id"]
    assert verify(got, dest.signing_secret)
    assert not verify(got, "another secret")

    # The same state again, and the finding re-derived (its row replaced, same facts): nothing new.
    round_at(later(90))
    Finding.objects.all().delete()
    make_finding(live_cluster)
    found, sent = round_at(later(120))
    assert (found.new, found.resolved, sent.sent) == (0, 0, 0)
    assert len(receiver.received) == 1


def test_resolved_when_the_finding_ends_or_is_gone(receiver, live_cluster):
    destination(receiver)
    ends = make_finding(live_cluster)
    vanishes = make_finding(live_cluster, pod_uid="uid-2", subject_name="shop/cart-1")
    round_at(later(60))
    assert [m["event"] for m in receiver.messages()] == ["new", "new"]

    ends.end = later(100)
    ends.save()
    vanishes.delete()  # e.g. re-derived without it
    found, sent = round_at(later(120))
    assert (found.new, found.resolved, sent.sent) == (0, 2, 2)
    resolved = {m["finding"]["subject_name"]: m for m in receiver.messages()[2:]}
    assert resolved["shop/cart-0"]["event"] == "resolved"
    assert resolved["shop/cart-0"]["finding"]["end"] == "2026-11-30T10:01:40.123456+00:00"
    assert resolved["shop/cart-0"]["finding"]["open"] is False
    assert resolved["shop/cart-1"]["finding"]["end"] is None
    assert resolved["shop/cart-1"]["finding"]["open"] is False
    assert "no longer found" in resolved["shop/cart-1"]["finding"]["message"]
    assert not NotifiedFinding.objects.filter(open=True).exists()
    round_at(later(150))
    assert len(receiver.received) == 4


def test_finding_that_came_and_went_between_scans_is_told_once_as_ended(receiver, live_cluster):
    destination(receiver)
    make_finding(live_cluster, kind="never_started", severity="warning", end=later(2))
    round_at(later(30))
    round_at(later(60))
    (msg,) = receiver.messages()
    assert msg["event"] == "new"
    assert msg["finding"]["open"] is False
    assert msg["finding"]["end"] == "2026-11-30T10:00:02.123456+00:00"


def test_a_finding_whose_start_new_evidence_moves_is_told_once_and_resolved_under_its_told_identity(
    receiver, live_cluster
):
    """API events date a termination to the second; the kubelet's line, which a log shipper delivers later,
    dates it to the microsecond. Re-derived with it, the same finding (same pod, kind, overlapping time)
    starts elsewhere: the destination is not told of it again, and hears of its end under the identity it
    was told."""
    destination(receiver)
    make_finding(live_cluster, start=later(0))
    round_at(later(60))
    (told,) = receiver.messages()

    Finding.objects.all().delete()
    make_finding(live_cluster, start=later(-0.876543))  # the kubelet's line: earlier, to the microsecond
    assert round_at(later(90))[0] == ScanResult(0, 0) and len(receiver.messages()) == 1
    Finding.objects.all().delete()
    make_finding(live_cluster, start=later(-0.876543), end=later(100))
    round_at(later(120))
    assert [m["event"] for m in receiver.messages()] == ["new", "resolved"]
    resolved = receiver.messages()[1]["finding"]
    assert resolved["identity"] == told["finding"]["identity"]
    assert (resolved["start"], resolved["end"]) == (
        "2026-11-30T09:59:59.246913+00:00",
        "2026-11-30T10:01:40.123456+00:00",
    )
    round_at(later(150))
    assert len(receiver.messages()) == 2


def test_a_start_that_moves_as_the_finding_ends_is_told_as_its_end_only(receiver, live_cluster):
    destination(receiver)
    make_finding(live_cluster)
    round_at(later(60))
    Finding.objects.all().delete()
    make_finding(live_cluster, start=later(0.5), end=later(80))
    found, _ = round_at(later(90))
    assert (found.new, found.resolved) == (0, 1)
    told, resolved = receiver.messages()
    assert resolved["event"] == "resolved" and resolved["finding"]["identity"] == told["finding"]["identity"]
    # Told as ended, then moved again while still ended: nothing to say.
    Finding.objects.all().delete()
    make_finding(live_cluster, start=later(0.25), end=later(80))
    assert round_at(later(120))[0] == ScanResult(0, 0)
    assert len(receiver.messages()) == 2


def test_another_pod_or_another_episode_is_news_not_a_moved_start(receiver, live_cluster):
    """A StatefulSet's replacement pod has the same name and another UID; a pod's second episode of a kind
    starts after its first, which is still there. Neither is the told finding with a moved start."""
    destination(receiver)
    first = make_finding(live_cluster, kind="crash_loop", severity="warning", end=later(30))
    make_finding(live_cluster)
    round_at(later(60))
    assert [m["event"] for m in receiver.messages()] == ["new", "new"]

    make_finding(live_cluster, kind="crash_loop", severity="warning", start=later(40))  # first still there
    Finding.objects.filter(kind="stuck_terminating").delete()
    make_finding(live_cluster, pod_uid="uid-2", start=later(1))  # cart-0 again, another pod
    found, _ = round_at(later(90))
    assert (found.new, found.resolved) == (2, 1)
    events = [(m["event"], m["finding"]["kind"], m["finding"]["pod_uid"]) for m in receiver.messages()[2:]]
    assert sorted(events) == [
        ("new", "crash_loop", "uid-1"),
        ("new", "stuck_terminating", "uid-2"),
        ("resolved", "stuck_terminating", ""),  # gone: told by what was kept of it
    ]
    assert first.pk and Finding.objects.filter(kind="crash_loop").count() == 2


def test_history_beyond_the_look_back_window_is_never_sent(receiver, live_cluster, settings):
    settings.PODLIFE_METRICS_RECENT_S = 900
    destination(receiver)
    make_finding(live_cluster, end=later(10))
    round_at(later(10 + 901))
    assert receiver.received == []


def test_imported_clusters_are_never_paged_about(receiver, db):
    imported = Cluster.objects.create(name="incident-42", origin=Cluster.Origin.IMPORTED, read_only=True)
    destination(receiver)
    make_finding(imported)
    round_at(later(60))
    assert receiver.received == []


def test_each_destination_gets_what_its_filters_let_through(receiver, live_cluster):
    staging = Cluster.objects.create(name="staging-eu", origin=Cluster.Origin.LIVE)
    make_finding(live_cluster)  # prod shop stuck critical
    make_finding(
        live_cluster,
        pod_uid="u2",
        namespace="kube-system",
        subject_name="kube-system/dns",
        kind="crash_loop",
        severity="warning",
    )
    make_finding(staging, pod_uid="u3", subject_name="shop/cart-9", severity="info", kind="grace_exceeded")
    destination(receiver, name="everything")
    destination(receiver, name="prod-critical", clusters="prod", min_severity="critical")
    destination(receiver, name="staging", clusters="staging-*")
    destination(receiver, name="shop-stuck", namespaces="shop", kinds="stuck_terminating, grace_exceeded")
    destination(receiver, name="warnings-up", min_severity="warning")
    round_at(later(60))
    by_dest: dict[str, set[str]] = {}
    for d in Delivery.objects.select_related("destination"):
        by_dest.setdefault(d.destination.name, set()).add(bytes(d.body).decode())
    got = {
        name: sorted(__import__("orjson").loads(b)["finding"]["subject_name"] for b in bodies)
        for name, bodies in by_dest.items()
    }
    assert got == {
        "everything": ["kube-system/dns", "shop/cart-0", "shop/cart-9"],
        "prod-critical": ["shop/cart-0"],
        "staging": ["shop/cart-9"],
        "shop-stuck": ["shop/cart-0", "shop/cart-9"],
        "warnings-up": ["kube-system/dns", "shop/cart-0"],
    }
    assert len(receiver.received) == 9


def test_slack_messages_link_to_podlife_and_escape_names(receiver, live_cluster, settings):
    settings.PODLIFE_EXTERNAL_URL = "https://podlife.example.org"
    destination(receiver, format=Destination.Format.SLACK)
    make_finding(live_cluster, message="Pod shop/cart-0 <!channel> & co is stuck.")
    round_at(later(60))
    (msg,) = receiver.messages()
    assert set(msg) == {"text", "blocks"}
    assert "<!channel>" not in msg["text"] and "&lt;!channel&gt; &amp; co" in msg["text"]
    assert msg["text"].startswith(":rotating_light: Stuck terminating (critical) — prod · shop/cart-0")
    context = msg["blocks"][-1]["elements"][0]["text"]
    assert "<https://podlife.example.org/c/prod/pods/uid-1/|open in podlife>" in context


def test_receiver_down_then_back_gets_everything_in_order(receiver, live_cluster):
    """GIVEN a destination whose receiver is down WHEN two findings appear THEN the first send fails,
    the destination backs off (doubling), nothing is lost, and once the receiver is back both arrive in
    the order they were found, each exactly once."""
    dest = destination(receiver)
    port = receiver.port
    receiver.stop()
    make_finding(live_cluster)
    make_finding(live_cluster, pod_uid="uid-2", subject_name="shop/cart-1", start=later(1))

    _, sent = round_at(later(60))
    assert (sent.sent, sent.retried) == (0, 1)
    dest.refresh_from_db()
    assert dest.failures == 1
    first_wait = (dest.retry_at - later(60)).total_seconds()
    assert 0.8 * BACKOFF_BASE_S <= first_wait <= 1.2 * BACKOFF_BASE_S
    assert dest.last_error.startswith("NewConnectionError after ") and "127.0.0.1" not in dest.last_error

    _, sent = round_at(later(61))  # still backing off: not even tried
    assert (sent.sent, sent.retried) == (0, 0)

    _, sent = round_at(later(60 + 7))  # tried again, still down: the wait doubles
    dest.refresh_from_db()
    assert (sent.retried, dest.failures) == (1, 2)
    second_wait = (dest.retry_at - later(67)).total_seconds()
    assert 0.8 * 2 * BACKOFF_BASE_S <= second_wait <= 1.2 * 2 * BACKOFF_BASE_S

    receiver.port = port
    receiver.start()
    _, sent = round_at(later(60 + 7 + 13))
    assert sent.sent == 2
    assert [m["finding"]["subject_name"] for m in receiver.messages()] == ["shop/cart-0", "shop/cart-1"]
    dest.refresh_from_db()
    assert (dest.failures, dest.retry_at, dest.last_error) == (0, None, "")
    assert list(Delivery.objects.order_by("id").values_list("status", "attempts")) == [
        ("sent", 3),
        ("sent", 1),
    ]
    round_at(later(200))
    assert len(receiver.received) == 2


def test_server_errors_retry_and_retry_after_is_honoured(receiver, live_cluster):
    dest = destination(receiver)
    make_finding(live_cluster)
    receiver.status, receiver.retry_after = 429, "42"
    _, sent = round_at(later(60))
    dest.refresh_from_db()
    assert sent.retried == 1
    assert dest.retry_at == later(60) + timedelta(seconds=42)
    assert dest.last_error.startswith("HTTP 429")
    receiver.status, receiver.retry_after = 503, None
    round_at(later(102))
    receiver.status = 204
    _, sent = round_at(later(200))
    assert sent.sent == 1
    assert len(receiver.received) == 3
    assert len({r.headers["X-Podlife-Delivery"] for r in receiver.received}) == 1  # one message, three tries


def test_a_refused_message_fails_at_once_and_the_next_one_goes(receiver, live_cluster):
    destination(receiver)
    make_finding(live_cluster)
    make_finding(live_cluster, pod_uid="uid-2", subject_name="shop/cart-1", start=later(1))
    receiver.status = 400
    _, sent = round_at(later(60))
    assert (sent.sent, sent.failed) == (0, 2)
    assert list(Delivery.objects.values_list("status", flat=True)) == ["failed", "failed"]
    assert Delivery.objects.first().last_error.startswith("refused by the destination: HTTP 400")


def test_rate_limit_defers_the_rest_in_order(receiver, live_cluster):
    destination(receiver, max_per_minute=2)
    for i in range(5):
        make_finding(live_cluster, pod_uid=f"uid-{i}", subject_name=f"shop/cart-{i}", start=later(i))
    _, sent = round_at(later(60))
    assert sent.sent == 2
    _, sent = round_at(later(90))  # the same minute: the budget is spent
    assert sent.sent == 0
    _, sent = round_at(later(121))
    assert sent.sent == 2
    _, sent = round_at(later(182))
    assert sent.sent == 1
    assert [m["finding"]["subject_name"] for m in receiver.messages()] == [f"shop/cart-{i}" for i in range(5)]


def test_a_destination_added_later_hears_of_what_is_open(receiver, live_cluster):
    make_finding(live_cluster)
    destination(receiver, name="first")
    round_at(later(60))
    destination(receiver, name="second")
    round_at(later(90))
    assert len(receiver.received) == 2
    assert Delivery.objects.filter(status="sent").count() == 2


def test_real_clock_round_through_the_celery_task(receiver, live_cluster):
    """The beat task is registered, and (eager here, or a worker with Redis) does a whole round."""
    import alerts.tasks  # noqa: F401 - what a worker's autodiscovery imports
    from podlife_site.celery import app

    assert app.conf.beat_schedule["podlife-alerts"]["task"] == "alerts.scan_and_deliver"
    destination(receiver)
    make_finding(live_cluster, start=timezone.now() - timedelta(minutes=5))
    result = app.tasks["alerts.scan_and_deliver"].apply().get()
    assert result == {"new": 1, "resolved": 0, "sent": 1, "retried": 0, "failed": 0}
    assert receiver.messages()[0]["event"] == "new"


@pytest.mark.django_db(transaction=True)
def test_embedded_loop_sends_without_celery(receiver, live_cluster):
    """The embedded default has no beat: ``manage.py demo`` runs NotifierLoop in a thread instead."""
    from alerts.loop import NotifierLoop

    destination(receiver)
    make_finding(live_cluster, start=timezone.now() - timedelta(minutes=5))
    loop = NotifierLoop(interval=0.1).start()
    try:
        wait_for(lambda: receiver.received, "the loop's first message", timeout=20)
    finally:
        loop.stop()
    assert [m["event"] for m in receiver.messages()] == ["new"]


@pytest.mark.django_db(transaction=True)
def test_rows_told_before_follows_existed_follow_their_own_identity(receiver):
    """GIVEN a destination told of a finding before alerts 0003 WHEN migrated forward THEN the row follows
    the identity it was told, so the next scan neither repeats the news nor resolves it."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("alerts", "0002_scrub_response_bodies")]
    MigrationExecutor(connection).migrate(before)
    old = MigrationExecutor(connection).loader.project_state(before).apps
    dest = old.get_model("alerts", "Destination").objects.create(name="pager", url=receiver.url)
    old.get_model("alerts", "NotifiedFinding").objects.create(
        destination=dest,
        identity="ab" * 32,
        cluster="prod",
        subject="pod",
        subject_name="shop/cart-0",
        kind="stuck_terminating",
        severity="critical",
        start=later(0),
        open=True,
        first_notified_at=later(60),
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    (row,) = NotifiedFinding.objects.all()
    assert (row.identity, row.follows, row.pod_uid) == ("ab" * 32, "ab" * 32, "")
