"""One live watch chain per (cluster, resource): the lease rules around ``run_step``.

A chain is a sequence of steps that hand a lease token along. ``arm`` starts a chain only when no lease
is held (SET NX); ``chain_step`` renews the lease before the step and while it runs, and ends the chain
(returns None) when the token no longer owns the lease: the chain died (its worker was killed, its lease
expired) and a newer chain was armed, or it was stopped. So a re-delivered message of a dead chain can
never run beside the live one. Celery (``collectors/tasks.py``) and the foreground runner
(``collectors/kube/runner.py``) both use these functions; tests drive them without Celery.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from collectors.kube import lease, state
from collectors.kube.config import Tunables
from collectors.kube.stream import backoff_delay
from collectors.kube.watch import StepControl, StepResult, run_step
from timelines import store
from timelines.models import Cluster

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NextStep:
    cluster: str
    resource: str
    resource_version: str
    lease_token: str
    attempt: int  # consecutive failed steps (0 after a good one)
    delay: float  # seconds to wait before the next step (jittered backoff after a failure)


def arm(cluster: str, resource: str, *, tunables: Tunables | None = None) -> str | None:
    """Take the lease of (cluster, resource) for a new chain; its token, or None when a chain is live."""
    tunables = tunables or Tunables.from_settings()
    token = lease.new_token()
    if not lease.leases().acquire(lease.watch_key(cluster, resource), token, tunables.lease_ttl_s):
        return None
    _note_lease(cluster, resource, token, tunables.lease_ttl_s)
    log.info("%s/%s: armed a watch chain (lease %s)", cluster, resource, token)
    return token


def chain_step(
    cluster: str,
    resource: str,
    resource_version: str,
    lease_token: str,
    attempt: int = 0,
    *,
    tunables: Tunables | None = None,
) -> tuple[StepResult | None, NextStep | None]:
    """Run one step of the chain holding ``lease_token``; returns (result, what to schedule next or None)."""
    tunables = tunables or Tunables.from_settings()
    leases = lease.leases()
    key = lease.watch_key(cluster, resource)
    if not leases.renew(key, lease_token, tunables.lease_ttl_s):
        log.info("%s/%s: lease %s is no longer held; this chain ends", cluster, resource, lease_token)
        return None, None

    def heartbeat() -> bool:
        return leases.renew(key, lease_token, tunables.lease_ttl_s)

    try:
        result = run_step(
            cluster,
            resource,
            resource_version,
            control=StepControl(heartbeat=heartbeat, tunables=tunables),
        )
    except LookupError as exc:  # the cluster is no longer configured: end quietly
        log.warning("%s/%s: %s; ending the chain", cluster, resource, exc)
        leases.release(key, lease_token)
        return None, None
    if result.error and result.error.startswith("lease lost"):
        return result, None
    attempt = 0 if result.ok else attempt + 1
    delay = backoff_delay(attempt, base=tunables.backoff_base_s, cap=tunables.backoff_cap_s)
    # The lease must outlive the wait before the next step, or the beat would re-arm a healthy chain.
    if not leases.renew(key, lease_token, tunables.lease_ttl_s + delay):
        return result, None
    _note_lease(cluster, resource, lease_token, tunables.lease_ttl_s + delay)
    return result, NextStep(cluster, resource, result.resource_version, lease_token, attempt, delay)


def stop(cluster: str, resource: str, lease_token: str) -> bool:
    """Release the lease (the chain's next step will find it gone and end)."""
    released = lease.leases().release(lease.watch_key(cluster, resource), lease_token)
    if released:
        found = Cluster.objects.filter(name=cluster).first()
        if found is not None:
            state.clear_lease(found, resource, lease_token)
    return released


def _note_lease(cluster: str, resource: str, token: str, ttl_s: float) -> None:
    found = store.cluster_for(cluster)
    state.set_lease(found, resource, token, timezone.now() + timedelta(seconds=ttl_s))
