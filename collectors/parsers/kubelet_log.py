"""Kubelet log lines to observations: pod-worker transitions (WORKER) and notable lines (KUBELET_MARKER).

Input is what ``journalctl -u kubelet`` (``-o short``, ``short-iso``, ``short-precise``), a plain kubelet
log file, or the API server's node log proxy gives: klog text lines (1.22-era lowercase ``syncPod enter``
with numeric ``updateType=1``, >=1.27 capitalised, 2024-era JSON-encoded values, multi-line ``key=<``
blocks) or ``--logging-format=json`` lines, each possibly behind a journald prefix.

Matching is on message text, case-insensitively and ignoring punctuation, because kubelet log text is not
covered by API stability (k8s-facts.md section 4). Lines below V4 (SyncLoop, PLEG, kills, the shutdown and
eviction managers, the startup-latency tracker, the status manager) are read too (docs/kubelet-lines.md);
those naming a pod only as ``ns/name`` are kept without a UID, and lines cut short (a pager, `systemctl
status`) never give a name or a UID. A line that is not a pod-worker transition or a marker
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
    time_problem,
)

from .klog import (
    JournaldPrefix,
    KlogHeader,
    opens_block,
    parse_json_record,
    parse_klog_body,
    parse_klog_header,
    split_journald_prefix,
    unwrap_line,
)

__all__ = [
    "KubeletLogParser",
    "LogParseResult",
    "MarkerReason",
    "SKIP_REASONS",
    "parse_kubelet_line",
    "parse_kubelet_log",
    "top_unrecognized",
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
    RECREATED = "Recreated"  # the status manager: the pod of oldPodUID was deleted and its name recreated
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
    PRESTOP_STARTED = "PreStopHook"  # the preStop hook (exec, httpGet or 1.29+ sleep) begins (V3)
    PRESTOP_DONE = "PreStopHookDone"  # V3
    PRESTOP_UNFINISHED = "PreStopHookUnfinished"  # V2: the grace period ran out first
    # Below V4 (docs/kubelet-lines.md); those naming pods only as ns/name carry no UID.
    EVICTION_RANKED = "EvictionRanked"  # one per pod ranked, payload rank / ranked
    EVICTION_CLEANUP_WAIT = "EvictionCleanupWait"
    EVICTION_CLEANED_UP = "EvictionCleanedUp"
    EVICTION_CLEANUP_TIMEOUT = "EvictionCleanupTimeout"
    CONTAINER_RESTART = "ContainerRestart"  # "Message for Container of pod": why a container restarts
    SHUTDOWN_DETECTED = "ShutdownDetected"  # node level
    KUBELET_SERVICE = "KubeletService"  # systemd starting / stopping the kubelet unit (node level)
    # The volume manager (V0/V1 lines, all versions; the pod's UID is in the text): docs/kubelet-lines.md.
    VOLUME_ATTACH_VERIFY = "VolumeAttachVerify"  # a volume of a pod being set up (payload volume)
    VOLUME_MOUNT_STARTED = "VolumeMountStarted"  # a first mount of it began (not a remount)
    VOLUME_MOUNTED = "VolumeMounted"  # MountVolume.SetUp succeeded
    VOLUME_UNMOUNT_STARTED = "VolumeUnmountStarted"  # the pod's containers are gone: its volumes go
    VOLUME_TORN_DOWN = "VolumeTornDown"
    POD_DIR_CLEANED = "PodVolumesDirCleaned"  # "Cleaned up orphaned pod volumes dir": nothing of it is left
    # The device manager admitting a pod that requests devices (its admit handler, in HandlePodAdditions).
    DEVICE_ALLOCATION = "DeviceAllocation"


SKIP_REASONS: Final = {
    "blank": "an empty line",
    "too_long": "a line longer than MAX_LINE characters",
    "not_kubelet": "a journald line written by another process (containerd, systemd, ...)",
    "not_klog": "no klog header and not a JSON log record",
    "orphan_continuation": "a continuation line of a key=< block whose first line was not seen",
    "malformed": "a klog header with an impossible date, or a JSON record without ts/msg",
    "parser_error": "a line podlife failed on: a bug in podlife, named with its line in ``errors`` (report it)",
    "unreadable_input": "the input stopped with an error while being read (named in ``errors``)",
    "out_of_range": "a time outside the supported range (1970 to 9000; docs/configuration.md)",
    "unrecognized_message": "a kubelet message that is neither a worker transition nor a marker",
    "untracked_worker_message": "a pod-worker message with no transition of its own (Processing pod event, ...)",
    "no_pod_uid": "a V4 pod-worker transition with no podUID",
    "no_pod": "a pod line that names no pod at all",
    "cut": "a line cut off before its pod name, UID or message ended (a pager's or `systemctl status`'s cut)",
    "bad_pod_name": "a pod name or namespace Kubernetes would not accept (a damaged line)",
    "bad_uid": "a podUID that is neither a UUID nor a 32-hex static pod hash (a damaged line)",
}

_QUARTER_HOUR: Final = timedelta(minutes=15)  # UTC offsets are whole quarter hours
_MAX_UTC_OFFSET: Final = timedelta(hours=14)
_PREFIX_LAG: Final = timedelta(minutes=2)  # journald stamps a line moments after the kubelet wrote it
MAX_LINE: Final = 1_000_000  # characters; longer lines are skipped (a runaway line, not a kubelet message)
MAX_BLOCK_LINES: Final = 10_000  # a key=< block longer than this is cut off
# Unrecognised message texts are counted per text (``unrecognized``), the first 120 characters of each,
# at most this many distinct texts; the rest together under OTHER_MESSAGES (a printf-era log whose texts
# carry values never grows without bound).
MAX_MESSAGE_TEXT: Final = 120
MAX_MESSAGE_TEXTS: Final = 5_000
MAX_ERRORS: Final = 5  # lines podlife failed on, kept with where and the error (the rest only counted)
OTHER_MESSAGES: Final = "(other texts)"

# Processes whose journald lines carry kubelet output (the kubelet itself or distributions that embed it).
# OpenShift 4.14+ runs the kubelet under `kubenswrapper` (journald `kubenswrapper[pid]:`), older OpenShift under
# `hyperkube`; k3s, k0s, rke2 and microk8s (`kubelite`) embed it; `kubelet.service`-style names contain it.
_KUBELET_IDENTS = ("kubelet", "k3s", "k0s", "rke2", "hyperkube", "kubelite", "microk8s", "kubenswrapper")

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
        # 1.23–1.26: a worker whose pod never started (first seen terminal) stops without a cleanup sync.
        ("Pod never started and the worker can now stop", Transition.WORKER_DONE, None),
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
        ("Notifying pod of pending update", Transition.PENDING_UPDATE, None),
        # Below V4: lines that name the pod (some only as ns/name) and bound the worker's phases.
        ("Generic (PLEG): container finished", Transition.CONTAINER_FINISHED, None),
        ("Observed pod startup duration", Transition.STARTUP_OBSERVED, None),
        ("Mark when the pod was running for the first time", Transition.RUNNING_MARKED, None),
        ("Status for pod updated successfully", Transition.STATUS_UPDATED, None),
        ("Marking terminal pod as failed", Transition.MARKED_FAILED, None),
        ("Delaying pod deletion as the phase is non-terminal", Transition.DELETION_DELAYED, None),
        (
            "The pod termination is finished as SyncTerminatedPod completes its execution",
            Transition.TERMINATION_FINISHED,
            None,
        ),
        ("Pod fully terminated and removed from etcd", Transition.REMOVED_FROM_ETCD, None),
    )
}
# Transitions that may name their pod only as ns/name: kept without a UID (resolved at derive time).
_UIDLESS_OK = frozenset(
    {
        Transition.STARTUP_OBSERVED,
        Transition.RUNNING_MARKED,
        Transition.STATUS_UPDATED,
        Transition.REMOVED_FROM_ETCD,
    }
)
# SyncLoop config lines list the pods they concern (no UID, 1.21+): one observation per pod named.
_SYNCLOOP = {
    _norm("SyncLoop ADD"): Transition.SYNCLOOP_ADD,
    _norm("SyncLoop UPDATE"): Transition.SYNCLOOP_UPDATE,
    _norm("SyncLoop DELETE"): Transition.SYNCLOOP_DELETE,
    _norm("SyncLoop REMOVE"): Transition.SYNCLOOP_REMOVE,
    _norm("SyncLoop RECONCILE"): Transition.SYNCLOOP_RECONCILE,
    _norm("SyncLoop (SYNC) pods"): Transition.SYNCLOOP_SYNC,
}
_PLEG = _norm("SyncLoop (PLEG): event for pod")
_PLEG_TYPES = {"ContainerStarted": Transition.CONTAINER_STARTED, "ContainerDied": Transition.CONTAINER_DIED}
# The status manager (1.19+, V3): "Pod was deleted and then recreated, skipping status update" oldPodUID=..
# podUID=..: the incarnation of oldPodUID is gone, its name taken by podUID.
_RECREATED = _norm("Pod was deleted and then recreated, skipping status update")
_PROCESS_START = frozenset(_norm(m) for m in ("Kubelet version",))

# The klog V level each recognised message is logged at (docs/kubelet-lines.md): a process whose lines
# include a level-N message runs at --v=N or more. Unlisted messages tell nothing.
_LEVELS: dict[str, int] = {
    _norm(m): level
    for level, messages in (
        (
            4,
            (
                "Pod is being synced for the first time",
                "SyncPod enter",
                "SyncPod exit",
                "Pod is marked for graceful deletion, begin teardown",
                "Pod is in a terminal phase (success/failed), begin teardown",
                "Pod is being evicted by the kubelet, begin teardown",
                "Pod is being removed by the kubelet, begin teardown",
                "Notifying pod of pending update",
                "Processing pod event",
                "Processing pod event done",
                "Pod worker has observed request to terminate",
                "SyncTerminatingPod enter",
                "SyncTerminatingPod exit",
                "Pod terminated all containers successfully",
                "SyncTerminatedPod enter",
                "SyncTerminatedPod exit",
                "Pod is complete and the worker can now stop",
                "Pod never started and the worker can now stop",
                "Pod terminating with grace period",
                "Post-termination container state",
                "Pod termination stopped all running containers",
                "Pod termination unmounted volumes",
                "Pod termination removed cgroups",
                "Pod is terminated and will need no more status updates",
                "SyncLoop RECONCILE",
                "SyncLoop (SYNC) pods",
            ),
        ),
        (
            3,
            (
                "Cancelling current pod sync",
                "Pod worker has stopped",
                "Status for pod updated successfully",
                "Pod fully terminated and removed from etcd",
                "The pod termination is finished as SyncTerminatedPod completes its execution",
                "Delaying pod deletion as the phase is non-terminal",
                "Mark when the pod was running for the first time",
                "Marking terminal pod as failed",
                "Evicting pod",
                "Pod has been deleted and must be killed",
                "Pod termination cleaned up volume paths",
                "Killing container with a grace period override",
                "Generating pod status",
            ),
        ),
        (
            2,
            (
                "SyncLoop ADD",
                "SyncLoop UPDATE",
                "SyncLoop DELETE",
                "SyncLoop REMOVE",
                "SyncLoop (PLEG): event for pod",
                "Generic (PLEG): container finished",
                "Sync exited with context cancellation error",
                "Killing container with a grace period",
                "Message for Container of pod",
            ),
        ),
    )
    for m in messages
}

# Pod-worker messages that carry no transition of their own (they repeat on every update): counted apart
# from unknown text so that a log at --v=4 shows where its lines went.
_UNTRACKED_WORKER_MESSAGES = frozenset(
    _norm(m)
    for m in (
        "Processing pod event",
        "Processing pod event done",
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
        (r"^running prestop hook", MarkerReason.PRESTOP_STARTED, False),
        (r"^prestop hook completed", MarkerReason.PRESTOP_DONE, False),
        (r"^prestop hook not completed in grace period", MarkerReason.PRESTOP_UNFINISHED, False),
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
        (r"^pod admission denied", MarkerReason.ADMISSION_REJECTED, False),
        (r"^eviction manager pods ranked for eviction", MarkerReason.EVICTION_RANKED, False),
        (
            r"^eviction manager pods evicted waiting for pod to be cleaned up",
            MarkerReason.EVICTION_CLEANUP_WAIT,
            False,
        ),
        (r"^eviction manager pods successfully cleaned up", MarkerReason.EVICTION_CLEANED_UP, False),
        (
            r"^eviction manager timed out waiting for pods to be cleaned up",
            MarkerReason.EVICTION_CLEANUP_TIMEOUT,
            False,
        ),
        (r"^message for container of pod", MarkerReason.CONTAINER_RESTART, False),
        (
            r"^need devices to allocate for pod|^issuing a getpreferredallocation call for container",
            MarkerReason.DEVICE_ALLOCATION,
            False,
        ),
        (
            r"^shutdown manager (detected new shutdown event|processing shutdown event)",
            MarkerReason.SHUTDOWN_DETECTED,
            True,
        ),
    )
)
# The volume manager's lines about one volume of one pod (reconciler, operation generator): the message is
# GenerateMsgDetailed's text, `... for volume "V" (UniqueName: "U") pod "NAME" (UID: "UID") ...` (the
# unmount lines give the UID as the pod's name), in every version; 1.20+ adds `pod=ns/name` after it.
_VOLUME_LINES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (r"^operationexecutor verifycontrollerattachedvolume started for volume", "VolumeAttachVerify"),
        (r"^operationexecutor mountvolume started for volume", "VolumeMountStarted"),
        (r"^mountvolume setup succeeded for volume", "VolumeMounted"),
        (r"^operationexecutor unmountvolume started for volume", "VolumeUnmountStarted"),
        (r"^unmountvolume teardown succeeded for volume", "VolumeTornDown"),
        (r"^cleaned up orphaned pod volumes dir", "PodVolumesDirCleaned"),
    )
)
_VOLUME_HINT = re.compile(r"volume")
_VOLUME_UID = re.compile(r'\(UID: "?(?P<uid>[0-9a-fA-F-]{32,36})"?\)')
_UNIQUE_NAME = re.compile(r'\(UniqueName: "?(?P<v>[^")]+)"?\)')
_FOR_VOLUME = re.compile(r'for volume "(?P<v>[^"]+)"')
# A remount of a mounted volume (a secret's refresh) is logged at V5 with this text: no setup.
_REMOUNT = "remount was requested"
# Markers whose `pods` key lists the pods they concern (one observation each).
_LIST_MARKERS = frozenset(
    {
        MarkerReason.EVICTION_RANKED,
        MarkerReason.EVICTION_CLEANUP_WAIT,
        MarkerReason.EVICTION_CLEANED_UP,
        MarkerReason.EVICTION_CLEANUP_TIMEOUT,
    }
)
# Cheap test before trying every marker rule (most kubelet lines match none).
_MARKER_HINT = re.compile(
    r"kill|grace|evict|admit|reject|shutdown|terminat|error syncing|predicate|deleted|admission|message for container|prestop|allocat"
)
_KILL_ERROR = re.compile(r"kill", re.IGNORECASE)
# Keys that identify the pod a line is about: a line cut off inside one of them says nothing usable.
_IDENTITY_KEYS = frozenset({"pod", "podUID", "podID", "pods", "event"})

_WORK_TYPES = {"0": "sync", "1": "terminating", "2": "terminated"}
_WORK_NAMES = frozenset({"sync", "terminating", "terminated"})
# kubetypes.SyncPodType: SyncPodSync=0, SyncPodUpdate=1, SyncPodCreate=2, SyncPodKill=3.
_SYNC_POD_TYPES = {"0": "sync", "1": "update", "2": "create", "3": "kill"}
_SYNC_POD_NAMES = frozenset({"sync", "update", "create", "kill", "unknown"})

# format.Pod in old printf-style lines: name_namespace(uid)
_FORMAT_POD = re.compile(
    r"(?P<name>[a-z0-9][a-z0-9.-]*)_(?P<ns>[a-z0-9][a-z0-9-]*)\((?P<uid>[0-9a-f-]{32,36})\)"
)
# Kubelets before 1.20 printed these lines printf-style, with format.Pod's `name_namespace(uid)` (and
# format.Pods: those joined by ", "); each is read as the structured message that replaced it
# (docs/kubelet-lines.md, "Kubelets before 1.20"). 1.16-1.19 kubelet.go syncLoopIteration:
#   SyncLoop (ADD, "api"): "a_ns(uid), b_ns(uid)"       -> "SyncLoop ADD" source=api pods=[...]
#   SyncLoop (SYNC): 1 pods; a_ns(uid)                   -> "SyncLoop (SYNC) pods" pods=[...]
#   SyncLoop (PLEG): "a_ns(uid)", event: &pleg.PodLifecycleEvent{ID:"uid", Type:"ContainerDied", Data:"id"}
#                                                        -> "SyncLoop (PLEG): event for pod" pod=ns/a event={...}
# and kubelet_pods.go: Pod "a_ns(uid)" is terminated, but some volumes have not been cleaned up.
_OLD_SYNCLOOP = re.compile(
    r'SyncLoop \((?P<op>ADD|UPDATE|DELETE|REMOVE|RECONCILE), "(?P<source>[^"]*)"\): "(?P<pods>.*)"'
)
_OLD_SYNC = re.compile(r"SyncLoop \(SYNC\): \d+ pods; (?P<pods>.*)")
_OLD_PLEG = re.compile(
    r'SyncLoop \(PLEG\): "(?P<pod>[^"]*)", event: &pleg\.PodLifecycleEvent\{ID:"(?P<ID>[^"]*)", '
    r'Type:"(?P<Type>[^"]*)", Data:(?P<Data>.*)\}'
)
_OLD_POD_LINE = re.compile(
    r'Pod "(?P<pod>[^"]*)" (?P<rest>is terminated, but some volumes have not been cleaned up)'
)


# The kubelet echoes each event it records (client-go's recorder, `StartLogging` at V3): up to 1.2x as
#   Event(v1.ObjectReference{Kind:"Pod", Namespace:"ns", Name:"n", UID:"uid", ..., FieldPath:"spec.containers{c}"}):
#   type: 'Normal' reason: 'Killing' Stopping container c
# later as the structured "Event occurred" object="ns/n" fieldPath=... kind="Pod" type=... reason=...
# message=... (no UID). Read as "Event occurred" with those values.
_OLD_EVENT = re.compile(
    r"Event\(v1\.ObjectReference\{(?P<ref>.*?)\}\): type: '(?P<type>[^']*)' reason: '(?P<reason>[^']*)' "
    r"(?P<message>.*)"
)
_REF_FIELD = re.compile(r'(\w+):"([^"]*)"')
_EVENT = "event occurred"


def _old_pods(text: str) -> list[str]:
    return [item.strip() for item in text.split(", ") if item.strip()]


def _legacy_printf(body: str) -> tuple[str, dict[str, Any]] | None:
    """(the structured message, its values) a pre-1.20 printf-style line stands for; None otherwise."""
    text = body.strip()
    m = _OLD_SYNCLOOP.fullmatch(text)
    if m is not None:
        return f"SyncLoop {m.group('op')}", {"source": m.group("source"), "pods": _old_pods(m.group("pods"))}
    m = _OLD_SYNC.fullmatch(text)
    if m is not None:
        return "SyncLoop (SYNC) pods", {"pods": _old_pods(m.group("pods"))}
    m = _OLD_PLEG.fullmatch(text)
    if m is not None:
        data = m.group("Data")
        event = {
            "ID": m.group("ID"),
            "Type": m.group("Type"),
            "Data": data.strip('"') if data.startswith('"') else None,
        }
        return "SyncLoop (PLEG): event for pod", {"pod": m.group("pod"), "event": event}
    m = _OLD_POD_LINE.fullmatch(text)
    if m is not None:
        return f"Pod {m.group('rest')}", {"pod": m.group("pod")}
    m = _OLD_EVENT.fullmatch(text)
    if m is not None:
        ref = dict(_REF_FIELD.findall(m.group("ref")))
        namespace, name = ref.get("Namespace"), ref.get("Name")
        return "Event occurred", {
            "object": f"{namespace}/{name}" if namespace and name else name,
            "kind": ref.get("Kind"),
            "uid": ref.get("UID"),
            "fieldPath": ref.get("FieldPath"),
            "type": m.group("type"),
            "reason": m.group("reason"),
            "message": m.group("message"),
        }
    return None


def _format_pod(value: Any) -> tuple[str | None, str | None, str | None] | None:
    """(uid, namespace, name) of format.Pod's ``name_namespace(uid)``; None for any other value."""
    if not isinstance(value, str):
        return None
    m = _FORMAT_POD.fullmatch(value.strip().strip('"'))
    if m is None:
        return None
    return _valid_uid(m.group("uid")), m.group("ns"), m.group("name")


_OLD_KILL_GRACE = re.compile(r"with (\d+) second grace period")
_OLD_KILL_CONTAINER = re.compile(r'^Killing (?:unwanted )?container "?([^"\s]+)"?')


@dataclass(slots=True)
class LogParseResult:
    """What ``parse_kubelet_log`` made: observations in input order, lines read, skips by reason."""

    observations: list[Observation] = field(default_factory=list)
    lines_read: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    processes: list[Observation] = field(default_factory=list)  # kubelet_process, node level
    cut_kept: int = 0  # lines cut short after their identity: kept without the cut values
    unrecognized: Counter[str] = field(default_factory=Counter)  # unrecognised message text -> lines
    errors: list[str] = field(default_factory=list)  # the first lines podlife failed on, with where


@dataclass(slots=True)
class _Record:
    """One logical kubelet line (a klog line and any key=< block lines), prefix-free."""

    klog_lines: list[str]  # the physical lines without journald prefixes
    prefix: JournaldPrefix | None
    header: KlogHeader
    segments: list[str]  # body, then the text after each block's closing " >"
    blocks: list[list[str]]
    open: bool = False
    where: str | None = None  # where its first physical line came from (``source:line``), if known


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
    pid: int | None = None
    cut: frozenset[str] = frozenset()  # keys whose value the line's cut-off left incomplete
    level: int | None = None  # the klog V level it was logged at (JSON ``v``, else known per message)


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
            return int(value)  # klog's values come unquoted (klog.py); int() skips surrounding blanks
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


# DNS-1123: a pod name is a subdomain (≤253), a namespace a label (≤63). Anything else is a damaged line,
# except capitals: people who paste logs redact names as `XX/client-…`, which a cut never produces.
_POD_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", re.IGNORECASE)
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.IGNORECASE)
# API UIDs are UUIDs; a static pod's UID is the 32-hex hash of its manifest.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")


class _BadName(ValueError):
    """A pod reference that is not a valid namespace/name."""


def _pod_ref(value: Any) -> tuple[str | None, str | None]:
    """(namespace, name) from a ``pod`` value: ``"ns/name"`` text or a KObj ``{"name","namespace"}``.

    Raises ``_BadName`` for a value that names a pod Kubernetes would not accept (e.g. a line cut off
    by a pager: ``ns/cert>``): such a value is never taken as a name.
    """
    ns: Any
    name: Any
    if isinstance(value, dict):
        name = value.get("name")
        ns = value.get("namespace")
        ns = ns if isinstance(ns, str) and ns else None
        name = name if isinstance(name, str) and name else None
    elif isinstance(value, str) and value and value not in ("<nil>", "nil"):
        text = value.strip().strip('"')
        if "/" in text:
            ns, _, name = text.partition("/")
            ns, name = ns or None, name or None
        else:
            ns, name = None, text or None
    else:
        return (None, None)
    if name is not None and (len(name) > 253 or not _POD_NAME.fullmatch(name)):
        raise _BadName(name)
    if ns is not None and not _NAMESPACE.fullmatch(ns):
        raise _BadName(ns)
    return (ns, name)


def _pod_list(value: Any) -> list[tuple[str | None, str | None]] | None:
    """The pods of a ``pods`` value: ``[ns/a ns/b]`` (1.22–1.28 text), ``["ns/a","ns/b"]`` (2024-era
    text), ``[{"name":..,"namespace":..}]`` (JSON logging). None when it is none of these."""
    items: list[Any]
    if isinstance(value, list):
        items = value
    elif isinstance(value, str):
        text = value.strip()
        if not (text.startswith("[") and text.endswith("]")):
            return None
        inner = text[1:-1].strip()
        items = [t.strip('"') for t in re.split(r"[\s,]+", inner) if t.strip('"')] if inner else []
    else:
        return None
    return [_pod_ref(item) for item in items]


def _valid_uid(text: str | None) -> str | None:
    if not text:
        return None
    text = text.strip("\x00 \t").strip('"').lower()
    return text if _UUID.fullmatch(text) else None


def _pod_uid(values: dict[str, Any]) -> str | None:
    raw = values.get("podUID")
    if raw is None:
        raw = values.get("podUid", values.get("pod_uid"))
    return _valid_uid(_as_str(raw))


_GO_CONTAINER_ID = re.compile(r"&?\{Type:(?P<type>[^\s{}]+) ID:(?P<id>[^\s{}]+)\}")


def _container_id(value: Any) -> str | None:
    """A container ID as ``type://id`` (``ContainerID.String()``), whether the kubelet logged it as that
    text, as its struct JSON-encoded (``{"Type":"containerd","ID":"…"}``, 1.29+) or Go-printed
    (``{Type:containerd ID:…}``); a bare runtime ID stays bare."""
    if isinstance(value, dict):
        kind, ident = _as_str(value.get("Type")), _as_str(value.get("ID"))
        if not ident:
            return None
        return f"{kind}://{ident}" if kind else ident
    text = _as_str(value)
    if text is None:
        return None
    m = _GO_CONTAINER_ID.fullmatch(text.strip())
    return f"{m.group('type')}://{m.group('id')}" if m is not None else text


def _event(value: Any) -> dict[str, Any] | None:
    """A PLEG event: ``{"ID":..,"Type":..,"Data":..}`` (JSON) or ``&{ID:.. Type:.. Data:..}`` (Go)."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"&?\{ID:(?P<ID>\S*) Type:(?P<Type>\S*) Data:(?P<Data>[^}]*)\}", value.strip())
        if m is not None:
            return m.groupdict()
    return None


def _go_time(value: Any) -> str | None:
    """A Go ``time.Time`` as klog prints it (``2022-12-30 15:33:13.375009262 +0000 UTC m=+17.1``), as
    ISO text, or epoch milliseconds (JSON logging), to ISO 8601 UTC with microseconds; None for the zero
    time or anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=float(value))
        except (OverflowError, ValueError):
            return None
        return at.isoformat(timespec="microseconds")
    if not isinstance(value, str):
        return None
    text = value.strip().strip('"')
    m = re.match(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?\s*(Z|[+-]\d{2}:?\d{2})?", text)
    if m is None or m.group(1).startswith("0001"):
        return None
    frac = (m.group(3) or "").ljust(6, "0")[:6]
    off = m.group(4) or "+00:00"
    if off == "Z":
        off = "+00:00"
    elif ":" not in off:
        off = off[:3] + ":" + off[3:]
    try:
        at = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}.{frac}{off}")
    except ValueError:
        return None
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _seconds(value: Any) -> float | None:
    """A duration: a number of seconds, or Go's ``1.5s`` / ``2m3.1s`` / ``150ms`` text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    total = 0.0
    matched = False
    for number, unit in re.findall(r"([0-9.]+)(h|ms|µs|us|ns|m|s)", value):
        matched = True
        try:
            n = float(number)
        except ValueError:
            return None
        total += n * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "µs": 1e-6, "us": 1e-6, "ns": 1e-9}[unit]
    if matched:
        return total
    try:
        return float(value)
    except ValueError:
        return None


def _phase_of(status: Any) -> str | None:
    """The phase inside a ``status`` value (JSON-encoded, or Go's ``&PodStatus{Phase:Running,...}``)."""
    if isinstance(status, dict):
        phase = status.get("phase")
        return phase if isinstance(phase, str) else None
    if isinstance(status, str):
        m = re.search(r"\bPhase:(\w+)|\"phase\":\s*\"(\w+)\"", status)
        if m is not None:
            return m.group(1) or m.group(2)
    return None


def is_kubelet_ident(ident: str) -> bool:
    low = ident.lower()
    return any(name in low for name in _KUBELET_IDENTS)


@dataclass(slots=True)
class _Process:
    """What one file or batch showed of one kubelet process (pid): the minutes it logged in, its start
    lines and version, the highest klog level of its lines."""

    pid: int | None
    minutes: set[datetime] = field(default_factory=set)  # the UTC minutes holding any of its lines
    version: str | None = None
    starts: list[datetime] = field(default_factory=list)  # start lines (a pid-less JSON log may hold several)

    def start(self, at: datetime) -> None:
        if at not in self.starts:
            self.starts.append(at)

    def saw(self, at: datetime, text: str) -> None:
        self.minutes.add(at.replace(second=0, microsecond=0))


class KubeletLogParser:
    """A streaming kubelet log parser for one node: ``feed`` lines, then ``close``.

    State carried between lines: the year (a month smaller than an earlier one by two or more moves to
    the next year, so a December to January file works; ``short-iso`` journald prefixes give the year
    outright), an open ``key=<`` block, the kubelet processes seen (pid, first and last line, start
    lines: ``processes()`` gives them as ``kubelet_process`` observations) and the last work type
    reported per pod (a pending update is kept only when it changes the work type).

    Lines that name a pod only as ``ns/name`` are kept without a UID: which incarnation they belong to is
    decided at derive time from every file and source (``timelines/lifecycle/resolve.py``), never from
    the order lines arrived in.
    """

    def __init__(
        self,
        *,
        node: str,
        year: int,
        tz: tzinfo,
        prefix_tz: tzinfo | None = None,
        source: str | None = None,
    ) -> None:
        self.node = node
        # The name of the input (a file's name as given): each observation's payload then says in
        # ``where`` which line proves it (``source:N``, N the 1-based physical line of the record's first
        # line). Never part of a dedupe key: the same line from two inputs is still one observation.
        self.source = source
        self._where: str | None = None
        self.tz = tz
        self.prefix_tz = prefix_tz
        self.lines_read = 0
        self.skipped: Counter[str] = Counter()
        self.cut_kept = 0  # lines cut short after their message and pod identity: kept, cut values dropped
        # The texts of the messages counted as `unrecognized_message` (what a reader would teach us next).
        self.unrecognized: Counter[str] = Counter()
        # The first lines podlife failed on (a bug, not the line's fault), each with where and the error.
        self.errors: list[str] = []
        self._year = year
        self._max_month: int | None = None
        self._pending: _Record | None = None
        self._procs: dict[int | None, _Process] = {}
        self._work_type: dict[str, str] = {}

    # -- input -----------------------------------------------------------------------------------------

    def feed(self, line: str | bytes, where: str | None = None) -> list[Observation]:
        """Consume one physical line; return the observations it completed (possibly for earlier lines).

        ``where`` says where this line came from (put in each observation's payload, never in a dedupe
        key); without it, ``source:N`` when the parser was given a ``source``. Never raises: a line that
        cannot be used is counted in ``skipped`` under a reason.
        """
        self.lines_read += 1
        if where is None and self.source is not None:
            where = f"{self.source}:{self.lines_read}"
        self._where = where
        try:
            return self._feed(line)
        except Exception as exc:  # a parser bug must not lose the rest of the file: it is named, not hidden
            self._pending = None
            self._failed(exc)
            return []

    def _failed(self, exc: Exception, *, reason: str = "parser_error") -> None:
        """Count a line podlife could not read because of ``exc`` and keep the first few, with where."""
        self.skipped[reason] += 1
        if len(self.errors) < MAX_ERRORS:
            where = self._where or f"line {self.lines_read}"
            self.errors.append(f"{where}: {type(exc).__name__}: {str(exc)[:200]}")

    def close(self) -> list[Observation]:
        """Finish: complete a record whose ``key=<`` block never closed. Never raises."""
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        try:
            return self._finish(pending)
        except Exception as exc:  # as in feed: named, not hidden
            self._failed(exc)
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
        prefix, rest = split_journald_prefix(unwrap_line(line, is_kubelet_ident))
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
            if prefix.ident == "systemd" and "kubelet" in rest.lower():
                out.extend(_stamp(self._systemd_line(prefix, rest), self._where))
                return out
            self.skipped["not_kubelet"] += 1
            return out
        if rest.startswith("{"):
            out.extend(_stamp(self._json_line(rest, prefix), self._where))
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
        record = _Record([rest], prefix, header, [body], [], where=self._where)
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
        return _stamp(self._finish_record(record), record.where)

    def _finish_record(self, record: _Record) -> list[Observation]:
        year = self._year_for(record.header, record.prefix)
        body = record.segments[0]
        at = self._klog_time(record.header, year, record.prefix)
        if at is None:
            self.skipped["malformed"] += 1
            return []
        if time_problem("time", at):  # issue #35: outside the supported range (observation.py)
            self.skipped["out_of_range"] += 1
            return []
        process = self._process(record.header.pid)
        process.saw(at, "\n".join(record.klog_lines))
        legacy = _legacy_printf(body) if not body.startswith('"') and not record.blocks else None
        if legacy is not None:
            message, values = legacy
            return self._map(
                _Parsed(
                    at=at,
                    message=message,
                    severity=record.header.severity,
                    caller=record.header.caller,
                    values=values,
                    dedupe_text="\n".join(record.klog_lines),
                    text=body,
                    pid=record.header.pid,
                )
            )
        # Prefilter on the message alone before parsing every key/value.
        if body.startswith('"'):
            end = body.find('"', 1)
            quick = body[1:end] if end != -1 and body.find("\\", 1, end) == -1 else None
        else:
            quick = body
        if quick is not None:
            quick_norm = _norm(quick)
            if quick_norm in _PROCESS_START:
                process.start(at)
                version = re.search(r"v\d+\.\d+\.\d+\S*", body)
                process.version = version.group(0).strip('"') if version else process.version
            if not self._interesting(quick_norm):
                self._skip_message(quick_norm, quick)
                return []
        joined = "\n".join(record.segments)
        parsed_body = parse_klog_body(joined, record.blocks)
        if parsed_body.message_cut:
            self.skipped["cut"] += 1
            return []
        parsed = _Parsed(
            at=at,
            message=parsed_body.message,
            severity=record.header.severity,
            caller=record.header.caller,
            values=parsed_body.values,
            dedupe_text="\n".join(record.klog_lines),
            text="" if parsed_body.structured else parsed_body.message,
            pid=record.header.pid,
            cut=frozenset(parsed_body.cut),
        )
        return self._map(parsed)

    def _process(self, pid: int | None) -> _Process:
        process = self._procs.get(pid)
        if process is None:
            process = self._procs[pid] = _Process(pid)
        return process

    def _systemd_line(self, prefix: JournaldPrefix, text: str) -> list[Observation]:
        """systemd starting or stopping the kubelet unit: a node-level marker (a restart between them)."""
        low = text.lower()
        # The word, not a part of another unit's name ("nodekubeletcheck.timer" is not the kubelet).
        if not re.search(r"\bkubelet(\.service)?\b", low):
            self.skipped["not_kubelet"] += 1
            return []
        if re.search(r"^(started|starting) ", low):
            action = "started"
        elif re.search(
            r"^(stopped|stopping) |main process exited|scheduled restart job|failed with result", low
        ):
            action = "stopped"
        else:
            self.skipped["not_kubelet"] += 1
            return []
        at = self._prefix_time(prefix)
        if at is None:
            self.skipped["malformed"] += 1
            return []
        return [
            Observation(
                kind=Kind.KUBELET_MARKER,
                source=Source.KUBELET_LOG,
                observed_at=at,
                dedupe_key=digest_key(self.node, "systemd", at.isoformat(), text),
                node=self.node,
                payload={
                    "reason": MarkerReason.KUBELET_SERVICE,
                    "message": text.strip(),
                    "severity": "I",
                    "caller": "systemd",
                    "action": action,
                    "pid": prefix.pid,
                },
            )
        ]

    def _prefix_time(self, prefix: JournaldPrefix) -> datetime | None:
        if prefix.hms is None:
            return None
        zone = timezone(prefix.utcoffset) if prefix.utcoffset is not None else (self.prefix_tz or self.tz)
        year = prefix.year if prefix.year is not None else self._year
        try:
            return datetime(year, prefix.month, prefix.day, *prefix.hms, tzinfo=zone).astimezone(UTC)
        except (ValueError, OverflowError):
            return None

    def processes(self) -> list[Observation]:
        """The kubelet processes this parser saw, as ``kubelet_process`` observations (node level): one
        per pid and UTC minute it logged in (``first_at`` / ``last_at`` the minute's bounds), the start
        lines ("Kubelet version") of that minute with the version they named. Call after ``close``.

        Keyed by node, pid, minute and start lines, so whatever the split of a log into files or shipped
        batches, a key always holds the same payload: a batch read twice, or a pull that re-reads its last
        second, stores nothing new."""
        out = []
        for pid, proc in sorted(self._procs.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            for minute in sorted(proc.minutes):
                end = minute + timedelta(minutes=1)
                starts = sorted(at for at in proc.starts if minute <= at < end)
                first = minute.isoformat(timespec="microseconds")
                out.append(
                    Observation(
                        kind=Kind.KUBELET_PROCESS,
                        source=Source.KUBELET_LOG,
                        observed_at=minute,
                        dedupe_key=digest_key(self.node, "process", pid, first, *starts),
                        node=self.node,
                        payload={
                            "pid": pid,
                            "first_at": first,
                            "last_at": end.isoformat(timespec="microseconds"),
                            "started_at": starts[0].isoformat(timespec="microseconds") if starts else None,
                            "version": proc.version if starts else None,
                            "starts": [at.isoformat(timespec="microseconds") for at in starts],
                        },
                    )
                )
        return out

    # -- JSON --------------------------------------------------------------------------------------------

    def _json_line(self, text: str, prefix: JournaldPrefix | None = None) -> list[Observation]:
        rec = parse_json_record(text)
        if rec is None:
            stripped = text.rstrip()
            if stripped.startswith('{"ts"') and not stripped.endswith("}"):
                self.skipped["cut"] += 1  # a JSON record cut off mid-way
            else:
                self.skipped["malformed"] += 1
            return []
        if time_problem("ts", rec.observed_at):  # issue #35: outside the supported range (observation.py)
            self.skipped["out_of_range"] += 1
            return []
        pid = prefix.pid if prefix is not None else None
        process = self._process(pid)
        process.saw(rec.observed_at, text)
        norm = _norm(rec.message)
        if norm in _PROCESS_START:
            process.start(rec.observed_at)
            version = rec.values.get("kubeletVersion")
            process.version = str(version) if version is not None else process.version
        if not self._interesting(norm):
            self._skip_message(norm, rec.message)
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
                pid=pid,
                level=rec.level,
            )
        )

    # -- meaning -----------------------------------------------------------------------------------------

    def _skip_message(self, norm: str, message: str) -> None:
        if norm in _UNTRACKED_WORKER_MESSAGES:
            self.skipped["untracked_worker_message"] += 1
            return
        self.skipped["unrecognized_message"] += 1
        text = message.strip()[:MAX_MESSAGE_TEXT]
        if text in self.unrecognized or len(self.unrecognized) < MAX_MESSAGE_TEXTS:
            self.unrecognized[text] += 1
        else:
            self.unrecognized[OTHER_MESSAGES] += 1

    @staticmethod
    def _interesting(norm: str) -> bool:
        return (
            norm in _TRANSITIONS
            or norm in _SYNCLOOP
            or norm in (_PLEG, _RECREATED, _EVENT)
            or _MARKER_HINT.search(norm) is not None
            or _VOLUME_HINT.search(norm) is not None
        )

    def _pod_identity(self, parsed: _Parsed) -> tuple[str | None, str | None, str | None]:
        """(uid, namespace, name) for a line; raises ``_BadName`` for a pod reference that is damaged."""
        values = parsed.values
        uid = _pod_uid(values) or _valid_uid(_as_str(values.get("podID")))
        raw = values.get("pod")
        formatted = _FORMAT_POD.fullmatch(raw.strip().strip('"')) if isinstance(raw, str) else None
        if formatted is not None:
            # format.Pod's `name_namespace(uid)` as the value (kubelets that print a pod that way).
            uid = uid or _valid_uid(formatted.group("uid"))
            ns, name = formatted.group("ns"), formatted.group("name")
        else:
            ns, name = _pod_ref(raw)
        if parsed.text and (uid is None or name is None):
            m = _FORMAT_POD.search(parsed.text)
            if m is not None:
                uid = uid or _valid_uid(m.group("uid"))
                ns, name = ns or m.group("ns"), name or m.group("name")
        return uid, ns, name

    def _map(self, parsed: _Parsed) -> list[Observation]:
        if parsed.cut & _IDENTITY_KEYS:
            self.skipped["cut"] += 1  # never a name (or a UID) from a value that was cut off
            return []
        if parsed.cut:
            parsed.values = {k: v for k, v in parsed.values.items() if k not in parsed.cut}
            self.cut_kept += 1
        norm = _norm(parsed.message)
        try:
            if norm in _SYNCLOOP:
                return self._syncloop(parsed, _SYNCLOOP[norm])
            if norm == _PLEG:
                return self._pleg(parsed)
            if norm == _EVENT:
                return self._event(parsed)
            uid, ns, name = self._pod_identity(parsed)
            if norm == _RECREATED:
                return self._recreated(parsed, ns, name)
        except _BadName:
            self.skipped["bad_pod_name"] += 1
            return []
        raw_uid = parsed.values.get("podUID")
        if uid is None and raw_uid not in (None, "", "<nil>"):
            # A UID that is not one: cut off (the line's last value; `podUID=6b0f2a4e-91c3-4d2`) or damaged.
            last = list(parsed.values)[-1] == "podUID"
            self.skipped["cut" if last else "bad_uid"] += 1
            return []
        transition = _TRANSITIONS.get(norm)
        if transition is None and _VOLUME_HINT.search(norm) is not None:
            volume = self._volume_line(parsed, norm, uid, ns, name)
            if volume is not None:
                return volume
        marker = None
        if _MARKER_HINT.search(norm) is not None:
            for pattern, reason, node_level in _MARKERS:
                if pattern.search(norm):
                    marker = (reason, node_level)
                    break
        if transition is None and marker is None:
            self._skip_message(norm, parsed.message)
            return []
        pod_ref = f"{ns}/{name}" if ns and name else name
        values = parsed.values
        error = _as_str(values.get("err", values.get("error")))
        out: list[Observation] = []
        if transition is not None:
            if uid is None and not (transition[0] in _UIDLESS_OK and name):
                self.skipped["no_pod_uid" if transition[0] not in _UIDLESS_OK else "no_pod"] += 1
                return []
            if transition[0] == Transition.PENDING_UPDATE and not self._work_changed(uid, parsed.values):
                self.skipped["untracked_worker_message"] += 1
                return []
            out.append(self._worker(parsed, norm, transition, uid, ns, name, pod_ref, error))
            out.extend(self._status_extras(parsed, transition[0], uid, ns, name, pod_ref))
        if marker is not None:
            reason, node_level = marker
            if reason == MarkerReason.SYNC_ERROR and error and _KILL_ERROR.search(error):
                reason = MarkerReason.FAILED_KILL
            if reason in _LIST_MARKERS:
                try:
                    return out + self._list_marker(parsed, reason)
                except _BadName:
                    self.skipped["bad_pod_name"] += 1
                    return out
            if uid is None and name is None and not node_level:
                if not out:
                    self.skipped["no_pod"] += 1
                return out
            # A line that is also a transition gets a distinct key for its marker.
            key_extra = "marker" if out else None
            out.append(self._marker(parsed, reason, uid, ns, name, pod_ref, error, key_extra))
        return out

    def _event(self, parsed: _Parsed) -> list[Observation]:
        """An event the kubelet recorded, echoed in its log: a container of a pod stopped ("Killing",
        "Stopping container C": the kill of termination, not a restart's) is a KillingContainer marker;
        other events give nothing (the event itself, when collected, says more)."""
        values = parsed.values
        message = _as_str(values.get("message")) or ""
        if (
            _as_str(values.get("kind")) != "Pod"
            or _as_str(values.get("reason")) != "Killing"
            or not message.startswith("Stopping container ")
        ):
            self._skip_message(_EVENT, parsed.message)
            return []
        uid = _valid_uid(_as_str(values.get("uid")))
        ns, name = _pod_ref(values.get("object"))
        if uid is None and name is None:
            self.skipped["no_pod"] += 1
            return []
        pod_ref = f"{ns}/{name}" if ns and name else name
        marker = self._marker(parsed, MarkerReason.KILLING_CONTAINER, uid, ns, name, pod_ref, None, None)
        marker.payload["container"] = message.removeprefix("Stopping container ").strip() or None
        marker.payload["from"] = "event"
        marker.payload["message"] = message  # the event's own text, not the echo's "Event occurred"
        return [marker]

    def _volume_line(
        self, parsed: _Parsed, norm: str, uid: str | None, ns: str | None, name: str | None
    ) -> list[Observation] | None:
        """A volume manager line about one pod's volume as a marker (payload ``volume``: its unique name),
        [] when it names no pod UID or is a remount, None when it is no such line."""
        reason = next((r for pattern, r in _VOLUME_LINES if pattern.search(norm)), None)
        if reason is None:
            return None
        text = parsed.message
        found = _VOLUME_UID.search(text)
        uid = uid or (_valid_uid(found.group("uid").lower()) if found is not None else None)
        if uid is None:
            self.skipped["no_pod_uid"] += 1
            return []
        if _REMOUNT in text.lower():
            self.skipped["unrecognized_message"] += 1
            return []
        if name is not None and name.lower() == uid:  # the unmount lines name the pod by its UID
            ns, name = None, None
        pod_ref = f"{ns}/{name}" if ns and name else None
        marker = self._marker(parsed, reason, uid, ns, name, pod_ref, None, None)
        vol = _UNIQUE_NAME.search(text) or _FOR_VOLUME.search(text)
        marker.payload["volume"] = vol.group("v") if vol is not None else None
        return [marker]

    def _status_extras(
        self,
        parsed: _Parsed,
        transition: str,
        uid: str | None,
        ns: str | None,
        name: str | None,
        pod_ref: str | None,
    ) -> list[Observation]:
        """What a status-manager line says beside its transition: a status the kubelet wrote as it rejected
        the pod at admission (phase Failed, "Pod was rejected: ...": the rejection, on the pod's timeline)."""
        if transition != Transition.STATUS_UPDATED:
            return []
        status = parsed.values.get("status")
        message = status.get("message") if isinstance(status, dict) else None
        if (
            _phase_of(status) != "Failed"
            or not isinstance(message, str)
            or not message.startswith("Pod was rejected")
        ):
            return []
        reason = status.get("reason") if isinstance(status, dict) else None
        marker = self._marker(
            parsed, MarkerReason.ADMISSION_REJECTED, uid, ns, name, pod_ref, None, "rejected"
        )
        marker.payload["detail"] = f"{reason}: {message}" if isinstance(reason, str) and reason else message
        return [marker]

    def _recreated(self, parsed: _Parsed, ns: str | None, name: str | None) -> list[Observation]:
        """A marker on the old incarnation (``oldPodUID``): deleted, its name now another pod's."""
        old = _valid_uid(_as_str(parsed.values.get("oldPodUID")))
        if old is None:
            self.skipped["no_pod_uid"] += 1
            return []
        pod_ref = f"{ns}/{name}" if ns and name else name
        marker = self._marker(parsed, MarkerReason.RECREATED, old, ns, name, pod_ref, None, None)
        marker.payload["new_uid"] = _pod_uid(parsed.values)
        return [marker]

    def _work_changed(self, uid: str | None, values: dict[str, Any]) -> bool:
        """A pending update is kept when it gives the pod's worker a work type other than the last one
        this file showed (every periodic resync repeats "sync")."""
        work = _as_str(values.get("workType", values.get("updateType")))
        work = _WORK_TYPES.get(work.strip('"').lower(), work.strip('"').lower()) if work else None
        if uid is None or work is None:
            return False
        changed = self._work_type.get(uid) != work
        self._work_type[uid] = work
        return changed

    def _dedupe(self, parsed: _Parsed, extra: object = None) -> str:
        if extra is None:
            return digest_key(self.node, parsed.dedupe_text)
        return digest_key(self.node, parsed.dedupe_text, extra)

    def _line_observation(
        self,
        parsed: _Parsed,
        kind: str,
        payload: dict[str, Any],
        uid: str | None,
        ns: str | None,
        name: str | None,
        extra: object = None,
    ) -> Observation:
        payload.setdefault("pid", parsed.pid)
        payload.setdefault(
            "level", parsed.level if parsed.level is not None else _LEVELS.get(_norm(parsed.message))
        )
        return Observation(
            kind=kind,
            source=Source.KUBELET_LOG,
            observed_at=parsed.at,
            dedupe_key=self._dedupe(parsed, extra),
            pod_uid=uid,
            node=self.node,
            namespace=ns,
            name=name,
            payload=payload,
        )

    def _syncloop(self, parsed: _Parsed, transition: str) -> list[Observation]:
        """One observation per pod a SyncLoop config line names (``pods``; no UID since 1.21, a UID in
        each format.Pod before 1.20)."""
        raw = parsed.values.get("pods")
        old = [_format_pod(item) for item in raw] if isinstance(raw, list) else []
        pods: list[tuple[str | None, str | None, str | None]] | None
        if old and all(o is not None for o in old):  # before 1.20: format.Pods, with the UIDs
            pods = [o for o in old if o is not None]
        else:
            listed = _pod_list(raw)
            pods = None if listed is None else [(None, ns, name) for ns, name in listed]
        if pods is None:
            self.skipped["no_pod"] += 1
            return []
        source = _as_str(parsed.values.get("source"))
        out = []
        for i, (uid, ns, name) in enumerate(pods):
            if name is None:
                continue
            payload: dict[str, Any] = {
                "transition": transition,
                "message": parsed.message,
                "severity": parsed.severity,
                "caller": parsed.caller,
                "config_source": source,
                "pod_ref": f"{ns}/{name}" if ns else name,
                "pods_in_line": len(pods),
            }
            out.append(
                self._line_observation(parsed, Kind.WORKER, payload, uid, ns, name, ("pod", i) if i else None)
            )
        if not out:
            self.skipped["no_pod"] += 1
        return out

    def _pleg(self, parsed: _Parsed) -> list[Observation]:
        """``SyncLoop (PLEG): event for pod``: ContainerStarted / ContainerDied (the event's ID is the pod
        UID, its Data the runtime ID of a container or sandbox); other event types say nothing here."""
        event = _event(parsed.values.get("event"))
        old = _format_pod(parsed.values.get("pod"))  # before 1.20: format.Pod
        ns, name = old[1:] if old is not None else _pod_ref(parsed.values.get("pod"))
        if event is None:
            self.skipped["malformed"] += 1
            return []
        transition = _PLEG_TYPES.get(str(event.get("Type") or ""))
        if transition is None:
            self.skipped["untracked_worker_message"] += 1
            return []
        uid = _valid_uid(_as_str(event.get("ID")))
        if uid is None and name is None:
            self.skipped["no_pod"] += 1
            return []
        payload = {
            "transition": transition,
            "message": parsed.message,
            "severity": parsed.severity,
            "caller": parsed.caller,
            "pod_ref": f"{ns}/{name}" if ns and name else name,
            "container_id": _as_str(event.get("Data")),
        }
        return [self._line_observation(parsed, Kind.WORKER, payload, uid, ns, name)]

    def _list_marker(self, parsed: _Parsed, reason: str) -> list[Observation]:
        """Eviction-manager lines that list pods: one marker per pod, with its place in the list."""
        pods = _pod_list(parsed.values.get("pods")) or []
        out = []
        for i, (ns, name) in enumerate(pods):
            if name is None:
                continue
            payload: dict[str, Any] = {
                "reason": reason,
                "message": parsed.message,
                "severity": parsed.severity,
                "caller": parsed.caller,
                "pod_ref": f"{ns}/{name}" if ns else name,
                "rank": i,
                "ranked": len(pods),
            }
            out.append(
                self._line_observation(
                    parsed, Kind.KUBELET_MARKER, payload, None, ns, name, ("pod", i) if i else None
                )
            )
        if not out:
            self.skipped["no_pod"] += 1
        return out

    def _worker(
        self,
        parsed: _Parsed,
        norm: str,
        transition: tuple[str, str | None],
        uid: str | None,
        ns: str | None,
        name: str | None,
        pod_ref: str | None,
        error: str | None,
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
        if name_of_transition == Transition.CONTAINER_FINISHED:
            payload["container_id"] = _container_id(values.get("containerID"))
            payload["exit_code"] = _as_int(values.get("exitCode"))
        elif name_of_transition == Transition.STARTUP_OBSERVED:
            payload["observed_running"] = _go_time(values.get("observedRunningTime"))
            payload["watch_observed_running"] = _go_time(values.get("watchObservedRunningTime"))
            payload["created"] = _go_time(
                values.get("podCreationTimestamp", values.get("pod.CreationTimestamp"))
            )
            payload["first_started_pulling"] = _go_time(values.get("firstStartedPulling"))
            payload["last_finished_pulling"] = _go_time(values.get("lastFinishedPulling"))
            payload["slo_seconds"] = _seconds(values.get("podStartSLOduration"))
            payload["e2e_seconds"] = _seconds(values.get("podStartE2EDuration"))
        elif name_of_transition == Transition.STATUS_UPDATED:
            payload["phase"] = _phase_of(values.get("status"))
            payload["status_version"] = _as_int(values.get("statusVersion"))
        elif name_of_transition in (Transition.TERMINATION_FINISHED, Transition.DELETION_DELAYED):
            payload["phase"] = _as_str(values.get("phase"))
            payload["local_phase"] = _as_str(values.get("localPhase"))
        elif name_of_transition == Transition.MARKED_FAILED:
            payload["old_phase"] = _as_str(values.get("oldPhase"))
        return self._line_observation(parsed, Kind.WORKER, payload, uid, ns, name)

    def _marker(
        self,
        parsed: _Parsed,
        reason: str,
        uid: str | None,
        ns: str | None,
        name: str | None,
        pod_ref: str | None,
        error: str | None,
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
            payload["container_id"] = _container_id(values.get("containerID"))
            payload["override"] = "override" in parsed.message.lower()
        elif reason == MarkerReason.CONTAINER_STATE:
            payload["containers"] = _as_str(values.get("containers"))
        elif reason in (MarkerReason.EVICTING, MarkerReason.ADMISSION_REJECTED):
            detail = values.get("message")
            if detail is None and reason == MarkerReason.ADMISSION_REJECTED:
                detail = values.get("nodeCondition", values.get("reason"))
            elif reason == MarkerReason.ADMISSION_REJECTED and values.get("reason"):
                detail = f"{values.get('reason')}: {detail}"  # 1.31+ "Pod admission denied"
            payload["detail"] = (
                _as_str(detail) if not isinstance(detail, list) else ", ".join(map(str, detail))
            )
        elif reason == MarkerReason.EVICTION_RECLAIM:
            payload["resource"] = _as_str(values.get("resourceName"))
        elif reason == MarkerReason.SHUTDOWN_KILL_TIMEOUT:
            payload["priority"] = _as_int(values.get("priority"))
        elif reason == MarkerReason.CONTAINER_RESTART:
            payload["detail"] = _as_str(values.get("containerMessage"))
            payload["container_id"] = _container_id(values.get("containerStatusID"))
        elif reason == MarkerReason.SHUTDOWN_DETECTED:
            payload["detail"] = _as_str(values.get("event"))
        return self._line_observation(parsed, Kind.KUBELET_MARKER, payload, uid, ns, name, key_extra)


def top_unrecognized(counts: Counter[str], n: int = 10) -> list[tuple[str, int]]:
    """The ``n`` most frequent unrecognised message texts with their line counts, most frequent first
    (ties by text, so the answer does not depend on the order lines came in)."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def _stamp(observations: list[Observation], where: str | None) -> list[Observation]:
    """Say in each observation's payload where its line came from (``where``), when known."""
    if where is not None:
        for obs in observations:
            obs.payload["where"] = where
    return observations


def parse_kubelet_log(
    lines: Iterable[str],
    *,
    node: str,
    year: int,
    tz: tzinfo,
    prefix_tz: tzinfo | None = None,
    source: str | None = None,
) -> LogParseResult:
    """Parse a kubelet log (klog text or JSON, with or without journald prefixes) into observations.

    ``node`` names the node the log came from (set on every observation and part of every dedupe key).
    ``year`` is the year of the first line whose header has no year (klog headers carry none; a
    ``short-iso`` journald prefix overrides it); ``tz`` is the zone the klog header times are in, unless
    a line's journald prefix tells it: a ``short-iso`` prefix carries its offset, and ``prefix_tz`` is the
    zone of ``short`` / ``short-precise`` prefixes when known (``journalctl --utc``: UTC). The header is
    then read in the zone that makes it the prefix's instant (``KubeletLogParser._header_zone``).
    ``source`` names the input (a file's name as given): each observation's payload then has
    ``where: "source:N"``, N the 1-based line its record starts on (not part of any dedupe key).
    Observations are returned in input order with ``observed_at`` in UTC, microseconds kept; the kubelet
    processes the lines show are in ``processes`` (``kubelet_process``, node level). Lines that give
    nothing are counted in ``skipped`` by reason (``SKIP_REASONS``). Never raises on bad input (bytes
    elements are decoded as UTF-8 with replacement).
    """
    parser = KubeletLogParser(node=node, year=year, tz=tz, prefix_tz=prefix_tz, source=source)
    result = LogParseResult()
    out = result.observations
    try:
        for line in lines:
            out.extend(parser.feed(line))
    except Exception as exc:  # the iterable itself failed (a decoding error of a file, a broken stream)
        parser._failed(exc, reason="unreadable_input")
    out.extend(parser.close())
    result.processes = parser.processes()
    result.lines_read = parser.lines_read
    result.skipped = parser.skipped
    result.cut_kept = parser.cut_kept
    result.unrecognized = parser.unrecognized
    result.errors = parser.errors
    return result


def parse_kubelet_line(line: str | bytes, *, node: str, year: int, tz: tzinfo) -> LogParseResult:
    """Parse one logical kubelet line (a multi-line ``key=<`` record may be given with embedded newlines).

    Same contract as ``parse_kubelet_log`` for a single record.
    """
    if isinstance(line, bytes | bytearray):
        line = bytes(line).decode("utf-8", errors="replace")
    parts = str(line).split("\n")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parse_kubelet_log(parts, node=node, year=year, tz=tz)
