"""The mutation score: ``make mutation``: how many small wrong changes to the code that decides what a user
sees the tests catch (docs/testing.md).

mutmut (pinned in requirements-dev.txt) does the work: it copies the code into ``mutants/``, writes the
mutants of the files ``[tool.mutmut] only_mutate`` names (pyproject.toml: the one list of mutated paths)
beside the original behind a trampoline, records which of the selected tests call which function and runs
each mutant against those tests only. This script drives it:

1. Areas. Each ``only_mutate`` entry is one, named by its last part (``timelines/lifecycle/*``:
   ``lifecycle``, ``dashboard/web/access.py``: ``access``); ``FUNCTIONS`` keeps only some functions of an
   area (the store's dedupe, the bundle's digest).
2. Which lines are mutated. ``--full`` (a release's run: hours): every line of the areas. ``--functions
   derive._latest,facts._Reader.snapshot``: every line of the named functions (a round that goes function
   by function). The sample (the default): ``SAMPLE`` lines of code split equally among the areas (an area
   with fewer runs whole, the rest goes to the others); in each area the lines whose SHA-256 of
   ``SEED:file:function:text`` is lowest, so an edit elsewhere leaves the sample as it was. Every mutant
   mutmut makes on a chosen line runs. The lines go to mutmut as the "covered lines" of its
   ``mutate_only_covered_lines`` (the lines it may mutate), so that it writes only these mutants: writing
   all 21,000 takes it minutes before a test runs.
3. ``mutmut run``, then its verdicts read back (its ``.meta`` files): per area killed / total and the
   percentage (a timeout is a kill, as in mutmut's own score; a mutant no selected test reaches counts
   as a survivor) and each surviving mutant with its file:line and change (``mutmut show NAME``: the diff).

The ratchet: ``tools/mutation-score`` records, for each line of the default sample, its killed / total,
the line known by the SHA-256 of its key (file, function, text). The run exits 1 when a recorded line still
in the sample has a mutant fewer killed; a line new to the sample (edited, added, moved) is reported and
not compared, so an edit cannot fail the check by changing the sample. ``--update`` (``make mutation
RATCHET=update``) records the sample as it is. Another sample, ``--areas``, ``--functions`` or ``--full``
prints its scores without a check.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
SCORE = ROOT / "tools" / "mutation-score"
RUN_FILE = MUTANTS / "podlife-run.json"  # what the last run mutated (mode, lines), for --report
SAMPLE = 15
SEED = "podlife"
# Areas of which only some functions are mutated: the rest of the store writes derived rows, the rest of
# the bundle lays out and compresses its bytes.
FUNCTIONS: dict[str, tuple[str, ...]] = {
    # what is stored once per (cluster, dedupe key): within a batch, then against the stored keys
    "store": ("_append", "_insert_portable", "_key_params"),
    # what the bundle's two digests cover, and the metadata that carries the first
    "bundle": (
        "canonical_observation",
        "derived_line",
        "derived_line_of",
        "SpooledObservations.add",
        "SpooledObservations._flush",
        "metadata",
        "_head",
    ),
}
# mutmut's verdicts (mutmut.stats.status_by_exit_code) that count as caught, and as not run at all.
CAUGHT = {"killed", "timeout"}
NOT_COUNTED = {"skipped"}
# Functions mutmut never mutates (mutmut.mutation.file_mutation): a decorated one, but for
# staticmethod/classmethod, and these.
NEVER_MUTATED = {"__getattribute__", "__setattr__", "__new__"}


@dataclass(frozen=True)
class Line:
    path: str
    function: str  # name, or Class.method
    number: int
    key: str  # what the sample hashes: file, function, the line's text and its occurrence among equal ones


@dataclass
class Mutant:
    name: str  # mutmut's: module.x_function__mutmut_N (a method: module.xǁClassǁmethod__mutmut_N)
    path: Path
    area: str
    status: str = "not checked"

    @property
    def function(self) -> str:
        mangled = self.name.partition("__mutmut_")[0].rpartition(".")[2]
        if mangled.startswith("xǁ"):
            _, cls, method = mangled.split("ǁ")
            return f"{cls}.{method}"
        return mangled.removeprefix("x_")


@dataclass
class Area:
    name: str
    pattern: str
    lines: list[Line] = field(default_factory=list)


def score(mutants: Iterable[Mutant]) -> tuple[int, int]:
    """(killed, total) of ``mutants``: a timeout is a kill, a skipped mutant is not counted."""
    counted = [m for m in mutants if m.status not in NOT_COUNTED]
    return sum(m.status in CAUGHT for m in counted), len(counted)


# ---------------------------------------------------------------------------------------------- areas


def area_name(pattern: str) -> str:
    """``timelines/lifecycle/*`` -> ``lifecycle``; ``dashboard/web/access.py`` -> ``access``."""
    last = [part for part in pattern.split("/") if part and "*" not in part][-1]
    return last.removesuffix(".py")


def mutmut_config() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    config: dict[str, object] = data["tool"]["mutmut"]
    return config


def areas_of(config: dict[str, object]) -> dict[str, Area]:
    """The areas with every line mutmut may mutate in them (``mutated_lines``)."""
    patterns = [str(p) for p in config["only_mutate"]]  # type: ignore[attr-defined]
    excluded = [str(p) for p in config.get("do_not_mutate", [])]  # type: ignore[attr-defined]
    areas: dict[str, Area] = {}
    for pattern in patterns:
        name = area_name(pattern)
        if name in areas:
            raise SystemExit(f"mutation: two only_mutate entries are both named {name!r}: {pattern}")
        areas[name] = Area(name, pattern)
    if unknown := set(FUNCTIONS) - set(areas):
        raise SystemExit(
            f"mutation: FUNCTIONS names {', '.join(sorted(unknown))}, which no only_mutate entry is"
        )
    sources = [str(p) for p in config.get("source_paths", [])]  # type: ignore[attr-defined]
    for source in sources:
        for path in sorted((ROOT / source).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            area = next((a for a in areas.values() if fnmatch(relative, a.pattern)), None)
            if area is None or any(fnmatch(relative, p) for p in excluded):
                continue
            keep = FUNCTIONS.get(area.name)
            area.lines += [line for line in mutated_lines(relative) if keep is None or line.function in keep]
    for name, keep in FUNCTIONS.items():
        if missing := set(keep) - {line.function for line in areas[name].lines}:
            # renamed or gone: FUNCTIONS must follow, or the area would shrink unseen
            raise SystemExit(f"mutation: {name}: no function {', '.join(sorted(missing))} (FUNCTIONS)")
    return areas


def mutated_lines(path: str) -> list[Line]:
    """The lines of ``path`` where mutmut may put a mutant: those a node of a function's body starts on
    (mutmut mutates top-level functions and the methods of top-level classes, whole, nested functions
    included; their docstrings and annotations are left alone)."""
    source = (ROOT / path).read_text(encoding="utf-8")
    texts = source.splitlines()
    lines: list[Line] = []
    for function, node in _functions(ast.parse(source)):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        numbers = sorted(
            {
                n.lineno
                for statement in body
                for n in ast.walk(statement)
                if hasattr(n, "lineno") and not isinstance(n, ast.arg)
            }
        )
        seen: Counter[str] = Counter()
        for number in numbers:
            text = texts[number - 1].strip()
            seen[text] += 1
            lines.append(Line(path, function, number, f"{path}:{function}:{text}#{seen[text]}"))
    return lines


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _mutated(node):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and _mutated(method):
                    yield f"{node.name}.{method.name}", method


def _mutated(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    if node.name in NEVER_MUTATED:
        return False
    decorators = node.decorator_list
    return not decorators or (
        len(decorators) == 1
        and isinstance(decorators[0], ast.Name)
        and decorators[0].id in ("staticmethod", "classmethod")
    )


def whole_functions(areas: dict[str, Area]) -> dict[str, set[int]]:
    """Every line of the areas' functions (``--full``: mutmut then finds every mutant of them)."""
    chosen: dict[str, set[int]] = {}
    for area in areas.values():
        for path in sorted({line.path for line in area.lines}):
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            keep = FUNCTIONS.get(area.name)
            for function, node in _functions(tree):
                if keep is None or function in keep:
                    chosen.setdefault(path, set()).update(range(node.lineno, (node.end_lineno or 0) + 1))
    return chosen


def sample(areas: dict[str, Area], size: int, seed: str) -> list[Line]:
    """``size`` lines split equally among the areas, in each those of the lowest SHA-256 of ``seed:key``."""
    order = {
        name: sorted(a.lines, key=lambda line: hashlib.sha256(f"{seed}:{line.key}".encode()).digest())
        for name, a in areas.items()
    }
    share = dict.fromkeys(areas, 0)
    left = size
    while left > 0 and (hungry := [n for n in areas if share[n] < len(order[n])]):
        each = max(1, left // len(hungry))
        for name in hungry:
            take = min(each, len(order[name]) - share[name], left)
            share[name] += take
            left -= take
    return [line for name in areas for line in order[name][: share[name]]]


def named_functions(areas: dict[str, Area], names: str) -> list[Line]:
    """Every line of the functions ``names`` lists (``MODULE.FUNCTION``, a method as
    ``MODULE.CLASS.METHOD``; MODULE is the file's name without ``.py``), in the given areas."""
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    lines = [
        line
        for area in areas.values()
        for line in area.lines
        if f"{Path(line.path).stem}.{line.function}" in wanted
    ]
    if missing := wanted - {f"{Path(line.path).stem}.{line.function}" for line in lines}:
        raise SystemExit(f"mutation: no function {', '.join(sorted(missing))} in the areas mutated")
    return lines


def by_path(lines: Iterable[Line]) -> dict[str, set[int]]:
    chosen: dict[str, set[int]] = {}
    for line in lines:
        chosen.setdefault(line.path, set()).add(line.number)
    return chosen


# ---------------------------------------------------------------------------------------------- mutmut


def code_digest() -> str:
    """The code and the tests a run's verdicts depend on."""
    digest = hashlib.sha256()
    for folder in ("timelines", "collectors", "alerts", "podlife_site", "tests", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    digest.update((ROOT / "pyproject.toml").read_bytes())
    return digest.hexdigest()


def generate(chosen: dict[str, set[int]], jobs: int) -> None:
    """mutmut's first step of ``mutmut run`` (which then finds the files done): copy the code into
    mutants/ and write the mutants of the ``chosen`` lines, handed over as the lines its
    ``mutate_only_covered_lines`` would have measured (a file it is given no line of gets no mutant)."""
    from mutmut.__main__ import create_mutants
    from mutmut.state import state
    from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir

    MUTANTS.mkdir(exist_ok=True)
    state()._covered_lines = {str((MUTANTS / path).absolute()): lines for path, lines in chosen.items()}
    with contextlib.redirect_stdout(io.StringIO()):  # a line a file copied or mutated
        copy_src_dir()
        copy_also_copy_files()
        create_mutants(jobs)


def load(areas: dict[str, Area]) -> list[Mutant]:
    """Every mutant mutmut wrote for the areas, with its verdict (``not checked`` before a run)."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code

    found: list[Mutant] = []
    for area in areas.values():
        for path in sorted({line.path for line in area.lines}):
            data = SourceFileMutationData(path=path)
            data.load()
            for name, code in sorted(data.exit_code_by_key.items()):
                found.append(Mutant(name, Path(path), area.name, status_by_exit_code[code]))
    return found


def run_mutmut(jobs: int, log: Path) -> int:
    """``mutmut run`` over every mutant written; its progress (a spinner) goes to ``log``."""
    command = [str(Path(sys.executable).parent / "mutmut"), "run", "--max-children", str(jobs)]
    with log.open("w", encoding="utf-8") as out:
        return subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode


def change_of(mutant: Mutant) -> tuple[int | None, str, str]:
    """The file's line where the mutant changes it, the change (``old -> new``) and mutmut's whole diff."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(mutant.name, path=mutant.path)
    old: list[str] = []
    new: list[str] = []
    first: int | None = None
    number = 0
    for text in diff.splitlines()[2:]:
        if hunk := re.match(r"@@ -(\d+)", text):
            number = int(hunk.group(1))
        elif text.startswith("-"):
            first = number if first is None else first
            old.append(text[1:].strip())
            number += 1
        elif text.startswith("+"):
            first = number if first is None else first
            new.append(text[1:].strip())
        else:
            number += 1
    change = f"{' '.join(old) or '(nothing)'}  ->  {' '.join(new) or '(removed)'}"
    return _file_line(mutant, first), change, diff


def _file_line(mutant: Mutant, in_function: int | None) -> int | None:
    """The file's line of the ``in_function``-th line of the function as mutmut prints it: from its
    ``def``, or from the comment lines just above it, which mutmut's copy carries along."""
    if in_function is None:
        return None
    tree = ast.parse((ROOT / mutant.path).read_text(encoding="utf-8"))
    node = next((n for f, n in _functions(tree) if f == mutant.function), None)
    if node is None:
        return None
    texts = (ROOT / mutant.path).read_text(encoding="utf-8").splitlines()
    start = node.lineno
    while start > 1 and texts[start - 2].strip().startswith("#"):
        start -= 1
    return start + in_function - 1


# ---------------------------------------------------------------------------------------------- ratchet


def percent(killed: int, total: int) -> float:
    # Rounded down to the tenth printed: a score is never shown above what the tests reach.
    return int(1000 * killed / total) / 10 if total else 100.0


@dataclass(frozen=True)
class LineScore:
    """What the tests did to the mutants of one sampled line: the ratchet's unit."""

    area: str
    # the line's identity: the first 12 hex digits of the SHA-256 of its key (file, function, text)
    ident: str
    path: str
    function: str
    killed: int
    total: int

    @property
    def where(self) -> str:
        return f"{self.area}: {self.path} {self.function} (line {self.ident})"


def line_ident(line: Line) -> str:
    return hashlib.sha256(line.key.encode()).hexdigest()[:12]


def line_scores(
    areas: dict[str, Area], lines: Sequence[Line], mutants: Iterable[Mutant]
) -> dict[str, LineScore]:
    """Each sampled line's killed / total: a mutant belongs to the last sampled line of its file at or
    before the first line it changes (mutmut puts a mutant on a node that starts on a line it may mutate;
    a node spanning lines may change a later one)."""
    area_of = {line.key: name for name, area in areas.items() for line in area.lines}
    of_line: dict[str, list[Mutant]] = {line.key: [] for line in lines}
    for mutant in mutants:
        first, _, _ = change_of(mutant)
        mine = [line for line in lines if line.path == str(mutant.path)]
        if not mine:
            continue
        before = [line for line in mine if first is not None and line.number <= first]
        line = max(before, key=lambda x: x.number) if before else min(mine, key=lambda x: x.number)
        of_line[line.key].append(mutant)
    scores = {}
    for line in lines:
        killed, total = score(of_line[line.key])
        ident = line_ident(line)
        scores[ident] = LineScore(area_of[line.key], ident, line.path, line.function, killed, total)
    return scores


SCORE_LINE = re.compile(r"(\S+)\s+(\d+)/(\d+)\s+([0-9a-f]{12})\s+(\S+)\s+(\S+)$")


def read_score(path: Path) -> dict[str, LineScore]:
    recorded: dict[str, LineScore] = {}
    if not path.exists():
        return recorded
    for text in path.read_text(encoding="utf-8").splitlines():
        if not text.strip() or text.startswith("#"):
            continue
        if not (m := SCORE_LINE.match(text)):
            raise SystemExit(
                f"mutation: {path}: expected `AREA KILLED/TOTAL LINE-ID FILE FUNCTION`, got {text!r}"
            )
        area, killed, total, ident, file, function = m.groups()
        recorded[ident] = LineScore(area, ident, file, function, int(killed), int(total))
    return recorded


def write_score(path: Path, scores: Iterable[LineScore]) -> None:
    lines = [
        "# The mutation ratchet (make mutation, tools/mutation.py, docs/testing.md): for each line of the default",
        f"# sample (SAMPLE={SAMPLE} lines, SEED={SEED}), how many of its mutants the tests kill. A line is known by",
        "# its identity (the SHA-256 of its file, function and text): `make mutation` fails when a recorded line",
        "# still in the sample has a mutant fewer killed; a line new to the sample (one edited, added or moved",
        "# since) is not compared. `make mutation RATCHET=update` records the sample as it is now.",
        "# AREA KILLED/TOTAL LINE-ID FILE FUNCTION",
    ]
    lines += [f"{s.area} {s.killed}/{s.total} {s.ident} {s.path} {s.function}" for s in scores]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def ratchet(scores: dict[str, LineScore], path: Path, *, update: bool) -> int:
    """Compares each sampled line with its record, if it has one: a score recorded for one line is never
    compared with another line's, so an edit that changes the sample cannot fail the check (nor hide a
    regression on the lines it left alone)."""
    recorded = read_score(path)
    regressed: dict[str, LineScore] = {}
    changed = False
    new = []
    for ident, now in scores.items():
        was = recorded.get(ident)
        if was is None:
            new.append(now)
        elif was.total != now.total:
            print(f"mutation: {now.where}: {now.total} mutants, {was.total} when recorded: not compared")
        elif now.killed < was.killed:
            print(
                f"mutation: {now.where}: {now.killed}/{now.total} killed, {was.killed} recorded: a regression"
            )
            regressed[ident] = was
        elif now.killed > was.killed and not update:
            print(f"mutation: {now.where}: {now.killed}/{now.total} killed, above the {was.killed} recorded")
        changed = changed or was is None or was != now
    left = recorded.keys() - scores.keys()
    said = [f"{len(scores) - len(new)} of the {len(scores)} sampled lines compared with their record"]
    if new:
        said.append(f"{len(new)} new to the sample, not compared")
    if left:
        said.append(f"{len(left)} recorded lines left the sample")
    print("mutation: ratchet: " + "; ".join(said))
    if (new or changed or left) and not update:
        print("mutation: `make mutation RATCHET=update` records the sample as it is now")
    if update and (changed or left):
        # a regressed line keeps its record: a lower one is recorded by hand, with the reason in the commit
        write_score(path, [regressed.get(ident, now) for ident, now in scores.items()])
        print(f"mutation: recorded the sample in {path}")
    return 1 if regressed else 0


# ---------------------------------------------------------------------------------------------- main


def report(areas: dict[str, Area], mutants: list[Mutant], *, diffs: bool) -> None:
    print(f"{'area':<10} {'killed':>6} / {'total':<5} {'score':>6}   by file (killed/total)")
    for name in areas:
        mine = [m for m in mutants if m.area == name]
        killed, total = score(mine)
        paths = sorted({str(m.path) for m in mine})
        files = ", ".join(
            "{} {}/{}".format(Path(p).name, *score(m for m in mine if str(m.path) == p)) for p in paths
        )
        print(f"{name:<10} {killed:>6} / {total:<5} {percent(killed, total):>5.1f}%   {files}")
    survivors = [m for m in mutants if m.status not in CAUGHT | NOT_COUNTED]
    if survivors:
        print(f"\nsurviving mutants ({len(survivors)}; `.venv/bin/mutmut show NAME` prints one's diff):")
        for m in sorted(survivors, key=lambda m: (m.area, str(m.path), m.name)):
            line, change, diff = change_of(m)
            status = "" if m.status == "survived" else f" [{m.status}]"
            print(f"  {m.path}:{line or '?'}  {m.name}{status}\n      {change}")
            if diffs:
                print("\n".join("      " + text for text in diff.splitlines()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=SAMPLE, help=f"lines to mutate (default {SAMPLE})")
    parser.add_argument("--seed", default=SEED, help=f"which ones (default {SEED!r})")
    parser.add_argument("--full", action="store_true", help="every line (a release's run: hours)")
    parser.add_argument(
        "--functions",
        default="",
        help="comma-separated MODULE.FUNCTION (derive._latest, facts._Reader.snapshot): every line of these",
    )
    parser.add_argument(
        "--areas",
        default="",
        help="comma-separated areas to mutate, the sample all theirs (default: every area)",
    )
    parser.add_argument("--update", action="store_true", help="record higher scores in the ratchet file")
    parser.add_argument("--score-file", type=Path, default=SCORE, help="the ratchet file")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once")
    parser.add_argument("--diffs", action="store_true", help="print each survivor's whole diff")
    parser.add_argument("--report", action="store_true", help="report the last run again, run nothing")
    opts = parser.parse_args(argv)

    os.chdir(ROOT)  # mutmut works in the current directory: pyproject.toml, mutants/
    (ROOT / "var").mkdir(exist_ok=True)
    lock = (ROOT / "var" / "mutation.lock").open("w")
    try:  # held until the process ends: a second run would rewrite mutants/ under the first one
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("mutation: another `make mutation` is running in this checkout")
        return 2
    if compiled := sorted(p.name for p in (ROOT / "timelines" / "lifecycle").glob("*.so")):
        # Python would import these instead of the mutants
        print(f"mutation: compiled core modules ({', '.join(compiled)}): `make clean-core-ext` first")
        return 2
    areas = areas_of(mutmut_config())
    if opts.areas:
        wanted = [name.strip() for name in opts.areas.split(",") if name.strip()]
        if unknown := [name for name in wanted if name not in areas]:
            raise SystemExit(f"mutation: no area {', '.join(unknown)} (areas: {', '.join(areas)})")
        areas = {name: areas[name] for name in wanted}
    run: dict[str, object] = {
        "full": opts.full,
        "functions": opts.functions,
        "sample": opts.sample,
        "seed": opts.seed,
        "areas": list(areas),
    }
    default = (
        not opts.full
        and not opts.functions
        and opts.sample == SAMPLE
        and opts.seed == SEED
        and not opts.areas
    )
    started = time.monotonic()
    if opts.report:
        if not RUN_FILE.exists():
            print("mutation: no run to report (mutants/ holds none)")
            return 2
        run = json.loads(RUN_FILE.read_text(encoding="utf-8"))
        every = len(areas)
        ran = run.get("areas", list(areas))
        areas = {name: area for name, area in areas.items() if isinstance(ran, list) and name in ran}
        default = (
            not run["full"]
            and not run.get("functions")
            and run["sample"] == SAMPLE
            and run["seed"] == SEED
            and len(areas) == every
        )
    else:
        if opts.functions:
            lines = named_functions(areas, opts.functions)
        else:
            lines = [] if opts.full else sample(areas, opts.sample, opts.seed)
        chosen = whole_functions(areas) if opts.full else by_path(lines)
        run["code"] = code_digest()
        run["lines"] = [line.key for line in lines]
        last = json.loads(RUN_FILE.read_text(encoding="utf-8")) if RUN_FILE.exists() else None
        if not opts.full or last != run:
            # From nothing, but to resume a --full run of the same code and tests: mutmut keeps the
            # verdicts of functions that did not change (a new test would not run against them), and
            # knows which tests reach a function only if it had mutants when it last looked.
            shutil.rmtree(MUTANTS, ignore_errors=True)
        what = (
            "every line"
            if opts.full
            else f"every line of {opts.functions}"
            if opts.functions
            else f"a sample of {opts.sample} lines (seed {opts.seed!r})"
        )
        print(f"mutation: {what} of " + ", ".join(a.pattern for a in areas.values()), flush=True)
        generate(chosen, opts.jobs)
        RUN_FILE.write_text(json.dumps(run), encoding="utf-8")
        count = len(load(areas))
        print(
            f"mutation: {count} mutants written in {time.monotonic() - started:.0f} s; running them, "
            f"{opts.jobs} at once",
            flush=True,
        )
        log = MUTANTS / "mutmut-run.log"
        exit_code = run_mutmut(opts.jobs, log)
        for leftover in MUTANTS.glob("podlife-test-mutant-*"):  # the database of a run that timed out
            leftover.unlink(missing_ok=True)
        if exit_code != 0:
            tail = log.read_text(encoding="utf-8", errors="replace").replace("\r", "\n").splitlines()[-40:]
            print("\n".join(tail))
            print(f"mutation: mutmut run failed (exit {exit_code}); its output: {log}")
            return 2
        print(f"mutation: done in {time.monotonic() - started:.0f} s (mutmut's output: {log})", flush=True)
    mutants = load(areas)
    if unchecked := [m.name for m in mutants if m.status == "not checked"]:
        print(f"mutation: {len(unchecked)} mutants have no verdict (first: {unchecked[0]})")
        return 2
    report(areas, mutants, diffs=opts.diffs)
    if not default:
        print("mutation: not the default sample, so no ratchet check")
        return 0
    recorded_keys = run.get("lines", [])
    keys = {str(key) for key in recorded_keys} if isinstance(recorded_keys, list) else set()
    sampled = [line for area in areas.values() for line in area.lines if line.key in keys]
    return ratchet(line_scores(areas, sampled, mutants), opts.score_file, update=opts.update)


if __name__ == "__main__":
    sys.exit(main())
