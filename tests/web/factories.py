"""Observation sets for the dashboard tests: the lifecycle scenarios, moved to any pod / node / time."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime, timedelta
from typing import Any

from tests.lifecycle import scenarios
from timelines.lifecycle.observation import Observation
from timelines.lifecycle.timeline import format_time

HOSTILE = "<img src=x onerror=alert(1)>"
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?\+00:00$")


def _shift(value: Any, delta: timedelta, swap: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _shift(v, delta, swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_shift(v, delta, swap) for v in value]
    if isinstance(value, str):
        if _ISO.match(value):
            return format_time(datetime.fromisoformat(value) + delta)
        return swap.get(value, value)
    return value


def retarget(
    observations: list[Observation],
    *,
    uid: str,
    name: str,
    namespace: str = "default",
    node: str = "node-a",
    shift: timedelta = timedelta(0),
) -> list[Observation]:
    """The same facts about another pod: new UID, name, namespace and node, times moved by ``shift``."""
    old = observations[0]
    swap = {
        old.pod_uid or "": uid,
        "web-1": name,
        "default": namespace,
        "node-a": node,
        "default/web-1": f"{namespace}/{name}",
    }
    out = []
    for o in observations:
        payload = _shift(o.payload, shift, swap)
        out.append(
            dataclasses.replace(
                o,
                pod_uid=uid if o.pod_uid else None,
                name=name if o.name else o.name,
                namespace=namespace if o.namespace else o.namespace,
                node=node if o.node else o.node,
                observed_at=o.observed_at + shift,
                dedupe_key=f"{uid}:{o.dedupe_key}",
                payload=payload,
            )
        )
    return out


def started_pod(uid: str, name: str, **kw: Any) -> list[Observation]:
    """A pod that started normally (API + kubelet lines)."""
    return retarget(scenarios.normal_start(), uid=uid, name=name, **kw)


def killed_during_setup(uid: str, name: str, **kw: Any) -> list[Observation]:
    """A pod deleted while its containers were still being created: carries findings."""
    return retarget(scenarios.delete_during_setup(), uid=uid, name=name, **kw)
