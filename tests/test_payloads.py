"""The stored payload (issue #37, docs/storage.md "Step 1: the body"): an observation's payload is stored
compressed in ``body``, with zstd dictionaries trained per cluster and kind, and reads back exactly; rows
stored before it (jsonb ``payload``) read back as they were and move to the body with
``manage.py compact_observations``, batch by batch, resumably."""

from __future__ import annotations

import io
import string
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
import zstandard
from django.core.management import call_command
from django.db import connection, transaction
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.stored import put, rows_of
from timelines import compact, observation_rows, payloads
from timelines.compact import CorruptRow, Dictionaries, Texts
from timelines.management.commands import compact_observations
from timelines.models import Cluster, PayloadDictionary
from timelines.models import Observation as ObservationRow
from timelines.store import cluster_for, save_observations

T0 = datetime(2026, 12, 6, 10, 0, 0, 123456, tzinfo=UTC)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
names = st.text(string.ascii_lowercase + "-.0123456789", max_size=20) | st.text(max_size=6)


# A dictionary trained on pod-like payloads (SYNTHETIC), to compress with in the property below.
TRAINED = Dictionaries(
    {
        5: compact.train(
            [
                orjson.dumps(
                    {
                        "metadata": {"name": f"web-{i}", "labels": {"app": f"a{i % 9}"}},
                        "n": [i, "x" * (i % 50)],
                    }
                )
                for i in range(400)
            ],
            4096,
        )
    }
)


@settings(max_examples=300, deadline=None)
@given(
    payload=st.dictionaries(st.text(), json_values, max_size=6),
    uid=st.none() | st.just(str(uuid.UUID(int=7))) | names,
    node=names,
    namespace=names,
    name=names,
    seconds=st.integers(0, 10**6),
    micro=st.integers(0, 999_999),
    copies=st.booleans(),
    key=st.none() | st.text(st.characters(blacklist_characters="\x00", codec="utf-8"), max_size=80),
)
def test_a_body_reads_back_the_same_json_text(
    payload: dict[str, Any],
    uid: str | None,
    node: str,
    namespace: str,
    name: str,
    seconds: int,
    micro: int,
    copies: bool,
    key: str | None,
) -> None:
    """Whatever the payload, the dedupe key (none, as before migration 0028, or any text without NUL) and
    the row's texts (empty, overlapping, holding control characters, spelled inside the payload and the
    key or not), the body gives back the very JSON text and key it was made of."""
    at = T0 + timedelta(seconds=seconds, microseconds=micro)
    if copies:  # the row's own texts inside its payload, as a pod's snapshot holds its name, node, UID, time
        payload = {**payload, "n": [uid, node, namespace, name, at.isoformat(), f"{name}.{namespace}"]}
        if key is not None:  # a stored key holds no NUL: the store writes U+FFFD for it, as for the texts
            key = f"{key}:{uid}:{node}/{namespace}/{name}@{at.isoformat()}".replace("\x00", "\ufffd")
    text = orjson.dumps(payload)
    texts = Texts(uid, node, namespace, name, at)
    for dict_id in (0, 5):
        body = compact.pack_body(text, texts, TRAINED, dict_id, key)
        assert body[0] < 0x20  # never taken for the JSON text of a row stored before bodies
        read = Dictionaries(load={5: TRAINED.raw(5)}.get)
        assert compact.unpack_body(body, texts, read) == (text, key)
        assert compact.body_key(body, texts, read) == key  # the key alone, as evidence reads take it


def _documented_body(text: bytes, texts: Texts, dictionaries: Dictionaries, dict_id: int) -> bytes:
    """A body as docs/storage.md ("Step 1: the body") spells it, written out the plain way: the row's pod
    UID, node, name and namespace (each when not empty and free of control characters), then its time
    (UTC ISO 8601), replaced in that order by the bytes 0x01-0x05; compressed when that is shorter, after
    a flags byte (2: texts replaced, +1: compressed) and the dictionary id."""
    data = text
    for value, mark in zip(
        (texts.pod_uid or "", texts.node, texts.name, texts.namespace), b"\x01\x02\x03\x04", strict=True
    ):
        if value and not any(ord(c) < 0x20 for c in value):
            data = data.replace(value.encode(), bytes([mark]))
    data = data.replace(texts.observed_at.astimezone(UTC).isoformat().encode(), b"\x05")
    packed = dictionaries.compress(dict_id, data)
    head = bytes([3]) + bytes([dict_id])  # ids below 128: one varint byte
    return head + packed if len(packed) + len(head) - 1 < len(data) else bytes([2]) + data


@settings(max_examples=300, deadline=None)
@given(
    payload=st.dictionaries(st.text(), json_values, max_size=4),
    rows=st.lists(
        st.tuples(
            st.none() | st.just(str(uuid.UUID(int=7))) | names,
            names,
            names,
            names,
            st.sampled_from([0, 1, 2]),  # which time: shared with the row before, the same instant, another
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_a_body_is_the_documented_bytes_for_any_texts_and_times(
    payload: dict[str, Any], rows: list[tuple[str | None, str, str, str, int]]
) -> None:
    """The body's bytes are the documented ones (``_documented_body``) for rows that repeat their texts,
    share one time object (a list page's rows), give the same instant in another zone, or a new one: what
    ``pack_body`` remembers between rows changes no byte."""
    at = T0
    for uid, node, namespace, name, which in rows:
        if which == 1:
            at = at.astimezone(timezone(timedelta(hours=2)))  # the same instant, another object and zone
        elif which == 2:
            at = at + timedelta(microseconds=1 + len(name))
        texts = Texts(uid, node, namespace, name, at)
        row_payload = {**payload, "n": [uid, node, namespace, name, at.astimezone(UTC).isoformat()]}
        text = orjson.dumps(row_payload)
        for dict_id in (0, 5):
            expected = _documented_body(text, texts, TRAINED, dict_id)
            assert compact.pack_body(text, texts, TRAINED, dict_id) == expected


def test_a_row_s_texts_are_one_byte_each_in_its_body() -> None:
    """A pod snapshot names its UID, node, namespace, name and time again and again; the body holds each
    as one byte, so those texts cost nothing however often the payload spells them."""
    uid = "0b7b3f9e-6a4e-4c55-9d8e-3f1a2b3c4d5e"
    texts = Texts(uid, "worker-1", "shop", "web-7f9c6d5b8-x2x4q", T0)
    payload = {"uid": uid, "nodeName": "worker-1", "hostname": "web-7f9c6d5b8-x2x4q", "ns": "shop"}
    body = compact.pack_body(orjson.dumps(payload), texts, Dictionaries())
    assert uid.encode() not in body and b"worker-1" not in body and b"web-7f9c6d5b8-x2x4q" not in body
    assert len(body) < len(orjson.dumps(payload)) - 60


def test_a_body_compressed_with_a_dictionary_not_stored_is_refused_by_name() -> None:
    text = orjson.dumps({"metadata": {"name": "web", "labels": {"app": "web"}}} | {"pad": "x" * 400})
    dictionaries = Dictionaries({9: compact.train([text] * 300, 2048)})
    body = compact.pack_body(text, Texts(None, "", "", "", T0), dictionaries, 9)
    assert compact.body_dictionary(body) == 9
    with pytest.raises(CorruptRow, match="dictionary 9 is not stored"):
        compact.unpack_body(body, Texts(None, "", "", "", T0), Dictionaries())
    with pytest.raises(CorruptRow, match="not with a flags byte"):
        compact.unpack_body(b"{}", Texts(None, "", "", "", T0), dictionaries)


def test_threads_share_dictionaries() -> None:
    """The store's writer threads compress with one ``Dictionaries``: each thread has its own zstd objects
    (python-zstandard's are not thread-safe), and every body reads back."""
    texts = [
        orjson.dumps({"i": i, "spec": {"containers": [{"name": "c", "image": f"img:{i % 7}"}]}})
        for i in range(400)
    ]
    shared = Dictionaries({1: compact.train(texts, 4096)})
    out: dict[int, bytes] = {}

    def work(start: int) -> None:
        for i in range(start, 400, 4):
            out[i] = compact.pack_body(texts[i], Texts(None, "", "", "", T0), shared, 1)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [compact.unpack_body(out[i], Texts(None, "", "", "", T0), shared)[0] for i in range(400)] == texts


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(max_size=300), st.sampled_from([2, 4, 6]), st.sampled_from([0, 5])),
        max_size=8,
    )
)
def test_a_batch_s_bodies_are_the_bytes_of_its_rows_packed_one_by_one(
    items: list[tuple[bytes, int, int]],
) -> None:
    """``pack_plains`` compresses each dictionary's rows of a batch in one call (``compress_each``): the
    bodies are those ``pack_plain`` makes of each row alone, in order, for any mix of dictionaries, of
    rows that compress and rows that do not, empty ones and batches of one or none."""
    assert compact.pack_plains(items, TRAINED) == [
        compact.pack_plain(data, flags, TRAINED, dict_id) for data, flags, dict_id in items
    ]


@pytest.mark.django_db(transaction=True)
def test_a_stored_batch_is_compressed_in_one_call_a_dictionary(monkeypatch: pytest.MonkeyPatch) -> None:
    """python-zstandard lets go of the GIL around each compression, and a store thread that let go waits
    to get it back while the watch's thread parses: row by row, that was 109 µs a row against 1.8 in one
    call. So a batch's rows are compressed together, in one call for each dictionary they use: here the
    rows before the first dictionary and the rows from the one that trains it on; and no row alone."""
    calls: list[tuple[int, int]] = []
    each = Dictionaries.compress_each

    def recorded(self: Dictionaries, dict_id: int, data: list[Any]) -> list[bytes]:
        calls.append((dict_id, len(data)))
        return each(self, dict_id, data)

    def refused(self: Dictionaries, dict_id: int, data: Any) -> bytes:
        raise AssertionError("a row of a batch compressed alone")

    monkeypatch.setattr(Dictionaries, "compress_each", recorded)
    monkeypatch.setattr(Dictionaries, "compress", refused)
    pods = _pods("c1", payloads.FIRST_WINDOW + 100)
    assert save_observations("c1", pods).stored == len(pods)
    cluster = Cluster.objects.get(name="c1")
    stored = PayloadDictionary.objects.get(cluster_id=cluster.pk, kind="pod")
    assert calls == [(0, payloads.FIRST_WINDOW - 1), (stored.id, 101)]
    monkeypatch.undo()
    payloads.forget()
    assert _read_back(cluster) == _as_stored(pods)


def _unsized(dictionaries: Dictionaries, dict_id: int, data: bytes) -> bytes:
    """A frame as the store wrote them before they gave their content size (magicless, no checksum)."""
    params = zstandard.ZstdCompressionParameters.from_level(
        compact.LEVEL,
        format=zstandard.FORMAT_ZSTD1_MAGICLESS,
        write_checksum=False,
        write_content_size=False,
        write_dict_id=False,
    )
    zdict = zstandard.ZstdCompressionDict(dictionaries.raw(dict_id)) if dict_id else None
    return zstandard.ZstdCompressor(dict_data=zdict, compression_params=params).compress(data)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.text(max_size=8), json_values, max_size=4),
            st.sampled_from([0, 5]),
            st.sampled_from(["sized", "unsized", "plain"]),
            st.none() | st.text(st.characters(blacklist_characters="\x00", codec="utf-8"), max_size=20),
        ),
        max_size=8,
    )
)
def test_a_batch_of_bodies_reads_back_as_each_body_alone(
    items: list[tuple[dict[str, Any], int, str, str | None]],
) -> None:
    """``unpack_bodies`` decompresses a batch's frames that give their size in one call a dictionary: each
    body reads back as ``unpack_body`` reads it alone, whatever the mix of dictionaries, frames written
    before they gave their size (decompressed alone) and bodies stored uncompressed."""
    bodies, texts = [], []
    for i, (payload, dict_id, form, key) in enumerate(items):
        one = Texts(str(uuid.UUID(int=i)), "node-1", "shop", f"web-{i}", T0 + timedelta(seconds=i))
        data, flags = compact.plain_body(orjson.dumps(payload), one, key)
        if form == "plain":
            body = bytes([flags]) + data
        elif form == "sized":
            body = compact.pack_plains([(data, flags, dict_id)], TRAINED)[0]
        else:  # compressed, whether or not that is shorter: the frame is what is tested
            body = bytes([flags | 1, dict_id]) + _unsized(TRAINED, dict_id, data)
        bodies.append(body)
        texts.append(one)
    alone = [compact.unpack_body(b, t, TRAINED) for b, t in zip(bodies, texts, strict=True)]
    assert compact.unpack_bodies(bodies, texts, TRAINED) == alone
    assert alone == [(orjson.dumps(p), k) for p, _d, _f, k in items]


def test_a_broken_frame_in_a_batch_is_refused_by_name_as_alone() -> None:
    """A frame that does not decompress fails its batch's one call; the batch is then decompressed row by
    row, so the error is the one that row gives alone (``CorruptRow``), and the other rows read back."""
    frames = [compact.pack_plains([(b'{"a":%d}' % i * 20, 2, 5)], TRAINED)[0][2:] for i in range(3)]
    broken = frames[1][:-3] + b"\xff\xff\xff"
    assert TRAINED.decompress_each(5, [frames[0], frames[2]]) == [b'{"a":0}' * 20, b'{"a":2}' * 20]
    with pytest.raises(CorruptRow, match="zstd"):
        TRAINED.decompress(5, broken)
    with pytest.raises(CorruptRow, match="zstd"):
        TRAINED.decompress_each(5, [frames[0], broken, frames[2]])


def _decompressed_alone(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The frames decompressed one by one from now on (``Dictionaries.decompress``), in order."""
    alone: list[bytes] = []
    decompress = Dictionaries.decompress

    def counted(self: Dictionaries, dict_id: int, frame: bytes) -> bytes:
        alone.append(frame)
        return decompress(self, dict_id, frame)

    monkeypatch.setattr(Dictionaries, "decompress", counted)
    return alone


def test_one_call_decompresses_at_most_batch_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call's output is allocated at once: frames are decompressed together up to ``BATCH_BYTES`` of
    content a call, and a frame that says it holds more is decompressed alone; all read back in order."""
    data = [b'{"row":%d,"pad":"%s"}' % (i, b"x" * (40 if i != 3 else 400)) for i in range(7)]
    frames = [compact.pack_plains([(one, 2, 5)], TRAINED)[0][2:] for one in data]
    monkeypatch.setattr(compact, "BATCH_BYTES", 2 * len(data[0]))
    alone = _decompressed_alone(monkeypatch)
    assert TRAINED.decompress_each(5, frames) == data
    # Rows 0-1, 2 and 4, 5-6 in a call each; 3 says it holds more than a call takes: alone.
    assert alone == [frames[3]]


@pytest.mark.django_db(transaction=True)
def test_readers_decompress_a_batch_of_rows_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """python-zstandard lets go of the GIL around each decompression, and a reader that let go waits to
    get it back while another thread of its process runs Python (the web server's event loop, the
    collector's watch in the demo's one process): row by row, 674 µs a row against 2.4 alone. The readers
    (``iter_rows``, ``facts``, the export, the evidence's ``keys_by_id``) decode their rows in batches,
    each dictionary's frames in one call: no stored row is decompressed alone, and every one reads back."""
    pods = _pods("c1", payloads.FIRST_WINDOW + 100)
    save_observations("c1", pods)
    payloads.wait_trained()
    cluster = Cluster.objects.get(name="c1")
    alone = _decompressed_alone(monkeypatch)
    payloads.forget()  # read as another process would, the dictionaries loaded from their table
    assert _read_back(cluster) == _as_stored(pods)
    ids = dict(ObservationRow.objects.filter(cluster=cluster).values_list("id", "key_hash"))
    payloads.forget()
    keys = observation_rows.keys_by_id(cluster, ids)  # the evidence's keys alone, from the bodies
    assert sorted(keys.values()) == sorted(p["dedupe_key"] for p in pods) and set(keys) == set(ids)
    assert alone == []


def _pods(cluster: str, n: int, *, start: int = 0) -> list[dict[str, Any]]:
    out = []
    for i in range(start, start + n):
        uid = str(uuid.UUID(int=i + 1))
        name = f"web-{i}"
        out.append(
            {
                "kind": "pod",
                "source": "api",
                "observed_at": T0 + timedelta(seconds=i),
                "dedupe_key": f"pod:{uid}:{i}",
                "pod_uid": uid,
                "node": f"node-{i % 3}",
                "namespace": "shop",
                "name": name,
                "payload": {
                    "metadata": {"name": name, "namespace": "shop", "uid": uid, "labels": {"app": "web"}},
                    "spec": {
                        "nodeName": f"node-{i % 3}",
                        "containers": [{"name": "app", "image": "web:1.2"}],
                    },
                    "status": {
                        "phase": "Running" if i % 2 else "Pending",
                        "startTime": "2026-12-06T10:00:00Z",
                    },
                    "ratio": -0.0 if i == 3 else 0.5,  # jsonb made -0.0 0.0; a body keeps it
                },
            }
        )
    return out


def _stored_bodies(cluster: Cluster) -> dict[str, bytes | None]:
    """Each row's body by dedupe key, in id order."""
    bodies = dict(ObservationRow.objects.filter(cluster=cluster).values_list("id", "body"))
    return {
        row.dedupe_key: (bytes(bodies[row.id]) if bodies[row.id] is not None else None)
        for row in rows_of(cluster, order=("id",))
    }


def _as_stored(pods: list[dict[str, Any]]) -> dict[str, Any]:
    return {p["dedupe_key"]: orjson.dumps(p["payload"]) for p in pods}


def _texts(pod: dict[str, Any]) -> Texts:
    return Texts(pod["pod_uid"], pod["node"], pod["namespace"], pod["name"], pod["observed_at"])


def _read_back(cluster: Cluster) -> dict[str, Any]:
    return {row.dedupe_key: orjson.dumps(row.payload) for row in rows_of(cluster)}


@pytest.mark.django_db(transaction=True)
def test_a_cluster_s_kind_gets_a_dictionary_and_its_rows_read_back_in_another_process() -> None:
    """Outside a transaction (the collector's batches) the store trains a dictionary where a cluster's
    kind packs its ``FIRST_WINDOW``-th row, stores it, and compresses that row and the next ones with it;
    a process that never saw it (``forget``) reads it from its table when a row names it."""
    pods = _pods("c1", payloads.FIRST_WINDOW + 100)
    for at in range(0, len(pods), 50):
        save_observations("c1", pods[at : at + 50])
        payloads.wait_trained()
    cluster = Cluster.objects.get(name="c1")
    stored = PayloadDictionary.objects.get(cluster_id=cluster.pk, kind="pod")
    assert stored.samples >= payloads.FIRST_WINDOW
    named = [compact.body_dictionary(b) for b in _stored_bodies(cluster).values() if b is not None]
    # The row that brought the last sample it was trained on, and every later one.
    first = named.index(stored.id)
    assert first == payloads.FIRST_WINDOW - 1 and stored.samples == payloads.FIRST_WINDOW
    assert set(named[first:]) == {stored.id} and stored.id not in named[:first]
    payloads.forget()
    assert _read_back(cluster) == _as_stored(pods)


def _record_training(monkeypatch: pytest.MonkeyPatch) -> list[list[bytes]]:
    """The samples of each dictionary trained from now on, in order (``compact.train`` still trains)."""
    trained: list[list[bytes]] = []
    train = compact.train

    def recorded(samples: list[Any], size: int = 16384) -> bytes:
        trained.append([bytes(x) for x in samples])
        return train(samples, size)

    monkeypatch.setattr(compact, "train", recorded)
    return trained


@pytest.mark.django_db(transaction=True)
def test_each_new_dictionary_waits_a_longer_window_and_learns_from_its_last_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN windows of 50 rows, then 100, then 200 (``FIRST_WINDOW`` 50, growing 2×, up to 200), and 40
    samples a window
    WHEN a cluster's pods are stored batch by batch
    THEN a dictionary comes with the 50th row (trained on 40 of the first 50), the next after 100 more, the
    next after 200 more, and one more after each 200 since; each is trained on the last rows of its window,
    the rows after it name it; a process that never saw them (``forget``) goes on from the newest with the
    window that follows it; every row reads back."""
    monkeypatch.setattr(payloads, "FIRST_WINDOW", 50)
    monkeypatch.setattr(payloads, "WINDOW_GROWTH", 2)
    monkeypatch.setattr(payloads, "LONGEST_WINDOW", 200)
    monkeypatch.setattr(payloads, "SAMPLES", 40)
    trained = _record_training(monkeypatch)
    pods = _pods("c5", 750)
    for at in range(0, 550, 10):
        save_observations("c5", pods[at : at + 10])
        payloads.wait_trained()
    cluster = Cluster.objects.get(name="c5")
    made = list(PayloadDictionary.objects.filter(cluster_id=cluster.pk, kind="pod").order_by("id"))
    assert [d.samples for d in made] == [40, 40, 40, 40]  # after rows 50, 150, 350 and 550
    bodies = [b for b in _stored_bodies(cluster).values() if b is not None]
    data = [compact.plain_body(orjson.dumps(p["payload"]), _texts(p), p["dedupe_key"])[0] for p in pods[:550]]
    assert trained[1] == data[110:150] and trained[2] == data[310:350] and trained[3] == data[510:550]
    named = [compact.body_dictionary(b) for b in bodies]
    assert (
        set(named[:49]) <= {0, None}
        and set(named[49:150]) == {made[0].id}
        and set(named[350:550]) == {made[2].id}
    )

    payloads.forget()  # a new process: the newest dictionary, and a window of 200 after it
    for at in range(550, 750, 10):
        save_observations("c5", pods[at : at + 10])
        payloads.wait_trained()
    after = list(PayloadDictionary.objects.filter(cluster_id=cluster.pk, kind="pod").order_by("id"))
    assert len(after) == 5 and trained[4] == [
        compact.plain_body(orjson.dumps(p["payload"]), _texts(p), p["dedupe_key"])[0] for p in pods[710:750]
    ]
    named = [compact.body_dictionary(b) for b in _stored_bodies(cluster).values() if b is not None]
    assert set(named[550:750]) == {made[3].id}
    payloads.forget()
    assert _read_back(cluster) == _as_stored(pods)


@pytest.mark.postgres  # two writer threads at once
@pytest.mark.django_db(transaction=True)
def test_a_writer_waits_for_its_kind_s_first_dictionary_that_another_writer_trains(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN a writer thread training a kind's first dictionary (its ``FIRST_WINDOW``-th row)
    WHEN another thread stores rows of that kind meanwhile
    THEN it waits for the dictionary and compresses its rows with it, rather than without one; all read
    back."""
    started, release = threading.Event(), threading.Event()
    train = compact.train

    def slow_train(samples: list[Any], size: int = 16384) -> bytes:
        started.set()
        assert release.wait(30), "the test never released the training"
        return train(samples, size)

    monkeypatch.setattr(compact, "train", slow_train)
    pods = _pods("c7", payloads.FIRST_WINDOW + 20)
    save_observations("c7", pods[:1])  # the cluster and its kind, before the threads

    def store(batch: list[dict[str, Any]]) -> None:
        try:
            save_observations("c7", batch)
        finally:
            connection.close()

    first = threading.Thread(target=store, args=(pods[1 : payloads.FIRST_WINDOW],))
    first.start()
    assert started.wait(30)
    other = threading.Thread(target=store, args=(pods[payloads.FIRST_WINDOW :],))
    other.start()
    other.join(0.5)
    assert other.is_alive()  # waiting for the dictionary, not storing without it
    release.set()
    first.join(30)
    other.join(30)
    cluster = Cluster.objects.get(name="c7")
    stored = PayloadDictionary.objects.get(cluster_id=cluster.pk, kind="pod")
    bodies = _stored_bodies(cluster)
    assert {compact.body_dictionary(bodies[p["dedupe_key"]]) for p in pods[payloads.FIRST_WINDOW - 1 :]} == {
        stored.id
    }
    payloads.forget()
    assert _read_back(cluster) == _as_stored(pods)


def _churning(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``pods`` as a churn shows them (SYNTHETIC): restarted, with container statuses whose image digests
    and messages no settled pod of ``_pods`` holds, the same in every pod."""
    digest = "0f3c" * 16
    for pod in pods:
        pod["payload"]["status"] |= {
            "containerStatuses": [
                {
                    "name": "app",
                    "imageID": f"registry.example/team/web@sha256:{digest}",
                    "containerID": f"containerd://{digest[::-1]}",
                    "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s " * 4}},
                }
            ]
        }
    return pods


@pytest.mark.django_db(transaction=True)
def test_a_stale_dictionary_is_replaced_by_one_of_the_rows_that_made_it_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN a dictionary trained on a first list of settled pods, checked every 20 rows, a new one
    sampled early (40 rows) once bodies grow 1.5 times and 60 rows have passed, and a regular window
    far away
    WHEN more settled pods are stored, then pods as a churn shows them
    THEN the settled pods keep the first dictionary (their bodies do not grow); the churn's bodies grow,
    and the next 40 churn rows are the samples of a second dictionary, which the rows after them name and
    compress smaller; every row reads back."""
    monkeypatch.setattr(payloads, "FIRST_WINDOW", 50)
    monkeypatch.setattr(payloads, "WINDOW_GROWTH", 1000)
    monkeypatch.setattr(payloads, "SAMPLES", 40)
    monkeypatch.setattr(payloads, "DRIFT_ROWS", 20)
    monkeypatch.setattr(payloads, "EARLY_AFTER", 60)
    trained = _record_training(monkeypatch)
    pods = _pods("c6", 250) + _churning(_pods("c6", 250, start=250))

    def store(lo: int, hi: int) -> None:
        for at in range(lo, hi, 10):
            save_observations("c6", pods[at : at + 10])
            payloads.wait_trained()

    store(0, 250)
    cluster = Cluster.objects.get(name="c6")
    assert PayloadDictionary.objects.filter(cluster_id=cluster.pk).count() == 1
    store(250, 500)
    made = list(PayloadDictionary.objects.filter(cluster_id=cluster.pk, kind="pod").order_by("id"))
    assert len(made) == 2 and made[1].samples == 40
    data = [compact.plain_body(orjson.dumps(p["payload"]), _texts(p), p["dedupe_key"])[0] for p in pods]
    first = data.index(trained[1][0])
    assert 250 < first < 330 and trained[1] == data[first : first + 40]  # churn rows, after the check
    bodies = [b for b in _stored_bodies(cluster).values() if b is not None]
    named = [compact.body_dictionary(b) for b in bodies]
    since = named.index(made[1].id)
    assert first + 40 <= since <= first + 50 and set(named[since:]) == {made[1].id}
    assert set(named[50:since]) == {made[0].id}

    def mean(sizes: list[bytes]) -> float:
        return sum(map(len, sizes)) / len(sizes)

    assert mean(bodies[250:first]) > 1.5 * mean(bodies[60:250])  # the churn with the list's dictionary
    assert mean(bodies[since:]) < mean(bodies[250:first]) / 2  # and with its own
    payloads.forget()
    assert _read_back(cluster) == _as_stored(pods)


@pytest.mark.postgres  # SQLite trains on the storing thread (one writer at a time)
@pytest.mark.django_db(transaction=True)
def test_the_collector_s_batches_go_on_while_a_dictionary_trains_and_none_names_it_before_it_is_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GIVEN PostgreSQL, where the store hands a kind's training after its first to a thread of its own
    WHEN batches are stored while that training has not finished
    THEN they are stored at once, with the kind's previous dictionary; the batches after it is stored
    use it; all read back."""
    monkeypatch.setattr(payloads, "WINDOW_GROWTH", 2)  # the second dictionary after 400 more rows
    pods = _pods("c4", payloads.FIRST_WINDOW + 600)
    first, window, during, after = pods[:200], pods[200:600], pods[600:700], pods[700:]
    save_observations("c4", first)  # the first dictionary, trained where its last sample is packed
    cluster = Cluster.objects.get(name="c4")
    previous = PayloadDictionary.objects.get(cluster_id=cluster.pk, kind="pod")
    release = threading.Event()
    train = compact.train

    def slow_train(samples: list[Any], size: int = 16384) -> bytes:
        assert release.wait(30), "the test never released the training"
        return train(samples, size)

    monkeypatch.setattr(compact, "train", slow_train)
    save_observations("c4", window)  # brings the samples: its training is handed over
    save_observations("c4", during)  # the training waits on ``release``: this batch was not held up
    assert PayloadDictionary.objects.filter(cluster_id=cluster.pk).count() == 1
    release.set()
    payloads.wait_trained()
    stored = PayloadDictionary.objects.filter(cluster_id=cluster.pk, kind="pod").latest("id")
    save_observations("c4", after)
    named = [compact.body_dictionary(b) for b in _stored_bodies(cluster).values() if b is not None]
    assert set(named[200:700]) == {previous.id} and set(named[700:]) == {stored.id}
    payloads.forget()
    assert _read_back(cluster) == _as_stored(pods)


@pytest.mark.django_db
def test_inside_a_transaction_no_dictionary_is_trained_and_rows_read_back() -> None:
    """An import is all or nothing: a dictionary it trained could be rolled back after a row named it.
    Its rows go without one, and read back."""
    pods = _pods("c2", payloads.FIRST_WINDOW + 10)
    with transaction.atomic():
        save_observations("c2", pods)
        save_observations("c2", pods[:5])  # re-delivered: stored once
    cluster = Cluster.objects.get(name="c2")
    assert not PayloadDictionary.objects.exists()
    assert _read_back(cluster) == _as_stored(pods)


@pytest.mark.django_db(transaction=True)
def test_compact_observations_moves_older_rows_batch_by_batch_and_resumes() -> None:
    """Rows stored before bodies (jsonb ``payload``) read back as they were; the command gives each its
    body in batches (its own transaction each), and a second run, or one after a stop, moves the rest."""
    cluster = cluster_for("c3")
    older = _pods("c3", 40)
    put(cluster, older)
    before = _read_back(cluster)
    assert set(_stored_bodies(cluster).values()) == {None}
    moved, last = compact_observations.move_batch(0, 15)  # a run stopped after its first batch
    assert moved == 15
    newer = _pods("c3", 5, start=100)
    save_observations(cluster, newer)  # the collector keeps storing meanwhile
    out, err = io.StringIO(), io.StringIO()
    call_command("compact_observations", "--batch", "7", "--progress", stdout=out, stderr=err)
    assert "compacted 25 observations; 0 left" in out.getvalue()
    assert "100%" in err.getvalue()
    assert None not in _stored_bodies(cluster).values()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM timelines_observation WHERE payload IS NOT NULL")
        assert cursor.fetchone()[0] == 0
    assert _read_back(cluster) == before | _as_stored(newer)
    call_command("compact_observations", stdout=out)
    assert "compacted 0 observations; 0 left" in out.getvalue()
