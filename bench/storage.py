"""Storage benchmark (issue #37): bytes on disk per observation over the demo cluster's ``scale`` churn,
against what a general compressor that sees everything makes of the same observations, and the store rate
against raw COPY in the same run. PostgreSQL only (the disk a fleet pays for).

    DATABASE_URL=postgres://... python bench/storage.py [--observations 100000] [--nodes 100]
        [--pods-per-node 100] [--churn 200] [--backlog 10]

1. The collector lists nodes, pods and events of the ``scale`` scenario (a demo cluster in a subprocess,
   through the real kubernetes client over loopback HTTP). Then, until ``--observations`` are stored, the
   cluster replaces ``--churn`` pods a second for ``--backlog`` seconds while nobody watches, stands still,
   and watch steps replay that backlog. The cluster then stands still.
2. On disk: ``pg_total_relation_size`` (heap + TOAST + every index) of every partition of
   ``timelines_observation`` after a ``VACUUM ANALYZE``, divided by the observations they hold (the scratch
   database holds this run's only). Per kind: that kind's rows copied into a table made ``LIKE`` the
   partition ``INCLUDING ALL`` (the same indexes), vacuumed and measured alone.
3. The same observations as JSON lines (every stored column but the two local ids, in id order) compressed
   as one stream by ``zstd -19 --long`` (all cores), per kind and in total: the practical limit of a general
   compressor. The ratio on disk / zstd says how far the table is from it.
4. The store rate: the collector's observations a second while it was busy (the lists and the replays,
   each watch step's idle tail excluded), against a raw binary COPY of the same rows into a scratch table like the partition, in
   batches of the collector's size (median of three), as bench/watch.py measures it. Ratio goal >= 0.5.

Goal (issue #37): <= 300 bytes on disk per observation, all indexes included.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import IO

import orjson
from _collector import checkpoint, copy_baseline, sim_hook, start_sim
from _setup import derive_stage_elsewhere, setup_django

os.environ.setdefault("DEBUG", "0")
setup_django(scratch_database=True)

from django.db import connection  # noqa: E402

from collectors.kube import config  # noqa: E402
from collectors.kube.config import ClusterSource, Tunables  # noqa: E402
from collectors.kube.watch import StepControl, run_step  # noqa: E402
from podlife_site import tuning  # noqa: E402
from timelines import partitions  # noqa: E402
from timelines.models import Cluster  # noqa: E402

tuning.start(tuning.Role.COLLECTOR)  # as the collector processes it stands for start (podlife_site/tuning.py)

GOAL_BYTES = 300
RESOURCES = ("nodes", "pods", "events")
# Every stored column but ``id`` and ``cluster_id`` (local to one database), as the rows hold them.
JSON_COLUMNS = (
    "kind", "source", "observed_at", "received_at", "dedupe_key", "pod_uid", "node", "namespace", "name",
    "payload",
)  # fmt: skip


def collect(cluster: str, control: StepControl, target: int, backlog: float) -> tuple[int, float]:
    """List, then rounds of churn until ``target`` observations are stored: the cluster churns ``backlog``
    seconds while nobody watches, stands still, and watch steps replay that backlog as fast as the collector
    takes it (as bench/watch.py does). Returns (observations stored, seconds the collector was busy: the
    lists and the replays, the idle tail of each watch step excluded)."""
    busy = 0.0
    for resource in RESOURCES:
        started = time.perf_counter()
        result = run_step(cluster, resource, control=control)
        assert result.ok, result.error
        busy += time.perf_counter() - started
    stored = stored_count(cluster)
    while stored < target:
        sim_hook(cluster, "resume")
        time.sleep(backlog)  # churn builds a history nobody has read yet
        sim_hook(cluster, "pause")
        for resource in RESOURCES:
            while True:  # watch steps until one finds nothing left of the backlog
                result = run_step(cluster, resource, control=control)
                assert result.ok, result.error
                busy += result.busy_seconds
                if result.events == 0:
                    break
        stored = stored_count(cluster)
        print(f"  {stored:,} observations stored", flush=True)
    return stored, busy


def stored_count(cluster: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM timelines_observation o JOIN timelines_cluster c ON c.id = o.cluster_id "
            "WHERE c.name = %s",
            [cluster],
        )
        return int(cursor.fetchone()[0])


@dataclasses.dataclass
class Disk:
    heap: int = 0
    toast: int = 0  # TOAST and the free-space and visibility maps
    indexes: int = 0

    @property
    def total(self) -> int:
        return self.heap + self.toast + self.indexes

    def add(self, table: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_relation_size(%s), pg_table_size(%s), pg_indexes_size(%s)", [table, table, table]
            )
            heap, table_size, indexes = cursor.fetchone()
        self.heap += heap
        self.toast += table_size - heap
        self.indexes += indexes


def observation_tables() -> list[str]:
    """Every table that holds observations: the partitions, or the one table where it is not partitioned."""
    if not partitions.is_partitioned():
        return ["timelines_observation"]
    return [p.name for p in partitions.partitions()]


def vacuum(tables: list[str]) -> None:
    """VACUUM ANALYZE (outside a transaction): the maps exist and the sizes stop moving."""
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")


def disk_total(tables: list[str]) -> Disk:
    disk = Disk()
    for table in tables:
        disk.add(table)
    return disk


def fullest(tables: list[str]) -> str:
    """The table holding most rows: the partition of today (others are made ahead, empty)."""
    counts = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT count(*) FROM {table}")
            counts.append((int(cursor.fetchone()[0]), table))
    return max(counts)[1]


def disk_of_kind(cluster_id: int, kind: str, like: str) -> Disk:
    """The rows of one kind alone in a table made like the partition (same columns and indexes)."""
    table = "bench_storage_kind"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(f"CREATE TABLE {table} (LIKE {like} INCLUDING ALL)")
        cursor.execute(
            f"INSERT INTO {table} SELECT * FROM timelines_observation WHERE cluster_id = %s AND kind = %s "
            "ORDER BY id",
            [cluster_id, kind],
        )
    vacuum([table])
    disk = disk_total([table])
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {table}")
    return disk


def write_json_lines(cluster_id: int, folder: Path) -> tuple[dict[str, Path], Counter[str]]:
    """The observations as JSON lines, one file per kind and one of all, in id order."""
    files: dict[str, IO[bytes]] = {}
    counts: Counter[str] = Counter()
    every = (folder / "all.jsonl").open("wb")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(JSON_COLUMNS)} FROM timelines_observation WHERE cluster_id = %s ORDER BY id",
            [cluster_id],
        )
        while rows := cursor.fetchmany(5000):
            for row in rows:
                record = dict(zip(JSON_COLUMNS, row, strict=True))
                if isinstance(
                    record["payload"], str
                ):  # psycopg hands jsonb back decoded; keep the text as is
                    record["payload"] = orjson.loads(record["payload"])
                line = orjson.dumps(record) + b"\n"
                kind = record["kind"]
                if kind not in files:
                    files[kind] = (folder / f"{kind}.jsonl").open("wb")
                files[kind].write(line)
                every.write(line)
                counts[kind] += 1
    paths = {kind: Path(f.name) for kind, f in files.items()}
    for f in [*files.values(), every]:
        f.close()
    paths["all"] = Path(every.name)
    return paths, counts


def zstd_bytes(path: Path) -> int:
    """Bytes of ``path`` compressed by ``zstd -19 --long`` (all cores)."""
    done = subprocess.run(
        ["zstd", "-19", "--long=27", "-T0", "-q", "-c", str(path)], capture_output=True, check=True
    )
    return len(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--observations", type=int, default=100_000, help="stop once this many are stored")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods-per-node", type=int, default=100)
    parser.add_argument("--churn", type=float, default=200.0, help="pods replaced per second")
    parser.add_argument("--backlog", type=float, default=10.0, help="seconds of churn between two replays")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        raise SystemExit("bench/storage.py measures PostgreSQL's disk: set DATABASE_URL to a postgres:// URL")
    if shutil.which("zstd") is None:
        raise SystemExit("bench/storage.py compares with the zstd command line tool: install zstd")
    tunables = dataclasses.replace(Tunables.from_settings(), watch_timeout_s=3)
    tmp = Path(tempfile.mkdtemp(prefix="podlife-bench-storage-"))
    kubeconfig = tmp / "kubeconfig"
    sim = start_sim(args.nodes, args.pods_per_node, args.churn, kubeconfig)
    name = f"bench-{uuid.uuid4().hex[:8]}"
    config.register_cluster(ClusterSource(name, str(kubeconfig), "podlife-demo", False, False, False))
    print(f"database: {connection.vendor}; {derive_stage_elsewhere()}")
    try:
        control = StepControl(tunables=tunables)
        stored, busy = collect(name, control, args.observations, args.backlog)  # the cluster ends paused
        checkpoint()
        baseline, _ = copy_baseline(name, tunables.batch_size)
        cluster_id = Cluster.objects.get(name=name).pk
        tables = observation_tables()
        vacuum(tables)
        total = disk_total(tables)
        json_files, counts = write_json_lines(cluster_id, tmp)
        like = fullest(tables)
        print(f"\n{stored:,} observations of the scale churn ({args.nodes} nodes × {args.pods_per_node} pods, "
              f"{args.churn:g} pods replaced a second)\n")  # fmt: skip
        print(
            f"{'kind':<16}{'rows':>9}{'disk B/obs':>12}{'JSON B/obs':>12}{'zstd B/obs':>12}{'disk/zstd':>11}"
        )
        for kind in sorted(counts, key=lambda k: -counts[k]):
            n = counts[kind]
            alone = disk_of_kind(cluster_id, kind, like)
            raw, packed = json_files[kind].stat().st_size, zstd_bytes(json_files[kind])
            print(
                f"{kind:<16}{n:>9,}{alone.total / n:>12,.0f}{raw / n:>12,.0f}{packed / n:>12,.1f}"
                f"{alone.total / max(1, packed):>10,.1f}×"
            )
        n = sum(counts.values())
        raw, packed = json_files["all"].stat().st_size, zstd_bytes(json_files["all"])
        print(
            f"{'all':<16}{n:>9,}{total.total / n:>12,.0f}{raw / n:>12,.0f}{packed / n:>12,.1f}"
            f"{total.total / max(1, packed):>10,.1f}×"
        )
        print(
            f"\non disk, all partitions: {total.total / 2**20:,.1f} MiB = heap {total.heap / n:,.0f} + TOAST and "
            f"maps {total.toast / n:,.0f} + indexes {total.indexes / n:,.0f} bytes an observation"
        )
        ours, raw_rate = stored / busy, stored / baseline
        print(
            f"store rate: collector {ours:,.0f} obs/s while busy; raw COPY of the same rows {raw_rate:,.0f} obs/s;"
            f" ratio {ours / raw_rate:.2f}  (goal >= 0.5)"
        )
        verdict = "met" if total.total / n <= GOAL_BYTES else "MISSED"
        print(f"bytes on disk per observation: {total.total / n:,.0f}  (goal <= {GOAL_BYTES}: {verdict})")
    finally:
        sim.terminate()
        sim.wait(10)
        Cluster.objects.filter(name=name).delete()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
