"""The typed pod path (parsers/pod_wire.py) against the generic one: the same observation, or None."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from collectors.parsers.k8s_objects import object_observation
from collectors.parsers.pod_wire import decode_pod_event, decode_pod_list, wire_pod_observation
from timelines.lifecycle.observation import (
    EARLIEST,
    LATEST,
    EncodedObservation,
    InvalidObservation,
    Observation,
    Source,
    encoded_observation,
    name_problem,
)

AT = datetime(2026, 11, 30, 1, 2, 3, 456789, tzinfo=UTC)


def _generic(pod: dict[str, Any], watch_type: str) -> Observation | None:
    try:
        return object_observation(
            pod, kind_hint="Pod", watch_type=watch_type, observed_at=AT, source=Source.API
        )
    except ValueError:
        return None


def _wire(pod: Any, watch_type: str) -> EncodedObservation | None:
    """The typed path on a watch line carrying ``pod``; None where it leaves the pod to the generic one."""
    event = decode_pod_event(orjson.dumps({"type": watch_type, "object": pod}))
    if event is None:
        return None
    assert event[0] == watch_type
    return wire_pod_observation(event[1], watch_type=watch_type, observed_at=AT, source=Source.API)


def _same(a: EncodedObservation, b: Observation) -> None:
    decoded = a.decoded()
    assert decoded == b  # kind, source, time, dedupe key, pod uid, node, namespace, name
    assert decoded.payload == b.payload
    assert list(decoded.payload) == list(b.payload)  # the same keys in the same order, too


def _fixture_pods(k8s_fixture: Path) -> list[dict[str, Any]]:
    pods = json.loads((k8s_fixture / "pods-list.json").read_text())["items"]
    pods += [
        i for i in json.loads((k8s_fixture / "mixed-list.json").read_text())["items"] if i["kind"] == "Pod"
    ]
    # YAML carries times as datetimes; on the wire they are RFC 3339 strings.
    docs = yaml.safe_load_all((k8s_fixture / "pods.yaml").read_text())
    pods += [json.loads(json.dumps(d, default=lambda t: t.isoformat().replace("+00:00", "Z"))) for d in docs]
    return pods


@pytest.mark.parametrize("watch_type", ["ADDED", "MODIFIED", "DELETED"])
def test_real_pods_take_the_typed_path_and_match_the_generic_one(k8s_fixture: Path, watch_type: str):
    taken = 0
    for pod in _fixture_pods(k8s_fixture):
        generic, wire = _generic(pod, watch_type), _wire(pod, watch_type)
        if generic is None:  # an invalid pod (no uid): the typed path must leave it to the generic one
            assert wire is None
            continue
        assert wire is not None, pod["metadata"]["name"]
        _same(wire, generic)
        taken += 1
    assert taken >= 4


def test_a_list_page_decodes_with_its_version_and_continue_token(k8s_fixture: Path):
    body = json.loads((k8s_fixture / "pods-list.json").read_text())
    body["metadata"] = {"resourceVersion": "4711", "continue": "eyJ2Ijo"}
    page = decode_pod_list(orjson.dumps(body))
    assert page is not None and page.resource_version == "4711" and page.continue_token == "eyJ2Ijo"
    assert [p.api_uid for p in page.items or []] == [i["metadata"]["uid"] for i in body["items"]]
    assert decode_pod_list(b'{"items": [{"metadata": {"labels": {"a": 1}}}]}') is None  # a label not a string
    assert decode_pod_list(b"not json") is None


def test_mirror_pod_keys_on_the_static_uid(k8s_fixture: Path):
    pod = _fixture_pods(k8s_fixture)[0]
    pod["metadata"]["annotations"] = {
        "kubernetes.io/config.mirror": "static-hash-1",
        "kubernetes.io/config.source": "file",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    wire = _wire(pod, "MODIFIED")
    assert wire is not None and wire.pod_uid == "static-hash-1" and wire.payload["static"] is True
    _same(wire, _generic(pod, "MODIFIED"))  # type: ignore[arg-type]


def test_what_the_typed_path_leaves_to_the_generic_one(k8s_fixture: Path):
    pod = _fixture_pods(k8s_fixture)[0]
    no_rv = json.loads(json.dumps(pod))
    del no_rv["metadata"]["resourceVersion"]  # offline: the generic path keys on a content digest
    odd = json.loads(json.dumps(pod))
    odd["spec"]["terminationGracePeriodSeconds"] = "30"  # a number as a string, which the generic path reads
    node = dict(pod, kind="Node")
    for leftover in (no_rv, odd, node):
        assert _wire(leftover, "MODIFIED") is None
    assert _generic(odd, "MODIFIED").payload["grace_seconds"] == 30  # type: ignore[union-attr]
    for line in (
        b'{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"12"}}}',
        b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}',
        b'{"type":"ADDED"}',
        b"{not json",
    ):
        assert decode_pod_event(line) is None
    event = decode_pod_event(orjson.dumps({"type": "ADDED", "object": pod}))
    assert event is not None
    naive = datetime(2026, 1, 1)
    assert wire_pod_observation(event[1], watch_type="ADDED", observed_at=naive, source=Source.API) is None


# -- generated pods: the typed path is the generic one, or stands aside ----------------------------------
#
# A pod is generated well typed (every value of the type the Kubernetes API gives it), with unusual forms
# of those types mixed in (garbage and zero times, empty strings, an over-long uid or mirror annotation,
# another kind): the typed path decodes all of them and must give what the generic path gives. A quarter
# of the examples then get one value of another type at one place (a number where a string belongs, a
# string for a number, an array for an object, ...): the typed path must stand aside for that pod, and the
# generic path must name the problem or read it, never raise anything else. Every example ends in one of
# these asserts; the tests count which one and check that most examples compare the two paths.

UID_MAX = 64  # metadata.uid the observation contract accepts (both paths leave longer ones alone)


def _mostly(usual: st.SearchStrategy[Any], *rare: Any) -> st.SearchStrategy[Any]:
    """``usual`` about nineteen times in twenty, else one of the ``rare`` values. (Hypothesis draws the
    simplest choice, 0, more often than the others inside a large example: 0 is a usual one.)"""
    return st.integers(0, 19).flatmap(lambda i: st.sampled_from(rare) if i == 19 else usual)


def _pod_strategy(odd_forms: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Pod-shaped objects, every value of the type the API gives it; with ``odd_forms``, unusual values
    of those types are mixed in (mostly where the typed path still takes the pod)."""

    def either(valid: st.SearchStrategy[Any], *unusual: Any) -> st.SearchStrategy[Any]:
        return st.one_of(valid, st.sampled_from(unusual)) if odd_forms else valid

    def rarely(valid: st.SearchStrategy[Any], *unusual: Any) -> st.SearchStrategy[Any]:
        return _mostly(valid, *unusual) if odd_forms else valid

    text = either(st.one_of(st.none(), st.text(max_size=6)), "")
    word = st.text(max_size=6)  # never null in a real object
    time = either(
        st.one_of(
            st.none(),
            st.datetimes(timezones=st.just(UTC)).map(lambda t: t.isoformat().replace("+00:00", "Z")),
        ),
        "0001-01-01T00:00:00Z",  # Go's zero time
        "garbage",
        "",
        "2026-11-30 01:02:03.1234567 +0000 UTC",  # Go's time.String()
    )
    detail = st.fixed_dictionaries(
        {},
        optional={
            "reason": text,
            "message": text,
            "exitCode": st.one_of(st.none(), st.integers(-1, 255)),
            "signal": st.one_of(st.none(), st.integers(0, 15)),
            "startedAt": time,
            "finishedAt": time,
        },
    )
    state = st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {}, optional={"running": st.one_of(detail, st.none()), "waiting": detail, "terminated": detail}
        ),
    )
    names = either(st.sampled_from(["app", "side", "init"]), None, "")
    # A namespace, node or mirror hash as the API gives it (the contract refuses any other, issue #35),
    # with odd text mixed in among the odd forms.
    dns = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?\Z")
    k8s_name = either(st.one_of(st.none(), dns), "", ":", "A\u202e")
    quantities = st.one_of(st.none(), st.dictionaries(st.sampled_from(["cpu", "memory"]), word, max_size=2))
    status = st.fixed_dictionaries(
        {"name": names},
        optional={
            "state": state,
            "lastState": state,
            "ready": st.one_of(st.booleans(), st.none()),
            "started": st.one_of(st.booleans(), st.none()),
            "restartCount": st.one_of(st.integers(0, 9), st.none()),
            # in-place resize (1.33+): what the runtime applied and what the kubelet admitted
            "resources": st.one_of(
                st.none(), st.fixed_dictionaries({}, optional={"requests": quantities, "limits": quantities})
            ),
            "allocatedResources": quantities,
        },
    )
    # lifecycle.preStop.sleep.seconds (1.29+), and the ways it can be partly there
    lifecycle = st.one_of(
        st.integers(0, 30).map(lambda n: {"preStop": {"sleep": {"seconds": n}}}),
        st.sampled_from(
            [None, {}, {"preStop": None}, {"preStop": {"sleep": None}}, {"preStop": {"sleep": {}}}]
        ),
    )
    container = st.fixed_dictionaries(
        {"name": names},
        optional={
            "restartPolicy": st.one_of(st.none(), st.just("Always")),  # a sidecar init container (1.29+)
            "lifecycle": lifecycle,
        },
    )
    containers = st.one_of(st.none(), st.lists(container, max_size=3))
    return st.fixed_dictionaries(
        {
            "metadata": st.fixed_dictionaries(
                {
                    "name": rarely(st.sampled_from(["web-1", "db-0"]), "", None),
                    "uid": rarely(st.uuids().map(str), "", "u" * (UID_MAX + 1), "u" * UID_MAX),
                    "resourceVersion": rarely(st.integers(1, 99).map(str), "", None),
                },
                optional={
                    "namespace": k8s_name,
                    "creationTimestamp": time,
                    "deletionTimestamp": time,
                    "deletionGracePeriodSeconds": st.one_of(st.integers(0, 60), st.none()),
                    "labels": st.one_of(st.none(), st.dictionaries(st.sampled_from(["app", "tier"]), word)),
                    "annotations": st.one_of(
                        st.none(),
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "kubernetes.io/config.mirror": either(
                                    k8s_name, "m" * (UID_MAX + 6), "m" * UID_MAX
                                ),
                                "kubernetes.io/config.source": either(
                                    st.sampled_from(["api", "file", ""]), "http", None
                                ),
                            },
                        ),
                    ),
                    "finalizers": st.one_of(st.none(), st.lists(word, max_size=2)),
                    "ownerReferences": st.one_of(
                        st.none(),
                        st.lists(
                            st.fixed_dictionaries(
                                {"kind": text, "name": text, "uid": text},
                                optional={"controller": st.one_of(st.booleans(), st.none())},
                            ),
                            max_size=2,
                        ),
                    ),
                },
            ),
        },
        optional={
            "kind": rarely(st.just("Pod"), "", "Node"),
            "spec": st.fixed_dictionaries(
                {},
                optional={
                    "nodeName": k8s_name,
                    "terminationGracePeriodSeconds": st.one_of(st.integers(0, 60), st.none()),
                    "containers": containers,
                    "initContainers": containers,
                    "ephemeralContainers": containers,
                },
            ),
            "status": st.fixed_dictionaries(
                {},
                optional={
                    "phase": text,
                    "reason": text,
                    "message": text,
                    "startTime": time,
                    "conditions": st.one_of(
                        st.none(),
                        st.lists(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "type": text,
                                    "status": st.sampled_from(["True", "False", "Unknown"]),
                                    "reason": text,
                                    "message": text,
                                    "lastTransitionTime": time,
                                },
                            ),
                            max_size=3,
                        ),
                    ),
                    "containerStatuses": st.one_of(st.none(), st.lists(status, max_size=3)),
                    "initContainerStatuses": st.one_of(st.none(), st.lists(status, max_size=2)),
                    "ephemeralContainerStatuses": st.one_of(st.none(), st.lists(status, max_size=2)),
                },
            ),
        },
    )


def _typed_path_takes(pod: dict[str, Any]) -> bool:
    """Whether a well-typed pod is one the typed path must take (``wire_pod_observation``'s contract): a
    Pod (or no kind) with a name, a uid of at most 64 characters and a resourceVersion."""
    meta = pod["metadata"]
    mirror = ((meta.get("annotations") or {}).get("kubernetes.io/config.mirror")) or ""
    uid = mirror if 0 < len(mirror) <= UID_MAX else meta["uid"]
    node = (pod.get("spec") or {}).get("nodeName")
    return (
        pod.get("kind", "Pod") == "Pod"
        and bool(meta["name"])
        and 0 < len(meta["uid"]) <= UID_MAX
        and bool(meta["resourceVersion"])
        # names Kubernetes accepts (the observation contract's boundary, issue #35): a text namespace
        # like ':' is refused by both paths alike
        and name_problem("namespace", meta.get("namespace")) is None
        and name_problem("name", meta["name"]) is None
        and name_problem("node", node) is None
        and name_problem("pod_uid", uid) is None
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", str: "string", list: "array", dict: "object"}[type(value)]


# The order the mistyped test picks a JSON type to replace in: numbers and booleans first, whose string
# forms ("30", "true") are the likeliest wrong types on the wire (hypothesis favours the first choice).
JSON_TYPES = ("number", "boolean", "string", "null", "array", "object")


def _places(value: Any, path: tuple[Any, ...] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """Every place in a pod (the paths of all its values below the top), by the JSON type found there."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    children: Any = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    )
    for key, child in children:
        out.setdefault(_json_type(child), []).append((*path, key))
        for json_type, places in _places(child, (*path, key)).items():
            out.setdefault(json_type, []).extend(places)
    return out


def _mistyped(value: Any) -> st.SearchStrategy[Any]:
    """A value of another JSON type than ``value`` has, as a buggy client or a hostile proxy might send.
    Every field the typed subset reads is optional (null is allowed everywhere), so for a null the
    replacement is one no field takes: an array of numbers or a fraction."""
    if isinstance(value, bool):
        return st.sampled_from([str(value).lower(), "yes", int(value), 1.0])
    if isinstance(value, int):
        return st.sampled_from([str(value), float(value), value + 0.5, value % 2 == 1])
    if isinstance(value, str):
        return st.one_of(st.integers(-3, 3), st.booleans(), st.just(1.5), st.just([value]))
    if isinstance(value, list):
        return st.sampled_from(["x", 1, {}])
    if isinstance(value, dict):
        return st.sampled_from(["x", 1, [], [value]])
    return st.sampled_from([[1], 3.5])


def _put(pod: dict[str, Any], place: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of ``pod`` with ``value`` at ``place``."""
    out = json.loads(json.dumps(pod))
    target = out
    for key in place[:-1]:
        target = target[key]
    target[place[-1]] = value
    return out


COMPARED = "typed path taken: the same observation as the generic path"
INVALID = "no name, uid or resourceVersion, or not a Pod: left to the generic path"
MISTYPED = "a value of another type: left to the generic path"
MIN_COMPARED = 0.5  # most examples compare the two paths (0.61-0.76 of them in 15 runs of 400)


def _tally(outcomes: Counter[str], outcome: str) -> None:
    event(outcome)  # hypothesis statistics (--hypothesis-show-statistics)
    outcomes[outcome] += 1


def test_any_well_typed_pod_takes_the_typed_path_to_the_same_observation(outcomes: Counter[str]):
    @settings(max_examples=300, deadline=None)
    @given(pod=_pod_strategy(odd_forms=False), watch_type=st.sampled_from(["ADDED", "MODIFIED", "DELETED"]))
    def check(pod: dict[str, Any], watch_type: str) -> None:
        generic, wire = _generic(pod, watch_type), _wire(pod, watch_type)
        assert generic is not None and wire is not None
        _same(wire, generic)
        _tally(outcomes, COMPARED)

    check()
    assert outcomes[COMPARED] == sum(outcomes.values()) >= 300


def test_any_pod_shaped_object_gets_the_generic_observation_or_is_left_to_it(outcomes: Counter[str]):
    """GIVEN a pod with unusual values of the right types, and in a quarter of the examples one value of
    another type WHEN both paths read it THEN the typed path gives the generic path's observation for
    every valid, well-typed pod, and stands aside for every other one (the generic path names what is
    wrong or reads it). Most examples compare the two paths."""

    @settings(max_examples=400, deadline=None)
    @given(
        pod=_pod_strategy(odd_forms=True),
        watch_type=st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
        data=st.data(),
    )
    def check(pod: dict[str, Any], watch_type: str, data: st.DataObject) -> None:
        place = None
        # 2 or 3 mistypes: about a quarter of the examples, as hypothesis favours 0 in a large example.
        if data.draw(st.integers(0, 3), label="mistype a value when 2 or 3") >= 2:
            places = _places(pod)
            json_type = data.draw(st.sampled_from([t for t in JSON_TYPES if t in places]), label="type")
            place = data.draw(st.sampled_from(places[json_type]), label="where")
            value = pod
            for key in place:
                value = value[key]
            pod = _put(pod, place, data.draw(_mistyped(value), label="instead"))
        generic, wire = _generic(pod, watch_type), _wire(pod, watch_type)  # _generic: ValueError or nothing
        if place is not None:
            assert wire is None, f"the typed path took a pod with another type at {place}"
            _tally(outcomes, MISTYPED)
        elif _typed_path_takes(pod):
            assert generic is not None and wire is not None
            _same(wire, generic)
            _tally(outcomes, COMPARED)
        else:
            assert wire is None
            _tally(outcomes, INVALID)

    check()
    total = sum(outcomes.values())
    assert total >= 400
    assert outcomes[COMPARED] >= MIN_COMPARED * total, outcomes
    assert outcomes[MISTYPED] >= 0.1 * total and outcomes[INVALID] >= 1, outcomes


def test_observed_at_keeps_microseconds_and_the_watch_type():
    pod = {"metadata": {"name": "a", "uid": "u-1", "resourceVersion": "5"}}
    wire = _wire(pod, "DELETED")
    assert wire is not None and wire.observed_at == AT and wire.observed_at - AT == timedelta(0)
    assert (
        wire.kind == "pod_deleted"
        and wire.dedupe_key == "pod:u-1:5:deleted"
        and wire.payload["watch"] == "DELETED"
    )


@pytest.mark.parametrize(
    "name",
    [
        "minikube-1.20-mirror-pod-kube-apiserver.json",
        "akkeris-2019-pod-being-deleted.json",
        "akkeris-2022-pod-being-deleted.json",
    ],
)
@pytest.mark.parametrize("watch_type", ["MODIFIED", "DELETED"])
def test_real_recorded_pods_take_the_typed_path_to_the_generic_observation(
    name: str, watch_type: str
) -> None:
    """Pods recorded from real clusters (tests/fixtures/real/kubelet, SOURCES.md): a static pod's mirror
    (keyed on its manifest hash, a previous run's exit 255), and two pods being deleted (their deletion
    time and grace; the container terminated in one, still running in the other) read the same on the
    typed watch path as on the generic one, field for field and key for key."""
    real = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "kubelet"
    pod = json.loads((real / name).read_text())
    generic, wire = _generic(pod, watch_type), _wire(pod, watch_type)
    assert generic is not None and wire is not None
    _same(wire, generic)


# -- the observation made without the dataclass's __init__ ------------------------------------------------

_FIELD_VALUES = {
    "kind": st.sampled_from(["pod", "pod_deleted", "node", "podd", ""]),
    "source": st.sampled_from(["api", "synthetic", "kubectl", ""]),
    "observed_at": st.sampled_from(
        [AT, datetime(2026, 1, 1), EARLIEST, EARLIEST - timedelta(microseconds=1), LATEST, "2026-01-01"]
    ),
    "dedupe_key": st.sampled_from(["pod:u-1:5", "", "k" * 200, "k" * 201, None]),
    "pod_uid": st.sampled_from(["u-1", None, "", "u" * 65, "a b", 7]),
    "node": st.sampled_from(["node-1", None, "", "Node_1", "n" * 254]),
    "namespace": st.sampled_from(["default", None, "", "a.b", ["x"]]),
    "name": st.sampled_from(["web-1", None, "", "..", "a/b", "A\u202e"]),
    "payload_json": st.sampled_from([b'{"a":1}', b"{}", b"[1]", b"", '{"a":1}']),
}


@settings(max_examples=400, deadline=None)
@given(values=st.fixed_dictionaries(_FIELD_VALUES))
def test_encoded_observation_is_the_dataclass_made_and_checked_the_same_way(values: dict[str, Any]):
    """``encoded_observation`` (the typed pod path's way to make one) gives the ``EncodedObservation`` the
    dataclass gives for the same fields, or refuses the same ones naming the same problems."""
    try:
        made = EncodedObservation(**values)
    except InvalidObservation as exc:
        with pytest.raises(InvalidObservation) as refused:
            encoded_observation(**values)
        assert (refused.value.key, refused.value.problems) == (exc.key, exc.problems)
        return
    fast = encoded_observation(**values)
    assert type(fast) is EncodedObservation and fast == made
    assert [getattr(fast, f) for f in _FIELD_VALUES] == [getattr(made, f) for f in _FIELD_VALUES]
