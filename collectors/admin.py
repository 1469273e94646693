from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from collectors.models import TOKEN_PREFIX, CollectorState, IngestToken


# The admin classes are generic in their model only in django-stubs: Django's own cannot be subscripted at run
# time (django-stubs-ext's monkeypatch would allow it; it is a build-only dependency), hence the
# `type: ignore[type-arg]` on each class below.
@admin.register(IngestToken)
class IngestTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    """Tokens are made here or by ``manage.py ingest_token``; the token text is shown once, on save."""

    list_display = ("cluster", "key", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("cluster",)
    search_fields = ("key_id", "name", "cluster__name")
    readonly_fields = ("key", "created_at", "last_used_at")
    actions = ("revoke",)

    def get_fields(self, request: HttpRequest, obj: IngestToken | None = None) -> tuple[str, ...]:
        if obj is None:
            return ("cluster", "name")
        return ("cluster", "name", "key", "created_at", "last_used_at", "revoked_at")

    def get_readonly_fields(self, request: HttpRequest, obj: IngestToken | None = None) -> list[str]:
        return ["cluster", "key", "created_at", "last_used_at"] if obj is not None else []

    @admin.display(description="key id")
    def key(self, obj: IngestToken) -> str:
        return f"{TOKEN_PREFIX}{obj.key_id}_…"

    def save_model(self, request: HttpRequest, obj: IngestToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        row, token = IngestToken.issue(obj.cluster, name=obj.name)
        obj.pk, obj.key_id, obj.key_hash = row.pk, row.key_id, row.key_hash
        messages.warning(
            request, f"Ingest token for {obj.cluster} (copy it now, it is not shown again): {token}"
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[IngestToken]) -> None:
        count = queryset.filter(revoked_at=None).update(revoked_at=timezone.now())
        messages.success(request, f"revoked {count} token(s)")


@admin.register(CollectorState)
class CollectorStateAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    list_display = [
        "cluster",
        "resource",
        "resource_version",
        "last_event_at",
        "events_total",
        "errors_total",
    ]
    list_filter = ["cluster"]
