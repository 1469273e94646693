"""Shared helpers for the pure parser tests (no Django: run with ``-p no:django``)."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def kubelet_fixture() -> Path:
    return FIXTURES / "kubelet"


@pytest.fixture
def k8s_fixture() -> Path:
    return FIXTURES / "k8s"
