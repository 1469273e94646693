"""``manage.py demo``: the whole podlife on one machine — demo cluster, collector, web server.

On the embedded default (no REDIS_URL) everything runs in this one process, because the in-memory channel
layer reaches only its own process: the demo cluster (``demo_cluster``, realtime), the collector threads
(``collectors/kube/runner.py``) and the ASGI server. With DATABASE_URL and REDIS_URL set, the collector
runs as a real Celery worker and beat (subprocesses) and the web server pushes through the Redis layer.

Shutdown order: the web server returns (Ctrl-C), then the collector stops (threads, or the Celery
processes are terminated), then the demo cluster closes its watch streams. Each step is bounded (the web
server waits at most 1 s for open requests and sockets, the collector threads 2 s, the alert loop 1 s), so
Ctrl-C ends the embedded demo in about a second (tests/test_demo_ctrl_c.py; docs/demo-cluster.md).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path

import uvicorn
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.utils import timezone

from alerts.loop import NotifierLoop
from collectors.ingest_audit import AuditIngest
from collectors.kube.config import ClusterSource, cluster_name_for, contexts_of, register_cluster
from collectors.kube.runner import Collector
from demo_cluster import run_sim
from demo_cluster.audit import AuditLog
from demo_cluster.scenarios import ALL_NAMES
from podlife_site import tuning
from timelines import store

DEMO_USER, DEMO_PASSWORD = "demo", "demo"


def ensure_demo_user() -> None:
    """A demo login that sees everything (only ever created by this command)."""
    User = get_user_model()
    user, created = User.objects.get_or_create(
        username=DEMO_USER, defaults={"is_staff": True, "is_superuser": True}
    )
    if created or not user.check_password(DEMO_PASSWORD):
        user.set_password(DEMO_PASSWORD)
        user.save()


class Command(BaseCommand):
    help = "Run the demo: a simulated cluster, the collector and the web server (Ctrl-C stops all)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", 8000)), help="HTTP port")
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
        parser.add_argument(
            "--fd",
            type=int,
            default=None,
            help="serve on this inherited TCP socket (bound by the parent) instead of --host/--port: how a "
            "test holds its port from the start (tests/test_demo_ctrl_c.py)",
        )
        parser.add_argument("--scenario", default="mixed", choices=sorted(ALL_NAMES), help="demo scenario")
        parser.add_argument("--speed", type=float, default=1.0, help="demo cluster time factor (default 1)")
        parser.add_argument(
            "--kubelet-verbosity",
            type=int,
            default=4,
            choices=range(11),
            metavar="0-10",
            help="the demo kubelets' klog -v (default 4; 2 is what production kubelets run at)",
        )

    def handle(
        self,
        *args: object,
        port: int,
        host: str,
        scenario: str,
        speed: float,
        kubelet_verbosity: int = 4,
        fd: int | None = None,
        **options: object,
    ) -> None:
        if fd is not None:
            host, port = _bound_address(fd)
        elif not 0 < port < 65536:
            raise CommandError(f"--port {port} is not a TCP port: expected 1-65535")
        ensure_demo_user()
        var = Path(settings.BASE_DIR) / "var"
        var.mkdir(exist_ok=True)
        kubeconfig = var / "demo-kubeconfig.yaml"
        audit_log = var / "demo-audit.log"
        with ExitStack() as stack:
            sim = stack.enter_context(
                # The demo cluster's clock starts now: object timestamps and the collector's receive times
                # must tell one story.
                run_sim(
                    scenario,
                    start=timezone.now(),
                    realtime=True,
                    speed=speed,
                    kubeconfig_path=kubeconfig,
                    heartbeat_interval=10.0,
                    kubelet_verbosity=kubelet_verbosity,
                    audit_log_path=audit_log,  # the demo API server audits itself (docs/audit.md)
                )
            )
            _, context = contexts_of(str(kubeconfig))
            cluster = cluster_name_for(context or "demo")
            if settings.REDIS_URL:
                self._celery(stack, kubeconfig, context or "")
                how = "Celery worker + beat on Redis"
            else:
                register_cluster(ClusterSource(cluster, str(kubeconfig), context))
                # This process runs watch steps, and serves the pages too (podlife_site/asgi.py starts it
                # as a web server when uvicorn imports it): podlife_site/tuning.py.
                tuning.start(tuning.Role.COLLECTOR)
                collector = Collector([cluster]).start()
                stack.callback(collector.stop, timeout=2.0)
                # No beat on the embedded default: the alert webhooks' scan runs in a thread here.
                stack.callback(NotifierLoop().start().stop, timeout=1.0)
                how = "in-process collector"
            assert sim.cluster.audit is not None
            shipper = AuditShipper(sim.cluster.audit, cluster)
            shipper.start()
            stack.callback(shipper.stop)
            self.stdout.write(
                f"demo cluster {scenario!r} at {sim.base_url} (kubeconfig {kubeconfig}); {how} → cluster {cluster!r}\n"
                f"its audit log: {audit_log} (ingested as it grows)\n"
                + (
                    "every scenario runs again 20 s after it ends, with new names (-1-, -2-, ...) and UIDs\n"
                    if scenario == "mixed"
                    else ""
                )
                + f"podlife is at http://{host}:{port}/  — log in as {DEMO_USER} / {DEMO_PASSWORD}  (Ctrl-C stops it)"
            )
            self.stdout.flush()
            uvicorn.run(
                "podlife_site.asgi:application",
                host=host,
                port=port,
                fd=fd,  # when given, uvicorn serves it and binds nothing
                log_level="warning",
                lifespan="off",
                timeout_graceful_shutdown=1,  # an open node page's socket must not hold Ctrl-C up
            )

    def _celery(self, stack: ExitStack, kubeconfig: Path, context: str) -> None:
        env = {**os.environ, "PODLIFE_KUBECONFIG": str(kubeconfig), "PODLIFE_KUBE_CONTEXTS": context}
        queue = settings.PODLIFE_DEPLOYMENT
        # Watch steps, pulls and beat on one worker; the derive stage on its own, so long watch steps never
        # hold it up (as a deployment runs them: docs/collector.md). The first worker's pool is sized by the
        # settings from the clusters it collects (CELERY_WORKER_CONCURRENCY): every watch chain and pull at once.
        for extra in (["-B", "-Q", queue], ["-Q", f"{queue}.derive", "--concurrency=1"]):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "podlife_site",
                    "worker",
                    *extra,
                    "--loglevel=WARNING",
                    "--without-gossip",
                    "--without-mingle",
                    "-n",
                    f"{extra[extra.index('-Q') + 1].replace('.', '-')}@%h",
                ],
                env=env,
            )
            stack.callback(self._stop, proc)

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


class AuditShipper:
    """Stores what the demo API server audited, every ``every`` seconds, into the demo cluster, as
    ``ingest_audit_log`` would from its log file (the same parser and store; the derive stage follows). So
    the demo's pods show who deleted them and the evictions their PDB refused (docs/audit.md)."""

    def __init__(self, log: AuditLog, cluster: str, every: float = 2.0) -> None:
        self.log, self.cluster, self.every = log, cluster, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-audit-shipper", daemon=True)

    def start(self) -> AuditShipper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def ship(self) -> int:
        """Store what was audited since the last call; the number of audit events stored."""
        lines = self.log.take_new()
        if not lines:
            return 0
        ingest = AuditIngest(store.cluster_for(self.cluster))
        ingest.feed_lines(lines)
        ingest.close()
        return len(lines)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.every):
                try:
                    self.ship()
                except Exception:  # a failed round is logged; its events are in the audit log file
                    logging.getLogger(__name__).exception("demo audit shipping failed")
        finally:
            connection.close()


def _bound_address(fd: int) -> tuple[str, int]:
    """The loopback or interface address and port of the inherited TCP socket ``fd`` (``--fd``)."""
    try:
        sock = socket.socket(fileno=os.dup(fd))  # family and type read from the descriptor
    except OSError as exc:
        raise CommandError(f"--fd {fd} is not an open socket: {exc}") from None
    with sock:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            raise CommandError(f"--fd {fd} is not a TCP socket")
        host, port = sock.getsockname()[:2]
    if not port:
        raise CommandError(f"--fd {fd} is not bound to a port")
    return str(host), int(port)
