// The incident page (timelines/export/html.py): reads the JSON data block, draws the Gantt with the
// inlined Plotly, and fills the summary and findings tables. Text goes into the DOM with textContent
// only; text that goes into Plotly is HTML-escaped (Plotly renders a subset of HTML in labels).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("incident-data").textContent);
  var meta = data.meta, pods = data.pods || [], findings = data.findings || [];
  // The dashboard's colours (timelines/web/figures.py STATE_COLOURS).
  var COLOURS = {
    setup: "#2f7ed8", terminating: "#e4892b", cleanup: "#7b5ea7",
    pending: "#c5cbd3", scheduled: "#a8b6c8", initializing: "#7fa7d1", running: "#3fa34d",
    succeeded: "#6b8f71", failed: "#c43c39", deleted: "#5a6270"
  };
  var SEVERITY = { info: "#138d90", warning: "#d9a400", critical: "#c43c39" };  // figures.py SEVERITY_COLOURS
  var WORKER = ["setup", "running", "terminating", "cleanup"];
  var until = Date.parse(meta.until);

  function esc(s) {
    return String(s == null ? "" : s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&#34;").replace(/'/g, "&#39;");  // Plotly decodes &#34; but not &quot;
  }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text != null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function seconds(start, end) {
    if (!end) return null;
    return (Date.parse(end) - Date.parse(start)) / 1000;
  }
  function label(p) {
    return (p.namespace || "?") + "/" + (p.name || p.uid) + " · " + p.uid.slice(0, 8);
  }

  // --- legend: every colour and symbol the Gantt below draws ----------------------------------------
  var legend = document.getElementById("legend");
  function item(swatch, text) {
    var it = el("span", null, "item");
    it.appendChild(swatch);
    it.appendChild(document.createTextNode(text));
    legend.appendChild(it);
  }
  function swatch(colour, cls, opacity) {
    var sw = el("span", null, "swatch" + (cls ? " " + cls : ""));
    sw.style.background = colour;
    if (cls === "band") sw.style.borderColor = colour;
    if (opacity) sw.style.opacity = String(opacity);
    return sw;
  }
  function symbol(ch, colour, name) {
    var sw = el("span", ch, "symbol");
    sw.style.color = colour;
    sw.dataset.symbol = name;
    return sw;
  }
  legend.appendChild(el("span", "worker:", "group"));
  WORKER.forEach(function (state) { item(swatch(COLOURS[state]), state); });
  item(swatch("#6c7a89", "kubelet", 0.8), "cross-hatched: from kubelet lines");
  item(swatch("#6c7a89", "inferred", 0.55), "hatched, pale: inferred from the API");
  legend.appendChild(el("span", "API (thin strip):", "group"));
  ["pending", "scheduled", "initializing", "running", "succeeded", "failed", "deleted"].forEach(function (state) {
    item(swatch(COLOURS[state], "strip"), state);
  });
  legend.appendChild(el("span", "symbols:", "group"));
  item(symbol("○", "#1d232b", "circle"), "event");
  item(symbol("▲", "#e4892b", "triangle-up"), "warning event");
  item(symbol("✕", "#1d232b", "x"), "notable kubelet line");
  Object.keys(SEVERITY).forEach(function (sev) {
    item(symbol("★", SEVERITY[sev], "star"), sev + " finding (start)");
    item(swatch(SEVERITY[sev], "band"), sev + " finding span");
  });

  // --- Gantt ----------------------------------------------------------------------------------------
  var rows = pods.map(function (p, i) { return { pod: p, y: i }; });
  var traces = {}, shapes = [];
  function bar(key, name, colour, opts) {
    if (!traces[key]) {
      traces[key] = Object.assign({
        type: "bar", orientation: "h", name: name, base: [], x: [], y: [], hovertext: [],
        hoverinfo: "text", marker: { color: colour, line: { width: 0 } }, width: 0.55, showlegend: false
      }, opts || {});
    }
    return traces[key];
  }
  rows.forEach(function (row) {
    var p = row.pod;
    (p.lanes.worker || []).forEach(function (iv) {
      // observed solid; inferred from kubelet lines ("kubelet") cross-hatched; inferred from the API hatched.
      var inferred = iv[3] !== "observed";
      var shape = iv[3] === "kubelet" ? "x" : "/";
      var t = bar("w:" + iv[0] + ":" + iv[3], iv[0] + (iv[3] === "kubelet" ? " (from kubelet lines)" : inferred ? " (inferred)" : ""), COLOURS[iv[0]] || "#6c7a89",
        inferred ? { opacity: iv[3] === "kubelet" ? 0.8 : 0.55, marker: { color: COLOURS[iv[0]] || "#6c7a89", pattern: { shape: shape, fgcolor: "#ffffff", solidity: 0.35 } } } : {});
      var end = iv[2] ? Date.parse(iv[2]) : Math.max(until, Date.parse(iv[1]));
      t.base.push(iv[1]);
      t.x.push(Math.max(end - Date.parse(iv[1]), 1));
      t.y.push(row.y);
      t.hovertext.push(esc(label(p)) + "<br>worker " + esc(iv[0]) + " (" + esc(iv[3]) + ")<br>" + esc(iv[1]) + " → " + esc(iv[2] || "open"));
    });
    (p.lanes.api || []).forEach(function (iv) {
      var t = bar("a:" + iv[0], "api " + iv[0], COLOURS[iv[0]] || "#6c7a89", { width: 0.14, offset: 0.3 });
      var end = iv[2] ? Date.parse(iv[2]) : Math.max(until, Date.parse(iv[1]));
      t.base.push(iv[1]);
      t.x.push(Math.max(end - Date.parse(iv[1]), 1));
      t.y.push(row.y);
      t.hovertext.push(esc(label(p)) + "<br>api " + esc(iv[0]) + "<br>" + esc(iv[1]) + " → " + esc(iv[2] || "open"));
    });
  });
  var marks = { type: "scatter", mode: "markers", name: "markers", x: [], y: [], hovertext: [], hoverinfo: "text",
    marker: { symbol: [], size: 9, color: [], line: { width: 1, color: "#1d232b" } }, showlegend: false };
  var stars = { type: "scatter", mode: "markers", name: "findings", x: [], y: [], hovertext: [], hoverinfo: "text",
    marker: { symbol: "star", size: 15, color: [], line: { width: 1, color: "#1d232b" } }, showlegend: false };
  rows.forEach(function (row) {
    var p = row.pod;
    (p.markers || []).forEach(function (m) {
      marks.x.push(m[0]);
      marks.y.push(row.y - 0.38);
      marks.marker.symbol.push(m[1] === "kubelet" ? "x" : (m[4] === "Warning" ? "triangle-up" : "circle"));
      marks.marker.color.push(m[1] === "kubelet" ? "#1d232b" : (m[4] === "Warning" ? "#e4892b" : "#ffffff"));
      marks.hovertext.push(esc(label(p)) + "<br>" + esc(m[1]) + " " + esc(m[2]) + "<br>" + esc(m[3]).slice(0, 300));
    });
    (p.findings || []).forEach(function (f) {
      stars.x.push(f[2]);
      stars.y.push(row.y);
      stars.marker.color.push(SEVERITY[f[1]] || "#c43c39");
      stars.hovertext.push(esc(f[1]) + " " + esc(f[0]) + "<br>" + esc(f[4]));
      shapes.push({ type: "rect", xref: "x", yref: "y", x0: f[2], x1: f[3] || meta.until, y0: row.y - 0.48, y1: row.y + 0.48,
        fillcolor: SEVERITY[f[1]] || "#c43c39", opacity: 0.13, line: { width: 1, color: SEVERITY[f[1]] || "#c43c39" }, layer: "below" });
    });
  });
  var list = Object.keys(traces).sort().map(function (k) { return traces[k]; }).concat([marks, stars]);
  var flagged = {};
  pods.forEach(function (p) { if ((p.findings || []).length) flagged[p.uid] = true; });
  // Open on the stretch where something happened (the window can be hours around a minute of activity).
  var lo = Infinity, hi = -Infinity;
  pods.forEach(function (p) {
    ["worker", "api"].forEach(function (lane) {
      (p.lanes[lane] || []).forEach(function (iv) {
        lo = Math.min(lo, Date.parse(iv[1]));
        hi = Math.max(hi, Date.parse(iv[2] || p.last_observed || iv[1]));
      });
    });
  });
  var since = Date.parse(meta.since), range = [meta.since, meta.until];
  if (lo < hi) {
    var pad = Math.max((hi - lo) * 0.05, 1000);
    range = [new Date(Math.max(since, lo - pad)).toISOString(), new Date(Math.min(until, hi + pad)).toISOString()];
  }
  var layout = {
    barmode: "overlay", height: Math.max(320, 30 * rows.length + 110), margin: { l: 330, r: 20, t: 44, b: 40 },
    xaxis: { type: "date", range: range, title: { text: "UTC (drag to zoom, double-click to reset)" } },
    title: { text: esc(meta.title || ""), x: 0, xanchor: "left", font: { size: 14 } },
    yaxis: { autorange: "reversed", tickvals: rows.map(function (r) { return r.y; }),
      ticktext: rows.map(function (r) { return (flagged[r.pod.uid] ? "⚠ " : "") + esc(label(r.pod)); }), automargin: false },
    shapes: shapes, hovermode: "closest", showlegend: false
  };
  if (rows.length) {
    // No "Share chart..." button (plotly.js 4's default uploads to Plotly's cloud): as the pages'
    // PLOT_CONFIG (static/podlife/common.js); an export is opened anywhere, air-gapped included.
    Plotly.newPlot("gantt", list, layout, { displaylogo: false, responsive: true, showSendToCloud: false, plotlyServerURL: "", topojsonURL: "./" });
  } else {
    document.getElementById("gantt").appendChild(el("p", "No pod of this scope was alive in the window."));
  }
  document.getElementById("notes").textContent = (meta.notes || []).join(" · ");

  // --- tables ---------------------------------------------------------------------------------------
  function table(headers, body) {
    var t = el("table"), head = el("tr");
    headers.forEach(function (h) { head.appendChild(el("th", h)); });
    t.appendChild(head);
    body.forEach(function (cells) {
      var tr = el("tr");
      cells.forEach(function (c) {
        var td = el("td", c && typeof c === "object" ? c.text : c, c && typeof c === "object" ? c.cls : null);
        tr.appendChild(td);
      });
      t.appendChild(tr);
    });
    return t;
  }
  function phaseSeconds(p, state) {
    var total = null;
    (p.lanes.worker || []).forEach(function (iv) {
      if (iv[0] === state) { var s = seconds(iv[1], iv[2]); total = (total || 0) + (s == null ? (until - Date.parse(iv[1])) / 1000 : s); }
    });
    return total == null ? "" : { text: total.toFixed(3), cls: "num" };
  }
  document.getElementById("summary").appendChild(table(
    ["pod", "uid", "node", "phase", "worker", "setup s", "terminating s", "cleanup s", "findings"],
    pods.map(function (p) {
      var sources = {};
      (p.lanes.worker || []).forEach(function (iv) { sources[iv[3]] = true; });
      return [(p.namespace || "") + "/" + (p.name || ""), p.uid, p.node || "", p.phase || "",
        Object.keys(sources).sort().join(", "), phaseSeconds(p, "setup"), phaseSeconds(p, "terminating"),
        phaseSeconds(p, "cleanup"), { text: String((p.findings || []).length), cls: "num" }];
    })
  ));
  var order = { critical: 0, warning: 1, info: 2 };
  document.getElementById("findings").appendChild(findings.length ? table(
    ["severity", "kind", "subject", "start (UTC)", "end (UTC)", "message"],
    findings.slice().sort(function (a, b) { return (order[a.severity] - order[b.severity]) || (a.start < b.start ? -1 : 1); })
      .map(function (f) {
        return [{ text: f.severity, cls: "sev-" + f.severity }, f.kind, f.subject + " " + (f.subject_name || ""),
          f.start, f.end || "open", f.message];
      })
  ) : el("p", "No findings."));
})();
