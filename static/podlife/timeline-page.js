// Node, namespace and workload pages: the window picker, the Gantt, and on node pages the live watch.
// Every view setting (window, zoom, time zone, paused) is in the URL, so a link reproduces the view.
import {
  axisValue, display, el, fetchJSON, fromDisplay, getParams, isoUTC, pageData, podURL, setParams, toMicros, tzLabel,
} from "./common.js";
import { buildFigure, rowFromTimeline } from "./gantt.js";
import { bandConfig, bandRows, isBands, lodURL, renderBandTable } from "./lod.js";

const page = pageData();
const cfg = page.gantt;
const chart = document.getElementById("gantt");
const statusEl = document.getElementById("status");
const liveEl = document.getElementById("live-state");
const table = document.getElementById("pods-body");
const state = {
  tz: getParams().get("tz") === "local" ? "local" : "utc",
  pods: new Map(), // uid → compact row
  nodeLanes: {},
  window: null, // {from, to} in µs
  explicitTo: !!getParams().get("to"), // no explicit end: the window grows with live data
  followNow: false, // ... and follows the clock when it ends about now
  lanes: ["worker"],
  paused: getParams().get("paused") === "1",
  seq: null,
  timing: {},
  bands: null, // a crowded window as bands of pods (lod.js), else null: a row a pod
};
window.__podlifeDraws = []; // timings after each draw (tests and bench/live.py read it)
window.__podlifeRows = () => rows(); // for benchmarks and tests

let firstLoad = true;
function apiURL() {
  if (firstLoad && page.initial_api) {
    firstLoad = false;
    return page.initial_api; // preloaded by the page while plotly.js was loading
  }
  const p = getParams();
  if (page.lod) return lodURL(page.api, p.get("from"), p.get("to"), chart.clientWidth - 120);
  const q = new URLSearchParams();
  for (const k of ["from", "to"]) if (p.get(k)) q.set(k, p.get(k));
  q.set("lanes", "worker");
  return `${page.api}?${q}`;
}

function rowLabel(r) {
  if (page.group_by_owner) return `${r.owner_name || "(no owner)"} ▸ ${r.name}`;
  if (page.kind === "node") return `${r.namespace}/${r.name}`;
  return r.name + (r.node ? ` @ ${r.node}` : "");
}

function rows() {
  if (state.bands) return bandRows(state.bands);
  const pods = [...state.pods.values()];
  for (const r of pods) {
    if (r._first === undefined) r._first = r.intervals.reduce((m, iv) => Math.min(m, toMicros(iv[2])), Infinity);
  }
  const first = (r) => r._first;
  pods.sort((a, b) =>
    page.group_by_owner
      ? (a.owner_name || "").localeCompare(b.owner_name || "") || first(a) - first(b)
      : first(a) - first(b) || a.name.localeCompare(b.name),
  );
  const out = [];
  for (const [lane, items] of Object.entries(state.nodeLanes)) {
    out.push({
      key: `node:${lane}`, label: lane, title: `${page.title} ${lane}`,
      intervals: items.map(([st, s, e, src, ev]) => [lane, st, s, e, src, ev]), markers: [], findings: [],
    });
  }
  for (const r of pods) {
    out.push({ ...r, key: r.uid, label: rowLabel(r), title: `${r.namespace}/${r.name}` });
  }
  return out;
}

function windowEnd() {
  return state.followNow ? Math.max(state.window.to, Date.now() * 1000) : state.window.to;
}

async function draw() {
  const p = getParams();
  const all = rows();
  const started = performance.now();
  state.timing.build0 = started;
  const x0 = toMicros(p.get("x0")) ?? state.window.from;
  const x1 = toMicros(p.get("x1")) ?? windowEnd();
  const fig = buildFigure(all, state.bands ? bandConfig(cfg) : cfg, {
    tz: state.tz, tzLabel: tzLabel(state.tz), windowEnd: windowEnd(),
    x0: toMicros(p.get("x0")), x1: toMicros(p.get("x1")),
    detailUs: (x1 - x0) / Math.max(chart.clientWidth - 120, 200),
  });
  if (!p.get("x0")) fig.layout.xaxis.range = [axisValue(state.window.from, state.tz), axisValue(windowEnd(), state.tz)];
  state.timing.built = performance.now();
  await Plotly.react(chart, fig.data, fig.layout, { responsive: true, displaylogo: false, scrollZoom: true });
  state.timing.plotted = performance.now();
  chart.dataset.renderer = fig.gl ? "webgl" : "svg";
  chart.dataset.rows = String(all.length);
  chart.dataset.detail = state.bands ? "bands" : "full";
  requestAnimationFrame(() => {
    window.__podlifeDraws.push({ pods: state.pods.size, t: performance.timeOrigin + performance.now(), ms: performance.now() - started, ...state.timing });
  });
  if (state.bands) {
    // The chart first: the table of 2,000 pods is built after the frame that shows it.
    const bands = state.bands;
    requestAnimationFrame(() => setTimeout(() => renderBandTable(bands, table, document.getElementById("pod-count"), page.pod_url)));
  } else renderTable(all);
}

function renderTable(all) {
  if (!table) return;
  const frag = document.createDocumentFragment();
  const pods = all.filter((r) => !r.key.startsWith("node:"));
  for (const r of pods.slice(0, 2000)) {
    const link = el("a", { href: podURL(page.pod_url, r.uid), text: r.name || r.uid });
    const workers = r.intervals.filter((iv) => iv[0] === "worker");
    const last = workers.length ? workers[workers.length - 1] : null;
    frag.append(
      el("tr", { "data-uid": r.uid },
        el("td", { text: r.namespace }), el("td", {}, link),
        el("td", { text: last ? `${last[1]}${{ inferred: " (inferred)", kubelet: " (from kubelet lines)" }[last[4]] || ""}` : "" }),
        el("td", { text: r.phase || "" }),
        el("td", { class: r.findings.length ? "bad" : "", text: r.findings.map((f) => f[0]).join(", ") }),
      ),
    );
  }
  table.replaceChildren(frag);
  document.getElementById("pod-count").textContent = `${pods.length} pod${pods.length === 1 ? "" : "s"}` + (pods.length > 2000 ? " (first 2,000 listed)" : "");
}

async function load() {
  statusEl.textContent = "loading…";
  try {
    state.timing.fetch0 = performance.now();
    const data = await fetchJSON(apiURL());
    state.timing.fetched = performance.now();
    state.window = { from: toMicros(data.window.from), to: toMicros(data.window.to) };
    document.body.dataset.windowFrom = data.window.from; // what the Export button exports
    document.body.dataset.windowTo = data.window.to;
    state.followNow = !state.explicitTo && Date.now() * 1000 - state.window.to < 120e6;
    state.bands = isBands(data) ? data : null;
    state.pods = new Map(state.bands ? [] : data.pods.map((p) => [p.uid, p]));
    state.nodeLanes = data.node_lanes || {};
    syncPicker();
    await draw();
    statusEl.textContent = data.truncated ? "too many pods: showing the first ones; narrow the window" : "";
  } catch (err) {
    statusEl.textContent = `could not load: ${err.message}`;
  }
}

// --- window picker, zoom, time zone -------------------------------------------------------------------------
const fromInput = document.getElementById("win-from");
const toInput = document.getElementById("win-to");

function syncPicker() {
  fromInput.value = display(state.window.from, state.tz);
  toInput.value = state.explicitTo ? display(state.window.to, state.tz) : "";
  toInput.placeholder = "now (live)";
  document.getElementById("tz-toggle").textContent = `times: ${tzLabel(state.tz)}`;
}

document.getElementById("win-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const from = fromInput.value ? fromDisplay(fromInput.value, state.tz) : null;
  const to = toInput.value ? fromDisplay(toInput.value, state.tz) : null;
  state.explicitTo = !!to;
  setParams({ from: from ? isoUTC(from) : null, to: to ? isoUTC(to) : null, x0: null, x1: null });
  load();
});

for (const button of document.querySelectorAll("[data-span]")) {
  button.addEventListener("click", () => {
    const span = Number(button.dataset.span) * 1e6;
    const to = windowEnd();
    setParams({ from: isoUTC(to - span), to: state.explicitTo ? isoUTC(to) : null, x0: null, x1: null });
    load();
  });
}

document.getElementById("tz-toggle").addEventListener("click", () => {
  state.tz = state.tz === "utc" ? "local" : "utc";
  setParams({ tz: state.tz === "local" ? "local" : null });
  syncPicker();
  draw();
});

function onRelayout(ev) {
  if (ev["xaxis.autorange"]) setParams({ x0: null, x1: null });
  else if (ev["xaxis.range[0]"] !== undefined) {
    setParams({ x0: isoUTC(fromDisplay(ev["xaxis.range[0]"], state.tz)), x1: isoUTC(fromDisplay(ev["xaxis.range[1]"], state.tz)) });
  } else return;
  if (page.lod) refine(); // the server's level of detail for the zoomed range
  else if (chart.dataset.renderer === "webgl") draw(); // finer detail at the new zoom
}

// Level of detail (lod.js): fetch the zoomed range (x0..x1, else the whole window) and redraw it, pod by
// pod once few enough pods overlap it. The window itself (picker, export) stays as it is.
let refineSeq = 0;
async function refine() {
  const mine = ++refineSeq;
  const p = getParams();
  const url = p.get("x0") ? lodURL(page.api, p.get("x0"), p.get("x1"), chart.clientWidth - 120) : apiURL();
  try {
    const data = await fetchJSON(url);
    if (mine !== refineSeq) return; // a later zoom superseded this one
    const wasBands = !!state.bands;
    state.bands = isBands(data) ? data : null;
    state.pods = new Map(state.bands ? [] : data.pods.map((r) => [r.uid, r]));
    await draw();
    // Rows changed meaning (bands ↔ pods): a y zoom kept from before would show the wrong rows.
    if (wasBands !== !!state.bands) await Plotly.relayout(chart, { "yaxis.autorange": "reversed" });
  } catch (err) {
    statusEl.textContent = `could not load: ${err.message}`;
  }
}

function onClick(ev) {
  const point = ev.points && ev.points[0];
  const custom = point && point.customdata;
  if (!custom || String(custom[0]).startsWith("node:") || String(custom[0]).startsWith("band:")) return;
  const evidence = custom[1] ? `#obs-${custom[1].split(",")[0]}` : "";
  const mark = custom[1] ? `?evidence=${encodeURIComponent(custom[1])}` : "";
  window.location.href = podURL(page.pod_url, custom[0]) + mark + evidence;
}

// --- live watch (node pages) ----------------------------------------------------------------------------
let socket = null;
let attempt = 0;
let everConnected = false;
let stopped = false;

function setLive(text, cls) {
  if (!liveEl) return;
  liveEl.textContent = text;
  liveEl.className = `live-state ${cls}`;
  liveEl.dataset.state = cls;
}

function connect() {
  const proto = window.location.protocol === "https:" ? "wss" : "ws";
  socket = new WebSocket(`${proto}://${window.location.host}${page.ws}`);
  socket.onmessage = (msg) => {
    const frame = JSON.parse(msg.data);
    if (frame.type === "hello") {
      attempt = 0;
      setLive(state.paused ? "paused" : "live", state.paused ? "paused" : "live");
      if (everConnected) load(); // we may have missed deltas while away
      everConnected = true;
    } else if (frame.type === "deltas") {
      state.seq = frame.seq;
      if (state.paused) return;
      applyDeltas(frame.pods);
    } else if (frame.type === "refetch") {
      state.seq = frame.seq;
      statusEl.textContent = `refetched: ${frame.reason}`;
      if (!state.paused) load();
    } else if (frame.type === "error") {
      stopped = true;
      setLive(`offline: ${frame.message}`, "offline");
    }
  };
  socket.onclose = (ev) => {
    if (stopped || ev.code >= 4400) {
      stopped = true;
      if (!liveEl.textContent.startsWith("offline")) setLive("offline", "offline");
      return;
    }
    attempt += 1;
    const delay = Math.min(15000, 500 * 2 ** Math.min(attempt - 1, 5)) * (0.75 + Math.random() * 0.5);
    setLive(`reconnecting in ${(delay / 1000).toFixed(1)} s`, "reconnecting");
    setTimeout(connect, delay);
  };
}

function applyDeltas(timelines) {
  for (const tl of timelines) {
    const row = rowFromTimeline(tl, state.lanes);
    if (page.kind === "node" && row.node && row.node !== page.title) state.pods.delete(row.uid);
    else state.pods.set(row.uid, row);
    if (!state.explicitTo) {
      for (const iv of row.intervals) {
        state.window.to = Math.max(state.window.to, toMicros(iv[3] || iv[2]));
      }
    }
  }
  draw();
}

const pauseButton = document.getElementById("pause");
if (pauseButton) {
  pauseButton.textContent = state.paused ? "resume" : "pause";
  pauseButton.addEventListener("click", () => {
    state.paused = !state.paused;
    pauseButton.textContent = state.paused ? "resume" : "pause";
    setParams({ paused: state.paused ? "1" : null });
    setLive(state.paused ? "paused" : "live", state.paused ? "paused" : "live");
    if (!state.paused) load();
  });
}

await load();
if (page.lod && getParams().get("x0")) await refine(); // a shared link to a zoomed view
chart.on("plotly_relayout", onRelayout);
chart.on("plotly_click", onClick);
if (page.ws) {
  setLive("connecting", "reconnecting");
  connect();
}
if (page.status_figure) {
  const fig = page.status_figure;
  Plotly.newPlot(document.getElementById("status-chart"), fig.data, fig.layout, { responsive: true, displaylogo: false });
}
