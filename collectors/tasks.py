"""Celery tasks of the collector. Each is a few lines around ``collectors/kube`` functions.

* ``watch_step(cluster, resource, resource_version, lease_token, attempt)``: one bounded watch request
  (or a list), then it chains the next step with ``apply_async`` (after a jittered backoff on failure).
  The lease token it carries keeps exactly one live chain per (cluster, resource).
* ``rearm_watches()`` (beat, every 30 s): arms a chain for every configured (cluster,
  resource) whose lease has expired: never started, stopped, or its worker died mid-step.
* ``schedule_kubelet_pulls()`` (beat) fans out ``pull_kubelet(cluster, what)`` per cluster.

The pipeline's own upkeep (partitions ahead, retention) is the timelines app's (``timelines/tasks.py``).

The beat schedule is declared in settings (``CELERY_BEAT_SCHEDULE``). On the embedded
default tasks run eagerly in the caller's process, where a chain would recurse into itself; there
``watch_step`` runs its one step and returns, and ``rearm_watches`` starts the in-process background
collector (``collectors/kube/runner.py``) instead of chains.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app

from collectors.kube import chain, kubelet, lease, runner
from collectors.kube.config import Tunables, configured_clusters
from collectors.kube.resources import ALL_RESOURCES
from podlife_site.celery_types import task

log = logging.getLogger(__name__)


def _eager() -> bool:
    return bool(current_app.conf.task_always_eager)


@task(name="collectors.watch_step", ignore_result=True, acks_late=True)
def watch_step(
    cluster: str, resource: str, resource_version: str = "", lease_token: str = "", attempt: int = 0
) -> dict[str, Any] | None:
    if not lease_token:  # a bare call (e.g. from the shell): arm a chain first
        lease_token = chain.arm(cluster, resource) or ""
        if not lease_token:
            log.info("%s/%s: a watch chain is already live", cluster, resource)
            return None
    result, following = chain.chain_step(cluster, resource, resource_version, lease_token, attempt)
    if following is None:
        return None
    if _eager():
        return {"resource_version": following.resource_version, "ok": result.ok if result else False}
    watch_step.apply_async(
        (cluster, resource, following.resource_version, following.lease_token, following.attempt),
        countdown=following.delay or None,
    )
    return None


@task(name="collectors.rearm_watches", ignore_result=True)
def rearm_watches(resources: list[str] | None = None) -> list[str]:
    """Arm a chain for every configured (cluster, resource) without a live lease; returns what was armed."""
    clusters = configured_clusters()
    if _eager():
        runner.ensure_background(clusters)
        return []
    armed = []
    for cluster in clusters:
        for resource in resources or ALL_RESOURCES:
            token = chain.arm(cluster, resource)
            if token:
                watch_step.apply_async((cluster, resource, "", token, 0))
                armed.append(f"{cluster}/{resource}")
    if armed:
        log.info("armed watch chains: %s", ", ".join(armed))
    return armed


@task(name="collectors.schedule_kubelet_pulls", ignore_result=True)
def schedule_kubelet_pulls() -> None:
    for name, source in configured_clusters().items():
        if source.kubelet_metrics:
            pull_kubelet.delay(name, "metrics")
        if source.kubelet_logs:
            pull_kubelet.delay(name, "logs")


@task(name="collectors.pull_kubelet", ignore_result=True)
def pull_kubelet(cluster: str, what: str) -> None:
    """One pull of kubelet ``metrics`` or ``logs`` from every node of ``cluster`` (never two at once)."""
    pull = {"metrics": kubelet.pull_kubelet_metrics, "logs": kubelet.pull_kubelet_logs}.get(what)
    if pull is None:
        log.error("pull_kubelet: unknown pull %r (expected metrics or logs)", what)
        return
    leases = lease.leases()
    key = lease.pull_key(cluster, what)
    token = lease.new_token()
    if not leases.acquire(key, token, Tunables.from_settings().kubelet_interval_s * 5):
        return  # the previous pull is still running
    try:
        pull(cluster)
    except LookupError as exc:  # the cluster is no longer configured
        log.warning("pull_kubelet: %s", exc)
    finally:
        leases.release(key, token)
