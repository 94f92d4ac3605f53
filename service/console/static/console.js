// The console's main module: poll /v1/console/state, keep each tier's recent windows, render.
// Polling (not a stream) survives the API restarting by construction: the next poll after it is
// back simply succeeds; while it fails the page keeps the last data, greyed, and says since when.

import { el, fmtAge, fmtBps, fmtPct, fmtRate, fmtS, fmtTime, isNum, regimeLabel, COMPONENTS, TIER_COLOURS } from "./format.js";
import { renderTopology, renderLinkTables } from "./topology.js";
import { TierCharts } from "./charts.js";
import { renderController, setupToken } from "./controller.js";

const $ = (id) => document.getElementById(id);
const REQUEST_TIMEOUT_MS = 5000; // a poll slower than this is a down API for the operator
const MAX_BACKOFF_S = 15; // retry at least this often while the API is down

const page = {
  history: new Map(), // tier -> points, oldest first
  newest: new Map(), // tier -> ts of the newest window held
  charts: new Map(),
  cards: new Map(),
  colours: new Map(),
  last: null, // the last state document
  lastOk: null, // Date.now() of the last successful poll
  failures: 0,
  timer: null,
  pollS: 2,
  filter: new URLSearchParams(location.search).get("tier") || "",
};
window.inferslice = page; // tests and curious operators can inspect what the page holds

function colourOf(tier) {
  return page.colours.get(tier) || "#8b949e";
}

function since() {
  if (!page.last) return null;
  let min = null;
  for (const t of page.last.tiers) {
    const n = page.newest.get(t.name);
    if (n === undefined) continue;
    min = min === null ? n : Math.min(min, n);
  }
  return min;
}

function merge(state) {
  for (const t of state.tiers) {
    const held = page.newest.get(t.name);
    if (held !== undefined && (!isNum(t.last_window_s) || t.last_window_s < held)) {
      // the API's history no longer reaches what we hold (a fresh database): start over
      page.history.set(t.name, []);
      page.newest.delete(t.name);
    }
    const mine = page.history.get(t.name) || [];
    const newest = page.newest.get(t.name);
    for (const p of t.history) if (newest === undefined || p.ts > newest) mine.push(p);
    const horizon = state.now_s - state.history_s;
    while (mine.length && mine[0].ts < horizon) mine.shift();
    page.history.set(t.name, mine);
    if (mine.length) page.newest.set(t.name, mine[mine.length - 1].ts);
  }
}

function put(node, ...children) {
  node.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
}

function stat(k, v, over = false) {
  return el("div", { class: "stat" }, el("span", { class: "k", text: k }), el("span", { class: "v" + (over ? " over" : ""), text: v }));
}

const STAT_LABEL = { ttft_p99: "P99 TTFT", ttft_p50: "median TTFT", tpot_p99: "P99 TPOT", tpot_p50: "median TPOT" };

function attributionBar(stat, parts) {
  const total = COMPONENTS.reduce((s, c) => s + (parts[c] || 0), 0);
  const label = STAT_LABEL[stat] || stat;
  const bar = el("div", { class: "attr-bar", role: "img", "aria-label": `${label} ${fmtS(total)}: ` + COMPONENTS.map((c) => `${c} ${fmtS(parts[c])}`).join(", ") });
  for (const c of COMPONENTS) if (total > 0 && parts[c] > 0) bar.append(el("span", { class: `seg-${c}`, style: `width:${(100 * parts[c]) / total}%`, title: `${c} ${fmtS(parts[c])}` }));
  return el("div", { class: "attr", "data-attribution": stat },
    el("div", { class: "chart-title", text: `Where the ${label} goes, last window: ${fmtS(total)}` + (isNum(parts.reference) ? ` (reference ${fmtS(parts.reference)})` : "") }), bar,
    el("div", { class: "attr-legend" }, ...COMPONENTS.map((c) => el("span", { "data-component": c }, el("span", { class: `swatch seg-${c}` }), `${c} ${fmtS(parts[c])} (${total > 0 ? fmtPct(parts[c] / total) : "–"})`))));
}

function attribution(tier) {
  const attr = tier.diagnosis && tier.diagnosis.attribution;
  const bars = ["ttft_p99", "tpot_p99"].filter((k) => attr && attr[k]).map((k) => attributionBar(k, attr[k]));
  if (!bars.length) return el("p", { class: "muted attr", "data-attribution": "none", text: "Attribution: not in this diagnosis." });
  return el("div", {}, ...bars);
}

function evidenceList(diag) {
  if (!diag || !diag.evidence.length) return null;
  const items = [...diag.evidence].sort((a, b) => Number(b.crossed) - Number(a.crossed));
  const fmt = (v, sig) => (isNum(v) ? (sig.endsWith("_s") ? fmtS(v) : sig.endsWith("bps") ? fmtBps(v) : +v.toPrecision(3)) : "–");
  return el("details", { class: "evidence" },
    el("summary", {}, `Evidence (${items.filter((e) => e.crossed).length} signals crossed)` + (diag.missing.length ? `, missing: ${diag.missing.join(", ")}` : "")),
    el("ul", {}, ...items.map((e) => el("li", { class: e.crossed ? "crossed" : null },
      `${e.signal} ${fmt(e.value, e.signal)}` + (isNum(e.reference) ? ` vs ref ${fmt(e.reference, e.signal)}` : "") + (isNum(e.threshold) ? ` (threshold ${fmt(e.threshold, e.signal)})` : "") + (e.note ? ` — ${e.note}` : "")))));
}

function renderTier(t) {
  let card = page.cards.get(t.name);
  if (!card) {
    const attrChart = el("div", { class: "chart", role: "img", "aria-label": `${t.title}: P99 TTFT or TPOT (as picked above) attribution over time, stacked queue, network, compute, base` });
    const latChart = el("div", { class: "chart", role: "img", "aria-label": `${t.title}: P99 TTFT and TPOT against their SLOs over time` });
    card = {
      root: el("article", { class: "tier", "data-tier": t.name, "aria-labelledby": `tier-h-${t.name}`, style: `--tier-colour:${colourOf(t.name)}` }),
      head: el("header"), body: el("div", { class: "tier-body" }), live: el("div"),
      attrChart, latChart,
    };
    // one stacked chart, two views: a radio group (keyboard: arrow keys) picks the latency it splits
    const pick = el("fieldset", { class: "stat-pick" }, el("legend", { class: "chart-title", text: "By cause over time (stacked):" }),
      ...[["ttft_attribution", "P99 TTFT"], ["tpot_attribution", "P99 TPOT"]].map(([value, label], i) => el("label", { class: "inline" },
        el("input", { type: "radio", name: `stat-${t.name}`, value, checked: i === 0,
          onchange: (e) => page.charts.get(t.name).show(e.target.value) }), label)));
    card.body.append(card.live, pick, attrChart,
      el("p", { class: "chart-title", text: "P99 TTFT and TPOT vs SLO" }), latChart);
    card.root.append(card.head, card.body);
    $("tier-cards").append(card.root);
    page.cards.set(t.name, card);
    page.charts.set(t.name, new TierCharts(attrChart, latChart, t));
  }
  const d = t.diagnosis;
  const regime = d ? d.regime : null;
  card.root.classList.toggle("stale", t.stale);
  card.root.hidden = Boolean(page.filter && page.filter !== t.name);
  put(card.head,
    el("h3", { id: `tier-h-${t.name}`, text: t.title }),
    el("span", { class: `badge regime-${regime || "none"}`, "data-regime": regime || "" }, regimeLabel(regime) + (d && isNum(d.confidence) ? ` ${fmtPct(d.confidence)}` : "")),
    d && d.secondary.length ? el("span", { class: "muted", text: `also ${d.secondary.map(regimeLabel).join(", ")}` }) : null,
    el("span", { class: `badge slo-${(d && d.slo) || "unknown"}`, "data-slo": (d && d.slo) || "" }, `SLO ${((d && d.slo) || "unknown").replace("_", " ")}`),
    el("span", { class: "muted", text: `burn ${isNum(t.burn_rate) ? t.burn_rate.toFixed(1) + "×" : "–"}` }),
    t.stale ? el("span", { class: "badge stale-badge", "data-stale": "1" }, `STALE · last window ${fmtAge(t.age_s)} ago`) : null,
  );
  const key = JSON.stringify([t, page.filter]);
  if (card.key !== key) {
    card.key = key;
    const open = card.live.querySelector("details.evidence")?.open;
    renderLive(card, t);
    if (open) card.live.querySelector("details.evidence")?.setAttribute("open", "");
  }
  page.charts.get(t.name).update(page.history.get(t.name) || []);
}

function renderLive(card, t) {
  const d = t.diagnosis;
  const edge = t.client_edge;
  put(card.live,
    el("div", { class: "stats" },
      stat("P99 TTFT / SLO", `${fmtS(t.ttft_p99_s)} / ${fmtS(t.slo_ttft_p99_s)}`, isNum(t.ttft_p99_s) && t.ttft_p99_s > t.slo_ttft_p99_s),
      stat("P99 TPOT" + (isNum(t.slo_tpot_p99_s) ? " / SLO" : ""), fmtS(t.tpot_p99_s) + (isNum(t.slo_tpot_p99_s) ? ` / ${fmtS(t.slo_tpot_p99_s)}` : ""), isNum(t.tpot_p99_s) && isNum(t.slo_tpot_p99_s) && t.tpot_p99_s > t.slo_tpot_p99_s),
      stat("Goodput (window)", fmtRate(t.goodput_rps)),
      stat("Replicas", `${isNum(t.replicas) ? t.replicas : "–"} / ${t.replicas_max}`),
      stat("Waiting", isNum(t.requests_waiting) ? String(t.requests_waiting) : "–"),
      stat("Confidence", d && isNum(d.confidence) ? `${fmtPct(d.confidence)}${d.confident ? "" : " (hint)"}` : "–", Boolean(d && !d.confident)),
      stat("Requests (window)", d && isNum(d.request_count) ? String(Math.round(d.request_count)) : "–"),
      stat("Client edge", `${fmtBps(edge.rate_bps)} of ${isNum(edge.cap_bps) ? fmtBps(edge.cap_bps) : "uncapped"}`),
      stat("Last window", isNum(t.last_window_s) ? `${fmtTime(t.last_window_s)} (${fmtAge(t.age_s)} ago)` : "none"),
    ),
    attribution(t),
    evidenceList(d),
  );
}

function renderSources(state, apiDown) {
  const items = [];
  items.push({ name: "API", ok: !apiDown, detail: apiDown ? `unreachable for ${fmtAge((Date.now() - (page.lastOk || Date.now())) / 1000)} (retrying)` : `answered ${fmtTime(state.now_s)}` });
  for (const s of state.sources) items.push(s);
  $("sources").replaceChildren(...items.map((s) => el("li", { class: s.ok === true ? "ok" : s.ok === false ? "down" : "unknown", "data-source": s.name },
    `${s.name}: ${s.ok === true ? "up" : s.ok === false ? "DOWN" : "n/a"} — ${s.detail}`)));
  const down = items.filter((s) => s.ok === false);
  const staleTiers = state.tiers.filter((t) => t.stale).map((t) => t.title);
  const banner = $("banner");
  if (down.length || staleTiers.length) {
    banner.hidden = false;
    banner.className = "banner" + (apiDown ? "" : " warn");
    banner.textContent = [
      down.length ? `Source down: ${down.map((s) => s.name).join(", ")}.` : "",
      staleTiers.length ? `Stale data (older than ${fmtAge(state.stale_after_s)}): ${staleTiers.join(", ")}.` : "",
      apiDown ? "Showing the last data received." : "",
    ].filter(Boolean).join(" ");
  } else {
    banner.hidden = true;
  }
}

function render(state, apiDown = false) {
  if (!page.colours.size) state.tiers.forEach((t, i) => page.colours.set(t.name, TIER_COLOURS[i % TIER_COLOURS.length]));
  $("topo-name").textContent = `— ${state.topology.name}`;
  const filter = $("tier-filter");
  if (filter.options.length === 1) {
    for (const t of state.tiers) filter.append(el("option", { value: t.name, text: t.title }));
    filter.value = page.filter;
  }
  // Re-render a part only when its data changed: a keyboard user's focus stays where it was.
  const topoKey = JSON.stringify([state.topology, state.tiers.map((t) => t.placement)]);
  if (page.topoKey !== topoKey) {
    page.topoKey = topoKey;
    renderTopology($("topo-svg"), $("topo-legend"), state.topology, state.tiers, colourOf);
    renderLinkTables($("links-table").tBodies[0], $("edges-table").tBodies[0], state.topology, state.tiers);
  }
  for (const t of state.tiers) renderTier(t);
  const titles = new Map(state.tiers.map((t) => [t.name, t.title]));
  const ctlKey = JSON.stringify(state.controller);
  if (page.ctlKey === ctlKey) { renderSources(state, apiDown); return; }
  page.ctlKey = ctlKey;
  renderController(state.controller, titles, {
    pendingBody: $("pending-table").tBodies[0], timelineBody: $("timeline-table").tBodies[0], alertsList: $("alerts"),
    tokenInput: $("token"), msgNode: $("ctl-msg"), moreButton: $("timeline-more"),
  }, () => poll());
  renderSources(state, apiDown);
}

function setConn(kind, text) {
  const c = $("conn");
  c.className = `pill pill-${kind}`;
  c.textContent = text;
  document.body.classList.toggle("offline", kind === "down");
}

async function poll() {
  clearTimeout(page.timer);
  const ctrl = new AbortController();
  const timeout = setTimeout(() => ctrl.abort(), REQUEST_TIMEOUT_MS);
  const s = since();
  const started = performance.now();
  try {
    const resp = await fetch("/v1/console/state" + (s === null ? "" : `?since=${s}`), { signal: ctrl.signal, cache: "no-store" });
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    const state = await resp.json();
    merge(state);
    page.last = state;
    page.lastOk = Date.now();
    page.failures = 0;
    page.pollS = state.poll_interval_s || 2;
    render(state);
    if (page.firstRenderMs === undefined) page.firstRenderMs = performance.now();
    const anyStale = state.tiers.some((t) => t.stale) || state.sources.some((x) => x.ok === false);
    setConn(anyStale ? "stale" : "live", anyStale ? "live · stale data" : "live");
    $("updated").textContent = `updated ${fmtTime(state.now_s)} · ${Math.round(performance.now() - started)} ms`;
    page.timer = setTimeout(poll, page.pollS * 1000);
  } catch (err) {
    page.failures += 1;
    setConn("down", `API unreachable${page.lastOk ? ` since ${new Date(page.lastOk).toISOString().slice(11, 19)}Z` : ""}`);
    if (page.last) renderSources(page.last, true);
    else { const b = $("banner"); b.hidden = false; b.className = "banner"; b.textContent = `Cannot reach the API (${err.message}); retrying.`; }
    page.timer = setTimeout(poll, Math.min(MAX_BACKOFF_S, page.pollS * 2 ** Math.min(page.failures, 4)) * 1000);
  } finally {
    clearTimeout(timeout);
  }
}

page.pollNow = poll; // the benchmark times one update without waiting for the timer
setupToken($("token"), $("remember"));
$("tier-filter").addEventListener("change", (e) => {
  page.filter = e.target.value;
  const url = new URL(location.href);
  if (page.filter) url.searchParams.set("tier", page.filter); else url.searchParams.delete("tier");
  history.replaceState(null, "", url);
  if (page.last) render(page.last);
});
poll();
