// Shared helpers: times with microseconds, time zones, escaping, URL state. No data ever goes through
// innerHTML: text is set with textContent, and text handed to Plotly (which renders a subset of HTML in
// hover text and labels) goes through plotlyText().

export function pageData() {
  return JSON.parse(document.getElementById("page-data").textContent);
}

// ISO 8601 with an offset → microseconds since the epoch (a Number: exact up to year 2255).
export function toMicros(iso) {
  if (iso === null || iso === undefined) return null;
  const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$/.exec(iso);
  if (!m) {
    const ms = Date.parse(iso);
    return Number.isNaN(ms) ? null : ms * 1000;
  }
  const ms = Date.parse(`${m[1]}T${m[2]}${m[4] || "Z"}`);
  const frac = ((m[3] || "") + "000000").slice(0, 6);
  return ms * 1000 + Number(frac);
}

function pad(n, w = 2) {
  return String(n).padStart(w, "0");
}

// Offset of local time from UTC at a given instant, in microseconds.
function localOffsetMicros(us) {
  return -new Date(Math.floor(us / 1000)).getTimezoneOffset() * 60e6;
}

// The zone a page shows times in: "utc" (default), "local" (the browser's) or an IANA name picked with
// ?tz=Area/City (e.g. the cluster's zone). An unknown name falls back to UTC, and the switch says so.
export function zoneParam() {
  const tz = getParams().get("tz");
  if (!tz || tz === "utc") return "utc";
  if (tz === "local") return "local";
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: tz });
    return tz;
  } catch {
    return "utc";
  }
}

// The switch: UTC → local → UTC; a picked zone goes back to UTC. Returns the new zone and puts it in the URL.
export function nextZone(tz) {
  const next = tz === "utc" ? "local" : "utc";
  setParams({ tz: next === "utc" ? null : next });
  return next;
}

// Offset of an IANA zone from UTC at an instant (µs), through Intl; cached per quarter hour (no zone
// changes its offset more often), so a 10,000-row chart costs a few hundred Intl calls, not 60,000.
const zoneFormats = new Map();
const zoneOffsets = new Map();
function namedOffsetMicros(us, zone) {
  const key = `${zone}|${Math.floor(us / 900e6)}`;
  const hit = zoneOffsets.get(key);
  if (hit !== undefined) return hit;
  let f = zoneFormats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
      hour: "numeric", minute: "numeric", second: "numeric",
    });
    zoneFormats.set(zone, f);
  }
  const ms = Math.floor(us / 1000 / 1000) * 1000; // whole seconds: the parts carry no fraction
  const p = Object.fromEntries(f.formatToParts(new Date(ms)).map((x) => [x.type, x.value]));
  const wall = Date.UTC(+p.year, +p.month - 1, +p.day, +p.hour % 24, +p.minute, +p.second);
  const offset = (wall - ms) * 1000;
  zoneOffsets.set(key, offset);
  return offset;
}

function offsetMicros(us, tz) {
  if (tz === "utc" || !tz) return 0;
  return tz === "local" ? localOffsetMicros(us) : namedOffsetMicros(us, tz);
}

// Plotly date-axis value for an instant: the wall time of the picked zone as a naive string
// "YYYY-MM-DD HH:MM:SS.ffffff" (microseconds kept). Plotly draws a date string as the wall time it reads,
// whatever the browser's zone; a number would be taken as milliseconds and drawn in the *browser's* zone
// (plotly.js dt2ms goes through `new Date(ms)`), which put the axis hours off from the hover in any
// browser not set to UTC. Every chart (Gantt bars, markers, finding bands, ranges, server-built status
// figures through zoneFigure) goes through this one helper, so axis, hover and tables agree.
export function axisValue(us, tz) {
  if (us === null || us === undefined) return null;
  return wallTime(us, tz);
}

// Civil date from days since 1970-01-01 (H. Hinnant's algorithm): no Date object per call.
function civil(days) {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}

// Microseconds → "YYYY-MM-DD HH:MM:SS.ffffff" in the picked zone, all six digits: what Plotly's axis reads
// (axisValue) and what isoUTC writes into links.
export function wallTime(us, tz) {
  if (us === null || us === undefined) return null;
  const shifted = us + offsetMicros(us, tz);
  const days = Math.floor(shifted / 86400e6);
  let rest = shifted - days * 86400e6;
  const [y, m, d] = civil(days);
  const hh = Math.floor(rest / 3600e6);
  rest -= hh * 3600e6;
  const mm = Math.floor(rest / 60e6);
  rest -= mm * 60e6;
  const ss = Math.floor(rest / 1e6);
  const micro = Math.round(rest - ss * 1e6);
  return `${y}-${pad(m)}-${pad(d)} ${pad(hh)}:${pad(mm)}:${pad(ss)}.${pad(micro, 6)}`;
}

// A wall time as people read it (hover text, inputs, tables): the fraction trimmed to the precision the
// instant has, in groups of three digits. A whole-second timestamp (the API's metav1.Time) shows no
// ".000000", one to the millisecond three digits, one to the microsecond all six. Nothing is rounded: the
// digits dropped are zeros.
export function trimFraction(text) {
  return text.replace(/\.(\d{3})(\d{3})$/, (_, ms, us) => (us !== "000" ? `.${ms}${us}` : ms !== "000" ? `.${ms}` : ""));
}

// Microseconds → "YYYY-MM-DD HH:MM:SS[.fff[fff]]" in the picked zone (UTC, local, or an IANA name).
export function display(us, tz) {
  if (us === null || us === undefined) return null;
  return trimFraction(wallTime(us, tz));
}

// Inverse of display(): a Plotly axis value (display string) → UTC microseconds.
export function fromDisplay(text, tz) {
  // Plotly's range values carry no offset: they are the naive display strings this page made.
  const us = toMicros(String(text).trim().replace(" ", "T") + "Z");
  if (us === null) return null;
  if (tz === "utc") return us;
  return us - offsetMicros(us - offsetMicros(us, tz), tz); // the offset at the instant, not at the wall time
}

// A figure built on the server (timelines/figures.py: ISO strings in UTC) → the same figure with every
// x value and shape bound shifted to the picked zone through axisValue, so it agrees with the Gantt.
export function zoneFigure(fig, tz) {
  const shift = (v) => (typeof v === "string" ? axisValue(toMicros(v), tz) ?? v : v);
  const data = fig.data.map((t) => (t.x ? { ...t, x: t.x.map(shift) } : t));
  const layout = { ...fig.layout, xaxis: { ...(fig.layout.xaxis || {}) } };
  if (layout.xaxis.range) layout.xaxis.range = layout.xaxis.range.map(shift);
  if (layout.shapes) {
    layout.shapes = layout.shapes.map((s) => (s.xref === "x" ? { ...s, x0: shift(s.x0), x1: shift(s.x1) } : s));
  }
  return { data, layout };
}

// A sentence with instants written in UTC ("… since 2024-06-07 06:54:47.250 UTC": finding messages, made
// on the server) → the same sentence with each instant in the picked zone and named so, so it never says
// "UTC" beside columns shown in another zone. Under UTC the text is unchanged.
const UTC_IN_TEXT = /(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?) UTC\b/g;
export function zoneText(text, tz) {
  if (text === null || text === undefined || tz === "utc" || !tz) return text;
  return String(text).replace(UTC_IN_TEXT, (all, day, time) => {
    const us = toMicros(`${day}T${time}Z`);
    return us === null ? all : `${display(us, tz)} ${tz === "local" ? "local time" : tz}`;
  });
}

// Every cell that holds an instant (data-time="ISO in UTC") shows it in the picked zone, every sentence
// marked data-utc-text has its UTC instants moved to it (zoneText), and the switch says which zone that is.
export function renderTimes(tz) {
  for (const cell of document.querySelectorAll("[data-time]")) {
    const us = toMicros(cell.dataset.time);
    if (us !== null) cell.textContent = display(us, tz);
  }
  for (const cell of document.querySelectorAll("[data-utc-text]")) {
    cell.textContent = zoneText(cell.dataset.utcText, tz);
  }
  const toggle = document.getElementById("tz-toggle");
  if (toggle) toggle.textContent = `times: ${tzLabel(tz)}`;
}

// Plotly options every chart shares: the mode bar shows on hover only, above the plot area (each layout
// keeps a top margin for it), so it never covers the first lanes.
// plotly.js 4 shows a "Share chart..." button by default that uploads the chart to Plotly's cloud
// (plotlyServerURL): podlife's charts never offer it (clusters are air-gapped, and pod data must not leave);
// an empty server URL makes its handler refuse even if a figure turned the button back on. The bundles'
// other foreign default, topojsonURL (maps for geo traces, fetched from Plotly's CDN), points at our own
// origin: podlife draws no geo trace, and no chart may ever ask another host for anything.
// The offline HTML export inlines this file and uses this very object (dashboard/export/html.py).
export const PLOT_CONFIG = {
  responsive: true, displaylogo: false, displayModeBar: "hover", showSendToCloud: false, plotlyServerURL: "",
  topojsonURL: "./",
};

export function isoUTC(us) {
  return wallTime(us, "utc").replace(" ", "T") + "Z";
}

export function tzLabel(tz) {
  if (tz === "utc" || !tz) return "UTC";
  const off = Math.round(offsetMicros(Date.now() * 1000, tz) / 60e6);
  const utc = `UTC${off >= 0 ? "+" : "-"}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
  return tz === "local" ? `local (${utc})` : `${tz} (${utc})`;
}

// A duration as people say it: three significant digits under a minute ("850 µs", "12.3 ms", "2.97 s"),
// whole units above ("1 m 30 s", "2 h 5 m", "3 d 4 h"); null is an interval still open.
export function duration(us) {
  if (us === null || us === undefined) return "open";
  const sig = (v) => String(Number(v.toPrecision(3)));
  const a = Math.abs(us);
  if (a < 1e3) return `${sig(us)} µs`;
  if (a < 1e6) return `${sig(us / 1e3)} ms`;
  if (a < 59.95e6) return `${sig(us / 1e6)} s`;
  const s = Math.round(us / 1e6);
  const units = [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]];
  const i = units.findIndex(([, n]) => s >= n);
  const [big, n] = units[i];
  const [small, k] = units[i + 1];
  const rest = Math.floor((s % n) / k);
  return `${Math.floor(s / n)} ${big}` + (rest ? ` ${rest} ${small}` : "");
}

// Plotly decodes numeric references and only a few named ones (no &quot;): quotes go as &#34; / &#39;, so a
// name with a quote shows it once, not as "&quot;".
const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;" };
export function plotlyText(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
}

// One URL path segment for any name, exactly as Django's reverse() builds it through the <segment:…>
// converter (podlife_site/converters.py): "%" and "/" escaped twice (the server decodes once, the converter
// once more), a name of only dots spelled out (a browser would resolve ".." as a path step).
export function pathSegment(name) {
  let text = String(name).replace(/%/g, "%25").replace(/\//g, "%2F");
  if (text && /^\.+$/.test(text)) text = text.replace(/\./g, "%2E");
  return encodeURIComponent(text);
}

// A page URL reversed with the placeholder "UID" as its last segment, for the pod ``uid``.
export function podURL(template, uid) {
  return template.replace(/\/UID\/$/, `/${pathSegment(uid)}/`);
}

// URL state: every view setting lives in the query string so a link can be shared.
export function getParams() {
  return new URLSearchParams(window.location.search);
}

export function setParams(changes) {
  const params = getParams();
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === "") params.delete(k);
    else params.set(k, v);
  }
  const qs = params.toString();
  history.replaceState(null, "", window.location.pathname + (qs ? `?${qs}` : "") + window.location.hash);
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child);
  return node;
}

export async function fetchJSON(url) {
  const response = await fetch(url, { credentials: "same-origin" }); // as the page's <link rel=preload>
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const message = body.error ? body.error.message : `HTTP ${response.status}`;
    throw new Error(message);
  }
  return body;
}

// plotly.js: pages load the partial bundle (bar, pie, scatter: dashboard/plotly_bundles.py), a quarter of
// the full one's parse time; a figure with WebGL traces (`fig.gl`) fetches the full bundle once. A chart
// the partial bundle drew is purged before the swap, which drops its event handlers: `plot` returns true
// then, and the caller attaches them again.
let fullPlotly = null;

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`${src} did not load`));
    document.head.append(script);
  });
}

export async function plot(chart, fig, config) {
  let swapped = false;
  if (fig.gl && !window.Plotly.__podlifeFull) {
    const partial = window.Plotly;
    fullPlotly ??= loadScript(pageData().plotly_gl_js);
    await fullPlotly;
    window.Plotly.__podlifeFull = true;
    if (partial !== window.Plotly && chart._fullLayout) {
      partial.purge(chart);
      swapped = true;
    }
  }
  await window.Plotly.react(chart, fig.data, fig.layout, config);
  return swapped;
}
