"""Real audit logs (tests/fixtures/real/audit, copied verbatim; README.md there says where each is from and
what an engineer reads from it), read the way an engineer reads them: pods known only from Metadata-level
requests, deletions naming the impersonating user, refused evictions naming their budget, the kubelet's
status patches as API-lane transitions, a malformed line reported and the rest kept."""

from __future__ import annotations

import gzip
import io
import random
from datetime import datetime
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command

from collectors.parsers.audit import parse_audit
from dashboard import queries
from tests import stored
from timelines import derivation
from timelines.lifecycle.audit_evidence import (
    Life,
    audit_lives,
    audit_snapshots,
    is_synthetic_uid,
    read_audit,
)
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Kind, Observation
from timelines.lifecycle.timeline import PodTimeline
from timelines.models import Cluster, Pod

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "audit"
KODEKLOUD = "kodekloud-2024-citadel-webapp-color-deletes.jsonl"
KUBEADM = "kubeadm-1.20-kubelet-status-patch-running-malformed-line.jsonl"
EKS = "eks-2021-kubelet-status-patch-oomkilled.jsonl"
AKS = "aks-2025-kube-audit-admin-eviction-429.jsonl"
AKS_RAW = "aks-2025-eviction-429-unwrapped.jsonl"
VARIANT = "variants/v1-drain-eventlist-webhook.jsonl"  # NOT real: written from the Event schema (README)

# README.md: the five deletions of citadel/webapp-color (stage timestamps) and the five creates.
DELETED_AT = ["15:15:41.477069", "15:16:01.757169", "15:16:21.767365", "15:16:41.747434", "15:17:02.111751"]
CREATED_AT = ["15:15:42.328339", "15:16:01.983357", "15:16:21.992968", "15:16:41.968106", "15:17:02.332027"]
SMITH = "agent-smith, as kubernetes-admin, via kubectl"


def t(day: str, clock: str) -> datetime:
    return datetime.fromisoformat(f"{day}T{clock}+00:00")


def observations(name: str) -> list[Observation]:
    return list(parse_audit((REAL / name).read_bytes()).observations)


def lives_of(
    obs: list[Observation], namespace: str, name: str, known: list[Life] | None = None
) -> list[PodTimeline]:
    """The timelines of the incarnations of ``namespace/name`` known only from ``obs``, as the derive stage
    makes them."""
    out = []
    for life in audit_lives(namespace, name, obs, known or []):
        records = [r for r in map(read_audit, life.observations) if r is not None]
        out.append(
            derive_pod_timeline([*life.observations, *audit_snapshots(life.uid, records, life.gone_by)])
        )
    return out


def test_audit_snapshots_read_as_the_watch_would_have_delivered_them() -> None:
    """GIVEN the KodeKloud log's incarnations of citadel/webapp-color WHEN their snapshots are read back from
    the requests THEN each carries the event a watch of the pod would have delivered (docs/observations.md,
    ``watch``): the CREATE's object ADDED, the DELETE that set its deletion time MODIFIED, its end
    DELETED, as a ``pod_deleted``; the pod that existed before the log begins MODIFIED."""
    obs = observations(KODEKLOUD)
    events = []
    for life in audit_lives("citadel", "webapp-color", obs, []):
        records = [r for r in map(read_audit, life.observations) if r is not None]
        events.append(
            [(o.kind, o.payload["watch"]) for o in audit_snapshots(life.uid, records, life.gone_by)]
        )
    created_then_deleted = [(Kind.POD, "ADDED"), (Kind.POD, "MODIFIED"), (Kind.POD_DELETED, "DELETED")]
    assert events == [
        [(Kind.POD, "MODIFIED"), (Kind.POD_DELETED, "DELETED")],
        *[created_then_deleted] * 4,
        [(Kind.POD, "ADDED")],  # the last one is alive
    ]


def test_a_pod_replaced_five_times_at_metadata_level_is_six_incarnations_each_deletion_naming_the_user() -> (
    None
):
    """GIVEN the KodeKloud log (Metadata level: no UID anywhere), where kubernetes-admin impersonating
    agent-smith deletes citadel/webapp-color and creates it again, five times
    WHEN its requests are split into incarnations
    THEN the pod that existed before the log and the five created ones are six incarnations, each created
    one begins at its CREATE, each deleted one shows its DELETE at the stage time naming the actor, and
    the last one is alive."""
    timelines = lives_of(observations(KODEKLOUD), "citadel", "webapp-color")
    assert len(timelines) == 6
    assert all(is_synthetic_uid(tl.uid) for tl in timelines)
    day = "2024-03-26"
    deleted = [(m.at, m.message) for tl in timelines for m in tl.markers if m.reason == "Deleted"]
    assert deleted == [(t(day, at), f"deleted by {SMITH}") for at in DELETED_AT]
    created = [tl.created_at for tl in timelines[1:]]
    # creationTimestamp is set while the CREATE is served: the request's arrival, to the microsecond
    assert all(c is not None and c <= t(day, at) for c, at in zip(created, CREATED_AT, strict=True))
    for tl, at in zip(timelines[:5], DELETED_AT, strict=True):
        api = tl.lanes["api"]
        assert [iv.state for iv in api][-2:] == ["terminating", "deleted"]
        assert api[-2].start == t(day, at)
        assert api[-2].attrs["who"] == SMITH
    assert [iv.state for iv in timelines[5].lanes["api"]] == ["pending"]
    assert timelines[5].deleted_at is None


def test_the_incarnations_do_not_depend_on_the_order_the_requests_arrive_in() -> None:
    obs = observations(KODEKLOUD)
    expected = [(tl.uid, tl.lanes, tl.markers) for tl in lives_of(obs, "citadel", "webapp-color")]
    for seed in range(3):
        shuffled = obs[:]
        random.Random(seed).shuffle(shuffled)
        assert [
            (tl.uid, tl.lanes, tl.markers) for tl in lives_of(shuffled, "citadel", "webapp-color")
        ] == expected


def test_a_known_incarnation_takes_its_requests_from_the_audit_only_ones() -> None:
    """GIVEN the KodeKloud log and the last incarnation known from its own observations (a watch gave its
    UID, created at the second of its CREATE) WHEN the requests are split THEN that incarnation is no
    longer an audit-only one, and the one before it keeps its own DELETE."""
    obs = observations(KODEKLOUD)
    known = [Life("0f9c2f7e-real", "citadel", "webapp-color", t("2024-03-26", "15:17:02"), None)]
    timelines = lives_of(obs, "citadel", "webapp-color", known)
    assert len(timelines) == 5
    last = timelines[-1]
    assert [m.at for m in last.markers if m.reason == "Deleted"] == [t("2024-03-26", DELETED_AT[-1])]


def test_kubelet_status_patch_sets_running_at_the_request_and_keeps_the_pod_object() -> None:
    """GIVEN kubeadm 1.20's RequestResponse status patch of default/accessor (phase Running in the patch)
    WHEN derived THEN the API lane is running from the patch's stage time (the phase changed then; the
    container started a second earlier)."""
    obs = [o for o in observations(KUBEADM) if o.namespace == "default" and o.name == "accessor"]
    own = [o for o in obs if o.pod_uid == "d67a9290-1dc8-4f14-ac84-88e9ae82d2a2"]
    assert own, "the response body is the pod: a snapshot with its UID"
    timeline = derive_pod_timeline(obs)
    running = [iv for iv in timeline.lanes["api"] if iv.state == "running"]
    assert running[0].start == t("2021-05-24", "09:29:44.426816")
    assert timeline.lanes["container:accessor"][0].start == t("2021-05-24", "09:29:43")


def test_the_malformed_line_is_named_and_the_rest_is_kept() -> None:
    result = parse_audit((REAL / KUBEADM).read_bytes())
    assert dict(result.rejected) == {"bad_json": 1}
    assert [e.split(":")[:2] for e in result.examples] == [["bad_json", " line 3"]]
    assert any(o.kind == Kind.AUDIT and o.name == "accessor" for o in result.observations)


def test_an_eks_request_level_oomkilled_patch_is_a_failed_pod() -> None:
    """GIVEN EKS's CloudWatch body of the kubelet's Request-level status patch (phase Failed, container
    stress terminated OOMKilled, exit code 2) WHEN the pod is known only from it THEN it is an incarnation
    with the patch's UID, failed from the patch, and its container terminated OOMKilled."""
    (timeline,) = lives_of(observations(EKS), "default", "stress-83-tbnq2")
    assert timeline.uid == "10177585-b79f-44a0-bdcc-c68ec12d012a"
    assert timeline.node == "ip-00-00-00-00.eu-west-1.compute.internal"
    failed = [iv for iv in timeline.lanes["api"] if iv.state == "failed"]
    assert failed[0].start == t("2021-09-27", "08:36:44.021638")
    (run, end) = timeline.lanes["container:stress"]
    assert (run.state, run.start) == ("running", t("2021-09-27", "08:36:29"))
    assert (end.state, end.attrs["reason"], end.attrs["exit_code"]) == ("terminated", "OOMKilled", 2)
    ready = timeline.lanes["condition:Ready"][0]
    assert (ready.state, ready.attrs["reason"]) == ("false", "ContainersNotReady")


@pytest.mark.parametrize("name", [AKS, AKS_RAW])
def test_a_refused_eviction_names_its_budget_and_leaves_the_pod_alive(name: str) -> None:
    """GIVEN AKS's 429 eviction of entity-service-blue/shard-sport2-58ff578d97-gsxxc (wrapped in an Azure
    diagnostic record, or the event it holds) WHEN the pod is known only from it THEN the refusal is
    shown at its time naming PDB service and its numbers, and nothing shows the pod terminating."""
    (timeline,) = lives_of(observations(name), "entity-service-blue", "shard-sport2-58ff578d97-gsxxc")
    (marker,) = timeline.markers
    assert (marker.at, marker.reason) == (t("2025-05-15", "12:24:35.385521"), "EvictionRefused")
    assert marker.attrs["pdb"] == "service" and marker.attrs["code"] == 429
    assert "needs 16 healthy pods and has 16" in marker.message
    assert marker.attrs["who"] == "aksService via cluster-autoscaler"
    states = {iv.state for ivs in timeline.lanes.values() for iv in ivs}
    assert not states & {"terminating", "deleted", "cleanup"}


@pytest.mark.django_db(transaction=True)
def test_the_same_refused_eviction_reads_the_same_in_two_clusters() -> None:
    """GIVEN AKS's real 429 eviction ingested twice, wrapped in its Azure record into one cluster and as the
    bare event it holds into another (so the same request is stored as two rows with two ids)
    WHEN each cluster prints the pod's timeline as podlife.timeline/v2 JSON (``manage.py timeline``)
    THEN the refusal markers are byte for byte the same, and cite the request by its dedupe key (the
    auditID's), which both clusters hold, never by a row id."""
    ingest("aks", str(REAL / AKS))
    ingest("aksraw", str(REAL / AKS_RAW))
    markers = {}
    for cluster in ("aks", "aksraw"):
        out = io.StringIO()
        call_command(
            "timeline",
            "--cluster",
            cluster,
            "--pod",
            "entity-service-blue/shard-sport2-58ff578d97-gsxxc",
            "--format",
            "json",
            stdout=out,
        )
        markers[cluster] = orjson.dumps(orjson.loads(out.getvalue())["markers"])
    assert markers["aks"] == markers["aksraw"]
    (marker,) = orjson.loads(markers["aks"])
    (key,) = marker["evidence"]
    assert key.startswith("audit:") and marker["reason"] == "EvictionRefused"
    ids = {c.name: row.id for c in Cluster.objects.all() for row in stored.rows_of(c, keys=[key])}
    assert set(ids) == {"aks", "aksraw"} and ids["aks"] != ids["aksraw"]


def test_variant_drain_two_refusals_then_a_granted_eviction_and_the_kubelet_final_delete() -> None:
    """(Synthetic variant, marked as such in its README.) The UID-less evictions join the incarnation the
    kubelet's patches name; the granted one begins termination and is not told as a refusal."""
    (timeline,) = lives_of(observations(VARIANT), "shop", "cart-5d8f7c9b6-q7w2x")
    assert timeline.uid == "6f1d2b7e-3c1a-4e0f-9b8d-2a7c5e4f1b93"
    reasons = [(m.at.strftime("%H:%M:%S.%f"), m.reason) for m in timeline.markers]
    assert reasons == [
        ("14:02:07.211873", "EvictionRefused"),
        ("14:02:12.221302", "EvictionRefused"),
        ("14:02:17.259884", "Evicted"),
        ("14:02:18.118150", "Deleted"),
    ]
    granted = timeline.markers[2]
    assert "refus" not in granted.message and granted.attrs["code"] == 201
    api = [(iv.state, iv.start.strftime("%H:%M:%S.%f")) for iv in timeline.lanes["api"]]
    assert ("terminating", "14:02:17.259884") in api and api[-1] == ("deleted", "14:02:18.118150")


# -- through the commands -----------------------------------------------------------------------------


def ingest(cluster: str, *paths: str) -> str:
    out = io.StringIO()
    call_command("ingest_audit_log", "--cluster", cluster, *paths, stdout=out, stderr=io.StringIO())
    derivation.drain()
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_metadata_level_pod_is_browsable_by_name_with_its_earlier_incarnations() -> None:
    ingest("kk", str(REAL / KODEKLOUD))
    cluster = queries.get_cluster("kk")
    newest = queries.resolve_pod(cluster, pod_ref="citadel/webapp-color")
    pods = queries.find_pods(cluster, namespace="citadel", name="webapp-color")
    assert len(pods) == 6 and pods[0].uid == newest.uid
    assert newest.deleted_at is None
    out = io.StringIO()
    call_command("timeline", "--cluster", "kk", "--pod", "citadel/webapp-color", stdout=out)
    listed = (
        out.getvalue().split("earlier incarnations of citadel/webapp-color: ")[1].split(" (use --uid)")[0]
    )
    assert set(listed.split(", ")) == {p.uid for p in pods[1:]}


@pytest.mark.django_db(transaction=True)
def test_a_real_uid_arriving_later_replaces_the_synthetic_incarnation(tmp_path: Path) -> None:
    """GIVEN the EKS patch ingested (the pod known from it alone), and then a Metadata-level log of the same
    pod WHEN both are derived THEN one incarnation, under the real UID; GIVEN a folder holding a .gz THEN it
    is read like the file."""
    folder = tmp_path / "eks"
    folder.mkdir()
    (folder / "kube-apiserver-audit-1.jsonl.gz").write_bytes(gzip.compress((REAL / EKS).read_bytes()))
    ingest("eks", str(folder))
    cluster = queries.get_cluster("eks")
    pods = list(Pod.objects.filter(cluster=cluster, name="stress-83-tbnq2").values_list("uid", "phase"))
    assert pods == [("10177585-b79f-44a0-bdcc-c68ec12d012a", "Failed")]


def test_what_was_not_followed_is_listed_by_shape_most_frequent_first() -> None:
    """GIVEN the KodeKloud log (95 events: pods and configmaps, reads and writes) WHEN parsed THEN the
    events podlife does not follow are counted by verb and resource, as the file holds them."""
    import json
    from collections import Counter

    from collectors.parsers.audit import top_ignored

    raw = [json.loads(line) for line in (REAL / KODEKLOUD).read_text().splitlines() if line.strip()]
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    expected = Counter(
        f"{e['verb']} {e['objectRef']['resource']}"
        for e in raw
        if e["objectRef"]["resource"] != "pods" or e["verb"] not in writes
    )
    result = parse_audit((REAL / KODEKLOUD).read_bytes())
    assert dict(result.ignored) == dict(expected)
    assert top_ignored(result.ignored)[0] == expected.most_common(1)[0]
    assert len(top_ignored(result.ignored, 3)) == 3


@pytest.mark.django_db(transaction=True)
def test_the_command_summary_names_the_most_frequent_shapes_not_followed() -> None:
    out = ingest("kk2", str(REAL / KODEKLOUD))
    assert "not followed, most frequent (top 10): get pods 28, watch configmaps 24" in out
    assert "1 pod names by their requests" in out


def test_a_pod_create_refused_by_admission_makes_no_pod() -> None:
    """GIVEN a real GKE Cloud Audit entry (protoPayload) of a `pods.create` that a Binary Authorization
    admission webhook denied (google.rpc code 3, the response a Status with code 400)
    WHEN its requests are split into incarnations
    THEN there is none: a refused CREATE stores nothing, so no pod of that name existed on its account."""
    obs = observations("qwiklabs-2024-gke-binauthz-pod-create-denied.json")
    records = [r for r in map(read_audit, obs) if r is not None]
    assert [(r.verb, r.code, r.succeeded) for r in records] == [("create", 400, False)]
    assert lives_of(obs, "default", "nginx") == []
