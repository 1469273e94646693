"""Webhook destinations are configured here; deliveries and the notified state are read-only records."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from alerts.models import Delivery, Destination, NotifiedFinding
from alerts.notifier import queue_test_message


@admin.register(Destination)
class DestinationAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "format",
        "enabled",
        "min_severity",
        "clusters",
        "namespaces",
        "kinds",
        "failures",
        "retry_at",
    )
    list_filter = ("enabled", "format", "min_severity")
    search_fields = ("name", "clusters", "namespaces", "kinds")
    readonly_fields = ("failures", "retry_at", "last_error", "created_at")
    fieldsets = (
        (None, {"fields": ("name", "url", "format", "enabled", "signing_secret")}),
        (
            "Filters (blank: everything; comma-separated, * and ? as in shell patterns)",
            {"fields": ("clusters", "namespaces", "kinds", "min_severity", "notify_resolved")},
        ),
        ("Rate limit", {"fields": ("max_per_minute",)}),
        ("Health", {"fields": ("failures", "retry_at", "last_error", "created_at")}),
    )
    actions = ("send_test_message", "retry_now")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.action(description="Send a test message")
    def send_test_message(self, request: HttpRequest, queryset: QuerySet[Destination]) -> None:
        for dest in queryset:
            queue_test_message(dest)
        self.message_user(
            request,
            f"Queued a test message for {queryset.count()} destination(s); it is sent with the next alert round.",
            messages.SUCCESS,
        )

    @admin.action(description="Retry now (clear the backoff)")
    def retry_now(self, request: HttpRequest, queryset: QuerySet[Destination]) -> None:
        now = timezone.now()
        queryset.update(retry_at=None)
        Delivery.objects.filter(destination__in=queryset, status=Delivery.Status.PENDING).update(
            next_attempt_at=now
        )
        self.message_user(request, "Pending deliveries go out with the next alert round.", messages.SUCCESS)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "destination",
        "event",
        "status",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "sent_at",
    )
    list_filter = ("status", "event", "destination")
    search_fields = ("event_id",)
    exclude = ("body",)
    readonly_fields = (
        "destination",
        "event_id",
        "event",
        "message",
        "status",
        "attempts",
        "created_at",
        "next_attempt_at",
        "sent_at",
        "last_error",
        "last_status_code",
    )

    @admin.display(description="body")
    def message(self, obj: Delivery) -> str:
        return bytes(obj.body).decode("utf-8", "replace")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(NotifiedFinding)
class NotifiedFindingAdmin(admin.ModelAdmin):
    list_display = (
        "first_notified_at",
        "destination",
        "cluster",
        "subject_name",
        "kind",
        "severity",
        "open",
        "resolved_at",
    )
    list_filter = ("open", "kind", "severity", "destination")
    search_fields = ("subject_name", "cluster", "namespace")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
