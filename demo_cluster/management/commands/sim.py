"""``manage.py sim``: serve the demo cluster (a thin wrapper over ``python -m demo_cluster``)."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from demo_cluster.cli import add_arguments, serve


class Command(BaseCommand):
    help = "Serve the podlife demo cluster (a simulated Kubernetes API server) until stopped."
    requires_system_checks: list[str] = []  # the sim needs no database

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        serve(argparse.Namespace(**options), out=self.stdout)
