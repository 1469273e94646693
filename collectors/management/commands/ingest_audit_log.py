"""``manage.py ingest_audit_log``: API server audit logs into a cluster's history (docs/audit.md).

Reads files, folders (every file in them, recursively, in name order: rotated logs sort by time) and ``-``
(standard input); gzip is recognised by its content, not its name. Each input is read line by line, so a
log of any size takes bounded memory. One parser reads all inputs in order, so a request received at the
end of one rotated file and completed in the next is paired.

The summary names what was lost: per input, the lines or documents that could not be read (with
examples), the observations the store refused, and at the end the requests received but never completed.
The command exits non-zero when an input could not be read at all (missing, unreadable, not an audit log).
"""

from __future__ import annotations

import gzip
import io
import sys
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collectors.ingest_audit import AuditIngest
from collectors.parsers.audit import TOP_IGNORED, top_ignored
from timelines import store
from timelines.models import Cluster

# Storing is this command's whole job; timelines derive from what it stored in the derive stage.
DERIVED_BY = "(the derive stage derives them; `manage.py derive` runs it in this process)"

SNIFF = 8192


class UnreadableInput(Exception):
    """An input that cannot be read at all; the message is one line naming it and why."""


def input_paths(names: list[str]) -> Iterator[str]:
    """The inputs in order: ``-``, files, and the files under each folder (hidden ones skipped)."""
    for name in names:
        path = Path(name)
        if name != "-" and path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            if not found:
                yield f"{name}/"  # reported as unreadable: an empty folder
            yield from (str(p) for p in found)
        else:
            yield name


def open_input(name: str) -> IO[bytes]:
    """The input's bytes, gzip unpacked (every member), after checking it is text."""
    if name.endswith("/"):
        raise UnreadableInput(f"{name}: an empty folder")
    try:
        raw: IO[bytes] = sys.stdin.buffer if name == "-" else open(name, "rb")  # noqa: SIM115 - closed by caller
    except OSError as exc:
        raise UnreadableInput(f"{name}: cannot read ({exc.strerror or exc})") from None
    # ignore: typeshed's IO[bytes] lacks the readinto() BufferedReader wants; stdin's buffer has it at run time.
    reader = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    try:
        head = reader.peek(SNIFF)[:SNIFF]
        if head[:2] == b"\x1f\x8b":
            reader = io.BufferedReader(gzip.GzipFile(fileobj=reader))
            head = reader.peek(SNIFF)[:SNIFF]
    except (OSError, EOFError, zlib.error) as exc:
        raw.close()
        raise UnreadableInput(f"{name}: broken gzip data ({exc})") from None
    nul = head.find(b"\x00")
    if nul != -1:
        raw.close()
        raise UnreadableInput(
            f"{name}: binary data (NUL byte at offset {nul}); expected an audit log: JSON Lines, "
            "an EventList, a managed cluster's export or legacy text, gzip or not"
        )
    return reader


def read_lines(stream: IO[bytes], problems: list[str], name: str) -> Iterator[bytes]:
    """The stream's lines; a read that fails half-way (a truncated gzip) ends them and is reported."""
    try:
        yield from stream
    except (OSError, EOFError, zlib.error) as exc:
        problems.append(f"{name}: reading stopped early ({exc}); kept what came before")


class Command(BaseCommand):
    help = "Read Kubernetes API server audit logs (JSON Lines, EventList, EKS/AKS/GKE exports, legacy; gzip too)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "files", nargs="+", metavar="FILE", help="files or folders; - reads standard input"
        )
        parser.add_argument("--cluster", required=True, help="cluster name (created when new)")

    def handle(self, *args: object, files: list[str], cluster: str, **options: object) -> None:
        try:
            target = store.cluster_for(cluster, origin=Cluster.Origin.OFFLINE)
        except ValidationError as exc:  # a new cluster's name that is not valid
            raise CommandError(f"--cluster {cluster!r}: {exc}") from None
        if target.read_only:
            raise CommandError(f"--cluster {cluster!r} is read-only (an imported incident) and takes no data")
        ingest = AuditIngest(target, background=True)  # a writer thread stores while the next batch parses
        failures: list[str] = []
        inputs = 0
        for name in input_paths(files):
            inputs += 1
            try:
                stream = open_input(name)
            except UnreadableInput as exc:
                failures.append(str(exc))
                self.stderr.write(f"error: {exc}")
                continue
            with stream:
                if not self._ingest(ingest, name, stream):
                    failures.append(name)
        result = ingest.close()
        unpaired = ingest.parser.unpaired
        self.stdout.write(
            f"total: {ingest.parser.events} audit events, {result.stored} observations stored "
            f"({result.duplicates} already stored, {len(result.rejected)} rejected), "
            f"{len(result.pods_touched)} pods touched by UID and {len(ingest.pod_names)} pod names by their "
            f"requests {DERIVED_BY}"
        )
        if unpaired:
            self.stdout.write(
                f"  {unpaired} request(s) received and never completed in these inputs: their outcome is unknown"
            )
        if failures:
            raise CommandError(
                f"{len(failures)} of {inputs} input(s) could not be read: " + "; ".join(failures[:5])
            )

    def _ingest(self, ingest: AuditIngest, name: str, stream: IO[bytes]) -> bool:
        """Read one input; False when it held no audit event at all (wrong file, or nothing readable)."""
        parser, result = ingest.parser, ingest.result
        before_events, before_skipped, before_rejected, before_ignored = (
            parser.events,
            Counter(parser.skipped),
            Counter(parser.rejected),
            Counter(parser.ignored),
        )
        before_examples = len(parser.examples)
        before = (result.received, result.stored, result.duplicates, len(result.rejected))
        problems: list[str] = []
        ingest.feed_lines(read_lines(stream, problems, name))
        ingest.drain()  # this input's batches stored: its counts are complete
        events = parser.events - before_events
        skipped = parser.skipped - before_skipped
        unreadable = parser.rejected - before_rejected
        received, stored, duplicates, refused = (
            now - then
            for now, then in zip(
                (result.received, result.stored, result.duplicates, len(result.rejected)), before, strict=True
            )
        )
        self.stdout.write(
            f"{name}: {events} audit events, {received} observations ({stored} stored, {duplicates} already "
            f"stored, {refused} rejected)"
        )
        if skipped:
            self.stdout.write(
                "  skipped by reason: " + ", ".join(f"{r} {n}" for r, n in skipped.most_common())
            )
        ignored = top_ignored(parser.ignored - before_ignored)
        if ignored:
            self.stdout.write(
                f"  not followed, most frequent (top {TOP_IGNORED}): "
                + ", ".join(f"{shape} {n}" for shape, n in ignored)
            )
        if unreadable:
            self.stdout.write(
                "  unreadable, lost: " + ", ".join(f"{r} {n}" for r, n in unreadable.most_common())
            )
            for example in parser.examples[before_examples : before_examples + 5]:
                self.stderr.write(f"  {example}")
        for rejected in result.rejected[len(result.rejected) - refused :][:10]:
            self.stderr.write(f"  rejected by the store: {rejected}")
        for problem in problems:
            self.stderr.write(f"error: {problem}")
        if events == 0 and not problems:
            empty = not (skipped or unreadable)
            message = "empty" if empty else "no audit event in it"
            self.stderr.write(f"{'warning' if empty else 'error'}: {name}: {message}")
            return empty
        return True
