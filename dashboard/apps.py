from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The read side: the query layer, the documents' serialization, the pages, API and live sockets, export and
    import, ``/metrics``. It reads what the pipeline (``timelines``) derived and writes none of its tables; its
    own are who may read what and the API's tokens (``dashboard/models.py``)."""

    name = "dashboard"
    verbose_name = "Dashboard"
