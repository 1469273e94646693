"""Helpers shared by the export tests."""

from __future__ import annotations

import io
from typing import Any

import orjson

from dashboard.export import Scope, export_incident
from dashboard.export.bundle import canonical_observation
from tests.export.conftest import SINCE, UNTIL
from tests.stored import count_of
from timelines.models import Cluster, Finding, Interval, Marker, Pod


def export_json(cluster: Cluster, scope: Scope | None = None, **kwargs: Any) -> bytes:
    buf = io.BytesIO()
    export_incident(cluster, scope or Scope.one("node", "node-a"), SINCE, UNTIL, "json", buf, **kwargs)
    return buf.getvalue()


def row_counts() -> dict[str, int]:
    counts = {m.__name__: m.objects.count() for m in (Cluster, Pod, Interval, Marker, Finding)}
    return {**counts, "Observation": count_of(None)}


def normalized_pods(bundle: dict[str, Any]) -> dict[str, Any]:
    """Pods keyed by UID, the cluster name dropped (evidence cites dedupe keys, the same in any database)."""
    out = {}
    for tl in bundle["pods"]:
        tl = orjson.loads(orjson.dumps(tl))
        tl.pop("cluster")
        out[tl["pod"]["uid"]] = tl
    return out


def finding_rows(bundle: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            f["subject"],
            f["subject_name"],
            f["pod_uid"],
            f["kind"],
            f["severity"],
            f["start"],
            f["end"],
            f["message"],
        )
        for f in bundle["findings"]
    )


def observation_rows(bundle: dict[str, Any]) -> list[bytes]:
    return [canonical_observation(o) for o in bundle["observations"]]
