"""Audit benchmark: audit logs into the store, against baselines measured in the same run.

    python bench/audit.py [--pods 2000] [--batch 400] [--senders 4] [--runs 3]

1. File. A JSON Lines audit log of ``--pods`` pod lives as the policy in docs/audit.md records them (a
   controller's create and the scheduler's binding, kubelet status patches with the pod in the response,
   evictions refused then granted, PDB status writes, cordons, the kubelet's final delete: about 12 events
   and 2 KiB a pod) is read by ``AuditIngest`` (what ``manage.py ingest_audit_log`` runs: read, parse,
   store in batches of 5000, no re-derivation) into the real table. The baseline is a raw binary COPY
   (SQLite: executemany INSERT) of the same observation rows, prepared outside the clock, into an identical
   scratch table. Ratio = events/s read from the file / events/s the COPY takes (goal on PostgreSQL:
   >= 0.4). Median of ``--runs`` runs, each on a fresh cluster name.
2. Webhook. podlife's ASGI application under uvicorn (a subprocess, as deployed) takes the same kind of
   events as EventList batches of ``--batch`` events (the API server's default batch size) from
   ``--senders`` concurrent senders, which honour 429 + Retry-After as client-go does. Reported: the
   sustained events/s (first request to last answer) and the 429s, against the file path's events/s on
   the same events (the receiver re-derives what it stores; the file path does not).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _setup import ROOT, raw_copy_seconds, setup_django

os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-only-" + "x" * 50)
os.environ.setdefault("ALLOWED_HOSTS", "127.0.0.1")
setup_django(scratch_database=True)

import orjson  # noqa: E402
import requests  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from collectors.ingest_audit import AuditIngest  # noqa: E402
from collectors.models import IngestToken  # noqa: E402
from collectors.parsers.audit import parse_audit  # noqa: E402
from timelines import store  # noqa: E402
from timelines.models import Cluster  # noqa: E402
from timelines.writer import BATCH_SIZE  # noqa: E402

T0 = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _sec(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _event(
    verb: str,
    uri: str,
    user: dict[str, Any],
    ref: dict[str, Any],
    at: datetime,
    level: str,
    code: int,
    **extra: Any,
) -> dict[str, Any]:
    event = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": level,
        "auditID": str(uuid.uuid4()),
        "stage": "ResponseComplete",
        "requestURI": uri,
        "verb": verb,
        "user": user,
        "sourceIPs": ["192.168.10.5"],
        "userAgent": "kube-controller-manager/v1.30.2 (linux/amd64) kubernetes/3968350",
        "objectRef": ref,
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": _ts(at),
        "stageTimestamp": _ts(at + timedelta(microseconds=4321)),
        "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
    }
    event.update(extra)
    return event


def _pod(
    ns: str, name: str, uid: str, rv: int, created: datetime, node: str | None, phase: str, ready: bool
) -> dict[str, Any]:
    conditions = [
        {
            "type": t,
            "status": "True" if ready or t == "PodScheduled" else "False",
            "lastProbeTime": None,
            "lastTransitionTime": _sec(created),
        }
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    state = (
        {"running": {"startedAt": _sec(created)}}
        if phase == "Running"
        else {"waiting": {"reason": "ContainerCreating"}}
    )
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "generateName": name[:-5],
            "namespace": ns,
            "uid": uid,
            "resourceVersion": str(rv),
            "creationTimestamp": _sec(created),
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c4"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-7d9f8b6c4",
                    "uid": "5e0c8a1d-6b2f-4c3e-9d4a-1f2e3d4c5b6a",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "containers": [{"name": "app", "image": "registry.example/shop/web:1.4.2", "resources": {}}],
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "restartPolicy": "Always",
        },
        "status": {
            "phase": phase,
            "conditions": conditions,
            "startTime": _sec(created),
            "qosClass": "BestEffort",
            "containerStatuses": [
                {
                    "name": "app",
                    "state": state,
                    "lastState": {},
                    "ready": ready,
                    "restartCount": 0,
                    "image": "registry.example/shop/web:1.4.2",
                    "imageID": "",
                    "started": ready,
                }
            ],
        },
    }


def generate(pods: int, seed: int = 0) -> list[dict[str, Any]]:
    """Audit events of ``pods`` pod lives (about 12 events a pod), in time order."""
    events: list[dict[str, Any]] = []
    rv = 100_000 + seed * 10_000_000
    admin = {"username": "kubernetes-admin", "groups": ["kubeadm:cluster-admins", "system:authenticated"]}
    rs = {
        "username": "system:serviceaccount:kube-system:replicaset-controller",
        "groups": ["system:serviceaccounts", "system:authenticated"],
    }
    pdb_ctrl = {
        "username": "system:serviceaccount:kube-system:disruption-controller",
        "groups": ["system:serviceaccounts", "system:authenticated"],
    }
    for i in range(pods):
        ns, node = f"team-{i % 20}", f"node-{i % 50:03d}"
        name, uid = f"web-7d9f8b6c4-{i:05d}", str(uuid.UUID(int=(seed << 64) + i))
        kubelet = {"username": f"system:node:{node}", "groups": ["system:nodes", "system:authenticated"]}
        t = T0 + timedelta(seconds=i * 3.7, microseconds=seed)
        pod_ref = {"resource": "pods", "namespace": ns, "name": name, "apiVersion": "v1"}
        rv += 1
        events.append(
            _event(
                "create",
                f"/api/v1/namespaces/{ns}/pods",
                rs,
                {"resource": "pods", "namespace": ns, "apiVersion": "v1"},
                t,
                "RequestResponse",
                201,
                responseObject=_pod(ns, name, uid, rv, t, None, "Pending", False),
            )
        )
        events.append(
            _event(
                "create",
                f"/api/v1/namespaces/{ns}/pods/{name}/binding",
                {"username": "system:kube-scheduler", "groups": ["system:authenticated"]},
                {**pod_ref, "subresource": "binding", "uid": uid},
                t + timedelta(milliseconds=30),
                "Request",
                201,
                requestObject={
                    "kind": "Binding",
                    "apiVersion": "v1",
                    "metadata": {"name": name, "namespace": ns, "uid": uid},
                    "target": {"kind": "Node", "name": node},
                },
            )
        )
        for step, (phase, ready) in enumerate([("Pending", False), ("Running", False), ("Running", True)]):
            rv += 1
            at = t + timedelta(seconds=1 + step)
            events.append(
                _event(
                    "patch",
                    f"/api/v1/namespaces/{ns}/pods/{name}/status",
                    kubelet,
                    {**pod_ref, "subresource": "status"},
                    at,
                    "RequestResponse",
                    200,
                    requestObject={"metadata": {"uid": uid}, "status": {"phase": phase}},
                    responseObject=_pod(ns, name, uid, rv, t, node, phase, ready),
                )
            )
        if i % 10 == 0:
            events.append(
                _event(
                    "patch",
                    f"/api/v1/nodes/{node}",
                    admin,
                    {"resource": "nodes", "name": node, "apiVersion": "v1"},
                    t + timedelta(seconds=5),
                    "Request",
                    200,
                    requestObject={"spec": {"unschedulable": True}},
                )
            )
        for attempt in range(3):
            refused = attempt < 2
            events.append(
                _event(
                    "create",
                    f"/api/v1/namespaces/{ns}/pods/{name}/eviction",
                    admin,
                    {**pod_ref, "subresource": "eviction"},
                    t + timedelta(seconds=6 + 5 * attempt),
                    "Request",
                    429 if refused else 201,
                    requestObject={
                        "kind": "Eviction",
                        "apiVersion": "policy/v1",
                        "metadata": {"name": name, "namespace": ns},
                        "deleteOptions": {},
                    },
                    responseStatus={
                        "metadata": {},
                        "status": "Failure",
                        "reason": "TooManyRequests",
                        "code": 429,
                        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                        "details": {
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
                                }
                            ]
                        },
                    }
                    if refused
                    else {"metadata": {}, "status": "Success", "code": 201},
                )
            )
        rv += 1
        events.append(
            _event(
                "update",
                f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/web/status",
                pdb_ctrl,
                {
                    "resource": "poddisruptionbudgets",
                    "namespace": ns,
                    "name": "web",
                    "apiGroup": "policy",
                    "apiVersion": "v1",
                    "subresource": "status",
                    "uid": f"00000000-0000-4000-8000-{i % 20:012d}",
                    "resourceVersion": str(rv),
                },
                t + timedelta(seconds=15),
                "Request",
                200,
                requestObject={
                    "kind": "PodDisruptionBudget",
                    "apiVersion": "policy/v1",
                    "metadata": {
                        "name": "web",
                        "namespace": ns,
                        "uid": f"00000000-0000-4000-8000-{i % 20:012d}",
                        "resourceVersion": str(rv),
                        "generation": 1,
                    },
                    "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
                    "status": {
                        "observedGeneration": 1,
                        "disruptionsAllowed": i % 2,
                        "currentHealthy": 3,
                        "desiredHealthy": 2,
                        "expectedPods": 3,
                    },
                },
            )
        )
        rv += 1
        gone = _pod(ns, name, uid, rv, t, node, "Succeeded", False)
        gone["metadata"].update(
            deletionTimestamp=_sec(t + timedelta(seconds=46)), deletionGracePeriodSeconds=0
        )
        events.append(
            _event(
                "delete",
                f"/api/v1/namespaces/{ns}/pods/{name}",
                kubelet,
                pod_ref,
                t + timedelta(seconds=47),
                "RequestResponse",
                200,
                requestObject={
                    "kind": "DeleteOptions",
                    "apiVersion": "v1",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": uid},
                },
                responseObject=gone,
            )
        )
    return events


def write_jsonl(events: list[dict[str, Any]], path: Path) -> int:
    with path.open("wb") as handle:
        for event in events:
            handle.write(orjson.dumps(event) + b"\n")
    return path.stat().st_size


def checkpoint() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")


def run_store(path: Path) -> float:
    """Seconds to read, parse and append the file to the store (``store.save_observations``, batches of
    5000, a writer thread storing while the next batch parses, as the command does), into a fresh cluster."""
    cluster = store.cluster_for(f"bench-{uuid.uuid4().hex[:8]}", origin=Cluster.Origin.OFFLINE)
    try:
        checkpoint()
        started = time.perf_counter()
        ingest = AuditIngest(cluster, background=True)
        with path.open("rb") as handle:
            ingest.feed_lines(handle)
        result = ingest.close()
        seconds = time.perf_counter() - started
        assert result.stored == result.received == ingest.parser.observations, (
            result.stored,
            result.received,
        )
        return seconds
    finally:
        cluster.delete()


def run_ingest(path: Path) -> float:
    """Seconds for ``AuditIngest`` (what ``manage.py ingest_audit_log`` runs, without its final
    re-derivation): today's ``ingest_observations`` also brings node and PDB rows up to date per batch."""
    cluster = store.cluster_for(f"bench-{uuid.uuid4().hex[:8]}", origin=Cluster.Origin.OFFLINE)
    try:
        checkpoint()
        started = time.perf_counter()
        ingest = AuditIngest(cluster, background=True)
        with path.open("rb") as handle:
            ingest.feed_lines(handle)
        result = ingest.close()
        seconds = time.perf_counter() - started
        assert result.stored == result.received and not result.rejected, (result.stored, result.received)
        return seconds
    finally:
        cluster.delete()


def run_baseline(path: Path) -> tuple[float, int]:
    """(seconds, rows): a raw COPY of the rows the file becomes, prepared outside the clock (median of 3)."""
    cluster = store.cluster_for(f"bench-{uuid.uuid4().hex[:8]}", origin=Cluster.Origin.OFFLINE)
    try:
        received = timezone.now()
        rows = [store._row(cluster.pk, o, received) for o in parse_audit(path.read_bytes()).observations]
        checkpoint()
        return statistics.median(raw_copy_seconds(rows, BATCH_SIZE) for _ in range(3)), len(rows)
    finally:
        cluster.delete()


def database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "postgresql":
        auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    return f"sqlite:///{Path(s['NAME']).resolve()}"


def start_server(port: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, DATABASE_URL=database_url(), PODLIFE_AUDIT_RETRY_AFTER_S="1")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "podlife_site.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--lifespan",
            "off",
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            return server
        except requests.RequestException:  # not listening yet, or slow on a busy machine
            time.sleep(0.2)
    server.kill()
    raise SystemExit("uvicorn did not start within 60 s")


def run_webhook(port: int, token: str, batches: list[bytes], senders: int) -> tuple[float, int, int]:
    """(seconds, events stored, 429 answers): ``senders`` threads share the batches, as fast as answered."""
    url = f"http://127.0.0.1:{port}/ingest/v1/audit"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    queue = list(batches)
    lock = threading.Lock()
    stored = refused = 0
    errors: list[str] = []

    def send() -> None:
        nonlocal stored, refused
        session = requests.Session()
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            while True:
                answer = session.post(url, data=body, headers=headers, timeout=120)
                if answer.status_code == 429:
                    with lock:
                        refused += 1
                    time.sleep(int(answer.headers.get("Retry-After", "1")))
                    continue
                if answer.status_code != 200:
                    errors.append(f"{answer.status_code}: {answer.text[:200]}")
                    return
                with lock:
                    stored += answer.json()["events"]
                break

    threads = [threading.Thread(target=send) for _ in range(senders)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"the receiver failed: {errors[:3]}")
    return time.perf_counter() - started, stored, refused


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=2000, help="pod lives in the file (about 12 events each)")
    parser.add_argument(
        "--batch", type=int, default=400, help="events per webhook POST (the API server's default)"
    )
    parser.add_argument("--senders", type=int, default=4, help="concurrent webhook senders")
    parser.add_argument("--runs", type=int, default=3, help="file runs; the median ratio is the result")
    args = parser.parse_args()

    print(f"database: {connection.vendor}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "audit.log"
        events = generate(args.pods)
        size = write_jsonl(events, path)
        print(f"file: {len(events)} events, {size / len(events):,.0f} bytes an event")
        what = "COPY" if connection.vendor == "postgresql" else "executemany INSERT"
        n = len(events)
        ratios, full_ratios = [], []
        for run in range(args.runs):
            baseline, rows = run_baseline(path)
            ours = run_store(path)
            full = run_ingest(path)
            ratios.append(baseline / ours)
            full_ratios.append(baseline / full)
            print(
                f"  run {run + 1}: raw {what} of its {rows} rows {n / baseline:8,.0f} events/s ({baseline:.2f} s); "
                f"file -> parser -> store {n / ours:8,.0f} events/s ({ours:.2f} s), ratio {baseline / ours:.2f}; "
                f"AuditIngest {n / full:8,.0f} events/s ({full:.2f} s), ratio {baseline / full:.2f}"
            )
        file_rate = n / full
        print(
            f"ratio file -> store / raw {what}: {statistics.median(ratios):.2f} (median of {args.runs}; goal on PostgreSQL: >= 0.4)"
        )
        print(
            f"ratio AuditIngest (ingest_observations, with today's node/PDB row updates) / raw {what}: {statistics.median(full_ratios):.2f}"
        )

    # the webhook, with events of other pods (nothing already stored)
    webhook_events = generate(args.pods, seed=1)
    batches = [
        orjson.dumps(
            {
                "kind": "EventList",
                "apiVersion": "audit.k8s.io/v1",
                "metadata": {},
                "items": webhook_events[i : i + args.batch],
            }
        )
        for i in range(0, len(webhook_events), args.batch)
    ]
    _row, token = IngestToken.issue(store.cluster_for(f"bench-hook-{uuid.uuid4().hex[:8]}"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = start_server(port)
    try:
        seconds, stored, refused = run_webhook(port, token, batches, args.senders)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert stored == len(webhook_events), (stored, len(webhook_events))
    rate = stored / seconds
    print(
        f"webhook: {len(batches)} batches of {args.batch} events from {args.senders} senders: {rate:10,.0f} events/s "
        f"sustained ({seconds:.2f} s, {refused} answered 429 + Retry-After and re-sent), re-deriving as it stores"
    )
    print(f"ratio webhook / AuditIngest file path (last run): {rate / file_rate:.2f}")


if __name__ == "__main__":
    main()
