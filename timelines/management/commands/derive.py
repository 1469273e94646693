"""``manage.py derive``: run the derive stage in this process until nothing is dirty (what a Celery worker's
``timelines.derive_dirty`` task does), e.g. after ``ingest_kubelet_log`` where no worker runs.

``--quarantined`` lists the keys set aside because their derivation kept failing (each with its cluster,
its error and its first and last failure); ``--retry`` puts them back as dirty keys (after a fix), with
the keys still backing off, and derives them.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from timelines import dirty
from timelines.derivation import drain
from timelines.models import Cluster


class Command(BaseCommand):
    help = "Derive everything the store marked dirty, here and now (any number may run beside workers)."

    def add_arguments(self, parser: CommandParser) -> None:
        what = parser.add_mutually_exclusive_group()
        what.add_argument(
            "--quarantined", action="store_true", help="List the quarantined keys and derive nothing."
        )
        what.add_argument("--retry", action="store_true", help="Put the quarantined keys back, then derive.")
        parser.add_argument("--cluster", help="Only this cluster's keys (--quarantined, --retry).")

    def handle(self, *args: Any, **options: Any) -> None:
        cluster_id = None
        if options["cluster"]:
            cluster = Cluster.objects.filter(name=options["cluster"]).first()
            if cluster is None:
                raise CommandError(f"no cluster named {options['cluster']!r}")
            cluster_id = cluster.pk
        if options["quarantined"]:
            rows = dirty.quarantined(cluster_id=cluster_id)
            for row in rows:
                self.stdout.write(
                    f"{row.cluster.name}\t{row.kind}\t{row.key!a}\tfailures={row.failures}"
                    f"\tfirst={row.first_failed_at.isoformat()}\tlast={row.last_failed_at.isoformat()}"
                    f"\t{row.error}"
                )
            self.stdout.write(f"{len(rows)} quarantined key{'s' if len(rows) != 1 else ''}")
            return
        if options["retry"]:
            back = dirty.retry(cluster_id=cluster_id)
            self.stdout.write(f"put back {back} quarantined key{'s' if back != 1 else ''}")
        count = drain()
        self.stdout.write(f"derived {count} key{'s' if count != 1 else ''}")
        left = len(dirty.quarantined(cluster_id=cluster_id))
        if left:
            self.stdout.write(f"{left} key{'s' if left != 1 else ''} in quarantine: see derive --quarantined")
