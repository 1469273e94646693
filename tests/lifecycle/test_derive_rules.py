"""Rules of the timeline's assembly (timelines/lifecycle/derive.py): its identity, how a lane is settled,
its markers. Lines are SYNTHETIC unless a test names a real fixture: written in the kubelet's own message
formats (k8s-facts.md), through the parser as `ingest_kubelet_log` reads them."""

from __future__ import annotations

from datetime import UTC

from collectors.parsers.kubelet_log import KubeletLogParser
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.observation import Observation

UID = "8bb7de3e-72f0-4102-adbd-53897040775e"


def parsed(*lines: str, node: str = "node-a") -> list[Observation]:
    parser = KubeletLogParser(node=node, year=2025, tz=UTC)
    out: list[Observation] = []
    for line in lines:
        out.extend(parser.feed(line))
    out.extend(parser.close())
    return out


def test_a_pod_logged_without_a_namespace_is_named_and_no_namespace_is_made_up() -> None:
    """klog's KObj prints a pod whose namespace is empty as its bare name (`pod="web-1"`): the timeline
    is named web-1, and its namespace stays unknown rather than being read out of a reference that has
    none (SYNTHETIC lines, V4 SyncPod formats)."""
    tl = derive_pod_timeline(
        parsed(
            f'I0318 10:21:19.149698     206 kubelet.go:1888] "SyncPod enter" pod="web-1" podUID="{UID}"',
            f'I0318 10:21:19.249698     206 kubelet.go:1888] "SyncPod exit" pod="web-1" podUID="{UID}" '
            "isTerminal=false",
        )
    )
    assert (tl.namespace, tl.name) == (None, "web-1")
