"""The fidelity score: ``make fidelity``: how many facts of the real corpus hold through the project's own CLI.

Reads the fact files (``tests/fixtures/real/kubelet/facts.toml``, ``tests/fixtures/real/audit/facts.toml``;
format: ``tests/fixtures/real/README.md``), ingests every listed file with the project's own management
commands (``ingest_kubelet_log`` / ``ingest_audit_log`` / ``ingest_k8s_json``) into a scratch SQLite
database in a temporary folder, reads timelines back with ``timeline --format json`` (and
``export_incident`` where a fact needs it), checks every fact and prints ``CORPUS: N/M facts hold`` per
corpus, ``total: N/M facts hold`` and each failing fact (file, says). A file whose ingest crashes (a
traceback) fails all its facts and is named.

The ratchet: ``tests/fixtures/real/fidelity-score`` records how many facts held (``held N of M``). The run
exits 1 when fewer hold now than recorded; ``--update`` (``make fidelity RATCHET=update``) rewrites the
file when more hold. The commands run in this process (``call_command``), one database for the whole run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import tomllib
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real"
CORPORA = ("kubelet", "audit")
SCORE = REAL / "fidelity-score"
INGESTS = ("ingest_kubelet_log", "ingest_audit_log", "ingest_k8s_json")
EXPORT_WINDOW = ("1970-01-01T00:00:00+00:00", "2100-01-01T00:00:00+00:00")
TRACEBACK = "Traceback (most recent call last)"


class FactError(Exception):
    """A fact file that does not follow the format (named with its file and entry)."""


# ---------------------------------------------------------------------------------------------- the facts


@dataclass
class Fact:
    corpus: str
    file: str
    says: str
    spec: dict[str, Any]
    held: bool = False
    why: str = ""


@dataclass
class FileEntry:
    corpus: str
    folder: Path
    path: str
    command: str
    args: list[str]
    cluster: str
    expect_exit: int
    facts: list[Fact] = field(default_factory=list)
    exit: int | None = None
    crashed: bool = False
    output: str = ""


CHECKS = {
    "interval",
    "no_interval",
    "lanes",
    "marker",
    "finding",
    "no_finding",
    "item_at",
    "count_at",
    "pod_exists",
    "no_pod",
    "output",
    "incarnations",
    "no_crash",
    "exit",
    "times_within",
    "interval_count",
    "all",
    "any",
}


def load(corpus: str, facts_path: Path) -> list[FileEntry]:
    """The ``[[file]]`` entries of one fact file, checked against the format."""
    where = facts_path.relative_to(ROOT) if facts_path.is_relative_to(ROOT) else facts_path
    try:
        doc = tomllib.loads(facts_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise FactError(f"{where}: not valid TOML: {exc}") from None
    entries = []
    for i, f in enumerate(doc.get("file") or []):
        name = f"{where} [[file]] #{i + 1}"
        path = f.get("path")
        if not isinstance(path, str) or not path:
            raise FactError(f"{name}: expected a `path` (relative to {where.parent})")
        name = f"{where} [[file]] {path}"
        command = f.get("command", "")
        if command not in INGESTS:
            raise FactError(f"{name}: `command` {command!r} is not one of {', '.join(INGESTS)}")
        if not (facts_path.parent / path).exists():
            raise FactError(f"{name}: no such file {facts_path.parent / path}")
        args = f.get("args") or []
        if not all(isinstance(a, str) for a in args):
            raise FactError(f"{name}: `args` must be a list of strings")
        entry = FileEntry(
            corpus=corpus,
            folder=facts_path.parent,
            path=path,
            command=command,
            args=list(args),
            cluster=_cluster_name(corpus, str(f.get("cluster") or path)),
            expect_exit=int(f.get("expect_exit", 0)),
        )
        for j, spec in enumerate(f.get("fact") or []):
            _validate(spec, f"{name} fact #{j + 1}")
            entry.facts.append(Fact(corpus, path, spec["says"], spec))
        entries.append(entry)
    return entries


def _cluster_name(corpus: str, name: str) -> str:
    """A valid cluster name (1-63 of letters, digits, '.', '-') for a corpus's file or shared cluster."""
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", f"{corpus}-{name}").strip("-.")
    if len(slug) > 63:
        import hashlib

        slug = slug[:54].rstrip("-.") + "-" + hashlib.sha1(name.encode()).hexdigest()[:8]
    return slug


def _validate(spec: dict[str, Any], name: str, inner: bool = False) -> None:
    if not inner and not isinstance(spec.get("says"), str):
        raise FactError(f"{name}: expected `says`, one sentence of what an engineer reads")
    check = spec.get("check")
    if check not in CHECKS:
        raise FactError(f"{name}: `check` {check!r} is not one of {', '.join(sorted(CHECKS))}")
    if check in ("all", "any"):
        subs = spec.get("checks")
        if not isinstance(subs, list) or not subs:
            raise FactError(f"{name}: check `{check}` needs a non-empty `checks` list")
        for k, sub in enumerate(subs):
            _validate(sub, f"{name} checks #{k + 1}", inner=True)
    if spec.get("node") is not None and not isinstance(spec.get("node"), str):
        raise FactError(f"{name}: `node` must be a node's name")
    pod = spec.get("pod")
    if pod is not None and not (
        isinstance(pod, str) and re.fullmatch(r"(uid:[0-9a-fA-F-]+|ref:[^/\s]+/\S+)", pod)
    ):
        raise FactError(f"{name}: `pod` {pod!r} is neither uid:UID nor ref:NAMESPACE/NAME")
    for key in ("match", "state", "lane", "pattern"):
        if isinstance(spec.get(key), str):
            try:
                re.compile(spec[key])
            except re.error as exc:
                raise FactError(f"{name}: `{key}` is not a valid regex: {exc}") from None
    for key in (
        "start",
        "end",
        "at",
        "after",
        "before",
        "start_before",
        "start_after",
        "end_before",
        "end_after",
    ):
        value = spec.get(key)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if v is None or v in ("open", "unknown"):
                continue
            if _time(v) is None:
                raise FactError(f"{name}: `{key}` {v!r} is not an ISO 8601 time")


# ---------------------------------------------------------------------------------------------- times


def _time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _near(a: Any, b: Any, tol: float) -> bool:
    ta, tb = _time(a), _time(b)
    return ta is not None and tb is not None and abs((ta - tb).total_seconds()) <= tol


def _bound(got: Any, want: Any, tol: float, null: str) -> bool:
    """``start``/``end``: "unknown"/"open" = null; else a time within tol."""
    if want == null:
        return got is None
    return _near(got, want, tol)


# ---------------------------------------------------------------------------------------------- the run


class Runner:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.timelines: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.exports: dict[tuple[str, str], dict[str, Any] | None] = {}
        self.crashes: dict[str, list[str]] = {}  # cluster -> what crashed reading it back

    def call(self, name: str, *args: str, **options: Any) -> tuple[int, str, bool]:
        """Run a management command in this process: (exit code, stdout+stderr, crashed)."""
        from django.core.management import call_command
        from django.core.management.base import CommandError

        out, err = io.StringIO(), io.StringIO()
        code, crashed = 0, False
        try:
            call_command(name, *args, stdout=out, stderr=err, **options)
        except CommandError as exc:
            code = exc.returncode
            err.write(f"CommandError: {exc}\n")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            code, crashed = 1, True
            err.write(traceback.format_exc())
        text = out.getvalue() + err.getvalue()
        return code, text, crashed or TRACEBACK in text

    def ingest(self, entry: FileEntry) -> None:
        path = str(entry.folder / entry.path)
        entry.exit, entry.output, entry.crashed = self.call(
            entry.command, path, *entry.args, "--cluster", entry.cluster
        )

    def pod_timelines(self, cluster: str, pod: str) -> list[dict[str, Any]]:
        """The timelines a pod selector names: one UID, or every incarnation of NAMESPACE/NAME."""
        key = (cluster, pod)
        if key in self.timelines:
            return self.timelines[key]
        uids: list[str] = []
        if pod.startswith("uid:"):
            uids = [pod[4:]]
        else:
            from dashboard.queries import NotFound, find_pods, get_cluster

            ns, name = pod[4:].split("/", 1)
            try:
                uids = [p.uid for p in find_pods(get_cluster(cluster), namespace=ns, name=name)]
            except NotFound:
                uids = []
        docs = []
        for uid in uids:
            code, text, crashed = self.call("timeline", cluster=cluster, uid=uid, format="json")
            if crashed:
                self.crashes.setdefault(cluster, []).append(f"timeline --uid {uid}")
            if code == 0 and not crashed:
                try:
                    docs.append(json.loads(text))
                except ValueError:
                    self.crashes.setdefault(cluster, []).append(f"timeline --uid {uid}: not JSON")
        self.timelines[key] = docs
        return docs

    def export(self, cluster: str, namespace: str = "", node: str = "") -> dict[str, Any] | None:
        """The incident export (JSON) of a namespace, or of a node (its own lanes and its pods)."""
        scope = {"node": node} if node else {"namespace": namespace}
        key = (cluster, f"node:{node}" if node else namespace)
        if key not in self.exports:
            target = self.workdir / f"export-{len(self.exports)}.json"
            code, _, crashed = self.call(
                "export_incident",
                cluster=cluster,
                **scope,
                since=EXPORT_WINDOW[0],
                until=EXPORT_WINDOW[1],
                format="json",
                output=str(target),
            )
            if crashed:
                what = f"--node {node}" if node else f"--namespace {namespace}"
                self.crashes.setdefault(cluster, []).append(f"export_incident {what}")
            doc = None
            if code == 0 and target.exists():
                doc = json.loads(target.read_text(encoding="utf-8"))
            self.exports[key] = doc
        return self.exports[key]

    # ------------------------------------------------------------------------------------------ checks

    def check(self, entry: FileEntry, spec: dict[str, Any], pod: str | None = None) -> str:
        """ "" when the fact holds, else why not."""
        kind = spec["check"]
        pod = spec.get("pod", pod)
        if kind == "all":
            for k, sub in enumerate(spec["checks"]):
                why = self.check(entry, sub, pod)
                if why:
                    return f"part {k + 1} ({sub['check']}): {why}"
            return ""
        if kind == "any":
            whys = [self.check(entry, sub, pod) for sub in spec["checks"]]
            return "" if any(not w for w in whys) else "none holds: " + "; ".join(whys)
        if kind == "output":
            # The input's own path is no evidence (a file name may say "truncated"): it reads FILE.
            text = entry.output.replace(str(entry.folder / entry.path), "FILE")
            return (
                "" if re.search(spec["match"], text, re.I | re.M) else f"no output matches {spec['match']!r}"
            )
        if kind == "exit":
            if "code" in spec:
                return (
                    ""
                    if entry.exit == spec["code"]
                    else f"the ingest exited {entry.exit}, expected {spec['code']}"
                )
            return "" if entry.exit else "the ingest exited 0, expected a non-zero exit"
        if kind == "no_crash":
            gone = self.crashes.get(entry.cluster, [])
            if entry.crashed:
                return "the ingest crashed"
            if entry.exit != entry.expect_exit:
                return f"the ingest exited {entry.exit}, expected {entry.expect_exit}"
            return f"crashed reading back: {', '.join(gone)}" if gone else ""
        if kind == "no_pod":
            return self._no_pod(entry, spec, pod)
        node = spec.get("node")
        if pod is None and isinstance(node, str) and kind in CHECKERS:
            doc = self.export(entry.cluster, node=node)
            return CHECKERS[kind](doc, spec) if doc is not None else f"no export of node {node}"
        if pod is None:
            return "the fact names no `pod` (or `node`)"
        docs = self.pod_timelines(entry.cluster, pod)
        if kind == "pod_exists":
            return "" if docs else f"no timeline for {pod}"
        if kind == "incarnations":
            uids = {(d.get("pod") or {}).get("uid") for d in docs}
            return (
                "" if len(uids) == spec["count"] else f"{len(uids)} incarnation(s), expected {spec['count']}"
            )
        if not docs:
            return f"no timeline for {pod}"
        if kind in ("no_interval", "no_finding"):  # nothing in any incarnation
            for d in docs:
                why = CHECKERS[kind](d, spec)
                if why:
                    return why
            return ""
        whys = [CHECKERS[kind](d, spec) for d in docs]
        return "" if any(not w for w in whys) else whys[0]

    def _no_pod(self, entry: FileEntry, spec: dict[str, Any], pod: str | None) -> str:
        if not pod or not pod.startswith("ref:"):
            return "`no_pod` needs pod = ref:NAMESPACE/NAME"
        ns, name = pod[4:].split("/", 1)
        pattern = spec.get("match")
        if not pattern and self.pod_timelines(entry.cluster, pod):
            return f"a timeline exists for {ns}/{name}"
        doc = self.export(entry.cluster, ns)
        for p in (doc or {}).get("pods") or []:
            got = p.get("pod") or {}
            got_name = got.get("name") or ""
            if got.get("namespace") == ns and (
                re.search(pattern, got_name, re.I) if pattern else got_name == name
            ):
                return f"the export of namespace {ns} names {ns}/{got_name}"
        return ""


def _lane(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The intervals of the lanes whose name is (fullmatches) ``name``, in time order (unknown starts first)."""
    items = [
        i
        for lane, intervals in (doc.get("lanes") or {}).items()
        if re.fullmatch(name, lane, re.I)
        for i in intervals or []
        if isinstance(i, dict)
    ]
    return sorted(items, key=lambda i: _time(i.get("start")) or datetime.min.replace(tzinfo=UTC))


def _state_is(item: dict[str, Any], state: str | None) -> bool:
    return state is None or re.fullmatch(state, str(item.get("state") or ""), re.I) is not None


def _within(t: Any, spec: dict[str, Any], tol: float) -> bool:
    after, before = _time(spec.get("after")), _time(spec.get("before"))
    tt = _time(t)
    if tt is None:  # an unknown start: within the range only when the range is open at its start
        return after is None
    return (after is None or (tt - after).total_seconds() >= -tol) and (
        before is None or (tt - before).total_seconds() <= tol
    )


def _duration(item: dict[str, Any]) -> float:
    s, e = _time(item.get("start")), _time(item.get("end"))
    if s is None or e is None:
        return float("inf")
    return (e - s).total_seconds()


def _after(t: datetime, bound: str, tol: float) -> bool:
    """``t`` lies more than ``tol`` after ``bound``."""
    b = _time(bound)
    return b is not None and (t - b).total_seconds() > tol


def _before(t: datetime, bound: str, tol: float) -> bool:
    """``t`` lies more than ``tol`` before ``bound``."""
    b = _time(bound)
    return b is not None and (t - b).total_seconds() < -tol


def _interval_matches(i: dict[str, Any], spec: dict[str, Any], tol: float) -> bool:
    if not _state_is(i, spec.get("state")):
        return False
    if "start" in spec and not _bound(i.get("start"), spec["start"], tol, "unknown"):
        return False
    if "end" in spec and not _bound(i.get("end"), spec["end"], tol, "open"):
        return False
    if "source" in spec and i.get("source") != spec["source"]:
        return False
    start, end = _time(i.get("start")), _time(i.get("end"))
    # Bounds: an unknown start counts as before any time, an open end as after any time.
    if "start_before" in spec and start is not None and _after(start, spec["start_before"], tol):
        return False
    if "start_after" in spec and (start is None or _before(start, spec["start_after"], tol)):
        return False
    if "end_before" in spec and (end is None or _after(end, spec["end_before"], tol)):
        return False
    if "end_after" in spec and end is not None and _before(end, spec["end_after"], tol):
        return False
    if "max_duration" in spec and _duration(i) > spec["max_duration"] + tol:
        return False
    attrs = i.get("attrs") or {}
    return all(attrs.get(k) == v for k, v in (spec.get("attrs") or {}).items())


def _c_interval(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    tol = float(spec.get("tol", 0.001))
    lane = _lane(doc, spec["lane"])
    candidates = lane[-1:] if spec.get("last") else lane[:1] if spec.get("first") else lane
    if any(_interval_matches(i, spec, tol) for i in candidates):
        return ""
    return f"no such interval in lane {spec['lane']}: {_brief(lane)}"


def _c_no_interval(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    tol = float(spec.get("tol", 0.001))
    longer = spec.get("longer_than")
    for i in _lane(doc, spec["lane"]):
        counts = longer is None or _duration(i) > longer
        if counts and _interval_matches(i, spec, tol) and _within(i.get("start"), spec, tol):
            return f"lane {spec['lane']} has {_brief([i])}"
    return ""


def _c_interval_count(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    tol = float(spec.get("tol", 0.001))
    got = [
        i
        for i in _lane(doc, spec["lane"])
        if _interval_matches(i, spec, tol) and _within(i.get("start"), spec, tol)
    ]
    return (
        ""
        if len(got) == spec["count"]
        else f"{len(got)} such interval(s) in lane {spec['lane']}, expected {spec['count']}: {_brief(got)}"
    )


def _c_lanes(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    tol = float(spec.get("tol", 0.001))
    ignore = {s.lower() for s in spec.get("ignore") or []}
    got = [
        str(i.get("state")).lower()
        for i in _lane(doc, spec["lane"])
        if str(i.get("state")).lower() not in ignore and _within(i.get("start"), spec, tol)
    ]
    if "pattern" in spec:  # a regex over the states joined by single spaces
        ok = re.fullmatch(spec["pattern"], " ".join(got), re.I) is not None
        return "" if ok else f"lane {spec['lane']} states {got} do not match {spec['pattern']!r}"
    want = [s.lower() for s in spec["states"]]
    return "" if got == want else f"lane {spec['lane']} states {got}, expected {want}"


def _c_times_within(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    """Every time of the timeline (interval bounds, marker times, finding bounds) lies within after..before."""
    tol = float(spec.get("tol", 0.001))
    lo, hi = _time(spec["after"]), _time(spec["before"])
    times = [i.get(k) for lane in (doc.get("lanes") or {}).values() for i in lane for k in ("start", "end")]
    times += [m.get("at") for m in doc.get("markers") or []]
    times += [f.get(k) for f in doc.get("findings") or [] for k in ("start", "end")]
    for t in times:
        tt = _time(t)
        if tt is None or lo is None or hi is None:
            continue
        if (tt - lo).total_seconds() < -tol or (tt - hi).total_seconds() > tol:
            return f"{t} lies outside {spec['after']} .. {spec['before']}"
    return ""


def _text(item: Any) -> str:
    return json.dumps(item, ensure_ascii=False)


def _c_marker(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    tol = float(spec.get("tol", 0.001))
    for m in doc.get("markers") or []:
        if spec.get("at") is not None and not _near(m.get("at"), spec["at"], tol):
            continue
        if re.search(spec.get("match", ""), _text(m), re.I):
            return ""
    return f"no marker matches {spec.get('match')!r}" + (f" at {spec['at']}" if spec.get("at") else "")


def _c_finding(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    tol = float(spec.get("tol", 0.001))
    for f in doc.get("findings") or []:
        if f.get("kind") != spec["kind"]:
            continue
        if spec.get("start") is not None and not _near(f.get("start"), spec["start"], tol):
            continue
        if spec.get("severity") is not None and f.get("severity") != spec["severity"]:
            continue
        if spec.get("match") and not re.search(spec["match"], _text(f), re.I):
            continue
        return ""
    kinds = sorted({str(f.get("kind")) for f in doc.get("findings") or []})
    return f"no {spec['kind']} finding (findings: {', '.join(kinds) or 'none'})"


def _c_no_finding(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    bad = [f for f in doc.get("findings") or [] if spec["kind"] == "any" or f.get("kind") == spec["kind"]]
    return f"finding {bad[0].get('kind')} from {bad[0].get('start')}" if bad else ""


def _items(doc: Any, listed: bool = False) -> Iterable[dict[str, Any]]:
    """Every object that is an element of a list, at any depth (markers, lane intervals, findings, an
    export's nodes and their lanes), as check-audit walks a document."""
    if isinstance(doc, dict):
        if listed:
            yield doc
        for value in doc.values():
            yield from _items(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from _items(value, True)


def _matching_items(doc: dict[str, Any], spec: dict[str, Any]) -> list[dict[str, Any]]:
    tol = float(spec.get("tol", 0.001))
    at = spec.get("at")
    times = at if isinstance(at, list) else [at]
    found = []
    for i in _items(doc):
        own = i.get("at") if i.get("at") is not None else i.get("start")
        at_time = at is None or any(_near(own, t, tol) for t in times)
        if at_time and i not in found and re.search(spec.get("match", ""), _text(i), re.I):
            found.append(i)
    return found


def _c_item_at(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    return "" if _matching_items(doc, spec) else f"no item at {spec.get('at')} matches {spec.get('match')!r}"


def _c_count_at(doc: dict[str, Any], spec: dict[str, Any]) -> str:
    n = len(_matching_items(doc, spec))
    return (
        ""
        if n == spec["count"]
        else f"{n} item(s) at {spec.get('at')} match {spec.get('match')!r}, expected {spec['count']}"
    )


CHECKERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], str]] = {
    "interval": _c_interval,
    "no_interval": _c_no_interval,
    "lanes": _c_lanes,
    "marker": _c_marker,
    "finding": _c_finding,
    "no_finding": _c_no_finding,
    "item_at": _c_item_at,
    "count_at": _c_count_at,
    "interval_count": _c_interval_count,
    "times_within": _c_times_within,
}


def _brief(items: list[dict[str, Any]]) -> str:
    return ", ".join(f"{i.get('state')} {i.get('start')} -> {i.get('end')}" for i in items[:8]) or "empty"


# ---------------------------------------------------------------------------------------------- main


def read_score(path: Path) -> tuple[int, int] | None:
    if not path.exists():
        return None
    m = re.search(r"held\s+(\d+)\s+of\s+(\d+)", path.read_text(encoding="utf-8"))
    if not m:
        raise FactError(f"{path}: expected a line `held N of M`")
    return int(m.group(1)), int(m.group(2))


def write_score(path: Path, held: int, total: int) -> None:
    path.write_text(
        "# The fidelity ratchet (make fidelity, tools/fidelity.py): facts of the real corpus that hold.\n"
        "# `make fidelity` fails when fewer hold; `make fidelity RATCHET=update` records a higher score.\n"
        f"held {held} of {total}\n",
        encoding="utf-8",
    )


def setup_django(workdir: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'fidelity.sqlite3'}"
    os.environ.pop("REDIS_URL", None)  # no broker: the derive stage runs in this process
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(48))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def run(
    fact_files: dict[str, Path], out: Callable[[str], None] = print, verbose: bool = False
) -> tuple[dict[str, tuple[int, int]], list[Fact], list[FileEntry]]:
    """Ingest and check every corpus: ({corpus: (held, total)}, the facts, the files)."""
    entries: list[FileEntry] = []
    for corpus, path in fact_files.items():
        if path.exists():
            entries += load(corpus, path)
        else:
            out(f"{corpus}: no fact file at {path} (0 facts)")
    workdir = Path(tempfile.mkdtemp(prefix="podlife-fidelity-"))
    try:
        setup_django(workdir)
        runner = Runner(workdir)
        for entry in entries:
            runner.ingest(entry)
            if verbose:
                out(f"  ingested {entry.corpus}/{entry.path}: exit {entry.exit}")
        facts: list[Fact] = []
        for entry in entries:
            for fact in entry.facts:
                if entry.crashed:
                    fact.why = f"the ingest of {entry.path} crashed"
                else:
                    try:
                        fact.why = runner.check(entry, fact.spec)
                    except Exception as exc:  # a checker's error fails the fact, never the run
                        fact.why = f"check error: {type(exc).__name__}: {exc}"
                fact.held = not fact.why
                facts.append(fact)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    scores = {}
    for corpus in fact_files:
        mine = [f for f in facts if f.corpus == corpus]
        scores[corpus] = (sum(f.held for f in mine), len(mine))
    return scores, facts, entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="record a higher score in the ratchet file")
    parser.add_argument("--score-file", type=Path, default=SCORE, help="the ratchet file")
    parser.add_argument("--no-ratchet", action="store_true", help="print the score only")
    parser.add_argument(
        "--facts", action="append", metavar="CORPUS=PATH", help="a fact file (default: the real corpora's)"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    opts = parser.parse_args(argv)
    if opts.facts:
        fact_files = {}
        for item in opts.facts:
            corpus, _, path = item.partition("=")
            if not path:
                parser.error(f"--facts {item!r}: expected CORPUS=PATH")
            fact_files[corpus] = Path(path)
    else:
        fact_files = {c: REAL / c / "facts.toml" for c in CORPORA}
    try:
        scores, facts, entries = run(fact_files, verbose=opts.verbose)
    except FactError as exc:
        print(f"fidelity: {exc}", file=sys.stderr)
        return 2
    for entry in entries:
        if entry.crashed:
            print(f"CRASHED: {entry.corpus}/{entry.path} ({entry.command}): {_last_line(entry.output)}")
    failing = [f for f in facts if not f.held]
    if failing:
        print("failing facts:")
        for f in failing:
            print(f"  {f.corpus}/{f.file}: {f.says}\n      ({f.why})")
    for corpus, (held, total) in scores.items():
        print(f"{corpus}: {held}/{total} facts hold")
    held = sum(h for h, _ in scores.values())
    total = sum(t for _, t in scores.values())
    print(f"total: {held}/{total} facts hold")
    if opts.no_ratchet:
        return 0
    recorded = read_score(opts.score_file)
    if recorded is not None and held < recorded[0]:
        print(
            f"fidelity: {held} facts hold, fewer than the {recorded[0]} recorded in {opts.score_file}: a regression"
        )
        return 1
    if opts.update and (recorded is None or held > recorded[0] or total != recorded[1]):
        write_score(opts.score_file, held, total)
        print(f"fidelity: recorded held {held} of {total} in {opts.score_file}")
    elif recorded is not None and held > recorded[0]:
        print(
            f"fidelity: {held} hold, more than the {recorded[0]} recorded: `make fidelity RATCHET=update` records it"
        )
    return 0


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


if __name__ == "__main__":
    sys.exit(main())
