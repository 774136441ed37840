// chainedge console: the team (members, roles, invitations, which account to act in).
// Uses app.js's api, act, $ and load, and format.js's cellOf, when and shortId;
// loaded after them.
"use strict";

const ROLES = ["owner", "developer", "viewer"];

// The accounts the user belongs to (its own first), the team's members and, for an
// owner, the pending invitations.
async function showTeam(me) {
  const select = $("tenant-switch");
  select.replaceChildren();
  for (const t of me.tenants || []) {
    const o = document.createElement("option");
    o.value = t.tenant_id;
    o.textContent = t.name + " (" + t.role + ")";
    o.selected = me.tenant && t.tenant_id === me.tenant.id;
    select.append(o);
  }
  $("team-role").textContent = me.tenant ? me.tenant.role : "";
  const team = await api("GET", "/v1/team");
  const owner = team.role === "owner";
  const tbody = $("members");
  tbody.replaceChildren();
  for (const m of team.members) {
    const tr = document.createElement("tr");
    tr.dataset.user = m.user_id;
    // A member signed in by wallet only has no email: its id, shortened.
    const who = cellOf(tr, m.name || "");
    if (!m.name) who.append(shortId(m.user_id, "member"));
    if (m.you) who.append(" (you)");
    const roleCell = cellOf(tr, owner ? "" : m.role);
    if (owner) {
      const pick = document.createElement("select");
      pick.className = "member-role";
      pick.setAttribute("aria-label", "role of " + (m.name || m.user_id));
      for (const r of ROLES) {
        const o = document.createElement("option");
        o.value = r;
        o.textContent = r;
        o.selected = r === m.role;
        pick.append(o);
      }
      pick.onchange = () => act(async () => {
        await api("PATCH", "/v1/team/members/" + m.user_id, { role: pick.value });
        await load();
      });
      roleCell.append(pick);
    }
    cellOf(tr, when(m.joined_at));
    const actions = cellOf(tr, "");
    if (owner || m.you) {
      const b = document.createElement("button");
      b.className = "remove-member";
      b.textContent = m.you ? "Leave" : "Remove";
      b.setAttribute("aria-label", m.you ? "Leave this team" : "Remove " + (m.name || m.user_id));
      b.onclick = () => act(async () => {
        const what = m.you ? "Leave this team?" : "Remove " + (m.name || m.user_id) + " from the team? Keys they made stay the team's.";
        if (!confirm(what)) return;
        await api("DELETE", "/v1/team/members/" + m.user_id);
        await load();
      });
      actions.append(b);
    }
    tbody.append(tr);
  }
  $("invite-form").hidden = !owner;
  $("invites-wrap").hidden = !owner || team.invites.length === 0;
  const invites = $("invites");
  invites.replaceChildren();
  for (const i of team.invites) {
    const tr = document.createElement("tr");
    cellOf(tr, i.email);
    cellOf(tr, i.role);
    cellOf(tr, when(i.expires_at));
    const b = document.createElement("button");
    b.className = "withdraw-invite";
    b.textContent = "Withdraw";
    b.setAttribute("aria-label", "Withdraw the invitation of " + i.email);
    b.onclick = () => act(async () => {
      if (!confirm("Withdraw the invitation of " + i.email + "?")) return;
      await api("DELETE", "/v1/team/invites/" + i.id);
      await load();
    });
    cellOf(tr, b);
    invites.append(tr);
  }
}

$("tenant-switch").onchange = () => act(async () => {
  await api("POST", "/v1/team/switch", { tenant_id: $("tenant-switch").value });
  $("default-raw-wrap").hidden = true;
  $("new-raw-wrap").hidden = true;
  await load();
});

$("invite-form").onsubmit = (ev) => {
  ev.preventDefault();
  act(async () => {
    const i = await api("POST", "/v1/team/invites", { email: $("invite-email").value, role: $("invite-role").value });
    $("invite-email").value = "";
    await load();
    status("Invitation sent to " + i.email + ".");
  }, ev.currentTarget);
};

$("join-form").onsubmit = (ev) => {
  ev.preventDefault();
  act(async () => {
    const j = await api("POST", "/v1/team/join", { code: $("join-code").value.trim() });
    $("join-code").value = "";
    await load();
    status("You joined " + j.name + " as " + j.role + ".");
  }, ev.currentTarget);
};
