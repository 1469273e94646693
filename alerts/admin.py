"""Webhook destinations are configured here; deliveries and the notified state are read-only records."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from alerts.models import Delivery, Destination, NotifiedFinding
from alerts.notifier import queue_test_message

SECRET_FIELD = "new_signing_secret"


def _formfield(field: models.Field, **kwargs: Any) -> Any:  # type: ignore[type-arg]
    if isinstance(field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return field.formfield(**kwargs)


class DestinationForm(forms.ModelForm):  # type: ignore[type-arg]
    """The signing secret is write-only: the form never holds it (nor does a view-only page), it can only
    be replaced. Blank keeps the secret a destination has; a new destination needs one."""

    new_signing_secret = forms.CharField(
        label="Signing secret",
        required=False,
        strip=True,
        max_length=200,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=(
            "HMAC-SHA256 key of the X-Podlife-Signature header (docs/deploy.md shows how to verify it). "
            "Write-only: type a new one to replace it, leave blank to keep it. "
            "Make one with: python -c 'import secrets; print(secrets.token_hex(32))'"
        ),
    )

    class Meta:
        model = Destination
        exclude = ("signing_secret",)
        formfield_callback = _formfield
        help_texts = {
            "url": "Where to POST: a public address, or a host or range PODLIFE_WEBHOOK_ALLOW allows. "
            "Redirects are not followed.",
        }

    def clean_new_signing_secret(self) -> str:
        value = str(self.cleaned_data.get(SECRET_FIELD) or "")
        if not value and self.instance.pk is None:
            raise forms.ValidationError("a new destination needs a signing secret")
        return value

    def save(self, commit: bool = True) -> Any:
        value = self.cleaned_data.get(SECRET_FIELD)
        if value:
            self.instance.signing_secret = value
        return super().save(commit=commit)


# The admin classes are generic in their model only in django-stubs: Django's own cannot be subscripted at run
# time (django-stubs-ext's monkeypatch would allow it; it is a build-only dependency), hence the
# `type: ignore[type-arg]` on each class below.
@admin.register(Destination)
class DestinationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
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
    form = DestinationForm
    readonly_fields = ("secret_status", "failures", "retry_at", "last_error", "created_at")
    fieldsets = (
        (None, {"fields": ("name", "url", "format", "enabled", "secret_status", SECRET_FIELD)}),
        (
            "Filters (blank: everything; comma-separated, * and ? as in shell patterns)",
            {"fields": ("clusters", "namespaces", "kinds", "min_severity", "notify_resolved")},
        ),
        ("Rate limit", {"fields": ("max_per_minute",)}),
        ("Health", {"fields": ("failures", "retry_at", "last_error", "created_at")}),
    )
    actions = ("send_test_message", "retry_now")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.display(description="signing secret")
    def secret_status(self, obj: Destination | None) -> str:
        return "set" if obj is not None and obj.signing_secret else "not set"

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        # A user who may only view gets no secret field at all (its read-only rendering would be empty
        # anyway: the form holds no value), just whether one is set.
        fieldsets = super().get_fieldsets(request, obj)
        if self.has_change_permission(request, obj) or (obj is None and self.has_add_permission(request)):
            return fieldsets
        return [
            (title, {**opts, "fields": tuple(f for f in opts["fields"] if f != SECRET_FIELD)})
            for title, opts in fieldsets
        ]

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
class DeliveryAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
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
class NotifiedFindingAdmin(admin.ModelAdmin):  # type: ignore[type-arg]  # see the note above
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
