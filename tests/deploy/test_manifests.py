"""deploy/: what the rendered overlays promise, and that the checker of .ci/deploy_check.py (which
``make test`` runs over every rendering) catches what it is there to catch."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT, find

OVERLAYS = ("overlays/all-in-one", "overlays/external")


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def test_both_overlays_and_the_prometheus_component_render(rendered):
    assert set(rendered) == {
        "overlays/all-in-one",
        "overlays/all-in-one + components/prometheus",
        "overlays/external",
        "overlays/external + components/prometheus",
    }
    kinds = {o["kind"] for o in rendered["overlays/all-in-one"]}
    assert {
        "Deployment",
        "StatefulSet",
        "Job",
        "Service",
        "ConfigMap",
        "ClusterRole",
        "ClusterRoleBinding",
    } <= kinds
    assert {o["metadata"]["name"] for o in rendered["overlays/all-in-one"] if o["kind"] == "StatefulSet"} == {
        "podlife-postgres",
        "podlife-redis",
    }
    assert not [o for o in rendered["overlays/external"] if o["kind"] == "StatefulSet"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_web_probes_hit_the_health_endpoints(rendered, overlay):
    web = find(rendered[overlay], "Deployment", "podlife-web")
    (container,) = pod_spec(web)["containers"]
    assert container["command"][:2] == ["uvicorn", "podlife_site.asgi:application"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert {"name": "http", "containerPort": 8000} in container["ports"]
    # Probes reach the pod by IP: the pod's IP joins ALLOWED_HOSTS after the configured names.
    env = {e["name"]: e for e in container["env"]}
    assert env["ALLOWED_HOSTS"]["value"] == "$(ALLOWED_HOSTS),$(POD_IP)"
    assert [e["name"] for e in container["env"]].index("POD_IP") < [
        e["name"] for e in container["env"]
    ].index("ALLOWED_HOSTS")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_worker_holds_a_kubernetes_api_token(rendered, overlay):
    pods = {
        o["metadata"]["name"]: pod_spec(o)
        for o in rendered[overlay]
        if o["kind"] in {"Deployment", "StatefulSet", "Job"}
    }
    assert pods["podlife-worker"]["serviceAccountName"] == "podlife-collector"
    assert "automountServiceAccountToken" not in pods["podlife-worker"]
    for name, spec in pods.items():
        if name != "podlife-worker":
            assert spec["automountServiceAccountToken"] is False, name


def test_cluster_role_is_the_one_docs_rbac_md_documents(rendered):
    documented = [
        doc
        for doc in yaml.safe_load_all(_yaml_block(ROOT / "docs" / "rbac.md"))
        if doc and doc["kind"] == "ClusterRole"
    ]
    role = find(rendered["overlays/external"], "ClusterRole", "podlife-collector")
    assert role["rules"] == documented[0]["rules"]
    binding = find(rendered["overlays/external"], "ClusterRoleBinding", "podlife-collector")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "podlife-collector", "namespace": "podlife"}
    ]


def test_every_setting_in_the_configmap_is_one_podlife_reads(rendered):
    config = find(rendered["overlays/external"], "ConfigMap", "podlife-settings")
    settings_py = (ROOT / "podlife_site" / "settings.py").read_text()
    # docs/configuration.md lists the settings, docs/collector.md the collector's own.
    documented = (ROOT / "docs" / "configuration.md").read_text() + (
        ROOT / "docs" / "collector.md"
    ).read_text()
    for key in config["data"]:
        assert f'"{key}"' in settings_py, f"{key} is not read by podlife_site/settings.py"
        assert f"`{key}`" in documented, (
            f"{key} is documented in neither docs/configuration.md nor docs/collector.md"
        )


@pytest.mark.parametrize("mode", ["all-in-one", "external"])
def test_secret_script_makes_every_key_the_overlay_reads(rendered, mode):
    env = {**os.environ, "DATABASE_URL": "postgres://u:p@db:5432/podlife", "REDIS_URL": "redis://r:6379/0"}
    out = subprocess.run(
        ["sh", str(ROOT / "deploy" / "secret.sh"), mode], capture_output=True, text=True, check=True, env=env
    ).stdout
    secret = next(d for d in yaml.safe_load_all(out) if d["kind"] == "Secret")
    assert secret["metadata"] == {"name": "podlife", "namespace": "podlife"}
    keys = set(secret["stringData"])
    assert {"SECRET_KEY", "DATABASE_URL", "REDIS_URL", "PODLIFE_METRICS_TOKEN"} <= keys
    assert len(secret["stringData"]["SECRET_KEY"]) >= 32  # settings refuse a shorter one
    wanted = {
        ref["secretKeyRef"]["key"]
        for o in rendered[f"overlays/{mode}"]
        if o["kind"] in {"Deployment", "StatefulSet"}
        for c in pod_spec(o)["containers"]
        for e in c.get("env", [])
        if (ref := e.get("valueFrom")) and "secretKeyRef" in ref
    }
    assert wanted <= keys
    if mode == "all-in-one":
        pg = secret["stringData"]["POSTGRES_PASSWORD"]
        assert (
            secret["stringData"]["DATABASE_URL"] == f"postgres://podlife:{pg}@podlife-postgres:5432/podlife"
        )


def test_alert_links_start_with_the_configured_external_url(deploy_check):
    """The component rewrites every podlife_url from PODLIFE_EXTERNAL_URL of the settings ConfigMap."""
    with tempfile.TemporaryDirectory() as scratch:
        rel = lambda p: os.path.relpath(ROOT / "deploy" / p, scratch)  # noqa: E731
        Path(scratch, "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "resources": [rel("overlays/external")],
                    "components": [rel("components/prometheus")],
                    "configMapGenerator": [
                        {
                            "name": "podlife-settings",
                            "behavior": "merge",
                            "literals": ["PODLIFE_EXTERNAL_URL=https://sre.corp.test/podlife"],
                        }
                    ],
                }
            )
        )
        objects = deploy_check.kustomize(Path(scratch))
    rule = find(objects, "PrometheusRule", "podlife")
    urls = [r["annotations"]["podlife_url"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert len(urls) == 4
    for url in urls:
        assert url.startswith("https://sre.corp.test/podlife/"), url
        assert "example.org" not in url


# --- the checker catches what it is there for ------------------------------------------------------------
def test_schema_check_rejects_an_unknown_field_for_every_version(rendered, deploy_check):
    web = copy.deepcopy(find(rendered["overlays/external"], "Deployment", "podlife-web"))
    assert deploy_check.schema_problems(web) == []
    web["spec"]["replica"] = 2  # a typo kubectl apply --validate=strict would refuse
    problems = deploy_check.schema_problems(web)
    assert len(problems) == len(deploy_check.KUBERNETES_VERSIONS)
    assert all("replica" in p for p in problems)


def test_schema_check_rejects_a_kind_a_version_lacks(deploy_check):
    old = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "x"},
        "spec": {},
    }
    problems = deploy_check.schema_problems(old, versions=("1.28.0",))
    assert problems == [
        "PodDisruptionBudget x: policy/v1beta1 PodDisruptionBudget does not exist in Kubernetes 1.28.0"
    ]


def test_policy_check_names_every_missing_promise(rendered, deploy_check):
    worker = copy.deepcopy(find(rendered["overlays/external"], "Deployment", "podlife-worker"))
    assert deploy_check.policy_problems(worker) == []
    container = pod_spec(worker)["containers"][0]
    del container["securityContext"]["readOnlyRootFilesystem"]
    del container["resources"]["limits"]["memory"]
    pod_spec(worker)["securityContext"]["runAsNonRoot"] = False
    pod_spec(worker)["serviceAccountName"] = "default"
    assert deploy_check.policy_problems(worker) == [
        "Deployment podlife/podlife-worker: pod securityContext.runAsNonRoot is not true",
        "Deployment podlife/podlife-worker: ServiceAccount default needs no API token: set automountServiceAccountToken: false",
        "Deployment podlife/podlife-worker container worker: readOnlyRootFilesystem is not true",
        "Deployment podlife/podlife-worker container worker: no memory limits",
    ]


def _yaml_block(markdown: Path) -> str:
    match = re.search(r"```yaml\n(.*?)```", markdown.read_text(), re.S)
    assert match, f"no yaml block in {markdown}"
    return match.group(1)
