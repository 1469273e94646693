"""Issue #35, deliverable 2: every name and time is checked once where it enters, and refused by name.

The reproductions of the attack run: each was stored (or answered 500) before; each now gets a 4xx
naming the field or a batch answer naming the refused record, nothing it could not derive is stored,
and the derive stage never stalls.
"""

from __future__ import annotations

import copy
import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from dashboard.export.bundle import canonical_observation
from tests.stored import count_of, put, rows_of
from timelines import derivation, store
from timelines.lifecycle.observation import Kind, Source
from timelines.models import DirtyKey, Pod, QuarantinedKey

AUDIT = Path(__file__).resolve().parents[1] / "fixtures" / "audit" / "webhook-eventlist.json"


def _pod_create() -> list[dict[str, Any]]:
    """The fixture's pod create (its RequestReceived and ResponseComplete events)."""
    items = orjson.loads(AUDIT.read_bytes())["items"]
    return [
        e
        for e in items
        if e["verb"] == "create"
        and e["objectRef"].get("resource") == "pods"
        and not e["objectRef"].get("subresource")
    ]


def _hostile(
    events: list[dict[str, Any]],
    tag: str,
    *,
    namespace: str | None = None,
    at: str | None = None,
    uid: str | None = None,
) -> list[dict[str, Any]]:
    out = []
    for event in copy.deepcopy(events):
        event["auditID"] = f"{event['auditID'][:-8]}{tag:0>8}"
        if namespace is not None:
            event["objectRef"]["namespace"] = namespace
            for body in ("requestObject", "responseObject"):
                if isinstance(event.get(body), dict):
                    event[body].setdefault("metadata", {})["namespace"] = namespace
        if at is not None:
            event["stageTimestamp"] = event["requestReceivedTimestamp"] = at
        if uid is not None:
            event["objectRef"]["uid"] = uid
        out.append(event)
    return out


@pytest.mark.django_db(transaction=True)
def test_hostile_audit_events_are_refused_by_name_and_the_valid_one_is_stored(
    client: Any, token: str
) -> None:
    """GIVEN one EventList with the three poisoned pod creates of the attack run (a namespace holding NUL,
    a namespace of 200 x U+202E, stageTimestamp 9999-12-31T23:59:59Z), one naming the uid '\\x82' (it
    failed every derivation of the name, found by bench/fuzz.py) and the valid create WHEN it is
    posted to /ingest/v1/audit THEN the answer is 200 naming each refused record and its field, the
    valid pod is stored and derived, and no key is left dirty or quarantined."""
    create = _pod_create()
    assert len(create) == 2
    events = (
        _hostile(create, "1", namespace="evil\x00ns")
        + _hostile(create, "2", namespace="\u202e" * 200)
        + _hostile(create, "3", at="9999-12-31T23:59:59Z")
        + _hostile(create, "4", uid="\x82")
        + create
    )
    body = orjson.dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": events})
    answer = client.post(
        "/ingest/v1/audit", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert answer.status_code == 200, answer.content
    report = answer.json()
    problems = " | ".join(report["store_rejections"]) + " | " + " | ".join(report["unreadable_examples"])
    assert "namespace 'evil\\x00ns' is not a DNS-1123 label" in problems
    assert "namespace '\\u202e\\u202e" in problems
    assert "9999-12-31T23:59:59+00:00 is outside the supported range" in problems
    assert "the object's uid '\\x82' is not 1-64 printable ASCII" in problems
    assert report["stored"] >= 1
    assert {o.namespace for o in rows_of(None)} == {"shop"}
    derivation.drain()
    assert Pod.objects.filter(namespace="shop").exists()
    assert not DirtyKey.objects.exists() and not QuarantinedKey.objects.exists()


@pytest.mark.django_db
def test_window_parameters_outside_the_supported_range_are_a_400(admin_client: Any) -> None:
    """GIVEN a node WHEN its timeline is asked from 9999-12-31T23:59:59Z (or to year 1) THEN 400 naming
    the parameter, not 500."""
    store.save_observations("prod", [_node_obs(datetime(2024, 6, 7, tzinfo=UTC))])
    derivation.drain()
    url = "/api/v1/clusters/prod/nodes/node-a/timeline"
    for query, param in (("from=9999-12-31T23:59:59Z", "from"), ("to=0001-01-01T00:00:00Z", "to")):
        answer = admin_client.get(f"{url}?{query}")
        assert answer.status_code == 400, (query, answer.content)
        assert param in answer.content.decode() and "supported range" in answer.content.decode()


@pytest.mark.django_db
def test_a_row_at_year_one_does_not_break_the_default_window(admin_client: Any) -> None:
    """GIVEN a node with a kubelet row at 0001-01-01T00:00:00Z stored before the boundary (a record with
    ``"timestamp":"0001-01-01T00:00:00Z"``) WHEN its timeline is asked without from/to, as the live page
    does THEN it answers 200 (the window arithmetic clamps to the supported range)."""
    store.save_observations("prod", [_node_obs(datetime(2024, 6, 7, tzinfo=UTC))])
    derivation.drain()
    cluster = store.cluster_for("prod")
    year1 = datetime(1, 1, 1, tzinfo=UTC)
    put(cluster, [{
        "kind": Kind.KUBELET_PROCESS, "source": Source.KUBELET_LOG, "observed_at": year1,
        "received_at": year1, "dedupe_key": "year-one", "node": "node-a", "payload": {"pid": 1},
    }])  # fmt: skip
    from timelines import dirty

    dirty.append_batch(cluster.pk, [(dirty.NODE, "node-a", None, None)])
    derivation.drain()
    answer = admin_client.get("/api/v1/clusters/prod/nodes/node-a/timeline")
    assert answer.status_code == 200, answer.content


def _node_obs(at: datetime) -> Any:
    from timelines.lifecycle.observation import Observation

    return Observation(
        kind=Kind.NODE, source=Source.API, observed_at=at, dedupe_key=f"nodes:node-a:{at.isoformat()}",
        node="node-a", name="node-a", payload={"name": "node-a", "uid": "n1", "ready": True},
    )  # fmt: skip


LAST_LINE = (
    'I1231 23:59:58.000000    1234 kubelet.go:2407] "SyncLoop ADD" source="api" pods=["default/web-0"]\n'
)


@pytest.mark.django_db
def test_a_kubelet_line_at_the_end_of_year_9999_is_counted_not_fatal(tmp_path: Path) -> None:
    """GIVEN ``manage.py ingest_kubelet_log --year 9999`` and a klog line of Dec 31 23:59:58 WHEN it is
    ingested THEN it completes: the line is out of the supported range and nothing is stored (the
    kubelet process it names included), where the attack run got an OverflowError."""
    import io

    from django.core.management import call_command

    log = tmp_path / "kubelet.log"
    log.write_text(LAST_LINE)
    out = io.StringIO()
    call_command(
        "ingest_kubelet_log", "--cluster", "prod", "--node", "node-a", "--year", "9999", str(log), stdout=out
    )
    assert "out_of_range" in out.getvalue()
    assert count_of(None) == 0


@pytest.mark.django_db
def test_the_year_parameter_outside_the_range_is_a_400_and_a_rollover_past_it_is_counted(
    client: Any, token: str
) -> None:
    """GIVEN ``?year=9999`` THEN 400 naming the parameter; GIVEN ``?year=8999``, a Dec 31 23:59:58 line
    and a Jan 1 line after it (the year rolls over to 9000, past the range) THEN 200: the first is stored,
    the second counted as out of range."""
    url = "/ingest/v1/kubelet-logs?cluster=prod&node=node-a&year="
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    refused = client.post(url + "9999", LAST_LINE.encode(), content_type="text/plain", **auth)
    assert refused.status_code == 400 and "year='9999'" in refused.json()["error"]
    body = (LAST_LINE + LAST_LINE.replace("I1231 23:59:58", "I0101 00:00:01")).encode()
    answer = client.post(url + "8999", body, content_type="text/plain", **auth)
    assert answer.status_code == 200, answer.content
    assert answer.json()["skipped"] == {"out_of_range": 1}
    assert any(o.observed_at.year == 8999 for o in rows_of(None))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59+00:00"])
def test_a_resealed_bundle_with_times_outside_the_range_is_refused_naming_the_record(
    tmp_path: Path, at: str
) -> None:
    """GIVEN an exported bundle one of whose observations was moved to year 1 / 9999 and resealed (its
    digests recomputed) WHEN it is imported THEN BundleError names the observation and observed_at
    (the import view answers it as a 400), and nothing is written."""
    from dashboard.export.importer import BundleError, import_incident
    from tests.export.conftest import ingest_observations, source_observations
    from tests.export.helpers import export_json
    from timelines.models import Cluster

    cluster = store.cluster_for("src", origin=Cluster.Origin.OFFLINE)
    ingest_observations(cluster, source_observations())
    data = orjson.loads(export_json(cluster))
    data["observations"][0]["observed_at"] = at
    sha = hashlib.sha256()
    for item in data["observations"]:
        sha.update(canonical_observation(item))
    data["metadata"]["digest"]["observations_sha256"] = sha.hexdigest()
    path = tmp_path / "resealed.json"
    path.write_bytes(orjson.dumps(data))
    before = count_of(None)
    with pytest.raises(
        BundleError, match=r"observations\[0\].*observed_at .* is outside the supported range"
    ):
        import_incident(path, name="copy")
    assert count_of(None) == before and not Cluster.objects.filter(name="copy").exists()


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("namespace", "kube-system", True),
        ("namespace", "Default", True),  # read in any case, as redacted real logs write them (below)
        ("namespace", "a" * 63, True),
        ("namespace", "a" * 64, False),
        ("namespace", "evil\x00ns", False),
        ("namespace", "\u202e" * 200, False),
        ("node", "ip-10-0-1-23.eu-west-1.compute.internal", True),
        ("node", "gke-dev-default-pool-XXX", True),  # a host name, of any case
        ("node", "node_a", False),
        ("node", "a" * 254, False),
        ("name", "system:controller:attachdetach-controller", True),  # a ClusterRole's name
        ("name", "web-7d9f8b6c4-x2k9p", True),
        ("name", "..", False),
        ("name", "a/b", False),
        ("name", "p\u202egnp.exe", False),
        ("name", "x" * 254, False),
        ("pod_uid", "6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47", True),
        ("pod_uid", "d1c4757bcb230bf06ab7e866b62132a1", True),  # a static pod's hash
        ("pod_uid", "u u", False),
        ("pod_uid", "u" * 65, False),
    ],
)
def test_names_follow_kubernetes_rules(field: str, value: str, ok: bool) -> None:
    """The contract's name rules are Kubernetes' (apimachinery's validation): namespaces DNS-1123 labels,
    nodes DNS-1123 subdomains, other names path segments, UIDs printable; and no control or format
    character anywhere."""
    from timelines.lifecycle.observation import name_problem

    problem = name_problem(field, value)
    assert (problem is None) is ok, problem
    if not ok:
        assert problem.startswith(field) or problem.startswith(f"{field} ")


@pytest.mark.parametrize(
    ("at", "ok"),
    [
        (datetime(1970, 1, 1, tzinfo=UTC), True),
        (datetime(8999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), True),
        (datetime(9000, 1, 1, tzinfo=UTC), False),
        (datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC), False),
        (datetime(1, 1, 1, tzinfo=UTC), False),
        (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), False),
    ],
)
def test_the_supported_time_range(at: datetime, ok: bool) -> None:
    from timelines.lifecycle.observation import time_problem

    assert (time_problem("observed_at", at) is None) is ok


def test_a_redacted_namespace_in_capitals_is_a_name() -> None:
    """A real GKE excerpt (tests/fixtures/real/kubelet/k8s-110755-gke-node-shutdown.txt, kubernetes/kubernetes
    #110755) names its pod `XX/client-64ccc5cc77-6jrfk`: the reporter redacted the namespace in capitals.
    It is one namespace all the same, and refusing it would lose every line that names the pod; a NUL or
    a right-to-left override is still refused."""
    from timelines.lifecycle.observation import name_problem

    assert name_problem("namespace", "XX") is None
    assert name_problem("namespace", "X\u202eX") is not None
    assert name_problem("namespace", "-xx") is not None
