// chainedge console: charts over time, drawn by uPlot (vendored, /console/uplot.js):
// calls with the failed ones in red, and latency percentiles, for the chosen key and for
// the whole account, with each point's values under the cursor. Uses app.js's api.
"use strict";

const BLUE = "#2f6feb", RED = "#d1242f";
const charts = new Map();

// Keep every chart as wide as its box (a view shown after it was drawn, a turned phone).
function resizeCharts() {
  for (const [box, chart] of charts) {
    const width = box.clientWidth;
    if (width > 0 && width !== chart.width) chart.setSize({ width, height: chart.height });
  }
}
window.addEventListener("resize", resizeCharts);

// Draw (again) the chart in `box`: `series` are uPlot's, `data` [times, ...values].
function drawChart(box, series, data, label) {
  charts.get(box)?.destroy();
  box.replaceChildren();
  box.setAttribute("role", "img");
  box.setAttribute("aria-label", label);
  // Half a step of room at each end, so the first and last bars show whole.
  const xs = data[0];
  const pad = xs.length > 1 ? (xs[1] - xs[0]) / 2 : 300;
  const chart = new uPlot({
    width: box.clientWidth || 640,
    height: 180,
    series: [{ label: "time" }, ...series],
    scales: {
      x: { time: true, range: () => [xs[0] - pad, xs[xs.length - 1] + pad] },
      y: { range: (u, min, max) => [0, Math.max(1, max)] },
    },
    axes: [{ stroke: "#57606a" }, { stroke: "#57606a", size: 44 }],
    cursor: { drag: { x: false, y: false } },
  }, data, box);
  charts.set(box, chart);
}

// Calls as bars, blue, and the failed ones (errors and 429s) in red over their foot. A
// point with none has no bar (null), and reads 0 under the cursor.
function callSeries() {
  const bars = uPlot.paths.bars({ size: [0.8, 40, 3] });
  const bar = (label, color) => ({ label, stroke: color, fill: color, width: 0, paths: bars,
    points: { show: false }, value: (u, v) => (v == null ? 0 : v) });
  return [bar("calls", BLUE), bar("failed", RED)];
}

const bars = (values) => values.map((v) => (v > 0 ? v : null));

function latencySeries() {
  // Points drawn too: a step with calls between two without is a lone point.
  const line = (label, stroke, dash) => ({ label, stroke, width: 2, dash, spanGaps: false,
    points: { show: true, size: 6, fill: stroke }, value: (u, v) => (v == null ? "—" : v + " ms") });
  return [line("p50", "#1a7f37"), line("p95", "#9a6700", [6, 3]), line("p99", RED, [2, 3])];
}

const times = (points, field) => points.map((p) => Date.parse(p[field]) / 1000);

// One key's calls per point of its window (`GET /v1/keys/{id}/usage`).
function drawKeyCalls(box, usage, summary) {
  const p = usage.points;
  drawChart(box, callSeries(), [times(p, "start"), bars(p.map((x) => x.calls)),
    bars(p.map((x) => Math.min(x.calls, x.errors + x.rate_limited)))], summary);
}

// Latency percentiles over the window (`GET /v1/usage`'s series), for a key or all.
function drawLatency(box, series, whose) {
  const p = series.points;
  const pick = (q) => p.map((x) => x.latency_ms[q]);
  drawChart(box, latencySeries(), [times(p, "at"), pick("p50"), pick("p95"), pick("p99")],
    "latency percentiles of " + whose + " per " + series.step_secs / 60 + " minutes");
}

// The account's calls and errors over the window (`GET /v1/usage`'s series).
function drawAccountCalls(box, series) {
  const p = series.points;
  drawChart(box, callSeries(), [times(p, "at"), bars(p.map((x) => x.calls)), bars(p.map((x) => x.errors))],
    "calls of every key per " + series.step_secs / 60 + " minutes");
}
