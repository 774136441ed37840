// chainedge console: how data reads on the page. Times relative with the exact one on
// hover, long ids shortened with a copy button, tables a page at a time. Uses app.js's
// act and status; loaded after it.
"use strict";

// "3 min ago" for an RFC 3339 time, in a <time> whose title is the exact UTC time.
function when(iso) {
  const t = document.createElement("time");
  if (!iso) {
    t.textContent = "never";
    return t;
  }
  t.dateTime = iso;
  const exact = iso.slice(0, 19).replace("T", " ") + " UTC";
  t.title = exact;
  const secs = (Date.now() - Date.parse(iso)) / 1000;
  const ago = (n, unit) => Math.floor(n) + " " + unit + (Math.floor(n) === 1 ? "" : "s") + " ago";
  t.textContent = !Number.isFinite(secs) ? exact
    : secs < 0 ? exact
    : secs < 60 ? "just now"
    : secs < 3600 ? ago(secs / 60, "minute")
    : secs < 86400 ? ago(secs / 3600, "hour")
    : secs < 30 * 86400 ? ago(secs / 86400, "day")
    : exact.slice(0, 10);
  return t;
}

// A long id or address shortened ("0x12ab…cd34"), the whole in its title, with a
// button copying it.
function shortId(id, what) {
  const span = document.createElement("span");
  span.className = "id";
  const text = document.createElement("code");
  text.textContent = id.length > 14 ? id.slice(0, 8) + "\u2026" + id.slice(-4) : id;
  text.title = id;
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy-id";
  copy.textContent = "Copy";
  copy.setAttribute("aria-label", "Copy " + (what || "id") + " " + id);
  copy.onclick = () => act(async () => {
    await navigator.clipboard.writeText(id);
    status("Copied.");
  });
  span.append(text, " ", copy);
  return span;
}

// A table cell holding `content`: text, or nodes.
function cellOf(tr, content) {
  const td = document.createElement("td");
  if (content instanceof Node) td.append(content);
  else td.textContent = content == null ? "" : String(content);
  tr.append(td);
  return td;
}

// Newer/Older buttons in `pager` around `label`; a missing handler disables its button.
function pagerButtons(pager, label, toNewer, toOlder) {
  const button = (text, go) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.disabled = !go;
    if (go) b.onclick = () => act(go, b);
    return b;
  };
  pager.replaceChildren(button("Newer", toNewer), " " + label + " ", button("Older", toOlder));
}

// `rows` into `tbody` a page of `size` at a time, with Newer/Older buttons in `pager`;
// `render(row)` makes a <tr>.
function paged(tbody, pager, rows, size, render) {
  const pages = Math.max(1, Math.ceil(rows.length / size));
  const show = (page) => {
    tbody.replaceChildren(...rows.slice(page * size, (page + 1) * size).map(render));
    if (pages < 2) return pager.replaceChildren();
    pagerButtons(pager, "page " + (page + 1) + " of " + pages,
      page > 0 && (async () => show(page - 1)), page < pages - 1 && (async () => show(page + 1)));
  };
  show(0);
}

// `why` beside `field` (announced with it, the field marked and focused); cleared by
// app.js's clearFieldErrors.
function markField(field, why) {
  const p = document.createElement("p");
  p.className = "field-error error";
  p.id = field.id + "-error";
  p.textContent = why;
  field.after(p);
  field.setAttribute("aria-invalid", "true");
  field.setAttribute("aria-describedby", p.id);
  field.focus();
}
