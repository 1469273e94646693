"""``rederive`` rebuilds exactly what the derive stage wrote, and the bundle exported after it is the one
exported before (issue #37, deliverable 3: observations are the source of truth, so whatever form the
store keeps them in, what is derived from them and what a bundle carries do not change).

The derived tables are compared whole (every row of every derived table, ids left out: a rebuilt row is a
new row); the bundle by its derived sections and its observations' digest (``test_same_bundle.bundle_lines``,
evidence cited as dedupe keys), both against the export made before the rebuild and against the golden
file written by an earlier podlife for the same observations.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.db import connection, models

from dashboard.export import Scope
from tests.export.helpers import export_json
from tests.export.test_same_bundle import DATA, bundle_lines
from timelines.models import (
    Cluster,
    Finding,
    Interval,
    Marker,
    Node,
    PDBStatusSample,
    Pod,
    PodDisruptionBudget,
    Workload,
    WorkloadStatusSample,
)

pytestmark = [pytest.mark.django_db, pytest.mark.both_databases]

DERIVED: tuple[type[models.Model], ...] = (
    Interval,
    Marker,
    Finding,
    Pod,
    Node,
    PodDisruptionBudget,
    PDBStatusSample,
    Workload,
    WorkloadStatusSample,
)


def derived_tables(cluster: Cluster) -> dict[str, list[str]]:
    """Every derived row of ``cluster``, table by table, as sorted text: columns by name, ids and the
    references to other derived rows (which a rebuild gives new ids) left out, the referenced row's
    identity (its UID) in their place."""
    out: dict[str, list[str]] = {}
    for model in DERIVED:
        if model in (PDBStatusSample, WorkloadStatusSample):
            parent = "pdb" if model is PDBStatusSample else "workload"
            rows = model.objects.filter(**{f"{parent}__cluster": cluster})
            columns = [
                f.attname for f in model._meta.concrete_fields if f.attname not in ("id", f"{parent}_id")
            ]
            values = [repr(v) for v in rows.values_list(f"{parent}__uid", *columns)]
        else:
            rows = model.objects.filter(cluster=cluster)
            columns = [f.attname for f in model._meta.concrete_fields if f.attname != "id"]
            values = [repr(v) for v in rows.values_list(*columns)]
        out[model.__name__] = sorted(values)
    return out


def test_rederive_rebuilds_the_same_rows_and_the_same_bundle(source_cluster: Cluster) -> None:
    """GIVEN the export tests' source cluster, derived as its observations arrived, and its node-a bundle
    WHEN every derived row is deleted and ``manage.py rederive`` rebuilds them from the observations
    THEN every derived table holds the same rows, and the bundle exported again has the same derived
    sections and observations' digest as before, and as the golden file of an earlier podlife."""
    before = derived_tables(source_cluster)
    assert sum(map(len, before.values())) > 50 and all(
        before[m.__name__] for m in (Interval, Marker, Finding)
    )
    bundle_before = bundle_lines(export_json(source_cluster, Scope.one("node", "node-a")))

    for model in (Interval, Marker, Finding, PDBStatusSample, WorkloadStatusSample):
        model.objects.all().delete()
    out = io.StringIO()
    call_command("rederive", "--cluster", source_cluster.name, stdout=out)
    assert out.getvalue().startswith(f"{source_cluster.name}: re-derived")

    after = derived_tables(source_cluster)
    for name, rows in before.items():
        assert after[name] == rows, name
    bundle_after = bundle_lines(export_json(source_cluster, Scope.one("node", "node-a")))
    assert bundle_after == bundle_before
    golden = (DATA / f"node-a.{connection.vendor}.golden").read_text(encoding="utf-8").splitlines()
    assert bundle_after == golden
