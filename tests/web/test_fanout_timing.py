"""The group hub's flush timing (dashboard/web/fanout.py): a delta to a quiet group goes out within the call
that took it, with no timer and no extra trip through the event loop; a busy group is held to ``max_fps``
frames a second by one timer. Asserted on the mechanism (what was offered when, whether a timer is armed),
never on wall time."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from dashboard.web import fanout
from timelines import live

GROUP = live.group_name("node", "lab", "node-a")


class Page:
    """A member that records what the hub offers it."""

    namespaces: set[str] | None = None

    def __init__(self) -> None:
        self.frames: list[dict[str, Any]] = []
        self.offered = asyncio.Event()

    def offer_deltas(self, frame: str, pods: dict[str, tuple[str, str]]) -> None:
        self.frames.append(orjson.loads(frame))
        self.offered.set()

    def offer_frame(self, frame: str, *, refetch: bool = False) -> None:
        self.offer_deltas(frame, {})


def delta(seq: int, uid: str) -> dict[str, Any]:
    return dict(live.delta_message(GROUP, seq, [(uid, "default", f'{{"uid":"{uid}"}}')]))


def uids(frame: dict[str, Any]) -> list[str]:
    return [pod["uid"] for pod in frame["pods"]]


def test_a_quiet_group_flushes_in_the_call_that_took_the_delta_and_a_busy_one_waits_for_its_tick() -> None:
    """GIVEN a hub at 10 frames a second with one page
    WHEN a delta reaches the quiet group THEN the page was offered its frame before ``take`` returned and
    no timer is armed (nothing waits for a tick or a later loop iteration);
    WHEN two more arrive within the same tenth of a second THEN neither is offered yet and one timer is
    armed; WHEN it fires THEN one frame holds both;
    WHEN the group has been quiet for its window again THEN the next delta goes out at once once more."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        hub = fanout.GroupHub(layer=None, group=GROUP, max_fps=10)
        page = Page()
        hub.members[page] = None

        hub.take(delta(1, "u-1"))
        assert [uids(f) for f in page.frames] == [["u-1"]]
        assert hub.timer is None

        hub.take(delta(2, "u-2"))
        hub.take(delta(3, "u-3"))
        assert len(page.frames) == 1  # the cap: the second frame waits for the group's tick
        assert hub.timer is not None
        page.offered.clear()
        await asyncio.wait_for(page.offered.wait(), 5)
        assert [uids(f) for f in page.frames] == [["u-1"], ["u-2", "u-3"]]
        assert page.frames[-1]["seq"] == 3 and hub.timer is None

        hub.last_sent = loop.time() - 1.0 / hub.max_fps  # quiet for a whole window since that frame
        hub.take(delta(4, "u-4"))
        assert [uids(f) for f in page.frames][-1] == ["u-4"]
        assert hub.timer is None

    asyncio.run(run())
