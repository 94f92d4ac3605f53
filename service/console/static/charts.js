// Per-tier charts with uPlot: where the P99 TTFT goes over time (stacked queue / network /
// compute / base) and the P99 TTFT and TPOT against their SLOs.

import uPlot from "./vendor/uplot/uPlot.esm.js";
import { COMPONENTS, COMPONENT_COLOURS, fmtS, isNum } from "./format.js";

// Canvas text does not follow CSS: size the axes from the page's root font (larger on a wall display).
const REM = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
const FONT = `${Math.round(REM * 0.8)}px system-ui, "DejaVu Sans", sans-serif`;
const HEIGHT = Math.round(REM * 11);
const AXIS = { stroke: "#a5afbb", font: FONT, labelFont: FONT, grid: { stroke: "#30363d", width: 1 }, ticks: { stroke: "#30363d" } };
const timeAxis = { ...AXIS, space: Math.round(REM * 6), values: (u, vals) => vals.map((v) => new Date(v * 1000).toISOString().slice(11, 19)) };
const secondsAxis = { ...AXIS, size: Math.round(REM * 4.2), values: (u, vals) => vals.map((v) => fmtS(v)) };

// Every time on the page is UTC (the API's clock, the alerts), so the charts' axes are too.
const tzDate = (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC");

function width(node) {
  return Math.max(240, Math.floor(node.clientWidth || 480));
}

function stackedData(points, key) {
  // uPlot has no stacking: draw cumulative sums and fill each band down to the one below,
  // keeping the raw values for the legend.
  const xs = points.map((p) => p.ts);
  const raw = COMPONENTS.map((c) => points.map((p) => (p[key] && isNum(p[key][c]) ? p[key][c] : null)));
  const cum = [];
  let acc = points.map(() => 0);
  raw.forEach((series) => {
    acc = acc.map((a, i) => (series[i] === null ? a : a + series[i]));
    cum.push(acc.map((a, i) => (raw.every((s) => s[i] === null) ? null : a)));
  });
  return { data: [xs, ...cum], raw };
}

export class TierCharts {
  constructor(attrNode, latNode, tier) {
    this.attrNode = attrNode;
    this.latNode = latNode;
    this.raw = [];
    this.points = [];
    this.stat = "ttft_attribution"; // which latency the stacked chart splits: P99 TTFT or P99 TPOT
    const self = this;
    this.attr = new uPlot({
      width: width(attrNode), height: HEIGHT, tzDate,
      series: [
        { value: (u, v) => (isNum(v) ? new Date(v * 1000).toISOString().slice(11, 19) : "–") },
        ...COMPONENTS.map((c, i) => ({
          label: c, stroke: COMPONENT_COLOURS[c], fill: i === 0 ? COMPONENT_COLOURS[c] + "cc" : undefined, width: 1, points: { show: false },
          value: (u, v, si, idx) => (idx === null || idx === undefined ? "–" : fmtS(self.raw[i] ? self.raw[i][idx] : null)),
        })),
      ],
      bands: [{ series: [2, 1], fill: COMPONENT_COLOURS.network + "cc" }, { series: [3, 2], fill: COMPONENT_COLOURS.compute + "cc" }, { series: [4, 3], fill: COMPONENT_COLOURS.base + "cc" }],
      axes: [timeAxis, secondsAxis],
      scales: { y: { range: (u, min, max) => [0, Math.max(max || 0, 0.001) * 1.1] } },
      legend: { live: true }, // only the first series fills to zero; the others fill through their bands
    }, [[], [], [], [], []], attrNode);

    const sloTtft = tier.slo_ttft_p99_s, sloTpot = tier.slo_tpot_p99_s;
    this.sloTtft = sloTtft;
    this.sloTpot = sloTpot;
    this.lat = new uPlot({
      width: width(latNode), height: HEIGHT, tzDate,
      series: [
        { value: (u, v) => (isNum(v) ? new Date(v * 1000).toISOString().slice(11, 19) : "–") },
        { label: "P99 TTFT", stroke: "#ffd33d", width: 2, value: (u, v) => fmtS(v) },
        { label: "TTFT SLO", stroke: "#f85149", width: 1, dash: [6, 4], value: (u, v) => fmtS(v), points: { show: false } },
        { label: "P99 TPOT", stroke: "#58a6ff", width: 2, scale: "tpot", value: (u, v) => fmtS(v) },
        { label: "TPOT SLO", stroke: "#58a6ff", width: 1, dash: [2, 4], scale: "tpot", value: (u, v) => fmtS(v), points: { show: false } },
      ],
      axes: [timeAxis, { ...secondsAxis, label: "TTFT" }, { ...secondsAxis, side: 1, scale: "tpot", grid: { show: false }, label: "TPOT" }],
      scales: { y: { range: (u, min, max) => [0, Math.max(max || 0, sloTtft || 0) * 1.1] }, tpot: { range: (u, min, max) => [0, Math.max(max || 0, sloTpot || 0, 0.001) * 1.1] } },
    }, [[], [], [], [], []], latNode);
    this.observer = new ResizeObserver(() => this.resize());
    this.observer.observe(attrNode);
  }

  resize() {
    this.attr.setSize({ width: width(this.attrNode), height: HEIGHT });
    this.lat.setSize({ width: width(this.latNode), height: HEIGHT });
  }

  show(stat) {
    this.stat = stat;
    this.update(this.points);
  }

  update(points) {
    this.points = points;
    const { data, raw } = stackedData(points, this.stat);
    this.raw = raw;
    this.attr.setData(data);
    const xs = points.map((p) => p.ts);
    this.lat.setData([
      xs,
      points.map((p) => p.ttft_p99_s),
      points.map(() => this.sloTtft ?? null),
      points.map((p) => p.tpot_p99_s),
      points.map(() => this.sloTpot ?? null),
    ]);
  }

  destroy() {
    this.observer.disconnect();
    this.attr.destroy();
    this.lat.destroy();
  }
}
