"""The server's side of the dense views (issue #34): the node page's default window (its last 15 minutes,
or its latest drain), the owners a page groups its rows by, and a PDB's selector written as kubectl
writes it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client, RequestFactory

from dashboard.templatetags.times import wall_time
from dashboard.web.api.views import NODE_WINDOW, node_window
from timelines.models import Workload

T = datetime(2024, 6, 7, 6, 0, tzinfo=UTC)  # synthetic data: an hour of a node's history from here


def window(query: str, drain: tuple[datetime, datetime | None] | None) -> tuple[datetime, datetime]:
    request = RequestFactory().get(f"/api/v1/clusters/c/nodes/n/timeline{query}")
    return node_window(request, lambda: (T, T + timedelta(hours=1)), lambda: drain)


def test_a_node_opens_on_its_last_quarter_hour() -> None:
    """GIVEN a node with an hour of data, long past, and no cordon WHEN its window is asked without from
    THEN it is the last 15 minutes up to just after its newest data."""
    start, end = window("", None)
    assert end - start == NODE_WINDOW == timedelta(minutes=15)
    assert T + timedelta(hours=1) <= end < T + timedelta(hours=1, minutes=5)


def test_a_node_opens_on_its_drain_when_the_drain_is_recent() -> None:
    """GIVEN a cordon from 06:20 to 06:55 (ending within the last quarter hour) WHEN the window is asked
    THEN it begins just before the cordon and ends as before; an older drain (06:10-06:20) is not it,
    and a query's own from wins."""
    start, end = window("", (T + timedelta(minutes=20), T + timedelta(minutes=55)))
    assert start == T + timedelta(minutes=20) - timedelta(seconds=30) and end > T + timedelta(minutes=60)
    start, end = window("", (T + timedelta(minutes=20), None))  # still cordoned
    assert start == T + timedelta(minutes=20) - timedelta(seconds=30)
    start, end = window("", (T + timedelta(minutes=10), T + timedelta(minutes=20)))
    assert end - start == NODE_WINDOW
    start, _ = window("?from=2024-06-07T06:05:00Z", (T + timedelta(minutes=20), None))
    assert start == T + timedelta(minutes=5)


def test_the_namespace_page_hands_its_rows_their_owners(admin_user: Any, lab: Any) -> None:
    """GIVEN ReplicaSet web-7d9 owned by Deployment web in namespace default WHEN the namespace page opens
    THEN its page data maps the ReplicaSet to the Deployment (rows.js climbs it), and the chart comes
    before the list of workloads."""
    Workload.objects.create(cluster=lab["lab"], kind="Deployment", uid="d-1", namespace="default", name="web")
    Workload.objects.create(
        cluster=lab["lab"],
        kind="ReplicaSet",
        uid="rs-1",
        namespace="default",
        name="web-7d9",
        owner_kind="Deployment",
        owner_name="web",
        owner_uid="d-1",
    )
    client = Client()
    client.force_login(admin_user)
    html = client.get("/c/lab/ns/default/").content.decode()
    data = json.loads(
        re.search(r'<script id="page-data" type="application/json">(.*?)</script>', html, re.S)[1]
    )
    assert data["owners"] == {"default/ReplicaSet/web-7d9": ["Deployment", "web"]}
    assert html.index('id="gantt"') < html.index('class="cards"')
    node = client.get("/c/lab/nodes/node-a/").content.decode()
    assert '"owners": {"default/ReplicaSet/web-7d9": ["Deployment", "web"]}' in node


@pytest.mark.parametrize(
    ("at", "text"),
    [
        (datetime(2024, 6, 7, 6, 54, 47, tzinfo=UTC), "2024-06-07 06:54:47"),  # an API timestamp: whole s
        (datetime(2024, 6, 7, 6, 54, 47, 250000, tzinfo=UTC), "2024-06-07 06:54:47.250"),  # a kubelet line
        (datetime(2024, 6, 7, 6, 54, 47, 250001, tzinfo=UTC), "2024-06-07 06:54:47.250001"),  # a span
        (None, ""),
    ],
)
def test_server_printed_times_are_trimmed_to_their_precision(at: datetime | None, text: str) -> None:
    assert wall_time(at) == text


def test_the_findings_page_prints_no_trailing_zeros(admin_user: Any, lab: Any) -> None:
    """GIVEN findings of the lab cluster (starts on whole milliseconds) WHEN the findings page is read THEN
    no start ends in ".000000" and each is its instant to the millisecond."""
    client = Client()
    client.force_login(admin_user)
    html = client.get("/findings/").content.decode()
    starts = re.findall(r'<tr><td class="mono">([^<]*)</td>', html)
    assert starts and not any(s.endswith("000") for s in starts), starts
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{3}|\.\d{6})?", s) for s in starts), starts
