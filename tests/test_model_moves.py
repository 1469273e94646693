"""A model lives with the package that writes it (issue #36): ``CollectorState`` moved from the timelines app
to the collectors app (collectors 0002), ``ClusterGrant`` and ``ApiToken`` to the dashboard app (dashboard
0001), with timelines 0023 taking them out of the timelines app's state. The moves change Django's state
only: the tables keep their names and rows. These tests migrate a database populated at the state before
the moves forward, on whichever database the run uses (SQLite by default, PostgreSQL with DATABASE_URL).

The rows are synthetic: one cluster, one watch's state, one grant, one token, one permission."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from collectors.models import CollectorState
from dashboard.models import ApiToken, ClusterGrant

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_databases]

# The last state before the moves: the three models belong to the timelines app.
BEFORE = [("timelines", "0022_search_substring_indexes"), ("collectors", "0001_initial")]
MOVED = {CollectorState: "collectors", ClusterGrant: "dashboard", ApiToken: "dashboard"}
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader: the one that migrated keeps its old view


def latest() -> list[tuple[str, str | None]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def test_a_database_populated_before_the_move_keeps_its_rows_and_permissions() -> None:
    """GIVEN a database at the migrations before the move, holding a watch's state, a grant, an API token
    and a user permitted to change API tokens (all under the timelines app) WHEN it is migrated forward
    THEN the rows are read through the models' new apps unchanged, the user's permission is now the
    dashboard app's, and no model is left in the timelines app."""
    executor = migrate([*BEFORE, ("dashboard", None)])  # None: none of the dashboard app's migrations
    old = executor.loader.project_state(BEFORE).apps
    with pytest.raises(LookupError):
        old.get_model("collectors", "CollectorState")  # the state really is the one before the move
    cluster = old.get_model("timelines", "Cluster").objects.create(name="c1")
    old.get_model("timelines", "CollectorState").objects.create(
        cluster=cluster, resource="pods", resource_version="41", events_total=7, last_event_at=AT
    )
    group = old.get_model("auth", "Group").objects.create(name="team-a")
    old.get_model("timelines", "ClusterGrant").objects.create(group=group, cluster=cluster, namespace="shop")
    user = old.get_model("auth", "User").objects.create(username="ops")
    old.get_model("timelines", "ApiToken").objects.create(
        user=user, name="ci", prefix="plt_abc", key_hash="ab" * 32
    )
    # Permissions as post_migrate made them when the models were timelines': its content types, its label.
    content_type = old.get_model("contenttypes", "ContentType").objects.get(
        app_label="timelines", model="apitoken"
    )
    permission = old.get_model("auth", "Permission").objects.get(
        content_type=content_type, codename="change_apitoken"
    )
    user.user_permissions.add(permission)

    migrate(latest())
    ContentType.objects.clear_cache()

    state = CollectorState.objects.get()
    assert (
        state.cluster.name,
        state.resource,
        state.resource_version,
        state.events_total,
        state.last_event_at,
    ) == (
        "c1",
        "pods",
        "41",
        7,
        AT,
    )
    grant = ClusterGrant.objects.get()
    assert (grant.group.name, grant.cluster.name, grant.namespace) == ("team-a", "c1", "shop")
    token = ApiToken.objects.get()
    assert (token.user.username, token.name, token.prefix, token.key_hash) == (
        "ops",
        "ci",
        "plt_abc",
        "ab" * 32,
    )
    # The content types moved with their models: the same rows (so the same permissions), new labels.
    assert ContentType.objects.get_for_model(ApiToken).pk == content_type.pk
    assert {ContentType.objects.get_for_model(m).app_label for m in MOVED} == {"collectors", "dashboard"}
    assert not ContentType.objects.filter(
        app_label="timelines", model__in=("collectorstate", "clustergrant", "apitoken")
    ).exists()
    assert User.objects.get(username="ops").has_perm("dashboard.change_apitoken")


def test_the_moved_models_read_the_tables_the_timelines_app_made() -> None:
    """GIVEN the migrated database WHEN each moved model's table is looked up THEN it is the table the
    timelines app created (``timelines_*``), with a column for each of the model's fields, and its unique
    rule still holds."""
    tables = set(connection.introspection.table_names())
    for model, app in MOVED.items():
        assert model._meta.app_label == app
        assert model._meta.db_table == f"timelines_{model._meta.model_name}"
        assert model._meta.db_table in tables
        with connection.cursor() as cursor:
            columns = {
                c.name for c in connection.introspection.get_table_description(cursor, model._meta.db_table)
            }
        assert columns == {f.column for f in model._meta.concrete_fields}
    assert "collector_state_per_resource" in constraint_names(CollectorState)
    assert "grant_unique_per_scope" in constraint_names(ClusterGrant)


def constraint_names(model: type[CollectorState] | type[ClusterGrant]) -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.get_constraints(cursor, model._meta.db_table))


def test_the_unique_rule_of_a_moved_table_still_refuses_a_second_row() -> None:
    """GIVEN a watch's state row WHEN a second row for the same (cluster, resource) is inserted THEN the
    database refuses it: the constraint made under the timelines app is still there."""
    from timelines.models import Cluster

    cluster = Cluster.objects.create(name="c1")
    CollectorState.objects.create(cluster=cluster, resource="pods")
    with pytest.raises(IntegrityError), transaction.atomic():
        CollectorState.objects.create(cluster=cluster, resource="pods")


def test_the_models_and_the_migrations_agree() -> None:
    """GIVEN the models WHEN makemigrations compares them with the migrations THEN nothing is left to
    migrate (the state-only moves describe the models exactly)."""
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
