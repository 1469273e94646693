"""The one rule of docs/kubelet-lines.md ("Every bound where a line proves it"), held over generated pod
lives written as kubelet log lines (synthetic, in the message formats of 1.23 and 1.29 kubelets), read at
--v=2, 3 or 4, cut to any excerpt, through the real parser and the lifecycle core:

* every bound of a worker interval sits at the time of a line of the excerpt;
* ``unknown`` covers only what no line decides: no line that begins a state lies inside it;
* no line that proves a bound is left unused: the worker's first sight, a termination request and the
  worker's end each bound an interval when the excerpt holds them;
* the first sync is ``setup`` from the first sight until it returns; with no word on the containers after
  it, what follows before termination is ``unknown``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.parsers.kubelet_log import parse_kubelet_log
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.resolve import anchors_of, resolve_pod_observations

UID = "2f6c1a9e-7b3d-4c8e-9f1a-5d7b9c1e3a5f"
POD = "default/web-5c9d7f8b6-q2x7z"
T0 = datetime(2024, 3, 5, 10, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Line:
    at: datetime
    level: int
    message: str
    kind: str  # what it proves: "first" (first sight), "sync_enter", "sync_exit", "term" (a termination
    # request), "done" (the worker's end), "" (inside a state)
    extra: str = ""  # key=value pairs after pod / podUID
    uid: bool = True  # the line names the UID (SyncLoop lines name the pod only)


def life(gaps: list[float], *, deleted: bool) -> list[Line]:
    """One pod's life, as the kubelet logs it (k8s-facts.md §12.2), each step ``gaps`` seconds apart."""
    at = T0
    out: list[Line] = []
    steps: list[tuple[int, str, str, str, bool]] = [
        (2, "SyncLoop ADD", "first", ' source="api"', False),
        (4, "Pod is being synced for the first time", "first", "", True),
        (4, "SyncPod enter", "sync_enter", "", True),
        (4, "SyncPod exit", "sync_exit", " isTerminal=false", True),
    ]
    if deleted:
        steps += [
            (2, "SyncLoop DELETE", "term", ' source="api"', False),
            (4, "Pod is marked for graceful deletion, begin teardown", "term", "", True),
            (3, "Cancelling current pod sync", "term", ' workType="terminating"', True),
            (4, "SyncTerminatingPod enter", "", "", True),
            (2, "Killing container with a grace period", "", ' containerName="app" gracePeriod=30', True),
            (4, "SyncTerminatingPod exit", "", "", True),
            (4, "Pod terminated all containers successfully", "", "", True),
            (4, "SyncTerminatedPod enter", "", "", True),
            (4, "SyncTerminatedPod exit", "", "", True),
            (4, "Pod is complete and the worker can now stop", "done", "", True),
            (
                3,
                "The pod termination is finished as SyncTerminatedPod completes its execution",
                "done",
                "",
                True,
            ),
        ]
    # Lines of one transition are logged in one breath (the ADD and the first sync, the DELETE and the
    # teardown); the gaps fall between transitions.
    together = {
        "Pod is being synced for the first time",
        "Pod is marked for graceful deletion, begin teardown",
        "Cancelling current pod sync",
        "Pod terminated all containers successfully",
        "The pod termination is finished as SyncTerminatedPod completes its execution",
    }
    for i, (level, message, kind, extra, uid) in enumerate(steps):
        at += timedelta(microseconds=100) if message in together else timedelta(seconds=gaps[i % len(gaps)])
        out.append(Line(at, level, message, kind, extra, uid))
    return out


def json_line(line: Line) -> str:
    """The line as `--logging-format=json` prints it (epoch milliseconds, KObj pods)."""
    import json

    namespace, name = POD.split("/")
    record: dict[str, object] = {
        "ts": (line.at - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(milliseconds=1),
        "caller": "kubelet/kubelet.go:1",
        "msg": line.message,
        "v": line.level,
    }
    if line.uid:
        record |= {"pod": {"name": name, "namespace": namespace}, "podUID": UID}
    else:
        record["pods"] = [{"name": name, "namespace": namespace}]
    for pair in line.extra.split():
        key, _, value = pair.partition("=")
        record[key] = int(value) if value.isdigit() else value.strip('"')
    return json.dumps(record)


def klog(line: Line, *, old: bool) -> str:
    """The line as a 1.23 kubelet (lowercase sync methods, unquoted values, numeric types) or a 1.29
    one (quoted values) prints it."""
    stamp = line.at.strftime("%m%d %H:%M:%S.%f")
    message = line.message
    extra = line.extra
    if old:
        for method in ("SyncPod", "SyncTerminatingPod", "SyncTerminatedPod"):
            message = message.replace(f"{method} ", method[0].lower() + method[1:] + " ")
        extra = extra.replace('workType="terminating"', "updateType=1")
    if line.uid:
        uid = f"podUID={UID}" if old else f'podUID="{UID}"'
        keys = f'pod="{POD}" {uid}{extra}'
    else:
        keys = f"{extra.strip()} pods=[{POD}]" if old else f'{extra.strip()} pods=["{POD}"]'
    return f'I{stamp}    2981 kubelet.go:1] "{message}" {keys}'


def derive(lines: list[Line], *, old: bool, json: bool = False):  # type: ignore[no-untyped-def]
    text = [json_line(x) if json else klog(x, old=old) for x in lines]
    parsed = parse_kubelet_log(text, node="node-a", year=2024, tz=UTC)
    obs = parsed.observations + parsed.processes
    own = [o for o in obs if o.pod_uid]
    if not own:
        return None, obs
    return derive_pod_timeline(resolve_pod_observations(UID, own, obs, anchors_of(own))), obs


@settings(max_examples=120, deadline=None)
@given(
    gaps=st.lists(st.sampled_from([0.000_05, 0.3, 2.0, 7.5, 40.0]), min_size=3, max_size=8),
    deleted=st.booleans(),
    verbosity=st.sampled_from([2, 3, 4]),
    old=st.booleans(),
    json=st.booleans(),
    cut=st.tuples(st.integers(0, 6), st.integers(0, 6)),
)
def test_every_worker_bound_sits_where_a_line_proves_it(
    gaps: list[float], deleted: bool, verbosity: int, old: bool, json: bool, cut: tuple[int, int]
) -> None:
    whole = [x for x in life(gaps, deleted=deleted) if x.level <= verbosity]
    excerpt = whole[cut[0] : len(whole) - cut[1]]
    tl, obs = derive(excerpt, old=old, json=json)
    if tl is None:
        return  # the excerpt names no UID: nothing to draw (the resolver has nothing to attach it to)
    lane = tl.lane("worker")
    times = {o.observed_at for o in obs}
    # 1. Every bound is a line's time.
    for iv in lane:
        assert iv.start in times, (iv, excerpt)
        assert iv.end is None or iv.end in times, (iv, excerpt)
    bounds = {iv.start for iv in lane} | {iv.end for iv in lane if iv.end is not None}

    def near_bound(at: datetime) -> bool:  # lines of one transition (within a second): the best dates it
        return any(abs((b - at).total_seconds()) <= 1 for b in bounds)

    # 2. Unknown covers only what no line decides: no line that begins a state lies inside it.
    begins = [x.at for x in excerpt if x.kind in ("first", "term", "done")]
    for iv in lane:
        if iv.state == "unknown":
            inside = [b for b in begins if iv.start < b < (iv.end or b + timedelta(1))]
            assert all(near_bound(b) for b in inside), (iv, excerpt)
    # 3. No line that proves a bound is left unused.

    def used(kind: str) -> bool:
        group = [x.at for x in excerpt if x.kind == kind]
        return not group or any(near_bound(g) for g in group)

    has_uid_line = any(x.uid for x in excerpt)
    if has_uid_line:
        assert used("term") and used("done"), (lane, excerpt)
        first = [x.at for x in excerpt if x.kind == "first"]
        if first and excerpt[0].kind == "first":
            assert lane and abs((lane[0].start - first[0]).total_seconds()) <= 1, (lane, excerpt)
    # 4. The first sync is setup from the first sight until it returned.
    kinds = [x.kind for x in excerpt]
    if verbosity == 4 and kinds[:4] == ["first", "first", "sync_enter", "sync_exit"]:

        def same(a: datetime | None, b: datetime) -> bool:  # JSON's epoch milliseconds round to ~1 µs
            return a is not None and abs(a - b) <= timedelta(microseconds=2)

        returned = excerpt[3].at
        setup = [iv for iv in lane if iv.state == "setup"]
        assert setup and any(same(setup[0].start, x.at) for x in excerpt[:2]), lane
        assert same(setup[0].end, returned), lane
        after = [iv for iv in lane if same(iv.start, returned)]
        assert after and after[0].state == "unknown", lane  # nothing says the containers started


@settings(max_examples=60, deadline=None)
@given(gaps=st.lists(st.sampled_from([0.3, 2.0, 7.5]), min_size=3, max_size=6), old=st.booleans())
def test_the_same_lines_in_any_spelling_give_the_same_lane(gaps: list[float], old: bool) -> None:
    """1.23 and 1.29 spell the same life differently: the lane is the same (states and bounds)."""
    lines = life(gaps, deleted=True)
    a, _ = derive(lines, old=True)
    b, _ = derive(lines, old=False)
    assert a is not None and b is not None
    assert [(iv.state, iv.start, iv.end) for iv in a.lane("worker")] == [
        (iv.state, iv.start, iv.end) for iv in b.lane("worker")
    ]
