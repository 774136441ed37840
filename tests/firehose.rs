//! The Polygon firehose: connection info hands out a short-lived token bound to the key
//! and the channel; the channels stream the chain's logs (from the shared node
//! subscription) and mempool arrivals (from the watcher) off a real anvil on chain 137;
//! missing, tampered, foreign-channel and expired tokens are refused at the upgrade;
//! an open channel ends when its token expires or its key is revoked; the switched-off
//! channels refuse every upgrade.

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tungstenite::Message;

/// Open `path` presenting `token` as a Bearer header, or as a subprotocol; the HTTP
/// status and body when the upgrade is refused.
fn open(
    port: u16,
    path: &str,
    token: Option<&str>,
    as_protocol: bool,
) -> Result<(Ws, Option<String>), (u16, String)> {
    let header = token.map(|t| {
        if as_protocol {
            (
                "sec-websocket-protocol",
                format!("chainedge.firehose.v1, {t}"),
            )
        } else {
            ("authorization", format!("Bearer {t}"))
        }
    });
    let headers: Vec<(&str, &str)> = header.iter().map(|(n, v)| (*n, v.as_str())).collect();
    ws_connect_protocol(port, path, &headers)
}

/// The next text message within `within`, as JSON.
fn next_item(ws: &mut Ws, within: Duration) -> Option<Value> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        match ws.read() {
            Ok(Message::Text(t)) => return serde_json::from_str(&t).ok(),
            Ok(_) => continue,
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                continue
            }
            Err(_) => return None,
        }
    }
    None
}

#[test]
fn firehose_tokens_open_their_channel_and_the_channels_stream() {
    let chain = Anvil::start(137, &[]);
    let secret = "f".repeat(64);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_bor:\n    hosts:\n      - {{id: bor-anvil, url: \"{}\", family: bor, capabilities: [txpool, ws]}}\n",
            chain.url()
        ),
        extra_yaml: format!(
            "streams:\n  firehose:\n    secret: env:FIREHOSE_SECRET\n    token_ttl_secs: 3\n    public_url: \"ws://edge.example\"\n\
             mempool:\n  polygon:\n    poll_ms: 200\nauth:\n  key_cache_ttl_ms: 1000\n{UNLIMITED}"
        ),
        env: vec![("FIREHOSE_SECRET".into(), secret)],
        ..Default::default()
    });
    let (pro, business) = (gw.key("pro", &[]), gw.key("business", &[]));
    let info = |key: &str, channel: &str| {
        gw.get(
            &format!("/v1/polygon/firehose/{channel}"),
            &[("x-token", key)],
        )
    };
    let r = info(&pro, "logs");
    assert_eq!(
        (r.status, r.json()["required_tier"].as_str()),
        (403, Some("business"))
    );
    let r = info(&business, "logs");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    let logs = r.json();
    assert_eq!(logs["url"], "ws://edge.example/ws/polygon/logs");
    assert_eq!(logs["expires_in_secs"], 3);
    let logs_token = logs["token"].as_str().unwrap().to_string();
    assert!(
        !logs["url"].as_str().unwrap().contains(&logs_token),
        "never in the URL"
    );

    // Refused at the upgrade: no token, a tampered one, one for the other channel; the
    // switched-off channels refuse every upgrade, token or not.
    let refused = |path: &str, token: Option<&str>| {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let mut h = vec![
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
        ];
        if let Some(b) = &bearer {
            h.push(("Authorization", b));
        }
        let r = request(gw.port, "GET", path, &h, b"").unwrap();
        (
            r.status,
            r.json()["error"].as_str().unwrap_or_default().to_string(),
        )
    };
    let mut tampered = logs_token.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    for (path, token, expected) in [
        ("/ws/polygon/logs", None, (401, "invalid_token")),
        (
            "/ws/polygon/logs",
            Some(tampered.as_str()),
            (401, "invalid_token"),
        ),
        (
            "/ws/polygon/mempool",
            Some(logs_token.as_str()),
            (401, "invalid_token"),
        ),
        (
            "/ws/polygon/bor-pending",
            Some(logs_token.as_str()),
            (503, "route_disabled"),
        ),
        ("/ws/polygon/heimdall", None, (503, "route_disabled")),
    ] {
        let (status, code) = refused(path, token);
        assert_eq!((status, code.as_str()), expected, "{path} {token:?}");
    }
    assert_eq!(
        open(gw.port, "/ws/polygon/logs", Some(&tampered), false)
            .err()
            .map(|e| e.0),
        Some(401)
    );

    // The logs channel: a contract that emits a log on every call.
    let from = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
    let (mut ws, protocol) = open(gw.port, "/ws/polygon/logs", Some(&logs_token), true).unwrap();
    assert_eq!(protocol.as_deref(), Some("chainedge.firehose.v1"));
    let deploy = chain.call(
        "eth_sendTransaction",
        json!([{"from": from, "data": "0x6560006000a0006000526006601af3"}]),
    );
    let mut contract = Value::Null;
    for _ in 0..50 {
        contract =
            chain.call("eth_getTransactionReceipt", json!([deploy]))["contractAddress"].clone();
        if contract.is_string() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    chain.call(
        "eth_sendTransaction",
        json!([{"from": from, "to": contract}]),
    );
    let log = next_item(&mut ws, Duration::from_secs(10)).expect("a log");
    assert_eq!(log["address"], contract, "{log}");
    assert_eq!(log["removed"], false);

    // The mempool channel: a transaction that waits in the pool.
    let mempool_token = info(&business, "mempool").json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut pool_ws, protocol) =
        open(gw.port, "/ws/polygon/mempool", Some(&mempool_token), false).unwrap();
    assert_eq!(protocol, None);
    chain.call("evm_setAutomine", json!([false]));
    let pending = chain.call(
        "eth_sendTransaction",
        json!([{"from": from, "to": contract, "gasPrice": "0x77359400"}]),
    );
    let arrival = next_item(&mut pool_ws, Duration::from_secs(10)).expect("an arrival");
    assert_eq!(arrival["hash"], pending, "{arrival}");
    assert_eq!(arrival["gas_price_wei"], "2000000000");
    chain.call("evm_setAutomine", json!([true]));

    // Expired: the same token after its lifetime opens nothing, and the channel it
    // opened has ended (a client asks for a new token and connects again).
    std::thread::sleep(Duration::from_millis(3100));
    let (status, code) = refused("/ws/polygon/logs", Some(&logs_token));
    assert_eq!((status, code.as_str()), (401, "token_expired"));
    assert_eq!(
        close_reason(&mut ws, Duration::from_secs(5)).as_deref(),
        Some("token expired")
    );

    // Revoked through the CLI (no Redis to announce it): a channel open on a fresh token
    // ends at the next recheck of its key, a quarter of the key cache TTL (1 s here).
    let (key, key_id) = gw.key_and_id("business");
    let token = info(&key, "logs").json()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (mut ws, _) = open(gw.port, "/ws/polygon/logs", Some(&token), false).unwrap();
    let revoked_at = Instant::now();
    gw.cli(&["keys", "revoke", "--id", &key_id]);
    assert_eq!(
        close_reason(&mut ws, Duration::from_secs(2)).as_deref(),
        Some("API key revoked or lapsed"),
        "closed {:?} after the revocation",
        revoked_at.elapsed()
    );
    // ... and the same unexpired token opens no new channel.
    let (status, body) = match open(gw.port, "/ws/polygon/logs", Some(&token), false) {
        Err(e) => e,
        Ok(_) => panic!("a revoked key's token opened a channel"),
    };
    assert_eq!(status, 401, "{body}");

    // A key narrowed to other client addresses, or to browser origins: its token opens
    // nothing from here, whoever presents it.
    for restrictions in [
        r#"{"allowed_ips":["203.0.113.0/24"]}"#,
        r#"{"allowed_origins":["https://app.example.com"]}"#,
    ] {
        let (key, key_id) = gw.key_and_id("business");
        let token = info(&key, "logs").json()["token"]
            .as_str()
            .unwrap()
            .to_string();
        gw.cli(&[
            "keys",
            "restrict",
            "--id",
            &key_id,
            "--restrictions",
            restrictions,
        ]);
        let (status, body) = match open(gw.port, "/ws/polygon/logs", Some(&token), false) {
            Err(e) => e,
            Ok(_) => panic!("{restrictions}: the token opened a channel"),
        };
        assert_eq!(status, 403, "{restrictions}: {body}");
        assert!(body.contains("key_restricted"), "{body}");
    }
}

/// Read until the server closes the channel (within `within`): its close reason.
fn close_reason(ws: &mut Ws, within: Duration) -> Option<String> {
    let end = Instant::now() + within;
    while Instant::now() < end {
        match ws.read() {
            Ok(Message::Close(frame)) => return frame.map(|f| f.reason.to_string()),
            Ok(_) => continue,
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                continue
            }
            Err(_) => return None,
        }
    }
    None
}
