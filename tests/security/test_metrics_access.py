"""/metrics names clusters and carries collector lag and error counts: closed unless a token is sent or
the deployment opens it on purpose (issue #18, finding 11; the demo opens it)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_metrics_are_closed_by_default(settings: Any) -> None:
    settings.PODLIFE_METRICS_TOKEN, settings.PODLIFE_METRICS_PUBLIC = "", False
    answer = Client().get("/metrics")
    assert answer.status_code == 401 and answer["WWW-Authenticate"].startswith("Bearer")
    assert (
        "PODLIFE_METRICS_TOKEN" in answer.content.decode()
        and "PODLIFE_METRICS_PUBLIC=1" in answer.content.decode()
    )


def test_a_token_opens_them_and_a_wrong_one_does_not(settings: Any) -> None:
    settings.PODLIFE_METRICS_TOKEN, settings.PODLIFE_METRICS_PUBLIC = "scrape-1", True  # the token wins
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-2").status_code == 401
    answer = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-1")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/plain")


def test_opened_on_purpose(settings: Any) -> None:
    settings.PODLIFE_METRICS_TOKEN, settings.PODLIFE_METRICS_PUBLIC = "", True
    assert Client().get("/metrics").status_code == 200
