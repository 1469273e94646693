"""Mirror pods: one pod per static pod, whatever UID an observation names it by (issue #35, finding 6).

podlife keys a static pod on its own UID, the config hash in the mirror pod's annotation
``kubernetes.io/config.mirror`` (docs/architecture.md "Where podlife departs"): the kubelet's logs and
spans speak of that UID, and the API server gives the mirror a new ``metadata.uid`` each time it recreates
it. Events about the mirror (``involvedObject.uid``) name the mirror's API UID, though, and were derived as
pods of their own: Pod rows with events only, never a phase or a deletion, counted live for ever (40 live
in kube-system against 1 real after 35 minutes of the demo cluster).

The pod snapshots carry both UIDs (``uid`` = the static pod's, ``api_uid`` = the mirror's), so the derive
stage maps one to the other when it reads:

* a static pod's derivation also reads the observations keyed by its mirrors' API UIDs (its own
  snapshots name them), re-keyed to the static UID, and drops any pod derived earlier under such a UID
  (events derived before the mirror's first snapshot was stored);
* a UID with no pod snapshot of its own that is a mirror's API UID (a static pod of the same namespace
  and name has a snapshot naming it) is derived as that static pod, never as a pod of its own.

Nothing is rewritten in the observations: ``manage.py rederive`` maps the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db.models import Q

from timelines.lifecycle.observation import Kind, Observation, stored_observation
from timelines.models import Cluster, Pod
from timelines.models import Observation as ObservationRow

POD_SNAPSHOTS = (Kind.POD, Kind.POD_DELETED)
Fact = tuple[int, Observation]


@dataclass
class Joined:
    """The pods to derive once mirrors are mapped, and the UIDs that were a mirror's (their own pods, if
    any were derived, are to be forgotten)."""

    uids: list[str]
    forget: set[str] = field(default_factory=set)


def _rekeyed(fact: Fact, uid: str) -> Fact:
    i, o = fact
    return i, stored_observation(
        o.kind, o.source, o.observed_at, o.dedupe_key, uid, o.node, o.namespace, o.name, o.payload
    )


def mirror_uids(facts: Sequence[Fact], uid: str) -> set[str]:
    """The API UIDs of the mirror pods whose snapshots are among ``facts`` of the static pod ``uid``."""
    out: set[str] = set()
    for _, o in facts:
        if o.kind in POD_SNAPSHOTS:
            api_uid = o.payload.get("api_uid")
            if isinstance(api_uid, str) and api_uid and api_uid != uid:
                out.add(api_uid)
    return out


def static_owners(cluster: Cluster, facts_by_uid: dict[str, list[Fact]]) -> dict[str, str]:
    """Which of these UIDs (those without a pod snapshot of their own) are a mirror pod's API UID: mirror
    API UID -> static UID. Two indexed reads, and only when such a UID is there."""
    names: dict[str, set[tuple[str, str]]] = {}
    for uid, facts in facts_by_uid.items():
        if facts and not any(o.kind in POD_SNAPSHOTS for _, o in facts):
            names[uid] = {(o.namespace, o.name) for _, o in facts if o.namespace and o.name}
    wanted = {pair for pairs in names.values() for pair in pairs}
    if not wanted:
        return {}
    by_name = Q(*[Q(namespace=ns, name=name) for ns, name in sorted(wanted)], _connector=Q.OR)
    statics = list(
        Pod.objects.filter(by_name, cluster=cluster, static=True)
        .exclude(uid__in=list(names))
        .values_list("uid", flat=True)
    )
    if not statics:
        return {}
    rows = (
        ObservationRow.objects.filter(
            cluster=cluster, pod_uid__in=statics, kind__in=POD_SNAPSHOTS, payload__api_uid__in=sorted(names)
        )
        .values_list("payload__api_uid", "pod_uid")
        .distinct()
    )
    return {str(api_uid): str(uid) for api_uid, uid in rows if uid}


def join(
    cluster: Cluster,
    uids: Sequence[str],
    facts_by_uid: dict[str, list[Fact]],
    read: Callable[[list[str]], dict[str, list[Fact]]],
    read_own: Callable[[list[str]], list[Fact]],
) -> Joined:
    """Map mirror API UIDs onto their static pods in ``facts_by_uid`` (changed in place): ``read`` reads
    the facts of pods not read yet (``derivation.pod_observations``), ``read_own`` the observations keyed
    by some UIDs (``derivation._own_facts``). Returns the UIDs to derive and those to forget."""
    owners = static_owners(cluster, facts_by_uid)
    wanted = [uid for uid in uids if uid not in owners]
    missing = sorted({owners[uid] for uid in owners} - set(facts_by_uid))
    if missing:
        facts_by_uid.update(read(missing))
    wanted += [uid for uid in missing if uid not in wanted]
    forget = set(owners)
    for uid in wanted:
        mirrors = mirror_uids(facts_by_uid.get(uid) or (), uid)
        if not mirrors:
            continue
        forget |= mirrors
        known = {o.dedupe_key for _, o in facts_by_uid[uid]}
        extra = [f for f in read_own(sorted(mirrors)) if f[1].dedupe_key not in known]
        facts_by_uid[uid] = facts_by_uid[uid] + [_rekeyed(f, uid) for f in extra]
    for uid in forget:  # a mirror's UID read beside its static pod (one batch) is not a pod either
        facts_by_uid.pop(uid, None)
    return Joined([uid for uid in wanted if uid not in forget], forget)
