"""How fresh each pod's worker lane is, computed when a page or the API reads it (never stored).

Kubelet evidence (pod-worker lines, spans, notable lines, process lines) reaches podlife later than the
API's view: log pulls and shippers lag 30–60 s behind the watch. Until a node's kubelet evidence catches
up, the derive stage can only show the worker state it last saw (``setup`` beside phase ``Succeeded``).
This module says, per pod, since when its worker lane is waiting for kubelet evidence, so the pages draw
a hatched "pending" tail and say so instead of a confident state.

A pod's worker evidence is *pending* when its node has kubelet evidence at all and the pod's newest
observation (``Pod.last_seen``: API snapshots, events, audit) is more than
``PODLIFE_KUBELET_PENDING_SLACK_S`` newer than the newest kubelet evidence of that node: then the API has
seen something the kubelet's logs have not reached yet. The tail starts at that newest kubelet evidence.
A node with no kubelet evidence at all has a worker lane inferred from the API, drawn as such already.

**A kubelet's final status line ends the wait.** The pod worker goes one way, sync → terminating →
terminated → done (k8s-facts.md §1): once SyncTerminatedPod has completed (volumes unmounted, cgroups
removed: "SyncTerminatedPod exit", the span of ``syncTerminatedPod`` ending, "The pod termination is
finished as SyncTerminatedPod completes"), the kubelet logs "Pod is terminated and will need no more status
updates" and "Pod is complete and the worker can now stop", and the worker never runs for that UID again:
nothing the API sees afterwards (the final DELETE, a controller's update, garbage collection) is followed
by more kubelet evidence about the pod. The kubelet's status manager also never moves a pod out of a
terminal phase, and (1.27+) writes Succeeded / Failed only once every container has stopped: a "Status for
pod updated successfully" line with a terminal phase is the kubelet's final status too. So a pod with such
a line (``final_status_at``) is never pending — unless a later line starts its worker again (a static
pod's reused UID: "Pod is being synced for the first time", or a restart of the same UID), which reopens
the wait. The API's own terminal phase is no such line: it may be ahead of the kubelet's logs.

A reader without the whole cluster gets the answer from the kubelet evidence of the pods they may read
only (never another namespace's activity on the node). Read-time only, two small queries per page: the newest kubelet evidence per node (bounded to a day before
the window so the time index is used) and ``last_seen`` of the pods on the page.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from timelines import observation_rows
from timelines.lifecycle.observation import Kind, Transition
from timelines.lifecycle.timeline import format_time
from timelines.models import Cluster, Pod

KUBELET_KINDS = (Kind.WORKER, Kind.SPAN, Kind.KUBELET_MARKER, Kind.KUBELET_PROCESS)
# Kubelet evidence is looked for from this long before the window on (the time index bounds the scan).
LOOKBACK = timedelta(days=1)


def kubelet_evidence_until(
    cluster: Cluster, nodes: Iterable[str], *, since: datetime, namespaces: set[str] | None = None
) -> dict[str, datetime]:
    """The newest ``observed_at`` of kubelet evidence per node (nodes without any since ``since`` left out).

    ``namespaces`` (a reader without the whole cluster): only the evidence of pods in those namespaces, so
    the answer tells nothing about other namespaces' pods or the node's own lines."""
    names = sorted({n for n in nodes if n})
    out: dict[str, datetime] = {}
    for i in range(0, len(names), 500):
        qs = observation_rows.selection(
            cluster,
            kinds=KUBELET_KINDS,
            since=since,
            nodes=names[i : i + 500],
            namespaces=None if namespaces is None else sorted(namespaces),
            arrays=True,  # one statement text whatever the number of values on PostgreSQL
        )
        out.update(observation_rows.newest_at(qs, "node"))
    return out


# Worker lines that say the worker is done with the pod for good (see the module's docstring).
FINAL_TRANSITIONS = (
    Transition.TERMINATED_EXIT,
    Transition.TERMINATION_FINISHED,
    Transition.WORKER_DONE,
    Transition.ORPHAN_CONTAINERS_TERMINATED,
    Transition.FINISHED_IGNORED,
    Transition.WORKER_STOPPED,
    Transition.FORGOTTEN,
    Transition.REMOVED_FROM_ETCD,
)
# Lines that start the worker of a UID again after it was done (static pods reuse UIDs).
RESTART_TRANSITIONS = (Transition.FIRST_SEEN, Transition.UID_REUSE_RESTART, Transition.RESTART_REQUESTED)
STATUS_FINAL_MARKER = "StatusFinal"  # collectors.parsers.kubelet_log.MarkerReason.STATUS_FINAL
TERMINAL_PHASES = ("Succeeded", "Failed")


def final_status_at(cluster: Cluster, uids: Iterable[str], *, since: datetime) -> dict[str, datetime]:
    """Per pod UID, when its kubelet wrote its final status (the newest such line since ``since``), for the
    pods that have one and whose worker no later line started again (see the module's docstring)."""
    uid_list = sorted({u for u in uids if u})
    final: dict[str, datetime] = {}
    restart: dict[str, datetime] = {}

    def note(into: dict[str, datetime], uid: str, at: datetime) -> None:
        if uid not in into or at > into[uid]:
            into[uid] = at

    for i in range(0, len(uid_list), 500):
        batch = uid_list[i : i + 500]
        qs = observation_rows.selection(
            cluster,
            kinds=(Kind.WORKER, Kind.SPAN, Kind.KUBELET_MARKER),
            since=since,
            pod_uids=batch,
            arrays=True,
        )
        for row in observation_rows.rows(qs):
            uid, kind, at, payload = row.pod_uid, row.kind, row.observed_at, row.payload
            if uid is None or not isinstance(payload, dict):
                continue
            if kind == Kind.WORKER:
                name = payload.get("transition")
                if name in FINAL_TRANSITIONS or (
                    name == Transition.STATUS_UPDATED and payload.get("phase") in TERMINAL_PHASES
                ):
                    note(final, uid, at)
                elif name in RESTART_TRANSITIONS:
                    note(restart, uid, at)
            elif kind == Kind.KUBELET_MARKER:
                if payload.get("reason") == STATUS_FINAL_MARKER:
                    note(final, uid, at)
            elif str(payload.get("name") or "").lower() == "syncterminatedpod" and payload.get("end"):
                note(final, uid, at)  # the cleanup span ended
            elif (
                str(payload.get("name") or "").lower() == "syncpod" and payload.get("update_type") == "create"
            ):
                note(restart, uid, at)
    return {uid: at for uid, at in final.items() if uid not in restart or restart[uid] <= at}


def pending_since(
    last_seen: datetime | None, kubelet_until: datetime | None, final_status: datetime | None = None
) -> datetime | None:
    """Since when the worker lane waits for kubelet evidence, or None when it is as fresh as the API or
    the pod's kubelet wrote its final status at ``final_status`` (nothing more is coming)."""
    if last_seen is None or kubelet_until is None or final_status is not None:
        return None
    slack = timedelta(seconds=settings.PODLIFE_KUBELET_PENDING_SLACK_S)
    return kubelet_until if last_seen - kubelet_until > slack else None


def freshness_of(
    last_seen: datetime | None, kubelet_until: datetime | None, final_status: datetime | None = None
) -> dict[str, Any]:
    """A pod's ``freshness`` as the pages and the API send it: ``{kubelet_until, pending_since}`` (either
    null), from its ``last_seen`` and the newest kubelet evidence of its node (``kubelet_evidence_until``).
    ``timeline_reads.window_json`` adds it to every pod of a window, and ``kubelet_until`` per node beside them."""
    pending = pending_since(last_seen, kubelet_until, final_status)
    return {
        "kubelet_until": format_time(kubelet_until) if kubelet_until else None,
        "pending_since": format_time(pending) if pending else None,
    }


def pod_freshness(cluster: Cluster, pod: Pod, *, namespaces: set[str] | None = None) -> dict[str, Any]:
    """``{kubelet_until, pending_since}`` of one pod (its page). ``namespaces``: as in
    ``kubelet_evidence_until``."""
    if not pod.node:
        return freshness_of(None, None)
    since = (pod.created_at or pod.last_seen or datetime.now().astimezone()) - LOOKBACK
    until = kubelet_evidence_until(cluster, [pod.node], since=since, namespaces=namespaces).get(pod.node)
    final = None
    if pending_since(pod.last_seen, until) is not None:
        final = final_status_at(cluster, [pod.uid], since=since).get(pod.uid)
    return freshness_of(pod.last_seen, until, final)
