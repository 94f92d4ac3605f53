// The topology view: PoPs (with each tier's replicas on their GPU slots), WAN links by latency
// tier, the client and its edges. The SVG is the picture; the two tables beside it carry the same
// facts as text (screen readers, and link labels a 20-PoP picture has no room for).

import { el, svg, fmtBps, fmtPct, fmtS, isNum, LATENCY_TIER_STYLE } from "./format.js";

const W = 900, H = 420;

function layout(pops, gateway) {
  // Gateway on the left next to the client, the rest round an ellipse: no crossings for small
  // topologies, readable up to ~20 PoPs.
  const others = pops.filter((p) => p.name !== gateway);
  const pos = new Map();
  const cx = 540, cy = H / 2, rx = 300, ry = 160;
  pos.set(gateway, { x: cx - rx, y: cy });
  others.forEach((p, i) => {
    const t = Math.PI - ((i + 1) * 2 * Math.PI) / (others.length + 1);
    pos.set(p.name, { x: cx + rx * Math.cos(t), y: cy - ry * Math.sin(t) });
  });
  return pos;
}

export function renderTopology(svgNode, legend, topo, tiers, colourOf) {
  const title = svgNode.querySelector("title");
  svgNode.replaceChildren(title);
  const pos = layout(topo.pops, topo.client.gateway);
  const dense = topo.pops.length > 8;
  const boxW = dense ? 70 : 120, slotW = dense ? 9 : 16;

  // links first, so PoP boxes sit on top of them
  for (const link of topo.links) {
    const a = pos.get(link.a), b = pos.get(link.b);
    if (!a || !b) continue;
    const style = LATENCY_TIER_STYLE[link.latency_tier] || { colour: "#8b949e", dash: "" };
    const width = isNum(link.utilisation) ? 2 + Math.min(1, link.utilisation) * 8 : 2;
    const rtt = isNum(link.measured_rtt_s) ? link.measured_rtt_s : link.rtt_s;
    const label = `${link.a}–${link.b}: ${link.latency_tier}, RTT ${fmtS(rtt)}` + (isNum(link.utilisation) ? `, ${fmtPct(link.utilisation)} of capacity` : "");
    const g = svg("g", { class: "link", "data-link": `${link.a}-${link.b}` },
      svg("title", { text: label }),
      svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, stroke: style.colour, "stroke-width": width, "stroke-dasharray": style.dash }));
    if (!dense) {
      const mx = (a.x + b.x) / 2, my = (a.y + b.y) / 2;
      const util = isNum(link.utilisation) ? ` · ${fmtPct(link.utilisation)}` : isNum(link.rate_bps) ? ` · ${fmtBps(link.rate_bps)}` : "";
      g.append(svg("text", { class: "link-label", x: mx, y: my - 6, "text-anchor": "middle", text: `${fmtS(rtt)} ${link.latency_tier}${util}` }));
    }
    svgNode.append(g);
  }

  // client and its edge to the gateway
  const gw = pos.get(topo.client.gateway);
  if (gw) {
    const cxl = 40, cyl = gw.y;
    svgNode.append(svg("g", { class: "client", "data-client": topo.client.name },
      svg("title", { text: `client ${topo.client.name}, access RTT ${fmtS(topo.client.rtt_s)}` }),
      svg("line", { x1: cxl + 30, y1: cyl, x2: gw.x - boxW / 2, y2: gw.y, stroke: "#3fb950", "stroke-width": 3 }),
      svg("rect", { x: cxl - 30, y: cyl - 18, width: 60, height: 36, rx: 6 }),
      svg("text", { x: cxl, y: cyl + 5, "text-anchor": "middle", text: topo.client.name })));
  }

  // PoPs with their GPU slots; a replica is a coloured square on the slot it occupies
  const byPop = new Map();
  for (const t of tiers) for (const s of t.placement) {
    if (!byPop.has(s.pop)) byPop.set(s.pop, []);
    byPop.get(s.pop).push({ ...s, tier: t.name, title: t.title });
  }
  for (const p of topo.pops) {
    const c = pos.get(p.name);
    const slots = byPop.get(p.name) || [];
    const rows = Math.max(1, p.gpus);
    const boxH = 26 + rows * (slotW + 4);
    const g = svg("g", { class: "pop" + (p.name === topo.client.gateway ? " gateway" : ""), "data-pop": p.name, transform: `translate(${c.x - boxW / 2},${c.y - boxH / 2})` });
    const active = slots.filter((s) => s.active);
    g.append(svg("title", { text: `${p.name}: ${p.gpus} × ${p.gpu_model}; replicas ${active.map((s) => `${s.title} on gpu${s.gpu}`).join(", ") || "none"}` }));
    g.append(svg("rect", { class: "box", width: boxW, height: boxH, rx: 6 }));
    g.append(svg("text", { x: 6, y: 16, text: p.name + (p.name === topo.client.gateway ? " ★" : "") }));
    for (let gpu = 0; gpu < p.gpus; gpu++) {
      const y = 24 + gpu * (slotW + 4);
      g.append(svg("rect", { class: "slot", x: 4, y, width: boxW - 8, height: slotW, rx: 2 }));
      slots.filter((s) => s.gpu === gpu && s.active).forEach((s, i) => {
        g.append(svg("rect", { class: "replica", "data-tier": s.tier, x: 6 + i * (slotW + 2), y: y + 2, width: slotW - 2, height: slotW - 4, fill: colourOf(s.tier) }));
      });
    }
    svgNode.append(g);
  }

  legend.replaceChildren(
    ...Object.entries(LATENCY_TIER_STYLE).map(([name, st]) => el("span", {}, el("span", { class: "swatch", style: `background:${st.colour}` }), `${name} link`)),
    ...tiers.map((t) => el("span", {}, el("span", { class: "swatch", style: `background:${colourOf(t.name)}` }), `${t.title} replica`)),
    el("span", {}, "★ gateway · line width: utilisation"),
  );
}

export function renderLinkTables(linksBody, edgesBody, topo, tiers) {
  linksBody.replaceChildren(...topo.links.map((l) => {
    const rtt = isNum(l.measured_rtt_s) ? `${fmtS(l.measured_rtt_s)} measured (${fmtS(l.rtt_s)} configured)` : fmtS(l.rtt_s);
    const rate = `${fmtBps(l.rate_bps)} / ${isNum(l.capacity_bps) ? fmtBps(l.capacity_bps) : "not declared"}`;
    return el("tr", { "data-link": `${l.a}-${l.b}` },
      el("th", { scope: "row", text: `${l.a} – ${l.b}` }), el("td", { text: l.latency_tier }), el("td", { class: "num", text: rtt }),
      el("td", { class: "num", text: rate }), el("td", { class: "num", text: fmtPct(l.utilisation) }));
  }));
  const title = new Map(tiers.map((t) => [t.name, t.title]));
  edgesBody.replaceChildren(...topo.client_edges.map((e) => el("tr", { "data-edge": e.tier },
    el("th", { scope: "row", text: title.get(e.tier) || e.tier }), el("td", { class: "num", text: fmtBps(e.rate_bps) }),
    el("td", { class: "num", text: isNum(e.cap_bps) ? fmtBps(e.cap_bps) : "uncapped" }),
    el("td", { class: "num", text: isNum(e.cap_bps) && isNum(e.rate_bps) ? fmtPct(e.rate_bps / e.cap_bps) : "–" }))));
}
