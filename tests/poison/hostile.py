"""Hostile request bodies for every ingest route and the import (issue #35, deliverable 7).

Shared by the bounded property tests (``tests/poison/test_fuzz.py``) and the long run (``bench/fuzz.py``):
hypothesis strategies that build a body of valid records with hostile ones mixed in (NUL, right-to-left
overrides, names past every limit, times at and past the ends of the calendar, malformed times, deep
nesting, values of the wrong type), and ``Target``\\ s that post such a body and check the answer.

Valid records are hand-written fixtures in real formats (none is copied from a cluster): the pod create
of the audit webhook fixture, the lines of a kubelet log fixture (tests/fixtures/kubelet), kubelet sync
spans shaped as the kubelet's OTLP exporter sends them. A hostile
record is a copy of a valid one with one or more fields replaced, or a whole record replaced.
"""

from __future__ import annotations

import copy
import json
import secrets
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AUDIT_EVENTLIST = FIXTURES / "audit" / "webhook-eventlist.json"
KUBELET_LOG = FIXTURES / "kubelet" / "v1.27-delete-during-setup.log"

HOSTILE_TEXT = [
    "evil\x00ns",
    "\x00",
    "\u202e" * 200,
    "\u202egnp.exe",
    "x" * 300,
    "a" * 64 + "b",
    "",
    ".",
    "..",
    "a/b",
    "%00",
    "%2F",
    "UPPER",
    "space name",
    "<script>alert(1)</script>",
    "\ufeff",
    "\u2028",
    "名前",
]
HOSTILE_TIMES = [
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999Z",
    "8999-12-31T23:59:59Z",
    "1969-12-31T23:59:59Z",
    "²",
    "9" * 5000,
    "2024-13-45T99:99:99Z",
    "",
    "now",
    "-1",
]
WRONG_TYPES: list[Any] = [None, True, 0, -1, 1e308, -1e308, 2**70, [], {}, [[[]]], {"a": {"b": None}}]


def nested(depth: int, leaf: Any = "deep") -> Any:
    value = leaf
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


hostile_text = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40))
hostile_time = st.one_of(
    st.sampled_from(HOSTILE_TIMES),
    st.datetimes().map(lambda t: t.isoformat() + "Z"),
    st.integers(min_value=-(2**63), max_value=2**63),
)
hostile_value = st.one_of(
    hostile_text,
    hostile_time,
    st.sampled_from(WRONG_TYPES),
    st.integers(100, 600).map(nested),
)


def _put(record: Any, path: tuple[str, ...], value: Any) -> Any:
    """``record`` with the value at ``path`` (dict keys) replaced; missing dicts are made."""
    if not path:
        return value
    out = dict(record) if isinstance(record, dict) else {}
    out[path[0]] = _put(out.get(path[0]), path[1:], value)
    return out


def mutated(valid: Any, paths: list[tuple[str, ...]]) -> st.SearchStrategy[Any]:
    """A hostile copy of ``valid``: one to three of ``paths`` given hostile values, or the whole record
    replaced by one."""

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        if draw(st.integers(0, 9)) == 0:
            return draw(hostile_value)
        record = copy.deepcopy(valid)
        for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique=True)):
            record = _put(record, path, draw(hostile_value))
        return record

    return build()


def dumps(value: Any) -> bytes:
    """JSON as a careless sender writes it: the standard library's encoder, which escapes lone surrogates
    and writes any depth Python's recursion allows (orjson stops at 254)."""
    return json.dumps(value).encode()


# --- the routes ---------------------------------------------------------------------------------------------


def audit_events() -> list[dict[str, Any]]:
    """The fixture's pod create (RequestReceived and ResponseComplete): real webhook events."""
    items = json.loads(AUDIT_EVENTLIST.read_text())["items"]
    return [
        e
        for e in items
        if e["verb"] == "create"
        and e["objectRef"].get("resource") == "pods"
        and not e["objectRef"].get("subresource")
    ]


AUDIT_PATHS = [
    ("auditID",),
    ("stage",),
    ("stageTimestamp",),
    ("requestReceivedTimestamp",),
    ("verb",),
    ("objectRef", "namespace"),
    ("objectRef", "name"),
    ("objectRef", "uid"),
    ("objectRef", "resource"),
    ("responseObject", "metadata", "namespace"),
    ("responseObject", "metadata", "name"),
    ("responseObject", "metadata", "uid"),
    ("responseObject", "metadata", "creationTimestamp"),
    ("responseObject", "spec", "nodeName"),
    ("responseObject", "status"),
    ("user", "username"),
    ("responseStatus", "code"),
]


@st.composite
def audit_body(draw: st.DrawFn) -> tuple[bytes, list[dict[str, Any]]]:
    """An EventList: the valid pod create and 1-4 hostile events (each a new auditID, so none is taken
    for a re-send of the valid one); returns the body and the valid events."""
    valid = audit_events()
    hostile = []
    for _ in range(draw(st.integers(1, 4))):
        base = copy.deepcopy(draw(st.sampled_from(valid)))
        if isinstance(base, dict):
            base["auditID"] = secrets.token_hex(16)
        hostile.append(draw(mutated(base, AUDIT_PATHS)))
    items = draw(st.permutations([*valid, *hostile]))
    return dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items}), valid


def kubelet_records() -> list[dict[str, Any]]:
    """The hand-written kubelet log fixture as Fluent Bit's tail input ships it."""
    return [
        {"date": 1692004378.5, "host": "worker-1", "log": line}
        for line in KUBELET_LOG.read_text().splitlines()
    ]


KUBELET_PATHS = [
    ("date",),
    ("timestamp",),
    ("__REALTIME_TIMESTAMP",),
    ("host",),
    ("log",),
    ("_HOSTNAME",),
    ("extra",),
]


@st.composite
def kubelet_body(draw: st.DrawFn) -> tuple[bytes, str]:
    """NDJSON (or a JSON array) of the log fixture's records with 1-4 hostile records among them; returns
    the body and its media type."""
    records: list[Any] = kubelet_records()
    for _ in range(draw(st.integers(1, 4))):
        bad = draw(mutated(draw(st.sampled_from(records[:5])), KUBELET_PATHS))
        records.insert(draw(st.integers(0, len(records))), bad)
    if draw(st.booleans()):
        return dumps(records), "application/json"
    return b"\n".join(dumps(r) for r in records), "application/x-ndjson"


def otlp_span(uid: str, name: str, start_ns: int) -> dict[str, Any]:
    return {
        "traceId": secrets.token_hex(16),
        "spanId": secrets.token_hex(8),
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 40_000_000),
        "attributes": [
            {"key": "k8s.pod.uid", "value": {"stringValue": uid}},
            {"key": "k8s.pod", "value": {"stringValue": "default/web-1"}},
        ],
    }


def otlp_document(spans: list[Any], host: Any = "node-a") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "service.name", "value": {"stringValue": "kubelet"}},
                        {"key": "host.name", "value": {"stringValue": host}},
                    ]
                },
                "scopeSpans": [{"scope": {"name": "k8s.io/kubernetes/pkg/kubelet"}, "spans": spans}],
            }
        ]
    }


OTLP_PATHS = [
    ("traceId",),
    ("spanId",),
    ("name",),
    ("startTimeUnixNano",),
    ("endTimeUnixNano",),
    ("attributes",),
    ("status",),
    ("kind",),
]
VALID_SPAN_START = 1_717_743_287_000_000_000  # 2024-06-07T06:54:47Z


@st.composite
def otlp_body(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """OTLP/JSON with three valid kubelet sync spans and 1-4 hostile ones (or hostile attributes: a pod
    UID or namespace that is no Kubernetes name); returns the body and the valid spans' dedupe keys."""
    uid = "3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b"
    valid = [
        otlp_span(uid, name, VALID_SPAN_START + i * 1_000_000_000)
        for i, name in enumerate(("syncPod", "syncTerminatingPod", "syncTerminatedPod"))
    ]
    hostile: list[Any] = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            span = otlp_span(draw(hostile_text), "syncPod", VALID_SPAN_START)
            span["attributes"].append(
                {"key": "k8s.namespace.name", "value": {"stringValue": draw(hostile_text)}}
            )
            hostile.append(span)
        else:
            hostile.append(draw(mutated(otlp_span(uid, "syncPod", VALID_SPAN_START), OTLP_PATHS)))
    spans = draw(st.permutations([*valid, *hostile]))
    document = otlp_document(spans)
    keys = [f"span:{s['spanId']}" for s in valid]
    return dumps(document), keys


BUNDLE_PATHS = [
    ("observed_at",),
    ("received_at",),
    ("namespace",),
    ("name",),
    ("node",),
    ("pod_uid",),
    ("kind",),
    ("dedupe_key",),
    ("payload",),
    ("id",),
]


def resealed(data: dict[str, Any]) -> bytes:
    """A bundle with its observations' digest and counts recomputed after an edit, as someone editing a
    bundle would: only the checks of what it holds can refuse it then."""
    import hashlib

    from dashboard.export.bundle import canonical_observation

    sha = hashlib.sha256()
    for item in data["observations"]:
        try:
            sha.update(canonical_observation(item))
        except (TypeError, AttributeError):  # not an object, or past what orjson writes: no digest matches
            sha.update(dumps(item))
    data["metadata"]["digest"]["observations_sha256"] = sha.hexdigest()
    return dumps(data)


@st.composite
def bundle_body(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    """``valid`` (an exported bundle) with one to three observations made hostile, resealed."""
    data = copy.deepcopy(valid)
    observations = data["observations"]
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(observations) - 1))
        observations[i] = draw(mutated(observations[i], BUNDLE_PATHS))
    return resealed(data)
