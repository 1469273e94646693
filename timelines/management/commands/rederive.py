"""``manage.py rederive``: rebuild intervals, markers, findings and current-state rows from the stored
observations (every key of the cluster marked dirty, then the derive stage run here until it is done)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from timelines.derivation import rederive_cluster
from timelines.models import Cluster, NotFound


class Command(BaseCommand):
    help = (
        "Rebuild every derived row (intervals, markers, findings, pods, nodes, PDBs) from the observations."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        scope = parser.add_mutually_exclusive_group(required=True)
        scope.add_argument("--cluster", help="one cluster by name")
        scope.add_argument("--all", action="store_true", help="every cluster")

    def handle(self, *args: object, cluster: str | None, all: bool, **options: object) -> None:
        try:
            clusters = list(Cluster.objects.all()) if all else [Cluster.objects.named(cluster or "")]
        except NotFound as exc:
            raise CommandError(str(exc)) from None
        for c in clusters:
            count = rederive_cluster(c)
            self.stdout.write(f"{c.name}: re-derived {count} key{'s' if count != 1 else ''}")
