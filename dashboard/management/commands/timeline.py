"""``manage.py timeline``: one pod's timeline as a readable table or as podlife.timeline/v2 JSON."""

from __future__ import annotations

from datetime import datetime

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.queries import NotFound, find_pods, get_cluster, resolve_pod
from dashboard.timeline_reads import pod_timeline
from timelines import observation_rows
from timelines.derivation import UIDLESS_KINDS
from timelines.lifecycle import schema
from timelines.lifecycle.derive import derive_pod_timeline
from timelines.lifecycle.resolve import unclaimed_life
from timelines.lifecycle.timeline import PodTimeline, format_time
from timelines.models import Cluster
from timelines.observation_rows import StoredRow


def unresolved_timeline(cluster: Cluster, pod_ref: str) -> PodTimeline | None:
    """The timeline of a pod that only UID-less kubelet lines name (no object, no UID anywhere): its
    newest life on the node of its newest line, derived on request and never stored (a UID that arrives
    later takes the lines over). None when no line names it."""
    namespace, _, name = pod_ref.partition("/")
    rows = observation_rows.selection(
        cluster, has_pod_uid=False, namespace=namespace, name=name, kinds=UIDLESS_KINDS
    )
    life = unclaimed_life(o for _, o in observation_rows.facts(rows))
    return derive_pod_timeline(life) if life else None


def _duration(start: datetime, end: datetime | None) -> str:
    if end is None:
        return "open"
    seconds = (end - start).total_seconds()
    return f"{seconds:.6f}s" if seconds < 60 else f"{seconds / 60:.1f}m"


def render_text(timeline: PodTimeline, cluster: str) -> str:
    """A table of lanes, then markers and findings; times in UTC with microseconds."""
    out = [
        f"pod {timeline.namespace}/{timeline.name}  uid {timeline.uid}  node {timeline.node or '-'}"
        f"  cluster {cluster}  phase {timeline.phase or '-'}"
    ]
    rows = [("LANE", "STATE", "START", "END", "DURATION", "SOURCE")]
    for lane, intervals in timeline.lanes.items():
        for iv in intervals:
            state = iv.state
            if iv.attrs.get("reason"):
                state += f"({iv.attrs['reason']})"
            rows.append(
                (
                    lane,
                    state,
                    format_time(iv.start) or "",
                    format_time(iv.end) or "-",
                    _duration(iv.start, iv.end),
                    iv.source,
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if timeline.markers:
        out.append("")
        out.append("MARKERS")
        out += [f"  {format_time(m.at)}  {m.kind:<7} {m.reason}: {m.message}" for m in timeline.markers]
    out.append("")
    if timeline.findings:
        out.append("FINDINGS")
        out += [
            f"  [{f.severity}] {f.kind}  {format_time(f.start)} → {format_time(f.end) or 'open'}\n      {f.message}"
            for f in timeline.findings
        ]
    else:
        out.append("FINDINGS: none")
    return "\n".join(out)


def _line_of(row: StoredRow) -> str:
    """What an observation says, in a line: the kubelet message (or span, or API object) and its pod."""
    p = row.payload if isinstance(row.payload, dict) else {}
    what = p.get("message") or p.get("name") or p.get("transition") or p.get("reason") or row.kind
    pod = p.get("pod_ref") or (f"{row.namespace}/{row.name}" if row.name else "")
    pid = f", pid {p['pid']}" if p.get("pid") is not None else ""
    # Where the line came from first (file:line, or the request's line / record), else a span's ids;
    # observations stored before ingest recorded ``where`` have neither, and print as before.
    where = p.get("where")
    if not where and p.get("span_id"):
        where = f"span {p.get('trace_id') or '-'}/{p['span_id']}"
    at = f"{where} " if isinstance(where, str) and where else ""
    return f"{at}#{row.id} {row.kind} on {row.node or '-'}{pid} at {format_time(row.observed_at)}: {what} {pod}".rstrip()


def explain_text(timeline: PodTimeline, proofs: dict[str, StoredRow]) -> str:
    """For each worker interval, each bound and the observation that proves it (or why none does)."""
    out = [f"worker lane of {timeline.namespace}/{timeline.name} ({timeline.uid}): each bound and its proof"]
    for iv in timeline.lane("worker"):
        out.append(
            f"{iv.state:<12} {format_time(iv.start)} -> {format_time(iv.end) or 'open'}  [{iv.source}]"
        )
        for side, at in (("start", iv.start), ("end", iv.end)):
            if at is None:
                seen = iv.attrs.get("seen_until")
                out.append("  end    open: no line ends it" + (f" (last seen {seen})" if seen else ""))
                continue
            name = iv.attrs.get(f"{side}_from") or "-"
            unknown = iv.attrs.get(f"{side}_unknown")
            row = proofs.get(str(iv.attrs.get(f"{side}_evidence") or ""))
            if iv.state == "unknown":
                proof = "the last or first line of the states around it"
            elif unknown:
                proof = "unknown: the " + (
                    "state began at or before" if side == "start" else "state lasted at least until"
                )
                proof += " this line"
            else:
                proof = "proved by"
            where = (
                _line_of(row) if row is not None else "(no stored observation: derived from the lines above)"
            )
            out.append(f"  {side:<6} {format_time(at)}  {name}: {proof} {where}")
    return "\n".join(out)


class Command(BaseCommand):
    help = "Print one pod's timeline (text table or podlife.timeline/v2 JSON)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True)
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--uid", help="the pod's UID")
        which.add_argument("--pod", help="NAMESPACE/NAME (the newest incarnation when the name was reused)")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument(
            "--explain",
            action="store_true",
            help="for each worker bound, print the kubelet line (observation) that proves it",
        )

    def handle(
        self,
        *args: object,
        cluster: str,
        uid: str | None,
        pod: str | None,
        format: str,
        explain: bool = False,
        **o: object,
    ) -> None:
        try:
            c = get_cluster(cluster)
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        found = None
        try:
            found = resolve_pod(c, uid=uid, pod_ref=pod)
            doc = pod_timeline(c, found)
        except NotFound as exc:
            unresolved = unresolved_timeline(c, pod) if pod else None
            if unresolved is None:
                raise CommandError(str(exc)) from None
            self.stderr.write(f"{pod}: no UID in the evidence; drawn from the lines that name it only")
            doc = schema.write_timeline(unresolved, c.name)
        if format == "json" and not explain:
            self.stdout.write(orjson.dumps(schema.to_builtins(doc), option=orjson.OPT_INDENT_2).decode())
            return
        timeline = schema.timeline_of(doc)  # the table and --explain read times as datetimes
        if explain:
            keys = {
                str(iv.attrs[k])
                for iv in timeline.lane("worker")
                for k in ("start_evidence", "end_evidence")
                if iv.attrs.get(k)
            }
            rows = observation_rows.rows(observation_rows.selection(c, keys=keys))
            self.stdout.write(explain_text(timeline, {row.dedupe_key: row for row in rows}))
            return
        self.stdout.write(render_text(timeline, c.name))
        if found is not None and pod:
            others = [
                p.uid for p in find_pods(c, namespace=found.namespace, name=found.name) if p.uid != found.uid
            ]
            if others:
                self.stdout.write(f"\nearlier incarnations of {pod}: {', '.join(others)} (use --uid)")
