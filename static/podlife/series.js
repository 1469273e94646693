// PDB status over time: a figure built on the server (dashboard/web/figures.py), drawn here in the zone the
// switch picks, with the page's time cells.
import { PLOT_CONFIG, nextZone, pageData, renderTimes, zoneFigure, zoneParam } from "./common.js";

const page = pageData();
let tz = zoneParam();

function draw() {
  renderTimes(tz);
  if (!page.status_figure) return;
  const fig = zoneFigure(page.status_figure, tz);
  Plotly.react(document.getElementById("status-chart"), fig.data, fig.layout, PLOT_CONFIG);
}

const toggle = document.getElementById("tz-toggle");
if (toggle) {
  toggle.addEventListener("click", () => {
    tz = nextZone(tz);
    draw();
  });
}
draw();
