"""In CI (``PODLIFE_CI=1``, set by ``.ci/run``) a skipped test fails, unless its reason is allowed here.

The README promises that ``make test`` with PostgreSQL and Redis runs every test; a test that skips
because something it needs is missing (Redis, kubectl, Chromium, a Python package) would turn that
promise into a silent "passed". Outside CI a skip stays a skip, printed with its reason (``-ra``).

``tests/conftest.py`` imports the hooks below; ``tests/test_ci_skips.py`` runs them on a small suite.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

# A reason (or the start of one) that CI may skip with -> why that skip is expected in CI. Empty: CI
# skips nothing. (The SQLite pass of `make test` deselects the PostgreSQL-only tests rather than skip them.)
CI_ALLOWED_SKIPS: dict[str, str] = {}


def in_ci() -> bool:
    return os.environ.get("PODLIFE_CI") == "1"


def embedded_run() -> bool:
    """CI's first ``make test`` (``.ci/run``): exactly as a newcomer runs it, on the embedded default (SQLite,
    in-process channel layer), declared with ``PODLIFE_CI_EMBEDDED=1``. The PostgreSQL- and Redis-only
    tests cannot run there and run in CI's second pass: they are deselected (counted), not skipped, so
    every other skip still fails. Declaring it while DATABASE_URL or REDIS_URL is set is an error: the
    second pass must never lose its PostgreSQL and Redis tests this way."""
    if os.environ.get("PODLIFE_CI_EMBEDDED") != "1":
        return False
    given = [name for name in ("DATABASE_URL", "REDIS_URL") if os.environ.get(name)]
    if given:
        raise pytest.UsageError(
            f"PODLIFE_CI_EMBEDDED=1 is the run on the embedded default, but {' and '.join(given)} "
            "is set: unset it, or unset PODLIFE_CI_EMBEDDED"
        )
    return True


def deselect_server_only(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In CI's embedded run (``embedded_run``), drop the ``postgres`` and ``redis`` tests from ``items``."""
    if not (in_ci() and embedded_run()):
        return
    dropped = [i for i in items if "postgres" in i.keywords or "redis" in i.keywords]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if "postgres" not in i.keywords and "redis" not in i.keywords]


def skip_reason(longrepr: Any) -> str:
    """The reason of a skip report (``pytest.skip("...")``, a ``skip``/``skipif`` mark, ``importorskip``)."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
    else:
        reason = str(getattr(longrepr, "longrepr", longrepr))
    return reason.removeprefix("Skipped: ")


def allowed_in_ci(reason: str) -> bool:
    return any(reason.startswith(allowed) for allowed in CI_ALLOWED_SKIPS)


def _refuse(report: pytest.TestReport | pytest.CollectReport, where: str) -> None:
    reason = skip_reason(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"{where} skipped in CI: {reason}\n"
        "CI (PODLIFE_CI=1) runs every test the README promises: provide what the test needs, or add the "
        "reason to CI_ALLOWED_SKIPS in tests/ci_skips.py with why CI may skip it."
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if (
        in_ci()
        and report.skipped
        and not hasattr(report, "wasxfail")  # an expected failure is reported as a skip too
        and not allowed_in_ci(skip_reason(report.longrepr))
    ):
        _refuse(report, item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()
    if in_ci() and report.skipped and not allowed_in_ci(skip_reason(report.longrepr)):
        _refuse(report, collector.nodeid)  # a whole module skipped (pytest.importorskip at the top, ...)
