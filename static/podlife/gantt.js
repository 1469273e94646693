// The Gantt: one row per pod (or per lane on the pod page). Worker setup / running / terminating / cleanup
// in their own colours; each source drawn its own way (cfg.provenance: observed solid, inferred from kubelet
// lines cross-hatched, inferred from the API hatched and translucent); an unknown bound said in the hover;
// markers as symbols (those closer than cfg.marker_cluster_px at the current zoom drawn as one, with their
// count), findings as bands behind their row in their severity's colour, with an ✕ at the row's top edge
// (never over a phase). The legend is grouped by lane: worker, API, containers, conditions, node.
// Self-contained: it reads no page global; everything comes in through rows, cfg (figures.gantt_config)
// and opts (the time zone, the window's end, the view), so the HTML export draws with it too.
// SVG bars up to `webgl_threshold` segments, WebGL lines (scattergl) past it; bands of pods (cfg.fill_bars,
// lod.js) as filled polygons, one SVG path a trace.
import { axisValue, display, duration, plotlyText, toMicros, zoneText } from "./common.js";

// A podlife.timeline/v2 document (REST or live delta) → a row of the compact window shape.
export function rowFromTimeline(tl, lanes) {
  const pod = tl.pod || {};
  const intervals = [];
  for (const [lane, items] of Object.entries(tl.lanes || {})) {
    if (lanes && !lanes.includes(lane)) continue;
    for (const iv of items) {
      const a = iv.attrs || {};
      intervals.push([lane, iv.state, iv.start, iv.end, iv.source, iv.evidence, unknownBounds(a)]);
    }
  }
  return {
    uid: pod.uid,
    namespace: pod.namespace || "",
    name: pod.name || "",
    node: pod.node || "",
    owner_kind: (pod.owner && pod.owner.kind) || "",
    owner_name: (pod.owner && pod.owner.name) || "",
    phase: pod.phase || "",
    created_at: pod.created_at,
    deleted_at: pod.deleted_at,
    intervals,
    markers: (tl.markers || []).map((m) => [m.at, m.kind, m.reason, m.message, m.evidence]),
    findings: (tl.findings || []).map((f) => [f.kind, f.severity, f.message, f.start, f.end, f.evidence]),
  };
}

// The legend group of a lane: worker, API, containers, conditions (any other pod lane), node (node:*).
export function laneGroup(lane) {
  if (lane === "worker") return "worker";
  if (lane === "api") return "API";
  if (lane.startsWith("container:") || lane === "containers") return "containers";
  if (lane.startsWith("node:")) return "node";
  return "conditions";
}

// Markers of one row (sorted or not) → clusters: markers within `gapUs` of the first of a cluster are one.
// Each cluster is {at (µs, its first marker), items: [...markers]}; gapUs 0 clusters only equal instants.
export function clusterMarkers(markers, gapUs) {
  const sorted = [...markers].sort((a, b) => a.us - b.us);
  const out = [];
  for (const m of sorted) {
    const last = out[out.length - 1];
    if (last && m.us - last.at <= gapUs) last.items.push(m);
    else out.push({ at: m.us, items: [m] });
  }
  return out;
}

function colour(cfg, state) {
  return cfg.colours[state] || cfg.fallback;
}

// Which bounds of an interval the evidence does not hold (timeline/v2 attrs), as hover text; and who began
// a termination when an audit log says (attrs.who, the evictions refused before it).
export function unknownBounds(a) {
  const parts = [];
  if (a.who) {
    const refused = a.attempts_before ? ` after ${a.attempts_before} refused eviction${a.attempts_before === 1 ? "" : "s"}` : "";
    parts.push(`${a.request === "eviction" ? "evicted" : "requested"} by ${a.who}${refused}`);
  }
  if (a.start_unknown) parts.push("began at or before its start");
  if (a.end_unknown) parts.push(a.seen_until && !a.end_from ? `seen until ${a.seen_until}, end unknown` : "lasted at least until its end, end unknown");
  if (a.between) parts.push(`between ${a.between.join(" and ")}`);
  return parts.join("; ");
}

function style(cfg, source) {
  const p = cfg.provenance || {};
  return p[source] || p.inferred || { label: source, opacity: 0.55, pattern: "/", dash: "dot" };
}

// rows: [{key, label, title, intervals: [[lane,state,start,end,source,evidence]], markers, findings}]
// opts: {tz, windowEnd (µs, for open intervals), height, viewUs (visible span), chartPx (the chart's width;
// or plotPx, the plot area's own)}
// The zoom (x0, x1 in µs) that shows a finding's span with a margin on both sides.
export function findingZoom(s0, e0) {
  const pad = Math.max((e0 - s0) * 0.15, 2e6);
  return [s0 - pad, Math.max(e0, s0) + pad];
}

export function buildFigure(rows, cfg, opts) {
  const tz = opts.tz;
  const end = opts.windowEnd;
  const labels = rows.length <= cfg.label_limit;
  const labelChars = labels ? Math.max(8, ...rows.map((r) => Math.min(60, r.label.length) + 2 * (r.depth || 0))) : 0;
  const margin = { l: labels ? Math.min(440, 20 + 7 * labelChars) : 40, r: 20 };
  // The plot's own width: the chart's (opts.chartPx) less the labels' column and the right margin.
  const plotPx = Math.max(opts.chartPx ? opts.chartPx - margin.l - margin.r : opts.plotPx || 1000, 200);
  // Minimum drawn width: a 3-second phase in a 6-hour view still shows as cfg.min_bar_px pixels; the hover
  // keeps its true start, end and duration. The pages redraw on zoom, so the floor follows the view.
  const minMs = opts.viewUs ? (opts.viewUs / plotPx) * cfg.min_bar_px / 1000 : 0.001;
  let segments = 0;
  for (const r of rows) segments += r.intervals.length;
  const gl = segments > cfg.webgl_threshold;
  const fills = !gl && !!cfg.fill_bars;
  const pxUs = opts.viewUs ? opts.viewUs / plotPx : 0;
  const groups = new Map();
  const markerPts = { event: [], warning: [], kubelet: [] };
  const clusters = [];
  // Markers closer than cfg.marker_cluster_px at this zoom are one marker with a count (none without a view).
  const clusterUs = pxUs ? pxUs * (cfg.marker_cluster_px ?? 12) : 0;
  const findingBands = [];
  const findingPts = [];
  const pendingTails = [];
  // Level of detail for WebGL: a segment shorter than a pixel at the current zoom is invisible, so it
  // lengthens the segment before it instead of adding points (zooming in redraws with full detail).
  const detail = gl && opts.detailUs ? opts.detailUs : 0;
  rows.forEach((r, y) => {
    let last = null;
    for (const [lane, state, s, e, source, evidence, unknown] of r.intervals) {
      const s0 = toMicros(s);
      const e0 = e ? toMicros(e) : Math.max(end || s0, s0);
      if (detail && last && e0 - s0 < detail && s0 - last.g.x[last.i] < detail) {
        last.g.x[last.i] = Math.max(last.g.x[last.i], e0);
        continue;
      }
      const lg = laneGroup(lane);
      const key = `${lg}|${state}|${source}`;
      if (!groups.has(key)) groups.set(key, { lane: lg, state, source, y: [], base: [], x: [], text: [], custom: [] });
      const g = groups.get(key);
      const hover =
        `<b>${plotlyText(r.title)}</b><br>${plotlyText(lane)}: <b>${plotlyText(state)}</b> (${source})` +
        `<br>${display(s0, tz)} → ${e ? display(e0, tz) : "open"}<br>${duration(e ? e0 - s0 : null)}` +
        (unknown ? `<br><i>${plotlyText(unknown)}</i>` : "") +
        (evidence && evidence.length ? `<br>evidence: ${plotlyText(evidence.slice(0, 8).join(", "))}` : "");
      g.y.push(y);
      g.base.push(s0);
      g.x.push(e0);
      g.text.push(hover);
      g.custom.push([r.key, (evidence || []).join(","), lane]);
      last = { g, i: g.y.length - 1 };
    }
    const rowMarkers = (r.markers || []).map(([at, kind, reason, message, evidence]) => ({
      us: toMicros(at), reason, message: zoneText(message, tz), evidence: evidence || [],
      bucket: kind === "kubelet" ? "kubelet" : /Warning|Failed|Kill|Evict|Back|Unhealthy/.test(reason) ? "warning" : "event",
    }));
    for (const c of clusterMarkers(rowMarkers, clusterUs)) {
      if (c.items.length === 1) {
        const m = c.items[0];
        markerPts[m.bucket].push({
          x: axisValue(m.us, tz), y,
          text: `<b>${plotlyText(r.title)}</b><br>${plotlyText(m.reason)}: ${plotlyText(m.message)}<br>${display(m.us, tz)}`,
          custom: [r.key, m.evidence.join(","), "marker"],
        });
        continue;
      }
      const last = c.items[c.items.length - 1].us;
      const shown = c.items.slice(0, 10).map((m) => `${display(m.us, tz).slice(11)} ${plotlyText(m.reason)}: ${plotlyText(m.message.slice(0, 80))}`);
      clusters.push({
        x: axisValue(c.at + (last - c.at) / 2, tz), y, n: c.items.length,
        warning: c.items.some((m) => m.bucket === "warning"),
        text: `<b>${plotlyText(r.title)}</b><br>${c.items.length} markers in ${duration(last - c.at)} (zoom in to separate them)<br>` +
          shown.join("<br>") + (c.items.length > 10 ? `<br>… ${c.items.length - 10} more` : ""),
        custom: [r.key, c.items.flatMap((m) => m.evidence).join(","), "marker"],
      });
    }
    // Kubelet evidence of the pod's node stops before the API's: the worker lane after it is not known yet.
    const pending = r.freshness && r.freshness.pending_since ? toMicros(r.freshness.pending_since) : null;
    if (pending !== null) {
      const e0 = Math.max(end || pending, pending);
      pendingTails.push({
        y, s0: pending, e0,
        text: `<b>${plotlyText(r.title)}</b><br>worker: <b>kubelet evidence pending</b> since ${display(pending, tz)}` +
          `<br>the API has seen this pod later than any kubelet evidence of its node arrived;` +
          `<br>the worker state after this instant is not known yet`,
        custom: [r.key, "", "pending"],
      });
    }
    for (const [kind, severity, message, s, e, evidence] of r.findings || []) {
      const s0 = toMicros(s);
      const e0 = e ? toMicros(e) : Math.max(end || s0, s0);
      const waits = pending !== null && (!e || e0 >= pending);
      const text =
        `<b>${plotlyText(kind)}</b> (${plotlyText(severity)})<br>${plotlyText(r.title)}<br>${plotlyText(zoneText(message, tz))}` +
        `<br>${display(s0, tz)} → ${e ? display(e0, tz) : "open"}` +
        (waits ? `<br><i>depends on kubelet evidence pending since ${display(pending, tz)}</i>` : "");
      findingBands.push({ y, s0, e0, severity, text, custom: [r.key, (evidence || []).join(","), "finding"] });
      // custom[3], custom[4]: the finding's span (µs), for "zoom to finding" on click.
      // The ✕ sits on the row's top edge, above the bar: it marks the start without covering the phase.
      findingPts.push({ x: axisValue(s0, tz), y: y - 0.47, severity, text, custom: [r.key, (evidence || []).join(","), "finding", s0, e0] });
    }
  });

  const traces = [];
  // Findings first, so the bars draw on top of the red band.
  if (findingBands.length) {
    if (gl) {
      const x = [], y = [], text = [];
      for (const b of findingBands) {
        x.push(axisValue(b.s0, tz), axisValue(b.e0, tz), null);
        y.push(b.y, b.y, null);
        text.push(b.text, b.text, null);
      }
      traces.push({ type: "scattergl", mode: "lines", name: "finding", legendgroup: "findings", x, y, hoverinfo: "skip",
        line: { color: "rgba(196,60,57,0.35)", width: Math.max(3, lineWidth(rows.length) + 4) } });
    } else if (fills) {
      const bySeverity = new Map();
      for (const b of findingBands) {
        if (!bySeverity.has(b.severity)) bySeverity.set(b.severity, []);
        bySeverity.get(b.severity).push(b);
      }
      let first = true;
      for (const [severity, bands] of bySeverity) {
        traces.push(polygons(bands, 0.95, tz, minMs * 1000, {
          name: "finding", legendgroup: "findings", showlegend: first, fillcolor: band(cfg, severity, 0.3),
        }));
        first = false;
      }
    } else {
      traces.push({
        type: "bar", orientation: "h", name: "finding", y: findingBands.map((b) => b.y),
        base: findingBands.map((b) => axisValue(b.s0, tz)), x: findingBands.map((b) => Math.max((b.e0 - b.s0) / 1000, minMs)),
        // Behind the bars and never hovered: the bars keep their hover; the ✕ at the finding's start and
        // the findings table carry its text.
        // The band fills the row around the bar (0.92 of it, the bar 0.6), no outline: the phase's colour
        // is never under it, only its own row's background.
        width: 0.92, hoverinfo: "skip", legendgroup: "findings",
        marker: { color: findingBands.map((b) => band(cfg, b.severity, 0.22)), line: { width: 0 } },
      });
    }
  }
  const groupOrder = cfg.legend_groups || [];
  const order = (k) => {
    const i = (cfg.state_order || cfg.worker_order).indexOf(k.state);
    const lg = groupOrder.indexOf(k.lane);
    return (lg < 0 ? 99 : lg) * 1e4 + (i < 0 ? 999 : i) * 3 + ({ observed: 0, kubelet: 1 }[k.source] ?? 2);
  };
  const titled = new Set();
  const legendGroup = (lane) => {
    const first = !titled.has(lane);
    titled.add(lane);
    return first ? { legendgroup: lane, legendgrouptitle: { text: lane } } : { legendgroup: lane };
  };
  for (const g of [...groups.values()].sort((a, b) => order(a) - order(b) || a.state.localeCompare(b.state))) {
    const st = style(cfg, g.source);
    const name = st.label ? `${g.state} (${st.label})` : g.state;
    const lg = legendGroup(g.lane);
    if (gl) {
      const x = [], y = [], text = [];
      for (let i = 0; i < g.y.length; i++) {
        x.push(axisValue(g.base[i], tz), axisValue(g.x[i], tz), null);
        y.push(g.y[i], g.y[i], null);
        text.push(g.text[i], null, null); // hover on the start vertex: half the strings for WebGL
      }
      traces.push({
        type: "scattergl", mode: "lines", name: plotlyText(name), x, y, hovertext: text, hoverinfo: "text",
        opacity: st.opacity, ...lg,
        line: { color: colour(cfg, g.state), width: lineWidth(rows.length), dash: st.dash },
      });
    } else if (fills) {
      const bars = g.y.map((y, i) => ({ y, s0: g.base[i], e0: g.x[i], text: g.text[i], custom: g.custom[i] }));
      const id = plotlyText(name);
      traces.push(
        polygons(bars, 0.6, tz, minMs * 1000, {
          name: id, ...lg, opacity: st.opacity, fillcolor: colour(cfg, g.state),
          fillpattern: st.pattern ? { shape: st.pattern, fgcolor: "#ffffff", fgopacity: 0.9, size: 6, solidity: 0.35 } : undefined,
        }),
        hoverLayer(bars, tz, minMs * 1000, pxUs * HOVER_STEP_PX, { name: id, legendgroup: g.lane }),
      );
    } else {
      traces.push({
        type: "bar", orientation: "h", name: plotlyText(name), y: g.y, ...lg,
        base: g.base.map((v) => axisValue(v, tz)),
        x: g.x.map((v, i) => Math.max((v - g.base[i]) / 1000, minMs)),
        width: 0.6, opacity: st.opacity,
        marker: {
          color: colour(cfg, g.state),
          line: { color: st.pattern ? colour(cfg, g.state) : "rgba(0,0,0,0.25)", width: 1 },
          pattern: st.pattern ? { shape: st.pattern, fgcolor: "#ffffff", fgopacity: 0.9, size: 6, solidity: 0.35 } : undefined,
        },
        hovertext: g.text, hovertemplate: "%{hovertext}<extra></extra>", customdata: g.custom,
      });
    }
  }
  if (pendingTails.length) {
    const p = cfg.pending;
    traces.push(gl
      ? {
        type: "scattergl", mode: "lines", name: p.label, legendgroup: "worker",
        x: pendingTails.flatMap((b) => [axisValue(b.s0, tz), axisValue(b.e0, tz), null]),
        y: pendingTails.flatMap((b) => [b.y, b.y, null]),
        hovertext: pendingTails.flatMap((b) => [b.text, null, null]), hoverinfo: "text",
        line: { color: p.colour, width: lineWidth(rows.length), dash: "dot" },
      }
      : {
        type: "bar", orientation: "h", name: p.label, legendgroup: "worker", y: pendingTails.map((b) => b.y),
        base: pendingTails.map((b) => axisValue(b.s0, tz)),
        x: pendingTails.map((b) => Math.max((b.e0 - b.s0) / 1000, minMs)),
        width: 0.6,
        marker: { color: "#ffffff", line: { color: p.colour, width: 1 },
          pattern: { shape: "/", fgcolor: p.colour, bgcolor: "#ffffff", size: 5, solidity: 0.4 } },
        hovertext: pendingTails.map((b) => b.text), hovertemplate: "%{hovertext}<extra></extra>",
        customdata: pendingTails.map((b) => b.custom),
      });
  }
  const symbols = { event: ["diamond", "#1d2330"], warning: ["diamond", "#D55E00"], kubelet: ["triangle-up", "#CC79A7"] };
  for (const [bucket, pts] of Object.entries(markerPts)) {
    if (!pts.length) continue;
    traces.push({
      ...legendGroup("markers"),
      type: gl ? "scattergl" : "scatter", mode: "markers", name: `${bucket === "kubelet" ? "kubelet line" : bucket === "warning" ? "warning event" : "event"}`,
      x: pts.map((p) => p.x), y: pts.map((p) => p.y), hovertext: pts.map((p) => p.text),
      hovertemplate: "%{hovertext}<extra></extra>", customdata: pts.map((p) => p.custom),
      marker: { symbol: symbols[bucket][0], color: symbols[bucket][1], size: gl ? 5 : 9, line: { color: "#fff", width: 1 } },
    });
  }
  if (clusters.length) {
    // Always SVG text (WebGL draws no text in the partial bundle's scattergl): a count a cluster.
    traces.push({
      ...legendGroup("markers"),
      type: "scatter", mode: "markers+text", name: "markers (count)",
      x: clusters.map((c) => c.x), y: clusters.map((c) => c.y), text: clusters.map((c) => String(c.n)),
      textposition: "middle center", textfont: { color: "#ffffff", size: 9 },
      hovertext: clusters.map((c) => c.text), hovertemplate: "%{hovertext}<extra></extra>",
      customdata: clusters.map((c) => c.custom),
      marker: { symbol: "circle", size: clusters.map((c) => Math.min(12 + 2 * String(c.n).length, 22)),
        color: clusters.map((c) => (c.warning ? symbols.warning[1] : symbols.event[1])), line: { color: "#fff", width: 1 } },
    });
  }
  if (findingPts.length) {
    traces.push({
      ...(titled.has("findings") ? { legendgroup: "findings" } : legendGroup("findings")),
      type: gl ? "scattergl" : "scatter", mode: "markers", name: "finding start",
      x: findingPts.map((p) => p.x), y: findingPts.map((p) => p.y), hovertext: findingPts.map((p) => p.text),
      hovertemplate: "%{hovertext}<extra></extra>", customdata: findingPts.map((p) => p.custom),
      // Not clipped where the first row's edge is the plot's; sized below, once the rows' height is known.
      cliponaxis: false,
      marker: { symbol: "x", size: gl ? 5 : 7, color: findingPts.map((p) => cfg.severity[p.severity] || "#CC3311") },
    });
  }
  // Legend groups in lane order (worker, API, containers, conditions, node, markers, findings) whatever the
  // order the traces are drawn in (the findings' band is drawn first, behind everything).
  traces.forEach((t, i) => {
    const g = groupOrder.indexOf(t.legendgroup);
    t.legendrank = 1000 * (g < 0 ? groupOrder.length : g) + i;
  });
  // The legend: one column a lane group (worker, API, containers, conditions, node, markers, findings),
  // each titled, side by side below the axis; the bottom margin grows with its tallest column.
  const perGroup = new Map();
  for (const t of traces) if (t.showlegend !== false) perGroup.set(t.legendgroup || "", (perGroup.get(t.legendgroup || "") || 0) + 1);
  const legendPx = perGroup.size ? (Math.max(...perGroup.values()) + 1) * 19 * Math.ceil(perGroup.size / 5) + 10 : 0;
  const bottom = 50 + legendPx;
  // Labelled rows get cfg.row_px each (no two labels overlap, every bar at least ~9 px high); WebGL: a fixed
  // 800 px overview (drawing cost grows with the canvas, not the points: a 2,400 px canvas costs four
  // times a 400 px one in software GL); box-zoom on y to separate rows.
  const rowPx = cfg.row_px || 16;
  const plotHeight = opts.height || (gl && !labels ? 800 : labels ? Math.max(260, rows.length * rowPx + 40) : Math.min(Math.max(260, rows.length * 3 + 120), 2400));
  // A chart taller than a screen (hundreds of labelled rows) has its time axis and legend on top, where
  // the reader starts, not thousands of pixels below.
  const tall = plotHeight > 900;
  const top = tall ? 34 + 40 + legendPx : 34;
  const height = plotHeight + legendPx + (tall ? 40 : 0);
  const tick = (r) => {
    const text = plotlyText(r.label.length > 60 ? r.label.slice(0, 59) + "…" : r.label);
    const indent = "\u2002".repeat(2 * (r.depth || 0)); // en spaces: Plotly keeps them, unlike spaces
    return r.header ? `${indent}<b>${text}</b>` : indent + text;
  };
  const layout = {
    barmode: "overlay",
    height,
    // Top margin: room for Plotly's mode bar above the first lane, never over it.
    margin: { t: top, l: margin.l, r: margin.r, b: tall ? 30 : bottom },
    xaxis: { type: "date", hoverformat: "%Y-%m-%d %H:%M:%S.%f", side: tall ? "top" : "bottom" },
    yaxis: {
      // Every row, first at the top: an explicit range, so a row without bars (an owner's header) keeps
      // its place; double-click goes back to it.
      autorange: rows.length ? false : "reversed",
      range: rows.length ? [rows.length - 0.5, -0.5] : [0, 1],
      tickmode: labels ? "array" : "auto",
      tickvals: labels ? rows.map((_, i) => i) : undefined,
      ticktext: labels ? rows.map(tick) : undefined,
      showticklabels: labels,
      zeroline: false,
      tickfont: { size: 11 },
    },
    legend: tall
      ? { orientation: "h", traceorder: "grouped", yanchor: "bottom", y: 1 + 40 / (height - top - 30), groupclick: "toggleitem" }
      : { orientation: "h", traceorder: "grouped", yanchor: "top", y: -40 / Math.max(height - 34 - bottom, 100), groupclick: "toggleitem" },
    hovermode: "closest",
    dragmode: "zoom",
    uirevision: "keep",
  };
  if (opts.x0 && opts.x1) layout.xaxis.range = [axisValue(opts.x0, tz), axisValue(opts.x1, tz)];
  // The ✕ of a finding sits on its row's top edge (0.47 of a row above the centre) and must end above the
  // bar's top (0.3 above): at most a third of a row's pixels across, so it never covers a phase.
  const drawnRowPx = (height - layout.margin.t - layout.margin.b) / Math.max(rows.length, 1);
  for (const t of traces) {
    if (t.name === "finding start") t.marker.size = Math.max(3, Math.min(9, Math.floor(0.3 * drawnRowPx)));
  }
  return { data: traces, layout, gl };
}

// Bars {y, s0, e0 (µs)} as one scatter trace of filled rectangles separated by nulls: Plotly draws the
// whole trace as one SVG path, where it gives every bar of a bar trace its own group, path and styles (a
// few thousand bars: most of a banded chart's draw). A rectangle is at least minUs wide, as a bar.
function polygons(bars, width, tz, minUs, props) {
  const x = [], y = [];
  const h = width / 2;
  for (const b of bars) {
    const s = axisValue(b.s0, tz), e = axisValue(Math.max(b.e0, b.s0 + minUs), tz);
    x.push(s, e, e, s, null);
    y.push(b.y - h, b.y - h, b.y + h, b.y + h, null);
  }
  return { type: "scatter", mode: "none", fill: "toself", x, y, hoverinfo: "skip", ...props };
}

// Hover points along each polygon bar (its start, its end and every `stepUs` between, on its row), drawn
// not at all (mode "none") but hovered as a bar is: anywhere on a bar is within Plotly's hover distance
// (20 px) of one of its points.
const HOVER_STEP_PX = 16;
function hoverLayer(bars, tz, minUs, stepUs, props) {
  const x = [], y = [], text = [], custom = [];
  for (const b of bars) {
    const e0 = Math.max(b.e0, b.s0 + minUs);
    const n = stepUs > 0 ? Math.min(Math.ceil((e0 - b.s0) / stepUs), 500) : 1;
    for (let i = 0; i <= n; i++) {
      x.push(axisValue(b.s0 + ((e0 - b.s0) * i) / n, tz));
      y.push(b.y);
      text.push(b.text);
      custom.push(b.custom);
    }
  }
  return {
    type: "scatter", mode: "none", x, y, hovertext: text, customdata: custom, hoveron: "points",
    hovertemplate: "%{hovertext}<extra></extra>", showlegend: false, ...props,
  };
}

// A finding's severity colour with some transparency (bands behind the bars).
function band(cfg, severity, alpha) {
  const hex = cfg.severity[severity] || "#c43c39";
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  return `rgba(${r},${g},${b},${alpha})`;
}

function lineWidth(n) {
  return Math.max(1, Math.min(14, Math.floor(700 / Math.max(n, 1))));
}
