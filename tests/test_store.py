"""save_observations: idempotent, bulk, and tolerant of bad records (PostgreSQL and SQLite alike)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from tests.stored import keys_of, put, rows_of
from timelines import observation_rows, store
from timelines.lifecycle.observation import EncodedObservation, InvalidObservation, Kind, Observation, Source
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]

T0 = datetime(2024, 6, 7, 6, 54, 47, 123456, tzinfo=UTC)


def obs(i: int, *, uid: str | None = "uid-a", kind: str = Kind.WORKER, **extra: object) -> Observation:
    return Observation(
        kind=kind,
        source=Source.KUBELET_LOG,
        observed_at=T0 + timedelta(microseconds=i),
        dedupe_key=f"k{i}",
        pod_uid=uid,
        node="node-a",
        namespace="default",
        name="web-0",
        payload={"transition": "sync_enter", "i": i, **extra},
    )


def test_same_batch_twice_stores_nothing_new_and_says_so():
    batch = [obs(i, uid=f"uid-{i % 3}") for i in range(50)]
    first = store.save_observations("c1", batch)
    assert (first.received, first.stored, first.duplicates, first.rejected) == (50, 50, 0, [])
    assert first.pods_touched == {"uid-0", "uid-1", "uid-2"}

    second = store.save_observations("c1", batch)
    assert (second.stored, second.duplicates) == (0, 50)
    assert second.nothing_new
    assert second.pods_touched == set()
    assert ObservationRow.objects.count() == 50


def test_duplicates_inside_one_batch_are_stored_once():
    result = store.save_observations("c1", [obs(1), obs(1), obs(2)])
    assert (result.stored, result.duplicates) == (2, 1)
    assert ObservationRow.objects.count() == 2


def test_every_repeat_within_a_batch_is_counted():
    """GIVEN one fact delivered three times in a batch (a re-sent watch event, a log file read twice) beside
    another WHEN the batch is stored THEN the fact is stored once and its two repeats are counted as
    duplicates: each record received is stored, a duplicate or rejected (save_observations' contract)."""
    result = store.save_observations("c1", [obs(1), obs(1), obs(2), obs(1)])
    assert (result.received, result.stored, result.duplicates) == (4, 2, 2)
    assert result.received == result.stored + result.duplicates + len(result.rejected)


def test_dedupe_key_is_per_cluster():
    store.save_observations("c1", [obs(1)])
    result = store.save_observations("c2", [obs(1)])
    assert result.stored == 1
    assert ObservationRow.objects.count() == 2


def test_bad_record_is_named_and_the_rest_is_stored(caplog):
    """GIVEN a batch with refused records among good ones WHEN it is stored THEN the good ones are, and each
    refused one is named with why, in the answer and in the operator's log (one warning each, naming the
    record's key and the reason)."""
    good = [obs(1), obs(2)]
    naive = {
        "kind": Kind.WORKER,
        "source": Source.KUBELET_LOG,
        "observed_at": datetime(2024, 1, 1),  # naive: must be refused
        "dedupe_key": "naive-one",
    }
    unserializable = obs(3, blob=object())
    # A name longer than Kubernetes allows (and the column holds), as a mapping: the contract refuses it.
    too_long = {
        "kind": Kind.POD,
        "source": Source.API,
        "observed_at": T0,
        "dedupe_key": "long-name",
        "name": "x" * 300,
    }
    result = store.save_observations("c1", [good[0], naive, unserializable, too_long, good[1]])
    assert result.stored == 2
    reasons = {r.key: r.reason for r in result.rejected}
    assert set(reasons) == {"naive-one", "k3", "long-name"}
    assert "timezone-aware" in reasons["naive-one"]
    assert "JSON" in reasons["k3"]
    assert "name must be 1-253 characters, got 300" in reasons["long-name"]
    assert sorted(keys_of(None)) == ["k1", "k2"]
    logged = [r.getMessage() for r in caplog.records if r.name == "timelines.store"]
    assert logged == [
        f"rejected observation {key}: {reasons[key]}" for key in ("naive-one", "k3", "long-name")
    ]


def test_mapping_records_and_unknown_fields():
    record = {
        "kind": Kind.EVENT,
        "source": Source.API,
        "observed_at": "2024-06-07T06:54:47.000001+00:00",
        "dedupe_key": "event:1:5",
        "pod_uid": "uid-b",
        "payload": {"reason": "Killing"},
    }
    result = store.save_observations("c1", [record, {**record, "dedupe_key": "x", "colour": "red"}])
    assert result.stored == 1
    assert result.rejected[0].key == "x" and "colour" in result.rejected[0].reason


def test_microseconds_and_payload_survive_the_round_trip():
    store.save_observations("c1", [obs(7, text='quote " backslash \\ nul \x00 é', spelled="\\u0000 \\\x00")])
    (row,) = rows_of("c1")
    assert row.observed_at == T0 + timedelta(microseconds=7)
    assert row.observed_at.tzinfo is not None
    assert row.payload["text"] == 'quote " backslash \\ nul \ufffd é'
    assert row.payload["spelled"] == "\\u0000 \\\ufffd"  # the text \u0000 is no NUL: kept as it was
    assert row.payload["i"] == 7
    assert (row.node, row.namespace, row.name, row.pod_uid) == ("node-a", "default", "web-0", "uid-a")


def test_a_nul_in_a_name_is_refused_by_name_and_the_rest_is_stored(derive_stage_off):
    """GIVEN observations whose node, namespace, name or pod UID hold NUL (a hostile or broken sender; no
    Kubernetes name can: a namespace is a DNS-1123 label, a node a DNS-1123 subdomain) beside a valid one
    WHEN they are stored THEN each is refused naming the field (issue #35: a namespace holding NUL made
    a dirty key that failed every derive batch), and the valid one is stored and marked."""
    from timelines.models import DirtyBatch

    def hostile(key: str, **fields: str) -> dict[str, object]:
        return {"kind": Kind.POD, "source": Source.API, "observed_at": T0, "dedupe_key": key, **fields}

    batch = [
        hostile("n", node="a\x00b"),
        hostile("ns", namespace="evil\x00ns", name="p"),
        hostile("name", namespace="default", name="p\x00"),
        hostile("uid", pod_uid="u\x00"),
        obs(1),
    ]
    result = store.save_observations("c1", batch)
    assert result.stored == 1
    reasons = {r.key: r.reason for r in result.rejected}
    assert set(reasons) == {"n", "ns", "name", "uid"}
    assert reasons["n"].startswith("node 'a\\x00b' is not a DNS-1123 subdomain")
    assert reasons["ns"].startswith("namespace 'evil\\x00ns' is not a DNS-1123 label")
    assert "control or format character" in reasons["name"]
    assert reasons["uid"].startswith("pod_uid 'u\\x00'")
    marked = {(kind, key) for b in DirtyBatch.objects.all() for kind, key, *_ in b.keys}
    assert marked == {("pod", "uid-a")}


def test_observation_without_pod_touches_no_pod():
    result = store.save_observations("c1", [obs(1, uid=None, kind=Kind.NODE)])
    assert result.stored == 1 and result.pods_touched == set()


def test_read_only_cluster_refuses_writes():
    Cluster.objects.create(name="imported", origin=Cluster.Origin.IMPORTED, read_only=True)
    with pytest.raises(PermissionError, match="imported"):
        store.save_observations("imported", [obs(1)])


def test_invalid_cluster_name_is_refused():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="ASCII letters"):
        store.save_observations("bad name!", [obs(1)])


def test_retention_drops_only_old_data_and_keeps_imported_clusters():
    from timelines.models import Interval, Pod

    store.save_observations("c1", [obs(1), obs(2)])
    cluster = Cluster.objects.get(name="c1")
    old, recent = T0 - timedelta(days=30), T0 - timedelta(days=1)
    observation_rows.selection(cluster, keys=["k1"]).update(observed_at=old)
    Interval.objects.create(
        cluster=cluster, pod_uid="a", lane="worker", state="setup", start=old, end=old, source="observed"
    )
    Interval.objects.create(
        cluster=cluster, pod_uid="b", lane="worker", state="setup", start=old, end=None, source="observed"
    )
    Pod.objects.create(cluster=cluster, uid="a", deleted_at=old)
    Pod.objects.create(cluster=cluster, uid="b", deleted_at=recent)
    imported = Cluster.objects.create(name="bundle", origin=Cluster.Origin.IMPORTED, read_only=True)
    put(imported, [{"kind": "worker", "source": "kubelet_log", "observed_at": old, "dedupe_key": "x"}])

    assert store.apply_retention(14, now=T0) == 1
    assert sorted(keys_of(None)) == ["k2", "x"]
    # (uid-a's own rows are derived from its observations, on the embedded default as they are stored.)
    assert list(Interval.objects.filter(pod_uid__in=["a", "b"]).values_list("pod_uid", flat=True)) == ["b"]
    assert list(Pod.objects.filter(uid__in=["a", "b"]).values_list("uid", flat=True)) == ["b"]
    assert store.apply_retention(0, now=T0) == 0


@pytest.mark.postgres
def test_postgres_uses_the_copy_path_and_a_brin_index():
    assert connection.vendor == "postgresql"
    store.save_observations("c1", [obs(i) for i in range(10)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'obs_observed_brin'")
        (indexdef,) = cursor.fetchone()
    assert "brin" in indexdef.lower()
    assert ObservationRow.objects.count() == 10


def test_encoded_observation_is_stored_as_its_bytes_and_reads_back_like_any_other():
    """GIVEN an observation whose payload arrives as JSON bytes (the typed pod path) beside a plain one
    WHEN both are saved in one batch
    THEN the stored payload is those bytes' object (a NUL escape made U+FFFD, as for any payload)."""
    encoded = EncodedObservation(
        kind=Kind.POD,
        source=Source.API,
        observed_at=T0,
        dedupe_key="pod:uid-e:1",
        pod_uid="uid-e",
        node="node-a",
        namespace="default",
        name="web-e",
        payload_json=b'{"phase":"Running","message":"nul \\u0000 here","labels":{"app":"web"}}',
    )
    result = store.save_observations("c1", [encoded, obs(1)])
    assert result.stored == 2 and result.pods_touched == {"uid-e", "uid-a"}
    (row,) = rows_of("c1", keys=["pod:uid-e:1"])
    assert row.payload == {"phase": "Running", "message": "nul \ufffd here", "labels": {"app": "web"}}
    assert (row.pod_uid, row.node, row.name, row.observed_at) == ("uid-e", "node-a", "web-e", T0)
    assert store.save_observations("c1", [encoded]).duplicates == 1


def test_encoded_observation_keeps_the_contract():
    with pytest.raises(InvalidObservation, match="payload_json"):
        EncodedObservation(
            kind=Kind.POD, source=Source.API, observed_at=T0, dedupe_key="k", payload_json=b"[]"
        )
    with pytest.raises(InvalidObservation, match="timezone-aware"):
        EncodedObservation(
            kind=Kind.POD, source=Source.API, observed_at=T0.replace(tzinfo=None), dedupe_key="k"
        )
    encoded = EncodedObservation(
        kind=Kind.POD, source=Source.API, observed_at=T0, dedupe_key="k", payload_json=b'{"a":[1,2]}'
    )
    assert encoded.payload == {"a": [1, 2]} and encoded.decoded().payload == {"a": [1, 2]}
    assert encoded.decoded().sort_key == encoded.sort_key
