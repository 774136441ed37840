// Drives the console page in headless Chromium: email sign-in, cookie attributes,
// default key, the key's usage chart (with a screenshot whose pixels must show the
// bars), create / rotate / revoke, a forged cross-site POST, sign-out.
// Usage: node console.mjs BASE_URL OUTBOX_FILE SCREENSHOT_FILE HOOK_URL   (exit 0 = all passed)
import { chromium } from "playwright-core";
import { readFileSync, existsSync, writeFileSync } from "node:fs";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { generateKeyPairSync, sign } from "node:crypto";

// Base58 (Bitcoin alphabet), as Solana writes addresses.
function base58(bytes) {
  const alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  let n = BigInt("0x" + Buffer.from(bytes).toString("hex"));
  let out = "";
  while (n > 0n) {
    out = alphabet[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = "1" + out;
  }
  return out;
}

const [base, outbox, screenshotFile, hookUrl] = process.argv.slice(2);
// A full-page screenshot of a flow, kept beside the chart's as a test artifact.
const shot = async (p, name) =>
  writeFileSync(screenshotFile.replace(/[^/]*$/, name + ".png"), await p.screenshot({ fullPage: true }));
const email = "browser@example.com";
// axe-core (npm): the page's serious and critical accessibility violations, as
// "rule: where" lines. Evaluated through the DevTools protocol, so the page's CSP,
// which refuses inline scripts, does not stop it.
const axeSource = readFileSync(new URL("../../node_modules/axe-core/axe.min.js", import.meta.url), "utf8");
async function axeViolations(p) {
  if (!(await p.evaluate(() => typeof window.axe === "object"))) await p.evaluate(axeSource);
  return p.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => v.id + ": " + v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", "));
  });
}
// Open one of the console's views from its navigation, as a user would.
const go = async (p, view) => {
  await p.click(`nav.side a[data-nav="${view}"]`);
  await p.waitForSelector(`[data-view="${view}"]:not([hidden])`);
};

// The newest message to `to` whose body matches `pattern`: its first group.
async function codeFromOutbox(to = email, pattern = /code is (\d{6})/) {
  for (let i = 0; i < 100; i++) {
    if (existsSync(outbox)) {
      const lines = readFileSync(outbox, "utf8").trim().split("\n").filter(Boolean);
      const mine = lines.map((l) => JSON.parse(l)).filter((m) => m.to === to && pattern.test(m.body));
      if (mine.length) return mine.at(-1).body.match(pattern)[1];
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("no code in the outbox");
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--headless"],
});
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  // A script error fails the run with its message (not a timeout far from its cause).
  const scriptErrors = [];
  page.on("pageerror", (e) => { scriptErrors.push(e.message); console.log("page error: " + e.message); });
  const resp = await page.goto(base + "/console/");
  assert.equal(resp.status(), 200);
  assert.match(resp.headers()["content-security-policy"], /script-src 'self'/);

  // Sign in with an email code.
  await page.waitForSelector("#signin:not([hidden])");
  assert.deepEqual(await axeViolations(page), [], "accessibility of the sign-in page");
  await page.fill("#email", email);
  await page.click("#send-code");
  await page.waitForSelector("#code-form:not([hidden])");
  await page.fill("#code", await codeFromOutbox());
  await page.click("#verify-code");
  await page.waitForSelector("#app:not([hidden])");
  assert.equal(await page.textContent("#who"), email);
  assert.equal(await page.textContent("#provider"), "email");
  await shot(page, "signed-in");

  // Cookie attributes as SPEC says (plain HTTP here, so not Secure).
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === "nl_session");
  const csrf = cookies.find((c) => c.name === "nl_csrf");
  assert.ok(session && csrf, JSON.stringify(cookies));
  assert.equal(session.httpOnly, true);
  assert.equal(csrf.httpOnly, false);
  for (const c of [session, csrf]) {
    assert.equal(c.sameSite, "Lax");
    assert.equal(c.path, "/");
    assert.equal(c.secure, false);
    const days = (c.expires * 1000 - Date.now()) / 86400000;
    assert.ok(days > 29.9 && days < 30.1, `${c.name} expires in ${days} days`);
  }
  assert.equal(session.value.length, 43);
  assert.equal(csrf.value.length, 22);
  // Script can read the CSRF cookie but not the session cookie.
  const visible = await page.evaluate(() => document.cookie);
  assert.ok(visible.includes("nl_csrf=") && !visible.includes("nl_session="), visible);

  // The default key is shown once, with its secret.
  const raw = await page.textContent("#default-raw");
  assert.match(raw, /^ce_[A-Za-z0-9_-]{43}$/);
  // The shell: the overview first, the account and the role in the header.
  await page.waitForSelector('[data-view="overview"]:not([hidden])', { timeout: 5000 }).catch(async (e) => {
    throw new Error("no overview; the page says: " + await page.textContent("#status") + "; " + e.message);
  });
  assert.equal(await page.getAttribute('nav.side a[data-nav="overview"]', "aria-current"), "page");
  assert.equal(await page.textContent("#role-badge"), "owner");
  await go(page, "keys");
  await page.waitForSelector("#keys tr");
  assert.equal(await page.locator("#keys tr").count(), 1);

  // Start here: the endpoints of this origin, and a request that works as shown, with
  // the default key filled in while its secret is on screen.
  assert.equal(await page.textContent("#endpoint-http"), base + "/rpc/eth");
  assert.equal(await page.textContent("#endpoint-ws"), base.replace(/^http/, "ws") + "/rpc/eth");
  const snippet = await page.textContent("#snippet-curl");
  assert.ok(snippet.includes(raw), snippet);
  const answered = JSON.parse(execFileSync("bash", ["-c", snippet], { encoding: "utf8" }));
  assert.equal(answered.jsonrpc, "2.0", JSON.stringify(answered));
  assert.ok("result" in answered, JSON.stringify(answered));
  // The library snippets, run once the usage below is counted (their calls are theirs).
  const librarySnippets = {
    web3py: await page.textContent("#snippet-web3py"),
    ethers: await page.textContent("#snippet-ethers"),
    viem: await page.textContent("#snippet-viem"),
  };
  for (const code of Object.values(librarySnippets)) assert.ok(code.includes(raw), code);

  // Plan: the tenant's, with the rate it allows and the burst over it.
  const plan = await page.textContent("#plan");
  assert.match(plan, /^[a-z]+: (\d+(\.\d+)? requests\/s|no limit set) \(bursts to [\d.]+\u00d7\)/, plan);

  // Plans: every plan listed, the tenant's own marked; asking for another (not
  // self-service here) leaves a pending request on the page.
  await go(page, "plan");
  await page.waitForSelector("#plans-list tr.current");
  assert.equal(await page.locator("#plans-list tr").count(), 6);
  assert.match(await page.textContent("#plans-list tr.current"), /^free \(yours\)/);
  // Each plan with its price (none configured here) and the routes it opens.
  assert.match(await page.textContent('#plans-list tr[data-plan="business"]'), /price on request.*all of pro \+ \d+ routes/);
  page.once("dialog", (d) => d.accept());
  await page.locator('#plans-list tr[data-plan="pro"] button.ask-plan').click();
  await page.waitForFunction(() => document.getElementById("plan-request").textContent.startsWith("Waiting for an operator: pro"));
  assert.match(await page.textContent("#plans-list tr.current"), /^free/);
  await shot(page, "plans");
  console.log("plans: listed, a request for pro pending");

  // Usage: calls made with the default key (the snippet's, 5 more answered, 2 refused by
  // the method table)
  // show in the chart once flushed. The screenshot's pixels must hold the bars' colours:
  // blue for answered calls, red for the refused ones.
  const rpc = (method) =>
    fetch(base + "/rpc/eth", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + raw },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
    }).then((r) => r.status);
  for (let i = 0; i < 5; i++) assert.equal(await rpc("eth_blockNumber"), 200);
  for (let i = 0; i < 2; i++) assert.equal(await rpc("admin_nodeInfo"), 403);
  await go(page, "usage");
  for (const window of ["24h", "30d"]) {
    const button = page.locator(`.windows button[data-window="${window}"]`);
    for (let i = 0; ; i++) {
      await button.click();
      await page.waitForFunction(() => document.getElementById("usage-totals").textContent !== "");
      const totals = await page.textContent("#usage-totals");
      if (totals.startsWith("8 calls")) break;
      assert.ok(i < 50, `usage never showed 8 calls: ${totals}`);
      await page.waitForTimeout(100);
    }
    const totals = await page.textContent("#usage-totals");
    assert.match(totals, /^8 calls · 60 compute units · 2 errors · 0 rate-limited$/);
    const png = await page.locator("#usage-chart").screenshot();
    writeFileSync(screenshotFile, png);
    const pixels = await page.evaluate(async (b64) => {
      const img = new Image();
      img.src = "data:image/png;base64," + b64;
      await img.decode();
      const c = document.createElement("canvas");
      c.width = img.width;
      c.height = img.height;
      const g = c.getContext("2d");
      g.drawImage(img, 0, 0);
      const d = g.getImageData(0, 0, c.width, c.height).data;
      let blue = 0, red = 0;
      const near = (i, [r0, g0, b0]) =>
        Math.abs(d[i] - r0) < 24 && Math.abs(d[i + 1] - g0) < 24 && Math.abs(d[i + 2] - b0) < 24;
      for (let i = 0; i < d.length; i += 4) {
        if (near(i, [0x2f, 0x6f, 0xeb])) blue++;
        else if (near(i, [0xd1, 0x24, 0x2f])) red++;
      }
      return { blue, red, width: c.width, height: c.height };
    }, png.toString("base64"));
    // 8 calls in blue over most of the chart's height, the 2 failed in red over their foot.
    assert.ok(pixels.blue > 100 && pixels.red > 30, `${window}: ${JSON.stringify(pixels)}`);
    assert.ok(pixels.blue > pixels.red, `${window}: ${JSON.stringify(pixels)}`);
    // Pointing at the newest bar shows its values in the chart's legend.
    const over = page.locator("#usage-chart .u-over");
    const box = await over.boundingBox();
    await page.mouse.move(box.x + box.width - 2, box.y + box.height / 2);
    const legend = (await page.locator("#usage-chart .u-legend").textContent()).replace(/\s+/g, " ");
    assert.match(legend, /calls\s*8(?!\d).*failed\s*2(?!\d)/, legend);
    console.log(`usage chart ${window}: ${totals}; screenshot ${pixels.width}x${pixels.height}, ${pixels.blue} blue and ${pixels.red} red pixels`);
  }

  // Recent requests: the calls above, newest first, the refused ones with their code
  // (a name outside the method table is stored as `unknown`, never as the caller wrote it).
  let requestRows = [];
  for (let i = 0; !requestRows.some((t) => t.includes("unknown403")); i++) {
    assert.ok(i < 50, `the request log never showed the refused calls: ${requestRows.join("\n")}`);
    await page.locator('.windows button[data-window="24h"]').click();
    await page.waitForTimeout(100);
    requestRows = await page.locator("#requests-list tr").allTextContents();
  }
  assert.ok(requestRows.some((t) => t.includes("unknown403") && t.includes("method_unknown")),
    requestRows.join("\n"));
  assert.ok(!requestRows.some((t) => t.includes("admin_nodeInfo")), requestRows.join("\n"));
  assert.ok(requestRows.some((t) => t.includes("eth_blockNumber") && t.includes("200")), requestRows.join("\n"));
  assert.ok(!requestRows.some((t) => t.includes(raw)), "a secret in the request log");
  console.log(`recent requests: ${requestRows.length} rows, refusals with their codes`);

  // Account usage: the same calls by chain and method (refused unknown names together),
  // with latency, and the CSV behind the download link.
  await page.waitForFunction(() => [...document.querySelectorAll("#breakdown-methods tr")]
    .some((tr) => tr.textContent.startsWith("etheth_blockNumber6")));
  const methodRows = await page.locator("#breakdown-methods tr").allTextContents();
  assert.ok(methodRows.some((t) => t.startsWith("ethunknown22")), methodRows.join("\n"));
  assert.match(await page.textContent("#account-totals"), /^All keys, last 24h: 8 calls/);
  assert.match(await page.textContent("#account-latency"), /^Latency: mean [\d.]+ ms, p50 ≤ \d+ ms/);
  const csv = await page.evaluate(async () => (await fetch(document.getElementById("usage-csv").href)).text());
  assert.ok(/,eth,eth_blockNumber,6,0,/.test(csv), csv);
  await shot(page, "usage");
  // The account's charts and both latency charts are drawn (uPlot's canvas).
  for (const id of ["usage-latency", "account-chart", "account-latency-chart"]) {
    assert.equal(await page.locator(`#${id} canvas`).count(), 1, id);
  }
  console.log(`account usage: ${methodRows.length} chain and method rows, CSV ${csv.split("\n").length - 2} lines`);

  // The web3.py, ethers and viem snippets work as shown: each prints the node's block
  // number (0x10 from this test's node).
  const root = new URL("../../", import.meta.url).pathname;
  const python = root + ".venv/bin/python";
  const ran = {
    web3py: execFileSync(python, ["-c", librarySnippets.web3py], { encoding: "utf8", cwd: root }),
    ethers: execFileSync("node", ["--input-type=module", "-e", librarySnippets.ethers], { encoding: "utf8", cwd: root }),
    viem: execFileSync("node", ["--input-type=module", "-e", librarySnippets.viem], { encoding: "utf8", cwd: root }),
  };
  assert.deepEqual(
    Object.fromEntries(Object.entries(ran).map(([k, v]) => [k, v.trim()])),
    { web3py: "16", ethers: "16", viem: "16n" },
  );
  console.log("library snippets: web3.py, ethers and viem answered block 16");

  // Transactions: none sent with the default key yet (the list is asked for with it).
  await go(page, "transactions");
  await page.waitForSelector("#txs-empty", { state: "visible" });
  assert.equal(await page.locator("#txs tr").count(), 0);
  await go(page, "keys");

  // Create (with the scopes chosen), rename, rotate, revoke (each asks first: accepted
  // here; the rename prompt answered with the new name).
  page.on("dialog", (d) => (d.type() === "prompt" ? d.accept("renamed-key") : d.accept()));
  await page.fill("#key-name", "browser-key");
  await page.check('#key-scopes input[value="rpc:write"]');
  await page.click("#create-key");
  await page.waitForFunction(() => document.querySelectorAll("#keys tr").length === 2);
  const scopesCell = await page.locator("#keys tr", { hasText: "browser-key" }).locator("td").nth(2).textContent();
  assert.equal(scopesCell, "rpc:read, rpc:write");
  const created = await page.textContent("#new-raw");
  assert.match(created, /^ce_/);
  await page.locator("#keys tr", { hasText: "browser-key" }).locator("button.rename").click();
  await page.waitForSelector("#keys tr:has-text('renamed-key')");
  assert.equal(await page.locator("#keys tr", { hasText: "browser-key" }).count(), 0);
  const row = page.locator("#keys tr", { hasText: "renamed-key" });
  // The default key's row says when it was last used (the calls above); the new one's, never.
  const usedCell = (name) => page.locator("#keys tr", { hasText: name }).locator("td").nth(4).textContent();
  assert.match(await usedCell("(default)"), /^(just now|\d+ minutes? ago)$/);
  const usedAt = await page.locator("#keys tr", { hasText: "(default)" }).locator("td").nth(4).locator("time").getAttribute("datetime");
  assert.ok(Math.abs(Date.parse(usedAt) - Date.now()) < 600_000, usedAt);
  assert.equal(await usedCell("renamed-key"), "never");

  // Restrictions: narrowed to one method under a cap, the row says so, a call of another
  // method is refused naming the restriction; what does not parse is explained.
  const call = (secret, method) =>
    fetch(base + "/rpc/eth", {
      method: "POST",
      headers: { "Content-Type": "application/json", "x-token": secret },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] }),
    }).then(async (r) => [r.status, await r.json()]);
  await row.locator("button.restrict").click();
  await page.waitForSelector("#restrict:not([hidden])");
  assert.equal(await page.textContent("#restrict-name"), "renamed-key");
  await page.fill("#r-methods", "eth_blockNumber\nnet_*");
  await page.fill("#r-rps", "50");
  await page.click("#restrict-save");
  await page.waitForSelector("#keys tr:has-text('methods: eth_blockNumber, net_*; 50 requests/s')");
  assert.equal((await call(created, "eth_blockNumber"))[0], 200);
  const [refusedStatus, refused] = await call(created, "eth_chainId");
  assert.equal(refusedStatus, 403, JSON.stringify(refused));
  assert.equal(refused.error.data.restriction, "allowed_methods", JSON.stringify(refused));
  await row.locator("button.restrict").click();
  await page.waitForSelector("#restrict:not([hidden])");
  assert.equal(await page.inputValue("#r-methods"), "eth_blockNumber\nnet_*");
  // What does not parse is named beside its field, by the line it is on.
  await page.fill("#r-ips", "10.0.0.0/8\n\nnot-an-address");
  await page.click("#restrict-save");
  await page.waitForSelector("#r-ips-error");
  assert.equal(await page.textContent("#r-ips-error"), "line 3: 'not-an-address' is not an address or a range");
  assert.equal(await page.getAttribute("#r-ips", "aria-invalid"), "true");
  assert.equal(await page.evaluate(() => document.activeElement.id), "r-ips");
  assert.match(await page.textContent("#status"), /not saved/);
  await page.click("#restrict-cancel");
  assert.ok(await page.locator("#restrict").isHidden());
  // A key's restrictions have an address of their own, and the back button returns.
  const renamedId = await row.getAttribute("data-id");
  await page.goto(base + "/console/#/keys/" + renamedId);
  await page.waitForSelector("#restrict:not([hidden])");
  assert.equal(await page.textContent("#restrict-name"), "renamed-key");
  await go(page, "audit");
  await page.goBack();
  await page.waitForSelector('[data-view="keys"]:not([hidden]) #restrict:not([hidden])');
  await page.click("#restrict-cancel");
  await shot(page, "keys-and-restrictions");
  console.log("restrictions: saved from the page, enforced on the key, bad input explained");

  await row.locator("button.rotate").click();
  await page.waitForFunction((old) => document.getElementById("new-raw").textContent !== old, created);
  const rotated = await page.textContent("#new-raw");
  assert.notEqual(rotated, created);
  // The rotated secret keeps the restrictions.
  assert.equal((await call(rotated, "eth_chainId"))[0], 403);
  await page.locator("#keys tr", { hasText: "renamed-key" }).locator("button.revoke").click();
  await page.waitForFunction(() => document.querySelectorAll("#keys tr").length === 1);
  // The audit log shows each change, newest first, made by this user.
  await page.waitForFunction(() => document.querySelector("#audit-list tr td:nth-child(3)")?.textContent === "key.revoke");
  const audit = await page.locator("#audit-list tr td:nth-child(3)").allTextContents();
  assert.deepEqual(audit, ["key.revoke", "key.rotate", "key.restrict", "key.rename", "key.create", "plan.request", "key.create"], audit.join(","));
  assert.equal(await page.textContent("#audit-list tr td:nth-child(2)"), email);
  console.log(`audit log: ${audit.join(", ")}`);
  // More than a page of it (25 a page): Older shows the rest, Newer comes back.
  const defaultId = await page.locator("#keys tr").first().getAttribute("data-id");
  await page.evaluate(async (id) => {
    for (let i = 1; i < 20; i++) await api("PATCH", "/v1/keys/" + id, { restrictions: { max_rps: i } });
    await api("PATCH", "/v1/keys/" + id, { restrictions: {} });
  }, defaultId);
  await page.evaluate(() => showAudit());
  await go(page, "audit");
  await page.waitForFunction(() => document.querySelectorAll("#audit-list tr").length === 25);
  assert.ok(await page.locator("#audit-pager button:has-text('Newer')").isDisabled());
  await page.click("#audit-pager button:has-text('Older')");
  await page.waitForFunction(() => document.querySelectorAll("#audit-list tr").length === 2);
  const older = await page.locator("#audit-list tr td:nth-child(3)").allTextContents();
  assert.deepEqual(older, ["plan.request", "key.create"], "the oldest two on page 2");
  assert.ok(await page.locator("#audit-pager button:has-text('Older')").isDisabled());
  await page.click("#audit-pager button:has-text('Newer')");
  await page.waitForFunction(() => document.querySelectorAll("#audit-list tr").length === 25);
  console.log("audit log paged: 25, then the oldest 2, and back");
  await go(page, "keys");

  // A forged cross-site POST: another site auto-submits a form to /v1/keys. The session
  // cookie (SameSite=Lax) is not sent on a cross-site POST and there is no CSRF header.
  await context.route("http://attacker.test/**", (route) =>
    route.fulfill({
      contentType: "text/html",
      body: `<form id=f method=POST action="${base}/v1/keys" enctype="text/plain">
               <input name='{"name":"pwned","x":"' value='"}'></form>
             <script>document.getElementById("f").submit()</script>`,
    }),
  );
  const evil = await context.newPage();
  const forged = evil.waitForResponse((r) => r.url() === base + "/v1/keys");
  await evil.goto("http://attacker.test/");
  const forgedResp = await forged;
  assert.ok([401, 403].includes(forgedResp.status()), `forged POST got ${forgedResp.status()}`);
  // And a credentialed fetch from that site is refused too.
  const fetchStatus = await evil.evaluate(async (url) => {
    try {
      const r = await fetch(url, { method: "POST", credentials: "include", body: '{"name":"pwned2"}' });
      return r.status;
    } catch (e) {
      return "blocked";
    }
  }, base + "/v1/keys");
  assert.ok(fetchStatus === "blocked" || fetchStatus >= 400, `fetch got ${fetchStatus}`);
  console.log(`forged form POST: ${forgedResp.status()}, cross-site fetch: ${fetchStatus}`);
  await evil.close();
  await page.reload();
  await page.waitForSelector("#app:not([hidden])");
  await page.waitForSelector("#keys tr");
  const names = await page.locator("#keys tr td:first-child").allTextContents();
  assert.ok(!names.some((n) => n.includes("pwned")), names.join(","));

  // Accessibility: every control the signed-in page shows has a name a screen reader
  // reads (a label, aria-label or its text), key buttons name their key, and a key is
  // created with the keyboard alone.
  const unnamed = await page.evaluate(() => {
    const visible = (e) => !e.closest("[hidden]") && e.getClientRects().length > 0;
    const name = (e) => (e.labels && e.labels.length && e.labels[0].textContent.trim())
      || e.getAttribute("aria-label") || (e.tagName === "BUTTON" && e.textContent.trim());
    return [...document.querySelectorAll("#app input, #app select, #app textarea, #app button")]
      .filter((e) => visible(e) && !name(e)).map((e) => e.outerHTML.slice(0, 80));
  });
  assert.deepEqual(unnamed, [], "controls without a name");
  const revokeNames = await page.locator("#keys button.revoke").evaluateAll((bs) => bs.map((b) => b.getAttribute("aria-label")));
  assert.ok(revokeNames.length > 0 && revokeNames.every((n) => /^Revoke .+/.test(n)), revokeNames.join());
  await page.focus("#key-name");
  await page.keyboard.type("keyboard");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => [...document.querySelectorAll("#keys tr td:first-child")].some((td) => td.textContent === "keyboard"));
  assert.ok(await page.locator("#new-raw-wrap").isVisible(), "the new secret shown");
  console.log(`accessibility: every control named, ${revokeNames.length} key buttons name their key, a key created by keyboard`);

  // Webhooks & streams, by keyboard alone: the view from the navigation, a webhook whose
  // bad URL is explained beside the field, then added (its secret shown once), a test
  // delivery, its delivery log; the watchlist says what plan it needs; a firehose token.
  const tabTo = async (selector, most = 80) => {
    for (let i = 0; i < most; i++) {
      if (await page.evaluate((s) => document.activeElement?.matches(s), selector)) return;
      await page.keyboard.press("Tab");
    }
    throw new Error(`Tab never reached ${selector}`);
  };
  await page.focus('nav.side a[data-nav="webhooks"]');
  await page.keyboard.press("Enter");
  await page.waitForSelector('[data-view="webhooks"]:not([hidden])');
  await tabTo("#tx-hook-url");
  await page.keyboard.type("http://example.com/hook");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#tx-hook-url-error");
  assert.match(await page.textContent("#tx-hook-url-error"), /https/);
  assert.equal(await page.evaluate(() => document.activeElement.id), "tx-hook-url");
  await page.keyboard.press("Control+A");
  await page.keyboard.type(hookUrl);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#tx-hooks-list tr[data-id]");
  assert.match(await page.textContent("#hook-secret"), /^[0-9a-f]{64}$/);
  assert.equal(await page.locator("#tx-hook-url-error").count(), 0, "the error goes with the fix");
  await tabTo("#tx-hooks-list button.test");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /Test delivered in \d+ ms/.test(document.getElementById("status").textContent));
  await tabTo("#tx-hooks-list button.deliveries");
  await page.keyboard.press("Enter");
  await page.waitForSelector("#deliveries:not([hidden]) #deliveries-list tr");
  assert.equal(await page.textContent("#deliveries-list tr td:nth-child(3)"), "delivered");
  assert.match(await page.textContent("#sol-watch-off"), /^Not available to this account: this route needs plan business or above\. Compare plans$/);
  assert.equal(await page.textContent("#letters-list"), "None yet.");
  await tabTo("#firehose-key");
  await tabTo("#firehose-form button[type=submit]", 5);
  await page.keyboard.press("Enter");
  // The firehose is a business route: the page says so where the user asked (the
  // token itself is tested through the same route in tests/team.rs).
  await page.waitForFunction(() => /^No token: /.test(document.getElementById("status").textContent));
  assert.match(await page.textContent("#status"), /needs plan business or above/);
  assert.ok(await page.locator("#firehose-info").isHidden());
  await shot(page, "webhooks-and-streams");
  await tabTo("#tx-hooks-list button.delete");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => !document.querySelector("#tx-hooks-list tr[data-id]"));
  console.log("webhooks & streams by keyboard: bad URL explained, hook added, test delivered and logged, watchlist and firehose plans named, hook deleted");

  // Keyboard alone reaches every control a view shows (Tab walks them all, none is a
  // mouse-only element), and the focused one is visibly marked.
  async function everyControlByTab(view) {
    await page.evaluate(() => {
      document.activeElement?.blur();
      window.getSelection()?.removeAllRanges();
    });
    for (let i = 0; i < 400; i++) {
      await page.keyboard.press("Tab");
      const at = await page.evaluate(() => {
        const e = document.activeElement;
        if (!e || e === document.body) return null;
        if (e.dataset.tabbed) return { again: true };
        e.dataset.tabbed = "1";
        const style = getComputedStyle(e);
        return { id: e.outerHTML.slice(0, 60), marked: style.outlineStyle !== "none" || style.boxShadow !== "none" };
      });
      if (at === null) continue;
      if (at.again) break;
      assert.ok(at.marked, `${view}: focus on ${at.id} is not visible`);
    }
    const missed = await page.evaluate(() => {
      const shown = (e) => !e.closest("[hidden]") && e.getClientRects().length > 0 && !e.disabled;
      const controls = [...document.querySelectorAll("button, input, select, textarea, a[href], summary, [onclick]")].filter(shown);
      const out = controls.filter((e) => !e.dataset.tabbed).map((e) => e.outerHTML.slice(0, 80));
      for (const e of document.querySelectorAll("[data-tabbed]")) delete e.dataset.tabbed;
      return out;
    });
    assert.deepEqual(missed, [], `${view}: controls Tab never reaches`);
  }

  // Every view at a desktop and a phone width: nothing wider than the window (a table
  // scrolls inside its own box), one screenshot each (test artifacts).
  const views = await page.locator("nav.side a").evaluateAll((as) => as.map((a) => a.dataset.nav));
  for (const [width, height] of [[1280, 800], [390, 844]]) {
    await page.setViewportSize({ width, height });
    for (const view of views) {
      await go(page, view);
      const overflow = await page.evaluate(() => {
        const wide = document.documentElement.scrollWidth - window.innerWidth;
        const sticking = [...document.querySelectorAll("body *")]
          .filter((e) => e.getClientRects().length && !e.closest(".table-wrap"))
          .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
          .map((e) => e.tagName + (e.id ? "#" + e.id : ""));
        return { wide, sticking: sticking.slice(0, 5) };
      });
      assert.ok(overflow.wide <= 0 && overflow.sticking.length === 0,
        `${view} at ${width}px scrolls sideways: ${JSON.stringify(overflow)}`);
      assert.deepEqual(await axeViolations(page), [], `accessibility of ${view} at ${width}px`);
      if (width === 1280) await everyControlByTab(view);
      await shot(page, `view-${view}-${width}`);
    }
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  // What the page weighs: its HTML, scripts and styles as served.
  const weight = await page.evaluate(async () => {
    const files = ["/console/", "/console/app.js", "/console/format.js", "/console/shell.js", "/console/charts.js",
      "/console/team.js", "/console/breakdown.js", "/console/pushes.js", "/console/plans.js", "/console/uplot.js", "/console/uplot.css"];
    let total = 0;
    for (const f of files) total += (await (await fetch(f)).arrayBuffer()).byteLength;
    return total;
  });
  // uPlot is 53 KB of it; the whole page stays under 160 KB.
  assert.ok(weight < 160_000, `the console weighs ${weight} bytes`);
  const loaded = await page.evaluate(() => performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd);
  // The edge's part of a load: from asking to the last byte of the page and of each
  // script and style it loaded (Chromium's own start-up and script parsing aside).
  const served = await page.evaluate(() => Math.max(...[...performance.getEntriesByType("navigation"),
    ...performance.getEntriesByType("resource").filter((r) => r.name.includes("/console/"))]
    .map((e) => e.responseEnd - e.requestStart)));
  // A bound against a stalled answer, not a speed claim: this runs beside the rest of the
  // suite on two cores (a file took 169 ms under CI's load), and speed is bench/'s to
  // show, as ratios in one run. What it measured is printed below.
  assert.ok(served < 2000, `the edge served a console file in ${served} ms`);
  console.log(`views: ${views.join(", ")} at 1280 and 390 px, none scrolls sideways, Tab reaches every control with its focus shown, axe: no serious or critical violation; page ${weight} bytes, each file served in at most ${served.toFixed(1)} ms, DOM ready in ${loaded.toFixed(1)} ms`);

  // Team: the owner invites a viewer from the page; the viewer signs in elsewhere, joins
  // with the emailed code, and is offered nothing it may not do.
  const viewerEmail = "viewer@example.com";
  await go(page, "team");
  await page.fill("#invite-email", viewerEmail);
  await page.selectOption("#invite-role", "viewer");
  await page.click("#invite");
  await page.waitForSelector("#invites-wrap:not([hidden])");
  assert.match(await page.textContent("#invites"), /viewer@example\.com/);
  const inviteCode = await codeFromOutbox(viewerEmail, /(inv_[A-Za-z0-9_-]+)/);
  const viewerContext = await browser.newContext();
  const viewer = await viewerContext.newPage();
  await viewer.goto(base + "/console/");
  await viewer.waitForSelector("#signin:not([hidden])");
  await viewer.fill("#email", viewerEmail);
  await viewer.click("#send-code");
  await viewer.waitForSelector("#code-form:not([hidden])");
  await viewer.fill("#code", await codeFromOutbox(viewerEmail));
  await viewer.click("#verify-code");
  await viewer.waitForSelector("#app:not([hidden])");
  await go(viewer, "team");
  await viewer.fill("#join-code", inviteCode);
  await viewer.click("#join");
  await viewer.waitForFunction(() => document.getElementById("team-role").textContent === "viewer"
    && document.querySelectorAll("#members tr").length === 2);
  assert.ok(await viewer.locator("#invite-form").isHidden());
  assert.equal(await viewer.textContent("#role-badge"), "viewer");
  await go(viewer, "keys");
  assert.ok(await viewer.locator("#create-form").isHidden(), "a viewer creates no key");
  assert.ok(await viewer.locator("#default-raw-wrap").isHidden(), "no secret on screen in the team");
  assert.equal(await viewer.locator("#keys button.rotate").count(), 0, "nor rotates one");
  assert.equal(await viewer.locator("#plans-list button.ask-plan").count(), 0);
  assert.ok((await viewer.locator("#keys tr").count()) >= 1, "the team's keys are listed");
  await shot(viewer, "team-as-viewer");
  await viewerContext.close();
  await page.reload();
  await page.waitForSelector("#members tr:nth-child(2)");
  assert.equal(await page.locator("#members select.member-role").count(), 2, "the owner sets roles");
  await shot(page, "team-as-owner");
  console.log("team: invited, joined by code as viewer, its page offers reads only");

  // Sign out: back to the sign-in form, cookies gone.
  await page.click("#logout");
  await page.waitForSelector("#signin:not([hidden])");
  const after = await context.cookies();
  assert.ok(!after.some((c) => c.name === "nl_session"), JSON.stringify(after));
  // The sign-in ways offered: email (an outbox is configured), wallets; no Google here.
  assert.ok(await page.locator("#signin-email").isVisible());
  assert.ok(await page.locator("#signin-google").isHidden());
  // Without a Solana wallet extension, the button says what to do.
  await page.click("#wallet-solana");
  await page.waitForSelector("#status.error");
  assert.match(await page.textContent("#status"), /no Solana wallet extension/);
  // With one (an ed25519 key held by this script, as Phantom exposes it): signed in.
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  const raw32 = publicKey.export({ format: "der", type: "spki" }).subarray(-32);
  const address = base58(raw32);
  const walletPage = await context.newPage();
  await walletPage.exposeFunction("signWithTestKey", (bytes) =>
    Array.from(sign(null, Buffer.from(bytes), privateKey)));
  await walletPage.addInitScript((addr) => {
    window.phantom = { solana: {
      connect: async () => ({ publicKey: { toString: () => addr } }),
      signMessage: async (bytes) => ({ signature: new Uint8Array(await window.signWithTestKey(Array.from(bytes))) }),
    } };
  }, address);
  await walletPage.goto(base + "/console/");
  await walletPage.waitForSelector("#signin:not([hidden])");
  await walletPage.click("#wallet-solana");
  await walletPage.waitForSelector("#app:not([hidden])");
  assert.equal(await walletPage.textContent("#provider"), "wallet_solana");
  console.log(`solana wallet sign-in: ${address}`);

  assert.deepEqual(scriptErrors, [], "script errors on the page");
  console.log("console page: all browser checks passed");
} finally {
  await browser.close();
}
