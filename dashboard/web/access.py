"""Who may read what: per-cluster and per-namespace grants through groups, and API bearer tokens.

``Access.for_user(user)`` resolves a user's grants once (one query) and answers every question a view, the
API or the websocket consumer asks: which clusters, which namespaces of a cluster, and how to narrow a
queryset to them. Superusers see everything; an anonymous or inactive user sees nothing.

Tokens: ``python manage.py api_token USERNAME`` prints a token once; only its SHA-256 is stored (a token
is 256 random bits, so a plain hash is as strong as a slow one and costs nothing per request).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from dashboard.models import ApiToken, ClusterGrant
from timelines.models import Cluster

_M = TypeVar("_M", bound=Model)

TOKEN_PREFIX = "plf_"
ALL = None  # in Access.namespaces: every namespace of the cluster


@dataclass
class Access:
    """The clusters and namespaces one user may read. ``namespaces[cluster_id]`` is None for all of them."""

    superuser: bool = False
    namespaces: dict[int, set[str] | None] = field(default_factory=dict)

    @classmethod
    def for_user(cls, user: Any) -> Access:
        if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
            return cls()
        if user.is_superuser:
            return cls(superuser=True)
        grants: dict[int, set[str] | None] = {}
        for cluster_id, namespace in ClusterGrant.objects.filter(group__user=user).values_list(
            "cluster_id", "namespace"
        ):
            if not namespace:
                grants[cluster_id] = ALL
            elif cluster_id not in grants or grants[cluster_id] is not ALL:
                current = grants.setdefault(cluster_id, set())
                assert current is not None
                current.add(namespace)
        return cls(namespaces=grants)

    # --- questions ---------------------------------------------------------------------------------------
    def clusters(self) -> QuerySet[Cluster]:
        qs = Cluster.objects.all()
        return qs if self.superuser else qs.filter(id__in=list(self.namespaces))

    def can_cluster(self, cluster: Cluster) -> bool:
        """Any read access in ``cluster`` (whole cluster or some namespace)."""
        return self.superuser or cluster.id in self.namespaces

    def whole_cluster(self, cluster: Cluster) -> bool:
        """Access to every namespace of ``cluster``, and to what belongs to no namespace."""
        return self.superuser or (cluster.id in self.namespaces and self.namespaces[cluster.id] is ALL)

    def can_namespace(self, cluster: Cluster, namespace: str | None) -> bool:
        if self.whole_cluster(cluster):
            return True
        allowed = self.namespaces.get(cluster.id)
        return bool(allowed) and bool(namespace) and namespace in allowed  # type: ignore[operator]

    def namespace_filter(self, cluster: Cluster) -> set[str] | None:
        """The namespaces of ``cluster`` to restrict to, or None when all are readable."""
        if self.whole_cluster(cluster):
            return None
        return set(self.namespaces.get(cluster.id) or ())

    def q(self, *, cluster_field: str = "cluster", namespace_field: str = "namespace") -> Q:
        """A filter for rows across clusters (e.g. findings): readable cluster and namespace."""
        if self.superuser:
            return Q()
        q = Q(pk__in=[])
        for cluster_id, namespaces in self.namespaces.items():
            if namespaces is ALL:
                q |= Q(**{f"{cluster_field}_id": cluster_id})
            else:
                q |= Q(**{f"{cluster_field}_id": cluster_id, f"{namespace_field}__in": sorted(namespaces)})
        return q

    def restrict(
        self, qs: QuerySet[_M], cluster: Cluster, *, namespace_field: str = "namespace"
    ) -> QuerySet[_M]:
        """``qs`` (already filtered to ``cluster``) narrowed to the readable namespaces."""
        allowed = self.namespace_filter(cluster)
        return qs if allowed is None else qs.filter(**{f"{namespace_field}__in": sorted(allowed)})


def access_for(request: HttpRequest) -> Access:
    """The request user's Access, resolved once per request."""
    cached = getattr(request, "_podlife_access", None)
    if cached is None:
        cached = Access.for_user(getattr(request, "user", None))
        request._podlife_access = cached  # type: ignore[attr-defined]
    return cached


# --- tokens --------------------------------------------------------------------------------------------------
def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(user: Any, *, name: str = "") -> str:
    """A new token for ``user``; returns the token text (shown once: only its hash is kept)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, name=name, prefix=token[:12], key_hash=hash_token(token))
    return token


class BadToken(Exception):
    """The Authorization header is malformed or names no valid token; the message says which."""


def user_from_bearer(header: str) -> Any:
    """The active user of ``Authorization: Bearer TOKEN``; raises BadToken saying what was wrong."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise BadToken("Authorization header must be 'Bearer TOKEN'")
    row = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=hash_token(token.strip()), revoked_at__isnull=True)
        .first()
    )
    if row is None:
        raise BadToken("the bearer token is unknown or revoked")
    if not row.user.is_active:
        raise BadToken("the bearer token's user is inactive")
    now = timezone.now()
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)  # at most one write a minute
    return row.user
