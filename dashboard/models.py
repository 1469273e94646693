"""The read side's tables: who may read what (``ClusterGrant``) and the API's bearer tokens (``ApiToken``),
written by ``dashboard/web/access.py``, the admin and ``manage.py api_token``. The read side writes none of
the pipeline's tables."""

from __future__ import annotations

from django.db import models

from timelines.models import Cluster


class ClusterGrant(models.Model):
    """Read access for a group: a whole cluster (``namespace`` blank) or one namespace of it.

    Superusers see everything; everyone else sees the union of their groups' grants (dashboard/web/access.py).
    """

    group = models.ForeignKey("auth.Group", on_delete=models.CASCADE, related_name="cluster_grants")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="grants")
    namespace = models.CharField(max_length=253, blank=True, help_text="Blank grants every namespace.")

    class Meta:
        db_table = "timelines_clustergrant"  # made by the timelines app, which held it until issue #36
        constraints = [
            models.UniqueConstraint(fields=["group", "cluster", "namespace"], name="grant_unique_per_scope")
        ]
        ordering = ["cluster", "namespace"]

    def __str__(self) -> str:
        return f"{self.group} → {self.cluster}/{self.namespace or '*'}"


class ApiToken(models.Model):
    """A bearer token for scripts. Only the SHA-256 of the token is stored; it is shown once, at creation."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "timelines_apitoken"  # made by the timelines app, which held it until issue #36
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"
