// Level of detail from the server (issue #17): a namespace window with more pods than a chart can tell
// apart comes as bands of consecutive pods (podlife.window-overview/v1, dashboard/fleet.py), each band one
// row whose bars are its pods' worker phases merged to the pixel; zooming in fetches the zoomed range,
// which comes pod by pod once few enough pods overlap it. Kept apart from timeline-page.js on purpose.
import { el, podURL } from "./common.js";

export function isBands(data) {
  return !!data && data.detail === "bands";
}

// The API URL of a window, asking for bands when it is crowded (px: the chart's width in pixels).
export function lodURL(api, from, to, px) {
  const q = new URLSearchParams();
  if (from) q.set("from", from);
  if (to) q.set("to", to);
  q.set("lanes", "worker");
  q.set("detail", "auto");
  q.set("px", String(Math.max(100, Math.min(10000, Math.round(px)))));
  return `${api}?${q}`;
}

// Bands are few (at most a few thousand bars): SVG, whose first draw costs far less than starting WebGL
// (in software GL, most of a WebGL chart's first draw), each state's bars as one filled path with a
// hover layer (gantt.js), not a group and path a bar.
export function bandConfig(cfg) {
  return { ...cfg, webgl_threshold: Infinity, fill_bars: true };
}

// Bands → the rows buildFigure draws (one row a band; its label says which pods).
export function bandRows(data) {
  const total = data.pods_total.toLocaleString("en-US");
  return data.bands.map((b) => {
    const label = `pods ${(b.first + 1).toLocaleString("en-US")}–${(b.first + b.pods).toLocaleString("en-US")}`;
    return {
      key: b.key, uid: b.key, band: true, label, name: label, namespace: "",
      title: `${label} of ${total} (${b.first_name} … ${b.last_name})` +
        (b.undrawn ? ` · ${b.undrawn} interval${b.undrawn === 1 ? "" : "s"} under a pixel not drawn: zoom in` : ""),
      intervals: b.intervals, markers: [], findings: b.findings,
    };
  });
}

// The pod table under the chart from the overview's first pods (the chart's order).
export function renderBandTable(data, table, countEl, podUrl) {
  if (!table) return;
  const frag = document.createDocumentFragment();
  for (const r of data.table) {
    const worker = r.worker ? `${r.worker[0]}${{ inferred: " (inferred)", kubelet: " (from kubelet lines)" }[r.worker[1]] || ""}` : "";
    frag.append(
      el("tr", { "data-uid": r.uid },
        el("td", { text: r.namespace }), el("td", {}, el("a", { href: podURL(podUrl, r.uid), text: r.name || r.uid })),
        el("td", { text: worker }), el("td", { text: r.phase || "" }),
        el("td", { class: r.findings.length ? "bad" : "", text: r.findings.join(", ") }),
      ),
    );
  }
  table.replaceChildren(frag);
  const n = data.pods_total;
  countEl.textContent = `${n} pod${n === 1 ? "" : "s"}` + (n > data.table.length ? ` (first ${data.table.length.toLocaleString("en-US")} listed)` : "") +
    ` · ${data.pods_per_band} a row: zoom in for every pod`;
}
