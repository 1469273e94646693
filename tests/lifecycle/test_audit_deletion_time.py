"""The API lane's terminating starts when the DELETE was made, to the microsecond the audit log knows.

The API server sets ``deletionTimestamp = now + grace`` while it handles a DELETE, and the object carries it
in RFC 3339 with whole seconds, so ``deletionTimestamp - grace`` is the request's second, up to a second
before the request itself. An audited DELETE whose handling (requestReceived … stage) overlaps that second
is the request that set it: the lane starts at its requestReceivedTimestamp. Audit events are the real
tests/fixtures/real/audit/kodekloud-2024 file, or written here in the ``audit.k8s.io/v1`` shape from the
specification and read by the real parser; API snapshots are synthetic (factories)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collectors.parsers.audit import parse_audit
from tests.lifecycle.factories import T0, cond, ctr, pod, t
from tests.lifecycle.test_audit_evidence import KUBECTL, audits_of, pod_delete
from timelines.lifecycle import derive_pod_timeline
from timelines.lifecycle.observation import Kind, Observation

REAL = (
    Path(__file__).resolve().parents[1]
    / "fixtures/real/audit/kodekloud-2024-citadel-webapp-color-deletes.jsonl"
)


def _running(
    uid: str, *, name: str = "web-0", namespace: str = "default", created: float = 0
) -> dict[str, Any]:
    return {
        "phase": "Running",
        "created": created,
        "start_time": created + 1,
        "name": name,
        "namespace": namespace,
        "conditions": [cond("Ready", "True", created + 3)],
        "containers": [ctr("app", "running", started=created + 2)],
    }


def _received(line: bytes, received: float) -> bytes:
    """The event with its requestReceivedTimestamp at T0 + ``received`` (its stage time kept)."""
    doc = json.loads(line)
    doc["requestReceivedTimestamp"] = t(received).isoformat().replace("+00:00", "Z")
    return json.dumps(doc).encode() + b"\n"


def _terminating_start(observations: list[Observation]) -> datetime:
    timeline = derive_pod_timeline(observations)
    return next(iv.start for iv in timeline.lane("api") if iv.state == "terminating")


def test_the_audited_delete_dates_terminating_not_the_whole_second_deletion_timestamp() -> None:
    """GIVEN a DELETE with grace 30 received at T0+20.612345 and completed at T0+20.623456, and the watch
    then showing deletionTimestamp T0+50 (whole seconds: 20.61 + 30 truncated) with grace 30
    THEN terminating starts at T0+20.612345, not at T0+20 (0.6 s before the request)."""
    run = _running("uid-1")
    snapshots = [
        pod("uid-1", 11, 3, **run),
        pod("uid-1", 12, 20.7, deletion=50, deletion_grace=30, **run),
    ]
    delete = _received(
        pod_delete("d-1", 20.623456, "web-0", user="system:admin", agent=KUBECTL, grace=30), 20.612345
    )
    assert _terminating_start(snapshots) == t(20)  # the API alone: the request's second
    assert _terminating_start([*snapshots, *audits_of(delete)]) == t(20.612345)


def test_a_delete_that_could_not_have_set_the_deletion_timestamp_does_not_date_it() -> None:
    """A DELETE handled wholly after the second that deletionTimestamp - grace names (T0+21.3, for T0+20),
    or one asking another grace (0 for a timestamp set with 30), did not set it: the lane keeps T0+20."""
    run = _running("uid-1")
    snapshots = [
        pod("uid-1", 11, 3, **run),
        pod("uid-1", 12, 21.5, deletion=50, deletion_grace=30, **run),
    ]
    late = pod_delete("d-1", 21.3, "web-0", user="system:admin", agent=KUBECTL, grace=30)
    other_grace = pod_delete("d-2", 20.4, "web-0", user="system:admin", agent=KUBECTL, grace=0)
    assert _terminating_start([*snapshots, *audits_of(late)]) == t(20)
    assert _terminating_start([*snapshots, *audits_of(other_grace)]) == t(20)


def test_the_real_kodekloud_deletes_date_terminating_to_the_microsecond() -> None:
    """GIVEN the real kodekloud-2024 audit log (Metadata level: no UID, no body) in which kubectl deletes
    citadel/webapp-color (received 15:15:41.464361, completed .477069) and creates the name again at
    15:15:42.33, so the object was gone within a second (a forced delete: grace 0), and SYNTHETIC
    snapshots of the incarnation it deleted, the watch's last one showing it gone with deletionTimestamp
    15:15:41Z (whole seconds) and grace 0 THEN its API lane is terminating from 15:15:41.464361, and the
    DELETE made right after the next incarnation's CREATE is not taken for this one's."""
    created = (datetime(2024, 3, 26, 15, 10, tzinfo=UTC) - T0).total_seconds()
    requested = (datetime(2024, 3, 26, 15, 15, 41, tzinfo=UTC) - T0).total_seconds()
    run = _running("uid-webapp", name="webapp-color", namespace="citadel", created=created)
    snapshots = [
        pod("uid-webapp", 11, created + 3, **run),
        pod("uid-webapp", 12, requested + 0.49, deleted=True, deletion=requested, deletion_grace=0, **run),
    ]
    audits = [o for o in parse_audit(REAL.read_bytes()).observations if o.kind == Kind.AUDIT]
    assert _terminating_start(snapshots) == datetime(2024, 3, 26, 15, 15, 41, tzinfo=UTC)
    timeline = derive_pod_timeline([*snapshots, *audits])
    term = next(iv for iv in timeline.lane("api") if iv.state == "terminating")
    assert term.start == datetime(2024, 3, 26, 15, 15, 41, 464361, tzinfo=UTC)
    assert term.attrs["who"] == "agent-smith, as kubernetes-admin, via kubectl"
