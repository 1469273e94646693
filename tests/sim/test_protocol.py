"""The demo cluster speaks the list/watch protocol well enough for the real kubernetes client and kubectl."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from prometheus_client.parser import text_string_to_metric_families

from collectors.parsers.klog import split_journald_prefix
from demo_cluster import SimServer, run_sim
from demo_cluster.kubelet import node_log_zone
from tests.waits import wait_for

from .conftest import KHI_RE, api_client


def _raw(resp) -> dict:
    return orjson.loads(resp.data)


def test_list_paging_typed_and_raw(sim: SimServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    full = core.list_pod_for_all_namespaces()
    assert len(full.items) >= 5
    names, token, first_rv = [], None, None
    while True:
        page = _raw(core.list_pod_for_all_namespaces(limit=2, _continue=token, _preload_content=False))
        assert page["kind"] == "PodList" and page["apiVersion"] == "v1"
        first_rv = first_rv or page["metadata"]["resourceVersion"]
        assert page["metadata"]["resourceVersion"] == first_rv  # continued pages keep the list's revision
        assert all("kind" not in it for it in page["items"])
        names += [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == sorted(names) == [(p.metadata.namespace, p.metadata.name) for p in full.items]


def test_other_apis_typed(sim: SimServer, api: client.ApiClient) -> None:
    pdbs = client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces()
    assert (
        {p.metadata.name for p in pdbs.items}
        == {p["metadata"]["name"] for p in sim.cluster.store.iter_objects("poddisruptionbudgets")}
        != set()
    )
    deps = client.AppsV1Api(api).list_deployment_for_all_namespaces()
    dep = deps.items[0]
    st = client.AppsV1Api(api).read_namespaced_deployment_status(dep.metadata.name, dep.metadata.namespace)
    assert st.status.observed_generation == dep.metadata.generation
    assert client.AppsV1Api(api).list_replica_set_for_all_namespaces().items
    nodes = client.CoreV1Api(api).list_node()
    assert len(nodes.items) == len(sim.cluster.kubelets)
    core_events = client.CoreV1Api(api).list_event_for_all_namespaces()
    v1_events = _raw(client.EventsV1Api(api).list_event_for_all_namespaces(_preload_content=False))
    assert v1_events["apiVersion"] == "events.k8s.io/v1"
    by_uid = {e["metadata"]["uid"]: e for e in v1_events["items"]}
    assert {e.metadata.uid for e in core_events.items} == set(by_uid)
    scheduled = next(e for e in core_events.items if e.reason == "Scheduled")
    assert scheduled.event_time is not None and scheduled.first_timestamp is None
    assert by_uid[scheduled.metadata.uid]["note"] == scheduled.message
    # Legacy-recorder events have eventTime null in events.k8s.io/v1 too, as on a real API server, and the
    # generated model rejects that (a known client bug): deserialized calls work only without such events.
    with pytest.raises(ValueError, match="event_time"):
        client.EventsV1Api(api).list_event_for_all_namespaces()
    scheduler_only = client.EventsV1Api(api).list_namespaced_event(
        "demo", field_selector="reportingController=default-scheduler"
    )
    assert scheduler_only.items and all(
        e.reporting_controller == "default-scheduler" for e in scheduler_only.items
    )


def test_stale_continue_token_is_410(sim: SimServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    page = core.list_pod_for_all_namespaces(limit=1)
    with sim.cluster.engine.lock:
        sim.cluster.spawn_pod("rollout-node-1")
    sim.cluster.compact()  # etcd compacted past the list's revision
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(limit=1, _continue=page.metadata._continue)
    assert err.value.status == 410
    assert json.loads(err.value.body)["reason"] == "Expired"


def test_watch_stream_replays_history_then_410_after_compaction(
    sim: SimServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    sim.cluster.advance(20)
    seen = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(
            core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1
        )
    ]
    assert seen and {t for t, _ in seen} <= {"ADDED", "MODIFIED", "DELETED"}
    sim.cluster.compact()
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1))
    assert err.value.status == 410
    # Relist and watch from the new revision: works again.
    rv2 = core.list_pod_for_all_namespaces().metadata.resource_version
    with sim.cluster.engine.lock:
        sim.cluster.spawn_pod("rollout-node-2", name="after-relist")
    events = list(
        watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=rv2, timeout_seconds=1)
    )
    assert ("ADDED", "after-relist") in [(e["type"], e["object"].metadata.name) for e in events]


def test_raw_watch_with_bookmarks_and_in_band_410(sim: SimServer, api: client.ApiClient) -> None:
    policy = client.PolicyV1Api(api)
    rv = int(policy.list_pod_disruption_budget_for_all_namespaces().metadata.resource_version)
    resp = policy.list_pod_disruption_budget_for_all_namespaces(
        watch=True,
        resource_version=str(rv),
        allow_watch_bookmarks=True,
        timeout_seconds=1,
        _preload_content=False,
    )
    lines = [orjson.loads(x) for x in resp.data.splitlines() if x.strip()]
    marks = [ln for ln in lines if ln["type"] == "BOOKMARK"]
    assert marks, lines
    assert marks[-1]["object"] == {
        "kind": "PodDisruptionBudget",
        "apiVersion": "policy/v1",
        "metadata": {"resourceVersion": marks[-1]["object"]["metadata"]["resourceVersion"]},
    }
    assert int(marks[-1]["object"]["metadata"]["resourceVersion"]) >= rv
    with sim.cluster.engine.lock:
        sim.cluster.spawn_pod("rollout-node-1")
    sim.cluster.compact()
    resp = policy.list_pod_disruption_budget_for_all_namespaces(
        watch=True, resource_version=str(rv), timeout_seconds=1, _preload_content=False
    )
    (err,) = [orjson.loads(x) for x in resp.data.splitlines() if x.strip()]
    assert err["type"] == "ERROR"
    assert (
        err["object"]["code"] == 410
        and err["object"]["reason"] == "Expired"
        and err["object"]["kind"] == "Status"
    )


def test_watch_sees_live_changes_and_hooks(sim: SimServer) -> None:
    """GIVEN an open raw watch WHEN hooks fire over HTTP THEN the stream shows them; drop ends it."""
    got: list[bytes] = []
    url = f"{sim.base_url}/api/v1/pods?watch=1&resourceVersion={sim.cluster.store.rv}"

    def reader() -> None:
        with urllib.request.urlopen(url, timeout=5) as resp:
            got.extend(iter(resp.readline, b""))

    t = threading.Thread(target=reader)
    t.start()
    wait_for(lambda: sim._httpd.open_watches(), "the watch request is open")

    def hook(hook_name: str, **q: str) -> dict:
        query = "&".join(f"{k}={v}" for k, v in q.items())
        req = urllib.request.Request(f"{sim.base_url}/_sim/{hook_name}?{query}", method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    made = hook("pods", node="static-node-1", name="browser-live")
    assert made["pod"]["name"] == "browser-live"
    hook("redeliver")
    hook("inject-malformed")
    # The three lines arrived (the pod twice, the malformed line) before the watch is ended.
    wait_for(
        lambda: len([g for g in got if b'"browser-live"' in g]) == 2 and b"broken" in got[-1], "the lines"
    )
    hook("drop-watches")
    t.join(timeout=5)
    assert not t.is_alive()
    added = [g for g in got if b'"browser-live"' in g]
    assert len(added) == 2 and added[0] == added[1]  # re-delivered verbatim
    bad = [g for g in got if not g.startswith(b'{"type"') or g.count(b"{") != g.count(b"}")]
    assert len(bad) == 1
    assert hook("pause")["ok"] and sim.paused and hook("resume")["ok"] and not sim.paused


def test_error_statuses(sim: SimServer) -> None:
    def get(path: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(sim.base_url + path, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    code, body = get("/api/v1/nope")
    assert (
        code == 404
        and body["kind"] == "Status"
        and body["reason"] == "NotFound"
        and body["metadata"] == {}
        and "details" in body
    )
    code, body = get("/api/v1/namespaces/demo/pods/missing")
    assert (
        code == 404
        and body["message"] == 'pods "missing" not found'
        and body["details"] == {"name": "missing", "kind": "pods"}
    )
    sim.cluster.forbidden.add("nodes")
    code, body = get("/api/v1/nodes")
    assert code == 403 and body["reason"] == "Forbidden" and "cannot list resource" in body["message"]
    req = urllib.request.Request(sim.base_url + "/api/v1/pods", headers={"Authorization": "Bearer wrong"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 401


def test_eviction_subresource_honours_pdb(tmp_path) -> None:
    with run_sim("pdb-unmanaged-pods", seed=3, kubeconfig_path=tmp_path / "kc") as sim:
        sim.cluster.advance(20)  # the PDB exists (created at 5 s) and counts no expected pods
        core = client.CoreV1Api(api_client(tmp_path / "kc"))
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name="consul-0", namespace="demo"))
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod_eviction("consul-0", "demo", body)
        st = json.loads(err.value.body)
        assert err.value.status == 429 and st["reason"] == "TooManyRequests"
        assert st["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
        assert st["details"]["causes"] == [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget consul-pdb needs 0 healthy pods and has 3 currently",
            }
        ]
        sim.cluster.delete_pdb("demo", "consul-pdb")
        resp = core.create_namespaced_pod_eviction("consul-0", "demo", body, _preload_content=False)
        assert resp.status == 201 and _raw(resp) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }
        pod = core.read_namespaced_pod_status("consul-0", "demo")
        dt = next(c for c in pod.status.conditions if c.type == "DisruptionTarget")
        assert (dt.status, dt.reason, dt.message) == (
            "True",
            "EvictionByEvictionAPI",
            "Eviction API: evicting",
        )
        assert pod.metadata.deletion_timestamp is not None


def test_node_proxy_metrics_and_logs(sim: SimServer, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    node = "shutdown-node-2"
    text = core.connect_get_node_proxy_with_path(node, "metrics", _preload_content=False).data.decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    working = fams["kubelet_working_pods"].samples
    assert len(working) == 15
    assert sum(s.value for s in working) == len(sim.cluster.kubelets[node].workers)
    desired = sum(s.value for s in fams["kubelet_desired_pods"].samples)
    assert desired == sum(s.value for s in working if s.labels["config"] == "desired")
    assert "[ALPHA] " in text.split("kubelet_pod_worker_duration_seconds")[1]
    since = sim.cluster.engine.start.strftime("%Y-%m-%dT%H:%M:%SZ")
    with urllib.request.urlopen(
        f"{sim.base_url}/api/v1/nodes/{node}/proxy/logs/?query=kubelet&sinceTime={since}", timeout=5
    ) as resp:
        lines = resp.read().decode().splitlines()
    # As `journalctl --utc --output=short-precise` serves them: a UTC journald prefix, then the klog line
    # with its header in the node's own zone.
    assert lines
    zone, year = node_log_zone(node), sim.cluster.engine.start.year
    for ln in lines:
        prefix, klog = split_journald_prefix(ln)
        assert prefix is not None and prefix.ident == "kubelet" and prefix.host == node, ln
        assert KHI_RE.match(klog), ln
        assert prefix.hms is not None
        header = datetime.strptime(klog[1:21], "%m%d %H:%M:%S.%f").replace(year=year, tzinfo=zone)
        journald = datetime(year, prefix.month, prefix.day, *prefix.hms, tzinfo=UTC)
        assert abs(header - journald) < timedelta(seconds=1), ln
    assert any('"SyncPod enter"' in ln for ln in lines)


def test_kubectl_get_and_watch(tmp_path, kubectl: str) -> None:
    kc = tmp_path / "kc"
    # Speed 5: the scenarios' PDBs live a few real seconds each, longer than kubectl takes on a busy machine.
    with run_sim("mixed", seed=5, kubeconfig_path=kc, realtime=True, speed=5, bookmark_interval=0.5) as sim:
        # a busy machine may need more than a moment for the first PDB
        wait_for(lambda: sim.cluster.store.count("poddisruptionbudgets"), "a PDB", 15, interval=0.1)
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        base = [kubectl, "--kubeconfig", str(kc)]
        out = subprocess.run(
            [*base, "get", "pods", "-A"], capture_output=True, text=True, timeout=20, env=env
        )
        assert out.returncode == 0, out.stderr
        header = out.stdout.splitlines()[0].split()
        assert header[:6] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        out = subprocess.run(
            [*base, "get", "pdb", "-A", "-o", "json"], capture_output=True, text=True, timeout=20, env=env
        )
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["kind"] == "List" and {i["kind"] for i in doc["items"]} == {"PodDisruptionBudget"}
        proc = subprocess.Popen(
            [*base, "get", "pdb", "-A", "-w"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            first = proc.stdout.readline()
            second = proc.stdout.readline()
        finally:
            proc.kill()
            proc.wait(timeout=5)
        assert first.split()[:2] == ["NAMESPACE", "NAME"] and second.split()[0] == "demo"
        assert sim.cluster.store.rv > 0


def test_pod_watch_answers_table_requests_with_headers_once(sim: SimServer) -> None:
    """kubectl get pods -w asks for as=Table on the watch too: every event carries a one-row Table, and
    only the first one the column definitions (the API server sets NoHeaders after it)."""
    rv = sim.cluster.store.rv
    with sim.cluster.engine.lock:
        sim.cluster.spawn_pod("rollout-node-1", name="table-row")
        sim.cluster.advance(3)
    req = urllib.request.Request(
        f"{sim.base_url}/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=1",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        events = [orjson.loads(x) for x in resp.read().splitlines() if x.strip()]
    assert len(events) >= 3
    tables = [e["object"] for e in events]
    assert all(t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1" for t in tables)
    assert [c["name"] for c in tables[0]["columnDefinitions"]][:5] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
    ]
    assert all(t["columnDefinitions"] is None for t in tables[1:])
    assert all(len(t["rows"]) == 1 for t in tables)
    mine = [t["rows"][0]["cells"] for t in tables if t["rows"][0]["cells"][0] == "table-row"]
    assert mine[0][1:3] == ["0/1", "Pending"] and mine[-1][1:3] == ["1/1", "Running"]
    assert mine[-1][6] == "rollout-node-1"
    assert tables[0]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_kubectl_get_pods_all_namespaces_watch(tmp_path, kubectl: str) -> None:
    """GIVEN kubectl get pods -A -w WHEN a pod is created and starts THEN its rows appear under the usual
    columns as it moves from Pending to Running."""
    kc = tmp_path / "kc"
    with run_sim("rollout", seed=4, kubeconfig_path=kc, bookmark_interval=0.5) as sim:
        sim.cluster.advance(10)
        env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
        proc = subprocess.Popen(
            [kubectl, "--kubeconfig", str(kc), "get", "pods", "-A", "-w"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 15
            while not any(ln.startswith("demo ") for ln in lines) and time.monotonic() < deadline:
                time.sleep(0.05)
            with sim.cluster.engine.lock:
                sim.cluster.spawn_pod("rollout-node-2", namespace="demo", name="watched")
                sim.cluster.advance(5)
            # Until the row that says Running came (kubectl prints each change as it reads it: stopping
            # at the third row raced the rows after it).
            while (
                not any(row[1:2] == ["watched"] and "Running" in row for row in map(str.split, lines))
                and time.monotonic() < deadline
            ):
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait(timeout=5)
            reader.join(timeout=5)
        assert lines[0].split()[:6] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"], lines
        assert sum(ln.split()[0] == "NAMESPACE" for ln in lines) == 1  # headers once
        watched = [ln.split() for ln in lines if ln.split()[1:2] == ["watched"]]
        assert watched[0][:4] == ["demo", "watched", "0/1", "Pending"], watched
        assert watched[-1][:4] == ["demo", "watched", "1/1", "Running"], watched


def test_scale_cluster_pages_and_streams_over_http(tmp_path) -> None:
    """200 nodes x 30 pods through the real client: paged lists hold one revision and count every pod;
    a watch from resourceVersion 0 streams them all as ADDED, then churn arrives on the same stream."""
    with run_sim(
        "scale", seed=2, kubeconfig_path=tmp_path / "kc", nodes=200, pods_per_node=30, churn=20
    ) as sim:
        core = client.CoreV1Api(api_client(tmp_path / "kc"))
        names, token, rvs = set(), None, set()
        while True:
            page = _raw(core.list_pod_for_all_namespaces(limit=500, _continue=token, _preload_content=False))
            rvs.add(page["metadata"]["resourceVersion"])
            names |= {i["metadata"]["name"] for i in page["items"]}
            token = page["metadata"].get("continue")
            if not token:
                break
            assert page["metadata"]["remainingItemCount"] == 6000 - len(names)
        assert len(names) == 6000 and len(rvs) == 1
        nodes = core.list_node(limit=50)
        assert len(nodes.items) == 50 and nodes.metadata._continue
        with sim.cluster.engine.lock:
            sim.cluster.advance(7)  # churn begins at 5 s
        current = sim.cluster.store.count("pods")
        url = f"{sim.base_url}/api/v1/namespaces/load/pods?watch=1&resourceVersion=0&timeoutSeconds=1"
        got: list[bytes] = []

        def read() -> None:
            with urllib.request.urlopen(url, timeout=10) as resp:
                got.extend(resp.read().splitlines())

        reader = threading.Thread(target=read)
        reader.start()
        wait_for(lambda: sim._httpd.open_watches(), "the watch request is open")
        with sim.cluster.engine.lock:
            sim.cluster.advance(3)
        reader.join(10)
        events = [orjson.loads(x) for x in got]
        types = [e["type"] for e in events]
        assert types[:current] == ["ADDED"] * current and all(e["object"]["kind"] == "Pod" for e in events)
        assert {"MODIFIED", "DELETED", "ADDED"} <= set(types[current:])
