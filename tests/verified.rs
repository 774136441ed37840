//! Answers checked against themselves (issue 65): one anvil, asked directly (honest) and
//! through a proxy that rewrites its answers (the liar), as a compromised node would.
//! For each lie about a block or its receipts, every answer the client gets is the
//! honest one and says `X-Chainedge-Verified: self`; the liar's answers are disproved,
//! logged and counted, and it is cordoned after three. An answer the edge cannot check
//! is served and said unchecked; `observe` mode serves lies and counts them.

use common::evm::*;
use common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// A chain with something to lie about: a block of three transactions (two transfers
/// and a token call that logs), token blocks with logs.
fn chain(node: &Anvil) -> u64 {
    let token = deploy_erc20(node, "Checked", "CHK", "1000000");
    node.call("evm_setAutomine", json!([false]));
    for value in ["0x1", "0x2"] {
        node.call(
            "eth_sendTransaction",
            json!([{"from": DEV, "to": "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "value": value}]),
        );
    }
    let data = format!(
        "0x{}{}{}",
        selector("transfer(address,uint256)"),
        word("0x70997970c51812dc3a010c7d01b50e0d17dc79c8"),
        word("5")
    );
    node.call(
        "eth_sendTransaction",
        json!([{"from": DEV, "to": token, "data": data, "gas": "0x100000"}]),
    );
    node.call("evm_mine", json!([]));
    node.call("evm_setAutomine", json!([true]));
    node.block_number()
}

fn gateway(honest: &Anvil, liar: &Fixture, mode: &str) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: honest, url: \"{}\", family: el-anvil}}\n      \
             - {{id: liar, url: \"{}\", family: el-anvil}}\n",
            honest.url(),
            liar.url()
        ),
        extra_yaml: format!(
            "rpc:\n  cache: {{enabled: false}}\n  verify: {{mode: {mode}}}\n{UNLIMITED}"
        ),
        ..Default::default()
    })
}

/// `calls` through the gateway, each answer compared with the node's own.
fn ask_all(gw: &Gateway, node: &Anvil, key: &str, calls: &[(&str, Value)]) -> (usize, Vec<String>) {
    let mut wrong = 0;
    let mut levels = Vec::new();
    for (method, params) in calls {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = rpc(gw.port, "/rpc/eth", Some(key), &body);
        assert_eq!(r.status, 200, "{}", r.text());
        let honest = node.call(method, params.clone());
        if r.json()["result"] != honest {
            wrong += 1;
            eprintln!("{method} {params}: wrong answer {}", r.text());
        }
        levels.push(r.header("x-chainedge-verified").unwrap_or("").to_string());
    }
    (wrong, levels)
}

fn disproved(gw: &Gateway) -> f64 {
    metric_sum(gw, "chainedge_disproved_answers_total{")
}

fn hex(n: u64) -> String {
    format!("0x{n:x}")
}

#[test]
fn no_lie_about_a_block_its_receipts_or_transactions_reaches_the_client() {
    let node = Arc::new(Anvil::start(1, &[]));
    let busy = chain(&node);
    let lies: Vec<(&str, Lie, &str)> = vec![
        (
            "a state root",
            |_, m, _, r| {
                if m.starts_with("eth_getBlockBy") {
                    r["stateRoot"] = json!(format!("0x{}", "11".repeat(32)));
                }
            },
            "eth_getBlockByNumber",
        ),
        (
            "a transaction's value, or in a hashes-only block its order",
            |_, m, _, r| {
                let txs = r["transactions"].as_array_mut();
                match txs {
                    Some(txs) if m.starts_with("eth_getBlockBy") && txs.len() > 1 => {
                        if txs[0].is_object() {
                            txs[0]["value"] = json!("0x7");
                        } else {
                            txs.swap(0, 1);
                        }
                    }
                    _ => {}
                }
            },
            "eth_getBlockByNumber",
        ),
        (
            "another block than the one asked (a stale node)",
            |n, m, p, r| {
                if m == "eth_getBlockByNumber" {
                    let earlier =
                        u64::from_str_radix(p[0].as_str().unwrap().trim_start_matches("0x"), 16)
                            .unwrap()
                            - 1;
                    *r = n.call(m, json!([hex(earlier), p[1]]));
                }
            },
            "eth_getBlockByNumber",
        ),
        (
            "a receipt's status",
            |_, m, _, r| {
                if m == "eth_getBlockReceipts" {
                    r[0]["status"] = json!("0x0");
                }
            },
            "eth_getBlockReceipts",
        ),
        (
            "a log dropped",
            |_, m, _, r| {
                if m == "eth_getBlockReceipts" {
                    if let Some(last) = r.as_array_mut().and_then(|a| a.last_mut()) {
                        last["logs"] = json!([]);
                    }
                }
            },
            "eth_getBlockReceipts",
        ),
        (
            "a transaction receipt's status",
            |_, m, _, r| {
                if m == "eth_getTransactionReceipt" {
                    r["status"] = json!("0x0");
                }
            },
            "eth_getTransactionReceipt",
        ),
        (
            "a block's logs withheld",
            |_, m, _, r| {
                if m == "eth_getLogs" {
                    *r = json!([]);
                }
            },
            "eth_getLogs",
        ),
        (
            "a log's data forged",
            |_, m, _, r| {
                if m == "eth_getLogs" {
                    if let Some(log) = r.get_mut(0) {
                        log["data"] = json!(format!("0x{}", "00".repeat(32)));
                    }
                }
            },
            "eth_getLogs",
        ),
        (
            "every receipt withheld",
            |_, m, _, r| {
                if m == "eth_getBlockReceipts" {
                    *r = json!([]);
                }
            },
            "eth_getBlockReceipts",
        ),
        (
            "receipts of a block that does not exist",
            |_, m, _, r| {
                if m == "eth_getBlockReceipts" {
                    for rc in r.as_array_mut().unwrap() {
                        rc["blockHash"] = json!(format!("0x{}", "ab".repeat(32)));
                    }
                }
            },
            "eth_getBlockReceipts",
        ),
        (
            "a transaction's recipient",
            |_, m, _, r| {
                if m == "eth_getTransactionByHash" {
                    r["to"] = json!("0x000000000000000000000000000000000000dead");
                }
            },
            "eth_getTransactionByHash",
        ),
        (
            "a transaction placed in another slot of its block",
            |_, m, _, r| {
                if m == "eth_getTransactionByHash" {
                    let i = r["transactionIndex"].as_str().unwrap_or("0x0") == "0x0";
                    r["transactionIndex"] = json!(if i { "0x1" } else { "0x0" });
                }
            },
            "eth_getTransactionByHash",
        ),
    ];
    let block = node.call("eth_getBlockByNumber", json!([hex(busy), false]));
    let (block_hash, txs) = (block["hash"].clone(), block["transactions"].clone());
    let calls = |method: &str| -> Vec<(&'static str, Value)> {
        match method {
            "eth_getTransactionReceipt" | "eth_getTransactionByHash" => (0..6)
                .map(|i| {
                    (
                        if method == "eth_getTransactionReceipt" {
                            "eth_getTransactionReceipt"
                        } else {
                            "eth_getTransactionByHash"
                        },
                        json!([txs[i % 3]]),
                    )
                })
                .collect(),
            "eth_getLogs" => (0..6)
                .map(|_| ("eth_getLogs", json!([{"blockHash": block_hash}])))
                .collect(),
            "eth_getBlockByNumber" => (0..4)
                .flat_map(|i| {
                    let n = hex(busy - (i % 2));
                    [
                        ("eth_getBlockByNumber", json!([n.clone(), true])),
                        ("eth_getBlockByNumber", json!([n, false])),
                    ]
                })
                .collect(),
            _ => (0..6)
                .map(|i| ("eth_getBlockReceipts", json!([hex(busy - (i % 3))])))
                .collect(),
        }
    };
    for (what, lie, method) in lies {
        let lying = Arc::new(Mutex::new(lie));
        let proxy = liar(node.clone(), lying);
        let gw = gateway(&node, &proxy, "enforce");
        let key = gw.key("scale", &[]);
        let (wrong, levels) = ask_all(&gw, &node, &key, &calls(method));
        let caught = disproved(&gw);
        eprintln!("{what}: {wrong} wrong answers, {caught} disproved, levels {levels:?}");
        assert_eq!(wrong, 0, "{what}: a lie reached the client");
        assert!(caught >= 1.0, "{what}: the liar was never asked");
        assert!(levels.iter().all(|l| l == "self"), "{what}: {levels:?}");
        // One JSON line per disproved answer in the misbehaviour log.
        let log = gw.stderr_tail();
        let line = log
            .lines()
            .find(|l| l.contains("misbehaviour"))
            .unwrap_or_else(|| panic!("{what}: no misbehaviour line in {log}"));
        let json_part = &line[line.find('{').unwrap()..];
        let entry: Value = serde_json::from_str(json_part).unwrap();
        assert_eq!(entry["host"], "liar", "{entry}");
        assert!(entry["why"].as_str().unwrap().len() > 5, "{entry}");
    }
}

/// An OP-stack block (`anvil --network optimism`): a fee-market transfer, a deposit
/// that mints and transfers, a deposit creating a contract that logs.
fn op_chain(node: &Anvil) -> (u64, Vec<Value>) {
    node.call("evm_setAutomine", json!([false]));
    let deposit = |from: &str, extra: Value| {
        let mut tx = json!({"from": from, "type": "0x7e", "mint": "0x64", "isSystemTx": false,
                            "gas": "0x186a0", "sourceHash": format!("0x{}", "aa".repeat(32))});
        tx.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        node.call("eth_sendTransaction", json!([tx]))
    };
    let hashes = vec![
        node.call(
            "eth_sendTransaction",
            json!([{"from": DEV, "to": "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc", "value": "0x7"}]),
        ),
        deposit(
            "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
            json!({"to": "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc", "value": "0x5"}),
        ),
        // Creates a contract whose constructor logs one word.
        deposit(
            "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
            json!({"data": "0x600160005260206000a0", "sourceHash": format!("0x{}", "bb".repeat(32))}),
        ),
    ];
    node.call("evm_mine", json!([]));
    node.call("evm_setAutomine", json!([true]));
    (node.block_number(), hashes)
}

#[test]
fn on_an_op_stack_chain_deposits_are_checked_too() {
    let node = Arc::new(Anvil::start(10, &["--network", "optimism"]));
    let (busy, txs) = op_chain(&node);
    let lies: Vec<(&str, Lie)> = vec![
        (
            "a deposit's mint, or in a hashes-only block its hash",
            |_, m, _, r| {
                if m.starts_with("eth_getBlockBy") && r["transactions"][1].is_object() {
                    r["transactions"][1]["mint"] = json!("0x6500");
                } else if m.starts_with("eth_getBlockBy") && r["transactions"][1].is_string() {
                    r["transactions"][1] = r["hash"].clone();
                }
            },
        ),
        ("a deposit receipt's nonce", |_, m, _, r| {
            if m == "eth_getBlockReceipts" && r[1].is_object() {
                r[1]["depositNonce"] = json!("0x9");
            }
        }),
        ("a deposit's sender", |_, m, _, r| {
            if m == "eth_getTransactionByHash" || m == "eth_getTransactionReceipt" {
                r["from"] = json!(DEV);
            }
        }),
    ];
    let mut calls = vec![];
    for i in 0..3 {
        calls.push(("eth_getBlockByNumber", json!([hex(busy - i % 2), true])));
        calls.push(("eth_getBlockByNumber", json!([hex(busy), false])));
        calls.push(("eth_getBlockReceipts", json!([hex(busy)])));
        calls.push(("eth_getBlockReceipts", json!([hex(busy - i % 2)])));
        for tx in &txs[1..] {
            calls.push(("eth_getTransactionByHash", json!([tx])));
            calls.push(("eth_getTransactionReceipt", json!([tx])));
        }
    }
    for (what, lie) in lies {
        let proxy = liar(node.clone(), Arc::new(Mutex::new(lie)));
        let gw = gateway(&node, &proxy, "enforce");
        let key = gw.key("scale", &[]);
        let (wrong, levels) = ask_all(&gw, &node, &key, &calls);
        let caught = disproved(&gw);
        eprintln!("{what}: {wrong} wrong answers, {caught} disproved, levels {levels:?}");
        assert_eq!(wrong, 0, "{what}: a lie reached the client");
        assert!(caught >= 1.0, "{what}: the liar was never asked");
        assert!(levels.iter().all(|l| l == "self"), "{what}: {levels:?}");
    }
}

#[test]
fn a_liar_is_cordoned_and_unknown_fields_pass_unchecked() {
    let node = Arc::new(Anvil::start(1, &[]));
    let busy = chain(&node);
    let lying: Arc<Mutex<Lie>> = Arc::new(Mutex::new(|_, m, _, r| {
        if m.starts_with("eth_getBlockBy") {
            r["gasUsed"] = json!("0x1");
        }
    }));
    let proxy = liar(node.clone(), lying.clone());
    let gw = gateway(&node, &proxy, "enforce");
    let key = gw.key("scale", &[]);
    let calls: Vec<_> = (0..12)
        .map(|i| ("eth_getBlockByNumber", json!([hex(busy - i % 4), true])))
        .collect();
    // The liar is set aside after each lie: wait out the cool-down between rounds.
    for round in calls.chunks(4) {
        let (wrong, _) = ask_all(&gw, &node, &key, round);
        assert_eq!(wrong, 0);
        if disproved(&gw) >= 3.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5200));
    }
    assert!(disproved(&gw) >= 3.0, "{}", disproved(&gw));
    let mesh = gw.get("/v1/eth/mesh/health", &[]).json();
    let hosts = mesh["blocks"]["el"]["hosts"].as_array().unwrap().clone();
    let liar_entry = hosts.iter().find(|h| h["id"] == "liar").unwrap();
    assert_eq!(liar_entry["cordoned"], true, "{liar_entry}");

    // A field the edge does not know: served as the node gave it, said unchecked.
    *lying.lock().unwrap() = |_, m, _, r| {
        if m.starts_with("eth_getBlockBy") {
            r["someFutureRoot"] = json!("0x01");
        }
    };
    let proxy2 = liar(node.clone(), lying);
    let gw2 = gateway(&node, &proxy2, "enforce");
    let key2 = gw2.key("scale", &[]);
    let mut unchecked = 0;
    for i in 0..4 {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber",
                          "params": [hex(busy - i % 2), false]});
        let r = rpc(gw2.port, "/rpc/eth", Some(&key2), &body);
        assert_eq!(r.status, 200);
        if r.json()["result"]["someFutureRoot"].is_string() {
            assert_eq!(r.header("x-chainedge-verified"), Some("none"));
            unchecked += 1;
        } else {
            assert_eq!(r.header("x-chainedge-verified"), Some("self"));
        }
    }
    assert!(unchecked >= 1, "the liar was never asked");
    assert_eq!(disproved(&gw2), 0.0);
}

#[test]
fn a_null_from_one_host_is_asked_of_another() {
    let node = Arc::new(Anvil::start(1, &[]));
    let busy = chain(&node);
    // The liar hides what it has, as a lagging node would not have it yet.
    let lying: Arc<Mutex<Lie>> = Arc::new(Mutex::new(|_, _, _, r| *r = Value::Null));
    let proxy = liar(node.clone(), lying);
    let gw = gateway(&node, &proxy, "enforce");
    let key = gw.key("scale", &[]);
    let block = node.call("eth_getBlockByNumber", json!([hex(busy), false]));
    let mut calls = vec![];
    for i in 0..3 {
        let tx = &block["transactions"][i];
        calls.push(("eth_getTransactionReceipt", json!([tx])));
        calls.push(("eth_getTransactionByHash", json!([tx])));
        calls.push(("eth_getBlockByHash", json!([block["hash"], i % 2 == 0])));
    }
    let (wrong, levels) = ask_all(&gw, &node, &key, &calls);
    assert_eq!(
        wrong, 0,
        "a null reached the client while a host had the answer"
    );
    assert!(levels.iter().all(|l| l == "self"), "{levels:?}");
    let passed = metric_sum(&gw, "chainedge_empty_answers_passed_total{");
    assert!(passed >= 1.0, "the liar was never asked");
    // What no host has is null, after one more host was asked.
    let unknown = format!("0x{}", "ee".repeat(32));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getTransactionReceipt",
                      "params": [unknown]});
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
    assert_eq!((r.status, r.json()["result"].clone()), (200, Value::Null));
    assert_eq!(r.header("x-chainedge-verified"), Some("none"));
    assert_eq!(
        metric_sum(&gw, "chainedge_empty_answers_passed_total{"),
        passed + 1.0
    );
}

#[test]
fn observe_mode_serves_a_lie_and_counts_it() {
    let node = Arc::new(Anvil::start(1, &[]));
    let busy = chain(&node);
    let lying: Arc<Mutex<Lie>> = Arc::new(Mutex::new(|_, m, _, r| {
        if m == "eth_getBlockReceipts" {
            r[0]["status"] = json!("0x0");
        }
    }));
    let proxy = liar(node.clone(), lying);
    let gw = gateway(&node, &proxy, "observe");
    let key = gw.key("scale", &[]);
    let calls: Vec<_> = (0..4)
        .map(|i| ("eth_getBlockReceipts", json!([hex(busy - i % 2)])))
        .collect();
    let (wrong, levels) = ask_all(&gw, &node, &key, &calls);
    assert!(wrong >= 1, "observe mode serves what it would have refused");
    assert_eq!(disproved(&gw), wrong as f64, "each counted");
    assert_eq!(levels.iter().filter(|l| *l == "none").count(), wrong);
}

#[test]
fn a_caller_can_require_a_checked_answer() {
    let node = Anvil::start(1, &[]);
    let busy = chain(&node);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: format!("rpc:\n  verify: {{require: {{business: self}}}}\n{UNLIMITED}"),
        ..Default::default()
    });
    let key = gw.key("scale", &[]);
    let ask = |method: &str, params: Value, level: &str| {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let body = serde_json::to_vec(&body).unwrap();
        let headers = [
            ("X-Token", key.as_str()),
            ("Content-Type", "application/json"),
            ("X-Chainedge-Require-Verified", level),
        ];
        request(gw.port, "POST", "/rpc/eth", &headers, &body).unwrap()
    };
    let block = ask("eth_getBlockByNumber", json!([hex(busy), false]), "self");
    assert_eq!(block.status, 200, "{}", block.text());
    assert_eq!(block.header("x-chainedge-verified"), Some("self"));
    // Nothing in a balance commits to it (yet): withheld, and said why.
    let balance = ask("eth_getBalance", json!([DEV, "latest"]), "self");
    assert_eq!(balance.status, 502, "{}", balance.text());
    let v = balance.json();
    assert_eq!(v["id"], 7);
    assert_eq!(v["error"]["data"]["error"], "unverified", "{v}");
    assert_eq!(
        ask("eth_getBalance", json!([DEV, "latest"]), "none").status,
        200
    );
    // A level that does not exist: refused before any node is asked.
    let calls = metric_sum(&gw, "chainedge_upstream_attempts_total{");
    let bad = ask("eth_getBalance", json!([DEV, "latest"]), "root-please");
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(metric_sum(&gw, "chainedge_upstream_attempts_total{"), calls);

    // Over WebSocket the level is asked on the upgrade and holds for every message.
    let headers = [
        ("X-Token", key.as_str()),
        ("X-Chainedge-Require-Verified", "self"),
    ];
    let mut ws = ws_connect(gw.port, "/rpc/eth", &headers).expect("upgrade");
    let mut on_ws = |method: &str, params: Value| -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        ws.send(tungstenite::Message::text(body.to_string()))
            .unwrap();
        loop {
            if let tungstenite::Message::Text(t) = ws.read().unwrap() {
                return serde_json::from_str(&t).unwrap();
            }
        }
    };
    let block = on_ws("eth_getBlockByNumber", json!([hex(busy), false]));
    assert!(block["result"]["hash"].is_string(), "{block}");
    let balance = on_ws("eth_getBalance", json!([DEV, "latest"]));
    assert_eq!(balance["error"]["data"]["error"], "unverified", "{balance}");
    let refused = ws_connect(
        gw.port,
        "/rpc/eth",
        &[
            ("X-Token", key.as_str()),
            ("X-Chainedge-Require-Verified", "root-please"),
        ],
    );
    assert_eq!(refused.err().map(|(status, _)| status), Some(400));

    // A plan (`rpc.verify.require`) or a key (`require_verified`) requires it for its
    // callers, who need not ask.
    let plain = |key: &str, method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 8, "method": method, "params": params});
        let headers = [("X-Token", key), ("Content-Type", "application/json")];
        request(
            gw.port,
            "POST",
            "/rpc/eth",
            &headers,
            &serde_json::to_vec(&body).unwrap(),
        )
        .unwrap()
    };
    let business = gw.key("business", &[]);
    let tenant = gw.cli(&["tenants", "create", "--name", "strict", "--plan", "scale"]);
    let restricted = r#"{"require_verified": "self"}"#;
    let strict = gw.cli(&[
        "keys",
        "create",
        "--tenant",
        &tenant,
        "--restrictions",
        restricted,
    ]);
    for k in [&business, &strict] {
        let r = plain(k, "eth_getBalance", json!([DEV, "latest"]));
        assert_eq!(r.status, 502, "{}", r.text());
        assert_eq!(r.json()["error"]["data"]["error"], "unverified");
        let r = plain(k, "eth_getBlockByNumber", json!([hex(busy), false]));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.header("x-chainedge-verified"), Some("self"));
    }
    assert_eq!(
        plain(&key, "eth_getBalance", json!([DEV, "latest"])).status,
        200
    );
}

/// A gateway over `hosts` (id, url) with `quorum` as `rpc.verify.quorum`.
fn voting_gateway(hosts: &[(&str, String)], quorum: &str) -> Gateway {
    let mut pools = "  eth_el:\n    hosts:\n".to_string();
    for (id, url) in hosts {
        pools.push_str(&format!(
            "      - {{id: {id}, url: \"{url}\", family: el-anvil}}\n"
        ));
    }
    Gateway::start(GatewayOpts {
        pools,
        extra_yaml: format!(
            "rpc:\n  cache: {{enabled: false}}\n  verify: {{quorum: {quorum}}}\n{UNLIMITED}"
        ),
        ..Default::default()
    })
}

#[test]
fn a_vote_outvotes_a_liar_and_a_dispute_is_an_error_not_a_guess() {
    let node = Arc::new(Anvil::start(1, &[]));
    chain(&node);
    let honest_front = liar(node.clone(), Arc::new(Mutex::new(|_, _, _, _| {})));
    let lying = liar(
        node.clone(),
        Arc::new(Mutex::new(|_, m, _, r| {
            if m == "eth_getBalance" {
                *r = json!("0xde0b6b3a7640000");
            }
        })),
    );
    let hosts = [
        ("honest", node.url()),
        ("honest-front", honest_front.url()),
        ("liar", lying.url()),
    ];
    let balance = ("eth_getBalance", json!([DEV, "latest"]));

    // Two of three must agree: the liar is outvoted on every call.
    let gw = voting_gateway(&hosts, "{methods: [eth_getBalance], ask: 3, agree: 2}");
    let key = gw.key("scale", &[]);
    let (wrong, levels) = ask_all(&gw, &node, &key, &vec![balance.clone(); 8]);
    assert_eq!(wrong, 0);
    assert!(levels.iter().all(|l| l == "quorum=2/3"), "{levels:?}");
    assert_eq!(
        metric_value(
            &gw,
            "chainedge_quorum_reads_total{outcome=\"agreed\",pool=\"eth_el\"}"
        ),
        8.0
    );
    // In a batch too, and reads not put to a vote keep their level.
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [DEV, "latest"]},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_chainId", "params": []},
    ]);
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &batch);
    assert_eq!(
        r.json()[0]["result"],
        node.call("eth_getBalance", json!([DEV, "latest"]))
    );
    assert_eq!(
        r.header("x-chainedge-verified"),
        Some("none"),
        "the batch's weakest"
    );

    // Unanimity: the liar makes every vote a dispute, answered as an error.
    let gw = voting_gateway(&hosts, "{methods: [eth_getBalance], ask: 3, agree: 3}");
    let key = gw.key("scale", &[]);
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [DEV, "latest"]});
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(
        r.json()["error"]["data"]["error"],
        "quorum_dispute",
        "{}",
        r.text()
    );

    // Too few hosts to vote: an error, not one host's word.
    let gw = voting_gateway(&hosts[..1], "{methods: [eth_getBalance], ask: 3, agree: 2}");
    let key = gw.key("scale", &[]);
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["error"], "quorum_unavailable");
}

/// A voter frozen (SIGSTOP: it takes the connection and never answers) costs a vote
/// nothing while the others can still agree: the read is answered by the first
/// agreeing majority, not after the frozen host's timeout.
#[test]
fn a_frozen_voter_costs_a_vote_nothing() {
    let nodes: Vec<Anvil> = (0..3).map(|_| Anvil::start(1, &[])).collect();
    let hosts: Vec<(&str, String)> = ["v1", "v2", "v3"]
        .into_iter()
        .zip(nodes.iter().map(Anvil::url))
        .collect();
    let gw = voting_gateway(&hosts, "{methods: [eth_getBalance], ask: 3, agree: 2}");
    let key = gw.key("scale", &[]);
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [DEV, "latest"]});
    let want = nodes[0].call("eth_getBalance", json!([DEV, "latest"]));
    nodes[2].proc.signal("STOP");
    let mut slowest = std::time::Duration::ZERO;
    for _ in 0..10 {
        let started = std::time::Instant::now();
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
        slowest = slowest.max(started.elapsed());
        assert_eq!(r.json()["result"], want, "{}", r.text());
        assert_eq!(r.header("x-chainedge-verified"), Some("quorum=2/3"));
    }
    nodes[2].proc.signal("CONT");
    eprintln!("one of three voters frozen: 10 votes, the slowest {slowest:?}");
    assert!(slowest < std::time::Duration::from_secs(1), "{slowest:?}");
}

/// The first contract DEV deploys on a fresh anvil: `chain`'s token.
const TOKEN: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";

/// The 2026 bridge attack (issue 65): two of three nodes forge log and balance answers
/// for the verifier's contract only, then the honest node is flooded (slow) or killed
/// so that only the liars are left to answer. Under the verifier preset the caller gets
/// the honest answer or an error naming why, never the forgery; without a vote the
/// range logs (no commitment in them) would carry the lie.
#[test]
fn the_bridge_attack_gets_errors_not_lies() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let node = Arc::new(Anvil::start(1, &[]));
    let busy = chain(&node);
    let token = node.call("eth_getBlockByNumber", json!([hex(busy), true]))["transactions"][2]
        ["to"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(token.eq_ignore_ascii_case(TOKEN), "{token}");
    // The honest node, behind a front the test can flood.
    let slow = Arc::new(AtomicBool::new(false));
    let (node2, slow2) = (node.clone(), slow.clone());
    let honest = Fixture::start(move |req| {
        if slow2.load(Ordering::Relaxed) {
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        let hdr = [("Content-Type", "application/json")];
        let r = request(node2.port, "POST", "/", &hdr, &req.body).unwrap();
        FixtureResponse::json(r.json())
    });
    // The liars agree with each other: a forged transfer into the bridge's contract.
    let forge: Lie = |_, m, p, r| {
        let about_token = |v: &Value| v.as_str().is_some_and(|a| a.eq_ignore_ascii_case(TOKEN));
        if m == "eth_getLogs" && about_token(&p[0]["address"]) {
            if let Some(log) = r.get(0).cloned() {
                let mut forged = log;
                forged["data"] = json!(format!("0x{:064x}", 1_000_000u64));
                r.as_array_mut().unwrap().push(forged);
            }
        }
        if m == "eth_getBalance" && about_token(&p[0]) {
            *r = json!("0x3635c9adc5dea00000");
        }
    };
    let liars: Vec<Fixture> = (0..2)
        .map(|_| liar(node.clone(), Arc::new(Mutex::new(forge))))
        .collect();
    let hosts = [
        ("honest", honest.url()),
        ("liar-a", liars[0].url()),
        ("liar-b", liars[1].url()),
    ];
    let verifier_calls = vec![
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": hex(busy), "address": token}]),
        ),
        (
            "eth_getLogs",
            json!([{"blockHash": node.call("eth_getBlockByNumber", json!([hex(busy), false]))["hash"], "address": token}]),
        ),
        ("eth_getBalance", json!([token, hex(busy)])),
    ];
    // A caller the liars do not target is answered as before.
    let bystander = ("eth_getBalance", json!([DEV, hex(busy)]));
    let tight = "  attempt_timeout_ms: 1000\n  timeout_ms: 2500\n";
    let gateway = |verify: &str| {
        Gateway::start(GatewayOpts {
            pools: hosts
                .iter()
                .fold("  eth_el:\n    hosts:\n".to_string(), |p, (id, url)| {
                    p + &format!("      - {{id: {id}, url: \"{url}\", family: el-anvil}}\n")
                }),
            extra_yaml: format!(
                "rpc:\n  cache: {{enabled: false}}\n{tight}  verify: {verify}\n{UNLIMITED}"
            ),
            ..Default::default()
        })
    };
    let gw = gateway("{quorum: {preset: verifier, methods: [eth_getBalance], ask: 3}}");
    let self_only = gateway("{mode: enforce}");
    let mut outcomes = vec![];
    outcomes.extend(verdicts(&gw, &node, "all up", &verifier_calls));
    outcomes.extend(verdicts(&gw, &node, "all up, a bystander", &[bystander]));
    slow.store(true, Ordering::Relaxed);
    outcomes.extend(verdicts(&gw, &node, "honest flooded", &verifier_calls));
    slow.store(false, Ordering::Relaxed);
    honest.down.store(true, Ordering::Relaxed);
    outcomes.extend(verdicts(&gw, &node, "honest killed", &verifier_calls));
    assert!(!outcomes.iter().any(|o| o == "FORGED"), "{outcomes:?}");
    assert!(
        (outcomes.iter()).all(|o| o == "honest" || o.contains("quorum_")),
        "{outcomes:?}"
    );

    // The same fleet without a vote: the block's logs are still checked (their receipts
    // disprove the forgery), but a range of logs and a balance carry no commitment and
    // the liars' word is served: why a verifier runs the preset (and issue 66's proofs).
    let unvoted = verdicts(&self_only, &node, "honest killed, no vote", &verifier_calls);
    assert_eq!(unvoted[0], "FORGED", "the harness sees a forgery served");
    assert_ne!(
        unvoted[1], "FORGED",
        "one block's logs are checked without a vote"
    );
}

/// Each call's fate through `gw`: `honest` (the node's own answer), `FORGED`, or the
/// error's status and code.
fn verdicts(gw: &Gateway, node: &Anvil, phase: &str, calls: &[(&str, Value)]) -> Vec<String> {
    let key = gw.key("scale", &[]);
    let mut out = vec![];
    for (method, params) in calls {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
        let got = r.json();
        let outcome = match got.get("result") {
            Some(result) if *result == node.call(method, params.clone()) => "honest".into(),
            Some(_) => "FORGED".into(),
            None => format!("{} {}", r.status, got["error"]["data"]["error"]),
        };
        eprintln!("{phase}: {method} -> {outcome}");
        out.push(outcome);
    }
    out
}
