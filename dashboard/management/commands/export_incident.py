"""``manage.py export_incident``: a scope and a window → a bundle (JSON, CSV zip, or one HTML file).

    manage.py export_incident --cluster prod --node worker-1 --since 2024-06-07T06:00:00Z \
        --until 2024-06-07T07:00:00Z --format json -o incident.json.gz

JSON goes to stdout when there is no ``-o``; a name ending in ``.gz`` is gzip-compressed. ``--format csv``
writes a zip of CSV files, so its output must be named ``.zip`` (a ``.csv`` name is refused). ``--pod`` takes
a UID or ``NAMESPACE/NAME`` (the newest incarnation of that name, as ``manage.py timeline --pod``). The file is
written under a temporary name and renamed when complete, so a failed export leaves no partial bundle.
"""

from __future__ import annotations

import codecs
import os
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.export import FORMATS, Scope, ScopeError, export_incident
from dashboard.queries import NotFound, get_cluster, resolve_pod
from timelines.progress import ProgressBar


class _TextSink:
    """Bytes to a text stream (``call_command(stdout=StringIO())``), decoding UTF-8 across chunk edges."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.decoder = stream, codecs.getincrementaldecoder("utf-8")()

    def write(self, data: bytes) -> int:
        self.stream.write(self.decoder.decode(data))
        return len(data)

    def flush(self) -> None:
        self.stream.write(self.decoder.decode(b"", final=True))
        self.stream.flush()


class Command(BaseCommand):
    help = "Export an incident: the pods of a scope alive in a window, with their evidence, as a bundle."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="cluster name")
        scope = parser.add_mutually_exclusive_group(required=True)
        scope.add_argument("--node", help="every pod on this node")
        scope.add_argument("--namespace", help="every pod in this namespace")
        scope.add_argument(
            "--pod",
            action="append",
            metavar="UID|NAMESPACE/NAME",
            help="a pod UID, or NAMESPACE/NAME for its newest incarnation (repeatable)",
        )
        scope.add_argument("--workload", metavar="KIND/NAMESPACE/NAME", help="e.g. Deployment/shop/web")
        scope.add_argument("--pdb", metavar="NAMESPACE/NAME", help="the pods a PodDisruptionBudget selects")
        parser.add_argument("--since", required=True, help="window start, ISO 8601 with an offset")
        parser.add_argument("--until", required=True, help="window end, ISO 8601 with an offset")
        parser.add_argument("--format", choices=FORMATS, default="json")
        parser.add_argument(
            "-o", "--output", help="file to write (.gz: gzip); JSON goes to stdout without it"
        )
        parser.add_argument("--progress", action="store_true", help="draw a progress bar on stderr")
        parser.add_argument(
            "--tz",
            default="utc",
            help="the zone an HTML file opens in: utc (default) or an IANA name such as Europe/Paris",
        )

    def handle(self, *args: object, **options: Any) -> None:
        fmt = options["format"]
        scope_kind, values = next(
            (k, v) for k in ("node", "namespace", "pod", "workload", "pdb") if (v := options.get(k))
        )
        output = options.get("output")
        if not output and fmt != "json":
            raise CommandError(f"--format {fmt} writes a binary file: give -o PATH")
        if fmt == "csv" and output and not output.lower().endswith(".zip"):
            raise CommandError(
                f"--format csv writes a zip of CSV files (one per table): name the output .zip, "
                f"e.g. {Path(output).with_suffix('.zip').name!r}, not {Path(output).name!r}"
            )
        try:
            cluster = get_cluster(options["cluster"])
            if scope_kind == "pod":
                # A reference with a slash is NAMESPACE/NAME (a UID never holds one), as `timeline --pod`.
                uids = [resolve_pod(cluster, pod_ref=v).uid if "/" in v else v for v in values]
                scope = Scope.pods(uids)
            else:
                scope = Scope.one(scope_kind, values)
        except (ScopeError, NotFound) as exc:
            raise CommandError(str(exc)) from None
        err = options.get("stderr") or sys.stderr
        isatty = getattr(getattr(err, "_out", err), "isatty", lambda: False)()
        progress = ProgressBar(self.stderr) if (options["progress"] or isatty) else None
        try:
            if output:
                self._to_file(cluster, scope, options, fmt, Path(output), progress)
            else:
                target = getattr(self.stdout._out, "buffer", None)
                out = target if target is not None else _TextSink(self.stdout._out)
                export_incident(
                    cluster,
                    scope,
                    options["since"],
                    options["until"],
                    fmt,
                    out,
                    progress=progress,
                    tz=options["tz"],
                )
        except (ScopeError, NotFound) as exc:
            raise CommandError(str(exc)) from None
        except BrokenPipeError:
            # The reader went away (`… | head`): stop quietly, as other command-line tools do.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())

    def _to_file(
        self, cluster: Any, scope: Scope, options: dict[str, Any], fmt: str, path: Path, progress: Any
    ) -> None:
        partial = path.with_name(path.name + ".part")
        try:
            with partial.open("wb") as f:
                summary = export_incident(
                    cluster,
                    scope,
                    options["since"],
                    options["until"],
                    fmt,
                    f,
                    gzip_output=path.name.endswith(".gz"),
                    progress=progress,
                    tz=options["tz"],
                )
            os.replace(partial, path)
        except BaseException:  # re-raised (Ctrl-C too): no half-written file is left behind
            partial.unlink(missing_ok=True)
            raise
        self.stderr.write(
            f"wrote {path}: {summary.pods} pods, {summary.nodes} nodes, {summary.pdbs} PDBs, "
            f"{summary.bytes_written:,} bytes"
        )
