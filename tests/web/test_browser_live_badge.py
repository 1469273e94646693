"""The node page's live badge in Chromium: "live" only while every collector stream of the cluster is
fresh; a stale stream is named on the badge, and the badge turns live again once it catches up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from collectors.models import CollectorState
from tests.waits import wait_for
from tests.web.conftest import CHROMIUM, SHOTS, UID_OK, login, wait_for_js

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
    from dashboard.web import fanout

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


def test_badge_turns_amber_within_two_heartbeats_of_silence_and_ages_tick_between_frames(
    live_server_asgi: Any, viewer: Any, lab: Any, browser_page: Any, settings: Any, monkeypatch: Any
) -> None:
    """GIVEN a heartbeat every 0.5 s and a viewer on node-a's page, "live" WHEN the server stops sending
    anything on the socket (no delta, no heartbeat: a stuck process or a half-open connection) THEN within
    two heartbeats and a tick the badge is amber and names what is stale ("no message for N s"), and the
    kubelet evidence age in the worker column keeps counting with no frame; WHEN heartbeats resume THEN the
    badge is "live" again without a reload."""
    import re

    from dashboard.web.consumers import GroupConsumer

    heartbeat = 0.5
    settings.PODLIFE_LIVE_HEARTBEAT_S = heartbeat
    silent = {"on": False}
    beat = GroupConsumer.offer_heartbeat

    def maybe_beat(self: Any, frame: str) -> None:
        if not silent["on"]:
            beat(self, frame)

    monkeypatch.setattr(GroupConsumer, "offer_heartbeat", maybe_beat)
    server, page = live_server_asgi, browser_page
    login(page, server.url, "viewer")
    page.goto(f"{server.url}/c/lab/nodes/node-a/")
    page.wait_for_selector("#live-state[data-state=live]", timeout=10_000)
    # Heartbeats alone keep a quiet page live: after four of them (no delta) it is still live.
    wait_for_js(page, "Number(document.getElementById('live-state').dataset.heartbeats || 0) >= 4", 10)
    assert page.get_attribute("#live-state", "data-state") == "live"
    age = page.locator(f'#pods-body tr[data-uid="{UID_OK}"] .evidence-age')
    assert re.fullmatch(r" · kubelet evidence \d+ (s|min|h|d) old", age.inner_text())

    silent["on"] = True
    page.wait_for_selector("#live-state[data-state=stale]", timeout=10_000)
    # Amber after two heartbeats of silence, as the page itself counts them (never earlier); how soon is a
    # deadline here (10 s), not a measure: the browser's timers are the machine's.
    text = page.inner_text("#live-state")
    silence = re.fullmatch(r"stale: no message for (\d+\.\d) s", text)
    assert silence and float(silence[1]) >= 2 * heartbeat, text
    page.screenshot(path=str(SHOTS / "node-silent-badge.png"), full_page=False)
    # An age on the page counts on with no frame arriving: evidence 3 s old reads 4 s, then 5 s.
    page.evaluate(
        "(sel) => { document.querySelector(sel).dataset.ageSince = String(Date.now() * 1000 - 3e6); }",
        f'#pods-body tr[data-uid="{UID_OK}"] .evidence-age',
    )
    for seconds in (4, 5):
        text = f" · kubelet evidence {seconds} s old"
        wait_for(lambda text=text: age.inner_text() == text, repr(text), 5, interval=0.05)
    assert page.get_attribute("#live-state", "data-state") == "stale"

    silent["on"] = False
    page.wait_for_selector("#live-state[data-state=live]", timeout=10_000)
    assert page.inner_text("#live-state") == "live"
    assert page.errors == []


def test_how_far_a_stale_stream_is_behind_counts_on_between_collector_frames(
    live_server_asgi: Any, viewer: Any, lab: Any, browser_page: Any, settings: Any
) -> None:
    """GIVEN lab's daemonsets watch 100 s behind (the server re-sends that age only every 30 s) WHEN a
    viewer watches node-a THEN the badge's "N s behind" grows by itself, second by second."""
    import re

    settings.PODLIFE_LIVE_STALE_S = 90.0
    CollectorState.objects.create(
        cluster=lab["lab"], resource="daemonsets", last_step_at=timezone.now() - timedelta(seconds=100)
    )
    server, page = live_server_asgi, browser_page
    login(page, server.url, "viewer")
    page.goto(f"{server.url}/c/lab/nodes/node-a/")
    page.wait_for_selector("#live-state[data-state=stale]", timeout=10_000)

    def behind() -> int:
        m = re.fullmatch(r"stale: daemonsets \((\d+) s behind\)", page.inner_text("#live-state"))
        assert m is not None, page.inner_text("#live-state")
        return int(m.group(1))

    first = behind()
    assert 100 <= first < 130
    wait_for(lambda: behind() >= first + 2, f"more than {first + 1} s behind", 10, interval=0.05)
    assert page.errors == []
