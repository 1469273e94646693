"""Bulk-made derived rows for scale tests and benchmarks (no observations: the charts read derived rows)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

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
