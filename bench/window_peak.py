"""What one node timeline read holds at its peak while it builds, beside the answer it sends (issue #18 d6).

    DATABASE_URL=postgres://… python bench/window_peak.py [--sizes 100,500,2000] [--runs 3]

Set-up (not measured): a scratch copy of the configured database with one node of ``N`` pods per size
(``tests/web/bulk.py`` ``make_node_pods``: worker, api, container and condition lanes, three markers a
pod, findings on every seventh, the node's own lanes, kubelet evidence for the freshness annotation).

Measured: the node timeline API as the load's API clients ask it (``lanes=worker``) and with every lane
(``lanes=all``), called in-process through its view (no shared-read memory), under tracemalloc: the peak of
the live Python allocations during the call above what was live before it, beside the answer's size, and
their ratio (the baseline the peak is judged against: the answer itself must exist once); and, in a fresh
process that has made one small read first, how much its resident memory's high-water mark rose during the
read (``/proc/self/clear_refs``, ``VmHWM``): what the allocators had to take from the system for it, which
is what they keep after a load (tracemalloc also counts address space orjson reserves for a large result
and never touches). The answer's SHA-256 is printed too, so two versions of the read can be compared byte
for byte on the same data.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, setup_django

os.environ["PODLIFE_SHARED_READ_S"] = "0"  # every call reads: nothing kept between the measured calls
ONE = "--one" in sys.argv  # a child: one read in a fresh process, against the parent's scratch database
setup_django(scratch_database=not ONE)
sys.path.insert(0, str(ROOT))


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def node_url(cluster: str, lanes: str) -> str:
    return (
        f"/api/v1/clusters/{cluster}/nodes/node-busy/timeline"
        f"?from=2024-06-07T00:00:00Z&to=2024-06-08T00:00:00Z&lanes={lanes}"
    )


def read_node(cluster: str, lanes: str) -> bytes:
    from django.contrib.auth.models import User
    from django.test import RequestFactory

    from dashboard.web.api import views

    request = RequestFactory().get(node_url(cluster, lanes))
    request.user = User.objects.get(username="bench")
    response = views.node_timeline(request, cluster=cluster, node="node-busy")
    assert response.status_code == 200, response.content[:300]
    return bytes(response.content)


def one(cluster: str, lanes: str) -> None:
    """In a fresh process: a small read (imports, connection, query plans), then the measured one."""
    read_node("peak-warm", lanes)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status_kib("VmRSS")
    body = read_node(cluster, lanes)
    print(status_kib("VmHWM") - before, len(body))


def scratch_url() -> str:
    """DATABASE_URL naming the scratch database this run works in."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="100,500,2000")
    parser.add_argument("--runs", type=int, default=3)
    args, _ = parser.parse_known_args()

    from django.contrib.auth.models import User
    from django.db import connection

    from tests.web.bulk import make_node_pods
    from timelines.models import Cluster

    if ONE:
        one(*sys.argv[sys.argv.index("--one") + 1 :][:2])
        return
    User.objects.create_superuser("bench", "bench@example.invalid", "bench-password-123")
    make_node_pods(Cluster.objects.create(name="peak-warm"), pods=5, node="node-busy")
    child_env = {**os.environ, "DATABASE_URL": scratch_url()}
    print(f"database: {connection.vendor}; load average {os.getloadavg()[0]:.1f}")
    print(
        f"{'pods':>6} {'lanes':>6} {'answer':>10} {'traced peak':>12} {'/answer':>8} "
        f"{'resident rise':>14} {'/answer':>8}  sha256"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        cluster = Cluster.objects.create(name=f"peak-{size}")
        make_node_pods(cluster, pods=size, node="node-busy")
        for lanes in ("worker", "all"):

            def call(name: str = cluster.name, lanes: str = lanes) -> bytes:
                return read_node(name, lanes)

            body = call()  # warm: URL, query plans, first connection
            peaks = []
            for _ in range(args.runs):
                tracemalloc.start()
                before = tracemalloc.get_traced_memory()[0]
                again = call()
                peaks.append(tracemalloc.get_traced_memory()[1] - before)
                tracemalloc.stop()
                assert again == body
                del again
            peak = statistics.median(peaks)
            rises = []
            for _ in range(args.runs):
                out = subprocess.run(
                    [sys.executable, __file__, "--one", cluster.name, lanes],
                    env=child_env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout.split()
                assert int(out[1]) == len(body)
                rises.append(int(out[0]) * 1024)
            rise = statistics.median(rises)
            print(
                f"{size:>6} {lanes:>6} {len(body) / 2**20:>6.2f} MiB {peak / 2**20:>8.2f} MiB "
                f"{peak / len(body):>7.2f}× {rise / 2**20:>10.2f} MiB {rise / len(body):>7.2f}×  "
                f"{hashlib.sha256(body).hexdigest()[:16]}"
            )


if __name__ == "__main__":
    main()
