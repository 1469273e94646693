"""``manage.py import_incident PATH [--as NAME]``: load a podlife.incident/v1 bundle (.json or .json.gz)
as a read-only imported cluster. A refused file leaves nothing behind; the message says what is wrong."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.export.importer import BundleError, import_incident


class Command(BaseCommand):
    help = "Import an incident bundle (JSON, .json.gz) as a read-only cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the bundle: .json or .json.gz")
        parser.add_argument("--as", dest="name", help="cluster name to import as (default: the bundle's)")
        parser.add_argument(
            "--strict",
            action="store_true",
            help="refuse the bundle when a re-derived timeline differs from the one it carries",
        )

    def handle(self, *args: object, path: str, name: str | None, strict: bool, **options: Any) -> None:
        try:
            result = import_incident(path, name=name, strict=strict)
        except BundleError as exc:
            raise CommandError(f"refused: {exc}") from None
        self.stdout.write(
            f"imported {path} as read-only cluster {result.cluster.name!r}: {result.pods} pods, "
            f"{result.observations} observations"
        )
        if result.differences:
            self.stdout.write(f"{len(result.differences)} re-derived pod timeline(s) differ from the bundle:")
            for line in result.differences:
                self.stdout.write(f"  {line}")
        else:
            self.stdout.write("every re-derived pod timeline is identical to the bundle's")
        for note in result.notes:
            self.stdout.write(f"note: {note}")
