"""Kubelet log lines to observations: pod-worker transitions (WORKER) and notable lines (KUBELET_MARKER).

Input is what ``journalctl -u kubelet`` (``-o short``, ``short-iso``, ``short-precise``), a plain kubelet
log file, or the API server's node log proxy gives: klog text lines (1.22-era lowercase ``syncPod enter``
with numeric ``updateType=1``, >=1.27 capitalised, 2024-era JSON-encoded values, multi-line ``key=<``
blocks) or ``--logging-format=json`` lines, each possibly behind a journald prefix.

Matching is on message text, case-insensitively and ignoring punctuation, because kubelet log text is not
covered by API stability (k8s-facts.md section 4). A line that is not a pod-worker transition or a marker
is counted under a skip reason (``SKIP_REASONS``) and dropped; no exception escapes, whatever the input.

The dedupe key of a line is a digest of the node and the klog line *without* its journald prefix, so
the same line read from journald and from a plain file is stored once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any, Final

from timelines.lifecycle.observation import (
    Kind,
    Observation,
    Source,
    TerminationCause,
    Transition,
    digest_key,
)

from .klog import (
    JournaldPrefix,
    KlogHeader,
    opens_block,
    parse_json_record,
    parse_klog_body,
    parse_klog_header,
    split_journald_prefix,
)

__all__ = [
    "KubeletLogParser",
    "LogParseResult",
    "MarkerReason",
    "SKIP_REASONS",
    "parse_kubelet_line",
    "parse_kubelet_log",
]


class MarkerReason:
    """``payload["reason"]`` of KUBELET_MARKER observations (documented in docs/observations.md)."""

    KILLING_CONTAINER = "KillingContainer"
    GRACE_PERIOD = "GracePeriod"
    GRACE_EXCEEDED = "GraceExceeded"
    SYNC_ERROR = "SyncError"
    FAILED_KILL = "FailedKill"
    EVICTING = "Evicting"
    EVICTED = "Evicted"
    EVICTION_FAILED = "EvictionFailed"
    EVICTION_SKIPPED_CRITICAL = "EvictionSkippedCritical"
    EVICTION_RECLAIM = "EvictionReclaim"
    ADMISSION_REJECTED = "AdmissionRejected"
    SHUTDOWN_KILL = "ShutdownKill"
    SHUTDOWN_KILLED = "ShutdownKilled"
    SHUTDOWN_KILL_FAILED = "ShutdownKillFailed"
    SHUTDOWN_KILL_TIMEOUT = "ShutdownKillTimeout"
    CONTAINER_STATE = "ContainerState"
    CONTAINERS_STOPPED = "ContainersStopped"
    ORPHAN_KILL = "OrphanKill"
    VOLUMES_UNMOUNTED = "VolumesUnmounted"
    VOLUMES_PENDING = "VolumesPending"
    VOLUME_PATHS_CLEANED = "VolumePathsCleaned"
    CGROUPS_REMOVED = "CgroupsRemoved"
    STATUS_FINAL = "StatusFinal"
    STATUS_READ_FAILED = "StatusReadFailed"
    DELETED_MUST_BE_KILLED = "DeletedMustBeKilled"


SKIP_REASONS: Final = {
    "blank": "an empty line",
    "too_long": "a line longer than MAX_LINE characters",
    "not_kubelet": "a journald line written by another process (containerd, systemd, ...)",
    "not_klog": "no klog header and not a JSON log record",
    "orphan_continuation": "a continuation line of a key=< block whose first line was not seen",
    "malformed": "a klog header with an impossible date, or a JSON record without ts/msg",
    "unrecognized_message": "a kubelet message that is neither a worker transition nor a marker",
    "untracked_worker_message": "a pod-worker message with no transition of its own (Processing pod event, ...)",
    "no_pod_uid": "a transition or pod marker with no podUID that no earlier line ties to a pod",
}

_QUARTER_HOUR: Final = timedelta(minutes=15)  # UTC offsets are whole quarter hours
_MAX_UTC_OFFSET: Final = timedelta(hours=14)
_PREFIX_LAG: Final = timedelta(minutes=2)  # journald stamps a line moments after the kubelet wrote it
MAX_LINE: Final = 1_000_000  # characters; longer lines are skipped (a runaway line, not a kubelet message)
MAX_BLOCK_LINES: Final = 10_000  # a key=< block longer than this is cut off

# Processes whose journald lines carry kubelet output (the kubelet itself or distributions that embed it).
_KUBELET_IDENTS = ("kubelet", "k3s", "k0s", "rke2", "hyperkube", "kubelite", "microk8s")

_NON_WORD = re.compile(r"[^a-z0-9]+")


def _norm(message: str) -> str:
    """Lowercase, punctuation and spacing folded: the form messages are matched in."""
    return _NON_WORD.sub(" ", message.lower()).strip()


# Messages whose `updateType` key carries the *work type* (k8s-facts.md section 1.1, the naming trap).
_WORK_TYPE_MESSAGES = frozenset(
    _norm(m)
    for m in (
        "Processing pod event",
        "Processing pod event done",
        "Pod is terminal",
        "Sync exited with context cancellation error",
        "Pod cannot start ever",
    )
)

_TRANSITIONS: dict[str, tuple[str, str | None]] = {
    _norm(message): (transition, cause)
    for message, transition, cause in (
        ("Pod is being synced for the first time", Transition.FIRST_SEEN, None),
        ("SyncPod enter", Transition.SYNC_ENTER, None),
        ("SyncPod exit", Transition.SYNC_EXIT, None),
        (
            "Pod is marked for graceful deletion, begin teardown",
            Transition.TERMINATION_REQUESTED,
            TerminationCause.DELETION,
        ),
        (
            "Pod is in a terminal phase (success/failed), begin teardown",
            Transition.TERMINATION_REQUESTED,
            TerminationCause.TERMINAL_PHASE,
        ),
        (
            "Pod is being evicted by the kubelet, begin teardown",
            Transition.TERMINATION_REQUESTED,
            TerminationCause.EVICTED,
        ),
        (
            "Pod is being removed by the kubelet, begin teardown",
            Transition.TERMINATION_REQUESTED,
            TerminationCause.REMOVED,
        ),
        (
            "Pod is orphaned and must be torn down",
            Transition.TERMINATION_REQUESTED,
            TerminationCause.ORPHANED,
        ),
        ("Pod worker has observed request to terminate", Transition.OBSERVED_TERMINATE, None),
        (
            "Pod indicated lifecycle completed naturally and should now terminate",
            Transition.COMPLETED_NATURALLY,
            None,
        ),
        ("SyncTerminatingPod enter", Transition.TERMINATING_ENTER, None),
        ("SyncTerminatingPod exit", Transition.TERMINATING_EXIT, None),
        ("SyncTerminatingRuntimePod enter", Transition.TERMINATING_RUNTIME_ENTER, None),
        ("SyncTerminatingRuntimePod exit", Transition.TERMINATING_RUNTIME_EXIT, None),
        ("Pod terminated all containers successfully", Transition.CONTAINERS_TERMINATED, None),
        (
            "Pod terminated all orphaned containers successfully and worker can now stop",
            Transition.ORPHAN_CONTAINERS_TERMINATED,
            None,
        ),
        ("SyncTerminatedPod enter", Transition.TERMINATED_ENTER, None),
        ("SyncTerminatedPod exit", Transition.TERMINATED_EXIT, None),
        ("Pod is complete and the worker can now stop", Transition.WORKER_DONE, None),
        ("Pod cannot start ever", Transition.CANNOT_START_EVER, None),
        ("Pod cannot start yet", Transition.CANNOT_START_YET, None),
        ("Pod is terminal", Transition.POD_TERMINAL, None),
        ("Pod is finished processing, no further updates", Transition.FINISHED_IGNORED, None),
        (
            "Pod is terminating but has been requested to restart with same UID, will be reconciled later",
            Transition.RESTART_REQUESTED,
            None,
        ),
        (
            "Pod has been terminated but another pod with the same UID was created, remove history to allow restart",
            Transition.UID_REUSE_RESTART,
            None,
        ),
        ("Pod worker has stopped", Transition.WORKER_STOPPED, None),
        (
            "Pod has been terminated and is no longer known to the kubelet, remove all history",
            Transition.FORGOTTEN,
            None,
        ),
        ("Error syncing pod, skipping", Transition.SYNC_ERROR, None),
        ("Sync exited with context cancellation error", Transition.CONTEXT_CANCELLED, None),
        ("Cancelling current pod sync", Transition.CANCELLING_SYNC, None),
        ("Pod is orphaned and has not been started", Transition.ORPHANED, None),
        ("Pod is orphaned and still running, began terminating", Transition.ORPHANED, None),
        ("Pod is orphaned and still terminating, notified the pod worker", Transition.ORPHANED, None),
    )
}

# Pod-worker messages that carry no transition of their own (they repeat on every update): counted apart
# from unknown text so that a log at --v=4 shows where its lines went.
_UNTRACKED_WORKER_MESSAGES = frozenset(
    _norm(m)
    for m in (
        "Processing pod event",
        "Processing pod event done",
        "Notifying pod of pending update",
        "Requeueing pod due to pending update",
        "Pending update already queued",
        "Pod update is ignored, runtime pods can only be killed",
        "Pod update included RunningPod which is only valid when Pod is not specified",
        "Pod is waiting for termination, ignoring runtime-only kill until after pod worker is fully terminated",
        "Pod worker no longer has status, worker should exit",
        "Pod worker has been requested for removal but is still not fully terminated",
    )
)

# Marker rules over the normalised message, first match wins. `node_level` markers may have no pod.
_MARKERS: tuple[tuple[re.Pattern[str], str, bool], ...] = tuple(
    (re.compile(pattern), reason, node_level)
    for pattern, reason, node_level in (
        (r"^killing container with a grace period", MarkerReason.KILLING_CONTAINER, False),
        (
            r"^killing (unwanted )?container \S+ .*with \d+ second grace period",
            MarkerReason.KILLING_CONTAINER,
            False,
        ),
        (r"^pod terminating with grace period", MarkerReason.GRACE_PERIOD, False),
        (r"did not (kill|terminate) the pod within", MarkerReason.GRACE_EXCEEDED, False),
        (r"^error syncing pod", MarkerReason.SYNC_ERROR, False),
        (r"^eviction manager pod is evicted successfully", MarkerReason.EVICTED, False),
        (r"^eviction manager pod failed to evict", MarkerReason.EVICTION_FAILED, False),
        (r"^eviction manager cannot evict a critical pod", MarkerReason.EVICTION_SKIPPED_CRITICAL, False),
        (r"^eviction manager (attempting to reclaim|must evict pod)", MarkerReason.EVICTION_RECLAIM, True),
        (r"^evicting pod", MarkerReason.EVICTING, False),
        (
            r"^failed to admit pod|^predicate failed on pod|pod was rejected",
            MarkerReason.ADMISSION_REJECTED,
            False,
        ),
        (r"^shutdown manager killing pod", MarkerReason.SHUTDOWN_KILL, False),
        (r"^shutdown manager (finished killing|killed) pod", MarkerReason.SHUTDOWN_KILLED, False),
        (r"^shutdown manager failed killing pod", MarkerReason.SHUTDOWN_KILL_FAILED, False),
        (r"^shutdown manager pod killing time ?out", MarkerReason.SHUTDOWN_KILL_TIMEOUT, True),
        (
            r"(error|failed) (killing|to kill) pod|killpod(now)? failed|failed to killpod",
            MarkerReason.FAILED_KILL,
            False,
        ),
        (r"^post termination container state", MarkerReason.CONTAINER_STATE, False),
        (
            r"^pod termination stopped all running (orphaned )?containers",
            MarkerReason.CONTAINERS_STOPPED,
            False,
        ),
        (r"^orphaned running pod terminating without grace period", MarkerReason.ORPHAN_KILL, False),
        (r"^pod termination unmounted volumes", MarkerReason.VOLUMES_UNMOUNTED, False),
        (
            r"^pod is terminated but some volumes have not been cleaned up",
            MarkerReason.VOLUMES_PENDING,
            False,
        ),
        (r"^pod termination cleaned up volume paths", MarkerReason.VOLUME_PATHS_CLEANED, False),
        (r"^pod termination removed cgroups", MarkerReason.CGROUPS_REMOVED, False),
        (r"^pod is terminated and will need no more status updates", MarkerReason.STATUS_FINAL, False),
        (
            r"^unable to read pod status prior to final pod termination",
            MarkerReason.STATUS_READ_FAILED,
            False,
        ),
        (r"^pod has been deleted and must be killed", MarkerReason.DELETED_MUST_BE_KILLED, False),
    )
)
# Cheap test before trying every marker rule (most kubelet lines match none).
_MARKER_HINT = re.compile(r"kill|grace|evict|admit|reject|shutdown|terminat|error syncing|predicate|deleted")
_KILL_ERROR = re.compile(r"kill", re.IGNORECASE)

_WORK_TYPES = {"0": "sync", "1": "terminating", "2": "terminated"}
_WORK_NAMES = frozenset({"sync", "terminating", "terminated"})
# kubetypes.SyncPodType: SyncPodSync=0, SyncPodUpdate=1, SyncPodCreate=2, SyncPodKill=3.
_SYNC_POD_TYPES = {"0": "sync", "1": "update", "2": "create", "3": "kill"}
_SYNC_POD_NAMES = frozenset({"sync", "update", "create", "kill", "unknown"})

_UID = re.compile(r"[0-9A-Za-z][0-9A-Za-z._:-]{0,63}")
# format.Pod in old printf-style lines: name_namespace(uid)
_FORMAT_POD = re.compile(
    r"(?P<name>[a-z0-9][a-z0-9.-]*)_(?P<ns>[a-z0-9][a-z0-9-]*)\((?P<uid>[0-9a-f-]{32,36})\)"
)
_OLD_KILL_GRACE = re.compile(r"with (\d+) second grace period")
_OLD_KILL_CONTAINER = re.compile(r'^Killing (?:unwanted )?container "?([^"\s]+)"?')


@dataclass(slots=True)
class LogParseResult:
    """What ``parse_kubelet_log`` made: observations in input order, lines read, skips by reason."""

    observations: list[Observation] = field(default_factory=list)
    lines_read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class _Record:
    """One logical kubelet line (a klog line and any key=< block lines), prefix-free."""

    klog_lines: list[str]  # the physical lines without journald prefixes
    prefix: JournaldPrefix | None
    header: KlogHeader
    segments: list[str]  # body, then the text after each block's closing " >"
    blocks: list[list[str]]
    open: bool = False


@dataclass(slots=True)
class _Parsed:
    """A line reduced to what the mapping needs."""

    at: datetime
    message: str
    severity: str
    caller: str | None
    values: dict[str, Any]
    dedupe_text: str
    text: str  # for printf-style lines: the whole message, to fish pod references out of


def _as_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return str(value)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip().strip('"'))
        except ValueError:
            return None
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low == "true":
            return True
        if low == "false":
            return False
    return None


def _pod_ref(value: Any) -> tuple[str | None, str | None]:
    """(namespace, name) from a ``pod`` value: ``"ns/name"`` text or a KObj ``{"name","namespace"}``."""
    if isinstance(value, dict):
        name = value.get("name")
        ns = value.get("namespace")
        return (ns if isinstance(ns, str) and ns else None, name if isinstance(name, str) and name else None)
    if isinstance(value, str) and value and value not in ("<nil>", "nil"):
        text = value.strip().strip('"')
        if "/" in text:
            ns, _, name = text.partition("/")
            return (ns or None, name or None)
        return (None, text or None)
    return (None, None)


def _pod_uid(values: dict[str, Any]) -> str | None:
    raw = values.get("podUID")
    if raw is None:
        raw = values.get("podUid", values.get("pod_uid"))
    text = _as_str(raw)
    if not text:
        return None
    text = text.strip("\x00 \t").strip('"')
    if not _UID.fullmatch(text):
        return None
    return text.lower() if len(text) in (32, 36) else text


def is_kubelet_ident(ident: str) -> bool:
    low = ident.lower()
    return any(name in low for name in _KUBELET_IDENTS)


class KubeletLogParser:
    """A streaming kubelet log parser for one node: ``feed`` lines, then ``close``.

    State carried between lines: the year (a month smaller than an earlier one by two or more moves to
    the next year, so a December to January file works; ``short-iso`` journald prefixes give the year
    outright), an open ``key=<`` block, and the last podUID seen for each ``ns/name`` so that pod lines
    without a podUID (e.g. shutdown-manager kills) can still be tied to a pod.
    """

    def __init__(self, *, node: str, year: int, tz: tzinfo, prefix_tz: tzinfo | None = None) -> None:
        self.node = node
        self.tz = tz
        self.prefix_tz = prefix_tz
        self.lines_read = 0
        self.skipped: Counter[str] = Counter()
        self._year = year
        self._max_month: int | None = None
        self._pending: _Record | None = None
        self._uid_by_ref: dict[tuple[str | None, str], str] = {}

    # -- input -----------------------------------------------------------------------------------------

    def feed(self, line: str | bytes) -> list[Observation]:
        """Consume one physical line; return the observations it completed (possibly for earlier lines).

        Never raises: a line that cannot be used is counted in ``skipped`` under a reason.
        """
        self.lines_read += 1
        try:
            return self._feed(line)
        except Exception:  # a parser bug must not lose the rest of the file; count it instead
            self._pending = None
            self.skipped["malformed"] += 1
            return []

    def close(self) -> list[Observation]:
        """Finish: complete a record whose ``key=<`` block never closed. Never raises."""
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        try:
            return self._finish(pending)
        except Exception:
            self.skipped["malformed"] += 1
            return []

    def _feed(self, line: str | bytes) -> list[Observation]:
        if isinstance(line, bytes | bytearray):
            line = bytes(line).decode("utf-8", errors="replace")
        elif not isinstance(line, str):
            self.skipped["malformed"] += 1
            return []
        line = line.rstrip("\r\n")
        out: list[Observation] = []
        if len(line) > MAX_LINE:
            out.extend(self.close())
            self.skipped["too_long"] += 1
            return out
        prefix, rest = split_journald_prefix(line)
        pending = self._pending
        if pending is not None:
            if rest.startswith("\t"):
                pending.klog_lines.append(rest)
                pending.blocks[-1].append(rest[1:])
                if len(pending.klog_lines) > MAX_BLOCK_LINES:
                    out.extend(self.close())
                return out
            if rest.startswith(" >") or rest == ">":
                pending.klog_lines.append(rest)
                tail = rest[2:]
                pending.segments.append(tail)
                if opens_block(tail):
                    pending.blocks.append([])
                    return out
                self._pending = None
                return self._finish(pending)
            out.extend(self.close())  # the block was cut off; use what we have
        if not rest or rest.isspace():
            self.skipped["blank"] += 1
            return out
        if prefix is not None and not is_kubelet_ident(prefix.ident):
            self.skipped["not_kubelet"] += 1
            return out
        if rest.startswith("{"):
            out.extend(self._json_line(rest))
            return out
        parsed_header = parse_klog_header(rest)
        if parsed_header is None:
            if rest.startswith("\t") or rest.startswith(" >"):
                self.skipped["orphan_continuation"] += 1
            elif rest[:1] in "IWEF" and rest[1:5].isdigit():
                self.skipped["malformed"] += 1
            else:
                self.skipped["not_klog"] += 1
            return out
        header, body = parsed_header
        record = _Record([rest], prefix, header, [body], [])
        if opens_block(body):
            record.blocks.append([])
            record.open = True
            self._pending = record
            return out
        out.extend(self._finish(record))
        return out

    # -- klog text ---------------------------------------------------------------------------------------

    def _year_for(self, header: KlogHeader, prefix: JournaldPrefix | None) -> int:
        """The year of a klog header, advancing the rollover state (called for every record, in order)."""
        month = header.month
        if prefix is not None and prefix.year is not None:
            year = prefix.year
            if prefix.month == 1 and month == 12:
                year -= 1
            elif prefix.month == 12 and month == 1:
                year += 1
            self._year, self._max_month = year, month
        else:
            if self._max_month is not None and month <= self._max_month - 2:
                self._year += 1
                self._max_month = month
            elif self._max_month is None or month > self._max_month:
                self._max_month = month
            year = self._year
        return year

    def _klog_time(self, header: KlogHeader, year: int, prefix: JournaldPrefix | None) -> datetime | None:
        try:
            # The header's wall clock, read as UTC for now: its own zone is found next.
            h = header
            wall = datetime(year, h.month, h.day, h.hour, h.minute, h.second, h.microsecond, tzinfo=UTC)
            return wall.replace(tzinfo=self._header_zone(wall, prefix)).astimezone(UTC)
        except (ValueError, OverflowError):
            return None

    def _header_zone(self, wall: datetime, prefix: JournaldPrefix | None) -> tzinfo:
        """The zone of a klog header's wall clock: ``tz``, unless the line's journald prefix says when it
        was written in absolute terms (``short-iso`` carries its offset; ``prefix_tz`` gives the zone of
        the other forms, UTC for the node log query, which runs ``journalctl --utc``). Then the header,
        written in the kubelet's own zone within moments of the prefix, is that instant: the difference
        of the two wall clocks, to the quarter hour, is the node's UTC offset."""
        if prefix is None or prefix.hms is None:
            return self.tz
        zone = timezone(prefix.utcoffset) if prefix.utcoffset is not None else self.prefix_tz
        if zone is None:
            return self.tz
        year = prefix.year
        if year is None:  # short forms: the header's year, across a New Year between the two clocks
            year = (
                wall.year
                + (prefix.month == 1 and wall.month == 12)
                - (prefix.month == 12 and wall.month == 1)
            )
        try:
            written = datetime(year, prefix.month, prefix.day, *prefix.hms, tzinfo=zone).astimezone(UTC)
        except (ValueError, OverflowError):
            return self.tz
        gap = wall - written
        offset = round(gap / _QUARTER_HOUR) * _QUARTER_HOUR
        if abs(offset) > _MAX_UTC_OFFSET or abs(gap - offset) > _PREFIX_LAG:
            return self.tz  # the two clocks do not tell one instant apart: keep the configured zone
        return timezone(offset)

    def _finish(self, record: _Record) -> list[Observation]:
        year = self._year_for(record.header, record.prefix)
        body = record.segments[0]
        # Prefilter on the message alone before parsing every key/value.
        if body.startswith('"'):
            end = body.find('"', 1)
            quick = body[1:end] if end != -1 and body.find("\\", 1, end) == -1 else None
        else:
            quick = body
        if quick is not None and not self._interesting(quick_norm := _norm(quick)):
            self._skip_message(quick_norm)
            return []
        at = self._klog_time(record.header, year, record.prefix)
        if at is None:
            self.skipped["malformed"] += 1
            return []
        joined = "\n".join(record.segments)
        parsed_body = parse_klog_body(joined, record.blocks)
        parsed = _Parsed(
            at=at,
            message=parsed_body.message,
            severity=record.header.severity,
            caller=record.header.caller,
            values=parsed_body.values,
            dedupe_text="\n".join(record.klog_lines),
            text="" if parsed_body.structured else parsed_body.message,
        )
        return self._map(parsed)

    # -- JSON --------------------------------------------------------------------------------------------

    def _json_line(self, text: str) -> list[Observation]:
        rec = parse_json_record(text)
        if rec is None:
            self.skipped["malformed"] += 1
            return []
        norm = _norm(rec.message)
        if not self._interesting(norm):
            self._skip_message(norm)
            return []
        return self._map(
            _Parsed(
                at=rec.observed_at,
                message=rec.message,
                severity=rec.severity,
                caller=rec.caller,
                values=rec.values,
                dedupe_text=text,
                text="",
            )
        )

    # -- meaning -----------------------------------------------------------------------------------------

    def _skip_message(self, norm: str) -> None:
        if norm in _UNTRACKED_WORKER_MESSAGES:
            self.skipped["untracked_worker_message"] += 1
        else:
            self.skipped["unrecognized_message"] += 1

    @staticmethod
    def _interesting(norm: str) -> bool:
        return norm in _TRANSITIONS or _MARKER_HINT.search(norm) is not None

    def _pod_identity(self, parsed: _Parsed) -> tuple[str | None, str | None, str | None, bool]:
        """(uid, namespace, name, uid_inferred) for a line."""
        values = parsed.values
        uid = _pod_uid(values)
        ns, name = _pod_ref(values.get("pod"))
        if parsed.text and (uid is None or name is None):
            m = _FORMAT_POD.search(parsed.text)
            if m is not None:
                uid = uid or m.group("uid")
                ns, name = ns or m.group("ns"), name or m.group("name")
        inferred = False
        if name is not None:
            if uid is not None:
                self._uid_by_ref[(ns, name)] = uid
            else:
                known = self._uid_by_ref.get((ns, name))
                if known is not None:
                    uid, inferred = known, True
        return uid, ns, name, inferred

    def _map(self, parsed: _Parsed) -> list[Observation]:
        norm = _norm(parsed.message)
        transition = _TRANSITIONS.get(norm)
        marker = None
        if _MARKER_HINT.search(norm) is not None:
            for pattern, reason, node_level in _MARKERS:
                if pattern.search(norm):
                    marker = (reason, node_level)
                    break
        if transition is None and marker is None:
            self._skip_message(norm)
            return []
        uid, ns, name, inferred = self._pod_identity(parsed)
        pod_ref = f"{ns}/{name}" if ns and name else name
        values = parsed.values
        error = _as_str(values.get("err", values.get("error")))
        out: list[Observation] = []
        if transition is not None:
            if uid is None:
                self.skipped["no_pod_uid"] += 1
                return []
            out.append(self._worker(parsed, norm, transition, uid, ns, name, pod_ref, error, inferred))
        if marker is not None:
            reason, node_level = marker
            if reason == MarkerReason.SYNC_ERROR and error and _KILL_ERROR.search(error):
                reason = MarkerReason.FAILED_KILL
            if uid is None and name is None and not node_level:
                if not out:
                    self.skipped["no_pod_uid"] += 1
                return out
            # A line that is also a transition gets a distinct key for its marker.
            key_extra = "marker" if out else None
            out.append(self._marker(parsed, reason, uid, ns, name, pod_ref, error, inferred, key_extra))
        return out

    def _dedupe(self, parsed: _Parsed, extra: str | None = None) -> str:
        if extra is None:
            return digest_key(self.node, parsed.dedupe_text)
        return digest_key(self.node, parsed.dedupe_text, extra)

    def _worker(
        self,
        parsed: _Parsed,
        norm: str,
        transition: tuple[str, str | None],
        uid: str,
        ns: str | None,
        name: str | None,
        pod_ref: str | None,
        error: str | None,
        inferred: bool,
    ) -> Observation:
        values = parsed.values
        name_of_transition, cause = transition
        update_raw = _as_str(values.get("updateType"))
        update_raw = update_raw.strip().strip('"').lower() if update_raw is not None else None
        work_raw = _as_str(values.get("workType"))
        work_raw = work_raw.strip().strip('"').lower() if work_raw is not None else None
        work_type: str | None = None
        update_type: str | None = None
        if work_raw is not None:
            work_type = _WORK_TYPES.get(work_raw, work_raw if work_raw in _WORK_NAMES else None)
        if update_raw is not None:
            if norm in _WORK_TYPE_MESSAGES:
                work_type = work_type or _WORK_TYPES.get(
                    update_raw, update_raw if update_raw in _WORK_NAMES else None
                )
            else:
                update_type = _SYNC_POD_TYPES.get(
                    update_raw, update_raw if update_raw in _SYNC_POD_NAMES else None
                )
        payload: dict[str, Any] = {
            "transition": name_of_transition,
            "message": parsed.message,
            "severity": parsed.severity,
            "caller": parsed.caller,
            "work_type": work_type,
            "update_type": update_type,
            "cause": cause,
            "is_terminal": _as_bool(values.get("isTerminal")),
            "grace_period": _as_int(values.get("gracePeriod")),
            "error": error,
            "pod_ref": pod_ref,
        }
        if inferred:
            payload["uid_inferred"] = True
        return Observation(
            kind=Kind.WORKER,
            source=Source.KUBELET_LOG,
            observed_at=parsed.at,
            dedupe_key=self._dedupe(parsed),
            pod_uid=uid,
            node=self.node,
            namespace=ns,
            name=name,
            payload=payload,
        )

    def _marker(
        self,
        parsed: _Parsed,
        reason: str,
        uid: str | None,
        ns: str | None,
        name: str | None,
        pod_ref: str | None,
        error: str | None,
        inferred: bool,
        key_extra: str | None,
    ) -> Observation:
        values = parsed.values
        grace = _as_int(values.get("gracePeriod"))
        container = _as_str(values.get("containerName"))
        if parsed.text:
            grace_m = _OLD_KILL_GRACE.search(parsed.text)
            if grace is None and grace_m is not None:
                grace = int(grace_m.group(1))
            if container is None and reason == MarkerReason.KILLING_CONTAINER:
                cm = _OLD_KILL_CONTAINER.match(parsed.text)
                container = cm.group(1) if cm is not None else None
        payload: dict[str, Any] = {
            "reason": reason,
            "message": parsed.message,
            "severity": parsed.severity,
            "caller": parsed.caller,
            "container": container,
            "grace_period": grace,
            "error": error,
            "pod_ref": pod_ref,
        }
        if reason == MarkerReason.KILLING_CONTAINER:
            payload["container_id"] = _as_str(values.get("containerID"))
            payload["override"] = "override" in parsed.message.lower()
        elif reason == MarkerReason.CONTAINER_STATE:
            payload["containers"] = _as_str(values.get("containers"))
        elif reason in (MarkerReason.EVICTING, MarkerReason.ADMISSION_REJECTED):
            detail = values.get("message")
            if detail is None and reason == MarkerReason.ADMISSION_REJECTED:
                detail = values.get("nodeCondition", values.get("reason"))
            payload["detail"] = (
                _as_str(detail) if not isinstance(detail, list) else ", ".join(map(str, detail))
            )
        elif reason == MarkerReason.EVICTION_RECLAIM:
            payload["resource"] = _as_str(values.get("resourceName"))
        elif reason == MarkerReason.SHUTDOWN_KILL_TIMEOUT:
            payload["priority"] = _as_int(values.get("priority"))
        if inferred:
            payload["uid_inferred"] = True
        return Observation(
            kind=Kind.KUBELET_MARKER,
            source=Source.KUBELET_LOG,
            observed_at=parsed.at,
            dedupe_key=self._dedupe(parsed, key_extra),
            pod_uid=uid,
            node=self.node,
            namespace=ns,
            name=name,
            payload=payload,
        )


def parse_kubelet_log(
    lines: Iterable[str], *, node: str, year: int, tz: tzinfo, prefix_tz: tzinfo | None = None
) -> LogParseResult:
    """Parse a kubelet log (klog text or JSON, with or without journald prefixes) into observations.

    ``node`` names the node the log came from (set on every observation and part of every dedupe key).
    ``year`` is the year of the first line whose header has no year (klog headers carry none; a
    ``short-iso`` journald prefix overrides it); ``tz`` is the zone the klog header times are in, unless
    a line's journald prefix tells it: a ``short-iso`` prefix carries its offset, and ``prefix_tz`` is the
    zone of ``short`` / ``short-precise`` prefixes when known (``journalctl --utc``: UTC). The header is
    then read in the zone that makes it the prefix's instant (``KubeletLogParser._header_zone``).
    Observations are returned in input order with ``observed_at`` in UTC, microseconds kept. Lines that
    give nothing are counted in ``skipped`` by reason (``SKIP_REASONS``). Never raises on bad input
    (bytes elements are decoded as UTF-8 with replacement).
    """
    parser = KubeletLogParser(node=node, year=year, tz=tz, prefix_tz=prefix_tz)
    result = LogParseResult()
    out = result.observations
    try:
        for line in lines:
            out.extend(parser.feed(line))
    except Exception:  # the iterable itself failed (e.g. a decoding error while reading a file)
        parser.skipped["malformed"] += 1
    out.extend(parser.close())
    result.lines_read = parser.lines_read
    result.skipped = parser.skipped
    return result


def parse_kubelet_line(line: str, *, node: str, year: int, tz: tzinfo) -> LogParseResult:
    """Parse one logical kubelet line (a multi-line ``key=<`` record may be given with embedded newlines).

    Same contract as ``parse_kubelet_log`` for a single record.
    """
    if isinstance(line, bytes | bytearray):
        line = bytes(line).decode("utf-8", errors="replace")
    parts = str(line).split("\n")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parse_kubelet_log(parts, node=node, year=year, tz=tz)
