"""Dirty keys: what the store marks, and how derive workers claim it so no two derive one key at once.

Two tables, two steps:

1. **Marking** (``store.save_observations``, in the same transaction as the observations): one
   ``DirtyBatch`` row per batch, holding the keys its new observations touch (``keys_of``). One small
   insert per batch, never a lock on a shared row: the collector's store never waits on the derive stage.
2. **Folding and claiming** (the derive stage): ``fold`` moves batches into ``DirtyKey`` rows (one per
   key, unique per cluster), ``claim`` takes a batch of unclaimed keys with ``FOR UPDATE SKIP LOCKED``
   (PostgreSQL; SQLite has one writer at a time, and the same statement claims by update, as healthchecks
   does), and ``finish`` deletes the keys whose generation did not move during the derivation, in the
   transaction that replaced their derived rows. A key marked again while claimed gets a new generation,
   so ``finish`` leaves it dirty and it is derived again: nothing dirty is forgotten. A claim expires at
   ``claimed_until``; ``finish`` checks the claim is still held before it commits, so a worker that lost
   its claim (it stalled past the expiry and another worker took the key) writes nothing.

Locks are only ever taken in key order by single statements (``fold``'s upsert, ``finish``'s
``SELECT … FOR UPDATE``) or skipped (``claim``), so derive workers cannot deadlock one another.

Key kinds: ``pod`` (a UID), ``node`` (a node's own lanes and row), ``pdbs`` (the PDBs of a namespace),
``workload`` (``NAMESPACE/NAME``), ``podonly`` (a UID derived without marking its rivals), and three that
expand into pod keys: ``podref`` (``NAMESPACE/NAME``: the pods of that name, for kubelet lines without a
UID), ``rivals`` (``NAMESPACE/NAME``: the incarnations of a name whose UID-less lines a changed pod
competes for; they expand into ``podonly`` keys, so the marking stops there) and ``nodepods`` (a node's
pods alive between ``t_min`` and ``t_max``, for node-level kubelet lines).
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote

import orjson
import psycopg
from django.db import connection, transaction
from django.utils import timezone

from timelines.lifecycle.observation import AnyObservation, Kind
from timelines.lifecycle.resolve import widen
from timelines.models import DirtyBatch, DirtyKey, QuarantinedKey
from timelines.pg_arrays import int_array

POD = "pod"
NODE = "node"
PDBS = "pdbs"
WORKLOAD = "workload"
PODREF = "podref"
NODEPODS = "nodepods"
PODONLY = "podonly"
RIVALS = "rivals"

KINDS = (POD, NODE, PDBS, WORKLOAD, PODREF, NODEPODS, PODONLY, RIVALS)
REF_KINDS = frozenset({WORKLOAD, PODREF, RIVALS})  # keys that are ``ref(namespace, name)``

NODE_KINDS = frozenset({Kind.NODE, Kind.NODE_DELETED, Kind.NODE_METRICS})
PDB_KINDS = frozenset({Kind.PDB, Kind.PDB_DELETED})
WORKLOAD_KINDS = frozenset({Kind.WORKLOAD, Kind.WORKLOAD_DELETED})

# A key as a batch records it: (kind, key, first observed, last observed); the times matter to ``nodepods``.
MarkedKey = tuple[str, str, datetime | None, datetime | None]


def ref(namespace: str, name: str) -> str:
    """The ``NAMESPACE/NAME`` key of workloads and pod references. The namespace is percent-quoted (a
    no-op on every name Kubernetes allows), so a hostile ingest's ``a/b`` splits back as it came."""
    return f"{quote(namespace, safe='')}/{name}"


def split_ref(key: str) -> tuple[str, str]:
    """``(namespace, name)`` of a ``ref`` key."""
    namespace, _, name = key.partition("/")
    return unquote(namespace), name


def keys_of(obs: AnyObservation) -> list[tuple[str, str]]:
    """The keys one new observation makes dirty (without times).

    * an observation of a pod (it has a UID) → that pod;
    * a node snapshot, kubelet metrics or an audited write to a node → the node's own lanes and row; a kubelet process (a restart)
      → those and the node's pods around it;
    * a PDB snapshot, or an event about something that is not a pod (a PDB's) → the namespace's PDBs;
    * a workload snapshot → the workload;
    * anything else naming ``NAMESPACE/NAME`` (a kubelet line with only ``pod="ns/name"``) → the pods of
      that name; else naming a node (a shutdown or eviction manager line) → that node's pods.
    """
    kind = obs.kind
    if kind == Kind.KUBELET_PROCESS:  # a kubelet (re)start: the node's own lane, and its pods around it
        return [(NODE, obs.node), (NODEPODS, obs.node)] if obs.node else []
    if kind in NODE_KINDS:
        name = obs.node or obs.name
        return [(NODE, name)] if name else []
    if kind == Kind.AUDIT and obs.node and obs.payload.get("resource") == "nodes":  # a cordon, a taint
        return [(NODE, obs.node)]
    if kind in PDB_KINDS:
        return [(PDBS, obs.namespace)] if obs.namespace else []
    if kind in WORKLOAD_KINDS:
        return [(WORKLOAD, ref(obs.namespace, obs.name))] if obs.namespace and obs.name else []
    if obs.pod_uid:
        return [(POD, obs.pod_uid)]
    if kind == Kind.EVENT:
        involved = obs.payload.get("involved") or {}
        if involved.get("kind") not in (None, "", "Pod"):
            return [(PDBS, obs.namespace)] if obs.namespace else []
    if obs.namespace and obs.name:
        return [(PODREF, ref(obs.namespace, obs.name))]
    if obs.node:
        return [(NODEPODS, obs.node)]
    return []


def marked_keys(observations: Iterable[AnyObservation]) -> list[MarkedKey]:
    """The distinct keys of ``observations``. A ``nodepods`` key carries the time span of the observations
    that marked it (the pods alive then are the ones to derive); the others carry none, which spares the
    store two timestamps to format and the database two to parse per pod."""
    plain: dict[tuple[str, str], None] = {}
    spans: dict[tuple[str, str], tuple[datetime, datetime]] = {}
    for obs in observations:
        for key in keys_of(obs):
            if key[0] != NODEPODS:
                plain[key] = None
                continue
            widen(spans, key, obs.observed_at)
    return [(kind, key, None, None) for kind, key in plain] + [
        (kind, key, lo, hi) for (kind, key), (lo, hi) in spans.items()
    ]


def _json_keys(keys: Iterable[MarkedKey]) -> bytes:
    """The keys as the JSON a ``DirtyBatch`` holds. A NUL in a name becomes U+FFFD, as the store writes it
    in the observation's columns (PostgreSQL's text and jsonb hold no NUL: one would fail the batch), so
    the key names what was stored."""
    return orjson.dumps(
        [
            [
                kind,
                key.replace("\x00", "\ufffd") if "\x00" in key else key,
                lo.isoformat() if lo else None,
                hi.isoformat() if hi else None,
            ]
            for kind, key, lo, hi in keys
        ]
    )


INSERT_BATCH = f"INSERT INTO {DirtyBatch._meta.db_table} (cluster_id, keys, created_at) VALUES (%s, %s, %s)"


def batch_params(
    cluster_id: int, keys: Iterable[MarkedKey], *, now: datetime | None = None
) -> list[Any] | None:
    """The parameters of the INSERT that records ``keys`` as dirty (``INSERT_BATCH``), or None when there
    is nothing to mark.

    One plain INSERT of the keys as orjson text, which the database parses into its JSON column. Through
    the ORM (the JSONField's standard-library ``json``) and with two ISO times a pod key, marking cost the
    store about 12 µs of CPU a stored pod snapshot; this way about 1.6 µs (docs/performance-history.md, Watch)."""
    payload = _json_keys(keys)
    if payload == b"[]":
        return None
    return [cluster_id, payload.decode(), connection.ops.adapt_datetimefield_value(now or timezone.now())]


def append_batch(cluster_id: int, keys: Iterable[MarkedKey], *, now: datetime | None = None) -> None:
    """Record ``keys`` as dirty (a ``DirtyBatch`` row). Call it inside the transaction that stores what
    made them dirty, so they commit (or roll back) together."""
    params = batch_params(cluster_id, keys, now=now)
    if params is not None:
        with connection.cursor() as cursor:
            cursor.execute(INSERT_BATCH, params)


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


# -- folding ---------------------------------------------------------------------------------------------

FOLD_BATCHES = 200  # DirtyBatch rows folded per transaction


def fold(*, cluster_id: int | None = None, limit: int = FOLD_BATCHES) -> int:
    """Move up to ``limit`` DirtyBatch rows into DirtyKey rows (one transaction); returns how many.

    A key already dirty and unclaimed stays as it is (its time span widened when the new one is wider);
    one that is claimed gets a new generation, so its claimer leaves it dirty.
    """
    with transaction.atomic():
        relaxed_commit()
        rows = DirtyBatch.objects.order_by("id")
        if cluster_id is not None:
            rows = rows.filter(cluster_id=cluster_id)
        if connection.vendor == "postgresql":
            rows = rows.select_for_update(skip_locked=True)
        batches = list(rows.values_list("id", "cluster_id", "keys")[:limit])
        if not batches:
            return 0
        merged: dict[tuple[int, str, str], tuple[datetime | None, datetime | None]] = {}
        unfit: dict[tuple[int, str, str], str] = {}
        for _id, cluster, keys in batches:
            for marked in keys:
                problem = _marked_problem(marked)
                if problem is not None:  # set aside now: it would fail every fold that meets it
                    unfit[(cluster, *_shown_key(marked))] = problem
                    continue
                kind, key, lo, hi = marked
                k = (cluster, kind, key)
                lo_t, hi_t = _parse(lo), _parse(hi)
                if k in merged:
                    old_lo, old_hi = merged[k]
                    lo_t = min(lo_t, old_lo) if lo_t and old_lo else lo_t or old_lo
                    hi_t = max(hi_t, old_hi) if hi_t and old_hi else hi_t or old_hi
                merged[k] = (lo_t, hi_t)
        aside = _quarantined_among(merged)
        mark(
            [
                (cluster, kind, key, lo, hi)
                for (cluster, kind, key), (lo, hi) in merged.items()
                if (cluster, kind, key) not in aside
            ],
        )
        for (cluster, kind, key), problem in unfit.items():
            quarantine(cluster, kind, key, problem, failures=0)
        DirtyBatch.objects.filter(id__in=[b[0] for b in batches]).delete()
        return len(batches)


KEY_LENGTH = DirtyKey._meta.get_field("key").max_length or 520


def _marked_problem(marked: Any) -> str | None:
    """Why a marked key cannot be folded (None when it can): the store's boundary
    (``timelines/lifecycle/observation.py``) keeps such keys out; this keeps one that slipped past (or
    was stored before the boundary) from failing every fold."""
    if not isinstance(marked, list | tuple) or len(marked) != 4:
        return f"a marked key must be [kind, key, first, last], got {str(marked)[:80]!r}"
    kind, key, lo, hi = marked
    if kind not in KINDS:
        return f"kind {str(kind)[:20]!r} is not one of {list(KINDS)}"
    if not isinstance(key, str) or not key:
        return "the key must be a non-empty string"
    if len(key) > KEY_LENGTH:
        return f"the key is {len(key)} characters long; its column holds {KEY_LENGTH}"
    # A ref's namespace is percent-quoted, where only a NUL becomes ``%00`` (a ``%`` itself is ``%25``).
    if "\x00" in key or (kind in REF_KINDS and "%00" in key.partition("/")[0]):
        return "the key holds a NUL (PostgreSQL's text cannot)"
    for t in (lo, hi):
        if t is not None:
            try:
                _parse(t)
            except (TypeError, ValueError) as exc:
                return f"the key's time {str(t)[:40]!r} is not an ISO time ({exc})"
    return None


def _shown_key(marked: Any) -> tuple[str, str]:
    """(kind, key) of an unfit marked key, cut and cleaned so that its quarantine row can be stored."""
    kind, key = (marked[0], marked[1]) if isinstance(marked, list | tuple) and len(marked) >= 2 else ("", "")
    clean = str(key).replace("\x00", "\ufffd")
    if len(clean) > KEY_LENGTH:
        clean = clean[: KEY_LENGTH - 44] + "...#" + hashlib.sha1(clean.encode("utf-8", "replace")).hexdigest()
    return str(kind)[:16] or "?", clean


def _quarantined_among(merged: Mapping[tuple[int, str, str], Any]) -> set[tuple[int, str, str]]:
    """The keys of ``merged`` in quarantine now (usually none: one cheap query to know)."""
    held = QuarantinedKey.objects.filter(released_at__isnull=True)
    if not merged or not held.exists():
        return set()
    clusters = {c for c, _k, _y in merged}
    keys = {y for _c, _k, y in merged}
    rows = held.filter(cluster_id__in=clusters, key__in=keys).values_list("cluster_id", "kind", "key")
    return {row for row in rows if row in merged}


def mark(keys: Iterable[tuple[int, str, str, datetime | None, datetime | None]]) -> None:
    """Upsert DirtyKey rows for ``(cluster id, kind, key, t_min, t_max)``, in key order (so concurrent
    folds lock rows in one order and cannot deadlock)."""
    rows = sorted(keys, key=lambda k: (k[0], k[1], k[2]))
    if not rows:
        return
    now = timezone.now()
    table = DirtyKey._meta.db_table
    least, greatest = ("LEAST", "GREATEST") if connection.vendor == "postgresql" else ("MIN", "MAX")
    # A claimed key gets a new generation; an unclaimed one is rewritten only when its span widens.
    update = (
        f"ON CONFLICT (cluster_id, kind, key) DO UPDATE SET "
        f"generation = {table}.generation + 1, "
        f"t_min = CASE WHEN excluded.t_min IS NULL THEN {table}.t_min WHEN {table}.t_min IS NULL "
        f"THEN excluded.t_min ELSE {least}({table}.t_min, excluded.t_min) END, "
        f"t_max = CASE WHEN excluded.t_max IS NULL THEN {table}.t_max WHEN {table}.t_max IS NULL "
        f"THEN excluded.t_max ELSE {greatest}({table}.t_max, excluded.t_max) END "
        f"WHERE {table}.claimed_by <> '' OR excluded.t_min < {table}.t_min OR excluded.t_max > {table}.t_max"
    )
    columns = "cluster_id, kind, key, t_min, t_max, generation, marked_at, claimed_by, claimed_generation"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {table} ({columns}) "
                "SELECT c, k, y, lo, hi, 0, %s, '', 0 FROM unnest(%s::bigint[], %s::varchar[], %s::varchar[], "
                "%s::timestamptz[], %s::timestamptz[]) AS u(c, k, y, lo, hi) ORDER BY c, k, y " + update,
                [now, *[list(col) for col in zip(*rows, strict=True)]],
            )
        else:
            adapt = connection.ops.adapt_datetimefield_value
            cursor.executemany(
                f"INSERT INTO {table} ({columns}) VALUES (%s, %s, %s, %s, %s, 0, %s, '', 0) " + update,
                [(c, k, y, adapt(lo), adapt(hi), adapt(now)) for c, k, y, lo, hi in rows],
            )


# -- claiming --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    """A key a derive worker holds until ``finish`` (or its claim expires)."""

    id: int
    cluster_id: int
    kind: str
    key: str
    t_min: datetime | None
    t_max: datetime | None
    generation: int


def relaxed_commit() -> None:
    """Inside a transaction of the derive stage's own (a claim, a fold, a batch's writes): let its commit
    return before the WAL reaches the disk (PostgreSQL's ``synchronous_commit = off`` for this transaction
    only; elsewhere nothing).

    What these transactions write is rebuildable, and each is one unit with the dirty keys it settles: a
    crash of the server in the fraction of a second before the flush loses the transaction whole, so its
    keys are dirty (or unclaimed, or unfolded) again and derived again, to the same rows. Nothing is ever
    half written (an asynchronous commit is atomic and visible to other sessions at once; only its
    durability waits for the WAL writer). Observations are never stored this way: ``store`` commits them,
    and the keys they mark, synchronously. A waited-for flush cost each batch and each claim a disk sync
    (about 10 ms a commit on the development machine: more than a batch's own writes). Not when the
    transaction is a caller's (an import's): the setting would cover everything it stores.
    """
    if connection.vendor == "postgresql" and _outermost():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO off")


def _outermost() -> bool:
    """The innermost atomic block is the transaction itself (no caller's transaction around it)."""
    return len(connection.savepoint_ids) == 0 and connection.in_atomic_block


def new_token() -> str:
    """A claim token: unique per claimed batch, so a worker never mistakes another batch's claim for its own;
    it names the host and process that holds it (what an operator, or a test, reads in ``claimed_by``)."""
    return f"{socket.gethostname()[:24]}:{os.getpid()}:{uuid.uuid4().hex[:24]}"


def claim(
    token: str,
    *,
    limit: int,
    ttl: timedelta,
    cluster_id: int | None = None,
    now: datetime | None = None,
    failed: bool = False,
) -> list[Claimed]:
    """Claim up to ``limit`` dirty keys no one holds (or whose claim expired) for ``token``, oldest first.

    Keys whose derivation failed before are never claimed with others (one failing key would fail its
    whole batch again): ``failed`` claims only those, once their back-off (``retry_at``) has passed."""
    now = now or timezone.now()
    table = DirtyKey._meta.db_table
    where = "(claimed_by = '' OR claimed_until < %s) AND "
    where += "failures > 0 AND retry_at <= %s" if failed else "failures = 0"
    params: list[Any] = [now, now] if failed else [now]
    if cluster_id is not None:
        where += " AND cluster_id = %s"
        params.append(cluster_id)
    pick = f"SELECT id FROM {table} WHERE {where} ORDER BY id LIMIT %s"
    if connection.vendor == "postgresql":
        # ARRAY(...) is evaluated once; PostgreSQL may run an ``IN (subquery)`` once per row it joins,
        # and with SKIP LOCKED each run picks rows the last one locked past: far more than ``limit``.
        chosen = f"id = ANY(ARRAY({pick} FOR UPDATE SKIP LOCKED))"
    else:
        chosen = f"id IN ({pick})"
    params.append(limit)
    # What was claimed comes back from the UPDATE itself: a second read by ``claimed_by`` (no index) would
    # scan the whole backlog on every claim.
    with transaction.atomic(), connection.cursor() as cursor:
        relaxed_commit()
        cursor.execute(
            f"UPDATE {table} SET claimed_by = %s, claimed_until = %s, claimed_generation = generation "
            f"WHERE {chosen} RETURNING id, cluster_id, kind, key, t_min, t_max, claimed_generation",
            [token, now + ttl, *params],
        )
        rows = sorted(cursor.fetchall())
    return [
        Claimed(id_, cluster, kind, key, _aware(lo), _aware(hi), generation)
        for id_, cluster, kind, key, lo, hi, generation in rows
    ]


def _aware(value: Any) -> datetime | None:
    """A time read by a raw cursor: SQLite gives Django's naive UTC (or its text), PostgreSQL an aware one."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class ClaimLost(Exception):
    """Some keys of a batch are no longer claimed by its token (the claim expired and another worker took
    them, or they were released): the batch's derived rows must not be written."""


def finish(token: str, claimed: Iterable[Claimed]) -> int:
    """Inside the transaction that replaced the derived rows of ``claimed``: check every key is still held
    by ``token`` (raises ClaimLost, which rolls that transaction back), then delete the keys not marked
    again meanwhile and release the others. Returns how many stay dirty."""
    claimed = list(claimed)
    ids = sorted(c.id for c in claimed)
    if not ids:
        return 0
    generations = {c.id: c.generation for c in claimed}
    if connection.vendor == "postgresql":
        return _pg_finish(token, ids, generations)
    rows = DirtyKey.objects.filter(id__in=ids).order_by("cluster_id", "kind", "key")
    # Still ours when no one re-claimed it (a re-claim overwrites claimed_by); the lock taken here keeps
    # anyone from claiming it until this transaction ends.
    held = {
        id_: generation
        for id_, by, generation in rows.values_list("id", "claimed_by", "generation")
        if by == token
    }
    done, again = _settled(token, ids, generations, held)
    if done:
        DirtyKey.objects.filter(id__in=done).delete()
    if again:
        DirtyKey.objects.filter(id__in=again).update(claimed_by="", claimed_until=None)
    return len(again)


def _settled(
    token: str, ids: list[int], generations: Mapping[int, int], held: Mapping[int, int]
) -> tuple[list[int], list[int]]:
    """The claimed keys to delete and those marked again meanwhile; ClaimLost when some are not held."""
    lost = [i for i in ids if i not in held]
    if lost:
        raise ClaimLost(f"{len(lost)} of {len(ids)} claimed keys are no longer held by {token}")
    done = [i for i in ids if held[i] == generations[i]]
    again = [i for i in ids if held[i] != generations[i]]
    return done, again


def _pg_finish(token: str, ids: list[int], generations: Mapping[int, int]) -> int:
    """``finish`` on PostgreSQL: the same three statements, the ids bound on the server as one array
    literal each (Django's queryset quoted 200 ids into each statement's text, and its delete went
    through the collector)."""
    table = DirtyKey._meta.db_table
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            f"SELECT id, claimed_by, generation FROM {table} WHERE id = ANY(%s::bigint[]) "
            "ORDER BY cluster_id, kind, key FOR UPDATE",
            [int_array(ids)],
            prepare=False,
        )
        held = {id_: generation for id_, by, generation in cursor.fetchall() if by == token}
        done, again = _settled(token, ids, generations, held)
        if done:
            cursor.execute(
                f"DELETE FROM {table} WHERE id = ANY(%s::bigint[])", [int_array(done)], prepare=False
            )
        if again:
            cursor.execute(
                f"UPDATE {table} SET claimed_by = '', claimed_until = NULL WHERE id = ANY(%s::bigint[])",
                [int_array(again)],
                prepare=False,
            )
    return len(again)


def release(token: str, claimed: Iterable[Claimed]) -> None:
    """Give keys back unfinished (a derivation failed): they stay dirty for the next claim."""
    ids = [c.id for c in claimed]
    if ids:
        DirtyKey.objects.filter(id__in=ids, claimed_by=token).update(claimed_by="", claimed_until=None)


# -- failures and quarantine ---------------------------------------------------------------------------------


def failed(
    token: str,
    key: Claimed,
    error: str,
    *,
    max_failures: int,
    backoff: timedelta,
    backoff_max: timedelta,
    now: datetime | None = None,
) -> bool:
    """Record that deriving ``key`` (claimed by ``token``) failed with ``error``: it is released with a
    back-off (``backoff`` doubled per failure, at most ``backoff_max``) before it is claimed again, alone;
    at the ``max_failures``-th failure it moves to the quarantine. Returns whether it did."""
    now = now or timezone.now()
    with transaction.atomic():
        row = (
            DirtyKey.objects.select_for_update()
            .filter(id=key.id, claimed_by=token)
            .values_list("failures", "first_failed_at")
            .first()
        )
        if row is None:  # the claim was lost meanwhile: the new holder records its own failure
            return False
        failures, first = row[0] + 1, row[1] or now
        if failures >= max_failures:
            DirtyKey.objects.filter(id=key.id).delete()
            quarantine(
                key.cluster_id,
                key.kind,
                key.key,
                error,
                failures=failures,
                first_failed_at=first,
                t_min=key.t_min,
                t_max=key.t_max,
                now=now,
            )
            return True
        delay = min(backoff * (2 ** (failures - 1)), backoff_max)
        DirtyKey.objects.filter(id=key.id).update(
            failures=failures,
            first_failed_at=first,
            retry_at=now + delay,
            last_error=error,
            claimed_by="",
            claimed_until=None,
        )
    return False


def quarantine(
    cluster_id: int,
    kind: str,
    key: str,
    error: str,
    *,
    failures: int,
    first_failed_at: datetime | None = None,
    t_min: datetime | None = None,
    t_max: datetime | None = None,
    now: datetime | None = None,
) -> None:
    """Set ``key`` aside with its error, its failures and its first and last failure (again: one more
    move of the same row)."""
    from django.db.models import F

    now = now or timezone.now()
    with transaction.atomic():
        row = QuarantinedKey.objects.select_for_update().filter(cluster_id=cluster_id, kind=kind, key=key)
        updated = row.update(
            error=error,
            failures=failures,
            last_failed_at=now,
            quarantined_at=now,
            released_at=None,
            moves=F("moves") + 1,
            t_min=t_min,
            t_max=t_max,
        )
        if not updated:
            QuarantinedKey.objects.create(
                cluster_id=cluster_id,
                kind=kind,
                key=key,
                error=error,
                failures=failures,
                first_failed_at=first_failed_at or now,
                last_failed_at=now,
                quarantined_at=now,
                t_min=t_min,
                t_max=t_max,
            )


def quarantined(*, cluster_id: int | None = None) -> list[QuarantinedKey]:
    """The keys in quarantine now, by cluster and key."""
    rows = QuarantinedKey.objects.filter(released_at__isnull=True).select_related("cluster")
    if cluster_id is not None:
        rows = rows.filter(cluster_id=cluster_id)
    return list(rows.order_by("cluster__name", "kind", "key"))


def retry(*, cluster_id: int | None = None, now: datetime | None = None) -> int:
    """Put the quarantined keys back as dirty keys (after a fix), and the keys still backing off up for a
    claim at once; returns how many came out of quarantine."""
    now = now or timezone.now()
    with transaction.atomic():
        rows = QuarantinedKey.objects.select_for_update().filter(released_at__isnull=True)
        waiting = DirtyKey.objects.filter(failures__gt=0)
        if cluster_id is not None:
            rows, waiting = rows.filter(cluster_id=cluster_id), waiting.filter(cluster_id=cluster_id)
        taken = list(rows.values_list("id", "cluster_id", "kind", "key", "t_min", "t_max"))
        mark([(cluster, kind, key, lo, hi) for _id, cluster, kind, key, lo, hi in taken])
        QuarantinedKey.objects.filter(id__in=[t[0] for t in taken]).update(released_at=now)
        waiting.update(failures=0, retry_at=None, first_failed_at=None, last_error="")
        # A key marked back that was already dirty (and failing) starts over too.
        if taken:
            DirtyKey.objects.filter(
                cluster_id__in={t[1] for t in taken}, key__in={t[3] for t in taken}
            ).update(failures=0, retry_at=None, first_failed_at=None, last_error="")
    return len(taken)


@dataclass(frozen=True)
class Backlog:
    batches: int
    keys: int
    claimed: int
    oldest: datetime | None
    failing: int = 0  # dirty keys whose derivation failed and waits for a retry
    quarantined: int = 0  # keys set aside (``QuarantinedKey``, not released)
    quarantine_moves: int = 0  # how many times a key was moved to the quarantine, ever


def backlog() -> Backlog:
    """How much is waiting for the derive stage (``/metrics``, tests and the benchmark)."""
    from django.db.models import Count, Min, Q, Sum

    agg = DirtyKey.objects.aggregate(
        n=Count("id"),
        claimed=Count("id", filter=~Q(claimed_by="")),
        failing=Count("id", filter=Q(failures__gt=0)),
        oldest=Min("marked_at", filter=Q(failures=0)),
    )
    batch = DirtyBatch.objects.aggregate(n=Count("id"), oldest=Min("created_at"))
    aside = QuarantinedKey.objects.aggregate(
        n=Count("id", filter=Q(released_at__isnull=True)), moves=Sum("moves")
    )
    oldest = min((t for t in (agg["oldest"], batch["oldest"]) if t is not None), default=None)
    return Backlog(
        batch["n"], agg["n"], agg["claimed"], oldest, agg["failing"], aside["n"], aside["moves"] or 0
    )


def pending(*, cluster_id: int | None = None) -> bool:
    """Whether anything is dirty (folded or not)."""
    batches, keys = DirtyBatch.objects.all(), DirtyKey.objects.all()
    if cluster_id is not None:
        batches, keys = batches.filter(cluster_id=cluster_id), keys.filter(cluster_id=cluster_id)
    return batches.exists() or keys.exists()


def keys_by_kind(claimed: Iterable[Claimed]) -> Mapping[tuple[int, str], list[Claimed]]:
    """Claimed keys grouped by (cluster id, kind)."""
    out: dict[tuple[int, str], list[Claimed]] = {}
    for c in claimed:
        out.setdefault((c.cluster_id, c.kind), []).append(c)
    return out
