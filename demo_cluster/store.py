"""The demo cluster's etcd + watch cache: objects as JSON bytes, one global resourceVersion, a history.

Objects are kept serialized (orjson bytes) rather than as dicts: a 150,000-pod cluster stays a few hundred
megabytes and a list page is a join of ready bytes. ``_compact_bytes`` matters: orjson returns its output
buffer without shrinking it (a 2 KB pod can hold 8-16 KB), so what is stored is an exact-size copy. Every write takes the next value of one counter shared
by all resources, as etcd's revision is. The history is what watches replay; ``compact`` drops it so a
watch from an older resourceVersion gets 410 Expired, as after an etcd compaction.
"""

from __future__ import annotations

import base64
import sys
import threading
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass
from typing import Any

import orjson

Key = tuple[str, str]  # (namespace or "", name)


def _compact_bytes(obj: Any) -> bytes:
    """``orjson.dumps(obj)`` copied into an exactly sized bytes object (see the module docstring)."""
    return bytes(memoryview(orjson.dumps(obj)))


@dataclass(frozen=True)
class ResourceType:
    name: str  # plural, as in the URL
    group: str  # "" for the core group
    version: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    singular: str = ""
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"


RESOURCES: dict[str, ResourceType] = {
    r.name: r
    for r in (
        ResourceType("pods", "", "v1", "Pod", True, ("po",), "pod", ("status", "eviction", "log"), ("all",)),
        ResourceType("events", "", "v1", "Event", True, ("ev",), "event"),
        ResourceType("nodes", "", "v1", "Node", False, ("no",), "node", ("status", "proxy")),
        ResourceType("namespaces", "", "v1", "Namespace", False, ("ns",), "namespace", ("status",)),
        ResourceType(
            "poddisruptionbudgets",
            "policy",
            "v1",
            "PodDisruptionBudget",
            True,
            ("pdb",),
            "poddisruptionbudget",
            ("status",),
        ),
        ResourceType(
            "deployments",
            "apps",
            "v1",
            "Deployment",
            True,
            ("deploy",),
            "deployment",
            ("status", "scale"),
            ("all",),
        ),
        ResourceType(
            "statefulsets",
            "apps",
            "v1",
            "StatefulSet",
            True,
            ("sts",),
            "statefulset",
            ("status", "scale"),
            ("all",),
        ),
        ResourceType(
            "daemonsets", "apps", "v1", "DaemonSet", True, ("ds",), "daemonset", ("status",), ("all",)
        ),
        ResourceType(
            "replicasets",
            "apps",
            "v1",
            "ReplicaSet",
            True,
            ("rs",),
            "replicaset",
            ("status", "scale"),
            ("all",),
        ),
        ResourceType("leases", "coordination.k8s.io", "v1", "Lease", True, (), "lease"),
    )
}

# events.k8s.io/v1 is a second view of the core "events" store (see objects.event_to_events_v1).
EVENTS_V1 = ResourceType("events", "events.k8s.io", "v1", "Event", True, ("ev",), "event")


class Expired(Exception):
    """A resourceVersion or continue token older than the retained history (HTTP / watch 410)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Dropped(Exception):
    """All watches were dropped by a hook, or the server is stopping."""


@dataclass(slots=True)
class Entry:
    rv: int
    resource: str  # "" for a raw line injected into every stream
    namespace: str
    name: str
    type: str  # ADDED / MODIFIED / DELETED, or RAW
    data: bytes  # the object (or the raw line)
    node: str = ""  # spec.nodeName of pods, for fieldSelector filtering


class Store:
    """All objects of the cluster. Thread-safe through ``cond`` (an RLock-backed Condition)."""

    def __init__(self, history_limit: int = 200_000) -> None:
        self.cond = threading.Condition(threading.RLock())
        self.rv = 1
        self.history_limit = history_limit
        self._objs: dict[str, dict[Key, bytes]] = {name: {} for name in RESOURCES}
        self._keys: dict[str, list[Key]] = {name: [] for name in RESOURCES}
        self._nodes_of: dict[Key, str] = {}  # pod key -> nodeName
        self._hist: list[Entry] = []
        self._hist_rvs: list[int] = []
        self._base_seq = 0  # sequence number of _hist[0]
        self.compacted_rv = 1  # history at or below this revision is gone
        self.epoch = 0  # bumped to drop every open watch
        self.closed = False

    # ---- writes -------------------------------------------------------------------------------
    def _append(self, entry: Entry) -> None:
        self._hist.append(entry)
        self._hist_rvs.append(entry.rv)
        if len(self._hist) > self.history_limit:
            drop = len(self._hist) - self.history_limit * 3 // 4
            self.compacted_rv = self._hist_rvs[drop - 1]
            del self._hist[:drop]
            del self._hist_rvs[:drop]
            self._base_seq += drop
        self.cond.notify_all()

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object; stamps a new resourceVersion into ``obj`` and returns it."""
        meta = obj["metadata"]
        key = (sys.intern(meta.get("namespace", "")), meta["name"])
        with self.cond:
            self.rv += 1
            meta["resourceVersion"] = str(self.rv)
            data = _compact_bytes(obj)
            objs = self._objs[resource]
            event = "MODIFIED" if key in objs else "ADDED"
            if event == "ADDED":
                insort(self._keys[resource], key)
            objs[key] = data
            node = ""
            if resource == "pods":
                node = obj.get("spec", {}).get("nodeName") or ""
                self._nodes_of[key] = node
            self._append(Entry(self.rv, resource, key[0], key[1], event, data, node))
        return obj

    def delete(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """Remove an object; the DELETED event carries its last state at a new resourceVersion."""
        key = (namespace, name)
        with self.cond:
            data = self._objs[resource].pop(key, None)
            if data is None:
                return None
            keys = self._keys[resource]
            del keys[bisect_left(keys, key)]
            obj: dict[str, Any] = orjson.loads(data)
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            data = _compact_bytes(obj)
            node = self._nodes_of.pop(key, "") if resource == "pods" else ""
            self._append(Entry(self.rv, resource, namespace, name, "DELETED", data, node))
        return obj

    # ---- reads --------------------------------------------------------------------------------
    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        data = self._objs[resource].get((namespace, name))
        return None if data is None else orjson.loads(data)

    def get_raw(self, resource: str, namespace: str, name: str) -> bytes | None:
        return self._objs[resource].get((namespace, name))

    def count(self, resource: str) -> int:
        return len(self._objs[resource])

    def keys(self, resource: str, namespace: str | None = None) -> list[Key]:
        with self.cond:
            keys = self._keys[resource]
            if namespace is None:
                return list(keys)
            lo = bisect_left(keys, (namespace, ""))
            hi = bisect_left(keys, (namespace + "\x00", ""))
            return keys[lo:hi]

    def iter_objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Decoded copies of every object (small resources; use ``list_page`` for pods at scale)."""
        with self.cond:
            objs = self._objs[resource]
            return [orjson.loads(objs[k]) for k in self.keys(resource, namespace)]

    def last_state(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The newest state of an object still in the watch history (a deleted one's last state); None
        when compaction dropped it."""
        with self.cond:
            for entry in reversed(self._hist):
                if entry.resource == resource and entry.namespace == namespace and entry.name == name:
                    state: dict[str, Any] = orjson.loads(entry.data)
                    return state
        return None

    def node_of(self, namespace: str, name: str) -> str:
        return self._nodes_of.get((namespace, name), "")

    def list_page(
        self,
        resource: str,
        namespace: str | None,
        limit: int,
        continue_token: str | None,
        match: Any = None,
    ) -> tuple[list[bytes], int, str | None, int | None]:
        """One page of a list: (items, list resourceVersion, next continue token, remaining count).

        ``match(key, data)`` filters (field/label selectors). A continue token names the list's
        resourceVersion and the last key served; it expires when that revision was compacted away.
        """
        with self.cond:
            keys = self._keys[resource]
            start_key: Key | None = None
            list_rv = self.rv
            if continue_token:
                try:
                    tok = orjson.loads(base64.urlsafe_b64decode(continue_token.encode()))
                    list_rv = int(tok["rv"])
                    start_key = (tok["start"][0], tok["start"][1])
                except (ValueError, KeyError, TypeError, IndexError) as exc:
                    raise ValueError(f"invalid continue token: {exc}") from exc
                if list_rv < self.compacted_rv:
                    raise Expired(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    )
            if namespace is None:
                lo, hi = 0, len(keys)
            else:
                lo = bisect_left(keys, (namespace, ""))
                hi = bisect_left(keys, (namespace + "\x00", ""))
            if start_key is not None:
                lo = max(lo, bisect_right(keys, start_key))
            objs = self._objs[resource]
            items: list[bytes] = []
            i = lo
            while i < hi and (limit <= 0 or len(items) < limit):
                key = keys[i]
                data = objs[key]
                if match is None or match(key, data):
                    items.append(data)
                i += 1
            if i < hi and limit > 0:
                token = base64.urlsafe_b64encode(
                    orjson.dumps({"v": "meta.k8s.io/v1", "rv": list_rv, "start": list(keys[i - 1])})
                ).decode()
                remaining = hi - i if match is None else None
                return items, list_rv, token, remaining
            return items, list_rv, None, None

    # ---- watch --------------------------------------------------------------------------------
    def watch_position(self, from_rv: int) -> int:
        """The history sequence number just after ``from_rv``; raises Expired if it was compacted."""
        with self.cond:
            if from_rv < self.compacted_rv:
                raise Expired(f"too old resource version: {from_rv} ({self.compacted_rv})")
            return self._base_seq + bisect_right(self._hist_rvs, from_rv)

    def head_position(self) -> int:
        with self.cond:
            return self._base_seq + len(self._hist)

    def wait_entries(self, seq: int, epoch: int, timeout: float) -> tuple[list[Entry], int, int]:
        """Entries from history position ``seq`` (blocking up to ``timeout``): (entries, next seq, rv seen).

        Raises Expired when the watcher fell behind a compaction, Dropped when watches were dropped.
        """
        with self.cond:
            if self.epoch != epoch or self.closed:
                raise Dropped()
            if seq >= self._base_seq + len(self._hist) and timeout > 0:
                self.cond.wait(timeout)
            if self.epoch != epoch or self.closed:
                raise Dropped()
            if seq < self._base_seq:
                raise Expired(
                    f"too old resource version: {self._hist_rvs[0] - 1 if self._hist_rvs else self.rv} ({self.compacted_rv})"
                )
            start = seq - self._base_seq
            entries = self._hist[start:]
            seen_rv = self._hist_rvs[-1] if self._hist_rvs else self.compacted_rv
            return entries, self._base_seq + len(self._hist), seen_rv

    # ---- fault hooks --------------------------------------------------------------------------
    def compact(self) -> int:
        """Forget all watch history now (etcd compaction); returns the compacted revision."""
        with self.cond:
            self.compacted_rv = self.rv
            self._base_seq += len(self._hist)
            self._hist.clear()
            self._hist_rvs.clear()
            self.cond.notify_all()
            return self.compacted_rv

    def drop_watches(self) -> None:
        with self.cond:
            self.epoch += 1
            self.cond.notify_all()

    def inject_raw(self, line: bytes) -> None:
        """Send ``line`` verbatim to every open watch stream (a malformed line, for parser tests)."""
        with self.cond:
            self._append(Entry(self.rv, "", "", "", "RAW", line))

    def redeliver_last(self) -> bool:
        """Append the newest object event again, so watchers see it twice (same resourceVersion)."""
        with self.cond:
            for entry in reversed(self._hist):
                if entry.type != "RAW":
                    self._append(
                        Entry(
                            entry.rv,
                            entry.resource,
                            entry.namespace,
                            entry.name,
                            entry.type,
                            entry.data,
                            entry.node,
                        )
                    )
                    return True
            return False

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
