//! Passthroughs (issue 7): the beacon REST proxy and its event stream, through the real
//! binary against fixture beacon nodes; JSON-RPC over WebSocket (issue 6).

use common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn beacon_node(head_slot: u64) -> Fixture {
    Fixture::start(move |req| {
        let path = req.path.split('?').next().unwrap_or("");
        match path {
            "/eth/v1/node/syncing" => FixtureResponse::json(json!({"data": {
                "head_slot": head_slot.to_string(), "sync_distance": "0",
                "is_syncing": false, "is_optimistic": false, "el_offline": false}})),
            "/eth/v1/node/version" => {
                FixtureResponse::json(json!({"data": {"version": format!("fixture/{head_slot}")}}))
            }
            "/eth/v1/beacon/blob_sidecars/head" => {
                FixtureResponse::json(json!({"data": [{"index": "0", "blob": "0x00"}]}))
            }
            "/eth/v1/beacon/headers/head" => {
                // Echo what the node received, so the test can see what the edge forwarded.
                let headers: Vec<String> = req
                    .headers
                    .iter()
                    .map(|(k, _)| k.to_ascii_lowercase())
                    .collect();
                FixtureResponse::json(
                    json!({"data": {"forwarded_headers": headers, "query": req.path.split_once('?').map(|x| x.1)}}),
                )
            }
            "/eth/v1/events" => FixtureResponse::events(
                vec![
                    format!(
                        "event: head\ndata: {{\"slot\":\"{head_slot}\",\"block\":\"0xab\",\"tick\":\"{{tick}}\"}}\n\n"
                    ),
                    ": keepalive\n\n".to_string(),
                ],
                Duration::from_millis(150),
            ),
            _ => FixtureResponse::status(404, "{\"code\":404,\"message\":\"not found\"}"),
        }
    })
}

/// Read `count` events with sseclient-py (`tests/py/sse_read.py`): `{event, data, t}` each.
fn sse_client(url: &str, header: &str, value: &str, count: usize) -> Vec<Value> {
    let stdout = run_python(
        "tests/py/sse_read.py",
        &[url, header, value, &count.to_string()],
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn cl_pool(hosts: &[(&str, &Fixture, &str)]) -> String {
    let mut s = "  eth_cl:\n    hosts:\n".to_string();
    for (id, f, family) in hosts {
        s.push_str(&format!(
            "      - {{id: {id}, url: \"{}\", family: {family}}}\n",
            f.url()
        ));
    }
    s
}

#[test]
fn beacon_rest_proxy_policy_failover_and_events() {
    let a = beacon_node(100);
    let b = beacon_node(100);
    let gw = Gateway::start(GatewayOpts {
        pools: cl_pool(&[("cl-a", &a, "cl-lighthouse"), ("cl-b", &b, "cl-teku")]),
        // Long health interval: a node that dies stays "available" until the passthrough meets it.
        extra_yaml: format!("health:\n  interval_ms: 600000\n{UNLIMITED}"),
        ..Default::default()
    });
    let (free, basic, pro) = (
        gw.key("free", &[]),
        gw.key("basic", &[]),
        gw.key("pro", &[]),
    );

    // Streamed through unchanged; the caller's credentials never reach the node.
    let r = gw.get(
        "/rpc/eth-beacon/eth/v1/beacon/headers/head?x=1",
        &[
            ("Authorization", &format!("Bearer {basic}")),
            ("Cookie", "nl_session=abc"),
            ("X-Request-Id", "trace-1"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let fwd: Vec<String> =
        serde_json::from_value(r.json()["data"]["forwarded_headers"].clone()).unwrap();
    for secret in ["authorization", "x-token", "cookie"] {
        assert!(
            !fwd.contains(&secret.to_string()),
            "{secret} forwarded: {fwd:?}"
        );
    }
    assert!(fwd.contains(&"x-request-id".to_string()));
    assert_eq!(r.json()["data"]["query"], "x=1");
    assert_eq!(r.header("X-Request-Id"), Some("trace-1"));
    assert_eq!(r.header("Server"), Some("chainedge"));
    let r = gw.get(
        "/rpc/eth-beacon/eth/v1/node/version",
        &[("x-token", &basic)],
    );
    assert_eq!(r.status, 200);
    // The node's own errors pass through as they are.
    let r = gw.get(
        "/rpc/eth-beacon/eth/v1/beacon/states/head/nothing",
        &[("x-token", &basic)],
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["message"], "not found");

    // Per-path plans: the route needs basic, blob sidecars need pro, debug enterprise.
    let r = gw.get("/rpc/eth-beacon/eth/v1/node/version", &[("x-token", &free)]);
    assert_eq!(
        (r.status, r.json()["required_tier"].as_str()),
        (403, Some("basic"))
    );
    let r = gw.get(
        "/rpc/eth-beacon/eth/v1/beacon/blob_sidecars/head",
        &[("x-token", &basic)],
    );
    assert_eq!(r.status, 403);
    assert_eq!(r.json()["error"], "tier_insufficient");
    assert_eq!(r.json()["required_tier"], "pro");
    assert_eq!(r.header("X-Required-Tier"), Some("pro"));
    let r = gw.get(
        "/rpc/eth-beacon/eth/v1/beacon/blob_sidecars/head",
        &[("x-token", &pro)],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.get(
        "/rpc/eth-beacon/eth/v2/debug/beacon/states/head",
        &[("x-token", &pro)],
    );
    assert_eq!(r.json()["required_tier"], "enterprise");

    // Traversal and odd spellings are refused before any route or node is chosen.
    let before = a.hits() + b.hits();
    for bad in [
        "/rpc/eth-beacon/eth/v1/node/../../admin",
        "/rpc/eth-beacon/eth/v1//node/version",
        "/rpc/eth-beacon/eth/v1/node%2Fversion",
        "/rpc/eth-beacon/eth/v1/node/%2e%2e/version",
    ] {
        let r = gw.get(bad, &[("x-token", &pro)]);
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("invalid_path")),
            "{bad}"
        );
    }
    let r = gw.get("/rpc/eth-beacon/lighthouse/peers", &[("x-token", &pro)]);
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("route_not_found"))
    );
    let r = request(
        gw.port,
        "POST",
        "/rpc/eth-beacon/eth/v1/node/version",
        &[("x-token", &pro)],
        b"{}",
    )
    .unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(
        a.hits() + b.hits(),
        before,
        "refused requests reached a node"
    );

    // Events: streamed event by event, keep-alive comments passed through, no buffering.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /rpc/eth-beacon/eth/v1/events?topics=head HTTP/1.1\r\nHost: x\r\nx-token: {basic}\r\nAccept: text/event-stream\r\nAccept-Encoding: gzip\r\n\r\n").unwrap();
    let started = Instant::now();
    let mut got = String::new();
    let mut first_event_at = None;
    let mut buf = [0u8; 4096];
    while started.elapsed() < Duration::from_secs(3) && got.matches("event: head").count() < 3 {
        let n = s
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{e}: got so far {got:?}"));
        assert!(n > 0, "stream closed early: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
        if first_event_at.is_none() && got.contains("event: head") {
            first_event_at = Some(started.elapsed());
        }
    }
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert!(
        got.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{got}"
    );
    assert!(
        !got.to_ascii_lowercase().contains("content-encoding"),
        "{got}"
    );
    assert!(
        got.contains(": keepalive"),
        "keep-alive comments must pass through: {got}"
    );
    assert!(got.matches("event: head").count() >= 3, "{got}");
    assert!(
        first_event_at.unwrap() < Duration::from_millis(1000),
        "first event buffered: {first_event_at:?}"
    );
    drop(s);

    // A real SSE client reads the same stream.
    let url = format!(
        "http://127.0.0.1:{}/rpc/eth-beacon/eth/v1/events?topics=head",
        gw.port
    );
    let events = sse_client(&url, "x-token", &basic, 4);
    assert_eq!(events.len(), 4);
    assert!(events
        .iter()
        .all(|e| e["event"] == "head" && e["data"]["slot"] == "100"));
    // Arrivals are spread out as the node sent them (~300 ms apart), not in one burst.
    let spread = events[3]["t"].as_f64().unwrap() - events[0]["t"].as_f64().unwrap();
    assert!(spread > 0.5, "events arrived together: {events:?}");

    // A node dies (connection refused): calls move to the next CL host, none fail.
    drop(a);
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..8 {
        let r = gw.get(
            "/rpc/eth-beacon/eth/v1/node/version",
            &[("x-token", &basic)],
        );
        assert_eq!(r.status, 200, "call {i}: {}", r.text());
    }
    // With every node gone: 502 in the chain REST envelope.
    drop(b);
    std::thread::sleep(Duration::from_millis(100));
    let r = gw.get(
        "/rpc/eth-beacon/eth/v1/node/version",
        &[("x-token", &basic)],
    );
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["error"], "upstream_unavailable");
    assert!(r.json()["request_id"].is_string());
}

#[test]
fn json_rpc_over_websocket_is_proxied() {
    // The host's HTTP endpoint cannot upgrade (a plain JSON-RPC fixture, like a node's
    // HTTP port); its `ws_url` is the node that can, so the upgrade must go there.
    let anvil = Anvil::start(1, &[]);
    let http_only = Fixture::json_rpc();
    let host = format!(
        "{{id: el-1, url: \"{}\", ws_url: \"ws://127.0.0.1:{}\", family: el-anvil, capabilities: [ws]}}",
        http_only.url(),
        anvil.port
    );
    let gw = Gateway::start(GatewayOpts {
        pools: format!("  eth_el:\n    hosts:\n      - {host}\n"),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    // A minimal WebSocket client: handshake, one masked text frame, one answer.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /rpc/eth HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nx-token: {key}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_string();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
    let payload =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}).to_string();
    let mask = [1u8, 2, 3, 4];
    let mut frame = vec![0x81, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&mask);
    frame.extend(payload.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    s.write_all(&frame).unwrap();
    let mut hdr = [0u8; 2];
    s.read_exact(&mut hdr).unwrap();
    assert_eq!(hdr[0], 0x81, "a text frame");
    let len = match hdr[1] & 0x7f {
        126 => {
            let mut l = [0u8; 2];
            s.read_exact(&mut l).unwrap();
            u16::from_be_bytes(l) as usize
        }
        n => n as usize,
    };
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["result"], "0x1", "{v}");

    // Without a key the upgrade is refused before any node is contacted.
    let r = request(gw.port, "GET", "/rpc/eth", &WS_UPGRADE, b"").unwrap();
    assert_eq!(r.status, 401);
}

const HINT: &str = r#"{"hash":"0x1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c5b6a7988","logs":null,"txs":[{"to":"0x0000000000000000000000000000000000000001","functionSelector":"0xa9059cbb","callData":null}],"gasUsed":null,"mevGasPrice":"0x3b9aca00"}"#;

fn mev_share_node(status: u16, silent: bool) -> Fixture {
    Fixture::start(move |req| match req.path.as_str() {
        "/" if req.header("accept") == Some("text/event-stream") => {
            if status != 200 {
                FixtureResponse::status(status, "upstream error")
            } else if silent {
                FixtureResponse::events(vec![String::new()], Duration::from_secs(30))
            } else {
                FixtureResponse::events(
                    vec![format!("data: {HINT}\n\n"), ":ping\n\n".into()],
                    Duration::from_millis(100),
                )
            }
        }
        // Health probes (GET /, no event-stream Accept).
        _ => FixtureResponse::status(404, "not here"),
    })
}

fn mev_gateway(node: &Fixture, window_secs: u64) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_mev_share:\n    hosts:\n      - {{id: mevshare-1, url: \"{}\", family: mev-share}}\n",
            node.url()
        ),
        extra_yaml: format!("streams:\n  mev_share_window_secs: {window_secs}\n  ping_interval_secs: 1\n{UNLIMITED}"),
        ..Default::default()
    })
}

/// Open the stream; returns the socket and the response head.
fn open_stream(port: u16, key: &str) -> (std::net::TcpStream, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
    write!(s, "GET /sse/eth-mev-share HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap_or(0) == 0 {
            break;
        }
        head.push(byte[0]);
    }
    (s, String::from_utf8_lossy(&head).into_owned())
}

/// Read until `needle` shows up (or EOF / timeout); returns what was read and whether it ended.
fn read_until(s: &mut std::net::TcpStream, needle: &str, within: Duration) -> (String, bool) {
    let start = Instant::now();
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < within && !got.contains(needle) {
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(_) => break,
        }
    }
    (got, false)
}

fn stream_status(port: u16, key: &str) -> (u16, String) {
    let (mut s, head) = open_stream(port, key);
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    if status == 200 {
        return (200, head);
    }
    let (body, _) = read_until(&mut s, "}", Duration::from_secs(2));
    (status, body)
}

#[test]
fn mev_share_stream_cap_window_and_errors() {
    let node = mev_share_node(200, false);
    let gw = mev_gateway(&node, 3);
    let (alice, bob) = (gw.key("scale", &[]), gw.key("scale", &[]));

    // Hints arrive event by event, each `data:` exactly as the upstream sent it.
    let started = Instant::now();
    let (mut a, head) = open_stream(gw.port, &alice);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let (got, _) = read_until(&mut a, "mevGasPrice", Duration::from_secs(2));
    assert!(got.contains(&format!("data: {HINT}")), "{got}");

    // One stream per user: a second one is refused before it starts; another user is fine.
    let (status, body) = stream_status(gw.port, &alice);
    assert_eq!(status, 429);
    assert!(
        body.contains(r#"{"code":429,"error":"stream_cap_exceeded"}"#),
        "{body}"
    );
    let (b_sock, head) = open_stream(gw.port, &bob);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(b_sock);

    // The window closes the stream (3 s here); the slot is free right after.
    let (_, ended) = read_until(&mut a, "never-appears", Duration::from_secs(6));
    let took = started.elapsed();
    assert!(ended, "the stream should end at the window");
    assert!(
        took >= Duration::from_millis(2800) && took < Duration::from_secs(6),
        "closed after {took:?}"
    );
    drop(a);
    std::thread::sleep(Duration::from_millis(200));

    // Concurrent attempts by one user: exactly one stream.
    let port = gw.port;
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let k = alice.clone();
            std::thread::spawn(move || {
                let (s, head) = open_stream(port, &k);
                (head.split_whitespace().nth(1).unwrap_or("0").to_string(), s)
            })
        })
        .collect();
    let results: Vec<(String, std::net::TcpStream)> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    let codes: Vec<&str> = results.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        codes.iter().filter(|c| **c == "200").count(),
        1,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == "429").count(),
        5,
        "{codes:?}"
    );
    // The client going away frees the slot.
    drop(results);
    let mut freed = false;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        let (s, head) = open_stream(gw.port, &alice);
        if head.starts_with("HTTP/1.1 200") {
            freed = true;
            drop(s);
            break;
        }
    }
    assert!(freed, "slot not released after the client left");

    // A real SSE client reads the hints.
    std::thread::sleep(Duration::from_millis(300));
    let url = format!("http://127.0.0.1:{}/sse/eth-mev-share", gw.port);
    let hints: Vec<Value> = sse_client(&url, "Authorization", &format!("Bearer {bob}"), 3)
        .into_iter()
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(hints.len(), 3);
    assert_eq!(hints[0], serde_json::from_str::<Value>(HINT).unwrap());

    // Errors before the stream, in the SSE envelope.
    let r = request(
        gw.port,
        "POST",
        "/sse/eth-mev-share",
        &[("Authorization", &format!("Bearer {alice}"))],
        b"",
    )
    .unwrap();
    assert_eq!(
        (r.status, r.json()),
        (405, json!({"error": "method_not_allowed", "code": 405}))
    );
    let business = gw.key("business", &[]);
    let r = gw.get(
        "/sse/eth-mev-share",
        &[("Authorization", &format!("Bearer {business}"))],
    );
    assert_eq!(
        (r.status, r.json()),
        (403, json!({"error": "tier_locked", "code": 403}))
    );

    // Memory stays flat across many opened and dropped streams.
    let pid = gw.proc.as_ref().unwrap().pid();
    let rss = || -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines()
            .find(|l| l.starts_with("VmRSS:"))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap()
    };
    let open_drop = |n: usize| {
        for _ in 0..n {
            let (mut s, head) = open_stream(gw.port, &bob);
            if head.starts_with("HTTP/1.1 200") {
                let _ = read_until(&mut s, "data:", Duration::from_millis(500));
            }
            drop(s);
            std::thread::sleep(Duration::from_millis(15));
        }
    };
    open_drop(50); // warm up allocator pools
    let before = rss();
    open_drop(300);
    // Read once the dropped streams have ended on the edge's side: on a loaded box some
    // are still open a moment after the last drop (and each worker gives freed pages
    // back once a second). A leak stays, so it still fails after the wait.
    let settled = Instant::now() + Duration::from_secs(5);
    let mut after = rss();
    while after >= before + 8 * 1024 && Instant::now() < settled {
        std::thread::sleep(Duration::from_millis(250));
        after = rss();
    }
    eprintln!("RSS before {before} KiB, after 300 streams {after} KiB");
    assert!(
        after < before + 8 * 1024,
        "RSS grew from {before} to {after} KiB"
    );
}

#[test]
fn mev_share_pings_when_idle_and_reports_upstream_failures() {
    let quiet = mev_share_node(200, true);
    let gw = mev_gateway(&quiet, 60);
    let key = gw.key("scale", &[]);
    let (mut s, head) = open_stream(gw.port, &key);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (got, _) = read_until(&mut s, ":ping", Duration::from_secs(3));
    assert!(got.contains(":ping"), "no ping while idle: {got:?}");
    // The upstream going away ends the stream and frees the slot.
    drop(quiet);
    let (_, ended) = read_until(&mut s, "never", Duration::from_secs(5));
    assert!(ended, "stream should end when the upstream goes away");
    drop(s);

    // Upstream answers non-200: 502 before any stream.
    let failing = mev_share_node(500, false);
    let gw2 = mev_gateway(&failing, 60);
    let key2 = gw2.key("scale", &[]);
    let (status, body) = stream_status(gw2.port, &key2);
    assert_eq!(status, 502);
    assert!(
        body.contains(r#"{"code":502,"error":"mev_share_unavailable"}"#),
        "{body}"
    );
}

/// Two relays (`tests/standins/mev.py`, held to flashbots/relay-specs): the data API's
/// answers and pages pass through; its parameter rules are checked before any relay is
/// asked; a dead relay is passed over.
#[test]
fn relay_data_passthrough_checks_parameters_and_fails_over() {
    let (r1, r2) = (Standin::start("relay", &[]), Standin::start("relay", &[]));
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_mev_relay:\n    hosts:\n      - {{id: relay-1, url: \"{}\", family: relay}}\n      - {{id: relay-2, url: \"{}\", family: relay}}\n",
            r1.url(),
            r2.url()
        ),
        extra_yaml: format!("health:\n  interval_ms: 600000\n{UNLIMITED}"),
        ..Default::default()
    });
    let pro = gw.key("pro", &[]);
    let base = "/v1/eth/mev/relay/relay/v1/data/bidtraces";
    let page = |query: &str| {
        let r = gw.get(
            &format!("{base}/proposer_payload_delivered?{query}"),
            &[("x-token", &pro)],
        );
        assert_eq!(r.status, 200, "{query}: {}", r.text());
        r.json().as_array().unwrap().clone()
    };
    let slot = |v: &Value| v["slot"].as_str().unwrap().parse::<u64>().unwrap();
    // Pages, as the data API pages: `limit` items, newest slot first; `cursor` is the
    // highest slot of the next page.
    let first = page("limit=3");
    assert_eq!(first.len(), 3);
    assert!(slot(&first[0]) > slot(&first[2]));
    let cursor = slot(&first[2]) - 1;
    let next = page(&format!("limit=3&cursor={cursor}"));
    assert_eq!(next.len(), 3);
    assert!(slot(&next[0]) <= cursor, "{next:?}");
    let by_value = page("limit=5&order_by=-value");
    let values: Vec<u128> = by_value
        .iter()
        .map(|v| v["value"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] >= w[1]), "{values:?}");
    // The relay's own parameter rules, checked before any relay is asked.
    let before = r1.hits() + r2.hits();
    for bad in [
        "proposer_payload_delivered?slot=1&cursor=2",
        "proposer_payload_delivered?limit=201",
        "proposer_payload_delivered?order_by=gas",
        "builder_blocks_received?limit=10",
        "builder_blocks_received?slot=1&cursor=3",
        "proposer_payload_delivered?block_hash=0x1234",
    ] {
        let r = gw.get(&format!("{base}/{bad}"), &[("x-token", &pro)]);
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("invalid_params")),
            "{bad}"
        );
    }
    let r = gw.get(
        "/v1/eth/mev/relay/relay/v1/builder/validators",
        &[("x-token", &pro)],
    );
    assert_eq!(r.status, 404);
    assert_eq!(r1.hits() + r2.hits(), before);
    // Plan: pro and above.
    let basic = gw.key("basic", &[]);
    let r = gw.get(
        &format!("{base}/proposer_payload_delivered"),
        &[("x-token", &basic)],
    );
    assert_eq!(r.status, 403);
    // One relay dies: every call is still answered, by the other.
    drop(r1);
    let served = r2.hits();
    for _ in 0..6 {
        assert_eq!(page(&format!("slot={}", slot(&first[0]))).len(), 1);
    }
    assert_eq!(r2.hits(), served + 6);
}

/// One SSE reader on a raw socket: the events it has read so far.
struct EventReader {
    socket: std::net::TcpStream,
    pending: String,
    /// The answer's status, once its head has arrived.
    status: Option<u16>,
    closed: bool,
}

/// One event as it came: its `id:`, `event:` and `data:` fields.
type SseEvent = (Option<String>, Option<String>, String);

impl EventReader {
    fn open(port: u16, key: &str, last_event_id: Option<&str>) -> EventReader {
        EventReader::open_topics(port, key, "head", last_event_id)
    }

    fn open_topics(port: u16, key: &str, topics: &str, last_event_id: Option<&str>) -> EventReader {
        let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let resume = last_event_id
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        write!(socket, "GET /rpc/eth-beacon/eth/v1/events?topics={topics} HTTP/1.1\r\nHost: x\r\nx-token: {key}\r\nAccept: text/event-stream\r\n{resume}\r\n").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        EventReader {
            socket,
            pending: String::new(),
            status: None,
            closed: false,
        }
    }

    /// Whatever arrived, as complete events (comments skipped).
    fn poll_events(&mut self) -> Vec<SseEvent> {
        let mut buf = [0u8; 16384];
        loop {
            match self.socket.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => self.pending.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(_) => break,
            }
        }
        if self.status.is_none() {
            self.status = self
                .pending
                .strip_prefix("HTTP/1.1 ")
                .and_then(|rest| rest.get(..3)?.parse().ok());
        }
        let mut out = Vec::new();
        while let Some(end) = self.pending.find("\n\n") {
            let block: String = self.pending.drain(..end + 2).collect();
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::to_string)
            };
            if let Some(data) = field("data: ") {
                out.push((field("id: "), field("event: "), data));
            }
        }
        out
    }

    /// The fixture's events as `(id, tick)`.
    fn poll(&mut self) -> Vec<(String, u64)> {
        self.poll_events()
            .into_iter()
            .filter_map(|(id, _, data)| {
                let v: Value = serde_json::from_str(&data).unwrap();
                Some((id?, v["tick"].as_str().unwrap().parse().unwrap()))
            })
            .collect()
    }
}

fn event_stream_requests(node: &Fixture) -> usize {
    node.seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.path.starts_with("/eth/v1/events"))
        .count()
}

#[test]
fn beacon_events_are_one_node_stream_shared_across_a_node_failure() {
    let a = beacon_node(100);
    let b = beacon_node(100);
    let gw = Gateway::start(GatewayOpts {
        pools: cl_pool(&[("cl-a", &a, "cl-lighthouse"), ("cl-b", &b, "cl-teku")]),
        extra_yaml: format!("health:\n  interval_ms: 600000\n{UNLIMITED}"),
        ..Default::default()
    });
    let key = gw.key("basic", &[]);

    // 40 clients on the same topics: one node stream between them.
    let mut readers: Vec<EventReader> = (0..40)
        .map(|_| EventReader::open(gw.port, &key, None))
        .collect();
    let mut got: Vec<Vec<(String, u64)>> = vec![Vec::new(); readers.len()];
    let until = |readers: &mut Vec<EventReader>, got: &mut Vec<Vec<(String, u64)>>, n: usize| {
        let start = Instant::now();
        while got.iter().any(|g| g.len() < n) && start.elapsed() < Duration::from_secs(10) {
            for (r, g) in readers.iter_mut().zip(got.iter_mut()) {
                g.extend(r.poll());
            }
        }
    };
    until(&mut readers, &mut got, 3);
    assert!(got.iter().all(|g| g.len() >= 3), "{got:?}");
    assert_eq!(
        event_stream_requests(&a) + event_stream_requests(&b),
        1,
        "40 clients, one node stream"
    );

    // The node serving it dies: the stream moves to the other node, no client is closed,
    // and every client goes on receiving, each event once and in order.
    let serving_a = event_stream_requests(&a) == 1;
    let (dead, alive) = if serving_a { (a, b) } else { (b, a) };
    let before: Vec<usize> = got.iter().map(Vec::len).collect();
    drop(dead);
    until(&mut readers, &mut got, before.iter().max().unwrap() + 4);
    for (i, (g, r)) in got.iter().zip(&readers).enumerate() {
        assert!(!r.closed, "client {i} was closed");
        assert!(g.len() >= before[i] + 4, "client {i} stalled: {g:?}");
        let ticks: Vec<u64> = g.iter().map(|(_, t)| *t).collect();
        assert!(
            ticks.windows(2).all(|w| w[0] < w[1]),
            "client {i}: duplicate or out of order: {ticks:?}"
        );
    }
    assert_eq!(
        event_stream_requests(&alive),
        1,
        "one reopen, on the other node"
    );

    // A client that reconnects with Last-Event-ID gets what it missed, then goes on.
    let first = &got[0];
    let (resume_id, resume_tick) = first[first.len() - 3].clone();
    drop(readers.remove(0));
    let mut back = EventReader::open(gw.port, &key, Some(&resume_id));
    let mut again = Vec::new();
    let start = Instant::now();
    while again.len() < 3 && start.elapsed() < Duration::from_secs(5) {
        again.extend(back.poll());
    }
    assert!(again.len() >= 3, "{again:?}");
    assert!(
        again[0].1 > resume_tick && again.iter().any(|(_, t)| *t == first[first.len() - 2].1),
        "replay should start right after {resume_tick}: {again:?} (had {first:?})"
    );
    assert_eq!(
        event_stream_requests(&alive),
        1,
        "the reconnect joined the same stream"
    );
    let metrics = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .unwrap()
        .text();
    assert!(
        metrics
            .contains("chainedge_upstream_subscriptions{kind=\"beacon_events\",pool=\"eth_cl\"} 1"),
        "{metrics}"
    );
}

/// Beacon events through the edge from the beacon stand-in (held to ethereum/beacon-APIs'
/// event stream by `tests/standins.rs`): each event keeps the node's `event:` / `data:`
/// framing and gains the edge's `id:`; a client back with `Last-Event-ID` is given the
/// events after it, each once.
#[test]
fn beacon_events_from_the_stand_in_keep_their_framing_and_resume_by_id() {
    let node = Standin::start("beacon", &["--slot-secs", "0.3"]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_cl:\n    hosts:\n      - {{id: cl-1, url: \"{}\", family: cl-lighthouse}}\n",
            node.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let key = gw.key("basic", &[]);
    // Complete events as (id, event, data), read until `count` arrived.
    let read = |last_event_id: Option<&str>, count: usize| {
        let mut reader = EventReader::open_topics(gw.port, &key, "head,block", last_event_id);
        let (mut events, started) = (Vec::new(), Instant::now());
        while events.len() < count && started.elapsed() < Duration::from_secs(15) {
            events.extend(reader.poll_events());
        }
        assert_eq!(reader.status, Some(200), "{events:?}");
        events
    };
    let first = read(None, 6);
    assert!(first.len() >= 6, "{first:?}");
    let mut seqs = Vec::new();
    for (id, event, data) in &first {
        let id = id
            .as_deref()
            .unwrap_or_else(|| panic!("an event without id: {first:?}"));
        let seq: u64 = id.rsplit_once('-').unwrap().1.parse().unwrap();
        seqs.push(seq);
        let v: Value = serde_json::from_str(data).unwrap();
        let keys: &[&str] = match event.as_deref() {
            Some("block") => &["slot", "block", "execution_optimistic"],
            Some("head") => &[
                "slot",
                "block",
                "state",
                "epoch_transition",
                "execution_optimistic",
            ],
            other => panic!("event {other:?} is not a topic asked for"),
        };
        assert!(keys.iter().all(|k| v.get(k).is_some()), "{event:?} {v}");
    }
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "ids in order: {seqs:?}"
    );
    // Back after the third: the fourth comes next, then on without a repeat.
    let resume_from = first[2].0.as_deref().unwrap();
    let again = read(Some(resume_from), 3);
    assert_eq!(again[0], first[3], "{again:?} after {resume_from}");
    assert_eq!(again[1], first[4]);
}

/// The instance's stream bound is not "no healthy upstream": its own 503 with a retry.
#[test]
fn mev_share_instance_capacity_is_its_own_refusal() {
    let node = mev_share_node(200, false);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_mev_share:\n    hosts:\n      - {{id: mevshare-1, url: \"{}\", family: mev-share}}\n",
            node.url()
        ),
        extra_yaml: format!("streams:\n  max_streams: 1\n{UNLIMITED}"),
        ..Default::default()
    });
    let (alice, bob) = (gw.key("scale", &[]), gw.key("scale", &[]));
    let (a, head) = open_stream(gw.port, &alice);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (mut s, head) = open_stream(gw.port, &bob);
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(
        head.contains("Retry-After: 5") || head.contains("retry-after: 5"),
        "{head}"
    );
    let (body, _) = read_until(&mut s, "}", Duration::from_secs(2));
    assert!(
        body.contains(r#""error":"stream_capacity_reached""#),
        "{body}"
    );
    assert!(body.contains(r#""code":503"#), "{body}");
    // The place frees when the first stream goes.
    drop(a);
    let mut opened = false;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        if stream_status(gw.port, &bob).0 == 200 {
            opened = true;
            break;
        }
    }
    assert!(opened, "a freed place is taken");
}
