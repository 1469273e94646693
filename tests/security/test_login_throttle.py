"""Login throttling (issue #18, finding 8 and deliverable 5): django-axes locks a user name, and an
address, after PODLIFE_LOGIN_FAILURE_LIMIT wrong passwords, with a clear 429 page and Retry-After; API
and ingest tokens keep working; the lock lifts after the cool-off."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from collectors.models import IngestToken
from dashboard.web.access import create_token
from tests.web.conftest import PASSWORD

pytestmark = pytest.mark.django_db
LIMIT = 5


def log_in(username: str, password: str, address: str = "192.0.2.1", path: str = "/accounts/login/") -> Any:
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def test_wrong_passwords_lock_the_user_name_even_with_the_right_one(viewer: Any) -> None:
    for attempt in range(LIMIT - 1):
        answer = log_in("viewer", f"wrong-{attempt}")
        assert answer.status_code == 200 and b"did not match" in answer.content
    assert log_in("viewer", "wrong-again").status_code == 429  # the LIMIT-th wrong password locks
    locked = log_in("viewer", PASSWORD)
    assert locked.status_code == 429
    text = locked.content.decode()
    assert (
        "Too many failed log-ins" in text
        and f"after {LIMIT} wrong" in text
        and "Try again in 15 minutes" in text
    )
    assert locked["Retry-After"] == str(15 * 60)
    # per user: another address does not help
    assert log_in("viewer", PASSWORD, address="198.51.100.7").status_code == 429
    # the admin's log-in form is throttled by the same rule
    assert log_in("viewer", PASSWORD, address="198.51.100.8", path="/admin/login/").status_code == 429


def test_wrong_passwords_from_one_address_lock_that_address(viewer: Any, nobody: Any) -> None:
    for attempt in range(LIMIT):
        log_in(f"guess-{attempt}", "wrong", address="203.0.113.9")
    assert log_in("nobody", PASSWORD, address="203.0.113.9").status_code == 429
    ok = log_in("nobody", PASSWORD, address="203.0.113.10")
    assert ok.status_code == 302 and ok["Location"] == "/"


def test_tokens_keep_working_while_the_log_in_is_locked(viewer: Any, lab: Any) -> None:
    api_token = create_token(viewer)
    _, ingest_token = IngestToken.issue(lab["lab"])
    for attempt in range(LIMIT + 3):
        log_in("viewer", f"wrong-{attempt}", address="127.0.0.1")
    assert log_in("viewer", PASSWORD, address="127.0.0.1").status_code == 429
    client = Client(REMOTE_ADDR="127.0.0.1")
    assert client.get("/api/v1/clusters", HTTP_AUTHORIZATION=f"Bearer {api_token}").status_code == 200
    shipped = client.post(
        "/ingest/v1/kubelet-logs?cluster=lab&node=node-a",
        data='I0607 06:54:41.100000    2345 kubelet.go:1] "a line"\n',
        content_type="text/plain",
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )
    assert shipped.status_code == 200


def test_the_lock_lifts_after_the_cool_off(viewer: Any) -> None:
    from axes.models import AccessAttempt

    for attempt in range(LIMIT):
        log_in("viewer", f"wrong-{attempt}")
    assert log_in("viewer", PASSWORD).status_code == 429
    # 16 minutes later (the cool-off is 15): the failures are moved back rather than waited for
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert log_in("viewer", PASSWORD).status_code == 302


def test_a_successful_log_in_resets_the_count(db: Any) -> None:
    User.objects.create_user("carol", password=PASSWORD)
    for _ in range(2):
        for attempt in range(LIMIT - 1):
            assert log_in("carol", f"wrong-{attempt}").status_code == 200
        assert log_in("carol", PASSWORD).status_code == 302
