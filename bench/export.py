"""Export benchmark: a 10,000-pod namespace over 24 hours, against a raw dump of the same rows.

    python bench/export.py [--pods 10000] [--nodes 100] [--keep | --reuse]

``--reuse`` keeps the generated cluster (named after ``--pods`` and ``--nodes``) and, when it is there
already, skips the set-up (about four minutes for 10,000 pods on PostgreSQL): for measuring a change again.

Set-up (not timed): generates realistic observations for every pod (API snapshots, events, kubelet worker
lines — the same shapes as bench/ingest.py), a day of node snapshots and kubelet metrics for one node,
stores them with ``store.save_observations`` and derives them through the real pipeline
(the store marks them dirty, the derive stage derives them), so the derived rows are what production would hold.

Timed, in the same run:
* ours: ``export_incident(namespace, 24 h, json)`` gzip-compressed to a file (level 6; the observations
  are compressed by a second thread while they are read, see dashboard/export/bundle.py);
* baseline: ``COPY (SELECT …) TO STDOUT`` of the same rows (pods, intervals, markers, findings,
  observations) through the same gzip level to a file — on SQLite a plain SELECT written tab-separated;
* a node day: ``export_incident(node, 24 h, json.gz)`` for one node (its ~100 pods and its own lanes).

Prints the ratio ours / baseline (goal ≤ 3) and the node-day time (goal ≤ 1 s).
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta

from _setup import setup_django

setup_django()

from django.db import connection  # noqa: E402

from dashboard.export import Scope, export_incident  # noqa: E402
from timelines import derivation, store  # noqa: E402
from timelines.lifecycle.observation import Kind, Observation, Source, Transition, digest_key  # noqa: E402
from timelines.models import Cluster  # noqa: E402

T0 = datetime(2026, 11, 1, tzinfo=UTC)
NS = "bench"
WORKER = [
    (Transition.FIRST_SEEN, 0.2),
    (Transition.SYNC_ENTER, 0.21),
    (Transition.SYNC_EXIT, 3.0),
    (Transition.TERMINATION_REQUESTED, None),
    (Transition.TERMINATING_ENTER, None),
    (Transition.TERMINATING_EXIT, None),
    (Transition.CONTAINERS_TERMINATED, None),
    (Transition.TERMINATED_ENTER, None),
    (Transition.TERMINATED_EXIT, None),
    (Transition.WORKER_DONE, None),
]


def iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds")


def pod_observations(rng: random.Random, i: int, nodes: int) -> list[Observation]:
    """One pod's day: created, scheduled, running, ready; about half are deleted gracefully later."""
    uid = str(uuid.UUID(int=rng.getrandbits(128)))
    node = f"node-{i % nodes:03d}"
    name = f"web-{i:05d}"
    created = T0 + timedelta(seconds=rng.random() * 80_000)
    deleted = rng.random() < 0.5
    delete_at = created + timedelta(seconds=60 + rng.random() * 4000)
    out = []
    rv = i * 100

    def snap(
        at: datetime, phase: str, *, ready: bool, deletion: datetime | None = None, gone: bool = False
    ) -> None:
        nonlocal rv
        rv += 1
        running = phase == "Running"
        payload = {
            "watch": "DELETED" if gone else "MODIFIED",
            "resource_version": str(rv),
            "uid": uid,
            "namespace": NS,
            "name": name,
            "node": node,
            "labels": {"app": "web", "pod-template-hash": "7d9f8c"},
            "created": iso(created),
            "deletion_timestamp": iso(deletion) if deletion else None,
            "deletion_grace_seconds": 30 if deletion else None,
            "grace_seconds": 30,
            "finalizers": [],
            "static": False,
            "owner": {"kind": "ReplicaSet", "name": "web-7d9f8c", "uid": "rs-bench"},
            "phase": phase,
            "reason": None,
            "message": None,
            "start_time": iso(created + timedelta(seconds=1)),
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "reason": None,
                    "message": None,
                    "last_transition": iso(created),
                },
                {
                    "type": "Ready",
                    "status": str(ready),
                    "reason": None,
                    "message": None,
                    "last_transition": iso(at),
                },
            ],
            "containers": [
                {
                    "name": "app",
                    "kind": "regular",
                    "state": "running" if running else ("terminated" if phase == "Succeeded" else "waiting"),
                    "reason": None
                    if running
                    else ("Completed" if phase == "Succeeded" else "ContainerCreating"),
                    "message": None,
                    "exit_code": 0 if phase == "Succeeded" else None,
                    "signal": None,
                    "started_at": iso(created + timedelta(seconds=3)) if phase != "Pending" else None,
                    "finished_at": iso(at) if phase == "Succeeded" else None,
                    "ready": ready,
                    "started": running,
                    "restart_count": 0,
                    "last_state": None,
                }
            ],
        }
        kind = Kind.POD_DELETED if gone else Kind.POD
        key = f"pod:{uid}:{rv}" + (":deleted" if gone else "")
        out.append(Observation(kind, Source.API, at, key, uid, node, NS, name, payload))

    snap(created, "Pending", ready=False)
    snap(created + timedelta(seconds=1), "Pending", ready=False)
    snap(created + timedelta(seconds=3.2), "Running", ready=False)
    snap(created + timedelta(seconds=5), "Running", ready=True)
    for j, reason in enumerate(("Scheduled", "Pulled", "Created", "Started")):
        at = created + timedelta(seconds=0.5 + j)
        payload = {
            "uid": f"{uid}-ev{j}",
            "resource_version": str(rv),
            "reason": reason,
            "type": "Normal",
            "message": f"{reason} container app",
            "count": 1,
            "action": None,
            "component": "kubelet",
            "host": node,
            "first": iso(at),
            "last": iso(at),
            "involved": {"kind": "Pod", "namespace": NS, "name": name, "uid": uid, "field_path": None},
        }
        out.append(
            Observation(Kind.EVENT, Source.API, at, f"event:{uid}-ev{j}:{rv}", uid, node, NS, name, payload)
        )
    steps = WORKER if deleted else WORKER[:3]
    for k, (step, offset) in enumerate(steps):
        at = (
            created + timedelta(seconds=offset)
            if offset is not None
            else delete_at + timedelta(seconds=0.1 * k)
        )
        payload = {
            "transition": step,
            "message": step,
            "severity": "I",
            "caller": "pod_workers.go:1",
            "work_type": None,
            "update_type": None,
            "cause": "deletion" if step == Transition.TERMINATION_REQUESTED else None,
            "is_terminal": None,
            "grace_period": 30 if step == Transition.TERMINATING_ENTER else None,
            "error": None,
            "pod_ref": f"{NS}/{name}",
        }
        key = digest_key(node, step, uid, iso(at))
        out.append(Observation(Kind.WORKER, Source.KUBELET_LOG, at, key, uid, node, NS, name, payload))
    if deleted:
        snap(delete_at, "Running", ready=True, deletion=delete_at + timedelta(seconds=30))
        snap(
            delete_at + timedelta(seconds=1.5),
            "Succeeded",
            ready=False,
            deletion=delete_at + timedelta(seconds=30),
        )
        snap(
            delete_at + timedelta(seconds=2),
            "Succeeded",
            ready=False,
            deletion=delete_at + timedelta(seconds=30),
            gone=True,
        )
    return out


def node_day(node: str) -> list[Observation]:
    """Snapshots every 30 minutes (a cordon for an hour) and kubelet metrics every 30 seconds."""
    out = []
    for m in range(0, 24 * 60, 30):
        at = T0 + timedelta(minutes=m)
        payload = {
            "name": node,
            "uid": f"{node}-uid",
            "unschedulable": 600 <= m < 660,
            "taints": [],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}],
        }
        out.append(
            Observation(Kind.NODE, Source.API, at, f"node:{node}:{m}", None, node, None, node, payload)
        )
    for s in range(0, 86_400, 30):
        payload = {
            "working_pods": {"sync": 100 + (s // 3600) % 7, "terminating": (s // 600) % 3, "terminated": 0}
        }
        out.append(
            Observation(
                Kind.NODE_METRICS,
                Source.KUBELET_METRICS,
                T0 + timedelta(seconds=s),
                f"node_metrics:{node}:{s}",
                None,
                node,
                None,
                None,
                payload,
            )
        )
    return out


def set_up(cluster: Cluster, pods: int, nodes: int) -> tuple[int, float]:
    started = time.perf_counter()
    rng = random.Random(11)
    uids: list[str] = []
    batch: list[Observation] = []
    total = 0
    for i in range(pods):
        obs = pod_observations(rng, i, nodes)
        uids.append(obs[0].pod_uid or "")
        batch += obs
        if len(batch) >= 5000:
            total += store.save_observations(cluster, batch).stored
            batch = []
    batch += node_day("node-000")
    total += store.save_observations(cluster, batch).stored
    derivation.drain(cluster=cluster)  # the store marked every pod and the node dirty
    return total, time.perf_counter() - started


BASELINE_QUERIES = [
    "SELECT * FROM timelines_pod WHERE cluster_id = {c} AND namespace = '{ns}' ORDER BY namespace, name, uid",
    "SELECT * FROM timelines_interval WHERE cluster_id = {c} AND pod_uid IN (SELECT uid FROM timelines_pod WHERE cluster_id = {c} AND namespace = '{ns}') ORDER BY pod_uid, lane, start",
    "SELECT * FROM timelines_marker WHERE cluster_id = {c} AND pod_uid IN (SELECT uid FROM timelines_pod WHERE cluster_id = {c} AND namespace = '{ns}') ORDER BY pod_uid, at",
    "SELECT * FROM timelines_finding WHERE cluster_id = {c} AND pod_uid IN (SELECT uid FROM timelines_pod WHERE cluster_id = {c} AND namespace = '{ns}') ORDER BY pod_uid, start",
    "SELECT * FROM timelines_observation WHERE cluster_id = {c} AND pod_uid IN (SELECT uid FROM timelines_pod WHERE cluster_id = {c} AND namespace = '{ns}') ORDER BY pod_uid, observed_at, kind, dedupe_key",
]


def run_baseline(cluster: Cluster, path: str) -> float:
    started = time.perf_counter()
    with gzip.open(path, "wb", compresslevel=6) as out, connection.cursor() as cursor:
        for template in BASELINE_QUERIES:
            sql = template.format(c=int(cluster.pk), ns=NS)
            if connection.vendor == "postgresql":
                with cursor.cursor.copy(f"COPY ({sql}) TO STDOUT") as copy:
                    for data in copy:
                        out.write(data)
            else:
                cursor.execute(sql)
                while rows := cursor.fetchmany(5000):
                    out.write("".join("\t".join(map(str, r)) + "\n" for r in rows).encode())
    return time.perf_counter() - started


def run_ours(
    cluster: Cluster, scope: Scope, path: str, since: datetime, until: datetime
) -> tuple[float, int]:
    started = time.perf_counter()
    with open(path, "wb") as f:
        summary = export_incident(cluster, scope, since, until, "json", f, gzip_output=True)
    return time.perf_counter() - started, summary.pods


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the bench cluster afterwards")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="use the cluster a previous --reuse run left (same --pods and --nodes), else set it up and keep it",
    )
    args = parser.parse_args()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)  # the configured database, as bench/live.py: a new one works too

    reused = None
    if args.reuse:
        name = f"bench-export-reuse-{args.pods}x{args.nodes}"
        reused = Cluster.objects.filter(name=name).first()
        if reused is not None and not reused.observations.exists():
            reused.delete()  # a set-up that did not finish
            reused = None
        cluster = reused or store.cluster_for(name, origin=Cluster.Origin.OFFLINE)
    else:
        cluster = store.cluster_for(f"bench-export-{uuid.uuid4().hex[:8]}", origin=Cluster.Origin.OFFLINE)
    since, until = T0, T0 + timedelta(hours=24)
    tmp = tempfile.mkdtemp(prefix="podlife-bench-")
    try:
        if reused is not None:
            stored, setup_s = reused.observations.count(), 0.0
        else:
            try:
                stored, setup_s = set_up(cluster, args.pods, args.nodes)
            except BaseException:
                if args.reuse:
                    cluster.delete()  # never leave a half-built cluster for the next --reuse
                raise
        ours_path, base_path, node_path = (
            os.path.join(tmp, n) for n in ("ours.json.gz", "base.tsv.gz", "node.json.gz")
        )
        run_ours(cluster, Scope.one("node", "node-001"), node_path, since, until)  # warm caches, both sides
        baseline = run_baseline(cluster, base_path)
        ours, pods = run_ours(cluster, Scope.one("namespace", NS), ours_path, since, until)
        baseline2 = run_baseline(cluster, base_path)
        baseline = min(baseline, baseline2)
        node_times = [
            run_ours(cluster, Scope.one("node", "node-000"), node_path, since, until) for _ in range(3)
        ]
        node_s, node_pods = min(node_times)
        setup = "reused" if reused is not None else f"set-up {setup_s:.1f} s"
        print(f"database: {connection.vendor}; {setup}: {stored:,} observations, {args.pods:,} pods derived")
        what = "COPY ... TO STDOUT" if connection.vendor == "postgresql" else "SELECT (tab-separated)"
        print(
            f"namespace day, export_incident json.gz: {ours:7.2f} s  {os.path.getsize(ours_path) / 1e6:8.1f} MB  ({pods:,} pods)"
        )
        print(f"namespace day, {what} + gzip: {baseline:7.2f} s  {os.path.getsize(base_path) / 1e6:8.1f} MB")
        print(f"ratio export / baseline: {ours / baseline:.2f}  (goal <= 3)")
        print(f"node day (node-000, {node_pods} pods + node lanes), json.gz: {node_s:.3f} s  (goal <= 1 s)")
    finally:
        for name in os.listdir(tmp):
            os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
        if not (args.keep or args.reuse):
            cluster.delete()


if __name__ == "__main__":
    main()
