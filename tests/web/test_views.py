"""Pages: login required, grants narrow every page, hostile names render as text."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.stored import rows_of
from tests.web.conftest import PASSWORD, UID_EVIL, UID_KILLED, UID_OK, UID_SECRET, grant
from tests.web.factories import HOSTILE
from timelines.models import Cluster, Finding, Node, Pod

pytestmark = pytest.mark.django_db


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    "url", ["/", "/findings/", "/c/lab/", "/c/lab/nodes/node-a/", f"/c/lab/pods/{UID_OK}/"]
)
def test_every_page_redirects_anonymous_users_to_login(lab: Any, url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_login_page_logs_in_and_lands_on_the_overview(viewer: Any) -> None:
    client = Client()
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b'name="password"' in page.content
    response = client.post("/accounts/login/", {"username": "viewer", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    overview = client.get("/")
    assert b"What it collects" in overview.content  # the former landing page stays visible
    assert b'href="/c/lab/"' in overview.content
    assert b'href="/c/other/"' not in overview.content


class _Tables(HTMLParser):
    """The cells of every ``<table id=...>`` of a page, as text, with the classes of the spans in them."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.classes: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table], self.classes[self._table] = [], []
        elif self._table and tag == "tr":
            self.tables[self._table].append([])
            self.classes[self._table].append([])
        elif self._table and tag in ("td", "th"):
            self._cell = []
        elif self._table and tag == "span" and a.get("class"):
            self.classes[self._table][-1].append(a["class"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(content: str) -> _Tables:
    parser = _Tables()
    parser.feed(content)
    return parser


FLEET_DAY = datetime(2024, 6, 7, 12, tzinfo=UTC)
# (namespace, kind, severity, how many); "" is a node's finding, which needs a grant on the whole cluster
FLEET_FINDINGS = [
    ("team-a", "stuck_terminating", "critical", 2),
    ("team-a", "crash_loop", "warning", 1),
    ("team-b", "crash_loop", "warning", 2),
    ("team-b", "stuck_terminating", "warning", 1),
    ("team-b", "slow_cleanup", "info", 1),
    ("", "node_shutdown", "warning", 1),
]


@pytest.fixture
def fleet(db: Any) -> Cluster:
    """Cluster ``fleet``: 2 nodes; team-a with 3 pods (1 deleted), team-b with 2 (1 deleted); the findings
    of FLEET_FINDINGS. Derived rows written directly: this is about what the overview counts and whom it
    shows it to (the rules that make findings are tested in tests/lifecycle)."""
    cluster = Cluster.objects.create(name="fleet")
    Node.objects.bulk_create(Node(cluster=cluster, name=f"node-{i}", ready=True) for i in (1, 2))
    pods = [
        ("team-a", None),
        ("team-a", None),
        ("team-a", FLEET_DAY),
        ("team-b", None),
        ("team-b", FLEET_DAY),
    ]
    Pod.objects.bulk_create(
        Pod(cluster=cluster, uid=f"fleet-{i}", namespace=ns, name=f"p-{i}", node="node-1", deleted_at=gone)
        for i, (ns, gone) in enumerate(pods)
    )
    Finding.objects.bulk_create(
        Finding(
            cluster=cluster,
            pod_uid=f"fleet-{0 if ns == 'team-a' else 3}" if ns else None,
            namespace=ns,
            node="node-1",
            subject="pod" if ns else "node",
            subject_name=f"{ns}/p" if ns else "node-1",
            kind=kind,
            severity=severity,
            message=kind,
            start=FLEET_DAY + timedelta(minutes=i),
        )
        for ns, kind, severity, n in FLEET_FINDINGS
        for i in range(n)
    )
    return cluster


def test_overview_counts_pods_and_findings_by_kind_and_severity(admin_user: Any, fleet: Cluster) -> None:
    """GIVEN the fleet cluster WHEN an administrator opens the overview THEN the cluster row counts 2
    nodes, 3 live of 5 pods and 8 findings, and the findings table has one row per kind and severity
    with its count, each linking to exactly those findings."""
    client = logged_in(admin_user)
    page = tables(client.get("/").content.decode())
    assert page.tables["clusters"][1:] == [["fleet", "watched live", "2", "3 / 5", "8"]]
    assert page.tables["finding-counts"] == [
        ["cluster", "kind", "severity", "count"],
        ["fleet", "crash_loop", "warning", "3"],
        ["fleet", "node_shutdown", "warning", "1"],
        ["fleet", "slow_cleanup", "info", "1"],
        ["fleet", "stuck_terminating", "critical", "2"],
        ["fleet", "stuck_terminating", "warning", "1"],
    ]
    assert [c for c in page.classes["finding-counts"] if c] == [
        ["sev-warning"],
        ["sev-warning"],
        ["sev-info"],
        ["sev-critical"],
        ["sev-warning"],
    ]
    for _, kind, severity, count in page.tables["finding-counts"][1:]:
        listed = client.get("/findings/", {"cluster": "fleet", "kind": kind, "severity": severity})
        rows = tables(listed.content.decode()).tables["findings"][1:]
        assert [(r[1], r[2]) for r in rows] == [(severity, kind)] * int(count)


def test_overview_counts_only_what_a_namespace_grant_reads(fleet: Cluster) -> None:
    """GIVEN a user granted namespace team-a of fleet WHEN they open the overview THEN pods and findings
    are counted in team-a only (no node finding: that needs the whole cluster), and nodes only where
    team-a's pods ran (docs/security.md: a namespace grant reveals no other node)."""
    user = User.objects.create_user("team-a-reader", password=PASSWORD)
    grant(user, fleet, "team-a")
    page = tables(logged_in(user).get("/").content.decode())
    assert page.tables["clusters"][1:] == [["fleet", "watched live", "1", "2 / 3", "3"]]
    assert page.tables["finding-counts"][1:] == [
        ["fleet", "crash_loop", "warning", "1"],
        ["fleet", "stuck_terminating", "critical", "2"],
    ]


def test_cluster_page_lists_nodes_namespaces_and_only_readable_pods(viewer: Any) -> None:
    client = logged_in(viewer)
    content = client.get("/c/lab/").content.decode()
    assert "/c/lab/nodes/node-a/" in content
    assert "/c/lab/ns/default/" in content and "/c/lab/ns/evil/" in content
    assert "/c/lab/ns/secret/" not in content
    found = client.get("/c/lab/?q=vault").content.decode()
    assert "No pod you may read matches" in found
    found = client.get("/c/lab/?q=web-").content.decode()
    assert UID_OK in found and UID_KILLED in found


def test_search_by_uid_prefix_owner_and_node(admin_user: Any, lab: Any) -> None:
    client = logged_in(admin_user)
    assert UID_SECRET in client.get(f"/c/lab/?q={UID_SECRET[:20]}").content.decode()
    assert UID_OK in client.get("/c/lab/?q=web-7d9").content.decode()  # owner ReplicaSet
    assert UID_SECRET in client.get("/c/lab/?q=node-a").content.decode()


def test_unreadable_cluster_namespace_and_pod_are_404(viewer: Any) -> None:
    client = logged_in(viewer)
    assert client.get("/c/other/").status_code == 404
    assert client.get("/c/lab/ns/secret/").status_code == 404
    assert client.get(f"/c/lab/pods/{UID_SECRET}/").status_code == 404
    assert client.get(f"/c/lab/pods/{UID_OK}/").status_code == 200


def test_user_without_grants_sees_nothing(nobody: Any, lab: Any) -> None:
    client = logged_in(nobody)
    assert b"No cluster you may read yet" in client.get("/").content
    assert client.get("/c/lab/").status_code == 404
    assert b"killed_during_setup" not in client.get("/findings/").content


def test_hostile_pod_name_is_escaped_everywhere(viewer: Any) -> None:
    client = logged_in(viewer)
    for url in (f"/c/lab/pods/{UID_EVIL}/", "/c/lab/?q=img", "/c/lab/ns/evil/"):
        content = client.get(url).content.decode()
        assert HOSTILE not in content, url
    pod_page = client.get(f"/c/lab/pods/{UID_EVIL}/").content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in pod_page
    # In the JSON handed to the page script, < and > are \u003C / \u003E (json_script).
    assert "\\u003Cimg src=x onerror=alert(1)\\u003E" in pod_page


def test_pod_page_links_findings_to_their_evidence_observations(viewer: Any) -> None:
    content = logged_in(viewer).get(f"/c/lab/pods/{UID_KILLED}/").content.decode()
    assert "killed_during_setup" in content
    import re

    link = re.search(r'data-evidence="([\d,]+)"', content)
    assert link, "finding has no evidence link"
    for obs_id in link.group(1).split(","):
        assert f'id="obs-{obs_id}"' in content


def test_pod_page_diffs_two_observations(viewer: Any) -> None:
    ids = [o.id for o in rows_of(None, pod_uids=[UID_KILLED], kinds=["pod"], order=("observed_at",))]
    content = logged_in(viewer).get(f"/c/lab/pods/{UID_KILLED}/?a={ids[0]}&b={ids[-1]}").content.decode()
    assert f"Changes from observation {ids[0]} to {ids[-1]}" in content
    assert "phase" in content and "Failed" in content


def test_findings_page_filters_by_kind_severity_cluster_namespace_and_time(admin_user: Any, lab: Any) -> None:
    client = logged_in(admin_user)
    assert "web-killed" in client.get("/findings/?kind=killed_during_setup").content.decode()
    assert "web-killed" not in client.get("/findings/?kind=crash_loop").content.decode()
    assert "web-killed" not in client.get("/findings/?namespace=evil").content.decode()
    assert "web-killed" not in client.get("/findings/?cluster=other").content.decode()
    assert "web-killed" not in client.get("/findings/?from=2030-01-01T00:00:00Z").content.decode()
    bad = client.get("/findings/?from=yesterday").content.decode()
    assert "from: time &#x27;yesterday&#x27; is not ISO 8601" in bad


def test_node_page_carries_api_and_websocket_urls(viewer: Any) -> None:
    content = logged_in(viewer).get("/c/lab/nodes/node-a/").content.decode()
    assert "/api/v1/clusters/lab/nodes/node-a/timeline" in content
    assert "/ws/v1/nodes/lab/node-a/" in content
    assert '<script src="/vendor/plotly-basic.min.js">' in content  # the partial bundle, loaded first
    assert '"plotly_gl_js": "/vendor/plotly.min.js"' in content  # the full one, only for WebGL


@pytest.mark.parametrize(
    ("url", "banner"),
    [
        ("/vendor/plotly-basic.min.js", b"plotly.js (basic - minified) v"),
        ("/vendor/plotly.min.js", b"plotly.js v"),
    ],
)
def test_plotly_bundles_are_served_gzipped_and_cached(db: Any, url: str, banner: bytes) -> None:
    client = Client()
    response = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
    import gzip

    assert banner in gzip.decompress(response.content)[:400]
    assert client.get(url, HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304
    from dashboard.plotly_bundles import BUNDLES, CDN_URL, REMOTE_URL

    # Air-gapped clusters: no CDN in the code a browser gets (plotly.js's remote defaults point here), no
    # remote URL a literal starts with, and no host the published code names only in such literals (the
    # fetched defaults; prose and license comments name others) is left anywhere.
    served = client.get(url).content
    assert CDN_URL.findall(served) == []
    assert REMOTE_URL.findall(served) == []
    published = BUNDLES["partial" if "basic" in url else "full"].read_bytes()
    hosts = {m.split(b"//", 1)[1] for m in REMOTE_URL.findall(published)}
    only_in_literals = [h for h in hosts if h not in REMOTE_URL.sub(b".", published)]
    assert [host for host in only_in_literals if host in served] == []
    if "basic" not in url:  # the full bundle as published: its map traces' defaults are among them
        assert len(only_in_literals) >= 5


def test_the_vendored_partial_bundle_names_no_cdn() -> None:
    """The file in the repository is stored with its remote defaults rewritten (``make vendor-plotly``)."""
    from dashboard.plotly_bundles import CDN_URL, PARTIAL_PATH, REMOTE_URL, localized

    code = PARTIAL_PATH.read_bytes()
    assert CDN_URL.findall(code) == []
    assert REMOTE_URL.findall(code) == []
    assert localized(code) == code


def test_partial_plotly_bundle_is_the_installed_plotly_js_version_and_a_quarter_of_its_size() -> None:
    """The vendored partial bundle and the installed package's full one are the same plotly.js release
    (a figure means the same to both), and the partial one is what makes the first draw fast."""
    from dashboard.plotly_bundles import FULL_PATH, PARTIAL_PATH, version_of

    assert version_of(PARTIAL_PATH) == version_of(FULL_PATH)
    assert PARTIAL_PATH.stat().st_size * 3 < FULL_PATH.stat().st_size
    assert b"</script" not in PARTIAL_PATH.read_bytes().lower()  # it can be inlined in an export


def test_workload_and_pdb_pages(admin_user: Any, lab: Any) -> None:
    from datetime import UTC, datetime

    from timelines.models import Finding, PDBStatusSample, PodDisruptionBudget, Workload, WorkloadStatusSample

    t = datetime(2024, 6, 7, 6, 54, 40, tzinfo=UTC)
    rs = Workload.objects.create(
        cluster=lab["lab"], kind="ReplicaSet", uid="rs-uid-1", namespace="default", name="web-7d9"
    )
    WorkloadStatusSample.objects.create(workload=rs, at=t, replicas=2, ready=1, updated=2, available=1)
    pdb = PodDisruptionBudget.objects.create(
        cluster=lab["lab"],
        uid="pdb-1",
        namespace="default",
        name="web-pdb",
        selector={"matchLabels": {"app": "web"}},
    )
    PDBStatusSample.objects.create(
        pdb=pdb,
        at=t,
        disruptions_allowed=0,
        current_healthy=1,
        desired_healthy=2,
        expected_pods=2,
        reason="InsufficientPods",
    )
    for uid, message in (("pdb-1", "drain of node-a blocked by web-pdb"), ("pdb-2", "blocked by other-pdb")):
        Finding.objects.create(
            cluster=lab["lab"],
            subject="pdb",
            subject_name=f"default/{uid}",
            namespace="default",
            kind="pdb_blocking_drain",
            severity="warning",
            message=message,
            start=t,
            attrs={"pdb_uid": uid},
        )
    client = logged_in(admin_user)
    page = client.get("/c/lab/ns/default/ReplicaSet/web-7d9/").content.decode()
    assert "/api/v1/clusters/lab/workloads/default/ReplicaSet/web-7d9/timeline" in page
    assert '"status_figure"' in page
    pdb_page = client.get("/c/lab/ns/default/pdb/web-pdb/").content.decode()
    assert "still blocked" in pdb_page and "InsufficientPods" in pdb_page
    # The selector as kubectl writes it, never a Python dict.
    assert '<code id="pdb-selector">app=web</code>' in pdb_page and "matchLabels" not in pdb_page
    assert (
        "drain of node-a blocked by web-pdb" in pdb_page and "other-pdb" not in pdb_page
    )  # its own findings
    assert f"/c/lab/pods/{UID_OK}/" in pdb_page  # covered by the selector
    assert f"/c/lab/pods/{UID_SECRET}/" not in pdb_page  # other namespace
    assert client.get("/c/lab/ns/default/Job/x/").status_code == 404
    window = client.get("/api/v1/clusters/lab/workloads/default/ReplicaSet/web-7d9/timeline").json()
    assert {p["uid"] for p in window["pods"]} == {
        UID_OK,
        UID_KILLED,
    }  # same owner UID in "secret": not its pod
    status = client.get("/api/v1/clusters/lab/workloads/default/ReplicaSet/web-7d9/status").json()
    assert status["samples"][0]["ready"] == 1


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/c/lab/nodes/no-such-node/", "no node &#x27;no-such-node&#x27;"),
        ("/c/lab/ns/no-such-ns/", "no namespace &#x27;no-such-ns&#x27;"),
        ("/c/lab/pods/00000000-0000-4000-8000-00000000dead/", "00000000-0000-4000-8000-00000000dead"),
        ("/c/lab/ns/default/pdb/no-such-pdb/", "no-such-pdb"),
        ("/c/lab/ns/default/Deployment/no-such-deploy/", "no-such-deploy"),
        ("/c/no-such-cluster/", "no-such-cluster"),
    ],
)
def test_unknown_node_namespace_pod_and_objects_are_404_naming_them(
    admin_user: Any, lab: Any, path: str, says: str
) -> None:
    """GIVEN an admin who may read everything WHEN they open a node, namespace, pod, PDB, workload or
    cluster nothing stored knows THEN the answer is a 404 page that names it, never an empty 200 page."""
    response = logged_in(admin_user).get(path)
    assert response.status_code == 404, path
    body = response.content.decode()
    assert says in body, body[:2000]
    assert 'id="gantt"' not in body


def test_favicon_is_the_sites_own_icon(client: Any, admin_user: Any) -> None:
    """/favicon.ico (asked for by browsers on every kind of answer) leads to the site's SVG icon, without
    a login, and every page names it."""
    response = Client().get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("/podlife/favicon.svg")
    from django.contrib.staticfiles import finders

    icon = finders.find("podlife/favicon.svg")
    assert icon and Path(icon).read_text().startswith("<svg")
    assert 'rel="icon" href="/static/podlife/favicon.svg"' in logged_in(admin_user).get("/").content.decode()


def test_api_link_opens_the_sites_own_api_viewer(admin_user: Any) -> None:
    """The header's API link leads to a page of the site whose only scripts are its own static files,
    reading the OpenAPI document of this site (no CDN); it needs a login like every page."""
    client = logged_in(admin_user)
    overview = client.get("/").content.decode()
    assert '<a href="/api/">API</a>' in overview
    page = client.get("/api/").content.decode()
    scripts = re.findall(r"<script[^>]*>", page)
    assert scripts == [
        '<script type="module" src="/static/podlife/api-docs.js" data-openapi="/api/v1/openapi.json" '
        'id="api-docs-script">'
    ]
    assert "http://" not in page.replace("http://testserver", "") and "https://" not in page
    assert Client().get("/api/").status_code == 302  # to the login page


def test_overview_marks_stale_collector_streams(admin_user: Any, lab: Any, settings: Any) -> None:
    """A quiet watch that still ends its steps is not stale; one with no event and no finished step past
    PODLIFE_LIVE_STALE_S is marked stale on the overview (its lag cell), whatever its last event's age."""
    from django.utils import timezone

    from collectors.models import CollectorState

    settings.PODLIFE_LIVE_STALE_S = 90.0
    now = timezone.now()
    CollectorState.objects.create(
        cluster=lab["lab"], resource="daemonsets", last_event_at=now - timedelta(hours=2), last_step_at=now
    )
    CollectorState.objects.create(
        cluster=lab["lab"],
        resource="pods",
        last_event_at=now - timedelta(minutes=5),
        last_step_at=now - timedelta(minutes=4),
    )
    table = logged_in(admin_user).get("/").content.decode().split('id="collector-health"', 1)[1]
    rows = {r.split("</td>")[1].rsplit(">", 1)[1]: r for r in table.split("<tr>")[2:4]}
    assert "(stale)" in rows["pods"] and 'class="bad"' in rows["pods"]
    assert "(stale)" not in rows["daemonsets"] and 'class="bad"' not in rows["daemonsets"]


def test_the_legend_swatches_are_the_gantts_colours_and_readable(viewer: Any) -> None:
    """GIVEN a page with the worker phases' legend (every page's stylesheet carries its swatches)
    WHEN its inline CSS is read
    THEN each phase's swatch has the colour the Gantt draws that state in (figures.STATE_COLOURS, one
    table) and text meeting WCAG 2's 4.5:1 contrast for normal text."""
    from dashboard.templatetags.legend import contrast
    from dashboard.web.figures import STATE_COLOURS

    client = Client()
    client.force_login(viewer)
    page = client.get("/").content.decode()
    swatches = {
        phase: m
        for phase, *m in re.findall(r"\.lane\.(\w+) \{ background: (#\w{6}); color: (#\w{6}); \}", page)
    }
    assert set(swatches) == {"setup", "running", "terminating", "cleanup", "unknown"}
    for phase, (background, ink) in swatches.items():
        assert background == STATE_COLOURS[phase], phase
        assert contrast(background, ink) >= 4.5, phase
