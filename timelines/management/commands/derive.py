"""``manage.py derive``: run the derive stage in this process until nothing is dirty (what a Celery worker's
``timelines.derive_dirty`` task does), e.g. after ``ingest_kubelet_log`` where no worker runs."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from timelines.derivation import drain


class Command(BaseCommand):
    help = "Derive everything the store marked dirty, here and now (any number may run beside workers)."

    def handle(self, *args: object, **options: object) -> None:
        count = drain()
        self.stdout.write(f"derived {count} key{'s' if count != 1 else ''}")
