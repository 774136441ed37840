// chainedge console: the application shell. One view per concern, chosen by the
// address's fragment (`#/keys`, `#/keys/{id}` for one key's restrictions), so links
// can be shared and the browser's back button walks the views. Uses app.js's $.
"use strict";

// The key picker above these views chooses whose usage, requests and transactions show.
const KEYED_VIEWS = ["usage", "requests", "transactions"];

// The view and the id after it in the fragment ("#/keys/abc" -> ["keys", "abc"]).
function where() {
  const [view, id] = location.hash.replace(/^#\/?/, "").split("/");
  const known = [...document.querySelectorAll("[data-view]")].some((v) => v.dataset.view === view);
  return [known ? view : "overview", id ? decodeURIComponent(id) : null];
}

// Show the fragment's view. `moved`: the user navigated, so focus goes to the view's
// first heading (screen readers then announce it).
function route(moved) {
  const [view, id] = where();
  for (const v of document.querySelectorAll("[data-view]")) v.hidden = v.dataset.view !== view;
  for (const a of document.querySelectorAll("nav.side a")) {
    if (a.dataset.nav === view) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  $("key-bar").hidden = !KEYED_VIEWS.includes(view);
  const current = document.querySelector(`[data-view="${view}"]`);
  document.title = current.dataset.label + " · chainedge console";
  if (view === "keys") showKeyRoute(id);
  // Charts drawn while their view was hidden take its width now.
  if (typeof resizeCharts === "function") resizeCharts();
  if (moved) {
    const heading = current.querySelector("section:not([hidden]) h2");
    if (heading) {
      heading.tabIndex = -1;
      heading.focus({ preventScroll: false });
    }
  }
}

window.addEventListener("hashchange", () => route(true));

// A table wider than the window scrolls inside its box: the box takes keyboard focus
// (so arrow keys scroll it) and is named after its section.
for (const box of document.querySelectorAll(".table-wrap")) {
  box.tabIndex = 0;
  box.setAttribute("role", "region");
  const heading = box.closest("section")?.querySelector("h2, h3");
  box.setAttribute("aria-label", (heading ? heading.textContent.trim() : "table") + ", scrollable");
}
