"""Load: 200 live pages on one node and 50 API clients against one web process (issue #18, deliverable 6).

    DATABASE_URL=postgres://… REDIS_URL=redis://…/N python bench/load.py [--ws 200] [--rest 50] [--seconds 20]

A uvicorn process serves podlife as deployed (the pool and the request limit at their defaults) from a
scratch copy of the configured PostgreSQL database, with the Redis channel layer. The demo cluster
(``mixed`` scenario, real time) is collected and derived in this process all along, and two derive workers
store and push a new pod on the watched node every 0.1 s each (tests/loadgen.py says exactly what runs and
what is counted). Three runs against the same server:

1. baseline: one page, no API client, 5 s: the delivery lag of a quiet server;
2. REST alone (unless ``--rest 0``): no page, ``--rest`` API clients, ``--seconds``: what the API answers
   without the live path;
3. load: ``--ws`` pages on that node, ``--rest`` API clients, ``--seconds``; ``--rounds`` times (memory
   after each round tells a plateau from a leak).

Printed: delta delivery p50/p95/p99 (goal: p99 ≤ 2 s at 200 pages, the worst round's) and its ratio to the baseline's, every
HTTP status (goal: no 500), refetch frames (goal: none: no false gap), pods that never reached a page, the
most PostgreSQL connections the server held (its pool bounds them), and the server's resident memory before,
at the peak and 3 s after the clients left (goal: within 20 % of before), and the CPU share the server got.
``--linger S``: S seconds after the last round the memory is printed once more (what settles by itself
later, beside the verdict; the verdict stays the 3 s figure). ``--tracemalloc``: the server runs under tracemalloc and, after each round, shows what its live Python
allocations grew by since the baseline, line by line, beside its resident memory (what Python holds vs.
what the allocator keeps). ``PODLIFE_LOAD_NO_DEFLATE=1``: the pages do not offer permessage-deflate (a
browser does), to see its cost on the server. With ``--rest 0`` the server's CPU per pod delivered to a page is printed.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, setup_django

CLUSTER, NODE = "bench-load", "bench-load-node"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(database_url: str, traced: Path | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "DEBUG": "0"}
    env.pop("PODLIFE_PROCESS", None)
    server = ["-m", "uvicorn"]
    if traced is not None:  # the same server under tracemalloc, snapshots on SIGUSR1
        env["PODLIFE_TRACEMALLOC_DIR"] = str(traced)
        server = [str(Path(__file__).resolve().parent / "_traced_server.py")]
    proc = subprocess.Popen(
        [sys.executable, *server, "podlife_site.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning", "--lifespan", "off"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("uvicorn did not start") from None
            time.sleep(0.1)


def snapshot(proc: subprocess.Popen[bytes], traced: Path, n: int) -> tuple[Any, float]:
    """Snapshot ``n`` of the traced server's live allocations, and the MiB tracemalloc itself used."""
    import signal
    import tracemalloc

    proc.send_signal(signal.SIGUSR1)
    done = traced / f"{n}.done"
    deadline = time.monotonic() + 120
    while not done.exists() or not done.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError("the traced server wrote no snapshot")
        time.sleep(0.2)
    return tracemalloc.Snapshot.load(str(traced / f"{n}.snap")), int(done.read_text()) / 2**20


def memory_report(
    before: tuple[Any, float], after: tuple[Any, float], rss_before: float, rss_after: float
) -> str:
    """What the server's live Python allocations grew by, where, against its resident memory (less what
    tracemalloc itself took)."""
    (snap0, own0), (snap1, own1) = before, after
    live0 = sum(s.size for s in snap0.statistics("filename")) / 2**20
    live1 = sum(s.size for s in snap1.statistics("filename")) / 2**20
    rest = rss_after - rss_before - (live1 - live0) - (own1 - own0)
    lines = [
        f"  live Python allocations (tracemalloc): {live0:.1f} -> {live1:.1f} MiB ({live1 - live0:+.1f});"
        f" resident: {rss_before:.0f} -> {rss_after:.0f} MiB ({rss_after - rss_before:+.0f}), of which"
        f" tracemalloc's own {own1 - own0:+.0f}: {rest:+.0f} MiB held by no live Python object"
    ]
    for stat in snap1.compare_to(snap0, "lineno")[:12]:
        frame = stat.traceback[0]
        lines.append(
            f"    {stat.size_diff / 1024:+9.0f} KiB {stat.count_diff:+7d} blocks  {frame.filename}:{frame.lineno}"
        )
    return "\n".join(lines)


def demo_churn(stop: threading.Event) -> None:
    """The demo cluster, collected and derived in this process until ``stop`` (as `make demo` runs it)."""
    from django.db import connection

    from collectors.kube import config
    from collectors.kube.config import ClusterSource
    from collectors.kube.runner import Collector
    from demo_cluster import run_sim
    from timelines import derivation

    kubeconfig = Path(tempfile.mkdtemp()) / "kubeconfig"
    with run_sim("mixed", seed=7, realtime=True, kubeconfig_path=kubeconfig) as _server:
        config.register_cluster(ClusterSource("bench-demo", str(kubeconfig), "podlife-demo"))
        collector = Collector(["bench-demo"]).start()
        try:
            while not stop.is_set():
                derivation.drain()
                stop.wait(0.2)
        finally:
            collector.stop()
            connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ws", type=int, default=200)
    parser.add_argument("--rest", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--rounds", type=int, default=2, help="load rounds: memory after each shows a plateau or a leak"
    )
    parser.add_argument(
        "--linger",
        type=float,
        default=0.0,
        help="after the last round, wait this many seconds more and print the memory again (not the verdict)",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="serve under tracemalloc (slower: its lags are not comparable) and show what stays after load",
    )
    args = parser.parse_args()
    if not os.environ.get("REDIS_URL") or not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("bench/load.py needs DATABASE_URL (PostgreSQL) and REDIS_URL")
    setup_django(scratch_database=True)
    import psycopg
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from dashboard.web.access import create_token
    from tests.flow import ingest
    from tests.loadgen import Load, pct, rss_mib
    from tests.web.factories import started_pod

    s = connection.settings_dict
    app_name = "podlife-bench-load"
    url = f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST']}:{s['PORT'] or 5432}/{s['NAME']}"
    user = User.objects.create_superuser("bench", "bench@example.invalid", "pw")
    browser = Client()
    browser.force_login(user)
    token = create_token(user)
    ingest(CLUSTER, started_pod("bench-load-seed", "seed", node=NODE))
    # The server inherits this process's SECRET_KEY (bench/_setup.py), so the session cookie holds there.
    traced = Path(tempfile.mkdtemp(prefix="podlife-load-")) if args.tracemalloc else None
    proc, base = serve(f"{url}?application_name={app_name}", traced)
    stop_demo = threading.Event()
    demo = threading.Thread(target=demo_churn, args=(stop_demo,), daemon=True)
    demo.start()
    most = 0
    sampling = threading.Event()

    def sample_connections() -> None:
        nonlocal most
        with psycopg.connect(
            host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"], password=s["PASSWORD"] or None,
            dbname=s["NAME"], autocommit=True,
        ) as db:  # fmt: skip
            while not sampling.is_set():
                row = db.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [app_name]
                ).fetchone()
                most = max(most, row[0] if row else 0)
                sampling.wait(0.1)

    sampler = threading.Thread(target=sample_connections, daemon=True)
    sampler.start()
    lingered = None
    try:
        time.sleep(3.0)  # the demo's first list is stored
        common = {
            "session_cookie": browser.cookies["sessionid"].value,
            "token": token,
            "seed_uid": "bench-load-seed",
        }
        print("baseline: 1 page, no API client")
        base_run = Load(
            base, proc.pid, CLUSTER, NODE, ws_clients=1, rest_clients=0, seconds=5.0, **common
        ).run()
        print(base_run.report())
        snapshots = [snapshot(proc, traced, 0)] if traced is not None else []
        rest_run = None
        if args.rest:
            print(f"REST alone: no page, {args.rest} API clients")
            rest_run = Load(
                base, proc.pid, CLUSTER, NODE, ws_clients=0, rest_clients=args.rest, seconds=args.seconds,
                **common,
            ).run()  # fmt: skip
            print(rest_run.report())
        rounds = []
        for n in range(1, args.rounds + 1):
            print(f"load, round {n}: {args.ws} pages, {args.rest} API clients")
            rounds.append(
                Load(
                    base, proc.pid, CLUSTER, NODE, ws_clients=args.ws, rest_clients=args.rest,
                    seconds=args.seconds, settle_s=20.0, **common,
                ).run()
            )  # fmt: skip
            print(rounds[-1].report())
            if traced is not None:
                snapshots.append(snapshot(proc, traced, n))
                print(memory_report(snapshots[0], snapshots[-1], base_run.rss_after, rounds[-1].rss_after))
        if args.linger > 0 and rounds:
            time.sleep(args.linger)
            lingered = rss_mib(proc.pid)
    finally:
        sampling.set()
        stop_demo.set()
        demo.join(30)
        proc.terminate()
        proc.wait(10)
    # The verdict is the worst round's, and every round's errors count: a later round that slows down or
    # fails is what a leak or a pile-up looks like.
    full = max(rounds, key=lambda r: pct(r.lags_ms, 99))
    p99, base_p99 = pct(full.lags_ms, 99), pct(base_run.lags_ms, 99)
    statuses = sum((r.statuses() for r in rounds), Counter[int]())
    refetches, missing = sum(r.refetches for r in rounds), sum(r.missing for r in rounds)
    print()
    print(f"delta p99 {p99:.0f} ms at {args.ws} pages (the worst of {len(rounds)} round(s): "
          + ", ".join(f"{pct(r.lags_ms, 99):.0f}" for r in rounds)
          + f" ms) = {p99 / base_p99:.1f} x the quiet server's {base_p99:.0f} ms"
          f" (goal ≤ 2000 ms): {'met' if p99 <= 2000 else 'NOT met'}")  # fmt: skip
    print(f"HTTP, every round: {dict(statuses)}; 500s: {statuses[500]} (goal 0); refetch frames: {refetches}"
          f" (goal 0); undelivered: {missing}")  # fmt: skip
    if rest_run is not None:
        print(f"REST p50 / p99 with {args.ws} pages: {pct(full.rest_ms, 50):.0f} / {pct(full.rest_ms, 99):.0f} ms;"
              f" without: {pct(rest_run.rest_ms, 50):.0f} / {pct(rest_run.rest_ms, 99):.0f} ms")  # fmt: skip
    else:  # the server's CPU went to the pages alone
        per = [r.server_cpu_s / max(len(r.lags_ms), 1) * 1000 for r in rounds]
        print("server CPU per pod delivered to a page: " + ", ".join(f"{p:.3f} ms" for p in per))
    print(f"PostgreSQL connections held by the server at most: {most}")
    change = (rounds[-1].rss_after / base_run.rss_before - 1) * 100
    after = ", ".join(f"{r.rss_after:.0f}" for r in rounds)
    unpaged = (rounds[-1].rss_after / base_run.rss_unpaged - 1) * 100
    print(f"server memory: {base_run.rss_before:.0f} MiB at start (warm: each API route and the live page"
          f" served once), {max(r.rss_peak for r in rounds):.0f} MiB peak,"
          f" after each round's clients left: {after} MiB ({change:+.0f}% at the end, goal within 20%):"
          f" {'met' if abs(change) <= 20 else 'NOT met'}; from before the warm page"
          f" ({base_run.rss_unpaged:.0f} MiB, no verdict): {unpaged:+.0f}%")  # fmt: skip
    if lingered is not None:
        print(f"server memory {args.linger:.0f} s after that (no verdict): {lingered:.0f} MiB"
              f" ({(lingered / base_run.rss_before - 1) * 100:+.0f}%)")  # fmt: skip
    cpu = sum(r.server_cpu_s for r in rounds) / max(sum(r.wall_s for r in rounds), 1e-9)
    print(
        f"server CPU while loaded: {cpu:.0%} of one core (what this machine gave it; load average in `uptime`)"
    )


if __name__ == "__main__":
    main()
