"""Fixtures of the poison tests (issue #35): the ingestion routes at the site root, an ingest token."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.models import IngestToken
from timelines import store


@pytest.fixture
def token() -> str:
    """A fresh ingest token of cluster ``prod``."""
    _row, secret = IngestToken.issue(store.cluster_for("prod"))
    return secret


@pytest.fixture
def quick_retries(settings: Any) -> None:
    settings.PODLIFE_DERIVE_MAX_FAILURES = 3
    settings.PODLIFE_DERIVE_RETRY_S = 0.0  # due again at once: the tests need no clock
