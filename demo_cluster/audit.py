"""The demo cluster's audit backend: the API server's record of who did what, as ``audit.k8s.io/v1`` Events.

Written as a real API server audited with docs/audit.md's minimal policy writes them: one
``ResponseComplete`` event per write (``omitStages: [RequestReceived]``); ``RequestResponse`` level for
``pods`` and ``pods/status`` (the pod after the write is the ``responseObject``), ``Request`` level for
evictions, bindings, nodes and PodDisruptionBudgets. The actors are those of a kubeadm cluster with
``--use-service-account-credentials`` (k8s-facts.md §13.3): the user ``system:admin`` with kubectl's user
agent, each kubelet as ``system:node:NAME``, the scheduler, and the controllers' service accounts
(``replicaset-controller``, ``disruption-controller``, ``generic-garbage-collector``, ...). What the API
server does inside a request (an eviction's DisruptionTarget and delete) is not audited, as on a real one.

Outputs: a JSON Lines file (the log backend, ``--audit-log-path``), the events kept in memory for whoever
ships them (``take_new``: the demo's shipper), and ``post_batches`` (the webhook backend's ``EventList``
POSTs with a bearer token, honouring 429 + Retry-After). Pure standard library, like the rest of the sim.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any

KUBECTL_AGENT = "kubectl/v1.31.4 (linux/amd64) kubernetes/a78aa47"
KCM_AGENT = (
    "kube-controller-manager/v1.31.4 (linux/amd64) kubernetes/a78aa47/system:serviceaccount:kube-system:{}"
)
KUBELET_AGENT = "kubelet/v1.31.4 (linux/amd64) kubernetes/a78aa47"
SCHEDULER_AGENT = "kube-scheduler/v1.31.4 (linux/amd64) kubernetes/a78aa47/scheduler"
ADMIN_IP = "10.0.0.12"
CONTROL_PLANE_IP = "10.0.0.2"
SA_PREFIX = "system:serviceaccount:kube-system:"
GC = "generic-garbage-collector"
DISRUPTION = "disruption-controller"


class Actor:
    """Who makes a request: username, groups, user agent, source IP."""

    __slots__ = ("agent", "groups", "ip", "username")

    def __init__(self, username: str, groups: list[str], agent: str, ip: str) -> None:
        self.username, self.groups, self.agent, self.ip = username, groups, agent, ip

    @classmethod
    def admin(cls) -> Actor:
        """``kubectl`` as the cluster's admin (a kubeadm admin.conf after 1.29 is ``kubernetes-admin``; the
        demo's is ``system:admin``, the name a client certificate of group system:masters often has)."""
        return cls("system:admin", ["system:masters", "system:authenticated"], KUBECTL_AGENT, ADMIN_IP)

    @classmethod
    def controller(cls, account: str) -> Actor:
        """A kube-controller-manager loop with its own service account."""
        return cls(
            SA_PREFIX + account,
            ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
            KCM_AGENT.format(account),
            CONTROL_PLANE_IP,
        )

    @classmethod
    def kubelet(cls, node: str, ip: str) -> Actor:
        return cls(f"system:node:{node}", ["system:nodes", "system:authenticated"], KUBELET_AGENT, ip)

    @classmethod
    def scheduler(cls) -> Actor:
        return cls("system:kube-scheduler", ["system:authenticated"], SCHEDULER_AGENT, CONTROL_PLANE_IP)


def _stamp(t: datetime) -> str:
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _api_path(group: str, version: str) -> str:
    return f"/api/{version}" if not group else f"/apis/{group}/{version}"


class AuditLog:
    """The audit events of one demo cluster, in order; thread-safe (the cluster writes under its engine
    lock, a shipper thread reads)."""

    def __init__(self, seed: int = 0, path: str | Path | None = None) -> None:
        self._seed = seed
        self._count = 0
        self._events: list[bytes] = []
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = open(path, "ab") if path is not None else None  # noqa: SIM115
        self.path = Path(path) if path is not None else None
        self._actors: list[Actor | None] = []

    # ---- who is acting --------------------------------------------------------------------------
    @contextmanager
    def acting(self, actor: Actor | None) -> Iterator[None]:
        """Requests made inside are ``actor``'s; ``None``: the API server's own work, not audited."""
        self._actors.append(actor)
        try:
            yield
        finally:
            self._actors.pop()

    @property
    def actor(self) -> Actor | None:
        """The current actor: the innermost ``acting``, else the admin (a scenario step is kubectl)."""
        return self._actors[-1] if self._actors else Actor.admin()

    # ---- recording ----------------------------------------------------------------------------------
    def _audit_id(self) -> str:
        self._count += 1
        digest = hashlib.sha256(f"{self._seed}:{self._count}".encode()).digest()
        return str(uuid.UUID(bytes=digest[:16], version=4))

    def record(
        self,
        at: datetime,
        verb: str,
        resource: str,
        namespace: str | None,
        name: str | None,
        *,
        code: int,
        actor: Actor | None = None,
        subresource: str | None = None,
        group: str = "",
        version: str = "v1",
        level: str = "Request",
        request: dict[str, Any] | None = None,
        response: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None,
        uid: str | None = None,
        latency: float = 0.004,
    ) -> None:
        """One completed request. ``actor`` defaults to the current one; nothing is recorded while the API
        server acts on its own (``acting(None)``)."""
        who = actor if actor is not None else self.actor
        if who is None:
            return
        path = _api_path(group, version)
        if namespace:
            path += f"/namespaces/{namespace}"
        path += f"/{resource}"
        if name:
            path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
        ref: dict[str, Any] = {"resource": resource, "apiGroup": group, "apiVersion": version}
        if namespace:
            ref["namespace"] = namespace
        if name:
            ref["name"] = name
        if subresource:
            ref["subresource"] = subresource
        if uid:
            ref["uid"] = uid
        event: dict[str, Any] = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": level,
            "auditID": self._audit_id(),
            "stage": "ResponseComplete",
            "requestURI": path,
            "verb": verb,
            "user": {"username": who.username, "groups": who.groups},
            "sourceIPs": [who.ip],
            "userAgent": who.agent,
            "objectRef": ref,
            "responseStatus": status if status is not None else {"metadata": {}, "code": code},
            "requestReceivedTimestamp": _stamp(at - timedelta(seconds=latency)),
            "stageTimestamp": _stamp(at),
            "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
        }
        if request is not None:
            event["requestObject"] = copy.deepcopy(request)
        if response is not None and level == "RequestResponse":
            event["responseObject"] = copy.deepcopy(response)
        line = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            self._events.append(line)
            if self._file is not None:
                self._file.write(line)
                self._file.flush()

    # ---- reading ------------------------------------------------------------------------------------
    def lines(self) -> list[bytes]:
        """The events held (all of them until a shipper takes them), one JSON line each."""
        with self._lock:
            return list(self._events)

    def take_new(self) -> list[bytes]:
        """The events recorded since the last call, no longer held (one shipper: a demo that runs for
        hours keeps only what was not shipped yet; the file keeps everything)."""
        with self._lock:
            new, self._events = self._events, []
            return new

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def event_list(lines: Iterable[bytes]) -> bytes:
    """An ``EventList`` body of the webhook backend from JSON lines."""
    return (
        b'{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":['
        + b",".join(line.rstrip(b"\n") for line in lines)
        + b"]}"
    )


def post_batches(
    url: str,
    token: str,
    lines: list[bytes],
    *,
    batch: int = 400,
    retries: int = 10,
    timeout: float = 30.0,
    sleep: Any = time.sleep,
) -> list[int]:
    """POST ``lines`` to a webhook receiver (``/ingest/v1/audit``) as the API server's webhook backend
    does: ``EventList`` batches of ``batch`` events (``--audit-webhook-batch-max-size``), bearer token, a
    batch answered 429 / 5xx re-sent after ``Retry-After`` up to ``retries`` times. Returns each batch's
    final HTTP status; raises ``urllib.error.URLError`` when the receiver cannot be reached at all."""
    codes: list[int] = []
    for i in range(0, len(lines), batch):
        body = event_list(lines[i : i + batch])
        for attempt in range(retries + 1):
            req = urllib.request.Request(
                url,
                data=body,
                method="POST",
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
            )
            try:
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    code = int(resp.status)
            except urllib.error.HTTPError as exc:
                code = exc.code
                if (code == 429 or code >= 500) and attempt < retries:
                    sleep(float(exc.headers.get("Retry-After") or 1))
                    continue
            break
        codes.append(code)
    return codes
