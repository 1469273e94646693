"""Collector benchmark: the demo cluster's ``scale`` scenario -> collector -> database, against baselines
measured in the same run.

    python bench/watch.py [--nodes 100] [--pods-per-node 100] [--backlog 10] [--churn 200] [--runs 3] [--no-memory]

1. Throughput. The collector lists every pod and node (``run_step``), then the demo cluster churns pods
   for ``--backlog`` seconds while nobody watches; one watch step from the stored resourceVersion then
   replays that backlog as fast as the collector takes it. Everything goes through the real kubernetes
   client over loopback HTTP into the store, which marks the dirty keys in the same transaction (the
   derive stage is another worker's cost: ``bench/derive.py``; with REDIS_URL set each stored batch also
   queues it, as deployed, and nothing consumes the queue here). The baseline is a raw binary COPY
   (SQLite: executemany INSERT) of the same rows into a scratch table, in batches of the same size,
   while the demo cluster stands still (median of three). Ratio = collector obs/s / COPY obs/s (goal on
   PostgreSQL: >= 0.5). Since #37 step 1 those rows hold the compressed body, a third of their JSON size,
   which made that COPY twice as fast while the collector must still make each body from the JSON it
   receives; so a second baseline is printed beside it, not instead of it: a COPY of the same
   observations as JSON rows (the jsonb ``payload`` column, the form they arrive in and the form stored
   before step 1), whose cost does not move with the stored form ("ratio vs JSON rows"). Two cores shared by the collector, PostgreSQL and the demo cluster make one run
   vary by a tenth or more, so ``--runs`` runs (each with a fresh cluster name: list, backlog, replay,
   baseline) are made and the median ratio is the result; every run's ratio is printed.
2. Memory. A second, fresh cluster name is listed under tracemalloc; the peak is compared with a
   slim-tuple baseline of the same pods ((uid, namespace, name, node, resourceVersion, phase) per pod,
   built from the same list pages). Both per 10k pods; ratio goal <= 3.

The demo cluster runs in a subprocess so neither its time nor its memory is counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from _collector import Cpu, checkpoint, copy_baselines, list_memory, sim_hook, start_sim
from _setup import derive_stage_elsewhere, setup_django

os.environ.setdefault("DEBUG", "0")
setup_django(scratch_database=True)

from django.db import connection  # noqa: E402

from collectors.kube import config  # noqa: E402
from collectors.kube.config import ClusterSource, Tunables  # noqa: E402
from collectors.kube.watch import StepControl, run_step  # noqa: E402
from podlife_site import tuning  # noqa: E402
from timelines import store_process  # noqa: E402
from timelines.models import Cluster  # noqa: E402
from timelines.models import Observation as ObservationRow  # noqa: E402

tuning.start(tuning.Role.COLLECTOR)  # as the collector processes it stands for start (podlife_site/tuning.py)


def collect(cluster: str, control: StepControl, backlog: float) -> tuple[int, float, dict[str, int], Cpu]:
    """List pods and nodes, let a backlog build, replay it; returns (observations stored, seconds, counts,
    CPU spent: the list and the replay, with the idle backlog wait between them)."""
    counts: dict[str, int] = {}
    cpu = Cpu.now()
    busy = 0.0
    for resource in ("nodes", "pods"):
        started = time.perf_counter()
        result = run_step(cluster, resource, control=control)
        busy += time.perf_counter() - started
        counts[f"{resource} list ms"] = round((time.perf_counter() - started) * 1000)
        assert result.ok, result.error
        counts[f"{resource} listed"] = result.listed
    time.sleep(backlog)  # churn builds a history nobody has read yet
    # Then the cluster stands still, so the backlog has an end; it stays paused through the baseline
    # (``main`` resumes it), which must not share the two cores with a churning cluster either.
    sim_hook(cluster, "pause")
    counts["backlog events"] = 0
    while True:  # watch steps until one finds nothing left of the backlog
        result = run_step(cluster, "pods", control=control)
        assert result.ok, result.error
        # A watch step lasts its timeoutSeconds; count only the time until its last object was stored.
        busy += result.busy_seconds
        counts.setdefault("replay ms", 0)
        counts["replay ms"] += round(result.busy_seconds * 1000)
        counts["backlog events"] += result.events
        if result.events == 0:
            break
    spent = Cpu.now().since(cpu)
    stored = ObservationRow.objects.filter(cluster__name=cluster).count()
    return stored, busy, counts, spent


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods-per-node", type=int, default=100)
    parser.add_argument(
        "--churn", type=float, default=200.0, help="pods replaced per second during the backlog"
    )
    parser.add_argument("--backlog", type=float, default=10.0, help="seconds of churn nobody watches")
    parser.add_argument("--runs", type=int, default=3, help="throughput runs; the median ratio counts")
    parser.add_argument(
        "--no-memory", dest="memory", action="store_false", help="skip the memory part (throughput only)"
    )
    args = parser.parse_args()
    tunables = dataclasses.replace(Tunables.from_settings(), watch_timeout_s=3)
    tmp = Path(tempfile.mkdtemp(prefix="podlife-bench-"))
    kubeconfig = tmp / "kubeconfig"
    sim = start_sim(args.nodes, args.pods_per_node, args.churn, kubeconfig)
    runs = max(1, args.runs)
    # One name per throughput run, one for the memory run, one to warm up with.
    names = [f"bench-{uuid.uuid4().hex[:8]}" for _ in range(runs + 2)]
    for name in names:
        config.register_cluster(ClusterSource(name, str(kubeconfig), "podlife-demo", False, False, False))
    what = "COPY" if connection.vendor == "postgresql" else "executemany INSERT"
    print(f"database: {connection.vendor}; {derive_stage_elsewhere()}")
    ratios: list[float] = []
    json_ratios: list[float] = []  # against a COPY of the same observations as JSON rows (the docstring)
    cpu_ratios: list[float] = []  # raw CPU / the collector's: less moved by other processes than the wall
    try:
        # A long-running collector has imported its modules and opened its connections long ago: list
        # the nodes of another cluster name once, outside the clock, so the runs measure throughput,
        # not process start-up (the kubernetes client alone imports hundreds of modules on first use).
        assert run_step(names[-1], "nodes", control=StepControl(tunables=tunables)).ok
        if tunables.store_process and connection.vendor == "postgresql":
            # ... and started the store process its bursts go to (timelines/store_process.py; one that
            # nobody asked for in IDLE_S ends, and a burst after that starts it again, paying what this says).
            started = time.perf_counter()
            assert store_process.shared().wait_ready(), "the store process did not start"
            print(f"store process started in {time.perf_counter() - started:.2f} s (outside the clock)")
        control = StepControl(tunables=tunables)
        for run in range(runs):
            checkpoint()
            stored, busy, counts, cpu = collect(names[run], control, args.backlog)
            checkpoint()
            (baseline, raw_cpu), (json_baseline, _) = copy_baselines(
                names[run], tunables.batch_size, as_json=True
            )
            sim_hook(names[run], "resume")
            ours, raw, raw_json = stored / busy, stored / baseline, stored / json_baseline
            ratios.append(ours / raw)
            json_ratios.append(ours / raw_json)
            cpu_ratios.append((raw_cpu.own + raw_cpu.database) / (cpu.own + cpu.database))
            print(
                f"run {run + 1}: {counts}\n"
                f"  collector end to end: {stored} observations in {busy:.2f} s = {ours:10,.0f} obs/s\n"
                f"  raw {what} of the same rows: {baseline:.2f} s = {raw:10,.0f} obs/s\n"
                f"  ratio: {ours / raw:.2f}\n"
                f"  raw {what} of the same observations as JSON rows: {json_baseline:.2f} s = {raw_json:10,.0f}"
                f" obs/s; ratio vs JSON rows: {ours / raw_json:.2f}\n"
                f"  CPU an observation: collector {cpu.per(stored)}; raw {what} {raw_cpu.per(stored)}"
                f" (ratio {cpu_ratios[-1]:.2f})"
            )
        peak, slim, pods = list_memory(names[-2], control) if args.memory else (0, 0, 0)
    finally:
        sim.terminate()
        sim.wait(10)
        Cluster.objects.filter(name__in=names).delete()
    print(
        f"ratio collector / raw {what}: {statistics.median(ratios):.2f}, the median of {runs} run(s) "
        f"({min(ratios):.2f}-{max(ratios):.2f})  (goal on PostgreSQL: >= 0.5)\n"
        f"ratio collector / raw {what} of the observations as JSON rows: {statistics.median(json_ratios):.2f} "
        f"({min(json_ratios):.2f}-{max(json_ratios):.2f})\n"
        f"by CPU (the collector's and PostgreSQL's, an observation): {statistics.median(cpu_ratios):.2f} "
        f"({min(cpu_ratios):.2f}-{max(cpu_ratios):.2f})"
    )
    if not args.memory:
        return
    per10k = 10_000 / max(1, pods)
    print(f"collector peak while listing {pods} pods: {peak * per10k / 2**20:8.1f} MiB per 10k pods")
    print(f"slim tuples of the same pods:           {slim * per10k / 2**20:8.1f} MiB per 10k pods")
    print(f"ratio collector / slim tuples: {peak / max(1, slim):.2f}  (goal: <= 3)")


if __name__ == "__main__":
    main()
