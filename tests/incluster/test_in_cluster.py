"""The collector in the in-cluster layout: the demo cluster serves HTTPS with a CA it made at start and
requires a ServiceAccount bearer token; the collector finds the API server through
KUBERNETES_SERVICE_HOST/PORT and reads the token and CA from files laid out as a pod's ServiceAccount volume
(in a temporary directory), through the kubernetes client's own in-cluster loader. A wrong token, a wrong
CA or a missing piece fails the step with a message naming it, which collector health shows."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.kube import config, lease, watch
from collectors.kube.config import ClusterSource, Tunables
from collectors.kube.kubelet import pull_kubelet_metrics
from collectors.kube.watch import StepControl, run_step
from dashboard.queries import collector_health
from demo_cluster import SimServer, run_sim
from demo_cluster.tls import make_serving_certs
from tests.stored import rows_of

CLUSTER = "incluster"
FAST = Tunables(watch_timeout_s=1, lease_ttl_s=5.0, list_page_size=50, batch_size=200, batch_seconds=0.1)


@pytest.fixture
def tls_sim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SimServer, Path]]:
    """The mixed scenario over HTTPS, 20 virtual seconds in, with the in-cluster environment and files."""
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    with run_sim("mixed", seed=4, start=start, tls=True, bookmark_interval=0.2) as sim:
        with sim.cluster.engine.lock:
            sim.cluster.advance(20)
        sa = sim.write_serviceaccount(tmp_path / "serviceaccount")
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(sim.port))
        watch.forget_caches()
        lease._backend = None
        yield sim, sa
        config.unregister_cluster(CLUSTER)
        config.close_clients()
        watch.forget_caches()


def register(sa: Path, **files: Path) -> None:
    config.register_cluster(
        ClusterSource(
            CLUSTER,
            in_cluster=True,
            token_file=str(files.get("token", sa / "token")),
            ca_file=str(files.get("ca", sa / "ca.crt")),
        )
    )


def step(resource: str = "pods") -> watch.StepResult:
    return run_step(CLUSTER, resource, control=StepControl(tunables=FAST))


def last_error(resource: str = "pods") -> str:
    return next(
        h["last_error"] for h in collector_health() if h["cluster"] == CLUSTER and h["resource"] == resource
    )


def test_demo_cluster_serves_https_with_its_own_ca_and_requires_the_token(
    tls_sim: tuple[SimServer, Path],
) -> None:
    """GIVEN the demo cluster with tls THEN it answers only HTTPS that verifies against the CA it made,
    401 without the token or with another one, and 200 with it (either case of the Bearer scheme)."""
    sim, sa = tls_sim
    assert sim.base_url == f"https://127.0.0.1:{sim.port}"
    trusted = ssl.create_default_context(cafile=str(sa / "ca.crt"))

    def get(token: str | None, context: ssl.SSLContext = trusted) -> int:
        req = urllib.request.Request(f"{sim.base_url}/api/v1/namespaces/demo/pods")
        if token is not None:
            req.add_header("Authorization", token)
        try:
            with urllib.request.urlopen(req, context=context, timeout=10) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    assert get(None) == 401
    assert get("Bearer not-the-token") == 401
    assert get(f"Bearer {(sa / 'token').read_text()}") == 200
    assert get(f"bearer {(sa / 'token').read_text()}") == 200  # how the client's in-cluster loader sends it
    stranger = ssl.create_default_context(cadata=make_serving_certs().ca_pem.decode())
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(f"Bearer {(sa / 'token').read_text()}", stranger)


@pytest.mark.django_db
def test_collector_collects_in_cluster_through_tls_with_the_token(tls_sim: tuple[SimServer, Path]) -> None:
    """GIVEN the in-cluster layout WHEN the collector lists, then watches, pods and nodes and pulls kubelet
    metrics THEN every object is stored, a pod created meanwhile arrives through the watch, and nothing
    is recorded as an error."""
    sim, sa = tls_sim
    register(sa)
    listed = step()
    assert listed.error is None, listed.error
    # The collector keys a mirror pod by its static pod's UID (the config.mirror annotation).
    uids = {
        (p["metadata"].get("annotations") or {}).get("kubernetes.io/config.mirror") or p["metadata"]["uid"]
        for p in sim.cluster.store.iter_objects("pods")
    }
    stored = {o.pod_uid for o in rows_of(CLUSTER) if o.pod_uid != ""}
    assert listed.listed == len(uids) and uids <= stored

    with sim.cluster.engine.lock:
        new = sim.cluster.spawn_pod(sorted(sim.cluster.kubelets)[0])
    watched = step()
    assert watched.error is None and watched.events >= 1
    assert rows_of(CLUSTER, pod_uids=[new["metadata"]["uid"]])
    assert step("nodes").error is None
    metrics = pull_kubelet_metrics(CLUSTER)
    assert metrics.errors == [] and metrics.stored == len(sim.cluster.kubelets)
    assert last_error() == ""
    gets = [r for r in sim.requests if r[2].startswith("/api/v1/pods")]
    assert gets and all(code == 200 for *_, code, _ in gets)


@pytest.mark.django_db
def test_wrong_token_fails_with_a_message_naming_the_token_file(
    tls_sim: tuple[SimServer, Path], tmp_path: Path
) -> None:
    sim, sa = tls_sim
    bad = tmp_path / "other-token"
    bad.write_text("a-token-from-another-cluster")
    register(sa, token=bad)
    result = step()
    expected = (
        f"ClusterCredentialsError: cluster 'incluster': the API server at https://127.0.0.1:{sim.port} rejected "
        f"the ServiceAccount token read from {bad} (401 Unauthorized)"
    )
    assert result.error is not None and result.error.startswith(expected), result.error
    assert last_error().startswith(expected)
    assert not rows_of(CLUSTER)
    assert sim.requests_matching("GET", "/api/v1/pods")[-1][3] == 401


@pytest.mark.django_db
def test_wrong_ca_fails_with_a_message_naming_the_ca_file(
    tls_sim: tuple[SimServer, Path], tmp_path: Path
) -> None:
    sim, sa = tls_sim
    other = tmp_path / "other-ca.crt"
    other.write_bytes(make_serving_certs("someone-elses-ca").ca_pem)
    register(sa, ca=other)
    result = step()
    assert result.error is not None
    assert result.error.startswith(
        f"ClusterTLSError: cluster 'incluster': the certificate of the API server at https://127.0.0.1:{sim.port} "
        f"does not verify against the CA in {other} ("
    ), result.error
    assert "CERTIFICATE_VERIFY_FAILED" in result.error
    assert last_error() == result.error
    assert not sim.requests_matching("GET", "/api/v1/pods")  # nothing got past the handshake


@pytest.mark.django_db
def test_missing_environment_and_files_are_named(
    tls_sim: tuple[SimServer, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN an in-cluster source without its environment or files WHEN a step runs THEN it fails (and
    health says) which variable or file is missing; once the file is there the next step collects."""
    sim, sa = tls_sim
    missing = tmp_path / "nowhere" / "token"
    register(sa, token=missing)
    result = step()
    assert result.error == (
        f"ClusterConfigError: cluster 'incluster': in-cluster configuration: the ServiceAccount token file "
        f"{missing} does not exist (is automountServiceAccountToken off, or PODLIFE_IN_CLUSTER_TOKEN_FILE wrong?)"
    )
    assert last_error() == result.error
    missing.parent.mkdir()
    missing.write_text((sa / "token").read_text())
    assert step().error is None  # a broken configuration is not cached: the next step tries again

    config.close_clients()
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    register(sa)
    result = step("nodes")
    assert result.error is not None and "KUBERNETES_SERVICE_PORT not set" in result.error


@pytest.mark.django_db
def test_token_and_ca_paths_from_settings(tls_sim: tuple[SimServer, Path], settings: object) -> None:
    """GIVEN PODLIFE_IN_CLUSTER_TOKEN_FILE / _CA_FILE (as ``manage.py collect --in-cluster`` and the Celery
    workers read them) and a source that names no files THEN those files are used."""
    sim, sa = tls_sim
    settings.PODLIFE_IN_CLUSTER_TOKEN_FILE = str(sa / "token")  # type: ignore[attr-defined]
    settings.PODLIFE_IN_CLUSTER_CA_FILE = str(sa / "ca.crt")  # type: ignore[attr-defined]
    source = ClusterSource(CLUSTER, in_cluster=True)
    assert (source.token_path, source.ca_path) == (str(sa / "token"), str(sa / "ca.crt"))
    config.register_cluster(source)
    assert step().error is None
    assert rows_of(CLUSTER)
