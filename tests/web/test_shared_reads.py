"""dashboard/web/shared_reads.py on its own: what it keeps, and for how long."""

from __future__ import annotations

from dashboard.web.shared_reads import SharedReads
from tests.waits import wait_for


def test_a_kept_result_is_dropped_when_it_expires_without_another_request() -> None:
    """GIVEN a result kept for 0.1 s WHEN no request follows THEN it is gone soon after 0.1 s (a node's
    answer is megabytes: it must not wait for the next request to be let go); WHEN the same key is asked
    again THEN it is read again."""
    reads = SharedReads()
    assert reads.get("k", 0.1, lambda: b"answer") == b"answer"
    assert reads.get("k", 0.1, lambda: b"other") == b"answer"  # within its time: shared
    assert len(reads._flights) == 1
    wait_for(lambda: reads._flights == {}, "the expired result dropped", 5)
    assert reads.get("k", 0.1, lambda: b"again") == b"again"
    assert (reads.stats.reads, reads.stats.shared) == (2, 1)


def test_without_a_memory_nothing_is_kept_and_no_reaper_starts() -> None:
    reads = SharedReads()
    assert reads.get("k", 0.0, lambda: b"answer") == b"answer"
    assert reads._flights == {} and reads._reaper is None
