"""The scan: which findings are new to a destination, and which it was told of have ended.

Findings are derived rows that the derive stage replaces wholesale, so the scan does not hook into it:
it reads the findings of live clusters that are open or ended within ``PODLIFE_METRICS_RECENT_S``, names
each by a stable identity (cluster, subject, subject name, pod UID, kind, start: all survive
re-derivation), and compares them with each destination's ``NotifiedFinding`` rows. A new identity
queues a "new" delivery (saying whether the finding is still open); an identity told as open whose
finding has ended, or is gone, queues a "resolved" one. A finding whose start new evidence moved is not
new: the row told of it follows it (``_moved``), and its end is told under the identity told first. The
same state twice queues nothing: running the
scan again, on any number of workers, is safe (one destination is scanned under a row lock at a time).

Imported and offline clusters are history, never paged about.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from alerts.messages import Event, FindingView, build, event_id
from alerts.models import SEVERITIES, Delivery, Destination, NotifiedFinding, split_list
from timelines.models import Cluster, Finding

log = logging.getLogger(__name__)

CHUNK = 500  # identities per IN (...) lookup
# Closed NotifiedFinding rows are kept this long past the look-back window, then dropped: by then their
# findings are out of the window and can never be "new" again.
PRUNE_MARGIN = timedelta(hours=1)


@dataclass(frozen=True)
class ScanResult:
    new: int = 0
    resolved: int = 0


def identity(cluster: str, subject: str, subject_name: str, pod_uid: str, kind: str, start: datetime) -> str:
    """A finding's stable name: the same finding re-derived (new row id, same facts) keeps it."""
    parts = (cluster, subject, subject_name, pod_uid or "", kind, start.astimezone(UTC).isoformat())
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


_COLUMNS = (
    "cluster__name",
    "subject",
    "subject_name",
    "pod_uid",
    "namespace",
    "node",
    "kind",
    "severity",
    "message",
    "start",
    "end",
)


def _views(rows: Iterable[tuple]) -> dict[str, FindingView]:  # type: ignore[type-arg]
    out: dict[str, FindingView] = {}
    for cluster, subject, subject_name, pod_uid, namespace, node, kind, severity, message, start, end in rows:
        key = identity(cluster, subject, subject_name, pod_uid or "", kind, start)
        out[key] = FindingView(
            identity=key,
            cluster=cluster,
            subject=subject,
            subject_name=subject_name,
            pod_uid=pod_uid or "",
            namespace=namespace,
            node=node,
            kind=kind,
            severity=severity,
            message=message,
            start=start,
            end=end,
        )
    return out


def current_findings(now: datetime, lookback: timedelta) -> dict[str, FindingView]:
    """Findings of live clusters that are open, or ended within ``lookback`` of ``now``, by identity."""
    rows = (
        Finding.objects.filter(cluster__origin=Cluster.Origin.LIVE)
        .filter(Q(end__isnull=True) | Q(end__gte=now - lookback))
        .values_list(*_COLUMNS)
    )
    return _views(rows)


def _lookup(row: NotifiedFinding) -> FindingView | None:
    """The finding a NotifiedFinding row follows, wherever its end lies (None: it is gone)."""
    rows = Finding.objects.filter(
        cluster__name=row.cluster,
        subject=row.subject,
        subject_name=row.subject_name,
        kind=row.kind,
        start=row.start,
    ).values_list(*_COLUMNS)
    found = _views(rows)
    return found.get(row.follows)


def matches(dest: Destination, f: FindingView) -> bool:
    """Whether ``dest``'s filters let ``f`` through (blank filter: everything)."""

    def allowed(patterns: str, value: str) -> bool:
        wanted = split_list(patterns)
        return not wanted or any(fnmatch.fnmatchcase(value, p) for p in wanted)

    rank = SEVERITIES.index(f.severity) if f.severity in SEVERITIES else len(SEVERITIES)
    return (
        rank >= SEVERITIES.index(dest.min_severity)
        and allowed(dest.clusters, f.cluster)
        and allowed(dest.namespaces, f.namespace)
        and allowed(dest.kinds, f.kind)
    )


def scan(*, now: datetime | None = None) -> ScanResult:
    """Queue deliveries for every enabled destination; returns how many new / resolved were queued."""
    now = now or timezone.now()
    lookback = timedelta(seconds=settings.PODLIFE_METRICS_RECENT_S)
    current = current_findings(now, lookback)
    total = ScanResult()
    for pk in Destination.objects.filter(enabled=True).values_list("pk", flat=True):
        result = scan_destination(pk, current, now=now, lookback=lookback)
        total = ScanResult(total.new + result.new, total.resolved + result.resolved)
    return total


def scan_destination(
    pk: int, current: dict[str, FindingView], *, now: datetime, lookback: timedelta
) -> ScanResult:
    with transaction.atomic():
        # One scan of a destination at a time (several workers may run the periodic task at once).
        dest = Destination.objects.select_for_update().filter(pk=pk, enabled=True).first()
        if dest is None:
            return ScanResult()
        wanted = {key: f for key, f in current.items() if matches(dest, f)}
        known: dict[str, NotifiedFinding] = {}  # by the identity each row follows
        keys = list(wanted)
        for i in range(0, len(keys), CHUNK):
            for row in NotifiedFinding.objects.filter(destination=dest, follows__in=keys[i : i + CHUNK]):
                known[row.follows] = row
        for row in NotifiedFinding.objects.filter(destination=dest, open=True):
            known.setdefault(row.follows, row)
        # Queued in the order the findings began: a receiver reads them as a story.
        fresh = sorted(
            (f for f in wanted.values() if f.identity not in known), key=lambda f: (f.start, f.identity)
        )
        moved, fresh = _moved(dest, fresh, known, current)

        new_rows: list[NotifiedFinding] = []
        deliveries: list[Delivery] = []
        for f in fresh:
            new_rows.append(
                NotifiedFinding(
                    destination=dest,
                    identity=f.identity,
                    follows=f.identity,
                    cluster=f.cluster,
                    subject=f.subject,
                    subject_name=f.subject_name,
                    pod_uid=f.pod_uid,
                    namespace=f.namespace,
                    kind=f.kind,
                    severity=f.severity,
                    start=f.start,
                    open=f.open,
                    first_notified_at=now,
                    resolved_at=None if f.open else now,
                )
            )
            deliveries.append(_delivery(dest, "new", f, now))

        resolved: list[NotifiedFinding] = []
        for row in sorted(known.values(), key=lambda r: (r.start, r.identity)):
            if not row.open:
                continue
            found = current[row.follows] if row.follows in current else _lookup(row)
            if found is not None and found.open:
                continue
            # None: the derive stage no longer finds it: resolved, end unknown
            gone = replace(found, identity=row.identity) if found is not None else _gone(row)
            row.open, row.resolved_at = False, now
            resolved.append(row)
            if dest.notify_resolved:
                deliveries.append(_delivery(dest, "resolved", gone, now))

        NotifiedFinding.objects.bulk_create(new_rows, batch_size=CHUNK)
        NotifiedFinding.objects.bulk_update(moved, ["follows", "start", "severity"], batch_size=CHUNK)
        NotifiedFinding.objects.bulk_update(resolved, ["open", "resolved_at"], batch_size=CHUNK)
        Delivery.objects.bulk_create(deliveries, batch_size=CHUNK, ignore_conflicts=True)
        NotifiedFinding.objects.filter(
            destination=dest, open=False, resolved_at__lt=now - lookback - PRUNE_MARGIN
        ).delete()
    if new_rows or resolved:
        log.info("alerts: %s: %d new, %d resolved finding(s) queued", dest.name, len(new_rows), len(resolved))
    return ScanResult(len(new_rows), len(resolved))


def _moved(
    dest: Destination,
    fresh: list[FindingView],
    known: dict[str, NotifiedFinding],
    current: dict[str, FindingView],
) -> tuple[list[NotifiedFinding], list[FindingView]]:
    """Pair each finding the destination was not told of with a told row whose finding is gone and that
    speaks of the same thing: same cluster, subject, pod UID and kind, overlapping in time. That is one
    finding whose start new evidence moved (an API event dates a termination to the second, the kubelet's
    line that arrives later to the microsecond): the row follows it (``follows``, ``start``) and keeps the
    identity the destination was told, so the destination hears of it once, and of its end under the same
    identity. Returns the rows that now follow another finding (``known`` updated) and the findings left
    unpaired: those are new."""
    if not fresh:
        return [], fresh
    subjects = {(f.cluster, f.subject_name, f.kind) for f in fresh}
    candidates: dict[int, NotifiedFinding] = {
        row.pk: row for row in known.values() if row.follows not in current
    }
    names = sorted({name for _, name, _ in subjects})
    for i in range(0, len(names), CHUNK):
        for row in NotifiedFinding.objects.filter(destination=dest, subject_name__in=names[i : i + CHUNK]):
            if (row.cluster, row.subject_name, row.kind) in subjects and row.follows not in current:
                candidates.setdefault(row.pk, row)
    lost: dict[tuple[str, str, str, str, str], list[NotifiedFinding]] = {}
    for row in candidates.values():
        if _lookup(row) is None:  # its finding is gone, not merely out of the window
            lost.setdefault((row.cluster, row.subject, row.subject_name, row.pod_uid, row.kind), []).append(
                row
            )
    if not lost:
        return [], fresh
    moved: list[NotifiedFinding] = []
    unpaired: list[FindingView] = []
    for f in fresh:
        rows = lost.get((f.cluster, f.subject, f.subject_name, f.pod_uid, f.kind), [])
        # A row told as ended pairs only with an ended finding: one open again is news.
        fits = [r for r in rows if _overlaps(r, f) and (r.open or not f.open)]
        if not fits:
            unpaired.append(f)
            continue
        row = min(fits, key=lambda r: (abs((r.start - f.start).total_seconds()), r.pk))
        rows.remove(row)
        known.pop(row.follows, None)
        row.follows, row.start, row.severity = f.identity, f.start, f.severity
        known[row.follows] = row
        moved.append(row)
    return moved, unpaired


def _overlaps(row: NotifiedFinding, f: FindingView) -> bool:
    """Whether the told row's time (its start to when it was told ended, or on) meets ``f``'s."""
    row_end = row.resolved_at if not row.open else None
    return (row_end is None or f.start <= row_end) and (f.end is None or f.end >= row.start)


def _gone(row: NotifiedFinding) -> FindingView:
    return FindingView(
        identity=row.identity,
        cluster=row.cluster,
        subject=row.subject,
        subject_name=row.subject_name,
        pod_uid="",
        namespace=row.namespace,
        node="",
        kind=row.kind,
        severity=row.severity,
        message=f"The {row.kind.replace('_', ' ')} finding of {row.subject_name} is no longer found.",
        start=row.start,
        end=None,
    )


def _delivery(dest: Destination, event: Event, f: FindingView, now: datetime) -> Delivery:
    return Delivery(
        destination=dest,
        event_id=event_id(f.identity, event),
        event=event,
        body=build(dest.format, event, f, now),
        created_at=now,
        next_attempt_at=now,
    )


def queue_test_message(dest: Destination, *, now: datetime | None = None) -> Delivery:
    """A delivery that shows a destination works (the admin's "send a test message" action)."""
    now = now or timezone.now()
    f = FindingView(
        identity=f"test-{int(now.timestamp() * 1e6)}",
        cluster="podlife-test",
        subject="pod",
        subject_name="default/podlife-test",
        pod_uid="",
        namespace="default",
        node="",
        kind="test",
        severity="info",
        message="A test message from podlife: this destination is configured correctly.",
        start=now,
        end=None,
    )
    return Delivery.objects.create(
        destination=dest,
        event_id=event_id(f.identity, "test"),
        event="test",
        body=build(dest.format, "test", f, now),
        created_at=now,
        next_attempt_at=now,
    )
