"""Issue #35, "Done when": each reproduction of the attack run, sent to a fresh deployment over real HTTP.

A fresh deployment is ``uvicorn podlife_site.asgi:application`` in a subprocess with the environment a
deployment gives it (DEBUG off, a strong SECRET_KEY, a metrics token) on a database of its own, made by
``manage.py migrate``: a new PostgreSQL database beside the one DATABASE_URL names when it names one
(CI's second pass), else a new SQLite file (the embedded default's engine; never the checkout's own
file). No REDIS_URL: tasks run in the web process, so the derive stage runs as each batch is stored.
The user and the tokens are made as ``createsuperuser``, ``api_token`` and ``ingest_token`` make them.

Each reproduction must get a 4xx, a 503 or a partial-acceptance answer; meanwhile a second cluster
(``demo``) keeps getting kubelet sync spans of new pods (synthetic, shaped as the kubelet's OTLP exporter
sends them: tests/poison/hostile.py), and each must derive (the derive stage never
stalls); at the end nothing waits dirty, nothing fails, and the quarantine (``/metrics``, ``manage.py
derive --quarantined``) shows what was set aside: nothing, since every reproduction is now refused where
it enters.
"""

from __future__ import annotations

import copy
import json
import os
import select
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

from tests.poison import hostile
from tests.security.conftest import ROOT, Served, deployment_env, strong_key
from tests.waits import wait_for

MIB = 1 << 20
DEADLINE_S = 20.0
PASSWORD = "e2e-" + strong_key()[:24]
METRICS_TOKEN = strong_key()
PROTOBUF = "application/x-protobuf"


# --- the deployment --------------------------------------------------------------------------------------------


def _postgres_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://", "pgsql://")) else None


def _maintenance(url: str) -> Any:
    """An autocommit connection to the server's ``postgres`` database (where databases are made)."""
    import psycopg

    from podlife_site.env import database_from_url

    s: Any = database_from_url("DATABASE_URL", url)
    return psycopg.connect(
        host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"], password=s["PASSWORD"] or None,
        dbname="postgres", autocommit=True,
    )  # fmt: skip


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` in the deployment's environment; fails the test naming its output if it fails."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stdout}{done.stderr}"
    return done


@dataclass
class Deployment:
    server: Served
    env: dict[str, str]
    api_token: str
    ingest_tokens: dict[str, str]  # cluster -> its ingest token
    postgres_db: str | None = None
    admin_url: str | None = None  # the maintenance connection's URL (PostgreSQL)

    @property
    def url(self) -> str:
        return self.server.url

    def manage(self, *args: str) -> subprocess.CompletedProcess[str]:
        return manage(self.env, *args)

    def ingest(self, cluster: str, path: str, body: bytes, content_type: str) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.ingest_tokens[cluster]}", "Content-Type": content_type}
        return requests.post(f"{self.url}{path}", data=body, headers=headers, timeout=30)

    def api(self, path: str, **params: str) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.api_token}", "Accept": "application/json"}
        return requests.get(f"{self.url}/api/v1/{path}", params=params, headers=headers, timeout=30)

    def metrics(self) -> dict[str, float]:
        from prometheus_client.parser import text_string_to_metric_families

        answer = requests.get(
            f"{self.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
        )
        assert answer.status_code == 200, answer.text[:300]
        return {s.name: s.value for f in text_string_to_metric_families(answer.text) for s in f.samples}


CLUSTERS = ("audit", "prod", "demo", "reference", "mixed")
SETUP = f"""
import json
from django.contrib.auth import get_user_model
from collectors.models import IngestToken
from timelines import store
from dashboard.web.access import create_token
admin = get_user_model().objects.create_superuser("admin", "admin@example.org", {PASSWORD!r})
ingest = {{c: IngestToken.issue(store.cluster_for(c))[1] for c in {CLUSTERS!r}}}
print(json.dumps({{"api": create_token(admin), "ingest": ingest}}))
"""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    base = _postgres_url()
    postgres_db = None
    if base is not None:
        postgres_db = f"{urlsplit(base).path.lstrip('/') or 'podlife'}_e2e_{os.getpid()}"
        with _maintenance(base) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{postgres_db}"')
            admin.execute(f'CREATE DATABASE "{postgres_db}"')
        database_url = urlsplit(base)._replace(path=f"/{postgres_db}").geturl()
    else:
        database_url = f"sqlite:///{tmp_path_factory.mktemp('deployment') / 'podlife.sqlite3'}"
    env = deployment_env(
        SECRET_KEY=strong_key(),
        DATABASE_URL=database_url,
        PODLIFE_METRICS_TOKEN=METRICS_TOKEN,
        PODLIFE_DB_POOL_TIMEOUT_S="1",  # the database-away case waits this long for a connection
        PODLIFE_EXPORT_DIR=str(tmp_path_factory.mktemp("exports")),
    )
    server: Served | None = None
    try:
        manage(env, "migrate", "--no-input", "-v0")
        # The user and the tokens a deployer makes with createsuperuser, api_token and ingest_token, in one
        # process (each command is a Django start-up: seconds on a loaded machine).
        made = json.loads(manage(env, "shell", "-v0", "-c", SETUP).stdout)
        server = Served(env)
        missing = requests.get(f"{server.url}/no-such-page", timeout=30)
        assert missing.status_code == 404 and "URLconf" not in missing.text  # DEBUG off: no debug page
        yield Deployment(
            server=server, env=env, api_token=made["api"], postgres_db=postgres_db, admin_url=base,
            ingest_tokens=made["ingest"],
        )  # fmt: skip
    finally:
        if server is not None:
            server.stop()
        if base is not None and postgres_db is not None:
            with _maintenance(base) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{postgres_db}" WITH (FORCE)')


# --- the demo cluster beside it: a new pod's kubelet sync spans, which must derive ---------------------------------

_probe_start = iter(range(10_000))


def demo_pod_derives(deployment: Deployment) -> str:
    """POST the three kubelet sync spans of a new pod of cluster ``demo`` (its syncPod a create) and wait
    until its timeline has the worker lane they make (setup, a gap, terminating, cleanup: k8s-facts.md
    §2.2, as tests/ingest/test_otlp_receiver.py); returns its UID."""
    uid = str(uuid.uuid4())
    start = hostile.VALID_SPAN_START + next(_probe_start) * 60_000_000_000
    spans = [
        hostile.otlp_span(uid, name, start + i * 1_000_000_000)
        for i, name in enumerate(("syncPod", "syncTerminatingPod", "syncTerminatedPod"))
    ]
    spans[0]["attributes"].append({"key": "k8s.pod.update_type", "value": {"stringValue": "create"}})
    answer = deployment.ingest(
        "demo", "/v1/traces", json.dumps(hostile.otlp_document(spans)).encode(), "application/json"
    )
    assert answer.status_code == 200, answer.text[:300]

    def worker_lane() -> list[str] | None:
        timeline = deployment.api(f"clusters/demo/pods/{uid}/timeline")
        if timeline.status_code != 200:
            return None
        return [iv["state"] for iv in timeline.json()["lanes"].get("worker", [])] or None

    lane = wait_for(worker_lane, f"the worker lane of demo pod {uid}", DEADLINE_S)
    assert lane == ["setup", "unknown", "terminating", "cleanup"], lane
    return uid


@pytest.fixture
def demo_keeps_deriving(deployment: Deployment) -> Iterator[None]:
    """A demo pod derives before and after the test's reproductions."""
    demo_pod_derives(deployment)
    yield
    demo_pod_derives(deployment)


# --- (1) audit events with hostile names and times -------------------------------------------------------------


def _audit_list(events: list[dict[str, Any]]) -> bytes:
    return json.dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": events}).encode()


def _retagged(
    events: list[dict[str, Any]], tag: str, change: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    out = []
    for event in copy.deepcopy(events):
        event["auditID"] = f"{event['auditID'][:-8]}{tag:0>8}"
        change(event)
        out.append(event)
    return out


def _namespace(value: str) -> Callable[[dict[str, Any]], None]:
    def change(event: dict[str, Any]) -> None:
        event["objectRef"]["namespace"] = value
        for body in ("requestObject", "responseObject"):
            if isinstance(event.get(body), dict):
                event[body].setdefault("metadata", {})["namespace"] = value

    return change


def _stamped(value: str) -> Callable[[dict[str, Any]], None]:
    def change(event: dict[str, Any]) -> None:
        event["stageTimestamp"] = event["requestReceivedTimestamp"] = value

    return change


AUDIT_REPRODUCTIONS = {
    "1a-namespace-with-nul": (_namespace("evil\x00ns"), "namespace 'evil\\x00ns' is not a DNS-1123 label"),
    "1b-namespace-of-200-rlo": (_namespace("\u202e" * 200), "namespace '\\u202e\\u202e"),
    "1c-stage-timestamp-9999": (
        _stamped("9999-12-31T23:59:59Z"), "9999-12-31T23:59:59+00:00 is outside the supported range"
    ),
}  # fmt: skip


def test_hostile_audit_pod_creates_get_a_partial_acceptance_naming_them(
    deployment: Deployment, demo_keeps_deriving: None
) -> None:
    """GIVEN the audit fixture's pod create (a real webhook EventList) WHEN each reproduction of (1) is
    posted to /ingest/v1/audit with the valid create beside it (a namespace holding NUL, one of 200 x
    U+202E, a stageTimestamp of 9999-12-31T23:59:59Z) THEN each answer is 200 naming the refused
    record and its field, the valid pod is stored and derived, and no hostile namespace exists."""
    valid = hostile.audit_events()
    for i, (case, (change, named)) in enumerate(sorted(AUDIT_REPRODUCTIONS.items()), start=1):
        answer = deployment.ingest(
            "audit",
            "/ingest/v1/audit",
            _audit_list(_retagged(valid, str(i), change) + valid),
            "application/json",
        )
        assert answer.status_code == 200, (case, answer.text[:500])
        report = answer.json()
        problems = " | ".join(report["store_rejections"] + report["unreadable_examples"])
        assert named in problems, (case, problems)
        demo_pod_derives(deployment)
    namespaces = deployment.api("clusters/audit/namespaces")
    assert namespaces.status_code == 200, namespaces.text[:300]
    assert [n["name"] for n in namespaces.json()["namespaces"]] == ["shop"], namespaces.json()
    pods = deployment.api("clusters/audit/pods", q="shop")
    assert [p["namespace"] for p in pods.json()["pods"]] == ["shop"]  # the valid create, derived


# --- (2) times at the ends of the calendar ---------------------------------------------------------------------

KUBELET = "/ingest/v1/kubelet-logs?cluster={cluster}"
LAST_LINE = (
    'I1231 23:59:58.000000    1234 kubelet.go:2407] "SyncLoop ADD" source="api" pods=["default/web-0"]\n'
)


def _ndjson(records: list[Any]) -> bytes:
    return b"\n".join(json.dumps(r).encode() for r in records)


def test_times_at_the_ends_of_the_calendar_are_refused_by_name(
    deployment: Deployment, demo_keeps_deriving: None, tmp_path: Path
) -> None:
    """GIVEN a real kubelet log of node worker-1 WHEN a record with "timestamp":"0001-01-01T00:00:00Z"
    comes with it THEN it is counted, the rest stored, and the node's timeline without from/to answers
    200; ``?from=9999-12-31T23:59:59Z`` answers 400 naming ``from``; ``?year=9999`` answers 400 and
    ``manage.py ingest_kubelet_log --year 9999`` of a Dec 31 23:59:58 line completes counting it
    out_of_range; a bundle resealed with an observation at year 1 or 9999 is refused (400) on import,
    naming the observation, and no cluster is made."""
    records = hostile.kubelet_records()
    year_one = {"timestamp": "0001-01-01T00:00:00Z", "host": "worker-1", "log": records[0]["log"]}
    answer = deployment.ingest(
        "prod", KUBELET.format(cluster="prod"), _ndjson([*records, year_one]), "application/x-ndjson"
    )
    assert answer.status_code == 200, answer.text[:500]
    report = answer.json()
    assert report["lines_read"] == len(records) + 1 and sum(report["skipped"].values()) >= 1, report
    assert report["stored"] > 10

    node = "clusters/prod/nodes/worker-1/timeline"
    assert deployment.api(node).status_code == 200
    refused = deployment.api(node, **{"from": "9999-12-31T23:59:59Z"})
    assert refused.status_code == 400 and "from" in refused.text and "supported range" in refused.text

    year = deployment.ingest(
        "prod",
        "/ingest/v1/kubelet-logs?cluster=prod&node=worker-1&year=9999",
        LAST_LINE.encode(),
        "text/plain",
    )
    assert year.status_code == 400 and "year='9999'" in year.json()["error"]
    log = tmp_path / "kubelet.log"
    log.write_text(LAST_LINE)
    cli = deployment.manage(
        "ingest_kubelet_log", "--cluster", "prod", "--node", "worker-1", "--year", "9999", str(log)
    )
    assert "out_of_range" in cli.stdout, cli.stdout

    exported = deployment.manage(
        "export_incident", "--cluster", "demo", "--node", "node-a",
        "--since", "2024-06-01T00:00:00+00:00", "--until", "2024-07-01T00:00:00+00:00",
    ).stdout  # fmt: skip
    for i, at in enumerate(("0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59+00:00")):
        bundle = json.loads(exported)
        assert bundle["observations"]
        bundle["observations"][0]["observed_at"] = at
        name = f"copy-{i}"
        upload = requests.post(
            f"{deployment.url}/import",
            files={"bundle": ("resealed.json", hostile.resealed(bundle), "application/json")},
            data={"name": name},
            headers={"Authorization": f"Bearer {deployment.api_token}", "Accept": "application/json"},
            timeout=30,
        )
        assert upload.status_code == 400, upload.text[:500]
        assert "observations[0]" in upload.text and "outside the supported range" in upload.text
        assert name not in deployment.api("clusters").text


# --- (3) records no parser can read, among valid ones ----------------------------------------------------------


def _deep(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"k": value}
    return value


def test_unreadable_kubelet_records_cost_none_of_the_valid_ones(
    deployment: Deployment, demo_keeps_deriving: None
) -> None:
    """GIVEN the records of a real kubelet log, stored alone for cluster ``reference`` WHEN the same
    records go to cluster ``mixed`` with a record whose timestamp is "²", one of 5,000 digits and one
    nested 500 deep among them (NDJSON, then a JSON array) THEN each answer is 200 and every observation
    the valid records made alone is stored (a record whose ``timestamp`` cannot be read is read by its
    line's own time; in an array, the record nested past what a log record can be is counted bad_json);
    the array, sent again, stores nothing new."""
    records = hostile.kubelet_records()
    alone = deployment.ingest(
        "reference", KUBELET.format(cluster="reference"), _ndjson(records), "application/x-ndjson"
    )
    assert alone.status_code == 200 and alone.json()["stored"] > 10, alone.text[:300]
    poison: list[Any] = [
        {"timestamp": "²", "host": "worker-1", "log": records[1]["log"]},
        {"timestamp": "9" * 5000, "host": "worker-1", "log": records[2]["log"]},
        {"host": "worker-1", "log": records[3]["log"], "extra": _deep(500)},
    ]
    mixed = records[:10] + poison[:1] + records[10:30] + poison[1:2] + records[30:] + poison[2:]
    ndjson = deployment.ingest(
        "mixed", KUBELET.format(cluster="mixed"), _ndjson(mixed), "application/x-ndjson"
    )
    assert ndjson.status_code == 200, ndjson.text[:500]
    report = ndjson.json()
    assert report["lines_read"] == len(mixed)
    assert report["stored"] == alone.json()["stored"], (report, alone.json())
    array = deployment.ingest(
        "mixed", KUBELET.format(cluster="mixed"), json.dumps(mixed).encode(), "application/json"
    )
    assert array.status_code == 200, array.text[:500]
    assert array.json()["stored"] == 0 and array.json()["skipped"].get("bad_json") == 1, array.json()


# --- (4) the database away -------------------------------------------------------------------------------------


def _status_message(answer: requests.Response) -> Any:
    """The google.rpc.Status of an OTLP error answer, in the request's encoding (protobuf or JSON)."""
    from google.protobuf import json_format

    from collectors.parsers import otlp

    message = otlp.RpcStatus()
    if answer.headers["Content-Type"] == "application/json":
        return json_format.Parse(answer.content, message)
    message.ParseFromString(answer.content)
    return message


@pytest.mark.postgres
def test_the_database_away_is_a_503_the_exporters_retry(deployment: Deployment) -> None:
    """GIVEN the deployment's PostgreSQL backends terminated (pg_terminate_backend) and, a second time,
    new connections to its database refused WHEN kubelet spans, kubelet logs and audit events are posted
    THEN no answer is a 500: each is 200 (a connection made anew) or, while the database is away, 503 with
    Retry-After (for OTLP a google.rpc.Status UNAVAILABLE, which exporters retry); once it is back the
    same export is stored and the demo cluster derives."""
    from collectors.parsers import otlp

    assert deployment.postgres_db is not None and deployment.admin_url is not None
    demo_pod_derives(deployment)  # the pool holds connections now
    uid = str(uuid.uuid4())
    span = hostile.otlp_span(uid, "syncPod", hostile.VALID_SPAN_START)
    export = json.dumps(hostile.otlp_document([span])).encode()
    posts = [
        ("/v1/traces", export, "application/json"),
        (KUBELET.format(cluster="demo"), _ndjson(hostile.kubelet_records()[:3]), "application/x-ndjson"),
        ("/ingest/v1/audit", _audit_list(hostile.audit_events()), "application/json"),
    ]
    terminate = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    with _maintenance(deployment.admin_url) as admin:
        admin.execute(terminate, [deployment.postgres_db])
        for path, body, media in posts:  # the pool's connections died under it
            answer = deployment.ingest("demo", path, body, media)
            assert answer.status_code in (200, 503), (path, answer.status_code, answer.text[:300])
        admin.execute(f'ALTER DATABASE "{deployment.postgres_db}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(terminate, [deployment.postgres_db])
            for path, body, media in posts:
                answer = deployment.ingest("demo", path, body, media)
                assert answer.status_code == 503, (path, answer.status_code, answer.text[:300])
                assert int(answer.headers["Retry-After"]) > 0
                if path == "/v1/traces":
                    message = _status_message(answer)
                    assert message.code == otlp.RpcCode.UNAVAILABLE, message
            # An OTLP exporter's protobuf request, as it sends them, gets the same.
            protobuf = deployment.ingest("demo", "/v1/traces", b"", PROTOBUF)
            assert protobuf.status_code == 503
            assert _status_message(protobuf).code == otlp.RpcCode.UNAVAILABLE
        finally:
            admin.execute(f'ALTER DATABASE "{deployment.postgres_db}" ALLOW_CONNECTIONS true')

    def stored() -> bool:
        return deployment.ingest("demo", "/v1/traces", export, "application/json").status_code == 200

    wait_for(stored, "the export stored once the database is back", DEADLINE_S)
    demo_pod_derives(deployment)


# --- (5) webhook destinations inside the deployment's network ---------------------------------------------------


@pytest.fixture(scope="module")
def admin_session(deployment: Deployment) -> requests.Session:
    """The superuser logged in to the admin (where webhook destinations are made), as a browser does."""
    session = requests.Session()
    login = f"{deployment.url}/admin/login/?next=/admin/"
    session.get(login, timeout=30)
    answer = session.post(
        login,
        data={"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"],
              "next": "/admin/"},
        allow_redirects=False, timeout=30,
    )  # fmt: skip
    assert answer.status_code == 302, answer.text[:300]
    return session


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",
        "http://127.0.0.1:5432/",
        "http://[::1]:8000/hook",
        "http://[::ffff:127.0.0.1]:6379/",
        "http://169.254.169.254/latest/meta-data/",
    ],
)
def test_a_webhook_destination_inside_the_network_is_refused(
    deployment: Deployment, admin_session: requests.Session, url: str
) -> None:
    """GIVEN the admin's form for a new webhook destination WHEN its URL is Redis's, PostgreSQL's, the
    loopback's (IPv6, IPv4-mapped IPv6) or the cloud metadata service's THEN the form comes back with the
    URL refused, saying webhooks reach public addresses, and no destination exists."""
    session = admin_session
    add = f"{deployment.url}/admin/alerts/destination/add/"
    session.get(add, timeout=30)
    name = f"hook-{uuid.uuid4().hex[:8]}"
    answer = session.post(
        add,
        data={
            "csrfmiddlewaretoken": session.cookies["csrftoken"], "name": name, "url": url, "format": "json",
            "enabled": "on", "new_signing_secret": strong_key(), "min_severity": "warning",
            "notify_resolved": "on", "max_per_minute": "30", "clusters": "", "namespaces": "", "kinds": "",
        },
        allow_redirects=False, timeout=30,
    )  # fmt: skip
    assert answer.status_code == 200, answer.status_code  # the form again, not a redirect to the list
    assert "errorlist" in answer.text and "webhooks reach public" in answer.text, answer.text[:2000]
    listing = session.get(f"{deployment.url}/admin/alerts/destination/", timeout=30)
    assert listing.status_code == 200 and name not in listing.text


# --- (6) a large body nobody may send --------------------------------------------------------------------------


def _answer_without_body(deployment: Deployment, method: str, path: str, declared: int) -> tuple[int, bytes]:
    """Send only the request head, declaring ``declared`` body bytes, and read the answer: the status and
    the head (a server that waits for the body never answers, and the deadline fails the test)."""
    port = urlsplit(deployment.url).port
    assert port is not None
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
    head += f"Content-Length: {declared}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as sock:
        sock.sendall(head.encode())
        readable, _, _ = select.select([sock], [], [], DEADLINE_S)
        assert readable, f"{method} {path}: no answer within {DEADLINE_S:.0f} s without the body"
        data = sock.recv(65536)
    status_line = data.split(b"\r\n", 1)[0]
    return int(status_line.split()[1]), data


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/v1/traces", "/ingest/v1/kubelet-logs?cluster=prod", "/ingest/v1/audit"])
def test_an_anonymous_8_mib_body_is_answered_before_it_is_sent(
    deployment: Deployment, method: str, path: str
) -> None:
    """GIVEN an anonymous PUT/PATCH/DELETE declaring 8 MiB to an ingest route WHEN only its head is sent
    THEN it is answered (405, naming POST) without waiting for the body."""
    status, head = _answer_without_body(deployment, method, path, 8 * MIB)
    assert status == 405 and b"\r\nallow: post\r\n" in head.lower(), head[:300]


# --- nothing left dirty, failing or quarantined --------------------------------------------------------------


def test_nothing_waits_dirty_or_failing_and_the_quarantine_shows_what_was_set_aside(
    deployment: Deployment,
) -> None:
    """GIVEN every reproduction above sent (this test runs last of the module) WHEN the derive stage's
    state is read THEN no key waits dirty or fails, /metrics and ``manage.py derive --quarantined``
    agree on the quarantine (empty: every reproduction was refused where it entered), and a demo pod
    posted now still derives."""
    demo_pod_derives(deployment)

    def settled() -> dict[str, float] | None:
        m = deployment.metrics()
        return m if m["podlife_derive_dirty_keys"] == 0 and m["podlife_derive_dirty_batches"] == 0 else None

    metrics = wait_for(settled, "no dirty key waiting", DEADLINE_S)
    assert metrics["podlife_derive_failing_keys"] == 0
    quarantined = deployment.manage("derive", "--quarantined").stdout
    assert (
        quarantined.strip().splitlines()[-1]
        == f"{int(metrics['podlife_derive_quarantined_keys'])} quarantined keys"
    )
    assert metrics["podlife_derive_quarantined_keys"] == 0, quarantined
