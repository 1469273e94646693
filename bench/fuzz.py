"""Fuzz run: hostile bodies on every ingest route and the import, for as long as asked (issue #35).

    python bench/fuzz.py [--bodies 100000] [--seconds 3600] [--chunk 200] [--drain-every 5000]

The long run of the property tests in tests/poison/test_fuzz.py, with the same strategies
(tests/poison/hostile.py): batches of valid records (hand-written fixtures) with hostile ones mixed in (NUL, right-to-left
overrides, oversize names, times at and past the calendar's ends, malformed times, deep nesting, values
of the wrong type) posted in-process (Django's test client, the whole middleware stack) to
``/ingest/v1/audit``, ``/ingest/v1/kubelet-logs``, ``/v1/traces`` and ``/import``, in turn, ``--chunk``
bodies a route at a time, until ``--bodies`` bodies were posted or ``--seconds`` passed. It works in a
scratch copy of the configured database (dropped at exit). The derive stage runs as deployed, apart from
the requests (queued with REDIS_URL, else not signalled), every ``--drain-every`` bodies and at the end.

Reported per route: bodies tried, the answers by status, 500s, and mixed batches that lost a valid
record. Then the derive stage drains, and the run reports the keys left stuck (dirty, not failing), the
keys failing or quarantined (visible, with their errors), and whether a cluster no hostile body touched
still derives. Exit status 1 when any body got a 500, lost a valid record, or a key is stuck, failing or
quarantined (what the boundary accepted, the pipeline must derive).
It is not a benchmark (nothing is timed against a baseline): it prints bodies a second for scale only.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, setup_django

os.environ.setdefault("ALLOWED_HOSTS", "testserver")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bodies", type=int, default=100_000, help="stop after this many bodies in all")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--chunk", type=int, default=200, help="bodies a route gets before the next route")
    parser.add_argument(
        "--drain-every", type=int, default=5000, help="run the derive stage after this many bodies"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    setup_django(scratch_database=True)
    from _setup import derive_stage_elsewhere

    # As deployed, the derive stage is another worker's: run inline on every request (the embedded
    # default), each body would re-derive the prod cluster's whole growing history and the run would slow
    # from 80 to 5 bodies a second. It runs here every --drain-every bodies, and at the end.
    derive_stage_elsewhere()
    # Every refused record is logged as a warning by the ingest, and every 4xx by Django: 100,000 hostile
    # bodies would bury the report (a 500 is still logged, as an error).
    for name in ("collectors", "django.request"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return run(args.bodies, args.seconds, args.chunk, args.drain_every)


def run(limit: int, seconds: float | None, chunk: int, drain_every: int) -> int:
    import orjson
    from django.contrib.auth import get_user_model
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client
    from hypothesis import HealthCheck, Phase, given, settings

    from collectors.models import IngestToken
    from tests.poison import hostile
    from timelines import derivation, observation_rows, store
    from timelines.models import Cluster, DirtyKey, Pod, QuarantinedKey

    def client_for(cluster: str) -> tuple[Client, dict[str, str]]:
        _row, secret = IngestToken.issue(store.cluster_for(cluster))
        return Client(raise_request_exception=False), {"HTTP_AUTHORIZATION": f"Bearer {secret}"}

    def keys(cluster: str) -> set[str]:
        return {
            row.dedupe_key
            for row in observation_rows.rows(observation_rows.selection(store.cluster_for(cluster)))
        }

    def holds(cluster: str, expected: set[str]) -> bool:
        """Whether every expected observation is stored (a bounded query: the store grows all run)."""
        found = observation_rows.selection(store.cluster_for(cluster), keys=expected)
        return found.count() == len(expected)

    # What the valid records alone store (a reference cluster each): a mixed batch must store it all.
    ref_client, ref_auth = client_for("reference-audit")
    clean = hostile.dumps(
        {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": hostile.audit_events()}
    )
    ref_client.post("/ingest/v1/audit", clean, content_type="application/json", **ref_auth)
    audit_expected = keys("reference-audit")
    ref_client, ref_auth = client_for("reference-logs")
    clean = b"\n".join(hostile.dumps(r) for r in hostile.kubelet_records())
    ref_client.post(
        "/ingest/v1/kubelet-logs?cluster=reference-logs",
        clean,
        content_type="application/x-ndjson",
        **ref_auth,
    )
    logs_expected = keys("reference-logs")

    from tests.export.conftest import ingest_observations, source_observations
    from tests.export.helpers import export_json

    source = store.cluster_for("src", origin=Cluster.Origin.OFFLINE)
    ingest_observations(source, source_observations())
    bundle = orjson.loads(export_json(source))
    admin = get_user_model().objects.create_superuser("fuzz", password=os.urandom(16).hex())

    client, auth = client_for("prod")
    staff = Client(raise_request_exception=False)
    staff.force_login(admin)
    statuses: dict[str, Counter[int]] = {r: Counter() for r in ("audit", "kubelet-logs", "otlp", "import")}
    lost: Counter[str] = Counter()
    imports = iter(range(10**9))

    def audit(case: tuple[bytes, Any]) -> None:
        answer = client.post("/ingest/v1/audit", case[0], content_type="application/json", **auth)
        statuses["audit"][answer.status_code] += 1
        if answer.status_code == 200 and not holds("prod", audit_expected):
            lost["audit"] += 1

    def logs(case: tuple[bytes, str]) -> None:
        answer = client.post("/ingest/v1/kubelet-logs?cluster=prod", case[0], content_type=case[1], **auth)
        statuses["kubelet-logs"][answer.status_code] += 1
        if answer.status_code == 200 and not holds("prod", logs_expected):
            lost["kubelet-logs"] += 1

    def otlp(case: tuple[bytes, list[str]]) -> None:
        answer = client.post("/v1/traces", case[0], content_type="application/json", **auth)
        statuses["otlp"][answer.status_code] += 1
        if answer.status_code == 200 and not holds("prod", set(case[1])):
            lost["otlp"] += 1

    def imported(body: bytes) -> None:
        upload = SimpleUploadedFile("bundle.json", body, content_type="application/json")
        answer = staff.post("/import", {"bundle": upload, "name": f"copy-{next(imports)}"})
        statuses["import"][answer.status_code] += 1

    routes: list[tuple[str, Any, Any]] = [
        ("audit", audit, hostile.audit_body()),
        ("kubelet-logs", logs, hostile.kubelet_body()),
        ("otlp", otlp, hostile.otlp_body()),
        ("import", imported, hostile.bundle_body(bundle)),
    ]
    started = time.monotonic()
    done = 0
    while done < limit and (seconds is None or time.monotonic() - started < seconds):
        for name, post, strategy in routes:
            n = min(chunk, limit - done) if name != "import" else min(max(1, chunk // 10), limit - done)
            if n <= 0 or (seconds is not None and time.monotonic() - started >= seconds):
                break

            one = given(case=strategy)(_poster(post))
            one = settings(
                max_examples=n,
                deadline=None,
                database=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
            )(one)
            one()
            done += n
            print(f"{done:>8} bodies, {time.monotonic() - started:7.1f} s", file=sys.stderr)
            if done // drain_every > (done - n) // drain_every:
                derivation.drain()
                failing_now = DirtyKey.objects.filter(failures__gt=0).count()
                print(f"{done:>8} bodies derived: {failing_now} keys failing", file=sys.stderr)

    elapsed = time.monotonic() - started
    derivation.drain()
    stuck = DirtyKey.objects.filter(failures=0).count()
    failing = DirtyKey.objects.filter(failures__gt=0).count()
    quarantined = QuarantinedKey.objects.filter(released_at__isnull=True).count()
    from tests.test_derive_stage import pod_history, uid

    store.save_observations("bystander", pod_history(uid(7), "web-7"))
    derivation.drain()
    bystander = Pod.objects.filter(cluster__name="bystander", uid=uid(7)).exists()

    total = sum(sum(c.values()) for c in statuses.values())
    errors = sum(c[500] for c in statuses.values())
    print(f"\nfuzz: {total} hostile bodies in {elapsed:.0f} s ({total / max(elapsed, 1e-9):.0f}/s)")
    print(f"{'route':<14}{'bodies':>9}{'500s':>7}{'lost':>6}  answers")
    for name, counts in statuses.items():
        answers = ", ".join(f"{s}: {n}" for s, n in sorted(counts.items()))
        print(f"{name:<14}{sum(counts.values()):>9}{counts[500]:>7}{lost[name]:>6}  {answers}")
    print(
        f"derive stage: {stuck} stuck keys, {failing} failing (backing off), {quarantined} quarantined; "
        f"a bystander cluster {'derives' if bystander else 'DOES NOT derive'}"
    )
    for row in QuarantinedKey.objects.filter(released_at__isnull=True)[:5]:
        print(f"  quarantined {row.kind} {row.key!a}: {row.error[:160]}")
    ok = (
        errors == 0
        and not sum(lost.values())
        and stuck == 0
        and not failing
        and not quarantined
        and bystander
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _poster(post: Any) -> Any:
    """A test function of one drawn body for ``post`` (a function per route: @given takes no defaults)."""

    def one(case: Any) -> None:
        post(case)

    return one


if __name__ == "__main__":
    sys.exit(main())
