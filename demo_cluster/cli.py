"""Command line for the demo cluster, shared by ``python -m demo_cluster`` and ``manage.py sim``."""

from __future__ import annotations

import argparse
import resource
import signal
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from .audit import AuditLog, post_batches
from .cluster import SimCluster
from .scenarios import ALL_NAMES, install
from .server import SimServer


class Output(Protocol):
    """Where the ready line goes: a console, or manage.py's OutputWrapper (which is not a TextIO)."""

    def write(self, text: str, /) -> object: ...

    def flush(self) -> object: ...


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
    parser.add_argument(
        "--heartbeat-interval",
        type=float,
        default=None,
        help="virtual seconds between node status heartbeats; 0 = none (default 10; scale: slower)",
    )
    parser.add_argument(
        "--history-limit",
        type=int,
        default=None,
        help="watch history entries kept for replay (default 200000; scale: ~pods/3)",
    )
    parser.add_argument(
        "--kubelet-log-lines",
        type=int,
        default=None,
        help="klog lines kept per kubelet (default 20000; scale: ~1M lines over all nodes)",
    )
    parser.add_argument(
        "--event-ttl",
        type=float,
        default=None,
        help="seconds an Event lives after its last update; 0 = forever (default 3600; scale: 900)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS with a CA made at start (in the kubeconfig) and require the bearer token",
    )
    parser.add_argument(
        "--serviceaccount-dir",
        default=None,
        help="with --tls: write token, ca.crt and namespace here, the in-cluster ServiceAccount layout",
    )
    parser.add_argument(
        "--kubelet-verbosity",
        type=int,
        default=4,
        choices=range(11),
        metavar="0-10",
        help="every kubelet's klog -v (default 4: pod-worker lines; production kubelets run at 2)",
    )
    parser.add_argument(
        "--audit-log",
        default=None,
        metavar="FILE",
        help="audit the API server: JSON Lines audit.k8s.io/v1 events appended to FILE (docs/demo-cluster.md)",
    )
    parser.add_argument(
        "--audit-webhook",
        default=None,
        metavar="URL",
        help="also POST the audit events in EventList batches to URL (podlife's /ingest/v1/audit) every 5 s",
    )
    parser.add_argument(
        "--audit-token",
        default=None,
        help="the bearer token for --audit-webhook (manage.py ingest_token CLUSTER)",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="build the cluster, print build time, memory and counts, and exit (sizing a scale run)",
    )


def build(opts: argparse.Namespace, start: datetime | None = None) -> SimCluster:
    """The cluster the options describe, with its scenario installed and time 0 run."""
    cluster = SimCluster(
        seed=opts.seed,
        start=start,
        history_limit=opts.history_limit,
        kubelet_log_limit=opts.kubelet_log_lines,
        heartbeat_interval=opts.heartbeat_interval,
        event_ttl=opts.event_ttl,
    )
    if getattr(opts, "audit_log", None) or getattr(opts, "audit_webhook", None):
        cluster.enable_audit(getattr(opts, "audit_log", None))
    with cluster.engine.lock:
        install(
            cluster,
            opts.scenario,
            nodes=opts.nodes,
            pods_per_node=opts.pods_per_node,
            churn=opts.churn,
            kubelet_verbosity=getattr(opts, "kubelet_verbosity", 4),
        )
        cluster.advance(0.0)
    return cluster


def report_build(opts: argparse.Namespace, out: Output = sys.stdout) -> int:
    """Build, then churn 60 virtual seconds; print seconds, peak RSS and what was built."""
    t0 = time.perf_counter()
    cluster = build(opts)
    built = time.perf_counter() - t0
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    with cluster.engine.lock:
        cluster.advance(60.0)
    ran = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store = cluster.store
    print(
        f"scenario={opts.scenario} nodes={len(cluster.kubelets)} pods={store.count('pods')} "
        f"build_s={built:.1f} peak_rss_after_build_mib={rss_built:.0f} "
        f"then 60 virtual s (churn {opts.churn}/s) in {ran:.1f} s: peak_rss_mib={rss:.0f} "
        f"events={store.count('events')} resourceVersion={store.rv} history={len(store._hist)}/"
        f"{store.history_limit} kubelet_lines={sum(len(k.lines) for k in cluster.kubelets.values())}",
        file=out,
        flush=True,
    )
    return 0


def serve(opts: argparse.Namespace, out: Output = sys.stdout, stop: threading.Event | None = None) -> int:
    """Build the cluster, serve it until ``stop`` is set or SIGINT/SIGTERM; prints one ready line."""
    if getattr(opts, "build_only", False):
        return report_build(opts, out)
    # Real start time, so ages kubectl computes from creationTimestamp look right; tests fix it instead.
    cluster = build(opts, start=datetime.now(UTC).replace(microsecond=0))
    tls = bool(getattr(opts, "tls", False))
    sa_dir = getattr(opts, "serviceaccount_dir", None)
    if sa_dir and not tls:
        print("--serviceaccount-dir needs --tls (an in-cluster client only speaks HTTPS)", file=sys.stderr)
        return 2
    server = SimServer(
        cluster,
        port=opts.port,
        speed=opts.speed,
        realtime=True,
        bookmark_interval=opts.bookmark_interval,
        tls=tls,
    )
    kubeconfig = Path(opts.kubeconfig_out or "podlife-demo.kubeconfig").resolve()
    server.write_kubeconfig(kubeconfig)
    written = server.write_serviceaccount(sa_dir).resolve() if sa_dir else None
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    server.start()
    webhook = getattr(opts, "audit_webhook", None)
    if webhook and cluster.audit is not None:
        shipper = threading.Thread(
            target=ship_audit,
            args=(cluster.audit, webhook, getattr(opts, "audit_token", None) or "", stop),
            name="audit-webhook",
            daemon=True,
        )
        shipper.start()
    print(
        f'podlife demo cluster "{opts.scenario}" ready at {server.base_url} (kubeconfig: {kubeconfig})',
        file=out,
        flush=True,
    )
    if written is not None:
        print(
            f"in-cluster layout in {written}: KUBERNETES_SERVICE_HOST=127.0.0.1 "
            f"KUBERNETES_SERVICE_PORT={server.port}",
            file=out,
            flush=True,
        )
    try:
        stop.wait()
    finally:
        server.stop()
    return 0


def ship_audit(log: AuditLog, url: str, token: str, stop: threading.Event, every: float = 5.0) -> None:
    """The webhook backend: every ``every`` seconds, POST what was audited since (kept for the next round
    while the receiver cannot be reached; its refusals are printed)."""
    waiting: list[bytes] = []
    while not stop.wait(every):
        waiting += log.take_new()
        if not waiting:
            continue
        try:
            codes = post_batches(url, token, waiting)
        except OSError as exc:
            print(
                f"audit webhook {url}: {exc}; {len(waiting)} events wait for the next round", file=sys.stderr
            )
            continue
        if any(code >= 300 for code in codes):
            print(f"audit webhook {url} answered {sorted(set(codes))}", file=sys.stderr)
        waiting = []


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo_cluster", description="Serve the podlife demo cluster."
    )
    add_arguments(parser)
    return serve(parser.parse_args(argv))
