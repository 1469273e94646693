"""What bench/watch.py and bench/scale.py share: the demo cluster's ``scale`` scenario in a subprocess, its
fault hooks, and the collector's memory listing every pod against slim tuples of the same pods. Call the
functions that reach the collector after ``_setup.setup_django``."""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from _setup import ROOT


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
