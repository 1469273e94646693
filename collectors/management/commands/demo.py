"""``manage.py demo``: the whole podlife on one machine, on the embedded default."""

from __future__ import annotations

import uvicorn
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Serve podlife on the embedded default (SQLite, in-process channel layer and tasks)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")

    def handle(self, *args: object, port: int, host: str, **options: object) -> None:
        self.stdout.write(f"podlife is at http://{host}:{port}/  (Ctrl-C stops it)")
        uvicorn.run(
            "podlife_site.asgi:application", host=host, port=port, log_level="warning", lifespan="off"
        )
