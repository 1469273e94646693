// The live socket of a page (node, namespace or pod: timelines/web/consumers.py), shared by every page that
// draws live: reconnects with jittered exponential backoff (0.5 s doubling to 15 s), refetches after a
// reconnect, and keeps the badge honest: "live" only while the socket is up and no collector stream of the
// cluster is stale (the consumer's `collector` frames); otherwise the badge names the stale streams.
//
// watchLive({ ws, onDeltas(frame), onRefetch(frame | null), isPaused() }) returns { showLive } so a page's
// pause button can redraw the badge. onRefetch(null) is a reconnect (deltas may have been missed).

function behind(seconds) {
  if (seconds === null) return "no progress yet";
  return seconds < 120 ? `${Math.round(seconds)} s behind` : `${Math.round(seconds / 60)} min behind`;
}

export function watchLive({ ws, onDeltas, onRefetch, isPaused = () => false }) {
  const liveEl = document.getElementById("live-state");
  const setLive = (text, cls) => {
    if (!liveEl) return;
    liveEl.textContent = text;
    liveEl.className = `live-state ${cls}`;
    liveEl.dataset.state = cls;
  };
  let attempt = 0;
  let everConnected = false;
  let stopped = false;
  let connected = false;
  let collector = null;

  const showLive = () => {
    if (stopped) return;
    if (isPaused()) return setLive("paused", "paused");
    if (!connected) return;
    const stale = collector ? collector.stale : [];
    if (!stale.length) return setLive("live", "live");
    setLive(`stale: ${stale.map((s) => `${s.stream} (${behind(s.behind_s)})`).join(", ")}`, "stale");
  };

  const connect = () => {
    const proto = window.location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${proto}://${window.location.host}${ws}`);
    socket.onmessage = (msg) => {
      const frame = JSON.parse(msg.data);
      if (frame.type === "hello") {
        attempt = 0;
        connected = true;
        collector = frame.collector || null;
        showLive();
        if (everConnected) onRefetch(null);
        everConnected = true;
      } else if (frame.type === "deltas") {
        onDeltas(frame);
      } else if (frame.type === "collector") {
        collector = frame;
        showLive();
      } else if (frame.type === "refetch") {
        onRefetch(frame);
      } else if (frame.type === "error") {
        stopped = true;
        setLive(`offline: ${frame.message}`, "offline");
      }
    };
    socket.onclose = (ev) => {
      connected = false;
      if (stopped || ev.code >= 4400) {
        stopped = true;
        if (liveEl && !liveEl.textContent.startsWith("offline")) setLive("offline", "offline");
        return;
      }
      attempt += 1;
      const delay = Math.min(15000, 500 * 2 ** Math.min(attempt - 1, 5)) * (0.75 + Math.random() * 0.5);
      setLive(`reconnecting in ${(delay / 1000).toFixed(1)} s`, "reconnecting");
      setTimeout(connect, delay);
    };
  };
  setLive("connecting", "reconnecting");
  connect();
  return { showLive };
}
