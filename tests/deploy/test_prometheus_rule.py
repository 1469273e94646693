"""The PrometheusRule of deploy/components/prometheus, evaluated against podlife's own /metrics.

GIVEN the demo cluster playing its stuck-terminating (or drain-blocked-by-pdb) scenario, collected by the
real collector through the real ``kubernetes`` client WHEN /metrics is scraped as the scenario unfolds
and every rule's expression is evaluated on that scrape THEN the rule for that scenario fires, with the
labels its podlife link needs, and no other finding rule fires.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import promql_parser
import pytest
import yaml
from django.utils import timezone

from alerts.loop import run_once
from alerts.models import Destination
from collectors.kube import config, lease, watch
from collectors.kube.config import ClusterSource, Tunables
from collectors.kube.runner import Collector
from collectors.models import CollectorState
from demo_cluster import run_sim
from tests.alerts.conftest import make_finding
from tests.alerts.receiver import Receiver
from tests.collector.conftest import SimCluster
from tests.waits import wait_for
from timelines import derivation
from timelines.models import Cluster

from .conftest import ROOT
from .promql import Sample, Unsupported, evaluate, parse_scrape

RULE_FILE = ROOT / "deploy" / "components" / "prometheus" / "prometheusrule.yaml"
CLUSTER = "sim-alerts"
FAST = Tunables(
    watch_timeout_s=1,
    lease_ttl_s=3600.0,  # virtual seconds: the process reads the demo cluster's fast clock
    list_page_size=20,
    batch_size=200,
    batch_seconds=0.1,
    backoff_base_s=0.01,
    backoff_cap_s=0.05,
    kubelet_interval_s=1.0,
)


def rules() -> dict[str, dict]:
    doc = yaml.safe_load(RULE_FILE.read_text())
    return {r["alert"]: r for g in doc["spec"]["groups"] for r in g["rules"]}


def firing(samples: list[Sample]) -> dict[str, list[dict[str, str]]]:
    """Every rule's firing series (label sets) on one scrape; rules that do not fire are absent."""
    out = {}
    for name, rule in rules().items():
        result = evaluate(rule["expr"], samples)
        if result:
            out[name] = [dict(s.labels) for s in result]
    return out


def findings_rules(fired: dict[str, list[dict[str, str]]]) -> dict[str, list[dict[str, str]]]:
    """The finding rules among what fired. PodlifeCollectorNotWatching reads the lease the Celery watch
    chains record; the foreground collector these tests run records none, so that rule is left out."""
    return {name: series for name, series in fired.items() if name != "PodlifeCollectorNotWatching"}


def scrape(client, settings) -> list[Sample]:
    settings.PODLIFE_METRICS_TOKEN = "scrape-token"  # /metrics is closed without one (docs/security.md)
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token")
    assert response.status_code == 200
    return parse_scrape(response.content.decode())


# --- the rule file itself ------------------------------------------------------------------------------
def test_every_rule_parses_and_links_to_podlife():
    found = rules()
    assert set(found) == {
        "PodlifePodStuckTerminating",
        "PodlifeDrainBlockedByPDB",
        "PodlifePodNeverStarted",
        "PodlifeCollectorNotWatching",
    }
    for name, rule in found.items():
        promql_parser.parse(rule["expr"])  # raises on a syntax error
        if "for" in rule:
            assert promql_parser.parse_duration(rule["for"]) > timedelta(0)
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        url = rule["annotations"]["podlife_url"]
        assert url.startswith("https://podlife.example.org/"), name  # rewritten by the component
        for label in ("cluster", "namespace", "node"):
            if "{{ $labels." + label + " }}" in url:
                assert label in rule["expr"], f"{name}: the link needs {label}, the expression drops it"


def test_evaluator_refuses_what_it_does_not_implement():
    with pytest.raises(Unsupported):
        evaluate("rate(podlife_collector_events_total[5m]) > 0", [])
    with pytest.raises(Unsupported):
        evaluate("a > b", [])


# --- against /metrics ------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_never_started_rule_fires_on_a_recent_never_started_pod_and_stops(client, settings):
    cluster = Cluster.objects.create(name="prod", origin=Cluster.Origin.LIVE)
    now = timezone.now()
    make_finding(
        cluster,
        kind="never_started",
        severity="warning",
        start=now - timedelta(seconds=40),
        end=now - timedelta(seconds=30),
    )
    assert firing(scrape(client, settings)) == {
        "PodlifePodNeverStarted": [{"cluster": "prod", "namespace": "shop"}],
    }
    settings.PODLIFE_METRICS_RECENT_S = 60
    later = now + timedelta(seconds=120)
    with _clock(lambda: later):
        assert firing(scrape(client, settings)) == {}


@pytest.mark.django_db
def test_collector_rule_fires_for_a_watch_whose_chain_died_but_not_for_kubelet_pulls(client, settings):
    from collectors.models import CollectorState

    cluster = Cluster.objects.create(name="prod", origin=Cluster.Origin.LIVE)
    now = timezone.now()
    CollectorState.objects.create(cluster=cluster, resource="pods", lease_expires=now + timedelta(minutes=2))
    CollectorState.objects.create(
        cluster=cluster, resource="events", lease_expires=now - timedelta(minutes=1)
    )
    CollectorState.objects.create(cluster=cluster, resource="kubelet-logs")  # pulls hold no chain
    assert firing(scrape(client, settings)) == {
        "PodlifeCollectorNotWatching": [{"cluster": "prod", "resource": "events"}],
    }


@contextmanager
def _clock(now) -> Iterator[None]:
    real = timezone.now
    timezone.now = now
    try:
        yield
    finally:
        timezone.now = real


@contextmanager
def demo_cluster(tmp_path: Path, scenario: str):
    """The demo cluster playing ``scenario`` on virtual time, collected as cluster ``sim-alerts``."""
    watch.forget_caches()
    lease._backend = None
    kubeconfig = tmp_path / "kubeconfig"
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    with run_sim(scenario, seed=11, kubeconfig_path=kubeconfig, bookmark_interval=0.2, start=start) as server:
        config.register_cluster(ClusterSource(CLUSTER, str(kubeconfig), "podlife-demo"))
        engine = server.cluster.engine
        with _clock(lambda: engine.now):
            collector = Collector([CLUSTER], tunables=FAST).start()
            try:
                # The story moves only once the collector listed the pods (advance_watched waits for the
                # watch events after that list).
                wait_for(
                    lambda: (
                        CollectorState.objects.filter(cluster__name=CLUSTER, resource="pods")
                        .exclude(resource_version="")
                        .exists()
                    ),
                    "the collector listed the pods",
                )
                yield SimCluster(server, kubeconfig, cluster=CLUSTER)
            finally:
                collector.stop()
                config.unregister_cluster(CLUSTER)
                config.close_clients()
                watch.forget_caches()


def play_until(sim, client, settings, done, *, limit: int = 240) -> list[Sample]:
    """Advance the demo cluster a virtual second at a time, each once the collector stored the pod events
    of the last (``advance_watched``), marking ageing pods every 5 s, as beat does; run the derive stage
    as a derive worker would, and scrape, until ``done(firing)``; returns that scrape."""
    for second in range(limit):
        sim.advance_watched(1.0)
        if second % 5 == 0:
            derivation.mark_open_pods()
        derivation.drain()
        samples = scrape(client, settings)
        if done(firing(samples)):
            return samples
    raise AssertionError(f"not reached within {limit} virtual seconds; last firing: {firing(samples)}")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_stuck_terminating_scenario_fires_its_rule_and_the_webhooks(client, settings, tmp_path):
    """The scenario's container ignores SIGTERM and its runtime hangs: the kubelet's worker terminates
    for ~35 s past a 10 s grace period. With a 5 s slack that is "stuck" while it lasts (the default 60 s
    slack flags it only on the API side, held by a finalizer: see docs/deploy.md "Alerts")."""
    settings.PODLIFE_STUCK_TERMINATING_SLACK_S = 5.0
    settings.PODLIFE_WEBHOOK_ALLOW = "127.0.0.1"  # the receiver is local: allowed, not public
    receiver = Receiver().start()
    try:
        Destination.objects.create(
            name="oncall", url=receiver.url, min_severity="warning", kinds="stuck_terminating"
        )
        with demo_cluster(tmp_path, "stuck-terminating") as sim:
            samples = play_until(sim, client, settings, lambda f: "PodlifePodStuckTerminating" in f)
            fired = findings_rules(firing(samples))
            assert fired == {"PodlifePodStuckTerminating": [{"cluster": CLUSTER, "namespace": "demo"}]}
            run_once()
            (new,) = receiver.messages()
            assert (new["event"], new["finding"]["kind"], new["finding"]["open"]) == (
                "new",
                "stuck_terminating",
                True,
            )
            assert new["finding"]["subject_name"].startswith("demo/stubborn-")
            # The runtime lets go: the worker's termination ends, so does the finding, and the rule stops.
            play_until(sim, client, settings, lambda f: "PodlifePodStuckTerminating" not in f)
            run_once()
        assert [m["event"] for m in receiver.messages()] == ["new", "resolved"]
        resolved = receiver.messages()[1]["finding"]
        assert resolved["identity"] == new["finding"]["identity"]
        assert resolved["end"] is not None and resolved["open"] is False
    finally:
        receiver.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_drain_blocked_scenario_fires_its_rule_for_the_cordoned_node(client, settings, tmp_path):
    with demo_cluster(tmp_path, "drain-blocked-by-pdb") as sim:
        samples = play_until(sim, client, settings, lambda f: "PodlifeDrainBlockedByPDB" in f)
        cordoned = [n for n in sim.store.iter_objects("nodes") if n["spec"].get("unschedulable")]
        fired = findings_rules(firing(samples))
    assert [n["metadata"]["name"] for n in cordoned] == [fired["PodlifeDrainBlockedByPDB"][0]["node"]]
    assert fired == {
        "PodlifeDrainBlockedByPDB": [{"cluster": CLUSTER, "node": cordoned[0]["metadata"]["name"]}]
    }
    pods = [s for s in samples if s.label("__name__") == "podlife_node_drain_blocked_pods"]
    assert [(s.label("node"), s.value) for s in pods] == [(cordoned[0]["metadata"]["name"], 1.0)]
