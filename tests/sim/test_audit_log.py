"""The demo cluster audits itself (issue #16 d5): the drain scenario's API server writes the audit log a
real one writes under docs/audit.md's policy, with the real actors, and can post it to a webhook."""

from __future__ import annotations

import json
import threading
from collections import Counter
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from collectors.parsers.audit import parse_audit
from demo_cluster import SimCluster, install
from demo_cluster.audit import post_batches
from timelines.lifecycle.observation import Kind

START = datetime(2025, 3, 14, 9, 0, tzinfo=UTC)
GC = "system:serviceaccount:kube-system:generic-garbage-collector"


def drained(tmp_path: Path | None = None, seed: int = 3) -> tuple[SimCluster, list[bytes]]:
    cluster = SimCluster(seed=seed, start=START)
    log = cluster.enable_audit(str(tmp_path / "audit.log") if tmp_path else None)
    with cluster.engine.lock:
        install(cluster, "drain-blocked-by-pdb")
        cluster.advance(120)
    return cluster, log.lines()


def test_the_drain_scenario_writes_a_log_backend_file(tmp_path: Path) -> None:
    cluster, lines = drained(tmp_path)
    assert (tmp_path / "audit.log").read_bytes() == b"".join(lines)
    events = [json.loads(line) for line in lines]
    assert {(e["kind"], e["apiVersion"], e["stage"]) for e in events} == {
        ("Event", "audit.k8s.io/v1", "ResponseComplete")
    }
    assert len({e["auditID"] for e in events}) == len(events)
    # docs/audit.md's policy: bodies where they are the state, the request elsewhere
    for e in events:
        ref = e["objectRef"]
        expected = (
            "RequestResponse"
            if ref["resource"] == "pods" and ref.get("subresource") in (None, "status")
            else "Request"
        )
        assert e["level"] == expected, e
        assert e["stageTimestamp"] >= e["requestReceivedTimestamp"]
    users = Counter(e["user"]["username"] for e in events)
    assert {"system:admin", GC, "system:kube-scheduler"} <= set(users)
    assert "system:serviceaccount:kube-system:disruption-controller" in users
    assert "system:serviceaccount:kube-system:replicaset-controller" in users
    assert any(u.startswith("system:node:drain-") for u in users)
    admin = [e for e in events if e["user"]["username"] == "system:admin"]
    assert all(e["userAgent"].startswith("kubectl/") for e in admin)
    # the drain: a cordon, the evictions the PDB refused, the one it allowed, as the cluster answered them
    evictions = [e for e in events if e["objectRef"].get("subresource") == "eviction"]
    codes = [e["responseStatus"]["code"] for e in evictions]
    assert codes == [{"Blocked": 429, "Allowed": 201}[r["outcome"]] for r in cluster.eviction_log]
    assert 429 in codes and codes[-1] == 201
    refused = next(e for e in evictions if e["responseStatus"]["code"] == 429)
    assert refused["responseStatus"]["details"]["causes"][0]["reason"] == "DisruptionBudget"
    cordons = [
        e for e in events if e["objectRef"]["resource"] == "nodes" and e["user"]["username"] == "system:admin"
    ]
    assert [e["requestObject"]["spec"]["unschedulable"] for e in cordons] == [True, None]


def test_the_parser_reads_every_event_and_loses_nothing() -> None:
    _, lines = drained()
    result = parse_audit(lines)
    assert result.events == len(lines) and not result.rejected and not result.skipped and not result.unpaired
    kinds = Counter(o.kind for o in result.observations)
    assert kinds[Kind.AUDIT] == len(lines) and kinds[Kind.POD] > 0 and kinds[Kind.PDB] > 0
    assert kinds[Kind.POD_DELETED] > 0  # the kubelets' final deletes removed the pods
    actors = Counter(o.payload["actor"]["kind"] for o in result.observations if o.kind == Kind.AUDIT)
    assert {"user", "controller", "kubelet", "scheduler"} <= set(actors)


def test_same_seed_same_log() -> None:
    assert drained(seed=5)[1] == drained(seed=5)[1]


def test_without_audit_nothing_is_kept() -> None:
    cluster = SimCluster(seed=1, start=START)
    with cluster.engine.lock:
        install(cluster, "drain-blocked-by-pdb")
        cluster.advance(30)
    assert cluster.audit is None


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []
    busy_once = True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Authorization") != "Bearer pli_test":
            self.send_response(401)
        elif _Receiver.busy_once:
            _Receiver.busy_once = False
            self.send_response(429)
            self.send_header("Retry-After", "0")
        else:
            _Receiver.bodies.append(json.loads(body))
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_post_batches_sends_eventlists_and_comes_back_after_429() -> None:
    _, lines = drained()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/ingest/v1/audit"
        codes = post_batches(url, "pli_test", lines, batch=20, sleep=lambda s: None)
        assert post_batches(url, "wrong", lines[:1]) == [401]
    finally:
        server.shutdown()
    assert codes == [200] * -(-len(lines) // 20)
    assert all(b["kind"] == "EventList" and b["apiVersion"] == "audit.k8s.io/v1" for b in _Receiver.bodies)
    sent = [
        json.dumps(item, separators=(",", ":")).encode() + b"\n"
        for b in _Receiver.bodies
        for item in b["items"]
    ]
    assert sent == lines
