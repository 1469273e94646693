"""The podlife Django project: settings, URLs, the ASGI application and the Celery app."""

from __future__ import annotations

from podlife_site.celery import app as celery_app

__all__ = ["celery_app"]
