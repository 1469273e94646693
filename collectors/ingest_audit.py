"""API server audit events into a cluster: the parser and its store writer, and the webhook receiver.

* ``AuditIngest``: the parser (``collectors/parsers/audit.py``) and its store writer in one place, shared by
  ``manage.py ingest_audit_log``, the webhook and ``bench/audit.py``, so an event gives the same
  observations (and dedupe keys) whichever way it arrives.
* ``POST /ingest/v1/audit``: the endpoint a real API server's ``--audit-webhook-config-file`` points at
  (docs/audit.md has the kubeconfig). Bodies are ``EventList``\\ s as the webhook backend sends them, or any
  input the parser reads (JSON Lines from a shipper, the managed clusters' exports), gzip or not.

The receiver authenticates with the per-cluster ingest token (``Authorization: Bearer``, the kubeconfig's
``users[].user.token``) and the body limits of ``collectors/ingest_http.py``. It is idempotent: every
observation carries a dedupe key built from the event's auditID, stage and request, so a batch the API
server re-sends (its webhook retries on any error) stores nothing twice.

Backpressure: the view is async and hands each batch to a small pool of worker threads of this process
(``PODLIFE_AUDIT_WORKERS``); at most ``PODLIFE_AUDIT_WORKERS + PODLIFE_AUDIT_QUEUE`` batches are taken at
once, and the next one is answered ``429 Too Many Requests`` with ``Retry-After`` before its body is
parsed. client-go, which the API server's webhook uses, waits for ``Retry-After`` and sends the same batch
again; after its retries the webhook backend's own exponential backoff applies. A database that cannot
be reached answers 503 with ``Retry-After``. Storing in worker threads keeps the batches off the thread
that runs podlife's pages (Django runs every synchronous view of an ASGI process on one thread).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from collectors.ingest_http import BodyError, max_decoded_bytes, read_body
from collectors.models import BadIngestToken, IngestToken
from collectors.parsers.audit import AuditParser, top_ignored
from podlife_site.tuning import gc_paused
from timelines import store
from timelines.lifecycle.observation import AnyObservation, Kind
from timelines.models import Cluster
from timelines.writer import BATCH_SIZE, observation_writer

log = logging.getLogger(__name__)

MAX_REPORTED: Final = 10


class AuditIngest:
    """Audit input into one cluster: parse, hand to the store writer, count what was lost.

    ``feed_lines`` (files of any size) or ``feed_bytes`` (a request body), then ``close``. Storing is all
    it does: the writer (``timelines/writer.py``) stores batches of ``batch_size``, the store marks what
    each makes dirty, and the derive stage derives each touched pod, node and PDB.

    With ``background=True`` the writer stores each batch on a thread of its own while the next one is
    parsed (parsing is Python, a COPY mostly waits on the database): one batch stored, one waiting, and
    parsing blocks until the thread takes it. The thread opens its own database connection (so, in tests, only a transactional database
    sees its rows; inside a caller's transaction the writer stores on the caller's thread instead) and
    closes it at ``close``.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        batch_size: int = BATCH_SIZE,
        max_document_bytes: int | None = None,
        background: bool = False,
    ) -> None:
        self.cluster = cluster
        self.parser = (
            AuditParser()
            if max_document_bytes is None
            else AuditParser(max_document_bytes=max_document_bytes)
        )
        # Pods named by requests that carry no UID (Metadata level never does): derived by name.
        self.pod_names: set[tuple[str, str]] = set()
        self.writer = observation_writer(
            cluster, batch_size=batch_size, threads=1 if background else 0, name="audit-writer"
        )

    @property
    def result(self) -> store.SaveResult:
        """What the batches stored so far did (complete after ``drain`` or ``close``)."""
        return self.writer.result

    def feed_lines(self, lines: Iterable[bytes | str]) -> None:
        self._take(self.parser.read_lines(lines))

    def feed_bytes(self, body: bytes) -> None:
        self._take(self.parser.read_bytes(body))

    def _take(self, observations: Iterator[AnyObservation]) -> None:
        add = self.writer.add
        with gc_paused():
            for obs in observations:
                add(obs)
                if (
                    obs.kind == Kind.AUDIT
                    and obs.namespace
                    and obs.name
                    and obs.payload.get("resource") == "pods"
                ):
                    self.pod_names.add((obs.namespace, obs.name))

    def drain(self) -> None:
        """Store what is parsed and wait until everything handed over is stored (``result`` is then
        complete); raises the error of a batch that failed."""
        self.writer.drain()

    def close(self) -> store.SaveResult:
        result = self.writer.close()
        self.parser.close()
        return result

    def report(self) -> dict[str, Any]:
        """The counts a person (or the API server's log) reads: what was read, stored, skipped and lost."""
        p, r = self.parser, self.result
        return {
            "cluster": self.cluster.name,
            "events": p.events,
            "events_used": p.used,
            "observations": r.received,
            "stored": r.stored,
            "already_stored": r.duplicates,
            "rejected_by_store": len(r.rejected),
            "store_rejections": [str(x) for x in r.rejected[:MAX_REPORTED]],
            "skipped": dict(p.skipped.most_common()),
            "not_followed_top": [{"shape": shape, "count": n} for shape, n in top_ignored(p.ignored)],
            "unreadable": dict(p.rejected.most_common()),
            "unreadable_examples": p.examples[:MAX_REPORTED],
            "unpaired_requests": p.unpaired,
            "pods_touched": len(r.pods_touched),
            "pod_names_touched": len(self.pod_names),
        }


# --------------------------------------------------------------------------------------------- the webhook

JSON_TYPES: Final = frozenset(
    {"", "application/json", "application/x-ndjson", "application/ndjson", "application/jsonl", "text/plain"}
)


@dataclass
class Admission:
    """How many audit batches this process works on at once: ``workers`` store, ``queue`` more wait; past
    that a batch is turned away (the caller answers 429 + Retry-After) without being parsed."""

    workers: int
    queue: int
    _busy: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _executor: ThreadPoolExecutor | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="audit-ingest")

    @property
    def busy(self) -> int:
        return self._busy

    def try_enter(self) -> bool:
        with self._lock:
            if self._busy >= self.workers + self.queue:
                return False
            self._busy += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self._busy -= 1

    async def run(self, job: Any, *args: Any) -> Any:
        """``job(*args)`` on a worker thread; the caller has entered and leaves after."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, job, *args)


@functools.lru_cache(maxsize=4)
def _admission(workers: int, queue: int) -> Admission:
    # One per process and setting values (a test overriding the settings gets its own).
    return Admission(workers=workers, queue=queue)


def admission() -> Admission:
    return _admission(int(settings.PODLIFE_AUDIT_WORKERS), int(settings.PODLIFE_AUDIT_QUEUE))


def retry_after() -> str:
    return str(int(settings.PODLIFE_AUDIT_RETRY_AFTER_S))


class AuditRequestError(Exception):
    def __init__(self, status: int, message: str, **headers: str) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


@csrf_exempt
async def audit_webhook(request: HttpRequest) -> HttpResponse:
    """``POST /ingest/v1/audit[?cluster=NAME]``: audit events of the ingest token's cluster."""
    if request.method != "POST":
        return _error(405, f"{request.method} is not allowed: POST", Allow="POST")
    gate = admission()
    if not gate.try_enter():
        log.warning("audit webhook: %d batches in progress, asking the sender to retry", gate.busy)
        return _error(
            429,
            f"podlife is storing {gate.busy} audit batches already; retry after {retry_after()} s",
            **{"Retry-After": retry_after()},
        )
    try:
        status, body = await gate.run(_receive, request)
    except AuditRequestError as exc:
        return _error(exc.status, str(exc), **exc.headers)
    finally:
        gate.leave()
    return JsonResponse(body, status=status)


def _error(status: int, message: str, **headers: str) -> HttpResponse:
    return JsonResponse({"error": message}, status=status, headers=headers)


def _receive(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    """One batch, on a worker thread: authenticate, read, parse, store. Raises AuditRequestError.

    The batch opens its own database connection and closes it when done: worker threads outlive every
    request, and a connection left open in one would outlive its use (and keep the database from being
    dropped or failed over). A connection costs a few milliseconds; a batch of 400 events, tens."""
    close_old_connections()
    try:
        return _receive_batch(request)
    except DatabaseError:
        log.exception("audit webhook: the database failed while storing a batch")
        raise AuditRequestError(
            503, "the database is unavailable; retry later", **{"Retry-After": retry_after()}
        ) from None
    finally:
        connections.close_all()  # this thread's connections only


def _receive_batch(request: HttpRequest) -> tuple[int, dict[str, Any]]:
    try:
        token = IngestToken.authenticate(request.headers.get("Authorization"))
    except BadIngestToken as exc:
        raise AuditRequestError(401, str(exc), **{"WWW-Authenticate": "Bearer"}) from None
    cluster = token.cluster
    asked = request.GET.get("cluster", "").strip()
    if asked and asked != cluster.name:
        raise AuditRequestError(403, f"this ingest token writes cluster {cluster.name!r}, not {asked!r}")
    media_type = (request.content_type or "").strip().lower()
    if media_type not in JSON_TYPES:
        raise AuditRequestError(
            415,
            f"Content-Type {media_type} is not supported: send application/json (an audit.k8s.io EventList, "
            "as the API server's webhook does) or application/x-ndjson (one event per line)",
        )
    try:
        body = read_body(request)  # within the size limits, decompressed; nothing is stored before this
    except BodyError as exc:
        raise AuditRequestError(exc.status, str(exc)) from None
    if cluster.read_only:
        raise AuditRequestError(
            403, f"cluster {cluster.name!r} is read-only (an imported incident) and takes no data"
        )
    ingest = AuditIngest(cluster, max_document_bytes=max_decoded_bytes())
    ingest.feed_bytes(body)
    ingest.close()
    report = ingest.report()
    if ingest.parser.events == 0 and (ingest.parser.rejected or ingest.parser.skipped["not_audit"]):
        reasons = "; ".join(ingest.parser.examples[:3]) or "no audit.k8s.io event in it"
        raise AuditRequestError(
            400, f"the body holds no readable audit event ({reasons}): expected an audit.k8s.io/v1 EventList"
        )
    if report["unreadable"] or report["rejected_by_store"]:
        log.warning("audit webhook, cluster %s: %s", cluster.name, report)
    return 200, report
