"""Pods still terminating are re-derived on a schedule: "stuck" is a matter of time, not of new input."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.flow import ingest as ingest_observations
from tests.lifecycle.factories import ctr, pod, t
from timelines.derivation import drain, mark_open_pods
from timelines.models import Finding

pytestmark = pytest.mark.django_db
UID = "5f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f"


def test_a_terminating_pod_becomes_stuck_without_new_observations():
    running = [ctr("app", "running", started=5.0, ready=True)]
    ingest_observations(
        "prod",
        [
            pod(UID, 1, 1.0, phase="Running", start_time=1.0, containers=running),
            pod(
                UID,
                2,
                100.0,
                phase="Running",
                start_time=1.0,
                deletion=110.0,
                deletion_grace=10,
                containers=running,
            ),
        ],
    )
    # (Ingest measured against the wall clock, years after these times: already stuck. Now rewind "now".)
    assert mark_open_pods() == 1 and drain(now=t(100.0) + timedelta(seconds=30)) == 1
    assert not Finding.objects.filter(kind="stuck_terminating").exists()
    assert mark_open_pods() == 1 and drain(now=t(100.0) + timedelta(minutes=5)) == 1
    [stuck] = Finding.objects.filter(kind="stuck_terminating")
    assert stuck.pod_uid == UID and stuck.end is None
