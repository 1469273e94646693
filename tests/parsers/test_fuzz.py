"""Property tests: no exception escapes any parser; parsing is deterministic and prefix-independent."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from datetime import UTC, timedelta, timezone
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from collectors.parsers.k8s_objects import object_observation
from collectors.parsers.kubectl import read_kubectl_output
from collectors.parsers.kubelet_log import parse_kubelet_log
from timelines.lifecycle.observation import EARLIEST, LATEST

FRAGMENTS = [
    "I1019 00:23:45.896841     273 kubelet.go:1761] ",
    "E0101 00:00:00.000001 1 pod_workers.go:1] ",
    "Oct 19 00:23:45 kind-worker kubelet[273]: ",
    "2024-06-07T06:54:47+0000 host kubelet[1]: ",
    '"SyncPod enter" ',
    '"Error syncing pod, skipping" err=<',
    '"Pod is marked for graceful deletion, begin teardown" ',
    'pod="default/x" ',
    "podUID=d1c4757bcb230bf06ab7e866b62132a1 ",
    'podUID="0e5ec5c4-5f7a-4c1d-9c6c-2a3f0ab1b2c3" ',
    "event=&{ID:x Type:ContainerDied Data:{a [b]}} ",
    'status={"phase":[',
    "\t",
    " > ",
    '{"ts":1655581336241.7104,"msg":"SyncPod enter","podUID":"u","pod":{"name":"a","namespace":"b"}}',
    "\\",
    '"',
    "\x00",
    "\udcff",
]

line_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)), max_size=8).map("".join)


body = st.sampled_from(
    [
        '"SyncPod enter" pod="default/web-0" podUID=4f3761db-0a1b-4c2d-8e3f-9a8b7c6d5e4f',
        '"syncTerminatingPod enter" pod="default/t" podUID=d1c4757bcb230bf06ab7e866b62132a1',
        '"Killing container with a grace period" pod="a/b" podUID="3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b" containerName="c" gracePeriod=30',
        '"Pod is being evicted by the kubelet, begin teardown" pod="a/b" podUID=3f2a4b5c-6d7e-4f80-9a1b-2c3d4e5f6a7b updateType="kill"',
    ]
)
prefix = st.sampled_from(
    [
        "",
        "Mar 01 10:00:00 host-1 kubelet[42]: ",
        "Mar  1 10:00:00.123456 host-1 kubelet[42]: ",
        "2023-03-01T10:00:00+0000 host-1 kubelet[42]: ",
        "2023-03-01T10:00:00+00:00 host-1 kubelet: ",
    ]
)


# A kubelet line the parser reads (any journald prefix, klog header, a known message), sometimes followed by
# noise: mixed with noise lines, most examples give the parser something to read.
kubelet_line = st.builds(
    lambda pre, sev, micros, text, tail: (
        f"{pre}{sev}0301 10:00:00.{micros:06d}      42 kubelet.go:1] {text}{tail}"
    ),
    prefix,
    st.sampled_from(["I", "W", "E"]),
    st.integers(0, 999999),
    body,
    st.sampled_from(["", " ", ' extra="x"']) | st.text(max_size=8),
)
KLOG_HEADER = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d")
READ = "reached: observations to check"
NOTHING = "nothing read: only the line count to check"
MIN_READ = 0.5


def _tally(outcomes: Counter[str], observations: list) -> None:
    outcome = READ if observations else NOTHING
    event(outcome)
    outcomes[outcome] += 1


def test_no_exception_escapes_the_kubelet_parser(outcomes: Counter[str]):
    @settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.lists(st.one_of(line_text, st.binary(max_size=80), *[kubelet_line] * 4), min_size=1, max_size=12),
        # Years podlife supports (docs/configuration.md): a line outside them is counted as out_of_range, and
        # its examples would read nothing; the rolls past December stay inside too.
        st.integers(EARLIEST.year, LATEST.year - 20),
    )
    def check(lines, year):
        result = parse_kubelet_log(lines, node="n", year=year, tz=UTC)
        assert result.lines_read == len(lines)
        # Each klog header after the first may roll the year past December (its month two or more below
        # the highest seen: October, March, October, March is two new years).
        headers = sum(1 for line in lines if isinstance(line, str) and KLOG_HEADER.search(line))
        for obs in result.observations:
            assert obs.observed_at.utcoffset() == timedelta(0)
            # the year given, or one an ISO prefix holds (2023, 2024), or later by the rolls past December
            assert min(year, 2023) <= obs.observed_at.year <= max(year, 2024) + max(1, headers - 1)
            assert obs.node == "n" and obs.dedupe_key
        _tally(outcomes, result.observations)

    check()
    assert outcomes[READ] >= MIN_READ * sum(outcomes.values()) >= MIN_READ * 300, outcomes


def test_parsing_is_deterministic(outcomes: Counter[str]):
    @settings(max_examples=200)
    @given(st.lists(st.one_of(line_text, kubelet_line, kubelet_line), min_size=1, max_size=10))
    def check(lines):
        a = parse_kubelet_log(lines, node="n", year=2024, tz=timezone(timedelta(hours=-5)))
        b = parse_kubelet_log(list(lines), node="n", year=2024, tz=timezone(timedelta(hours=-5)))
        assert [(o.dedupe_key, o.observed_at, o.payload) for o in a.observations] == [
            (o.dedupe_key, o.observed_at, o.payload) for o in b.observations
        ]
        assert a.skipped == b.skipped
        _tally(outcomes, a.observations)

    check()
    assert outcomes[READ] >= MIN_READ * sum(outcomes.values()) >= MIN_READ * 200, outcomes


@given(body, prefix, st.integers(0, 999999), st.sampled_from(["I", "W", "E"]))
def test_each_line_has_the_same_dedupe_key_whatever_its_journald_prefix(text, pre, micros, sev):
    klog = f"{sev}0301 10:00:00.{micros:06d}      42 kubelet.go:1] {text}"
    plain = parse_kubelet_log([klog], node="n", year=2023, tz=UTC).observations
    prefixed = parse_kubelet_log([pre + klog], node="n", year=2023, tz=UTC).observations
    assert plain and [o.dedupe_key for o in plain] == [o.dedupe_key for o in prefixed]
    assert [o.observed_at for o in plain] == [o.observed_at for o in prefixed]
    assert plain[0].observed_at.microsecond == micros
    event(f"reached: {pre.split(' ')[0] or 'no prefix'} prefix compared")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
k8s_keys = st.sampled_from(["kind", "metadata", "items", "type", "object", "status", "spec", "name", "uid"])
k8s_like = st.recursive(
    json_values,
    lambda children: st.dictionaries(k8s_keys, children, max_size=5),
    max_leaves=25,
)


# Hand-written objects (tests/fixtures/k8s, in kubectl's output shapes) of every kind the parser supports (and a Service, which it refuses), with up to two fields of
# metadata, spec or status (or the top level) replaced by fuzz: most stay acceptable, some not.
OBJECTS = json.loads((Path(__file__).resolve().parent.parent / "fixtures/k8s/mixed-list.json").read_text())[
    "items"
]
FIELDS = ["kind", "name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "phase", "nodeName"]


def _edited(obj: dict, edits: list[tuple[str | None, str, object]]) -> dict:
    out = copy.deepcopy(obj)
    for section, key, value in edits:
        target = out if section is None else out.get(section)
        if isinstance(target, dict):
            target[key] = value
    return out


edited_objects = st.builds(
    _edited,
    st.sampled_from(OBJECTS),
    st.lists(
        st.tuples(
            st.sampled_from([None, "metadata", "spec", "status"]), st.sampled_from(FIELDS), json_values
        ),
        max_size=2,
    ),
)
KINDS = {"Pod": "pod", "Node": "node", "PodDisruptionBudget": "pdb", "Deployment": "workload"}


@settings(max_examples=300)
@given(
    st.one_of(k8s_like, edited_objects, edited_objects),
    st.sampled_from(["Pod", "Event", "Node", "PodDisruptionBudget", "Deployment", "DaemonSet", None]),
)
def test_object_observation_accepts_or_refuses_with_a_value_error_naming_the_object(obj, hint):
    """The contract: an observation (None only for an Event with no time to place it), or a ValueError that
    names the object and then says what was expected. Nothing else escapes."""
    try:
        obs = object_observation(obj, kind_hint=hint, watch_type="LIST", observed_at=None, source="offline")
    except ValueError as exc:
        event("refused with a ValueError")
        message = str(exc)
        assert ": " in message and message.split(": ", 1)[1].strip(), message
        return
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) and obj.get("kind") else hint
    if obs is None:
        event("accepted: an Event with nothing to record")
        assert kind == "Event"
        return
    event(f"accepted: {obs.kind}")
    assert obs.dedupe_key and obs.observed_at.utcoffset() == timedelta(0)
    if kind in KINDS:
        assert obs.kind.startswith(KINDS[kind]), (kind, obs.kind)


K8S = Path(__file__).resolve().parent.parent / "fixtures/k8s"
KUBECTL_TEXTS = [
    (K8S / name).read_text()
    for name in ("pods-list.json", "pods-watch.json", "mixed-list.json", "events-v1.json")
]
KUBECTL_WATCH = (K8S / "pods-watch.json").read_text()
INTERNAL = "could not read kubectl output"  # what the reader says when one of its own steps raised


def _values(stream: str) -> list[dict]:
    decoder, out, i = json.JSONDecoder(), [], 0
    while (i := len(stream) - len(stream[i:].lstrip())) < len(stream):
        value, i = decoder.raw_decode(stream, i)
        out.append(value)
    return out


WATCH_EVENTS = [
    e for e in _values(KUBECTL_WATCH) if e["type"] != "BOOKMARK"
]  # {"type": ..., "object": a pod}


@st.composite
def kubectl_text(draw: st.DrawFn) -> tuple[str, bool]:
    """Real kubectl output (a whole fixture, or a ``get -w`` stream of real watch events in any number and
    order), whole, or cut anywhere, or with a span replaced by noise; or noise alone. The flag says the
    text is whole real output."""
    kind = draw(st.sampled_from(["whole", "stream", "stream", "stream", "cut", "spliced", "noise"]))
    if kind == "noise":
        return draw(st.text(max_size=300) | k8s_like.map(json.dumps)), False
    if kind == "whole":
        return draw(st.sampled_from(KUBECTL_TEXTS)), True
    events = draw(st.lists(st.sampled_from(WATCH_EVENTS), min_size=1, max_size=6))
    text = draw(st.sampled_from(["\n", "", " \n\n"])).join(
        json.dumps(e, indent=draw(st.sampled_from([None, 2]))) for e in events
    )
    if kind == "stream":
        return text, True
    i = draw(st.randoms(use_true_random=False)).randrange(len(text) + 1)  # anywhere (integers favour 0)
    if kind == "cut":
        return text[:i], False
    return text[:i] + draw(st.text(max_size=20)) + text[i + draw(st.integers(0, 40)) :], False


def test_kubectl_reader_reads_what_it_can_and_names_the_input_in_every_error(outcomes: Counter[str]):
    """Whole real outputs read without an error; anything else gives observations or errors naming the
    input, and none of the reader's own steps raises (it would say so in an error, which it must not)."""

    @settings(max_examples=300, deadline=None)
    @given(kubectl_text())
    def check(case: tuple[str, bool]) -> None:
        text, whole = case
        result = read_kubectl_output(text, origin="fuzz.json")
        assert not [e for e in result.errors if INTERNAL in e], result.errors
        assert all(e.startswith("fuzz.json") for e in result.errors), result.errors
        for obs in result.observations:
            assert obs.dedupe_key and obs.observed_at.utcoffset() == timedelta(0)
        if whole:
            assert result.observations and not result.errors and not result.lost
        outcome = READ if result.observations else "errors or skips only"
        event(outcome)
        outcomes[outcome] += 1

    check()
    assert outcomes[READ] >= MIN_READ * sum(outcomes.values()) >= MIN_READ * 300, outcomes
