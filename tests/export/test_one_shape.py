"""Workloads and PDBs have one JSON shape (``dashboard/serialize.py``): the REST API lists exactly what an
incident bundle carries about them (the bundle adds only its window-bound parts), with every time in the
``format_time`` spelling the docs promise (UTC, microseconds always, ``+00:00``)."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard import serialize
from tests.export.conftest import uid_for
from tests.export.helpers import export_json
from timelines.models import Cluster

pytestmark = pytest.mark.django_db

TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")
BUNDLE_ONLY_PDB = {"lanes", "samples", "covered_pods", "evidence_outside_bundle"}


def _api(client: Client, path: str) -> Any:
    response = client.get(f"/api/v1{path}")
    assert response.status_code == 200, response.content[:300]
    return orjson.loads(response.content)


def _times(doc: dict[str, Any], keys: tuple[str, ...]) -> list[Any]:
    return [doc[k] for k in keys if doc[k] is not None]


def test_api_and_bundle_shape_workloads_and_pdbs_alike(source_cluster: Cluster) -> None:
    """GIVEN a cluster with two workloads and a PDB whose samples all fall in (or just before) a window
    WHEN the API lists them and an export of that window carries them
    THEN the API's documents are the bundle's without the window-bound keys, in the same key order, the
    PDB's samples and blocked periods use the same spelling, and every time has six fractional digits."""
    client = Client()
    client.force_login(User.objects.create_superuser("admin", "a@example.org", "pw"))
    bundle = orjson.loads(export_json(source_cluster))  # node-a: its pods, their workloads and PDB

    listed = _api(client, "/clusters/src/workloads")["workloads"]
    carried = {w["uid"]: w for w in bundle["workloads"]}
    assert sorted(w["uid"] for w in listed) == sorted(carried) == ["dep-uid-1", "rs-uid-1"]
    for w in listed:
        expected = {k: v for k, v in carried[w["uid"]].items() if k != "samples"}
        assert list(w.items()) == list(expected.items())
        assert all(TIME.match(t) for t in _times(w, ("created_at", "deleted_at")))
    rs = next(w for w in listed if w["uid"] == "rs-uid-1")
    assert rs["owner"] == {"kind": "Deployment", "name": "web", "uid": "dep-uid-1"}

    status = _api(client, "/clusters/src/workloads/shop/Deployment/web/status")
    assert status["samples"] == carried["dep-uid-1"]["samples"]
    assert [s["ready"] for s in status["samples"]] == [3, 2]

    (pdb,) = _api(client, "/clusters/src/pdbs")["pdbs"]
    (in_bundle,) = bundle["pdbs"]
    assert list(pdb.items()) == [(k, v) for k, v in in_bundle.items() if k not in BUNDLE_ONLY_PDB]
    detail = _api(client, f"/clusters/src/pdbs/{pdb['namespace']}/{pdb['name']}")
    assert detail["pdb"] == pdb
    assert detail["samples"] == in_bundle["samples"]
    assert [s["disruptions_allowed"] for s in detail["samples"]] == [1, 0, 1]
    (blocked,) = detail["blocked"]
    assert [blocked["start"], blocked["end"]] == [detail["samples"][1]["at"], detail["samples"][2]["at"]]
    times = [s["at"] for s in detail["samples"]] + [blocked["start"], blocked["end"]]
    assert times and all(TIME.match(t) for t in times + _times(pdb, ("created_at", "deleted_at")))


def test_timeline_structs_describe_exactly_what_the_api_and_the_bundle_write(source_cluster: Cluster) -> None:
    """GIVEN the pods of a bundle and the same pods' timelines from the API (both the one read,
    ``timeline_reads.pod_timelines``, the pages' and the command line's too)
    WHEN each is read through ``serialize.TimelineDoc`` and written back
    THEN nothing is lost or reordered: the Structs are the whole v2 shape, and the two answers agree."""
    client = Client()
    client.force_login(User.objects.create_superuser("admin", "a@example.org", "pw"))
    bundle = orjson.loads(export_json(source_cluster))
    assert len(bundle["pods"]) >= 3
    for doc in bundle["pods"]:
        assert orjson.dumps(serialize.to_builtins(serialize.decode_timeline(doc))) == orjson.dumps(doc)
        from_api = _api(client, f"/clusters/src/pods/{doc['pod']['uid']}/timeline")
        assert orjson.dumps(serialize.to_builtins(serialize.decode_timeline(from_api))) == orjson.dumps(
            from_api
        )
        assert from_api["lanes"] == doc["lanes"] and from_api["findings"] == doc["findings"]


def test_openapi_components_are_the_structs_the_api_sends(source_cluster: Cluster) -> None:
    """GIVEN the served OpenAPI document WHEN its workload and PDB components are read
    THEN each lists exactly the keys the endpoints send, in order, all required, times as date-time."""
    client = Client()
    client.force_login(User.objects.create_superuser("admin", "a@example.org", "pw"))
    schemas = _api(client, "/openapi.json")["components"]["schemas"]
    status = _api(client, "/clusters/src/workloads/shop/Deployment/web/status")
    pdb = _api(client, "/clusters/src/pdbs/shop/web-pdb")
    sent = {
        "WorkloadDoc": status["workload"],
        "WorkloadSample": status["samples"][0],
        "PdbDoc": pdb["pdb"],
        "PdbSample": pdb["samples"][0],
        "BlockedPeriod": pdb["blocked"][0],
    }
    for name, doc in sent.items():
        schema = schemas[name]
        assert list(schema["properties"]) == list(doc) == schema["required"], name
    assert schemas["PdbSample"]["properties"]["at"] == {"format": "date-time", "type": "string"}
    # The timeline: the pod endpoint's response is the TimelineDoc component, its stable keys required.
    timeline = _api(client, f"/clusters/src/pods/{uid_for('web-a')}/timeline")
    assert list(schemas["TimelineDoc"]["properties"]) == list(timeline)
    assert schemas["TimelineDoc"]["required"] == ["schema", "cluster", "pod", "lanes", "markers", "findings"]
    interval = schemas["IntervalDoc"]["properties"]
    assert list(interval) == list(timeline["lanes"]["worker"][0])
    assert interval["source"]["enum"] == ["inferred", "kubelet", "observed"]
    findings = _api(client, "/findings?cluster=src")["findings"]
    assert findings and all(list(f) == list(schemas["FindingRowDoc"]["properties"]) for f in findings)
    assert all(TIME.match(f["start"]) and isinstance(f["id"], int) for f in findings)
    assert all(e.isdigit() for f in findings for e in map(str, f["evidence"]))
    covered = pdb["covered_pods"]
    assert covered and all(list(p) == list(schemas["PodRowDoc"]["properties"]) for p in covered)
    observations = _api(client, f"/clusters/src/pods/{uid_for('web-a')}/observations")["observations"]
    assert observations and all(
        list(o) == list(schemas["ObservationDoc"]["properties"]) for o in observations
    )
    assert all(TIME.match(o["observed_at"]) and TIME.match(o["received_at"]) for o in observations)
    paths = _api(client, "/openapi.json")["paths"]
    pod_ok = paths["/clusters/{cluster}/pods/{uid}/timeline"]["get"]["responses"]["200"]
    assert pod_ok["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/TimelineDoc"}
    pdb_detail = paths["/clusters/{cluster}/pdbs/{namespace}/{name}"]["get"]["responses"]["200"]
    props = pdb_detail["content"]["application/json"]["schema"]["properties"]
    assert props["blocked"]["items"] == {"$ref": "#/components/schemas/BlockedPeriod"}
