"""The HTML bundle in a real Chromium with the network cut off: it renders with the pages' own gantt.js,
asks for nothing, and a hostile pod name stays text."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import orjson
import pytest

from dashboard.export import Scope, export_incident
from dashboard.export import html as html_export
from dashboard.export.html import STATIC
from tests.export.conftest import HOSTILE, SINCE, UNTIL

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"needs Chromium at {CHROMIUM}"),
]


@pytest.fixture
def html_file(source_cluster, tmp_path) -> Path:
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.one("node", "node-a"), SINCE, UNTIL, "html", buf)
    path = tmp_path / "incident.html"
    path.write_bytes(buf.getvalue())
    return path


@contextmanager
def _open_offline(sync_api, path: Path, *, timezone_id: str | None = None):  # type: ignore[no-untyped-def]
    """Chromium on ``path`` (drawn) with every request but the file itself blocked and recorded: yields the
    browser, the page, the attempted requests, the dialogs, and the console errors and page errors."""
    file_url = path.as_uri()
    attempted: list[str] = []
    dialogs: list[str] = []
    errors: list[str] = []

    def route(r):  # type: ignore[no-untyped-def]
        if r.request.url.split("?")[0] == file_url:
            r.continue_()
        else:
            attempted.append(r.request.url)
            r.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_context(offline=True, timezone_id=timezone_id).new_page()
            page.route("**/*", route)
            page.on(
                "request",
                lambda req: None if req.url.split("?")[0] == file_url else attempted.append(req.url),
            )
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(file_url, wait_until="load")
            try:
                page.wait_for_selector("#gantt[data-drawn] .main-svg", timeout=20_000)
            except sync_api.TimeoutError:
                raise AssertionError(f"the chart was not drawn; errors: {errors}") from None
            yield browser, page, attempted, dialogs, errors
        finally:
            browser.close()


def test_html_bundle_renders_offline_with_no_request_and_no_script_injection(html_file):
    """GIVEN the HTML bundle of node-a (one pod is named like an <img onerror> injection)
    WHEN Chromium opens it from disk with every request but the file itself blocked
    THEN no other request is attempted, no dialog opens, the Gantt has a bar for every worker interval,
    and the hostile name shows as plain text in the axis and the summary table."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with _open_offline(sync_api, html_file) as (browser, page, attempted, dialogs, errors):
        page.wait_for_timeout(300)
        data = page.evaluate("JSON.parse(document.getElementById('incident-data').textContent)")
        # Bars of the intervals (the finding bands are a bar trace of their own, named "finding").
        drawn = page.evaluate(
            "document.getElementById('gantt').data.filter((t) => t.type === 'bar' && t.name !== 'finding')"
            ".reduce((n, t) => n + t.y.length, 0)"
        )
        bars = page.locator("#gantt g.trace.bars g.point").count()
        ticks = page.locator("#gantt g.ytick text").all_text_contents()
        summary = page.locator("#summary td").all_text_contents()
        injected = page.locator("img").count()
        rows = page.locator("#findings tr").count()
        modebar = page.locator("#gantt .modebar-btn").count()
        cloud = page.locator('#gantt .modebar-btn[data-title^="Share chart"]').count()
        apology = page.locator("#no-chart").count()
    worker = sum(1 for pod in data["pods"] for iv in pod["intervals"] if iv[0] == "worker")
    assert attempted == []
    assert dialogs == []
    assert errors == []
    assert worker > 15
    assert drawn == worker and bars >= worker
    assert len(data["pods"]) == 6 and len(ticks) == 6
    assert any(HOSTILE in t for t in ticks), ticks
    assert f"shop/{HOSTILE}" in summary
    assert injected == 0
    assert rows == len(data["findings"]) + 1  # header row
    assert modebar > 0 and cloud == 0  # no button sends the incident to Plotly's cloud
    assert apology == 0  # the "could not draw" note is for browsers that cannot run the module


def test_html_bundle_inlines_plotly_and_escapes_the_data_block(html_file):
    text = html_file.read_text()
    assert "<script src" not in text and '<link rel="stylesheet"' not in text
    assert "plotly.js (basic - minified) v" in text  # the partial library is inside the file
    block = text.split('<script type="application/json" id="incident-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in block and ">" not in block  # a name cannot close the block
    assert "\\u003cimg src=x onerror=alert(1)\\u003e" in block
    assert "connect-src 'none'" in text


def test_one_pod_html_export_is_at_most_one_and_a_half_megabytes(source_cluster):
    """GIVEN the scenario's pod with its whole history WHEN it is exported alone as HTML THEN the file,
    which inlines the partial plotly.js bundle and the pages' gantt.js and common.js, is at most 1.5 MB
    (the full bundle alone is 4.8 MB)."""
    from dashboard.plotly_bundles import FULL_PATH, PARTIAL_PATH
    from tests.export.conftest import uid_for

    uid = uid_for("web-c")  # the crash loop: the scenario pod with the most history
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.pods([uid]), SINCE, UNTIL, "html", buf)
    html = buf.getvalue()
    assert PARTIAL_PATH.read_bytes() in html and FULL_PATH.stat().st_size > 1_500_000
    assert (STATIC / "gantt.js").read_bytes() in html
    assert base64.b64encode((STATIC / "common.js").read_bytes()) in html
    assert b"web-c" in html and b"web-a" not in html
    print(f"one-pod HTML export: {len(html):,} bytes")
    assert len(html) <= 1_500_000, f"{len(html):,} bytes"


def _inline_scripts(text: str) -> list[tuple[str, str]]:
    """(the opening tag, the content) of every script element of the page."""
    return re.findall(r"(<script[^>]*>)(.*?)</script>", text, re.S)


def _sha256(code: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"


def test_html_export_draws_with_the_pages_gantt_js_as_static_serves_it(
    html_file, source_cluster, tmp_path, monkeypatch
):
    """GIVEN the pages' renderer static/podlife/gantt.js and its helpers common.js
    WHEN the HTML bundle is exported
    THEN its one module script begins with gantt.js byte for byte, the import map resolves gantt.js's
    ./common.js to common.js byte for byte (with its SRI hash), the CSP allows exactly the page's scripts
    and common.js by hash (no inline wildcard, no data: or blob: source); and a gantt.js changed in static/
    is what the next export holds (read at export time: one renderer, not a copy), while a common.js that
    imports another module is refused (it could not resolve from a data: URL)."""
    text = html_file.read_text()
    gantt, common = (STATIC / "gantt.js").read_text(), (STATIC / "common.js").read_bytes()
    scripts = _inline_scripts(text)
    modules = [code for tag, code in scripts if 'type="module"' in tag]
    assert len(modules) == 1 and modules[0].startswith(gantt + "\n")
    [importmap] = [orjson.loads(code) for tag, code in scripts if 'type="importmap"' in tag]
    url = importmap["imports"]["./common.js"]
    assert base64.b64decode(url.split(",", 1)[1]) == common
    assert importmap["integrity"][url] == _sha256(common.decode()).strip("'")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text).group(1)
    script_src = next(d for d in csp.split("; ") if d.startswith("script-src ")).split()[1:]
    executed = [code for tag, code in scripts if 'type="application/json"' not in tag]
    assert len(executed) == 3  # the import map, plotly.js, the module
    assert sorted(script_src) == sorted([_sha256(code) for code in executed] + [_sha256(common.decode())])

    changed = tmp_path / "static"
    changed.mkdir()
    for name in ("gantt.js", "common.js"):
        (changed / name).write_bytes((STATIC / name).read_bytes())
    (changed / "gantt.js").write_text(gantt + "// changed in static/ after the last export\n")
    monkeypatch.setattr(html_export, "STATIC", changed)
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.one("node", "node-a"), SINCE, UNTIL, "html", buf)
    assert b"// changed in static/ after the last export\n" in buf.getvalue()
    # A module gantt.js imports may not import another: from a data: URL that could not resolve offline.
    (changed / "common.js").write_bytes(common + b'export { other } from "./other.js";\n')
    with pytest.raises(RuntimeError, match="common.js imports another module"):
        export_incident(source_cluster, Scope.one("node", "node-a"), SINCE, UNTIL, "html", io.BytesIO())


def _duration_seconds(line: str) -> float | None:
    """A duration as a person reads it ("450.000 ms", "2.900000 s", "4 min 40.000 s", "1h 2m") in
    seconds, or None when the line is not one."""
    units = {"d": 86400, "h": 3600, "min": 60, "m": 60, "s": 1, "ms": 1e-3, "µs": 1e-6, "us": 1e-6}
    tokens = re.findall(r"(\d+(?:\.\d+)?)\s*(ms|µs|us|min|h|d|s|m)(?![a-z])", line)
    if not tokens or re.sub(r"(\d+(?:\.\d+)?)\s*(ms|µs|us|min|h|d|s|m)(?![a-z])", "", line).strip():
        return None
    return sum(float(n) * units[u] for n, u in tokens)


def _wall(text: str) -> datetime:
    """A wall time as the page shows it, its fraction trimmed to its precision ("2024-06-07 06:54:41.100",
    "2024-06-07 06:54:44"), in no zone (compared as such)."""
    text = text.strip()
    shape = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return datetime.strptime(text, shape)  # noqa: DTZ007 (a wall time: no zone)


GEOMETRY = """() => {
  // Bars as drawn on screen, clipped to the plot area (an open interval runs far past its right edge).
  const plot = document.querySelector("#gantt .nsewdrag").getBoundingClientRect();
  const ticks = [...document.querySelectorAll("#gantt g.ytick text")].map((e) => {
    const b = e.getBoundingClientRect();
    return { text: e.textContent, y: b.y + b.height / 2 };
  });
  const bars = [];
  for (const e of document.querySelectorAll("#gantt g.trace.bars g.point path")) {
    const b = e.getBoundingClientRect();
    const x0 = Math.max(b.x, plot.x), x1 = Math.min(b.x + b.width, plot.x + plot.width);
    if (x1 > x0 && b.height > 0) bars.push({ x0, x1, y: b.y + b.height / 2, h: b.height });
  }
  return { ticks, bars };
}"""


def test_html_export_rows_in_time_order_labels_beside_bars_hover_with_duration_in_the_picked_zone(html_file):
    """GIVEN the HTML bundle of node-a, where the crash-looping web-c started before the others
    WHEN Chromium (its zone Asia/Kolkata, UTC+05:30) opens it from disk offline, hovers the widest bar and
    switches the time zone
    THEN rows run in the order the pods started (web-c first, not by name), each row's label sits level
    with its bars (not above or below them), the hover gives the bar's start and end as wall times and its
    duration as a person reads it (equal to end - start), the switch turns every time to local time
    (+05:30); nothing is requested, nothing is logged as an error. A ?tz=Area/City in the file's URL
    opens in that zone, as on the pages."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with _open_offline(sync_api, html_file, timezone_id="Asia/Kolkata") as (
        browser,
        page,
        attempted,
        dialogs,
        errors,
    ):
        data = page.evaluate("JSON.parse(document.getElementById('incident-data').textContent)")
        geometry = page.evaluate(GEOMETRY)
        pitch = abs(geometry["ticks"][1]["y"] - geometry["ticks"][0]["y"])
        # The widest bar of a closed interval (the finding bands behind are taller than a row's bars; an
        # open interval's hover says "open" for its end and duration).
        candidates = sorted(
            (b for b in geometry["bars"] if b["h"] < 0.8 * pitch), key=lambda b: b["x0"] - b["x1"]
        )
        lines: list[str] = []

        def closed(
            lines: list[str],
        ) -> bool:  # a worker bar's hover ("worker: running (observed)"), not a marker's
            return any(line.startswith("worker:") for line in lines) and any(
                "→" in line and not line.rstrip().endswith("open") for line in lines
            )

        for bar in candidates:
            for fraction in (0.5, 0.3, 0.7):  # a marker on the bar can take the hover: try along it
                page.mouse.move(bar["x0"] + (bar["x1"] - bar["x0"]) * fraction, bar["y"])
                page.wait_for_timeout(100)
                lines = page.locator("#gantt .hoverlayer .hovertext text tspan.line").all_text_contents()
                if closed(lines):
                    break
            if closed(lines):
                break
        since_utc = page.locator("header span[data-time]").first.text_content()
        page.click("#tz-toggle")
        page.wait_for_timeout(200)
        since_local = page.locator("header span[data-time]").first.text_content()
        toggle = page.locator("#tz-toggle").text_content()
        page.goto(html_file.as_uri() + "?tz=America/New_York", wait_until="load")
        page.wait_for_selector("#gantt[data-drawn] .main-svg", timeout=20_000)
        since_new_york = page.locator("header span[data-time]").first.text_content()
    assert attempted == [] and dialogs == [] and errors == []

    def first_start(pod: dict) -> datetime:
        drawn = [iv for iv in pod["intervals"] if iv[0] == "worker"] or pod["intervals"]
        return min(datetime.fromisoformat(iv[2]) for iv in drawn)

    pods = sorted(data["pods"], key=lambda pod: (first_start(pod), f"{pod['namespace']}/{pod['name']}"))
    expected = [f"{pod['namespace']}/{pod['name']}" for pod in pods]
    ticks = sorted(geometry["ticks"], key=lambda t: t["y"])
    assert [t["text"] for t in ticks] == expected
    assert expected[0] == "shop/web-c" and sorted(expected) != expected  # time order is not name order
    # Every bar is level with a row label (a bar below its label would be half a row off).
    for b in geometry["bars"]:
        assert min(abs(b["y"] - t["y"]) for t in ticks) < 0.15 * pitch, (b, ticks)

    span = next(line for line in lines if "→" in line)
    start, end = (_wall(x) for x in span.split("→"))
    durations = [d for d in map(_duration_seconds, lines) if d is not None]
    assert len(durations) == 1, lines
    assert abs(durations[0] - (end - start).total_seconds()) < 1e-3, (lines, start, end)
    utc = {(iv[2], iv[3]) for pod in data["pods"] for iv in pod["intervals"]}
    as_iso = (
        start.isoformat(timespec="microseconds") + "+00:00",
        end.isoformat(timespec="microseconds") + "+00:00",
    )
    assert as_iso in utc, (span, sorted(utc)[:5])  # the hover names a real interval, in UTC to begin with

    since = datetime.fromisoformat(data["meta"]["since"])
    assert _wall(since_utc) == since.replace(tzinfo=None)
    assert _wall(since_local) == (since + timedelta(hours=5, minutes=30)).replace(tzinfo=None)
    assert "local" in toggle and "+05:30" in toggle
    assert _wall(since_new_york) == since.astimezone(ZoneInfo("America/New_York")).replace(tzinfo=None)


def test_one_pod_html_export_is_titled_by_the_pod(source_cluster, tmp_path):
    """GIVEN the HTML bundle of one pod (web-c: a crash loop, with findings and events)
    WHEN Chromium opens it offline
    THEN the page and its heading are titled by the pod's namespace/name, and it is drawn as its pod page
    draws it: a row a lane, then a row of its events and kubelet lines, each lane's bars on its own row;
    in a browser that runs no script the page says why it shows no chart."""
    from tests.export.conftest import uid_for

    sync_api = pytest.importorskip("playwright.sync_api")
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.one("pods", uid_for("web-c")), SINCE, UNTIL, "html", buf)
    path = tmp_path / "pod.html"
    path.write_bytes(buf.getvalue())
    with _open_offline(sync_api, path) as (browser, page, attempted, dialogs, errors):
        heading = page.locator("#title").text_content()
        title = page.title()
        ticks = page.locator("#gantt g.ytick text").all_text_contents()
        lanes = page.evaluate(
            """() => { const out = {};
              for (const t of document.getElementById("gantt").data)
                for (let i = 0; i < (t.customdata || []).length; i++)
                  if (t.type === "bar" && t.customdata[i][2] !== "pending") (out[t.y[i]] ||= []).push(t.customdata[i][2]);
              return out; }"""
        )
        lanes = {int(y): set(names) for y, names in lanes.items()}
        # Where the module cannot run (here: no script at all), the page says why there is no chart.
        still = browser.new_context(offline=True, java_script_enabled=False).new_page()
        still.goto(path.as_uri(), wait_until="load")
        apology = still.locator("#no-chart").text_content()
    assert attempted == [] and errors == []
    assert "import maps" in apology and "JSON bundle" in apology
    assert heading == "Pod shop/web-c"
    assert title.startswith("Pod shop/web-c ·")
    assert ticks == ["worker", "api", "events / kubelet"]
    assert lanes == {0: {"worker"}, 1: {"api"}}, lanes


def test_html_export_opens_in_the_exporters_zone_and_the_switch_keeps_it(source_cluster, tmp_path):
    """GIVEN the HTML bundle of node-a exported by someone whose page showed Asia/Tokyo (UTC+09:00)
    WHEN a reader in Asia/Kolkata (UTC+05:30) opens it and presses the zone switch three times
    THEN it opens in Tokyo time, then shows UTC, the reader's local time, and Tokyo time again."""
    sync_api = pytest.importorskip("playwright.sync_api")
    buf = io.BytesIO()
    export_incident(source_cluster, Scope.one("node", "node-a"), SINCE, UNTIL, "html", buf, tz="Asia/Tokyo")
    path = tmp_path / "tokyo.html"
    path.write_bytes(buf.getvalue())
    seen: list[tuple[str, str]] = []
    with _open_offline(sync_api, path, timezone_id="Asia/Kolkata") as (
        browser,
        page,
        attempted,
        dialogs,
        errors,
    ):
        for click in range(4):
            if click:
                page.click("#tz-toggle")
                page.wait_for_function(
                    "(before) => document.getElementById('tz-toggle').textContent !== before", arg=seen[-1][1]
                )
            seen.append(
                (
                    page.locator("header span[data-time]").first.text_content(),
                    page.locator("#tz-toggle").text_content(),
                )
            )
    assert attempted == [] and errors == []
    since = SINCE.replace(tzinfo=None)
    hours = [timedelta(hours=9), timedelta(0), timedelta(hours=5, minutes=30), timedelta(hours=9)]
    assert [_wall(text) for text, _ in seen] == [since + h for h in hours], seen
    assert (
        "Asia/Tokyo" in seen[0][1]
        and "UTC" in seen[1][1]
        and "local" in seen[2][1]
        and "Asia/Tokyo" in seen[3][1]
    )
