"""The OpenAPI 3 document of ``/api/v1/`` (served at ``/api/v1/openapi.json``), written by hand so that it
says what each parameter means, not only its type."""

from __future__ import annotations

from typing import Any

from dashboard import serialize
from timelines.lifecycle.timeline import SCHEMA as TIMELINE_SCHEMA
from timelines.models import Finding, Workload

TIME = {"type": "string", "format": "date-time"}
TIME_OR_NULL = {"type": ["string", "null"], "format": "date-time"}


def _param(
    name: str, where: str, description: str, schema: dict[str, Any] | None = None, required: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": required or where == "path",
        "description": description,
        "schema": schema or {"type": "string"},
    }


CLUSTER = _param("cluster", "path", "Cluster name.")
NAMESPACE = _param("namespace", "path", "Namespace.")
WINDOW = [
    _param(
        "from",
        "query",
        "Window start, ISO 8601 with an offset (Z accepted) or `now`. Default: one hour before `to`.",
        TIME,
    ),
    _param(
        "to",
        "query",
        "Window end. Default: now, or just after the newest data when that is older than an hour.",
        TIME,
    ),
    _param(
        "lanes",
        "query",
        "Comma-separated lanes (`worker`, `api`, `container:NAME`, `condition:TYPE`) or `all`. Default `worker`.",
    ),
]
ERRORS = {
    "400": {"$ref": "#/components/responses/BadRequest"},
    "401": {"$ref": "#/components/responses/Unauthorized"},
    "404": {"$ref": "#/components/responses/NotFound"},
}


def _get(
    summary: str, params: list[dict[str, Any]], schema: dict[str, Any], description: str = ""
) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "description": description,
            "parameters": params,
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": schema}}},
                **ERRORS,
            },
        }
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


SCHEMAS: dict[str, Any] = {
    "Error": _obj(
        {
            "error": _obj(
                {
                    "status": {"type": "integer"},
                    "message": {"type": "string", "description": "What was wrong, naming the input."},
                    "param": {
                        "type": ["string", "null"],
                        "description": "The query parameter or header at fault.",
                    },
                },
                ["status", "message"],
            )
        },
        ["error"],
    ),
    "Window": _obj(
        {
            "schema": {"const": "podlife.window/v1"},
            "cluster": {"type": "string"},
            "scope": _obj({"kind": {"enum": ["node", "namespace", "workload"]}, "name": {"type": "string"}}),
            "window": _obj({"from": TIME, "to": TIME}),
            "lanes": {"type": ["array", "null"], "items": {"type": "string"}},
            "truncated": {"type": "boolean"},
            "pods": {
                "type": "array",
                "items": _obj(
                    {
                        "uid": {"type": "string"},
                        "namespace": {"type": "string"},
                        "name": {"type": "string"},
                        "node": {"type": "string"},
                        "owner_kind": {"type": "string"},
                        "owner_name": {"type": "string"},
                        "phase": {"type": "string"},
                        "created_at": TIME_OR_NULL,
                        "deleted_at": TIME_OR_NULL,
                        "intervals": {
                            "description": "[lane, state, start, end|null, source, [observation ids]]",
                            "type": "array",
                        },
                        "markers": {
                            "description": "[at, kind, reason, message, [observation ids]]",
                            "type": "array",
                        },
                        "findings": {
                            "description": "[kind, severity, message, start, end|null, [observation ids]]",
                            "type": "array",
                        },
                    }
                ),
            },
            "node_lanes": {
                "type": "object",
                "description": "node:* lanes: lane → [[state, start, end, source, ids]]",
            },
        }
    ),
}


def document(server: str = "/api/v1") -> dict[str, Any]:
    pod_uid = _param("uid", "path", "Pod UID.")
    workload = [
        NAMESPACE,
        _param("kind", "path", "Workload kind.", {"enum": list(Workload.Kind.values)}),
        _param("name", "path", "Workload name."),
    ]
    paths = {
        "/clusters": _get(
            "Clusters you may read, with counts and collector health",
            [],
            _obj({"clusters": {"type": "array"}, "collectors": {"type": "array"}}),
        ),
        "/clusters/{cluster}/nodes": _get(
            "Nodes with readable pod counts", [CLUSTER], _obj({"nodes": {"type": "array"}})
        ),
        "/clusters/{cluster}/namespaces": _get(
            "Readable namespaces with pod and finding counts",
            [CLUSTER],
            _obj({"namespaces": {"type": "array"}}),
        ),
        "/clusters/{cluster}/pods": _get(
            "Search pods by a part of their name, UID or node, or the start of their owner, namespace or "
            "finding kind",
            [
                CLUSTER,
                _param(
                    "q",
                    "query",
                    "Terms, all of which a pod matches: `KEY:TEXT` (KEY one of name, uid, owner, node, ns, "
                    "finding) or bare TEXTs matching any of them; a name, UID or node matches a text anywhere "
                    "in it, an owner, namespace or finding kind a text it starts with; without a KEY the whole "
                    "text is one term. "
                    "Literal characters; control characters or a term over 253 characters are a 400.",
                    required=True,
                ),
                _param("limit", "query", "1-1000, default 100.", {"type": "integer"}),
            ],
            _obj({"pods": {"type": "array", "items": _ref("PodRowDoc")}}),
        ),
        "/clusters/{cluster}/pods/{uid}/timeline": _get(
            f"One pod's timeline, exactly {TIMELINE_SCHEMA}",
            [CLUSTER, pod_uid],
            _ref("TimelineDoc"),
            "Evidence (of intervals, markers and findings) cites observations by dedupe key, the same for the "
            "same event in any cluster or database: fetch them with `observations?keys=`.",
        ),
        "/clusters/{cluster}/pods/{uid}/observations": _get(
            "The raw observations of a pod (the evidence of its intervals, markers and findings)",
            [
                CLUSTER,
                pod_uid,
                _param(
                    "ids",
                    "query",
                    "Comma-separated observation ids (what the window reads and /findings cite); default all.",
                ),
                _param(
                    "keys",
                    "query",
                    "An observation's dedupe key (what the pod timeline cites), one a parameter, repeated "
                    "(`keys=K1&keys=K2`: a key may hold a comma); at most 1000, not with `ids`.",
                    {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 200}},
                ),
                _param("limit", "query", "1-20000, default 5000.", {"type": "integer"}),
            ],
            _obj({"observations": {"type": "array", "items": _ref("ObservationDoc")}}),
        ),
        "/clusters/{cluster}/pods/{uid}/diff": _get(
            "What changed between two observations of a pod",
            [
                CLUSTER,
                pod_uid,
                _param("a", "query", "Observation id (before).", {"type": "integer"}, True),
                _param("b", "query", "Observation id (after).", {"type": "integer"}, True),
            ],
            _obj({"changes": {"type": "array"}}),
        ),
        "/clusters/{cluster}/nodes/{node}/timeline": _get(
            "Every readable pod on a node in a window (the node page's data), plus the node's own lanes",
            # Without `from`, a node's window is its last 15 minutes or its recent drain (node_window).
            [CLUSTER, _param("node", "path", "Node name."), *WINDOW],
            _ref("Window"),
        ),
        "/clusters/{cluster}/namespaces/{namespace}/timeline": _get(
            "Every pod of a namespace in a window, or with `detail=auto` bands of pods when it is crowded",
            [
                CLUSTER,
                NAMESPACE,
                *WINDOW,
                _param(
                    "detail",
                    "query",
                    "`full` (default): a row a pod (podlife.window/v1). `auto`: past 2,000 pods, the worker "
                    "lane as at most 200 bands of consecutive pods, merged to a pixel "
                    "(podlife.window-overview/v1, docs/api.md).",
                ),
                _param(
                    "px",
                    "query",
                    "With detail=auto: the chart's width, 100-10000 (default 1200).",
                    {"type": "integer"},
                ),
            ],
            {"oneOf": [_ref("Window"), {"type": "object", "description": "podlife.window-overview/v1"}]},
        ),
        "/clusters/{cluster}/workloads": _get(
            "Deployments, StatefulSets, DaemonSets and ReplicaSets",
            [CLUSTER, _param("namespace", "query", "Only this namespace.")],
            _obj({"workloads": {"type": "array", "items": _ref("WorkloadDoc")}}),
        ),
        "/clusters/{cluster}/workloads/{namespace}/{kind}/{name}/timeline": _get(
            "Every pod of a workload (and of the ReplicaSets it owns) in a window",
            [CLUSTER, *workload, *WINDOW],
            _ref("Window"),
        ),
        "/clusters/{cluster}/workloads/{namespace}/{kind}/{name}/status": _get(
            "replicas / ready / updated / available over time",
            [CLUSTER, *workload],
            _obj(
                {
                    "workload": _ref("WorkloadDoc"),
                    "owned": {"type": "array", "items": _ref("WorkloadDoc")},
                    "samples": {"type": "array", "items": _ref("WorkloadSample")},
                }
            ),
        ),
        "/clusters/{cluster}/pdbs": _get(
            "PodDisruptionBudgets",
            [CLUSTER, _param("namespace", "query", "Only this namespace.")],
            _obj({"pdbs": {"type": "array", "items": _ref("PdbDoc")}}),
        ),
        "/clusters/{cluster}/pdbs/{namespace}/{name}": _get(
            "A PDB's status over time, blocked periods (disruptionsAllowed = 0) and the pods its selector covers",
            [CLUSTER, NAMESPACE, _param("name", "path", "PDB name.")],
            _obj(
                {
                    "pdb": _ref("PdbDoc"),
                    "samples": {"type": "array", "items": _ref("PdbSample")},
                    "blocked": {"type": "array", "items": _ref("BlockedPeriod")},
                    "covered_pods": {"type": "array", "items": _ref("PodRowDoc")},
                }
            ),
        ),
        "/findings": _get(
            "Findings you may read, newest first",
            [
                _param("cluster", "query", "Cluster name."),
                _param("namespace", "query", "Namespace."),
                _param("kind", "query", "Finding kind, e.g. stuck_terminating."),
                _param("severity", "query", "Severity.", {"enum": list(Finding.Severity.values)}),
                _param("from", "query", "Findings still open at or after this time.", TIME),
                _param("to", "query", "Findings that started before this time.", TIME),
                _param("limit", "query", "1-5000, default 500.", {"type": "integer"}),
            ],
            _obj(
                {"total": {"type": "integer"}, "findings": {"type": "array", "items": _ref("FindingRowDoc")}}
            ),
        ),
    }
    error = {"content": {"application/json": {"schema": _ref("Error")}}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "podlife API",
            "version": "1",
            "description": "Read-only access to pod lifecycle timelines. See docs/api.md.",
        },
        "servers": [{"url": server}],
        "security": [{"bearer": []}, {"session": []}],
        "paths": paths,
        "components": {
            "schemas": {**SCHEMAS, **serialize.json_schemas()},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "`python manage.py api_token USERNAME`",
                },
                "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
            },
            "responses": {
                "BadRequest": {"description": "A parameter is malformed; the message names it.", **error},
                "Unauthorized": {"description": "No or a bad token / session.", **error},
                "NotFound": {
                    "description": "Missing, or not readable by you (the API does not tell them apart).",
                    **error,
                },
            },
        },
    }
