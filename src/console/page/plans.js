// chainedge console: the plan views. The tenant's plan and what it allows, and every
// plan with its price, limits and the routes it opens; a plan can be asked for (applied
// at once where the operator made it self-service). Uses app.js's api, act, role, load.
"use strict";

// Every plan, the tenant's own marked; another can be asked for (applied at once where
// the operator made it self-service, else sent for approval).
async function showPlans(current) {
  const [{ plans }, { request }] = await Promise.all([
    api("GET", "/v1/plans"), api("GET", "/v1/plan/request")]);
  const tbody = $("plans-list");
  tbody.replaceChildren();
  for (const p of plans) {
    const tr = document.createElement("tr");
    tr.dataset.plan = p.name;
    if (p.name === current) tr.className = "current";
    const cells = [p.name + (p.name === current ? " (yours)" : ""), price(p.price), p.requests_per_second ?? "no limit set",
      p.compute_units_per_second ?? "—", p.burst + "\u00d7", opens(p, plans)];
    for (const c of cells) cellOf(tr, c);
    const action = document.createElement("td");
    if (p.name !== current && role === "owner") {
      const b = document.createElement("button");
      b.className = "ask-plan";
      b.textContent = p.self_service ? "Switch" : "Request";
      b.onclick = () => act(async () => {
        if (!confirm((p.self_service ? "Switch to " : "Ask an operator for ") + p.name + "?")) return;
        const answer = await api("POST", "/v1/plan/request", { plan: p.name });
        await load();
        $("plan-request").textContent = answer.request.status === "applied"
          ? "Your plan is now " + p.name + "." : $("plan-request").textContent;
      }, b);
      action.append(b);
    }
    tr.append(action);
    tbody.append(tr);
  }
  $("plan-request").textContent = request && request.status === "pending"
    ? "Waiting for an operator: " + request.plan + " (asked " + request.requested_at.replace("T", " ").replace("Z", " UTC") + ")."
    : request ? "Last request: " + request.plan + ", " + request.status + "." : "";
}

// "$49 / month", "free", or "price on request".
function price(p) {
  if (!p) return "price on request";
  if (p.amount === 0) return "free";
  const money = new Intl.NumberFormat("en", { style: "currency", currency: p.currency, maximumFractionDigits: 2 });
  return money.format(p.amount) + " / " + p.per;
}

// The routes a plan opens beyond the plan below it, folded: "+ 3 routes".
function opens(p, plans) {
  const at = plans.indexOf(p);
  const d = document.createElement("details");
  const s = document.createElement("summary");
  s.textContent = (at > 0 ? "all of " + plans[at - 1].name + " + " : "") + p.opens.length + " route" + (p.opens.length === 1 ? "" : "s");
  const ul = document.createElement("ul");
  for (const r of p.opens) {
    const li = document.createElement("li");
    const code = document.createElement("code");
    code.textContent = (r.websocket ? "WS" : r.methods.join(" ")) + " " + r.path;
    li.append(code);
    ul.append(li);
  }
  d.append(s, ul);
  return d;
}

// The tenant's plan and what it allows: requests/s (the default and each category that
// sets its own), the burst over it, compute units/s.
function showPlan(plan) {
  const list = $("plan-categories");
  list.replaceChildren();
  if (!plan) {
    $("plan").textContent = "Plan not available.";
    return;
  }
  const rate = (r) => (r == null ? "no limit set" : r + " requests/s");
  let text = plan.name + ": " + rate(plan.requests_per_second) +
    " (bursts to " + plan.burst + "\u00d7)";
  if (plan.compute_units_per_second != null) text += ", " + plan.compute_units_per_second + " compute units/s";
  if (plan.trial_ends_at) text += "; trial until " + plan.trial_ends_at;
  $("plan").textContent = text;
  for (const [category, r] of Object.entries(plan.categories || {})) {
    const li = document.createElement("li");
    li.textContent = category + ": " + rate(r);
    list.appendChild(li);
  }
}
