// The Export button: start a background export of this page's scope, window and time zone, show its
// progress live, then download the file. The window is the one on screen (set by the page's own module on
// document.body.dataset), else the URL's from / to.
import { getParams, zoneParam } from "./common.js";

const form = document.getElementById("export-form");
const bar = document.getElementById("export-progress");
const statusEl = document.getElementById("export-status");

function windowBounds() {
  const params = getParams();
  const ds = document.body.dataset;
  return { since: ds.windowFrom || params.get("from") || "", until: ds.windowTo || params.get("to") || "" };
}

async function json(resp) {
  try {
    return await resp.json();
  } catch {
    return {};
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function exportNow(ev) {
  ev.preventDefault();
  const body = new URLSearchParams(new FormData(form));
  const { since, until } = windowBounds();
  if (since) body.set("since", since);
  if (until) body.set("until", until);
  // The zone this page shows: an HTML export opens in it. "local" is this browser's zone, which only the
  // browser knows: sent by its IANA name.
  const tz = zoneParam();
  if (tz !== "utc") body.set("tz", tz === "local" ? Intl.DateTimeFormat().resolvedOptions().timeZone : tz);
  const button = form.querySelector("button[type=submit]");
  button.disabled = true;
  bar.hidden = false;
  bar.removeAttribute("value");
  statusEl.textContent = "export queued…";
  try {
    const resp = await fetch(form.action, {
      method: "POST",
      body,
      credentials: "same-origin",
      headers: { "X-CSRFToken": body.get("csrfmiddlewaretoken") || "", Accept: "application/json" },
    });
    const job = await json(resp);
    if (!resp.ok) throw new Error(job.error || `HTTP ${resp.status}`);
    for (;;) {
      const status = await json(await fetch(job.status_url, { credentials: "same-origin" }));
      const p = status.progress || {};
      if (p.total) {
        bar.max = p.total;
        bar.value = p.done;
      }
      statusEl.textContent = `${status.state}: ${p.stage || ""} ${p.total ? `${p.done} / ${p.total}` : ""}`.trim();
      if (status.state === "done") {
        window.location.href = job.download_url;
        statusEl.textContent = "done: downloading";
        break;
      }
      if (status.state === "failed" || status.error) throw new Error(status.error || "the export failed");
      await sleep(500);
    }
  } catch (err) {
    statusEl.textContent = `export failed: ${err.message}`;
  } finally {
    button.disabled = false;
    bar.hidden = true;
  }
}

form.addEventListener("submit", exportNow);
