"""The browser's pure helpers (static/podlife/common.js, gantt.js, rows.js), run under Node.js: durations as
people say them, instants trimmed to their precision, instants of a sentence moved to the picked zone,
markers clustered, pods grouped by owner and folded when finished, and the row filters.

Each case calls one exported function with synthetic rows (named so) and compares with what the reader
should see; the expectations come from the rules (a minute and a half is "1 m 30 s"), not from the code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

STATIC = Path(__file__).resolve().parents[2] / "static" / "podlife"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is absent (apt-get install nodejs)")


def run(module: str, function: str, *args: Any) -> Any:
    """``function(*args)`` of ``static/podlife/<module>`` under Node, its result as JSON."""
    script = (
        f"const m = await import({json.dumps((STATIC / module).as_uri())});\n"
        f"const out = m[{json.dumps(function)}](...{json.dumps(list(args))});\n"
        "process.stdout.write(JSON.stringify(out === undefined ? null : out));\n"
    )
    done = subprocess.run(
        [str(NODE), "--experimental-default-type=module", "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (2_967_853, "2.97 s"),  # the "2.967853 s"
        (90_000_000, "1 m 30 s"),
        (850, "850 µs"),
        (12_345, "12.3 ms"),
        (3_000_000, "3 s"),
        (59_999_000, "1 m"),  # 59.999 s rounds to a minute, never "60 s"
        (3_599_000_000, "59 m 59 s"),
        (7_500_000_000, "2 h 5 m"),
        (90_000_000_000, "1 d 1 h"),
        (None, "open"),
    ],
)
def test_durations_read_as_people_say_them(us: int | None, text: str) -> None:
    assert run("common.js", "duration", us) == text


@pytest.mark.parametrize(
    ("us", "text"),
    [
        (1_717_743_281_000_000, "2024-06-07 06:54:41"),  # a whole second: no ".000000"
        (1_717_743_281_100_000, "2024-06-07 06:54:41.100"),  # milliseconds
        (1_717_743_281_000_123, "2024-06-07 06:54:41.000123"),  # microseconds: all six digits
    ],
)
def test_times_are_trimmed_to_their_precision(us: int, text: str) -> None:
    assert run("common.js", "display", us, "utc") == text
    # Plotly's axis and links keep every digit (what they read back must be exact).
    assert (
        run("common.js", "axisValue", us, "utc") == text.ljust(19, " ")[:19] + "." + f"{us % 1_000_000:06d}"
    )


def test_a_sentence_in_utc_follows_the_picked_zone() -> None:
    sentence = "terminating since 2024-06-07 06:54:47.250 UTC, 90 s past its grace period"
    assert run("common.js", "zoneText", sentence, "utc") == sentence
    assert run("common.js", "zoneText", sentence, "Asia/Kolkata") == (
        "terminating since 2024-06-07 12:24:47.250 Asia/Kolkata, 90 s past its grace period"
    )


def marker(seconds: float, reason: str) -> dict[str, Any]:
    return {"us": int(1_717_743_281_000_000 + seconds * 1e6), "reason": reason}


def test_markers_closer_than_the_gap_are_one_cluster() -> None:
    markers = [marker(0, "Scheduled"), marker(0.4, "Pulling"), marker(0.9, "Pulled"), marker(5, "Killing")]
    one_second = run("gantt.js", "clusterMarkers", markers, 1_000_000)
    assert [[m["reason"] for m in c["items"]] for c in one_second] == [
        ["Scheduled", "Pulling", "Pulled"],
        ["Killing"],
    ]
    apart = run("gantt.js", "clusterMarkers", markers, 100_000)
    assert [len(c["items"]) for c in apart] == [1, 1, 1, 1]


def pod(uid: str, name: str, start: str, owner: tuple[str, str] = ("", ""), **kw: Any) -> dict[str, Any]:
    """A synthetic compact window row (docs/api.md podlife.window/v1)."""
    return {
        "uid": uid,
        "namespace": "shop",
        "name": name,
        "node": kw.pop("node", "node-a"),
        "owner_kind": owner[0],
        "owner_name": owner[1],
        "phase": kw.pop("phase", "Running"),
        "deleted_at": kw.pop("deleted_at", None),
        "intervals": [["worker", "setup", f"2024-06-07T06:{start}Z", None, "observed", []]],
        "markers": kw.pop("markers", []),
        "findings": kw.pop("findings", []),
    }


OWNERS = {"shop/ReplicaSet/web-7d9": ["Deployment", "web"], "shop/ReplicaSet/web-5c4": ["Deployment", "web"]}


def labels(rows: list[dict[str, Any]]) -> list[str]:
    return [("  " * r.get("depth", 0)) + (r["label"] if r.get("header") else r["name"]) for r in rows]


def test_rows_group_deployment_replicaset_pods_in_order_of_start() -> None:
    pods = [
        pod("u1", "web-7d9-b", "55:10", ("ReplicaSet", "web-7d9")),
        pod("u2", "db-0", "50:00", ("StatefulSet", "db")),
        pod("u3", "web-5c4-a", "56:00", ("ReplicaSet", "web-5c4")),
        pod("u4", "web-7d9-a", "55:00", ("ReplicaSet", "web-7d9")),
        pod("u5", "debug", "52:00"),
        pod("u6", "backup-1-x", "58:00", ("Job", "backup-1")),
    ]
    rows = run("rows.js", "groupByOwner", pods, OWNERS)
    assert labels(rows) == [
        "StatefulSet db",
        "  db-0",
        "debug",
        "Deployment web",
        "  ReplicaSet web-7d9",
        "    web-7d9-a",
        "    web-7d9-b",
        "  ReplicaSet web-5c4",
        "    web-5c4-a",
        "Job backup-1",
        "  backup-1-x",
    ]
    assert all(r["header"] and r["intervals"] == [] for r in rows if r.get("header"))


def test_finished_pods_fold_into_their_owner_until_expanded() -> None:
    pods = [
        pod("u1", "web-7d9-a", "50:00", ("ReplicaSet", "web-7d9"), deleted_at="2024-06-07T06:50:10Z"),
        pod("u2", "web-7d9-b", "51:00", ("ReplicaSet", "web-7d9"), phase="Succeeded"),
        pod("u3", "web-7d9-c", "52:00", ("ReplicaSet", "web-7d9")),  # still running
        pod("u4", "lonely", "49:00", phase="Failed"),  # no owner: nothing to fold into
        pod("u5", "db-0", "53:00", ("StatefulSet", "db"), phase="Failed"),  # one finished pod: kept
    ]
    folded = run("rows.js", "collapseFinished", pods, OWNERS, None)
    assert [r["name"] for r in folded] == [
        "lonely",
        "Deployment web: 2 finished pods ▸",
        "web-7d9-c",
        "db-0",
    ]
    row = folded[1]
    assert (
        row["collapsed"] and row["key"] == "finished:shop/Deployment/web" and row["members"] == ["u1", "u2"]
    )
    assert len(row["intervals"]) == 2  # both pods' bars, on one row
    assert row["freshness"] is None  # no member waits for kubelet evidence


def test_a_folded_row_is_pending_from_its_first_pending_member() -> None:
    """GIVEN two finished pods of one owner, the second waiting for its node's kubelet evidence since
    06:54:47.3 WHEN they fold into one row THEN the row carries that pending instant (the chart draws
    its "kubelet evidence pending" tail), not nothing."""
    a = pod("u1", "web-7d9-a", "50:00", ("ReplicaSet", "web-7d9"), phase="Succeeded")
    b = pod("u2", "web-7d9-b", "51:00", ("ReplicaSet", "web-7d9"), phase="Failed")
    b["freshness"] = {
        "kubelet_until": "2024-06-07T06:54:47.300000+00:00",
        "pending_since": "2024-06-07T06:54:47.300000+00:00",
    }
    [row] = run("rows.js", "collapseFinished", [a, b], OWNERS, None)
    assert row["collapsed"] and row["freshness"] == {"pending_since": "2024-06-07T06:54:47.300000+00:00"}


def test_filters_match_a_part_of_a_name_uid_or_node_and_kinds() -> None:
    row = pod(
        "6f1e0c1a-kd2m-4000-8000-000000000001",
        "web-7d9f-kd2mp",
        "50:00",
        node="ip-10-0-3-17",
        findings=[["stuck_terminating", "warning", "…", "2024-06-07T06:50:00Z", None, []]],
        markers=[["2024-06-07T06:50:00Z", "event", "BackOff", "…", []]],
    )

    def passes(**f: str) -> bool:
        return bool(run("rows.js", "matchesFilters", row, f))

    assert passes(text="kd2mp") and passes(text="KD2MP") and passes(text="0c1a-kd") and passes(text="3-17")
    assert not passes(text="kd2mq")
    assert passes(findingKind="stuck_terminating") and not passes(findingKind="crash_loop")
    assert passes(eventReason="BackOff") and not passes(eventReason="Killing")
    assert passes()


def test_the_gantt_draws_close_markers_as_one_with_their_count_until_zoomed() -> None:
    """GIVEN a synthetic pod row with three events within 0.4 s and one 5 s later WHEN drawn two hours wide
    over 1,000 px (7.2 s a pixel) THEN one marker says "4"; WHEN drawn 40 s wide THEN the three are one
    marker saying "3" and the fourth stands alone; the legend groups are the lanes'."""
    from dashboard.web.figures import gantt_config

    at = [
        "2024-06-07T06:54:41.000Z",
        "2024-06-07T06:54:41.200Z",
        "2024-06-07T06:54:41.400Z",
        "2024-06-07T06:54:46Z",
    ]
    row = {
        "key": "u1",
        "label": "web-a",
        "title": "shop/web-a",
        "intervals": [["worker", "setup", "2024-06-07T06:54:40Z", "2024-06-07T06:55:00Z", "observed", []]],
        "markers": [
            [t, "event", r, "synthetic", []]
            for t, r in zip(at, ("Scheduled", "Pulling", "Pulled", "Started"), strict=True)
        ],
        "findings": [],
    }
    end = 1_717_743_300_000_000

    def clusters(view_us: int) -> tuple[list[str], list[str]]:
        fig = run(
            "gantt.js",
            "buildFigure",
            [row],
            gantt_config(),
            {"tz": "utc", "windowEnd": end, "viewUs": view_us, "plotPx": 1000},
        )
        counted = [t for t in fig["data"] if t["name"] == "markers (count)"]
        singles = [n for t in fig["data"] if t["name"] == "event" for n in t["x"]]
        return (counted[0]["text"] if counted else []), singles

    assert clusters(7_200_000_000) == (["4"], [])
    texts, singles = clusters(40_000_000)  # 40 ms a pixel: 12 px are 0.48 s
    assert texts == ["3"] and len(singles) == 1
    fig = run("gantt.js", "buildFigure", [row], gantt_config(), {"tz": "utc", "windowEnd": end})
    assert {t.get("legendgroup") for t in fig["data"]} == {"worker", "markers"}
