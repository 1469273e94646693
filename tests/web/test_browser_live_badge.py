"""The node page's live badge in Chromium: "live" only while every collector stream of the cluster is
fresh; a stale stream is named on the badge, and the badge turns live again once it catches up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.web.conftest import CHROMIUM, SHOTS, login
from timelines.models import CollectorState

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]


def test_badge_names_stale_streams_and_goes_live_when_they_catch_up(
    live_server_asgi: Any, viewer: Any, lab: Any, browser_page: Any, settings: Any, monkeypatch: Any
) -> None:
    """GIVEN lab's pods watch fresh and its daemonsets watch 10 minutes behind WHEN a viewer opens node-a
    THEN the badge reads "stale: daemonsets (10 min behind)", not "live"; WHEN the daemonsets watch ends a
    step THEN the badge turns "live" without a reload."""
    from timelines.web import fanout

    settings.PODLIFE_LIVE_STALE_S = 90.0
    monkeypatch.setattr(fanout, "HEALTH_POLL_S", 0.2)
    now = timezone.now()
    CollectorState.objects.create(cluster=lab["lab"], resource="pods", last_event_at=now)
    CollectorState.objects.create(
        cluster=lab["lab"], resource="daemonsets", last_step_at=now - timedelta(minutes=10)
    )
    server, page = live_server_asgi, browser_page
    login(page, server.url, "viewer")
    page.goto(f"{server.url}/c/lab/nodes/node-a/")
    badge = page.locator("#live-state")
    page.wait_for_selector("#live-state[data-state=stale]", timeout=10_000)
    assert badge.inner_text() == "stale: daemonsets (10 min behind)"
    page.screenshot(path=str(SHOTS / "node-stale-badge.png"), full_page=False)

    CollectorState.objects.filter(cluster=lab["lab"], resource="daemonsets").update(
        last_step_at=timezone.now()
    )
    page.wait_for_selector("#live-state[data-state=live]", timeout=10_000)
    assert badge.inner_text() == "live"
    assert page.errors == []
