"""Bulk-made derived rows for scale tests and benchmarks (no observations: the charts read derived rows)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from tests.stored import put
from timelines.models import Cluster, Finding, Interval, Marker, Pod

DAY0 = datetime(2024, 6, 7, tzinfo=UTC)


def make_pods(
    cluster: Cluster,
    *,
    pods: int,
    namespace: str = "big",
    nodes: int = 100,
    span: timedelta = timedelta(days=1),
    seed: int = 7,
) -> list[str]:
    """``pods`` pods, each setup → terminating → cleanup (every fifth one inferred), an event, and a finding
    on every fiftieth, spread over ``span`` from DAY0; returns their UIDs."""
    rnd = random.Random(seed)
    pod_rows, intervals, markers, findings = [], [], [], []
    uids = []
    for i in range(pods):
        uid = f"bulk-{namespace}-{i:06d}"
        uids.append(uid)
        node = f"node-{i % nodes:04d}"
        start = DAY0 + timedelta(seconds=rnd.uniform(0, span.total_seconds() * 0.9))
        setup_end = start + timedelta(seconds=rnd.uniform(60, 3600))
        term_end = setup_end + timedelta(seconds=rnd.uniform(1, 40))
        clean_end = term_end + timedelta(seconds=rnd.uniform(0.1, 5))
        source = "inferred" if i % 5 == 0 else "observed"
        common = {"cluster": cluster, "pod_uid": uid, "node": node, "namespace": namespace}
        pod_rows.append(
            Pod(
                cluster=cluster,
                uid=uid,
                namespace=namespace,
                name=f"job-{i:06d}",
                node=node,
                owner_kind="ReplicaSet",
                owner_name=f"rs-{i % 40}",
                owner_uid=f"rs-uid-{i % 40}",
                phase="Succeeded",
                created_at=start,
                deleted_at=clean_end,
                first_seen=start,
                last_seen=clean_end,
            )
        )
        for state, s, e in (
            ("setup", start, setup_end),
            ("terminating", setup_end, term_end),
            ("cleanup", term_end, clean_end),
        ):
            intervals.append(
                Interval(lane="worker", state=state, start=s, end=e, source=source, evidence=[i], **common)
            )
        markers.append(
            Marker(at=start, kind="event", reason="Scheduled", message="assigned", evidence=[i], **common)
        )
        if i % 50 == 0:
            findings.append(
                Finding(
                    kind="slow_cleanup",
                    severity="warning",
                    message="slow",
                    start=term_end,
                    end=clean_end,
                    subject="pod",
                    subject_name=f"{namespace}/job-{i:06d}",
                    evidence=[i],
                    **common,
                )
            )
    Pod.objects.bulk_create(pod_rows, batch_size=2000)
    Interval.objects.bulk_create(intervals, batch_size=2000)
    Marker.objects.bulk_create(markers, batch_size=2000)
    Finding.objects.bulk_create(findings, batch_size=2000)
    return uids


def make_node_pods(cluster: Cluster, *, pods: int, node: str = "node-busy", seed: int = 11) -> list[str]:
    """``pods`` pods on one ``node`` with every kind of row a node timeline answers: the worker, api,
    container and condition lanes (some still open), several markers each (a few outside the window's
    pods: markers of a pod with findings only are not sent), findings on every seventh pod (and a pod with
    findings only), pods in two namespaces, the node's own lanes, a few pods moved from another node, kubelet
    evidence for the freshness annotation, and a non-ASCII, quoted message; returns the UIDs, in no order.
    Every time is distinct within a pod, so the answer's order is fully determined."""
    rnd = random.Random(seed)
    pod_rows, intervals, markers, findings, observations = [], [], [], [], []
    uids = []
    for i in range(pods):
        uid = f"{rnd.getrandbits(32):08x}-{i:04x}-4000-8000-{rnd.getrandbits(48):012x}"
        uids.append(uid)
        namespace = "default" if i % 3 else "kube-system"
        pod_node = node if i % 23 else "node-other"  # a pod moved: its Pod row names another node
        start = DAY0 + timedelta(seconds=rnd.uniform(0, 80_000), microseconds=i)
        t = [start + timedelta(seconds=k * rnd.uniform(1, 60)) for k in range(1, 9)]
        is_open = i % 4 == 0
        common = {"cluster": cluster, "pod_uid": uid, "node": node, "namespace": namespace}
        pod_rows.append(
            Pod(
                cluster=cluster,
                uid=uid,
                namespace=namespace,
                name=f"web-{i % 400:03d}" if i % 2 else f"job-{i:05d}",
                node=pod_node,
                owner_kind="ReplicaSet" if i % 5 else "",
                owner_name=f"web-{i % 7}" if i % 5 else "",
                owner_uid=f"rs-{i % 7}" if i % 5 else "",
                phase="Running" if is_open else "Succeeded",
                created_at=start,
                deleted_at=None if is_open else t[7],
                first_seen=start,
                last_seen=t[7] + timedelta(seconds=300 if i % 6 == 0 else 1),
            )
        )
        lanes = [
            ("worker", "setup", 0, 1, "observed"),
            ("worker", "running", 1, 5, "observed" if i % 5 else "inferred"),
            ("worker", "terminating", 5, 6, "observed"),
            ("worker", "cleanup", 6, None if is_open else 7, "observed"),
            ("api", "pending", 0, 1, "inferred"),
            ("api", "running", 1, 6, "inferred"),
            ("api", "terminating", 6, None if is_open else 7, "inferred"),
            ("container:app", "waiting", 0, 2, "inferred"),
            ("container:app", "running", 2, 6, "inferred"),
            ("condition:Ready", "true", 2, 6, "inferred"),
            ("condition:ContainersReady", "true", 2, 6, "inferred"),
        ]
        for k, (lane, state, s, e, source) in enumerate(lanes):
            ev = [i * 20 + k, i * 20 + k + 1] if k % 3 else [i * 20 + k]
            intervals.append(
                Interval(
                    lane=lane,
                    state=state,
                    start=t[s] + timedelta(microseconds=k),
                    end=None if e is None else t[e],
                    source=source,
                    evidence=ev,
                    **common,
                )
            )
        for k, (reason, message) in enumerate(
            [("Scheduled", "assigned"), ("Pulled", 'image "web:1" — ok'), ("Killing", "grace 30s")]
        ):
            markers.append(
                Marker(
                    at=t[k * 2] + timedelta(microseconds=k + 1),
                    kind="event" if k < 2 else "kubelet",
                    reason=reason,
                    message=message,
                    evidence=[i * 20 + 11 + k],
                    **common,
                )
            )
        if i % 7 == 0:
            for k, kind in enumerate(("slow_cleanup", "grace_exceeded")):
                findings.append(
                    Finding(
                        kind=kind,
                        severity="warning" if k else "error",
                        message=f"pod {i}: slow — {kind}",
                        start=t[5 + k],
                        end=None if is_open else t[7],
                        subject="pod",
                        subject_name=f"{namespace}/pod-{i}",
                        evidence=[i * 20 + 15],
                        **common,
                    )
                )
        if i % 11 == 0:
            observations.append(
                {
                    "pod_uid": uid,
                    "kind": "worker",
                    "source": "kubelet-log",
                    "observed_at": t[7],
                    "received_at": t[7],
                    "dedupe_key": f"bulk-worker-{uid}",
                    "node": pod_node,
                    "namespace": namespace,
                    "name": f"pod-{i}",
                    "payload": {},
                }
            )
    # A pod with findings only (its markers are not sent), and one with markers only (not sent at all).
    for uid, with_finding in ((f"findings-only-{seed}", True), (f"markers-only-{seed}", False)):
        uids.append(uid)
        common = {"cluster": cluster, "pod_uid": uid, "node": node, "namespace": "default"}
        pod_rows.append(Pod(cluster=cluster, uid=uid, namespace="default", name=uid, node=node))
        markers.append(
            Marker(at=DAY0 + timedelta(seconds=5), kind="event", reason="Seen", message="", **common)
        )
        if with_finding:
            findings.append(
                Finding(
                    kind="never_started",
                    severity="info",
                    message="n",
                    start=DAY0 + timedelta(seconds=9),
                    subject="pod",
                    subject_name=uid,
                    **common,
                )
            )
    for k, (lane, state) in enumerate((("node:ready", "ready"), ("node:cordoned", "cordoned"))):
        intervals.append(
            Interval(
                cluster=cluster,
                pod_uid=None,
                node=node,
                lane=lane,
                state=state,
                start=DAY0 + timedelta(seconds=k),
                end=None,
                source="observed",
                evidence=[k],
            )
        )
    Pod.objects.bulk_create(pod_rows, batch_size=2000)
    Interval.objects.bulk_create(intervals, batch_size=2000)
    Marker.objects.bulk_create(markers, batch_size=2000)
    Finding.objects.bulk_create(findings, batch_size=2000)
    put(cluster, observations)
    return uids
