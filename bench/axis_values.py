"""Zone-shifted date strings against epoch-millisecond numbers as Plotly x values, in Chromium.

    python bench/axis_values.py [--rows 10000] [--runs 5]

podlife hands Plotly every x value as the picked zone's wall time, a string "YYYY-MM-DD HH:MM:SS.ffffff"
(static/podlife/common.js ``axisValue``): numbers would be drawn in the browser's zone, hours away from the
hover (docs/dashboard.md, Time zones). Strings cost Plotly a parse per point; this measures that cost on the
two shapes the pages draw: a 10,000-row WebGL day (three segments a row) and a 110-row SVG node page.

Timed, alternating, ``--runs`` times each, in one page with plotly.min.js loaded and compiled once:
``Plotly.newPlot`` of the same figure with numeric x (baseline) and with string x (podlife), each into a
fresh div, until the next animation frame. Prints the medians and the ratio strings / numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plotly
from _setup import ROOT  # noqa: F401  (puts the project on sys.path like the other benchmarks)

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
PLOTLY = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">
<script src="%s"></script>
<script>
function pad(n, w) { return String(n).padStart(w || 2, "0"); }
function wall(ms) {  // the same string common.js display() makes (UTC here: the cost is the parse)
  const d = new Date(Math.floor(ms));
  const us = Math.round((ms - Math.floor(ms)) * 1000) + d.getUTCMilliseconds() * 1000;
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(us, 6)}`;
}
function figure(rows, strings) {
  const t0 = Date.UTC(2024, 5, 7), day = 86400e3, conv = strings ? wall : (v) => v;
  if (rows > 1000) {  // WebGL lines: setup, terminating, cleanup per row
    const traces = [0, 1, 2].map((k) => ({ type: "scattergl", mode: "lines", x: [], y: [], line: { width: 1 } }));
    for (let r = 0; r < rows; r++) {
      const s = t0 + (r * 7919 %% day), e1 = s + 3000.123, e2 = e1 + 30000.456, e3 = e2 + 2000.789;
      [[s, e1], [e1, e2], [e2, e3]].forEach(([a, b], k) => {
        traces[k].x.push(conv(a), conv(b), null);
        traces[k].y.push(r, r, null);
      });
    }
    return { data: traces, layout: { height: 800, xaxis: { type: "date" }, showlegend: false } };
  }
  const base = [], x = [], y = [];
  for (let r = 0; r < rows; r++) for (let k = 0; k < 4; k++) {
    const s = t0 + r * 60e3 + k * 9000.25;
    base.push(conv(s)); x.push(8000.5); y.push(r);
  }
  return { data: [{ type: "bar", orientation: "h", base, x, y, width: 0.6 }],
           layout: { height: 2400, barmode: "overlay", xaxis: { type: "date" }, showlegend: false } };
}
window.draw = async (rows, strings) => {
  const fig = figure(rows, strings);
  const div = document.createElement("div");
  div.style.width = "1400px";
  document.body.replaceChildren(div);
  const t = performance.now();
  await Plotly.newPlot(div, fig.data, fig.layout, { staticPlot: false });
  await new Promise((r) => requestAnimationFrame(r));
  return performance.now() - t;
};
</script></body></html>"""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        page_file = Path(tmp) / "bench.html"
        page_file.write_text(PAGE % PLOTLY.as_uri())
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(page_file.as_uri())
        for rows in (args.rows, 110):
            page.evaluate("([r]) => window.draw(r, false)", [rows])  # warm: compile Plotly's paths
            page.evaluate("([r]) => window.draw(r, true)", [rows])
            numbers, strings = [], []
            for _ in range(args.runs):
                numbers.append(page.evaluate("([r]) => window.draw(r, false)", [rows]))
                strings.append(page.evaluate("([r]) => window.draw(r, true)", [rows]))
            n, s = statistics.median(numbers), statistics.median(strings)
            kind = "WebGL" if rows > 1000 else "SVG"
            print(
                f"{rows:>6} rows ({kind}): numbers {n:8.1f} ms  strings {s:8.1f} ms  strings / numbers = {s / n:5.2f}"
            )
        browser.close()


if __name__ == "__main__":
    main()
