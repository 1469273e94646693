"""The one-way flow for tests that need derived rows: store (which marks keys dirty), then run the derive
stage here until nothing is dirty (as a Celery worker would, or the embedded default does on commit)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from timelines import derivation, store
from timelines.lifecycle.observation import AnyObservation
from timelines.models import Cluster


def ingest(
    cluster: Cluster | str,
    observations: Iterable[AnyObservation | Mapping[str, Any]],
    *,
    now: datetime | None = None,
) -> store.SaveResult:
    result = store.save_observations(cluster, observations)
    derivation.drain(now=now)
    return result
