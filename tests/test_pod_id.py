"""Migration 0029 on both databases: a new row holds a pod's UUID UID as 16 bytes in ``pod_id`` (``pod_uid``
NULL); rows stored before keep its text until ``compact_observations`` moves them; reads give the same
text for either form (docs/storage.md, "Step 2c")."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tests.stored import count_of, put_as_before_0028, rows_of
from tests.test_key_in_body import migrate, pod
from timelines import observation_rows, store
from timelines.models import Cluster

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("timelines", "0028_observation_key_in_body")
STORED_BEFORE = ("timelines", "0027_observations_by_kind_without_time")  # put_as_before_0028's rows
UID = "5e0c9a1b-3f47-4d2e-8b6a-0c1d2e3f4a5b"


def uid_columns() -> list[tuple[str | None, bool]]:
    """Each row's ``pod_uid`` column and whether it holds a ``pod_id``, in id order."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pod_uid, pod_id IS NOT NULL FROM timelines_observation ORDER BY id")
        return cursor.fetchall()


def test_a_uuid_uid_is_16_bytes_and_reads_back_the_same_in_either_form():
    """GIVEN snapshots of a pod with a UUID UID and of one whose UID is not a UUID, stored before 0028
    WHEN 0029 runs and the store takes one of them again beside new ones
    THEN the old one is a duplicate; the new UUID pod's row holds the UID in ``pod_id`` only, the other
    pod's its text; a read by pod gives each pod's rows of both forms, in time order, with the UID's text.
    WHEN ``compact_observations`` runs THEN every UUID UID is in ``pod_id``, and everything reads the same.
    WHEN 0029 is undone THEN every row holds its UID's text again; and it runs forwards again."""
    migrate(STORED_BEFORE)
    now = timezone.now().replace(microsecond=123456)
    cluster = Cluster.objects.create(name="c1")
    put_as_before_0028(
        cluster.pk, [pod(rv, now - timedelta(seconds=rv), uid=uid) for uid in (UID, "uid-a") for rv in (3, 2)]
    )
    migrate()

    again = store.save_observations("c1", [pod(2, now - timedelta(seconds=2), uid=UID), pod(4, now, uid=UID),
                                           pod(4, now, uid="uid-a")])  # fmt: skip
    assert (again.stored, again.duplicates) == (2, 1) and again.pods_touched == {UID, "uid-a"}
    assert uid_columns() == [(UID, False), (UID, False), ("uid-a", False), ("uid-a", False), (None, True),
                             ("uid-a", False)]  # fmt: skip

    def read() -> dict[str, list[tuple[str, str | None]]]:
        out = {}
        for uid in (UID, "uid-a"):
            selected = observation_rows.by_pod(observation_rows.selection(cluster, pod_uids=[uid]))
            out[uid] = [(row.dedupe_key, row.pod_uid) for row in observation_rows.rows(selected)]
            assert observation_rows.values_of(observation_rows.selection(cluster, pod_uids=[uid]), "pod_uid",
                                              distinct=True) == [uid]  # fmt: skip
        return out

    expected = {uid: [(f"pod:{uid}:{rv}", uid) for rv in (3, 2, 4)] for uid in (UID, "uid-a")}
    assert read() == expected
    assert all(row.payload["uid"] == row.pod_uid for row in rows_of("c1"))
    assert count_of("c1", has_pod_uid=False) == 0 and count_of("c1", has_pod_uid=True) == 6

    out = io.StringIO()
    call_command("compact_observations", stdout=out)
    assert "compacted 4 observations; 0 left" in out.getvalue()
    assert uid_columns() == [(None, True), (None, True), ("uid-a", False), ("uid-a", False), (None, True),
                             ("uid-a", False)]  # fmt: skip
    assert read() == expected
    assert store.save_observations("c1", [pod(3, now - timedelta(seconds=3), uid=UID)]).duplicates == 1

    migrate(BEFORE)
    with connection.cursor() as cursor:  # no pod_id column any more
        cursor.execute("SELECT pod_uid FROM timelines_observation ORDER BY id")
        assert [uid for (uid,) in cursor.fetchall()] == [UID, UID, "uid-a", "uid-a", UID, "uid-a"]
    migrate()
    assert read() == expected
