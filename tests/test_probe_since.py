"""``store.probe_since``: how far back the look-up in the other partitions seeks a pod snapshot's key (the
pod's creation, less ``CREATED_SKEW``), from a payload as the typed path encodes it or as a dict. No
database."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from timelines.lifecycle.observation import EncodedObservation, Kind, Observation, Source, encoded_observation
from timelines.store import CREATED_SKEW, probe_since

AT = datetime(2026, 12, 8, 1, 2, 3, 456789, tzinfo=UTC)
MADE = datetime(2026, 12, 7, 21, 24, 54, tzinfo=UTC)


def encoded(payload: bytes, kind: str = Kind.POD) -> EncodedObservation:
    return encoded_observation(kind, Source.API, AT, "pod:u-1:7", "u-1", "n", "default", "web-0", payload)


def decoded(payload: dict[str, object], kind: str = Kind.POD) -> Observation:
    return Observation(
        kind=kind, source=Source.API, observed_at=AT, dedupe_key="pod:u-1:7", pod_uid="u-1", payload=payload
    )


@pytest.mark.parametrize("kind", [Kind.POD, Kind.POD_DELETED])
def test_a_pod_snapshot_is_bounded_by_its_creation_less_the_clocks_margin(kind):
    """GIVEN a pod snapshot (encoded by the typed path, or a dict) naming its creation THEN its bound is the
    creation less CREATED_SKEW, whatever the offset the time was written with; a top-level ``created``
    counts, not a label of that name."""
    typed = b'{"uid":"u-1","labels":{"created":"2030-01-01T00:00:00Z"},"created":"2026-12-07T21:24:54+00:00"}'
    assert probe_since(encoded(typed, kind)) == MADE - CREATED_SKEW
    assert probe_since(decoded({"created": "2026-12-07T22:24:54+01:00"}, kind)) == MADE - CREATED_SKEW
    assert probe_since(decoded({"created": "2026-12-07T21:24:54Z"}, kind)) == MADE - CREATED_SKEW


@pytest.mark.parametrize(
    "payload",
    [
        b"{}",
        b'{"created":null}',
        b'{"created":"2026-12-07T21:24:54"}',  # no offset: which clock is unknown
        b'{"created":"yesterday"}',
        b'{"created":17}',
        b'{"created":"0001-01-01T00:30:00+00:00"}',  # a margin before year 1
    ],
)
def test_no_bound_where_the_payload_does_not_say_when_the_pod_was_created(payload):
    """GIVEN a pod snapshot without a readable, aware creation time THEN it has no bound (every partition
    is looked up, as before migration 0031), in either form."""
    assert probe_since(encoded(payload)) is None
    assert probe_since(decoded(json.loads(payload))) is None


def test_other_kinds_have_no_bound():
    """GIVEN an event or a node naming a creation THEN no bound: only a pod snapshot's key is known to name
    one state of one pod."""
    for kind in (Kind.EVENT, Kind.NODE):
        assert probe_since(decoded({"created": MADE.isoformat()}, kind)) is None
    assert probe_since(decoded({"created": MADE.isoformat()})) == MADE - CREATED_SKEW
