"""The HTTP side: streamed downloads, background jobs with progress, the upload form, access rules."""

from __future__ import annotations

import io

import orjson
import pytest
from django.contrib.auth.models import Group, User

from dashboard.models import ClusterGrant
from dashboard.web.access import create_token
from tests.export.conftest import SINCE, UNTIL
from tests.export.helpers import export_json, row_counts
from timelines.models import Cluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.export.urls")]

WINDOW = {"since": SINCE.isoformat(), "until": UNTIL.isoformat()}


@pytest.fixture(autouse=True)
def export_dir(settings, tmp_path, monkeypatch):
    from podlife_site.celery import app

    # The app reads its settings once, on first use: make that happen before the override below, or the
    # app would keep "eager" for every later test (tests/export/test_worker.py needs a broker); then its
    # own conf says "eager" for this test only.
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    settings.PODLIFE_EXPORT_DIR = tmp_path / "exports"
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture
def admin(db):
    return User.objects.create_superuser("admin", "a@example.org", "pw")


@pytest.fixture
def shop_reader(source_cluster):
    user = User.objects.create_user("reader", password="pw")
    group = Group.objects.create(name="other-readers")
    ClusterGrant.objects.create(group=group, cluster=source_cluster, namespace="other")
    user.groups.add(group)
    return user


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_download_streams_the_bundle_with_a_file_name(client, admin, source_cluster):
    client.force_login(admin)
    response = client.get("/c/src/export", {"node": "node-a", **WINDOW, "format": "json"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Disposition"] == 'attachment; filename="src_node-node-a_20240607T0554Z.json"'
    bundle = orjson.loads(body(response))
    assert bundle["metadata"]["counts"]["pods"] == 6
    gz = client.get("/c/src/export", {"node": "node-a", **WINDOW, "format": "json.gz"})
    import gzip

    assert orjson.loads(gzip.decompress(body(gz)))["schema"] == "podlife.incident/v1"
    html = client.get("/c/src/export", {"namespace": "shop", **WINDOW, "format": "html"})
    assert body(html).startswith(b"<!DOCTYPE html>")


def test_bad_requests_say_what_is_wrong(client, admin, source_cluster, monkeypatch):
    client.force_login(admin)
    r = client.get("/c/src/export", {"node": "node-a", "namespace": "shop", **WINDOW})
    assert r.status_code == 400 and "exactly one of" in r.json()["error"]
    r = client.get("/c/src/export", {"node": "node-a", "since": "x", "until": WINDOW["until"]})
    assert r.status_code == 400 and "not ISO 8601" in r.json()["error"]
    assert client.get("/c/nope/export", {"node": "n", **WINDOW}).status_code == 404
    monkeypatch.setattr("dashboard.web.export_views.SYNC_MAX_PODS", 2)
    r = client.get("/c/src/export", {"node": "node-a", **WINDOW})
    assert r.status_code == 413 and "/c/src/export/jobs" in r.json()["error"]


def _html_meta(html: bytes) -> dict:
    block = html.split(b'<script type="application/json" id="incident-data">', 1)[1].split(b"</script>", 1)[0]
    return orjson.loads(block)["meta"]


def test_html_export_opens_in_the_zone_the_exporter_picked(client, admin, source_cluster):
    """GIVEN a user whose page shows Europe/Paris time
    WHEN they download the HTML bundle with tz=Europe/Paris, or start a job with it, or give no zone
    THEN the file says it opens in Europe/Paris (UTC without one), its data stay UTC, and a zone that is
    not one is refused naming it."""
    client.force_login(admin)
    paris = client.get("/c/src/export", {"node": "node-a", **WINDOW, "format": "html", "tz": "Europe/Paris"})
    assert paris.status_code == 200
    meta = _html_meta(body(paris))
    assert meta["tz"] == "Europe/Paris" and meta["since"].endswith("+00:00")
    plain = client.get("/c/src/export", {"node": "node-a", **WINDOW, "format": "html"})
    assert _html_meta(body(plain))["tz"] == "utc"
    job = client.post(
        "/c/src/export/jobs", {"node": "node-a", **WINDOW, "format": "html", "tz": "Asia/Tokyo"}
    ).json()
    assert _html_meta(body(client.get(job["download_url"])))["tz"] == "Asia/Tokyo"
    for bad in ("Mars/Olympus", "../../etc/passwd", "Europe"):  # Europe: a folder of zones, not one
        r = client.get("/c/src/export", {"node": "node-a", **WINDOW, "format": "html", "tz": bad})
        assert r.status_code == 400 and repr(bad) in r.json()["error"]
        r = client.post("/c/src/export/jobs", {"node": "node-a", **WINDOW, "format": "html", "tz": bad})
        assert r.status_code == 400 and repr(bad) in r.json()["error"]


def test_background_job_reports_progress_and_serves_the_file(client, admin, source_cluster):
    """GIVEN a logged-in user WHEN they start a job (run eagerly here; on a real Celery worker in
    test_worker.py) THEN its status is done with progress at its total, and the download holds the pods."""
    client.force_login(admin)
    r = client.post("/c/src/export/jobs", {"namespace": "shop", **WINDOW, "format": "json"})
    assert r.status_code == 202, r.content
    job = r.json()
    status = client.get(job["status_url"]).json()
    assert status["state"] == "done"
    assert status["progress"]["done"] == status["progress"]["total"] > 0
    got = orjson.loads(body(client.get(job["download_url"])))
    assert got["metadata"]["counts"]["pods"] == 6
    # another user cannot see it
    other = User.objects.create_superuser("other", "o@example.org", "pw")
    other.is_superuser = False
    other.save()
    client.force_login(other)
    assert client.get(job["status_url"]).status_code == 404


def test_namespace_grant_limits_what_an_export_holds(client, shop_reader, source_cluster):
    client.force_login(shop_reader)
    # node-a ran only pods of namespace shop, which this user may not read: unknown to them (404)
    assert client.get("/c/src/export", {"node": "node-a", **WINDOW}).status_code == 404
    bundle = orjson.loads(body(client.get("/c/src/export", {"node": "node-b", **WINDOW})))
    assert [p["pod"]["name"] for p in bundle["pods"]] == ["api-x"] and bundle["nodes"] == []
    r = client.get("/c/src/export", {"namespace": "other", **WINDOW})
    assert [p["pod"]["name"] for p in orjson.loads(body(r))["pods"]] == ["api-x"]
    assert client.get("/c/src/export", {"namespace": "shop", **WINDOW}).status_code == 404


def test_bearer_token_works_and_anonymous_is_refused(client, admin, source_cluster):
    token = create_token(admin)
    r = client.get("/c/src/export", {"node": "node-b", **WINDOW}, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert r.status_code == 200
    assert (
        client.get("/c/src/export", {"node": "node-b", **WINDOW}, HTTP_ACCEPT="application/json").status_code
        == 401
    )
    assert client.get("/c/src/export", {"node": "node-b", **WINDOW}).status_code == 302  # to the login page


def test_upload_form_imports_and_refuses(client, admin, source_cluster):
    client.force_login(admin)
    assert b'name="bundle"' in client.get("/import").content
    raw = export_json(source_cluster)
    r = client.post(
        "/import", {"bundle": io.BytesIO(raw), "name": "uploaded"}, HTTP_ACCEPT="application/json"
    )
    assert r.status_code == 201, r.content
    assert r.json()["differences"] == []
    assert Cluster.objects.get(name="uploaded").read_only
    before = row_counts()
    damaged = io.BytesIO(raw[:-100])
    damaged.name = "incident.json"
    r = client.post("/import", {"bundle": damaged, "name": "broken"})
    assert r.status_code == 400 and b"truncated" in r.content
    assert row_counts() == before


def test_import_page_has_the_site_header(client, admin):
    """The import page is a page of the site: the header with the overview, findings and API links, the
    user and the log-out button, and the site's style sheet and icon."""
    client.force_login(admin)
    page = client.get("/import").content.decode()
    header = page.split("<header>", 1)[1].split("</header>", 1)[0]
    for link in ('href="/"', 'href="/findings/"', 'href="/api/"', 'href="/import"', admin.get_username()):
        assert link in header, link
    assert 'action="/accounts/logout/"' in header
    assert "podlife/podlife.css" in page and "podlife/favicon.svg" in page
    assert page.count("<html") == 1 and 'name="bundle"' in page


def test_only_staff_import(client, shop_reader):
    client.force_login(shop_reader)
    assert client.get("/import").status_code == 403
