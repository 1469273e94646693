"""``manage.py ingest_token CLUSTER``: make an ingest token for kubelet log shippers and OTLP exporters."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from collectors.models import TOKEN_PREFIX, IngestToken
from timelines import store
from timelines.models import Cluster


class Command(BaseCommand):
    help = (
        "Print a new ingest token for CLUSTER (created when new). Shippers send it as "
        "'Authorization: Bearer TOKEN' to /v1/traces and /ingest/v1/kubelet-logs. Only its hash is kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", help="cluster name (created when new)")
        parser.add_argument("--name", default="", help="what will use the token, e.g. otel-collector")
        parser.add_argument(
            "--list", dest="list_tokens", action="store_true", help="list the cluster's tokens instead"
        )
        parser.add_argument("--revoke", metavar="KEY_ID", help="revoke the token with this key id")

    def handle(
        self, *args: object, cluster: str, name: str, list_tokens: bool, revoke: str | None, **o: object
    ) -> None:
        if list_tokens or revoke:
            target = Cluster.objects.filter(name=cluster).first()
            if target is None:
                raise CommandError(f"no cluster named {cluster!r}")
            if revoke:
                self._revoke(target, revoke)
            else:
                self._list(target)
            return
        try:
            target = store.cluster_for(cluster)
        except ValidationError as exc:
            raise CommandError(f"cluster {cluster!r}: {'; '.join(exc.messages)}") from None
        if target.read_only:
            raise CommandError(f"cluster {cluster!r} is read-only (an imported incident) and takes no data")
        _row, token = IngestToken.issue(target, name=name)
        # The token alone on stdout, so `TOKEN=$(manage.py ingest_token prod)` works; the note goes to stderr.
        self.stdout.write(token)
        self.stderr.write(f"ingest token for cluster {target.name!r}: shown once, only its hash is stored")

    def _list(self, cluster: Cluster) -> None:
        for row in IngestToken.objects.filter(cluster=cluster):
            state = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "active"
            used = f"{row.last_used_at:%Y-%m-%d %H:%M}" if row.last_used_at else "never"
            self.stdout.write(f"{row.key_id}  {state:<24} last used {used:<16} {row.name}")

    def _revoke(self, cluster: Cluster, key_id: str) -> None:
        key_id = key_id.removeprefix(TOKEN_PREFIX).split("_", 1)[0]
        count = IngestToken.objects.filter(cluster=cluster, key_id=key_id, revoked_at=None).update(
            revoked_at=timezone.now()
        )
        if not count:
            raise CommandError(f"no active token with key id {key_id!r} in cluster {cluster.name!r}")
        self.stdout.write(f"revoked {key_id}")
