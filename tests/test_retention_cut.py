"""Retention's DELETE cuts at the start of a span, never inside one (``partitions.retention_cut``): the
compact form of an observation may be the change against an earlier row of its object in the same span
(docs/storage.md), so a cut inside a span would leave rows whose base is gone. On PostgreSQL this is the
default partition's (and the legacy table's) DELETE; on SQLite the one table's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.stored import rows_of
from tests.test_partitions import pod_snapshot
from timelines import store

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]

NOW = datetime(2024, 6, 20, 12, 0, tzinfo=UTC)  # long ago: no day partition holds these rows


def test_retention_keeps_the_whole_day_that_holds_the_cutoff(settings: Any) -> None:
    """GIVEN a pod's snapshots on the day before the cutoff's, on the cutoff's day before and after it
    WHEN retention keeps 14 days (cutoff 2024-06-06 12:00 UTC, day spans)
    THEN the earlier day's snapshot is gone and the cutoff's whole day is kept."""
    settings.PODLIFE_PARTITION_DAYS = 1
    day = datetime(2024, 6, 6, tzinfo=UTC)
    rows = [
        pod_snapshot(day - timedelta(minutes=1), "1"),
        pod_snapshot(day, "2"),
        pod_snapshot(day + timedelta(hours=3), "3"),
        pod_snapshot(day + timedelta(hours=13), "4"),
    ]
    assert store.save_observations("c1", rows).stored == 4
    assert store.apply_retention(14, now=NOW) == 1
    assert sorted(o.dedupe_key for o in rows_of(None)) == [
        "pod:uid-a:2",
        "pod:uid-a:3",
        "pod:uid-a:4",
    ]
