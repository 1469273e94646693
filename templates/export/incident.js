// The incident page's own code (dashboard/export/html.py). It is appended to static/podlife/gantt.js in
// one inline module, so the Gantt is drawn by the pages' renderer: buildFigure and unknownBounds below are
// gantt.js's, in scope. Everything of this file sits in a block (its names cannot clash with gantt.js's)
// but the import, whose name is unlikely to be one gantt.js ever declares.
// The rows are built as the node and namespace pages build them (static/podlife/timeline-page.js): a row
// a pod, in time order (first start), its worker lane (the API lane for a pod with none); one pod's as
// its pod page builds them (static/podlife/pod.js): a row a lane, then its events and kubelet lines.
// Text goes into the DOM with textContent only; gantt.js escapes what it hands to Plotly.
import * as podlifeCommon from "./common.js";

{
  const { PLOT_CONFIG, axisValue, display, duration, fromDisplay, getParams, renderTimes, toMicros, zoneParam } = podlifeCommon;
  const data = JSON.parse(document.getElementById("incident-data").textContent);
  const meta = data.meta;
  const pods = data.pods || [];
  const findings = data.findings || [];
  // The partial plotly.js bundle has no WebGL traces: SVG bars however many (the file is read offline,
  // once; a page would switch to WebGL past the threshold).
  const cfg = { ...data.gantt, webgl_threshold: Infinity };
  const since = toMicros(meta.since);
  const until = toMicros(meta.until);
  const chart = document.getElementById("gantt");
  document.getElementById("no-chart").remove(); // shown only where this module cannot run
  // The zone the exporter's page showed (meta.tz), unless the file's URL names one (?tz=local,
  // ?tz=Area/City, as on the pages); the switch goes through UTC, local time and that zone.
  const known = (zone) => {
    try {
      return zone === "utc" || zone === "local" || !!new Intl.DateTimeFormat("en-US", { timeZone: zone });
    } catch {
      return false; // a name this browser's zone data lacks: UTC, as zoneParam does
    }
  };
  const exporters = meta.tz && known(meta.tz) ? meta.tz : "utc";
  let tz = getParams().get("tz") ? zoneParam() : exporters;
  const zones = [...new Set(["utc", "local", exporters, tz])];
  let view = null; // the zoomed span [x0, x1] in µs, else the stretch where something happened

  const title = (p) => `${p.namespace}/${p.name || p.uid}`;
  // An interval as gantt.js takes it: its last member the hover's note on unknown bounds (as pod.js).
  const withNote = ([lane, state, s, e, source, evidence, attrs]) => [lane, state, s, e, source, evidence, unknownBounds(attrs || {})];
  const rows = pods.map((p) => {
    const worker = p.intervals.filter((iv) => iv[0] === "worker");
    const intervals = (worker.length ? worker : p.intervals.filter((iv) => iv[0] === "api")).map(withNote);
    const starts = intervals.map((iv) => toMicros(iv[2]));
    return {
      ...p, key: p.uid, label: title(p), title: title(p), intervals,
      first: starts.length ? Math.min(...starts) : (toMicros(p.created_at) ?? Infinity),
    };
  });
  rows.sort((a, b) => a.first - b.first || a.label.localeCompare(b.label));
  // One pod is drawn as its pod page draws it (static/podlife/pod.js): a row a lane, its findings on the
  // first, then a row of its events and kubelet lines if it has any.
  function podRows(p) {
    const out = [];
    for (const lane of ["worker", "api"]) {
      const intervals = p.intervals.filter((iv) => iv[0] === lane).map(withNote);
      if (intervals.length) out.push({ key: lane, label: lane, title: title(p), intervals, markers: [], findings: [], last_observed: p.last_observed });
    }
    const markers = { key: "markers", label: "events / kubelet", title: "markers", intervals: [], markers: p.markers, findings: [] };
    (out[0] || markers).findings = p.findings;
    return p.markers.length || !out.length ? [...out, markers] : out; // no empty row (Plotly leaves it out)
  }
  const drawn = pods.length === 1 ? podRows(pods[0]) : rows;

  // Open on the stretch where something happened (the window can be hours around a minute of activity).
  let lo = Infinity, hi = -Infinity;
  const see = (t) => { const v = toMicros(t); if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } };
  for (const r of drawn) {
    for (const iv of r.intervals) { see(iv[2]); see(iv[3] || r.last_observed); }
    for (const m of r.markers) see(m[0]);
  }
  if (lo < hi) {
    const pad = Math.max((hi - lo) * 0.03, 50e3);
    lo = Math.max(since, lo - pad);
    hi = Math.min(until, hi + pad);
  } else [lo, hi] = [since, until];

  function draw() {
    const [x0, x1] = view || [lo, hi];
    const fig = buildFigure(drawn, cfg, {
      tz, windowEnd: until, x0: view && x0, x1: view && x1, viewUs: x1 - x0, chartPx: chart.clientWidth,
    });
    if (!view) fig.layout.xaxis.range = [axisValue(lo, tz), axisValue(hi, tz)];
    renderTimes(tz);
    return window.Plotly.react(chart, fig.data, fig.layout, { ...PLOT_CONFIG, scrollZoom: true });
  }

  if (drawn.length) {
    draw().then(() => {
      chart.on("plotly_relayout", (ev) => {
        if (ev["xaxis.autorange"]) view = null;
        else if (ev["xaxis.range[0]"] !== undefined) {
          view = [fromDisplay(ev["xaxis.range[0]"], tz), fromDisplay(ev["xaxis.range[1]"], tz)];
        } else return;
        draw(); // the minimum bar width follows the zoom, as on the pages
      });
      chart.dataset.drawn = "1"; // tests wait on it
    });
  } else {
    const none = document.createElement("p");
    none.textContent = "No pod of this scope was alive in the window.";
    chart.appendChild(none);
    renderTimes(tz);
  }
  // The pages' switch, with the exporter's zone kept in the round. The file's URL is left as it is: a file
  // opened from disk has no page state to share.
  document.getElementById("tz-toggle").addEventListener("click", () => {
    tz = zones[(zones.indexOf(tz) + 1) % zones.length];
    if (drawn.length) draw();
    else renderTimes(tz);
  });
  document.getElementById("notes").textContent = (meta.notes || []).join(" · ");

  // --- tables ---------------------------------------------------------------------------------------
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text != null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  // A cell holding an instant: renderTimes shows it in the picked zone.
  const at = (iso) => (iso ? { time: iso } : { text: "open" });
  function table(headers, body) {
    const t = el("table"), head = el("tr");
    for (const h of headers) head.appendChild(el("th", h));
    t.appendChild(head);
    for (const cells of body) {
      const tr = el("tr");
      for (const c of cells) {
        const td = el("td", c && typeof c === "object" ? c.text : c, c && typeof c === "object" ? c.cls : null);
        if (c && c.time) {
          td.dataset.time = c.time;
          td.textContent = display(toMicros(c.time), tz);
        }
        tr.appendChild(td);
      }
      t.appendChild(tr);
    }
    return t;
  }
  function phase(r, state) {
    let total = null;
    for (const iv of r.intervals) {
      if (iv[0] !== "worker" || iv[1] !== state) continue;
      total = (total || 0) + ((iv[3] ? toMicros(iv[3]) : until) - toMicros(iv[2]));
    }
    return total === null ? "" : { text: duration(total), cls: "num" };
  }
  document.getElementById("summary").appendChild(table(
    ["pod", "uid", "node", "phase", "worker", "setup", "terminating", "cleanup", "findings"],
    rows.map((r) => [
      title(r), r.uid, r.node || "", r.phase || "",
      [...new Set(r.intervals.filter((iv) => iv[0] === "worker").map((iv) => iv[4]))].sort().join(", "),
      phase(r, "setup"), phase(r, "terminating"), phase(r, "cleanup"), { text: String(r.findings.length), cls: "num" },
    ]),
  ));
  const order = { critical: 0, warning: 1, info: 2 };
  document.getElementById("findings").appendChild(findings.length ? table(
    ["severity", "kind", "subject", "start", "end", "duration", "message"],
    findings.slice()
      .sort((a, b) => (order[a.severity] - order[b.severity]) || (toMicros(a.start) - toMicros(b.start)))
      .map((f) => [
        { text: f.severity, cls: "sev-" + f.severity }, f.kind, f.subject + " " + (f.subject_name || ""),
        at(f.start), at(f.end), { text: f.end ? duration(toMicros(f.end) - toMicros(f.start)) : "open", cls: "num" }, f.message,
      ]),
  ) : el("p", "No findings."));
  renderTimes(tz);
}
