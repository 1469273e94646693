"""``manage.py collect``: watch clusters in one foreground process, without a broker.

    python manage.py collect --kubeconfig ~/.kube/config --context prod --context staging
    python manage.py collect --in-cluster --cluster-name prod
    python manage.py collect --kubeconfig kc --duration 60 --resources pods,events --no-kubelet

Runs the same step function the Celery chain runs (a thread per cluster and resource), and stops cleanly
after ``--duration`` seconds or on Ctrl-C.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from collectors.kube.config import ClusterSource, cluster_name_for, contexts_of, register_cluster
from collectors.kube.resources import ALL_RESOURCES
from collectors.kube.runner import Collector
from collectors.kube.watch import StepResult
from podlife_site import tuning
from timelines.models import cluster_name_validator


class Command(BaseCommand):
    help = "Watch Kubernetes clusters in the foreground (no broker needed) and store what they do."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kubeconfig", help="kubeconfig file to read contexts from")
        parser.add_argument(
            "--context",
            action="append",
            default=[],
            help="kubeconfig context to watch (repeat for several; default: the current context)",
        )
        parser.add_argument("--all-contexts", action="store_true", help="watch every context of --kubeconfig")
        parser.add_argument(
            "--in-cluster",
            action="store_true",
            help="use the pod's service account (running inside a cluster)",
        )
        parser.add_argument(
            "--cluster-name",
            help="name to store the cluster under (default: the context name, or 'in-cluster'); "
            "only with a single cluster",
        )
        parser.add_argument(
            "--duration",
            type=float,
            default=None,
            help="stop after this many seconds (default: run until Ctrl-C)",
        )
        parser.add_argument(
            "--resources",
            default=",".join(ALL_RESOURCES),
            help=f"comma-separated resources to watch (default: {','.join(ALL_RESOURCES)})",
        )
        parser.add_argument("--no-kubelet", action="store_true", help="skip kubelet metrics and log pulls")

    def handle(self, *args: Any, **options: Any) -> None:
        sources = self._sources(options)
        resources = [r.strip() for r in options["resources"].split(",") if r.strip()]
        unknown = [r for r in resources if r not in ALL_RESOURCES]
        if unknown:
            raise CommandError(
                f"unknown resource(s) {', '.join(unknown)}; expected some of {','.join(ALL_RESOURCES)}"
            )
        duration = options["duration"]
        if duration is not None and duration <= 0:
            raise CommandError(f"--duration must be a positive number of seconds, got {duration}")
        for source in sources:
            register_cluster(source)
        verbose = options["verbosity"] >= 2

        def on_step(result: StepResult) -> None:
            if verbose or result.error:
                what = f"error: {result.error}" if result.error else f"{result.stored} stored"
                self.stdout.write(
                    f"{result.cluster}/{result.resource} {result.action} @ {result.resource_version or '-'}: "
                    f"{result.events} events, {result.listed} listed, {what}"
                )

        collector = Collector(
            [s.name for s in sources], resources, kubelet=not options["no_kubelet"], on_step=on_step
        )
        names = ", ".join(s.name for s in sources)
        until = f"for {duration:g} s" if duration else "until Ctrl-C"
        self.stdout.write(f"collecting {', '.join(resources)} from {names} {until}")
        tuning.start(tuning.Role.COLLECTOR)  # this process runs watch steps (podlife_site/tuning.py)
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, lambda *_: collector.cancel.set())
        collector.start()
        try:
            collector.wait(duration)
        finally:
            collector.stop()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        self.stdout.write(f"stopped after {collector.steps} steps")

    def _sources(self, options: dict[str, Any]) -> list[ClusterSource]:
        kubeconfig, contexts = options["kubeconfig"], list(options["context"])
        kubelet = not options["no_kubelet"]
        sources: list[ClusterSource] = []
        if options["in_cluster"]:
            sources.append(
                ClusterSource(
                    options["cluster_name"] or "in-cluster",
                    in_cluster=True,
                    kubelet_metrics=kubelet,
                    kubelet_logs=kubelet,
                )
            )
        if kubeconfig:
            from kubernetes.config.config_exception import ConfigException  # the client loads on demand

            try:
                available, current = contexts_of(kubeconfig)
            except (ConfigException, OSError, yaml.YAMLError) as exc:  # missing, unreadable, not a kubeconfig
                raise CommandError(f"cannot read kubeconfig {kubeconfig!r}: {exc}") from exc
            if options["all_contexts"]:
                contexts = available
            elif not contexts:
                if current is None:
                    raise CommandError(f"kubeconfig {kubeconfig!r} has no current context; pass --context")
                contexts = [current]
            missing = [c for c in contexts if c not in available]
            if missing:
                raise CommandError(
                    f"context(s) {', '.join(missing)} not in {kubeconfig!r} (it has: {', '.join(available)})"
                )
            for ctx in contexts:
                sources.append(ClusterSource(cluster_name_for(ctx), kubeconfig, ctx, False, kubelet, kubelet))
        elif contexts:
            raise CommandError("--context needs --kubeconfig")
        if not sources:
            raise CommandError(
                "nothing to collect: pass --kubeconfig PATH [--context CTX ...] or --in-cluster"
            )
        if options["cluster_name"]:
            if len(sources) != 1:
                raise CommandError("--cluster-name names a single cluster; several were given")
            only = sources[0]
            sources = [
                ClusterSource(
                    options["cluster_name"],
                    only.kubeconfig,
                    only.context,
                    only.in_cluster,
                    only.kubelet_metrics,
                    only.kubelet_logs,
                )
            ]
        names = [s.name for s in sources]
        for name in names:
            try:
                cluster_name_validator(name)
            except ValidationError as exc:
                raise CommandError(f"cluster name {name!r}: {' '.join(exc.messages)}") from None
        if len(set(names)) != len(names):
            raise CommandError(f"two contexts give the same cluster name: {names}")
        return sources
