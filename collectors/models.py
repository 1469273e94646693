"""The collectors' tables: the per-cluster ingest tokens that log shippers and OTLP exporters present, and
each watch's and kubelet pull's own row (``CollectorState``, written by ``collectors/kube/state.py`` only;
the read side shows it on pages and ``/metrics``)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from django.db import models
from django.utils import timezone

from timelines.models import Cluster

TOKEN_PREFIX: Final = "pli_"  # "podlife ingest": tells an ingest token from a user's API token at a glance
_KEY_ID_BYTES: Final = 6
# Compared against when a token names no stored key, so an unknown key id costs the same hash and compare.
_DUMMY_HASH: Final = hashlib.sha256(b"podlife: no such ingest token").hexdigest()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class BadIngestToken(Exception):
    """The Authorization header is missing, malformed or names no valid token; the message says which."""


class IngestToken(models.Model):
    """A bearer token that lets a shipper write one cluster's kubelet logs and spans.

    Tokens look like ``pli_<key id>_<secret>``. The key id is stored in clear to find the row; only the
    SHA-256 of the whole token is stored, and it is compared in constant time. The token itself is shown
    once, when it is made (``manage.py ingest_token CLUSTER``, or the admin).
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="ingest_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="What uses it, e.g. otel-collector.")
    key_id = models.CharField(max_length=32, unique=True, editable=False)
    key_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "-created_at"]

    def __str__(self) -> str:
        return f"{self.cluster} {TOKEN_PREFIX}{self.key_id}_…"

    @classmethod
    def issue(cls, cluster: Cluster, *, name: str = "") -> tuple[IngestToken, str]:
        """A new token for ``cluster``: the saved row and the token text (shown once, never stored)."""
        key_id = secrets.token_hex(_KEY_ID_BYTES)
        token = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        row = cls.objects.create(cluster=cluster, name=name, key_id=key_id, key_hash=hash_token(token))
        return row, token

    @classmethod
    def authenticate(cls, header: str | None) -> IngestToken:
        """The active token of an ``Authorization: Bearer TOKEN`` header; raises BadIngestToken."""
        if not header:
            raise BadIngestToken("missing Authorization header: expected 'Bearer <ingest token>'")
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise BadIngestToken("Authorization header must be 'Bearer <ingest token>'")
        key_id = token[len(TOKEN_PREFIX) :].split("_", 1)[0] if token.startswith(TOKEN_PREFIX) else ""
        row = cls.objects.select_related("cluster").filter(key_id=key_id).first() if key_id else None
        stored = row.key_hash if row is not None else _DUMMY_HASH
        if not hmac.compare_digest(stored, hash_token(token)) or row is None:
            raise BadIngestToken(
                "the ingest token is unknown (make one with: manage.py ingest_token CLUSTER)"
            )
        if row.revoked_at is not None:
            raise BadIngestToken("the ingest token was revoked")
        now = timezone.now()
        if row.last_used_at is None or (now - row.last_used_at).total_seconds() > 60:
            cls.objects.filter(pk=row.pk).update(last_used_at=now)  # at most one write a minute
        return row


class CollectorState(models.Model):
    """Where the watch of one (cluster, resource) stands, and how healthy it is."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="collector_states")
    resource = models.CharField(max_length=64)
    resource_version = models.CharField(max_length=64, blank=True)
    lease_owner = models.CharField(max_length=128, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_step_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    events_total = models.BigIntegerField(default=0)
    events_per_second = models.FloatField(default=0.0, help_text="Over the last step.")
    errors_total = models.BigIntegerField(default=0)
    relists_total = models.BigIntegerField(default=0)
    note = models.CharField(max_length=300, blank=True, help_text="e.g. why a kubelet pull is skipped")

    class Meta:
        db_table = "timelines_collectorstate"  # made by the timelines app, which held it until issue #36
        constraints = [
            models.UniqueConstraint(fields=["cluster", "resource"], name="collector_state_per_resource")
        ]
        ordering = ["cluster", "resource"]
