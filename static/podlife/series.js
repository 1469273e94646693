// Workload and PDB status over time: figures built on the server (timelines/web/figures.py), drawn here.
import { pageData } from "./common.js";

const page = pageData();
if (page.status_figure) {
  const fig = page.status_figure;
  Plotly.newPlot(document.getElementById("status-chart"), fig.data, fig.layout, { responsive: true, displaylogo: false });
}
