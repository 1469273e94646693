"""REST API: bearer tokens (hashed), session auth, grants, JSON errors, the exact timeline schema."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from django.core.management import call_command
from django.test import Client

from dashboard.models import ApiToken
from tests.orm_timeline import orm_timeline
from tests.web.conftest import UID_EVIL, UID_KILLED, UID_OK, UID_SECRET
from timelines.lifecycle import schema
from timelines.models import Cluster, Pod

pytestmark = pytest.mark.django_db


def token_for(username: str) -> str:
    out = StringIO()
    call_command("api_token", username, stdout=out)
    return out.getvalue().strip()


def get(client: Client, url: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    response = client.get(url, **headers)
    assert response["Content-Type"] == "application/json"
    return response.status_code, json.loads(response.content)


def test_api_token_command_prints_a_token_and_stores_only_its_hash(viewer: Any) -> None:
    token = token_for("viewer")
    assert token.startswith("plf_") and len(token) > 40
    row = ApiToken.objects.get(user=viewer)
    assert token not in (row.key_hash, row.prefix) and len(row.key_hash) == 64
    status, body = get(Client(), "/api/v1/clusters", token)
    assert status == 200
    assert [c["name"] for c in body["clusters"]] == ["lab"]
    assert body["clusters"][0]["namespaces"] == ["default", "evil"]


def test_unknown_command_user_is_a_clear_error(db: Any) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("api_token", "ghost")


def test_missing_or_bad_credentials_are_401_json_naming_the_problem(lab: Any) -> None:
    status, body = get(Client(), "/api/v1/clusters")
    assert status == 401 and "authentication required" in body["error"]["message"]
    status, body = get(Client(), "/api/v1/clusters", "plf_not-a-token")
    assert status == 401 and body["error"]["param"] == "Authorization"
    response = Client().get("/api/v1/clusters", HTTP_AUTHORIZATION="Basic abc")
    assert response.status_code == 401 and b"Bearer TOKEN" in response.content


def test_revoked_token_stops_working(viewer: Any) -> None:
    token = token_for("viewer")
    call_command("api_token", "viewer", "--revoke-all", stderr=StringIO())
    assert get(Client(), "/api/v1/clusters", token)[0] == 401


def test_session_auth_works_for_the_browser(viewer: Any) -> None:
    client = Client()
    client.force_login(viewer)
    assert get(client, "/api/v1/clusters/lab/nodes")[0] == 200


def test_pod_timeline_is_exactly_podlife_timeline_v1(viewer: Any) -> None:
    token = token_for("viewer")
    status, body = get(Client(), f"/api/v1/clusters/lab/pods/{UID_KILLED}/timeline", token)
    assert status == 200
    cluster = Cluster.objects.get(name="lab")
    # The ORM's reading of the same rows (tests/orm_timeline.py), written by the one writer.
    expected = schema.to_builtins(
        schema.write_timeline(orm_timeline(cluster, Pod.objects.get(uid=UID_KILLED)), "lab")
    )
    assert body == json.loads(json.dumps(expected))
    assert body["schema"] == "podlife.timeline/v2"
    assert body["findings"][0]["kind"] == "killed_during_setup"
    # Times keep microseconds.
    assert body["lanes"]["worker"][0]["start"].endswith(".100000+00:00")


def test_grants_narrow_every_endpoint_and_unreadable_is_404(viewer: Any) -> None:
    token, c = token_for("viewer"), Client()
    assert get(c, f"/api/v1/clusters/lab/pods/{UID_SECRET}/timeline", token)[0] == 404
    assert get(c, "/api/v1/clusters/other/nodes", token)[0] == 404
    assert get(c, "/api/v1/clusters/lab/namespaces/secret/timeline", token)[0] == 404
    status, body = get(c, "/api/v1/clusters/lab/pods?q=a", token)
    assert {p["namespace"] for p in body["pods"]} == {"default", "evil"}
    status, body = get(c, "/api/v1/clusters/lab/nodes/node-a/timeline", token)
    assert {p["uid"] for p in body["pods"]} == {UID_OK, UID_KILLED, UID_EVIL}
    status, body = get(c, "/api/v1/clusters/lab/namespaces", token)
    assert [n["name"] for n in body["namespaces"]] == ["default", "evil"]
    status, body = get(c, "/api/v1/clusters/lab/nodes", token)
    assert body["nodes"][0]["pods"] == 3


def test_node_timeline_window_and_errors(admin_user: Any, lab: Any) -> None:
    token, c = token_for("root"), Client()
    status, body = get(c, "/api/v1/clusters/lab/nodes/node-a/timeline", token)
    assert status == 200 and body["schema"] == "podlife.window/v1"
    assert len(body["pods"]) == 4
    killed = next(p for p in body["pods"] if p["uid"] == UID_KILLED)
    lane, state, start, end, source, evidence = killed["intervals"][0]
    assert (lane, state, source) == ("worker", "setup", "observed") and all(
        isinstance(i, int) for i in evidence
    )
    assert killed["findings"][0][0] == "killed_during_setup"
    url = "/api/v1/clusters/lab/nodes/node-a/timeline?from=2024-06-07T06:54:41Z&to=2024-06-07T06:54:42Z&lanes=all"
    status, body = get(c, url, token)
    assert status == 200 and {iv[0] for p in body["pods"] for iv in p["intervals"]} >= {"worker", "api"}
    status, body = get(c, "/api/v1/clusters/lab/nodes/node-a/timeline?from=soon", token)
    assert (
        status == 400
        and body["error"]["param"] == "from"
        and "'soon' is not ISO 8601" in body["error"]["message"]
    )
    status, body = get(
        c,
        "/api/v1/clusters/lab/nodes/node-a/timeline?from=2024-06-08T00:00:00Z&to=2024-06-07T00:00:00Z",
        token,
    )
    assert status == 400 and "must be before" in body["error"]["message"]
    status, body = get(
        c,
        "/api/v1/clusters/lab/nodes/node-a/timeline?from=2024-01-01T00:00:00Z&to=2024-06-07T00:00:00Z",
        token,
    )
    assert status == 400 and "at most 31 days" in body["error"]["message"]
    status, body = get(c, "/api/v1/clusters/nope/nodes", token)
    assert status == 404 and "no cluster named 'nope'" in body["error"]["message"]


def test_observations_and_diff_endpoints(admin_user: Any, lab: Any) -> None:
    """GIVEN a pod whose finding cites its observations (the timeline by dedupe key, /findings by id)
    WHEN the pod's observations are asked for by those keys (``keys=``, repeated) and by those ids
    THEN both give exactly the cited observations; keys given with ids, or an empty key, is a 400 naming
    ``keys``; and two observations of the pod diff by id."""
    token, c = token_for("root"), Client()
    status, body = get(c, f"/api/v1/clusters/lab/pods/{UID_KILLED}/timeline", token)
    keys = body["findings"][0]["evidence"]
    assert keys and all(not k.isdigit() for k in keys)
    url = f"/api/v1/clusters/lab/pods/{UID_KILLED}/observations"
    status, obs = get(c, f"{url}?{urlencode([('keys', k) for k in keys])}", token)
    assert status == 200 and sorted(o["dedupe_key"] for o in obs["observations"]) == sorted(keys)
    status, listed = get(c, f"/api/v1/findings?kind={body['findings'][0]['kind']}", token)
    ids = [str(i) for i in listed["findings"][0]["evidence"]]
    status, by_id = get(c, f"{url}?ids={','.join(ids)}", token)
    assert sorted(str(o["id"]) for o in by_id["observations"]) == sorted(ids)
    assert sorted(o["dedupe_key"] for o in by_id["observations"]) == sorted(keys)
    for bad in (f"ids={ids[0]}&keys={quote(keys[0])}", "keys="):
        status, err = get(c, f"{url}?{bad}", token)
        assert status == 400 and err["error"]["param"] == "keys", bad
    pod_ids = [
        o["id"]
        for o in get(c, f"/api/v1/clusters/lab/pods/{UID_KILLED}/observations", token)[1]["observations"]
        if o["kind"] == "pod"
    ]
    status, diff = get(
        c, f"/api/v1/clusters/lab/pods/{UID_KILLED}/diff?a={pod_ids[0]}&b={pod_ids[-1]}", token
    )
    assert status == 200 and any(ch["path"] == "phase" and ch["after"] == "Failed" for ch in diff["changes"])
    status, err = get(c, f"/api/v1/clusters/lab/pods/{UID_OK}/diff?a={pod_ids[0]}&b={pod_ids[-1]}", token)
    assert status == 404 and err["error"]["param"] == "a"


def test_findings_endpoint_filters_and_validates(viewer: Any) -> None:
    token, c = token_for("viewer"), Client()
    status, body = get(c, "/api/v1/findings?kind=killed_during_setup", token)
    assert status == 200 and body["total"] == 1 and body["findings"][0]["pod_uid"] == UID_KILLED
    status, body = get(c, "/api/v1/findings?severity=fatal", token)
    assert status == 400 and body["error"]["param"] == "severity"
    status, body = get(c, "/api/v1/findings?limit=0", token)
    assert status == 400 and body["error"]["param"] == "limit"


def test_openapi_document_lists_every_endpoint(viewer: Any) -> None:
    status, doc = get(Client(), "/api/v1/openapi.json", token_for("viewer"))
    assert status == 200 and doc["openapi"].startswith("3.")
    for p in (
        "/clusters",
        "/clusters/{cluster}/nodes/{node}/timeline",
        "/clusters/{cluster}/pods/{uid}/timeline",
        "/findings",
        "/clusters/{cluster}/pdbs/{namespace}/{name}",
        "/clusters/{cluster}/workloads/{namespace}/{kind}/{name}/timeline",
    ):
        assert p in doc["paths"], p
    from django.urls import get_resolver

    routes = {str(p.pattern) for p in get_resolver("dashboard.web.api.urls").url_patterns}
    assert len(routes) - 3 == len(doc["paths"])  # all but the root, the document itself and the JSON 404
    status, body = get(Client(), "/api/v1/nope", token_for("viewer"))
    assert status == 404 and "no API endpoint at /api/v1/nope" in body["error"]["message"]


def test_node_window_carries_the_nodes_own_lanes_and_respects_namespace_grants(
    viewer: Any, admin_user: Any
) -> None:
    """The node's own lanes go to whole-cluster readers only (docs/security.md); pods by namespace."""
    from datetime import UTC, datetime

    from timelines.models import Interval

    lab = Cluster.objects.get(name="lab")
    t = datetime(2024, 6, 7, 6, 54, 40, tzinfo=UTC)
    Interval.objects.create(
        cluster=lab, pod_uid=None, node="node-a", lane="node:ready", state="ready", start=t, source="observed"
    )
    status, whole = get(Client(), "/api/v1/clusters/lab/nodes/node-a/timeline", token_for("root"))
    assert whole["node_lanes"]["node:ready"][0][:3] == ["ready", "2024-06-07T06:54:40.000000+00:00", None]
    assert UID_SECRET in {p["uid"] for p in whole["pods"]}
    status, body = get(Client(), "/api/v1/clusters/lab/nodes/node-a/timeline", token_for("viewer"))
    assert status == 200 and body["node_lanes"] == {}
    # Window times are spelled as in podlife.timeline/v1: always microseconds.
    assert all(iv[2].endswith("+00:00") and len(iv[2]) == 32 for p in body["pods"] for iv in p["intervals"])
    assert UID_SECRET not in {p["uid"] for p in body["pods"]}
