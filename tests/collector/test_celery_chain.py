"""A real Celery worker on Redis, killed with SIGKILL mid-step: nothing is lost, one chain lives on.

The worker is a subprocess. It must write to the database this test reads, so the test runs with
``transaction=True`` (the worker's commits are visible here and nothing is held in a test transaction)
and hands the worker the test database's name in DATABASE_URL. The demo cluster runs in this process;
the worker reaches it over loopback through the kubeconfig given in PODLIFE_KUBECONFIG.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection

from collectors import tasks
from collectors.kube import config, lease
from collectors.models import CollectorState
from tests.stored import rows_of
from tests.waits import wait_for
from timelines.lifecycle.observation import Kind

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "podlife-demo"  # the demo kubeconfig's context, which names the cluster
QUEUE_KEYS = ("celery", "unacked", "unacked_index", "unacked_mutex")

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]


def stored_uids(kind: str) -> set[str]:
    return {o.pod_uid for o in rows_of(CLUSTER, kinds=[kind])}


@pytest.fixture
def worker_env(make_sim, monkeypatch, tmp_path) -> Iterator[tuple[dict[str, str], object]]:
    sim = make_sim("mixed", advance=25)
    config.unregister_cluster("sim")  # this test's cluster comes from settings, as a worker's does
    db = connection.settings_dict
    url = urlsplit(os.environ["DATABASE_URL"])
    test_db_url = urlunsplit((url.scheme, url.netloc, "/" + db["NAME"], url.query, url.fragment))
    knobs = {
        "PODLIFE_KUBECONFIG": str(sim.kubeconfig),
        "PODLIFE_KUBE_CONTEXTS": CLUSTER,
        "PODLIFE_WATCH_TIMEOUT_S": "2",
        "PODLIFE_WATCH_LEASE_S": "4",
        "PODLIFE_KUBELET_METRICS": "0",
        "PODLIFE_KUBELET_LOGS": "0",
    }
    # This process arms chains, so it reads the same clusters as the worker does from its environment.
    settings_in_process = {
        "PODLIFE_KUBECONFIG": str(sim.kubeconfig),
        "PODLIFE_KUBE_CONTEXTS": [CLUSTER],
        "PODLIFE_WATCH_TIMEOUT_S": 2,
        "PODLIFE_WATCH_LEASE_S": 4.0,
        "PODLIFE_KUBELET_METRICS": False,
        "PODLIFE_KUBELET_LOGS": False,
    }
    for key, value in settings_in_process.items():
        monkeypatch.setattr(settings, key, value)
    env = {**os.environ, **knobs, "DATABASE_URL": test_db_url, "REDIS_URL": settings.REDIS_URL}
    backend = lease.leases()
    assert isinstance(backend, lease.RedisLeases)
    backend.redis.delete(*QUEUE_KEYS)
    yield env, sim
    backend.redis.delete(*QUEUE_KEYS)


class Worker:
    """A Celery worker subprocess (``--pool=solo``); ``queues`` limits what it consumes (default: both
    queues, the deployment's own and ``<deployment>.derive``)."""

    def __init__(
        self,
        env: dict[str, str],
        name: str,
        log_dir: Path,
        queues: list[str] | None = None,
        pool: str = "solo",
        start_timeout: float = 30.0,
    ) -> None:
        self.log_path = log_dir / f"{name}.log"
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "podlife_site",
                "worker",
                f"--pool={pool}",
                "-n",
                f"{name}@%h",
                "-l",
                "info",
                "--without-mingle",
                "--without-gossip",
                "--without-heartbeat",
                *(["-Q", ",".join(queues)] if queues else []),
            ],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: SIGKILL takes everything it started
        )
        wait_for(lambda: b"ready." in self.log_path.read_bytes(), f"worker {name} to start", start_timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()

    def stop(self) -> None:
        """A warm shutdown (SIGTERM), or a kill when it takes more than 20 s."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(20)
        self.kill()


@pytest.mark.django_db(transaction=True)
def test_worker_killed_mid_step_loses_nothing_and_one_chain_stays_live(worker_env, tmp_path):
    """GIVEN a watch chain on a real worker WHEN the worker is SIGKILLed while a watch request is open,
    and pods are created and deleted while no worker runs THEN the beat cannot arm a second chain while
    the dead chain's lease lives; once it expires the re-armed chain on a new worker resumes from the
    stored resourceVersion (no relist), every pod and deletion is stored, and exactly one chain is live."""
    env, sim = worker_env
    open_watches = sim.server._httpd.open_watches
    # Watch workers only: a solo worker that also ran derive tasks would leave the chain's next step (and
    # its lease renewal) queued behind them; deployments run derive workers apart (docs/collector.md).
    watch_queue = [settings.PODLIFE_DEPLOYMENT]
    workers = [Worker(env, "first", tmp_path, watch_queue)]
    try:
        assert tasks.rearm_watches(["pods"]) == [f"{CLUSTER}/pods"]
        first_token = lease.leases().holder(lease.watch_key(CLUSTER, "pods"))
        wait_for(lambda: stored_uids(Kind.POD) >= sim.uids("pods"), "the list")
        early = sim.spawn(2)
        wait_for(lambda: stored_uids(Kind.POD) >= early, "watched pods")
        wait_for(lambda: open_watches() == 1, "a watch request in flight")

        workers[0].kill()  # mid-step: the watch request is open
        # Asked at once: a worker's start-up under load can outlast the lease's few seconds.
        assert tasks.rearm_watches(["pods"]) == []  # the dead chain's lease still lives
        reached = CollectorState.objects.get(cluster__name=CLUSTER, resource="pods").resource_version

        created = sim.spawn(3)
        victim = sorted(early)[0]
        sim.remove(victim)
        sim.advance(2)

        workers.append(Worker(env, "second", tmp_path, watch_queue))
        wait_for(
            lambda: lease.leases().holder(lease.watch_key(CLUSTER, "pods")) is None,
            "the dead chain's lease to expire",
        )
        assert tasks.rearm_watches(["pods"]) == [f"{CLUSTER}/pods"]
        token = lease.leases().holder(lease.watch_key(CLUSTER, "pods"))
        assert token and token != first_token

        wait_for(
            lambda: stored_uids(Kind.POD) >= created | sim.uids("pods"), "pods created while no worker ran"
        )
        wait_for(lambda: victim in stored_uids(Kind.POD_DELETED), "the deletion made while no worker ran")

        def pods_state() -> CollectorState:
            return CollectorState.objects.get(cluster__name=CLUSTER, resource="pods")

        # The version is saved just after what it covers is stored.
        wait_for(lambda: int(pods_state().resource_version) > int(reached), "the version to move on")
        assert pods_state().relists_total == 1  # resumed from the stored version: no second list
        assert not rows_of(CLUSTER, source="synthetic")
        # Exactly one live chain: never two watch requests, the same lease holder, re-arming refused.
        for _ in range(30):
            assert open_watches() <= 1
            assert lease.leases().holder(lease.watch_key(CLUSTER, "pods")) == token
            time.sleep(0.1)  # an invariant sampled while the chain runs for 3 s, not a wait for something
        assert tasks.rearm_watches(["pods"]) == []
        assert pods_state().lease_owner == token
    finally:
        for worker in workers:
            worker.kill()
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_worker_sized_by_its_settings_runs_every_watch_chain_at_once(worker_env, monkeypatch, tmp_path):
    """GIVEN one cluster and a prefork worker started without ``--concurrency`` (the settings size its
    pool from the clusters) WHEN beat arms every watch chain THEN all of them hold a watch request open at
    the same time: no chain waits in the queue behind the others (issue #15: 4 processes for 8 chains)."""
    from collectors.kube.resources import ALL_RESOURCES

    env, sim = worker_env
    # Steps long enough that a chain spends nearly all its time in its watch request.
    env = {**env, "PODLIFE_WATCH_TIMEOUT_S": "15", "PODLIFE_WATCH_LEASE_S": "60"}
    monkeypatch.setattr(settings, "PODLIFE_WATCH_TIMEOUT_S", 15)
    monkeypatch.setattr(settings, "PODLIFE_WATCH_LEASE_S", 60.0)
    open_watches = sim.server._httpd.open_watches
    worker = Worker(env, "sized", tmp_path, [settings.PODLIFE_DEPLOYMENT], pool="prefork")
    try:
        log = worker.log_path.read_text()
        assert f"concurrency: {len(ALL_RESOURCES) + 4} (prefork)" in log, log
        armed = tasks.rearm_watches()
        assert sorted(armed) == sorted(f"{CLUSTER}/{r}" for r in ALL_RESOURCES)
        wait_for(
            lambda: open_watches() == len(ALL_RESOURCES),
            f"all {len(ALL_RESOURCES)} watch requests open at once",
            timeout=90,
        )
    finally:
        worker.kill()
        for resource in ALL_RESOURCES:
            lease.leases().redis.delete(lease.watch_key(CLUSTER, resource))
        connection.close()
