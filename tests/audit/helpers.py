"""Shared helpers of the audit tests: the fixtures under tests/fixtures/audit and what the parser made of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors.parsers.audit import AuditParse, parse_audit
from timelines.lifecycle.observation import Kind, Observation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "audit"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def parsed(name: str) -> AuditParse:
    return parse_audit(fixture(name))


def audits(result: AuditParse) -> list[Observation]:
    return [o for o in result.observations if o.kind == Kind.AUDIT]


def by_id(result: AuditParse) -> dict[str, Observation]:
    """The audit observations of ``result`` by auditID."""
    return {o.payload["audit_id"]: o for o in audits(result)}


def without(payload: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in keys}
