// The pod page: every lane as a row, markers and findings; a click on a bar, marker or finding highlights
// its evidence in the observations table below (the raw lines that made it). Live: the Gantt redraws when
// the derive stage re-derives this pod (websocket of the pod's group; a sequence gap refetches over REST).
import {
  PLOT_CONFIG, axisValue, fromDisplay, getParams, isoUTC, nextZone, pageData, plot, renderTimes, setParams, toMicros, tzLabel, zoneParam,
} from "./common.js";
import { buildFigure, findingZoom, unknownBounds } from "./gantt.js";
import { watchLive } from "./live.js";

const page = pageData();
let tl = page.timeline;
const chart = document.getElementById("gantt");
let tz = zoneParam();

// A false condition is normal (grey) while the pod starts or after it is done; it is an anomaly (red) when
// the condition had been true and turns false while the API still says running.
function conditionState(lane, iv, items) {
  if (!lane.startsWith("condition:") || !/^false$/i.test(iv.state)) return iv.state;
  const s = toMicros(iv.start);
  const wasTrue = items.some((o) => /^true$/i.test(o.state) && toMicros(o.start) < s);
  const running = (tl.lanes.api || []).some((a) => a.state.startsWith("running") && toMicros(a.start) <= s && (!a.end || toMicros(a.end) > s));
  return wasTrue && running ? `${iv.state} (unexpected)` : iv.state;
}

function rows() {
  const out = [];
  for (const lane of page.lanes) {
    const items = tl.lanes[lane];
    out.push({
      key: lane, label: lane, title: `${tl.pod.namespace}/${tl.pod.name}`,
      intervals: items.map((iv) => [lane, conditionState(lane, iv, items), iv.start, iv.end, iv.source, iv.evidence, unknownBounds(iv.attrs || {})]),
      markers: [], findings: [],
      freshness: lane === "worker" ? page.freshness : null,
    });
  }
  if (out.length) {
    out[0].findings = tl.findings.map((f) => [f.kind, f.severity, f.message, f.start, f.end, f.evidence]);
  }
  out.push({
    key: "markers", label: "events / kubelet", title: "markers", intervals: [],
    markers: tl.markers.map((m) => [m.at, m.kind, m.reason, m.message, m.evidence]), findings: [],
  });
  return out;
}

function extent() {
  let lo = Infinity, hi = -Infinity;
  const see = (t) => { const v = toMicros(t); if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } };
  for (const items of Object.values(tl.lanes)) for (const iv of items) { see(iv.start); see(iv.end); }
  for (const m of tl.markers) see(m.at);
  if (!Number.isFinite(lo)) { lo = Date.now() * 1000 - 3600e6; hi = Date.now() * 1000; }
  const pad = Math.max((hi - lo) * 0.03, 50e3);
  return [lo - pad, hi + pad];
}

async function draw() {
  const [lo, hi] = extent();
  const p = getParams();
  const openEnd = tl.pod.deleted_at ? hi : Math.max(hi, Date.now() * 1000);
  const x0 = toMicros(p.get("x0")), x1 = toMicros(p.get("x1"));
  const fig = buildFigure(rows(), page.gantt, {
    tz, tzLabel: tzLabel(tz), windowEnd: openEnd, x0, x1,
    viewUs: x0 !== null && x1 !== null ? x1 - x0 : hi - lo, chartPx: chart.clientWidth,
  });
  if (!p.get("x0")) fig.layout.xaxis.range = [axisValue(lo, tz), axisValue(hi, tz)];
  await plot(chart, fig, { ...PLOT_CONFIG, scrollZoom: true }); // a pod's few lanes stay far under WebGL
  renderTimes(tz);
}

// Evidence arrives two ways: the pod's own document (chart, live frames) cites observations by dedupe key;
// the findings list and the node / namespace pages link here with observation ids (`?evidence=ID,…`, what
// their bulk reads carry). A row answers to both: `id="obs-ID"` and `data-key="KEY"`.
const rowByKey = new Map();
for (const row of document.querySelectorAll("#observations tr[data-key]")) rowByKey.set(row.dataset.key, row);

function evidenceRow(token) {
  return rowByKey.get(token) || (/^\d+$/.test(token) ? document.getElementById(`obs-${token}`) : null);
}

// The `?evidence=` of a selection: a row's id where the page has it (short, what other pages link with),
// else the key as cited.
function evidenceParam(tokens) {
  return tokens.map((t) => { const row = evidenceRow(t); return row ? row.id.slice("obs-".length) : t; }).join(",") || null;
}

export function highlight(tokens) {
  for (const row of document.querySelectorAll("tr.evidence")) row.classList.remove("evidence");
  let first = null;
  const shown = [];
  for (const token of tokens) {
    const row = evidenceRow(token);
    if (row) {
      row.classList.add("evidence");
      shown.push(row.id.slice("obs-".length));
      first = first || row;
    }
  }
  const note = document.getElementById("evidence-note");
  const missing = tokens.length - shown.length;
  note.textContent = tokens.length
    ? `evidence: observation${shown.length === 1 ? "" : "s"} ${shown.join(", ") || "—"}` +
      (missing ? ` (${missing} not among this pod's observations)` : "")
    : "";
  if (first) first.scrollIntoView({ block: "center" });
}

document.getElementById("tz-toggle").addEventListener("click", () => {
  tz = nextZone(tz);
  draw();
});

for (const link of document.querySelectorAll("a[data-evidence]")) {
  link.addEventListener("click", (ev) => {
    ev.preventDefault();
    const ids = link.dataset.evidence ? link.dataset.evidence.split(",") : [];
    setParams({ evidence: ids.join(",") || null });
    highlight(ids);
  });
}

await draw();
chart.on("plotly_click", (ev) => {
  const custom = ev.points && ev.points[0] && ev.points[0].customdata;
  if (!custom) return;
  const keys = custom[1] ? custom[1].split(",") : [];
  setParams({ evidence: evidenceParam(keys) });
  highlight(keys);
  if (custom[2] === "finding") { // zoom to finding
    const [z0, z1] = findingZoom(custom[3], custom[4]);
    setParams({ x0: isoUTC(z0), x1: isoUTC(z1) });
    draw();
  }
});
chart.on("plotly_relayout", (ev) => {
  if (ev["xaxis.autorange"]) setParams({ x0: null, x1: null });
  else if (ev["xaxis.range[0]"] !== undefined) {
    setParams({ x0: isoUTC(fromDisplay(ev["xaxis.range[0]"], tz)), x1: isoUTC(fromDisplay(ev["xaxis.range[1]"], tz)) });
  } else return;
  draw(); // the minimum bar width follows the zoom
});
const initial = getParams().get("evidence");
if (initial) highlight(initial.split(","));

// --- live (kept apart from the drawing above) -------------------------------------------------------------
function applyTimeline(next) {
  if (!next || !next.pod || next.pod.uid !== tl.pod.uid) return;
  // Lanes keep their places; a lane the pod did not have before (a new container) goes after them.
  const known = page.lanes.filter((lane) => lane in next.lanes);
  const added = Object.keys(next.lanes).filter((lane) => !page.lanes.includes(lane)).sort();
  page.lanes = known.concat(added);
  tl = next;
  window.__podlifeLiveUpdates = (window.__podlifeLiveUpdates || 0) + 1; // tests read it
  draw();
}

async function refetch() {
  const response = await fetch(page.api, { headers: { Accept: "application/json" } });
  if (response.ok) applyTimeline(await response.json());
}

if (page.ws) {
  watchLive({
    ws: page.ws,
    onDeltas: (frame) => {
      for (const next of frame.pods) applyTimeline(next);
    },
    onRefetch: () => refetch(),
  });
}
