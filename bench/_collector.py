"""What bench/watch.py, bench/storage.py and bench/scale.py share: the demo cluster's ``scale`` scenario in a
subprocess, its fault hooks, the collector's memory listing every pod against slim tuples of the same pods,
CPU accounting, checkpoints and the raw-COPY baseline. Call the functions that reach the collector or the
database after ``_setup.setup_django``."""

from __future__ import annotations

import dataclasses
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from _setup import ROOT, postgres_cpu_seconds, process_cpu_seconds, raw_copy_seconds


def start_sim(nodes: int, per_node: int, churn: float, kubeconfig: Path) -> subprocess.Popen[str]:
    """The ``scale`` scenario at real speed, its kubeconfig written to ``kubeconfig``."""
    cmd = [
        sys.executable, "-m", "demo_cluster", "--scenario", "scale", "--nodes", str(nodes),
        "--pods-per-node", str(per_node), "--churn", str(churn), "--speed", "1",
        "--kubeconfig-out", str(kubeconfig), "--bookmark-interval", "1",
        # Keep the whole run's history, as etcd between two compactions (5 min by default) would: the
        # benchmarks measure a watch replaying its backlog, not a relist after a too-old version.
        "--history-limit", "2000000",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "ready" not in line:
        proc.kill()
        raise SystemExit(f"the demo cluster did not start: {line!r}")
    return proc


def sim_hook(cluster: str, name: str) -> None:
    """POST a demo-cluster fault hook (``/_sim/NAME``) through the collector's own client."""
    from collectors.kube import config

    client = config.api_client(cluster)
    response = client.call_api(f"/_sim/{name}", "POST", auth_settings=["BearerToken"], _preload_content=False)
    response.read()  # to the end: a connection goes back to the pool only after its whole answer
    response.release_conn()


def list_memory(cluster: str, control: Any) -> tuple[int, int, int]:
    """(collector peak bytes while listing all pods, slim-tuple bytes for the same pods, pods)."""
    import orjson
    from kubernetes import client as kclient

    from collectors.kube import config
    from collectors.kube.watch import run_step

    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = run_step(cluster, "pods", control=control)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert result.ok, result.error

    api = kclient.CoreV1Api(config.api_client(cluster))
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    slim: list[tuple[str, str, str, str, str, str]] = []
    token = None
    while True:
        body = orjson.loads(
            api.list_pod_for_all_namespaces(
                limit=control.tunables.list_page_size, _continue=token, _preload_content=False
            ).data
        )
        for item in body["items"]:
            meta = item["metadata"]
            slim.append(
                (meta["uid"], meta["namespace"], meta["name"], item["spec"].get("nodeName", ""),
                 meta["resourceVersion"], item["status"].get("phase", ""))
            )  # fmt: skip
        token = body["metadata"].get("continue")
        del body
        if not token:
            break
    retained = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return peak, retained, len(slim)


@dataclasses.dataclass
class Cpu:
    """CPU seconds spent by this process (every thread) with its store process (``timelines/store_process.py``,
    when it runs one), and by the machine's PostgreSQL processes."""

    own: float = 0.0
    database: float = 0.0

    @classmethod
    def now(cls) -> Cpu:
        from timelines import store_process

        child = store_process.current()
        stored = process_cpu_seconds(Path(f"/proc/{child.pid}")) if child is not None else 0.0
        return cls(time.process_time() + stored, postgres_cpu_seconds())

    def since(self, start: Cpu) -> Cpu:
        return Cpu(self.own - start.own, self.database - start.database)

    def per(self, n: int) -> str:
        """Microseconds an item, both sides and their sum."""
        own, db = self.own / n * 1e6, self.database / n * 1e6
        return f"{own:5.1f} µs here + {db:5.1f} µs in PostgreSQL = {own + db:5.1f} µs"


def checkpoint() -> None:
    """Write PostgreSQL's dirty pages out now (outside the clock): each run writes hundreds of megabytes
    of WAL, and a checkpoint that falls inside one measurement and not the other would decide the ratio.
    Needs a superuser or pg_checkpoint; without, the runs go on as they are."""
    from django.db import DatabaseError, connection

    if connection.vendor != "postgresql":
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    except DatabaseError as exc:
        print(f"(no CHECKPOINT between runs: {exc})")


def copy_baselines(cluster: str, batch: int, *, as_json: bool = False) -> list[tuple[float, Cpu]]:
    """Seconds to COPY the same rows (read back once, prepared outside the clock) into a scratch table, in
    batches of the collector's size (median of three runs), and the CPU of one run (a third of three).
    ``as_json``: then a second baseline follows the first, of the same rows with their payload as JSON text
    in the jsonb ``payload`` column, as they were stored before the compressed body
    (``_setup.raw_copy_seconds``)."""
    from django.utils import timezone

    from timelines import observation_rows, store
    from timelines.models import Cluster

    found = Cluster.objects.get(name=cluster)
    received = timezone.now()
    rows, json_rows = [], []
    for row in observation_rows.iter_rows(observation_rows.selection(found), chunk_size=5000):
        obs = row.observation()
        rows.append(store._row(found.pk, obs, received))
        if as_json:
            at = store._COLUMNS.index("body")  # the payload's JSON in its place
            json_rows.append((*rows[-1][:at], store._json_bytes(obs.payload), *rows[-1][at + 1 :]))
    out = []
    forms = [(rows, False), (json_rows, True)] if as_json else [(rows, False)]
    for form, as_json_rows in forms:
        # The median of three runs: a single COPY run varies by a fifth on a busy two-core machine.
        cpu = Cpu.now()
        seconds = [raw_copy_seconds(form, batch, as_json=as_json_rows) for _ in range(3)]
        spent = Cpu.now().since(cpu)
        out.append((statistics.median(seconds), Cpu(spent.own / 3, spent.database / 3)))
    return out
