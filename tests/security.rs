//! The security tier: each trust boundary attacked the way an outsider (or another
//! tenant) would, against the real binary. docs/security.md says what each promises.

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn json_post(port: u16, path: &str, body: &Value, headers: &[(&str, &str)]) -> Resp {
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(headers);
    request(port, "POST", path, &h, body.to_string().as_bytes()).expect("request")
}

/// One `eth_el` pool of the node at `url`.
fn el_pools(url: &str) -> String {
    format!("  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{url}\", family: el-geth}}\n")
}

/// The node a boundary test runs against: the JSON-RPC fixture, which reads keys
/// exactly, and the Go node (`tests/gonode`), which reads them as geth, erigon and bor
/// do (case-folded, the last match wins). Each test runs on both: what the edge refused
/// must reach neither, whichever way the node reads JSON.
enum Node {
    Fixture(Fixture),
    Go(GoNode),
}

impl Node {
    fn both() -> [Node; 2] {
        [
            Node::Fixture(Fixture::json_rpc()),
            Node::Go(GoNode::start()),
        ]
    }

    fn url(&self) -> String {
        match self {
            Node::Fixture(f) => f.url(),
            Node::Go(g) => g.url(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Node::Fixture(_) => "fixture",
            Node::Go(_) => "go node",
        }
    }

    /// Whether `method` reached the node: named anywhere in a body the fixture got, or
    /// executed by the Go node as it decoded the call.
    fn reached(&self, method: &str) -> bool {
        match self {
            Node::Fixture(f) => f
                .seen
                .lock()
                .unwrap()
                .iter()
                .any(|r| String::from_utf8_lossy(&r.body).contains(&format!("\"{method}\""))),
            Node::Go(g) => g.executed().iter().any(|e| e["method"] == method),
        }
    }
}

/// The access log's lines, as JSON.
fn access_lines(gw: &Gateway) -> Vec<Value> {
    std::fs::read_to_string(gw.access_log())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn mailed(outbox: &std::path::Path) -> usize {
    std::fs::read_to_string(outbox)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

fn console_gateway(node: &Fixture, console_yaml: &str) -> (Gateway, std::path::PathBuf) {
    let dir = tempdir("security");
    let outbox = dir.join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: el_pools(&node.url()),
        console_yaml: format!(
            "  email:\n    outbox: {}\n    lockout_secs: 2\n{console_yaml}",
            outbox.display()
        ),
        ..Default::default()
    });
    (gw, outbox)
}

/// A brute-force client alternating "send a new code" and wrong guesses: the refused
/// starts store nothing, the address locks out after five wrong guesses whatever codes
/// are asked for, and the code mailed to the victim still works once the lock-out ends.
#[test]
fn sign_in_codes_cannot_be_walked() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(&node, "");
    let victim = "victim@example.com";
    let start = |email: &str| {
        json_post(
            gw.port,
            "/v1/auth/email/start",
            &json!({"email": email}),
            &[],
        )
    };
    let guess = |code: &str| {
        json_post(
            gw.port,
            "/v1/auth/email/verify",
            &json!({"email": victim, "code": code}),
            &[],
        )
    };
    assert_eq!(start(victim).status, 202);
    let mailed_code = outbox_code(&outbox, victim).unwrap();
    // The attacker: up to five codes per 15 minutes are sent, then each start is
    // refused; five guesses after each start.
    let (mut tried, mut locked, mut starts_refused) = (0, 0, 0);
    let mut n = 0u32;
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(4) && n < 600 {
        let r = start(victim);
        if r.status == 429 {
            starts_refused += 1;
            assert_eq!(r.json()["error"], "too_many_codes");
        }
        for _ in 0..5 {
            n += 1;
            let code = format!("{:06}", 100_000 + n);
            if code == mailed_code {
                continue;
            }
            let r = guess(&code);
            match r.status {
                400 => tried += 1,
                429 => {
                    locked += 1;
                    assert_eq!(r.json()["error"], "too_many_attempts");
                    assert!(r.header("retry-after").is_some());
                }
                s => panic!("unexpected {s}: {}", r.text()),
            }
        }
    }
    // Five wrong guesses per lock-out step: a 2 s lock-out, then 4 s, within 4 s at most
    // two steps' worth of guesses were ever checked against a code.
    assert!(
        tried <= 10,
        "{tried} guesses were checked ({locked} locked out)"
    );
    assert!(locked > 100, "{locked}");
    assert!(starts_refused > 0);
    assert!(mailed(&outbox) <= 5, "at most five codes mailed");
    // Even the right code is refused while the address is locked out ...
    let r = guess(&outbox_code(&outbox, victim).unwrap());
    assert_eq!(r.status, 429, "{}", r.text());
    // ... and once the lock-out ends, the latest mailed code signs in: the refused
    // starts replaced nothing.
    let latest = outbox_code(&outbox, victim).unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let r = guess(&latest);
        if r.status == 200 {
            break;
        }
        assert_eq!(r.status, 429, "{}", r.text());
        assert!(Instant::now() < until, "still locked out");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Wrong codes lock out the client that sent them, not the address: a stranger who
/// guesses at the owner's address until locked out leaves the owner, on its own client,
/// able to sign in (with a fresh code: the stranger's guesses spent the first one).
#[test]
fn a_strangers_wrong_codes_never_lock_the_owner_out() {
    let node = Fixture::json_rpc();
    let dir = tempdir("lockout");
    let outbox = dir.join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: el_pools(&node.url()),
        console_yaml: format!(
            "  email:\n    outbox: {}\n    lockout_secs: 600\n  trusted_proxies: [\"127.0.0.1\"]\n",
            outbox.display()
        ),
        ..Default::default()
    });
    let owner = "owner@example.com";
    let (stranger, own) = ("203.0.113.66", "198.51.100.7");
    let from = |client: &str, path: &str, body: Value| {
        json_post(gw.port, path, &body, &[("X-Forwarded-For", client)])
    };
    let verify = |client: &str, code: &str| {
        from(
            client,
            "/v1/auth/email/verify",
            json!({"email": owner, "code": code}),
        )
    };
    let start = |client: &str| from(client, "/v1/auth/email/start", json!({"email": owner}));
    assert_eq!(start(own).status, 202);
    let first = outbox_code(&outbox, owner).unwrap();
    let mut guesses = (0..)
        .map(|n| format!("{:06}", 100_000 + n))
        .filter(|c| *c != first);
    let locked_out = |r: &Resp| r.status == 429 && r.header("retry-after").is_some();
    let mut tries = 0;
    while !locked_out(&verify(stranger, &guesses.next().unwrap())) {
        tries += 1;
        assert!(tries < 10, "the stranger was never locked out");
    }
    assert!(
        locked_out(&verify(stranger, &first)),
        "locked out, even with the code"
    );
    // The owner's first code took the stranger's guesses; a new one signs in at once.
    assert_eq!(start(own).status, 202);
    let second = outbox_code(&outbox, owner).unwrap();
    let r = verify(own, &second);
    assert_eq!(r.status, 200, "the owner was locked out: {}", r.text());
    // ... while the stranger's lock-out stands.
    assert!(locked_out(&verify(stranger, &guesses.next().unwrap())));
}

/// Anonymous writes have a budget per client address: wallet challenges outstanding,
/// and codes mailed (to any number of addresses).
#[test]
fn an_anonymous_client_cannot_grow_the_store_or_send_mail_at_will() {
    let node = Fixture::json_rpc();
    let (gw, outbox) = console_gateway(
        &node,
        "    max_codes_per_client_15min: 10\n  max_challenges_per_client: 15\n",
    );
    let mut stored = 0;
    for i in 0..200 {
        let address = format!("0x{:040x}", 0xa11ce00 + i);
        let r = json_post(
            gw.port,
            "/v1/auth/wallet/evm/challenge",
            &json!({"address": address}),
            &[],
        );
        match r.status {
            200 => stored += 1,
            429 => assert_eq!(r.json()["error"], "too_many_challenges"),
            s => panic!("{s} {}", r.text()),
        }
    }
    assert_eq!(stored, 15);
    // One address holds at most five open challenges, whoever asks.
    let mut sent = 0;
    for i in 0..50 {
        let r = json_post(
            gw.port,
            "/v1/auth/email/start",
            &json!({"email": format!("user{i}@example.com")}),
            &[],
        );
        if r.status == 202 {
            sent += 1;
        } else {
            assert_eq!(r.status, 429, "{}", r.text());
        }
    }
    assert_eq!(sent, 10);
    assert_eq!(mailed(&outbox), 10);
}

/// A pro key sends each node-administrative method, on `/rpc/eth`, in a batch and on
/// the per-host route: every one is refused as unknown, and the node never hears of it.
#[test]
fn node_administrative_methods_never_reach_a_node() {
    for node in Node::both() {
        administrative_methods_refused(&node);
    }
}

fn administrative_methods_refused(node: &Node) {
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth, capabilities: [debug, trace, txpool]}}\n",
            node.url()
        ),
        ..Default::default()
    });
    let pro = gw.key("pro", &[]);
    const ADMINISTRATIVE: [&str; 12] = [
        "debug_setHead",
        "debug_writeMemProfile",
        "debug_startCPUProfile",
        "debug_stopCPUProfile",
        "debug_chaindbCompact",
        "debug_setGCPercent",
        "debug_verbosity",
        "debug_dbGet",
        "debug_freeOSMemory",
        "admin_addPeer",
        "miner_setEtherbase",
        "personal_unlockAccount",
    ];
    let on = node.name();
    for m in ADMINISTRATIVE {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": ["/tmp/x"]});
        // The same method under a member a Go node reads as `method`.
        let folded = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "Method": m, "params": []});
        for (path, key) in [
            ("/rpc/eth", Some(pro.as_str())),
            ("/v1/eth/mesh/rpc/el-1", None),
        ] {
            let r = rpc(gw.port, path, key, &call);
            // JSON-RPC's envelope on /rpc/eth, the admin envelope on the per-host route.
            let v = r.json();
            let code = v["error"]["data"]["error"].as_str().or(v["error"].as_str());
            assert_eq!(code, Some("method_unknown"), "{m} on {path} ({on}): {v}");
            let r = rpc(gw.port, path, key, &folded);
            assert_eq!(r.status, 400, "{m} folded on {path} ({on}): {}", r.text());
        }
    }
    let batch: Vec<Value> = ADMINISTRATIVE
        .iter()
        .enumerate()
        .map(|(i, m)| json!({"jsonrpc": "2.0", "id": i, "method": m, "params": []}))
        .collect();
    let r = rpc(gw.port, "/rpc/eth", Some(&pro), &json!(batch));
    for answer in r.json().as_array().unwrap() {
        assert_eq!(
            answer["error"]["data"]["error"], "method_unknown",
            "{answer}"
        );
    }
    // A read of the same namespaces still passes.
    let r = rpc(
        gw.port,
        "/rpc/eth",
        Some(&pro),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "debug_traceTransaction", "params": ["0x00"]}),
    );
    assert!(r.json().get("result").is_some(), "{}", r.text());
    assert!(
        node.reached("debug_traceTransaction"),
        "the read reached the {on}"
    );
    for m in ADMINISTRATIVE {
        assert!(!node.reached(m), "{m} reached the {on}");
    }
}

/// A key with `rpc:read` only sends transactions every way it can: refused with 403
/// before any node sees them; the same key still reads.
#[test]
fn a_read_only_key_cannot_send_transactions() {
    for node in Node::both() {
        read_only_key_sends_nothing(&node);
    }
}

fn read_only_key_sends_nothing(node: &Node) {
    let gw = Gateway::start(GatewayOpts {
        pools: el_pools(&node.url()),
        ..Default::default()
    });
    let reader = gw.key("pro", &["rpc:read"]);
    let raw_tx = "0x02f86b0180843b9aca00850c92a69c0082520894000000000000000000000000000000000000dead0180c001a0e3a5b2ea3c0c52e5a1c4b9e22b0a0cc6a8b4b4b6e9c1b1f7a0a0a0a0a0a0a0a0a05e3a5b2ea3c0c52e5a1c4b9e22b0a0cc6a8b4b4b6e9c1b1f7a0a0a0a0a0a0a0a0";
    let send =
        json!({"jsonrpc": "2.0", "id": 7, "method": "eth_sendRawTransaction", "params": [raw_tx]});
    let r = rpc(gw.port, "/rpc/eth", Some(&reader), &send);
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["required_scope"], "rpc:write");
    let r = rpc(
        gw.port,
        "/rpc/eth",
        Some(&reader),
        &json!([send, {"jsonrpc": "2.0", "id": 8, "method": "eth_chainId", "params": []}]),
    );
    let answers = r.json();
    assert_eq!(
        answers[0]["error"]["data"]["required_scope"], "rpc:write",
        "{answers}"
    );
    assert_eq!(answers[1]["result"], "0x1", "{answers}");
    let auth = format!("Bearer {reader}");
    let r = json_post(
        gw.port,
        "/v1/eth/sender/raw",
        &json!({"tx": raw_tx}),
        &[("Authorization", &auth)],
    );
    assert_eq!(r.status, 403, "{}", r.text());
    // Over WebSocket, the same refusal per message.
    let answer = ws_ask(gw.port, &reader, &send.to_string());
    assert_eq!(
        answer["error"]["data"]["required_scope"], "rpc:write",
        "{answer}"
    );
    // A key with no rpc scope at all reads nothing over JSON-RPC.
    let watcher = gw.key("business", &["sol_watchlist"]);
    let r = rpc(
        gw.port,
        "/rpc/eth",
        Some(&watcher),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["required_scope"], "rpc:read");
    // Nor under a member a Go node reads as `method`.
    let folded = json!({"jsonrpc": "2.0", "id": 9, "method": "eth_chainId", "METHOD": "eth_sendRawTransaction", "params": [raw_tx]});
    let r = rpc(gw.port, "/rpc/eth", Some(&reader), &folded);
    assert_eq!(r.status, 400, "{}", r.text());
    let answer = ws_ask(gw.port, &reader, &folded.to_string());
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        !node.reached("eth_sendRawTransaction"),
        "a write reached the {}",
        node.name()
    );
    // Unknown scopes and features are refused by the CLI.
    let tenant = gw.cli(&["tenants", "create", "--name", "t", "--plan", "free"]);
    for args in [
        [
            "keys",
            "create",
            "--tenant",
            &tenant,
            "--scopes",
            "rpc:admin",
        ],
        [
            "tenants",
            "set-features",
            "--tenant",
            &tenant,
            "--features",
            "eth.everything",
        ],
    ] {
        let refused = std::panic::catch_unwind(|| gw.cli(&args));
        assert!(refused.is_err(), "{args:?} was accepted");
    }
}

type Ws = tungstenite::WebSocket<std::net::TcpStream>;

/// A WebSocket on `/rpc/eth` with `key`, reads waiting at most `wait`.
fn ws_open(port: u16, key: &str, wait: Duration) -> Ws {
    use tungstenite::client::IntoClientRequest;
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut req = format!("ws://127.0.0.1:{port}/rpc/eth")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert("x-token", key.parse().unwrap());
    tungstenite::client(req, stream).expect("upgrade").0
}

/// One message over a WebSocket on `/rpc/eth` with `key`, and its answer.
fn ws_ask(port: u16, key: &str, body: &str) -> Value {
    let mut ws = ws_open(port, key, Duration::from_secs(10));
    ws.send(tungstenite::Message::text(body)).unwrap();
    loop {
        match ws.read().expect("an answer") {
            tungstenite::Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            tungstenite::Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

/// Admin is judged by the client, not the socket: a proxy on this host (trusted or
/// not) never turns its clients into loopback; a wrong token is refused and counted.
#[test]
fn a_proxy_on_loopback_never_makes_its_clients_admin() {
    let node = Fixture::json_rpc();
    let pools = el_pools(&node.url());
    let gw = Gateway::start(GatewayOpts {
        pools: pools.clone(),
        ..Default::default()
    });
    let admin = "/v1/admin/usage?format=csv";
    // Straight from loopback, no proxy: admin (the default, allow_loopback).
    assert_eq!(gw.get(admin, &[]).status, 200);
    // A local proxy that says so, in any of the usual ways: the client is remote.
    for h in [
        ("X-Forwarded-For", "203.0.113.7"),
        ("Forwarded", "for=203.0.113.7"),
        ("X-Real-IP", "203.0.113.7"),
        ("Via", "1.1 haproxy"),
        // A client forging loopback through the proxy is still a proxied client.
        ("X-Forwarded-For", "127.0.0.1"),
    ] {
        assert_eq!(gw.get(admin, &[h]).status, 403, "{h:?}");
    }
    // A wrong token is refused even from loopback, and counted.
    let r = gw.get(admin, &[("X-Admin-Token", "guess")]);
    assert_eq!(r.status, 403);
    assert!(metric_sum(&gw, "chainedge_admin_refused_total{reason=\"wrong_token\"") >= 1.0);
    assert_eq!(
        gw.get(admin, &[("X-Admin-Token", "test-admin-token")])
            .status,
        200
    );

    // The proxy is trusted: its X-Forwarded-For lines are one list, read from the right.
    let trusted = Gateway::start(GatewayOpts {
        pools: pools.clone(),
        console_yaml: "  trusted_proxies: [\"127.0.0.1\"]\n".into(),
        ..Default::default()
    });
    // haproxy's `option forwardfor` adds its own line after the client's.
    let two_lines = [
        ("X-Forwarded-For", "127.0.0.1"),
        ("X-Forwarded-For", "203.0.113.7"),
    ];
    assert_eq!(trusted.get(admin, &two_lines).status, 403);
    assert_eq!(
        trusted
            .get(admin, &[("X-Forwarded-For", "127.0.0.1, 203.0.113.7")])
            .status,
        403
    );
    // The access log names the client the proxy reported, not the forged one.
    let until = Instant::now() + Duration::from_secs(10);
    let logged = loop {
        let lines: Vec<Value> = access_lines(&trusted)
            .into_iter()
            .filter(|l| l["path"] == "/v1/admin/usage")
            .collect();
        if lines.len() >= 2 {
            break lines;
        }
        assert!(Instant::now() < until, "no access log lines");
        std::thread::sleep(Duration::from_millis(100));
    };
    for line in &logged {
        assert_eq!(line["client"], "203.0.113.7", "{line}");
    }

    // Loopback admin switched off: only the token.
    let strict = Gateway::start(GatewayOpts {
        pools,
        admin_yaml: "  allow_loopback: false\n".into(),
        ..Default::default()
    });
    assert_eq!(strict.get(admin, &[]).status, 403);
    assert_eq!(
        strict
            .get(admin, &[("X-Admin-Token", "test-admin-token")])
            .status,
        200
    );
    drop(strict);

    // Admin on a listener of its own: only there, and nothing else there.
    let admin_port = free_port();
    let apart = Gateway::start(GatewayOpts {
        pools: el_pools(&node.url()),
        admin_yaml: format!("  listen: \"127.0.0.1:{admin_port}\"\n"),
        ..Default::default()
    });
    assert_eq!(apart.get(admin, &[]).status, 404);
    let r = request(admin_port, "GET", admin, &[], b"").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let r = request(
        admin_port,
        "GET",
        "/v1/polygon/wallet/balance/0x00000000000000000000000000000000000a11ce",
        &[],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 404);
}

/// `eth_newFilter` meets the `eth_getLogs` range guard, and quantities it cannot read
/// are refused rather than passed on.
#[test]
fn the_logs_range_guard_holds_through_filters() {
    for node in Node::both() {
        logs_range_guarded(&node);
    }
}

fn logs_range_guarded(node: &Node) {
    let gw = Gateway::start(GatewayOpts {
        pools: el_pools(&node.url()),
        ..Default::default()
    });
    let free = gw.key("free", &[]);
    let call = |method: &str, filter: Value| {
        rpc(
            gw.port,
            "/rpc/eth",
            Some(&free),
            &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": [filter]}),
        )
        .json()
    };
    for method in ["eth_newFilter", "eth_getLogs"] {
        let wide = call(method, json!({"fromBlock": "0x0", "toBlock": "0xffffffff"}));
        assert_eq!(wide["error"]["code"], -32005, "{method}: {wide}");
        let huge = call(
            method,
            json!({"fromBlock": "0x0", "toBlock": "0x1ffffffffffffffff"}),
        );
        assert_eq!(huge["error"]["code"], -32602, "{method}: {huge}");
        // The wide range under members a Go node reads as `fromBlock` and `toBlock`.
        let folded = call(
            method,
            json!({"fromBlock": "0x0", "FROMBLOCK": "0x0", "TOBLOCK": "0xffffffff"}),
        );
        assert_eq!(folded["error"]["code"], -32600, "{method}: {folded}");
    }
    for method in ["eth_newFilter", "eth_getLogs"] {
        assert!(
            !node.reached(method),
            "a refused range reached the {}",
            node.name()
        );
    }
}

/// Open a WebSocket on `/rpc/eth` with `key`, and wait for the server to end it: the
/// close code and how long it took after `revoke` ran.
fn session_closed_after(port: u16, key: &str, revoke: impl FnOnce()) -> (u16, Duration) {
    let mut ws = ws_open(port, key, Duration::from_secs(15));
    ws.send(tungstenite::Message::text(
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).to_string(),
    ))
    .unwrap();
    assert!(matches!(ws.read().unwrap(), tungstenite::Message::Text(_)));
    revoke();
    let revoked = Instant::now();
    loop {
        match ws.read() {
            Ok(tungstenite::Message::Close(Some(frame))) => {
                return (u16::from(frame.code), revoked.elapsed())
            }
            Ok(tungstenite::Message::Close(None)) => return (1005, revoked.elapsed()),
            Ok(_) => {}
            Err(e) => panic!("no close frame after the revocation: {e}"),
        }
    }
}

/// A key revoked with the CLI ends the sessions already open with it: at once where
/// Redis carries the notice, within the key cache's TTL where nothing does.
#[test]
fn revoking_a_key_ends_its_open_sessions() {
    let node = Fixture::json_rpc();
    let pools = el_pools(&node.url());
    // No Redis: the session rechecks its key every quarter of the 2 s TTL.
    let gw = Gateway::start(GatewayOpts {
        pools: pools.clone(),
        extra_yaml: "auth:\n  key_cache_ttl_ms: 2000\n".into(),
        ..Default::default()
    });
    let (key, id) = gw.key_and_id("pro");
    let (code, took) = session_closed_after(gw.port, &key, || {
        gw.cli(&["keys", "revoke", "--id", &id]);
    });
    assert_eq!(code, 1008);
    assert!(took < Duration::from_millis(3500), "{took:?}");

    // With Redis: the revocation notice closes it within a second.
    let redis = RedisServer::start();
    let gw = Gateway::start(GatewayOpts {
        pools,
        redis: Some(redis.url()),
        ..Default::default()
    });
    let (key, id) = gw.key_and_id("pro");
    let (code, took) = session_closed_after(gw.port, &key, || {
        gw.cli(&["keys", "revoke", "--id", &id]);
    });
    assert_eq!(code, 1008);
    assert!(took < Duration::from_secs(1), "{took:?}");
}

/// A real proxy on the same host, as operators deploy one: haproxy from
/// `conf/haproxy-cluster.cfg` and nginx with the usual forwarding headers. Whoever comes
/// through them is not admin without the token; an nginx that adds no forwarding header
/// cannot be told from a local client (docs/security.md), so `allow_loopback: false`
/// closes that too.
#[test]
fn real_proxies_on_loopback_never_make_their_clients_admin() {
    let node = Fixture::json_rpc();
    let gw = Gateway::start(GatewayOpts {
        pools: el_pools(&node.url()),
        ..Default::default()
    });
    let strict = Gateway::start(GatewayOpts {
        pools: el_pools(&node.url()),
        admin_yaml: "  allow_loopback: false\n".into(),
        ..Default::default()
    });
    let dir = tempdir("proxies");
    let admin = "/v1/admin/usage?format=csv";
    let token = ("X-Admin-Token", "test-admin-token");

    // haproxy, as shipped (both servers this one instance).
    let shipped = std::fs::read_to_string(root().join("conf/haproxy-cluster.cfg")).unwrap();
    let haproxy_port = free_port();
    let cfg = shipped
        .replace("bind :8080", &format!("bind 127.0.0.1:{haproxy_port}"))
        .replace(
            "10.0.0.11:8080 check port 9090",
            &format!("127.0.0.1:{} check port {}", gw.port, gw.metrics_port),
        )
        .replace(
            "10.0.0.12:8080 check port 9090",
            &format!("127.0.0.1:{} check port {}", gw.port, gw.metrics_port),
        );
    std::fs::write(dir.join("haproxy.cfg"), cfg).unwrap();
    let _haproxy = haproxy(&dir.join("haproxy.cfg"));

    // nginx: one server with the usual headers in front of `gw`, one bare in front of
    // `strict`.
    let (nginx_port, bare_port) = (free_port(), free_port());
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/nginx.err;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp;\n\
               fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;\n\
               server {{ listen 127.0.0.1:{nginx_port}; location / {{ proxy_pass http://127.0.0.1:{};\n\
                 proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n\
                 proxy_set_header X-Real-IP $remote_addr; }} }}\n\
               server {{ listen 127.0.0.1:{bare_port}; location / {{ proxy_pass http://127.0.0.1:{}; }} }}\n\
             }}\n",
            gw.port, strict.port
        ),
    )
    .unwrap();
    let _nginx = nginx(&dir);
    for port in [haproxy_port, nginx_port, bare_port] {
        wait_for_port(port, Duration::from_secs(10));
    }
    let through = |port: u16, headers: &[(&str, &str)]| {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let r = request(port, "GET", admin, headers, b"").unwrap();
            // A proxy that has not seen its server up yet answers 502/503 itself; the
            // edge's answers carry its request id (nginx replaces `Server`).
            if r.header("x-request-id").is_some() || Instant::now() > until {
                return r.status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    // Straight from loopback the client is local (allow_loopback); through either proxy
    // it is not.
    assert_eq!(gw.get(admin, &[]).status, 200);
    assert_eq!(through(haproxy_port, &[]), 403, "through haproxy");
    assert_eq!(through(nginx_port, &[]), 403, "through nginx");
    // A client forging a loopback address through them gains nothing.
    let forged = [("X-Forwarded-For", "127.0.0.1")];
    assert_eq!(through(haproxy_port, &forged), 403);
    assert_eq!(through(nginx_port, &forged), 403);
    // The token still works through them.
    assert_eq!(through(haproxy_port, &[token]), 200);
    assert_eq!(through(nginx_port, &[token]), 200);
    // A bare nginx adds nothing to tell it by: with allow_loopback off only the token.
    assert_eq!(through(bare_port, &[]), 403, "through a bare nginx");
    assert_eq!(through(bare_port, &[token]), 200);
}

/// A node's filter ids are shared by every tenant on it (anvil numbers them; so does
/// Nethermind): a tenant never polls, and so never drains, nor uninstalls another
/// tenant's filter, in a single call or a batch. Keys of the same tenant share them.
#[test]
fn a_tenant_never_reaches_another_tenants_filters() {
    let node = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let tenant = gw.cli(&["tenants", "create", "--name", "owner", "--plan", "pro"]);
    let owner = gw.cli(&["keys", "create", "--tenant", tenant.as_str()]);
    let colleague = gw.cli(&["keys", "create", "--tenant", tenant.as_str()]);
    let other = gw.key("pro", &[]);
    let call = |key: &str, body: Value| rpc(gw.port, "/rpc/eth", Some(key), &body).json();
    let one = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let fid = call(&owner, one("eth_newBlockFilter", json!([])))["result"]
        .as_str()
        .expect("a filter id")
        .to_string();
    node.mine(1);
    // Another tenant: not found, single or batched, and the owner's changes stay.
    let poll = one("eth_getFilterChanges", json!([fid]));
    let r = call(&other, poll.clone());
    assert_eq!(r["error"]["message"], "filter not found", "{r}");
    let r = call(&other, json!([poll.clone()]));
    assert_eq!(r[0]["error"]["message"], "filter not found", "{r}");
    let r = call(&other, one("eth_uninstallFilter", json!([fid])));
    assert_eq!(r["error"]["message"], "filter not found", "{r}");
    let r = call(&owner, poll.clone());
    assert_eq!(r["result"].as_array().map(Vec::len), Some(1), "{r}");
    // Nor does the same tenant's other key: a filter is the key's that made it (a key
    // narrowed to some contracts must not read a filter another key made wider).
    node.mine(1);
    let r = call(&colleague, poll.clone());
    assert_eq!(r["error"]["message"], "filter not found", "{r}");
    let r = call(&owner, poll.clone());
    assert_eq!(r["result"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(
        call(&owner, one("eth_uninstallFilter", json!([fid])))["result"],
        true
    );
}

/// Two tenants side by side, each a console user with its default key, walk the route
/// families they share: the console (keys, a key's usage, rotate, revoke), JSON-RPC
/// filters, WebSocket subscriptions and the usage export. Neither finds, reads or ends
/// anything of the other. (The Solana mempool and the watchlist are walked in
/// `tests/sol.rs` and `tests/sol_watch.rs`.)
#[test]
fn two_tenants_see_nothing_of_each_other() {
    let node = Anvil::start(1, &[]);
    let dir = tempdir("two-tenants");
    let outbox = dir.join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [ws]}}\n",
            node.url()
        ),
        console_yaml: format!("  email:\n    outbox: {}\n", outbox.display()),
        admin_yaml: "  allow_loopback: false\n".into(),
        extra_yaml: format!("usage:\n  flush_interval_ms: 200\n{UNLIMITED}"),
        ..Default::default()
    });
    let signed_in = |email: &str| {
        let mut b = Browser::new(gw.port);
        let r = sign_in(&mut b, &outbox, email);
        assert_eq!(r.status, 200, "{}", r.text());
        let me = b.send("GET", "/v1/auth/me", None, None).json();
        let key = &me["default_key"];
        let (raw, id) = (key["raw"].as_str().unwrap(), key["id"].as_str().unwrap());
        (b, raw.to_string(), id.to_string())
    };
    let (mut ada, ada_key, ada_id) = signed_in("ada@example.com");
    let (mut bob, bob_key, _bob_id) = signed_in("bob@example.com");
    let call = |key: &str, method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        rpc(gw.port, "/rpc/eth", Some(key), &body).json()
    };

    // Ada uses her key: calls, a filter, a subscription.
    for _ in 0..3 {
        assert!(call(&ada_key, "eth_blockNumber", json!([]))["result"].is_string());
    }
    let filter = call(&ada_key, "eth_newBlockFilter", json!([]))["result"]
        .as_str()
        .unwrap()
        .to_string();
    let mut ada_ws = ws_open(gw.port, &ada_key, Duration::from_secs(10));
    let ask = |ws: &mut Ws, id: u64, method: &str, params: Value| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        ws.send(tungstenite::Message::text(body.to_string()))
            .unwrap();
        loop {
            if let tungstenite::Message::Text(t) = ws.read().unwrap() {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["id"] == id {
                    return v;
                }
            }
        }
    };
    let sub = ask(&mut ada_ws, 1, "eth_subscribe", json!(["newHeads"]))["result"].clone();
    assert!(sub.is_string(), "{sub}");

    // Bob: the console shows him none of Ada's keys, nor their usage, and he can end none.
    let keys = bob.send("GET", "/v1/keys", None, None);
    assert_eq!(keys.status, 200);
    assert!(!keys.text().contains(&ada_id), "{}", keys.text());
    for (method, path) in [
        ("GET", format!("/v1/keys/{ada_id}/usage")),
        ("POST", format!("/v1/keys/{ada_id}/rotate")),
        ("DELETE", format!("/v1/keys/{ada_id}")),
    ] {
        let r = bob.send(method, &path, None, None);
        assert_eq!(r.status, 404, "{method} {path}: {}", r.text());
    }
    // ... nor reaches her filter or her subscription.
    let r = call(&bob_key, "eth_getFilterChanges", json!([filter]));
    assert_eq!(r["error"]["message"], "filter not found", "{r}");
    let mut bob_ws = ws_open(gw.port, &bob_key, Duration::from_secs(10));
    let r = ask(&mut bob_ws, 7, "eth_unsubscribe", json!([sub]));
    assert_ne!(r["result"], true, "{r}");
    // ... nor the usage export (admin only).
    let r = request(
        gw.port,
        "GET",
        "/v1/admin/usage?format=csv",
        &[("x-token", &bob_key)],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.text());

    // Ada's things are all still hers: her subscription streams, her filter has the
    // block, her key works and its usage is there for her.
    node.mine(1);
    let head = loop {
        if let tungstenite::Message::Text(t) = ada_ws.read().unwrap() {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["method"] == "eth_subscription" {
                break v;
            }
        }
    };
    assert_eq!(head["params"]["subscription"], sub);
    let r = call(&ada_key, "eth_getFilterChanges", json!([filter]));
    assert_eq!(r["result"].as_array().map(Vec::len), Some(1), "{r}");
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let r = ada.send(
            "GET",
            &format!("/v1/keys/{ada_id}/usage?window=1h"),
            None,
            None,
        );
        assert_eq!(r.status, 200, "{}", r.text());
        if r.json()["totals"]["calls"].as_i64().unwrap_or(0) >= 3 {
            break;
        }
        assert!(
            Instant::now() < until,
            "Ada's usage never arrived: {}",
            r.text()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
