// Which rows a page's Gantt shows, and in what order: pods grouped by owner (Deployment → ReplicaSet → pods,
// StatefulSet, Job, DaemonSet), finished pods folded into their owner, and the row filters (a substring of a
// name, UID or node; a finding kind; an event reason). Pure: rows in, rows out; no DOM, no page globals
// (tests/web/test_gantt_helpers.py runs it under node).
import { toMicros } from "./common.js";

// A compact pod row's first instant (µs): its earliest interval start, else its creation; Infinity if none.
export function firstStart(row) {
  if (row._first === undefined) {
    let first = Infinity;
    for (const iv of row.intervals || []) first = Math.min(first, toMicros(iv[2]) ?? Infinity);
    if (first === Infinity && row.created_at) first = toMicros(row.created_at) ?? Infinity;
    row._first = first;
  }
  return row._first;
}

// The chain of owners of a pod, top first: [["Deployment", "web"], ["ReplicaSet", "web-7d9f"]]. `owners`
// maps "namespace/Kind/name" of a workload to its own owner [kind, name] (views.owner_map); a pod whose
// owner has no known owner stops there ([["Job", "backup-1"]]); a pod without owner has [].
export function ownerPath(row, owners) {
  const path = [];
  const seen = new Set();
  let kind = row.owner_kind, name = row.owner_name;
  while (kind && name && !seen.has(`${kind}/${name}`)) {
    seen.add(`${kind}/${name}`);
    path.unshift([kind, name]);
    const up = (owners || {})[`${row.namespace}/${kind}/${name}`];
    if (!up) break;
    [kind, name] = up;
  }
  return path;
}

function podName(row) {
  return row.name || row.uid;
}

function byStart(a, b) {
  return a.start - b.start || a.label.localeCompare(b.label);
}

// Pod rows → display rows grouped by owner: a header row for each owner ({header: true, depth, label
// "Deployment web"}) followed by what it owns (ReplicaSets, then pods at depth + 1), every level sorted by
// its first start; a pod without owner stands at the top level among the groups, by its start.
// label(row): a pod row's label (default: its name).
export function groupByOwner(pods, owners, label = podName) {
  const root = { children: new Map(), pods: [] };
  for (const pod of pods) {
    let node = root;
    for (const [kind, name] of ownerPath(pod, owners)) {
      const key = `${kind}/${name}`;
      if (!node.children.has(key)) node.children.set(key, { kind, name, children: new Map(), pods: [] });
      node = node.children.get(key);
    }
    node.pods.push(pod);
  }
  const out = [];
  const startOf = (node) => {
    if (node.start === undefined) {
      node.start = Math.min(Infinity, ...node.pods.map(firstStart), ...[...node.children.values()].map(startOf));
    }
    return node.start;
  };
  const emit = (node, depth, path) => {
    const items = [
      ...[...node.children.values()].map((c) => ({ start: startOf(c), label: `${c.kind} ${c.name}`, group: c })),
      ...node.pods.map((p) => ({ start: firstStart(p), label: label(p), pod: p })),
    ].sort(byStart);
    for (const item of items) {
      if (item.pod) {
        out.push({ ...item.pod, key: item.pod.key ?? item.pod.uid, label: item.label, depth });
        continue;
      }
      const key = `${path}/${item.group.kind}/${item.group.name}`;
      out.push({
        key: `owner:${key}`, header: true, depth, label: item.label, title: item.label,
        intervals: [], markers: [], findings: [],
      });
      emit(item.group, depth + 1, key);
    }
  };
  emit(root, 0, "");
  return out;
}

// A pod that is over: deleted, or in a terminal phase.
export function isFinished(row) {
  return !!row.deleted_at || row.phase === "Succeeded" || row.phase === "Failed";
}

// Pod rows → the same rows with the finished pods of one owner (the top of its ownerPath) folded into one
// row ({collapsed: true, key "finished:ns/Kind/name", members: their UIDs}) that carries all their intervals, markers
// and findings; an owner in `expanded` (a Set of those keys) keeps its pods, and so does an owner with one
// finished pod, or a pod without owner (folding them hides nothing). Sorted by first start.
// The earliest `pending_since` of the pods (API times, ISO in UTC: they sort as text), or null.
function pendingOf(pods) {
  const since = pods.map((p) => p.freshness && p.freshness.pending_since).filter(Boolean).sort();
  return since.length ? { pending_since: since[0] } : null;
}

export function collapseFinished(pods, owners, expanded, label = podName) {
  const folds = new Map();
  const out = [];
  for (const pod of pods) {
    const top = ownerPath(pod, owners)[0];
    if (!isFinished(pod) || !top) {
      out.push(pod);
      continue;
    }
    const key = `finished:${pod.namespace}/${top[0]}/${top[1]}`;
    if (!folds.has(key)) folds.set(key, { key, owner: top, namespace: pod.namespace, pods: [] });
    folds.get(key).pods.push(pod);
  }
  for (const fold of folds.values()) {
    if (fold.pods.length < 2 || (expanded && expanded.has(fold.key))) {
      for (const pod of fold.pods) out.push({ ...pod, fold: fold.key });
      continue;
    }
    const n = fold.pods.length;
    const name = `${fold.owner[0]} ${fold.owner[1]}: ${n} finished pods ▸`;
    out.push({
      key: fold.key, collapsed: true, members: fold.pods.map((p) => p.uid), uid: fold.key, namespace: fold.namespace, name,
      intervals: fold.pods.flatMap((p) => p.intervals),
      markers: fold.pods.flatMap((p) => p.markers || []),
      findings: fold.pods.flatMap((p) => p.findings || []),
      // A member whose kubelet evidence is pending: the folded row's worker lane is pending from the first.
      freshness: pendingOf(fold.pods),
      _label: name, _first: Math.min(...fold.pods.map(firstStart)),
    });
  }
  return out
    .map((r) => ({ r, start: firstStart(r), label: r.collapsed ? r._label : label(r) }))
    .sort(byStart)
    .map(({ r }) => r);
}

// Whether a pod row passes the page's filters: `text` a substring (any case) of its name, UID, node or
// namespace; `findingKind` one of its findings' kinds; `eventReason` one of its markers' reasons. An empty
// filter passes every row.
export function matchesFilters(row, { text = "", findingKind = "", eventReason = "" } = {}) {
  const needle = text.trim().toLowerCase();
  if (needle && ![row.name, row.uid, row.node, row.namespace].some((v) => (v || "").toLowerCase().includes(needle))) return false;
  if (findingKind && !(row.findings || []).some((f) => f[0] === findingKind)) return false;
  if (eventReason && !(row.markers || []).some((m) => m[2] === eventReason)) return false;
  return true;
}

// The finding kinds and event reasons present in rows, sorted (the filters' choices).
export function filterChoices(rows) {
  const kinds = new Set(), reasons = new Set();
  for (const r of rows) {
    for (const f of r.findings || []) kinds.add(f[0]);
    for (const m of r.markers || []) if (m[2]) reasons.add(m[2]);
  }
  return { kinds: [...kinds].sort(), reasons: [...reasons].sort() };
}
