"""The timeline value types: time spelling, JSON shape and read_timeline errors."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests.lifecycle import scenarios
from timelines.lifecycle import SCHEMA, derive_pod_timeline, format_time, parse_time, schema


def test_times_are_utc_with_microseconds_always() -> None:
    assert format_time(datetime(2024, 6, 7, 6, 54, 47, tzinfo=UTC)) == "2024-06-07T06:54:47.000000+00:00"
    cest = timezone(timedelta(hours=2))
    assert (
        format_time(datetime(2024, 6, 7, 8, 54, 47, 120, tzinfo=cest)) == "2024-06-07T06:54:47.000120+00:00"
    )
    assert format_time(None) is None
    with pytest.raises(ValueError, match="naive"):
        format_time(datetime(2024, 6, 7))
    assert parse_time("2024-06-07T06:54:47Z") == datetime(2024, 6, 7, 6, 54, 47, tzinfo=UTC)
    assert parse_time(None) is None
    with pytest.raises(ValueError, match="no offset"):
        parse_time("2024-06-07T06:54:47")


def test_json_shape_of_the_graceful_delete() -> None:
    observations = scenarios.graceful_delete()
    data = json.loads(
        json.dumps(schema.to_builtins(schema.write_timeline(derive_pod_timeline(observations), "prod-eu")))
    )
    assert data["schema"] == SCHEMA == "podlife.timeline/v2"
    assert data["pod"]["uid"] == scenarios.UID
    assert (data["pod"]["namespace"], data["pod"]["name"], data["pod"]["node"]) == (
        "default",
        "web-1",
        "node-a",
    )
    assert list(data["lanes"])[:3] == ["worker", "api", "container:app"]
    assert [iv["state"] for iv in data["lanes"]["worker"]] == ["setup", "running", "terminating", "cleanup"]
    assert data["lanes"]["worker"][2] == {
        "state": "terminating",
        "start": "2024-06-07T06:55:00.450000+00:00",
        "end": "2024-06-07T06:55:03.201500+00:00",
        "source": "observed",
        "attrs": {
            "cycle": 0,
            "start_from": "termination_requested",
            "end_from": "containers_terminated",
            "cause": "deletion",
            "grace_seconds": 30,
            # The observations that prove the two bounds (checked below, against the scenario).
            "start_evidence": data["lanes"]["worker"][2]["attrs"]["start_evidence"],
            "end_evidence": data["lanes"]["worker"][2]["attrs"]["end_evidence"],
        },
        "evidence": data["lanes"]["worker"][2]["evidence"],  # checked below, against the scenario
    }
    # The terminating bar's evidence: the kubelet's teardown lines, span and markers, by their keys in the
    # scenario; nothing from before the termination request or after the containers stopped.
    key = {
        (o.payload.get("transition") or o.payload.get("reason") or o.payload.get("name")): o.dedupe_key
        for o in observations
        if o.kind in ("worker", "kubelet_marker", "span")
    }
    evidence = data["lanes"]["worker"][2]["evidence"]
    assert len(evidence) == len(set(evidence))
    bounds = data["lanes"]["worker"][2]["attrs"]
    assert (bounds["start_evidence"], bounds["end_evidence"]) == (
        key["termination_requested"],
        key["containers_terminated"],
    )
    assert set(evidence) >= {
        key["termination_requested"],
        key["observed_terminate"],
        key["terminating_enter"],
        key["syncTerminatingPod"],
        key["GracePeriod"],
        key["KillingContainer"],
    }
    inside = {
        o.dedupe_key
        for o in observations
        if parse_time("2024-06-07T06:55:00.45Z") <= o.observed_at <= parse_time("2024-06-07T06:55:03.2015Z")
    }
    assert set(evidence) <= inside
    assert data["lanes"]["api"][-1]["state"] == "deleted"
    assert data["markers"][0] == {
        "at": "2024-06-07T06:54:41.000000+00:00",
        "kind": "event",
        "reason": "Scheduled",
        "message": "Successfully assigned default/web-1 to node-a",
        "attrs": {
            "type": "Normal",
            "count": 1,
            "component": "default-scheduler",
            "first": "2024-06-07T06:54:41.000000+00:00",
            "last": "2024-06-07T06:54:41.000000+00:00",
            "field_path": None,
            "event_uid": "ev-sched",
        },
        "evidence": ["event:ev-sched:1"],
    }
    assert data["findings"] == []


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda d: d.update(schema="podlife.timeline/v0"), "schema"),
        (lambda d: d.pop("lanes"), "missing required field `lanes`"),
        (lambda d: d["lanes"]["worker"][0].update(source="guessed"), "source"),
        (
            lambda d: d["lanes"]["worker"][0].update(start="yesterday"),
            r"start: time 'yesterday' is not ISO 8601.* - at `\$\.lanes\['worker'\]\[0\]`",
        ),
        (
            lambda d: d["lanes"]["worker"][0].update(start=""),
            r"start is required .* at `\$\.lanes\['worker'\]\[0\]`",
        ),
        (
            lambda d: d["findings"].append({"kind": "x"}),
            r"missing required field `severity` - at `\$\.findings\[0\]`",
        ),
        (lambda d: d["pod"].update(uid=""), r"uid must be a non-empty string - at `\$\.pod`"),
    ],
)
def test_read_timeline_names_what_is_wrong(mutate: object, error: str) -> None:
    data = schema.to_builtins(schema.write_timeline(derive_pod_timeline(scenarios.graceful_delete()), "c"))
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ValueError, match=error):
        schema.read_timeline(data)


def test_the_schema_doc_example_reads_back() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "timeline-schema.md").read_text(encoding="utf-8")
    example = json.loads(doc.split("```json", 1)[1].split("```", 1)[0])
    timeline = schema.read_timeline(example)
    assert [iv.state for iv in timeline.lane("worker")] == ["setup", "terminating", "cleanup"]
    assert schema.to_builtins(schema.write_timeline(timeline, example["cluster"])) == example


def test_a_v1_document_still_reads_with_its_meaning_kept() -> None:
    """An incident bundle written by an older podlife holds podlife.timeline/v1: it reads, its setup (the
    whole SyncPod in v1) is marked as such, and it writes back as v2."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "timeline-schema.md").read_text(encoding="utf-8")
    example = json.loads(doc.split("```json", 1)[1].split("```", 1)[0])
    v1 = {**example, "schema": "podlife.timeline/v1"}
    timeline = schema.read_timeline(v1)
    setup = timeline.lane("worker")[0]
    assert setup.state == "setup" and setup.attrs["v1_sync"] is True
    assert [iv.attrs.get("v1_sync") for iv in timeline.lane("worker")] == [True, None, None]
    assert schema.to_builtins(schema.write_timeline(timeline, "prod-eu"))["schema"] == "podlife.timeline/v2"


def test_an_api_state_cites_the_snapshots_that_show_it_and_no_other():
    """Every interval keeps the ids of its evidence (DESIGN.md, "Lanes of a pod timeline"): a click on a bar
    opens the objects that made it. GIVEN a pod seen scheduled (Pending on its node) at T0+1 and T0+2,
    then Running at T0+5 and T0+9 (its container started at T0+4) THEN the scheduled bar cites the two
    scheduled snapshots and the running bar the two Running ones: a bar cites the snapshot that dates it
    and those that show its state, never one showing another state."""
    from tests.lifecycle.factories import ctr, pod

    run = {"phase": "Running", "start_time": 3, "containers": [ctr("app", "running", started=4)]}
    snaps = [pod("u1", 1, 1), pod("u1", 2, 2), pod("u1", 3, 5, **run), pod("u1", 4, 9, **run)]
    keys = [o.dedupe_key for o in snaps]
    cited = {iv.state: set(iv.evidence) for iv in derive_pod_timeline(snaps).lane("api")}
    assert cited["scheduled"] == set(keys[:2])
    assert cited["running"] == set(keys[2:])


def test_what_could_not_be_read_travels_with_the_document() -> None:
    """GIVEN the graceful delete with one pod snapshot damaged (SYNTHETIC: a container state Kubernetes does
    not have) THEN the timeline names that problem, and its document read back names it too: a timeline
    handed on (``timeline --json``, a bundle) still says what its evidence could not say."""
    observations = scenarios.graceful_delete()
    at = next(i for i, o in enumerate(observations) if o.kind == "pod" and o.payload.get("containers"))
    damaged = observations[at]
    containers = [{**c, "state": "crashed"} for c in damaged.payload["containers"]]
    observations[at] = replace(damaged, payload={**damaged.payload, "containers": containers})
    tl = derive_pod_timeline(observations)
    assert [p for p in tl.problems if "state 'crashed'" in p]
    back = schema.read_timeline(schema.to_builtins(schema.write_timeline(tl, "c")))
    assert back.problems == tl.problems
