"""The one writer of podlife's observations and derived rows (other tables' writers: docs/architecture.md).

``save_observations`` appends observations idempotently: each carries a dedupe key unique per cluster, so a
re-delivered watch event, a re-ingested log line or a re-sent span is stored once. On PostgreSQL the
table is partitioned by observed day (``timelines/partitions.py``): a batch expected new goes in by one
``COPY`` straight into the table, checked in the same transaction against the other partitions' keys; a
batch that holds stored keys is looked up across the partitions first and only its new rows are COPYed (a
staging table and ``INSERT … SELECT … ON CONFLICT DO NOTHING`` when a COPY meets a unique violation all
the same); SQLite (the embedded default) keeps one table and takes a correct path with the same results. An invalid record is
rejected with its key and the reason; the rest of its batch is stored.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import msgspec
import orjson
import psycopg
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone
from psycopg import errors as psycopg_errors
from psycopg.abc import PQGen
from psycopg.adapt import Dumper
from psycopg.copy import LibpqWriter
from psycopg.generators import fetch_many
from psycopg.waiting import Wait

from timelines import dirty, partitions, payloads
from timelines.compact import Texts
from timelines.lifecycle.cluster_objects import NodeTimeline, PdbTimeline
from timelines.lifecycle.observation import (
    AnyObservation,
    EncodedObservation,
    InvalidObservation,
    Kind,
    Observation,
)
from timelines.lifecycle.timeline import PodTimeline
from timelines.models import (
    Cluster,
    Finding,
    Interval,
    Marker,
    Node,
    PDBStatusSample,
    Pod,
    PodDisruptionBudget,
    Workload,
    WorkloadStatusSample,
)
from timelines.models import Observation as ObservationRow
from timelines.observation_rows import pod_id_bytes, uid_text
from timelines.pg_arrays import int_array, text_array, time_array
from timelines.projections import NodeRow, PdbRow, WorkloadRow
from timelines.signals import observations_stored

log = logging.getLogger(__name__)

# Column limits of timelines_observation; a longer value would fail the whole COPY, so it is caught here.
_TEXT_LIMITS = {"node": 253, "namespace": 253, "name": 253, "pod_uid": 64}
_COLUMNS = (
    "cluster_id",
    "pod_uid",
    "kind",
    "source",
    "observed_at",
    "received_at",
    "key_hash",  # the row's dedupe key is in its body (migration 0028)
    "node",
    "namespace",
    "name",
    "body",
    "pod_id",  # the pod's UID as 16 bytes when it is a canonical UUID, pod_uid NULL then (migration 0029)
)
_COLUMN_LIST = ", ".join(_COLUMNS)
_HASH_AT = _COLUMNS.index("key_hash")
_UID_AT = _COLUMNS.index("pod_uid")
_POD_ID_AT = _COLUMNS.index("pod_id")
_BODY_AT = _COLUMNS.index("body")
_KIND_AT = _COLUMNS.index("kind")
_OBSERVED_AT = _COLUMNS.index("observed_at")
_RECEIVED_AT = _COLUMNS.index("received_at")
_STAGE = "podlife_observation_stage"
_STAGE_COLUMNS = (
    "cluster_id bigint, pod_uid varchar(64), kind varchar(32), source varchar(32), observed_at timestamptz, "
    "received_at timestamptz, key_hash uuid, node varchar(253), namespace varchar(253), "
    "name varchar(253), body bytea, pod_id uuid"
)
_SQLITE_CHUNK = 500  # stays under SQLite's bound-parameter limit


@dataclass(frozen=True)
class Rejected:
    key: str
    reason: str

    def __str__(self) -> str:
        return f"{self.key}: {self.reason}"


@dataclass
class SaveResult:
    """What one ``save_observations`` call did."""

    received: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: list[Rejected] = field(default_factory=list)
    pods_touched: set[str] = field(default_factory=set)
    stored_keys: set[str] = field(default_factory=set)

    @property
    def nothing_new(self) -> bool:
        return self.stored == 0

    def merge(self, other: SaveResult) -> None:
        self.received += other.received
        self.stored += other.stored
        self.duplicates += other.duplicates
        self.rejected.extend(other.rejected)
        self.pods_touched |= other.pods_touched
        self.stored_keys |= other.stored_keys


def cluster_for(name_or_cluster: Cluster | str, *, origin: str = Cluster.Origin.LIVE) -> Cluster:
    """The cluster with this name, created (and validated) when new; safe when threads race to create it."""
    if isinstance(name_or_cluster, Cluster):
        return name_or_cluster
    cluster = Cluster.objects.filter(name=name_or_cluster).first()
    if cluster is not None:
        return cluster
    cluster = Cluster(name=name_or_cluster, origin=origin)
    cluster.full_clean(validate_unique=False)
    try:
        with transaction.atomic():
            cluster.save()
    except IntegrityError:  # another thread or worker created it first
        return Cluster.objects.get(name=name_or_cluster)
    return cluster


def save_observations(
    cluster: Cluster | str,
    batch: Iterable[AnyObservation | Mapping[str, Any]],
    *,
    now: datetime | None = None,
) -> SaveResult:
    """Append a batch of observations to ``cluster``, idempotently.

    Records may be ``Observation`` objects or mappings with the same fields. Returns counts of stored,
    duplicate (already stored, or repeated within the batch) and rejected records, and the UIDs of the
    pods that got a new observation. Rejected records never stop the rest of the batch.
    """
    cluster = cluster_for(cluster)
    if cluster.read_only:
        raise PermissionError(
            f"cluster {cluster.name!r} is read-only (an imported incident) and takes no observations"
        )
    received_at = now or timezone.now()
    return _append(cluster.pk, ((record, received_at) for record in batch))


def _append(
    cluster_id: int, pairs: Iterable[tuple[AnyObservation | Mapping[str, Any], datetime]]
) -> SaveResult:
    """Validate, deduplicate within the batch and insert ``(record, received_at)`` pairs; record the keys
    the new ones make dirty in the same transaction (``timelines/dirty.py``)."""
    result = SaveResult()
    rows: dict[str, tuple[Any, ...]] = {}  # stored dedupe key -> row (its body still None)
    plains: list[payloads.Plain] = []  # the rows' bodies before compression, in the same order
    facts: dict[str, AnyObservation] = {}  # stored dedupe key -> observation (for its dirty keys)
    since: list[datetime | None] = []  # the rows' look-up bounds, in the same order (``probe_since``)
    # Only PostgreSQL's partitions are looked up; a cluster entered in ``_unbounded`` has its bounds ignored.
    bounded = connection.vendor == "postgresql" and cluster_id not in _unbounded
    unbounded = False  # a row was observed before its own bound
    for record, received_at in pairs:
        result.received += 1
        try:
            obs = _coerce(record)
            key, row, plain = _keyed_row(cluster_id, obs, received_at)
        except (InvalidObservation, TypeError, ValueError) as exc:
            key = _record_key(record)
            result.rejected.append(Rejected(key, _reason(exc)))
            log.warning("rejected observation %s: %s", key, _reason(exc))
            continue
        if key in rows:
            result.duplicates += 1
            continue
        rows[key] = row
        plains.append(plain)
        facts[key] = obs
        bound = probe_since(obs) if bounded else None
        if bound is not None and obs.observed_at < bound:
            bound, unbounded = None, True
        since.append(bound)
    payloads.train_due(background=True)  # for the next batches (this one's bodies are made), off this thread
    if rows:
        rows = dict(zip(rows, _sealed(rows.values(), plains), strict=True))
        if connection.vendor == "postgresql":
            if unbounded:
                _unbound(cluster_id)
            inserted = _insert_postgres(cluster_id, rows, facts, since)
        else:
            inserted = _insert_portable(cluster_id, rows, facts)
        result.stored = len(inserted)
        result.duplicates += len(rows) - len(inserted)
        result.pods_touched = {uid for uid, _key in inserted if uid}
        result.stored_keys = {key for _uid, key in inserted}
        if inserted:
            # After the commit (at once outside a caller's transaction): the derive stage is told there
            # is work (timelines/derivation.py connects to this signal).
            transaction.on_commit(
                functools.partial(observations_stored.send, sender=SaveResult, cluster_id=cluster_id)
            )
    return result


# How much earlier than its pod's creation (``creationTimestamp``, the API server's clock) a pod snapshot
# may be observed (by the collector's clock): ``probe_since``.
CREATED_SKEW = timedelta(hours=1)
_POD_KINDS = frozenset((Kind.POD, Kind.POD_DELETED))


class _Created(msgspec.Struct):
    """The one field of a pod's payload ``probe_since`` reads (msgspec skips the rest of the JSON)."""

    created: datetime | None = None


_created_of = msgspec.json.Decoder(_Created).decode


def probe_since(obs: AnyObservation) -> datetime | None:
    """The earliest time a stored copy of ``obs``'s key can have been observed at, or None when nothing
    bounds it (migration 0031): a pod snapshot's key names one state of one pod (its UID and a
    resourceVersion), which everyone observed after the pod was created, less ``CREATED_SKEW``. The look-up
    in the other partitions probes its key only from there on. Its own ``observed_at`` earlier than that
    breaks the rule (a clock far off): the store then lets no bound hold for its cluster (``_unbound``)."""
    if obs.kind not in _POD_KINDS:
        return None
    if type(obs) is EncodedObservation:
        try:
            created = _created_of(obs.payload_json).created
        except msgspec.MsgspecError:  # not JSON the typed path makes: no bound
            return None
    else:
        text = obs.payload.get("created") if isinstance(obs.payload, dict) else None
        try:
            created = datetime.fromisoformat(text) if isinstance(text, str) else None
        except ValueError:
            return None
    if created is None or created.utcoffset() is None:
        return None
    try:
        return created - CREATED_SKEW
    except OverflowError:  # the first hour of year 1
        return None


_UNBOUND = "INSERT INTO podlife_unbounded_clusters (cluster_id) VALUES (%s) ON CONFLICT DO NOTHING"
_unbounded: set[int] = set()  # clusters this process entered there


def _unbound(cluster_id: int) -> None:
    """Enter the cluster in ``podlife_unbounded_clusters`` (PostgreSQL), before a row of it observed earlier
    than its own bound is stored: the look-up then ignores the bounds of its batches (``probe_since``).
    Outside a caller's transaction, committed at once: a stored copy of that row's key is never missed.
    (``_append`` computes no bound for a cluster already in ``_unbounded``, so it never comes here again.)"""
    with connection.cursor() as cursor:
        cursor.execute(_UNBOUND, [cluster_id])
    if not connection.in_atomic_block:
        _unbounded.add(cluster_id)


def _mark_dirty(
    cluster_id: int, inserted: Iterable[tuple[str | None, str]], facts: Mapping[str, AnyObservation]
) -> None:
    """Record the keys the inserted rows make dirty (inside the transaction that inserted them)."""
    dirty.append_batch(cluster_id, dirty.marked_keys(facts[key] for _uid, key in inserted))


def _coerce(record: AnyObservation | Mapping[str, Any]) -> AnyObservation:
    if isinstance(record, Observation | EncodedObservation):
        return record
    if not isinstance(record, Mapping):
        raise TypeError(f"expected an Observation or a mapping, got {type(record).__name__}")
    known = {"kind", "source", "observed_at", "dedupe_key", "pod_uid", "node", "namespace", "name", "payload"}
    unknown = set(record) - known
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}; expected only {sorted(known)}")
    missing = {"kind", "source", "observed_at", "dedupe_key"} - set(record)
    if missing:
        raise ValueError(f"missing field(s) {sorted(missing)}")
    values = dict(record)
    if isinstance(values["observed_at"], str):
        try:
            values["observed_at"] = datetime.fromisoformat(values["observed_at"])
        except ValueError:
            raise ValueError(f"observed_at {record['observed_at']!r} is not an ISO 8601 time") from None
    return Observation(**values)


def _clean_text(value: str | None, column: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"{column} must be a string, got {type(value).__name__}")
    limit = _TEXT_LIMITS[column]
    if len(value) > limit:
        raise ValueError(f"{column} is {len(value)} characters long; at most {limit} are allowed")
    # PostgreSQL text cannot hold NUL; keep the rest of the value visible.
    return value.replace("\x00", "\ufffd")


def _json_bytes(value: Any) -> bytes:
    """Compact JSON; a \\u0000 (NUL) becomes U+FFFD as in the text columns, which cannot hold it (and
    as in the jsonb payloads stored before bodies)."""
    return _jsonb_safe(orjson.dumps(value))


# A ``\u0000`` escape in JSON text: the ``\`` that starts it is preceded by an even number of backslashes
# (a string holding the six characters ``\u0000`` is written ``\\u0000``, which is no escape).
_NUL_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def _jsonb_safe(text: bytes) -> bytes:
    """JSON text with each ``\\u0000`` escape (a NUL, which jsonb refuses) made ``\\ufffd``; a string
    that only spells ``\\u0000`` is left as it is."""
    return _NUL_ESCAPE.sub(rb"\1\\ufffd", text) if b"\\u0000" in text else text


def _json_text(value: Any) -> str:
    return _json_bytes(value).decode()


# jsonb's binary input: a format version byte, then the JSON text (the derived rows' JSON columns).
_JSONB_V1 = b"\x01"

# ``Texts(a, b, ...)`` is ``tuple.__new__(Texts, (a, b, ...))`` behind a Python-level ``__new__``; ``_row``
# calls the builtin itself, once a row.
_texts = tuple.__new__


def _row(cluster_id: int, obs: AnyObservation, received_at: datetime) -> tuple[Any, ...]:
    """The ``_COLUMNS`` of one observation, as ``copy_observation_rows`` sends them (``_keyed_row``)."""
    _key, row, plain = _keyed_row(cluster_id, obs, received_at)
    return _sealed([row], [plain])[0]


def _sealed(rows: Iterable[tuple[Any, ...]], plains: Sequence[payloads.Plain]) -> list[tuple[Any, ...]]:
    """``rows`` with their bodies made of ``plains`` (``payloads.seal``), in one compression call a
    dictionary."""
    return [
        (*row[:_BODY_AT], body, *row[_BODY_AT + 1 :])
        for row, body in zip(rows, payloads.seal(plains), strict=True)
    ]


def _keyed_row(
    cluster_id: int, obs: AnyObservation, received_at: datetime
) -> tuple[str, tuple[Any, ...], payloads.Plain]:
    """The dedupe key of one observation as stored, its ``_COLUMNS`` as ``copy_observation_rows`` sends
    them with the body left None, and the body before compression (``payloads.plain``: the payload and the
    key, the row's own texts written as one byte each; ``_sealed`` compresses it into the row). The key's
    hash (``partitions.key_digest``) is in ``key_hash``, the pod's UID as 16 bytes in ``pod_id``: both
    uuid columns get their 16 bytes as they are (``_Uuid16Dumper``)."""
    if type(obs) is EncodedObservation:  # the typed pod path encoded it already
        payload = _jsonb_safe(obs.payload_json)
    else:
        try:
            payload = _json_bytes(obs.payload)
        except TypeError as exc:
            raise ValueError(f"payload is not JSON-serializable ({exc})") from None
    uid, node, namespace, name, key = obs.pod_uid, obs.node, obs.namespace, obs.name, obs.dedupe_key
    # The common case, checked at once: short strings without NUL (what an API server sends).
    texts = f"{uid}{node}{namespace}{name}{key}"
    if (
        "\x00" in texts
        or type(node) is not str
        or type(namespace) is not str
        or type(name) is not str
        or len(node) > _TEXT_LIMITS["node"]
        or len(namespace) > _TEXT_LIMITS["namespace"]
        or len(name) > _TEXT_LIMITS["name"]
        or (uid is not None and (type(uid) is not str or len(uid) > _TEXT_LIMITS["pod_uid"]))
    ):
        uid, node = _clean_text(uid, "pod_uid"), _clean_text(node, "node")
        namespace, name = _clean_text(namespace, "namespace"), _clean_text(name, "name")
        key = key.replace("\x00", "\ufffd")
    uid = uid or None
    plain = payloads.plain(
        cluster_id, obs.kind, payload, _texts(Texts, (uid, node, namespace, name, obs.observed_at)), key
    )
    pod_id = pod_id_bytes(uid)  # a UUID as 16 bytes, its text not kept (migration 0029)
    row = (
        cluster_id,
        None if pod_id is not None else uid,
        obs.kind,
        obs.source,
        obs.observed_at,
        received_at,
        partitions.key_digest(cluster_id, key),
        node,
        namespace,
        name,
        None,  # the body: ``_sealed``
        pod_id,
    )
    return key, row, plain


def _uid_of(row: tuple[Any, ...]) -> str | None:
    """The pod UID of a row ``_keyed_row`` made: its text, or its 16 bytes' canonical text."""
    uid = row[_UID_AT]
    if uid is None and row[_POD_ID_AT] is not None:
        return uid_text(row[_POD_ID_AT])
    return cast(str | None, uid)


def _record_key(record: object) -> str:
    key = getattr(record, "dedupe_key", None)
    if key is None and isinstance(record, Mapping):
        key = record.get("dedupe_key")
    return str(key) if key else f"<record without dedupe key: {str(record)[:80]!r}>"


def _reason(exc: Exception) -> str:
    if isinstance(exc, InvalidObservation):
        return "; ".join(exc.problems)
    return str(exc)


# The batch's keys that some partition holds (``podlife_stored_keys``, migration 0018: a PL/pgSQL function
# keeps its statements' plans for the session, where planning a statement over the partitions cost about
# 1 ms a batch). Each key is one probe of a partition's unique key index (``partitions.KEY_HASH``: the
# hash of the cluster and the key, migration 0026; the key itself is then compared on the row), whatever
# the statistics say. The cluster is compared as an expression (``cluster_id + 0``) on purpose: as a
# plain equality, a partition whose statistics do not know the cluster yet (a new cluster, a new day;
# analysed late or, without autovacuum, never) was planned through an index that starts with cluster_id
# (by kind, by pod), filtering every row of the cluster for every key (0.5 s a batch at 5,000 rows,
# growing with them). Only the key index can answer the probe of ``k``.
#
# For a batch whose rows all belong in one range partition (``target``), checked after its COPY
# (``podlife_batch_is_new``, ``_copy_new_batch``), that partition is left out: its own unique index fails
# the COPY on a key it holds. The function first locks the parent (no detach or
# drop can follow until the transaction ends) and returns one NULL row when ``target`` is no longer
# attached with the bounds the process knew. Then it takes the span of the other range partitions that
# hold a row of the batch's kinds for this cluster (their bounds from the catalogue, and one descent of
# each one's (cluster, kind) index, stopping at the first row; migration 0027), widened by the times of
# such rows in the default partition, and probes the keys only in the partitions that span reaches: the
# days ahead and the default partition are pruned unless they hold something of those kinds, and a cluster
# whose rows all sit in the day being written (a new cluster, a fresh install's first day) costs no probe
# at all. A dedupe key names one fact and a fact has one kind, so a stored copy of a key is a row of the
# same kind (the keys of API snapshots, the only facts stored again on another day, start with their
# kind: ``pod:``, ``event:``, ``nodes:…:gone``). Without ``target`` (the look-up before a COPY,
# ``_stored_keys``) every partition is probed. Either way a key with a bound (``probe_since``) only from it on.
_LOOKUP = "SELECT k FROM podlife_stored_keys(%s::bigint, %s::text, %s::varchar[], NULL, NULL, NULL, NULL, %s::text) AS k"
_STAGED_COLUMNS = ", ".join(f"s.{c}" for c in _COLUMNS)
# On PostgreSQL the observation table has no foreign key to its cluster (migration 0019): a deferred key
# checked each row at COMMIT (one look-up and row lock of the cluster a row, about an eighth of the store's
# database time). Each transaction that writes observations takes this one lock of the cluster row
# instead; a cluster is deleted only under FOR UPDATE of its row (``models.ClusterQuerySet``), so either
# the writer commits first and the deletion then finds and deletes its rows, or the deletion commits first
# and the writer finds no row here and stores nothing: no observation outlives its cluster.
_LOCK_CLUSTER = "SELECT id FROM timelines_cluster WHERE id = %s FOR KEY SHARE"


def _cluster_gone(cluster_id: int) -> IntegrityError:
    """What the foreign key raised when the cluster's row lock found no cluster (deleted meanwhile)."""
    return IntegrityError(
        f"cluster {cluster_id} does not exist (deleted while its observations were being stored):"
        " nothing of the batch was stored"
    )


def _cluster_held(cluster_id: int, row: tuple[Any, ...] | None) -> None:
    """Raise ``_cluster_gone`` when ``_LOCK_CLUSTER`` found no cluster."""
    if row is None:
        raise _cluster_gone(cluster_id)


# Clusters whose last batch met a stored key: their batches are looked up across every partition before
# their COPY until one finds no stored key (a relist of stored pods, a replay after a crash), so that only
# the first such batch pays a failed COPY.
_probe_all: set[int] = set()
_PIPELINE = psycopg.Pipeline.is_supported()


def _key_params(
    cluster_id: int, rows: Mapping[str, tuple[Any, ...]], since: Sequence[datetime | None]
) -> tuple[list[Any], str | None]:
    """The cluster, the batch's keys and its kinds as ``podlife_stored_keys`` takes them, each list as one
    array literal (psycopg would dump a list value by value, a µs a key); and the keys' bounds (``since``,
    in the same order; ``probe_since``) as one, or None when none has one."""
    bounds = time_array(since) if any(since) else None
    return [
        cluster_id,
        text_array(list(rows)),
        text_array(sorted({row[_KIND_AT] for row in rows.values()})),
    ], bounds


def _stored_keys(
    raw: psycopg.Cursor[Any],
    cluster_id: int,
    rows: Mapping[str, tuple[Any, ...]],
    since: Sequence[datetime | None],
) -> set[str]:
    """The dedupe keys of ``rows`` some partition holds (each from its bound in ``since`` on), with the
    cluster's row locked first (``_LOCK_CLUSTER``): both in one round trip with the transaction's BEGIN
    (psycopg's pipeline mode)."""
    params, bounds = _key_params(cluster_id, rows, since)
    params.append(bounds)
    pg = raw.connection
    with psycopg.Cursor(pg) as lock, psycopg.Cursor(pg) as look:
        # A libpq older than 14 has no pipeline mode: the statements then go one after the other.
        with pg.pipeline() if _PIPELINE else contextlib.nullcontext():
            lock.execute(_LOCK_CLUSTER, [cluster_id])
            look.execute(_LOOKUP, params)
        _cluster_held(cluster_id, lock.fetchone())
        return {key for (key,) in look.fetchall()}


# A batch expected new, as one simple query: PostgreSQL runs its statements as one implicit transaction
# (inside a caller's transaction, as part of it), so a failed check rolls the COPY back with it. The check
# (migration 0020) locks the cluster's row and raises when the batch's partition is not what the process
# read or when another partition holds one of its keys; the dirty keys follow.
_COPY_NEW = (
    f"COPY timelines_observation ({_COLUMN_LIST}) FROM STDIN (FORMAT BINARY); "
    "SELECT podlife_batch_is_new(%s::bigint, %s::text, %s::varchar[], %s, %s, %s, %s, %s::text)"
)
_COPY_NEW_MARKED = f"{_COPY_NEW}; {dirty.INSERT_BATCH}"


class _StatementsAfterCopy(LibpqWriter):
    """Ends a COPY that is the first statement of several in one simple query: psycopg's own writer takes
    exactly one result after the data, this one every statement's, and raises the first error among them."""

    def finish(self, exc: BaseException | None = None) -> None:
        if exc is not None:  # the COPY is cancelled (psycopg's writer sends the error message)
            super().finish(exc)
            return
        results = self.connection.wait(_end_copy(self._pgconn))
        for result in results:
            if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
                raise psycopg_errors.error_from_result(result, encoding=self._pgconn._encoding)
        self.cursor._results = results[:1]


def _end_copy(pgconn: psycopg.pq.abc.PGconn) -> PQGen[list[psycopg.pq.abc.PGresult]]:
    """Send the end of the COPY data and collect the results of every statement of the query."""
    while pgconn.put_copy_end(None) == 0:
        while not (yield Wait.W):
            continue
    while True:
        while not (yield Wait.W):
            continue
        if pgconn.flush() == 0:
            break
    results: list[psycopg.pq.abc.PGresult] = yield from fetch_many(pgconn)
    return results


def _copy_new_batch(
    cluster_id: int,
    rows: Mapping[str, tuple[Any, ...]],
    target: partitions.Partition,
    marks: list[Any] | None,
    since: Sequence[datetime | None],
) -> None:
    """COPY ``rows`` (every one in ``target``'s range), check them new (``podlife_batch_is_new``) and record
    ``marks`` (``dirty.batch_params``) in one exchange after the data: two with the server in all, the
    same as a plain autocommit COPY. Raises UniqueViolation when a partition holds one of their keys (its
    own unique index fails the COPY, the check finds it in another) and ObjectNotInPrerequisiteState when
    ``target`` is not attached as it was read; nothing is stored then."""
    params, bounds = _key_params(cluster_id, rows, since)
    params += [
        target.lower or partitions.EARLIEST,
        target.upper or partitions.LATEST,
        target.name,
        target.bound,
        bounds,
    ]
    statement = _COPY_NEW if marks is None else _COPY_NEW_MARKED
    with connection.cursor() as cursor:
        raw = cursor.cursor
        try:
            _write_rows(
                raw.copy(statement, params + (marks or []), writer=_StatementsAfterCopy(raw)), rows.values()
            )
        except psycopg_errors.ForeignKeyViolation as exc:
            raise _cluster_gone(cluster_id) from exc


def _insert_postgres(
    cluster_id: int,
    rows: Mapping[str, tuple[Any, ...]],
    facts: Mapping[str, AnyObservation],
    since: Sequence[datetime | None],
) -> list[tuple[str | None, str]]:
    """Insert ``rows`` (by their dedupe keys) and mark what they make dirty, in one transaction; returns
    (pod uid, dedupe key) of each row actually inserted.

    The observation table is partitioned by observed time (``timelines/partitions.py``), and PostgreSQL
    keeps a unique key only within one partition, while a fact can come again on another day (a relist
    re-sends an unchanged pod with its old resourceVersion). A batch whose rows all belong in one range
    partition is expected new: it is COPYed straight into the table, and checked after the COPY in the
    same transaction (``_copy_new_batch``): the partition's own unique index fails the COPY on a key it
    holds, and ``podlife_stored_keys`` looks the keys up in the other partitions that hold rows of the
    batch's kinds for this cluster (one probe of each one's unique key-hash index a key; a
    cluster whose rows all sit in the day being written costs no probe at all; a pod snapshot's key is
    probed only in the days since its pod was created, ``since``: ``probe_since``). Each row is written and
    indexed once, and the whole takes the two exchanges of an autocommit COPY. When either finds a stored
    key, the batch is looked up across every partition first and only the rows not found are COPYed (and
    so are the cluster's next batches, until one finds nothing stored: a relist of stored pods writes
    nothing at all); so is a batch that spans two partitions or goes to the default one.
    The look-up is a check-then-insert without a lock (an advisory lock per (cluster, kind) serialised a
    chain's two writer threads and halved the collector's rate): two writers storing the same fact at
    once land in the same partition when its time comes from the fact (log lines, spans, events, audit),
    where the partition's unique index fails the second COPY, which then goes through a staging table and
    ``INSERT … ON CONFLICT DO NOTHING``; facts timed by their delivery (API snapshots) have one writer per
    (cluster, resource), the lease's. The dirty keys are one small row more in the same transaction
    (``dirty.append_batch``), and the cluster's row is locked once in it (``_LOCK_CLUSTER``: there is no
    foreign key to check each row).
    """
    nested = connection.in_atomic_block
    times = [row[_OBSERVED_AT] for row in rows.values()]
    if not nested:
        partitions.cover(max(times))
    target = None if cluster_id in _probe_all else partitions.range_holding(min(times), max(times))
    if target is not None:
        marks = dirty.batch_params(cluster_id, dirty.marked_keys(facts.values()))
        try:
            # Outermost, the query is its own transaction (autocommit); inside a caller's transaction a
            # savepoint, so that a failed check rolls back only the batch.
            with transaction.atomic() if nested else contextlib.nullcontext():
                _copy_new_batch(cluster_id, rows, target, marks, since)
            return [(_uid_of(row), key) for key, row in rows.items()]
        except psycopg_errors.UniqueViolation:
            _probe_all.add(cluster_id)  # a partition held a key: look them all up first from now on
        except psycopg_errors.ObjectNotInPrerequisiteState:
            partitions.forget_layout()  # the partition was dropped or re-made since this process read it
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            raw = cursor.cursor
            stored = _stored_keys(raw, cluster_id, rows, since)
            if stored:
                _probe_all.add(cluster_id)
            else:
                _probe_all.discard(cluster_id)
            new = {key: row for key, row in rows.items() if key not in stored} if stored else rows
            if new:
                copy_observation_rows(raw, "timelines_observation", new.values())
            inserted = [(_uid_of(row), key) for key, row in new.items()]
            if inserted:
                _mark_dirty(cluster_id, inserted, facts)
        return inserted
    except psycopg_errors.UniqueViolation:
        pass  # a concurrent writer stored the same fact between the look-up and the COPY
    with transaction.atomic():
        inserted = _insert_postgres_staged(cluster_id, rows, nested=nested)
        if inserted:
            _mark_dirty(cluster_id, inserted, facts)
    return inserted


# Column types of ``_COLUMNS`` as a binary COPY sends them. The server reads each field with its column's
# own binary input, so the body goes as the bytes ``_row`` made of it.
_COPY_TYPES = [
    "bigint", *["varchar"] * 3, "timestamptz", "timestamptz", "uuid", *["varchar"] * 3, "bytea", "uuid"
]  # fmt: skip


class _Uuid16Dumper(Dumper):
    """A uuid column's binary value from the 16 bytes the store's rows hold (``_keyed_row``), or from a
    ``uuid.UUID`` as psycopg's own dumper does."""

    format = psycopg.pq.Format.BINARY
    oid = psycopg.postgres.types["uuid"].oid

    def dump(self, obj: Any) -> bytes:
        return obj if type(obj) is bytes else cast(bytes, obj.bytes)


def set_row_types(copy: psycopg.Copy, types: Sequence[str] = _COPY_TYPES) -> None:
    """Declare the column types of a binary COPY of rows ``_keyed_row`` made (``types``: ``_COPY_TYPES``,
    or another column list of the same rows): their uuid columns take the rows' 16 bytes."""
    copy.cursor.adapters.register_dumper(None, _Uuid16Dumper)  # this cursor's, by the uuid oid only
    copy.set_types(list(types))


def copy_observation_rows(cursor: psycopg.Cursor[Any], table: str, rows: Iterable[tuple[Any, ...]]) -> None:
    """COPY rows made by ``_row`` into ``table`` (with ``_COLUMNS``), in the binary format.

    Binary spares both sides the text format's escaping of every payload and the server its parsing of
    every timestamp: about a third less work per row than text. ``bench/`` uses this for its raw-COPY
    baselines too, so they compare like with like.
    """
    _write_rows(cursor.copy(f"COPY {table} ({_COLUMN_LIST}) FROM STDIN (FORMAT BINARY)"), rows)


def _write_rows(
    copying: contextlib.AbstractContextManager[psycopg.Copy], rows: Iterable[tuple[Any, ...]]
) -> None:
    """Send ``rows`` through a COPY of ``_COLUMNS`` in the binary format (``copying``: ``Cursor.copy``)."""
    with copying as copy:
        set_row_types(copy)
        for row in rows:
            copy.write_row(row)


# The staged rows whose key no partition holds (probed as ``podlife_stored_keys`` probes: the key's hash
# names the index, the cluster is compared on the row).
_INSERT_STAGED = (
    f"INSERT INTO timelines_observation ({_COLUMN_LIST}) SELECT {_STAGED_COLUMNS} FROM {_STAGE} s "
    "LEFT JOIN LATERAL (SELECT true AS hit FROM timelines_observation o WHERE "
    f"{partitions.stored_key_hash_sql('o.')} = s.key_hash AND o.cluster_id + 0 = s.cluster_id LIMIT 1) x "
    "ON true WHERE x.hit IS NULL ON CONFLICT DO NOTHING RETURNING key_hash"
)


def _keys_by_hash(rows: Mapping[str, tuple[Any, ...]]) -> dict[bytes, str]:
    """The dedupe key of each row by its ``key_hash`` (16 bytes; a UUID's ``bytes``): what a statement
    that returns hashes stored."""
    return {row[_HASH_AT]: key for key, row in rows.items()}


def _insert_postgres_staged(
    cluster_id: int, rows: Mapping[str, tuple[Any, ...]], *, nested: bool
) -> list[tuple[str | None, str]]:
    """COPY into a temporary staging table, then one INSERT … SELECT of the keys no partition holds … ON
    CONFLICT DO NOTHING … RETURNING (inside the caller's ``atomic`` block; ``nested``: that block is inside
    a transaction of its caller's), with the cluster's row locked first (``_LOCK_CLUSTER``)."""
    # Only a caller's enclosing transaction needs the explicit TRUNCATE below: when the block is the
    # outermost one, its commit empties the staging table (ON COMMIT DELETE ROWS) more cheaply.
    with connection.cursor() as cursor:
        raw = cursor.cursor
        raw.execute(_LOCK_CLUSTER, [cluster_id])
        _cluster_held(cluster_id, raw.fetchone())
        raw.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGE} ({_STAGE_COLUMNS}) ON COMMIT DELETE ROWS")
        copy_observation_rows(raw, _STAGE, rows.values())
        # No conflict target: each partition's own unique key index (``partitions.KEY_HASH``) is the arbiter.
        raw.execute(_INSERT_STAGED)
        key_of = _keys_by_hash(rows)
        inserted = [(_uid_of(rows[key]), key) for key in (key_of[h.bytes] for (h,) in raw.fetchall())]
        if nested:  # inside a caller's transaction, where ON COMMIT has not happened yet
            raw.execute(f"TRUNCATE {_STAGE}")
    return inserted


def portable_row(row: tuple[Any, ...]) -> list[Any]:
    """A row ``_keyed_row`` made, as another database than PostgreSQL binds it: times adapted, the uuid
    columns as Django keeps a UUIDField there (32 hex digits)."""
    adapt = connection.ops.adapt_datetimefield_value
    values = list(row)
    values[_OBSERVED_AT], values[_RECEIVED_AT] = adapt(row[_OBSERVED_AT]), adapt(row[_RECEIVED_AT])
    values[_HASH_AT] = row[_HASH_AT].hex()
    if row[_POD_ID_AT] is not None:
        values[_POD_ID_AT] = row[_POD_ID_AT].hex()
    return values


def _insert_portable(
    cluster_id: int, rows: dict[str, tuple[Any, ...]], facts: Mapping[str, AnyObservation]
) -> list[tuple[str | None, str]]:
    """Any database: skip keys already stored, insert the rest with ON CONFLICT DO NOTHING, and mark what
    they make dirty in the same transaction.

    Knowing the stored keys first tells which rows are new without RETURNING; the conflict clause keeps a
    concurrent writer's identical row from failing the batch.
    """
    key_of = _keys_by_hash(rows)
    hashes = list(key_of)
    existing: set[str] = set()
    for i in range(0, len(hashes), _SQLITE_CHUNK):
        chunk = hashes[i : i + _SQLITE_CHUNK]
        found = ObservationRow.objects.filter(
            cluster_id=cluster_id, key_hash__in=[uuid.UUID(bytes=h) for h in chunk]
        )
        existing.update(key_of[h.bytes] for h in found.values_list("key_hash", flat=True) if h is not None)
    new = {key: row for key, row in rows.items() if key not in existing}
    params = [portable_row(row) for row in new.values()]
    marks = ", ".join(["%s"] * len(_COLUMNS))
    sql = (
        f"INSERT INTO timelines_observation ({', '.join(_COLUMNS)}) VALUES ({marks}) "
        "ON CONFLICT (cluster_id, key_hash) DO NOTHING"
    )
    # A row another writer stored since the look-up above is skipped by the conflict clause but still
    # counted (and marked dirty) here: marking a key once too often costs one derivation, never a fact.
    inserted = [(_uid_of(row), key) for key, row in new.items()]
    with transaction.atomic():
        if params:
            with connection.cursor() as cursor:
                cursor.executemany(sql, params)
            _mark_dirty(cluster_id, inserted, facts)
    return inserted


def apply_retention(days: int, *, now: datetime | None = None) -> int:
    """Drop what is older than ``days`` (0 keeps everything): observations, the derived rows that ended
    before the cutoff, status samples, and pods deleted before it. Returns how many observations went.

    On PostgreSQL the observations go by whole partitions (``partitions.drop_expired``: DETACH and DROP,
    no DELETE, nothing left for vacuum; the cutoff is then a partition bound, so up to one span more is
    kept). Elsewhere (SQLite, one table) one bulk DELETE on the time column, cut at the same span's start
    (``partitions.retention_cut``: never inside a span, where a row's base may lie). The derived tables are not
    append-only (the derive stage replaces a pod's rows whenever it changes), so they follow the same
    cutoff by DELETE of the rows that ended before it; ``manage.py rederive`` rebuilds them from the
    observations that remain. Imported clusters are kept: an incident bundle is a record, not a live
    history.
    """
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    live = Cluster.objects.exclude(origin=Cluster.Origin.IMPORTED)
    partitioned = partitions.is_partitioned()
    if partitioned:
        kept = Cluster.objects.filter(origin=Cluster.Origin.IMPORTED).values_list("pk", flat=True)
        deleted = partitions.drop_expired(cutoff, list(kept)).rows
    with transaction.atomic():
        if not partitioned:
            # No signals and nothing refers to these rows, so Django deletes each set in one statement.
            deleted, _ = ObservationRow.objects.filter(
                cluster__in=live, observed_at__lt=partitions.retention_cut(cutoff)
            ).delete()
        Interval.objects.filter(cluster__in=live, end__lt=cutoff).delete()
        Marker.objects.filter(cluster__in=live, at__lt=cutoff).delete()
        Finding.objects.filter(cluster__in=live, end__lt=cutoff).delete()
        PDBStatusSample.objects.filter(pdb__cluster__in=live, at__lt=cutoff).delete()
        WorkloadStatusSample.objects.filter(workload__cluster__in=live, at__lt=cutoff).delete()
        Pod.objects.filter(cluster__in=live, deleted_at__lt=cutoff).delete()
    return deleted


def insert_rows(model: type[models.Model], fields: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    """Insert many new rows, given as tuples of the ``fields`` (attnames; JSON columns as Python values):
    ``COPY`` on PostgreSQL (``copy_rows``), without building a model instance per row (the derive stage
    writes tens of rows a pod; instances cost more than the COPY), ``bulk_create`` elsewhere. Primary keys
    are not read back."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(
            [model(**dict(zip(fields, row, strict=True))) for row in rows], batch_size=1000
        )
        return
    with connection.cursor() as cursor:
        copy_rows(cursor.cursor, model._meta.db_table, model, fields, rows)


# The binary COPY type of each kind of column ``copy_rows`` writes (JSON goes as jsonb's binary input form).
_BINARY_TYPES = {
    "BigAutoField": "bigint",
    "BigIntegerField": "bigint",
    "ForeignKey": "bigint",
    "IntegerField": "integer",
    "PositiveIntegerField": "integer",
    "BooleanField": "bool",
    "CharField": "text",
    "TextField": "text",
    "DateTimeField": "timestamptz",
    "JSONField": "bytea",
}


def copy_rows(
    cursor: psycopg.Cursor[Any],
    table: str,
    model: type[models.Model],
    fields: Sequence[str],
    rows: Iterable[tuple[Any, ...]],
) -> None:
    """COPY rows of ``model``'s ``fields`` into ``table`` (the model's own, or a scratch copy of it) in the
    binary format: about a third of the CPU of the text format on our side (no escaping, timestamps sent
    as numbers), and less parsing on the server's. A JSON column's value is encoded here (jsonb's binary
    input: ``_JSONB_V1`` + JSON) unless it is already those bytes. ``bench/derive.py`` COPYs its raw
    baseline through this too, so the two compare like with like."""
    by_name = {f.attname: f for f in model._meta.concrete_fields}
    columns = ", ".join(f'"{by_name[f].column}"' for f in fields)
    types = [_BINARY_TYPES[by_name[f].get_internal_type()] for f in fields]
    json_at = [i for i, t in enumerate(types) if t == "bytea"]
    with cursor.copy(f'COPY "{table}" ({columns}) FROM STDIN (FORMAT BINARY)') as copy:
        copy.set_types(types)
        for row in rows:
            if json_at:
                values = list(row)
                for i in json_at:
                    if type(values[i]) is not bytes:
                        values[i] = _JSONB_V1 + _json_bytes(values[i])
                copy.write_row(values)
            else:
                copy.write_row(row)


@dataclass(frozen=True)
class DerivedPod:
    """One pod's new timeline, with what ``replace_pod_timelines`` needs to store it."""

    timeline: PodTimeline
    ids_by_key: Mapping[str, int]  # dedupe key → observation id, for evidence
    labels: Mapping[str, str]


def row_digest(row: tuple[Any, ...]) -> int:
    """A stable 64-bit digest of a derived row's columns after ``cluster_id`` (the same in every process:
    Python's own ``hash`` of text is salted per process). Key order inside JSON values does not count."""
    data = _dumps(row[1:], option=_DIGEST_OPTIONS)
    return _from_bytes(_blake2b(data, digest_size=8).digest(), "big", signed=True)


# ``row_digest`` runs once per derived row (eleven a pod): its names bound once.
_dumps, _blake2b, _from_bytes = orjson.dumps, hashlib.blake2b, int.from_bytes
_DIGEST_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def replace_pod_timelines(cluster: Cluster, pods: list[DerivedPod]) -> set[str]:
    """Make the stored intervals, markers and findings of these pods, and their current-state rows, what
    their new timelines say, in one transaction and a fixed number of queries however many pods there are.
    Returns the UIDs of the pods whose stored rows changed (a pod re-derived to what is stored already is
    left alone: nothing is pushed for it, and nothing downstream of it needs deriving again).

    Only what changed is written: each row carries a digest of its columns (``row_digest``); a stored row
    whose digest the new timeline has again stays, the others are deleted, and only the new timeline's
    rows not stored yet are inserted. A pod that gets one new observation typically changes a few of its
    rows, so its re-derivation costs writes for those, not for its whole history."""
    if not pods:
        return set()
    cid = cluster.pk
    intervals: list[tuple[Any, ...]] = []
    markers: list[tuple[Any, ...]] = []
    findings: list[tuple[Any, ...]] = []
    for item in pods:
        timeline = item.timeline
        uid = timeline.uid
        node, namespace = timeline.node or "", timeline.namespace or ""
        evidence = _evidence_ids(item.ids_by_key)
        intervals += _interval_rows(
            cid,
            (iv for lane in timeline.lanes.values() for iv in lane),
            evidence,
            pod_uid=uid,
            node=node,
            namespace=namespace,
        )
        markers += [
            (
                cid,
                uid,
                node,
                namespace,
                m.attrs,
                evidence(m.evidence),
                m.at,
                m.kind,
                m.reason[:128],
                m.message,
            )
            for m in timeline.markers
        ]
        findings += [
            _finding_row(
                cid,
                f,
                evidence,
                pod_uid=uid,
                node=node,
                namespace=namespace,
                subject="pod",
                subject_name=f"{namespace}/{timeline.name or uid}",
            )
            for f in timeline.findings
        ]
    uids = [item.timeline.uid for item in pods]
    changed: set[str] = set()
    with transaction.atomic():
        stored = _stored_pod_rows(cid, uids)
        for (model, fields, _), rows, kept in zip(
            _POD_ROW_TABLES, (intervals, markers, findings), stored, strict=True
        ):
            fresh: list[tuple[Any, ...]] = []
            for row in rows:
                digest = row_digest(row)
                ids = kept.get((row[1], digest))
                if ids:
                    ids.pop()
                else:
                    fresh.append((*row, digest))
                    changed.add(row[1])
            stale: list[int] = []
            for (uid, _), ids in kept.items():
                if ids:  # stored, and not in the new timeline
                    stale += ids
                    changed.add(uid)
            _delete_ids(model, stale)
            insert_rows(model, fields, fresh)
        changed |= _upsert_pods(cluster, pods)
    return changed


def forget_pods(cluster: Cluster, uids: Sequence[str]) -> int:
    """Delete the rows derived for these pods (the pod row, its intervals, markers and own findings); their
    observations stay. The derive stage calls it for UIDs that turned out to name no pod of their own: an
    incarnation known only from audited requests that no longer exists as such (a real UID took its
    requests over, or an earlier log moved its first request), and a mirror pod's API UID (its static pod's,
    timelines/mirrors.py). Returns how many pod rows went."""
    uids = sorted(set(uids))
    if not uids:
        return 0
    with transaction.atomic():
        for model, _, extra in _POD_ROW_TABLES:
            model._default_manager.filter(cluster=cluster, pod_uid__in=uids, **extra).delete()
        deleted, _ = Pod.objects.filter(cluster=cluster, uid__in=uids).delete()
    return deleted


def _stored_pod_rows(cluster_id: int, uids: list[str]) -> list[dict[tuple[str, int | None], list[int]]]:
    """For each table of ``_POD_ROW_TABLES``: the stored rows of these pods, as (pod UID, digest) -> ids."""
    out: list[dict[tuple[str, int | None], list[int]]] = [{} for _ in _POD_ROW_TABLES]
    rows: Iterable[tuple[int, int, str, int | None]]
    if connection.vendor == "postgresql":
        sql = " UNION ALL ".join(
            f'SELECT {n}, id, pod_uid, digest FROM "{model._meta.db_table}" '
            "WHERE cluster_id = %s AND pod_uid = ANY(%s::text[])" + "".join(f' AND "{k}" = %s' for k in extra)
            for n, (model, _, extra) in enumerate(_POD_ROW_TABLES)
        )
        array = text_array(uids)
        params = [p for _, _, extra in _POD_ROW_TABLES for p in (cluster_id, array, *extra.values())]
        connection.ensure_connection()
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(sql, params, binary=True, prepare=False)
            rows = cursor.fetchall()
    else:
        rows = [
            (n, id_, uid, digest)
            for n, (model, _, extra) in enumerate(_POD_ROW_TABLES)
            for chunk in range(0, len(uids), _SQLITE_CHUNK)
            for id_, uid, digest in model._default_manager.filter(
                cluster_id=cluster_id, pod_uid__in=uids[chunk : chunk + _SQLITE_CHUNK], **extra
            ).values_list("id", "pod_uid", "digest")
        ]
    for n, id_, uid, digest in rows:
        out[n].setdefault((uid, digest), []).append(id_)
    return out


def _delete_ids(model: type[models.Model], ids: list[int]) -> None:
    if not ids:
        return
    if connection.vendor == "postgresql":
        _pg_execute(f'DELETE FROM "{model._meta.db_table}" WHERE id = ANY(%s::bigint[])', [int_array(ids)])
        return
    for i in range(0, len(ids), _SQLITE_CHUNK):
        model._default_manager.filter(id__in=ids[i : i + _SQLITE_CHUNK]).delete()


def _upsert_pods(cluster: Cluster, pods: list[DerivedPod]) -> set[str]:
    """New and changed pods' rows in one ``INSERT … ON CONFLICT DO UPDATE`` (``bulk_update``'s CASE per
    field and row cost seconds per 200 pods); a row equal to what is stored is not written again (an
    update would rewrite all its indexes). Returns the UIDs of the rows inserted or changed. The derive
    stage's claim makes this the pods' only writer."""
    values = {item.timeline.uid: _pod_values(item) for item in pods}
    if connection.vendor != "postgresql":
        known = {
            uid: tuple(rest)
            for chunk in range(0, len(pods), _SQLITE_CHUNK)
            for uid, *rest in Pod.objects.filter(
                cluster=cluster, uid__in=list(values)[chunk : chunk + _SQLITE_CHUNK]
            ).values_list("uid", *_POD_FIELDS)
        }
        changed = {uid for uid, row in values.items() if known.get(uid) != row}
        Pod.objects.bulk_create(
            [
                Pod(cluster=cluster, uid=uid, **dict(zip(_POD_FIELDS, values[uid], strict=True)))
                for uid in changed
            ],
            batch_size=500,
            update_conflicts=True,
            unique_fields=["cluster", "uid"],
            update_fields=_POD_FIELDS,
        )
        return changed
    # One statement whose rows travel as one JSON document (``jsonb_to_recordset``): a parameter per value,
    # or an array per column, costs more to bind than the statement takes to run (psycopg dumps each
    # array element in Python; orjson writes the whole batch in microseconds).
    fields = ("uid", *_POD_FIELDS)
    document = _json_bytes([dict(zip(fields, (uid, *row), strict=True)) for uid, row in values.items()])
    table = Pod._meta.db_table
    names = ", ".join(f'"{f}"' for f in fields)
    record = ", ".join(f'"{f}" {_POD_RECORD_TYPES.get(f, "text")}' for f in fields)
    updates = ", ".join(f'"{f}" = EXCLUDED."{f}"' for f in _POD_FIELDS)
    mine = ", ".join(f'"{table}"."{f}"' for f in _POD_FIELDS)
    theirs = ", ".join(f'EXCLUDED."{f}"' for f in _POD_FIELDS)
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            f'INSERT INTO "{table}" ("cluster_id", {names}) '
            f"SELECT %s, {names} FROM jsonb_to_recordset(%s::text::jsonb) AS r({record}) "
            f'ON CONFLICT ("cluster_id", "uid") DO UPDATE SET {updates} '
            f"WHERE ({mine}) IS DISTINCT FROM ({theirs}) RETURNING uid",
            [cluster.pk, document.decode()],
            prepare=False,
        )
        return {uid for (uid,) in cursor.fetchall()}


def _pod_values(item: DerivedPod) -> tuple[Any, ...]:
    """A pod row's ``_POD_FIELDS`` from its timeline."""
    t, owner = item.timeline, item.timeline.owner or {}
    return (
        t.namespace or "",
        t.name or "",
        t.node or "",
        owner.get("kind") or "",
        owner.get("name") or "",
        owner.get("uid") or "",
        t.static,
        dict(item.labels),
        t.phase or "",
        t.created_at,
        t.deleted_at,
        t.first_observed,
        t.last_observed,
    )


def _pg_execute(sql: str, params: Sequence[Any]) -> None:
    """Run one statement on PostgreSQL with its parameters bound on the server (arrays of a batch's
    values travel as arrays, not quoted into the statement's text as Django's client-side binding does);
    never as a named prepared statement (a transaction-pooling proxy may hand the next query to another
    server session)."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=False)


_POD_RECORD_TYPES = {  # the columns of ``_upsert_pods``' JSON rows that are not text
    "static": "boolean",
    "labels": "jsonb",
    "created_at": "timestamptz",
    "deleted_at": "timestamptz",
    "first_seen": "timestamptz",
    "last_seen": "timestamptz",
}


_POD_FIELDS = [
    "namespace",
    "name",
    "node",
    "owner_kind",
    "owner_name",
    "owner_uid",
    "static",
    "labels",
    "phase",
    "created_at",
    "deleted_at",
    "first_seen",
    "last_seen",
]


_NODE_FIELDS = ["uid", "labels", "unschedulable", "ready", "created_at", "last_seen", "deleted_at"]


def replace_node(
    cluster: Cluster,
    name: str,
    row: NodeRow | None,
    timeline: NodeTimeline | None,
    ids_by_key: Mapping[str, int],
) -> None:
    """Replace a node's row (from its newest snapshot) and own lanes (``node:*`` intervals) in one
    transaction (the derive stage's projection of a node)."""
    with transaction.atomic():
        if row is not None:
            values = {f: getattr(row, f) for f in _NODE_FIELDS}
            updated = Node.objects.filter(cluster=cluster, name=name).update(**values)
            if not updated:
                Node.objects.create(cluster=cluster, name=name, **values)
        Interval.objects.filter(cluster=cluster, pod_uid=None, node=name, lane__startswith="node:").delete()
        if timeline is not None:
            evidence = _evidence_ids(ids_by_key)
            rows = _interval_rows(
                cluster.pk,
                (iv for lane in timeline.lanes.values() for iv in lane),
                evidence,
                pod_uid=None,
                node=name,
                namespace="",
            )
            insert_rows(Interval, INTERVAL_FIELDS, rows)


_PDB_FIELDS = [
    "namespace",
    "name",
    "selector",
    "min_available",
    "max_unavailable",
    "unhealthy_pod_eviction_policy",
    "created_at",
    "deleted_at",
]


def replace_pdb(cluster: Cluster, row: PdbRow) -> PodDisruptionBudget:
    """Replace a PDB's row and status samples (the derive stage's projection of its snapshots)."""
    with transaction.atomic():
        values = {f: getattr(row, f) for f in _PDB_FIELDS}
        pdb, created = PodDisruptionBudget.objects.get_or_create(
            cluster=cluster, uid=row.uid, defaults=values
        )
        if not created:
            PodDisruptionBudget.objects.filter(pk=pdb.pk).update(**values)
            for f, v in values.items():
                setattr(pdb, f, v)
            PDBStatusSample.objects.filter(pdb=pdb).delete()
        PDBStatusSample.objects.bulk_create(
            [PDBStatusSample(pdb=pdb, at=at, **sample) for at, sample in row.samples], batch_size=500
        )
    return pdb


_WORKLOAD_FIELDS = [
    "kind",
    "namespace",
    "name",
    "owner_kind",
    "owner_name",
    "owner_uid",
    "selector",
    "created_at",
    "deleted_at",
]


def replace_workload(cluster: Cluster, row: WorkloadRow) -> None:
    """Replace a workload's row and status samples (the derive stage's projection of its snapshots)."""
    with transaction.atomic():
        values = {f: getattr(row, f) for f in _WORKLOAD_FIELDS}
        workload, created = Workload.objects.get_or_create(cluster=cluster, uid=row.uid, defaults=values)
        if not created:
            Workload.objects.filter(pk=workload.pk).update(**values)
            WorkloadStatusSample.objects.filter(workload=workload).delete()
        WorkloadStatusSample.objects.bulk_create(
            [WorkloadStatusSample(workload=workload, at=at, **sample) for at, sample in row.samples],
            batch_size=500,
        )


MAX_EVIDENCE = 200  # a long-running pod's setup cites every SyncPod pass; keep its first and last ones


def _evidence_ids(ids_by_key: Mapping[str, int]) -> Callable[[Iterable[str]], list[int]]:
    """Maps the dedupe keys the lifecycle core cites as evidence to observation ids (at most
    ``MAX_EVIDENCE``: the earliest and the latest half each, which are what a reader clicks through to)."""

    lookup = ids_by_key.__getitem__

    def evidence(keys: Iterable[str]) -> list[int]:
        if type(keys) is not tuple:  # a record's evidence is a tuple; anything else may be read only once
            keys = tuple(keys)
        try:  # the common case: the core cites only observations it was given (tens of rows a pod)
            ids = sorted(set(map(lookup, keys)))
        except KeyError:
            ids = sorted({ids_by_key[k] for k in keys if k in ids_by_key})
        if len(ids) > MAX_EVIDENCE:
            half = MAX_EVIDENCE // 2
            ids = ids[:half] + ids[-half:]
        return ids

    return evidence


# Column orders of the derived rows as ``insert_rows`` takes them.
INTERVAL_FIELDS = (
    "cluster_id", "pod_uid", "node", "namespace", "attrs", "evidence", "lane", "state", "start", "end", "source"
)  # fmt: skip
MARKER_FIELDS = (
    "cluster_id", "pod_uid", "node", "namespace", "attrs", "evidence", "at", "kind", "reason", "message"
)  # fmt: skip
FINDING_FIELDS = (
    "cluster_id", "pod_uid", "node", "namespace", "attrs", "evidence",
    "subject", "subject_name", "kind", "severity", "message", "start", "end",
)  # fmt: skip

# The tables a pod's derived rows live in, as ``replace_pod_timelines`` diffs them: model, fields, and
# what else picks a pod's own rows (a PDB's or a node's findings are not a pod's).
_POD_ROW_TABLES: tuple[tuple[type[models.Model], tuple[str, ...], dict[str, str]], ...] = (
    (Interval, (*INTERVAL_FIELDS, "digest"), {}),
    (Marker, (*MARKER_FIELDS, "digest"), {}),
    (Finding, (*FINDING_FIELDS, "digest"), {"subject": "pod"}),
)


def _finding_row(
    cluster_id: int,
    finding: Any,
    evidence: Callable[[Iterable[str]], list[int]],
    *,
    pod_uid: str | None,
    node: str,
    namespace: str,
    subject: str,
    subject_name: str,
    attrs: Mapping[str, Any] | None = None,
) -> tuple[Any, ...]:
    """A ``FINDING_FIELDS`` row from the lifecycle core's finding (``attrs`` overrides the finding's)."""
    return (
        cluster_id,
        pod_uid,
        node,
        namespace,
        finding.attrs if attrs is None else attrs,
        evidence(finding.evidence),
        subject,
        subject_name[:300],  # NS/NAME of a pod can pass the column's 300 (63 + 1 + 253 in Kubernetes)
        finding.kind,
        finding.severity,
        finding.message,
        finding.start,
        finding.end,
    )


def _interval_rows(
    cluster_id: int,
    intervals: Iterable[Any],
    evidence: Callable[[Iterable[str]], list[int]],
    *,
    pod_uid: str | None,
    node: str,
    namespace: str,
    attrs: Mapping[str, Any] | None = None,
) -> list[tuple[Any, ...]]:
    """``INTERVAL_FIELDS`` rows (``attrs``: added to each interval's own)."""
    return [
        (
            cluster_id,
            pod_uid,
            node,
            namespace,
            {**iv.attrs, **attrs} if attrs else iv.attrs,  # read, never changed, from here on
            evidence(iv.evidence),
            iv.lane[:300],
            iv.state,
            iv.start,
            iv.end,
            iv.source,
        )
        for iv in intervals
    ]


def replace_pdb_timeline(cluster: Cluster, timeline: PdbTimeline, ids_by_key: Mapping[str, int]) -> None:
    """Replace a PDB's ``pdb:NAME`` lane and its findings in one transaction."""
    evidence = _evidence_ids(ids_by_key)
    rows = _interval_rows(
        cluster.pk,
        timeline.intervals,
        evidence,
        pod_uid=None,
        node="",
        namespace=timeline.namespace,
        attrs={"pdb_uid": timeline.uid},
    )
    findings = [
        _finding_row(
            cluster.pk,
            f,
            evidence,
            pod_uid=f.attrs.get("pod_uid"),
            node=f.attrs.get("node") or "",
            namespace=timeline.namespace,
            subject="pdb",
            subject_name=f"{timeline.namespace}/{timeline.name}",
            attrs={**f.attrs, "pdb_uid": timeline.uid},
        )
        for f in timeline.findings
    ]
    with transaction.atomic():
        Interval.objects.filter(cluster=cluster, pod_uid=None, attrs__pdb_uid=timeline.uid).delete()
        Finding.objects.filter(cluster=cluster, subject="pdb", attrs__pdb_uid=timeline.uid).delete()
        insert_rows(Interval, INTERVAL_FIELDS, rows)
        insert_rows(Finding, FINDING_FIELDS, findings)


# --- imported incident bundles (dashboard/export/importer.py) -----------------------------------------------
# An imported cluster is read-only from the moment it exists: ``save_observations`` refuses it. The importer
# writes through an ``ImportSession``, which only ``begin_import`` makes, only for a cluster it creates in
# the caller's transaction, and which closes when that transaction commits. So no later writer (a
# collector, an ingest command, a second import) can ever add to an imported cluster.


class ImportSession:
    """Write access to the observations of one newly created imported cluster, until commit."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._open = True
        transaction.on_commit(self._close)

    def _close(self) -> None:
        self._open = False

    def save_observations(self, batch: Iterable[tuple[Observation, datetime]]) -> SaveResult:
        """Append ``(observation, received_at)`` pairs (the bundle keeps when the source received each
        one). Same rules as ``save_observations``: duplicates are stored once, invalid ones rejected."""
        if not self._open or not connection.in_atomic_block:
            raise PermissionError(
                f"the import session of {self.cluster.name!r} is closed: imported clusters never change"
            )
        return _append(self.cluster.pk, batch)


def begin_import(name: str, *, description: str = "") -> ImportSession:
    """Create the read-only imported cluster ``name`` and return the one session that may fill it.

    Must run inside ``transaction.atomic()`` (the import is all or nothing). Raises ValueError when the
    name is taken or invalid.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("begin_import must run inside transaction.atomic(): an import is all or nothing")
    if Cluster.objects.filter(name=name).exists():
        raise ValueError(f"a cluster named {name!r} already exists")
    cluster = Cluster(name=name, origin=Cluster.Origin.IMPORTED, read_only=True, description=description)
    try:
        cluster.full_clean()
    except ValidationError as exc:  # say which field and why, as a ValueError
        raise ValueError(f"cluster name {name!r}: {exc}") from None
    cluster.save()
    return ImportSession(cluster)
