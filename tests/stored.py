"""The tests' conveniences over stored observations (issue #37): reads go through
``timelines.observation_rows`` (``selection`` chooses the rows, ``rows`` decodes them), and the one write
that bypasses the store (``put``) is here, so that the compact form changes the store,
``observation_rows`` and this module, and no test (``tests/test_one_decode.py`` keeps it so)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson
from django.db import connection
from django.utils import timezone

from timelines import observation_rows, partitions
from timelines.lifecycle.observation import Observation
from timelines.models import Cluster
from timelines.models import Observation as ObservationRow
from timelines.observation_rows import StoredRow

ORDER = ("observed_at", "id")


Clusters = Cluster | str | int | None


def _clusters(cluster: Clusters) -> list[Cluster | int]:
    """A cluster, its name or its id, as a list (empty when no cluster has that name); None: every one."""
    if cluster is None:
        return list(Cluster.objects.order_by("pk"))
    if isinstance(cluster, str):
        return list(Cluster.objects.filter(name=cluster))
    return [cluster]


def rows_of(
    cluster: Clusters,
    where: observation_rows.Where | None = None,
    *,
    order: Sequence[str] = ORDER,
    **selected: Any,
) -> list[StoredRow]:
    """The stored rows of ``cluster`` (a cluster, its name or its id; None: of every cluster, one after
    the other) that ``observation_rows.selection(**selected)`` chooses and ``where`` keeps, decoded, in
    ``order``."""
    return [
        row
        for each in _clusters(cluster)
        for row in observation_rows.rows(observation_rows.selection(each, **selected).order_by(*order), where)
    ]


def count_of(cluster: Clusters, **selected: Any) -> int:
    """How many stored rows ``observation_rows.selection(**selected)`` chooses (of every cluster: None)."""
    return sum(observation_rows.selection(each, **selected).count() for each in _clusters(cluster))


def keys_of(cluster: Clusters, where: observation_rows.Where | None = None, **selected: Any) -> set[str]:
    """The dedupe keys of ``rows_of``'s rows."""
    return {row.dedupe_key for row in rows_of(cluster, where, **selected)}


def key_by_id(cluster: Clusters, ids: Iterable[int]) -> dict[int, str]:
    """The dedupe key of each of the stored observations ``ids`` of ``cluster``."""
    return {row.id: row.dedupe_key for row in rows_of(cluster, ids=list(ids))}


def put(cluster: Cluster, facts: Iterable[Mapping[str, Any]]) -> None:
    """Store rows as they are, without the store's checks: bulk fixtures, and rows an older podlife
    stored before a check existed (a time outside the supported range). Each fact names the model's
    fields (``kind``, ``source``, ``observed_at``, ``dedupe_key``, ``payload``, ...); ``received_at``
    defaults to ``observed_at``, ``payload`` to ``{}``."""
    made = []
    for fact in facts:
        fields = {"received_at": fact.get("observed_at", timezone.now()), "payload": {}, **fact}
        if fields.get("dedupe_key") is not None:  # the key's text in its column, and its hash (0028)
            fields.setdefault("key_hash", partitions.key_hash(cluster.pk, fields["dedupe_key"]))
        made.append(ObservationRow(cluster=cluster, **fields))
    ObservationRow.objects.bulk_create(made, batch_size=2000)


def forget_all() -> None:
    """Delete every stored observation (a test that starts over within itself)."""
    ObservationRow.objects.all().delete()


def put_as_before_0028(cluster_id: int, facts: Iterable[Observation]) -> None:
    """Rows as podlife stored them before migration 0028 (the database migrated back to before it): the
    key's text in ``dedupe_key``, the payload as JSON (as before 0024)."""
    jsonb = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO timelines_observation (cluster_id, pod_uid, kind, source, observed_at, received_at, "
            f"dedupe_key, node, namespace, name, payload) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, {jsonb})",
            [
                (
                    cluster_id,
                    o.pod_uid,
                    o.kind,
                    o.source,
                    adapt(o.observed_at),
                    adapt(o.observed_at),
                    o.dedupe_key,
                    o.node,
                    o.namespace,
                    o.name,
                    orjson.dumps(o.payload).decode(),
                )
                for o in facts
            ],
        )
