"""Shared fixtures. Tests that need PostgreSQL or Redis skip with a reason only when the variables are unset;
in CI (PODLIFE_CI=1) a skip fails unless tests/ci_skips.py allows its reason."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.ci_skips import deselect_server_only, pytest_make_collect_report, pytest_runtest_makereport

__all__ = ["pytest_collection_modifyitems", "pytest_make_collect_report", "pytest_runtest_makereport"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    deselect_server_only(config, items)  # CI's run on the embedded default (tests/ci_skips.py)
    database_url = os.environ.get("DATABASE_URL", "")
    is_postgres = database_url.startswith(("postgres://", "postgresql://", "pgsql://"))
    for item in items:
        if "postgres" in item.keywords and not is_postgres:
            item.add_marker(
                pytest.mark.skip(reason="needs PostgreSQL: DATABASE_URL is not a postgres:// URL")
            )
        if "redis" in item.keywords and not os.environ.get("REDIS_URL"):
            item.add_marker(pytest.mark.skip(reason="needs Redis: REDIS_URL is not set"))


@pytest.fixture(autouse=True, scope="session")
def _celery_conf_read_first() -> None:
    """The Celery app reads Django's settings once, on first use. Read them before any test overrides a
    setting (say ``CELERY_TASK_ALWAYS_EAGER``), or the app would keep that test's value for the whole run;
    a test that wants eager tasks sets ``app.conf`` for itself (tests/export/test_views.py)."""
    from podlife_site.celery import app

    app.conf.get("task_always_eager")  # the first read loads the settings as they are now


@pytest.fixture(autouse=True)
def _podlife_is_the_current_celery_app() -> Iterator[None]:
    """The product's tasks are shared tasks: they are sent through Celery's current app. A test that makes
    another app (``Celery(name)`` makes itself current unless told not to) must not leave it current for
    every later test of the process (in random order, the queue tests read empty queues)."""
    from podlife_site.celery import app

    yield
    app.set_current()


@pytest.fixture(autouse=True)
def _no_shared_reads_across_tests() -> None:
    """The timeline API shares one read among identical requests for 2 s (dashboard/web/shared_reads.py);
    a test's database is new, but on SQLite its row ids are the last test's, so an answer must not outlive
    its test."""
    from dashboard.web.shared_reads import timeline_reads

    timeline_reads.clear()


@pytest.fixture(autouse=True)
def _no_dictionaries_across_tests() -> Iterator[None]:
    """The store knows the stored zstd dictionaries of each cluster's kind (timelines/payloads.py); a
    test's database is new (its dictionaries gone, its cluster ids maybe the last test's), so no test
    starts with another test's. On PostgreSQL they are trained on a thread of their own: a test ends
    once that thread stored what its batches gave it, before its database is emptied."""
    from timelines import payloads

    payloads.forget()
    yield
    payloads.wait_trained()


@pytest.fixture(autouse=True)
def _no_store_process_across_tests() -> Iterator[None]:
    """The watch stores its batches through a process of its own (timelines/store_process.py), which keeps
    its connections and the dictionaries it knows; a test that started one ends it, so its connections do
    not outlive the test's database and no test starts with another test's (as ``payloads.forget``)."""
    from timelines import store_process

    yield
    store_process.close_shared()


@pytest.fixture(autouse=True)
def _no_live_sharing_across_tests() -> None:
    """A web process's live sockets share one hub per group and one health poll per cluster
    (dashboard/web/fanout.py), kept per event loop; no test starts with another test's."""
    from dashboard.web import fanout

    fanout.clear()


@pytest.fixture
def derive_stage_off() -> Iterator[None]:
    """No derive stage on the store's signal: where tasks run eagerly it would fold (and delete) the dirty
    batches at once, before a test reads them."""
    from timelines import tasks
    from timelines.signals import DERIVE_RECEIVER, observations_stored

    observations_stored.disconnect(dispatch_uid=DERIVE_RECEIVER)
    yield
    observations_stored.connect(tasks.on_observations_stored, dispatch_uid=DERIVE_RECEIVER)


@pytest.fixture
def outcomes() -> Iterator[Counter[str]]:
    """Where each example of a property test went (which assert it reached): the test tallies and checks
    it; printed at the end (``pytest -s``)."""
    counter: Counter[str] = Counter()
    yield counter
    total = sum(counter.values())
    print(", ".join(f"{n}/{total} {what}" for what, n in counter.most_common()))
