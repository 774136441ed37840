//! One reading of every call (issue 63): what reaches a node is what the edge checked.
//! The node here is Go (`tests/gonode`, go-ethereum's request shapes under
//! `encoding/json`: case-folded keys, the last one wins), as geth, erigon and bor read
//! JSON-RPC; anvil refuses such envelopes, which is why only a Go node shows the gap.
//! Every attack goes in every way the edge takes JSON-RPC: HTTP/1.1, HTTP/2 over TLS,
//! WebSocket messages, the per-host route, the builder and private-transaction
//! endpoints; the node's own record of what it executed is the verdict.

use common::*;
use serde_json::Value;
use std::time::Duration;

const A: &str = "0x00000000000000000000000000000000000000aa";
const B: &str = "0x00000000000000000000000000000000000000bb";
/// The victim's address and an attacker's, for the shared cache.
const V: &str = "0x000000000000000000000000000000000000beef";
const X: &str = "0x000000000000000000000000000000000000dead";

struct Setup {
    node: GoNode,
    gw: Gateway,
}

fn setup() -> Setup {
    let node = GoNode::start();
    let host = |id: &str, family: &str| {
        format!(
            "    hosts:\n      - {{id: {id}, url: \"{}\", family: {family}, capabilities: [debug, trace, txpool]}}\n",
            node.url()
        )
    };
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n{}  eth_private_rpc:\n{}  eth_mev_builder:\n{}",
            host("el-1", "el-geth"),
            host("private-1", "el-geth"),
            host("builder-1", "builder"),
        ),
        extra_yaml: UNLIMITED.into(),
        tls: true,
        ..Default::default()
    });
    Setup { node, gw }
}

/// A key of `plan` with `restrictions` (JSON) made by the CLI.
fn restricted(gw: &Gateway, plan: &str, restrictions: &str) -> String {
    let tenant = gw.cli(&["tenants", "create", "--name", plan, "--plan", plan]);
    gw.cli(&[
        "keys",
        "create",
        "--tenant",
        &tenant,
        "--restrictions",
        restrictions,
    ])
}

/// The ways into the gateway's JSON-RPC entry for a body as text (bodies here are not
/// what `serde_json` would write: they hold members it would merge).
#[derive(Clone, Copy, Debug)]
enum Way {
    Http1,
    Http2,
    WebSocket,
    /// `/v1/eth/mesh/rpc/el-1` (loopback is admin: no key).
    PerHost,
}

const WAYS: [Way; 4] = [Way::Http1, Way::Http2, Way::WebSocket, Way::PerHost];

/// The answer to `body` sent `way` with `key`: (HTTP status, or 101 for WebSocket; the
/// JSON-RPC answer).
fn send(gw: &Gateway, way: Way, key: &str, body: &str) -> (u16, Value) {
    match way {
        Way::Http1 | Way::PerHost => {
            let path = match way {
                Way::PerHost => "/v1/eth/mesh/rpc/el-1",
                _ => "/rpc/eth",
            };
            let mut h = vec![("Content-Type", "application/json")];
            if !matches!(way, Way::PerHost) {
                h.push(("x-token", key));
            }
            let r = request(gw.port, "POST", path, &h, body.as_bytes()).unwrap();
            (
                r.status,
                serde_json::from_slice(&r.body).unwrap_or(Value::Null),
            )
        }
        Way::Http2 => {
            let url = format!("https://127.0.0.1:{}/rpc/eth", gw.tls_port.unwrap());
            let token = format!("x-token: {key}");
            let curl = || {
                let out = std::process::Command::new("curl")
                    .args([
                        "-sSk",
                        "--http2",
                        "-o",
                        "-",
                        "-w",
                        "\n%{http_version} %{http_code}",
                    ])
                    .args(["-H", "Content-Type: application/json", "-H", &token])
                    .args(["--data-binary", body, &url])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                (text, String::from_utf8_lossy(&out.stderr).into_owned())
            };
            // No HTTP answer at all ("0 000": the TLS connection failed before a request
            // was read, seen once under a loaded run) is tried again; an answer never is.
            let (mut text, mut said) = curl();
            for _ in 0..2 {
                if !text.ends_with("\n0 000") {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(300));
                (text, said) = curl();
            }
            let (answer, tail) = text.rsplit_once('\n').unwrap();
            assert!(tail.starts_with("2 "), "not HTTP/2: {tail} {said}");
            (
                tail[2..].parse().unwrap(),
                serde_json::from_str(answer).unwrap_or(Value::Null),
            )
        }
        Way::WebSocket => {
            let mut ws = ws_connect(gw.port, "/rpc/eth", &[("x-token", key)]).expect("upgrade");
            ws.get_mut()
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            ws.send(tungstenite::Message::text(body)).unwrap();
            loop {
                match ws.read().expect("an answer") {
                    tungstenite::Message::Text(t) => {
                        return (101, serde_json::from_str(&t).unwrap());
                    }
                    tungstenite::Message::Close(c) => panic!("closed: {c:?}"),
                    _ => {}
                }
            }
        }
    }
}

/// The error an answer carries (the edge's code in `data.error`, else the JSON-RPC code).
fn refusal(answer: &Value) -> Option<String> {
    let e = answer.get("error")?;
    Some(
        e["data"]["error"]
            .as_str()
            .map(str::to_string)
            .or_else(|| e.as_str().map(str::to_string))
            .unwrap_or_else(|| e["code"].to_string()),
    )
}

#[test]
fn a_go_node_runs_only_what_the_edge_checked() {
    let Setup { node, gw } = setup();
    let free = gw.key("free", &[]);
    let reader = gw.key("pro", &["rpc:read"]);
    let narrow = restricted(
        &gw,
        "pro",
        &format!(
            r#"{{"allowed_contracts":["{A}"],"allowed_methods":["eth_call","eth_getLogs","eth_getBalance","eth_blockNumber"]}}"#
        ),
    );
    let raw_tx = "0x02f86b0180843b9aca00850c92a69c0082520894000000000000000000000000000000000000dead0180c001a0e3a5b2ea3c0c52e5a1c4b9e22b0a0cc6a8b4b4b6e9c1b1f7a0a0a0a0a0a0a0a0a05e3a5b2ea3c0c52e5a1c4b9e22b0a0cc6a8b4b4b6e9c1b1f7a0a0a0a0a0a0a0a0";
    // (who, body): each is one thing to the edge and another to a Go node.
    let attacks: Vec<(&str, String)> = vec![
        (&free, r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","METHOD":"debug_setHead","params":["0x1"]}"#.into()),
        (&free, r#"{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","Method":"admin_addPeer","params":["enode://x"]}"#.into()),
        (&free, r#"{"jsonrpc":"2.0","id":1,"Method":"admin_addPeer","params":["enode://x"]}"#.into()),
        (&reader, format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_chainId","mEthod":"eth_sendRawTransaction","params":["{raw_tx}"]}}"#)),
        (&narrow, format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[{{"to":"{A}","TO":"{B}"}},"latest"]}}"#)),
        (&narrow, format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{{"address":"{A}","ADDRESS":["{B}"]}}]}}"#)),
        (&narrow, format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getLogs\",\"params\":[{{\"address\":\"{A}\",\"addre\u{17f}s\":[\"{B}\"]}}]}}")),
        (&narrow, format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[],"Method":"eth_call","PARAMS":[{{"to":"{B}"}},"latest"]}}"#)),
        // The logs guard: the range the edge reads is none; the node's is everything.
        (&free, format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{{"address":"{A}"}}],"PARAMS":[{{"address":"{A}","fromBlock":"0x0","toBlock":"0xffffffff"}}]}}"#)),
        (&free, format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"eth_getLogs\",\"params\":[{{\"address\":\"{A}\",\"fromBloc\u{212a}\":\"0x0\",\"TOBLOCK\":\"0xffffffff\"}}]}}")),
        // The shared cache: X's balance under V's key.
        (&free, format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["{V}","0x7"],"PARAMS":["{X}","0x7"]}}"#)),
    ];
    for (key, body) in &attacks {
        for way in WAYS {
            let (status, answer) = send(&gw, way, key, body);
            let code = refusal(&answer);
            assert!(
                code.is_some() && (status != 200 || matches!(way, Way::WebSocket)),
                "{way:?} {body}: {status} {answer}"
            );
            if matches!(way, Way::PerHost) {
                // The admin envelope on the per-host route.
                assert_eq!(status, 400, "{body}: {answer}");
                assert_eq!(answer["error"], "invalid_params", "{body}: {answer}");
            }
        }
    }
    // In a batch, the element is refused and the rest answered.
    let batch = format!(
        r#"[{{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["{V}","0x7"],"PARAMS":["{X}","0x7"]}},{{"jsonrpc":"2.0","id":2,"method":"eth_getBalance","params":["{V}","0x8"]}}]"#
    );
    for way in WAYS {
        let (_, answers) = send(&gw, way, &free, &batch);
        assert_eq!(answers[0]["error"]["code"], -32600, "{way:?} {answers}");
        assert_eq!(answers[1]["result"], "0x1beef", "{way:?} {answers}");
    }
    // The builder and private-transaction endpoints (their own method lists).
    let business = gw.key("business", &[]);
    for (path, body) in [
        (
            "/v1/eth/mev/builder",
            r#"{"jsonrpc":"2.0","id":1,"method":"eth_sendBundle","METHOD":"debug_setHead","params":[{"txs":[]}]}"#.to_string(),
        ),
        (
            "/v1/eth/mev/private-rpc",
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","METHOD":"admin_addPeer","params":["{raw_tx}"]}}"#
            ),
        ),
        (
            "/v1/eth/mev/builder",
            r#"[{"jsonrpc":"2.0","id":1,"method":"eth_sendBundle","METHOD":"debug_setHead","params":[{"txs":[]}]}]"#.to_string(),
        ),
    ] {
        let h = [
            ("Content-Type", "application/json"),
            ("x-token", business.as_str()),
        ];
        let r = request(gw.port, "POST", path, &h, body.as_bytes()).unwrap();
        assert_eq!(r.status, 400, "{path} {body}: {}", r.text());
    }
    // Subscriptions: the same rule, and only what the kind takes.
    for body in [
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["logs",{{"address":"{A}","ADDRESS":"{B}"}}]}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["logs",{{"address":"{A}","fromBlock":"0x0"}}]}}"#),
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads",{"x":1}]}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","METHOD":"eth_unsubscribe","params":["newHeads"]}"#.to_string(),
    ] {
        let (_, answer) = send(&gw, Way::WebSocket, &narrow, &body);
        assert!(answer.get("error").is_some(), "{body}: {answer}");
    }

    // Nothing of it reached the node.
    let ran = node.executed();
    let text = serde_json::to_string(&ran).unwrap();
    for forbidden in [
        "debug_setHead",
        "admin_addPeer",
        "eth_sendRawTransaction",
        "eth_sendBundle",
        B,
        X,
        "0xffffffff",
        "\"0x0\"",
    ] {
        assert!(
            !text.contains(forbidden),
            "{forbidden} reached the node: {text}"
        );
    }

    // What passes reaches the node exactly as the edge read it, unknown members dropped:
    // and the victim's balance is its own, never the attacker's from the cache.
    let plain = format!(
        r#"{{"jsonrpc":"2.0","id":"v","method":"eth_getBalance","params":["{V}","0x7"],"comment":{{"method":"debug_setHead"}}}}"#
    );
    for way in WAYS {
        let (status, answer) = send(&gw, way, &free, &plain);
        assert!(matches!(status, 200 | 101), "{way:?}: {status} {answer}");
        assert_eq!(answer["result"], "0x1beef", "{way:?}: {answer}");
        assert_eq!(answer["id"], "v", "{way:?}: {answer}");
    }
    let call = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"eth_call","params":[{{"to":"{A}","data":"0x01"}},"latest"]}}"#
    );
    let (_, answer) = send(&gw, Way::Http1, &narrow, &call);
    assert_eq!(answer["result"], A, "{answer}");
    let ran = node.executed();
    let balances: Vec<&Value> = ran
        .iter()
        .filter(|r| r["method"] == "eth_getBalance")
        .collect();
    assert!(!balances.is_empty(), "{ran:?}");
    for b in &balances {
        assert_eq!(b["args"][0], V, "{b}");
    }
    let calls: Vec<&Value> = ran.iter().filter(|r| r["method"] == "eth_call").collect();
    assert_eq!(calls.len(), 1, "{ran:?}");
    assert_eq!(calls[0]["args"][0]["to"], A);
    assert!(
        !ran.iter().any(|r| r["method"] == "debug_setHead"),
        "{ran:?}"
    );
}
