"""First draw of a 10,000-pod namespace day in Chromium, against Plotly drawing the same figure alone.

    python bench/firstdraw.py [--pods 10000] [--runs 5]

Set-up (not timed): a scratch database (``<configured name>_firstdraw``, migrated, dropped at exit; a file
under var/ on SQLite) with ``--pods`` pods of one namespace over a day (``tests/web/bulk.py``: setup →
terminating → cleanup each, a fifth inferred, an event each, a finding on every fiftieth), an ASGI server
(uvicorn, a subprocess) and Chromium (Playwright, headless, software GL). plotly.js is cached and compiled
by a first visit, as for a returning user; the figure podlife hands Plotly is captured on that visit.

Timed, in the same run, alternating, ``--runs`` times each (milliseconds from navigation start to the
first animation frame after Plotly resolved):
* podlife: the namespace page: HTML, the namespace timeline API (queries + JSON), the figure built in the
  page (level of detail, hover texts), Plotly;
* baseline: a static page on a plain HTTP server that fetches that same figure as a JSON file and hands
  it to the same plotly.js bundle (same chart width, same renderer): Plotly's own floor for this chart.

Prints the medians, podlife's breakdown (fetch, figure, Plotly) and the ratio podlife / baseline (goal ≤ 2:
podlife's own work, from the page to the figure, costs no more than Plotly drawing the result).

    python bench/firstdraw.py --page node [--pods 110] [--runs 7]

The node page of a full node (``--pods`` on one node over an hour: what a live watch opens) with the
partial plotly.js bundle the pages load (``dashboard/plotly_bundles.py``) against the same page handed the
full bundle in its place, alternating in the same browser. Both bundles are answered from memory by the
browser's request interception, so neither gets the HTTP or code cache: a first visit, parse and compile
included. A third series is the page as served (HTTP cache and V8 code cache warm, a returning user).
Prints the medians, the ratio partial / full (first visits), and the goal: the first chart as served ≤ 1 s
after navigation.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _setup import ROOT

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
CLUSTER, NAMESPACE = "firstdraw", "big"
GOAL = 2.0  # podlife's own work (page, query, JSON, figure) costs no more than Plotly drawing the result

# Before any page script: keep a copy of the figure podlife hands Plotly.react (capture visit only).
CAPTURE = """
(() => {
  let plotly;
  Object.defineProperty(window, "Plotly", { configurable: true, get: () => plotly, set: (value) => {
    const react = value.react.bind(value);
    value.react = (gd, data, layout, config) => {
      if (!window.__benchFigure) window.__benchFigure = JSON.stringify({ data, layout, config });
      return react(gd, data, layout, config);
    };
    plotly = value;
  } });
})();
"""

STATIC_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>plotly.js alone</title></head>
<body style="margin:0">
<div id="gantt" style="width:{width}px"></div>
<script src="plotly.min.js"></script>
<script>
fetch("figure.json").then((r) => r.json()).then(async (fig) => {{
  const chart = document.getElementById("gantt");
  await Plotly.react(chart, fig.data, fig.layout, fig.config);
  requestAnimationFrame(() => {{ window.__drawn = performance.now(); }});
}});
</script>
</body></html>
"""


def setup(pods: int, *, nodes: int = 100, hours: float = 24.0) -> str:
    """Django on a scratch database holding the namespace; returns that database's DATABASE_URL."""
    if not os.environ.get("DATABASE_URL"):
        scratch = ROOT / "var" / "bench-firstdraw.sqlite3"
        scratch.parent.mkdir(parents=True, exist_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{scratch}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "podlife_site.settings")
    # DEBUG is off by default and then settings want a SECRET_KEY: a throwaway one for this run (the server
    # the benchmark starts inherits it).
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection

    configured = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        scratch_name = str(Path(configured).with_name(Path(configured).stem + "-scratch.sqlite3"))
        url = f"sqlite:///{scratch_name}"
    else:  # not test_<name>: a test run on the same database may be using that one
        scratch_name = f"{configured}_firstdraw"
        parts = urlsplit(os.environ["DATABASE_URL"])
        url = urlunsplit((parts.scheme, parts.netloc, "/" + scratch_name, parts.query, ""))
    connection.settings_dict.setdefault("TEST", {})["NAME"] = scratch_name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    atexit.register(connection.creation.destroy_test_db, configured, verbosity=0)

    from datetime import timedelta

    from django.contrib.auth.models import User

    from tests.web.bulk import make_pods
    from timelines.models import Cluster

    make_pods(
        Cluster.objects.create(name=CLUSTER),
        pods=pods,
        namespace=NAMESPACE,
        nodes=nodes,
        span=timedelta(hours=hours),
    )
    User.objects.create_superuser("bench", "bench@example.invalid", "bench-password-123")
    return url


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
    return str(session.session_key)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_podlife(port: int, database_url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "podlife_site.settings"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "podlife_site.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning", "--lifespan", "off"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    import urllib.request

    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("uvicorn did not start")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def start_static(folder: Path) -> tuple[ThreadingHTTPServer, int]:
    """A plain HTTP server for the baseline page, the figure and the same plotly.js file podlife serves."""
    import plotly

    shutil.copyfile(
        Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js", folder / "plotly.min.js"
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, name="static", daemon=True).start()
    return server, int(server.server_address[1])


NODE_GOAL_MS = 1000.0  # the node page's first chart, after navigation (issue #15)


def node_page(args: argparse.Namespace) -> None:
    """The node page's first draw with the partial bundle vs the full one in its place (module docstring)."""
    started = time.monotonic()
    database_url = setup(args.pods, nodes=1, hours=1.0)
    from dashboard.plotly_bundles import FULL_PATH, PARTIAL_PATH

    print(f"{args.pods} pods on node-0000 over an hour (set up in {time.monotonic() - started:.0f} s)")
    cookie = session_cookie()
    port = free_port()
    server = start_podlife(port, database_url)
    base, page_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/c/{CLUSTER}/nodes/node-0000/"
    bundles = {"partial": PARTIAL_PATH.read_bytes(), "full": FULL_PATH.read_bytes()}
    served = {"bundle": "partial"}
    draws = "window.__podlifeDraws && window.__podlifeDraws.length > 0"
    from playwright.sync_api import Route, sync_playwright

    def answer(route: Route) -> None:
        route.fulfill(
            status=200, content_type="text/javascript; charset=utf-8", body=bundles[served["bundle"]]
        )

    times: dict[str, list[float]] = {"partial": [], "full": [], "as served": []}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
            routed, plain = context.new_page(), context.new_page()
            routed.route("**/vendor/plotly-basic.min.js", answer)
            plain.goto(page_url)  # warms the HTTP and code caches for the as-served series
            plain.wait_for_function(draws, timeout=60_000)
            rows = plain.get_attribute("#gantt", "data-rows")
            renderer = plain.get_attribute("#gantt", "data-renderer")
            print(f"the node page draws {rows} rows ({renderer})")
            for _ in range(args.runs):
                for name in ("partial", "full", "as served"):
                    page = plain if name == "as served" else routed
                    served["bundle"] = "full" if name == "full" else "partial"
                    page.goto(page_url)
                    page.wait_for_function(draws, timeout=60_000)
                    assert page.get_attribute("#gantt", "data-rows") == rows
                    times[name].append(page.evaluate("window.__podlifeDraws[0].t - performance.timeOrigin"))
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    sizes = {name: len(code) / 1e6 for name, code in bundles.items()}
    print(f"\nnode page first chart, median of {args.runs} (ms from navigation start)")
    for name, values in times.items():
        size = f"{sizes['full' if name == 'full' else 'partial']:.1f} MB bundle"
        print(
            f"  {name:10} {statistics.median(values):7.0f}   ({size}; runs: {', '.join(f'{v:.0f}' for v in values)})"
        )
    partial, full = statistics.median(times["partial"]), statistics.median(times["full"])
    print(f"\nratio partial / full bundle = {partial / full:.2f}")
    served_ms = statistics.median(times["as served"])
    verdict = "met" if served_ms <= NODE_GOAL_MS else "NOT met"
    print(
        f"first chart as served ≤ {NODE_GOAL_MS:.0f} ms: {verdict} ({served_ms:.0f} ms; first visit {partial:.0f} ms)"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--page", choices=("namespace", "node"), default="namespace")
    parser.add_argument("--pods", type=int, default=None, help="10,000 (namespace) or 110 (node)")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is absent (apt-get install chromium)")
    if args.page == "node":
        args.pods = args.pods or 110
        node_page(args)
        return
    args.pods = args.pods or 10_000
    started = time.monotonic()
    database_url = setup(args.pods)
    from django.db import connection

    print(f"database {connection.vendor}: {args.pods:,} pods in namespace {NAMESPACE} over a day "
          f"(set up in {time.monotonic() - started:.0f} s)")  # fmt: skip
    cookie = session_cookie()
    port = free_port()
    server = start_podlife(port, database_url)
    folder = Path(tempfile.mkdtemp(prefix="podlife-firstdraw-"))
    static, static_port = start_static(folder)
    base, page_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/c/{CLUSTER}/ns/{NAMESPACE}/"
    draws = "window.__podlifeDraws && window.__podlifeDraws.length > 0"
    # Playwright's sync API keeps an event loop in this thread; nothing below touches the ORM.
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            # bypass_csp: wait_for_function evaluates its string inside the page, which the site's CSP
            # refuses; this measures drawing, not the policy.
            context = browser.new_context(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
            # Capture visit (not timed): compiles plotly.js into the cache and records the figure.
            capture = context.new_page()
            capture.add_init_script(CAPTURE)
            capture.goto(page_url)
            capture.wait_for_function(draws, timeout=120_000)
            rows = capture.get_attribute("#gantt", "data-rows")
            renderer = capture.get_attribute("#gantt", "data-renderer")
            width = capture.evaluate("document.getElementById('gantt').clientWidth")
            (folder / "figure.json").write_text(capture.evaluate("window.__benchFigure"))
            capture.close()
            (folder / "index.html").write_text(STATIC_PAGE.format(width=width))
            figure_mb = (folder / "figure.json").stat().st_size / 1e6
            print(
                f"podlife draws {rows} rows ({renderer}, {width} px wide); the figure is {figure_mb:.1f} MB of JSON"
            )

            page = context.new_page()
            page.goto(f"http://127.0.0.1:{static_port}/index.html")  # plotly.js cached from here too
            page.wait_for_function("window.__drawn !== undefined", timeout=120_000)
            ours, floor, parts = [], [], []
            for _ in range(args.runs):
                page.goto(page_url)
                page.wait_for_function(draws, timeout=120_000)
                ours.append(page.evaluate("window.__podlifeDraws[0].t - performance.timeOrigin"))
                parts.append(page.evaluate("window.__podlifeDraws[0]"))
                assert page.get_attribute("#gantt", "data-rows") == rows
                page.goto(f"http://127.0.0.1:{static_port}/index.html")
                page.wait_for_function("window.__drawn !== undefined", timeout=120_000)
                floor.append(page.evaluate("window.__drawn"))
            browser.close()
    finally:
        static.shutdown()
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)

    def med(key_a: str, key_b: str) -> float:
        return statistics.median(p[key_b] - p[key_a] for p in parts)

    ours_ms, floor_ms = statistics.median(ours), statistics.median(floor)
    print(f"\nfirst draw, median of {args.runs} (ms from navigation start)")
    print(f"  podlife namespace page   {ours_ms:7.0f}   (runs: {', '.join(f'{v:.0f}' for v in ours)})")
    before = statistics.median(p["fetch0"] for p in parts)
    after = statistics.median(o - p["plotted"] for o, p in zip(ours, parts, strict=True))
    print(f"    of which: page until the API fetch {before:.0f}, API fetch {med('fetch0', 'fetched'):.0f}, "
          f"figure {med('build0', 'built'):.0f}, Plotly {med('built', 'plotted'):.0f}, "
          f"then the pod table and the frame {after:.0f}")  # fmt: skip
    print(f"  plotly.js alone          {floor_ms:7.0f}   (runs: {', '.join(f'{v:.0f}' for v in floor)})")
    ratio = ours_ms / floor_ms
    print(
        f"\nratio podlife / plotly.js alone = {ratio:.2f}  (goal ≤ {GOAL:g}: {'met' if ratio <= GOAL else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
