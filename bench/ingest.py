"""Ingest benchmark: save_observations against a raw COPY of the same rows, in the same run.

    python bench/ingest.py [--n 100000] [--batch 5000] [--history-days 13 [--history-rows 20000]]

Generates N realistic observations (pod status snapshots, events, kubelet worker lines), stores them through
``timelines.store.save_observations`` into the real table, then COPYs the same rows into an identical scratch
table (same columns, indexes and constraints). Prints both rates and their ratio (goal on PostgreSQL: ≥ 0.5).
The store's own cost: the derive stage its batches mark dirty is left to another worker (``derive_stage_elsewhere``).
On SQLite the baseline is a raw ``executemany`` INSERT, the closest it has to COPY.

``--history-days N`` measures the steady state instead (``with_history``): the cluster already holds N days,
and each stored key is looked up in the other days' partitions.
"""

from __future__ import annotations

import argparse
import random
import time
import uuid
from datetime import UTC, datetime, timedelta

from _setup import derive_stage_elsewhere, raw_copy_seconds, setup_django

setup_django(scratch_database=True)

from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from timelines import store  # noqa: E402
from timelines.lifecycle.observation import Kind, Observation, Source, Transition, digest_key  # noqa: E402
from timelines.models import Cluster  # noqa: E402

WORKER_STEPS = [
    Transition.FIRST_SEEN,
    Transition.SYNC_ENTER,
    Transition.SYNC_EXIT,
    Transition.TERMINATION_REQUESTED,
    Transition.TERMINATING_ENTER,
    Transition.TERMINATING_EXIT,
    Transition.CONTAINERS_TERMINATED,
    Transition.TERMINATED_ENTER,
    Transition.TERMINATED_EXIT,
    Transition.WORKER_DONE,
]


def iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds")


T0 = datetime(2026, 11, 1, tzinfo=UTC)


def generate(n: int, seed: int = 7, t0: datetime = T0) -> list[Observation]:
    """About a third each: pod snapshots, events and kubelet worker lines, for pods on 50 nodes, in the day
    from ``t0`` on (each pod created a little before its first snapshot)."""
    rng = random.Random(seed)
    out: list[Observation] = []
    rv = 1000 + seed * 10_000_000
    while len(out) < n:
        uid = str(uuid.UUID(int=rng.getrandbits(128)))
        node = f"node-{rng.randrange(50):03d}"
        ns, name = f"team-{rng.randrange(20)}", f"web-{uid[:8]}"
        t = t0 + timedelta(seconds=rng.random() * 86000)
        created = iso(t.replace(microsecond=0) - timedelta(seconds=2))
        for phase in ("Pending", "Running", "Running", "Succeeded"):
            rv += 1
            t += timedelta(microseconds=rng.randrange(1, 5_000_000))
            payload = {
                "watch": "MODIFIED",
                "resource_version": str(rv),
                "uid": uid,
                "namespace": ns,
                "name": name,
                "node": node,
                "labels": {"app": "web", "pod-template-hash": "7d9f8c"},
                "created": created,
                "phase": phase,
                "start_time": iso(t0),
                "conditions": [
                    {"type": c, "status": "True", "reason": None, "message": None, "last_transition": iso(t)}
                    for c in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
                ],
                "containers": [
                    {
                        "name": "app",
                        "kind": "regular",
                        "state": "running",
                        "started_at": iso(t),
                        "restart_count": 0,
                    }
                ],
            }
            out.append(Observation(Kind.POD, Source.API, t, f"pod:{uid}:{rv}", uid, node, ns, name, payload))
        for reason in ("Scheduled", "Pulled", "Created", "Started", "Killing"):
            rv += 1
            t += timedelta(microseconds=rng.randrange(1, 2_000_000))
            payload = {
                "reason": reason,
                "type": "Normal",
                "message": f"{reason} container app",
                "count": 1,
                "component": "kubelet",
                "involved": {"kind": "Pod", "namespace": ns, "name": name, "uid": uid},
            }
            out.append(
                Observation(
                    Kind.EVENT, Source.API, t, f"event:{uuid.uuid4()}:{rv}", uid, node, ns, name, payload
                )
            )
        for step in WORKER_STEPS:
            t += timedelta(microseconds=rng.randrange(1, 1_000_000))
            payload = {
                "transition": step,
                "message": step,
                "severity": "I",
                "caller": "kubelet.go:1761",
                "pod_ref": f"{ns}/{name}",
            }
            key = digest_key(node, step, uid, iso(t))
            out.append(Observation(Kind.WORKER, Source.KUBELET_LOG, t, key, uid, node, ns, name, payload))
    return out[:n]


def run_ours(cluster: Cluster, observations: list[Observation], batch: int) -> float:
    started = time.perf_counter()
    for i in range(0, len(observations), batch):
        result = store.save_observations(cluster, observations[i : i + batch])
        assert not result.rejected, result.rejected[:3]
    return time.perf_counter() - started


def run_baseline(cluster: Cluster, observations: list[Observation], batch: int) -> float:
    """The same rows, prepared outside the clock, written as fast as the database takes them."""
    received = timezone.now()
    return raw_copy_seconds([store._row(cluster.pk, o, received) for o in observations], batch)


def with_history(days: int, rows: int, observations: list[Observation], batch: int) -> None:
    """The steady state of a cluster that keeps ``days`` days (PostgreSQL): two clusters each hold ``rows``
    observations of each of the ``days`` days before the measured one, one partition a day (vacuumed,
    analysed and checkpointed outside the clock). The measured day's observations are then stored into
    each, kind by kind: into one with the look-up of the other days bounded by the pods' creation (migration
    0031), into the other with its cluster entered among those whose look-up ignores the bounds (every key
    probed in every day of its kinds, as before 0031); the raw COPY of each kind's rows is the baseline."""
    from timelines import partitions

    for day in range(-days, 2):
        partitions.create_partition(T0 + timedelta(days=day), T0 + timedelta(days=day + 1))
    clusters = {how: store.cluster_for(f"bench-{uuid.uuid4().hex[:8]}") for how in ("bounded", "every day")}
    took: dict[str, tuple[int, dict[str, float]]] = {}  # kind -> (its rows, seconds of each way and of COPY)
    try:
        for cluster in clusters.values():
            for day in range(1, days + 1):
                run_ours(cluster, generate(rows, seed=100 + day, t0=T0 - timedelta(days=day)), batch)
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO podlife_unbounded_clusters VALUES (%s)", [clusters["every day"].pk])
            cursor.execute("VACUUM ANALYZE timelines_observation")
            cursor.execute("CHECKPOINT")
        for kind in (Kind.POD, Kind.EVENT, Kind.WORKER):
            part = [o for o in observations if o.kind == kind]
            seconds = {how: run_ours(cluster, part, batch) for how, cluster in clusters.items()}
            took[kind] = (len(part), seconds | {"raw COPY": run_baseline(clusters["bounded"], part, batch)})
    finally:
        for cluster in clusters.values():
            cluster.delete()
    print(
        f"{days} days of {rows:,} observations held, one partition a day; the next day's, in batches of {batch}:"
    )
    for kind, (n, seconds) in took.items():
        raw = seconds.pop("raw COPY")
        each = "; ".join(f"{how}: {n / s:8,.0f} obs/s, ratio {raw / s:.2f}" for how, s in seconds.items())
        print(f"  {kind:<6} ({n:,}): look-up {each}; raw COPY {n / raw:8,.0f} obs/s")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="observations to store (default 100000)")
    parser.add_argument("--batch", type=int, default=5_000, help="observations per save_observations call")
    parser.add_argument(
        "--history-days",
        type=int,
        default=0,
        help="PostgreSQL: days the cluster holds already (with_history)",
    )
    parser.add_argument("--history-rows", type=int, default=20_000, help="observations of each of those days")
    args = parser.parse_args()
    if args.history_days and connection.vendor != "postgresql":
        raise SystemExit("--history-days measures PostgreSQL's partitions: set DATABASE_URL")

    observations = generate(args.n)
    derive = derive_stage_elsewhere()
    if args.history_days:
        print(derive)
        with_history(args.history_days, args.history_rows, observations, args.batch)
        return
    name = f"bench-{uuid.uuid4().hex[:8]}"
    cluster = store.cluster_for(name)
    try:
        ours = run_ours(cluster, observations, args.batch)
        again = run_ours(cluster, observations, args.batch)  # idempotent re-delivery: stores nothing
        baseline = run_baseline(cluster, observations, args.batch)
    finally:
        cluster.delete()
    rate_ours, rate_base = args.n / ours, args.n / baseline
    what = "COPY" if connection.vendor == "postgresql" else "executemany INSERT"
    print(f"database: {connection.vendor}; {args.n} observations in batches of {args.batch}; {derive}")
    print(f"save_observations: {rate_ours:12,.0f} obs/s ({ours:.2f} s)")
    print(f"re-delivery:       {args.n / again:12,.0f} obs/s ({again:.2f} s, all duplicates)")
    print(f"raw {what:<15}{rate_base:12,.0f} obs/s ({baseline:.2f} s)")
    print(f"ratio save_observations / raw {what}: {rate_ours / rate_base:.2f}  (goal on PostgreSQL: >= 0.5)")


if __name__ == "__main__":
    main()
