from __future__ import annotations

from django.apps import AppConfig


class AlertsConfig(AppConfig):
    """Findings into the pagers SREs already have: /metrics gauges (``alerts/metrics.py``) and outgoing
    webhooks on new and resolved findings (``alerts/notifier.py`` scans, ``alerts/delivery.py`` sends)."""

    name = "alerts"
    default_auto_field = "django.db.models.BigAutoField"
