"""Command line for the demo cluster, shared by ``python -m collectors.sim`` and ``manage.py sim``."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from .cluster import SimCluster
from .scenarios import ALL_NAMES, install
from .server import SimServer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario", default="mixed", choices=ALL_NAMES, help="what the cluster does (default: mixed)"
    )
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one")
    parser.add_argument(
        "--kubeconfig-out", default=None, help="write a kubeconfig here (default: ./podlife-demo.kubeconfig)"
    )
    parser.add_argument("--speed", type=float, default=1.0, help="virtual seconds per real second")
    parser.add_argument("--seed", type=int, default=0, help="random seed (same seed, same cluster)")
    parser.add_argument("--nodes", type=int, default=50, help="scale: number of nodes")
    parser.add_argument("--pods-per-node", type=int, default=10, help="scale: pods per node")
    parser.add_argument("--churn", type=float, default=1.0, help="scale: pods replaced per virtual second")
    parser.add_argument(
        "--bookmark-interval", type=float, default=5.0, help="seconds between watch bookmarks"
    )


def serve(opts: argparse.Namespace, out: TextIO = sys.stdout, stop: threading.Event | None = None) -> int:
    """Build the cluster, serve it until ``stop`` is set or SIGINT/SIGTERM; prints one ready line."""
    # Real start time, so ages kubectl computes from creationTimestamp look right; tests fix it instead.
    cluster = SimCluster(seed=opts.seed, start=datetime.now(UTC).replace(microsecond=0))
    with cluster.engine.lock:
        install(cluster, opts.scenario, nodes=opts.nodes, pods_per_node=opts.pods_per_node, churn=opts.churn)
        cluster.advance(0.0)
    server = SimServer(
        cluster, port=opts.port, speed=opts.speed, realtime=True, bookmark_interval=opts.bookmark_interval
    )
    kubeconfig = Path(opts.kubeconfig_out or "podlife-demo.kubeconfig").resolve()
    server.write_kubeconfig(kubeconfig)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    server.start()
    print(
        f'podlife demo cluster "{opts.scenario}" ready at {server.base_url} (kubeconfig: {kubeconfig})',
        file=out,
        flush=True,
    )
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m collectors.sim", description="Serve the podlife demo cluster."
    )
    add_arguments(parser)
    return serve(parser.parse_args(argv))
