//! The console through the real binary (issue 4): email sign-in (outbox delivery),
//! cookies, CSRF, `/v1/auth/me` default-key rules, keys CRUD, revocation on the chain
//! routes at once, logout, sliding refresh and expiry.

use common::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::time::Duration;

/// A gateway whose console delivers codes to an outbox file; chain limits are tiny
/// (1 rps, except JSON-RPC) to show console routes are never rate limited.
fn console_gateway(node: &Fixture, console_yaml: &str) -> (Gateway, std::path::PathBuf) {
    console_gateway_on(node, console_yaml, None)
}

/// `console_gateway` with its store on PostgreSQL at `postgres` (a URL), if given.
fn console_gateway_on(
    node: &Fixture,
    console_yaml: &str,
    postgres: Option<String>,
) -> (Gateway, std::path::PathBuf) {
    let dir = tempdir("console");
    let outbox = dir.join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        console_yaml: format!("  email:\n    outbox: {}\n{console_yaml}", outbox.display()),
        extra_yaml: "limits:\n  default: {anonymous: 1, free: 1, basic: 1, pro: 1, business: 1, enterprise: 1, scale: 1}\n  categories:\n    eth_rpc: {free: 1000}\nusage:\n  flush_interval_ms: 200\n".into(),
        postgres,
        ..Default::default()
    });
    (gw, outbox)
}

/// PostgreSQL away: console routes answer 503 `store_unavailable` with `Retry-After` in
/// their envelope, keys already in the key cache keep serving chain routes, an uncached
/// key gets 503; with PostgreSQL back everything works again without a restart.
#[test]
fn postgres_away_then_back_needs_no_restart() {
    let mut pg = PgServer::start();
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway_on(&node, "", Some(pg.create_db()));
    let cached = gw.key("free", &[]);
    let uncached = gw.key("free", &[]);
    assert_eq!(rpc_status(gw.port, &cached), 200);
    pg.stop();
    assert_eq!(
        rpc_status(gw.port, &cached),
        200,
        "a cached key keeps serving"
    );
    let mut b = Browser::new(gw.port);
    let r = b.send(
        "POST",
        "/v1/auth/email/start",
        Some(json!({"email": "away@example.com"})),
        None,
    );
    assert_eq!(
        (r.status, r.json()),
        (503, json!({"error": "store_unavailable"})),
        "{}",
        r.text()
    );
    assert!(r.header("retry-after").is_some());
    assert_eq!(
        rpc_status(gw.port, &uncached),
        503,
        "an uncached key cannot be checked"
    );
    pg.restart();
    let mut back = false;
    for _ in 0..50 {
        if rpc_status(gw.port, &uncached) == 200 {
            back = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(back, "keys resolve again once PostgreSQL is back");
    assert_eq!(sign_in(&mut b, &outbox, "back@example.com").status, 200);
}

/// Two instances on one PostgreSQL store, as behind a load balancer: a sign-in started
/// on one finishes on the other, the session works on both and ends on both at logout,
/// and keys made through either (console or CLI) are known to both.
#[test]
fn two_instances_on_one_postgres_share_sign_ins_sessions_and_keys() {
    let pg = PgServer::start();
    let url = pg.create_db();
    let node = Fixture::json_rpc();
    let (a, outbox_a) = console_gateway_on(&node, "", Some(url.clone()));
    let (b, _) = console_gateway_on(&node, "", Some(url));

    // Started on A (the code goes out from A), verified on B.
    let mut on_a = Browser::new(a.port);
    let r = on_a.send(
        "POST",
        "/v1/auth/email/start",
        Some(json!({"email": "lb@example.com"})),
        None,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let code = outbox_code(&outbox_a, "lb@example.com").unwrap();
    let mut on_b = Browser::new(b.port);
    let r = on_b.send(
        "POST",
        "/v1/auth/email/verify",
        Some(json!({"email": "lb@example.com", "code": code})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    // The same cookies on A: the session is the store's, not B's.
    on_a.cookies = on_b.cookies.clone();
    let me_a = on_a.send("GET", "/v1/auth/me", None, None);
    assert_eq!(me_a.status, 200, "{}", me_a.text());
    // The tenant's plan, with the limits this gateway gives it.
    let plan = &me_a.json()["plan"];
    assert_eq!(
        (
            plan["name"].as_str(),
            plan["requests_per_second"].as_f64(),
            plan["categories"]["eth_rpc"].as_f64(),
            plan["categories"].as_object().map(|c| c.len())
        ),
        (Some("free"), Some(1.0), Some(1000.0), Some(1)),
        "{plan}"
    );
    let raw = me_a.json()["default_key"]["raw"]
        .as_str()
        .unwrap()
        .to_string();
    let me_b = on_b.send("GET", "/v1/auth/me", None, None);
    assert_eq!(
        me_b.json()["default_key"]["id"],
        me_a.json()["default_key"]["id"]
    );
    assert!(
        me_b.json()["default_key"].get("raw").is_none(),
        "raw is shown once"
    );
    // The default key made on A answers on B; a CLI key made with A's config, on B.
    assert_eq!(rpc_status(b.port, &raw), 200);
    let cli_key = a.key("pro", &[]);
    assert_eq!(rpc_status(b.port, &cli_key), 200);
    // A key made through B's console is listed by A.
    let made = on_b.send("POST", "/v1/keys", Some(json!({"name": "from-b"})), None);
    assert_eq!(made.status, 201, "{}", made.text());
    let listed = on_a.send("GET", "/v1/keys", None, None).json();
    assert!(listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k["name"] == "from-b"));
    // Logout on B ends the session on A at once (sessions are read from the store).
    let r = on_b.send("POST", "/v1/auth/logout", None, None);
    assert_eq!(r.status, 204);
    assert_eq!(on_a.send("GET", "/v1/auth/me", None, None).status, 401);
}

fn rpc_status(port: u16, key: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []});
    let r = rpc(port, "/rpc/eth", Some(key), &body);
    r.status
}

fn attr(cookie: &str, name: &str) -> bool {
    cookie
        .split(';')
        .any(|a| a.trim().eq_ignore_ascii_case(name))
}

/// `GET /v1/keys/{id}/usage`: a user's own keys only (revoked ones included), every
/// point of the window as the chart draws it, the calls made with the key in it.
#[test]
fn key_usage_is_read_by_its_owner_alone() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(&node, "");
    let mut ada = Browser::new(gw.port);
    assert_eq!(sign_in(&mut ada, &outbox, "ada@example.com").status, 200);
    let me = ada.send("GET", "/v1/auth/me", None, None).json();
    let raw = me["default_key"]["raw"].as_str().unwrap().to_string();
    let id = me["default_key"]["id"].as_str().unwrap().to_string();
    let path = format!("/v1/keys/{id}/usage");

    // Before any call: every point there, all zeros.
    let r = ada.send("GET", &format!("{path}?window=1h"), None, None);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["points"].as_array().unwrap().len(), 60);
    assert_eq!(v["step_sec"], 60);
    assert_eq!(v["totals"]["calls"], 0);

    for _ in 0..3 {
        let r = rpc(
            gw.port,
            "/rpc/eth",
            Some(&raw),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let day = loop {
        let v = ada.send("GET", &path, None, None).json();
        if v["totals"]["calls"] == 3 {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(day["window"], "24h");
    assert_eq!(day["points"].as_array().unwrap().len(), 144);
    assert_eq!(day["totals"]["compute_units"], 30);
    let last = day["points"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|p| p["calls"] != 0)
        .unwrap();
    assert_eq!(last["calls"], 3, "{day}");
    for (window, points) in [("7d", 168), ("30d", 30)] {
        let v = ada
            .send("GET", &format!("{path}?window={window}"), None, None)
            .json();
        assert_eq!(v["points"].as_array().unwrap().len(), points, "{window}");
        assert_eq!(v["totals"]["calls"], 3, "{window}: {v}");
    }
    let r = ada.send("GET", &format!("{path}?window=2h"), None, None);
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_request"}))
    );

    // The account's breakdown: the same calls by chain and method, with latency, and a
    // refused made-up method counted as `unknown`, never under its own name.
    let r = rpc(
        gw.port,
        "/rpc/eth",
        Some(&raw),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "made_up_abc", "params": []}),
    );
    assert!(
        r.text().contains("method_unknown") || r.text().contains("-32601"),
        "{}",
        r.text()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let usage = loop {
        let v = ada.send("GET", "/v1/usage?window=1h", None, None).json();
        if v["totals"]["calls"] == 4
            && v["latency_ms"]["p50"].is_number()
            && v["by_method"].as_array().map_or(0, Vec::len) == 2
        {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let methods = usage["by_method"].as_array().unwrap();
    assert_eq!(methods[0]["method"], "eth_blockNumber", "{usage}");
    assert_eq!(
        (
            methods[0]["chain"].clone(),
            methods[0]["calls"].clone(),
            methods[0]["errors"].clone()
        ),
        (json!("eth"), json!(3), json!(0))
    );
    assert_eq!(
        (methods[1]["method"].clone(), methods[1]["errors"].clone()),
        (json!("unknown"), json!(1))
    );
    assert_eq!(usage["by_chain"][0]["calls"], 4);
    assert_eq!(usage["by_key"][0]["key_id"], json!(id));
    assert!(!usage.to_string().contains("made_up_abc"));
    let csv = ada.send(
        "GET",
        &format!("/v1/usage?window=24h&key_id={id}&format=csv"),
        None,
        None,
    );
    assert_eq!(csv.status, 200);
    assert!(csv.header("content-type").unwrap().starts_with("text/csv"));
    let text = csv.text();
    assert!(
        text.starts_with("key_id,chain,method,calls,errors,mean_ms,p50_ms,p95_ms,p99_ms\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{id},eth,eth_blockNumber,3,0,")),
        "{text}"
    );
    let r = ada.send("GET", "/v1/usage?format=xml", None, None);
    assert_eq!(r.status, 400);

    // Another user, and no session at all, see nothing of it.
    let mut eve = Browser::new(gw.port);
    assert_eq!(sign_in(&mut eve, &outbox, "eve@example.com").status, 200);
    let r = eve.send("GET", &path, None, None);
    assert_eq!((r.status, r.json()), (404, json!({"error": "not_found"})));
    let r = eve.send("GET", &format!("/v1/usage?key_id={id}"), None, None);
    assert_eq!((r.status, r.json()), (404, json!({"error": "not_found"})));
    let theirs = eve.send("GET", "/v1/usage?window=1h", None, None).json();
    assert_eq!(
        (
            theirs["totals"]["calls"].clone(),
            theirs["by_method"].clone()
        ),
        (json!(0), json!([]))
    );
    let r = Browser::new(gw.port).send("GET", &path, None, None);
    assert_eq!(r.status, 401);

    // Revoked, the key's usage stays readable by its owner.
    assert_eq!(
        ada.send("DELETE", &format!("/v1/keys/{id}"), None, None)
            .status,
        204
    );
    assert_eq!(
        ada.send("GET", &path, None, None).json()["totals"]["calls"],
        4,
        "the three calls and the refused one"
    );
}

#[test]
fn email_sign_in_cookies_csrf_default_key_and_keys() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(&node, "");
    let mut b = Browser::new(gw.port);

    // No session: 401 unauthenticated, console envelope, cookies cleared.
    let r = b.send("GET", "/v1/auth/me", None, None);
    assert_eq!(r.status, 401);
    assert_eq!(r.json(), json!({"error": "unauthenticated"}));
    assert!(b
        .last_set_cookies
        .iter()
        .any(|c| c.starts_with("nl_session=;") && c.contains("Max-Age=0")));

    // Bad input to the sign-in flow.
    let r = b.send(
        "POST",
        "/v1/auth/email/start",
        Some(json!({"email": "not an email"})),
        None,
    );
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_email"}))
    );
    let r = b.send(
        "POST",
        "/v1/auth/email/start",
        Some(json!({"mail": "x"})),
        None,
    );
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_request"}))
    );

    // Wrong code, then the right one: the session starts.
    let r = b.send(
        "POST",
        "/v1/auth/email/start",
        Some(json!({"email": "Ada@Example.com"})),
        None,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let code = outbox_code(&outbox, "ada@example.com").unwrap();
    let wrong = if code == "000000" { "000001" } else { "000000" };
    let r = b.send(
        "POST",
        "/v1/auth/email/verify",
        Some(json!({"email": "ada@example.com", "code": wrong})),
        None,
    );
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_code"}))
    );
    assert!(b.cookie("nl_session").is_none());
    let r = b.send(
        "POST",
        "/v1/auth/email/verify",
        Some(json!({"email": "ada@example.com", "code": code})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["provider"], "email");
    assert_eq!(r.json()["user"]["email"], "ada@example.com");

    // Cookie attributes (plain HTTP: no Secure).
    let session_c = b
        .last_set_cookies
        .iter()
        .find(|c| c.starts_with("nl_session="))
        .unwrap()
        .clone();
    let csrf_c = b
        .last_set_cookies
        .iter()
        .find(|c| c.starts_with("nl_csrf="))
        .unwrap()
        .clone();
    for c in [&session_c, &csrf_c] {
        assert!(
            attr(c, "SameSite=Lax") && attr(c, "Path=/") && !attr(c, "Secure"),
            "{c}"
        );
        let expires = c
            .split(';')
            .find_map(|a| a.trim().strip_prefix("Expires="))
            .unwrap();
        let t = httpdate::parse_http_date(expires).unwrap();
        let days = t
            .duration_since(std::time::SystemTime::now())
            .unwrap()
            .as_secs() as f64
            / 86400.0;
        assert!((29.9..=30.1).contains(&days), "{c}");
    }
    assert!(attr(&session_c, "HttpOnly") && !attr(&csrf_c, "HttpOnly"));
    let token = b.cookie("nl_session").unwrap().to_string();
    assert_eq!(token.len(), 43, "256-bit token, base64url");
    assert_eq!(
        b.cookie("nl_csrf").unwrap().len(),
        22,
        "128-bit token, base64url"
    );

    // The store keeps only the token's hash.
    let db = rusqlite::Connection::open(gw.dir.join("store.db")).unwrap();
    let hashed: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM sessions WHERE token_sha256 = ?1",
            [&Sha256::digest(token.as_bytes())[..]],
            |r| r.get(0),
        )
        .unwrap();
    let clear: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM sessions WHERE CAST(token_sha256 AS TEXT) = ?1",
            [&token],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((hashed, clear), (1, 0));

    // A code works once.
    let mut other = Browser::new(gw.port);
    let r = other.send(
        "POST",
        "/v1/auth/email/verify",
        Some(json!({"email": "ada@example.com", "code": code})),
        None,
    );
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_code"}))
    );

    // /v1/auth/me: the first call creates the default key and shows it once.
    let me = b.send("GET", "/v1/auth/me", None, None).json();
    let dk = &me["default_key"];
    assert_eq!(dk["created"], true);
    assert_eq!(dk["is_default"], true);
    let raw = dk["raw"].as_str().unwrap().to_string();
    assert!(raw.starts_with(dk["key_prefix"].as_str().unwrap()));
    assert_eq!(dk["scopes"], json!(["rpc:read", "rpc:write"]));
    let me2 = b.send("GET", "/v1/auth/me", None, None).json();
    assert_eq!(me2["default_key"]["id"], dk["id"]);
    assert!(me2["default_key"].get("raw").is_none() && me2["default_key"].get("created").is_none());
    assert_eq!(me2["user"]["id"], me["user"]["id"]);
    // The default key works on the chain routes.
    assert_eq!(rpc_status(gw.port, &raw), 200);

    // CSRF on unsafe methods: session first, then cookie, then header.
    let r = b.send("POST", "/v1/keys", Some(json!({"name": "ci"})), Some(""));
    assert_eq!(
        (r.status, r.json()),
        (403, json!({"error": "csrf_invalid"}))
    );
    let r = b.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "ci"})),
        Some("not-the-cookie"),
    );
    assert_eq!(
        (r.status, r.json()),
        (403, json!({"error": "csrf_invalid"}))
    );
    let saved = b.cookies.clone();
    b.cookies.retain(|(k, _)| k != "nl_csrf");
    let r = b.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "ci"})),
        Some("anything"),
    );
    assert_eq!(
        (r.status, r.json()),
        (403, json!({"error": "csrf_missing"}))
    );
    b.cookies.retain(|(k, _)| k != "nl_session");
    let r = b.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "ci"})),
        Some("anything"),
    );
    assert_eq!(
        (r.status, r.json()),
        (401, json!({"error": "unauthenticated"}))
    );
    b.cookies = saved;

    // Keys: create (raw once), list (never secrets), bad input.
    let r = b.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "ci", "scopes": ["rpc:read", "sol_watchlist"]})),
        None,
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let created = r.json();
    let ci_raw = created["raw"].as_str().unwrap().to_string();
    assert_eq!(rpc_status(gw.port, &ci_raw), 200);
    let r = b.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "x", "scopes": ["admin"]})),
        None,
    );
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_request"}))
    );
    let r = b.send("POST", "/v1/keys", Some(json!({"name": ""})), None);
    assert_eq!(r.status, 400);
    let list = b.send("GET", "/v1/keys", None, None);
    assert_eq!(list.status, 200);
    assert!(
        !list.text().contains(&ci_raw) && !list.text().contains(&raw),
        "secrets in the list"
    );
    let listed = list.json();
    let names: Vec<&str> = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "ci"]);

    // Another user sees none of these keys and cannot touch them.
    let mut eve = Browser::new(gw.port);
    assert_eq!(sign_in(&mut eve, &outbox, "eve@example.com").status, 200);
    let eve_keys = eve.send("GET", "/v1/keys", None, None).json();
    assert_eq!(eve_keys["keys"], json!([]));
    let ci_id = created["id"].as_str().unwrap();
    let r = eve.send("DELETE", &format!("/v1/keys/{ci_id}"), None, None);
    assert_eq!((r.status, r.json()), (404, json!({"error": "not_found"})));
    let r = eve.send("POST", &format!("/v1/keys/{ci_id}/rotate"), None, None);
    assert_eq!(r.status, 404);
    let rename = |name: &str| Some(json!({ "name": name }));
    let r = eve.send("PATCH", &format!("/v1/keys/{ci_id}"), rename("mine"), None);
    assert_eq!((r.status, r.json()), (404, json!({"error": "not_found"})));
    assert_eq!(rpc_status(gw.port, &ci_raw), 200);

    // Rename: the owner's key only, a printable name of 1 to 64 characters.
    for bad in ["", "   ", &"x".repeat(65), "tab\there"] {
        let r = b.send("PATCH", &format!("/v1/keys/{ci_id}"), rename(bad), None);
        assert_eq!(r.status, 400, "{bad:?}: {}", r.text());
    }
    let r = b.send(
        "PATCH",
        &format!("/v1/keys/{ci_id}"),
        rename("  deploys "),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (r.json()["id"].as_str(), r.json()["name"].as_str()),
        (Some(ci_id), Some("deploys"))
    );
    let listed = b.send("GET", "/v1/keys", None, None).json();
    assert!(
        listed["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["name"] == "deploys"),
        "{listed}"
    );
    assert_eq!(
        rpc_status(gw.port, &ci_raw),
        200,
        "a rename keeps the secret"
    );

    // Rotate: a new secret once; the old one stops working at once (it was cached).
    let r = b.send("POST", &format!("/v1/keys/{ci_id}/rotate"), None, None);
    assert_eq!(r.status, 200, "{}", r.text());
    let rotated = r.json()["raw"].as_str().unwrap().to_string();
    assert_ne!(rotated, ci_raw);
    assert_eq!(rpc_status(gw.port, &ci_raw), 401);
    assert_eq!(rpc_status(gw.port, &rotated), 200);

    // Revoking the default key: refused on the chain routes at once; /me makes a new one.
    let dk_id = dk["id"].as_str().unwrap();
    let r = b.send("DELETE", &format!("/v1/keys/{dk_id}"), None, None);
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(rpc_status(gw.port, &raw), 401);
    let me3 = b.send("GET", "/v1/auth/me", None, None).json();
    assert_eq!(me3["default_key"]["created"], true);
    assert_ne!(me3["default_key"]["id"], dk["id"]);
    let raw3 = me3["default_key"]["raw"].as_str().unwrap().to_string();
    // Rotating the default key: its replacement is the default (no second key made).
    let id3 = me3["default_key"]["id"].as_str().unwrap().to_string();
    let r = b.send("POST", &format!("/v1/keys/{id3}/rotate"), None, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["is_default"], true, "{}", r.text());
    assert_eq!(rpc_status(gw.port, &raw3), 401);
    let me4 = b.send("GET", "/v1/auth/me", None, None).json();
    assert_eq!(me4["default_key"]["id"], r.json()["id"], "{me4}");
    assert!(me4["default_key"].get("created").is_none(), "{me4}");

    // Console routes are never rate limited (chain limits here are 1 rps).
    for _ in 0..30 {
        assert_eq!(b.send("GET", "/v1/auth/me", None, None).status, 200);
    }

    // Logout: cookies cleared, the old token refused at once.
    let r = b.send("POST", "/v1/auth/logout", None, None);
    assert_eq!(r.status, 204);
    assert!(b
        .last_set_cookies
        .iter()
        .any(|c| c.starts_with("nl_session=;")));
    let mut replay = Browser::new(gw.port);
    replay.cookies.push(("nl_session".into(), token.clone()));
    let r = replay.send("GET", "/v1/auth/me", None, None);
    assert_eq!(r.status, 401);
}

#[test]
fn concurrent_first_me_creates_one_default_key() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(&node, "");
    let mut b = Browser::new(gw.port);
    assert_eq!(sign_in(&mut b, &outbox, "bob@example.com").status, 200);
    let jar: Vec<String> = b.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let jar = jar.join("; ");
    let port = gw.port;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let jar = jar.clone();
            std::thread::spawn(move || {
                request(port, "GET", "/v1/auth/me", &[("Cookie", &jar)], b"")
                    .unwrap()
                    .json()
            })
        })
        .collect();
    let answers: Vec<Value> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let created = answers
        .iter()
        .filter(|a| a["default_key"]["created"] == true)
        .count();
    assert_eq!(created, 1, "{answers:?}");
    let ids: std::collections::HashSet<&str> = answers
        .iter()
        .map(|a| a["default_key"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1);
}

/// Sleep until just after the next whole second (session times are whole seconds).
fn just_after_a_second_begins() {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    std::thread::sleep(
        Duration::from_millis(1050)
            - Duration::from_nanos(since.subsec_nanos() as u64 % 1_000_000_000)
                .min(Duration::from_millis(1000)),
    );
}

#[test]
fn sliding_refresh_then_expiry() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(&node, "  session_ttl_secs: 4\n");
    let mut b = Browser::new(gw.port);
    // Session times are whole seconds: start just after a second begins, so the
    // sleeps below land well inside each second.
    just_after_a_second_begins();
    assert_eq!(sign_in(&mut b, &outbox, "carol@example.com").status, 200);
    let token = b.cookie("nl_session").unwrap().to_string();
    let csrf = b.cookie("nl_csrf").unwrap().to_string();
    // Half or more of the lifetime left: cookies untouched.
    let r = b.send("GET", "/v1/auth/me", None, None);
    assert_eq!(r.status, 200);
    assert!(b.last_set_cookies.is_empty(), "{:?}", b.last_set_cookies);
    // Under half left: expiry pushed, both cookies re-issued with the same values.
    std::thread::sleep(Duration::from_millis(3100));
    let r = b.send("GET", "/v1/keys", None, None);
    assert_eq!(r.status, 200);
    assert_eq!(b.last_set_cookies.len(), 2, "{:?}", b.last_set_cookies);
    assert_eq!(b.cookie("nl_session"), Some(token.as_str()));
    assert_eq!(b.cookie("nl_csrf"), Some(csrf.as_str()));
    // Refreshed in the store too: still valid past the original expiry.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(b.send("GET", "/v1/auth/me", None, None).status, 200);
    // Left alone past its lifetime: expired.
    std::thread::sleep(Duration::from_millis(4500));
    let r = b.send("GET", "/v1/auth/me", None, None);
    assert_eq!(
        (r.status, r.json()),
        (401, json!({"error": "unauthenticated"}))
    );
}

/// Behind a TLS-terminating proxy nobody listed, an https `console.origin` still makes
/// every cookie `Secure`; a browser that lost its `nl_csrf` cookie gets a new one with the
/// sliding refresh, and can write again.
#[test]
fn an_https_origin_secures_cookies_and_a_lost_csrf_cookie_is_reissued() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(
        &node,
        "  session_ttl_secs: 4\n  origin: https://console.example.com\n",
    );
    let mut b = Browser::new(gw.port);
    // Session times are whole seconds: start just after a second begins (as
    // `sliding_refresh_then_expiry` does), so "under half left" lands inside 3..4 s.
    just_after_a_second_begins();
    assert_eq!(sign_in(&mut b, &outbox, "dan@example.com").status, 200);
    assert_eq!(b.last_set_cookies.len(), 2);
    for c in &b.last_set_cookies {
        assert!(attr(c, "Secure"), "{c}");
    }
    let old_csrf = b.cookie("nl_csrf").unwrap().to_string();
    // The same session without its CSRF cookie, once under half the lifetime is left.
    let mut lost = Browser::new(gw.port);
    lost.cookies = vec![(
        "nl_session".into(),
        b.cookie("nl_session").unwrap().to_string(),
    )];
    let r = lost.send("POST", "/v1/keys", Some(json!({"name": "w"})), None);
    assert_eq!(
        (r.status, r.json()),
        (403, json!({"error": "csrf_missing"}))
    );
    std::thread::sleep(Duration::from_millis(3100));
    let r = lost.send("GET", "/v1/auth/me", None, None);
    assert_eq!(r.status, 200);
    assert_eq!(
        lost.last_set_cookies.len(),
        2,
        "{:?}",
        lost.last_set_cookies
    );
    for c in &lost.last_set_cookies {
        assert!(attr(c, "Secure"), "{c}");
    }
    let csrf = lost.cookie("nl_csrf").expect("a new nl_csrf").to_string();
    assert!(csrf.len() >= 22 && csrf != old_csrf, "{csrf}");
    let r = lost.send("POST", "/v1/keys", Some(json!({"name": "w"})), None);
    assert_eq!(r.status, 201, "{}", r.text());
}

/// A local OIDC provider: RS256 keys from `openssl`, a token endpoint that checks the PKCE
/// verifier, and a JWKS endpoint.
struct OidcFixture {
    server: Fixture,
    key_pem: Vec<u8>,
    other_pem: Vec<u8>,
    /// The PKCE challenge the next token request must match, and the ID token it gets.
    expect: std::sync::Arc<std::sync::Mutex<(String, String)>>,
}

fn rsa_key(dir: &std::path::Path, name: &str) -> (Vec<u8>, String) {
    let path = dir.join(name);
    let ok = std::process::Command::new("openssl")
        .args(["genrsa", "-out"])
        .arg(&path)
        .arg("2048")
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "openssl genrsa");
    let out = std::process::Command::new("openssl")
        .args(["rsa", "-noout", "-modulus", "-in"])
        .arg(&path)
        .output()
        .unwrap();
    let hex_n = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .trim_start_matches("Modulus=")
        .to_string();
    let n: Vec<u8> = (0..hex_n.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex_n[i..i + 2], 16).unwrap())
        .collect();
    use base64::Engine;
    (
        std::fs::read(&path).unwrap(),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(n),
    )
}

impl OidcFixture {
    fn start() -> OidcFixture {
        let dir = tempdir("oidc");
        let (key_pem, n) = rsa_key(&dir, "k1.pem");
        let (other_pem, _) = rsa_key(&dir, "k2.pem");
        let expect = std::sync::Arc::new(std::sync::Mutex::new((String::new(), String::new())));
        let e = expect.clone();
        let server = Fixture::start(move |req| match req.path.as_str() {
            "/jwks" => FixtureResponse::json(
                json!({"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": n, "e": "AQAB"}]}),
            ),
            "/token" => {
                let form = String::from_utf8_lossy(&req.body).to_string();
                let (challenge, token) = e.lock().unwrap().clone();
                let verifier = form
                    .split('&')
                    .find_map(|p| p.strip_prefix("code_verifier="))
                    .unwrap_or("");
                use base64::Engine;
                let got = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(Sha256::digest(verifier.as_bytes()));
                let secret_ok = form.contains("client_secret=s3cret")
                    && form.contains("grant_type=authorization_code");
                if got != challenge
                    || !secret_ok
                    || req.header("content-type") != Some("application/x-www-form-urlencoded")
                {
                    return FixtureResponse::status(400, "invalid_grant");
                }
                FixtureResponse::json(json!({"id_token": token, "token_type": "Bearer"}))
            }
            _ => FixtureResponse::status(404, "no"),
        });
        OidcFixture {
            server,
            key_pem,
            other_pem,
            expect,
        }
    }

    fn token(&self, pem: &[u8], claims: Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = Some("k1".into());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_rsa_pem(pem).unwrap(),
        )
        .unwrap()
    }
}

fn query_of(url: &str, name: &str) -> String {
    let q = url.split_once('?').unwrap().1;
    q.split('&')
        .find_map(|p| p.strip_prefix(&format!("{name}=")))
        .map(|v| String::from_utf8(percent_decode(v)).unwrap())
        .unwrap_or_default()
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() + 1 {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn google_oidc_sign_in_with_pkce_state_and_nonce() {
    let idp = OidcFixture::start();
    let base = idp.server.url();
    let outbox = tempdir("oidc-outbox").join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        console_yaml: format!(
            "  email:\n    outbox: {}\n  google:\n    client_id: test-client\n    client_secret: env:CHAINEDGE_TEST_GOOGLE_SECRET\n\
             \x20   redirect_uri: http://127.0.0.1/v1/auth/google/callback\n    issuer: https://issuer.test\n\
             \x20   authorization_endpoint: {base}/authorize\n    token_endpoint: {base}/token\n    jwks_uri: {base}/jwks\n",
            outbox.display()
        ),
        env: vec![("CHAINEDGE_TEST_GOOGLE_SECRET".into(), "s3cret".into())],
        ..Default::default()
    });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = |nonce: &str, aud: &str| {
        json!({"iss": "https://issuer.test", "aud": aud, "sub": "g-123", "email": "Gina@Example.com",
               "email_verified": true, "name": "Gina", "picture": "https://img.test/g.png",
               "iat": now, "exp": now + 300, "nonce": nonce})
    };

    // Start: 302 to the provider with state, nonce and an S256 PKCE challenge; state cookie.
    let start = |b: &mut Browser| {
        let r = b.send("GET", "/v1/auth/google/start", None, None);
        assert_eq!(r.status, 302, "{}", r.text());
        let loc = r.header("Location").unwrap().to_string();
        assert!(loc.starts_with(&format!("{base}/authorize?")), "{loc}");
        assert_eq!(query_of(&loc, "code_challenge_method"), "S256");
        assert_eq!(query_of(&loc, "client_id"), "test-client");
        assert_eq!(query_of(&loc, "scope"), "openid email profile");
        let state = query_of(&loc, "state");
        let cookie = b
            .last_set_cookies
            .iter()
            .find(|c| c.starts_with("nl_oauth="))
            .unwrap();
        assert!(
            cookie.contains(&state) && attr(cookie, "HttpOnly") && attr(cookie, "SameSite=Lax"),
            "{cookie}"
        );
        (
            state,
            query_of(&loc, "nonce"),
            query_of(&loc, "code_challenge"),
        )
    };
    let callback = |b: &mut Browser, state: &str| {
        b.send(
            "GET",
            &format!("/v1/auth/google/callback?code=c0de&state={state}"),
            None,
            None,
        )
    };

    // Gina first signed up with an email code; Google (verified email) finds that account.
    let mut by_email = Browser::new(gw.port);
    assert_eq!(
        sign_in(&mut by_email, &outbox, "gina@example.com").status,
        200
    );
    let email_user = by_email.send("GET", "/v1/auth/me", None, None).json()["user"]["id"].clone();

    let mut b = Browser::new(gw.port);
    let (state, nonce, challenge) = start(&mut b);
    *idp.expect.lock().unwrap() = (
        challenge,
        idp.token(&idp.key_pem, claims(&nonce, "test-client")),
    );
    // Another browser (no state cookie) cannot complete this sign-in.
    let r = callback(&mut Browser::new(gw.port), &state);
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_state"}))
    );
    // The browser that started it can.
    let r = callback(&mut b, &state);
    assert_eq!(r.status, 302, "{}", r.text());
    assert_eq!(r.header("Location"), Some("/console/"));
    assert!(b.cookie("nl_session").is_some() && b.cookie("nl_csrf").is_some());
    let me = b.send("GET", "/v1/auth/me", None, None).json();
    assert_eq!(me["provider"], "google");
    assert_eq!(me["user"]["email"], "gina@example.com");
    assert_eq!(me["user"]["display_name"], "Gina");
    assert_eq!(
        me["user"]["id"], email_user,
        "verified email links to the existing account"
    );
    // The same account: its default key already exists, so no raw value this time.
    assert!(me["default_key"]["id"].is_string() && me["default_key"].get("raw").is_none());
    // The state is single use.
    b.cookies.push(("nl_oauth".into(), state.clone()));
    let r = callback(&mut b, &state);
    assert_eq!(
        (r.status, r.json()),
        (400, json!({"error": "invalid_state"}))
    );

    // Tokens that must not verify: wrong nonce, wrong audience, wrong signing key, expired.
    let bad_tokens = [
        claims("not-the-nonce", "test-client"),
        claims("NONCE", "someone-else"),
        claims("NONCE", "test-client"),
        {
            let mut c = claims("NONCE", "test-client");
            c["exp"] = json!(now - 3600);
            c
        },
    ];
    for (i, c) in bad_tokens.into_iter().enumerate() {
        let mut b = Browser::new(gw.port);
        let (state, nonce, challenge) = start(&mut b);
        let c: Value = serde_json::from_str(&c.to_string().replace("NONCE", &nonce)).unwrap();
        let pem = if i == 2 { &idp.other_pem } else { &idp.key_pem };
        *idp.expect.lock().unwrap() = (challenge, idp.token(pem, c));
        let r = callback(&mut b, &state);
        assert_eq!(
            (r.status, r.json()),
            (400, json!({"error": "invalid_token"})),
            "case {i}"
        );
        assert!(b.cookie("nl_session").is_none());
    }

    // The provider refuses the code (e.g. a wrong PKCE verifier): 502.
    let mut b = Browser::new(gw.port);
    let (state, _, _) = start(&mut b);
    *idp.expect.lock().unwrap() = ("not-this-challenge".into(), String::new());
    let r = callback(&mut b, &state);
    assert_eq!(
        (r.status, r.json()),
        (502, json!({"error": "oidc_exchange_failed"}))
    );
}

/// Issue 8: SIGKILL while keys and sessions are being written loses no write the gateway
/// acknowledged (SQLite WAL, `synchronous=FULL`): after a restart on the same store every
/// acknowledged session resolves, and every acknowledged key is listed and authenticates.
#[test]
fn sigkill_while_writing_keys_and_sessions_loses_no_acknowledged_write() {
    sigkill_while_writing(None);
}

/// The same on a PostgreSQL store (its own durability, the edge's acknowledgements).
#[test]
fn sigkill_while_writing_to_postgres_loses_no_acknowledged_write() {
    let pg = PgServer::start();
    sigkill_while_writing(Some(pg.create_db()));
}

fn sigkill_while_writing(postgres: Option<String>) {
    use std::sync::{Arc, Mutex};
    /// One signed-in user: email, cookies and the (id, raw) of each key it got.
    type Written = (String, Vec<(String, String)>, Vec<(String, String)>);
    let node = Fixture::json_rpc();
    // Many sign-ins from one client address: its code bound is lifted for this test.
    let (mut gw, outbox) =
        console_gateway_on(&node, "    max_codes_per_client_15min: 1000000\n", postgres);

    // Writers sign new users in and create keys for them, recording only what the gateway
    // acknowledged, until the gateway vanishes under them.
    let written: Arc<Mutex<Vec<Written>>> = Arc::default();
    let port = gw.port;
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (written, outbox) = (written.clone(), outbox.clone());
            std::thread::spawn(move || {
                for n in 0.. {
                    let email = format!("w{w}-user{n}@example.com");
                    let mut b = Browser::new(port);
                    let body = json!({"email": email});
                    match b.try_send("POST", "/v1/auth/email/start", Some(body), None) {
                        Ok(r) if r.status == 202 => {}
                        Ok(r) => panic!("code refused: {} {}", r.status, r.text()),
                        Err(_) => return,
                    }
                    let body =
                        json!({"email": email, "code": outbox_code(&outbox, &email).unwrap()});
                    match b.try_send("POST", "/v1/auth/email/verify", Some(body), None) {
                        Ok(r) if r.status == 200 => {}
                        Ok(r) => panic!("sign-in refused: {} {}", r.status, r.text()),
                        Err(_) => return,
                    }
                    let slot = {
                        let mut all = written.lock().unwrap();
                        all.push((email, b.cookies.clone(), Vec::new()));
                        all.len() - 1
                    };
                    for k in 0..5 {
                        let body = json!({"name": format!("k{k}")});
                        match b.try_send("POST", "/v1/keys", Some(body), None) {
                            Ok(r) if r.status == 201 => {
                                let v = r.json();
                                let key = (v["id"].as_str().unwrap(), v["raw"].as_str().unwrap());
                                written.lock().unwrap()[slot]
                                    .2
                                    .push((key.0.to_string(), key.1.to_string()));
                            }
                            Ok(r) => panic!("key write refused: {} {}", r.status, r.text()),
                            Err(_) => return,
                        }
                    }
                }
            })
        })
        .collect();

    // Kill once writes are flowing, in the middle of them.
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (users, keys) = {
            let all = written.lock().unwrap();
            (all.len(), all.iter().map(|u| u.2.len()).sum::<usize>())
        };
        if users >= 8 && keys >= 30 {
            break;
        }
        assert!(std::time::Instant::now() < until, "writes did not flow");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut dead = gw.proc.take().unwrap();
    dead.signal("KILL");
    assert!(dead.exited_within(Duration::from_secs(5)));
    for w in writers {
        w.join().unwrap();
    }

    gw.proc = Some(gw.spawn(false));
    gw.wait_ready(Duration::from_secs(20));
    let written = written.lock().unwrap().clone();
    let key_count: usize = written.iter().map(|u| u.2.len()).sum();
    eprintln!(
        "acknowledged before SIGKILL: {} sessions, {key_count} keys",
        written.len()
    );
    for (email, cookies, keys) in written {
        let mut b = Browser::new(gw.port);
        b.cookies = cookies;
        let me = b.send("GET", "/v1/auth/me", None, None);
        assert_eq!(me.status, 200, "session of {email} lost: {}", me.text());
        assert_eq!(me.json()["user"]["email"], email.as_str());
        let listed = b.send("GET", "/v1/keys", None, None).json();
        let listed: std::collections::HashSet<&str> = listed["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["id"].as_str().unwrap())
            .collect();
        for (id, raw) in &keys {
            assert!(listed.contains(id.as_str()), "key {id} of {email} lost");
            assert_eq!(rpc_status(gw.port, raw), 200, "key {id} of {email} refused");
        }
    }
}

/// The plans page's routes: every plan for anyone, a self-service plan applied at once,
/// another one pending until an operator approves or rejects it with the CLI; bad or
/// cross-site requests refused; `upgrade_url` points at the page.
#[test]
fn plans_are_listed_and_changed_by_request_and_approval() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(&node, "  self_service_plans: [basic]\n");
    let plans = request(gw.port, "GET", "/v1/plans", &[], b"").unwrap();
    assert_eq!(plans.status, 200, "{}", plans.text());
    let plans = plans.json()["plans"].clone();
    let names: Vec<&str> = plans
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["free", "basic", "pro", "business", "enterprise", "scale"]
    );
    assert_eq!(plans[1]["self_service"], true);
    assert_eq!(plans[2]["self_service"], false);
    assert_eq!(plans[0]["requests_per_second"], 1.0);

    let mut ada = Browser::new(gw.port);
    assert_eq!(sign_in(&mut ada, &outbox, "ada@example.com").status, 200);
    let me = ada.send("GET", "/v1/auth/me", None, None).json();
    assert_eq!(me["plan"]["name"], "free");
    let key = me["default_key"]["raw"].as_str().unwrap().to_string();
    assert_eq!(
        ada.send("GET", "/v1/plan/request", None, None).json(),
        json!({"request": null})
    );
    // The refusal a free key meets points at the plans page.
    let send_nothing = || {
        request(
            gw.port,
            "POST",
            "/v1/eth/sender/raw",
            &[("x-token", &key), ("Content-Type", "application/json")],
            b"{}",
        )
        .unwrap()
    };
    let refused = send_nothing();
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        refused.json()["upgrade_url"],
        "http://console.test/console/#plans"
    );

    for (body, csrf, status) in [
        (json!({"plan": "gold"}), None, 400),
        (json!({"plan": "free"}), None, 409),
        (json!({"plan": "basic", "x": 1}), None, 400),
        (json!({"plan": "basic"}), Some(""), 403),
    ] {
        let r = ada.send("POST", "/v1/plan/request", Some(body.clone()), csrf);
        assert_eq!(r.status, status, "{body}: {}", r.text());
    }
    // Self-service: applied at once, the tenant's keys meet it on their next request.
    let r = ada.send(
        "POST",
        "/v1/plan/request",
        Some(json!({"plan": "basic"})),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["request"]["status"], "applied");
    assert_eq!(
        ada.send("GET", "/v1/auth/me", None, None).json()["plan"]["name"],
        "basic"
    );
    let r = send_nothing();
    assert_eq!(r.status, 400, "past the plan check now: {}", r.text());

    // Any other plan waits for an operator.
    let r = ada.send(
        "POST",
        "/v1/plan/request",
        Some(json!({"plan": "pro"})),
        None,
    );
    assert_eq!(r.status, 202, "{}", r.text());
    let pending = ada.send("GET", "/v1/plan/request", None, None).json()["request"].clone();
    assert_eq!(
        (
            pending["plan"].as_str(),
            pending["status"].as_str(),
            pending["from_plan"].as_str()
        ),
        (Some("pro"), Some("pending"), Some("basic"))
    );
    assert_eq!(
        ada.send("GET", "/v1/auth/me", None, None).json()["plan"]["name"],
        "basic"
    );
    let listed = gw.cli(&["tenants", "plan-requests"]);
    let row: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    assert_eq!(row["plan"], "pro");
    let tenant = row["tenant_id"].as_str().unwrap().to_string();
    // The operator approves the plan it read: a request replaced since (or any other
    // plan) is not approved by mistake.
    let approve_scale = || {
        std::process::Command::new(bin())
            .arg("--app")
            .arg(&gw.app)
            .args(["tenants", "approve-plan", "--tenant", &tenant])
            .args(["--plan", "scale"])
            .output()
            .unwrap()
    };
    let other = approve_scale();
    assert!(!other.status.success());
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("is for plan pro, not scale"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    assert_eq!(
        ada.send("GET", "/v1/auth/me", None, None).json()["plan"]["name"],
        "basic"
    );
    gw.cli(&[
        "tenants",
        "approve-plan",
        "--tenant",
        &tenant,
        "--plan",
        "pro",
    ]);
    assert_eq!(
        ada.send("GET", "/v1/auth/me", None, None).json()["plan"]["name"],
        "pro"
    );
    assert_eq!(
        ada.send("GET", "/v1/plan/request", None, None).json()["request"]["status"],
        "approved"
    );
    assert!(gw.cli(&["tenants", "plan-requests"]).is_empty());
    // A rejection leaves the plan as it is; nothing pending is nothing to decide.
    assert_eq!(
        ada.send(
            "POST",
            "/v1/plan/request",
            Some(json!({"plan": "scale"})),
            None
        )
        .status,
        202
    );
    gw.cli(&["tenants", "reject-plan", "--tenant", &tenant]);
    assert_eq!(
        ada.send("GET", "/v1/auth/me", None, None).json()["plan"]["name"],
        "pro"
    );
    // Nothing pending is nothing to approve.
    assert!(!approve_scale().status.success());
    // Another user's request is their own tenant's.
    let mut eve = Browser::new(gw.port);
    assert_eq!(sign_in(&mut eve, &outbox, "eve@example.com").status, 200);
    assert_eq!(
        eve.send("GET", "/v1/plan/request", None, None).json(),
        json!({"request": null})
    );

    // The audit log: each change, newest first, by whom (the operator's with no user).
    let events = ada.send("GET", "/v1/audit", None, None).json()["events"].clone();
    let seen: Vec<(String, String, Value)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["target"].as_str().unwrap().to_string(),
                e["user"].clone(),
            )
        })
        .collect();
    let ada_user = json!("ada@example.com");
    let default_key = me["default_key"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        seen,
        [
            ("plan.reject".into(), "scale".into(), Value::Null),
            ("plan.request".into(), "scale".into(), ada_user.clone()),
            ("plan.approve".into(), "pro".into(), Value::Null),
            ("plan.request".into(), "pro".into(), ada_user.clone()),
            ("plan.request".into(), "basic".into(), ada_user.clone()),
            ("key.create".into(), default_key, ada_user),
        ],
        "{events}"
    );
    assert_eq!(events[4]["detail"], "from free: applied");
    eve.send("GET", "/v1/auth/me", None, None);
    let eves = eve.send("GET", "/v1/audit", None, None).json()["events"].clone();
    assert_eq!(eves.as_array().unwrap().len(), 1, "{eves}");
    assert_eq!(eves[0]["user"], "eve@example.com");
}
