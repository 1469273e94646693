"""``manage.py ingest_kubelet_log``: kubelet logs from files (or stdin) into a cluster's history."""

from __future__ import annotations

import gzip
import io
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, tzinfo
from typing import IO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from collectors.kubelet_logs import KubeletLogIngest
from collectors.parsers.kubelet_log import top_unrecognized
from timelines import store
from timelines.models import Cluster

SNIFF = 8192


class UnreadableInput(Exception):
    """A file that is not kubelet log text; the message is one line naming it and why."""


def open_log(path: str) -> IO[bytes]:
    """The file's bytes (gzip unpacked), after checking it looks like text."""
    try:
        raw: IO[bytes] = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115 - closed by caller
    except OSError as exc:
        raise UnreadableInput(f"{path}: cannot read ({exc.strerror or exc})") from None
    # ignore: typeshed's IO[bytes] lacks the readinto() BufferedReader wants; stdin's buffer has it at run time.
    reader = io.BufferedReader(raw) if not isinstance(raw, io.BufferedReader) else raw  # type: ignore[type-var]
    try:
        head = reader.peek(SNIFF)[:SNIFF]
    except OSError as exc:
        raise UnreadableInput(f"{path}: cannot read ({exc.strerror or exc})") from None
    if head[:2] == b"\x1f\x8b":
        reader = io.BufferedReader(gzip.GzipFile(fileobj=reader))
        try:
            head = reader.peek(SNIFF)[:SNIFF]
        except (OSError, EOFError) as exc:
            raise UnreadableInput(f"{path}: broken gzip data ({exc})") from None
    if b"\x00" in head:
        offset = head.index(b"\x00")
        raise UnreadableInput(
            f"{path}: binary data (NUL byte at offset {offset}); expected kubelet log text "
            "(klog, journald or JSON lines)"
        )
    return reader


def text_lines(stream: IO[bytes]) -> Iterator[str]:
    for raw in stream:
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


# Storing is this command's whole job; timelines derive from what it stored in the derive stage (a Celery
# worker, or at once on the embedded default).
DERIVED_BY = "(the derive stage derives them; `manage.py derive` runs it in this process)"


class Command(BaseCommand):
    help = "Read kubelet logs (klog text, journald, JSON; gzip too) into a cluster's pod timelines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="log files; - reads standard input")
        parser.add_argument("--cluster", required=True, help="cluster name (created when new)")
        parser.add_argument("--node", required=True, help="the node these logs come from")
        parser.add_argument(
            "--year", type=int, help="year of the first line (klog has none; default: this year)"
        )
        parser.add_argument(
            "--tz",
            default="UTC",
            help="zone of the klog times, e.g. Europe/Paris (default UTC; lines behind short-iso journald "
            "prefixes are read in the zone their offset implies)",
        )

    def handle(
        self, *args: object, files: list[str], cluster: str, node: str, year: int | None, tz: str, **o: object
    ) -> None:
        zone = self._zone(tz)
        year = year or timezone.now().year
        if not 1970 <= year <= 9999:
            raise CommandError(f"--year {year} is not a plausible year: expected e.g. {timezone.now().year}")
        try:
            target = store.cluster_for(cluster, origin=Cluster.Origin.OFFLINE)
        except ValidationError as exc:  # a new cluster's name that is not valid
            raise CommandError(f"--cluster {cluster!r}: {exc}") from None
        failures: list[str] = []
        touched: set[str] = set()
        totals: Counter[str] = Counter()
        for path in files:
            try:
                stream = open_log(path)
            except UnreadableInput as exc:
                failures.append(str(exc))
                self.stderr.write(f"error: {exc}")
                continue
            with stream:
                pods, stats = self._ingest(target, path, stream, node=node, year=year, zone=zone)
            touched |= pods
            totals.update(stats)
            if stats["stopped_early"]:
                failures.append(f"{path}: read stopped early")
        self.stdout.write(
            f"total: {totals['lines']} lines read, {totals['stored']} observations stored; "
            f"{len(touched)} pod{'s' if len(touched) != 1 else ''} touched {DERIVED_BY}"
        )
        # What was lost, and why: a damaged or cut log never passes for a complete one.
        lost = []
        if totals["cut"]:
            lost.append(f"{totals['cut']} line(s) cut off before their pod, UID or message ended")
        if totals["cut_kept"]:
            lost.append(f"{totals['cut_kept']} cut line(s) kept without their cut-off values")
        damaged = totals["malformed"] + totals["bad_pod_name"] + totals["bad_uid"] + totals["too_long"]
        if damaged:
            lost.append(f"{damaged} damaged line(s) (malformed, bad pod names or UIDs, too long)")
        if totals["rejected"]:
            lost.append(f"{totals['rejected']} observation(s) rejected by the store")
        if failures:
            lost.append(f"{len(failures)} of {len(files)} file(s) not read in full ({'; '.join(failures)})")
        if lost:
            self.stdout.write("lost: " + "; ".join(lost))
        if failures:
            raise CommandError(f"{len(failures)} of {len(files)} file(s) could not be read")

    @staticmethod
    def _zone(name: str) -> tzinfo:
        if name.upper() == "UTC":
            return UTC
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise CommandError(
                f"--tz {name!r} is not a known time zone: expected e.g. UTC or Europe/Paris"
            ) from None

    def _ingest(
        self, cluster: Cluster, path: str, stream: IO[bytes], *, node: str, year: int, zone: tzinfo
    ) -> tuple[set[str], Counter[str]]:
        # The same parser and batching as the HTTP endpoint (collectors/ingest_http.py).
        ingest = KubeletLogIngest(cluster, node=node, year=year, tz=zone, source=path)
        stopped_early = False
        try:
            for line in text_lines(stream):
                ingest.feed(line)
        except (OSError, EOFError) as exc:  # e.g. a truncated gzip: keep what was read, say so
            stopped_early = True
            self.stderr.write(f"error: {path}: read stopped early ({exc}); kept the lines before it")
        result = ingest.close()
        parser = ingest.parser
        skipped = Counter(parser.skipped)
        self.stdout.write(
            f"{path}: {parser.lines_read} lines read, {result.received} observations "
            f"({result.stored} stored, {result.duplicates} already stored, {len(result.rejected)} rejected), "
            f"{len(result.pods_touched)} pods touched"
        )
        if skipped:
            reasons = ", ".join(f"{reason} {count}" for reason, count in skipped.most_common())
            self.stdout.write(f"  skipped lines by reason: {reasons}")
        if parser.cut_kept:
            self.stdout.write(f"  {parser.cut_kept} cut line(s) kept without their cut-off values")
        top = top_unrecognized(parser.unrecognized)
        if top:
            texts = "; ".join(f"{text!r} {count}" for text, count in top)
            self.stdout.write(
                f"  unrecognised messages (top {len(top)} of {len(parser.unrecognized)} texts): {texts}"
            )
        for error in parser.errors:  # a bug of podlife's, not of the line: say which line, to report it
            self.stderr.write(f"  podlife failed on {error} (please report it with the line)")
        for rejected in result.rejected[:10]:
            self.stderr.write(f"  rejected {rejected}")
        stats: Counter[str] = Counter(
            lines=parser.lines_read,
            stored=result.stored,
            rejected=len(result.rejected),
            cut_kept=parser.cut_kept,
            stopped_early=int(stopped_early),
        )
        stats.update(
            {
                k: v
                for k, v in skipped.items()
                if k in ("cut", "malformed", "bad_pod_name", "bad_uid", "too_long")
            }
        )
        return result.pods_touched, stats
