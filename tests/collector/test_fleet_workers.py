"""Three demo clusters (``scale`` on each, churning in real time) collected by Celery workers in separate
processes; a worker joins and another leaves mid-run, and nothing is lost (issue #17, docs/fleet.md).

Leases keep one chain per (cluster, resource) however many workers consume the queue; a worker that
leaves with a warm shutdown finishes its step, and the chain's next step, queued in Redis, goes to
whichever worker is free. The workers write into the test database (``transaction=True``).
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import yaml
from django.conf import settings
from django.db import connection

from collectors import tasks
from collectors.kube import lease
from collectors.models import CollectorState
from demo_cluster import run_sim
from tests.collector.test_celery_chain import QUEUE_KEYS, Worker
from tests.stored import rows_of
from tests.waits import wait_for
from timelines.lifecycle.observation import Kind

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

FLEET = ("fleet-a", "fleet-b", "fleet-c")


def merged_kubeconfig(servers: dict[str, object], path: Path) -> Path:
    """One kubeconfig with a context per demo cluster (each demo cluster names its own ``podlife-demo``)."""
    merged: dict[str, object] = {"apiVersion": "v1", "kind": "Config", "preferences": {}}
    clusters, users, contexts = [], [], []
    for name, server in servers.items():
        own = server.kubeconfig()  # type: ignore[attr-defined]
        clusters.append({"name": name, "cluster": own["clusters"][0]["cluster"]})
        users.append({"name": name, "user": own["users"][0]["user"]})
        contexts.append({"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}})
    merged.update(clusters=clusters, users=users, contexts=contexts, **{"current-context": FLEET[0]})
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
    return path


def stored(cluster: str, kind: str) -> set[str]:
    return {o.pod_uid for o in rows_of(cluster, kinds=[kind])}


def steps_run(worker: Worker) -> int:
    return worker.log_path.read_bytes().count(b"collectors.watch_step[")


@pytest.mark.django_db(transaction=True)
def test_three_clusters_on_workers_that_come_and_go_lose_nothing(tmp_path, monkeypatch):
    """GIVEN three churning demo clusters and two Celery workers with a pods chain per cluster
    WHEN a third worker joins, then one of the first two leaves (warm shutdown), all while pods come and go
    THEN every pod each cluster ran is stored, every deletion too (no relist, no synthetic deletion), each
    (cluster, pods) had one chain at a time, and the steps spread over the workers, the new one included."""
    with ExitStack() as stack:
        servers = {
            name: stack.enter_context(
                run_sim(
                    "scale", seed=i, realtime=True, bookmark_interval=0.5, nodes=6, pods_per_node=5, churn=3.0
                )
            )
            for i, name in enumerate(FLEET)
        }
        kubeconfig = merged_kubeconfig(servers, tmp_path / "kubeconfig")
        knobs = {
            "PODLIFE_KUBECONFIG": str(kubeconfig),
            "PODLIFE_KUBE_CONTEXTS": ",".join(FLEET),
            "PODLIFE_WATCH_TIMEOUT_S": "2",
            "PODLIFE_WATCH_LEASE_S": "6",
            "PODLIFE_KUBELET_METRICS": "0",
            "PODLIFE_KUBELET_LOGS": "0",
        }
        for key, value in {
            "PODLIFE_KUBECONFIG": str(kubeconfig),
            "PODLIFE_KUBE_CONTEXTS": list(FLEET),
            "PODLIFE_WATCH_TIMEOUT_S": 2,
            "PODLIFE_WATCH_LEASE_S": 6.0,
            "PODLIFE_KUBELET_METRICS": False,
            "PODLIFE_KUBELET_LOGS": False,
        }.items():
            monkeypatch.setattr(settings, key, value)
        url = urlsplit(os.environ["DATABASE_URL"])
        test_db = urlunsplit((url.scheme, url.netloc, "/" + connection.settings_dict["NAME"], url.query, ""))
        env = {**os.environ, **knobs, "DATABASE_URL": test_db, "REDIS_URL": settings.REDIS_URL}
        backend = lease.leases()
        backend.redis.delete(*QUEUE_KEYS)
        queue = [settings.PODLIFE_DEPLOYMENT]
        workers = [Worker(env, f"w{i}", tmp_path, queue) for i in (1, 2)]
        try:
            armed = tasks.rearm_watches(["pods"])
            assert sorted(armed) == [f"{name}/pods" for name in FLEET]

            def watching() -> list[int]:
                return [s._httpd.open_watches() for s in servers.values()]  # type: ignore[attr-defined]

            def run_for(seconds: float) -> None:
                """Let the clusters churn; meanwhile one chain at a time per cluster, as beat would
                re-arm only dead ones."""
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    assert max(watching()) <= 1, watching()
                    tasks.rearm_watches(["pods"])  # what beat does every 30 s: a no-op while leases live
                    time.sleep(0.2)

            run_for(6)
            workers.append(Worker(env, "w3", tmp_path, queue))  # joins mid-run
            run_for(8)
            leaving = workers[0]
            os.killpg(leaving.proc.pid, signal.SIGTERM)  # warm shutdown: the step in hand ends first
            leaving.proc.wait(30)
            run_for(8)

            for server in servers.values():
                server.pause()  # type: ignore[attr-defined]
            for name, server in servers.items():
                cluster = server.cluster  # type: ignore[attr-defined]
                with cluster.engine.lock:
                    live = {p["metadata"]["uid"] for p in cluster.store.iter_objects("pods")}
                wait_for(lambda n=name, u=live: stored(n, Kind.POD) >= u, f"{name}'s live pods", timeout=60)
                # Every pod stored that no longer runs has its deletion stored: none lost on the way.
                wait_for(
                    lambda n=name, u=live: stored(n, Kind.POD) - u <= stored(n, Kind.POD_DELETED),
                    f"{name}'s deletions",
                    timeout=60,
                )
                assert len(stored(name, Kind.POD_DELETED)) >= 20  # the churn really ran
                state = CollectorState.objects.get(cluster__name=name, resource="pods")
                assert state.relists_total == 1  # the first list only: every later step resumed
                assert not rows_of(name, source="synthetic")
            assert steps_run(workers[-1]) > 0, "the worker that joined took no step"
            assert sum(steps_run(w) for w in workers[1:]) > 0
        finally:
            for worker in workers:
                worker.kill()
            backend.redis.delete(*QUEUE_KEYS)
            connection.close()
