"""Offline input: what kubectl prints, for clusters podlife never watched.

* ``kubectl get ... -o json``: a typed list (``PodList``: items carry no kind), a mixed ``List`` (items
  carry kind/apiVersion) or a single object;
* ``kubectl get ... -o yaml``, including multi-document YAML;
* ``kubectl get -w -o json``: pretty-printed JSON objects one after another, possibly wrapped as
  ``{"type": "ADDED", "object": {...}}`` (``--output-watch-events``);
* ``kubectl cluster-info dump``: the ``--output-directory`` folder (``nodes.json``,
  ``<namespace>/{pods,events,...}.json``, ``<namespace>/<pod>/logs.txt`` container logs, ignored) or
  its stdout form (JSON lists one after another, with ``==== START logs ...`` / ``==== END logs ...``
  container-log blocks in between, ignored).

Bad input gives a human-readable error naming the origin and what was expected, never an exception;
what was read before the problem is kept.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Final

import yaml  # no stubs in the venv (types-PyYAML)

from timelines.lifecycle.facts import status_was_reset
from timelines.lifecycle.observation import Kind, Observation, Source, digest_key
from timelines.lifecycle.timeline import parse_time

from .k8s_objects import SUPPORTED_KINDS, object_observation

__all__ = ["OfflineResult", "dump_member", "read_kubectl_output", "OFFLINE_SKIP_REASONS"]

OFFLINE_SKIP_REASONS: Final = {
    "empty": "an empty file or document",
    "bookmark": "a watch BOOKMARK event (carries only a resourceVersion)",
    "watch_error": "a watch ERROR event (e.g. 410 Expired); also listed in errors",
    "status": "a Status object (kubectl or the API reporting an error)",
    "unsupported_kind": "an object of a kind podlife does not track (Service, ConfigMap, ...)",
    "invalid_object": "an object missing what its kind needs (name, uid, a time); listed in errors",
    "event_without_time": "an Event with no time at all, or a DELETED Event (expired by TTL)",
    "not_an_object": "a value that is not a Kubernetes object, list or watch event; listed in errors",
    "invalid_json": "text that is not valid JSON; listed in errors",
    "invalid_yaml": "text that is not valid YAML; listed in errors",
    "container_logs": "a container log block or logs.txt of a cluster-info dump",
    "other_file": "a file in a cluster-info dump folder that is not .json/.yaml",
}

_LOG_START = re.compile(r"^==== START logs for .*====\s*$")
_LOG_END = re.compile(r"^==== END logs for .*====\s*$")
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(slots=True)
class OfflineResult:
    """Observations read from offline input, objects read by kind, skips by reason, and errors.

    ``errors`` are human-readable sentences naming the origin (file) and what was expected there.
    """

    observations: list[Observation] = field(default_factory=list)
    read: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    # Objects that were in the input but could not be read (by kind, "object" when not even the kind
    # could be read): a broken list item, an object missing what its kind needs, an unreadable file.
    lost: Counter[str] = field(default_factory=Counter)
    unreadable: list[str] = field(default_factory=list)  # inputs (files) that could not be read at all

    def merge(self, other: OfflineResult) -> None:
        """Add ``other``'s observations, counts and errors to this result."""
        self.observations.extend(other.observations)
        self.read.update(other.read)
        self.skipped.update(other.skipped)
        self.errors.extend(other.errors)
        self.lost.update(other.lost)
        self.unreadable.extend(other.unreadable)


def _strip_log_blocks(text: str, result: OfflineResult) -> str:
    """Drop cluster-info dump container-log blocks, keeping line count (blank lines) for error positions."""
    if "==== START logs for" not in text:
        return text
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if not inside and _LOG_START.match(line):
            inside = True
            result.skipped["container_logs"] += 1
            out.append("")
        elif inside:
            if _LOG_END.match(line):
                inside = False
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _json_values(text: str, origin: str, result: OfflineResult) -> Iterator[Any]:
    """Every JSON value in ``text`` (one, or a stream of them back to back).

    A value that does not decode is salvaged when it is a pretty-printed list (kubectl's): each of its
    items is decoded on its own, so the items before and after a break are kept and the broken ones are
    counted as lost (``OfflineResult.lost``), each named in ``errors``. Reading then resumes at the next
    value that starts a line (kubectl prints ``{`` in column 0)."""
    decoder = json.JSONDecoder()
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n\ufeff":
            pos += 1
        if pos >= n:
            return
        try:
            value, end = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            where = getattr(exc, "pos", pos)
            detail = getattr(exc, "msg", str(exc))
            nxt = text.find("\n{", pos + 1)
            stop = n if nxt == -1 else nxt + 1
            salvaged = _salvage_items(text, pos, stop, origin, result, decoder)
            if salvaged is None:
                result.skipped["invalid_json"] += 1
                result.lost["object"] += 1
                result.errors.append(
                    f"{origin}: line {_line_of(text, where)}: expected a JSON object or list ({detail})"
                )
            else:
                yield from salvaged
            if nxt == -1:
                return
            pos = stop
            continue
        yield value
        pos = end


_ITEMS = re.compile(r'"items"\s*:\s*\[')


def _salvage_items(
    text: str, start: int, stop: int, origin: str, result: OfflineResult, decoder: json.JSONDecoder
) -> list[Any] | None:
    """The items of a broken pretty-printed list in ``text[start:stop]`` that still decode, as a list
    holding one list value (so the caller reads them like any list); None when it is not a list.

    An item starts on its own line at the items' indentation; each one that does not decode (cut
    mid-string, its end missing) is lost, and named."""
    m = _ITEMS.search(text, start, stop)
    if m is None:
        return None
    first = re.compile(r"\n([ \t]*)\{").search(text, m.end(), stop)
    if first is None:
        return None
    indent = first.group(1)
    item_start = re.compile(r"\n" + re.escape(indent) + r"\{")
    # kubectl writes the list's own kind before its items (a typed list) or after them (sorted keys).
    kind_m = re.search(r'"kind"\s*:\s*"([A-Za-z]+List)"', text[start:stop])
    list_kind = kind_m.group(1) if kind_m else None
    items: list[Any] = []
    for number, found in enumerate(item_start.finditer(text, m.end() - 1, stop), 1):
        begin = found.start() + 1 + len(indent)
        try:
            item, _ = decoder.raw_decode(text, begin)
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:
            kind = _kind_of_list(list_kind) or "object"
            result.skipped["invalid_json"] += 1
            result.lost[kind] += 1
            result.errors.append(
                f"{origin}: line {_line_of(text, begin)}: item {number} of a broken "
                f"{list_kind or 'list'} could not be read ({getattr(exc, 'msg', exc)}); the items around it are kept"
            )
            continue
        items.append(item)
    hinted: dict[str, Any] = {"items": items}
    if list_kind:
        hinted["kind"] = list_kind
    return [hinted]


def _kind_of_list(list_kind: str | None) -> str | None:
    if list_kind and list_kind.endswith("List") and list_kind != "List":
        return list_kind[: -len("List")]
    return None


def _yaml_values(text: str, origin: str, result: OfflineResult) -> Iterator[Any]:
    try:
        for doc in yaml.load_all(text, Loader=_LOADER):
            if doc is None:
                result.skipped["empty"] += 1
                continue
            yield doc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        result.skipped["invalid_yaml"] += 1
        result.lost["object"] += 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        result.errors.append(
            f"{origin}: {where}expected YAML documents of Kubernetes objects ({problem}); "
            "the documents from there on could not be read"
        )
    except (RecursionError, ValueError, TypeError) as exc:
        result.skipped["invalid_yaml"] += 1
        result.errors.append(f"{origin}: expected YAML documents of Kubernetes objects ({exc})")


def _accept_object(
    obj: Mapping[str, Any],
    *,
    kind_hint: str | None,
    watch_type: str,
    where: str,
    origin: str,
    result: OfflineResult,
) -> None:
    own_kind = obj.get("kind")
    kind: str = own_kind if isinstance(own_kind, str) and own_kind else (kind_hint or "<no kind>")
    result.read[kind] += 1
    if kind == "Status":
        result.skipped["status"] += 1
        return
    if kind not in SUPPORTED_KINDS:
        result.skipped["unsupported_kind"] += 1
        return
    try:
        obs = object_observation(
            obj, kind_hint=kind, watch_type=watch_type, observed_at=None, source=Source.OFFLINE
        )
    except ValueError as exc:
        result.skipped["invalid_object"] += 1
        result.lost[kind] += 1
        result.errors.append(f"{origin}: {where}: {exc}")
        return
    if obs is None:
        result.skipped["event_without_time"] += 1
        return
    result.observations.append(obs)
    restart = reset_restart(obs)
    if restart is not None:
        result.observations.append(restart)


def reset_restart(obs: Observation) -> Observation | None:
    """A kubelet restart a pod snapshot shows: a status rewritten from scratch (``status_was_reset``) by
    the kubelet that started at its ``startTime``. A node-level ``kubelet_process`` observation, so the
    node lane marks the restart and the node's pods see it; None for any other snapshot."""
    if obs.kind != Kind.POD or not obs.node:
        return None
    p = obs.payload
    try:
        start = parse_time(p.get("start_time"))
        created = parse_time(p.get("created"))
        starts = []
        for c in p.get("containers") or []:
            at = parse_time(c.get("started_at")) if c.get("state") in ("running", "terminated") else None
            if at is not None:
                starts.append(at)
    except (ValueError, AttributeError):
        return None
    if start is None or not status_was_reset(start, created, bool(p.get("static")), starts):
        return None
    when = start.isoformat(timespec="microseconds")
    return Observation(
        kind=Kind.KUBELET_PROCESS,
        source=obs.source,
        observed_at=start,
        dedupe_key=digest_key("kubelet-start", obs.node, when),
        node=obs.node,
        payload={
            "pid": None,
            "first_at": when,
            "last_at": when,
            "lines": 0,
            "started_at": when,
            "version": None,
            "verbosity": None,
            "starts": [when],
            "from_status_reset": f"{p.get('namespace')}/{p.get('name')}",
        },
    )


def _accept(
    value: Any,
    *,
    where: str,
    origin: str,
    result: OfflineResult,
    watch_type: str = "SNAPSHOT",
    kind_hint: str | None = None,
    depth: int = 0,
) -> None:
    if depth > 4:
        result.skipped["not_an_object"] += 1
        result.errors.append(f"{origin}: {where}: lists nested too deep, expected a Kubernetes object")
        return
    if isinstance(value, list):
        for i, item in enumerate(value, 1):
            _accept(
                item,
                where=f"{where} element {i}",
                origin=origin,
                result=result,
                watch_type=watch_type,
                kind_hint=kind_hint,
                depth=depth + 1,
            )
        return
    if not isinstance(value, Mapping):
        result.skipped["not_an_object"] += 1
        result.errors.append(
            f"{origin}: {where}: expected a Kubernetes object, list or watch event, got {type(value).__name__}"
        )
        return
    event_type, wrapped = value.get("type"), value.get("object")
    if isinstance(event_type, str) and isinstance(wrapped, Mapping) and "metadata" not in value:
        watch_kind = event_type.upper()
        if watch_kind == "BOOKMARK":
            result.skipped["bookmark"] += 1
            return
        if watch_kind == "ERROR":
            result.skipped["watch_error"] += 1
            result.errors.append(
                f"{origin}: {where}: watch ERROR event (code {wrapped.get('code')}, reason "
                f"{wrapped.get('reason')}): {wrapped.get('message')}"
            )
            return
        _accept_object(
            wrapped, kind_hint=kind_hint, watch_type=watch_kind, where=where, origin=origin, result=result
        )
        return
    items = value.get("items")
    kind = value.get("kind")
    if isinstance(items, list) and (not isinstance(kind, str) or kind.endswith("List")):
        hint = (
            kind[: -len("List")]
            if isinstance(kind, str) and kind.endswith("List") and kind != "List"
            else None
        )
        if not items:
            result.skipped["empty"] += 1
        for i, item in enumerate(items, 1):
            if not isinstance(item, Mapping):
                result.skipped["not_an_object"] += 1
                result.errors.append(f"{origin}: {where} item {i}: expected a Kubernetes object")
                continue
            _accept_object(
                item,
                kind_hint=hint,
                watch_type="LIST",
                where=f"{where} item {i}",
                origin=origin,
                result=result,
            )
        return
    if (isinstance(kind, str) and kind) or kind_hint:
        _accept_object(
            value, kind_hint=kind_hint, watch_type=watch_type, where=where, origin=origin, result=result
        )
        return
    result.skipped["not_an_object"] += 1
    result.errors.append(
        f"{origin}: {where}: expected a Kubernetes object (kind and metadata), a List or a watch event"
    )


def read_kubectl_output(text: str, *, origin: str) -> OfflineResult:
    """Observations from kubectl output (``-o json``, ``-o yaml``, ``get -w -o json`` or dump stdout).

    The format is recognised from the text: JSON when it starts with ``{`` or ``[`` (one value or a
    stream of values back to back), YAML otherwise. Objects are read with source ``offline`` and
    ``observed_at`` = the newest timestamp inside each object (events: their own time). ``origin``
    names the input in errors. Never raises.
    """
    result = OfflineResult()
    try:
        if isinstance(text, bytes | bytearray):
            text = bytes(text).decode("utf-8", errors="replace")
        text = _strip_log_blocks(str(text), result)
        body = text.lstrip(" \t\r\n\ufeff")
        if not body:
            result.skipped["empty"] += 1
            return result
        if body[0] in "{[":
            for n, value in enumerate(_json_values(text, origin, result), 1):
                _accept(value, where=f"value {n}", origin=origin, result=result)
        else:
            for n, value in enumerate(_yaml_values(text, origin, result), 1):
                _accept(value, where=f"document {n}", origin=origin, result=result)
    except Exception as exc:  # a bug here must not lose what was read; say what happened instead
        result.errors.append(f"{origin}: could not read kubectl output ({type(exc).__name__}: {exc})")
    return result


_DUMP_SUFFIXES: Final = frozenset({".json", ".yaml", ".yml"})


def dump_member(name: str) -> str | None:
    """How the file ``name`` of a ``kubectl cluster-info dump --output-directory`` folder is read: None
    when it is kubectl output to read (``nodes.json``, ``<ns>/pods.json``, ``<ns>/events.json``,
    ``<ns>/{replicasets,deployments,daemonsets,statefulsets}.json``, any ``.json``/``.yaml``), else the
    reason it is skipped: ``container_logs`` (``<ns>/<pod>/logs.txt``) or ``other_file``. The folder is
    walked, and each file read, by the caller (``manage.py ingest_k8s_json``): parsers do no I/O."""
    if PurePath(name).suffix.lower() in _DUMP_SUFFIXES:
        return None
    return "container_logs" if PurePath(name).name == "logs.txt" else "other_file"
