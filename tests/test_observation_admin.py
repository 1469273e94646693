"""The admin's pages of stored observations (``timelines/admin.py`` ``ObservationAdmin``), on both databases:
on PostgreSQL each partition finds a row by id through the index of the ids' buckets (migration 0030,
docs/storage.md "Step 2e"), and the admin names the bucket beside the id."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User

from tests.stored import rows_of
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.store import save_observations

T0 = datetime(2026, 12, 7, 9, 0, 0, 123456, tzinfo=UTC)


def _pod(i: int) -> Observation:
    return Observation(
        kind=Kind.POD,
        source=Source.API,
        observed_at=T0 + timedelta(seconds=i),
        dedupe_key=f"pod:uid-{i % 3}:{i}",
        pod_uid=f"uid-{i % 3}",
        node="node-a",
        namespace="shop",
        name=f"web-{i % 3}",
        payload={"resource_version": str(i)},
    )


@pytest.mark.django_db
def test_the_admin_lists_observations_newest_first_and_shows_one_by_its_id(client) -> None:
    """GIVEN 40 stored observations (ids across three buckets of 16) and a superuser
    WHEN the admin's list of observations and the page of each of a few are asked for
    THEN the list starts with the newest (the highest id, then down); a page shows its observation's
    decoded key; an id that is no observation's (none stored, not a number, past a bigint) sends back to
    the list rather than failing."""
    save_observations("c1", [_pod(i) for i in range(40)])
    stored = {row.id: row.dedupe_key for row in rows_of("c1", order=("id",))}
    client.force_login(User.objects.create_superuser("root", "r@example.org", "pw-123456789"))

    listing = client.get("/admin/timelines/observation/")
    assert listing.status_code == 200
    listed = [int(i) for i in re.findall(rb"/admin/timelines/observation/(\d+)/change/", listing.content)]
    assert listed[:20] == sorted(stored, reverse=True)[:20]

    for oid in (min(stored), min(stored) + 15, min(stored) + 16, max(stored)):
        page = client.get(f"/admin/timelines/observation/{oid}/change/")
        assert page.status_code == 200 and stored[oid].encode() in page.content
    for missing in (str(max(stored) + 1), "web-0", str(2**64), "0"):
        assert client.get(f"/admin/timelines/observation/{missing}/change/").status_code == 302
