"""The three PATCH formats the API server accepts, applied to the demo cluster's objects.

* ``application/json-patch+json``: RFC 6902, through the ``jsonpatch`` library.
* ``application/merge-patch+json``: RFC 7386 (objects merge, ``null`` deletes, lists are replaced).
* ``application/strategic-merge-patch+json``: Kubernetes' strategic merge patch. Lists are merged by the
  ``patchMergeKey`` their Go type declares (``containers`` by ``name``, ``conditions`` by ``type``, ...) or,
  for the primitive lists declared ``patchStrategy:"merge"`` (``finalizers``, ``podCIDRs``), as sets;
  every other list is replaced, as for a field without a strategy. The directives ``$patch``
  (``replace`` / ``delete`` / ``merge``), ``$retainKeys``, ``$setElementOrder/FIELD`` and
  ``$deleteFromPrimitiveList/FIELD`` are honoured. Merge keys are looked up by field name: in the core,
  apps and policy types the demo cluster serves, a field name has the same strategy wherever it appears.

``apply_patch`` raises ``PatchError`` with the HTTP code and message the API server would answer.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)

# patchMergeKey of the list fields that carry ``patchStrategy:"merge"`` in k8s.io/api core/v1, apps/v1,
# policy/v1 and meta/v1 (a field name means the same list type everywhere in those groups).
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "ownerReferences": "uid",
    "podIPs": "ip",
    "addresses": "type",
    "resourceClaims": "name",
}
# Primitive lists declared ``patchStrategy:"merge"``: merged as sets, items removed with
# ``$deleteFromPrimitiveList/FIELD``.
MERGE_PRIMITIVE_LISTS = frozenset({"finalizers", "podCIDRs"})


class PatchError(Exception):
    """A patch the API server would refuse: ``code`` is the HTTP status (400, 415, 422)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def apply_patch(obj: dict[str, Any], patch: Any, content_type: str) -> dict[str, Any]:
    """``obj`` with ``patch`` applied (``obj`` is not modified). ``content_type`` is the request's
    Content-Type (parameters after ``;`` are ignored)."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype == JSON_PATCH:
        if not isinstance(patch, list):
            raise PatchError(400, "json patch must be a JSON array of operations")
        try:
            result = jsonpatch.apply_patch(obj, patch, in_place=False)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise PatchError(422, f"the JSON patch could not be applied: {exc}") from None
        except (TypeError, KeyError, AttributeError) as exc:
            raise PatchError(400, f"invalid JSON patch operation: {exc}") from None
        if not isinstance(result, dict):
            raise PatchError(422, "the JSON patch replaced the whole object with a non-object")
        return result
    if not isinstance(patch, dict):
        kind = "merge" if ctype == MERGE_PATCH else "strategic merge"
        raise PatchError(400, f"{kind} patch must be a JSON object, got {type(patch).__name__}")
    if ctype == MERGE_PATCH:
        merged = merge_patch(obj, patch)
        assert isinstance(merged, dict)
        return merged
    if ctype == STRATEGIC_MERGE_PATCH:
        return strategic_merge_patch(obj, patch)
    raise PatchError(
        415,
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(PATCH_TYPES)} (got {content_type or 'none'}; server-side apply is not served by the demo cluster)",
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Kubernetes strategic merge patch of one object (see the module docstring)."""
    return _merge_map(copy.deepcopy(target), patch)


def _merge_map(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise PatchError(422, f'unknown patch directive "$patch": {directive!r}')
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith(
            ("$setElementOrder/", "$deleteFromPrimitiveList/")
        ):
            continue
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_map(current if isinstance(current, dict) else {}, value)
        elif isinstance(value, list):
            target[key] = _merge_list(key, target.get(key), value)
        else:
            target[key] = copy.deepcopy(value)
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(target.get(field), list) and isinstance(value, list):
                target[field] = [v for v in target[field] if v not in value]
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            field = key.split("/", 1)[1]
            if isinstance(target.get(field), list) and isinstance(value, list):
                target[field] = _ordered(field, target[field], value)
    if isinstance(retain, list):
        for key in list(target):
            if key not in retain:
                del target[key]
    return target


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    cur = current if isinstance(current, list) else []
    if field in MERGE_PRIMITIVE_LISTS:
        out = list(cur)
        for item in patch:
            if item not in out:
                out.append(copy.deepcopy(item))
        return out
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and i.get("$patch"))]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [
            copy.deepcopy({k: v for k, v in i.items() if k != "$patch"})
            for i in patch
            if i.get("$patch") != "replace"
        ]
    out = [copy.deepcopy(i) for i in cur]
    for item in patch:
        if key not in item:
            raise PatchError(422, f"map: {item} does not contain declared merge key: {key}")
        idx = next((n for n, o in enumerate(out) if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
            continue
        if idx is None:
            out.append(_merge_map({}, item))
        else:
            out[idx] = _merge_map(out[idx], item)
    return out


def _ordered(field: str, items: list[Any], order: list[Any]) -> list[Any]:
    """``items`` in the order ``$setElementOrder/FIELD`` gives; items it does not name keep their
    relative order after the named ones."""
    key = MERGE_KEYS.get(field)

    def ident(item: Any) -> Any:
        if key is not None and isinstance(item, dict):
            return item.get(key)
        return item

    wanted = [ident(o) for o in order]
    named = sorted((i for i in items if ident(i) in wanted), key=lambda i: wanted.index(ident(i)))
    return named + [i for i in items if ident(i) not in wanted]
