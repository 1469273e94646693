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

// Plotly date-axis value for an instant: milliseconds (fraction keeps the microseconds), shifted into the
// chosen zone (Plotly draws numbers on a date axis as UTC wall time). Numbers, not strings: Plotly parses
// date strings point by point, which is the slow part of a 10,000-row chart.
export function axisValue(us, tz) {
  if (us === null || us === undefined) return null;
  return (tz === "local" ? us + localOffsetMicros(us) : us) / 1000;
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

// Microseconds → "YYYY-MM-DD HH:MM:SS.ffffff" in UTC or local time (hover text, inputs, tables).
export function display(us, tz) {
  if (us === null || us === undefined) return null;
  const shifted = tz === "local" ? us + localOffsetMicros(us) : us;
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

// Inverse of display(): a Plotly axis value (display string) → UTC microseconds.
export function fromDisplay(text, tz) {
  // Plotly's range values carry no offset: they are the naive display strings this page made.
  const us = toMicros(String(text).trim().replace(" ", "T") + "Z");
  if (us === null) return null;
  return tz === "local" ? us - localOffsetMicros(us) : us;
}

export function isoUTC(us) {
  return display(us, "utc").replace(" ", "T") + "Z";
}

export function tzLabel(tz) {
  if (tz !== "local") return "UTC";
  const off = -new Date().getTimezoneOffset();
  return `local (UTC${off >= 0 ? "+" : "-"}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)})`;
}

export function duration(us) {
  if (us === null || us === undefined) return "open";
  const s = us / 1e6;
  if (s < 1) return `${(us / 1000).toFixed(3)} ms`;
  if (s < 120) return `${s.toFixed(6)} s`;
  if (s < 7200) return `${Math.floor(s / 60)} min ${(s % 60).toFixed(3)} s`;
  return `${(s / 3600).toFixed(2)} h`;
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

// plotly.js: pages load the partial bundle (bar, pie, scatter: timelines/plotly_bundles.py), a quarter of
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
