from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from dashboard.models import ApiToken, ClusterGrant

# The admin classes are generic in their model only in django-stubs: Django's own cannot be subscripted at run
# time (django-stubs-ext's monkeypatch would allow it; it is a build-only dependency), hence the
# `type: ignore[type-arg]` on each class below.


@admin.register(ClusterGrant)
class ClusterGrantAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    """Who may read what: a group gets a cluster, or one namespace of it (blank namespace: all)."""

    list_display = ["group", "cluster", "namespace"]
    list_filter = ["cluster", "group"]
    search_fields = ["namespace", "group__name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
    """Tokens are made by ``manage.py api_token`` (only their hash is stored); here they can be revoked."""

    list_display = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    readonly_fields = ["user", "name", "prefix", "key_hash", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
