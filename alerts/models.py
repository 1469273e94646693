"""Webhook destinations, what each was told about which finding, and the deliveries (an outbox).

Findings are derived rows that a derive stage replaces wholesale, so nothing here points at a Finding
row: a finding is known by its identity (cluster, subject, subject name, pod UID, kind, start), which
survives re-derivation. ``NotifiedFinding`` is the per-destination "already told" state that makes the
scan idempotent; it follows its finding when new evidence moves the finding's start (``follows``); ``Delivery`` is one message to send, retried with backoff until it is accepted.
"""

from __future__ import annotations

import secrets

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models

SEVERITIES = ("info", "warning", "critical")  # ascending; timelines.models.Finding.Severity


def new_signing_secret() -> str:
    return secrets.token_hex(32)


def split_list(value: str) -> list[str]:
    """A comma-separated filter field as a list (blank: no filter)."""
    return [part.strip() for part in value.split(",") if part.strip()]


class Destination(models.Model):
    class Format(models.TextChoices):
        JSON = "json", "generic JSON (podlife.alert/v1)"
        SLACK = "slack", "Slack-compatible (incoming webhook)"

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(
        max_length=2000,
        validators=[URLValidator(schemes=["https", "http"])],
        help_text="Where to POST. Redirects are not followed.",
    )
    format = models.CharField(max_length=16, choices=Format.choices, default=Format.JSON)
    enabled = models.BooleanField(default=True)
    signing_secret = models.CharField(
        max_length=200,
        default=new_signing_secret,
        help_text="HMAC-SHA256 key of the X-Podlife-Signature header (docs/deploy.md shows how to verify it).",
    )
    # Filters: blank means everything. Names are exact; '*' and '?' work as in shell patterns.
    clusters = models.CharField(max_length=1000, blank=True, help_text="Comma-separated cluster names.")
    namespaces = models.CharField(max_length=2000, blank=True, help_text="Comma-separated namespaces.")
    kinds = models.CharField(
        max_length=1000, blank=True, help_text="Comma-separated finding kinds, e.g. stuck_terminating."
    )
    min_severity = models.CharField(
        max_length=16,
        choices=[(s, s) for s in SEVERITIES],
        default="warning",
        help_text="Lowest severity sent.",
    )
    notify_resolved = models.BooleanField(default=True, help_text="Also send when a finding is resolved.")
    max_per_minute = models.PositiveIntegerField(
        default=30, help_text="Rate limit: messages sent per minute at most; the rest wait their turn."
    )
    # Delivery bookkeeping (alerts/delivery.py): consecutive failures drive the destination's backoff.
    failures = models.PositiveIntegerField(default=0, editable=False)
    retry_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    claimed_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from alerts import egress

        if self.url:
            try:
                egress.target(self.url)  # resolved and checked again at every connect (DNS may change)
            except egress.AddressRefused as exc:
                raise ValidationError({"url": str(exc)}) from None
        if self.min_severity not in SEVERITIES:
            raise ValidationError({"min_severity": f"expected one of {', '.join(SEVERITIES)}"})
        if self.max_per_minute < 1:
            raise ValidationError({"max_per_minute": "at least 1 message a minute"})


class NotifiedFinding(models.Model):
    """What ``destination`` was told about one finding identity: that it is open, or that it ended."""

    destination = models.ForeignKey(Destination, on_delete=models.CASCADE, related_name="notified")
    identity = models.CharField(
        max_length=64,
        help_text="What the destination was told: sha256 of cluster, subject, name, pod UID, kind, start",
    )
    follows = models.CharField(
        max_length=64,
        help_text="The identity of the finding this row follows now: the told one, or the same finding "
        "re-derived with a start that new evidence moved",
    )
    cluster = models.CharField(max_length=63)
    subject = models.CharField(max_length=16)
    subject_name = models.CharField(max_length=300)
    pod_uid = models.CharField(max_length=64, blank=True)
    namespace = models.CharField(max_length=253, blank=True)
    kind = models.CharField(max_length=64)
    severity = models.CharField(max_length=16)
    start = models.DateTimeField()
    open = models.BooleanField(help_text="Told as open and not yet told it ended.")
    first_notified_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["destination", "identity"], name="notified_once_per_destination")
        ]
        indexes = [
            models.Index(fields=["destination", "open"], name="notified_open"),
            models.Index(fields=["destination", "follows"], name="notified_follows"),
            models.Index(fields=["destination", "cluster", "subject_name", "kind"], name="notified_subject"),
        ]


class Delivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        SENT = "sent"
        FAILED = "failed", "failed (gave up)"

    destination = models.ForeignKey(Destination, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=80, help_text="Stable per message: receivers drop repeats by it.")
    event = models.CharField(max_length=16, help_text="new, resolved or test")
    body = models.BinaryField(help_text="The exact bytes POSTed (and signed).")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["destination", "event_id"], name="delivery_once_per_destination")
        ]
        indexes = [
            models.Index(fields=["destination", "status", "id"], name="delivery_queue"),
            models.Index(fields=["destination", "sent_at"], name="delivery_sent"),
        ]
        verbose_name_plural = "deliveries"
