// Formatting and DOM helpers shared by the console's modules. Units always printed.

export const COMPONENTS = ["queue", "network", "compute", "base"];
export const COMPONENT_COLOURS = { queue: "#f0a030", network: "#58a6ff", compute: "#ff7eb6", base: "#8b949e" };
// Tableau 10: distinguishable tiers, each also named in text wherever its colour appears.
export const TIER_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
export const LATENCY_TIER_STYLE = {
  near: { colour: "#3fb950", dash: "" },
  mid: { colour: "#d29922", dash: "10 4" },
  far: { colour: "#f0883e", dash: "4 4" },
  distant: { colour: "#f85149", dash: "2 4" },
};

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";
export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) node.append(c);
  return node;
}

export function isNum(v) {
  return typeof v === "number" && Number.isFinite(v);
}

export function fmtS(s) {
  if (!isNum(s)) return "–";
  if (s >= 10) return `${s.toFixed(1)} s`;
  if (s >= 1) return `${s.toFixed(2)} s`;
  const ms = s * 1000;
  return ms >= 100 ? `${ms.toFixed(0)} ms` : ms >= 10 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(2)} ms`;
}

export function fmtBps(b) {
  if (!isNum(b)) return "–";
  if (b >= 1e9) return `${(b / 1e9).toFixed(2)} Gbit/s`;
  if (b >= 1e6) return `${(b / 1e6).toFixed(2)} Mbit/s`;
  if (b >= 1e3) return `${(b / 1e3).toFixed(1)} kbit/s`;
  return `${b.toFixed(0)} bit/s`;
}

export function fmtPct(r) {
  return isNum(r) ? `${(r * 100).toFixed(0)} %` : "–";
}

export function fmtRate(r, unit = "req/s") {
  return isNum(r) ? `${r >= 10 ? r.toFixed(0) : r.toFixed(2)} ${unit}` : "–";
}

export function fmtTime(ts) {
  if (!isNum(ts)) return "–";
  return new Date(ts * 1000).toISOString().slice(11, 19) + "Z";
}

export function fmtAge(s) {
  if (!isNum(s)) return "never";
  if (s < 90) return `${s.toFixed(0)} s`;
  if (s < 5400) return `${(s / 60).toFixed(0)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

export function regimeLabel(r) {
  return (r || "no verdict").replace("_limited", "-limited").replace("_", " ");
}

export function fmtValue(kind, v) {
  if (typeof v === "string") return v;
  if (!isNum(v)) return "–";
  if (kind === "set_cap") return fmtBps(v);
  if (kind === "set_replicas") return `${v} replicas`;
  if (kind === "set_gpu_share") return fmtPct(v);
  return String(v);
}
