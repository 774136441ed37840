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
  if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
  return data;
}

function status(msg, isError) {
  $("status").textContent = msg || "";
  $("status").className = isError ? "error" : "";
}

async function load() {
  let me;
  try {
    me = await api("GET", "/v1/auth/me");
  } catch (e) {
    $("app").hidden = true;
    $("signin").hidden = false;
    return;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  $("who").textContent = me.user.email || me.user.id;
  $("provider").textContent = me.provider || "unknown";
  const dk = me.default_key;
  $("default-key").textContent = dk ? dk.key_prefix + "… (" + dk.scopes.join(", ") + ")" : "not available yet";
  if (dk && dk.raw) {
    $("default-raw").textContent = dk.raw;
    $("default-raw-wrap").hidden = false;
  }
  await listKeys();
}

async function listKeys() {
  const { keys } = await api("GET", "/v1/keys");
  const tbody = $("keys");
  tbody.replaceChildren();
  for (const k of keys) {
    const tr = document.createElement("tr");
    tr.dataset.id = k.id;
    for (const t of [k.name + (k.is_default ? " (default)" : ""), k.key_prefix + "…", k.scopes.join(", ")]) {
      const td = document.createElement("td");
      td.textContent = t;
      tr.append(td);
    }
    const actions = document.createElement("td");
    const rotate = document.createElement("button");
    rotate.textContent = "Rotate";
    rotate.className = "rotate";
    rotate.onclick = () => act(async () => showRaw(await api("POST", "/v1/keys/" + k.id + "/rotate")));
    const revoke = document.createElement("button");
    revoke.textContent = "Revoke";
    revoke.className = "revoke";
    revoke.onclick = () => act(async () => { await api("DELETE", "/v1/keys/" + k.id); await listKeys(); });
    actions.append(rotate, " ", revoke);
    tr.append(actions);
    tbody.append(tr);
  }
}

async function showRaw(key) {
  $("new-raw").textContent = key.raw;
  $("new-raw-wrap").hidden = false;
  await listKeys();
}

async function act(f) {
  try { status(""); await f(); } catch (e) { status(e.message, true); }
}

$("email-form").onsubmit = (ev) => {
  ev.preventDefault();
  act(async () => {
    await api("POST", "/v1/auth/email/start", { email: $("email").value });
    $("code-form").hidden = false;
    status("A code is on its way.");
  });
};

$("code-form").onsubmit = (ev) => {
  ev.preventDefault();
  act(async () => {
    await api("POST", "/v1/auth/email/verify", { email: $("email").value, code: $("code").value });
    status("");
    await load();
  });
};

$("wallet-evm").onclick = () => act(async () => {
  if (!window.ethereum) throw new Error("no injected wallet found");
  const [address] = await window.ethereum.request({ method: "eth_requestAccounts" });
  const ch = await api("POST", "/v1/auth/wallet/evm/challenge", { address });
  const signature = await window.ethereum.request({ method: "personal_sign", params: [ch.message, address] });
  await api("POST", "/v1/auth/wallet/evm/verify", { message: ch.message, signature });
  await load();
});

$("create-form").onsubmit = (ev) => {
  ev.preventDefault();
  act(async () => showRaw(await api("POST", "/v1/keys", { name: $("key-name").value, scopes: ["rpc:read"] })));
};

$("logout").onclick = () => act(async () => {
  await api("POST", "/v1/auth/logout");
  $("default-raw-wrap").hidden = true;
  $("new-raw-wrap").hidden = true;
  await load();
});

load();
