"""The demo cluster's HTTP face: the Kubernetes list/watch wire protocol, discovery, the eviction
subresource, the kubelet proxy (metrics, logs) and the ``/_sim/`` fault hooks.

One thread per connection (``ThreadingHTTPServer``); a watch thread sleeps on the store's condition and
writes one chunk per batch of history. ``SimServer.stop`` closes the store first (every watch thread
wakes and returns), then shuts the listener down, then stops the clock thread.
"""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import yaml

from . import containerlogs, discovery, tables
from .cluster import SimCluster
from .engine import RealtimeDriver
from .objects import event_to_events_v1, status
from .scenarios import install
from .store import RESOURCES, Dropped, Entry, Expired, ResourceType
from .tls import make_serving_certs
from .writes import ApiError

CORE_RE = re.compile(
    r"^/api/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?/?$"
)
GROUP_RE = re.compile(
    r"^/apis/(?P<group>[a-z0-9.]+)/v1(?:/namespaces/(?P<ns>[^/]+))?/(?P<res>[a-z]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[a-z]+))?/?$"
)
PROXY_RE = re.compile(r"^/api/v1/nodes/(?P<node>[^/]+)/proxy/(?P<what>metrics|logs)(?:/.*)?$")
TOKEN = "podlife-demo-token"
WATCH_CHUNK_EVENTS = 500  # watch events per chunk of a burst (initial events, a replayed backlog)


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true")


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


FIELD_ALIASES = {
    "reportingController": "reportingComponent",
    "note": "message",
    "regarding.kind": "involvedObject.kind",
    "regarding.name": "involvedObject.name",
    "regarding.namespace": "involvedObject.namespace",
    "regarding.uid": "involvedObject.uid",
}


def _selector_fn(
    field_sel: str | None, label_sel: str | None
) -> Callable[[str, str, str, bytes], bool] | None:
    """(namespace, name, node, data) -> bool for fieldSelector (metadata.name/namespace, spec.nodeName)
    and equality-based labelSelector; None when there is nothing to filter."""
    fields: list[tuple[str, bool, str]] = []
    for part in filter(None, (field_sel or "").split(",")):
        neg = "!=" in part
        k, _, v = part.partition("!=" if neg else "=")
        fields.append((k.strip().lstrip("="), neg, v.lstrip("=").strip()))
    labels: list[tuple[str, str, str]] = []
    for part in filter(None, (label_sel or "").split(",")):
        if "!=" in part:
            k, _, v = part.partition("!=")
            labels.append((k.strip(), "!=", v.strip()))
        elif "=" in part:
            k, _, v = part.partition("=")
            labels.append((k.strip(), "=", v.lstrip("=").strip()))
        elif part.startswith("!"):
            labels.append((part[1:].strip(), "!", ""))
        else:
            labels.append((part.strip(), "exists", ""))
    if not fields and not labels:
        return None

    def match(ns: str, name: str, node: str, data: bytes) -> bool:
        obj: dict[str, Any] | None = None
        for k, neg, v in fields:
            actual = {"metadata.name": name, "metadata.namespace": ns, "spec.nodeName": node}.get(k)
            if actual is None:  # any other field: resolve the dotted path (events.k8s.io names too)
                obj = obj if obj is not None else orjson.loads(data)
                cur: Any = obj
                for part in FIELD_ALIASES.get(k, k).split("."):
                    cur = cur.get(part) if isinstance(cur, dict) else None
                actual = "" if cur is None else str(cur)
            if (actual == v) == neg:
                return False
        if labels:
            got = orjson.loads(data)["metadata"].get("labels") or {}
            for k, op, v in labels:
                if (
                    op == "="
                    and got.get(k) != v
                    or op == "!="
                    and got.get(k) == v
                    or op == "!"
                    and k in got
                    or op == "exists"
                    and k not in got
                ):
                    return False
        return True

    return match


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ---- helpers ------------------------------------------------------------------------------
    @property
    def sim(self) -> SimServer:
        return self.server.sim

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.sim.record_request(self.command, self.path, code, self.headers.get("Content-Type") or "")
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Audit-Id", "podlife-sim")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, obj: Any) -> None:
        self._send(code, orjson.dumps(obj))

    def _status(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        self._json(code, status(code, reason, message, details))

    def _not_found_path(self) -> None:
        self._status(
            404,
            "NotFound",
            "the server could not find the requested resource",
            {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]},
        )

    def _authorized(self) -> bool:
        """A wrong bearer token gets 401. Without ``require_token`` (plain http) a request with no token is
        let in as anonymous: kubectl (client-go) does not send a bearer token over plain http, and this
        server only listens on loopback. Over TLS a token is required, as on a cluster whose API server
        does not allow anonymous requests."""
        token = self.sim.token
        got = self.headers.get("Authorization")
        scheme, _, value = (got or "").partition(" ")
        if not token or (scheme.lower() == "bearer" and value.strip() == token):  # the scheme is case-free
            return True
        if got is None and not self.sim.require_token:
            return True
        self._status(401, "Unauthorized", "Unauthorized")
        return False

    # ---- verbs --------------------------------------------------------------------------------
    def do_GET(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route("GET")

    def do_POST(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route("POST")

    def do_DELETE(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route("DELETE")

    def do_PUT(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route("PUT")

    def do_PATCH(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._route("PATCH")

    def _read_json(self) -> Any:
        """The request body decoded (JSON; YAML for ``application/yaml``); ApiError 400 otherwise."""
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw.strip():
            raise ApiError(400, "BadRequest", "the request has no body: expected a JSON object")
        ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip()
        try:
            if ctype in ("application/yaml", "application/apply-patch+yaml"):
                return yaml.safe_load(raw)
            return orjson.loads(raw)
        except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"the request body is not valid JSON: {exc}") from None

    def _body(self) -> dict[str, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        if not n:
            return {}
        raw = self.rfile.read(n)
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}

    def _route(self, verb: str) -> None:
        url = urlsplit(self.path)
        path = url.path
        q = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        if path.startswith("/_sim/"):
            self._hook(path[len("/_sim/") :].strip("/"), q)
            return
        if not self._authorized():
            return
        if verb == "GET":
            doc = self._discovery(path)
            if doc is not None:
                self._json(200, doc)
                return
        m = PROXY_RE.match(path)
        if m and verb == "GET":
            self._proxy(m["node"], m["what"], q)
            return
        m = CORE_RE.match(path)
        group = ""
        if m is None:
            m = GROUP_RE.match(path)
            group = m["group"] if m else ""
        if m is None:
            self._not_found_path()
            return
        if group in self.sim.cluster.absent_groups:
            self._not_found_path()
            return
        res_name = m["res"]
        rtype = RESOURCES.get(res_name)
        if rtype is None or rtype.group != group and not (group == "events.k8s.io" and res_name == "events"):
            self._not_found_path()
            return
        ns, name, sub = m["ns"], m["name"], m["sub"]
        if ns is not None and not rtype.namespaced:
            self._not_found_path()
            return
        forbidden = self.sim.cluster.forbidden
        if res_name in forbidden or f"{group}/{res_name}" in forbidden:
            scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
            verb_word = "watch" if _truthy(q.get("watch")) else ("get" if name else "list")
            self._status(
                403,
                "Forbidden",
                f'{res_name} is forbidden: User "system:serviceaccount:podlife:collector" cannot {verb_word} resource "{res_name}" in API group "{group}" {scope}',
                {"kind": res_name, **({"name": name} if name else {})},
            )
            return
        shape = "events.k8s.io" if group == "events.k8s.io" else ""
        try:
            if verb != "GET" or sub in ("scale", "log"):
                self._write(verb, rtype, ns, name, sub, q, shape)
                return
        except ApiError as exc:
            self._status(exc.code, exc.reason, exc.message, exc.details)
            return
        if name is not None:
            if sub not in (None, "status") or (sub == "status" and "status" not in rtype.subresources):
                self._not_found_path()
                return
            data = self.sim.cluster.store.get_raw(res_name, ns or "", name)
            if data is None:
                self._status(
                    404,
                    "NotFound",
                    f'{res_name}{"." + group if group else ""} "{name}" not found',
                    {"name": name, "group": group, "kind": res_name}
                    if group
                    else {"name": name, "kind": res_name},
                )
                return
            if self._wants_table(rtype, shape):
                obj = orjson.loads(data)
                self._json(
                    200,
                    tables.table(
                        rtype.name,
                        [obj],
                        self.sim.cluster.now,
                        obj["metadata"].get("resourceVersion", ""),
                        q.get("includeObject") or "Metadata",
                        rtype.kind,
                        rtype.api_version,
                    ),
                )
                return
            self._send(200, self._typed(rtype, data, shape))
            return
        if _truthy(q.get("watch")):
            self._watch(rtype, ns, q, shape)
        else:
            self._list(rtype, ns, q, shape)

    # ---- writes and subresources ----------------------------------------------------------------
    def _write(
        self,
        verb: str,
        rtype: ResourceType,
        ns: str | None,
        name: str | None,
        sub: str | None,
        q: dict[str, str],
        shape: str,
    ) -> None:
        """Everything but plain GETs: PUT / PATCH / DELETE of objects and their status, deletecollection,
        the scale subresource, eviction and pods/log. Raises ApiError for the API server's refusals."""
        cluster = self.sim.cluster
        res = rtype.name
        dry_run = q.get("dryRun") == "All"
        if shape or (rtype.namespaced and name is not None and ns is None):
            raise ApiError(
                405,
                "MethodNotAllowed",
                f"the server does not allow this method on the requested resource ({verb} {res})",
            )
        if sub == "eviction":
            if verb != "POST" or res != "pods" or not ns or not name:
                raise ApiError(
                    405,
                    "MethodNotAllowed",
                    f"the server does not allow this method on pods/eviction ({verb})",
                )
            body = self._body()
            grace = (body.get("deleteOptions") or {}).get("gracePeriodSeconds")
            code, st = cluster.evict(ns, name, grace)
            self._json(code, st)
            return
        if sub == "log":
            if verb != "GET" or res != "pods" or not ns or not name:
                raise ApiError(
                    405, "MethodNotAllowed", f"the server does not allow this method on pods/log ({verb})"
                )
            self._pod_log(ns, name, q)
            return
        if sub == "scale":
            if "scale" not in rtype.subresources or not name:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if verb == "GET":
                self._json(200, cluster.api_scale(res, ns or "", name))
            elif verb == "PUT":
                self._json(
                    200, cluster.api_update_scale(res, ns or "", name, self._read_json(), dry_run=dry_run)
                )
            elif verb == "PATCH":
                ctype = self.headers.get("Content-Type") or ""
                self._json(
                    200,
                    cluster.api_update_scale(res, ns or "", name, self._read_json(), ctype, dry_run=dry_run),
                )
            else:
                raise ApiError(
                    405, "MethodNotAllowed", f"the server does not allow this method on {res}/scale ({verb})"
                )
            return
        if sub not in (None, "status") or (sub == "status" and "status" not in rtype.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if name is None:
            if verb == "DELETE" and sub is None:
                self._delete_collection(rtype, ns, q)
                return
            raise ApiError(
                405,
                "MethodNotAllowed",
                f"the server does not allow this method on the requested resource ({verb} {res}); "
                "the demo cluster creates objects through its scenarios, not through the API",
            )
        typed = {"kind": rtype.kind, "apiVersion": rtype.api_version}
        if verb == "PUT":
            obj = cluster.api_update(res, ns or "", name, sub, self._read_json(), dry_run=dry_run)
            self._json(200, {**typed, **obj})
        elif verb == "PATCH":
            patch = self._read_json()
            ctype = self.headers.get("Content-Type") or ""
            obj = cluster.api_patch(res, ns or "", name, sub, patch, ctype, dry_run=dry_run)
            self._json(200, {**typed, **obj})
        elif verb == "DELETE" and sub is None:
            body = self._body()
            grace = body.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
            try:
                grace_s = None if grace is None else int(grace)
            except ValueError:
                raise ApiError(400, "BadRequest", f"invalid gracePeriodSeconds: {grace!r}") from None
            code, out = cluster.api_delete(res, ns or "", name, grace_s)
            self._json(code, out)
        else:
            raise ApiError(
                405,
                "MethodNotAllowed",
                f"the server does not allow this method on the requested resource ({verb} {res})",
            )

    def _delete_collection(self, rtype: ResourceType, ns: str | None, q: dict[str, str]) -> None:
        sel = _selector_fn(q.get("fieldSelector"), q.get("labelSelector"))
        store = self.sim.cluster.store

        def match(obj: dict[str, Any]) -> bool:
            meta = obj["metadata"]
            node = (obj.get("spec") or {}).get("nodeName") or "" if rtype.name == "pods" else ""
            return sel is None or sel(meta.get("namespace", ""), meta["name"], node, orjson.dumps(obj))

        gone = self.sim.cluster.api_delete_collection(rtype.name, ns, match)
        self._json(
            200,
            {
                "kind": rtype.list_kind,
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": str(store.rv)},
                "items": [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in gone],
            },
        )

    def _pod_log(self, ns: str, name: str, q: dict[str, str]) -> None:
        """pods/log: the container's derived log (demo_cluster/containerlogs.py); ``follow`` streams new
        lines until the container stops, the pod goes or the client leaves."""
        cluster = self.sim.cluster

        def number(key: str) -> int | None:
            try:
                return int(q[key]) if q.get(key) else None
            except ValueError:
                raise ApiError(400, "BadRequest", f"invalid {key}: {q[key]!r}") from None

        tail, since_s, limit = number("tailLines"), number("sinceSeconds"), number("limitBytes")
        timestamps = _truthy(q.get("timestamps"))

        def read() -> tuple[str, bytes, int, bool]:
            with cluster.engine.lock:
                pod = cluster.store.get("pods", ns, name)
                if pod is None:
                    raise ApiError(
                        404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"}
                    )
                behaviour = cluster.behaviours.get((ns, name))
                ignores = bool(behaviour and behaviour.ignore_sigterm)
                try:
                    cname, data = containerlogs.read_log(
                        pod,
                        q.get("container"),
                        cluster.now,
                        ignores_sigterm=ignores,
                        previous=_truthy(q.get("previous")),
                        timestamps=timestamps,
                        tail_lines=tail,
                        since_seconds=since_s,
                        since_time=q.get("sinceTime"),
                        limit_bytes=limit,
                    )
                except containerlogs.LogError as exc:
                    raise ApiError(exc.code, exc.reason, exc.message) from None
                everything = containerlogs.container_lines(pod, cname, cluster.now, ignores)
                cs: dict[str, Any] = next(
                    (c for c in pod["status"].get("containerStatuses") or [] if c.get("name") == cname), {}
                )
                done = "terminated" in (cs.get("state") or {})
                return cname, data, len(everything), done

        cname, data, sent, done = read()
        if not _truthy(q.get("follow")):
            self._send(200, data, "text/plain")
            return
        self.sim.record_request(self.command, self.path, 200, "")
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if data:
            self._chunk(data)
        deadline = time.monotonic() + 1800
        while not done and time.monotonic() < deadline and not cluster.store.closed:
            time.sleep(0.2)
            with cluster.engine.lock:
                pod = cluster.store.get("pods", ns, name)
                gone = pod is None
                if pod is None:  # deleted since the last poll: its last state says how the container ended
                    pod = cluster.store.last_state("pods", ns, name)
                if pod is None:
                    break
                done = gone
                behaviour = cluster.behaviours.get((ns, name))
                lines = containerlogs.container_lines(
                    pod, cname, cluster.now, bool(behaviour and behaviour.ignore_sigterm)
                )
                cs: dict[str, Any] = next(
                    (c for c in pod["status"].get("containerStatuses") or [] if c.get("name") == cname), {}
                )
                done = done or "terminated" in (cs.get("state") or {})
            fresh = lines[sent:]
            sent = len(lines)
            if fresh:
                self._chunk(containerlogs.format_lines(fresh, timestamps))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    # ---- discovery ----------------------------------------------------------------------------
    def _discovery(self, path: str) -> dict[str, Any] | None:
        path = path.rstrip("/") or "/"
        if path == "/version":
            return discovery.VERSION_INFO
        if path == "/api":
            return discovery.api_versions()
        absent = self.sim.cluster.absent_groups
        if path == "/apis":
            doc = discovery.api_group_list()
            return {**doc, "groups": [g for g in doc["groups"] if g["name"] not in absent]}
        if path == "/api/v1":
            return discovery.resource_list("")
        parts = path.split("/")
        if len(parts) >= 3 and parts[1] == "apis" and parts[2] in absent:
            return None
        if len(parts) == 3 and parts[1] == "apis":
            return discovery.api_group(parts[2])
        if len(parts) == 4 and parts[1] == "apis" and parts[3] == "v1":
            return discovery.resource_list(parts[2])
        if path in ("/healthz", "/readyz", "/livez"):
            return None
        return None

    # ---- objects ------------------------------------------------------------------------------
    def _wants_table(self, rtype: ResourceType, shape: str) -> bool:
        """kubectl asks for ``as=Table``; every kind served here has its server-side columns
        (demo_cluster/tables.py). The events.k8s.io view answers plain objects."""
        return "as=Table" in self.headers.get("Accept", "") and not shape and tables.has_table(rtype.name)

    @staticmethod
    def _api_version(rtype: ResourceType, shape: str) -> str:
        return "events.k8s.io/v1" if shape else rtype.api_version

    def _typed(self, rtype: ResourceType, data: bytes, shape: str) -> bytes:
        """A single object with kind/apiVersion (typed list items carry neither)."""
        if shape:
            return orjson.dumps(event_to_events_v1(orjson.loads(data)))
        head = b'{"kind":"' + rtype.kind.encode() + b'","apiVersion":"' + rtype.api_version.encode() + b'",'
        return head + data[1:]

    def _item(self, data: bytes, shape: str) -> bytes:
        if shape:
            ev = event_to_events_v1(orjson.loads(data))
            del ev["kind"], ev["apiVersion"]
            return orjson.dumps(ev)
        return data

    def _list(self, rtype: ResourceType, ns: str | None, q: dict[str, str], shape: str) -> None:
        store = self.sim.cluster.store
        try:
            limit = int(q.get("limit") or 0)
        except ValueError:
            self._status(400, "BadRequest", f"invalid limit: {q.get('limit')!r}")
            return
        sel = _selector_fn(q.get("fieldSelector"), q.get("labelSelector"))
        match = None
        if sel is not None:
            node_of = store.node_of if rtype.name == "pods" else (lambda _ns, _n: "")

            def match(key: tuple[str, str], data: bytes) -> bool:
                return sel(key[0], key[1], node_of(*key), data)

        try:
            items, rv, cont, remaining = store.list_page(
                rtype.name, ns, limit, q.get("continue") or None, match
            )
        except Expired as exc:
            self._status(410, "Expired", exc.message)
            return
        except ValueError as exc:
            self._status(400, "BadRequest", str(exc))
            return
        if self._wants_table(rtype, shape):
            table = tables.table(
                rtype.name,
                [orjson.loads(d) for d in items],
                self.sim.cluster.now,
                str(rv),
                q.get("includeObject") or "Metadata",
                rtype.kind,
                rtype.api_version,
            )
            if cont:
                table["metadata"]["continue"] = cont
            self._json(200, table)
            return
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        head = orjson.dumps(
            {"kind": rtype.list_kind, "apiVersion": self._api_version(rtype, shape), "metadata": meta}
        )
        body = head[:-1] + b',"items":[' + b",".join(self._item(d, shape) for d in items) + b"]}"
        self._send(200, body)

    # ---- watch --------------------------------------------------------------------------------
    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _watch(self, rtype: ResourceType, ns: str | None, q: dict[str, str], shape: str) -> None:
        store = self.sim.cluster.store
        rv_param = q.get("resourceVersion") or ""
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        initial = _truthy(q.get("sendInitialEvents"))
        try:
            timeout = float(q.get("timeoutSeconds") or 1800)
        except ValueError:
            timeout = 1800.0
        sel = _selector_fn(q.get("fieldSelector"), q.get("labelSelector"))
        api_version = self._api_version(rtype, shape).encode()
        kind = rtype.kind.encode()
        table = self._wants_table(rtype, shape)
        include_object = q.get("includeObject") or "Metadata"
        headers_sent = [False]  # the API server sends column definitions with the first event only

        def line(etype: str, data: bytes) -> bytes:
            if table:
                obj = orjson.loads(data)
                rv = obj["metadata"].get("resourceVersion", "")
                tbl = tables.table(
                    rtype.name,
                    [obj],
                    self.sim.cluster.now,
                    rv,
                    include_object,
                    rtype.kind,
                    rtype.api_version,
                    not headers_sent[0],
                )
                headers_sent[0] = True
                obj = orjson.dumps(tbl)
            elif shape:
                obj = orjson.dumps(event_to_events_v1(orjson.loads(data)))
            else:
                obj = b'{"kind":"' + kind + b'","apiVersion":"' + api_version + b'",' + data[1:]
            return b'{"type":"' + etype.encode() + b'","object":' + obj + b"}\n"

        def bookmark(rv: int, end_initial: bool = False) -> bytes:
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if end_initial:
                meta["annotations"] = {"k8s.io/initial-events-end": "true"}
            return (
                orjson.dumps(
                    {
                        "type": "BOOKMARK",
                        "object": {"kind": rtype.kind, "apiVersion": api_version.decode(), "metadata": meta},
                    }
                )
                + b"\n"
            )

        first: list[bytes] = []
        # The initial state is snapshotted under the lock (references to the stored bytes, cheap even
        # for 150,000 pods) and rendered and sent outside it, in chunks.
        snapshot: list[tuple[tuple[str, str], bytes, str]] = []
        end_initial: bytes = b""
        with store.cond:
            epoch = store.epoch
            if rv_param in ("", "0") or initial:
                pods = rtype.name == "pods"
                for key in store.keys(rtype.name, ns):
                    data = store.get_raw(rtype.name, *key)
                    if data is not None:
                        snapshot.append((key, data, store.node_of(*key) if pods else ""))
                seq = store.head_position()
                seen_rv = store.rv
                if initial and bookmarks:
                    end_initial = bookmark(seen_rv, end_initial=True)
            else:
                try:
                    seen_rv = int(rv_param)
                    seq = store.watch_position(seen_rv)
                except ValueError:
                    self._status(400, "BadRequest", f"invalid resource version: {rv_param!r}")
                    return
                except Expired as exc:
                    seq = -1
                    first.append(
                        orjson.dumps({"type": "ERROR", "object": status(410, "Expired", exc.message)}) + b"\n"
                    )
        self.sim.record_request(self.command, self.path, 200, "")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.server.track(self.connection, True)
        try:
            batch: list[bytes] = []
            for key, data, node in snapshot:
                if sel is None or sel(key[0], key[1], node, data):
                    batch.append(line("ADDED", data))
                    if len(batch) >= WATCH_CHUNK_EVENTS:
                        self._chunk(b"".join(batch))
                        batch = []
            del snapshot
            first = batch + first + ([end_initial] if end_initial else [])
            if first:
                self._chunk(b"".join(first))
            deadline = time.monotonic() + (timeout if seq >= 0 else 0.0)
            next_bookmark = time.monotonic() + self.sim.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                try:
                    entries, seq, scanned_rv = store.wait_entries(seq, epoch, max(0.0, min(wait, 1.0)))
                except Expired as exc:
                    self._chunk(
                        orjson.dumps({"type": "ERROR", "object": status(410, "Expired", exc.message)}) + b"\n"
                    )
                    break
                except Dropped:
                    if self.sim.drop_mode == "reset" and not store.closed:
                        self.close_connection = True
                        with contextlib.suppress(OSError):
                            self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    break
                # A backlog goes out in chunks as it is rendered, as the API server's buffered writer
                # sends it, rather than rendered whole before its first byte.
                for start in range(0, len(entries), WATCH_CHUNK_EVENTS):
                    out = [
                        self._entry_line(e, rtype, ns, sel, line)
                        for e in entries[start : start + WATCH_CHUNK_EVENTS]
                    ]
                    payload = b"".join(x for x in out if x)
                    if payload:
                        self._chunk(payload)
                if bookmarks and time.monotonic() >= next_bookmark:
                    self._chunk(bookmark(max(scanned_rv, seen_rv)))
                    next_bookmark = time.monotonic() + self.sim.bookmark_interval
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        finally:
            self.server.track(self.connection, False)
            self.close_connection = True

    @staticmethod
    def _entry_line(
        e: Entry, rtype: ResourceType, ns: str | None, sel: Any, line: Callable[[str, bytes], bytes]
    ) -> bytes | None:
        if e.type == "RAW":
            return e.data if e.data.endswith(b"\n") else e.data + b"\n"
        if e.resource != rtype.name or (ns is not None and e.namespace != ns):
            return None
        if sel is not None and not sel(e.namespace, e.name, e.node, e.data):
            return None
        return line(e.type, e.data)

    # ---- kubelet proxy ------------------------------------------------------------------------
    def _proxy(self, node: str, what: str, q: dict[str, str]) -> None:
        cluster = self.sim.cluster
        if "nodes/proxy" in cluster.forbidden:
            self._status(
                403,
                "Forbidden",
                f'nodes "{node}" is forbidden: User "system:serviceaccount:podlife:collector" cannot get resource "nodes/proxy" in API group "" at the cluster scope',
                {"name": node, "kind": "nodes"},
            )
            return
        with cluster.engine.lock:
            kubelet = cluster.kubelets.get(node)
            if kubelet is None:
                self._status(404, "NotFound", f'nodes "{node}" not found', {"name": node, "kind": "nodes"})
                return
            if what == "metrics":
                self._send(200, kubelet.metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
                return
            if q.get("query", "kubelet") != "kubelet":
                self._send(200, b"", "text/plain; charset=utf-8")
                return
            try:
                since = _parse_time(q["sinceTime"]) if q.get("sinceTime") else None
                until = _parse_time(q["untilTime"]) if q.get("untilTime") else None
                tail = int(q["tailLines"]) if q.get("tailLines") else None
            except ValueError as exc:
                self._status(400, "BadRequest", f"invalid node log query: {exc}")
                return
            lines = kubelet.journal_since(since, until, q.get("pattern") or None, tail)
        self._send(200, ("\n".join(lines) + ("\n" if lines else "")).encode(), "text/plain; charset=utf-8")

    # ---- hooks --------------------------------------------------------------------------------
    def _hook(self, name: str, q: dict[str, str]) -> None:
        sim = self.sim
        cluster = sim.cluster
        if self.command == "POST":
            body = self._body()
            q = {**q, **{k: str(v) for k, v in body.items()}}
        result: dict[str, Any] = {"ok": True}
        if name == "compact":
            result["compactedResourceVersion"] = cluster.compact()
        elif name == "drop-watches":
            sim.drop_watches(q.get("mode", "close"))
        elif name == "inject-malformed":
            cluster.inject_malformed()
        elif name == "redeliver":
            result["ok"] = cluster.redeliver_last()
        elif name == "pods":
            node = q.get("node") or next(iter(cluster.kubelets), "")
            if node not in cluster.kubelets:
                self._json(
                    400,
                    {"ok": False, "error": f"unknown node {node!r}; nodes: {sorted(cluster.kubelets)[:20]}"},
                )
                return
            pod = cluster.spawn_pod(node, q.get("namespace", "default"), q.get("name"))
            result["pod"] = {
                "namespace": pod["metadata"]["namespace"],
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            }
        elif name == "pause":
            sim.pause()
        elif name == "resume":
            sim.resume()
        elif name == "advance":
            with cluster.engine.lock:
                cluster.advance(float(q.get("seconds", "1")))
        elif name == "status":
            result.update(
                now=cluster.now.isoformat(),
                resourceVersion=cluster.store.rv,
                compactedResourceVersion=cluster.store.compacted_rv,
                pods=cluster.store.count("pods"),
                nodes=sorted(cluster.kubelets)[:50],
                paused=sim.paused,
                watches=self.server.open_watches(),
            )
        else:
            self._json(404, {"ok": False, "error": f"unknown hook {name!r}"})
            return
        self._json(200, result)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    sim: SimServer

    def __init__(self, addr: tuple[str, int], sim: SimServer) -> None:
        self.sim = sim
        self._watch_conns: set[socket.socket] = set()
        self._wlock = threading.Lock()
        super().__init__(addr, _Handler)

    def track(self, conn: socket.socket, add: bool) -> None:
        with self._wlock:
            (self._watch_conns.add if add else self._watch_conns.discard)(conn)

    def open_watches(self) -> int:
        with self._wlock:
            return len(self._watch_conns)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that rejects the TLS certificate (a wrong CA) or hangs up is its own problem: no
        traceback on stderr. Anything else is a bug of the server and is printed."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ssl.SSLError | ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class SimServer:
    """A SimCluster served over HTTP on loopback, optionally driven by the wall clock.

    ``realtime=False`` leaves virtual time to the caller (``server.cluster.advance(s)``), which is
    what tests want; ``realtime=True`` advances it ``speed``× the wall clock.
    """

    def __init__(
        self,
        cluster: SimCluster | None = None,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        speed: float = 1.0,
        realtime: bool = True,
        token: str | None = TOKEN,
        bookmark_interval: float = 5.0,
        tls: bool = False,
        require_token: bool | None = None,
    ) -> None:
        """``tls`` serves HTTPS with a CA made now (``ca_pem``; ``write_serviceaccount`` lays out the
        in-cluster files); ``require_token`` (default: on with ``tls``) answers 401 to requests without the
        bearer token."""
        self.cluster = cluster or SimCluster()
        self.token = token
        self.require_token = tls if require_token is None else require_token
        self.bookmark_interval = bookmark_interval
        self.drop_mode = "close"
        self.requests: deque[tuple[float, str, str, int, str]] = deque(maxlen=10_000)
        self._rlock = threading.Lock()
        self._httpd = _HTTPServer((host, port), self)
        self.ca_pem: bytes | None = None
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        if tls:
            certs = make_serving_certs(hosts=(host,))
            self.ca_pem = certs.ca_pem
            self._tls_dir = tempfile.TemporaryDirectory(prefix="podlife-sim-tls-")
            cert_file, key_file = Path(self._tls_dir.name, "tls.crt"), Path(self._tls_dir.name, "tls.key")
            cert_file.write_bytes(certs.cert_pem)
            key_file.write_bytes(certs.key_pem)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_file, key_file)
            # The handshake happens in the connection's own thread, so a client that stalls it (or fails
            # it) does not hold up accepting the next connection.
            self._httpd.socket = context.wrap_socket(
                self._httpd.socket, server_side=True, do_handshake_on_connect=False
            )
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="sim-http", daemon=True, kwargs={"poll_interval": 0.1}
        )
        self.driver = RealtimeDriver(self.cluster.engine, speed) if realtime else None
        self.paused = False

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"{'https' if self.ca_pem else 'http'}://127.0.0.1:{self.port}"

    def record_request(self, method: str, path: str, code: int, content_type: str = "") -> None:
        """Remember one answered request (``requests``: (monotonic time, method, path, status, request
        Content-Type)), so tests can check what a client such as kubectl asked, and in which order."""
        with self._rlock:
            self.requests.append((time.monotonic(), method, path, code, content_type))

    def requests_matching(self, method: str, path_part: str) -> list[tuple[float, str, str, int, str]]:
        with self._rlock:
            return [r for r in self.requests if r[1] == method and path_part in r[2]]

    def start(self) -> SimServer:
        self._thread.start()
        if self.driver:
            self.driver.start()
        return self

    def stop(self) -> None:
        self.cluster.store.close()  # wakes and ends every watch stream
        self._httpd.shutdown()
        self._httpd.server_close()
        if self.driver:
            self.driver.stop()
        self._thread.join(timeout=5)
        if self._tls_dir is not None:
            self._tls_dir.cleanup()

    def pause(self) -> None:
        self.paused = True
        if self.driver:
            self.driver.paused = True

    def resume(self) -> None:
        self.paused = False
        if self.driver:
            self.driver.paused = False

    def drop_watches(self, mode: str = "close") -> None:
        """End every open watch: ``close`` ends the chunked stream cleanly, ``reset`` cuts the socket."""
        self.drop_mode = mode
        self.cluster.drop_watches()

    def kubeconfig(self) -> dict[str, Any]:
        user: dict[str, Any] = {"token": self.token} if self.token else {}
        cluster: dict[str, Any] = {"server": self.base_url}
        if self.ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "podlife-demo", "cluster": cluster}],
            "users": [{"name": "podlife-demo", "user": user}],
            "contexts": [
                {
                    "name": "podlife-demo",
                    "context": {"cluster": "podlife-demo", "user": "podlife-demo", "namespace": "default"},
                }
            ],
            "current-context": "podlife-demo",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        return p

    def write_serviceaccount(self, directory: str | Path, namespace: str = "podlife") -> Path:
        """Lay out what a pod's ServiceAccount volume holds (``token``, ``ca.crt``, ``namespace``) in
        ``directory``: with KUBERNETES_SERVICE_HOST=127.0.0.1 and KUBERNETES_SERVICE_PORT=``port``, the
        client's in-cluster configuration pointed at these files reaches this server."""
        if not self.ca_pem or not self.token:
            raise ValueError("the in-cluster layout needs tls=True and a token")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / "token").write_text(self.token)
        (d / "ca.crt").write_bytes(self.ca_pem)
        (d / "namespace").write_text(namespace)
        return d

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def run_sim(
    scenario: str | None = None,
    *,
    seed: int = 0,
    start: datetime | None = None,
    speed: float = 1.0,
    realtime: bool = False,
    port: int = 0,
    kubeconfig_path: str | Path | None = None,
    bookmark_interval: float = 5.0,
    forbidden: tuple[str, ...] = (),
    token: str | None = TOKEN,
    heartbeat_interval: float | None = None,
    history_limit: int | None = None,
    kubelet_log_limit: int | None = None,
    event_ttl: float | None = None,
    absent_groups: tuple[str, ...] = (),
    lease_interval: float | None = None,
    tls: bool = False,
    require_token: bool | None = None,
    audit: bool = False,
    audit_log_path: str | Path | None = None,
    **scenario_opts: Any,
) -> Iterator[SimServer]:
    """Serve a demo cluster for the duration of a ``with`` block (tests: ``realtime=False`` and step it).

    ``server.base_url`` is the API server URL; with ``kubeconfig_path`` a kubeconfig is written there.
    ``heartbeat_interval`` / ``history_limit`` / ``kubelet_log_limit`` / ``event_ttl`` / ``absent_groups`` /
    ``lease_interval`` are SimCluster's, ``tls`` / ``require_token`` SimServer's;
    other keyword arguments go to the scenario (``nodes``, ``pods_per_node``, ``churn`` for ``scale``).
    ``audit`` (or an ``audit_log_path``: JSON Lines written there) makes the API server audit itself
    (``cluster.audit``, demo_cluster/audit.py) from the scenario's first step.
    """
    cluster = SimCluster(
        seed=seed,
        start=start,
        forbidden=forbidden,
        heartbeat_interval=heartbeat_interval,
        history_limit=history_limit,
        kubelet_log_limit=kubelet_log_limit,
        event_ttl=event_ttl,
        absent_groups=absent_groups,
        lease_interval=lease_interval,
    )
    if audit or audit_log_path is not None:
        cluster.enable_audit(str(audit_log_path) if audit_log_path is not None else None)
    if scenario:
        with cluster.engine.lock:
            install(cluster, scenario, **scenario_opts)
            cluster.advance(0.0)
    server = SimServer(
        cluster,
        port=port,
        speed=speed,
        realtime=realtime,
        token=token,
        bookmark_interval=bookmark_interval,
        tls=tls,
        require_token=require_token,
    )
    server.start()
    try:
        if kubeconfig_path is not None:
            server.write_kubeconfig(kubeconfig_path)
        yield server
    finally:
        server.stop()
        if cluster.audit is not None:
            cluster.audit.close()


__all__ = ["SimServer", "run_sim", "TOKEN"]
