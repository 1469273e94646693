"""ingest_k8s_json (kubectl output, watch streams, cluster-info dumps) and rederive, through the store."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from django.core.management import CommandError, call_command

from tests.stored import count_of
from timelines.models import Cluster, Interval, Node, Pod, PodDisruptionBudget, Workload

pytestmark = pytest.mark.django_db
K8S = Path(__file__).parent / "fixtures" / "k8s"


def ingest(*paths: Path | str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest_k8s_json", "--cluster", "bundle", *map(str, paths), stdout=out, stderr=err)
    derived = io.StringIO()
    call_command("derive", stdout=derived)  # what a worker does with what the command stored
    assert derived.getvalue().startswith("derived ")
    return out.getvalue(), err.getvalue()


def ingest_losing(*paths: Path | str) -> tuple[str, str, str]:
    """Ingest input that loses something: the command stores what it could read, then fails."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError) as failure:
        call_command("ingest_k8s_json", "--cluster", "bundle", *map(str, paths), stdout=out, stderr=err)
    call_command("derive", stdout=io.StringIO())  # what a worker does with what the command stored
    return out.getvalue(), err.getvalue(), str(failure.value)


def test_every_offline_shape_is_read_and_reported():
    out, err, failure = ingest_losing(
        *sorted(K8S.glob("*.json")),
        K8S / "pods.yaml",
        K8S / "cluster-info-dump",
        K8S / "cluster-info-dump.txt",
    )
    # The one Pod without a uid is lost, loudly; everything else read was stored.
    assert failure == "1 object(s) could not be read (1 Pod)"
    assert "lost: 1 object(s) could not be read (1 Pod); everything else read was stored" in out
    assert (
        "mixed-list.json: read 1 Deployment, 1 Event, 1 Node, 1 Pod, 1 PodDisruptionBudget, 1 Service" in out
    )
    assert "skipped: unsupported_kind 1" in out
    assert "pods-watch.json: read 4 Pod" in out and "skipped: bookmark 1" in out
    assert "skipped: container_logs 1" in out
    assert "pods.yaml: document 3: Pod default/no-uid: expected metadata.uid" in err
    assert Cluster.objects.get(name="bundle").origin == Cluster.Origin.OFFLINE
    assert Node.objects.filter(name="worker-1").exists()
    assert PodDisruptionBudget.objects.filter(namespace="default", name="web").exists()
    assert Workload.objects.filter(kind="Deployment", name="web").exists()
    web = Pod.objects.get(uid="6b0f2a4e-91c3-4d2a-8f7e-3c5d9a1b2e47")
    assert (web.namespace, web.node, web.owner_kind) == ("default", "worker-1", "ReplicaSet")
    assert web.deleted_at is not None  # the watch stream ends with DELETED


def test_api_only_pod_gets_an_inferred_worker_lane():
    ingest(K8S / "pods-watch.json")
    out = io.StringIO()
    call_command(
        "timeline",
        "--cluster",
        "bundle",
        "--pod",
        "default/web-7d9f8b6c4-x2k9p",
        "--format",
        "json",
        stdout=out,
    )
    tl = orjson.loads(out.getvalue())
    assert [(i["state"], i["source"]) for i in tl["lanes"]["worker"]] == [
        ("setup", "inferred"),
        ("running", "inferred"),
        ("terminating", "inferred"),
    ]
    assert tl["lanes"]["api"][-1]["state"] == "deleted"
    assert "container:nginx" in tl["lanes"]


def rows() -> list[tuple]:
    return sorted(
        map(repr, Interval.objects.values_list("pod_uid", "node", "lane", "state", "start", "end", "source"))
    )


def test_reingesting_stores_nothing_and_rederive_rebuilds_the_same_rows():
    ingest(*sorted(K8S.glob("*.json")))
    before = rows()
    observations = count_of(None)
    out, _ = ingest(*sorted(K8S.glob("*.json")))
    assert count_of(None) == observations
    assert "(0 stored" in out and "total: 0 pods touched" in out
    Interval.objects.all().delete()
    rebuilt = io.StringIO()
    call_command("rederive", "--cluster", "bundle", stdout=rebuilt)
    assert rebuilt.getvalue().startswith("bundle: re-derived")
    assert rows() == before


def test_nothing_usable_is_a_failure_that_names_the_file(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("this is not kubectl output {")
    with pytest.raises(CommandError, match="1 of 1 input"):
        ingest(junk)
    with pytest.raises(CommandError, match="no cluster named 'ghost'"):
        call_command("rederive", "--cluster", "ghost")
