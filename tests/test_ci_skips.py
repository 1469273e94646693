"""The CI rule of tests/ci_skips.py on a small suite run by pytest in a subprocess: with PODLIFE_CI=1 a
skip fails unless its reason is allowed; without it a skip stays a skip with its reason printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SUITE = {
    "conftest.py": """
from tests import ci_skips
from tests.ci_skips import pytest_make_collect_report, pytest_runtest_makereport

ci_skips.CI_ALLOWED_SKIPS["known gap"] = "a reason this suite allows"
""",
    "test_cases.py": """
import pytest

def test_runs():
    assert True

def test_skips_inside():
    pytest.skip("kubectl not installed")

@pytest.mark.skipif(True, reason="needs Redis: REDIS_URL is not set")
def test_skipped_by_mark():
    pass

@pytest.fixture
def missing_tool():
    pytest.skip("/usr/bin/chromium is absent")

def test_skipped_by_fixture(missing_tool):
    pass

def test_allowed():
    pytest.skip("known gap: expected here")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_expected_failure():
    assert False
""",
    "test_module_skip.py": """
import pytest

pytest.importorskip("a_module_that_is_not_installed")

def test_never_collected():
    pass
""",
}


def run_suite(tmp_path: Path, ci: bool) -> tuple[dict[str, str], str]:
    for name, text in SUITE.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "PODLIFE_CI"}
    env["PYTHONPATH"] = str(ROOT)
    if ci:
        env["PODLIFE_CI"] = "1"
    args = ["-p", "no:django", "-p", "no:cacheprovider", "-rA", "-v", "--continue-on-collection-errors"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *args, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = run.stdout
    outcomes = dict(re.findall(r"^test_cases\.py::(\w+) (PASSED|FAILED|SKIPPED|XFAIL|ERROR)", out, re.M))
    module = re.search(r"^(SKIPPED|ERROR) (?:\[1\] )?test_module_skip\.py", out, re.M)
    outcomes["test_module_skip.py"] = module[1] if module else "not reported"
    return outcomes, out


def test_outside_ci_a_skip_stays_a_skip_with_its_reason(tmp_path: Path) -> None:
    outcomes, out = run_suite(tmp_path, ci=False)
    assert outcomes == {
        "test_runs": "PASSED",
        "test_skips_inside": "SKIPPED",
        "test_skipped_by_mark": "SKIPPED",
        "test_skipped_by_fixture": "SKIPPED",
        "test_allowed": "SKIPPED",
        "test_expected_failure": "XFAIL",
        "test_module_skip.py": "SKIPPED",
    }, out
    for reason in (
        "kubectl not installed",
        "needs Redis: REDIS_URL is not set",
        "/usr/bin/chromium is absent",
    ):
        assert re.search(rf"^SKIPPED \[1\] .*: {re.escape(reason)}$", out, re.M), (reason, out)


def test_in_ci_a_skip_fails_naming_its_reason_unless_allowed(tmp_path: Path) -> None:
    outcomes, out = run_suite(tmp_path, ci=True)
    assert outcomes == {
        "test_runs": "PASSED",
        "test_skips_inside": "FAILED",
        "test_skipped_by_mark": "ERROR",  # a mark or a fixture skips at set-up: a failed set-up
        "test_skipped_by_fixture": "ERROR",
        "test_allowed": "SKIPPED",
        "test_expected_failure": "XFAIL",
        "test_module_skip.py": "ERROR",  # the module cannot be collected
    }, out
    for reason in (
        "test_cases.py::test_skips_inside skipped in CI: kubectl not installed",
        "test_cases.py::test_skipped_by_mark skipped in CI: needs Redis: REDIS_URL is not set",
        "test_cases.py::test_skipped_by_fixture skipped in CI: /usr/bin/chromium is absent",
        "test_module_skip.py skipped in CI: could not import 'a_module_that_is_not_installed'",
    ):
        assert reason in out, (reason, out)
    assert "add the reason to CI_ALLOWED_SKIPS in tests/ci_skips.py" in out
    assert re.search(r"^SKIPPED \[1\] .*: known gap: expected here$", out, re.M), out


@pytest.mark.parametrize("reason", ["", "known gap"])
def test_the_allow_list_matches_reasons_by_their_start(reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import ci_skips

    monkeypatch.setattr(ci_skips, "CI_ALLOWED_SKIPS", {"known gap": "why"})
    assert ci_skips.allowed_in_ci(f"{reason}: detail") is (reason == "known gap")


EMBEDDED = {
    "conftest.py": """
import pytest
from tests.ci_skips import deselect_server_only, pytest_make_collect_report, pytest_runtest_makereport

def pytest_configure(config):
    config.addinivalue_line("markers", "postgres: needs PostgreSQL")
    config.addinivalue_line("markers", "redis: needs Redis")

def pytest_collection_modifyitems(config, items):
    deselect_server_only(config, items)
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: DATABASE_URL is not a postgres:// URL"))
""",
    "test_cases.py": """
import pytest

def test_runs():
    pass

@pytest.mark.postgres
def test_on_postgres():
    pass

@pytest.mark.redis
def test_on_redis():
    pass

def test_skips():
    pytest.skip("chromium is absent")
""",
}


def _embedded(tmp_path: Path, **env_more: str) -> subprocess.CompletedProcess[str]:
    for name, text in EMBEDDED.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(PYTHONPATH=str(ROOT), PODLIFE_CI="1", PODLIFE_CI_EMBEDDED="1", **env_more)
    args = ["-p", "no:django", "-p", "no:cacheprovider", "-rA", "-v"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cis_embedded_run_deselects_the_server_only_tests_and_still_fails_on_any_skip(tmp_path: Path) -> None:
    """GIVEN CI's run on the embedded default (.ci/run: PODLIFE_CI=1 PODLIFE_CI_EMBEDDED=1, no DATABASE_URL
    or REDIS_URL) THEN the PostgreSQL- and Redis-only tests are deselected (they run in CI's second pass),
    not skipped, and any other skip still fails the run."""
    run = _embedded(tmp_path)
    assert "2 deselected" in run.stdout, run.stdout
    assert "test_on_postgres" not in run.stdout and "test_on_redis" not in run.stdout
    assert re.search(r"^test_cases\.py::test_runs PASSED", run.stdout, re.M), run.stdout
    assert "test_cases.py::test_skips skipped in CI: chromium is absent" in run.stdout
    assert run.returncode == 1


def test_the_embedded_run_refuses_a_database_url(tmp_path: Path) -> None:
    """CI's second pass must never lose its PostgreSQL tests to the embedded run's deselection."""
    run = _embedded(tmp_path, DATABASE_URL="postgres://x@127.0.0.1/db")
    assert run.returncode != 0
    assert "PODLIFE_CI_EMBEDDED=1 is the run on the embedded default, but DATABASE_URL is set" in (
        run.stdout + run.stderr
    )
