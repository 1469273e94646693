"""The ratchet of ``make mutation`` (tools/mutation.py): a score recorded for one sampled line is compared
with that line's score only, so an edit that changes the sample never fails CI by itself, while a line
the sample kept that loses a kill does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import mutation


def line(path: str, function: str, text: str) -> mutation.Line:
    return mutation.Line(path, function, 1, f"{path}:{function}:{text}#1")


SETUP = line("timelines/lifecycle/facts.py", "setup_end", "return max(starts)")
GRACE = line("timelines/lifecycle/findings.py", "grace_exceeded", "return took > grace + slack")
EDITED = line("timelines/lifecycle/findings.py", "grace_exceeded", "return took > grace + 2 * slack")


def scores(*entries: tuple[mutation.Line, int, int]) -> dict[str, mutation.LineScore]:
    return {
        mutation.line_ident(x): mutation.LineScore(
            "lifecycle", mutation.line_ident(x), x.path, x.function, killed, total
        )
        for x, killed, total in entries
    }


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    path = tmp_path / "mutation-score"
    mutation.write_score(path, scores((SETUP, 3, 3), (GRACE, 2, 4)).values())
    return path


def test_the_same_lines_with_the_same_kills_pass(recorded: Path) -> None:
    assert mutation.ratchet(scores((SETUP, 3, 3), (GRACE, 2, 4)), recorded, update=False) == 0


def test_a_kept_line_that_loses_a_kill_fails(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert mutation.ratchet(scores((SETUP, 2, 3), (GRACE, 2, 4)), recorded, update=False) == 1
    assert "setup_end" in capsys.readouterr().out


def test_an_edited_line_is_a_new_line_never_compared_with_the_old_record(recorded: Path) -> None:
    """GIVEN a record of a line with 2 of 4 kills WHEN the line is edited (so the sample holds another
    line, with fewer kills) THEN nothing fails: its record was of another line; the kept line is compared."""
    assert mutation.ratchet(scores((SETUP, 3, 3), (EDITED, 0, 5)), recorded, update=False) == 0
    assert mutation.ratchet(scores((SETUP, 1, 3), (EDITED, 5, 5)), recorded, update=False) == 1


def test_update_records_the_sample_as_it_is_but_keeps_a_regressed_record(recorded: Path) -> None:
    assert mutation.ratchet(scores((SETUP, 2, 3), (EDITED, 1, 5)), recorded, update=True) == 1
    now = mutation.read_score(recorded)
    assert {(s.function, s.killed, s.total) for s in now.values()} == {
        ("setup_end", 3, 3),
        ("grace_exceeded", 1, 5),
    }
    assert mutation.line_ident(GRACE) not in now  # left the sample: dropped


def test_a_line_whose_mutants_changed_in_number_is_not_compared(recorded: Path) -> None:
    assert mutation.ratchet(scores((SETUP, 1, 2), (GRACE, 2, 4)), recorded, update=False) == 0


def test_functions_mode_mutates_every_body_line_of_the_named_functions_and_only_those() -> None:
    """``--functions derive._latest,facts._Reader.snapshot`` (a round that goes function by function):
    every line of those bodies that mutmut may mutate, none of another function; a name that is no
    function of the areas is refused by name rather than mutating nothing."""
    areas = mutation.areas_of(mutation.mutmut_config())
    lifecycle = {"lifecycle": areas["lifecycle"]}
    lines = mutation.named_functions(lifecycle, "derive._latest, facts._Reader.snapshot")
    assert {(Path(x.path).name, x.function) for x in lines} == {
        ("derive.py", "_latest"),
        ("facts.py", "_Reader.snapshot"),
    }
    every = [x for x in areas["lifecycle"].lines if x.function in ("_latest", "_Reader.snapshot")]
    assert sorted(x.key for x in lines) == sorted(
        x.key for x in every if Path(x.path).name in ("derive.py", "facts.py")
    )
    with pytest.raises(SystemExit, match="derive._no_such"):
        mutation.named_functions(lifecycle, "derive._latest,derive._no_such")
