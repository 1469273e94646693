from __future__ import annotations

from typing import Any

import orjson
from django.contrib import admin
from django.db import connection
from django.db.models import OrderBy
from django.db.models.expressions import RawSQL
from django.http import HttpRequest

from timelines import models, observation_rows, partitions

# The admin classes are generic in their model only in django-stubs: Django's own cannot be subscripted at run
# time (django-stubs-ext's monkeypatch would allow it; it is a build-only dependency), hence the
# `type: ignore[type-arg]` on each class below.


@admin.register(models.Cluster)
class ClusterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = ["name", "origin", "read_only", "created_at"]


@admin.register(models.Node)
class NodeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = ["name", "cluster", "ready", "unschedulable", "last_seen", "deleted_at"]
    list_filter = ["cluster", "ready", "unschedulable"]
    search_fields = ["name", "uid"]


@admin.register(models.Pod)
class PodAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = [
        "namespace",
        "name",
        "uid",
        "node",
        "phase",
        "owner_kind",
        "owner_name",
        "created_at",
        "deleted_at",
    ]
    list_filter = ["cluster", "static", "phase"]
    search_fields = ["name", "namespace", "uid", "node", "owner_name"]


_ID_BUCKET = partitions.id_bucket_sql(f'"{partitions.PARENT}"."id"')  # as the partitions' id index holds it


@admin.register(models.Observation)
class ObservationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    """Read-only: observations are the append-only source of truth."""

    list_display = ["observed_at", "cluster", "kind", "source", "namespace", "name", "pod", "node"]
    list_filter = ["cluster", "kind", "source"]
    # The dedupe key is in the body (0028); a UUID pod UID in pod_id (0029).
    search_fields = ["pod_uid", "pod_id", "name", "namespace", "node"]
    date_hierarchy = "observed_at"
    show_full_result_count = False  # counting millions of rows on every page is not worth it
    exclude = ["payload", "body", "dedupe_key", "pod_id"]  # stored compressed: shown decoded
    readonly_fields = ["pod", "stored_key", "stored_payload"]
    # Newest first, through each partition's index of the ids' buckets (migration 0030): the bucket, then
    # the id within it, the same order as the id alone, which no index holds any more.
    ordering = (OrderBy(RawSQL(_ID_BUCKET, ()), descending=True), "-id")

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        """One observation by its id, found through its bucket as every read by id is on PostgreSQL."""
        if from_field is not None or connection.vendor != "postgresql":
            return super().get_object(request, object_id, from_field)
        try:
            oid = int(object_id)
        except ValueError:
            return None
        if not 0 < oid < 2**63:  # no such id (a bigint)
            return None
        sql, params = partitions.ids_sql([oid], f'"{partitions.PARENT}"."id"')
        return self.get_queryset(request).extra(where=[sql], params=params).first()

    def _decoded(self, obj: models.Observation) -> tuple[str, object]:
        stored = obj.body if obj.body is not None else orjson.dumps(obj.payload).decode()
        return observation_rows.decode(
            stored, obj.dedupe_key, obj.stored_pod_uid, obj.node, obj.namespace, obj.name, obj.observed_at
        )

    @admin.display(description="pod UID")
    def pod(self, obj: models.Observation) -> str | None:
        return obj.stored_pod_uid

    @admin.display(description="dedupe key")
    def stored_key(self, obj: models.Observation) -> str:
        return self._decoded(obj)[0]

    @admin.display(description="payload")
    def stored_payload(self, obj: models.Observation) -> str:
        return orjson.dumps(self._decoded(obj)[1], option=orjson.OPT_INDENT_2).decode()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(models.Interval)
class IntervalAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = ["pod_uid", "lane", "state", "start", "end", "source", "node", "namespace"]
    list_filter = ["cluster", "source", "state"]
    search_fields = ["pod_uid", "lane", "node", "namespace"]


@admin.register(models.Marker)
class MarkerAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = ["at", "pod_uid", "kind", "reason", "message"]
    list_filter = ["cluster", "kind", "reason"]
    search_fields = ["pod_uid", "reason", "message"]


@admin.register(models.Finding)
class FindingAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = ["start", "kind", "severity", "subject", "subject_name", "namespace", "message"]
    list_filter = ["cluster", "kind", "severity", "subject"]
    search_fields = ["pod_uid", "subject_name", "message"]


class PDBStatusSampleInline(admin.TabularInline):  # type: ignore[type-arg]  # see the note above
    model = models.PDBStatusSample
    extra = 0
    can_delete = False


@admin.register(models.PodDisruptionBudget)
class PodDisruptionBudgetAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = ["namespace", "name", "cluster", "min_available", "max_unavailable", "deleted_at"]
    list_filter = ["cluster"]
    search_fields = ["name", "namespace", "uid"]
    inlines = [PDBStatusSampleInline]


class WorkloadStatusSampleInline(admin.TabularInline):  # type: ignore[type-arg]  # see the note above
    model = models.WorkloadStatusSample
    extra = 0
    can_delete = False


@admin.register(models.Workload)
class WorkloadAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = ["kind", "namespace", "name", "cluster", "deleted_at"]
    list_filter = ["cluster", "kind"]
    search_fields = ["name", "namespace", "uid"]
    inlines = [WorkloadStatusSampleInline]
