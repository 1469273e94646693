"""The one writer of podlife's tables.

``save_observations`` appends observations idempotently: each carries a dedupe key unique per cluster, so a
re-delivered watch event, a re-ingested log line or a re-sent span is stored once. PostgreSQL takes the
batch through ``COPY`` into a per-connection staging table and one ``INSERT … SELECT … ON CONFLICT DO
NOTHING``; SQLite (the embedded default) takes a correct path with the same results. An invalid record is
rejected with its key and the reason; the rest of its batch is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.db import connection, transaction
from django.utils import timezone

from timelines.lifecycle.observation import InvalidObservation, Observation
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow

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
    "dedupe_key",
    "node",
    "namespace",
    "name",
    "payload",
)
_STAGE = "podlife_observation_stage"
_STAGE_COLUMNS = (
    "cluster_id bigint, pod_uid varchar(64), kind varchar(32), source varchar(32), observed_at timestamptz, "
    "received_at timestamptz, dedupe_key varchar(200), node varchar(253), namespace varchar(253), "
    "name varchar(253), payload jsonb"
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

    @property
    def nothing_new(self) -> bool:
        return self.stored == 0

    def merge(self, other: SaveResult) -> None:
        self.received += other.received
        self.stored += other.stored
        self.duplicates += other.duplicates
        self.rejected.extend(other.rejected)
        self.pods_touched |= other.pods_touched


def cluster_for(name_or_cluster: Cluster | str, *, origin: str = Cluster.Origin.LIVE) -> Cluster:
    """The cluster with this name, created (and validated) when new."""
    if isinstance(name_or_cluster, Cluster):
        return name_or_cluster
    cluster = Cluster.objects.filter(name=name_or_cluster).first()
    if cluster is None:
        cluster = Cluster(name=name_or_cluster, origin=origin)
        cluster.full_clean()
        cluster.save()
    return cluster


def save_observations(
    cluster: Cluster | str, batch: Iterable[Observation | Mapping[str, Any]], *, now: datetime | None = None
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
    result = SaveResult()
    rows: dict[str, tuple[Any, ...]] = {}
    for record in batch:
        result.received += 1
        try:
            obs = _coerce(record)
            row = _row(cluster.pk, obs, received_at)
        except (InvalidObservation, TypeError, ValueError) as exc:
            key = _record_key(record)
            result.rejected.append(Rejected(key, _reason(exc)))
            log.warning("rejected observation %s: %s", key, _reason(exc))
            continue
        if obs.dedupe_key in rows:
            result.duplicates += 1
            continue
        rows[obs.dedupe_key] = row
    if rows:
        if connection.vendor == "postgresql":
            inserted = _insert_postgres(list(rows.values()))
        else:
            inserted = _insert_portable(cluster.pk, rows)
        result.stored = len(inserted)
        result.duplicates += len(rows) - len(inserted)
        result.pods_touched = {uid for uid in inserted if uid}
    return result


def _coerce(record: Observation | Mapping[str, Any]) -> Observation:
    if isinstance(record, Observation):
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


def _row(cluster_id: int, obs: Observation, received_at: datetime) -> tuple[Any, ...]:
    try:
        payload = orjson.dumps(obs.payload)
    except TypeError as exc:
        raise ValueError(f"payload is not JSON-serializable ({exc})") from None
    if b"\\u0000" in payload:  # jsonb rejects \u0000: replace it, as in text columns
        payload = payload.replace(b"\\u0000", b"\\ufffd")
    return (
        cluster_id,
        _clean_text(obs.pod_uid, "pod_uid") or None,
        obs.kind,
        obs.source,
        obs.observed_at,
        received_at,
        obs.dedupe_key.replace("\x00", "\ufffd"),
        _clean_text(obs.node, "node"),
        _clean_text(obs.namespace, "namespace"),
        _clean_text(obs.name, "name"),
        payload.decode(),
    )


def _record_key(record: object) -> str:
    key = getattr(record, "dedupe_key", None)
    if key is None and isinstance(record, Mapping):
        key = record.get("dedupe_key")
    return str(key) if key else f"<record without dedupe key: {str(record)[:80]!r}>"


def _reason(exc: Exception) -> str:
    if isinstance(exc, InvalidObservation):
        return "; ".join(exc.problems)
    return str(exc)


def _insert_postgres(rows: list[tuple[Any, ...]]) -> list[str | None]:
    """COPY into a temporary staging table, then one INSERT … ON CONFLICT DO NOTHING; returns pod uids."""
    cols = ", ".join(_COLUMNS)
    with transaction.atomic(), connection.cursor() as cursor:
        raw = cursor.cursor
        raw.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {_STAGE} ({_STAGE_COLUMNS}) ON COMMIT DELETE ROWS")
        with raw.copy(f"COPY {_STAGE} ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        raw.execute(
            f"INSERT INTO timelines_observation ({cols}) SELECT {cols} FROM {_STAGE} "
            f"ON CONFLICT ON CONSTRAINT observation_dedupe_per_cluster DO NOTHING RETURNING pod_uid"
        )
        inserted = [r[0] for r in raw.fetchall()]
        # The batch may run inside a caller's transaction, where ON COMMIT has not happened yet.
        raw.execute(f"TRUNCATE {_STAGE}")
    return inserted


def _insert_portable(cluster_id: int, rows: dict[str, tuple[Any, ...]]) -> list[str | None]:
    """Any database: skip keys already stored, insert the rest with ON CONFLICT DO NOTHING.

    Knowing the stored keys first tells which rows are new without RETURNING; the conflict clause keeps a
    concurrent writer's identical row from failing the batch.
    """
    keys = list(rows)
    existing: set[str] = set()
    for i in range(0, len(keys), _SQLITE_CHUNK):
        chunk = keys[i : i + _SQLITE_CHUNK]
        existing.update(
            ObservationRow.objects.filter(cluster_id=cluster_id, dedupe_key__in=chunk).values_list(
                "dedupe_key", flat=True
            )
        )
    new = [rows[k] for k in keys if k not in existing]
    adapt = connection.ops.adapt_datetimefield_value
    observed, received = _COLUMNS.index("observed_at"), _COLUMNS.index("received_at")
    params = []
    for row in new:
        values = list(row)
        values[observed], values[received] = adapt(row[observed]), adapt(row[received])
        params.append(values)
    marks = ", ".join(["%s"] * len(_COLUMNS))
    sql = (
        f"INSERT INTO timelines_observation ({', '.join(_COLUMNS)}) VALUES ({marks}) "
        "ON CONFLICT (cluster_id, dedupe_key) DO NOTHING"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(sql, params)
    return [row[1] for row in new]


def apply_retention(days: int, *, now: datetime | None = None) -> int:
    """Drop observations older than ``days`` (0 keeps everything); returns how many were deleted."""
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = ObservationRow.objects.filter(observed_at__lt=cutoff).delete()
    return deleted
