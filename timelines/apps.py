from __future__ import annotations

from django.apps import AppConfig


class TimelinesConfig(AppConfig):
    name = "timelines"
    verbose_name = "Timelines"

    def ready(self) -> None:
        # The store tells the derive stage there is work; wired here, explicitly, not by import side effects.
        from timelines import derivation
        from timelines.signals import observations_stored

        observations_stored.connect(derivation.on_observations_stored, dispatch_uid="podlife-derive-stage")
