"""The typed pod path (parsers/pod_wire.py) against the generic one: the same observation, or None."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.parsers.k8s_objects import object_observation
from collectors.parsers.pod_wire import decode_pod_event, decode_pod_list, wire_pod_observation
from timelines.lifecycle.observation import EncodedObservation, Observation, Source

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


def _pod_strategy(odd: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Pod-shaped objects; with ``odd``, values of unexpected types and forms are mixed in."""

    def either(valid: st.SearchStrategy[Any], *unusual: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(valid, *unusual) if odd else valid

    text = either(st.one_of(st.none(), st.text(max_size=6)), st.integers(-3, 3), st.booleans())
    word = either(st.text(max_size=6), st.none(), st.integers(-3, 3))  # never null in a real object
    time = either(
        st.one_of(
            st.none(),
            st.datetimes(timezones=st.just(UTC)).map(lambda t: t.isoformat().replace("+00:00", "Z")),
        ),
        st.just("0001-01-01T00:00:00Z"),
        st.just("garbage"),
        st.integers(0, 5),
    )
    detail = st.fixed_dictionaries(
        {},
        optional={
            "reason": text,
            "message": text,
            "exitCode": either(
                st.one_of(st.none(), st.integers(-1, 255)), st.text(max_size=2), st.floats(0, 2)
            ),
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
    names = either(st.sampled_from(["app", "side", "init"]), st.just(7), st.none())
    status = st.fixed_dictionaries(
        {"name": names},
        optional={
            "state": state,
            "lastState": state,
            "ready": either(st.one_of(st.booleans(), st.none()), st.just("yes")),
            "started": st.one_of(st.booleans(), st.none()),
            "restartCount": either(st.one_of(st.integers(0, 9), st.none()), st.just(True)),
        },
    )
    containers = st.one_of(st.none(), st.lists(st.fixed_dictionaries({"name": names}), max_size=3))
    return st.fixed_dictionaries(
        {
            "metadata": st.fixed_dictionaries(
                {
                    "name": either(st.sampled_from(["web-1", "db-0"]), st.just(""), st.none()),
                    "uid": either(st.uuids().map(str), st.just(""), st.just("u" * 65)),
                    "resourceVersion": either(st.integers(1, 99).map(str), st.just(""), st.integers(1, 9)),
                },
                optional={
                    "namespace": text,
                    "creationTimestamp": time,
                    "deletionTimestamp": time,
                    "deletionGracePeriodSeconds": either(
                        st.one_of(st.integers(0, 60), st.none()), st.just("30")
                    ),
                    "labels": st.one_of(st.none(), st.dictionaries(st.sampled_from(["app", "tier"]), word)),
                    "annotations": st.one_of(
                        st.none(),
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "kubernetes.io/config.mirror": either(text, st.just("m" * 70)),
                                "kubernetes.io/config.source": either(
                                    st.sampled_from(["api", "file", ""]), st.just(3)
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
                                optional={
                                    "controller": either(st.one_of(st.booleans(), st.none()), st.just(1))
                                },
                            ),
                            max_size=2,
                        ),
                    ),
                },
            ),
        },
        optional={
            "kind": either(st.just("Pod"), st.just(""), st.just("Node")),
            "spec": st.fixed_dictionaries(
                {},
                optional={
                    "nodeName": text,
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
                },
            ),
        },
    )


@settings(max_examples=300, deadline=None)
@given(pod=_pod_strategy(odd=False), watch_type=st.sampled_from(["ADDED", "MODIFIED", "DELETED"]))
def test_any_well_typed_pod_takes_the_typed_path_to_the_same_observation(
    pod: dict[str, Any], watch_type: str
):
    generic, wire = _generic(pod, watch_type), _wire(pod, watch_type)
    if generic is None or not pod["metadata"]["resourceVersion"]:  # no name or uid: invalid either way
        assert wire is None
    else:
        assert wire is not None
        _same(wire, generic)


@settings(max_examples=400, deadline=None)
@given(pod=_pod_strategy(odd=True), watch_type=st.sampled_from(["ADDED", "MODIFIED", "DELETED"]))
def test_any_pod_shaped_object_gets_the_generic_observation_or_is_left_to_it(
    pod: dict[str, Any], watch_type: str
):
    wire = _wire(pod, watch_type)
    if wire is not None:
        generic = _generic(pod, watch_type)
        assert generic is not None
        _same(wire, generic)


def test_observed_at_keeps_microseconds_and_the_watch_type():
    pod = {"metadata": {"name": "a", "uid": "u-1", "resourceVersion": "5"}}
    wire = _wire(pod, "DELETED")
    assert wire is not None and wire.observed_at == AT and wire.observed_at - AT == timedelta(0)
    assert (
        wire.kind == "pod_deleted"
        and wire.dedupe_key == "pod:u-1:5:deleted"
        and wire.payload["watch"] == "DELETED"
    )
