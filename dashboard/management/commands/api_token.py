"""``manage.py api_token USERNAME``: print a new API bearer token for the user (only its hash is stored)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from dashboard.models import ApiToken
from dashboard.web.access import create_token


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (send it as 'Authorization: Bearer TOKEN')."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A note to tell tokens apart, e.g. 'grafana'.")
        parser.add_argument("--revoke-all", action="store_true", help="Revoke the user's tokens instead.")

    def handle(self, *args: Any, username: str, name: str, revoke_all: bool, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r} (create one with `manage.py createsuperuser`)")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive")
        if revoke_all:
            n = ApiToken.objects.filter(user=user, revoked_at__isnull=True).update(revoked_at=timezone.now())
            self.stderr.write(f"revoked {n} token(s) of {username}")
            return
        self.stdout.write(create_token(user, name=name))
