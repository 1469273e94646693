from __future__ import annotations

from django.apps import AppConfig


class TimelinesConfig(AppConfig):
    name = "timelines"
    verbose_name = "Timelines"

    def ready(self) -> None:
        # The store tells the derive stage there is work (the kick, beside the task it queues); wired here,
        # explicitly, not by import side effects.
        from timelines import tasks
        from timelines.signals import DERIVE_RECEIVER, observations_stored

        observations_stored.connect(tasks.on_observations_stored, dispatch_uid=DERIVE_RECEIVER)
