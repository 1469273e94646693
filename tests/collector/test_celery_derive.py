"""The derive stage on two real Celery workers, one SIGKILLed while it holds claims: nothing dirty is
forgotten, nothing is derived twice at once, every pod ends as one derivation of all its observations.

As in test_celery_chain.py the workers are subprocesses writing to this test's database (hence
``transaction=True``) through the broker in REDIS_URL. The claim expiry is short (PODLIFE_DERIVE_CLAIM_S=3)
so the dead worker's keys come back quickly; this test queues the derive task every second, as the beat
does every five.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pytest
from django.db import connection
from django.db.models import Count
from django.utils import timezone

from tests.lifecycle.factories import ctr, pod
from tests.waits import wait_for
from timelines import store
from timelines.derivation import thresholds_from_settings
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation
from timelines.models import DirtyBatch, DirtyKey, Interval, Pod
from timelines.tasks import derive_dirty_task

from .test_celery_chain import QUEUE_KEYS, Worker

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
PODS = 1500


def history(uid: str, name: str) -> list[Observation]:
    running = [ctr("app", "running", started=5.0, ready=True)]
    return [
        pod(uid, 1, 1.0, name=name, phase="Pending"),
        pod(uid, 2, 6.0, name=name, phase="Running", start_time=1.0, containers=running),
        pod(uid, 3, 9.0, name=name, phase="Running", start_time=1.0, containers=running, deletion=10.0),
        pod(uid, 4, 30.0, name=name, phase="Succeeded", start_time=1.0, deleted=True),
    ]


@pytest.fixture
def derive_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from urllib.parse import urlsplit, urlunsplit

    from django.conf import settings

    from collectors.kube import lease

    url = urlsplit(os.environ["DATABASE_URL"])
    test_db = urlunsplit(
        (url.scheme, url.netloc, "/" + connection.settings_dict["NAME"], url.query, url.fragment)
    )
    backend = lease.leases()
    assert isinstance(backend, lease.RedisLeases)
    queues = (*QUEUE_KEYS, settings.PODLIFE_DEPLOYMENT, f"{settings.PODLIFE_DEPLOYMENT}.derive")
    backend.redis.delete(*queues, f"{settings.PODLIFE_DEPLOYMENT}:derive:pending")
    return {
        **os.environ,
        "DATABASE_URL": test_db,
        "REDIS_URL": settings.REDIS_URL,
        "PODLIFE_DERIVE_CLAIM_S": "3",
        "PODLIFE_DERIVE_BATCH": "25",
    }


@pytest.mark.django_db(transaction=True)
def test_two_workers_and_a_sigkill_lose_nothing_and_double_nothing(derive_env, tmp_path):
    """GIVEN 1,500 dirty pods and two derive workers WHEN one is SIGKILLed while it holds claimed keys
    THEN its keys stay claimed (no one derives them beside it) until the claim expires, the other worker
    takes them over, nothing stays dirty, and no pod has an interval twice or differs from one
    derivation of all its observations."""
    uids = [f"00000000-0000-4000-9000-{i:012d}" for i in range(PODS)]
    workers = [Worker(derive_env, "derive-a", tmp_path), Worker(derive_env, "derive-b", tmp_path)]
    try:
        # Stored as a collector stores: the commit queues the derive stage, the workers take it from there.
        store.save_observations("sigkill", [o for i, u in enumerate(uids) for o in history(u, f"job-{i}")])
        derive_dirty_task.apply_async()
        victim = workers[0]
        mark = f":{victim.proc.pid}:"
        # Frozen first (SIGSTOP), so that what it holds cannot change between the look and the kill: a
        # worker seen holding claims can finish its batch before a SIGKILL lands, between two batches.
        held: set[int] = set()
        for _attempt in range(50):
            wait_for(
                lambda: DirtyKey.objects.filter(claimed_by__contains=mark).exists(),
                "the first worker to hold claimed keys",
                timeout=60,
            )
            os.kill(victim.proc.pid, signal.SIGSTOP)
            held = set(DirtyKey.objects.filter(claimed_by__contains=mark).values_list("id", flat=True))
            if held:
                break
            os.kill(victim.proc.pid, signal.SIGCONT)  # stopped between two batches: look again
        victim.kill()
        assert held, "the worker was never stopped while it held claimed keys: what this test is about"
        # The survivor goes on, but not with the dead worker's keys while their claim lives: watched until
        # every one of those claims has ended, a key seen taken (claimed by another, or derived and gone)
        # must have been seen so only at or after its own claimed_until.
        until = dict(DirtyKey.objects.filter(id__in=held).values_list("id", "claimed_until"))
        assert set(until) == held
        while True:
            still = set(
                DirtyKey.objects.filter(id__in=held, claimed_by__contains=mark).values_list("id", flat=True)
            )
            now = timezone.now()  # read after the query: the look was at or before it
            early = sorted(i for i in held - still if now < until[i])
            assert not early, f"keys of the killed worker taken while its claim lived: {early[:5]}"
            if now >= max(until.values()):
                break
            time.sleep(0.05)  # the poll's interval; the loop ends when the last claim has expired (3 s)

        def settled() -> bool:
            derive_dirty_task.apply_async()  # as the beat does
            return not DirtyKey.objects.exists() and not DirtyBatch.objects.exists()

        wait_for(settled, "every dirty key derived", timeout=120)
    finally:
        for worker in workers:
            worker.kill()
        connection.close()

    assert Pod.objects.filter(cluster__name="sigkill").count() == PODS
    doubled = (
        Interval.objects.filter(cluster__name="sigkill")
        .values("pod_uid", "lane", "start")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not doubled.exists(), list(doubled[:5])
    thresholds = thresholds_from_settings()
    expected = derive_pod_timeline(history(uids[0], "job-0"), thresholds=thresholds)
    want = Counter({lane: len(ivs) for lane, ivs in expected.lanes.items() if ivs})
    counts: dict[str, Counter[str]] = {}
    for u, lane in Interval.objects.filter(cluster__name="sigkill").values_list("pod_uid", "lane"):
        counts.setdefault(u, Counter())[lane] += 1
    assert set(counts) == set(uids)
    assert all(c == want for c in counts.values()), next(u for u, c in counts.items() if c != want)
