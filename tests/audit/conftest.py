"""Fixtures of the audit tests: the ingestion servers of tests/ingest (WSGI live server, uvicorn)."""

from __future__ import annotations

from tests.ingest.conftest import asgi_ingest, ingest  # noqa: F401 - fixtures, registered by import
