//! Polygon's product endpoints against real nodes: the raw sender's three dispatch
//! routes with transactions signed by eth-account (one route down, one refusing, one a
//! real anvil chain 137), resends answered once, and every refusal before any node.

use common::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Transfers signed by eth-account for `chain_id`, nonces `first..first + count`.
fn signed(chain_id: u64, first: u64, count: u64) -> Vec<String> {
    let out = std::process::Command::new(python())
        .arg(root().join("tests/py/sign_tx.py"))
        .args([chain_id, first, count].map(|n| n.to_string()))
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A bor node that is up and healthy but refuses every transaction, as a node with a
/// higher price floor does; counts the transactions it was sent.
fn refusing_node(sent: Arc<AtomicUsize>) -> Fixture {
    Fixture::start(move |req| {
        let v: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let answer = |call: &Value| match call["method"].as_str() {
            Some("eth_blockNumber") => {
                json!({"jsonrpc": "2.0", "id": call["id"], "result": "0x10"})
            }
            Some("eth_syncing") => json!({"jsonrpc": "2.0", "id": call["id"], "result": false}),
            Some("eth_sendRawTransaction") => {
                sent.fetch_add(1, Ordering::SeqCst);
                json!({"jsonrpc": "2.0", "id": call["id"],
                       "error": {"code": -32000, "message": "transaction underpriced: tip needed 30000000000"}})
            }
            _ => json!({"jsonrpc": "2.0", "id": call["id"], "result": null}),
        };
        match &v {
            Value::Array(calls) => {
                FixtureResponse::json(Value::Array(calls.iter().map(answer).collect()))
            }
            call => FixtureResponse::json(answer(call)),
        }
    })
}

/// The transaction's receipt once it is mined (up to 10 s), else null.
fn receipt(chain: &Anvil, hash: &str) -> Value {
    for _ in 0..200 {
        let r = chain.call("eth_getTransactionReceipt", json!([hash]));
        if !r.is_null() {
            return r;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Value::Null
}

#[test]
fn polygon_sender_tries_its_routes_in_order_and_answers_a_resend_once() {
    let chain = Anvil::start(137, &[]);
    let refused = Arc::new(AtomicUsize::new(0));
    let refusing = refusing_node(refused.clone());
    let down = format!("http://127.0.0.1:{}", free_port());
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_bor:\n    hosts:\n      - {{id: bor-down, url: \"{down}\", family: bor}}\n\
             \x20 polygon_sender_anon:\n    hosts:\n      - {{id: anon-1, url: \"{}\", family: bor}}\n\
             \x20 polygon_sender_no_auth:\n    hosts:\n      - {{id: public-1, url: \"{}\", family: bor}}\n",
            refusing.url(),
            chain.url()
        ),
        extra_yaml: format!("health:\n  interval_ms: 300\n  timeout_ms: 300\n{UNLIMITED}"),
        ..Default::default()
    });
    let (free, basic) = (gw.key("free", &[]), gw.key("basic", &[]));
    let send = |key: &str, body: Value| {
        let h = [("Content-Type", "application/json"), ("x-token", key)];
        request(
            gw.port,
            "POST",
            "/v1/polygon/sender/raw",
            &h,
            body.to_string().as_bytes(),
        )
        .unwrap()
    };
    let txs = signed(137, 0, 4);

    // Route A is down and route B refuses: `auto` ends on C, which mines it.
    let r = send(&basic, json!({"raw_tx": txs[0]}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["path_used"], "upstreamc_no_auth");
    let hash = r.json()["tx_hash"].as_str().unwrap().to_string();
    assert_eq!(receipt(&chain, &hash)["status"], "0x1");
    assert_eq!(
        refused.load(Ordering::SeqCst),
        1,
        "route B was tried before C"
    );

    // A resend is answered from what the edge remembers: no route sees it again.
    let r = send(&basic, json!({"raw_tx": txs[0], "preferred_path": "auto"}));
    assert_eq!(
        (r.status, r.json()["tx_hash"].as_str()),
        (200, Some(hash.as_str()))
    );
    assert_eq!(r.json()["path_used"], "upstreamc_no_auth");
    assert_eq!(refused.load(Ordering::SeqCst), 1);

    // Eight resends of a new transaction at once: one submission, one answer for all.
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(|| {
                    let r = send(&basic, json!({"raw_tx": txs[1]}));
                    (r.status, r.json())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let first = &answers[0].1;
    assert!(
        answers.iter().all(|(s, b)| *s == 200 && b == first),
        "{answers:?}"
    );
    assert_eq!(
        refused.load(Ordering::SeqCst),
        2,
        "route B saw the transaction once"
    );
    assert_eq!(
        receipt(&chain, first["tx_hash"].as_str().unwrap())["status"],
        "0x1"
    );

    // A pinned route is the only one tried: B's refusal is the answer, with its reason;
    // A, down, is unavailable.
    let r = send(
        &basic,
        json!({"raw_tx": txs[2], "preferred_path": "upstreamb_anon"}),
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("tx_rejected")),
        "{}",
        r.text()
    );
    assert!(r.json()["message"]
        .as_str()
        .unwrap()
        .contains("underpriced"));
    let r = send(
        &basic,
        json!({"raw_tx": txs[2], "preferred_path": "upstreama_own"}),
    );
    assert!(matches!(r.status, 502 | 503), "{} {}", r.status, r.text());
    // A failure is not remembered: the same transaction goes through once asked again.
    let r = send(
        &basic,
        json!({"raw_tx": txs[2], "preferred_path": "upstreamc_no_auth"}),
    );
    assert_eq!(
        (r.status, r.json()["path_used"].as_str()),
        (200, Some("upstreamc_no_auth"))
    );
    let third = r.json()["tx_hash"].as_str().unwrap().to_string();

    // Free keys are not served; bad input never reaches a node.
    let r = send(&free, json!({"raw_tx": txs[3]}));
    assert_eq!(
        (r.status, r.json()["required_tier"].as_str()),
        (403, Some("basic"))
    );
    let refused_before = refused.load(Ordering::SeqCst);
    let zero_r = {
        // The legacy transaction (nonce 2) with its r replaced by zero.
        let t = &txs[2];
        let sig_r = t.len() - 2 * 66;
        assert_eq!(
            (&t[sig_r..sig_r + 2], &t[t.len() - 66..t.len() - 64]),
            ("a0", "a0")
        );
        format!("{}a0{}{}", &t[..sig_r], "00".repeat(32), &t[sig_r + 66..])
    };
    for bad in [
        json!({}),
        json!({"raw_tx": "0x12"}),
        json!({"raw_tx": "deadbeef"}),
        json!({"raw_tx": format!("0x02f8{}", "ab".repeat(40))}),
        json!({"raw_tx": format!("{}00", txs[3])}),
        json!({"raw_tx": zero_r}),
        json!({"raw_tx": txs[3], "preferred_path": "moon"}),
        json!({"raw_tx": txs[3], "preferred_path": "public"}),
        json!({"raw_tx": txs[3], "extra": 1}),
    ] {
        let r = send(&basic, bad.clone());
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("invalid_params")),
            "{bad}: {}",
            r.text()
        );
    }
    assert_eq!(
        refused.load(Ordering::SeqCst),
        refused_before,
        "refused input reached a node"
    );
    // The node mines each accepted transaction on its own time: the count is read once
    // the third is in a block (under load that took longer than the requests above).
    assert_eq!(receipt(&chain, &third)["status"], "0x1");
    assert_eq!(
        chain.call(
            "eth_getTransactionCount",
            json!(["0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "latest"])
        ),
        "0x3",
        "exactly the three accepted transactions were mined"
    );
}

/// A bor node with the `trace` capability that serves `trace_replayTransaction` as
/// Erigon writes it (flat frames, vmTrace, stateDiff in `*`/`+`/`=` form); counts calls.
fn erigon_like(calls: Arc<AtomicUsize>) -> Fixture {
    Fixture::start(move |req| {
        let v: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let answer = |call: &Value| {
            let result = match call["method"].as_str() {
                Some("eth_blockNumber") => json!("0x10"),
                Some("eth_syncing") => json!(false),
                Some("eth_getBlockByNumber") => json!({"number": "0x10"}),
                Some("trace_call") => {
                    return json!({"jsonrpc": "2.0", "id": call["id"],
                                  "error": {"code": -32601, "message": "the method trace_call does not exist/is not available"}})
                }
                Some("eth_getTransactionByHash")
                    if call["params"][0].as_str().unwrap_or("").ends_with("01") =>
                {
                    json!({"hash": call["params"][0], "blockNumber": "0x9"})
                }
                Some("trace_replayTransaction") => {
                    calls.fetch_add(1, Ordering::SeqCst);
                    json!({"output": "0x", "transactionHash": call["params"][0],
                      "trace": [{"action": {"callType": "call", "from": "0xa", "to": "0xb", "gas": "0x0",
                                 "input": "0x", "value": "0x10"}, "result": {"gasUsed": "0x0", "output": "0x"},
                                 "subtraces": 0, "traceAddress": [], "type": "call"}],
                      "vmTrace": {"code": "0x", "ops": []},
                      "stateDiff": {"0xb": {"balance": {"*": {"from": "0x0", "to": "0x10"}}, "nonce": "=", "code": "=", "storage": {}}}})
                }
                _ => Value::Null,
            };
            json!({"jsonrpc": "2.0", "id": call["id"], "result": result})
        };
        match &v {
            Value::Array(calls) => {
                FixtureResponse::json(Value::Array(calls.iter().map(answer).collect()))
            }
            call => FixtureResponse::json(answer(call)),
        }
    })
}

#[test]
fn polygon_trace_from_trace_hosts_or_built_from_debug() {
    // anvil serves debug_* and some trace_* (not trace_replayTransaction / trace_call):
    // labelled with both, it exercises the fallback from a missing method.
    let chain = Anvil::start(137, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_bor:\n    hosts:\n      - {{id: bor-anvil, url: \"{}\", family: bor, capabilities: [trace, debug]}}\n",
            chain.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let (basic, pro) = (gw.key("basic", &[]), gw.key("pro", &[]));
    let post = |key: &str, path: &str, body: Value| {
        let h = [("Content-Type", "application/json"), ("x-token", key)];
        request(gw.port, "POST", path, &h, body.to_string().as_bytes()).unwrap()
    };
    let from = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
    let to = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
    // A contract creation whose constructor stores 42 in slot 1 and returns code 0xfe.
    let create = chain.call(
        "eth_sendTransaction",
        json!([{"from": from, "data": "0x602a60015560fe60005360016000f3"}]),
    );
    let created = receipt(&chain, create.as_str().unwrap());
    let contract = created["contractAddress"].as_str().unwrap().to_string();
    let transfer = chain.call(
        "eth_sendTransaction",
        json!([{"from": from, "to": to, "value": "0x10"}]),
    );
    receipt(&chain, transfer.as_str().unwrap());

    let r = post(
        &pro,
        "/v1/polygon/trace/replay-tx",
        json!({"tx_hash": create, "tracers": ["trace", "stateDiff"]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let e = r.json();
    assert_eq!(e["source"], "debug_traceTransaction");
    assert_eq!(e["trace"][0]["type"], "create");
    assert_eq!(e["trace"][0]["result"]["address"], contract.as_str());
    assert_eq!(e["trace"][0]["result"]["code"], "0xfe");
    let slot1 = format!("0x{}01", "0".repeat(62));
    let account = &e["stateDiff"][contract.as_str()];
    assert_eq!(account["code"]["to"], "0xfe", "{e}");
    assert_eq!(
        account["storage"][&slot1]["to"],
        format!("0x{}2a", "0".repeat(62))
    );
    assert_eq!(e["stateDiff"][from]["nonce"], json!({"from": 0, "to": 1}));
    assert!(e["vmTrace"].is_null());
    assert_eq!(
        e["block"],
        created["blockNumber"]
            .as_str()
            .map(|b| u64::from_str_radix(&b[2..], 16).unwrap())
            .unwrap()
    );

    // Default tracers: the trace alone; a vmTrace cannot be built from debug_*, and
    // the answer says so.
    let r = post(
        &pro,
        "/v1/polygon/trace/replay-tx",
        json!({"tx_hash": transfer}),
    );
    let e = r.json();
    assert_eq!(
        (
            e["trace"][0]["action"]["value"].as_str(),
            e["stateDiff"].is_null()
        ),
        (Some("0x10"), true),
        "{e}"
    );
    let r = post(
        &pro,
        "/v1/polygon/trace/replay-tx",
        json!({"tx_hash": transfer, "tracers": ["vmTrace"]}),
    );
    assert_eq!(r.status, 200);
    assert!(r.json()["vmTrace"].is_null() && r.json()["trace"].is_null());
    assert!(
        r.json()["unavailable"]["vmTrace"].is_string(),
        "{}",
        r.text()
    );

    // trace/call runs a call that was never sent, at a block pinned to a number.
    let r = post(
        &pro,
        "/v1/polygon/trace/call",
        json!({
        "tx": {"from": from, "to": to, "value": "0x20"}, "block": "latest", "tracers": ["trace", "stateDiff"]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let e = r.json();
    assert_eq!(e["source"], "debug_traceCall");
    assert_eq!(e["trace"][0]["action"]["value"], "0x20");
    assert!(e["stateDiff"][to]["balance"]["to"].is_string(), "{e}");
    assert_eq!(e["block"].as_u64(), Some(chain.block_number()));

    // Not mined yet, unknown, malformed: 400 before any trace.
    chain.call("evm_setAutomine", json!([false]));
    let pending = chain.call(
        "eth_sendTransaction",
        json!([{"from": from, "to": to, "value": "0x1"}]),
    );
    let r = post(
        &pro,
        "/v1/polygon/trace/replay-tx",
        json!({"tx_hash": pending}),
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (400, Some("invalid_params")),
        "{}",
        r.text()
    );
    assert!(r.json()["message"].as_str().unwrap().contains("not mined"));
    chain.call("evm_setAutomine", json!([true]));
    chain.mine(1);
    let unknown = format!("0x{}", "ab".repeat(32));
    for (path, bad) in [
        ("/v1/polygon/trace/replay-tx", json!({"tx_hash": unknown})),
        ("/v1/polygon/trace/replay-tx", json!({"tx_hash": "0x12"})),
        (
            "/v1/polygon/trace/replay-tx",
            json!({"tx_hash": transfer, "tracers": []}),
        ),
        (
            "/v1/polygon/trace/replay-tx",
            json!({"tx_hash": transfer, "tracers": ["memory"]}),
        ),
        ("/v1/polygon/trace/replay-tx", json!({"hash": transfer})),
        ("/v1/polygon/trace/call", json!({"tx": {"to": "0x12"}})),
        (
            "/v1/polygon/trace/call",
            json!({"tx": {"to": to, "value": "10"}}),
        ),
        (
            "/v1/polygon/trace/call",
            json!({"tx": {"to": to}, "block": "yesterday"}),
        ),
        ("/v1/polygon/trace/call", json!({"to": to})),
        // A body is an object: serde would read a struct from an array, field by field.
        ("/v1/polygon/trace/call", json!([{"to": to}])),
        ("/v1/polygon/trace/replay-tx", json!([transfer])),
        ("/v1/polygon/trace/call", json!({"tx": [null, to]})),
        // A member the contract types without `null` is refused as `null` too.
        (
            "/v1/polygon/trace/call",
            json!({"tx": {"data": "0x"}, "tracers": null}),
        ),
        (
            "/v1/polygon/trace/call",
            json!({"tx": {"to": to}, "block": null}),
        ),
        (
            "/v1/polygon/trace/replay-tx",
            json!({"tx_hash": transfer, "tracers": null}),
        ),
    ] {
        let r = post(&pro, path, bad.clone());
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("invalid_params")),
            "{bad}: {}",
            r.text()
        );
    }
    // A block the chain has not reached: there is no such state yet.
    let r = post(
        &pro,
        "/v1/polygon/trace/call",
        json!({"tx": {"to": to}, "block": "0x7fffffff"}),
    );
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("not_found")),
        "{}",
        r.text()
    );
    // Tier pro and above.
    let r = post(
        &basic,
        "/v1/polygon/trace/replay-tx",
        json!({"tx_hash": transfer}),
    );
    assert_eq!(
        (r.status, r.json()["required_tier"].as_str()),
        (403, Some("pro"))
    );

    // A host that serves trace_replayTransaction is asked first; its answer is the
    // envelope, with stateDiff in from/to form.
    let calls = Arc::new(AtomicUsize::new(0));
    let erigon = erigon_like(calls.clone());
    let gw2 = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_bor:\n    hosts:\n      - {{id: bor-erigon, url: \"{}\", family: bor, capabilities: [trace]}}\n",
            erigon.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let pro2 = gw2.key("pro", &[]);
    let hash = format!("0x{}01", "cd".repeat(31));
    let h = [
        ("Content-Type", "application/json"),
        ("x-token", pro2.as_str()),
    ];
    let body = json!({"tx_hash": hash, "tracers": ["trace", "vmTrace", "stateDiff"]}).to_string();
    let r = request(
        gw2.port,
        "POST",
        "/v1/polygon/trace/replay-tx",
        &h,
        body.as_bytes(),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let e = r.json();
    assert_eq!(e["source"], "trace_replayTransaction");
    assert_eq!(e["vmTrace"], json!({"code": "0x", "ops": []}));
    assert_eq!(
        e["stateDiff"],
        json!({"0xb": {"balance": {"from": "0x0", "to": "0x10"}}})
    );
    assert_eq!(e["unavailable"], json!({}));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Without a debug host, a pool whose trace hosts lack the method cannot trace.
    let body = json!({"tx": {"to": to}}).to_string();
    let r = request(
        gw2.port,
        "POST",
        "/v1/polygon/trace/call",
        &h,
        body.as_bytes(),
    )
    .unwrap();
    assert_eq!(r.status, 503, "{}", r.text());
}
