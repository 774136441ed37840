// chainedge console: the account's usage over the chart's window: totals over every key,
// latency, and calls, errors and latency per chain and method, with a CSV download.
// Uses app.js's api, $ and usageWindow, and charts.js; loaded after them.
"use strict";

function ms(v) {
  return v == null ? "—" : String(v);
}

async function showBreakdown() {
  const u = await api("GET", "/v1/usage?window=" + usageWindow);
  const t = u.totals;
  $("account-totals").textContent = "All keys, last " + u.window + ": " + t.calls + " calls · " +
    t.compute_units + " compute units · " + t.errors + " errors · " + t.rate_limited + " rate-limited";
  const l = u.latency_ms;
  $("account-latency").textContent = l.p50 == null ? "No latency recorded in this window yet."
    : "Latency: mean " + l.mean + " ms, p50 ≤ " + l.p50 + " ms, p95 ≤ " + l.p95 + " ms, p99 ≤ " + l.p99 + " ms.";
  const tbody = $("breakdown-methods");
  tbody.replaceChildren();
  for (const m of u.by_method) {
    const tr = document.createElement("tr");
    const lm = m.latency_ms;
    for (const c of [m.chain, m.method, m.calls, m.errors, ms(lm.mean), ms(lm.p50), ms(lm.p95), ms(lm.p99)]) {
      cellOf(tr, c);
    }
    if (m.errors > 0) tr.className = "error";
    tbody.append(tr);
  }
  $("breakdown-empty").hidden = u.by_method.length > 0;
  drawAccountCalls($("account-chart"), u.series);
  drawLatency($("account-latency-chart"), u.series, "every key");
  $("usage-csv").href = "/v1/usage?format=csv&window=" + encodeURIComponent(usageWindow);
}
