"""Export → import → export gives the same timelines, findings and observations."""

from __future__ import annotations

import orjson
import pytest
from django.db import transaction

from dashboard.export import Scope
from dashboard.export.importer import import_incident
from tests.export.conftest import HOSTILE, uid_for
from tests.export.helpers import export_json, finding_rows, normalized_pods, observation_rows
from timelines import store
from timelines.lifecycle.observation import Kind, Observation, Source
from timelines.models import Cluster, Node, PodDisruptionBudget, Workload

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]


@pytest.mark.parametrize(
    "scope",
    [
        Scope.one("node", "node-a"),
        Scope.one("namespace", "shop"),
        Scope.one("workload", "Deployment/shop/web"),
        Scope.one("pdb", "shop/web-pdb"),
        Scope.pods([uid_for("web-b"), uid_for("api-x")]),
    ],
    ids=lambda s: s.kind,
)
def test_export_import_export_gives_the_same_bundle(source_cluster, scope, tmp_path):
    """GIVEN a bundle exported from the source cluster
    WHEN it is imported as another cluster and that cluster is exported with the same scope and window
    THEN every pod's timeline, the findings and the observations are the same, and so is the digest."""
    first_bytes = export_json(source_cluster, scope)
    path = tmp_path / "incident.json"
    path.write_bytes(first_bytes)

    result = import_incident(path, name="copy")

    assert result.differences == []
    copy = Cluster.objects.get(name="copy")
    assert (copy.origin, copy.read_only) == (Cluster.Origin.IMPORTED, True)
    first, second = orjson.loads(first_bytes), orjson.loads(export_json(copy, scope))
    assert first["pods"], "the scope selects pods"
    assert normalized_pods(second) == normalized_pods(first)
    assert finding_rows(second) == finding_rows(first)
    assert observation_rows(second) == observation_rows(first)
    assert second["metadata"]["digest"] == first["metadata"]["digest"]
    assert [p["name"] for p in second["pdbs"]] == [p["name"] for p in first["pdbs"]]
    assert "identical" in copy.description


def test_import_rebuilds_nodes_pdbs_and_workloads(source_cluster, tmp_path):
    path = tmp_path / "incident.json"
    path.write_bytes(export_json(source_cluster, Scope.one("workload", "Deployment/shop/web")))
    import_incident(path, name="copy")
    copy = Cluster.objects.get(name="copy")
    assert Node.objects.filter(cluster=copy, name="node-a", unschedulable=True, ready=False).exists()
    pdb = PodDisruptionBudget.objects.get(cluster=copy, name="web-pdb")
    assert [s.disruptions_allowed for s in pdb.samples.order_by("at")] == [1, 0, 1]
    kinds = set(Workload.objects.filter(cluster=copy).values_list("kind", "name"))
    assert kinds == {("Deployment", "web"), ("ReplicaSet", "web-7d9")}


def test_hostile_pod_name_survives_the_round_trip(source_cluster, tmp_path):
    path = tmp_path / "incident.json"
    path.write_bytes(export_json(source_cluster))
    import_incident(path, name="copy")
    bundle = orjson.loads(export_json(Cluster.objects.get(name="copy")))
    assert HOSTILE in {p["pod"]["name"] for p in bundle["pods"]}


def test_imported_cluster_takes_no_further_observations(source_cluster, tmp_path):
    path = tmp_path / "incident.json"
    path.write_bytes(export_json(source_cluster))
    import_incident(path, name="copy")
    copy = Cluster.objects.get(name="copy")
    late = Observation(Kind.WORKER, Source.KUBELET_LOG, copy.created_at, "late-key", "uid-z", payload={})
    with pytest.raises(PermissionError, match="read-only"):
        store.save_observations(copy, [late])
    with pytest.raises(ValueError, match="already exists"), transaction.atomic():
        store.begin_import("copy")


def test_import_session_closes_at_commit(db):
    with transaction.atomic():
        session = store.begin_import("fresh")
    with pytest.raises(PermissionError, match="closed"), transaction.atomic():
        session.save_observations([])


def test_begin_import_refuses_outside_a_transaction(db):
    with pytest.raises(RuntimeError, match="all or nothing"):
        store.begin_import("fresh")
