//! Transactions sent through the edge, followed until they settle, on real nodes
//! (anvil): mined and then final, reverted, replaced by the same sender and nonce,
//! dropped by every node and sent again by the edge; asked for by the tenant whose key
//! sent them (another tenant is told nothing); each change pushed on the tenant's
//! channel (`/ws/txs`) and to its webhooks (a real HTTPS receiver, signatures checked).

use common::*;
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tungstenite::client::IntoClientRequest;
use tungstenite::Message;

/// anvil's first dev account (unlocked, funded).
const DEV: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
const TO: &str = "0x000000000000000000000000000000000000dEaD";

fn gateway(node: &Anvil) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: format!(
            "{UNLIMITED}tx_tracking:\n  follow_interval_ms: 150\n  resend_after_secs: 1\n  max_resends: 2\n"
        ),
        ..Default::default()
    })
}

const HOOK_SECRET: &str = "0123456789abcdef0123456789abcdef0123456789abcdef";

/// A gateway whose hooks may reach the receivers on 127.0.0.1 (trusting their
/// certificate in `dir`).
fn pushing_gateway(node: &Anvil, dir: &Path) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: format!(
            "{UNLIMITED}tx_tracking:\n  follow_interval_ms: 150\n  push_interval_ms: 100\n  signing_secret: env:CHAINEDGE_TX_HOOK_SECRET\n  webhook: {{allow_private: [\"127.0.0.0/8\"], ca_file: \"{}\", backoff_ms: 100, max_attempts: 2, timeout_ms: 2000}}\n",
            dir.join("cert.pem").display()
        ),
        env: vec![("CHAINEDGE_TX_HOOK_SECRET".into(), HOOK_SECRET.into())],
        ..Default::default()
    })
}

/// The tenant's transaction channel, opened with `key` (replaying after `since`).
fn channel(gw: &Gateway, key: &str, since: Option<&str>) -> tungstenite::WebSocket<TcpStream> {
    let stream = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    let query = since.map(|s| format!("?since={s}")).unwrap_or_default();
    let mut req = format!("ws://127.0.0.1:{}/ws/txs{query}", gw.port)
        .into_client_request()
        .unwrap();
    req.headers_mut().insert("x-token", key.parse().unwrap());
    tungstenite::client(req, stream)
        .expect("channel handshake")
        .0
}

fn next_change(ws: &mut tungstenite::WebSocket<TcpStream>) -> Value {
    loop {
        match ws.read().expect("a change") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

fn hooks(gw: &Gateway, key: &str, method: &str, path: &str, body: Option<Value>) -> Resp {
    let text = body.map(|b| b.to_string()).unwrap_or_default();
    let h = [("Content-Type", "application/json"), ("x-token", key)];
    request(gw.port, method, path, &h, text.as_bytes()).unwrap()
}

fn wait_until<F: Fn() -> bool>(what: &str, f: F) {
    let until = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A transaction anvil signs for its dev account (the edge only ever sees the bytes).
fn signed(node: &Anvil, fields: Value) -> String {
    let mut tx = json!({"from": DEV, "to": TO, "value": "0x1", "gas": "0x186a0", "chainId": "0x1"});
    for (k, v) in fields.as_object().unwrap() {
        tx[k] = v.clone();
    }
    let raw = node.call("eth_signTransaction", json!([tx]));
    raw.as_str().expect("anvil signs").to_string()
}

/// `eth_sendRawTransaction` through `/rpc/eth` with `key`: the hash.
fn send(gw: &Gateway, key: &str, raw: &str) -> String {
    let call =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw]});
    let r = rpc(gw.port, "/rpc/eth", Some(key), &call);
    let answer = r.json();
    answer["result"]
        .as_str()
        .unwrap_or_else(|| panic!("not accepted: {answer}"))
        .to_string()
}

/// The same over a WebSocket on `/rpc/eth`.
fn send_over_websocket(gw: &Gateway, key: &str, raw: &str) -> String {
    let mut ws = ws_connect(gw.port, "/rpc/eth", &[("x-token", key)]).expect("upgrade");
    let call =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw]});
    ws.send(Message::text(call.to_string())).unwrap();
    loop {
        if let Message::Text(t) = ws.read().expect("an answer") {
            let answer: Value = serde_json::from_str(&t).unwrap();
            return answer["result"]
                .as_str()
                .unwrap_or_else(|| panic!("not accepted: {answer}"))
                .to_string();
        }
    }
}

/// The same through the REST sender.
fn send_over_rest(gw: &Gateway, key: &str, raw: &str) -> String {
    let body = json!({"raw_tx": raw}).to_string();
    let r = request(
        gw.port,
        "POST",
        "/v1/eth/sender/raw",
        &[("Content-Type", "application/json"), ("x-token", key)],
        body.as_bytes(),
    )
    .expect("an answer");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["tx_hash"].as_str().unwrap().to_string()
}

fn status(gw: &Gateway, key: &str, hash: &str) -> Resp {
    gw.get(&format!("/v1/eth/tx/{hash}"), &[("x-token", key)])
}

/// Ask until the transaction reaches `want` (the follower looks every 150 ms).
fn until_status(gw: &Gateway, key: &str, hash: &str, want: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let r = status(gw, key, hash);
        if r.status == 200 && r.json()["status"] == want {
            return r.json();
        }
        assert!(
            Instant::now() < until,
            "never {want}: {} {}",
            r.status,
            r.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_sent_transaction_is_followed_until_final_for_its_tenant_only() {
    // Finality two blocks behind the head (an epoch of one slot), so it can be reached.
    let node = Anvil::start(1, &["--slots-in-an-epoch", "1"]);
    let gw = gateway(&node);
    let alice = gw.key("basic", &["rpc:read", "rpc:write"]);
    let bob = gw.key("basic", &["rpc:read", "rpc:write"]);
    let hash = send(&gw, &alice, &signed(&node, json!({"nonce": "0x0"})));

    let included = until_status(&gw, &alice, &hash, "included");
    assert_eq!(included["from"], DEV.to_ascii_lowercase());
    assert_eq!(
        (included["nonce"].clone(), included["chain"].clone()),
        (json!(0), json!("eth"))
    );
    let receipt = node.call("eth_getTransactionReceipt", json!([hash]));
    let block = u64::from_str_radix(
        receipt["blockNumber"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    assert_eq!(included["block_number"], block, "{included}");
    assert_eq!(included["block_hash"], receipt["blockHash"], "{included}");
    node.mine(4);
    let last = until_status(&gw, &alice, &hash, "final");
    assert_eq!(last["block_hash"], included["block_hash"]);
    assert_eq!(last["resends"], 0);

    // Every way in is followed: a WebSocket message, the REST sender.
    let over_ws = send_over_websocket(&gw, &alice, &signed(&node, json!({"nonce": "0x1"})));
    let over_rest = send_over_rest(&gw, &alice, &signed(&node, json!({"nonce": "0x2"})));
    for hash in [&over_ws, &over_rest] {
        let t = until_status(&gw, &alice, hash, "included");
        assert_eq!(t["from"], DEV.to_ascii_lowercase());
    }

    // Another tenant, a hash nobody sent, and what is not a hash.
    let r = status(&gw, &bob, &hash);
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (404, json!("tx_not_found"))
    );
    let r = status(&gw, &alice, &format!("0x{}", "ab".repeat(32)));
    assert_eq!(r.status, 404);
    let r = status(&gw, &alice, "0x1234");
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (400, json!("invalid_params"))
    );
    let r = gw.get(&format!("/v1/eth/tx/{hash}"), &[]);
    assert_eq!(r.status, 401);
}

#[test]
fn reverted_replaced_and_lost_transactions() {
    // Blocks only when the test mines them: transactions wait in the node's pool.
    let node = Anvil::start(1, &["--no-mining"]);
    let gw = gateway(&node);
    let key = gw.key("basic", &["rpc:read", "rpc:write"]);

    // A contract whose every call reverts with Error("nope") (runtime: the ABI-encoded
    // error written to memory, then REVERT).
    let runtime = format!(
        "7f08c379a0{z}600052602060045260046024527f6e6f7065{z}60445260646000fd",
        z = "00".repeat(28)
    );
    let init = format!("0x60{:02x}80600b6000396000f3{runtime}", runtime.len() / 2);
    let deploy = signed(
        &node,
        json!({"to": null, "value": "0x0", "nonce": "0x0", "data": init, "gas": "0x30d40"}),
    );
    let deployed = send(&gw, &key, &deploy);
    node.mine(1);
    let contract = node.call("eth_getTransactionReceipt", json!([deployed]))["contractAddress"]
        .as_str()
        .unwrap()
        .to_string();
    let reverts = send(
        &gw,
        &key,
        &signed(
            &node,
            json!({"to": contract, "value": "0x0", "nonce": "0x1"}),
        ),
    );
    node.mine(1);
    let failed = until_status(&gw, &key, &reverts, "failed");
    assert!(failed["block_number"].is_u64(), "{failed}");
    assert_eq!(failed["revert_reason"], "revert: nope", "{failed}");

    // The same nonce again at a higher price: the node keeps the second.
    let low = signed(&node, json!({"nonce": "0x2", "gasPrice": "0x3b9aca00"}));
    let high = signed(&node, json!({"nonce": "0x2", "gasPrice": "0x77359400"}));
    let first = send(&gw, &key, &low);
    let second = send(&gw, &key, &high);
    node.mine(1);
    until_status(&gw, &key, &second, "included");
    let replaced = until_status(&gw, &key, &first, "replaced");
    assert_eq!(replaced["replaced_by"], second);

    // Every node drops it: the edge sends it again, and it is mined.
    let lost = send(&gw, &key, &signed(&node, json!({"nonce": "0x3"})));
    node.call("anvil_dropTransaction", json!([lost]));
    assert!(node
        .call("eth_getTransactionByHash", json!([lost]))
        .is_null());
    let until = Instant::now() + Duration::from_secs(15);
    while node
        .call("eth_getTransactionByHash", json!([lost]))
        .is_null()
    {
        assert!(Instant::now() < until, "never sent again");
        std::thread::sleep(Duration::from_millis(100));
    }
    node.mine(1);
    let back = until_status(&gw, &key, &lost, "included");
    assert_eq!(back["resends"], 1, "{back}");

    // Dropped for good once the re-sends are spent: the node refuses it each time.
    let doomed = send(&gw, &key, &signed(&node, json!({"nonce": "0x4"})));
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        node.call("anvil_dropTransaction", json!([doomed]));
        let r = status(&gw, &key, &doomed).json();
        if r["status"] == "dropped" {
            assert_eq!(r["resends"], 2, "{r}");
            break;
        }
        assert!(Instant::now() < until, "never dropped: {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_reorg_that_removes_its_block_puts_it_back_to_pending_and_it_lands_again() {
    let node = Anvil::start(1, &[]);
    let gw = gateway(&node);
    let key = gw.key("basic", &["rpc:read", "rpc:write"]);
    let mut changes = channel(&gw, &key, None);
    let hash = send(&gw, &key, &signed(&node, json!({"nonce": "0x0"})));
    let before = until_status(&gw, &key, &hash, "included");
    // The block that held it is replaced by an empty one: the node forgets it.
    node.call("anvil_reorg", json!([1, []]));
    assert!(node
        .call("eth_getTransactionReceipt", json!([hash]))
        .is_null());
    let until = Instant::now() + Duration::from_secs(15);
    let after = loop {
        let r = status(&gw, &key, &hash).json();
        if r["status"] == "included" && r["block_hash"] != before["block_hash"] {
            break r;
        }
        assert!(Instant::now() < until, "never included again: {r}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(after["resends"], 1, "{after}");
    // The channel told each step: in a block, out of it (reorged), in another.
    let seen: Vec<Value> = (0..3).map(|_| next_change(&mut changes)).collect();
    let steps: Vec<(Value, Value, Value)> = seen
        .iter()
        .map(|c| {
            (
                c["previous_status"].clone(),
                c["tx"]["status"].clone(),
                c["reorged"].clone(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        vec![
            (json!("pending"), json!("included"), json!(false)),
            (json!("included"), json!("pending"), json!(true)),
            (json!("pending"), json!("included"), json!(false)),
        ],
        "{seen:?}"
    );
    assert_eq!(seen[0]["tx"]["block_hash"], before["block_hash"]);
    assert_eq!(seen[2]["tx"]["block_hash"], after["block_hash"]);
    let metrics = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .unwrap()
        .text();
    assert!(
        metrics.contains("chainedge_tx_status_total{chain=\"eth\",status=\"pending\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("chainedge_tx_resends_total{chain=\"eth\"} 1"));
    assert!(metrics.contains("chainedge_tx_inclusion_seconds_count{chain=\"eth\"} 1"));
}

#[test]
fn a_node_restarted_without_its_txpool_is_sent_the_transaction_again() {
    let node = Anvil::start(1, &["--no-mining"]);
    let port = node.port;
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: format!(
            "health:\n  interval_ms: 200\n  timeout_ms: 1000\n{UNLIMITED}tx_tracking:\n  follow_interval_ms: 150\n  resend_after_secs: 1\n"
        ),
        ..Default::default()
    });
    let key = gw.key("basic", &["rpc:read", "rpc:write"]);
    let hash = send(&gw, &key, &signed(&node, json!({"nonce": "0x0"})));
    until_status(&gw, &key, &hash, "pending");
    // The node goes down and comes back on its port with an empty pool.
    drop(node);
    let node = Anvil::start_on(port, 1, &["--no-mining"]);
    assert!(node
        .call("eth_getTransactionByHash", json!([hash]))
        .is_null());
    wait_until("the edge to send it again", || {
        !node
            .call("eth_getTransactionByHash", json!([hash]))
            .is_null()
    });
    node.mine(1);
    let landed = until_status(&gw, &key, &hash, "included");
    assert!(landed["resends"].as_i64() >= Some(1), "{landed}");
}

#[test]
fn following_resumes_after_the_edge_is_killed_or_stopped() {
    let node = Anvil::start(1, &["--no-mining"]);
    let mut gw = gateway(&node);
    let key = gw.key("basic", &["rpc:read", "rpc:write"]);
    let first = send(&gw, &key, &signed(&node, json!({"nonce": "0x0"})));
    until_status(&gw, &key, &first, "pending");
    // Killed; while it is down the node loses the transaction.
    let mut dead = gw.proc.take().unwrap();
    dead.signal("KILL");
    assert!(dead.exited_within(Duration::from_secs(5)));
    node.call("anvil_dropTransaction", json!([first]));
    gw.proc = Some(gw.spawn(false));
    gw.wait_ready(Duration::from_secs(20));
    // The new process finds it open in the store, held by no node, and sends it again.
    wait_until("the restarted edge to send it again", || {
        !node
            .call("eth_getTransactionByHash", json!([first]))
            .is_null()
    });
    // Accepted just before a graceful stop: stored on the way out, followed after.
    let second = send(&gw, &key, &signed(&node, json!({"nonce": "0x1"})));
    let mut old = gw.proc.take().unwrap();
    old.signal("TERM");
    assert!(old.exited_within(Duration::from_secs(30)));
    gw.proc = Some(gw.spawn(false));
    gw.wait_ready(Duration::from_secs(20));
    node.mine(1);
    for hash in [&first, &second] {
        until_status(&gw, &key, hash, "included");
    }
}

#[test]
fn the_console_lists_a_keys_transactions_to_its_owner_only() {
    let node = Anvil::start(1, &[]);
    let outbox = tempdir("txs-console").join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        console_yaml: format!("  email:\n    outbox: {}\n", outbox.display()),
        extra_yaml: format!("{UNLIMITED}tx_tracking:\n  follow_interval_ms: 150\n"),
        ..Default::default()
    });
    let mut owner = Browser::new(gw.port);
    assert_eq!(
        sign_in(&mut owner, &outbox, "owner@example.com").status,
        200
    );
    let made = owner.send(
        "POST",
        "/v1/keys",
        Some(json!({"name": "sender", "scopes": ["rpc:read", "rpc:write"]})),
        None,
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let (id, raw_key) = (
        made.json()["id"].as_str().unwrap().to_string(),
        made.json()["raw"].as_str().unwrap().to_string(),
    );
    let listed = owner.send("GET", &format!("/v1/keys/{id}/txs"), None, None);
    assert_eq!((listed.status, listed.json()), (200, json!({"txs": []})));

    let hash = send(&gw, &raw_key, &signed(&node, json!({"nonce": "0x0"})));
    until_status(&gw, &raw_key, &hash, "included");
    let listed = owner
        .send("GET", &format!("/v1/keys/{id}/txs"), None, None)
        .json();
    assert_eq!(listed["txs"][0]["hash"], hash, "{listed}");
    assert_eq!(listed["txs"][0]["status"], "included", "{listed}");

    // Another user does not see it, nor learns the key exists.
    let mut other = Browser::new(gw.port);
    assert_eq!(
        sign_in(&mut other, &outbox, "other@example.com").status,
        200
    );
    let r = other.send("GET", &format!("/v1/keys/{id}/txs"), None, None);
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (404, json!("not_found"))
    );
}

#[test]
fn status_changes_are_pushed_to_the_tenants_channel_and_signed_hooks_only() {
    let node = Anvil::start(1, &["--slots-in-an-epoch", "1"]);
    let dir = tempdir("txs-push");
    localhost_cert(&dir);
    let receiver = Receiver::start(&dir, 200);
    let failing = Receiver::start(&dir, 500);
    let gw = pushing_gateway(&node, &dir);
    let alice = gw.key("basic", &["rpc:read", "rpc:write"]);
    let bob = gw.key("basic", &["rpc:read", "rpc:write"]);

    // Hooks are checked whole before anything is stored.
    for (body, code) in [
        (json!({}), "invalid_params"),
        (
            json!({"callback_url": "http://localhost/hook"}),
            "callback_not_allowed",
        ),
        (
            json!({"callback_url": "https://169.254.169.254/latest"}),
            "callback_not_allowed",
        ),
        (
            json!({"callback_url": receiver.url(), "extra": 1}),
            "invalid_params",
        ),
    ] {
        let r = hooks(&gw, &alice, "POST", "/v1/tx/hooks", Some(body.clone()));
        assert_eq!(
            (r.status, r.json()["error"].clone()),
            (400, json!(code)),
            "{body}"
        );
    }
    let made = hooks(
        &gw,
        &alice,
        "POST",
        "/v1/tx/hooks",
        Some(json!({"callback_url": receiver.url()})),
    );
    assert_eq!(made.status, 201, "{}", made.text());
    let (hook, secret) = (
        made.json()["id"].as_str().unwrap().to_string(),
        made.json()["signing_secret"].as_str().unwrap().to_string(),
    );
    assert_eq!(secret.len(), 64);
    let dead = hooks(
        &gw,
        &alice,
        "POST",
        "/v1/tx/hooks",
        Some(json!({"callback_url": failing.url()})),
    );
    let dead = dead.json()["id"].as_str().unwrap().to_string();
    let listed = hooks(&gw, &alice, "GET", "/v1/tx/hooks", None).json();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    assert!(listed[0].get("signing_secret").is_none(), "{listed}");
    // Another tenant sees none of them and cannot touch them.
    assert_eq!(
        hooks(&gw, &bob, "GET", "/v1/tx/hooks", None).json(),
        json!([])
    );
    for (method, path) in [
        ("DELETE", format!("/v1/tx/hooks/{hook}")),
        ("GET", format!("/v1/tx/hooks/{dead}/dead-letters")),
    ] {
        assert_eq!(
            hooks(&gw, &bob, method, &path, None).status,
            404,
            "{method} {path}"
        );
    }

    let mut alices = channel(&gw, &alice, None);
    let mut bobs = channel(&gw, &bob, None);
    let hash = send(&gw, &alice, &signed(&node, json!({"nonce": "0x0"})));
    let included = next_change(&mut alices);
    node.mine(4);
    let last = next_change(&mut alices);
    for (change, previous, now) in [
        (&included, "pending", "included"),
        (&last, "included", "final"),
    ] {
        assert_eq!(change["type"], "tx_status", "{change}");
        assert_eq!(change["tx"]["hash"], hash, "{change}");
        assert_eq!(
            (
                change["previous_status"].as_str(),
                change["tx"]["status"].as_str()
            ),
            (Some(previous), Some(now)),
            "{change}"
        );
        assert!(
            change["key_id"].as_str().is_some_and(|k| !k.is_empty()),
            "{change}"
        );
    }
    assert!(last["event_id"].as_i64() > included["event_id"].as_i64());
    assert_eq!(status(&gw, &alice, &hash).json()["status"], "final");

    // The hook got both, signed with its secret, each with a stable delivery id.
    wait_until("two deliveries", || receiver.hits().len() >= 2);
    let hits = receiver.hits();
    for (hit, change) in hits.iter().zip([&included, &last]) {
        verify(&secret, hit);
        let body: Value = serde_json::from_str(&hit.body).unwrap();
        assert_eq!(body["event_id"], change["event_id"], "{body}");
        assert_eq!(body["tx"], change["tx"], "{body}");
        let id = format!("tx-{}-{hook}", change["event_id"]);
        assert_eq!(body["delivery_id"], id.as_str());
        assert_eq!(hit.header("X-Chainedge-Delivery"), Some(id.as_str()));
    }
    // The failing one kept each change as a dead letter after its attempts.
    let letters = format!("/v1/tx/hooks/{dead}/dead-letters");
    wait_until("two dead letters", || {
        hooks(&gw, &alice, "GET", &letters, None).json()["items"]
            .as_array()
            .is_some_and(|i| i.len() == 2)
    });
    let kept = hooks(&gw, &alice, "GET", &letters, None).json();
    assert_eq!(kept["items"][0]["attempts"], 2, "{kept}");
    assert!(
        kept["items"][0]["last_error"]
            .as_str()
            .unwrap()
            .contains("500"),
        "{kept}"
    );
    assert_eq!(failing.hits().len(), 4);

    // Bob's channel heard nothing of Alice's transaction.
    bobs.get_ref()
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();
    match bobs.read() {
        Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {}
        other => panic!("bob heard: {other:?}"),
    }
    // A client back after a disconnect replays what it missed, in order.
    let mut again = channel(&gw, &alice, Some("0"));
    let replayed: Vec<Value> = (0..2)
        .map(|_| next_change(&mut again)["event_id"].clone())
        .collect();
    assert_eq!(
        replayed,
        vec![included["event_id"].clone(), last["event_id"].clone()]
    );
    let after_first = included["event_id"].to_string();
    let mut later = channel(&gw, &alice, Some(&after_first));
    assert_eq!(next_change(&mut later)["event_id"], last["event_id"]);
    let bad = format!("ws://127.0.0.1:{}/ws/txs?since=yesterday", gw.port);
    let mut req = bad.into_client_request().unwrap();
    req.headers_mut().insert("x-token", alice.parse().unwrap());
    let stream = TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    match tungstenite::client(req, stream) {
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
            assert_eq!(r.status(), 400)
        }
        other => panic!("since=yesterday opened: {:?}", other.map(|_| ())),
    }

    assert_eq!(
        hooks(&gw, &alice, "DELETE", &format!("/v1/tx/hooks/{dead}"), None).status,
        204
    );
    assert_eq!(hooks(&gw, &alice, "GET", &letters, None).status, 404);
    assert_eq!(
        hooks(&gw, &alice, "GET", "/v1/tx/hooks", None)
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// A relay in front of `node` (a private RPC, a builder): every body goes on to the node,
/// except `eth_sendBundle`, which it takes and never lands. Counts the sends it gets.
fn relay(node: &Anvil, sends: Arc<AtomicUsize>) -> Fixture {
    let port = node.port;
    Fixture::start(move |req| {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        match body["method"].as_str() {
            Some("eth_sendBundle") => {
                sends.fetch_add(1, Ordering::SeqCst);
                let hash = format!("0x{}", "bb".repeat(32));
                let answer = json!({"bundleHash": hash});
                return FixtureResponse::json(
                    json!({"jsonrpc": "2.0", "id": body["id"], "result": answer}),
                );
            }
            Some("eth_sendRawTransaction") => {
                sends.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
        let h = [("Content-Type", "application/json")];
        let r = request(port, "POST", "/", &h, &req.body).unwrap();
        FixtureResponse::json(serde_json::from_slice(&r.body).unwrap())
    })
}

#[test]
fn private_transactions_are_sent_again_privately_and_bundled_ones_never_alone() {
    let node = Anvil::start(1, &["--no-mining"]);
    // The public pool's node sits behind a counting relay too: the edge's public sends
    // are counted there.
    let (public_sends, private_sends) = (Arc::default(), Arc::default());
    let public = relay(&node, Arc::clone(&public_sends));
    let private = relay(&node, Arc::clone(&private_sends));
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n\
             \x20 eth_private_rpc:\n    hosts:\n      - {{id: private-1, url: \"{}\", family: el-anvil}}\n\
             \x20 eth_mev_builder:\n    hosts:\n      - {{id: builder-1, url: \"{}\", family: builder}}\n",
            public.url(),
            private.url(),
            private.url()
        ),
        extra_yaml: format!(
            "{UNLIMITED}tx_tracking:\n  follow_interval_ms: 150\n  resend_after_secs: 1\n  max_resends: 2\n"
        ),
        ..Default::default()
    });
    let key = gw.key("pro", &["rpc:read", "rpc:write"]);
    let post = |path: &str, body: Value| {
        let h = [
            ("Content-Type", "application/json"),
            ("x-token", key.as_str()),
        ];
        request(gw.port, "POST", path, &h, body.to_string().as_bytes()).unwrap()
    };

    // Private: the relay hands it to a builder (here the node); the node loses it; the
    // edge sends it again to the relay, never to a public node.
    let raw = signed(&node, json!({"nonce": "0x0"}));
    let r = post(
        "/v1/eth/sender/raw",
        json!({"raw_tx": raw, "preferred_path": "private"}),
    );
    assert_eq!(
        (r.status, r.json()["path_used"].clone()),
        (200, json!("private")),
        "{}",
        r.text()
    );
    let hash = r.json()["tx_hash"].as_str().unwrap().to_string();
    until_status(&gw, &key, &hash, "pending");
    node.call("anvil_dropTransaction", json!([hash]));
    wait_until("a private resend", || {
        private_sends.load(Ordering::SeqCst) >= 2
    });
    // The relay counts a send when it arrives and hands it to the node after: mine once
    // the node holds it again (under load the block came first and missed it).
    wait_until("the resend in the node's pool", || {
        !node
            .call("eth_getTransactionByHash", json!([hash]))
            .is_null()
    });
    node.mine(1);
    let landed = until_status(&gw, &key, &hash, "included");
    assert_eq!(landed["route"], "private", "{landed}");
    assert!(landed["resends"].as_i64() >= Some(1), "{landed}");
    assert_eq!(
        public_sends.load(Ordering::SeqCst),
        0,
        "a private transaction went public"
    );

    // A bundle the builder never lands: followed, given up, never sent alone.
    let bundled = signed(&node, json!({"nonce": "0x1"}));
    let r = post(
        "/v1/eth/sender/bundle",
        json!({"txs": [bundled], "block_number": 100}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let bytes = hex::decode(bundled.trim_start_matches("0x")).unwrap();
    let hash = format!("0x{}", hex::encode(alloy_primitives::keccak256(bytes)));
    let sends = private_sends.load(Ordering::SeqCst);
    let pending = until_status(&gw, &key, &hash, "pending");
    assert_eq!(pending["route"], "bundle", "{pending}");
    // Given up after as long as a public one is sent again: 1 s × (2 + 1).
    let dropped = until_status(&gw, &key, &hash, "dropped");
    assert_eq!(dropped["resends"], 0, "{dropped}");
    assert_eq!(
        private_sends.load(Ordering::SeqCst),
        sends,
        "a bundled transaction was sent alone"
    );
    assert_eq!(public_sends.load(Ordering::SeqCst), 0);
    assert!(node
        .call("eth_getTransactionByHash", json!([hash]))
        .is_null());
}
