"""What the API server's registry does to an update before it stores it, for the demo cluster's
PUT and PATCH (``SimCluster.api_update``):

* the main resource and its ``status`` subresource own different parts of an object: a write to the
  main resource keeps the stored ``status``, a write to ``/status`` keeps everything but ``status``
  (the apps/v1, policy/v1 and core/v1 status strategies' ``PrepareForUpdate``);
* system metadata (uid, creationTimestamp, generation, deletionTimestamp, ...) cannot be changed by a
  client; ``metadata.uid`` and ``metadata.resourceVersion`` in the body are preconditions (409);
* ``metadata.generation`` grows by one when the spec changes (workloads, PDBs);
* a few validations the demo's objects can fail (label syntax, replica counts, pod spec immutability),
  answered as the API server answers them: 400 for a value of the wrong type, 422 ``Invalid`` with
  ``details.causes`` for a value it rejects.

Pure functions over dicts; ``ApiError`` carries the HTTP status and the Status body's parts.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from .store import ResourceType

SYSTEM_METADATA = (
    "uid",
    "creationTimestamp",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
    "namespace",
)
GENERATION_KINDS = frozenset(
    {"deployments", "statefulsets", "daemonsets", "replicasets", "poddisruptionbudgets"}
)
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
POD_SPEC_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)
# Non-negative int32 counts of each kind's status and spec, validated on write (ValidateNonnegativeField).
STATUS_COUNTS = {
    "deployments": (
        "observedGeneration",
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
        "collisionCount",
    ),
    "replicasets": (
        "replicas",
        "fullyLabeledReplicas",
        "readyReplicas",
        "availableReplicas",
        "observedGeneration",
    ),
    "statefulsets": (
        "observedGeneration",
        "replicas",
        "readyReplicas",
        "currentReplicas",
        "updatedReplicas",
        "availableReplicas",
        "collisionCount",
    ),
    "daemonsets": (
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
        "observedGeneration",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberUnavailable",
        "collisionCount",
    ),
    "poddisruptionbudgets": (
        "disruptionsAllowed",
        "currentHealthy",
        "desiredHealthy",
        "expectedPods",
        "observedGeneration",
    ),
}


class ApiError(Exception):
    """An API error: ``code`` (HTTP), ``reason`` (StatusReason), ``message`` and ``details``."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details


def qualified(rtype: ResourceType) -> str:
    """``deployments.apps``, ``poddisruptionbudgets.policy``, ``pods``: how messages name a resource."""
    return f"{rtype.name}.{rtype.group}" if rtype.group else rtype.name


def _details(rtype: ResourceType, name: str, **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if rtype.group:
        out["group"] = rtype.group
    out["kind"] = rtype.name
    out.update(more)
    return out


def not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(rtype)} "{name}" not found', _details(rtype, name))


def conflict(rtype: ResourceType, name: str, why: str | None = None) -> ApiError:
    message = f'Operation cannot be fulfilled on {qualified(rtype)} "{name}": ' + (
        why or "the object has been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, _details(rtype, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(rtype: ResourceType, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one cause per ``(field, "Invalid value: ...: why")``, joined as the API server joins them."""
    kind_q = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    parts = [f"{field}: {msg}" for field, msg in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return ApiError(
        422,
        "Invalid",
        f'{kind_q} "{name}" is invalid: {joined}',
        {
            "name": name,
            **({"group": rtype.group} if rtype.group else {}),
            "kind": rtype.kind,
            "causes": [{"reason": _cause_reason(m), "message": m, "field": f} for f, m in causes],
        },
    )


def _cause_reason(message: str) -> str:
    if message.startswith("Forbidden"):
        return "FieldValueForbidden"
    if message.startswith("Required"):
        return "FieldValueRequired"
    if message.startswith("Unsupported"):
        return "FieldValueNotSupported"
    return "FieldValueInvalid"


def _go_value(value: Any) -> str:
    return (
        f'"{value}"'
        if isinstance(value, str)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
    )


def prepare_update(
    rtype: ResourceType, old: dict[str, Any], new: Any, subresource: str | None, url_name: str
) -> dict[str, Any]:
    """The object to store for a write of ``new`` over ``old`` to ``subresource`` (None or ``status``).

    Raises ApiError for what the API server refuses. Neither argument is modified.
    """
    if not isinstance(new, dict):
        raise bad_request(f"the body of the request must be a JSON object, got {type(new).__name__}")
    meta_in = new.get("metadata")
    if meta_in is not None and not isinstance(meta_in, dict):
        raise bad_request(
            "json: cannot unmarshal into Go struct field of type v1.ObjectMeta: metadata must be an object"
        )
    meta_in = meta_in or {}
    name = meta_in.get("name", url_name)
    if name != url_name:
        raise bad_request(f"the name of the object ({name}) does not match the name on the URL ({url_name})")
    if new.get("kind") not in (None, "", rtype.kind):
        raise bad_request(
            f"the kind of the object ({new['kind']}) does not match the resource ({rtype.kind})"
        )
    old_meta = old["metadata"]
    uid = meta_in.get("uid")
    if uid and uid != old_meta.get("uid"):
        raise conflict(
            rtype,
            url_name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta.get('uid')}",
        )
    body = {k: copy.deepcopy(v) for k, v in new.items() if k not in ("kind", "apiVersion")}
    if subresource == "status":
        out = copy.deepcopy(old)
        if "status" in body:
            out["status"] = body["status"] if body["status"] is not None else {}
        _validate_status(rtype, url_name, out)
        return out
    out = body
    meta = out.setdefault("metadata", {})
    for field in SYSTEM_METADATA:
        if field in old_meta:
            meta[field] = copy.deepcopy(old_meta[field])
        else:
            meta.pop(field, None)
    meta["name"] = url_name
    meta.pop("resourceVersion", None)
    if "status" in old:
        out["status"] = copy.deepcopy(old["status"])
    _validate_metadata(rtype, url_name, meta)
    if rtype.name == "pods":
        _validate_pod_spec(rtype, url_name, old.get("spec") or {}, out.get("spec") or {})
    _validate_spec(rtype, url_name, out)
    if rtype.name in GENERATION_KINDS and out.get("spec") != old.get("spec"):
        meta["generation"] = int(old_meta.get("generation") or 1) + 1
        if rtype.name == "daemonsets" and (out.get("spec") or {}).get("template") != (
            old.get("spec") or {}
        ).get("template"):
            meta.setdefault("annotations", {})["deprecated.daemonset.template.generation"] = str(
                meta["generation"]
            )
    return out


def _validate_metadata(rtype: ResourceType, name: str, meta: dict[str, Any]) -> None:
    causes: list[tuple[str, str]] = []
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise bad_request(
                f"json: cannot unmarshal into Go struct field ObjectMeta.metadata.{field} of type string: "
                f"metadata.{field} must map strings to strings"
            )
        for key, val in value.items():
            prefix, _, local = key.rpartition("/")
            if (
                not local
                or len(local) > 63
                or not LABEL_NAME_RE.match(local)
                or (prefix and not DNS_SUBDOMAIN_RE.match(prefix))
            ):
                causes.append(
                    (
                        f"metadata.{field}",
                        f"Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or "
                        "'.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                        "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                    )
                )
            elif field == "labels" and (len(val) > 63 or not LABEL_VALUE_RE.match(val)):
                causes.append(
                    (
                        "metadata.labels",
                        f'Invalid value: "{val}": a valid label must be an empty string or consist of alphanumeric '
                        "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                        "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                    )
                )
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        raise bad_request(
            "json: cannot unmarshal into Go struct field ObjectMeta.metadata.finalizers of type string"
        )
    if causes:
        raise invalid(rtype, name, causes)


def _validate_pod_spec(rtype: ResourceType, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    """A pod's spec is immutable but for container images (and a few fields the demo does not use)."""

    def without_images(spec: dict[str, Any]) -> dict[str, Any]:
        s = copy.deepcopy(spec)
        for field in ("containers", "initContainers"):
            for c in s.get(field) or []:
                if isinstance(c, dict):
                    c.pop("image", None)
        s.pop("activeDeadlineSeconds", None)
        return s

    if without_images(old) != without_images(new):
        raise invalid(rtype, name, [("spec", f"Forbidden: {POD_SPEC_FORBIDDEN}")])


def _check_count(causes: list[tuple[str, str]], path: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(
            f"json: cannot unmarshal {type(value).__name__} into Go struct field of type int32: {path}"
        )
    if value < 0:
        causes.append((path, f"Invalid value: {value}: must be greater than or equal to 0"))


def _validate_spec(rtype: ResourceType, name: str, obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise bad_request("json: cannot unmarshal into Go struct field of type spec: spec must be an object")
    causes: list[tuple[str, str]] = []
    if rtype.name in ("deployments", "replicasets", "statefulsets"):
        _check_count(causes, "spec.replicas", spec.get("replicas"))
    if rtype.name == "nodes" and "unschedulable" in spec and not isinstance(spec["unschedulable"], bool):
        raise bad_request(
            f"json: cannot unmarshal {type(spec['unschedulable']).__name__} into Go struct field NodeSpec.spec.unschedulable of type bool"
        )
    if rtype.name == "poddisruptionbudgets" and "minAvailable" in spec and "maxUnavailable" in spec:
        causes.append(("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set"))
    if causes:
        raise invalid(rtype, name, causes)


def _validate_status(rtype: ResourceType, name: str, obj: dict[str, Any]) -> None:
    status = obj.get("status")
    if not isinstance(status, dict):
        raise bad_request(
            "json: cannot unmarshal into Go struct field of type status: status must be an object"
        )
    causes: list[tuple[str, str]] = []
    for field in STATUS_COUNTS.get(rtype.name, ()):
        _check_count(causes, f"status.{field}", status.get(field))
    conditions = status.get("conditions")
    if conditions is not None:
        if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
            raise bad_request(
                "json: cannot unmarshal into Go struct field of type []Condition: status.conditions"
            )
        for i, cond in enumerate(conditions):
            if not cond.get("type"):
                causes.append((f"status.conditions[{i}].type", "Required value"))
            if cond.get("status") not in ("True", "False", "Unknown"):
                causes.append(
                    (
                        f"status.conditions[{i}].status",
                        f'Unsupported value: {_go_value(cond.get("status"))}: supported values: "False", "True", "Unknown"',
                    )
                )
    if causes:
        raise invalid(rtype, name, causes)
