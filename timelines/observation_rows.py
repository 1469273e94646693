"""Reading stored observations back: every reader of ``timelines_observation`` gets its rows' payloads
through ``decode_payload`` and its rows through ``rows`` / ``facts`` here, so that the stored form of an
observation is known to the store (which writes it), ``timelines/payloads.py`` (its codec) and this module
(which reads it), and to nothing else (issue #37, docs/storage.md).

A payload is stored compressed (``body``), so no reader filters on it in SQL: a reader that needs a
payload field to choose rows reads the rows its indexed columns select (cluster, kind, pod UID, names,
time) and keeps those whose decoded payload matches (``where``, e.g. ``field_is``).
"""

from __future__ import annotations

import itertools
import operator
import re
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import orjson
import psycopg
from django.db import connection
from django.db.models import BinaryField, CharField, Func, Max, Min, Q, QuerySet, TextField, Value
from django.db.models.functions import Cast, Coalesce

from timelines import partitions, payloads, pg_arrays
from timelines.compact import CorruptRow, Texts
from timelines.lifecycle.observation import Observation, stored_observation
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow

# (id, observation) pairs: the id is what derived rows cite as evidence.
Fact = tuple[int, Observation]

# The columns a read selects, in this order, followed by the payload column as stored (``PAYLOAD_SQL``).
COLUMNS = (
    "id",
    "kind",
    "source",
    "observed_at",
    "received_at",
    "dedupe_key",
    "pod_uid",
    "node",
    "namespace",
    "name",
)
# The columns a read can take without decoding the row: not the dedupe key, which a row stored since
# migration 0028 holds in its body.
BARE_COLUMNS = tuple(column for column in COLUMNS if column != "dedupe_key")
# ``pod_uid`` as a read selects it: the text, or the 16 bytes' text (``uid_expression``).
_UID = "stored_uid"

# A UID stored as 16 bytes (migration 0029): a UUID in the text ``uuid`` gives back (lower case, hyphens).
CANONICAL_UID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_CANONICAL_UID = re.compile(CANONICAL_UID).fullmatch


def pod_id_of(uid: str | None) -> uuid.UUID | None:
    """The ``pod_id`` a row with this pod UID holds: the UUID when ``uid`` is one in canonical text (its
    ``pod_uid`` is NULL then), else None (the text stays in ``pod_uid``)."""
    pod_id = pod_id_bytes(uid)
    return None if pod_id is None else uuid.UUID(bytes=pod_id)


def pod_id_bytes(uid: str | None) -> bytes | None:
    """``pod_id_of``'s 16 bytes, without the UUID object (the store's rows)."""
    return bytes.fromhex(uid.replace("-", "")) if uid is not None and _CANONICAL_UID(uid) else None


def uid_text(pod_id: bytes) -> str:
    """The canonical text of a pod UID from ``pod_id_bytes``: ``str(uuid.UUID(bytes=pod_id))``."""
    h = pod_id.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _pod_id_text_sql(column: str, postgres: bool) -> str:
    if postgres:
        return f"{column}::text"
    # Django keeps a uuid on SQLite as its 32 hex digits.
    return (
        f"substr({column}, 1, 8) || '-' || substr({column}, 9, 4) || '-' || substr({column}, 13, 4) || '-' "
        f"|| substr({column}, 17, 4) || '-' || substr({column}, 21, 12)"
    )


def uid_sql(table: str) -> str:
    """The SQL of ``table``'s row's pod UID as text (NULL for none): ``pod_uid``, or since migration 0029
    the canonical text of ``pod_id``."""
    postgres = connection.vendor == "postgresql"
    return f"COALESCE({table}.pod_uid, {_pod_id_text_sql(f'{table}.pod_id', postgres)})"


class _PodIdText(Func):
    template = _pod_id_text_sql("%(expressions)s", True)
    output_field = CharField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template=_pod_id_text_sql("%(expressions)s", False))


def uid_expression() -> Any:
    """The ORM expression of a row's pod UID as text (``uid_sql``'s)."""
    return Coalesce("pod_uid", _PodIdText("pod_id"), output_field=CharField())


def pod_condition(uids: Iterable[str], *, arrays: bool = False) -> tuple[str, list[Any]] | Q:
    """The rows of the pods ``uids``: their UID's text in ``pod_uid`` (rows stored before migration 0029,
    UIDs that are not canonical UUIDs) or its 16 bytes in ``pod_id``. With ``arrays`` on PostgreSQL, SQL
    over the unaliased table with one array parameter per column (``pg_arrays``), else a ``Q``."""
    uids = list(uids)
    ids = [i for i in map(pod_id_of, uids) if i is not None]
    if arrays and connection.vendor == "postgresql":
        return (
            "(pod_uid = ANY(%s::text[]) OR pod_id = ANY(%s::uuid[]))",
            [pg_arrays.text_array(uids), ids],
        )
    return Q(pod_uid__in=uids) | Q(pod_id__in=ids)


def payload_sql(table: str) -> str:
    """The SQL that selects the stored payload of ``table``'s row for ``decode_payload``: its body, or
    the JSON text of a row stored before bodies (``timelines/payloads.py``)."""
    if connection.vendor == "postgresql":
        return f"COALESCE({table}.body, convert_to(CAST({table}.payload AS TEXT), 'UTF8'))"
    return f"COALESCE({table}.body, {table}.payload)"


def payload_expression() -> Any:
    """The ORM expression that selects the stored payload for ``decode_payload`` (``payload_sql``'s)."""
    if connection.vendor == "postgresql":
        text = Func(Cast("payload", TextField()), Value("UTF8"), function="convert_to")
        return Coalesce("body", text, output_field=BinaryField())
    return Coalesce("body", "payload", output_field=BinaryField())


def decode(
    stored: str | bytes | memoryview,
    key: str | None,
    pod_uid: str | None,
    node: str,
    namespace: str,
    name: str,
    observed_at: datetime,
) -> tuple[str, Any]:
    """The one decode of a stored row: its dedupe key and its payload (as ``payload_sql`` selects it) back
    into its JSON value. ``key`` is the row's ``dedupe_key`` column: a row stored since migration 0028
    holds the key in its body instead (and NULL there). The other arguments are the same row's columns (a
    body holds them as one byte each). Readers of many rows decode them in batches (``decode_many``)."""
    return decode_many([(stored, key, pod_uid, node, namespace, name, observed_at)])[0]


T = TypeVar("T")


def decode_many(
    rows: Sequence[tuple[str | bytes | memoryview, str | None, str | None, str, str, str, datetime]],
) -> list[tuple[str, Any]]:
    """``decode`` of each of ``rows`` ((stored, key, pod_uid, node, namespace, name, observed_at), as
    ``decode`` takes them), in order: one call decompresses a dictionary's bodies (``payloads.unpack_many``).
    A reader that decodes its rows one by one while another of its process's threads runs Python waits
    for the GIL after each row's decompression: readers decode in batches (``DECODE_BATCH``)."""
    unpacked = payloads.unpack_many(
        [row[0] for row in rows], [Texts(uid, node, ns, name, at) for _s, _k, uid, node, ns, name, at in rows]
    )
    out = []
    for (_stored, key, *_texts), (payload, held) in zip(rows, unpacked, strict=True):
        if key is None:
            if held is None:
                raise CorruptRow("a row holds its dedupe key neither in its column nor in its body")
            key = held
        out.append((key, payload))
    return out


DECODE_BATCH = 256  # rows a reader decodes at once (``decode_many``)


def batches(items: Iterable[T], size: int = DECODE_BATCH) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last shorter), as a reader decodes them (``decode_many``)."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def decoded(
    rows: Iterable[Sequence[Any]], decoded_from: Callable[[Sequence[Any]], Any]
) -> Iterator[tuple[Any, str, Any]]:
    """Each of ``rows`` with its dedupe key and payload, decoded a batch at a time (``decode_many``):
    ``decoded_from`` picks a row's (stored, key, pod_uid, node, namespace, name, observed_at)."""
    for batch in batches(rows):
        for row, (key, value) in zip(batch, decode_many([decoded_from(r) for r in batch]), strict=True):
            yield row, key, value


# What ``decode`` takes, in a row as ``_selected`` reads it and as ``pg_facts`` reads it (``decoded``).
_SELECTED_DECODED = operator.itemgetter(10, 5, 6, 7, 8, 9, 3)
_FACT_DECODED = operator.itemgetter(9, 4, 5, 6, 7, 8, 3)


def decode_payload(
    stored: str | bytes | memoryview,
    pod_uid: str | None,
    node: str,
    namespace: str,
    name: str,
    observed_at: datetime,
) -> Any:
    """The payload alone of a stored row (``decode``)."""
    return payloads.unpack(stored, Texts(pod_uid, node, namespace, name, observed_at))[0]


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One stored observation as a reader gets it (the attribute names of the model's row)."""

    id: int
    kind: str
    source: str
    observed_at: datetime
    received_at: datetime
    dedupe_key: str
    pod_uid: str | None
    node: str
    namespace: str
    name: str
    payload: Any

    def observation(self) -> Observation:
        return observation_from_row(self)


def observation_from_row(row: StoredRow) -> Observation:
    """The ``Observation`` a stored row holds (empty texts read back as None, as they were given)."""
    return stored_observation(
        row.kind,
        row.source,
        row.observed_at,
        row.dedupe_key,
        row.pod_uid,
        row.node or None,
        row.namespace or None,
        row.name or None,
        row.payload,
    )


Where = Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class FieldIs:
    """A ``where`` that keeps payloads whose member at ``path`` (object keys) is ``expected`` (a JSON
    scalar)."""

    path: tuple[str, ...]
    expected: str | bool | int

    def __call__(self, payload: Any) -> bool:
        value = payload
        for key in self.path:
            if not isinstance(value, dict):
                return False
            value = value.get(key)
        return bool(value == self.expected and type(value) is type(self.expected))


@dataclass(frozen=True, slots=True)
class PodMatch:
    """How a chunk of pods' rows is found by pod UID (``dashboard.timeline_reads.pod_rows``): on PostgreSQL
    the ``source`` of a lateral lookup per UID (``u.uid``, ``u.ord``) and the ``match`` of the lookup's rows
    (alias ``x``) against it; on SQLite the ``match`` over alias ``t``; ``uid`` the UID's SQL over ``t``,
    which the rows are ordered by; ``params`` the parameters of ``source`` or ``match``."""

    source: str
    match: str
    uid: str
    params: list[Any]


def pod_match(uids: Sequence[str], *, postgres: bool) -> PodMatch:
    """``PodMatch`` of the observations of the pods ``uids``: by the UID's text or its 16 bytes (``pod_id``,
    migration 0029)."""
    ids = [pod_id_of(u) for u in uids]
    if postgres:
        return PodMatch(
            "unnest(%s::varchar[], %s::uuid[]) WITH ORDINALITY AS u(uid, pid, ord)",
            "(x.pod_uid = u.uid OR x.pod_id = u.pid)",
            uid_sql("t"),
            [list(uids), ids],
        )
    hexes = [i.hex for i in ids if i is not None]  # Django's SQLite uuid: 32 hex digits
    marks, id_marks = ", ".join(["%s"] * len(uids)), ", ".join(["%s"] * len(hexes))
    return PodMatch(
        "", f"(t.pod_uid IN ({marks}) OR t.pod_id IN ({id_marks}))", uid_sql("t"), [*uids, *hexes]
    )


def _read(column: str) -> str:
    return _UID if column == "pod_uid" else column


def _selected(qs: QuerySet[ObservationRow]) -> Any:
    return qs.annotate(payload_text=payload_expression(), **{_UID: uid_expression()}).values_list(
        *map(_read, COLUMNS), "payload_text"
    )


def rows(qs: QuerySet[ObservationRow], where: Where | None = None) -> list[StoredRow]:
    """The rows of ``qs`` (in its order), decoded; with ``where``, those whose payload it accepts."""
    return list(iter_rows(qs, where))


def iter_rows(
    qs: QuerySet[ObservationRow], where: Where | None = None, *, chunk_size: int | None = None
) -> Generator[StoredRow]:
    """As ``rows``, one at a time; with ``chunk_size``, read from the database that many at a time (a
    server-side cursor on PostgreSQL) instead of all at once."""
    selected = _selected(qs)
    if chunk_size is not None:
        selected = selected.iterator(chunk_size=chunk_size)
    for (oid, kind, source, at, received, _k, uid, node, ns, name, _p), key, value in decoded(
        selected, _SELECTED_DECODED
    ):
        if where is None or where(value):
            yield StoredRow(oid, kind, source, at, received, key, uid, node, ns, name, value)


def facts(qs: QuerySet[ObservationRow], where: Where | None = None) -> Iterator[Fact]:
    """(id, Observation) of the rows of ``qs`` (in its order); with ``where``, those whose payload it
    accepts."""
    made = stored_observation
    for (oid, kind, source, at, _received, _k, uid, node, ns, name, _p), key, value in decoded(
        _selected(qs), _SELECTED_DECODED
    ):
        if where is None or where(value):
            yield (oid, made(kind, source, at, key, uid, node or None, ns or None, name or None, value))


def facts_sql(condition: str) -> str:
    """The statement ``pg_facts`` runs for ``condition``."""
    return (
        f"SELECT o.id, o.kind, o.source, o.observed_at, o.dedupe_key, {uid_sql('o')}, o.node, o.namespace, "
        f"o.name, {payload_sql('o')} FROM timelines_observation o WHERE o.cluster_id = %s {condition}"
    )


def pg_facts(condition: str, params: Sequence[Any], where: Where | None = None) -> list[Fact]:
    """PostgreSQL: (id, Observation) of the rows ``condition`` (SQL after ``WHERE o.cluster_id = %s``,
    ordering included) selects, read in one binary round trip; with ``where``, those whose payload it
    accepts."""
    sql = facts_sql(condition)
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        # Never a named prepared statement: a transaction-pooling proxy may hand the next query to
        # another server session.
        cursor.execute(sql, params, binary=True, prepare=False)
        fetched = cursor.fetchall()  # loaded in one call (iterating the cursor loads each row in Python)
    made = stored_observation
    out = []
    for (oid, kind, source, at, _k, uid, node, ns, name, _p), key, value in decoded(fetched, _FACT_DECODED):
        if where is None or where(value):
            out.append((oid, made(kind, source, at, key, uid, node or None, ns or None, name or None, value)))
    return out


def selection(
    cluster: Cluster | int,
    *,
    kinds: Iterable[str] | None = None,
    keys: Iterable[str] | None = None,
    pod_uids: Iterable[str] | None = None,
    ids: Iterable[int] | None = None,
    node: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    source: str | None = None,
    nodes: Iterable[str] | None = None,
    namespaces: Iterable[str] | None = None,
    named: Iterable[tuple[str, str]] | None = None,
    node_spans: Iterable[tuple[str, datetime, datetime]] | None = None,
    has_pod_uid: bool | None = None,
    on_a_node: bool | None = None,
    since: datetime | None = None,
    before: datetime | None = None,
    arrays: bool = False,
) -> QuerySet[ObservationRow]:
    """The rows of ``cluster`` (a cluster or its id) that the stored columns select, for ``rows`` / ``facts``:
    of these kinds, dedupe keys, pod UIDs or ids, of this node, namespace, name or source, of one of these
    nodes or namespaces, naming one of the (namespace, name) pairs ``named``, on a node of ``node_spans``
    within its (inclusive) time span, with a pod UID or without one (``has_pod_uid``), on a node or on
    none (``on_a_node``: the node is not empty), observed at ``since`` or later and before ``before``
    (each one that is given; an empty collection selects nothing). A read that chooses rows here does not
    name how those columns are stored, which the compact form changes (kind and source codes, name ids,
    hashed keys: docs/storage.md): every product read of stored observations and the tests' reads use it.

    ``arrays``: ``pod_uids``, ``nodes`` and ``namespaces`` go to PostgreSQL as one array parameter each
    (``pg_arrays.any_of``: one statement text whatever the number of values), not as an IN list."""
    qs = ObservationRow.objects.filter(cluster_id=cluster if isinstance(cluster, int) else cluster.pk)
    if kinds is not None:
        qs = qs.filter(kind__in=list(kinds))
    if keys is not None:
        # A row holds a hash of its cluster and key (since migration 0028, its key in the body): the hashes
        # of the wanted keys find them, named on PostgreSQL as the partitions' key index writes it
        # (``partitions.KEY_HASH``: an older row's hash is made of its key's text). SQLite's rows all hold
        # the hash (0028 wrote it).
        cluster_id = cluster if isinstance(cluster, int) else cluster.pk
        hashes = [partitions.key_hash(cluster_id, key) for key in keys]
        if connection.vendor == "postgresql":
            qs = qs.extra(where=[f"{partitions.stored_key_hash_sql()} = ANY(%s::uuid[])"], params=[hashes])
        else:
            qs = qs.filter(key_hash__in=hashes)
    if ids is not None:
        if connection.vendor == "postgresql":  # each partition's id index is of the ids' buckets (0030)
            t = connection.ops.quote_name(ObservationRow._meta.db_table)
            chosen, arrays_of_ids = partitions.ids_sql(ids, f"{t}.id")
            qs = qs.extra(where=[chosen], params=arrays_of_ids)
        else:
            qs = qs.filter(id__in=list(ids))
    if pod_uids is not None:
        condition = pod_condition(pod_uids, arrays=arrays)
        if isinstance(condition, Q):
            qs = qs.filter(condition)
        else:
            qs = qs.extra(where=[condition[0]], params=condition[1])
    for column, values in (("node", nodes), ("namespace", namespaces)):
        if values is None:
            continue
        if arrays:
            params: list[Any] = []
            qs = qs.extra(
                where=[pg_arrays.any_of(column, values, params, postgres=connection.vendor == "postgresql")],
                params=params,
            )
        else:
            qs = qs.filter(**{f"{column}__in": list(values)})
    texts = {"node": node, "namespace": namespace, "name": name, "source": source}
    qs = qs.filter(**{column: text for column, text in texts.items() if text is not None})
    if named is not None:
        qs = qs.filter(Q(*[Q(namespace=ns, name=nm) for ns, nm in named], _connector=Q.OR) or Q(pk__in=[]))
    if node_spans is not None:
        spans = [Q(node=n, observed_at__gte=lo, observed_at__lte=hi) for n, lo, hi in node_spans]
        qs = qs.filter(Q(*spans, _connector=Q.OR) or Q(pk__in=[]))
    if has_pod_uid is not None:
        uidless = Q(pod_uid__isnull=True, pod_id__isnull=True)
        qs = qs.exclude(uidless) if has_pod_uid else qs.filter(uidless)
    if on_a_node is not None:
        qs = qs.exclude(node="") if on_a_node else qs.filter(node="")
    if since is not None:
        qs = qs.filter(observed_at__gte=since)
    if before is not None:
        qs = qs.filter(observed_at__lt=before)
    return qs


def by_pod(qs: QuerySet[ObservationRow]) -> QuerySet[ObservationRow]:
    """``qs`` pod by pod (by UID), each pod's rows by time and id."""
    return qs.order_by(uid_expression(), "observed_at", "id")


def newest_per(qs: QuerySet[ObservationRow], column: str) -> QuerySet[ObservationRow]:
    """``qs`` by ``column`` (``"node"`` or ``"name"``), each value's newest row first (by time, then id); on
    PostgreSQL only that newest row of each value (``DISTINCT ON``)."""
    if column not in ("node", "name"):
        raise ValueError(f"newest_per: {column!r} is not a name column")
    qs = qs.order_by(column, "-observed_at", "-id")
    return qs.distinct(column) if connection.vendor == "postgresql" else qs


def values_of(qs: QuerySet[ObservationRow], column: str, *, distinct: bool = False) -> list[Any]:
    """The ``column`` (a ``StoredRow`` attribute other than the payload) of each row of ``qs``, as text
    (its distinct values with ``distinct``), without reading the payload."""
    if column not in BARE_COLUMNS:
        raise ValueError(f"values_of: {column!r} is not a column read without decoding")
    if column == "pod_uid":
        qs = qs.annotate(**{_UID: uid_expression()})
    values = qs.values_list(_read(column), flat=True)
    return list(values.distinct() if distinct else values)


def newest_at(qs: QuerySet[ObservationRow], column: str) -> dict[str, datetime]:
    """The newest ``observed_at`` of the rows of ``qs`` per value of ``column`` (``"node"``)."""
    if column not in ("node",):
        raise ValueError(f"newest_at: {column!r} is not a name column")
    return {r[column]: r["until"] for r in qs.values(column).annotate(until=Max("observed_at"))}


def columns_of(
    qs: QuerySet[ObservationRow], *columns: str, distinct: bool = False, chunk_size: int | None = None
) -> Iterator[tuple[Any, ...]]:
    """The ``columns`` (``StoredRow`` attributes other than the payload) of each row of ``qs``, in its
    order (their distinct combinations with ``distinct``), without reading the payload; with
    ``chunk_size``, read that many at a time."""
    unknown = [c for c in columns if c not in BARE_COLUMNS]
    if unknown:
        raise ValueError(f"columns_of: not columns read without decoding: {unknown}")
    if "pod_uid" in columns:
        qs = qs.annotate(**{_UID: uid_expression()})
    values = qs.values_list(*map(_read, columns))
    values = values.distinct() if distinct else values
    return iter(values.iterator(chunk_size=chunk_size) if chunk_size is not None else values)


def evidence_spans(qs: QuerySet[ObservationRow]) -> list[tuple[str | None, str, str, datetime, datetime]]:
    """(pod UID, node, kind, first, last) of the rows of ``qs`` that name a node, one per pod, node and kind:
    where and when each pod left evidence."""
    return list(
        qs.exclude(node="")
        .annotate(**{_UID: uid_expression()})
        .values_list(_UID, "node", "kind")
        .annotate(first=Min("observed_at"), last=Max("observed_at"))
        .values_list(_UID, "node", "kind", "first", "last")
    )


# -- PostgreSQL conditions for ``pg_facts`` (after ``WHERE o.cluster_id = %s``) and their parameters -----------
def pg_pods(uids: Sequence[str]) -> tuple[str, list[Any]]:
    """The rows of the pods ``uids``, pod by pod (by UID), each by time and id."""
    return (
        "AND (o.pod_uid = ANY(%s::text[]) OR o.pod_id = ANY(%s::uuid[])) "
        f"ORDER BY {uid_sql('o')}, o.observed_at, o.id",
        [pg_arrays.text_array(uids), [i for i in map(pod_id_of, uids) if i is not None]],
    )


def pg_named(kinds: Sequence[str], names: Iterable[tuple[str, str]]) -> tuple[str, list[Any]]:
    """The UID-less rows of ``kinds`` naming one of ``names`` (namespace, name; not empty)."""
    namespaces, pod_names = zip(*sorted(names), strict=True)
    return (
        "AND o.pod_uid IS NULL AND o.pod_id IS NULL AND o.kind = ANY(%s) "
        "AND (o.namespace, o.name) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
        [list(kinds), pg_arrays.text_array(namespaces), pg_arrays.text_array(pod_names)],
    )


def pg_nameless_on_nodes(
    kinds: Sequence[str], nodes: Sequence[str], los: Sequence[datetime], his: Sequence[datetime]
) -> tuple[str, list[Any]]:
    """The UID-less rows of ``kinds`` naming no pod, on ``nodes[i]`` between ``los[i]`` and ``his[i]``
    (inclusive; not empty)."""
    return (
        "AND o.pod_uid IS NULL AND o.pod_id IS NULL AND o.kind = ANY(%s) AND o.name = '' "
        "AND o.observed_at BETWEEN %s AND %s "  # the whole range first: the index bounds the scan
        "AND EXISTS (SELECT 1 FROM unnest(%s::text[], %s::timestamptz[], %s::timestamptz[]) "
        "AS s(node, lo, hi) WHERE o.node = s.node AND o.observed_at BETWEEN s.lo AND s.hi)",
        [
            list(kinds),
            min(los),
            max(his),
            pg_arrays.text_array(nodes),
            pg_arrays.time_array(los),
            pg_arrays.time_array(his),
        ],
    )


def keys_by_id(cluster: Cluster | int, ids: Iterable[int]) -> dict[int, str]:
    """The dedupe key of each of the observations ``ids`` of ``cluster``, in ONE query (the index of each
    partition by the ids' buckets, ``partitions.id_bucket_sql``; the primary key on SQLite), however many
    ids: the ids travel as one array parameter (PostgreSQL) or one JSON text (SQLite ``json_each``), never
    one bound value each. An id no longer stored (dropped by retention) is absent from the answer."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    t = connection.ops.quote_name(ObservationRow._meta.db_table)
    # The key's text where the row holds it, else the body that does (and the texts it is decoded with).
    columns = (
        f"id, dedupe_key, CASE WHEN dedupe_key IS NULL THEN {payload_sql(t)} END, {uid_sql(t)}, node, "
        "namespace, name, observed_at"
    )
    if connection.vendor == "postgresql":
        chosen, params = partitions.ids_sql(wanted)
        sql = f"SELECT {columns} FROM {t} WHERE cluster_id = %s AND {chosen}"
    else:
        sql = f"SELECT {columns} FROM {t} WHERE cluster_id = %s AND id IN (SELECT value FROM json_each(%s))"
        params = [orjson.dumps(wanted).decode()]
    with connection.cursor() as cursor:
        cursor.execute(sql, [cluster if isinstance(cluster, int) else cluster.pk, *params])
        found = cursor.fetchall()
    out = {oid: key for oid, key, *_rest in found if key is not None}
    # The others hold it in their bodies: the keys alone are decoded, not the payloads, a batch at a time.
    held = [row for row in found if row[1] is None]
    if connection.vendor != "postgresql":
        convert = connection.ops.convert_datetimefield_value  # type: ignore[attr-defined]
        held = [(*row[:7], convert(row[7], None, connection)) for row in held]
    for batch in batches(held):
        keys = payloads.keys_of(
            [row[2] for row in batch],
            [Texts(uid, node, ns, name, at) for *_h, uid, node, ns, name, at in batch],
        )
        for (oid, *_row), key in zip(batch, keys, strict=True):
            if key is None:
                raise CorruptRow(
                    f"observation {oid} holds its dedupe key neither in its column nor in its body"
                )
            out[oid] = key
    return out


def field_is(path: Sequence[str], expected: str | bool | int) -> FieldIs:
    """A ``where`` that keeps payloads whose member at ``path`` (object keys) is ``expected``."""
    return FieldIs(tuple(path), expected)


def field_of(payload: Any, key: str) -> Any:
    """``payload[key]`` when the payload is an object that has it, else None."""
    return payload.get(key) if isinstance(payload, dict) else None
