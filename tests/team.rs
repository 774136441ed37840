//! Teams through the real binary (issue 39): an owner invites by emailed code, members
//! act in the team with their role, and every boundary is attacked the way an outsider
//! (another user) or a lesser member (a viewer) would: guessed codes, switching into a
//! tenant one does not belong to, a viewer writing keys or asking for a secret, writes
//! without CSRF, removing the last owner.

use common::*;
use serde_json::{json, Value};

fn team_gateway(node: &Fixture) -> (Gateway, std::path::PathBuf) {
    let dir = tempdir("team");
    let outbox = dir.join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        console_yaml: format!("  email:\n    outbox: {}\n", outbox.display()),
        ..Default::default()
    });
    (gw, outbox)
}

/// The invitation code mailed to `to` most recently.
fn invite_code(outbox: &std::path::Path, to: &str) -> String {
    let text = std::fs::read_to_string(outbox).unwrap();
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains(&format!("\"to\":\"{to}\"")) && l.contains("invitation"))
        .expect("an invitation in the outbox");
    let v: Value = serde_json::from_str(line).unwrap();
    let body = v["body"].as_str().unwrap();
    let at = body.find("inv_").expect("a code in the invitation");
    body[at..]
        .split(|c: char| c.is_whitespace())
        .next()
        .unwrap()
        .to_string()
}

fn signed_in(gw: &Gateway, outbox: &std::path::Path, email: &str) -> (Browser, Value) {
    let mut b = Browser::new(gw.port);
    assert_eq!(sign_in(&mut b, outbox, email).status, 200);
    let me = b.send("GET", "/v1/auth/me", None, None).json();
    (b, me)
}

fn error(r: &Resp) -> (u16, Value) {
    (r.status, r.json()["error"].clone())
}

#[test]
fn a_team_is_joined_by_code_and_each_role_holds_its_line() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = team_gateway(&node);
    let (mut ada, me) = signed_in(&gw, &outbox, "ada@example.com");
    let team = me["tenant"]["id"].as_str().unwrap().to_string();
    assert_eq!(me["tenant"]["role"], "owner");
    assert_eq!(me["tenants"].as_array().unwrap().len(), 1);
    let ada_id = me["user"]["id"].as_str().unwrap().to_string();
    let shared = ada.send("POST", "/v1/keys", Some(json!({"name": "shared"})), None);
    assert_eq!(shared.status, 201, "{}", shared.text());
    let shared_id = shared.json()["id"].as_str().unwrap().to_string();

    // Invitations: owners only, CSRF-checked, bounded input, never the code in an answer.
    let invite = |b: &mut Browser, email: &str, role: &str, csrf: Option<&str>| {
        b.send(
            "POST",
            "/v1/team/invites",
            Some(json!({"email": email, "role": role})),
            csrf,
        )
    };
    let r = invite(&mut ada, "bob@example.com", "viewer", Some(""));
    assert_eq!(r.status, 403, "no CSRF: {}", r.text());
    let r = invite(&mut ada, "bob@example.com", "admin", None);
    assert_eq!(error(&r), (400, json!("invalid_request")));
    let r = invite(&mut ada, "not an address", "viewer", None);
    assert_eq!(error(&r), (400, json!("invalid_email")));
    let r = invite(&mut ada, "ada@example.com", "viewer", None);
    assert_eq!(error(&r), (409, json!("already_member")));
    for (who, role) in [
        ("bob@example.com", "viewer"),
        ("dev@example.com", "developer"),
    ] {
        let r = invite(&mut ada, who, role, None);
        assert_eq!(r.status, 201, "{}", r.text());
        assert!(!r.text().contains("inv_"), "the code is mailed only");
    }
    let listed = ada.send("GET", "/v1/team", None, None);
    assert_eq!(listed.json()["invites"].as_array().unwrap().len(), 2);
    assert!(!listed.text().contains("inv_"));
    let bob_code = invite_code(&outbox, "bob@example.com");
    let dev_code = invite_code(&outbox, "dev@example.com");

    // An outsider: its own tenant only; no guessing, no switching in, no reaching across.
    let (mut eve, _) = signed_in(&gw, &outbox, "eve@example.com");
    let r = eve.send(
        "POST",
        "/v1/team/join",
        Some(json!({"code": "inv_guess"})),
        None,
    );
    assert_eq!(error(&r), (404, json!("invalid_invite")));
    let r = eve.send(
        "POST",
        "/v1/team/switch",
        Some(json!({"tenant_id": team})),
        None,
    );
    assert_eq!(error(&r), (404, json!("not_found")));
    let r = eve.send("GET", "/v1/team", None, None).json();
    assert_eq!(r["members"].as_array().unwrap().len(), 1, "{r}");
    assert!(r["tenant"]["id"] != json!(team));
    for (method, path, body) in [
        ("DELETE", format!("/v1/team/members/{ada_id}"), None),
        (
            "PATCH",
            format!("/v1/team/members/{ada_id}"),
            Some(json!({"role": "viewer"})),
        ),
        ("GET", format!("/v1/keys/{shared_id}/usage"), None),
        ("POST", format!("/v1/keys/{shared_id}/rotate"), None),
    ] {
        let r = eve.send(method, &path, body, None);
        assert_eq!(r.status, 404, "{method} {path}: {}", r.text());
    }
    let r = Browser::new(gw.port).send("GET", "/v1/team", None, None);
    assert_eq!(r.status, 401);
    // A code that reached the outsider (forwarded, leaked) joins only its addressee.
    let r = eve.send(
        "POST",
        "/v1/team/join",
        Some(json!({"code": bob_code})),
        None,
    );
    assert_eq!(error(&r), (403, json!("invite_for_another_address")));

    // A viewer reads the team's keys and usage, and can neither write nor see a secret.
    let (mut bob, _) = signed_in(&gw, &outbox, "bob@example.com");
    let r = bob.send(
        "POST",
        "/v1/team/join",
        Some(json!({"code": bob_code})),
        Some(""),
    );
    assert_eq!(r.status, 403, "no CSRF: {}", r.text());
    let r = bob.send(
        "POST",
        "/v1/team/join",
        Some(json!({"code": bob_code})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (r.json()["tenant_id"].clone(), r.json()["role"].clone()),
        (json!(team), json!("viewer"))
    );
    let r = bob.send(
        "POST",
        "/v1/team/join",
        Some(json!({"code": bob_code})),
        None,
    );
    assert_eq!(
        error(&r),
        (404, json!("invalid_invite")),
        "a code works once"
    );
    let me = bob.send("GET", "/v1/auth/me", None, None).json();
    assert_eq!(
        me["tenant"],
        json!({"id": team, "name": "ada@example.com", "role": "viewer"})
    );
    assert!(
        me.get("default_key").is_none(),
        "no secret for a viewer: {me}"
    );
    let keys = bob.send("GET", "/v1/keys", None, None);
    assert!(keys.text().contains(&shared_id) && !keys.text().contains("\"raw\""));
    let r = bob.send("GET", &format!("/v1/keys/{shared_id}/usage"), None, None);
    assert_eq!(r.status, 200, "{}", r.text());
    for (method, path, body) in [
        (
            "POST",
            "/v1/keys".to_string(),
            Some(json!({"name": "mine"})),
        ),
        ("POST", format!("/v1/keys/{shared_id}/rotate"), None),
        ("DELETE", format!("/v1/keys/{shared_id}"), None),
        (
            "PATCH",
            format!("/v1/keys/{shared_id}"),
            Some(json!({"name": "x"})),
        ),
        (
            "POST",
            "/v1/plan/request".to_string(),
            Some(json!({"plan": "pro"})),
        ),
        (
            "POST",
            "/v1/team/invites".to_string(),
            Some(json!({"email": "x@example.com", "role": "owner"})),
        ),
        (
            "PATCH",
            format!("/v1/team/members/{ada_id}"),
            Some(json!({"role": "viewer"})),
        ),
    ] {
        let r = bob.send(method, &path, body, None);
        assert_eq!(
            error(&r),
            (403, json!("role_insufficient")),
            "{method} {path}"
        );
    }
    assert!(
        bob.send("GET", "/v1/team", None, None).json()["invites"]
            .as_array()
            .unwrap()
            .is_empty(),
        "invitations are the owners'"
    );

    // A developer writes keys in the team, not its membership.
    let (mut dev, _) = signed_in(&gw, &outbox, "dev@example.com");
    let joined = dev.send(
        "POST",
        "/v1/team/join",
        Some(json!({"code": dev_code})),
        None,
    );
    let dev_id = dev.send("GET", "/v1/auth/me", None, None).json()["user"]["id"].clone();
    assert_eq!(joined.json()["role"], "developer");
    let made = dev.send("POST", "/v1/keys", Some(json!({"name": "ci"})), None);
    assert_eq!(made.status, 201, "{}", made.text());
    assert_eq!(made.json()["created_by"], dev_id);
    let rotated = dev.send("POST", &format!("/v1/keys/{shared_id}/rotate"), None, None);
    assert_eq!(rotated.status, 200, "{}", rotated.text());
    assert_eq!(
        rotated.json()["created_by"],
        json!(ada_id),
        "a rotation keeps the maker"
    );
    let r = invite(&mut dev, "x@example.com", "viewer", None);
    assert_eq!(error(&r), (403, json!("role_insufficient")));

    // Roles change; a team keeps an owner and nobody leaves home.
    let bob_id = bob.send("GET", "/v1/auth/me", None, None).json()["user"]["id"].clone();
    let bob_id = bob_id.as_str().unwrap();
    let r = ada.send(
        "PATCH",
        &format!("/v1/team/members/{bob_id}"),
        Some(json!({"role": "developer"})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = bob.send("POST", "/v1/keys", Some(json!({"name": "now I can"})), None);
    assert_eq!(
        r.status,
        201,
        "the new role holds at the next request: {}",
        r.text()
    );
    let r = ada.send(
        "PATCH",
        &format!("/v1/team/members/{ada_id}"),
        Some(json!({"role": "viewer"})),
        None,
    );
    assert_eq!(error(&r), (409, json!("last_owner")));
    let r = ada.send("DELETE", &format!("/v1/team/members/{ada_id}"), None, None);
    assert_eq!(error(&r), (409, json!("home_tenant")));

    // Removed, a member's session is back home at once; the team's keys stay.
    let dev_id = dev_id.as_str().unwrap();
    let r = ada.send("DELETE", &format!("/v1/team/members/{dev_id}"), None, None);
    assert_eq!(r.status, 204, "{}", r.text());
    let me = dev.send("GET", "/v1/auth/me", None, None).json();
    assert_eq!(me["tenant"]["role"], "owner");
    assert!(me["tenant"]["id"] != json!(team));
    let r = dev.send("GET", &format!("/v1/keys/{shared_id}/usage"), None, None);
    assert_eq!(r.status, 404);
    let team_keys = ada.send("GET", "/v1/keys", None, None).text();
    assert!(team_keys.contains("\"ci\""), "{team_keys}");

    // A member leaves by its own id, and switches between its tenants.
    let home = bob.send("GET", "/v1/auth/me", None, None).json()["tenants"][0]["tenant_id"].clone();
    let r = bob.send(
        "POST",
        "/v1/team/switch",
        Some(json!({"tenant_id": home})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        bob.send("GET", "/v1/auth/me", None, None).json()["tenant"]["role"],
        "owner"
    );
    bob.send(
        "POST",
        "/v1/team/switch",
        Some(json!({"tenant_id": team})),
        None,
    );
    let r = bob.send("DELETE", &format!("/v1/team/members/{bob_id}"), None, None);
    assert_eq!(r.status, 204, "{}", r.text());
    let r = bob.send(
        "POST",
        "/v1/team/switch",
        Some(json!({"tenant_id": team})),
        None,
    );
    assert_eq!(r.status, 404, "gone from the team");

    // A withdrawn invitation's code joins nobody.
    assert_eq!(
        invite(&mut ada, "carol@example.com", "viewer", None).status,
        201
    );
    let carol_code = invite_code(&outbox, "carol@example.com");
    let pending = ada.send("GET", "/v1/team", None, None).json()["invites"][0]["id"].clone();
    let r = ada.send(
        "DELETE",
        &format!("/v1/team/invites/{}", pending.as_str().unwrap()),
        None,
        None,
    );
    assert_eq!(r.status, 204);
    let (mut carol, _) = signed_in(&gw, &outbox, "carol@example.com");
    let r = carol.send(
        "POST",
        "/v1/team/join",
        Some(json!({"code": carol_code})),
        None,
    );
    assert_eq!(error(&r), (404, json!("invalid_invite")));

    // Every change is in the team's audit log, with who made it.
    let events = ada.send("GET", "/v1/audit", None, None).json()["events"].clone();
    let actions: Vec<&str> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for a in [
        "member.invite",
        "member.join",
        "member.role",
        "member.remove",
        "member.leave",
        "invite.revoke",
        "key.rotate",
    ] {
        assert!(actions.contains(&a), "{a}: {actions:?}");
    }
    let rotate = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "key.rotate")
        .unwrap();
    assert_eq!(rotate["user"], "dev@example.com");
}

/// What a team member can make the edge do at will is bounded: invitation mails per
/// address and per team (a re-invitation replaces the pending one, so the pending cap
/// alone never bound them), and renames, so a developer renaming in a loop cannot push
/// a key rotation, a join or an invitation out of the team's audit log.
#[test]
fn invitation_mails_and_renames_are_budgeted_and_security_events_stay() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = team_gateway(&node);
    let (mut ada, _) = signed_in(&gw, &outbox, "ada@example.com");
    let mailed_to = |to: &str| {
        std::fs::read_to_string(&outbox)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!("\"to\":\"{to}\"")) && l.contains("invitation"))
            .count()
    };
    let invite = |b: &mut Browser, email: &str| {
        b.send(
            "POST",
            "/v1/team/invites",
            Some(json!({"email": email, "role": "developer"})),
            None,
        )
    };
    let mut refused = 0;
    for _ in 0..50 {
        let r = invite(&mut ada, "victim@example.com");
        match r.status {
            201 => {}
            429 => {
                refused += 1;
                assert_eq!(r.json()["error"], "too_many_invites", "{}", r.text());
                assert!(r.header("retry-after").is_some(), "{}", r.text());
            }
            s => panic!("{s}: {}", r.text()),
        }
    }
    assert_eq!(mailed_to("victim@example.com"), 3, "three mails an hour");
    assert_eq!(refused, 47);
    // Another team cannot add to the same address's mails either.
    let (mut mallory, _) = signed_in(&gw, &outbox, "mallory@example.com");
    assert_eq!(invite(&mut mallory, "victim@example.com").status, 429);
    assert_eq!(mailed_to("victim@example.com"), 3);
    // Per team: 30 an hour, across addresses (3 already sent), even when each is
    // withdrawn at once so the pending cap never binds.
    let mut sent = 0;
    for i in 0..40 {
        let r = invite(&mut ada, &format!("m{i}@example.com"));
        match r.status {
            201 => {
                sent += 1;
                let id = r.json()["id"].as_str().unwrap().to_string();
                let path = format!("/v1/team/invites/{id}");
                assert_eq!(ada.send("DELETE", &path, None, None).status, 204);
            }
            429 => assert_eq!(r.json()["error"], "too_many_invites"),
            s => panic!("{s}: {}", r.text()),
        }
    }
    assert_eq!(sent, 27, "30 invitation mails an hour from one team");

    // Security events first, then a rename loop: refused past the budget, and every
    // security event is still in the log, found by paging.
    let key = ada.send("POST", "/v1/keys", Some(json!({"name": "k"})), None);
    let id = key.json()["id"].as_str().unwrap().to_string();
    let rotated = ada.send("POST", &format!("/v1/keys/{id}/rotate"), None, None);
    assert_eq!(rotated.status, 200, "{}", rotated.text());
    // The rotation's new key is the one renamed from here on.
    let id = rotated.json()["id"].as_str().unwrap_or(&id).to_string();
    let (mut renamed, mut stopped) = (0, false);
    for i in 0..130 {
        let r = ada.send(
            "PATCH",
            &format!("/v1/keys/{id}"),
            Some(json!({"name": format!("n{i}")})),
            None,
        );
        match r.status {
            200 => renamed += 1,
            429 => {
                assert_eq!(r.json()["error"], "too_many_renames", "{}", r.text());
                stopped = true;
                break;
            }
            s => panic!("{s}: {}", r.text()),
        }
    }
    assert!(stopped && renamed == 120, "{renamed} renames");
    let mut actions = Vec::new();
    let mut before: Option<String> = None;
    for _ in 0..20 {
        let path = match &before {
            Some(b) => format!("/v1/audit?limit=50&before={b}"),
            None => "/v1/audit?limit=50".to_string(),
        };
        let page = ada.send("GET", &path, None, None).json();
        for e in page["events"].as_array().unwrap() {
            actions.push(e["action"].as_str().unwrap().to_string());
        }
        match page["next"].as_str() {
            Some(n) => before = Some(n.to_string()),
            None => break,
        }
    }
    let count = |a: &str| actions.iter().filter(|x| *x == a).count();
    assert_eq!(count("key.rename"), 120);
    assert_eq!(count("key.rotate"), 1);
    assert!(count("member.invite") >= 3, "{actions:?}");
    assert!(
        count("invite.revoke") >= 2,
        "replaced invitations are audited"
    );
    let r = ada.send("GET", "/v1/audit?limit=0", None, None);
    assert_eq!(error(&r), (400, json!("invalid_request")));
}

/// A gateway that pushes transaction webhooks and watchlist entries to receivers on
/// 127.0.0.1 (trusting `dir`'s certificate), issues firehose tokens, and lets a console
/// user move to business at once.
fn pushing_gateway(node: &Fixture, dir: &std::path::Path) -> (Gateway, std::path::PathBuf) {
    let outbox = dir.join("outbox.jsonl");
    let webhook = format!(
        "  webhook: {{allow_private: [\"127.0.0.0/8\"], ca_file: \"{}\", backoff_ms: 50, max_attempts: 2, timeout_ms: 2000}}\n",
        dir.join("cert.pem").display()
    );
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{u}\", family: el-geth}}\n  polygon_bor:\n    hosts:\n      - {{id: bor-1, url: \"{u}\", family: bor}}\n",
            u = node.url()
        ),
        console_yaml: format!(
            "  email:\n    outbox: {}\n  self_service_plans: [business]\n  plan_prices:\n    business: {{amount: 499}}\n",
            outbox.display()
        ),
        extra_yaml: format!(
            "{UNLIMITED}tx_tracking:\n  signing_secret: env:HOOK_SECRET\n{webhook}solana:\n  watchlist:\n    signing_secret: env:WATCH_SECRET\n  {webhook}streams:\n  firehose:\n    secret: env:FIREHOSE_SECRET\n"
        ),
        env: ["HOOK_SECRET", "WATCH_SECRET", "FIREHOSE_SECRET"]
            .map(|n| (n.to_string(), format!("{n:0<40}")))
            .to_vec(),
        ..Default::default()
    });
    (gw, outbox)
}

/// The console's webhooks, watchlist and firehose screens are the key routes' own
/// functions for the session's tenant: another tenant's entries are 404 to every route
/// behind them, a viewer reads but neither changes nor delivers nor gets a token,
/// changes need the CSRF token, the tenant's plan meets the key route's tier, and a test
/// delivery and a dead letter's retry reach a real HTTPS endpoint signed.
#[test]
fn webhooks_watchlists_and_firehose_tokens_hold_each_tenants_line() {
    let node = Fixture::json_rpc();
    let dir = tempdir("team-pushes");
    localhost_cert(&dir);
    let rx = Receiver::start(&dir, 200);
    let (gw, outbox) = pushing_gateway(&node, &dir);
    let (mut ada, me) = signed_in(&gw, &outbox, "ada@example.com");
    let ada_key = me["default_key"]["id"].as_str().unwrap().to_string();
    let hooks = "/v1/console/tx-hooks";

    // Bad endpoints are refused beside the field, before anything is stored.
    let r = ada.send(
        "POST",
        hooks,
        Some(json!({"callback_url": "http://x.example/h"})),
        None,
    );
    assert_eq!(error(&r), (400, json!("callback_not_allowed")));
    assert!(
        r.header("X-Chainedge-Error-Detail")
            .is_some_and(|d| d.contains("https")),
        "{:?}",
        r.headers
    );
    let r = ada.send(
        "POST",
        hooks,
        Some(json!({"callback_url": rx.url()})),
        Some(""),
    );
    assert_eq!(r.status, 403, "no CSRF: {}", r.text());
    let made = ada.send("POST", hooks, Some(json!({"callback_url": rx.url()})), None);
    assert_eq!(made.status, 201, "{}", made.text());
    let hook = made.json();
    let (id, secret) = (
        hook["id"].as_str().unwrap(),
        hook["signing_secret"].as_str().unwrap(),
    );
    let listed = ada.send("GET", hooks, None, None).json();
    assert_eq!(listed[0]["id"], hook["id"]);
    assert!(
        listed[0].get("signing_secret").is_none(),
        "the secret is shown once"
    );

    // A test delivery: signed, marked, logged.
    let test = ada.send("POST", &format!("{hooks}/{id}/test"), None, None);
    assert_eq!(test.status, 200, "{}", test.text());
    assert_eq!(test.json()["delivered"], true, "{}", test.text());
    let hit = rx.hits().last().unwrap().clone();
    verify(secret, &hit);
    let body: Value = serde_json::from_str(&hit.body).unwrap();
    assert_eq!(
        (body["type"].as_str(), body["hook_id"].as_str()),
        (Some("test"), Some(id))
    );
    let log = ada
        .send("GET", &format!("{hooks}/{id}/deliveries"), None, None)
        .json();
    assert_eq!(log["items"][0]["delivery_id"], test.json()["delivery_id"]);
    assert_eq!(log["items"][0]["delivered"], true);
    rx.answer(503);
    let failed = ada
        .send("POST", &format!("{hooks}/{id}/test"), None, None)
        .json();
    assert_eq!(failed["delivered"], false);
    assert!(
        failed["error"].as_str().unwrap().contains("503"),
        "{failed}"
    );
    rx.answer(200);

    // Another tenant: every route behind the hook is 404, its list empty.
    let (mut eve, eve_me) = signed_in(&gw, &outbox, "eve@example.com");
    assert_eq!(eve.send("GET", hooks, None, None).json(), json!([]));
    for (method, path) in [
        ("GET", format!("{hooks}/{id}/deliveries")),
        ("GET", format!("{hooks}/{id}/dead-letters")),
        ("POST", format!("{hooks}/{id}/test")),
        ("POST", format!("{hooks}/{id}/dead-letters/any/retry")),
        ("DELETE", format!("{hooks}/{id}")),
        ("POST", format!("/v1/keys/{ada_key}/firehose/logs")),
    ] {
        let r = eve.send(method, &path, None, None);
        assert_eq!(r.status, 404, "eve {method} {path}: {}", r.text());
    }
    // A key of hers cannot reach ada's hook through the key routes either.
    let eve_raw = eve_me["default_key"]["raw"].as_str().unwrap();
    let r = request(
        gw.port,
        "POST",
        &format!("/v1/tx/hooks/{id}/test"),
        &[("x-token", eve_raw)],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 404, "{}", r.text());
    let hits = rx.hits().len();

    // A viewer of ada's team reads, and cannot change, deliver or take a token.
    let r = ada.send(
        "POST",
        "/v1/team/invites",
        Some(json!({"email": "vic@example.com", "role": "viewer"})),
        None,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let (mut vic, _) = signed_in(&gw, &outbox, "vic@example.com");
    let code = invite_code(&outbox, "vic@example.com");
    assert_eq!(
        vic.send("POST", "/v1/team/join", Some(json!({"code": code})), None)
            .status,
        200
    );
    assert_eq!(
        vic.send("GET", hooks, None, None).json()[0]["id"],
        hook["id"]
    );
    for (method, path, body) in [
        (
            "POST",
            hooks.to_string(),
            Some(json!({"callback_url": rx.url()})),
        ),
        ("POST", format!("{hooks}/{id}/test"), None),
        ("DELETE", format!("{hooks}/{id}"), None),
        ("POST", format!("/v1/keys/{ada_key}/firehose/logs"), None),
    ] {
        let r = vic.send(method, &path, body, None);
        assert_eq!(
            error(&r),
            (403, json!("role_insufficient")),
            "vic {method} {path}"
        );
    }
    assert_eq!(rx.hits().len(), hits, "nothing reached the endpoint");

    // The watchlist is a business route: the free plan is told so, then meets it.
    let watch = "/v1/console/sol-watchlist";
    let r = ada.send("GET", watch, None, None);
    assert_eq!(error(&r), (403, json!("tier_insufficient")));
    assert!(r
        .header("X-Chainedge-Error-Detail")
        .is_some_and(|d| d.contains("business")));
    let r = ada.send(
        "POST",
        "/v1/plan/request",
        Some(json!({"plan": "business"})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let entry = json!({"pubkey": "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin", "callback_type": "ws", "callback_url": "indexer-1"});
    let made = ada.send("POST", watch, Some(entry), None);
    assert_eq!(made.status, 201, "{}", made.text());
    let wid = made.json()["id"].as_str().unwrap().to_string();
    let r = ada.send("POST", &format!("{watch}/{wid}/test"), None, None);
    assert_eq!(error(&r), (409, json!("not_a_webhook")));
    assert_eq!(
        eve.send("DELETE", &format!("{watch}/{wid}"), None, None)
            .status,
        403,
        "eve's plan is free"
    );
    assert_eq!(
        vic.send("DELETE", &format!("{watch}/{wid}"), None, None)
            .status,
        403
    );
    assert_eq!(
        ada.send("DELETE", &format!("{watch}/{wid}"), None, None)
            .status,
        204
    );

    // A firehose token for ada's own key: bound to it, for the asked channel only.
    let r = ada.send(
        "POST",
        &format!("/v1/keys/{ada_key}/firehose/other"),
        None,
        None,
    );
    assert_eq!(r.status, 404);
    let r = ada.send(
        "POST",
        &format!("/v1/keys/{ada_key}/firehose/logs"),
        None,
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("Cache-Control"), Some("no-store"));
    let token = r.json()["token"].as_str().unwrap().to_string();
    let claims = token.split('.').nth(1).unwrap();
    use base64::Engine;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(claims)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (claims["sub"].as_str(), claims["channel"].as_str()),
        (Some(ada_key.as_str()), Some("logs"))
    );
    assert_eq!(claims["plan"], "business");

    // Plans say what they cost and open.
    let plans = request(gw.port, "GET", "/v1/plans", &[], b"")
        .unwrap()
        .json()["plans"]
        .clone();
    let business = plans
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "business")
        .unwrap();
    assert_eq!(
        business["price"],
        json!({"amount": 499.0, "currency": "USD", "per": "month"})
    );
    let opened: Vec<&str> = business["opens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(opened.contains(&"sol.watchlist.create"), "{opened:?}");
    assert!(
        !opened.contains(&"eth.tx_hooks.create"),
        "free routes are the free plan's: {opened:?}"
    );
    assert_eq!(plans[0]["price"], Value::Null);
}
