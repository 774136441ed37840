//! Solana watchlists and push against LiteSVM behind Solana's JSON-RPC and PubSub
//! (`tests/standins/sol_node.py`): webhooks to a real HTTPS receiver (signature checked),
//! the tenant's WebSocket channel, one node subscription for every watcher of an
//! account, retries and dead letters, redirects not followed, SSRF refusals, tenant
//! isolation, and the push surviving the node dropping its PubSub connection.

use common::*;
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};
use tungstenite::client::IntoClientRequest;
use tungstenite::Message;

const SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";

fn wait_until<F: Fn() -> bool>(what: &str, f: F) {
    let until = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A gateway over `node` with watchlists on; `allow_local` lets callbacks reach the
/// test receivers on 127.0.0.1 (and trusts their certificate).
fn gateway(node: &SolNode, dir: &Path, allow_local: bool, extra: &str) -> Gateway {
    let webhook = if allow_local {
        format!(
            "    webhook: {{allow_private: [\"127.0.0.0/8\", \"::1/128\"], ca_file: \"{}\", backoff_ms: 100, max_attempts: 3, timeout_ms: 2000}}\n",
            dir.join("cert.pem").display()
        )
    } else {
        String::new()
    };
    Gateway::start(GatewayOpts {
        pools: format!(
            "  sol_rpc:\n    hosts:\n      - {{id: sol-1, url: \"{}\", ws_url: \"ws://127.0.0.1:{}\", family: solana, capabilities: [ws]}}\n",
            node.url(),
            node.ws_port
        ),
        extra_yaml: format!(
            "health:\n  interval_ms: 200\n  timeout_ms: 2000\n{UNLIMITED}solana:\n  watchlist:\n    signing_secret: env:CHAINEDGE_WATCHLIST_SECRET\n{extra}{webhook}"
        ),
        env: vec![("CHAINEDGE_WATCHLIST_SECRET".into(), SECRET.into())],
        ..Default::default()
    })
}

fn call(gw: &Gateway, key: &str, method: &str, path: &str, body: Option<Value>) -> Resp {
    let text = body.map(|b| b.to_string()).unwrap_or_default();
    let h = [("Content-Type", "application/json"), ("x-token", key)];
    request(gw.port, method, path, &h, text.as_bytes()).unwrap()
}

fn create(gw: &Gateway, key: &str, body: Value) -> Resp {
    call(gw, key, "POST", "/v1/sol/watchlist", Some(body))
}

fn served(node: &SolNode, method: &str) -> u64 {
    node.call("shim_stats", json!([]))["result"][method]
        .as_u64()
        .unwrap_or(0)
}

fn airdrop(node: &SolNode, to: &str, lamports: u64) {
    let r = node.call("requestAirdrop", json!([to, lamports]));
    assert!(r.get("result").is_some(), "{r}");
}

fn channel(gw: &Gateway, key: &str, client: &str) -> tungstenite::WebSocket<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = format!(
        "ws://127.0.0.1:{}/ws/sol/watchlist?client={client}",
        gw.port
    )
    .into_client_request()
    .unwrap();
    req.headers_mut().insert("x-token", key.parse().unwrap());
    tungstenite::client(req, stream)
        .expect("channel handshake")
        .0
}

fn next_text(ws: &mut tungstenite::WebSocket<TcpStream>) -> Value {
    loop {
        match ws.read().expect("a delivery") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

#[test]
fn one_node_subscription_feeds_every_watcher_by_webhook_and_channel() {
    let dir = tempdir("solwatch");
    localhost_cert(&dir);
    let node = SolNode::start(100, 1000);
    let rx = Receiver::start(&dir, 200);
    let gw = gateway(&node, &dir, true, "");
    let (a, b) = (
        gw.key("business", &["sol_watchlist"]),
        gw.key("business", &["sol_watchlist"]),
    );
    let watched = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";

    let r = create(
        &gw,
        &a,
        json!({"pubkey": watched, "callback_type": "webhook", "callback_url": rx.url()}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let hook_a = r.json();
    assert_eq!(hook_a["commitment"], "confirmed");
    assert!(hook_a["created_at"].as_str().unwrap().ends_with('Z'));
    let r = create(
        &gw,
        &a,
        json!({"pubkey": watched, "callback_type": "ws", "callback_url": "desk-1"}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(
        r.json().get("signing_secret").is_none(),
        "ws entries are not signed"
    );
    let r = create(
        &gw,
        &b,
        json!({"pubkey": watched, "commitment": "confirmed", "callback_type": "webhook", "callback_url": rx.url()}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let hook_b = r.json();
    let mut desk = channel(&gw, &a, "desk-1");
    let mut other_desk = channel(&gw, &a, "desk-2");
    wait_until("the node subscription", || {
        served(&node, "accountSubscribe") >= 1
    });

    airdrop(&node, watched, 3_000_000_000);
    wait_until("both webhooks", || rx.hits().len() >= 2);
    let hits = rx.hits();
    let mut entries = Vec::new();
    for hit in &hits {
        let body: Value = serde_json::from_str(&hit.body).unwrap();
        assert_eq!(body["type"], "account_changed");
        assert_eq!(body["pubkey"], watched);
        assert_eq!(body["account"]["lamports"], 3_000_000_000u64);
        let secret = if body["entry_id"] == hook_a["id"] {
            &hook_a
        } else {
            &hook_b
        };
        verify(secret["signing_secret"].as_str().unwrap(), hit);
        entries.push(body["entry_id"].as_str().unwrap().to_string());
    }
    entries.sort();
    let mut want = vec![
        hook_a["id"].as_str().unwrap().to_string(),
        hook_b["id"].as_str().unwrap().to_string(),
    ];
    want.sort();
    assert_eq!(entries, want, "one delivery per webhook entry");
    let msg = next_text(&mut desk);
    assert_eq!(
        (msg["pubkey"].as_str(), msg["account"]["lamports"].as_u64()),
        (Some(watched), Some(3_000_000_000))
    );
    // desk-2 has no entry: nothing for it (its next message would be a later change).
    other_desk
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    assert!(
        other_desk.read().is_err(),
        "no delivery for a client id without entries"
    );
    assert_eq!(
        served(&node, "accountSubscribe"),
        1,
        "three entries, two tenants, one node subscription"
    );

    // Tenant isolation: B sees, reads and deletes only its own.
    let list = call(&gw, &b, "GET", "/v1/sol/watchlist", None).json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], hook_b["id"]);
    assert!(
        list[0].get("signing_secret").is_none(),
        "the secret is given once"
    );
    let a_id = hook_a["id"].as_str().unwrap();
    for (method, path) in [
        ("GET", format!("/v1/sol/watchlist/{a_id}")),
        ("DELETE", format!("/v1/sol/watchlist/{a_id}")),
        ("GET", format!("/v1/sol/watchlist/{a_id}/dead-letters")),
    ] {
        let r = call(&gw, &b, method, &path, None);
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (404, Some("not_found")),
            "{method} {path}"
        );
    }
    assert_eq!(
        call(&gw, &a, "GET", &format!("/v1/sol/watchlist/{a_id}"), None).status,
        200
    );
    assert_eq!(
        call(&gw, &a, "GET", "/v1/sol/watchlist", None)
            .json()
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // The last entry on the account releases the node subscription.
    for (key, list) in [
        (&a, call(&gw, &a, "GET", "/v1/sol/watchlist", None).json()),
        (&b, call(&gw, &b, "GET", "/v1/sol/watchlist", None).json()),
    ] {
        for e in list.as_array().unwrap() {
            let r = call(
                &gw,
                key,
                "DELETE",
                &format!("/v1/sol/watchlist/{}", e["id"].as_str().unwrap()),
                None,
            );
            assert_eq!(r.status, 204);
        }
    }
    wait_until("the node unsubscription", || {
        served(&node, "accountUnsubscribe") == 1
    });
    assert_eq!(
        call(&gw, &a, "GET", "/v1/sol/watchlist", None).json(),
        json!([])
    );
}

#[test]
fn failed_deliveries_are_retried_then_dead_lettered_and_redirects_not_followed() {
    let dir = tempdir("solwatch-dl");
    localhost_cert(&dir);
    let node = SolNode::start(100, 1000);
    let failing = Receiver::start(&dir, 500);
    let redirecting = Receiver::start(&dir, 302);
    let gw = gateway(&node, &dir, true, "");
    let key = gw.key("business", &["sol_watchlist"]);
    let watched = "Fm5DZAoQ4uF9n6ZJ3t9LQdB8k8j5EqLqV6bTkzWq5Ggf";
    let e500 = create(
        &gw,
        &key,
        json!({"pubkey": watched, "callback_type": "webhook", "callback_url": failing.url()}),
    )
    .json();
    let e302 = create(
        &gw,
        &key,
        json!({"pubkey": watched, "callback_type": "webhook", "callback_url": redirecting.url()}),
    )
    .json();
    wait_until("the node subscription", || {
        served(&node, "accountSubscribe") >= 1
    });
    airdrop(&node, watched, 2_000_000_000);

    for (entry, receiver, why) in [
        (&e500, &failing, "HTTP 500"),
        (&e302, &redirecting, "redirects are not followed"),
    ] {
        let path = format!(
            "/v1/sol/watchlist/{}/dead-letters",
            entry["id"].as_str().unwrap()
        );
        wait_until("a dead letter", || {
            call(&gw, &key, "GET", &path, None).json()["items"]
                .as_array()
                .is_some_and(|i| !i.is_empty())
        });
        let dl = call(&gw, &key, "GET", &path, None).json();
        let item = &dl["items"][0];
        assert_eq!(item["attempts"], 3);
        assert!(item["last_error"].as_str().unwrap().contains(why), "{item}");
        assert_eq!(item["payload"]["pubkey"], watched);
        let attempts: Vec<String> = receiver
            .hits()
            .iter()
            .map(|h| h.header("X-Chainedge-Attempt").unwrap_or("").to_string())
            .collect();
        assert_eq!(attempts, ["1", "2", "3"], "three attempts, then no more");
        let delivery: Vec<&str> = receiver
            .hits()
            .iter()
            .filter_map(|h| h.header("X-Chainedge-Delivery").map(|_| ""))
            .collect();
        assert_eq!(delivery.len(), 3);
    }
    assert_eq!(
        redirecting.hits().len(),
        3,
        "the redirect target was never asked"
    );

    // The delivery log says the same. A dead letter sent again counts its attempt while
    // the endpoint fails (4), and once it answers is delivered under its own delivery
    // id, signed, as attempt 5, and leaves.
    let id = e500["id"].as_str().unwrap();
    let deliveries = format!("/v1/sol/watchlist/{id}/deliveries");
    let log = call(&gw, &key, "GET", &deliveries, None).json();
    assert_eq!(log["items"][0]["delivered"], false, "{log}");
    assert_eq!(log["items"][0]["attempts"], 3, "{log}");
    let letters = format!("/v1/sol/watchlist/{id}/dead-letters");
    let letter = call(&gw, &key, "GET", &letters, None).json()["items"][0].clone();
    let letter_id = letter["id"].as_str().unwrap();
    let retry = format!("{letters}/{letter_id}/retry");
    let again = call(&gw, &key, "POST", &retry, None).json();
    assert_eq!(
        (&again["delivered"], &again["attempts"]),
        (&json!(false), &json!(4)),
        "{again}"
    );
    failing.answer(200);
    let again = call(&gw, &key, "POST", &retry, None).json();
    assert_eq!(again["delivered"], true, "{again}");
    assert_eq!(again["attempts"], 5, "{again}");
    let hit = failing.hits().last().unwrap().clone();
    assert_eq!(hit.header("X-Chainedge-Attempt"), Some("5"));
    assert_eq!(
        hit.header("X-Chainedge-Delivery"),
        letter["payload"]["delivery_id"].as_str()
    );
    verify(e500["signing_secret"].as_str().unwrap(), &hit);
    assert_eq!(
        call(&gw, &key, "GET", &letters, None).json()["items"],
        json!([])
    );
    assert_eq!(
        call(&gw, &key, "POST", &retry, None).status,
        404,
        "a letter is sent once"
    );
    let log = call(&gw, &key, "GET", &deliveries, None).json();
    assert_eq!(log["items"][0]["delivered"], true);
    // A test delivery reaches the endpoint now, signed, marked as a test.
    let test = call(
        &gw,
        &key,
        "POST",
        &format!("/v1/sol/watchlist/{id}/test"),
        None,
    )
    .json();
    assert_eq!(test["delivered"], true, "{test}");
    let hit = failing.hits().last().unwrap().clone();
    let body: serde_json::Value = serde_json::from_str(&hit.body).unwrap();
    assert_eq!(
        (body["type"].as_str(), body["entry_id"].as_str()),
        (Some("test"), Some(id))
    );
    verify(e500["signing_secret"].as_str().unwrap(), &hit);
}

#[test]
fn callbacks_inside_the_network_and_bad_entries_are_refused() {
    let dir = tempdir("solwatch-ssrf");
    let node = SolNode::start(100, 1000);
    let gw = gateway(&node, &dir, false, "    max_entries_per_tenant: 2\n");
    let key = gw.key("business", &["sol_watchlist"]);
    let watched = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    for url in [
        "https://127.0.0.1/hook",
        "https://localhost/hook",
        "https://10.0.0.1/hook",
        "https://192.168.1.20:8443/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "http://example.com/hook",
        "https://user:pw@example.com/hook",
        "not a url",
    ] {
        let r = create(
            &gw,
            &key,
            json!({"pubkey": watched, "callback_type": "webhook", "callback_url": url}),
        );
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("callback_not_allowed")),
            "{url}: {}",
            r.text()
        );
    }
    for body in [
        json!({"pubkey": "0xdeadbeef", "callback_type": "ws", "callback_url": "c"}),
        json!({"pubkey": watched, "commitment": "max", "callback_type": "ws", "callback_url": "c"}),
        json!({"pubkey": watched, "callback_type": "email", "callback_url": "c"}),
        json!({"pubkey": watched, "callback_type": "ws", "callback_url": "has space"}),
        json!({"pubkey": watched, "callback_type": "ws"}),
        json!({"pubkey": watched, "callback_type": "ws", "callback_url": "c", "extra": 1}),
    ] {
        let r = create(&gw, &key, body.clone());
        assert_eq!(r.status, 400, "{body}: {}", r.text());
    }
    assert_eq!(
        call(&gw, &key, "GET", "/v1/sol/watchlist", None).json(),
        json!([]),
        "nothing was stored"
    );
    // The per-tenant bound.
    for i in 0..2 {
        let r = create(
            &gw,
            &key,
            json!({"pubkey": watched, "callback_type": "ws", "callback_url": format!("c{i}")}),
        );
        assert_eq!(r.status, 201);
    }
    let r = create(
        &gw,
        &key,
        json!({"pubkey": watched, "callback_type": "ws", "callback_url": "c3"}),
    );
    assert_eq!((r.status, r.json()["max_entries"].as_i64()), (409, Some(2)));
    // Tier and scope.
    let pro = gw.key("pro", &["sol_watchlist"]);
    assert_eq!(
        call(&gw, &pro, "GET", "/v1/sol/watchlist", None).status,
        403
    );
    let unscoped = gw.key("business", &[]);
    assert_eq!(
        call(&gw, &unscoped, "GET", "/v1/sol/watchlist", None).status,
        403
    );
    let r = call(&gw, &key, "GET", "/v1/sol/watchlist/not-an-id", None);
    assert_eq!(r.status, 404);
}

#[test]
fn push_survives_the_node_dropping_its_pubsub_connection() {
    let dir = tempdir("solwatch-drop");
    let node = SolNode::start(100, 1000);
    let gw = gateway(&node, &dir, false, "");
    let key = gw.key("business", &["sol_watchlist"]);
    let watched = "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy4sBbkXK5Ac";
    let r = create(
        &gw,
        &key,
        json!({"pubkey": watched, "callback_type": "ws", "callback_url": "bot"}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let mut ws = channel(&gw, &key, "bot");
    wait_until("the node subscription", || {
        served(&node, "accountSubscribe") == 1
    });
    airdrop(&node, watched, 1_000_000_000);
    assert_eq!(next_text(&mut ws)["account"]["lamports"], 1_000_000_000u64);

    // The node drops every PubSub connection; a change lands before the edge is back.
    node.call("shim_dropWs", json!([]));
    airdrop(&node, watched, 1_000_000_000);
    assert_eq!(
        next_text(&mut ws)["account"]["lamports"],
        2_000_000_000u64,
        "the gap is filled"
    );
    wait_until("the new node subscription", || {
        served(&node, "accountSubscribe") == 2
    });
    airdrop(&node, watched, 1_000_000_000);
    assert_eq!(next_text(&mut ws)["account"]["lamports"], 3_000_000_000u64);
}
