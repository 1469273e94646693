from __future__ import annotations

from django.apps import AppConfig


class DemoClusterConfig(AppConfig):
    """Installed only for its two commands (``manage.py demo``, ``manage.py sim``); the demo cluster itself
    imports no Django and runs alone as ``python -m demo_cluster``."""

    name = "demo_cluster"
    verbose_name = "Demo cluster"
