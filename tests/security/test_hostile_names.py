"""Any name a cluster or an ingest can hold renders and links, on every page and API route (issue #18,
finding 2 and deliverable 3): ``/``, ``?``, ``#``, ``%``, spaces, unicode, dots, quotes, 253 characters.
A name the store cannot hold (a 300-character node) is refused at ingest with a clear error.

The names arrive the way a hostile source would send them: a kubectl JSON list (node, pod, namespace,
UID, PDB, Deployment and a label value all carry the name) through the same parser and store as
``manage.py ingest_k8s_json``, and kubelet log lines posted to the ingest endpoint with ``?node=``.
"""

from __future__ import annotations

import contextlib
import json
import re
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson
import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from django.urls import resolve, reverse

from collectors.parsers.kubectl import read_kubectl_output
from dashboard.web.routing import websocket_urlpatterns
from tests.flow import ingest as ingest_observations
from tests.stored import rows_of
from tests.web.conftest import grant
from timelines import derivation
from timelines.live import group_name
from timelines.models import Cluster

pytestmark = pytest.mark.django_db

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s" / "mixed-list.json"
C = "hostile"
WINDOW = {"since": "2021-11-03T14:00:00Z", "until": "2021-11-03T15:00:00Z"}
NAMES = {
    "slash": "a/b",
    "double-slash": "a//b",
    "trailing-slash": "web/",
    "query": "q?x=1&y=2",
    "fragment": "h#frag",
    "percent": "50%off%2F",
    "space": "sp ace ",
    "unicode": "ünï-cödé-节点",
    "dot": ".",
    "dots": "..",
    "dot-segment": "../../admin",
    "quotes": "we\"b'q",
    "markup": "<img src=x onerror=alert(1)>",
    "backslash": "a\\b;c=d",
    "long": "n" * 253,
}


def hostile_list(name: str) -> str:
    """The mixed kubectl list with every name (node, pod, namespace, PDB, Deployment, label) = name, and
    the pod's UID too (cut to the 64 characters a UID may have)."""
    text = FIXTURE.read_text().replace('"6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47"', json.dumps(uid_of(name)))
    for plain in ('"worker-1"', '"web-7d9f8b6c4-x2k9p"', '"default"', '"web"'):
        text = text.replace(plain, json.dumps(name))
    return text


def uid_of(name: str) -> str:
    return name[:64]  # metadata.uid holds at most 64 characters; the parser refuses a longer one


def names_unchecked() -> contextlib.ExitStack:
    """The observation contract without its name check, as podlife was before issue #35. The contract
    remembers its answers (a bounded cache), so an earlier test's refusal of the same name is patched
    over too: patching ``name_problem`` alone would pass or fail by test order."""
    from unittest import mock

    from timelines.lifecycle import observation

    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(observation, "name_problem", lambda field, value: None))
    stack.enter_context(mock.patch.object(observation, "_names_problems", lambda *names: ()))
    stack.enter_context(mock.patch("collectors.ingest_http.name_problem", lambda field, value: None))
    return stack


def load(name: str) -> Cluster:
    """The hostile list stored as an older podlife stored it, before the observation contract checked
    names against Kubernetes' rules (issue #35: today ingest refuses ``a/b`` or ``..`` as a namespace or a
    node, ``test_a_name_kubernetes_refuses_is_refused_at_ingest``): rows a database restored from then,
    or an import of its bundle, still hold, and pages must still render and link them."""
    with names_unchecked():
        parsed = read_kubectl_output(hostile_list(name), origin="hostile.json")
        assert parsed.errors == []
        result = ingest_observations(C, parsed.observations)
    assert result.rejected == [], result.rejected
    return Cluster.objects.get(name=C)


@pytest.mark.parametrize("name", ["a/b", "..", "50%off%2F", "sp ace ", "ünï-cödé-节点", "n" * 254])
def test_a_name_kubernetes_refuses_is_refused_at_ingest(name: str) -> None:
    """GIVEN the kubectl list with a namespace and node Kubernetes would refuse WHEN it is read THEN each
    object naming them is refused by name (issue #35), and nothing of them is stored."""
    parsed = read_kubectl_output(hostile_list(name), origin="hostile.json")
    assert parsed.errors and not any(o.namespace == name or o.node == name for o in parsed.observations)
    assert any("DNS-1123" in e or "characters" in e for e in map(str, parsed.errors)), parsed.errors[:3]


def hrefs(html: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'href="([^"]+)"', html)]


def route_of(href: str) -> tuple[str | None, dict[str, Any]]:
    """The view name and arguments a link leads to, as the server will decode it."""
    match = resolve(unquote(urlsplit(href).path))
    return match.url_name, match.kwargs


def page_data(html: str) -> dict[str, Any]:
    found = re.search(r'<script id="page-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no page data"
    return json.loads(found.group(1))


def get_ok(client: Client, url: str, **params: Any) -> Any:
    response = client.get(url, params, follow=True)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return response


@pytest.mark.parametrize("name", list(NAMES.values()), ids=list(NAMES))
def test_every_page_and_api_route_renders_and_links_a_hostile_name(admin_user: Any, name: str) -> None:
    c = load(name)
    client = Client()
    client.force_login(admin_user)

    # Pages: each renders, and each link to the node / namespace / pod leads to that very object.
    overview = get_ok(client, "/").content.decode()
    assert ("cluster", {"cluster": C}) in [route_of(h) for h in hrefs(overview) if h.startswith("/c/")]
    cluster_page = get_ok(client, reverse("cluster", args=[C])).content.decode()
    links = [route_of(h) for h in hrefs(cluster_page) if h.startswith("/c/")]
    assert ("node", {"cluster": C, "node": name}) in links
    assert ("namespace", {"cluster": C, "namespace": name}) in links
    search = get_ok(client, reverse("cluster", args=[C]), q=name[:40]).content.decode()
    uid = uid_of(name)
    assert ("pod", {"cluster": C, "uid": uid}) in [route_of(h) for h in hrefs(search) if h.startswith("/c/")]

    node_page = get_ok(client, reverse("node", args=[C, name])).content.decode()
    data = page_data(node_page)
    window = get_ok(client, data["api"]).json()
    assert [p["uid"] for p in window["pods"]] == [uid]
    assert route_of(data["pod_url"]) == ("pod", {"cluster": C, "uid": "UID"})
    ns_page = get_ok(client, reverse("namespace", args=[C, name])).content.decode()
    assert [p["uid"] for p in get_ok(client, page_data(ns_page)["api"]).json()["pods"]] == [uid]

    pod_page = get_ok(client, reverse("pod", args=[C, uid])).content.decode()
    pod_links = [route_of(h) for h in hrefs(pod_page) if h.startswith("/c/")]
    assert ("node", {"cluster": C, "node": name}) in pod_links
    assert ("pdb", {"cluster": C, "namespace": name, "name": name}) in pod_links
    by_ref = client.get(reverse("pod-by-ref", args=[C, name, name]))
    assert by_ref.status_code == 302 and route_of(by_ref["Location"]) == ("pod", {"cluster": C, "uid": uid})
    get_ok(client, reverse("pdb", args=[C, name, name]))
    get_ok(client, reverse("workload", args=[C, name, "Deployment", name]))
    get_ok(client, "/findings/", cluster=C, namespace=name)

    # REST API
    api = "api-"
    get_ok(client, reverse(api + "clusters"))
    assert [n["name"] for n in get_ok(client, reverse(api + "nodes", args=[C])).json()["nodes"]] == [name]
    assert [
        n["name"] for n in get_ok(client, reverse(api + "namespaces", args=[C])).json()["namespaces"]
    ] == [name]
    found = get_ok(client, reverse(api + "pods", args=[C]), q=name[:40]).json()["pods"]
    assert [(p["uid"], p["node"], p["namespace"], p["name"]) for p in found] == [(uid, name, name, name)]
    timeline = get_ok(client, reverse(api + "pod-timeline", args=[C, uid])).json()
    assert timeline["pod"]["uid"] == uid and timeline["pod"]["node"] == name
    ids = sorted(o.id for o in rows_of(c, pod_uids=[uid]))
    get_ok(client, reverse(api + "pod-observations", args=[C, uid]))
    get_ok(client, reverse(api + "pod-diff", args=[C, uid]), a=ids[0], b=ids[-1])
    get_ok(client, reverse(api + "node-timeline", args=[C, name]))
    get_ok(client, reverse(api + "namespace-timeline", args=[C, name]))
    get_ok(client, reverse(api + "workloads", args=[C]), namespace=name)
    get_ok(client, reverse(api + "workload-timeline", args=[C, name, "Deployment", name]))
    get_ok(client, reverse(api + "workload-status", args=[C, name, "Deployment", name]))
    get_ok(client, reverse(api + "pdbs", args=[C]), namespace=name)
    assert get_ok(client, reverse(api + "pdb", args=[C, name, name])).json()["pdb"]["name"] == name
    get_ok(client, reverse(api + "findings"), cluster=C, namespace=name)

    # Export (the button's own URL and parameters)
    for scope, value in (("node", name), ("namespace", name), ("pod", uid)):
        bundle = get_ok(client, reverse("export-download", args=[C]), **{scope: value, **WINDOW})
        assert orjson.dumps(name)[1:-1] in b"".join(bundle.streaming_content)  # as JSON spells it

    # The live socket of the node page routes to the same node's group.
    async def hello() -> dict[str, Any]:
        ws = WebsocketCommunicator(URLRouter(websocket_urlpatterns), data["ws"])
        ws.scope["user"] = admin_user
        connected, _ = await ws.connect()
        assert connected
        frame = await ws.receive_json_from()
        await ws.disconnect()
        return frame

    assert async_to_sync(hello)()["group"] == group_name("node", C, name)


@pytest.mark.parametrize(
    "name", [NAMES["slash"], NAMES["dots"], NAMES["unicode"]], ids=["slash", "dots", "unicode"]
)
def test_a_namespace_reader_gets_the_same_links(name: str, db: Any) -> None:
    c = load(name)
    reader = User.objects.create_user("reader", password="pw")
    grant(reader, c, name)
    client = Client()
    client.force_login(reader)
    page = get_ok(client, reverse("cluster", args=[C])).content.decode()
    links = [route_of(h) for h in hrefs(page) if h.startswith("/c/")]
    assert ("node", {"cluster": C, "node": name}) in links
    get_ok(client, reverse("node", args=[C, name]))
    get_ok(client, reverse("pod", args=[C, uid_of(name)]))


@pytest.mark.django_db(transaction=True)
def test_log_endpoint_takes_a_hostile_node_and_refuses_one_too_long(admin_user: Any) -> None:
    """GIVEN kubelet lines posted with ?node=a/b?#% WHEN the node page is opened THEN it renders; a node
    name longer than Kubernetes allows is refused with 400 naming the limit, and nothing is stored. (Since
    issue #35 ``a/b?#%`` is no node name either: posted as an older podlife took it, the contract's name
    rule set aside; ``tests/poison`` has the refusal.)"""

    from collectors.models import IngestToken

    _, token = IngestToken.issue(Cluster.objects.create(name=C))
    line = (
        'I0607 06:54:41.100000    2345 pod_workers.go:1243] "Pod is being synced for the first time" '
        'pod="default/web-1" podUID="aaaaaaaa-0000-4000-8000-000000000001" updateType="create"\n'
    )
    client = Client()
    for node, status in (("a/b?#%", 200), ("n" * 300, 400)):
        with names_unchecked():
            response = client.post(
                "/ingest/v1/kubelet-logs?"
                + f"cluster={C}&node="
                + node.replace("%", "%25").replace("?", "%3F").replace("#", "%23").replace("/", "%2F"),
                data=line,
                content_type="text/plain",
                HTTP_AUTHORIZATION=f"Bearer {token}",
            )
        assert response.status_code == status, response.content
    assert "at most 253" in response.json()["error"] and "node" in response.json()["error"]
    assert {o.node for o in rows_of(C)} == {"a/b?#%"}
    derivation.drain()  # as a derive worker would (the endpoint only stores)
    client.force_login(admin_user)
    get_ok(client, reverse("node", args=[C, "a/b?#%"]))
