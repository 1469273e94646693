"""The audit policy in docs/audit.md is a valid audit.k8s.io/v1 Policy and records what podlife reads, at
the level each needs, and nothing else (rules evaluated as the API server does: the first match wins)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

DOCS = Path(__file__).resolve().parents[2] / "docs" / "audit.md"
LEVELS = {"None", "Metadata", "Request", "RequestResponse"}
STAGES = {"RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"}
POLICY_FIELDS = {"apiVersion", "kind", "metadata", "rules", "omitStages", "omitManagedFields"}
RULE_FIELDS = {
    "level",
    "users",
    "userGroups",
    "verbs",
    "resources",
    "namespaces",
    "nonResourceURLs",
    "omitStages",
    "omitManagedFields",
}


def policy() -> dict[str, Any]:
    block = re.search(r"```yaml\n(# --audit-policy-file.*?)```", DOCS.read_text(), re.S)
    assert block is not None, "docs/audit.md lost its audit policy"
    return yaml.safe_load(block.group(1))


def resource_matches(pattern: str, resource: str) -> bool:
    """GroupResources.resources: "pods" matches pods only, "pods/*" its subresources, "*" everything."""
    if pattern in ("*", resource):
        return True
    if pattern.endswith("/*"):
        return resource.startswith(pattern[:-1])
    if pattern.startswith("*/"):
        return resource.endswith(pattern[1:])
    return False


def level_for(verb: str, group: str, resource: str) -> str:
    for rule in policy()["rules"]:
        if rule.get("verbs") and verb not in rule["verbs"]:
            continue
        if rule.get("resources") and not any(
            gr.get("group", "") == group
            and any(resource_matches(p, resource) for p in gr.get("resources") or ["*"])
            for gr in rule["resources"]
        ):
            continue
        return str(rule["level"])
    return "None"


def test_the_policy_is_a_valid_policy() -> None:
    doc = policy()
    assert (doc["apiVersion"], doc["kind"]) == ("audit.k8s.io/v1", "Policy")
    assert set(doc) <= POLICY_FIELDS
    assert set(doc.get("omitStages", [])) <= STAGES
    for rule in doc["rules"]:
        assert set(rule) <= RULE_FIELDS
        assert rule["level"] in LEVELS
        for gr in rule.get("resources", []):
            assert set(gr) <= {"group", "resources", "resourceNames"}


@pytest.mark.parametrize(
    ("verb", "group", "resource", "level"),
    [
        ("create", "", "pods", "RequestResponse"),
        ("patch", "", "pods/status", "RequestResponse"),
        ("delete", "", "pods", "RequestResponse"),
        ("create", "", "pods/eviction", "Request"),
        ("create", "", "pods/binding", "Request"),
        ("patch", "", "nodes", "Request"),
        ("update", "", "nodes", "Request"),
        ("update", "policy", "poddisruptionbudgets/status", "Request"),
        ("create", "policy", "poddisruptionbudgets", "Request"),
        # what podlife does not read costs nothing
        ("get", "", "pods", "None"),
        ("watch", "", "pods", "None"),
        ("list", "policy", "poddisruptionbudgets", "None"),
        ("patch", "", "nodes/status", "None"),
        ("update", "coordination.k8s.io", "leases", "None"),
        ("create", "", "pods/exec", "None"),
        ("get", "", "secrets", "None"),
        ("create", "", "secrets", "None"),
        ("create", "", "events", "None"),
    ],
)
def test_each_request_gets_the_level_podlife_needs(verb: str, group: str, resource: str, level: str) -> None:
    assert level_for(verb, group, resource) == level
