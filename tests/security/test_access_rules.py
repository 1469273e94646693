"""The access checks (dashboard/web/access.py) as rules, asked of the module itself: who reads nothing,
how grants add up, what a filter across clusters lets through, what a bearer token must be, and what a
request costs (docs/security.md: "exactly what its user can read"; a token is "shown once, stored as
SHA-256" and refused after its user's deactivation). The routes that use them are tested in
tests/web/test_refusals.py and tests/security/; these rules held survivors of ``make mutation``."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User
from django.test import RequestFactory

from dashboard.models import ApiToken, ClusterGrant
from dashboard.web.access import Access, BadToken, access_for, create_token, user_from_bearer
from timelines.models import Cluster, Pod

pytestmark = pytest.mark.django_db

MALFORMED = "Authorization header must be 'Bearer TOKEN'"
UNKNOWN = "the bearer token is unknown or revoked"
INACTIVE = "the bearer token's user is inactive"


def grant(user: User, cluster: Cluster, namespace: str = "") -> None:
    """A group of its own for each grant: the user's grants are the union of its groups'."""
    group = Group.objects.create(name=f"g-{user.username}-{cluster.name}-{namespace or 'all'}")
    user.groups.add(group)
    ClusterGrant.objects.create(group=group, cluster=cluster, namespace=namespace)


def pods(*where: tuple[Cluster, str]) -> None:
    for n, (cluster, namespace) in enumerate(where):
        Pod.objects.create(cluster=cluster, uid=f"uid-{n}", namespace=namespace, name=f"p{n}")


def visible(access: Access) -> set[tuple[str, str]]:
    return {(p.cluster.name, p.namespace) for p in Pod.objects.filter(access.q()).select_related("cluster")}


@pytest.fixture
def clusters() -> tuple[Cluster, Cluster, Cluster]:
    a, b, c = (Cluster.objects.create(name=name) for name in ("a", "b", "c"))
    pods((a, "x"), (a, "y"), (b, "x"), (b, "y"), (c, "x"))
    return a, b, c


# --- who reads nothing -------------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["no user", "anonymous", "inactive superuser", "inactive granted user"])
def test_only_an_active_authenticated_user_reads_anything(
    who: str, clusters: tuple[Cluster, Cluster, Cluster]
) -> None:
    """GIVEN no user (a request before authentication), the anonymous user, or a deactivated account
    (superuser, or holding a whole-cluster grant) THEN it reads no cluster, no namespace, no row."""
    a = clusters[0]
    user: Any
    if who == "no user":
        user = None
    elif who == "anonymous":
        user = AnonymousUser()
    elif who == "inactive superuser":
        user = User.objects.create_superuser("root", "r@example.org", "pw", is_active=False)
    else:
        user = User.objects.create_user("gone", is_active=False)
        grant(user, a)
    access = Access.for_user(user)
    assert not access.superuser
    assert list(access.clusters()) == []
    assert not access.can_cluster(a) and not access.can_namespace(a, "x")
    assert visible(access) == set()


# --- how grants add up -----------------------------------------------------------------------------------


def test_namespace_grants_in_one_cluster_add_up(clusters: tuple[Cluster, Cluster, Cluster]) -> None:
    a = clusters[0]
    user = User.objects.create_user("two")
    grant(user, a, "x")
    grant(user, a, "y")
    access = Access.for_user(user)
    assert access.namespace_filter(a) == {"x", "y"}
    assert not access.whole_cluster(a)


@pytest.mark.parametrize("first", ["whole cluster", "namespace"])
def test_a_whole_cluster_grant_wins_over_a_namespace_grant_in_either_order(
    first: str, clusters: tuple[Cluster, Cluster, Cluster]
) -> None:
    a = clusters[0]
    user = User.objects.create_user("both")
    for namespace in ("", "x") if first == "whole cluster" else ("x", ""):
        grant(user, a, namespace)
    access = Access.for_user(user)
    assert access.whole_cluster(a)
    assert access.namespace_filter(a) is None
    assert access.can_namespace(a, "y") and access.can_namespace(a, "")


def test_only_granted_clusters_are_listed(clusters: tuple[Cluster, Cluster, Cluster]) -> None:
    a, b, _ = clusters
    user = User.objects.create_user("one")
    grant(user, b, "x")
    assert list(Access.for_user(user).clusters()) == [b]
    assert not Access.for_user(user).can_cluster(a)


# --- filters ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("whole", ["a", "b"])
def test_the_filter_across_clusters_lets_through_each_grant_and_nothing_else(
    whole: str, clusters: tuple[Cluster, Cluster, Cluster]
) -> None:
    """GIVEN one cluster granted whole, namespace x of the other, nothing of cluster c THEN rows across the
    clusters are: every row of the first, the other's rows in x, none of c (each grant adds rows; none
    narrows or replaces another, whichever cluster comes first)."""
    a, b, _ = clusters
    named = {"a": a, "b": b}
    partly = "b" if whole == "a" else "a"
    user = User.objects.create_user("mixed")
    grant(user, named[whole])
    grant(user, named[partly], "x")
    assert visible(Access.for_user(user)) == {(whole, "x"), (whole, "y"), (partly, "x")}
    only_b = User.objects.create_user("only-b")
    grant(only_b, b, "x")
    assert visible(Access.for_user(only_b)) == {("b", "x")}
    only_a = User.objects.create_user("only-a")
    grant(only_a, a)
    assert visible(Access.for_user(only_a)) == {("a", "x"), ("a", "y")}
    assert visible(Access(superuser=True)) == {("a", "x"), ("a", "y"), ("b", "x"), ("b", "y"), ("c", "x")}


def test_restrict_narrows_a_clusters_rows_to_the_granted_namespaces(
    clusters: tuple[Cluster, Cluster, Cluster],
) -> None:
    a = clusters[0]
    reader = User.objects.create_user("reader")
    grant(reader, a, "y")
    in_a = Pod.objects.filter(cluster=a)
    assert {p.namespace for p in Access.for_user(reader).restrict(in_a, a)} == {"y"}
    owner = User.objects.create_user("owner")
    grant(owner, a)
    assert {p.namespace for p in Access.for_user(owner).restrict(in_a, a)} == {"x", "y"}


def test_a_request_resolves_its_access_once(
    clusters: tuple[Cluster, Cluster, Cluster], django_assert_num_queries: Any
) -> None:
    """The views, the API and the consumer ask many questions of one request: its grants are read once."""
    user = User.objects.create_user("asker")
    grant(user, clusters[0], "x")
    request = RequestFactory().get("/")
    request.user = user
    with django_assert_num_queries(1):
        first = access_for(request)
    with django_assert_num_queries(0):
        assert access_for(request) is first
    assert first.namespace_filter(clusters[0]) == {"x"}


# --- tokens ----------------------------------------------------------------------------------------------


def test_a_token_is_256_random_bits_shown_once_and_stored_as_its_sha256() -> None:
    user = User.objects.create_user("script")
    token = create_token(user, name="nightly export")
    body = token.removeprefix("plf_")
    assert token.startswith("plf_") and len(body) == 43  # 32 bytes in unpadded base64url (RFC 4648 §5)
    row = ApiToken.objects.get()
    assert row.key_hash == hashlib.sha256(token.encode()).hexdigest()
    assert row.name == "nightly export"
    assert row.prefix == token[:12]  # what the admin shows to tell tokens apart
    assert body not in str(ApiToken.objects.values().get())  # the token itself is nowhere


def test_a_bearer_token_names_its_active_user() -> None:
    user = User.objects.create_user("script")
    token = create_token(user)
    create_token(User.objects.create_user("other"))
    assert user_from_bearer(f"Bearer {token}") == user
    # RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token; the scheme is case-insensitive (RFC 9110 §11.1)
    assert user_from_bearer(f"bearer  {token}") == user


@pytest.mark.parametrize("header", ["Basic dXNlcjpwdw==", "Bearer", "Bearer ", "Bearer   ", "plf_x"])
def test_a_malformed_authorization_header_is_refused_saying_so(header: str) -> None:
    """The message is the 401's body the API and the export send a script (dashboard/web/api/views.py)."""
    create_token(User.objects.create_user("script"))
    with pytest.raises(BadToken) as refused:
        user_from_bearer(header)
    assert str(refused.value) == MALFORMED


def test_an_unknown_or_revoked_token_is_refused_while_others_are_valid() -> None:
    user = User.objects.create_user("script")
    valid = create_token(user)
    revoked = create_token(user)
    ApiToken.objects.filter(key_hash=hashlib.sha256(revoked.encode()).hexdigest()).update(
        revoked_at=datetime(2026, 12, 1, tzinfo=UTC)
    )
    for token in (revoked, valid + "x", "plf_" + "A" * 43):
        with pytest.raises(BadToken) as refused:
            user_from_bearer(f"Bearer {token}")
        assert str(refused.value) == UNKNOWN
    assert user_from_bearer(f"Bearer {valid}") == user


def test_a_token_of_a_deactivated_user_is_refused() -> None:
    user = User.objects.create_user("left")
    token = create_token(user)
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(BadToken) as refused:
        user_from_bearer(f"Bearer {token}")
    assert str(refused.value) == INACTIVE


def test_a_tokens_last_use_is_recorded_at_most_once_a_minute_in_one_query(
    monkeypatch: pytest.MonkeyPatch, django_assert_num_queries: Any
) -> None:
    """GIVEN a token WHEN it is used, used again 30 s later, then 2 minutes after its first use THEN its
    last use reads the first time, then still the first, then the third; a use that writes nothing costs
    one query (the token with its user)."""
    token = create_token(User.objects.create_user("script"))
    first = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    for at, recorded in ((0, 0), (30, 0), (120, 120)):
        monkeypatch.setattr("django.utils.timezone.now", lambda at=at: first + timedelta(seconds=at))
        if at == 30:
            with django_assert_num_queries(1):
                user_from_bearer(f"Bearer {token}")
        else:
            user_from_bearer(f"Bearer {token}")
        assert ApiToken.objects.get().last_used_at == first + timedelta(seconds=recorded)
