"""List and watch one resource of one cluster, one bounded step at a time.

``run_step(cluster, resource)`` is the unit everything schedules: the Celery chain (``collectors/tasks.py``),
the foreground ``collect`` command (``collectors/kube/runner.py``) and the tests. A step either lists (when
no resourceVersion is stored, or after the watch expired) or runs ONE watch request bounded by
``timeoutSeconds``. It stores what it saw (through ``timelines.writer``, every input's way into
``timelines.store.save_observations``, which marks what the derive stage must derive again) and then
saves the resourceVersion it reached, in that order, so a worker killed mid-step loses nothing: the next
step resumes from the stored version and a re-delivered event dedupes in the store. A step ends at the store: it derives, projects and pushes nothing.

Wire handling (k8s-facts.md §8, §9), done here rather than by ``kubernetes.watch.Watch``:
* the generated ``list_*`` methods are called with ``_preload_content=False`` and bodies are parsed with
  orjson; the client's model objects are never built;
* the resourceVersion is tracked from every event, BOOKMARKs included (the client's Watch skips them);
* ERROR 410 (reason Expired or Gone), in-band or as the HTTP status, always relists (the client retries
  once from the same version, and can end silently); the relist reconciles against the store: an object
  stored as alive that the list no longer has gets a synthetic deletion (source ``synthetic``);
* a stale ``continue`` token (HTTP 410 on a later page) restarts the list;
* a malformed line or an object the parsers reject is logged, counted in CollectorState and skipped;
* a node update whose fingerprint equals the last stored one (a heartbeat) is dropped here;
* every other error is logged and counted, never fatal: the step returns it and the caller backs off.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from django.db import connection
from django.utils import timezone

from collectors.kube import state
from collectors.kube.config import Tunables, api_client
from collectors.kube.resources import ResourceSpec, resource_spec
from collectors.kube.stream import END, LineReader, close_response
from collectors.parsers.k8s_objects import object_observation
from collectors.parsers.pod_wire import decode_pod_event, decode_pod_list, wire_pod_observation
from podlife_site import tuning
from podlife_site.tuning import gc_paused
from timelines import observation_rows, store
from timelines.lifecycle.observation import AnyObservation, Kind, Observation, Source
from timelines.models import Cluster
from timelines.observation_rows import StoredRow
from timelines.writer import StoredBatch, observation_writer

log = logging.getLogger(__name__)

MAX_LIST_RESTARTS = 5  # a continue token expiring this many times in a row ends the step with an error


class Expired(Exception):
    """The watch's resourceVersion (or a list's continue token) is older than the server keeps: 410."""


class WatchError(Exception):
    """The server reported an error inside the stream (an ERROR event other than 410)."""


class LeaseLost(Exception):
    """Another chain owns this (cluster, resource) now; this one must stop without writing more."""


@dataclass
class StepControl:
    """Hooks from whoever runs the step (all optional).

    ``heartbeat`` renews the lease and returns False when it was lost; ``cancel`` ends the step early
    (the ``collect`` command's --duration); ``tunables`` overrides the settings.
    """

    heartbeat: Callable[[], bool] | None = None
    cancel: threading.Event | None = None
    tunables: Tunables | None = None


@dataclass
class StepResult:
    cluster: str
    resource: str
    resource_version: str = ""
    action: str = "watch"  # watch | list
    listed: int = 0  # objects in the list
    events: int = 0  # watch events with an object (ADDED / MODIFIED / DELETED)
    bookmarks: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    dropped: int = 0  # no-op updates (node heartbeats) dropped at the source
    malformed: int = 0  # lines or objects logged and skipped
    synthetic_deletions: int = 0
    expired: bool = False  # the watch hit 410 and this step relisted
    error: str | None = None
    seconds: float = 0.0
    busy_seconds: float = 0.0  # from the step's start until its last object was stored (idle tail excluded)
    pods_touched: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return self.error is None


# A watch stream quiet for this long has ended a burst: what is held is stored then, not up to
# ``batch_seconds`` later (live pages see it sooner, and a step's last batch does not idle). A busy stream
# still fills batches of up to ``batch_size``; only a trickle of events further apart than this is stored
# event by event, one small transaction per QUIET_S at most.
QUIET_S = 0.025

# A step's progress (events applied, the resourceVersion reached) is written at most this often while a
# burst is being stored, and always once everything handed to the store is stored (``drain``, ``close``).
# One UPDATE per batch took a tenth of the writers' time. A worker killed in between resumes from the last
# version written; the events after it are delivered again and deduplicated, as after any crash.
PROGRESS_S = 0.5

# -- process-level caches --------------------------------------------------------------------------------

_events_api: dict[str, bool] = {}  # cluster -> True when events.k8s.io/v1 is missing (use core/v1)
_fingerprints: dict[int, tuple[str, dict[str, str]]] = {}  # cluster pk -> (rv valid at, node -> fingerprint)
# (cluster, resource) -> the last arrival stamp a step of this process gave (``_Stepper._stamp``): the next
# step goes on from it, so one object's snapshots keep the order the watches delivered them in even when
# the clock has not passed the last stamp when a step ends and the next begins (a burst stamped a few
# microseconds ahead; the tests' virtual clock, which stands still while the collector catches up).
_last_stamps: dict[tuple[str, str], datetime] = {}
_cache_lock = threading.Lock()


def forget_caches() -> None:
    """Drop what this process remembers between steps (tests; a cluster re-registered)."""
    with _cache_lock:
        _events_api.clear()
        _fingerprints.clear()
        _last_stamps.clear()


# -- the step --------------------------------------------------------------------------------------------


def run_step(
    cluster_name: str,
    resource: str,
    resource_version: str = "",
    *,
    control: StepControl | None = None,
) -> StepResult:
    """Run one step for (cluster, resource): a list, or one bounded watch request.

    The stored resourceVersion wins over ``resource_version`` (which a chain passes along): a re-delivered
    step of a killed worker then resumes where the stored state is, not where the message was.
    Never raises for collection errors: they are logged, counted in CollectorState and returned in
    ``StepResult.error``. Raises LookupError for an unknown cluster and ValueError for an unknown resource.
    """
    spec = resource_spec(resource)
    control = control or StepControl()
    tunables = control.tunables or Tunables.from_settings()
    started = time.monotonic()
    cluster = store.cluster_for(cluster_name)
    current = state.get(cluster, resource).resource_version or resource_version
    stepper = _Stepper(cluster, spec, api_client(cluster_name), control, tunables)
    result = stepper.result
    result.resource_version = current
    try:
        try:
            if not current:
                stepper.relist()
            else:
                try:
                    stepper.watch(current)
                except Expired as exc:
                    log.info(
                        "%s/%s: watch from %s expired (%s); relisting", cluster.name, resource, current, exc
                    )
                    result.expired = True
                    stepper.drain()  # the batches before the 410 save their versions first
                    state.save_resource_version(cluster, resource, "")  # a crash mid-relist relists again
                    stepper.relist()
        finally:
            stepper.close()
    except LeaseLost:
        result.error = "lease lost: another chain owns this watch"
        log.warning("%s/%s: %s; stopping this chain", cluster.name, resource, result.error)
    except Exception as exc:  # broad: the step's boundary; any failure is logged with its traceback, recorded
        # for collector health by name, and the chain retries after a backoff
        result.error = f"{type(exc).__name__}: {exc}"
        log.warning("%s/%s: step failed: %s", cluster.name, resource, result.error, exc_info=True)
        state.record_error(cluster, resource, result.error)
    finally:
        result.seconds = time.monotonic() - started
        _keep_fingerprints(cluster, result, stepper.fingerprints)
        state.record_step(cluster, resource, events=result.events + result.listed, seconds=result.seconds)
        tuning.freeze_after_warm_up()  # once per process: what one step left alive is kept for good
    return result


class _Stepper:
    """One step's working state. Lives for one step only; process-level caches are above."""

    def __init__(
        self, cluster: Cluster, spec: ResourceSpec, client: Any, control: StepControl, tunables: Tunables
    ) -> None:
        self.cluster = cluster
        self.spec = spec
        self.client = client
        self.control = control
        self.tunables = tunables
        self.result = StepResult(cluster.name, spec.name)
        self.fingerprints: dict[str, str] | None = None
        self.started = time.monotonic()
        self._last_stamp: datetime | None = _last_stamps.get((cluster.name, spec.name))
        # The step's batches into the store (timelines/writer.py): of ``batch_size`` events, or after
        # ``batch_seconds``; on PostgreSQL outside a caller's transaction stored by ``writers`` threads
        # while the step parses the next, each counted (``_stored``, on the step's thread) once it and every
        # batch before it are stored. SQLite takes one writer at a time: there the step stores them itself.
        self.writer = observation_writer(
            cluster,
            batch_size=tunables.batch_size,
            batch_seconds=tunables.batch_seconds,
            threads=tunables.writers if connection.vendor == "postgresql" else 0,
            name=f"store-{cluster.name}-{spec.name}",
            on_stored=self._stored,
            process=tunables.store_process,
        )
        self._notes: list[str] = []  # status notes from API calls, written by the step's thread
        # Progress stored but not written yet (``_progress``), in batch order.
        self._unwritten_events = 0
        self._unwritten_rv: str | None = None
        self._progress_at = time.monotonic()
        self._lease_lost = False

    # ---- API calls ---------------------------------------------------------------------------------
    def _method(self) -> Callable[..., Any]:
        from kubernetes import client as kclient

        spec = self.spec
        if spec.fallback_api and _events_api.get(self.cluster.name):
            fallback: Callable[..., Any] = getattr(
                getattr(kclient, spec.fallback_api)(self.client), spec.fallback_method
            )
            return fallback
        method: Callable[..., Any] = getattr(getattr(kclient, spec.api)(self.client), spec.method)
        return method

    def _call(self, **kwargs: Any) -> Any:
        """Call the list method raw; on a 404 for events.k8s.io/v1, switch to core/v1 and call again.

        Touches no database (a list page is fetched on another thread, which must not wait on the step's
        transaction): a status note goes to ``_notes``, which ``_record_notes`` writes."""
        from kubernetes.client.exceptions import ApiException

        try:
            return self._method()(_preload_content=False, **kwargs)
        except ApiException as exc:
            if exc.status == 410:
                raise Expired(_status_message(exc)) from None
            if exc.status == 404 and self.spec.fallback_api and not _events_api.get(self.cluster.name):
                _events_api[self.cluster.name] = True
                note = "events.k8s.io/v1 is not served (404): watching core/v1 events"
                log.info("%s: %s", self.cluster.name, note)
                self._notes.append(note)
                return self._call(**kwargs)
            raise

    def _record_notes(self) -> None:
        while self._notes:
            state.set_note(self.cluster, self.spec.name, self._notes.pop(0))

    def _beat(self) -> None:
        if self.control.heartbeat is not None and not self.control.heartbeat():
            self._lease_lost = True
            raise LeaseLost()

    def _cancelled(self) -> bool:
        return self.control.cancel is not None and self.control.cancel.is_set()

    # ---- list ----------------------------------------------------------------------------------------
    def relist(self) -> str:
        """List everything (paged), store it, reconcile against the store, save the list's version."""
        result = self.result
        result.action = "list"
        restarts = 0
        # Nothing stored of this kind before the list (a first list): nothing can have vanished, and the
        # reconcile's read of every snapshot stored, just now, is skipped.
        known = self.spec.reconcile and _any_snapshot(self.cluster, self.spec)
        while True:
            seen: set[str] = set()
            try:
                rv = self._list_pages(seen)
                break
            except Expired as exc:  # a stale continue token: the list must start over
                restarts += 1
                message = f"list continue token expired ({exc}); restarting the list"
                log.warning("%s/%s: %s", self.cluster.name, self.spec.name, message)
                state.record_error(self.cluster, self.spec.name, message)
                if restarts >= MAX_LIST_RESTARTS:
                    raise
        self.drain()  # every page is stored before reconciling against the store and saving the version
        if known:
            self._reconcile(seen)
            self.drain()
        state.record_relist(self.cluster, self.spec.name)
        state.save_resource_version(self.cluster, self.spec.name, rv)
        result.resource_version = rv
        return rv

    def _list_pages(self, seen: set[str]) -> str:
        # Pages are stored together once they hold a watch batch's worth of objects (fewer, larger COPY
        # transactions); what is held is stored also when the list fails, as page by page would have.
        # The next page is fetched on a thread while this one is normalized: its continue token is known
        # as soon as this page is decoded, and the server's time to send a page then overlaps ours.
        first = True
        fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"list-{self.cluster.name}")
        next_page: Future[bytes] = fetcher.submit(self._fetch_page, None)

        def prefetch(token: str | None) -> None:
            nonlocal next_page
            if token and not self._cancelled():
                next_page = fetcher.submit(self._fetch_page, token)

        try:
            while True:
                try:
                    data = next_page.result()
                except Expired:
                    if first:  # a plain list never expires; a 410 here is a server problem, not a token
                        raise WatchError("list answered 410 without a continue token") from None
                    raise
                finally:
                    self._record_notes()
                first = False
                with gc_paused():
                    observations, count, token, rv = self._read_page(data, seen, prefetch)
                    del data  # the raw page is not needed once normalized
                    self.result.listed += count
                self.writer.hold(observations, units=count)  # handed over once a batch's worth is held
                if not token:
                    self.writer.flush()
                self._beat()
                if not token:
                    if not rv:
                        raise WatchError("the list carried no metadata.resourceVersion")
                    return rv
                if self._cancelled():
                    raise WatchError("cancelled during a paged list")
        finally:
            fetcher.shutdown(wait=False)  # a page still in flight closes its response itself
            self.writer.flush()

    def _fetch_page(self, token: str | None) -> bytes:
        """The body of one list page (``token``: the previous page's continue token)."""
        kwargs: dict[str, Any] = {"limit": self.tunables.list_page_size, "_request_timeout": (10, 120)}
        if token:
            kwargs["_continue"] = token
        response = self._call(**kwargs)
        try:
            data: bytes = response.data
            return data
        finally:
            close_response(response)

    def _read_page(
        self, data: bytes, seen: set[str], on_token: Callable[[str | None], None]
    ) -> tuple[Sequence[AnyObservation], int, str | None, str]:
        """(observations, objects, continue token, resourceVersion) of one list page; ``on_token`` gets
        the continue token as soon as the page is decoded, before its objects are normalized."""
        now = timezone.now()
        page = decode_pod_list(data) if self.spec.name == "pods" else None
        if page is not None:
            on_token(page.continue_token)
            pods = page.items or []
            raw_items: list[Any] | None = None  # the generic decoding, made only if a pod needs it
            out: list[AnyObservation] = []
            for i, pod in enumerate(pods):
                obs = wire_pod_observation(pod, watch_type="LIST", observed_at=now, source=Source.API)
                if obs is None:
                    if raw_items is None:
                        raw_items = orjson.loads(data).get("items") or []
                    out += self._observations([(raw_items[i], "LIST", now)], seen)
                    continue
                seen.add(pod.api_uid)
                seen.add(obs.pod_uid or "")
                out.append(obs)
            return out, len(pods), page.continue_token, page.resource_version
        body = orjson.loads(data)
        items = body.pop("items", None) or []
        meta = body.get("metadata") or {}
        token: str | None = meta.get("continue") or None
        on_token(token)
        observations = self._observations(((item, "LIST", now) for item in items), seen)
        return observations, len(items), token, str(meta.get("resourceVersion") or "")

    # ---- watch ---------------------------------------------------------------------------------------
    def watch(self, rv: str) -> str:
        """One watch request from ``rv``; stores events in batches and saves the version after each."""
        tunables = self.tunables
        try:
            response = self._call(
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=tunables.watch_timeout_s,
                # connect, read: a server that goes silent past its own timeout is a dead connection.
                _request_timeout=(10, tunables.watch_timeout_s + 30),
            )
        finally:
            self._record_notes()
        # A fifth of a batch per read: a burst is stored in batches while the rest of it is parsed.
        reader = LineReader(
            response,
            name=f"watch-{self.cluster.name}-{self.spec.name}",
            max_lines=max(1, tunables.batch_size // 5),
        )
        # Events are normalized as they arrive (their raw objects are dropped at once) into the writer's
        # held batch; ``pending_rv`` is the version what is held reaches (saved once it is stored).
        writer = self.writer
        pending_rv = rv
        saved_rv = rv
        wire_pods = self.spec.name == "pods"  # pod events go the typed way first (parsers/pod_wire.py)
        writer.start_batch()  # the first batch's age counts from the watch request
        try:
            while True:
                if self._cancelled():
                    break
                holding = writer.holding or pending_rv != saved_rv
                if holding:
                    timeout = min(writer.age_left(), QUIET_S)
                elif writer.in_flight or self._progress_unwritten():
                    # Batches are being stored, or were stored (here and now on SQLite, inside a
                    # transaction) and their progress is not written yet: come back soon to count them and
                    # write their progress once the stream pauses, rather than when the next line or bookmark
                    # arrives. (Waiting the idle 0.5 s instead, a stream whose bookmarks come more often than
                    # that never paused, and the version stayed unsaved until the step ended.)
                    timeout = QUIET_S
                else:
                    timeout = 0.5
                try:
                    lines = reader.get(timeout=timeout)
                except Exception:  # re-raised: whatever broke the connection, what arrived first is kept
                    # The connection broke: keep what arrived before it, then report the error.
                    writer.flush(mark=pending_rv)
                    raise
                if lines is END:
                    break
                writer.settle()  # count the batches stored meanwhile (their progress)
                quiet = lines is None  # the stream paused: a burst ended, so what is held goes now
                if quiet and not holding and not writer.in_flight:
                    self._write_progress()  # a burst is stored whole: its version is saved now
                if lines is not None:
                    # Appended to directly, not through a call per event: this is the collector's hot path.
                    pending = writer.held
                    typed = 0  # events the typed path took (added to the step's count once per chunk)
                    arrived: list[tuple[dict[str, Any], str, datetime]] = []
                    stamp, decode = self._stamp, decode_pod_event if wire_pods else None
                    with gc_paused():
                        try:
                            for line in lines:
                                wire = decode(line) if decode is not None else None
                                if wire is not None:
                                    obs = wire_pod_observation(
                                        wire[1], watch_type=wire[0], observed_at=stamp(), source=Source.API
                                    )
                                    if obs is not None:
                                        typed += 1
                                        pending.append(obs)
                                        pending_rv = wire[1].resource_version
                                        continue
                                event = self._decode(line)  # anything else, which the generic path reads
                                if event is None:
                                    continue
                                etype, obj = event
                                obj_rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
                                if etype == "BOOKMARK":
                                    self.result.bookmarks += 1
                                else:
                                    self.result.events += 1
                                    arrived.append((obj, etype, stamp()))
                                if obj_rv:
                                    pending_rv = obj_rv
                        finally:  # also when a line ends the watch (an ERROR): as counted one by one
                            self.result.events += typed
                        events = typed + len(arrived)
                        pending += self._observations(arrived, None)
                        del arrived
                    writer.count(events)
                # A batch goes when it holds ``batch_size`` events, or holds anything (a version reached by
                # bookmarks too) and the stream paused or ``batch_seconds`` passed since the last one.
                if writer.full() or ((writer.holding or pending_rv != saved_rv) and (quiet or writer.aged())):
                    writer.flush(mark=pending_rv)
                    saved_rv = pending_rv
                    self._beat()
            writer.flush(mark=pending_rv)
            saved_rv = pending_rv
            self.drain()
        except BaseException:
            # What arrived since the last hand-over is not stored and its version not saved: the next
            # step is given it again (a lost lease must not write more; a 410 relists).
            writer.discard()
            raise
        finally:
            reader.close()
        self.result.resource_version = saved_rv
        return saved_rv

    def _decode(self, line: bytes) -> tuple[str, dict[str, Any]] | None:
        """(type, object) of one watch line; raises Expired / WatchError for ERROR; None when skipped."""
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            self._malformed(f"malformed watch line ({exc}): {line[:200]!r}")
            return None
        if not isinstance(event, dict):
            self._malformed(f"watch line is not a JSON object: {line[:200]!r}")
            return None
        etype, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            self._malformed(f"watch event without an object: {line[:200]!r}")
            return None
        if etype == "ERROR":
            code, reason = obj.get("code"), obj.get("reason")
            message = obj.get("message") or ""
            if code == 410 or reason in ("Expired", "Gone"):
                raise Expired(f"{reason}: {message}")
            raise WatchError(f"watch ERROR {code} {reason}: {message}")
        if etype not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            self._malformed(f"unknown watch event type {etype!r}: {line[:200]!r}")
            return None
        return etype, obj

    def _malformed(self, message: str) -> None:
        self.result.malformed += 1
        log.warning("%s/%s: %s; skipped", self.cluster.name, self.spec.name, message)
        state.record_error(self.cluster, self.spec.name, message)

    # ---- storing -------------------------------------------------------------------------------------
    def _stamp(self) -> datetime:
        """When an event arrived: strictly increasing per watch (from one step to the next in this process:
        ``_last_stamps``), so the store's time order of one object's snapshots is the order the watch
        delivered them, even within one microsecond."""
        now = datetime.now(UTC)  # what timezone.now() gives with USE_TZ, without its settings lookup
        last = self._last_stamp
        if last is not None and now <= last:
            now = last + timedelta(microseconds=1)
        self._last_stamp = now  # kept for the next step by ``close``, once, not at every event
        return now

    def _stored(self, batch: StoredBatch) -> None:
        """One batch is stored: the writer counts them in batch order, on the step's thread (``settle``)."""
        if batch.saved is not None:
            # When it was stored, on the writer's thread: the step's thread counts it up to QUIET_S later,
            # and ``busy_seconds`` ends when the last object was stored, not when it was counted.
            self.result.busy_seconds = max(self.result.busy_seconds, batch.at - self.started)
            for rejected in batch.saved.rejected:
                state.record_error(self.cluster, self.spec.name, f"store rejected {rejected}")
        self._progress(batch.units, batch.mark)

    def drain(self) -> None:
        """Wait until every batch handed to the writer is stored (raises the error of one that failed),
        then write the progress they made."""
        self.writer.drain()
        self._write_progress()

    def close(self) -> None:
        """End the writer's threads after they stored what they were given, and write the progress of
        what was stored (the step's ``finally``); a step that lost its lease writes nothing more. The
        next step of this (cluster, resource) in this process stamps on from this one's last stamp."""
        if self._last_stamp is not None:
            _last_stamps[self.cluster.name, self.spec.name] = self._last_stamp
        try:
            self.writer.close()
        except Exception as exc:  # the step is already failing with its own error; this one is logged here
            message = f"storing a batch failed: {type(exc).__name__}: {exc}"
            log.warning("%s/%s: %s", self.cluster.name, self.spec.name, message, exc_info=exc)
            state.record_error(self.cluster, self.spec.name, message)
        saved, result = self.writer.result, self.result  # what the batches counted did, in total
        result.stored, result.duplicates, result.rejected = (
            saved.stored,
            saved.duplicates,
            len(saved.rejected),
        )
        result.pods_touched = saved.pods_touched
        if not self._lease_lost:
            try:
                self._write_progress()
            except Exception as exc:  # in the step's ``finally``: logged, the step's own error stands
                log.warning(
                    "%s/%s: progress not recorded: %s", self.cluster.name, self.spec.name, exc, exc_info=exc
                )

    def _progress(self, events: int, rv: str | None) -> None:
        """A batch of ``events`` events (reaching ``rv``, for a watch) is stored: count it, and write the
        progress when it was last written ``PROGRESS_S`` ago. Runs in batch order (the writer's ``settle``)."""
        self._unwritten_events += events
        if rv is not None:
            self._unwritten_rv = rv
        if time.monotonic() - self._progress_at >= PROGRESS_S:
            self._write_progress()

    def _progress_unwritten(self) -> bool:
        """True when stored events or a version reached are counted but not written yet."""
        return bool(self._unwritten_events) or self._unwritten_rv is not None

    def _write_progress(self) -> None:
        if self._progress_unwritten():
            state.record_events(
                self.cluster, self.spec.name, self._unwritten_events, resource_version=self._unwritten_rv
            )
            self._unwritten_events, self._unwritten_rv = 0, None
        self._progress_at = time.monotonic()

    def _observations(
        self, items: Iterable[tuple[dict[str, Any], str, datetime]], seen: set[str] | None
    ) -> list[Observation]:
        """Observations of raw objects; skips (and counts) invalid ones and node heartbeats."""
        out: list[Observation] = []
        is_node = self.spec.name == "nodes"
        for obj, etype, now in items:
            if seen is not None:
                identity = _identity(self.spec, obj)
                if identity:
                    seen.add(identity)
            try:
                obs = object_observation(
                    obj, kind_hint=self.spec.kind, watch_type=etype, observed_at=now, source=Source.API
                )
            except ValueError as exc:
                self._malformed(f"{etype} object rejected by the parser: {exc}")
                continue
            if obs is None:
                continue
            if seen is not None:  # a mirror pod's observation keys on its static uid, not metadata.uid
                seen.add(_observed_identity(self.spec, obs))
            if is_node and self._is_heartbeat(obs):
                self.result.dropped += 1
                continue
            out.append(obs)
        return out

    def _is_heartbeat(self, obs: Observation) -> bool:
        """True for a node snapshot whose fingerprint equals the last stored one (then dropped)."""
        if self.fingerprints is None:
            self.fingerprints = _node_fingerprints(self.cluster, self.result.resource_version)
        name = obs.name or ""
        if obs.kind == Kind.NODE_DELETED:
            self.fingerprints.pop(name, None)
            return False
        fingerprint = obs.payload.get("fingerprint")
        if fingerprint and self.fingerprints.get(name) == fingerprint:
            return True
        if fingerprint:
            self.fingerprints[name] = fingerprint
        return False

    # ---- reconcile -----------------------------------------------------------------------------------
    def _reconcile(self, seen: set[str]) -> None:
        """Objects the store holds as alive but the fresh list lacks were deleted during the gap."""
        gone = [
            (identity, row)
            for identity, row in _alive_in_store(self.cluster, self.spec)
            if identity not in seen
        ]
        if not gone:
            return
        now = timezone.now()
        synthetic = []
        for identity, row in gone:
            obs = _synthetic_deletion(self.cluster, self.spec, identity, row, now)
            if obs is not None:
                synthetic.append(obs)
        log.info(
            "%s/%s: %d object(s) vanished during the gap; storing synthetic deletions",
            self.cluster.name,
            self.spec.name,
            len(synthetic),
        )
        self.writer.hold(synthetic)
        self.writer.flush()
        self.result.synthetic_deletions += len(synthetic)


def _status_message(exc: Any) -> str:
    try:
        body = orjson.loads(exc.body or b"{}")
        return f"{body.get('reason') or exc.reason}: {body.get('message') or ''}"
    except (orjson.JSONDecodeError, TypeError):
        return f"{exc.status} {exc.reason}"


def _identity(spec: ResourceSpec, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    if spec.name == "nodes":
        return str(meta.get("name") or "")
    return str(meta.get("uid") or "")


def _observed_identity(spec: ResourceSpec, obs: AnyObservation) -> str:
    if spec.name == "pods":
        return obs.pod_uid or ""
    if spec.name == "nodes":
        return obs.name or ""
    return str(obs.payload.get("uid") or "")


def _snapshots(cluster: Cluster, spec: ResourceSpec, *, chunk_size: int = 5000) -> Generator[StoredRow]:
    """The stored snapshots and deletions of ``spec``'s kind in ``cluster``, oldest first (workloads: the
    payload names the kind, filtered once decoded)."""
    rows = observation_rows.selection(cluster, kinds=(spec.live_kind, spec.deleted_kind))
    where = observation_rows.field_is(("kind",), spec.kind) if spec.live_kind == Kind.WORKLOAD else None
    return observation_rows.iter_rows(rows.order_by("observed_at", "id"), where, chunk_size=chunk_size)


def _any_snapshot(cluster: Cluster, spec: ResourceSpec) -> bool:
    """Whether anything of ``spec``'s kind is stored in ``cluster``."""
    if spec.live_kind != Kind.WORKLOAD:
        return observation_rows.selection(cluster, kinds=(spec.live_kind, spec.deleted_kind)).exists()
    found = _snapshots(cluster, spec, chunk_size=500)
    try:
        return next(found, None) is not None
    finally:
        found.close()


def _alive_in_store(cluster: Cluster, spec: ResourceSpec) -> list[tuple[str, dict[str, str]]]:
    """(identity, fields) of every object of ``spec``'s kind whose newest stored snapshot is not a deletion.

    Read from the observations, the source of truth, and not from the derive stage's current-state rows,
    which may not have caught up with what this collector stored a moment ago.
    """
    newest: dict[str, tuple[tuple[datetime, int], str, dict[str, str]]] = {}
    if spec.name == "pods":
        # A pod's identity and uid are its row's pod UID (the parsers key a pod snapshot on its payload's
        # uid): the columns alone, no payload read, for every pod the cluster ever had, in no order (the
        # kind's index holds no time, migration 0027: the newest is chosen below, not sorted for).
        chosen = observation_rows.selection(cluster, kinds=(spec.live_kind, spec.deleted_kind))
        columns = ("observed_at", "id", "kind", "pod_uid", "namespace", "name", "pod_uid")
        snapshots: Iterable[tuple[datetime, int, str, str | None, str, str, Any]] = (
            observation_rows.columns_of(chosen, *columns, chunk_size=5000)
        )
    else:
        snapshots = (
            (
                row.observed_at,
                row.id,
                row.kind,
                row.pod_uid,
                row.namespace,
                row.name,
                observation_rows.field_of(row.payload, "uid"),
            )
            for row in _snapshots(cluster, spec)
        )
    for observed_at, oid, kind, pod_uid, namespace, name, uid in snapshots:
        identity = pod_uid if spec.name == "pods" else name if spec.name == "nodes" else uid
        key = str(identity or "")
        if key and (key not in newest or newest[key][0] < (observed_at, oid)):
            newest[key] = (
                (observed_at, oid),
                kind,
                {"uid": str(uid or pod_uid or ""), "namespace": namespace, "name": name},
            )
    return [(identity, row) for identity, (_at, kind, row) in newest.items() if kind == spec.live_kind]


def _synthetic_deletion(
    cluster: Cluster, spec: ResourceSpec, identity: str, row: dict[str, str], now: datetime
) -> Observation | None:
    """A deletion (source ``synthetic``, watch ``RELIST_GONE``) carrying the last stored state."""
    if spec.name == "pods":
        rows = observation_rows.selection(cluster, kinds=(spec.live_kind,), pod_uids=[identity])
    elif spec.name == "nodes":
        rows = observation_rows.selection(cluster, kinds=(spec.live_kind,), name=identity)
    else:
        rows = observation_rows.selection(
            cluster, kinds=(spec.live_kind,), namespace=row.get("namespace") or "", name=row.get("name") or ""
        )
    rows = rows.order_by("-observed_at", "-id")
    last = None
    for candidate in observation_rows.rows(rows[:20]):
        if (
            spec.name == "nodes"
            or (candidate.payload or {}).get("uid") == row.get("uid")
            or spec.name == "pods"
        ):
            last = candidate
            break
    if last is None:
        payload: dict[str, Any] = {
            "uid": row.get("uid"),
            "namespace": row.get("namespace"),
            "name": row.get("name"),
        }
        if spec.live_kind == Kind.WORKLOAD:
            payload["kind"] = spec.kind
        key = f"{spec.name}:{identity}:gone"
        last_fields = {"pod_uid": identity if spec.name == "pods" else None, "node": None}
    else:
        payload = dict(last.payload or {})
        key = f"{last.dedupe_key}:gone"
        last_fields = {"pod_uid": last.pod_uid, "node": last.node or None}
    payload["watch"] = "RELIST_GONE"
    name = row.get("name") or None
    return Observation(
        kind=spec.deleted_kind,
        source=Source.SYNTHETIC,
        observed_at=now,
        dedupe_key=key[:200],
        pod_uid=last_fields["pod_uid"],
        node=last_fields["node"] or (identity if spec.name == "nodes" else None),
        namespace=row.get("namespace") or None,
        name=name,
        payload=payload,
    )


def _node_fingerprints(cluster: Cluster, rv: str) -> dict[str, str]:
    """The last stored fingerprint of every node, from this process's cache when it is still current.

    The cache is current when this process saved it at the version the step starts from (it ran the
    previous step); a chain that hopped to another worker reads the store instead, so a heartbeat is
    never compared with a fingerprint another worker has since replaced.
    """
    with _cache_lock:
        cached = _fingerprints.get(cluster.pk)
        if cached is not None and cached[0] == rv and rv:
            return dict(cached[1])
    found: dict[str, str] = {}
    rows = observation_rows.newest_per(
        observation_rows.selection(cluster, kinds=(Kind.NODE, Kind.NODE_DELETED)), "name"
    )
    done: set[str] = set()
    for row in observation_rows.rows(rows):
        name, kind, fingerprint = row.name, row.kind, observation_rows.field_of(row.payload, "fingerprint")
        if name in done:
            continue
        done.add(name)
        if kind == Kind.NODE and fingerprint:
            found[name] = fingerprint
    return found


def _keep_fingerprints(cluster: Cluster, result: StepResult, fingerprints: dict[str, str] | None) -> None:
    """Cache the node fingerprints at the version a clean step reached (a failed step's may be ahead of
    what was stored, so they are dropped)."""
    with _cache_lock:
        if fingerprints is not None and result.ok and result.resource_version:
            _fingerprints[cluster.pk] = (result.resource_version, dict(fingerprints))
        elif fingerprints is not None:
            _fingerprints.pop(cluster.pk, None)
