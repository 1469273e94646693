// The live socket of a page (node, namespace or pod: dashboard/web/consumers.py), shared by every page that
// draws live: reconnects with jittered exponential backoff (0.5 s doubling to 15 s), refetches after a
// reconnect, and keeps the badge honest: "live" only while the socket is up, a frame (at least the server's
// heartbeat, every `heartbeat_s` of hello) came within two heartbeats, and no collector stream of the
// cluster is stale (the consumer's `collector` frames); otherwise the badge names what is stale. The badge
// (silence, how far each stale stream is behind, the reconnect countdown) and every age on the page
// ([data-age-since]) tick once a second between frames: nothing freezes while the socket is quiet. A socket silent for six heartbeats (at least 30 s) is closed and opened again: a
// half-open connection never recovers on its own.
//
// watchLive({ ws, onDeltas(frame), onRefetch(frame | null), isPaused() }) returns { showLive } so a page's
// pause button can redraw the badge. onRefetch(null) is a reconnect (deltas may have been missed).

function behind(seconds) {
  if (seconds === null) return "no progress yet";
  return seconds < 120 ? `${Math.round(seconds)} s behind` : `${Math.round(seconds / 60)} min behind`;
}

// How old something is, from microseconds: "42 s", "3 min", "5 h", "2 d".
export function age(us) {
  const s = Math.max(0, Math.round(us / 1e6));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

// An element whose text says how old an instant is: data-age-since (µs since the epoch), the text around
// the age in data-age-before / data-age-after. tickAges() rewrites them all from the clock.
export function ageAttrs(sinceUs, before, after = "") {
  return { "data-age-since": String(sinceUs), "data-age-before": before, "data-age-after": after, text: `${before}${age(Date.now() * 1000 - sinceUs)}${after}` };
}

export function tickAges(root = document) {
  const now = Date.now() * 1000;
  for (const node of root.querySelectorAll("[data-age-since]")) {
    const text = `${node.dataset.ageBefore || ""}${age(now - Number(node.dataset.ageSince))}${node.dataset.ageAfter || ""}`;
    if (node.textContent !== text) node.textContent = text;
  }
}

function silentFor(ms) {
  const s = ms / 1000;
  return s < 120 ? `${s < 10 ? s.toFixed(1) : Math.round(s)} s` : `${Math.round(s / 60)} min`;
}

export function watchLive({ ws, onDeltas, onRefetch, isPaused = () => false }) {
  const liveEl = document.getElementById("live-state");
  const setLive = (text, cls) => {
    if (!liveEl) return;
    if (liveEl.textContent !== text) liveEl.textContent = text;
    liveEl.className = `live-state ${cls}`;
    liveEl.dataset.state = cls;
  };
  let attempt = 0;
  let everConnected = false;
  let stopped = false;
  let connected = false;
  let collector = null;
  let heartbeatMs = null; // from hello; null: a server that sends no heartbeat (no silence check)
  let lastFrame = performance.now();
  let collectorAt = performance.now(); // when the collector health arrived: its ages grow from there
  let reconnectAt = null; // performance.now() of the next attempt while reconnecting
  let socket = null;

  const showLive = () => {
    if (stopped) return;
    if (isPaused()) return setLive("paused", "paused");
    if (!connected) {
      if (reconnectAt !== null) {
        setLive(`reconnecting in ${(Math.max(0, reconnectAt - performance.now()) / 1000).toFixed(1)} s`, "reconnecting");
      }
      return;
    }
    const silent = performance.now() - lastFrame;
    if (liveEl) liveEl.dataset.lastFrameAgoMs = String(Math.round(silent));
    const problems = [];
    if (heartbeatMs !== null && silent > 2 * heartbeatMs) problems.push(`no message for ${silentFor(silent)}`);
    const stale = collector ? collector.stale : [];
    const since = (performance.now() - collectorAt) / 1000;
    problems.push(...stale.map((s) => `${s.stream} (${behind(s.behind_s === null ? null : s.behind_s + since)})`));
    if (!problems.length) return setLive("live", "live");
    setLive(`stale: ${problems.join(", ")}`, "stale");
  };

  // Between frames: the badge (silence grows) and the ages on the page. Four ticks a heartbeat, at most
  // one a second, so the badge turns amber within a quarter heartbeat of the second one missed.
  let ticker = null;
  const tick = () => {
    showLive();
    tickAges();
    if (connected && heartbeatMs !== null && socket && performance.now() - lastFrame > Math.max(6 * heartbeatMs, 30000)) {
      socket.close(); // onclose reconnects and refetches
    }
  };
  const startTicker = () => {
    if (ticker !== null) clearInterval(ticker);
    ticker = setInterval(tick, Math.min(1000, Math.max(50, (heartbeatMs ?? 4000) / 4)));
  };

  const connect = () => {
    const proto = window.location.protocol === "https:" ? "wss" : "ws";
    const mine = new WebSocket(`${proto}://${window.location.host}${ws}`);
    socket = mine;
    mine.onmessage = (msg) => {
      if (socket !== mine) return;
      lastFrame = performance.now();
      const frame = JSON.parse(msg.data);
      if (frame.type === "hello") {
        attempt = 0;
        connected = true;
        collector = frame.collector || null;
        collectorAt = performance.now();
        reconnectAt = null;
        heartbeatMs = typeof frame.heartbeat_s === "number" && frame.heartbeat_s > 0 ? frame.heartbeat_s * 1000 : null;
        startTicker();
        showLive();
        if (everConnected) onRefetch(null);
        everConnected = true;
      } else if (frame.type === "heartbeat") {
        if (liveEl) liveEl.dataset.heartbeats = String(Number(liveEl.dataset.heartbeats || 0) + 1);
        showLive(); // v1: {seq, at}; its arrival is the news
      } else if (frame.type === "deltas") {
        showLive();
        onDeltas(frame);
      } else if (frame.type === "collector") {
        collector = frame;
        collectorAt = performance.now();
        showLive();
      } else if (frame.type === "refetch") {
        showLive();
        onRefetch(frame);
      } else if (frame.type === "error") {
        stopped = true;
        setLive(`offline: ${frame.message}`, "offline");
      }
    };
    mine.onclose = (ev) => {
      if (socket !== mine) return;
      connected = false;
      if (stopped || ev.code >= 4400) {
        stopped = true;
        if (liveEl && !liveEl.textContent.startsWith("offline")) setLive("offline", "offline");
        return;
      }
      attempt += 1;
      const delay = Math.min(15000, 500 * 2 ** Math.min(attempt - 1, 5)) * (0.75 + Math.random() * 0.5);
      reconnectAt = performance.now() + delay;
      setLive(`reconnecting in ${(delay / 1000).toFixed(1)} s`, "reconnecting");
      setTimeout(() => {
        reconnectAt = null;
        connect();
      }, delay);
    };
  };
  setLive("connecting", "reconnecting");
  startTicker();
  connect();
  return { showLive };
}
