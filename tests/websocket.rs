//! WebSocket JSON-RPC at the edge (issue 17): the same calls get the same answers over
//! HTTP and over WebSocket, what HTTP refuses is refused over WebSocket before any node,
//! every call counts against the rate limit, and the session's bounds hold.

use common::*;
use serde_json::{json, Value};
use std::net::TcpStream;
use std::time::Duration;
use tungstenite::client::IntoClientRequest;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

/// A WebSocket client on `/rpc/eth` with `key`; the HTTP error when the upgrade is refused.
fn connect(port: u16, key: &str) -> Result<Ws, (u16, String)> {
    ws_connect(port, "/rpc/eth", &[("x-token", key)])
}

/// Send one message, read the next text answer (skipping pings).
fn ask(ws: &mut Ws, body: &str) -> Value {
    ws.send(Message::text(body)).unwrap();
    next_json(ws)
}

fn next_json(ws: &mut Ws) -> Value {
    loop {
        match ws.read().expect("an answer") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Binary(b) => return serde_json::from_slice(&b).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

fn post(gw: &Gateway, key: &str, body: &str) -> Resp {
    request(
        gw.port,
        "POST",
        "/rpc/eth",
        &[("Content-Type", "application/json"), ("x-token", key)],
        body.as_bytes(),
    )
    .unwrap()
}

/// What a JSON-RPC client can tell from an answer: the answer itself, less the request
/// id the HTTP path adds to an error's `data` (a WebSocket message has none of its own).
/// Over HTTP a refusal also keeps its status; the body is the same JSON-RPC answer.
fn outcome_http(r: &Resp) -> Value {
    without_request_id(r.json())
}

fn outcome_ws(v: &Value) -> Value {
    without_request_id(v.clone())
}

fn without_request_id(mut v: Value) -> Value {
    let answers = match &mut v {
        Value::Array(items) => items.iter_mut().collect::<Vec<_>>(),
        one => vec![one],
    };
    for a in answers {
        if let Some(data) = a.pointer_mut("/error/data").and_then(Value::as_object_mut) {
            data.remove("request_id");
        }
    }
    v
}

const TARGET: &str = "0x00000000000000000000000000000000000000aa";

fn anvil_gateway(node: &Anvil, extra_yaml: &str) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [ws, debug, trace]}}\n",
            node.url()
        ),
        extra_yaml: extra_yaml.to_string(),
        ..Default::default()
    })
}

#[test]
fn same_calls_same_answers_over_http_and_websocket() {
    let node = Anvil::start(1, &[]);
    let gw = anvil_gateway(&node, UNLIMITED);
    let free = gw.key("free", &[]);
    let pro = gw.key("pro", &[]);
    let call = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let oversized: Vec<Value> = (0..101)
        .map(|i| call(i, "eth_chainId", json!([])))
        .collect();
    let head_before = node.block_number();
    let cases: Vec<(&str, &str, String)> = vec![
        (
            "plain read",
            "free",
            call(1, "eth_chainId", json!([])).to_string(),
        ),
        (
            "batch",
            "free",
            json!([
                call(1, "eth_chainId", json!([])),
                call(2, "eth_getBalance", json!([TARGET, "0x0"]))
            ])
            .to_string(),
        ),
        (
            "node admin method",
            "free",
            call(3, "anvil_setBalance", json!([TARGET, "0xde0b6b3a7640000"])).to_string(),
        ),
        ("mining", "free", call(4, "evm_mine", json!([])).to_string()),
        (
            "admin namespace",
            "free",
            call(5, "admin_nodeInfo", json!([])).to_string(),
        ),
        (
            "debug on free",
            "free",
            call(6, "debug_traceBlockByNumber", json!(["0x0", {}])).to_string(),
        ),
        (
            "debug on pro",
            "pro",
            call(7, "debug_traceBlockByNumber", json!(["0x0", {}])).to_string(),
        ),
        ("batch over the cap", "free", json!(oversized).to_string()),
        ("not JSON", "free", "{\"jsonrpc\": ".to_string()),
    ];
    let mut sockets = [
        ("free", connect(gw.port, &free).unwrap()),
        ("pro", connect(gw.port, &pro).unwrap()),
    ];
    for (name, plan, body) in &cases {
        let key = if *plan == "free" { &free } else { &pro };
        let http = outcome_http(&post(&gw, key, body));
        let ws = sockets.iter_mut().find(|(p, _)| p == plan).unwrap();
        let answer = ask(&mut ws.1, body);
        let ws = outcome_ws(&answer);
        assert!(
            http == ws,
            "{name}: over HTTP {http:.300}, over WS {ws:.300}"
        );
        eprintln!("{name}: {http}");
    }
    // The refusals are JSON-RPC errors a client understands.
    let (_, ws) = &mut sockets[0];
    let e = ask(ws, &cases[2].2);
    assert_eq!(e["id"], 3);
    assert_eq!(e["error"]["code"], -32601, "{e}");
    let e = ask(ws, &cases[5].2);
    assert_eq!(e["error"]["data"]["required_tier"], "pro", "{e}");
    let e = ask(ws, &cases[7].2);
    assert_eq!(e["id"], Value::Null, "one answer for the batch as a whole");
    assert_eq!(e["error"]["code"], -32600);
    assert_eq!(e["error"]["data"]["max_batch"], 100, "{e}");
    let e = ask(ws, &cases[8].2);
    assert_eq!(e["error"]["code"], -32700, "{e}");
    // Nothing refused reached the node.
    assert_eq!(node.block_number(), head_before, "evm_mine must not run");
    assert_eq!(
        node.call("eth_getBalance", json!([TARGET, "latest"])),
        json!("0x0"),
        "anvil_setBalance must not run"
    );
}

#[test]
fn every_call_counts_against_the_rate_limit() {
    let node = Fixture::json_rpc();
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [ws]}}\n",
            node.url()
        ),
        // The cache off: the node's hits count what the limiter let through.
        extra_yaml: "health:\n  interval_ms: 600000\nrpc:\n  cache: {enabled: false}\nlimits:\n  default: {anonymous: 2, free: 5, basic: 5, pro: 5, business: 5, enterprise: 5, scale: 5}\n".into(),
        ..Default::default()
    });
    let chain_id =
        json!({"jsonrpc": "2.0", "id": 9, "method": "eth_chainId", "params": []}).to_string();
    let oversized = json!((0..101)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "eth_chainId"}))
        .collect::<Vec<_>>())
    .to_string();

    // Over WebSocket: the upgrade counts once, then each call; the burst is 2 x 5.
    let key = gw.key("free", &[]);
    let mut ws = connect(gw.port, &key).unwrap();
    // A batch that can never be served is refused without spending the budget.
    for _ in 0..5 {
        let e = ask(&mut ws, &oversized);
        assert_eq!(e["error"]["data"]["error"], "invalid_params", "{e}");
    }
    let hits = node.hits();
    let mut answered = 0;
    let mut refused = Vec::new();
    for _ in 0..14 {
        let v = ask(&mut ws, &chain_id);
        if v.get("result").is_some() {
            answered += 1;
        } else {
            refused.push(v);
        }
    }
    assert_eq!(answered, 9, "burst 10, one spent on the upgrade");
    assert_eq!(node.hits() - hits, 9, "refused calls never reach the node");
    let e = &refused[0];
    assert_eq!(e["id"], 9);
    assert_eq!(e["error"]["code"], -32005, "{e}");
    let data = &e["error"]["data"];
    assert_eq!(data["error"], "rate_limited");
    assert_eq!(data["current_tier"], "free");
    assert_eq!(data["category"], "eth_rpc");
    assert_eq!(data["limit_rps"], 5.0);
    assert!(data["retry_after_sec"].as_u64().is_some(), "{data}");

    // Over HTTP the same: the oversized batch is a permanent 400 and costs nothing.
    let key = gw.key("free", &[]);
    for _ in 0..5 {
        let r = post(&gw, &key, &oversized);
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(r.json()["error"]["data"]["max_batch"], 100);
        assert!(r.header("Retry-After").is_none());
    }
    let admitted = (0..12)
        .filter(|_| post(&gw, &key, &chain_id).status == 200)
        .count();
    // The burst of 10 (the 400s cost nothing); on a busy machine the twelve calls may
    // straddle a second, which the sliding window credits with one more.
    assert!((10..=11).contains(&admitted), "{admitted} admitted");
}

#[test]
fn session_bounds() {
    let node = Anvil::start(1, &[]);
    let gw = anvil_gateway(
        &node,
        &format!(
            "{UNLIMITED}rpc:\n  max_body_bytes: 4096\nstreams:\n  websocket:\n    max_connections_per_key: {{default: 2}}\n    max_subscriptions_per_connection: 2\n    max_subscriptions_per_key: {{default: 3}}\n"
        ),
    );
    let key = gw.key("free", &[]);

    // Connections per key: the third is refused, a freed place is taken again.
    let mut a = connect(gw.port, &key).unwrap();
    let b = connect(gw.port, &key).unwrap();
    let r = request(
        gw.port,
        "GET",
        "/rpc/eth",
        &[
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
            ("x-token", &key),
        ],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 429, "{}", r.text());
    let data = &r.json()["error"]["data"];
    assert_eq!(data["error"], "stream_cap_exceeded");
    assert_eq!(data["max_connections"], 2);
    drop(b);
    let mut c = None;
    for _ in 0..50 {
        if let Ok(ws) = connect(gw.port, &key) {
            c = Some(ws);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut c = c.expect("a closed connection frees its place");

    // Subscriptions per connection.
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]})
        .to_string();
    for _ in 0..2 {
        let v = ask(&mut a, &sub);
        assert!(v["result"].is_string(), "{v}");
    }
    let v = ask(&mut a, &sub);
    assert_eq!(
        v["error"]["data"]["error"], "subscription_cap_exceeded",
        "{v}"
    );
    // A subscription kind the product does not offer.
    let v = ask(
        &mut a,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "eth_subscribe", "params": ["syncing"]})
            .to_string(),
    );
    assert_eq!(v["error"]["data"]["error"], "invalid_params", "{v}");
    // Heads arrive on the subscriptions.
    node.mine(1);
    let note = next_json(&mut a);
    assert_eq!(note["method"], "eth_subscription", "{note}");

    // Subscriptions per key, across its connections: a holds 2, c may take the third.
    let v = ask(&mut c, &sub);
    let third = v["result"]
        .as_str()
        .expect("the key's third subscription")
        .to_string();
    let v = ask(&mut c, &sub);
    assert_eq!(
        v["error"]["data"]["error"], "subscription_cap_exceeded",
        "{v}"
    );
    assert_eq!(v["error"]["data"]["max_subscriptions_per_key"], 3, "{v}");
    // Unsubscribing gives the place back.
    let unsub = |id: &str| {
        json!({"jsonrpc": "2.0", "id": 4, "method": "eth_unsubscribe", "params": [id]}).to_string()
    };
    assert_eq!(ask(&mut c, &unsub(&third))["result"], true);
    let v = ask(&mut c, &sub);
    assert!(v["result"].is_string(), "{v}");

    // A message over rpc.max_body_bytes closes the connection with 1009.
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_chainId\",\"params\":[\"{}\"]}}",
        "x".repeat(8192)
    );
    c.send(Message::text(big)).unwrap();
    let code = loop {
        match c.read() {
            Ok(Message::Close(Some(f))) => break f.code,
            Ok(_) => continue,
            Err(e) => panic!("expected a close frame, got {e}"),
        }
    };
    assert_eq!(code, CloseCode::Size);
}

#[test]
fn a_slow_consumer_is_closed_not_buffered() {
    let node = Anvil::start(1, &[]);
    let gw = anvil_gateway(
        &node,
        &format!("{UNLIMITED}streams:\n  websocket:\n    send_queue: 4\n"),
    );
    let key = gw.key("free", &[]);
    let mut ws = connect(gw.port, &key).unwrap();
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]});
    assert!(ask(&mut ws, &sub.to_string())["result"].is_string());
    // 3,000 heads while the client reads nothing: far more than the socket buffers and
    // the send queue hold.
    node.call("anvil_mine", json!(["0xbb8"]));
    std::thread::sleep(Duration::from_secs(3));
    let rss_mid = rss_kib(gw.proc.as_ref().unwrap().pid());
    let mut heads = 0;
    let end = loop {
        match ws.read() {
            Ok(Message::Text(_)) => heads += 1,
            Ok(Message::Close(f)) => break f.map(|f| f.code),
            Ok(_) => {}
            Err(_) => break None,
        }
    };
    assert!(
        heads < 3000,
        "the session was cut short, not buffered ({heads} heads)"
    );
    if let Some(code) = end {
        assert_eq!(code, CloseCode::Policy);
    }
    eprintln!(
        "slow consumer: {heads} heads delivered, then closed ({end:?}); gateway RSS {rss_mid} KiB"
    );
    assert!(rss_mid < 200 * 1024, "RSS {rss_mid} KiB");
}

/// A TCP relay in front of a node that counts the connections made through it (the
/// node side of "how many upstream subscriptions").
struct CountingProxy {
    port: u16,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn counting_proxy(target: u16) -> CountingProxy {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let Ok(node) = TcpStream::connect(("127.0.0.1", target)) else {
                continue;
            };
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), node.try_clone().unwrap()),
                (node, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                    let _ = from.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
    CountingProxy { port, accepted }
}

#[test]
fn two_hundred_clients_share_one_node_subscription_across_a_node_failure() {
    use std::sync::atomic::Ordering;
    let mut nodes = [Some(Anvil::start(1, &[])), Some(Anvil::start(1, &[]))];
    let proxies = [
        counting_proxy(nodes[0].as_ref().unwrap().port),
        counting_proxy(nodes[1].as_ref().unwrap().port),
    ];
    let hosts: String = (0..2)
        .map(|i| {
            format!(
                "      - {{id: el-{i}, url: \"{}\", ws_url: \"ws://127.0.0.1:{}\", family: el-anvil, capabilities: [ws]}}\n",
                nodes[i].as_ref().unwrap().url(),
                proxies[i].port
            )
        })
        .collect();
    let gw = Gateway::start(GatewayOpts {
        pools: format!("  eth_el:\n    hosts:\n{hosts}"),
        extra_yaml: format!(
            "{UNLIMITED}health:\n  interval_ms: 500\nstreams:\n  websocket:\n    max_connections_per_key: {{default: 1000}}\n    max_subscriptions_per_key: {{default: 1000}}\n"
        ),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let clients = 200;
    let heads_wanted = 6;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let key = key.clone();
            let port = gw.port;
            let ready = ready_tx.clone();
            std::thread::spawn(move || {
                let mut ws = connect(port, &key).unwrap();
                let sub = ask(
                    &mut ws,
                    &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}).to_string(),
                );
                let id = sub["result"].as_str().expect("subscribed").to_string();
                ready.send(()).unwrap();
                let mut seen = Vec::new();
                while seen.len() < heads_wanted {
                    let note = next_json(&mut ws);
                    assert_eq!(note["params"]["subscription"], id.as_str(), "the edge's id, stable");
                    let n = note["params"]["result"]["number"].as_str().unwrap();
                    seen.push(u64::from_str_radix(&n[2..], 16).unwrap());
                }
                seen
            })
        })
        .collect();
    for _ in 0..clients {
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every client subscribed");
    }
    let links = |p: &CountingProxy| p.accepted.load(Ordering::SeqCst);
    assert_eq!(
        links(&proxies[0]) + links(&proxies[1]),
        1,
        "200 clients, one node subscription"
    );
    let holder = if links(&proxies[0]) == 1 { 0 } else { 1 };
    let other = 1 - holder;
    let start = nodes[other].as_ref().unwrap().block_number();
    // Three heads, on both nodes (they stay level, so health keeps both).
    for _ in 0..3 {
        for n in nodes.iter().flatten() {
            n.mine(1);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // Two heads only the other node has (the holder falls behind), then the holder dies
    // and one more head comes: heads 4 and 5 reach clients only by the gap fill.
    for _ in 0..2 {
        nodes[other].as_ref().unwrap().mine(1);
    }
    nodes[holder] = None;
    std::thread::sleep(Duration::from_millis(300));
    nodes[other].as_ref().unwrap().mine(1);
    let expected: Vec<u64> = (start + 1..=start + 6).collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), expected, "every head once, in order");
    }
    assert_eq!(
        links(&proxies[other]),
        1,
        "one resubscription for all clients"
    );
    let metrics = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .unwrap()
        .text();
    assert!(
        metrics.contains("chainedge_resubscriptions_total{kind=\"newHeads\",pool=\"eth_el\",reason=\"failure\"} 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("subscri"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn websocket_over_tls_meets_the_same_policy() {
    let node = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [ws]}}\n",
            node.url()
        ),
        extra_yaml: UNLIMITED.to_string(),
        tls: true,
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let port = gw.tls_port.unwrap();
    let mut connector =
        openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls()).unwrap();
    connector.set_verify(openssl::ssl::SslVerifyMode::NONE);
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let tls = connector.build().connect("localhost", tcp).unwrap();
    let mut req = format!("wss://localhost:{port}/rpc/eth")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert("x-token", key.parse().unwrap());
    let (mut ws, _) = tungstenite::client(req, tls).expect("wss handshake");
    let ask = |ws: &mut WebSocket<_>, body: Value| -> Value {
        ws.send(Message::text(body.to_string())).unwrap();
        loop {
            if let Message::Text(t) = ws.read().unwrap() {
                return serde_json::from_str(&t).unwrap();
            }
        }
    };
    let v = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}),
    );
    assert_eq!(v["result"], "0x1", "{v}");
    let v = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "anvil_setBalance", "params": [TARGET, "0x1"]}),
    );
    assert_eq!(v["error"]["data"]["error"], "method_unknown", "{v}");
    let v = ask(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 3, "method": "eth_subscribe", "params": ["newHeads"]}),
    );
    let sub = v["result"].as_str().expect("subscribed").to_string();
    node.mine(1);
    let note = loop {
        if let Message::Text(t) = ws.read().unwrap() {
            break serde_json::from_str::<Value>(&t).unwrap();
        }
    };
    assert_eq!(note["params"]["subscription"], sub.as_str());
    assert_eq!(
        node.call("eth_getBalance", json!([TARGET, "latest"])),
        json!("0x0")
    );
}

#[test]
fn logs_subscriptions_with_the_same_filter_share_one_node_subscription() {
    let node = Anvil::start(1, &[]);
    let proxy = counting_proxy(node.port);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", ws_url: \"ws://127.0.0.1:{}\", family: el-anvil, capabilities: [ws]}}\n",
            node.url(),
            proxy.port
        ),
        extra_yaml: UNLIMITED.to_string(),
        ..Default::default()
    });
    // A contract whose every call emits one LOG0 (runtime 0x6000 6000 a0 00).
    let from = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    let deploy = node.call(
        "eth_sendTransaction",
        json!([{"from": from, "data": "0x6560006000a0006000526006601af3"}]),
    );
    // Mined at once (automine), though the receipt may show a moment later.
    let contract = (0..100)
        .find_map(|_| {
            let receipt = node.call("eth_getTransactionReceipt", json!([deploy]));
            let address = receipt["contractAddress"].as_str().map(str::to_string);
            if address.is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            address
        })
        .expect("the contract was deployed");

    let key = gw.key("free", &[]);
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["logs", {"address": contract}]}).to_string();
    let mut a = connect(gw.port, &key).unwrap();
    let mut b = connect(gw.port, &key).unwrap();
    let ida = ask(&mut a, &sub)["result"].as_str().unwrap().to_string();
    let idb = ask(&mut b, &sub)["result"].as_str().unwrap().to_string();
    assert_ne!(ida, idb, "each client its own id");
    assert_eq!(proxy.accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    for _ in 0..3 {
        node.call(
            "eth_sendTransaction",
            json!([{"from": from, "to": contract}]),
        );
    }
    // The node's own account of the logs (anvil may put two of the calls in one block).
    let id_of = |log: &Value| {
        (
            log["blockHash"].as_str().unwrap().to_string(),
            log["logIndex"].as_str().unwrap().to_string(),
        )
    };
    let logs_on_chain = || -> Vec<_> {
        node.call(
            "eth_getLogs",
            json!([{"address": contract, "fromBlock": "0x0", "toBlock": "latest"}]),
        )
        .as_array()
        .unwrap()
        .iter()
        .map(id_of)
        .collect()
    };
    // Mined at once, though the logs may show a moment later.
    let mut on_chain = logs_on_chain();
    for _ in 0..100 {
        if on_chain.len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        on_chain = logs_on_chain();
    }
    assert_eq!(on_chain.len(), 3, "{on_chain:?}");
    for (name, ws, id) in [("a", &mut a, &ida), ("b", &mut b, &idb)] {
        let mut got = Vec::new();
        for _ in 0..3 {
            let note = next_json(ws);
            assert_eq!(note["params"]["subscription"], id.as_str());
            let log = &note["params"]["result"];
            assert_eq!(
                log["address"].as_str().unwrap().to_lowercase(),
                contract.to_lowercase()
            );
            assert_eq!(log["removed"], false);
            got.push(id_of(log));
        }
        assert_eq!(got, on_chain, "{name}: every log once, in chain order");
    }
}

#[test]
fn a_slow_call_does_not_hold_back_the_next_one() {
    // A node that takes 1.5 s over eth_getBalance and answers the rest at once.
    let node = Fixture::start(|req| {
        let v: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let one = |call: &Value| {
            let result = match call["method"].as_str() {
                Some("eth_getBalance") => {
                    std::thread::sleep(Duration::from_millis(1500));
                    json!("0x64")
                }
                Some("eth_chainId") => json!("0x1"),
                Some("eth_blockNumber") => json!("0x10"),
                Some("eth_syncing") => json!(false),
                _ => Value::Null,
            };
            json!({"jsonrpc": "2.0", "id": call["id"], "result": result})
        };
        FixtureResponse::json(match &v {
            Value::Array(calls) => calls.iter().map(one).collect(),
            call => one(call),
        })
    });
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: slow, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        extra_yaml: UNLIMITED.to_string(),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let mut ws = connect(gw.port, &key).expect("upgrade");
    let started = std::time::Instant::now();
    ws.send(Message::text(
        r#"{"jsonrpc":"2.0","id":"slow","method":"eth_getBalance","params":["0x0000000000000000000000000000000000000001","latest"]}"#,
    ))
    .unwrap();
    ws.send(Message::text(
        r#"{"jsonrpc":"2.0","id":"fast","method":"eth_chainId","params":[]}"#,
    ))
    .unwrap();
    let first = next_json(&mut ws);
    let first_at = started.elapsed();
    let second = next_json(&mut ws);
    assert_eq!(
        (first["id"].as_str(), first["result"].as_str()),
        (Some("fast"), Some("0x1")),
        "the fast call waited for the slow one: {first} then {second}"
    );
    assert!(first_at < Duration::from_millis(1000), "{first_at:?}");
    assert_eq!(
        (second["id"].as_str(), second["result"].as_str()),
        (Some("slow"), Some("0x64"))
    );
}

/// `logs` across a node failure where the two nodes are on different branches: the logs
/// the dead node delivered from blocks the other does not have come again with
/// `removed: true` (newest first), then the other node's logs from that height, then its
/// new ones; each once, with no client action.
#[test]
fn logs_are_withdrawn_and_refilled_when_the_next_node_is_on_another_branch() {
    use std::sync::atomic::Ordering;
    let mut nodes = [Some(Anvil::start(1, &[])), Some(Anvil::start(1, &[]))];
    let proxies = [
        counting_proxy(nodes[0].as_ref().unwrap().port),
        counting_proxy(nodes[1].as_ref().unwrap().port),
    ];
    let hosts: String = (0..2)
        .map(|i| {
            format!(
                "      - {{id: el-{i}, url: \"{}\", ws_url: \"ws://127.0.0.1:{}\", family: el-anvil, capabilities: [ws]}}\n",
                nodes[i].as_ref().unwrap().url(),
                proxies[i].port
            )
        })
        .collect();
    let gw = Gateway::start(GatewayOpts {
        pools: format!("  eth_el:\n    hosts:\n{hosts}"),
        extra_yaml: format!("{UNLIMITED}health:\n  interval_ms: 500\n"),
        ..Default::default()
    });
    // The same emitter (every call logs once) at the same address on both nodes.
    let from = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    let deployed: Vec<String> = nodes
        .iter()
        .flatten()
        .map(|n| {
            let tx = n.call(
                "eth_sendTransaction",
                json!([{"from": from, "data": "0x6560006000a0006000526006601af3"}]),
            );
            (0..100)
                .find_map(|_| {
                    let r = n.call("eth_getTransactionReceipt", json!([tx]));
                    let a = r["contractAddress"].as_str().map(str::to_string);
                    if a.is_none() {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    a
                })
                .unwrap()
        })
        .collect();
    assert_eq!(deployed[0], deployed[1]);
    let contract = deployed[0].clone();
    let key = gw.key("free", &[]);
    let mut ws = connect(gw.port, &key).unwrap();
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["logs", {"address": contract}]});
    let id = ask(&mut ws, &sub.to_string())["result"]
        .as_str()
        .unwrap()
        .to_string();
    let links = |i: usize| proxies[i].accepted.load(Ordering::SeqCst);
    let holder = if links(0) == 1 { 0 } else { 1 };
    let other = 1 - holder;
    let emit = |n: &Anvil| {
        n.call(
            "eth_sendTransaction",
            json!([{"from": from, "to": contract}]),
        );
    };
    let next_log = |ws: &mut Ws| {
        let note = next_json(ws);
        assert_eq!(note["params"]["subscription"], id.as_str());
        let log = note["params"]["result"].clone();
        (
            log["blockHash"].as_str().unwrap().to_string(),
            log["removed"].as_bool().unwrap(),
        )
    };
    // Two logs on the holder's branch (blocks n and n + 1 there).
    emit(nodes[holder].as_ref().unwrap());
    emit(nodes[holder].as_ref().unwrap());
    let first = next_log(&mut ws);
    let second = next_log(&mut ws);
    assert!(!first.1 && !second.1);
    // The other node's branch: block n holds a plain transfer, block n + 1 one log.
    let other_node = nodes[other].as_ref().unwrap();
    other_node.call(
        "eth_sendTransaction",
        json!([{"from": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "to": from, "value": "0x1"}]),
    );
    let log_tx = other_node.call(
        "eth_sendTransaction",
        json!([{"from": from, "to": contract}]),
    );
    let theirs = (0..100)
        .find_map(|_| {
            let r = other_node.call("eth_getTransactionReceipt", json!([log_tx]));
            let h = r["blockHash"].as_str().map(str::to_string);
            if h.is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            h
        })
        .unwrap();
    assert_ne!(theirs, second.0, "two branches");
    nodes[holder] = None;
    assert_eq!(
        next_log(&mut ws),
        (second.0.clone(), true),
        "newest withdrawn first"
    );
    assert_eq!(next_log(&mut ws), (first.0.clone(), true));
    assert_eq!(
        next_log(&mut ws),
        (theirs, false),
        "the new branch's log, by the gap fill"
    );
    emit(nodes[other].as_ref().unwrap());
    let live = next_log(&mut ws);
    assert!(!live.1);
    assert_ne!(live.0, second.0);
    assert_eq!(links(other), 1, "one resubscription");
}

/// At a graceful upgrade (new process with `-u`, SIGQUIT to the old one, as systemd's
/// reload does) every open session is closed with 1001 "going away", subscribed or not,
/// and the client's reconnect lands on the new process.
#[test]
fn a_graceful_upgrade_closes_sessions_with_going_away() {
    let node = Anvil::start(1, &[]);
    let mut gw = anvil_gateway(&node, UNLIMITED);
    let key = gw.key("free", &[]);
    let mut idle = connect(gw.port, &key).unwrap();
    let v = ask(
        &mut idle,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).to_string(),
    );
    assert!(v["result"].is_string(), "{v}");
    let mut subscribed = connect(gw.port, &key).unwrap();
    let v = ask(
        &mut subscribed,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]})
            .to_string(),
    );
    assert!(v["result"].is_string(), "{v}");

    let mut old = gw.proc.take().unwrap();
    let new = gw.spawn(true);
    std::thread::sleep(Duration::from_millis(300));
    old.signal("QUIT");
    for (name, ws) in [("idle", &mut idle), ("subscribed", &mut subscribed)] {
        let frame = loop {
            match ws.read() {
                Ok(Message::Close(f)) => break f,
                Ok(_) => continue,
                Err(e) => panic!("{name}: expected a close frame, got {e}"),
            }
        };
        let frame = frame.unwrap_or_else(|| panic!("{name}: a close frame without a code"));
        assert_eq!(frame.code, CloseCode::Away, "{name}: {frame:?}");
        assert!(frame.reason.contains("reconnect"), "{name}: {frame:?}");
    }
    assert!(
        old.exited_within(Duration::from_secs(15)),
        "old process did not exit"
    );
    gw.proc = Some(new);
    let mut again = connect(gw.port, &key).expect("the new process takes the reconnect");
    let v = ask(
        &mut again,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber", "params": []}).to_string(),
    );
    assert!(v["result"].is_string(), "{v}");
}

/// Every WebSocket message gets its access-log line, as an HTTP request does: the
/// upgrade's route and key, the message's own request id, the answer's status (a
/// refusal's HTTP status and code), the node that answered; never the key itself.
#[test]
fn every_message_has_its_access_log_line() {
    let node = Anvil::start(1, &[]);
    let gw = anvil_gateway(&node, UNLIMITED);
    let key = gw.key("free", &[]);
    let mut ws = connect(gw.port, &key).unwrap();
    let call = |id: u64, method: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": []}).to_string()
    };
    assert!(ask(&mut ws, &call(1, "eth_chainId"))["result"].is_string());
    assert!(ask(&mut ws, &call(2, "evm_mine"))["error"].is_object());
    let sub = json!({"jsonrpc": "2.0", "id": 3, "method": "eth_subscribe", "params": ["newHeads"]});
    assert!(ask(&mut ws, &sub.to_string())["result"].is_string());

    let lines = || -> Vec<Value> {
        std::fs::read_to_string(gw.access_log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|l: &Value| l["method"] == "WS")
            .collect()
    };
    let until = std::time::Instant::now() + Duration::from_secs(3);
    let mut got = lines();
    while got.len() < 3 {
        assert!(std::time::Instant::now() < until, "{got:?}");
        std::thread::sleep(Duration::from_millis(20));
        got = lines();
    }
    let text = std::fs::read_to_string(gw.access_log()).unwrap();
    assert!(!text.contains(&key), "a key reached the access log");
    let upgrade_id = got[0]["request_id"]
        .as_str()
        .unwrap()
        .rsplit_once('-')
        .unwrap()
        .0
        .to_string();
    for (line, n, status, error, upstream) in [
        (&got[0], 1, 200, Value::Null, json!("el-1")),
        (&got[1], 2, 403, json!("method_unknown"), Value::Null),
        (&got[2], 3, 200, Value::Null, Value::Null),
    ] {
        assert_eq!(line["request_id"], format!("{upgrade_id}-{n}"), "{line}");
        assert_eq!(line["route"], "eth.rpc", "{line}");
        assert_eq!(line["path"], "/rpc/eth", "{line}");
        assert_eq!(line["status"], status, "{line}");
        assert_eq!(line["error"], error, "{line}");
        assert_eq!(line["upstream"], upstream, "{line}");
        assert!(
            line["key_id"].is_string() && line["tenant"].is_string(),
            "{line}"
        );
    }
}
