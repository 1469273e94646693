"""The compact observation (timelines/compact.py, docs/storage.md): every row reads back exactly as stored.

No database. Exact means the JSON text is the same, key order included (orjson without sorting): stronger
than the canonical JSON (sorted keys) the export digest covers. Values are JSON as orjson reads and writes
it, the store's domain: integers within 64 bits, finite floats, any Unicode text."""

from __future__ import annotations

import random
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.parsers.k8s_objects import object_observation
from demo_cluster import SimCluster, install
from timelines import compact
from timelines.compact import Compact, Dictionaries, Encoder, NameTable, Row

T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5),
    max_leaves=30,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=6)


def text_of(value: Any) -> bytes:
    """The JSON text, key order as it is (what exact means here)."""
    return orjson.dumps(value)


def edit(value: Any, data: st.DataObject) -> Any:
    """``value`` changed by one small edit somewhere inside it (a copy): a member set, added or removed, an
    item inserted, removed or replaced, a value made null, or a container's keys reordered."""
    value = orjson.loads(orjson.dumps(value))
    path: list[Any] = []
    node = value
    while isinstance(node, dict | list) and node and data.draw(st.booleans(), label="deeper"):
        key = data.draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        node = node[key]

    def change(node: Any) -> Any:
        if isinstance(node, dict):
            what = data.draw(st.sampled_from(["set", "delete", "null", "reorder"]))
            if what == "delete" and node:
                del node[data.draw(st.sampled_from(list(node)))]
            elif what == "null" and node:
                node[data.draw(st.sampled_from(list(node)))] = None
            elif what == "reorder":
                keys = data.draw(st.permutations(list(node)))
                return {k: node[k] for k in keys}
            else:
                node[data.draw(st.text(max_size=6))] = data.draw(json_values)
            return node
        if isinstance(node, list):
            what = data.draw(st.sampled_from(["insert", "remove", "replace"]))
            at = data.draw(st.integers(0, len(node)))
            if what == "remove" and node:
                del node[min(at, len(node) - 1)]
            elif what == "replace" and node:
                node[min(at, len(node) - 1)] = data.draw(json_values)
            else:
                node.insert(at, data.draw(json_values))
            return node
        return data.draw(json_values)

    if not path:
        return change(value)
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = change(parent[path[-1]])
    return value


def assert_same_row(back: Row, row: Row) -> None:
    assert back == row
    assert text_of(back.payload) == text_of(row.payload)
    assert type(back.observed_at) is type(row.observed_at) and back.observed_at == row.observed_at


def encode_all(rows: list[Row], encoder: Encoder) -> dict[int, Compact]:
    return {i: encoder.encode(i, row) for i, row in enumerate(rows, 1)}


# -- patches -----------------------------------------------------------------------------------------------


@given(json_values, json_values)
def test_a_patch_turns_any_json_value_into_any_other_exactly(old: Any, new: Any) -> None:
    before = text_of(old)
    patch = compact.diff(old, new)
    assert text_of(compact.apply(old, orjson.loads(orjson.dumps(patch)))) == text_of(new)
    assert text_of(old) == before  # neither diff nor apply changes the old value


def test_json_values_python_calls_equal_stay_apart() -> None:
    """1, 1.0 and true are equal in Python and different JSON; so are 0.0 and -0.0; and key order."""
    steps: list[Any] = [{"a": 1}, {"a": 1.0}, {"a": True}, {"a": 0.0}, {"a": -0.0}, {"b": 2, "a": -0.0}]
    steps += [{"a": -0.0, "b": 2}, {"a": [1, 1.0, True]}, {"a": [True, 1, 1.0]}, [1], [1.0], "1", 1]
    for old, new in zip(steps, steps[1:], strict=False):
        assert text_of(compact.apply(old, compact.diff(old, new))) == text_of(new), (old, new)


# -- rows --------------------------------------------------------------------------------------------------

texts = st.text(max_size=20)
uids = st.one_of(
    st.uuids().map(str),  # what an API server sends
    st.uuids().map(lambda u: u.hex),  # a static pod's config hash: 32 hex digits, no dashes
    st.uuids().map(lambda u: str(u).upper()),
    st.text(min_size=1, max_size=64),
)
kinds = st.sampled_from(["pod", "pod_deleted", "pod", "event", "node", "audit"]) | st.text(max_size=32)
sources = st.sampled_from(["api", "synthetic", "kubelet_log"]) | st.text(max_size=32)


@st.composite
def snapshot_sequences(draw: st.DrawFn) -> list[Row]:
    """Rows of one or two objects whose payloads evolve by small edits (a pod's snapshots as a watch
    delivers them), with any texts in the other fields, the pod's UID in its dedupe keys."""
    data = draw(st.data())
    rows: list[Row] = []
    objects = [
        (draw(uids | st.none()), draw(texts), draw(texts), draw(texts), draw(json_objects))
        for _ in range(draw(st.integers(1, 2)))
    ]
    for step in range(draw(st.integers(1, 12))):
        which = draw(st.integers(0, len(objects) - 1))
        uid, node, namespace, name, payload = objects[which]
        payload = edit(payload, data) if step else payload
        objects[which] = (uid, node, namespace, name, payload)
        at = T0 + timedelta(microseconds=draw(st.integers(0, 10**11)))
        if draw(st.booleans()):
            at = at.astimezone(datetime.now().astimezone().tzinfo)  # an aware time in another zone
        key = draw(st.sampled_from([f"pod:{uid}:{step}", f"event:{step}:{uid}", draw(texts) + str(step)]))
        rows.append(
            Row(
                kind=draw(kinds),
                source=draw(sources),
                observed_at=at,
                received_at=at + timedelta(microseconds=draw(st.integers(0, 10**9))),
                dedupe_key=key,
                pod_uid=uid,
                node=node,
                namespace=namespace,
                name=name,
                payload=payload,
            )
        )
    return rows


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot_sequences(), st.integers(1, 5), st.randoms(use_true_random=False))
def test_every_row_of_a_snapshot_sequence_reads_back_exactly(
    rows: list[Row], every: int, rnd: random.Random
) -> None:
    names, dictionaries = NameTable(), Dictionaries()
    stored = encode_all(rows, Encoder(names, dictionaries, every=every))
    order = list(stored)
    rnd.shuffle(order)  # any row alone, in any order: each is rebuilt from its own chain
    for i in order:
        assert_same_row(compact.rebuild(i, stored, names, dictionaries), rows[i - 1])
        chain, at = 1, i
        while (distance := compact.base_distance(stored[at])) is not None:
            at -= distance
            chain += 1
        assert chain <= every


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot_sequences())
def test_encoding_is_a_function_of_the_row_and_its_chain(rows: list[Row]) -> None:
    """A re-delivered fact (a second writer, a replay after a crash) is encoded to the same bytes."""
    first = encode_all(rows, Encoder(NameTable(), Dictionaries(), every=4))
    again = encode_all(rows, Encoder(NameTable(), Dictionaries(), every=4))
    assert first == again


def pod_row(uid: str, step: int, payload: dict[str, Any]) -> Row:
    at = T0 + timedelta(seconds=step)
    return Row("pod", "api", at, at, f"pod:{uid}:{step}", uid, "node-1", "default", "web-0", payload)


def test_a_canonical_uuid_is_stored_as_its_16_bytes_and_any_other_uid_as_text() -> None:
    names, dictionaries = NameTable(), Dictionaries()
    canonical = str(uuid.uuid4())
    static = uuid.uuid4().hex  # a mirror pod's UID: the static pod's config hash
    for uid in (canonical, static, canonical.upper()):
        row = pod_row(uid, 0, {"uid": uid})
        stored, _ = compact.encode(row, names, dictionaries)
        assert stored.pod_uid is not None and len(stored.pod_uid) == 16
        assert (stored.pod_uid == uuid.UUID(uid).bytes) is (uid == canonical)
        assert_same_row(compact.decode(stored, names, dictionaries), row)


def test_the_key_hash_is_16_bytes_and_salted_by_cluster() -> None:
    assert len(compact.key_hash("pod:x:1")) == 16
    assert compact.key_hash("pod:x:1", 1) != compact.key_hash("pod:x:1", 2)
    assert compact.key_hash("pod:x:1", 7) == compact.key_hash("pod:x:1", 7)


def test_rows_stay_readable_when_a_newer_dictionary_comes() -> None:
    """A dictionary never changes once stored: old rows name theirs, new rows the newer one."""
    rnd = random.Random(3)
    payloads = [
        {
            "phase": rnd.choice(["Pending", "Running"]),
            "restarts": rnd.randrange(5),
            "node": f"n-{rnd.randrange(9)}",
        }
        for _ in range(400)
    ]
    rows = [
        pod_row(str(uuid.UUID(int=rnd.getrandbits(128), version=4)), i, p) for i, p in enumerate(payloads)
    ]
    names, dictionaries = NameTable(), Dictionaries()
    dictionaries.add(1, compact.train([compact.plain(r)[0] for r in rows[:200]], 2048))
    encoder = Encoder(names, dictionaries, kind_dictionary={"pod": 1})
    stored = {i: encoder.encode(i, row) for i, row in enumerate(rows[:200], 1)}
    dictionaries.add(2, compact.train([compact.plain(r)[0] for r in rows[200:]], 2048))
    encoder.kind_dictionary["pod"] = 2
    stored |= {i: encoder.encode(i, row) for i, row in enumerate(rows[200:], 201)}
    fresh = Dictionaries({1: dictionaries.raw(1), 2: dictionaries.raw(2)})  # as read back from the store
    for i, row in enumerate(rows, 1):
        assert_same_row(compact.rebuild(i, stored, names, fresh), row)
    with pytest.raises(compact.CorruptRow, match="dictionary 2"):
        compact.rebuild(len(rows), stored, names, Dictionaries({1: dictionaries.raw(1)}))


def test_a_chain_never_reaches_into_another_partition() -> None:
    """Retention drops a partition whole: a row's base is in its own partition (span)."""
    uid = str(uuid.uuid4())
    rows = [
        pod_row(uid, i, {"uid": uid, "restarts": i, "phase": "Running", "node": "node-1"}) for i in range(6)
    ]
    encoder = Encoder(NameTable(), Dictionaries(), every=16)
    spans = ["day-1", "day-1", "day-1", "day-2", "day-2", "day-2"]
    stored = {i: encoder.encode(i, row, spans[i - 1]) for i, row in enumerate(rows, 1)}
    assert compact.base_distance(stored[4]) is None  # the first row of day 2 is whole
    for i in (2, 3, 5, 6):
        distance = compact.base_distance(stored[i])
        assert distance is not None and spans[i - 1 - distance] == spans[i - 1]


# -- the demo cluster's real output ------------------------------------------------------------------------


def demo_rows(scenario: str) -> list[Row]:
    """The pods, events and nodes of a demo scenario as the collector makes observations of them (the
    watch history of the demo cluster's API store, through the collector's parser), as store rows."""
    c = SimCluster(seed=7)
    install(c, scenario)
    c.run_until_idle(600)
    rows = []
    for n, entry in enumerate(c.store._hist):
        hint = {"pods": "Pod", "events": "Event", "nodes": "Node"}.get(entry.resource)
        if hint is None:
            continue
        at = T0 + timedelta(milliseconds=n)
        obs = object_observation(
            orjson.loads(entry.data), kind_hint=hint, watch_type=entry.type, observed_at=at, source="api"
        )
        if obs is None:
            continue
        rows.append(
            Row(obs.kind, obs.source, obs.observed_at, at + timedelta(microseconds=1500), obs.dedupe_key,
                obs.pod_uid or None, obs.node or "", obs.namespace or "", obs.name or "", obs.payload)
        )  # fmt: skip
    return rows


@pytest.mark.parametrize("scenario", ["mixed", "static-pod-uid-reuse"])
def test_the_demo_clusters_observations_read_back_exactly(scenario: str) -> None:
    rows = demo_rows(scenario)
    assert {"pod", "pod_deleted", "event", "node"} <= {r.kind for r in rows}
    names, dictionaries = NameTable(), Dictionaries()
    half = len(rows) // 2
    by_kind: dict[str, int] = {}
    for n, kind in enumerate(sorted({r.kind for r in rows}), 1):
        samples = [compact.plain(r)[0] for r in rows[:half] if r.kind == kind]
        if len(samples) >= 20:
            dictionaries.add(n, compact.train(samples, 4096))
            by_kind[kind] = n
    stored = encode_all(rows, Encoder(names, dictionaries, every=8, kind_dictionary=by_kind))
    decoded: dict[int, Any] = {}
    for i, row in enumerate(rows, 1):  # in id order, as a reader goes: each base is decoded before its rows
        distance = compact.base_distance(stored[i])
        back = compact.decode(stored[i], names, dictionaries, decoded[i - distance] if distance else None)
        decoded[i] = back.payload
        assert_same_row(back, row)
        assert orjson.dumps(back.payload, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            row.payload, option=orjson.OPT_SORT_KEYS
        )
    # A pod's successive snapshots differ in a few status fields: stored as changes, they take a fraction
    # of the whole JSON.
    pods = [i for i, r in enumerate(rows, 1) if r.kind == "pod"]
    body = sum(len(stored[i].body) for i in pods)
    whole = sum(len(orjson.dumps(rows[i - 1].payload)) for i in pods)
    assert body * 4 < whole


def test_a_payload_of_several_mebibytes_reads_back() -> None:
    """Frames carry no content size: decoding assumes no bound (an annotation may hold megabytes)."""
    payload = {"annotations": {"big": "ab" * 3_000_000}, "items": list(range(1000))}
    row = pod_row(str(uuid.uuid4()), 0, payload)
    names, dictionaries = NameTable(), Dictionaries()
    stored, _ = compact.encode(row, names, dictionaries)
    assert len(stored.body) < 100_000  # compressed (synthetic: a repetitive text)
    assert_same_row(compact.decode(stored, names, dictionaries), row)


def test_the_codec_is_pure() -> None:
    """Stdlib, orjson and zstandard only: the store, a migration and a bench can all run it."""
    from tests.lifecycle.test_purity import imported_modules

    path = Path(compact.__file__)
    imported = {module.split(".")[0] for _, module in imported_modules(path)}
    assert imported <= set(sys.stdlib_module_names) | {"__future__", "orjson", "zstandard"}, imported


def test_every_kind_and_source_of_the_contract_has_a_code_and_codes_never_move() -> None:
    """Stored rows hold the codes: a code once given names the same text forever (the tables only grow),
    and every kind and source the observation contract knows has one."""
    from timelines.lifecycle.observation import Kind, Source

    assert set(Kind.ALL) <= set(compact.KINDS) and set(Source.ALL) <= set(compact.SOURCES)
    first_kinds = ("", "pod", "pod_deleted", "event", "worker", "span", "kubelet_marker", "node")
    first_kinds += ("node_deleted", "node_metrics", "pdb", "pdb_deleted", "workload", "workload_deleted")
    first_kinds += ("audit", "kubelet_process")
    first_sources = (
        "",
        "api",
        "offline",
        "kubelet_log",
        "kubelet_span",
        "kubelet_metrics",
        "synthetic",
        "audit",
    )
    assert compact.KINDS[: len(first_kinds)] == first_kinds
    assert compact.SOURCES[: len(first_sources)] == first_sources


# -- batches: a base is a row that exists ------------------------------------------------------------------


def pod_rows(uid: str, start: int, n: int) -> list[Row]:
    return [
        pod_row(uid, i, {"uid": uid, "restarts": i, "phase": "Running", "node": "node-1"})
        for i in range(start, start + n)
    ]


def test_a_batch_in_flight_is_no_base_for_another() -> None:
    """GIVEN batch A of a pod's rows encoded and not committed (its transaction still open, or failed)
    WHEN batch B encodes the pod's next rows
    THEN B's first row is whole and every B row rebuilds from B's rows alone (A may never be stored)."""
    uid = str(uuid.uuid4())
    encoder = Encoder(NameTable(), Dictionaries())
    a = encoder.begin()
    stored_a = {i: a.encode(i, row) for i, row in enumerate(pod_rows(uid, 0, 3), 1)}
    assert compact.base_distance(stored_a[2]) == 1  # within a batch, rows chain
    b = encoder.begin()
    rows_b = pod_rows(uid, 3, 3)
    stored_b = {i: b.encode(i, row) for i, row in enumerate(rows_b, 4)}
    assert compact.base_distance(stored_b[4]) is None
    for i, row in enumerate(rows_b, 4):  # A dropped: never committed
        assert_same_row(compact.rebuild(i, stored_b, encoder.names, encoder.dictionaries), row)


def test_a_committed_batch_is_a_base_and_a_chain_only_moves_forward() -> None:
    """GIVEN batch A (ids 1-3) and batch B (ids 4-6) of one pod, B committed first, then A
    WHEN batch C (ids 7-8) encodes the pod's next rows
    THEN C's first row is stored against B's last (id 6), not A's older one, and every row rebuilds."""
    uid = str(uuid.uuid4())
    encoder = Encoder(NameTable(), Dictionaries())
    rows = pod_rows(uid, 0, 8)
    a, b = encoder.begin(), encoder.begin()
    stored = {i: a.encode(i, rows[i - 1]) for i in (1, 2, 3)}
    stored |= {i: b.encode(i, rows[i - 1]) for i in (4, 5, 6)}
    b.commit()
    a.commit()
    c = encoder.begin()
    stored |= {i: c.encode(i, rows[i - 1]) for i in (7, 8)}
    c.commit()
    assert compact.base_distance(stored[7]) == 1
    for i, row in enumerate(rows, 1):
        assert_same_row(compact.rebuild(i, stored, encoder.names, encoder.dictionaries), row)


def test_a_committed_row_with_a_higher_id_is_no_base() -> None:
    """GIVEN a batch that reserved ids 1-2 and another that reserved 3-4 and committed first
    WHEN the first encodes its rows THEN none is stored against a later id (a base precedes its row)."""
    uid = str(uuid.uuid4())
    encoder = Encoder(NameTable(), Dictionaries())
    rows = pod_rows(uid, 0, 4)
    late = encoder.begin()
    stored = {i: late.encode(i, rows[i - 1]) for i in (3, 4)}
    late.commit()
    early = encoder.begin()
    stored |= {i: early.encode(i, rows[i - 1]) for i in (1, 2)}
    assert compact.base_distance(stored[1]) is None
    for i, row in enumerate(rows, 1):
        assert_same_row(compact.rebuild(i, stored, encoder.names, encoder.dictionaries), row)


def test_threads_storing_batches_that_may_fail_leave_every_stored_row_rebuildable() -> None:
    """GIVEN four threads encoding batches of the same pods' rows at once, ids reserved per batch, a third
    of the batches failing (not committed, their rows never stored)
    WHEN the committed batches' rows are read back THEN each rebuilds from stored rows only."""
    import threading

    uids = [str(uuid.UUID(int=n, version=4)) for n in range(1, 6)]
    encoder = Encoder(NameTable(), Dictionaries(), every=4)
    next_id, lock = iter(range(1, 10**9)), threading.Lock()
    stored: dict[int, Compact] = {}
    expected: dict[int, Row] = {}

    def work(seed: int) -> None:
        rnd = random.Random(seed)
        for step in range(40):
            rows = [
                pod_row(uid, step, {"uid": uid, "seed": seed, "step": step, "phase": "Running"})
                for uid in rnd.sample(uids, 3)
            ]
            with lock:
                ids = [next(next_id) for _ in rows]
            batch = encoder.begin()
            encoded = {i: batch.encode(i, row) for i, row in zip(ids, rows, strict=True)}
            if rnd.random() < 1 / 3:
                continue  # the transaction failed: nothing stored, nothing committed
            with lock:
                stored.update(encoded)
                expected.update(zip(ids, rows, strict=True))
            batch.commit()

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stored) > 100 and any(compact.base_distance(c) for c in stored.values())
    for i, row in expected.items():
        assert_same_row(compact.rebuild(i, stored, encoder.names, encoder.dictionaries), row)
