"""Discovery documents kubectl and the clients ask for before any list (k8s-facts.md §9)."""

from __future__ import annotations

from typing import Any

from .store import RESOURCES, ResourceType

VERSION_INFO = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.4",
    "gitCommit": "a78aa47129b8539636eb86a9d00e31b2720fe06b",
    "gitTreeState": "clean",
    "buildDate": "2024-12-10T18:38:59Z",
    "goVersion": "go1.22.9",
    "compiler": "gc",
    "platform": "linux/amd64",
}

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
GROUPS = ("apps", "events.k8s.io", "policy", "coordination.k8s.io")


def _resources_for(group: str) -> list[ResourceType]:
    if group == "events.k8s.io":
        from .store import EVENTS_V1

        return [EVENTS_V1]
    return [r for r in RESOURCES.values() if r.group == group]


def api_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}],
    }


def api_group_list() -> dict[str, Any]:
    groups = []
    for g in GROUPS:
        gv = {"groupVersion": f"{g}/v1", "version": "v1"}
        groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict[str, Any] | None:
    if group not in GROUPS:
        return None
    gv = {"groupVersion": f"{group}/v1", "version": "v1"}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv], "preferredVersion": gv}


def resource_list(group: str) -> dict[str, Any] | None:
    if group and group not in GROUPS:
        return None
    out: list[dict[str, Any]] = []
    for r in _resources_for(group):
        entry: dict[str, Any] = {
            "name": r.name,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": VERBS,
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        out.append(entry)
        for sub in r.subresources:
            verbs = {
                "eviction": ["create"],
                "proxy": ["create", "delete", "get", "patch", "update"],
                "log": ["get"],
            }.get(sub, ["get", "patch", "update"])
            kind = {"eviction": "Eviction", "proxy": "NodeProxyOptions", "scale": "Scale"}.get(sub, r.kind)
            sub_entry: dict[str, Any] = {
                "name": f"{r.name}/{sub}",
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": verbs,
            }
            if sub == "eviction":
                sub_entry.update(group="policy", version="v1")
            elif sub == "scale":
                sub_entry.update(group="autoscaling", version="v1")
            out.append(sub_entry)
    gv = f"{group}/v1" if group else "v1"
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}
