"""Every stored observation reads back equal to what was stored (issue #37, deliverable 3), through the
real store (``timelines/store.py``) and the one read of stored rows (``timelines/observation_rows.py``), on
PostgreSQL and on the SQLite default.

Equal means the canonical JSON of the contract's fields (docs/incident-bundle.md, "Digests": compact JSON,
sorted keys), the form the export digest covers: the same facts give the same digest whatever the storage.
Payloads are JSON as the collectors give it to the store: objects whose values are text, integers, floats,
booleans, null, lists and objects. One rule of the store is the store's own and stated in
tests/test_store.py: a NUL, which PostgreSQL text cannot hold, is stored as U+FFFD, so the texts here hold
none.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.parsers.k8s_objects import object_observation
from demo_cluster import SimCluster, install
from timelines import observation_rows, store
from timelines.lifecycle.observation import FIELDS, Kind, Observation, Source
from timelines.models import Observation as ObservationRow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]

T0 = datetime(2026, 12, 6, 8, 0, 0, 123456, tzinfo=UTC)
_clusters = itertools.count()

texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=12)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    # Floats as Kubernetes objects and kubelet metrics carry them (a ratio, seconds, a sample value).
    | st.floats(min_value=-1e15, max_value=1e15, allow_nan=False, allow_infinity=False)
    | texts
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)
payloads = st.dictionaries(texts, values, max_size=6)


@st.composite
def snapshot_sequences(draw: st.DrawFn) -> list[dict[str, Any]]:
    """One pod's snapshots as a watch delivers them: a payload, then each next one its predecessor with a
    member set, removed or nulled (at the top or one level down), sometimes deleted at the end."""
    payload = draw(payloads)
    out = [payload]
    for _ in range(draw(st.integers(0, 6))):
        payload = dict(payload)
        what = draw(st.sampled_from(["set", "remove", "null", "nested"]))
        keys = sorted(payload)
        if what == "remove" and keys:
            del payload[draw(st.sampled_from(keys))]
        elif what == "null" and keys:
            payload[draw(st.sampled_from(keys))] = None
        elif what == "nested" and (inner := [k for k in keys if isinstance(payload[k], dict)]):
            key = draw(st.sampled_from(inner))
            payload[key] = {**payload[key], draw(texts): draw(values)}
        else:
            payload[draw(texts)] = draw(values)
        out.append(payload)
    return out


def canonical(o: Observation) -> bytes:
    """The digest's form of an observation: its contract fields, compact JSON, sorted keys."""
    return orjson.dumps({f: getattr(o, f) for f in FIELDS}, option=orjson.OPT_SORT_KEYS)


def stored_back(cluster: str) -> list[Observation]:
    rows = ObservationRow.objects.filter(cluster__name=cluster).order_by("observed_at", "id")
    return [o for _, o in observation_rows.facts(rows)]


def pod_snapshots(sequence: list[dict[str, Any]], uid: str, deleted: bool) -> list[Observation]:
    out = []
    for i, payload in enumerate(sequence):
        kind = Kind.POD_DELETED if deleted and i == len(sequence) - 1 else Kind.POD
        out.append(
            Observation(
                kind=kind,
                source=Source.API,
                observed_at=T0 + timedelta(seconds=i, microseconds=i),
                dedupe_key=f"{kind}:{uid}:{i + 1}",
                pod_uid=uid,
                node="node-a",
                namespace="shop",
                name="web-0",
                payload=payload,
            )
        )
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(snapshot_sequences(), st.uuids().map(str), st.booleans(), st.integers(1, 3))
def test_every_stored_snapshot_reads_back_equal(
    sequence: list[dict[str, Any]], uid: str, deleted: bool, batches: int
) -> None:
    """GIVEN a pod's snapshots, each a small edit of the one before, stored in one or more batches (and
    the first batch delivered again, as a relist does) WHEN the cluster's rows are read back THEN each
    reads back as the observation stored, in the canonical JSON of the contract."""
    cluster = f"read-back-{next(_clusters)}"
    stored = pod_snapshots(sequence, uid, deleted)
    size = -(-len(stored) // batches)
    for i in range(0, len(stored), size):
        store.save_observations(cluster, stored[i : i + size])
    again = store.save_observations(cluster, stored[:size])
    assert again.stored == 0
    assert [canonical(o) for o in stored_back(cluster)] == [canonical(o) for o in stored]


def test_mixed_kinds_and_texts_read_back_equal() -> None:
    """GIVEN observations of every source shape the collectors write (a kubelet line without a pod UID, an
    event, a node, an audited request with nested objects and Unicode) WHEN read back THEN equal."""
    facts = [
        Observation(
            kind=Kind.WORKER,
            source=Source.KUBELET_LOG,
            observed_at=T0,
            dedupe_key="kubelet:node-a:1",
            pod_uid=None,
            node="node-a",
            namespace="shop",
            name="web-0",
            payload={"transition": "sync_enter", "pod_ref": "shop/web-0", "where": "kubelet.log:1"},
        ),
        Observation(
            kind=Kind.EVENT,
            source=Source.API,
            observed_at=T0 + timedelta(seconds=1),
            dedupe_key="event:e1:1",
            pod_uid="00000000-0000-4000-8000-000000000001",
            node="node-a",
            namespace="shop",
            name="web-0",
            payload={"reason": "Killing", "count": 2, "involved": {"kind": "Pod", "name": "web-0"}},
        ),
        Observation(
            kind=Kind.NODE,
            source=Source.API,
            observed_at=T0 + timedelta(seconds=2),
            dedupe_key="node:node-a:7",
            pod_uid=None,
            node="node-a",
            namespace=None,
            name="node-a",
            payload={"ready": True, "taints": [], "allocatable": {"cpu": "4", "ratio": 0.25}},
        ),
        Observation(
            kind=Kind.AUDIT,
            source=Source.AUDIT,
            observed_at=T0 + timedelta(seconds=3),
            dedupe_key="audit:a1",
            pod_uid=None,
            node=None,
            namespace="shop",
            name="web-0",
            payload={"resource": "pods", "verb": "delete", "user": "ünïcödé ✓ 日本", "big": 2**62},
        ),
    ]
    result = store.save_observations("read-back-mixed", facts)
    assert result.stored == len(facts), result.rejected
    assert [canonical(o) for o in stored_back("read-back-mixed")] == [canonical(o) for o in facts]


@pytest.mark.parametrize("value", [-0.0, 1e20, 1.5e300, 2**63 - 1, -(2**63), 0.1, 5e-324])
def test_numbers_read_back_as_the_same_json(value: float | int) -> None:
    """GIVEN a payload number at the edge of JSON as orjson writes it (negative zero, floats whose text has
    an exponent, the 64-bit integer bounds) WHEN stored and read back THEN its JSON text is the same.

    The body keeps the JSON text, so negative zero too (PostgreSQL's jsonb, the payload column before it,
    gave it back as 0.0)."""
    fact = Observation(
        kind=Kind.NODE_METRICS,
        source=Source.KUBELET_METRICS,
        observed_at=T0,
        dedupe_key="metrics:node-a:1",
        pod_uid=None,
        node="node-a",
        namespace=None,
        name=None,
        payload={"value": value},
    )
    store.save_observations("read-back-numbers", [fact])
    (back,) = stored_back("read-back-numbers")
    assert orjson.dumps(back.payload) == orjson.dumps(fact.payload)


def demo_observations(scenario: str) -> list[Observation]:
    """A demo scenario's pods, events and nodes as the collector makes observations of them: the watch
    history of the demo cluster's API store through the collector's parser, one a millisecond."""
    c = SimCluster(seed=7)
    install(c, scenario)
    c.run_until_idle(600)
    out = []
    for n, entry in enumerate(c.store._hist):
        hint = {"pods": "Pod", "events": "Event", "nodes": "Node"}.get(entry.resource)
        if hint is None:
            continue
        obs = object_observation(
            orjson.loads(entry.data),
            kind_hint=hint,
            watch_type=entry.type,
            observed_at=T0 + timedelta(milliseconds=n),
            source=Source.API,
        )
        if obs is not None:
            out.append(obs)
    return out


@pytest.mark.parametrize("scenario", ["mixed", "static-pod-uid-reuse"])
def test_a_demo_run_reads_back_equal(scenario: str) -> None:
    """GIVEN a whole demo scenario's API observations stored in batches of 100, as the writer sends them
    WHEN the cluster's rows are read back THEN each is the observation stored (canonical JSON), none
    missing and none more."""
    facts = demo_observations(scenario)
    assert {Kind.POD, Kind.POD_DELETED, Kind.EVENT, Kind.NODE} <= {o.kind for o in facts}
    unique = list({o.dedupe_key: o for o in reversed(facts)}.values())  # the first of each key is stored
    for i in range(0, len(facts), 100):
        store.save_observations(f"demo-{scenario}", facts[i : i + 100])
    back = sorted(canonical(o) for o in stored_back(f"demo-{scenario}"))
    assert back == sorted(canonical(o) for o in unique)
