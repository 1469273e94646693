"""Live push and node timeline benchmarks, each against a baseline measured in the same run.

    REDIS_URL=redis://127.0.0.1:6379/15 python bench/live.py [--pods 110] [--events 100]

1. Raw Redis pub/sub one-way latency (publish → subscriber, same payload size as a delta): the baseline.
2. Server-side push: ``publish_timelines`` → a websocket client of the node consumer, through the Redis
   pub/sub channel layer and a uvicorn server in a subprocess. Goal: p50 ≤ 4 × raw pub/sub.
3. Event → pixel in Chromium on the node page (110 pods): from ``publish_timelines`` to the page's own
   record of the redrawn chart (after Plotly resolved and the next animation frame), and from
   ``store.save_observations`` + the derive stage (``tests.flow.ingest``) of a new pod (store, derive, push) to its row drawn.
   Goals: p50 ≤ 300 ms, p99 ≤ 1 s.
4. The node timeline endpoint (Django view in-process: auth, grants, queries, JSON) against raw SQL
   fetching the same rows. Goal: ≤ 2 ×.

Uses DATABASE_URL when set, else a scratch SQLite file under var/. Needs Redis and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT, setup_django

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
CLUSTER, NODE = "bench", "bench-node"
# Playwright's sync API runs an event loop in the main thread, where async_to_sync (the channel layer's
# group_send inside publish_timelines) refuses to run: publish and ingest from a worker thread instead.
_worker = ThreadPoolExecutor(max_workers=1)


def off_loop(fn, *args):  # type: ignore[no-untyped-def]
    return _worker.submit(fn, *args).result()


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def summary(name: str, ms: list[float]) -> tuple[float, float]:
    p50, p99 = pct(ms, 50), pct(ms, 99)
    print(f"  {name:<44} n={len(ms):<4} p50 {p50:8.2f} ms   p99 {p99:8.2f} ms")
    return p50, p99


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- 1. raw pub/sub ------------------------------------------------------------------------------------------
def raw_pubsub(redis_url: str, payload_size: int, n: int) -> list[float]:
    import redis

    sub_client, pub = redis.Redis.from_url(redis_url), redis.Redis.from_url(redis_url)
    pubsub = sub_client.pubsub()
    pubsub.subscribe("podlife-bench-raw")
    pubsub.get_message(timeout=1)  # the subscribe confirmation
    filler = "x" * payload_size
    latencies: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        pub.publish("podlife-bench-raw", filler)
        msg = None
        while msg is None:
            msg = pubsub.get_message(timeout=1)
        latencies.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.01)
    pubsub.close()
    return latencies


# --- set-up ----------------------------------------------------------------------------------------------------
def seed(pods: int) -> None:
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from tests.flow import ingest as ingest_observations
    from tests.web.factories import started_pod
    from timelines.models import Cluster

    call_command("migrate", verbosity=0)
    Cluster.objects.filter(name=CLUSTER).delete()
    for M in _derived_models():
        M.objects.filter(cluster__name=CLUSTER).delete()
    for i in range(pods):
        ingest_observations(
            CLUSTER, started_pod(f"bench-{i:04d}", f"web-{i:04d}", node=NODE, shift=timedelta(seconds=i))
        )
    User.objects.filter(username="bench").delete()
    User.objects.create_superuser("bench", "bench@example.invalid", "bench-password-123")


def _derived_models() -> list:
    from timelines.models import Finding, Interval, Marker

    return [Interval, Marker, Finding]


def session_cookie() -> str:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore

    user = User.objects.get(username="bench")
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.save()
    return session.session_key


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "podlife_site.settings", "LOG_LEVEL": "WARNING"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "podlife_site.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--ws", "websockets-sansio", "--lifespan", "off"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    import urllib.request

    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("uvicorn did not start")


def timelines_for(pods: int) -> list:
    from timelines import queries
    from timelines.models import Cluster, Pod

    cluster = Cluster.objects.get(name=CLUSTER)
    return [
        queries.pod_timeline(cluster, p) for p in Pod.objects.filter(cluster=cluster).order_by("uid")[:pods]
    ]


# --- 2. server-side push ---------------------------------------------------------------------------------------
def server_push(port: int, cookie: str, n: int) -> list[float]:
    from websockets.sync.client import connect

    from timelines.live import publish_timelines

    tls = timelines_for(20)
    latencies: list[float] = []
    url = f"ws://127.0.0.1:{port}/ws/v1/nodes/{CLUSTER}/{NODE}/"
    headers = {"Origin": f"http://127.0.0.1:{port}", "Cookie": f"sessionid={cookie}"}
    with connect(url, additional_headers=headers) as ws:
        assert '"hello"' in ws.recv(timeout=5)
        time.sleep(0.3)
        for i in range(n):
            t0 = time.perf_counter()
            publish_timelines(CLUSTER, [tls[i % len(tls)]])
            frame = ws.recv(timeout=5)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert '"deltas"' in frame or '"refetch"' in frame, frame[:200]
            time.sleep(0.12)  # past the 10-frames-a-second coalescing window: measure delivery, not batching
    return latencies


def layer_push(port: int, cookie: str, n: int) -> list[float]:
    """The consumer path alone: one long-lived publisher (as a Celery worker or the collector loop would
    hold) doing ``group_send`` of a delta → the websocket frame."""
    import asyncio
    import itertools

    from channels.layers import get_channel_layer
    from websockets.asyncio.client import connect

    from timelines.live import DELTA_SCHEMA, group_name

    sequences = itertools.count(1)  # this publisher alone numbers the bench's group here

    body = timelines_for(1)[0].to_json(CLUSTER)
    group = group_name("node", CLUSTER, NODE)
    url = f"ws://127.0.0.1:{port}/ws/v1/nodes/{CLUSTER}/{NODE}/"
    headers = {"Origin": f"http://127.0.0.1:{port}", "Cookie": f"sessionid={cookie}"}

    async def run() -> list[float]:
        layer = get_channel_layer()
        out: list[float] = []
        async with connect(url, additional_headers=headers) as ws:
            assert '"hello"' in await ws.recv()
            await asyncio.sleep(0.3)
            for _ in range(n):
                message = {"type": "timeline.delta", "schema": DELTA_SCHEMA, "group": group,
                           "seq": next(sequences), "timelines": [body]}  # fmt: skip
                t0 = time.perf_counter()
                await layer.group_send(group, message)
                frame = await asyncio.wait_for(ws.recv(), 5)
                out.append((time.perf_counter() - t0) * 1000)
                assert '"deltas"' in frame or '"refetch"' in frame
                await asyncio.sleep(0.12)
        return out

    return asyncio.run(run())


# --- 3. event → pixel ---------------------------------------------------------------------------------------------
def event_to_pixel(port: int, cookie: str, n: int, new_pods: int) -> tuple[list[float], list[float]]:
    from playwright.sync_api import sync_playwright

    from tests.flow import ingest as ingest_observations
    from tests.web.factories import started_pod
    from timelines.live import publish_timelines

    tls = timelines_for(110)
    publish_ms: list[float] = []
    ingest_ms: list[float] = []
    base = f"http://127.0.0.1:{port}"
    # Playwright's sync API runs an event loop in this thread; the ORM calls below are plain sync code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        # bypass_csp: wait_for_function evaluates its string inside the page, which the site's CSP refuses
        # ('unsafe-eval'); the benchmark measures delivery, not the policy (tests/security/test_csp.py does).
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
        page = context.new_page()
        page.goto(f"{base}/c/{CLUSTER}/nodes/{NODE}/")
        page.wait_for_selector("#live-state[data-state=live]", timeout=20_000)
        page.wait_for_function("window.__podlifeDraws.length > 0")
        rows = page.get_attribute("#gantt", "data-rows")
        print(f"  node page: {rows} rows, renderer {page.get_attribute('#gantt', 'data-renderer')}")
        for i in range(n):
            before = page.evaluate("window.__podlifeDraws.length")
            t0 = time.time() * 1000
            off_loop(publish_timelines, CLUSTER, [tls[i % len(tls)]])
            page.wait_for_function(f"window.__podlifeDraws.length > {before}", timeout=10_000)
            publish_ms.append(page.evaluate(f"window.__podlifeDraws[{before}].t") - t0)
            time.sleep(0.15)
        for i in range(new_pods):
            uid = f"bench-new-{time.time_ns()}-{i}"
            obs = started_pod(uid, f"new-{i:03d}", node=NODE, shift=timedelta(seconds=200 + i))
            t0 = time.time() * 1000
            off_loop(ingest_observations, CLUSTER, obs)
            page.wait_for_selector(f'#pods-body tr[data-uid="{uid}"]', timeout=10_000)
            drawn = page.evaluate("window.__podlifeDraws[window.__podlifeDraws.length - 1].t")
            ingest_ms.append(drawn - t0)
            time.sleep(0.15)
        shots = ROOT / "var" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "bench-node.png"))
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return publish_ms, ingest_ms


# --- 4. endpoint vs raw SQL -------------------------------------------------------------------------------------
def endpoint_vs_sql(repeats: int) -> tuple[float, float, int]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from timelines.models import Cluster

    cluster = Cluster.objects.get(name=CLUSTER)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(User.objects.get(username="bench"))
    url = (
        f"/api/v1/clusters/{CLUSTER}/nodes/{NODE}/timeline?from=2024-06-07T00:00:00Z&to=2024-06-08T00:00:00Z"
    )
    lo, hi = "2024-06-07 00:00:00+00:00", "2024-06-08 00:00:00+00:00"
    if connection.vendor == "sqlite":
        lo, hi = "2024-06-07 00:00:00", "2024-06-08 00:00:00"
    p = "%s"
    sqls = [
        (f'SELECT pod_uid, lane, state, start, "end", source, evidence FROM timelines_interval WHERE cluster_id = {p} '
         f'AND node = {p} AND pod_uid IS NOT NULL AND lane = {p} AND start < {p} AND ("end" IS NULL OR "end" >= {p}) '
         "ORDER BY pod_uid, start, lane", [cluster.id, NODE, "worker", hi, lo]),
        (f"SELECT pod_uid, at, kind, reason, message, evidence FROM timelines_marker WHERE cluster_id = {p} AND node = {p} "
         f"AND pod_uid IS NOT NULL AND at >= {p} AND at < {p} ORDER BY at", [cluster.id, NODE, lo, hi]),
        (f'SELECT pod_uid, kind, severity, message, start, "end", evidence FROM timelines_finding WHERE cluster_id = {p} '
         f'AND node = {p} AND pod_uid IS NOT NULL AND start < {p} AND ("end" IS NULL OR "end" >= {p}) ORDER BY start',
         [cluster.id, NODE, hi, lo]),
        (f"SELECT uid, namespace, name, node, owner_kind, owner_name, phase, created_at, deleted_at FROM timelines_pod "
         f"WHERE cluster_id = {p} AND node = {p}", [cluster.id, NODE]),
        # Freshness (timelines/freshness.py): the node's newest kubelet evidence, the pods' last_seen.
        (f"SELECT node, MAX(observed_at) FROM timelines_observation WHERE cluster_id = {p} AND node = {p} "
         f"AND kind IN ('worker', 'span', 'kubelet_marker', 'kubelet_process') AND observed_at >= {p} GROUP BY node",
         [cluster.id, NODE, "2024-06-06 00:00:00+00:00" if connection.vendor != "sqlite" else "2024-06-06 00:00:00"]),
        (f"SELECT uid, last_seen FROM timelines_pod WHERE cluster_id = {p} AND node = {p}", [cluster.id, NODE]),
    ]  # fmt: skip

    def raw() -> int:
        rows = 0
        with connection.cursor() as cursor:
            for sql, params in sqls:
                cursor.execute(sql, params)
                rows += len(cursor.fetchall())
        return rows

    def endpoint() -> int:
        response = client.get(url)
        assert response.status_code == 200, response.content[:300]
        return len(response.content)

    raw(), endpoint()  # warm
    raw_t, end_t = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = raw()
        raw_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        endpoint()
        end_t.append(time.perf_counter() - t0)
    return statistics.median(end_t) * 1000, statistics.median(raw_t) * 1000, rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--new-pods", type=int, default=20)
    args = parser.parse_args()
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        raise SystemExit(
            "set REDIS_URL (e.g. redis://127.0.0.1:6379/15): the bench measures the Redis pub/sub layer"
        )
    if not os.environ.get("DATABASE_URL"):
        scratch = ROOT / "var" / "bench-live.sqlite3"
        scratch.parent.mkdir(parents=True, exist_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{scratch}"
    setup_django()
    from django.db import connection

    print(f"database {connection.vendor}, Redis {redis_url}, {args.pods} pods on {NODE}")
    seed(args.pods)
    cookie = session_cookie()
    port = free_port()
    server = start_server(port)
    try:
        import orjson

        payload = len(orjson.dumps(timelines_for(1)[0].to_json(CLUSTER)))
        print(f"\n1. raw Redis pub/sub, one way ({payload} byte payload)")
        raw_p50, raw_p99 = summary("publish → subscriber", raw_pubsub(redis_url, payload, 300))
        print("\n2. server-side push (channel layer → consumer → websocket)")
        push_p50, _ = summary("group_send → websocket frame", layer_push(port, cookie, args.events))
        pub_p50, _ = summary("publish_timelines → websocket frame", server_push(port, cookie, args.events))
        print("\n3. event → pixel in Chromium, node page")
        pub_ms, ingest_ms = event_to_pixel(port, cookie, args.events, args.new_pods)
        pix_p50, pix_p99 = summary("publish_timelines → chart redrawn", pub_ms)
        ing_p50, ing_p99 = summary("store + derive stage (new pod) → row drawn", ingest_ms)
        print("\n4. node timeline endpoint vs raw SQL (same rows, median of 30)")
        end_ms, raw_ms, rows = endpoint_vs_sql(30)
        print(f"  endpoint {end_ms:.2f} ms, raw SQL {raw_ms:.2f} ms ({rows} rows)")
        print("\nratios (goal)")
        print(f"  server push p50 / raw pub/sub p50 = {push_p50 / raw_p50:6.2f}  (≤ 4)")
        print(
            f"  publish_timelines push p50 / raw pub/sub p50 = {pub_p50 / raw_p50:6.2f}  (publisher included)"
        )
        print(f"  event → pixel p50 = {pix_p50:.0f} ms (≤ 300), p99 = {pix_p99:.0f} ms (≤ 1000)")
        print(f"  endpoint / raw SQL = {end_ms / raw_ms:6.2f}  (≤ 2)")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
