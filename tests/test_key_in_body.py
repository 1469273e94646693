"""Migration 0028 on both databases: a new row holds its dedupe key in its body and the key's hash in
``key_hash``; rows stored before keep the key's text until ``compact_observations`` moves them, and a fact
stored in one form is a duplicate in the other (docs/storage.md, "Step 2b")."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from tests.stored import count_of, keys_of, put_as_before_0028, rows_of
from timelines import compact, partitions, payloads, store
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import Cluster

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("timelines", "0027_observations_by_kind_without_time")


def migrate(target: tuple[str, str] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target] if target else executor.loader.graph.leaf_nodes())
    partitions.forget_layout()
    payloads.forget()


def pod(rv: int, at, *, uid: str = "uid-a") -> Observation:
    return Observation(
        kind=Kind.POD,
        source=Source.API,
        observed_at=at,
        dedupe_key=f"pod:{uid}:{rv}",
        pod_uid=uid,
        node="node-a",
        namespace="default",
        name="web-0",
        payload={"uid": uid, "resource_version": str(rv), "note": "é"},
    )


def key_columns() -> dict[str | None, bool]:
    """Each row's ``dedupe_key`` column, and whether it has a ``key_hash``."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT dedupe_key, key_hash IS NOT NULL FROM timelines_observation ORDER BY id")
        return dict(cursor.fetchall())


def test_rows_of_both_forms_are_one_set_of_facts_and_move_both_ways():
    """GIVEN three pod snapshots stored before migration 0028 (the key's text in the row)
    WHEN 0028 runs and the store takes one of them again beside a new one
    THEN the old one is a duplicate and only the new one is stored, with its key in its body and only its
    hash in the row; every row reads back with its key and payload, and a read by key finds both forms.
    WHEN ``compact_observations`` runs THEN every row holds its key in its body, reads back the same and
    is still found, and a fact stored again is still a duplicate.
    WHEN 0028 is undone THEN every row holds its key's text again, with a body that does not; and it runs
    forwards again."""
    migrate(BEFORE)
    now = timezone.now().replace(microsecond=123456)
    cluster = Cluster.objects.create(name="c1")
    put_as_before_0028(cluster.pk, [pod(rv, now - timedelta(seconds=rv)) for rv in (1, 2, 3)])
    migrate()

    again = store.save_observations("c1", [pod(2, now - timedelta(seconds=2)), pod(4, now)])
    assert (again.stored, again.duplicates) == (1, 1)
    # An older row keeps its key's text; SQLite wrote its hash beside it (its unique constraint's column).
    hashed = connection.vendor != "postgresql"
    assert key_columns() == {"pod:uid-a:1": hashed, "pod:uid-a:2": hashed, "pod:uid-a:3": hashed, None: True}
    expected = {
        f"pod:uid-a:{rv}": {"uid": "uid-a", "resource_version": str(rv), "note": "é"} for rv in range(1, 5)
    }
    assert {row.dedupe_key: row.payload for row in rows_of("c1")} == expected
    assert count_of("c1", keys=["pod:uid-a:1", "pod:uid-a:4", "pod:uid-a:9"]) == 2

    out = io.StringIO()
    call_command("compact_observations", stdout=out)
    assert "compacted 3 observations; 0 left" in out.getvalue()
    assert key_columns() == {None: True}
    assert {row.dedupe_key: row.payload for row in rows_of("c1")} == expected
    assert count_of("c1", keys=["pod:uid-a:1", "pod:uid-a:4"]) == 2
    assert store.save_observations("c1", [pod(1, now - timedelta(seconds=1))]).duplicates == 1

    migrate(BEFORE)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT dedupe_key, body, pod_uid, node, namespace, name FROM timelines_observation ORDER BY id"
        )
        back = cursor.fetchall()
    assert sorted(key for key, *_ in back) == sorted(expected)
    for key, body, uid, node, ns, name in back:
        texts = compact.Texts(uid, node, ns, name, now)  # the time's mark is not restored: not compared
        assert compact.unpack_body(bytes(body), texts, payloads.dictionaries)[1] is None, key
    migrate()
    assert {row.dedupe_key: row.payload for row in rows_of("c1")} == expected
    assert keys_of("c1") == set(expected)


def test_a_key_with_control_characters_or_none_of_the_rows_texts_reads_back():
    """Keys are texts a parser made of what a cluster sent: one holding control characters (which the
    body's text marks use) is kept as it is, one with none of the row's texts and one naming them all
    read back exactly."""
    at = timezone.now()
    keys = ["kubelet:node-a:\x01\x05\t:line", "audit:ümlaut:⌘", "pod:uid-a:node-a:web-0:default"]
    facts = [
        Observation(
            kind=Kind.WORKER,
            source=Source.KUBELET_LOG,
            observed_at=at,
            dedupe_key=key,
            pod_uid="uid-a",
            node="node-a",
            namespace="default",
            name="web-0",
            payload={"message": key},
        )
        for key in keys
    ]
    assert store.save_observations("c1", facts).stored == 3
    assert {row.dedupe_key: row.payload["message"] for row in rows_of("c1")} == dict(
        zip(keys, keys, strict=True)
    )
    assert store.save_observations("c1", facts).duplicates == 3
