// chainedge console: webhooks and streams. Transaction webhooks and the Solana
// watchlist (each entry's deliveries and dead letters, a test delivery, a dead letter
// sent again), and a Polygon firehose token for one of the keys. Uses app.js's api,
// act, status, role and listedKeys, and format.js's helpers; loaded after them.
"use strict";

const PUSHES = {
  tx: { base: "/v1/console/tx-hooks", list: "tx-hooks-list", off: "tx-hooks-off", form: "tx-hook-form", what: "webhook" },
  sol: { base: "/v1/console/sol-watchlist", list: "sol-watch-list", off: "sol-watch-off", form: "sol-watch-form", what: "watchlist entry" },
};
const DELIVERIES_PAGE = 10;
// The entry whose deliveries show: {push, id, label}.
let inspected = null;

// What an error says to a person: the API's own words when it sent them.
const said = (e) => e.detail || e.message;

async function showPushes() {
  const open = await Promise.all([listPush("tx"), listPush("sol")]);
  $(PUSHES.tx.form).hidden = role === "viewer" || !open[0];
  $(PUSHES.sol.form).hidden = role === "viewer" || !open[1];
  $("firehose-form").hidden = role === "viewer";
  fillFirehoseKeys();
}

// One push's entries, or why this account cannot have them (its plan, or a gateway
// that serves no such route) in their place: false then.
async function listPush(push) {
  const p = PUSHES[push];
  const table = $(p.list).closest(".table-wrap");
  let entries;
  try {
    entries = await api("GET", p.base);
  } catch (e) {
    if (!["tier_insufficient", "route_disabled"].includes(e.message)) throw e;
    const plans = document.createElement("a");
    plans.href = "#/plan";
    plans.textContent = "Compare plans";
    $(p.off).hidden = false;
    $(p.off).replaceChildren("Not available to this account: " + said(e) + ". ", plans);
    table.hidden = true;
    return false;
  }
  $(p.off).hidden = true;
  table.hidden = false;
  $(p.list).replaceChildren(...entries.map((e) => entryRow(push, e)));
  if (!entries.length) noneYet($(p.list));
  return true;
}

// A table with nothing to show says so, across its columns.
function noneYet(tbody) {
  const tr = document.createElement("tr");
  cellOf(tr, "None yet.").colSpan = tbody.closest("table").querySelectorAll("th").length;
  tbody.append(tr);
}

function entryRow(push, e) {
  const tr = document.createElement("tr");
  tr.dataset.id = e.id;
  const webhook = push === "tx" || e.callback_type === "webhook";
  const label = push === "tx" ? e.callback_url : e.pubkey;
  if (push === "sol") {
    cellOf(tr, shortId(e.pubkey, "address"));
    cellOf(tr, e.commitment);
    cellOf(tr, webhook ? e.callback_url : "WebSocket client " + e.callback_url);
  } else {
    cellOf(tr, e.callback_url);
  }
  cellOf(tr, when(e.created_at));
  const actions = cellOf(tr, "");
  const button = (text, cls, go) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.className = cls;
    b.setAttribute("aria-label", text + " " + label);
    b.onclick = () => act(() => go(b), b);
    actions.append(b, " ");
  };
  button("Deliveries", "deliveries", () => showDeliveries(push, e.id, label));
  if (role === "viewer") return tr;
  if (webhook) {
    button("Send test", "test", async () => {
      const r = await api("POST", PUSHES[push].base + "/" + e.id + "/test");
      status(r.delivered ? "Test delivered in " + r.latency_ms + " ms." : "Test not delivered: " + r.error, !r.delivered);
      if (inspected && inspected.id === e.id) await showDeliveries(push, e.id, label);
    });
  }
  button("Delete", "delete", async () => {
    if (!confirm("Delete the " + PUSHES[push].what + " for " + label + "? Nothing more is pushed to it.")) return;
    await api("DELETE", PUSHES[push].base + "/" + e.id);
    if (inspected && inspected.id === e.id) $("deliveries").hidden = true;
    status("Deleted.");
    await listPush(push);
  });
  return tr;
}

// An entry's newest deliveries and its dead letters, each retryable by those who write.
async function showDeliveries(push, id, label) {
  const base = PUSHES[push].base + "/" + id;
  const [log, letters] = await Promise.all([api("GET", base + "/deliveries"), api("GET", base + "/dead-letters")]);
  inspected = { push, id, label };
  $("deliveries-of").textContent = label;
  $("deliveries").hidden = false;
  const result = (ok) => {
    const s = document.createElement("span");
    s.className = ok ? "ok" : "error";
    s.textContent = ok ? "delivered" : "failed";
    return s;
  };
  paged($("deliveries-list"), $("deliveries-pager"), log.items, DELIVERIES_PAGE, (d) => {
    const tr = document.createElement("tr");
    cellOf(tr, when(d.at));
    cellOf(tr, shortId(d.delivery_id, "delivery id"));
    cellOf(tr, result(d.delivered));
    cellOf(tr, d.attempts);
    cellOf(tr, d.error || "");
    return tr;
  });
  paged($("letters-list"), $("letters-pager"), letters.items, DELIVERIES_PAGE, (d) => {
    const tr = document.createElement("tr");
    tr.dataset.id = d.id;
    cellOf(tr, when(d.created_at));
    cellOf(tr, shortId(d.id, "dead letter id"));
    cellOf(tr, d.attempts);
    cellOf(tr, d.last_error);
    const td = cellOf(tr, "");
    if (role !== "viewer") {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "retry";
      b.textContent = "Retry";
      b.setAttribute("aria-label", "Retry dead letter " + d.id);
      b.onclick = () => act(async () => {
        const r = await api("POST", base + "/dead-letters/" + encodeURIComponent(d.id) + "/retry");
        status(r.delivered ? "Delivered on attempt " + r.attempts + "." : "Still not delivered: " + r.error, !r.delivered);
        await showDeliveries(push, id, label);
      }, b);
      td.append(b);
    }
    return tr;
  });
  if (!log.items.length) noneYet($("deliveries-list"));
  if (!letters.items.length) noneYet($("letters-list"));
  const heading = $("deliveries").querySelector("h2");
  heading.tabIndex = -1;
  heading.focus();
}

// A new entry: its errors beside the field that caused them, its signing secret once.
async function addEntry(push, form, body, urlField) {
  clearFieldErrors(form);
  let made;
  try {
    made = await api("POST", PUSHES[push].base, body);
  } catch (e) {
    if (!["callback_not_allowed", "invalid_params", "invalid_request"].includes(e.message)) throw new Error(said(e));
    const field = e.message === "callback_not_allowed" || /callback_url/.test(e.detail || "") ? urlField
      : form.querySelector("input");
    markField(field, said(e));
    throw new Error("Not added: " + said(e));
  }
  form.reset();
  if (made.signing_secret) {
    $("hook-secret").textContent = made.signing_secret;
    $("hook-secret-wrap").hidden = false;
  }
  status("Added.");
  await listPush(push);
}

$("tx-hook-form").onsubmit = (ev) => {
  ev.preventDefault();
  const form = ev.currentTarget;
  act(() => addEntry("tx", form, { callback_url: $("tx-hook-url").value.trim() }, $("tx-hook-url")), form);
};

$("sol-watch-form").onsubmit = (ev) => {
  ev.preventDefault();
  const form = ev.currentTarget;
  act(() => addEntry("sol", form, {
    pubkey: $("sol-pubkey").value.trim(),
    commitment: $("sol-commitment").value,
    callback_type: $("sol-callback-type").value,
    callback_url: $("sol-callback-url").value.trim(),
  }, $("sol-callback-url")), form);
};

// The target field names what it holds for the chosen way of pushing.
function showCallbackKind() {
  const ws = $("sol-callback-type").value === "ws";
  $("sol-callback-label").textContent = ws ? "Client identifier (A-Z a-z 0-9 . _ -)" : "Endpoint URL (https)";
  $("sol-callback-url").placeholder = ws ? "my-indexer-1" : "https://example.com/hooks/solana";
}
$("sol-callback-type").onchange = showCallbackKind;
showCallbackKind();

// The live keys a token can be issued to.
function fillFirehoseKeys() {
  const select = $("firehose-key");
  const chosen = select.value;
  select.replaceChildren(...listedKeys.filter((k) => !k.revoked_at).map((k) => new Option(k.name + " (" + k.key_prefix + "…)", k.id)));
  if (chosen) select.value = chosen;
}

$("firehose-form").onsubmit = (ev) => {
  ev.preventDefault();
  const form = ev.currentTarget;
  act(async () => {
    const key = $("firehose-key").value;
    let info;
    try {
      info = await api("POST", "/v1/keys/" + encodeURIComponent(key) + "/firehose/" + $("firehose-channel").value);
    } catch (e) {
      throw new Error("No token: " + said(e));
    }
    $("firehose-url").textContent = info.url;
    $("firehose-token").textContent = info.token;
    $("firehose-expires").replaceChildren(when(info.expires_at));
    $("firehose-snippet").textContent = "new WebSocket(" + JSON.stringify(info.url) + ", [" +
      JSON.stringify(info.protocol) + ", " + JSON.stringify(info.token) + "])";
    $("firehose-info").hidden = false;
    status("Token issued: it opens " + info.channel + " for " + info.expires_in_secs + " s.");
  }, form);
};
