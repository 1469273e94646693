"""``manage.py notify``: scan for new and resolved findings and send the webhooks, in the foreground.

    python manage.py notify --once        # one round (cron, or a check after configuring a destination)
    python manage.py notify               # a round every PODLIFE_ALERTS_SCAN_S until Ctrl-C

With a broker, Celery beat runs the same round (task ``alerts.scan_and_deliver``); this is for setups
without one.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from alerts.loop import NotifierLoop, run_once


class Command(BaseCommand):
    help = "Send webhooks for new and resolved findings (one round with --once, else until Ctrl-C)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="one round, then exit")
        parser.add_argument("--interval", type=float, default=None, help="seconds between rounds")

    def handle(self, *args: Any, once: bool, interval: float | None, **options: Any) -> None:
        if once:
            result = run_once()
            self.stdout.write(" ".join(f"{k}={v}" for k, v in result.items()))
            return
        loop = NotifierLoop(interval).start()
        try:
            loop.wait()
        finally:
            loop.stop()
