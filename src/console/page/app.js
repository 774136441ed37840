// chainedge console: cookie session + double-submit CSRF, no build step.
"use strict";
const $ = (id) => document.getElementById(id);

function csrf() {
  const m = document.cookie.match(/(?:^|;\s*)nl_csrf=([^;]*)/);
  return m ? decodeURIComponent(m[1]) : "";
}

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (!["GET", "HEAD"].includes(method)) headers["X-CSRF-Token"] = csrf();
  const r = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  const data = text ? JSON.parse(text) : {};
  if (!r.ok) {
    const e = new Error(data.error || ("HTTP " + r.status));
    // What is wrong, naming the field and entry (`restrictions.allowed_ips[2]: ...`).
    e.detail = r.headers.get("X-Chainedge-Error-Detail");
    throw e;
  }
  return data;
}

// A notice at the bottom of the window; one that is not an error goes after a while.
let statusTimer = null;
function status(msg, isError) {
  clearTimeout(statusTimer);
  $("status").textContent = msg || "";
  $("status").className = isError ? "error" : "";
  if (msg && !isError) statusTimer = setTimeout(() => status(""), 4000);
}

async function load() {
  let me;
  try {
    me = await api("GET", "/v1/auth/me");
  } catch (e) {
    $("app").hidden = true;
    $("account").hidden = true;
    $("signin").hidden = false;
    await showProviders();
    return;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("account").hidden = false;
  $("who").textContent = me.user.email || me.user.id;
  $("provider").textContent = me.provider || "unknown";
  role = me.tenant ? me.tenant.role : "owner";
  $("tenant-name").textContent = me.tenant ? me.tenant.name : "your account";
  $("role-badge").textContent = role;
  const home = !me.tenants || !me.tenant || me.tenants[0].tenant_id === me.tenant.id;
  const dk = me.default_key;
  $("default-key").textContent = dk ? dk.key_prefix + "… (" + dk.scopes.join(", ") + ")"
    : home ? "not available yet" : "You act in the team " + me.tenant.name + ": its keys are below; your own default key is in your own account.";
  // A secret on screen belongs to the account it was made in: gone when acting in another.
  if (!home) $("default-raw-wrap").hidden = true;
  if (dk && dk.raw) {
    $("default-raw").textContent = dk.raw;
    $("default-raw-wrap").hidden = false;
  }
  showEndpoints(dk && dk.raw);
  showPlan(me.plan);
  $("create-form").hidden = role === "viewer";
  await showPlans(me.plan && me.plan.name);
  await listKeys();
  await showTeam(me);
  await showPushes();
  route(false);
}

// Where to call, from this page's own origin, and a request that works as shown (with
// the default key's secret while it is on screen, else a placeholder).
function showEndpoints(raw) {
  const origin = location.origin;
  const ws = origin.replace(/^http/, "ws");
  $("endpoint-http").textContent = origin + "/rpc/eth";
  $("endpoint-ws").textContent = ws + "/rpc/eth";
  $("endpoint-rest").textContent = origin + "/v1/eth";
  const key = raw || "YOUR_KEY";
  $("snippet-curl").textContent =
    "curl -s " + origin + "/rpc/eth -H 'content-type: application/json' -H 'x-token: " + key + "' \\\n" +
    "  -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_blockNumber\",\"params\":[]}'";
  const url = JSON.stringify(origin + "/rpc/eth");
  const secret = JSON.stringify(key);
  $("snippet-web3py").textContent = [
    "from web3 import Web3",
    "",
    "w3 = Web3(Web3.HTTPProvider(" + url + ", request_kwargs={\"headers\": {\"x-token\": " + secret + "}}))",
    "print(w3.eth.block_number)",
  ].join("\n");
  $("snippet-ethers").textContent = [
    "import { ethers } from \"ethers\";",
    "",
    "const request = new ethers.FetchRequest(" + url + ");",
    "request.setHeader(\"x-token\", " + secret + ");",
    "const provider = new ethers.JsonRpcProvider(request);",
    "console.log(await provider.getBlockNumber());",
    "provider.destroy();",
  ].join("\n");
  $("snippet-viem").textContent = [
    "import { createPublicClient, http } from \"viem\";",
    "",
    "const client = createPublicClient({",
    "  transport: http(" + url + ", { fetchOptions: { headers: { \"x-token\": " + secret + " } } }),",
    "});",
    "console.log(await client.getBlockNumber());",
  ].join("\n");
}

for (const b of document.querySelectorAll("button.copy")) {
  b.onclick = () => act(async () => {
    await navigator.clipboard.writeText($(b.dataset.copy).textContent);
    status("Copied.");
  });
}

let usageWindow = "24h";
// The signed-in member's role in the account it acts in: what the page offers to do.
let role = "owner";

// The account's audit log, newest first, a page at a time (`before`: the cursor of
// the page asked for; none: the newest). Keys by name where the account still has them,
// members by email, other ids shortened.
const AUDIT_PAGE = 25;
let auditPages = [null];

async function showAudit(before) {
  if (before === undefined) auditPages = [null];
  const at = before ?? null;
  const { events, next } = await api("GET", "/v1/audit?limit=" + AUDIT_PAGE +
    (at ? "&before=" + encodeURIComponent(at) : ""));
  const names = new Map(listedKeys.map((k) => [k.id, k.name]));
  const tbody = $("audit-list");
  tbody.replaceChildren();
  for (const e of events) {
    const tr = document.createElement("tr");
    cellOf(tr, when(e.at));
    cellOf(tr, e.user ?? (e.user_id ? shortId(e.user_id, "member") : "operator"));
    cellOf(tr, e.action);
    cellOf(tr, names.has(e.target) ? names.get(e.target)
      : e.target && e.target.length > 14 ? shortId(e.target) : e.target);
    cellOf(tr, e.detail);
    tbody.append(tr);
  }
  const index = auditPages.indexOf(at);
  pagerButtons($("audit-pager"), "page " + (index + 1),
    index > 0 && (() => showAudit(auditPages[index - 1])),
    next && (async () => {
      if (!auditPages.includes(next)) auditPages.push(next);
      await showAudit(next);
    }));
}

// The keys as last listed, for `#/keys/{id}`.
let listedKeys = [];

async function listKeys() {
  const { keys } = await api("GET", "/v1/keys");
  listedKeys = keys;
  act(() => showAudit());
  fillUsageKeys(keys);
  const tbody = $("keys");
  tbody.replaceChildren();
  for (const k of keys) {
    const tr = document.createElement("tr");
    tr.dataset.id = k.id;
    cellOf(tr, k.name + (k.is_default ? " (default)" : ""));
    cellOf(tr, k.key_prefix + "…");
    cellOf(tr, k.scopes.join(", "));
    cellOf(tr, when(k.created_at));
    cellOf(tr, when(k.last_used_at));
    cellOf(tr, describeRestrictions(k.restrictions));
    const actions = document.createElement("td");
    const rename = document.createElement("button");
    rename.textContent = "Rename";
    rename.className = "rename";
    rename.onclick = () => act(async () => {
      const name = prompt("New name for " + k.name, k.name);
      if (name === null || name.trim() === "" || name.trim() === k.name) return;
      await api("PATCH", "/v1/keys/" + k.id, { name: name.trim() });
      await listKeys();
    }, rename);
    const rotate = document.createElement("button");
    rotate.textContent = "Rotate";
    rotate.className = "rotate";
    rotate.onclick = () => act(async () => {
      if (!confirm("Rotate " + k.name + "? The old secret stops working now.")) return;
      showRaw(await api("POST", "/v1/keys/" + k.id + "/rotate"));
    }, rotate);
    const revoke = document.createElement("button");
    revoke.textContent = "Revoke";
    revoke.className = "revoke";
    revoke.onclick = () => act(async () => {
      if (!confirm("Revoke " + k.name + "? Calls with it are refused from now on.")) return;
      await api("DELETE", "/v1/keys/" + k.id);
      await listKeys();
    }, revoke);
    const restrict = document.createElement("button");
    restrict.textContent = "Restrictions";
    restrict.className = "restrict";
    restrict.onclick = () => { location.hash = "#/keys/" + encodeURIComponent(k.id); };
    // Each button names its key for screen readers ("Revoke ci", not four "Revoke"s).
    for (const b of [rename, restrict, rotate, revoke]) b.setAttribute("aria-label", b.textContent + " " + k.name);
    if (role !== "viewer") actions.append(rename, " ", restrict, " ", rotate, " ", revoke);
    tr.append(actions);
    tbody.append(tr);
  }
}

// A key's restrictions in a few words ("none" when it has none).
function describeRestrictions(r) {
  const parts = [];
  const list = (label, items) => items && items.length && parts.push(label + ": " + items.join(", "));
  list("origins", r && r.allowed_origins);
  list("addresses", r && r.allowed_ips);
  list("chains", r && r.allowed_chains);
  list("methods", r && r.allowed_methods);
  list("contracts", r && r.allowed_contracts);
  if (r && r.max_rps != null) parts.push(r.max_rps + " requests/s");
  if (r && r.expires_at) parts.push("expires " + r.expires_at.replace("T", " ").replace("Z", " UTC"));
  return parts.length ? parts.join("; ") : "none";
}

// The restrictions editor, filled with the key's; saving replaces them whole.
let restricting = null;
const lines = (id) => $(id).value.split("\n").map((l) => l.trim()).filter(Boolean);

// `#/keys/{id}`: that key's restrictions in the editor; `#/keys`: the editor closed.
function showKeyRoute(id) {
  const k = id && listedKeys.find((key) => key.id === id);
  if (k) {
    if (!restricting || restricting.id !== k.id || $("restrict").hidden) editRestrictions(k);
  } else {
    $("restrict").hidden = true;
    if (id && listedKeys.length) status("No key " + id + " in this account.", true);
  }
}

function editRestrictions(k) {
  restricting = k;
  clearFieldErrors($("restrict-form"));
  const r = k.restrictions || {};
  $("restrict-name").textContent = k.name;
  $("r-origins").value = (r.allowed_origins || []).join("\n");
  $("r-ips").value = (r.allowed_ips || []).join("\n");
  $("r-methods").value = (r.allowed_methods || []).join("\n");
  $("r-contracts").value = (r.allowed_contracts || []).join("\n");
  for (const c of document.querySelectorAll("#r-chains input")) c.checked = (r.allowed_chains || []).includes(c.value);
  $("r-rps").value = r.max_rps ?? "";
  $("r-expires").value = r.expires_at ? r.expires_at.slice(0, 16) : "";
  $("restrict").hidden = false;
  $("r-origins").focus();
}

// Each restriction's field and its error line, by the member the API names.
const RESTRICTION_FIELDS = {
  allowed_origins: "r-origins", allowed_ips: "r-ips", allowed_chains: "r-chains",
  allowed_methods: "r-methods", allowed_contracts: "r-contracts", max_rps: "r-rps", expires_at: "r-expires",
};

function clearFieldErrors(form) {
  for (const e of form.querySelectorAll(".field-error")) e.remove();
  for (const f of form.querySelectorAll("[aria-invalid]")) {
    f.removeAttribute("aria-invalid");
    f.removeAttribute("aria-describedby");
  }
}

// Show `detail` ("restrictions.allowed_ips[2]: 'x' is not ...") beside its field, the
// entry named by its line in the box; false when it names no field of the form.
function showFieldError(detail) {
  const m = /^restrictions\.(\w+)(?:\[(\d+)\])?: (.*)$/.exec(detail || "");
  const id = m && RESTRICTION_FIELDS[m[1]];
  if (!id) return false;
  const field = $(id);
  let why = m[3];
  if (m[2] !== undefined && field.tagName === "TEXTAREA") {
    // The API counts the entries; the box also has blank lines.
    const rows = field.value.split("\n");
    let seen = -1;
    const line = rows.findIndex((l) => l.trim() && ++seen === Number(m[2]));
    if (line >= 0) why = "line " + (line + 1) + ": " + why;
  }
  markField(field, why);
  return true;
}

$("restrict-form").onsubmit = (ev) => {
  ev.preventDefault();
  clearFieldErrors($("restrict-form"));
  act(async () => {
    const r = {
      allowed_origins: lines("r-origins"),
      allowed_ips: lines("r-ips"),
      allowed_chains: [...document.querySelectorAll("#r-chains input:checked")].map((c) => c.value),
      allowed_methods: lines("r-methods"),
      allowed_contracts: lines("r-contracts"),
    };
    if ($("r-rps").value !== "") r.max_rps = Number($("r-rps").value);
    if ($("r-expires").value !== "") r.expires_at = $("r-expires").value + ":00Z";
    try {
      await api("PATCH", "/v1/keys/" + restricting.id, { restrictions: r });
    } catch (e) {
      if (e.message !== "invalid_request") throw e;
      throw new Error(showFieldError(e.detail)
        ? "Restrictions not saved: one entry does not parse (marked)."
        : "Restrictions not saved: " + (e.detail || "they do not parse").replace(/^restrictions\./, ""));
    }
    status("Restrictions of " + restricting.name + " saved.");
    location.hash = "#/keys";
    await listKeys();
  }, ev.currentTarget);
};

$("restrict-cancel").onclick = () => {
  clearFieldErrors($("restrict-form"));
  $("restrict").hidden = true;
  location.hash = "#/keys";
};

// Usage chart: one bar per point of the window (calls), errors and 429s stacked in red.
function fillUsageKeys(keys) {
  const select = $("usage-key");
  const chosen = select.value;
  select.replaceChildren();
  for (const k of keys) {
    const o = document.createElement("option");
    o.value = k.id;
    o.textContent = k.name + (k.is_default ? " (default)" : "") + " — " + k.key_prefix + "…";
    select.append(o);
  }
  if (keys.some((k) => k.id === chosen)) select.value = chosen;
  act(showUsage);
}

async function showUsage() {
  const id = $("usage-key").value;
  $("usage-totals").textContent = "";
  if (!id) return;
  const [u, breakdown] = await Promise.all([
    api("GET", "/v1/keys/" + encodeURIComponent(id) + "/usage?window=" + usageWindow),
    api("GET", "/v1/usage?window=" + usageWindow + "&key_id=" + encodeURIComponent(id)),
  ]);
  const t = u.totals;
  $("usage-totals").textContent = t.calls + " calls · " + t.compute_units + " compute units · " +
    t.errors + " errors · " + t.rate_limited + " rate-limited";
  drawKeyCalls($("usage-chart"), u, "calls per interval over the last " + u.window + ": " + $("usage-totals").textContent);
  drawLatency($("usage-latency"), breakdown.series, "this key");
  await showRequests(id);
  await showTxs(id);
  await showBreakdown();
}

// The key's newest requests, one row each, 25 a page; refused ones marked.
async function showRequests(id) {
  const { requests } = await api("GET", "/v1/keys/" + encodeURIComponent(id) + "/requests");
  paged($("requests-list"), $("requests-pager"), requests, 25, (r) => {
    const tr = document.createElement("tr");
    for (const c of [when(r.at), r.route, r.method, r.status, r.error || "", r.latency_ms.toFixed(1), r.upstream || ""]) {
      cellOf(tr, c);
    }
    if (r.error) tr.className = "error";
    return tr;
  });
  $("requests-empty").hidden = requests.length > 0;
}

// The key's recent transactions, one row each.
async function showTxs(id) {
  const { txs } = await api("GET", "/v1/keys/" + encodeURIComponent(id) + "/txs");
  const tbody = $("txs");
  tbody.replaceChildren();
  for (const t of txs) {
    const tr = document.createElement("tr");
    tr.title = t.replaced_by ? "replaced by " + t.replaced_by : "";
    for (const c of [shortId(t.hash, "transaction hash"), t.chain, t.status, t.block_number ?? "",
      t.confirmations ?? "", when(t.updated_at)]) {
      cellOf(tr, c);
    }
    tr.className = "tx-" + t.status;
    tbody.append(tr);
  }
  $("txs-empty").hidden = txs.length > 0;
}

$("usage-key").onchange = () => act(showUsage);
for (const b of document.querySelectorAll(".windows button")) {
  b.onclick = () => act(async () => {
    usageWindow = b.dataset.window;
    for (const o of document.querySelectorAll(".windows button")) o.setAttribute("aria-pressed", String(o === b));
    await showUsage();
  });
}

async function showRaw(key) {
  $("new-raw").textContent = key.raw;
  $("new-raw-wrap").hidden = false;
  await listKeys();
}

// Run an action, its errors shown; the form or button that started it is busy (and
// cannot be used again) until it ends.
async function act(f, busy) {
  const controls = busy ? (busy.tagName === "FORM" ? [...busy.querySelectorAll("button")] : [busy]) : [];
  for (const c of controls) c.disabled = true;
  if (busy) busy.setAttribute("aria-busy", "true");
  try {
    if ($("status").className === "error") status("");
    await f();
  } catch (e) {
    status(e.message, true);
  } finally {
    for (const c of controls) c.disabled = false;
    if (busy) busy.removeAttribute("aria-busy");
  }
}

$("email-form").onsubmit = (ev) => {
  ev.preventDefault();
  act(async () => {
    await api("POST", "/v1/auth/email/start", { email: $("email").value });
    $("code-form").hidden = false;
    status("A code is on its way.");
  }, ev.currentTarget);
};

$("code-form").onsubmit = (ev) => {
  ev.preventDefault();
  act(async () => {
    await api("POST", "/v1/auth/email/verify", { email: $("email").value, code: $("code").value });
    status("");
    await load();
  }, ev.currentTarget);
};

// The sign-in ways this gateway offers: email only with delivery configured, Google only
// with its client.
async function showProviders() {
  try {
    const p = await api("GET", "/v1/auth/providers");
    $("signin-email").hidden = !p.email;
    $("signin-google").hidden = !p.google;
  } catch (e) {
    // The buttons stay as they are; each says what is wrong when used.
  }
}

// Phantom, Solflare and Backpack inject a provider with connect() and signMessage().
function solanaWallet() {
  return (window.phantom && window.phantom.solana) || window.solflare || window.backpack || window.solana;
}

$("wallet-solana").onclick = () => act(async () => {
  const wallet = solanaWallet();
  if (!wallet) {
    throw new Error("no Solana wallet extension in this browser: install one (Phantom, Solflare, Backpack…) or sign in another way");
  }
  const { publicKey } = await wallet.connect();
  const address = publicKey.toString();
  const ch = await api("POST", "/v1/auth/wallet/solana/challenge", { address });
  const signed = await wallet.signMessage(new TextEncoder().encode(ch.message), "utf8");
  const bytes = signed.signature || signed;
  const signature = btoa(String.fromCharCode(...bytes));
  await api("POST", "/v1/auth/wallet/solana/verify", { message: ch.message, signature });
  await load();
});

$("wallet-evm").onclick = () => act(async () => {
  if (!window.ethereum) {
    throw new Error("no wallet extension in this browser: install one (MetaMask, Rabby…) or sign in with an email code");
  }
  const [address] = await window.ethereum.request({ method: "eth_requestAccounts" });
  const ch = await api("POST", "/v1/auth/wallet/evm/challenge", { address });
  const signature = await window.ethereum.request({ method: "personal_sign", params: [ch.message, address] });
  await api("POST", "/v1/auth/wallet/evm/verify", { message: ch.message, signature });
  await load();
});

$("create-form").onsubmit = (ev) => {
  ev.preventDefault();
  const scopes = [...document.querySelectorAll("#key-scopes input:checked")].map((i) => i.value);
  act(async () => {
    if (scopes.length === 0) throw new Error("choose at least one scope");
    showRaw(await api("POST", "/v1/keys", { name: $("key-name").value, scopes }));
  }, ev.currentTarget);
};

$("logout").onclick = () => act(async () => {
  await api("POST", "/v1/auth/logout");
  $("default-raw-wrap").hidden = true;
  $("new-raw-wrap").hidden = true;
  await load();
});

// After team.js has run too.
window.addEventListener("DOMContentLoaded", load);
