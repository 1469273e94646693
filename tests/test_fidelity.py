"""The fidelity runner (tools/fidelity.py, make fidelity) on a small SYNTHETIC fact file: a true fact holds, a
false one fails and is named, a file whose ingest crashes is reported (its facts fail) without ending the
run, and the ratchet fails on a drop and records a rise. The fact file is written here; the one log it lists
is a real one copied from the corpus (kueue#4669, tests/fixtures/real/SOURCES.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real" / "kubelet" / "kueue-4669-kind-1.31-v3.journal"
UID = "8bb7de3e-72f0-4102-adbd-53897040775e"  # pod-e2e-dx5dg/group-0 in that log

# Synthetic facts (not part of the corpus): what the kueue log's lines say, one of them false on purpose.
FACTS = f"""
[[file]]
path = "kueue.journal"
command = "ingest_kubelet_log"
args = ["--node", "kind-worker", "--year", "2025"]

[[file.fact]]
says = "TRUE: the pod group-0 has a timeline"
pod = "ref:pod-e2e-dx5dg/group-0"
check = "pod_exists"

[[file.fact]]
says = "TRUE: the kubelet killed its container at 10:21:22.52 (KillingContainer, grace 2 s)"
pod = "uid:{UID}"
check = "marker"
match = "kill"
at = "2025-03-18T10:21:22.52Z"
tol = 0.01

[[file.fact]]
says = "FALSE: the pod was evicted"
pod = "uid:{UID}"
check = "marker"
match = "evict"

[[file.fact]]
says = "FALSE: no pod named pod-e2e-dx5dg/group-0"
pod = "ref:pod-e2e-dx5dg/group-0"
check = "no_pod"

[[file]]
path = "crash-me.journal"
command = "ingest_kubelet_log"
args = ["--node", "n1", "--year", "2025"]

[[file.fact]]
says = "CRASHING: nothing crashes"
check = "no_crash"
"""

# Runs the runner in a process of its own (it sets up Django on a scratch database), with the ingest of any
# file named crash-me made to raise, as a parser bug would.
DRIVER = """
import sys
sys.path.insert(0, {root!r})
import django.core.management as m
real = m.call_command
def call_command(name, *args, **kw):
    if any("crash-me" in str(a) for a in args):
        raise RuntimeError("synthetic parser bug")
    return real(name, *args, **kw)
m.call_command = call_command
sys.path.insert(0, {tools!r})
import fidelity
sys.exit(fidelity.main(sys.argv[1:]))
"""


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(root=str(ROOT), tools=str(ROOT / "tools")), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(driver), "--facts", f"synthetic={tmp_path / 'facts.toml'}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    shutil.copy(REAL, tmp_path / "kueue.journal")
    (tmp_path / "crash-me.journal").write_text("synthetic: never read\n", encoding="utf-8")
    (tmp_path / "facts.toml").write_text(FACTS, encoding="utf-8")
    return tmp_path


def test_true_facts_hold_false_ones_fail_a_crash_is_reported(corpus: Path) -> None:
    score = corpus / "score"
    score.write_text("held 1 of 5\n", encoding="utf-8")
    run = _run(corpus, "--score-file", str(score))
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "synthetic: 2/5 facts hold" in out
    assert "total: 2/5 facts hold" in out
    failing = out.split("failing facts:", 1)[1]
    assert "FALSE: the pod was evicted" in failing
    assert "FALSE: no pod named" in failing
    assert "TRUE:" not in failing
    assert "CRASHING: nothing crashes" in failing
    assert "CRASHED: synthetic/crash-me.journal" in out and "synthetic parser bug" in out
    assert "more than the 1 recorded" in out
    assert score.read_text(encoding="utf-8") == "held 1 of 5\n"  # no --update: unchanged


def test_the_ratchet_fails_on_a_drop_and_records_a_rise(corpus: Path) -> None:
    score = corpus / "score"
    score.write_text("held 3 of 5\n", encoding="utf-8")
    run = _run(corpus, "--score-file", str(score), "--update")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "fewer than the 3 recorded" in run.stdout
    assert "held 3 of 5" in score.read_text(encoding="utf-8")  # a drop is never recorded

    score.write_text("held 1 of 4\n", encoding="utf-8")
    run = _run(corpus, "--score-file", str(score), "--update")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "held 2 of 5" in score.read_text(encoding="utf-8")


def test_a_fact_file_off_the_format_is_named(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    import fidelity

    (tmp_path / "x.log").write_text("synthetic\n", encoding="utf-8")
    bad = tmp_path / "facts.toml"
    bad.write_text(
        '[[file]]\npath = "x.log"\ncommand = "ingest_kubelet_log"\n[[file.fact]]\nsays = "s"\ncheck = "nope"\n',
        encoding="utf-8",
    )
    with pytest.raises(fidelity.FactError, match=r"x\.log fact #1: `check` 'nope' is not one of"):
        fidelity.load("synthetic", bad)
