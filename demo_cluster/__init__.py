"""The podlife demo cluster: a scenario engine and a small Kubernetes API server for demos, tests and
load benchmarks. It imports no Django, so tests use it without a database::

    from demo_cluster import run_sim

    with run_sim("drain-blocked-by-pdb", kubeconfig_path=tmp / "kc") as sim:
        sim.cluster.advance(30)   # virtual seconds (realtime=False by default in run_sim)
        ...                       # point the kubernetes client at sim.base_url / the kubeconfig

See docs/demo-cluster.md.
"""

from __future__ import annotations

from .cluster import SimCluster
from .kubelet import Behaviour
from .scenarios import ALL_NAMES, SCENARIOS, install
from .server import TOKEN, SimServer, run_sim

__all__ = ["ALL_NAMES", "SCENARIOS", "TOKEN", "Behaviour", "SimCluster", "SimServer", "install", "run_sim"]
