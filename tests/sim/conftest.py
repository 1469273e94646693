from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from demo_cluster import SimServer, run_sim
from tests.tools import require_tool

KHI_RE = re.compile(r"^([IWEF])(\d{4})\s+(\d{2}:\d{2}:\d{2}\.\d{6})\s+(\d+)\s+([^:]+:\d+)]\s+(.*)$")


def api_client(kubeconfig: Path) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    return client.ApiClient(cfg)


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[SimServer]:
    """The mixed scenario, stepped by hand, 25 virtual seconds in."""
    with run_sim("mixed", seed=7, kubeconfig_path=tmp_path / "kubeconfig", bookmark_interval=0.2) as server:
        server.cluster.advance(25)
        server.kubeconfig_path = tmp_path / "kubeconfig"  # type: ignore[attr-defined]
        yield server


@pytest.fixture
def api(sim: SimServer) -> Iterator[client.ApiClient]:
    c = api_client(sim.kubeconfig_path)  # type: ignore[attr-defined]
    yield c
    c.close()


@pytest.fixture
def kubectl() -> str:
    """The real kubectl (1.32 on these machines); a missing one fails in CI and skips elsewhere."""
    return require_tool("kubectl")
