"""The collector's memory listing every pod against slim tuples of the same pods: one measure shared by
bench/watch.py and bench/scale.py. Call it after ``_setup.setup_django``."""

from __future__ import annotations

import tracemalloc
from typing import Any


def list_memory(cluster: str, control: Any) -> tuple[int, int, int]:
    """(collector peak bytes while listing all pods, slim-tuple bytes for the same pods, pods)."""
    import orjson
    from kubernetes import client as kclient

    from collectors.kube import config
    from collectors.kube.watch import run_step

    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result = run_step(cluster, "pods", control=control)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert result.ok, result.error

    api = kclient.CoreV1Api(config.api_client(cluster))
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    slim: list[tuple[str, str, str, str, str, str]] = []
    token = None
    while True:
        body = orjson.loads(
            api.list_pod_for_all_namespaces(
                limit=control.tunables.list_page_size, _continue=token, _preload_content=False
            ).data
        )
        for item in body["items"]:
            meta = item["metadata"]
            slim.append(
                (meta["uid"], meta["namespace"], meta["name"], item["spec"].get("nodeName", ""),
                 meta["resourceVersion"], item["status"].get("phase", ""))
            )  # fmt: skip
        token = body["metadata"].get("continue")
        del body
        if not token:
            break
    retained = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return peak, retained, len(slim)
