"""The pytest plugin of ``make mutation`` (tools/mutation.py): loaded into mutmut's test runs only
(``[tool.mutmut] pytest_add_cli_args`` in pyproject.toml), never into ``make test``.

- Each run has its own SQLite test database. mutmut runs a mutant's tests in a process forked for it, two
  or more at once, and each pytest-django session creates, then drops, its test database: with the one
  name the settings give, one mutant's session would drop the database another is reading.
- Hypothesis runs derandomized, without its example database and without deadlines: a mutant's verdict
  does not depend on the run's luck, on an example a previous mutant failed on, nor on the slowdown of
  mutmut's trampolines (a missed deadline would count as a killed mutant). A property test tries at most
  ``MAX_EXAMPLES`` examples: a survivor runs every test that reaches its function, and at their own
  150 to 400 examples the property tests were three quarters of that time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

MAX_EXAMPLES = 10

settings.register_profile("mutation", derandomize=True, database=None, deadline=None, print_blob=False)
settings.load_profile("mutation")


def _test_database(pid: int) -> Path:
    return Path.cwd() / f"podlife-test-mutant-{pid}.sqlite3"


def pytest_configure(config: pytest.Config) -> None:
    from django.conf import settings as django_settings

    default = django_settings.DATABASES["default"]
    if default["ENGINE"] == "django.db.backends.sqlite3":
        # The connection's settings are this very dict (Django's ConnectionHandler keeps it), so the
        # name holds for the forked process whose session starts now.
        default.setdefault("TEST", {})["NAME"] = str(_test_database(os.getpid()))


def pytest_unconfigure(config: pytest.Config) -> None:
    # pytest-django drops the database at the session's end; what a killed run left is removed here
    # when the same process runs again, and by tools/mutation.py after mutmut's run.
    for leftover in Path.cwd().glob(f"{_test_database(os.getpid()).name}*"):
        leftover.unlink(missing_ok=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        test = getattr(item, "obj", None)
        test = getattr(test, "__func__", test)  # a method of a test class
        # Where Hypothesis keeps a test's @settings and reads them at each call (hypothesis/core.py).
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is not None and current.max_examples > MAX_EXAMPLES:
            test._hypothesis_internal_use_settings = settings(current, max_examples=MAX_EXAMPLES)  # type: ignore[union-attr]
