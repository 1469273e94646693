// Node, namespace and workload pages: the window picker, the Gantt, and the live watch (node, namespace).
// Every view setting (window, zoom, time zone, paused) is in the URL, so a link reproduces the view.
import {
  PLOT_CONFIG, axisValue, display, el, fetchJSON, fromDisplay, getParams, isoUTC, pageData, plot, podURL, renderTimes, setParams,
  nextZone, toMicros, tzLabel, zoneFigure, zoneParam,
} from "./common.js";
import { buildFigure, findingZoom, rowFromTimeline } from "./gantt.js";
import { ageAttrs, watchLive } from "./live.js";
import { bandConfig, bandRows, isBands, lodURL, renderBandTable } from "./lod.js";
import { collapseFinished, filterChoices, firstStart, groupByOwner, matchesFilters } from "./rows.js";

const page = pageData();
const cfg = page.gantt;
const chart = document.getElementById("gantt");
const statusEl = document.getElementById("status");
const table = document.getElementById("pods-body");
const state = {
  tz: zoneParam(),
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
  expanded: new Set(), // node page: owners whose finished pods are listed, not folded
  expandAll: false,
};
const owners = page.owners || {}; // "ns/Kind/name" → [owner kind, owner name] (views.owner_map)
const filterEls = {
  text: document.getElementById("row-search"),
  findingKind: document.getElementById("finding-kind"),
  eventReason: document.getElementById("event-reason"),
};
const params0 = getParams();
if (filterEls.text) filterEls.text.value = params0.get("q") || "";
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
  if (page.kind === "node") return `${r.namespace}/${r.name}`;
  return r.name || r.uid;
}

function filters() {
  const p = getParams();
  return { text: p.get("q") || "", findingKind: p.get("finding") || "", eventReason: p.get("reason") || "" };
}

// The rows drawn: the node's own lanes first; then the pods that pass the filters, grouped by owner
// (namespace and workload pages: Deployment → ReplicaSet → pods, every row labelled) or, on a node page,
// in order of start with the finished pods of each owner folded into one row until expanded.
function rows() {
  if (state.bands) return bandRows(state.bands);
  const all = [...state.pods.values()];
  const f = filters();
  const pods = all.filter((r) => matchesFilters(r, f));
  const out = [];
  for (const [lane, items] of Object.entries(state.nodeLanes)) {
    out.push({
      key: `node:${lane}`, label: lane, title: `${page.title} ${lane}`,
      intervals: items.map(([st, s, e, src, ev]) => [lane, st, s, e, src, ev]), markers: [], findings: [],
    });
  }
  const withTitle = (r) => ({ ...r, key: r.key ?? r.uid, title: r.collapsed ? r.name : `${r.namespace}/${r.name}` });
  if (page.kind === "node") {
    const expanded = state.expandAll ? null : state.expanded;
    const shown = state.expandAll ? pods.slice().sort((a, b) => firstStart(a) - firstStart(b)) : collapseFinished(pods, owners, expanded, rowLabel);
    for (const r of shown) out.push({ ...withTitle(r), label: r.collapsed ? r.name : rowLabel(r) });
  } else {
    for (const r of groupByOwner(pods, owners, rowLabel)) out.push(r.header ? r : withTitle(r));
  }
  updateFilterChoices(all, pods.length);
  return out;
}

// The finding-kind and event-reason choices from the pods loaded; the count of pods the filters keep.
function updateFilterChoices(all, kept) {
  const { kinds, reasons } = filterChoices(all);
  const f = filters();
  for (const [select, values, current, none] of [
    [filterEls.findingKind, kinds, f.findingKind, "any finding"],
    [filterEls.eventReason, reasons, f.eventReason, "any event"],
  ]) {
    if (!select) continue;
    const want = [...new Set([...values, ...(current ? [current] : [])])].sort();
    const have = [...select.options].slice(1).map((o) => o.value);
    if (want.join("\n") !== have.join("\n")) {
      select.replaceChildren(el("option", { value: "", text: none }), ...want.map((v) => el("option", { value: v, text: v })));
    }
    select.value = current;
  }
  const count = document.getElementById("row-count");
  if (count) count.textContent = kept === all.length ? "" : `${kept} of ${all.length} pods match`;
}

for (const [key, param] of [["text", "q"], ["findingKind", "finding"], ["eventReason", "reason"]]) {
  const input = filterEls[key];
  if (!input) continue;
  input.addEventListener(key === "text" ? "input" : "change", () => {
    setParams({ [param]: input.value || null });
    if (state.window) draw();
  });
}

const expandButton = document.getElementById("expand-all");
if (expandButton) {
  expandButton.addEventListener("click", () => {
    state.expandAll = !state.expandAll;
    state.expanded.clear();
    expandButton.setAttribute("aria-pressed", String(state.expandAll));
    expandButton.textContent = state.expandAll ? "fold finished pods" : "expand finished pods";
    draw();
  });
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
    viewUs: x1 - x0, chartPx: chart.clientWidth,
  });
  if (!p.get("x0")) fig.layout.xaxis.range = [axisValue(state.window.from, state.tz), axisValue(windowEnd(), state.tz)];
  state.timing.built = performance.now();
  if (await plot(chart, fig, { ...PLOT_CONFIG, scrollZoom: true }) && handlersOn) {
    attachHandlers(); // the full bundle (WebGL) replaced the partial one under this chart
  }
  state.timing.plotted = performance.now();
  chart.dataset.renderer = fig.gl ? "webgl" : "svg";
  // Rows that stand for pods (or bands, or the node's lanes); owners' header rows counted apart.
  const headers = all.filter((r) => r.header).length;
  chart.dataset.rows = String(all.length - headers);
  chart.dataset.headers = String(headers);
  chart.dataset.detail = state.bands ? "bands" : "full";
  // Bands of pods (a crowded namespace) are folded on the server: the row filters apply once zoomed to pods.
  for (const input of Object.values(filterEls)) {
    if (!input) continue;
    input.disabled = !!state.bands;
    input.title = state.bands ? "zoom in until the chart shows a row a pod to filter its rows" : "";
  }
  requestAnimationFrame(() => {
    window.__podlifeDraws.push({ pods: state.pods.size, t: performance.timeOrigin + performance.now(), ms: performance.now() - started, ...state.timing });
  });
  if (state.bands) {
    // The chart first: the table of 2,000 pods is built after the frame that shows it.
    const bands = state.bands;
    requestAnimationFrame(() => setTimeout(() => renderBandTable(bands, table, document.getElementById("pod-count"), page.pod_url)));
  } else renderTable(all);
  drawStatus();
}

function renderTable(all) {
  if (!table) return;
  const frag = document.createDocumentFragment();
  const pods = all.filter((r) => !r.key.startsWith("node:") && !r.header).flatMap((r) => (r.collapsed ? foldedPods(r) : [r]));
  for (const r of pods.slice(0, 2000)) {
    const link = el("a", { href: podURL(page.pod_url, r.uid), text: r.name || r.uid });
    const workers = r.intervals.filter((iv) => iv[0] === "worker");
    const last = workers.length ? workers[workers.length - 1] : null;
    const pending = r.freshness && r.freshness.pending_since ? toMicros(r.freshness.pending_since) : null;
    const waits = pending !== null;
    frag.append(
      el("tr", { "data-uid": r.uid, "data-pending": waits ? "1" : "0" },
        el("td", { text: r.namespace }), el("td", {}, link),
        workerCell(last, r.freshness),
        el("td", { text: r.phase || "" }),
        el("td", { class: r.findings.length ? "bad" : "", text: [...new Set(r.findings.map((f) => f[0]))].join(", ") + // each kind once: what is wrong, not how often
          (waits && r.findings.some((f) => !f[4] || toMicros(f[4]) >= pending) ? " (depends on pending kubelet evidence)" : "") }),
      ),
    );
  }
  table.replaceChildren(frag);
  document.getElementById("pod-count").textContent = `${pods.length} pod${pods.length === 1 ? "" : "s"}` + (pods.length > 2000 ? " (first 2,000 listed)" : "");
}

// The pods behind a folded row (the table lists every pod the filters keep, folded or not).
function foldedPods(row) {
  return row.members.map((uid) => state.pods.get(uid)).filter(Boolean);
}

// The worker column: the last worker state with how old it is (since when, and how old the node's newest
// kubelet evidence is), or "kubelet evidence pending since …" when the API is ahead of the kubelet's logs.
function workerCell(last, fresh) {
  const td = el("td", { class: "worker-state" });
  if (!last) return td;
  const pending = fresh && fresh.pending_since ? toMicros(fresh.pending_since) : null;
  const source = { inferred: " (inferred)", kubelet: " (from kubelet lines)" }[last[4]] || "";
  if (pending !== null) {
    td.append(el("span", { class: "worker-pending", text: `kubelet evidence pending since ${display(pending, state.tz)}` }),
      el("br"), el("span", { class: "muted", text: `last seen: ${last[1]}${source}` }));
    return td;
  }
  const until = fresh && fresh.kubelet_until ? toMicros(fresh.kubelet_until) : null;
  // The age ticks between frames (live.js tickAges): it must never freeze while the socket is quiet.
  const since = el("span", { class: "muted mono", text: `since ${display(toMicros(last[2]), state.tz).slice(0, 19)}` });
  if (until !== null) since.append(el("span", { class: "evidence-age", ...ageAttrs(until, " · kubelet evidence ", " old") }));
  td.append(el("span", { text: `${last[1]}${source}` }), el("br"), since);
  return td;
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
    drawStatus();
  }
}

// --- window picker, zoom, time zone -------------------------------------------------------------------------
const fromInput = document.getElementById("win-from");
const toInput = document.getElementById("win-to");

function syncPicker() {
  fromInput.value = display(state.window.from, state.tz);
  toInput.value = state.explicitTo ? display(state.window.to, state.tz) : "";
  toInput.placeholder = "now (live)";
  renderTimes(state.tz);
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
  state.tz = nextZone(state.tz);
  syncPicker();
  draw();
});

function onRelayout(ev) {
  if (ev["xaxis.autorange"]) setParams({ x0: null, x1: null });
  else if (ev["xaxis.range[0]"] !== undefined) {
    setParams({ x0: isoUTC(fromDisplay(ev["xaxis.range[0]"], state.tz)), x1: isoUTC(fromDisplay(ev["xaxis.range[1]"], state.tz)) });
  } else return;
  if (page.lod) refine(); // the server's level of detail for the zoomed range
  else draw(); // finer detail (WebGL) and the minimum bar width at the new zoom
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
    if (wasBands !== !!state.bands) await Plotly.relayout(chart, { "yaxis.range": [rows().length - 0.5, -0.5] });
  } catch (err) {
    statusEl.textContent = `could not load: ${err.message}`;
  }
}

function onClick(ev) {
  const point = ev.points && ev.points[0];
  const custom = point && point.customdata;
  if (custom && String(custom[0]).startsWith("finished:")) { // a folded row: list its pods
    state.expanded.add(String(custom[0]));
    draw();
    return;
  }
  if (!custom || String(custom[0]).startsWith("node:") || String(custom[0]).startsWith("band:")) return;
  // A window read's row cites observation ids (`#obs-ID` anchors the pod page's row); a row a live frame
  // redrew cites dedupe keys, which the pod page resolves itself (docs/api.md, "Evidence: keys and ids").
  const first = custom[1] ? custom[1].split(",")[0] : "";
  const evidence = /^\d+$/.test(first) ? `#obs-${first}` : "";
  const q = new URLSearchParams();
  if (custom[1]) q.set("evidence", custom[1]);
  if (custom[2] === "finding") { // zoom to finding: the pod page opens on its span
    const [z0, z1] = findingZoom(custom[3], custom[4]);
    q.set("x0", isoUTC(z0));
    q.set("x1", isoUTC(z1));
  }
  if (state.tz !== "utc") q.set("tz", state.tz);
  window.location.href = podURL(page.pod_url, custom[0]) + (q.size ? `?${q}` : "") + evidence;
}

// --- live watch (node and namespace pages: static/podlife/live.js) ---------------------------------------
let live = null;

function onDeltas(frame) {
  state.seq = frame.seq;
  if (state.paused) return;
  applyDeltas(frame.pods);
}

function onRefetch(frame) {
  if (frame) {
    state.seq = frame.seq;
    statusEl.textContent = `refetched: ${frame.reason}`;
  }
  if (!state.paused) load();
}

function applyDeltas(timelines) {
  for (const tl of timelines) {
    const row = rowFromTimeline(tl, state.lanes);
    const before = state.pods.get(row.uid);
    // Freshness is computed when the page reads (dashboard/freshness.py): a delta keeps the row's, except
    // that kubelet evidence reaching past the pending instant clears it; the next load recomputes it.
    if (before && before.freshness) {
      const p = before.freshness.pending_since ? toMicros(before.freshness.pending_since) : null;
      const caughtUp = p !== null && row.intervals.some((iv) => iv[0] === "worker" && iv[4] !== "inferred" && toMicros(iv[3] || iv[2]) > p);
      row.freshness = caughtUp ? { ...before.freshness, pending_since: null } : before.freshness;
    }
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
    if (live) live.showLive();
    if (!state.paused) load();
  });
}

let handlersOn = false;
function attachHandlers() {
  chart.on("plotly_relayout", onRelayout);
  chart.on("plotly_click", onClick);
  handlersOn = true;
}

await load();
if (page.lod && getParams().get("x0")) await refine(); // a shared link to a zoomed view
attachHandlers();
if (page.ws) live = watchLive({ ws: page.ws, onDeltas, onRefetch, isPaused: () => state.paused });
// The workload's status over time, in the same zone as the Gantt.
// It shares the Gantt's time axis: same range (window or zoom), same left and right margins, so an
// instant is at the same x in both charts.
function drawStatus() {
  if (!page.status_figure) return;
  const fig = zoneFigure(page.status_figure, state.tz);
  const gantt = chart._fullLayout;
  if (gantt && gantt.xaxis) {
    fig.layout.xaxis.range = [...gantt.xaxis.range];
    fig.layout.margin = { ...fig.layout.margin, l: gantt.margin.l, r: gantt.margin.r };
  }
  Plotly.react(document.getElementById("status-chart"), fig.data, fig.layout, PLOT_CONFIG);
}
