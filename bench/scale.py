"""Fleet-scale benchmark (issue #17): the demo cluster's ``scale`` scenario at N nodes × 30 pods watched
by the collector, the bytes each observation costs on disk, a month of a 150,000-pod fleet extrapolated
from them, and retention by partition drop against DELETE. Every figure is printed with its absolute
value and, where one exists, as a ratio to a baseline measured in the same run.

    python bench/scale.py [--sizes 100,300,1000] [--pods-per-node 30] [--churn 20] [--churn-seconds 20]

Per size (a fresh demo cluster in a subprocess, so neither its time nor its memory is counted):

1. Initial list of pods and nodes (``run_step``): seconds, and the collector's peak memory per 10k pods
   against slim tuples of the same pods (a second list of another cluster name, under tracemalloc).
2. Churn: ``--churn`` pods/s replaced for ``--churn-seconds`` while nobody watches, then watch steps
   replay the backlog (pods, events, nodes). Store ratio: observations/s of the collector end to end
   against a raw binary COPY of the same rows into a table like the current partition.
3. Forced relist: the demo cluster compacts its history, the next pods step meets 410 and relists, and
   reconciles against what is stored (unchanged pods are duplicates found across partitions). Catch-up
   = that step's seconds; baseline = the initial list's seconds.

Then, over everything stored:

4. Bytes per observation by kind: the rows of each kind copied into a table like a partition (same
   indexes), heap + TOAST + indexes (``pg_total_relation_size``) / rows.
5. A day at 150,000 pods (5,000 nodes × 30) and 20 pods/s: observations per replaced pod by kind from the
   churn replay (replaced pods = deletions stored), node observations per node-heartbeat, times the bytes of step 4; × 30 days.
6. Retention: two day partitions filled with the same rows; partition drop (``partitions.drop_expired``)
   against ``DELETE`` of the other day's rows (and the VACUUM that DELETE leaves owed).
7. Fleet (needs ``PODLIFE_BENCH_REDIS_URL``): ``--fleet`` demo clusters of ``--fleet-nodes`` × 30 pods listed at once by one ``manage.py
   collect`` process each, against one cluster alone (aggregate pods/s ratio).
8. Partition span: the store path with 31 populated day partitions against 5 week partitions holding the
   same rows (the cross-partition key look-up probes each partition), each as a ratio to raw COPY.

PostgreSQL only (the partitions are what it measures). Works in a scratch database (``test_<name>``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from _collector import list_memory, sim_hook, start_sim
from _setup import ROOT, raw_copy_seconds, setup_django

os.environ.setdefault("DEBUG", "0")
setup_django(scratch_database=True)

from django.conf import settings  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from collectors.kube import config  # noqa: E402
from collectors.kube.config import ClusterSource, Tunables  # noqa: E402
from collectors.kube.watch import StepControl, run_step  # noqa: E402
from demo_cluster.scenarios import scale_limits  # noqa: E402
from podlife_site import tuning  # noqa: E402
from timelines import observation_rows, partitions, store  # noqa: E402
from timelines.models import Cluster  # noqa: E402
from timelines.models import Observation as ObservationRow  # noqa: E402
from timelines.signals import DERIVE_RECEIVER, observations_stored  # noqa: E402

tuning.start(tuning.Role.COLLECTOR)  # as the collector processes it stands for start (podlife_site/tuning.py)

FLEET_NODES, FLEET_PODS_PER_NODE, FLEET_CHURN = 5_000, 30, 20.0
DAY_S = 86_400
MiB = 2**20
# The Redis the fleet run's collectors queue into (its own queues, which no deployed worker consumes).
FLEET_REDIS = "PODLIFE_BENCH_REDIS_URL"


def step(cluster: str, resource: str, control: StepControl) -> tuple[float, object]:
    started = time.perf_counter()
    result = run_step(cluster, resource, control=control)
    assert result.ok, result.error
    return time.perf_counter() - started, result


@dataclasses.dataclass
class SizeRun:
    nodes: int
    pods: int
    list_s: float
    list_stored: int
    churn_obs: int
    churn_busy_s: float
    copy_s: float
    relist_s: float
    relist_stored: int
    relist_duplicates: int
    mem_peak: int
    mem_slim: int
    mem_pods: int
    per_pod: dict[str, float]  # observations per replaced pod, by kind (churn window)
    node_obs_per_node_beat: float


def run_size(nodes: int, per_node: int, args: argparse.Namespace, control: StepControl) -> SizeRun:
    tmp = Path(tempfile.mkdtemp(prefix="podlife-scale-"))
    kubeconfig = tmp / "kubeconfig"
    sim = start_sim(nodes, per_node, args.churn, kubeconfig)
    name, mem_name = f"scale-{uuid.uuid4().hex[:8]}", f"scalemem-{uuid.uuid4().hex[:8]}"
    for n in (name, mem_name):
        config.register_cluster(ClusterSource(n, str(kubeconfig), "podlife-demo", False, False, False))
    try:
        # Outside the clock: the first use of the kubernetes client imports hundreds of modules.
        step(mem_name, "nodes", control)
        list_s = 0.0
        for resource in ("nodes", "pods", "events"):
            seconds, _ = step(name, resource, control)
            list_s += seconds if resource != "events" else 0.0
        cluster = Cluster.objects.get(name=name)
        list_stored = ObservationRow.objects.filter(cluster=cluster).count()
        window_start = timezone.now()
        time.sleep(args.churn_seconds)
        sim_hook(name, "pause")
        window_end = timezone.now()
        busy = 0.0
        for resource in ("pods", "events", "nodes"):
            while True:
                _, result = step(name, resource, control)
                busy += result.busy_seconds  # type: ignore[attr-defined]
                if result.events == 0:  # type: ignore[attr-defined]
                    break
        churn_rows = ObservationRow.objects.filter(cluster=cluster, received_at__gte=window_start)
        churn_obs = churn_rows.count()
        received = timezone.now()
        rows = [
            store._row(cluster.pk, row.observation(), received)
            for row in observation_rows.iter_rows(churn_rows, chunk_size=5000)
        ]
        copy_s = statistics.median(raw_copy_seconds(rows, control.tunables.batch_size) for _ in range(3))
        # Pods replaced = deletions stored: the backlog reaches back to the list's first page (churn ran
        # while the list was read), so the wall-clock window would undercount them.
        replaced = max(1, churn_rows.filter(kind="pod_deleted").count())
        by_kind: dict[str, int] = {}
        node_obs = 0
        for kind, observed_at in churn_rows.values_list("kind", "observed_at"):
            if kind.startswith("node"):
                if window_start <= observed_at <= window_end:
                    node_obs += 1
            else:
                by_kind[kind] = by_kind.get(kind, 0) + 1
        per_pod = {k: v / replaced for k, v in sorted(by_kind.items())}
        beat = scale_limits(nodes, per_node)["heartbeat_interval"]
        beats = nodes * (window_end - window_start).total_seconds() / beat
        # Forced relist: the cluster moves on, then its history is compacted past the stored version.
        sim_hook(name, "resume")
        time.sleep(2)
        sim_hook(name, "compact")
        relist_s, relist = step(name, "pods", control)
        if not relist.expired:  # type: ignore[attr-defined]
            raise SystemExit("the compacted history did not make the pods step relist")
        sim_hook(name, "pause")
        peak, slim, pods = list_memory(mem_name, control)
        return SizeRun(
            nodes=nodes,
            pods=nodes * per_node,
            list_s=list_s,
            list_stored=list_stored,
            churn_obs=churn_obs,
            churn_busy_s=busy,
            copy_s=copy_s,
            relist_s=relist_s,
            relist_stored=relist.stored,  # type: ignore[attr-defined]
            relist_duplicates=relist.duplicates,  # type: ignore[attr-defined]
            mem_peak=peak,
            mem_slim=slim,
            mem_pods=pods,
            per_pod=per_pod,
            node_obs_per_node_beat=node_obs / max(1.0, beats),
        )
    finally:
        sim.terminate()
        sim.wait(10)
        Cluster.objects.filter(name=mem_name).delete()


def like_partition(table: str) -> None:
    span = partitions.configured_span()
    like = partitions.partition_name(partitions.span_start(timezone.now(), span))
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(f"CREATE TABLE {table} (LIKE {like} INCLUDING ALL)")


def bytes_per_kind() -> dict[str, tuple[int, float]]:
    """kind -> (rows, bytes per row on disk: heap + TOAST + indexes of a partition-like table)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT kind FROM timelines_observation")
        kinds = [k for (k,) in cursor.fetchall()]
    sizes: dict[str, tuple[int, float]] = {}
    for kind in sorted(kinds):
        like_partition("bench_kind_size")
        with connection.cursor() as cursor:
            columns = partitions.column_list(cursor)  # the partition's may lie in another order
            cursor.execute(
                f"INSERT INTO bench_kind_size ({columns}) SELECT {columns} FROM timelines_observation "
                "WHERE kind = %s",
                [kind],
            )
            n = cursor.rowcount
            cursor.execute("ANALYZE bench_kind_size")
            cursor.execute("SELECT pg_total_relation_size('bench_kind_size')")
            total = cursor.fetchone()[0]
            cursor.execute("DROP TABLE bench_kind_size")
        sizes[kind] = (n, total / max(1, n))
    return sizes


def fill_day(day: datetime, copies: int, tag: str) -> int:
    """Copy every stored row ``copies`` times into the day partition of ``day`` (new keys); returns rows."""
    partitions.create_partition(day, day + timedelta(days=1))
    n = 0
    with connection.cursor() as cursor:
        for c in range(copies):
            cursor.execute(
                # Rows as large as the ones copied: the body (with the key inside since migration 0028,
                # which this copy leaves as it is) and a key hash made new with the tag.
                "INSERT INTO timelines_observation (cluster_id, pod_uid, pod_id, kind, source, observed_at, "
                "received_at, dedupe_key, key_hash, node, namespace, name, payload, body) "
                "SELECT cluster_id, pod_uid, pod_id, kind, "
                "source, %s + (observed_at - date_trunc('day', observed_at)), received_at, "
                "left(dedupe_key, 180) || %s, "
                "md5(cluster_id::text || ':' || coalesce(dedupe_key, key_hash::text) || %s)::uuid, "
                "node, namespace, name, payload, body FROM timelines_observation WHERE observed_at >= %s",
                [day, f":{tag}{c}", f":{tag}{c}", timezone.now() - timedelta(days=2)],
            )
            n += cursor.rowcount
    return n


def retention(copies: int) -> tuple[int, float, float, float]:
    """(rows a day, drop seconds, DELETE seconds, VACUUM seconds after the DELETE)."""
    d1, d2 = datetime(2001, 1, 1, tzinfo=UTC), datetime(2001, 1, 2, tzinfo=UTC)
    rows = fill_day(d1, copies, "r1")
    fill_day(d2, copies, "r2")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        cursor.execute("CHECKPOINT")
    started = time.perf_counter()
    dropped = partitions.drop_expired(d2, [])
    drop_s = time.perf_counter() - started
    assert partitions.partition_name(d1) in dropped.partitions
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM timelines_observation WHERE observed_at >= %s AND observed_at < %s",
            [d2, d2 + timedelta(days=1)],
        )
    delete_s = time.perf_counter() - started
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM {partitions.partition_name(d2)}")
    vacuum_s = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {partitions.partition_name(d2)}")
    return rows, drop_s, delete_s, vacuum_s


def span_layout(span_days: int, count: int, rows_each: int, sample: list[tuple]) -> tuple[float, float]:
    """Ratio store path / raw COPY with ``count`` populated partitions of ``span_days`` in the past."""
    start = partitions.span_start(datetime(2002, 1, 7, tzinfo=UTC), timedelta(days=7))
    made = []
    cluster = Cluster.objects.get(name="span-probe")
    for i in range(count):
        lo = start + timedelta(days=i * span_days)
        made += partitions.create_partition(lo, lo + timedelta(days=span_days))
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO timelines_observation (cluster_id, pod_uid, kind, source, observed_at, received_at, "
                "dedupe_key, node, namespace, name, payload) SELECT %s, 'uid-' || g %% 997, 'pod', 'api', "
                "%s + g * interval '1 second', %s, 'pod:past:' || %s || ':' || g, 'node', 'ns', 'name', '{}' "
                "FROM generate_series(1, %s) g",
                [cluster.pk, lo, lo, f"{span_days}-{i}", rows_each],
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE timelines_observation")
    tag = uuid.uuid4().hex[:6]
    obs = [dataclasses.replace(o, dedupe_key=f"{o.dedupe_key[:180]}:{tag}") for o in sample]
    batch = Tunables.from_settings().batch_size
    started = time.perf_counter()
    for i in range(0, len(obs), batch):
        store.save_observations(cluster, obs[i : i + batch])
    ours = time.perf_counter() - started
    received = timezone.now()
    rows = [store._row(cluster.pk, o, received) for o in obs]
    raw = statistics.median(raw_copy_seconds(rows, batch) for _ in range(3))
    with connection.cursor() as cursor:
        for name in made:
            cursor.execute(f'DROP TABLE "{name}"')
        cursor.execute("DELETE FROM timelines_observation WHERE cluster_id = %s", [cluster.pk])
    return ours, raw


def collect_process(kubeconfig: Path, name: str, seconds: float) -> subprocess.Popen[bytes]:
    """``manage.py collect`` for one cluster in its own process, writing into this run's database."""
    from urllib.parse import urlsplit, urlunsplit

    url = urlsplit(os.environ["DATABASE_URL"])
    db = urlunsplit((url.scheme, url.netloc, "/" + connection.settings_dict["NAME"], url.query, ""))
    cmd = [
        sys.executable, "manage.py", "collect", "--kubeconfig", str(kubeconfig), "--cluster-name", name,
        "--resources", "pods,nodes", "--no-kubelet", "--duration", str(seconds),
    ]  # fmt: skip
    # With a broker the store's signal queues the derive stage (as deployed; nothing consumes it here):
    # without one it would derive inline, in the collector, which is another worker's cost.
    env = {
        **os.environ,
        "DATABASE_URL": db,
        "REDIS_URL": os.environ[FLEET_REDIS],
        # Queues of their own (``<deployment>-bench.derive``), which no deployed worker consumes.
        "PODLIFE_DEPLOYMENT": f"{settings.PODLIFE_DEPLOYMENT}-bench",
    }
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def listed_all(names: list[str], pods: int, timeout: float = 900) -> float:
    """Seconds until every cluster in ``names`` has ``pods`` pod observations stored (polled)."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        counts = [ObservationRow.objects.filter(cluster__name=n, kind="pod").count() for n in names]
        if all(c >= pods for c in counts):
            return time.perf_counter() - started
        time.sleep(0.25)
    raise SystemExit(f"the fleet's lists did not finish in {timeout:.0f} s")


def fleet(nodes: int, per_node: int, clusters: int, churn: float) -> tuple[float, float, int]:
    """(seconds for one cluster's first list alone, seconds for ``clusters`` clusters at once, pods each),
    each collector in its own process, each demo cluster in its own process."""
    tmp = Path(tempfile.mkdtemp(prefix="podlife-fleet-"))
    sims = [start_sim(nodes, per_node, churn, tmp / f"kc{i}") for i in range(clusters)]
    pods = nodes * per_node
    procs: list[subprocess.Popen[bytes]] = []
    try:
        alone = f"alone-{uuid.uuid4().hex[:6]}"
        procs.append(collect_process(tmp / "kc0", alone, 900))
        one = listed_all([alone], pods)
        procs[-1].terminate()
        procs[-1].wait(30)
        names = [f"fleet{i}-{uuid.uuid4().hex[:6]}" for i in range(clusters)]
        procs += [collect_process(tmp / f"kc{i}", name, 900) for i, name in enumerate(names)]
        together = listed_all(names, pods)
        return one, together, pods
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        for sim in sims:
            sim.terminate()
            sim.wait(10)
        import redis

        broker = redis.Redis.from_url(os.environ[FLEET_REDIS])
        broker.delete(f"{settings.PODLIFE_DEPLOYMENT}-bench", f"{settings.PODLIFE_DEPLOYMENT}-bench.derive")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="100,300,1000", help='node counts, comma-separated ("": only the fleet run)'
    )
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--churn", type=float, default=20.0, help="pods replaced per second")
    parser.add_argument("--churn-seconds", type=float, default=20.0)
    parser.add_argument("--retention-copies", type=int, default=3, help="copies of the stored rows per day")
    parser.add_argument("--fleet-nodes", type=int, default=300, help="nodes of each cluster of the fleet run")
    parser.add_argument("--fleet", type=int, default=3, help="clusters collected at once (0: skip)")
    parser.add_argument("--span-only", action="store_true", help="only the day/week partition comparison")
    parser.add_argument("--span-rows", type=int, default=20_000, help="rows in each of the 31 day partitions")
    args = parser.parse_args()
    if args.fleet and not args.span_only and not os.environ.get(FLEET_REDIS):
        # Refused before the sizes run (minutes at 5,000 nodes), not after them.
        parser.error(f"the fleet run (--fleet {args.fleet}) needs {FLEET_REDIS}, a Redis its collectors "
                     f"queue into; set it, or pass --fleet 0 to skip the fleet run")  # fmt: skip
    if connection.vendor != "postgresql" or not partitions.is_partitioned():
        raise SystemExit(
            "bench/scale.py measures PostgreSQL partitions: set DATABASE_URL to a postgres:// URL"
        )
    if not settings.REDIS_URL:
        observations_stored.disconnect(dispatch_uid=DERIVE_RECEIVER)
    tunables = dataclasses.replace(Tunables.from_settings(), watch_timeout_s=3)
    control = StepControl(tunables=tunables)
    if args.span_only:
        args.sizes, args.fleet = "100", 0
    runs = [run_size(int(n), args.pods_per_node, args, control) for n in args.sizes.split(",") if n]

    print(
        f"\n== collector at size (scale scenario, {args.pods_per_node} pods a node, churn {args.churn}/s) =="
    )
    print("nodes    pods  list s  list s/10k  store obs/s  COPY obs/s  ratio  relist s  relist/list  "
          "stored  dup    MiB/10k  slim MiB/10k  mem ratio")  # fmt: skip
    for r in runs:
        ours, raw = r.churn_obs / max(1e-9, r.churn_busy_s), max(1e-9, r.churn_obs / max(1e-9, r.copy_s))
        per10k = 10_000 / max(1, r.mem_pods)
        print(
            f"{r.nodes:5d} {r.pods:7d} {r.list_s:7.2f} {r.list_s * 10_000 / r.pods:10.2f} {ours:12,.0f} "
            f"{raw:11,.0f} {ours / raw:6.2f} {r.relist_s:9.2f} {r.relist_s / r.list_s:12.2f} "
            f"{r.relist_stored:7d} {r.relist_duplicates:6d} {r.mem_peak * per10k / MiB:9.1f} "
            f"{r.mem_slim * per10k / MiB:13.1f} {r.mem_peak / max(1, r.mem_slim):10.2f}"
        )
    if len(runs) > 1:
        a, b = runs[0], runs[-1]
        print(
            f"growth {a.pods} -> {b.pods} pods (x{b.pods / a.pods:.1f}): list time x{b.list_s / a.list_s:.1f}, "
            f"relist time x{b.relist_s / a.relist_s:.1f}; extrapolated linearly to 150,000 pods: list "
            f"{b.list_s * 150_000 / b.pods:.0f} s, relist catch-up {b.relist_s * 150_000 / b.pods:.0f} s"
        )

    if args.fleet:
        one, together, pods = fleet(args.fleet_nodes, args.pods_per_node, args.fleet, args.churn)
        print(
            f"\n== {args.fleet} clusters at once ({pods} pods each, a collector process per cluster) ==\n"
            f"one cluster alone: first list stored in {one:.2f} s ({pods / one:,.0f} pods/s)\n"
            f"{args.fleet} at once: all first lists stored in {together:.2f} s "
            f"({args.fleet * pods / together:,.0f} pods/s)\n"
            f"ratio aggregate / one cluster: {args.fleet * one / together:.2f} (the ideal is {args.fleet} "
            f"with a core per collector and PostgreSQL to spare)"
        )

    if not runs:  # --sizes "": the fleet run only
        return
    if args.span_only:
        span(args)
        return
    sizes = bytes_per_kind()
    print("\n== bytes per observation on disk (heap + TOAST + indexes, a partition's indexes) ==")
    for kind, (n, per) in sizes.items():
        print(f"{kind:16s} {n:8d} rows {per:8.0f} B/row")
    last = runs[-1]
    per_pod_bytes = sum(rate * sizes.get(kind, (0, 0.0))[1] for kind, rate in last.per_pod.items())
    node_kind_bytes = sizes.get("node", (0, 0.0))[1]
    beat = scale_limits(FLEET_NODES, FLEET_PODS_PER_NODE)["heartbeat_interval"]
    node_rate = FLEET_NODES / beat * last.node_obs_per_node_beat
    day_pods = FLEET_CHURN * DAY_S * per_pod_bytes
    day_nodes = node_rate * DAY_S * node_kind_bytes
    listing = FLEET_NODES * FLEET_PODS_PER_NODE * sizes.get("pod", (0, 0.0))[1]
    day = day_pods + day_nodes
    print(
        "\n== a day of the scale scenario at 150,000 pods (5,000 nodes x 30), 20 pods/s ==\n"
        f"observations per replaced pod: {', '.join(f'{k} {v:.2f}' for k, v in last.per_pod.items())}\n"
        f"node observations per node heartbeat: {last.node_obs_per_node_beat:.3f} (heartbeat {beat:.0f} s)\n"
        f"day = 20/s x 86,400 s x {per_pod_bytes:,.0f} B per replaced pod + {node_rate:.1f} node obs/s x 86,400 s "
        f"x {node_kind_bytes:,.0f} B = {day_pods / 2**30:.2f} + {day_nodes / 2**30:.2f} = {day / 2**30:.2f} GiB\n"
        f"first list of 150,000 pods: {listing / 2**30:.2f} GiB once\n"
        f"30 days (retention 30, one day partition ahead): 31 x day + list = {(31 * day + listing) / 2**30:.1f} GiB"
    )

    rows, drop_s, delete_s, vacuum_s = retention(args.retention_copies)
    print(
        f"\n== retention of one day ({rows:,} rows) ==\n"
        f"partition drop {drop_s * 1000:8.1f} ms\nDELETE         {delete_s * 1000:8.1f} ms "
        f"(+ VACUUM it leaves owed: {vacuum_s * 1000:.1f} ms)\n"
        f"ratio drop / DELETE: {drop_s / delete_s:.4f}; drop / (DELETE + VACUUM): {drop_s / (delete_s + vacuum_s):.4f}"
    )

    span(args)


def span(args: argparse.Namespace) -> None:
    Cluster.objects.create(name="span-probe")
    # One row per key (demo clusters with the same seed share UIDs and versions).
    sample = list(
        {
            o.dedupe_key: o.observation()
            for o in itertools.islice(
                observation_rows.iter_rows(
                    ObservationRow.objects.filter(kind="pod").order_by("id"), chunk_size=5000
                ),
                20_000,
            )
        }.values()
    )[:10_000]
    per_part = args.span_rows
    day_s, day_raw = span_layout(1, 31, per_part, sample)
    week_s, week_raw = span_layout(7, 5, per_part * 31 // 5, sample)
    print(
        f"\n== partition span (store path / raw COPY, {len(sample)} pod rows, {31 * per_part:,} rows in the past) ==\n"
        f"31 day partitions:  store {day_s:.2f} s, raw COPY {day_raw:.2f} s, ratio {day_raw / day_s:.2f}\n"
        f"5 week partitions:  store {week_s:.2f} s, raw COPY {week_raw:.2f} s, ratio {week_raw / week_s:.2f}\n"
        f"day / week: {(day_raw / day_s) / (week_raw / week_s):.2f}"
    )


if __name__ == "__main__":
    main()
