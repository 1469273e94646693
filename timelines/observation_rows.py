"""Reading stored observations back: every reader of ``timelines_observation`` gets its rows' payloads
through ``decode_payload`` and its rows through ``rows`` / ``facts`` here, so that the stored form of an
observation is known to the store (which writes it) and to this module (which reads it) and to nothing
else (issue #37, docs/storage.md: the compact form replaces the payload column; its decode replaces
``decode_payload``, and no reader filters on the payload in SQL).

A reader that needs a payload field to choose rows reads the rows its indexed columns select (cluster,
kind, pod UID, names, time) and keeps those whose decoded payload matches (``where``). A ``where`` made by
``field_is`` also narrows the selection in SQL while the stored form can (today's jsonb: a namespace's
audited requests or object events are many, its evictions or PDB events few); the compact form replaces
that narrowing with a column (docs/storage.md), and the decoded check stays the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import psycopg
from django.db import connection
from django.db.models import QuerySet, TextField
from django.db.models.functions import Cast

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


def payload_sql(table: str) -> str:
    """The SQL that selects the stored payload of ``table``'s row for ``decode_payload``."""
    return f"CAST({table}.payload AS TEXT)"


def payload_expression() -> Any:
    """The ORM expression that selects the stored payload for ``decode_payload`` (``payload_sql``'s)."""
    return Cast("payload", TextField())


def decode_payload(stored: str | bytes) -> Any:
    """The one decode of a stored payload (as ``payload_sql`` selects it) back into its JSON value."""
    return orjson.loads(stored)


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


def observation_from_row(row: StoredRow | ObservationRow) -> Observation:
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
    scalar); ``narrow`` / ``narrow_sql`` select the same rows in SQL, to read fewer."""

    path: tuple[str, ...]
    expected: str | bool | int

    def __call__(self, payload: Any) -> bool:
        value = payload
        for key in self.path:
            if not isinstance(value, dict):
                return False
            value = value.get(key)
        return bool(value == self.expected and type(value) is type(self.expected))

    def narrow(self, qs: QuerySet[ObservationRow]) -> QuerySet[ObservationRow]:
        return qs.filter(**{"__".join(("payload", *self.path)): self.expected})

    def narrow_sql(self, table: str) -> tuple[str, list[Any]]:
        """PostgreSQL: a condition on ``table``'s payload, and its parameters."""
        return f"{table}.payload #> %s::text[] = %s::jsonb", [
            list(self.path),
            orjson.dumps(self.expected).decode(),
        ]


def _narrowed(qs: QuerySet[ObservationRow], where: Where | None) -> QuerySet[ObservationRow]:
    return where.narrow(qs) if isinstance(where, FieldIs) else qs


def _selected(qs: QuerySet[ObservationRow]) -> Any:
    return qs.annotate(payload_text=payload_expression()).values_list(*COLUMNS, "payload_text")


def rows(qs: QuerySet[ObservationRow], where: Where | None = None) -> list[StoredRow]:
    """The rows of ``qs`` (in its order), decoded; with ``where``, those whose payload it accepts."""
    return list(iter_rows(qs, where))


def iter_rows(
    qs: QuerySet[ObservationRow], where: Where | None = None, *, chunk_size: int | None = None
) -> Generator[StoredRow]:
    """As ``rows``, one at a time; with ``chunk_size``, read from the database that many at a time (a
    server-side cursor on PostgreSQL) instead of all at once."""
    selected = _selected(_narrowed(qs, where))
    if chunk_size is not None:
        selected = selected.iterator(chunk_size=chunk_size)
    for oid, kind, source, at, received, key, uid, node, ns, name, payload in selected:
        value = decode_payload(payload)
        if where is None or where(value):
            yield StoredRow(oid, kind, source, at, received, key, uid, node, ns, name, value)


def facts(qs: QuerySet[ObservationRow], where: Where | None = None) -> Iterator[Fact]:
    """(id, Observation) of the rows of ``qs`` (in its order); with ``where``, those whose payload it
    accepts."""
    made = stored_observation
    for oid, kind, source, at, _received, key, uid, node, ns, name, payload in _selected(
        _narrowed(qs, where)
    ):
        value = decode_payload(payload)
        if where is None or where(value):
            yield (oid, made(kind, source, at, key, uid, node or None, ns or None, name or None, value))


def facts_sql(condition: str) -> str:
    """The statement ``pg_facts`` runs for ``condition``."""
    return (
        "SELECT o.id, o.kind, o.source, o.observed_at, o.dedupe_key, o.pod_uid, o.node, o.namespace, "
        f"o.name, {payload_sql('o')} FROM timelines_observation o WHERE o.cluster_id = %s {condition}"
    )


def pg_facts(condition: str, params: Sequence[Any], where: Where | None = None) -> list[Fact]:
    """PostgreSQL: (id, Observation) of the rows ``condition`` (SQL after ``WHERE o.cluster_id = %s``,
    ordering included) selects, read in one binary round trip; with ``where``, those whose payload it
    accepts."""
    if isinstance(where, FieldIs):  # right after the cluster's condition: ``condition`` may end in ORDER BY
        narrowing, more = where.narrow_sql("o")
        condition = f"AND {narrowing} {condition}"
        params = [params[0], *more, *params[1:]]
    sql = facts_sql(condition)
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        # Never a named prepared statement: a transaction-pooling proxy may hand the next query to
        # another server session.
        cursor.execute(sql, params, binary=True, prepare=False)
        fetched = cursor.fetchall()  # loaded in one call (iterating the cursor loads each row in Python)
    made, decode = stored_observation, decode_payload
    out = []
    for oid, kind, source, at, key, uid, node, ns, name, payload in fetched:
        value = decode(payload)
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
) -> QuerySet[ObservationRow]:
    """The rows of ``cluster`` (a cluster or its id) that the stored columns select, for ``rows`` / ``facts``:
    of these kinds, dedupe keys, pod UIDs or ids, and of this node, namespace, name or source (each one
    that is given; an empty collection selects nothing). A read that chooses rows here does not name how
    those columns are stored, which the compact form changes (kind and source codes, name ids, hashed
    keys: docs/storage.md); the reads by key, id and pod and the tests' reads use it."""
    qs = ObservationRow.objects.filter(cluster_id=cluster if isinstance(cluster, int) else cluster.pk)
    if kinds is not None:
        qs = qs.filter(kind__in=list(kinds))
    if keys is not None:
        qs = qs.filter(dedupe_key__in=list(keys))
    if pod_uids is not None:
        qs = qs.filter(pod_uid__in=list(pod_uids))
    if ids is not None:
        qs = qs.filter(id__in=list(ids))
    texts = {"node": node, "namespace": namespace, "name": name, "source": source}
    return qs.filter(**{column: text for column, text in texts.items() if text is not None})


def field_is(path: Sequence[str], expected: str | bool | int) -> FieldIs:
    """A ``where`` that keeps payloads whose member at ``path`` (object keys) is ``expected``."""
    return FieldIs(tuple(path), expected)


def field_of(payload: Any, key: str) -> Any:
    """``payload[key]`` when the payload is an object that has it, else None."""
    return payload.get(key) if isinstance(payload, dict) else None
