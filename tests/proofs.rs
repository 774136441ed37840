//! Answers proven against a root (issue 66): with `rpc.verify.root`, account reads
//! (`eth_getBalance`, `eth_getTransactionCount`, `eth_getCode`, `eth_getStorageAt`) are
//! answered from an `eth_getProof` walked to the state root of a block a majority of
//! hosts anchored. Every host behind the tampering proxy lying the same way about the
//! state gets the client errors naming the failed proof, never the lie; honest hosts
//! answer exactly what the node says, `X-Chainedge-Verified: proof`.

use common::evm::*;
use common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// A contract with code, a nonce and storage slots 0 and 2 set (slot 1 empty).
const CONTRACT: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";
/// An account that does not exist.
const ABSENT: &str = "0x00000000000000000000000000000000000000aa";

/// State to prove: the contract, a transfer from the dev account; the block after.
fn state(node: &Anvil) -> (u64, String) {
    node.call("anvil_setCode", json!([CONTRACT, "0x600160005500"]));
    node.call("anvil_setNonce", json!([CONTRACT, "0x1"]));
    for (slot, value) in [(0u8, 0xffu64), (2, 0x1234)] {
        node.call(
            "anvil_setStorageAt",
            json!([
                CONTRACT,
                format!("0x{slot:064x}"),
                format!("0x{value:064x}")
            ]),
        );
    }
    send(node, Some(BOB), "0x", "0x1234");
    let block = node.call("eth_getBlockByNumber", json!(["latest", false]));
    let number = u64::from_str_radix(
        block["number"].as_str().unwrap().trim_start_matches("0x"),
        16,
    );
    (number.unwrap(), block["hash"].as_str().unwrap().to_string())
}

/// Every provable read, at the head, by number and by hash.
fn calls(number: u64, hash: &str) -> Vec<(&'static str, Value)> {
    let n = format!("0x{number:x}");
    vec![
        ("eth_getBalance", json!([DEV, "latest"])),
        ("eth_getBalance", json!([DEV, n])),
        ("eth_getBalance", json!([DEV, {"blockHash": hash}])),
        ("eth_getBalance", json!([ABSENT, "latest"])),
        ("eth_getTransactionCount", json!([DEV, "latest"])),
        ("eth_getTransactionCount", json!([CONTRACT, n])),
        ("eth_getCode", json!([CONTRACT, "latest"])),
        ("eth_getCode", json!([DEV, n])),
        ("eth_getStorageAt", json!([CONTRACT, "0x0", "latest"])),
        ("eth_getStorageAt", json!([CONTRACT, "0x1", n])),
        (
            "eth_getStorageAt",
            json!([CONTRACT, "0x2", {"blockHash": hash}]),
        ),
        ("eth_getStorageAt", json!([ABSENT, "0x0", "latest"])),
    ]
}

fn gateway(hosts: &[String], mode: &str) -> Gateway {
    gateway_asking(hosts, mode, 3)
}

/// A gateway anchoring blocks on a majority of `ask` hosts.
fn gateway_asking(hosts: &[String], mode: &str, ask: usize) -> Gateway {
    gateway_rooted(hosts, mode, ask, None)
}

/// A gateway anchoring blocks on a beacon light client following `beacon` (when given)
/// or on a majority of `ask` hosts; with a light client, once it has bootstrapped.
fn gateway_rooted(hosts: &[String], mode: &str, ask: usize, beacon: Option<&Standin>) -> Gateway {
    let mut pools = "  eth_el:\n    hosts:\n".to_string();
    for (i, url) in hosts.iter().enumerate() {
        pools.push_str(&format!(
            "      - {{id: el-{i}, url: \"{url}\", family: el-anvil}}\n"
        ));
    }
    let mut light_client = String::new();
    if let Some(beacon) = beacon {
        let cl = beacon.url();
        pools.push_str(&format!(
            "  eth_cl:\n    hosts:\n      - {{id: cl-1, url: \"{cl}\", family: cl-lighthouse}}\n"
        ));
        light_client = format!(
            ", light_client: {}",
            beacon.light_client_yaml("eth_el", "eth_cl")
        );
    }
    let gw = Gateway::start(GatewayOpts {
        pools,
        extra_yaml: format!(
            "rpc:\n  cache: {{enabled: false}}\n  verify: {{mode: {mode}, root: {{ask: {ask}{light_client}}}}}\n{UNLIMITED}"
        ),
        ..Default::default()
    });
    let head = "chainedge_light_client_slot{of=\"head\",pool=\"eth_el\"}";
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while beacon.is_some() && metric_value(&gw, head) == 0.0 {
        assert!(std::time::Instant::now() < until, "{}", gw.stderr_tail());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    gw
}

/// Each call's outcome: `honest` (the node's own answer, checked by proof), `FORGED`, or
/// the error the client got.
fn outcomes(gw: &Gateway, node: &Anvil, calls: &[(&str, Value)]) -> Vec<String> {
    let key = gw.key("scale", &[]);
    let mut out = Vec::new();
    for (method, params) in calls {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
        let got = r.json();
        let outcome = match got.get("result") {
            Some(result) if *result == node.call(method, params.clone()) => {
                assert_eq!(got["id"], 7, "{got}");
                assert_eq!(r.header("x-chainedge-verified"), Some("proof"), "{method}");
                format!("honest {}", r.header("x-chainedge-anchor").unwrap_or(""))
            }
            Some(_) => format!("FORGED {method} {params}: {got}"),
            None => format!("{} {}", r.status, got["error"]["message"]),
        };
        out.push(outcome);
    }
    out
}

#[test]
fn honest_hosts_answer_by_proof_against_an_anchored_block() {
    let node = Arc::new(Anvil::start(1, &[]));
    let (number, hash) = state(&node);
    let fronts: Vec<Fixture> = (0..2)
        .map(|_| liar(node.clone(), Arc::new(Mutex::new(|_, _, _, _| {}))))
        .collect();
    let hosts = vec![node.url(), fronts[0].url(), fronts[1].url()];
    let gw = gateway(&hosts, "enforce");
    let got = outcomes(&gw, &node, &calls(number, &hash));
    let anchor = format!("block=0x{number:x}; hash={hash}; by=majority-");
    for outcome in &got {
        assert!(outcome.starts_with("honest "), "{got:#?}");
        assert!(outcome.contains(&anchor), "{outcome}");
    }
    assert_eq!(metric_sum(&gw, "chainedge_disproved_answers_total{"), 0.0);
    // Rooted by a beacon light client following the node instead: the same answers,
    // anchored at the same block by what its sync committee signed.
    let beacon = Standin::beacon_over(&node.url());
    let rooted = gateway_rooted(&hosts, "enforce", 3, Some(&beacon));
    let by_light = outcomes(&rooted, &node, &calls(number, &hash));
    let anchor = format!("block=0x{number:x}; hash={hash}; by=light-client");
    assert!(
        by_light.iter().all(|o| o.contains(&anchor)),
        "{by_light:#?}"
    );
    // Asked again: answered from what the proofs proved, no node asked (but for the
    // head's anchor, asked again once it is 2 s old).
    let attempts = || metric_sum(&gw, "chainedge_upstream_attempts_total{");
    let before = attempts();
    let again = outcomes(&gw, &node, &calls(number, &hash));
    assert_eq!(again, got);
    assert!(
        attempts() - before <= 3.0,
        "{} node calls",
        attempts() - before
    );
    // An old block outside the window, and `pending`, are read as before: unproven.
    node.mine(200);
    let key = gw.key("scale", &[]);
    let head = node.block_number() as f64;
    let tip = r#"chainedge_pool_tip{of="majority",pool="eth_el"}"#;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while metric_value(&gw, tip) < head {
        assert!(
            std::time::Instant::now() < until,
            "the pool's head never moved"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    for params in [json!([DEV, "0x1"]), json!([DEV, "pending"])] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": params});
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
        assert_eq!(
            r.json()["result"],
            node.call("eth_getBalance", params.clone())
        );
        assert_eq!(r.header("x-chainedge-verified"), Some("none"), "{params}");
    }
    // A caller may require proof: a read the edge proves meets it, one it cannot does not.
    let require = [("x-chainedge-require-verified", "proof")];
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [DEV, "latest"]});
    let r = request_json(&gw, &key, &require, &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [DEV, "pending"]});
    let r = request_json(&gw, &key, &require, &body);
    assert_eq!(r.status, 502, "{}", r.text());
}

fn request_json(gw: &Gateway, key: &str, extra: &[(&str, &str)], body: &Value) -> Resp {
    let auth = format!("Bearer {key}");
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Authorization", auth.as_str()),
    ];
    headers.extend_from_slice(extra);
    request(
        gw.port,
        "POST",
        "/rpc/eth",
        &headers,
        body.to_string().as_bytes(),
    )
    .unwrap()
}

#[test]
fn every_host_lying_the_same_way_gets_errors_naming_the_proof_not_lies() {
    let node = Arc::new(Anvil::start(1, &[]));
    let (number, hash) = state(&node);
    let calls = calls(number, &hash);
    let lies: Vec<(&str, Lie)> = vec![
        ("a balance", |_, m, _, r| match m {
            "eth_getProof" => r["balance"] = json!("0x3635c9adc5dea00000"),
            "eth_getBalance" => *r = json!("0x3635c9adc5dea00000"),
            _ => {}
        }),
        ("a nonce", |_, m, _, r| match m {
            "eth_getProof" => r["nonce"] = json!("0x99"),
            "eth_getTransactionCount" => *r = json!("0x99"),
            _ => {}
        }),
        ("a storage word", |_, m, _, r| {
            let forged = format!("0x{:064x}", 0xdead);
            match m {
                "eth_getProof" => {
                    for slot in r["storageProof"].as_array_mut().unwrap() {
                        slot["value"] = json!("0xdead");
                    }
                }
                "eth_getStorageAt" => *r = json!(forged),
                _ => {}
            }
        }),
        ("the code", |_, m, _, r| {
            if m == "eth_getCode" {
                *r = json!("0x6000");
            }
        }),
        ("an account said absent", |_, m, _, r| {
            if m == "eth_getProof" {
                r["balance"] = json!("0x0");
                r["nonce"] = json!("0x0");
                r["codeHash"] =
                    json!("0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
                r["storageHash"] =
                    json!("0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421");
            }
        }),
        ("a proof from an earlier block", |n, m, p, r| {
            if m == "eth_getProof" {
                let earlier = format!("0x{:x}", n.block_number() - 1);
                *r = n.call("eth_getProof", json!([p[0], p[1], earlier]));
            }
        }),
    ];
    when_every_host_tells(
        &node,
        lies,
        |gw| outcomes(gw, &node, &calls),
        &["proof", "code"],
    );
}

/// Each lie told by all three hosts at once, with blocks anchored by a majority of them
/// and then by a beacon light client following the node: no lie reaches the client,
/// some call is refused, every refusal says one of `says`, and each is recorded as
/// misbehaviour.
fn when_every_host_tells(
    node: &Arc<Anvil>,
    lies: Vec<(&str, Lie)>,
    ask: impl Fn(&Gateway) -> Vec<String>,
    says: &[&str],
) {
    let beacon = Standin::beacon_over(&node.url());
    let roots = [None, Some(&beacon)];
    for ((what, lie), root) in lies.iter().flat_map(|l| roots.iter().map(move |r| (l, r))) {
        let (what, lie) = (*what, *lie);
        let liars: Vec<Fixture> = (0..3)
            .map(|_| liar(node.clone(), Arc::new(Mutex::new(lie))))
            .collect();
        let hosts: Vec<String> = liars.iter().map(Fixture::url).collect();
        let gw = gateway_rooted(&hosts, "enforce", 3, *root);
        let by = if root.is_some() {
            "light client"
        } else {
            "majority"
        };
        let what = &format!("{what} (anchored by {by})");
        let got = ask(&gw);
        let forged: Vec<&String> = got.iter().filter(|o| o.starts_with("FORGED")).collect();
        assert!(
            forged.is_empty(),
            "{what}: a lie reached the client: {forged:#?}"
        );
        let refused: Vec<&String> = got.iter().filter(|o| !o.starts_with("honest")).collect();
        assert!(
            !refused.is_empty(),
            "{what}: the lie touched no call: {got:#?}"
        );
        for error in &refused {
            assert!(says.iter().any(|s| error.contains(s)), "{what}: {error}");
        }
        assert!(
            metric_sum(&gw, "chainedge_disproved_answers_total{") >= refused.len() as f64,
            "{what}: every lie recorded"
        );
        eprintln!(
            "{what}: {} refused, {} answered",
            refused.len(),
            got.len() - refused.len()
        );
    }
}

#[test]
fn a_header_lie_is_outvoted_and_observe_mode_serves_the_node() {
    let node = Arc::new(Anvil::start(1, &[]));
    let (number, hash) = state(&node);
    // One host forges the state root in every header it gives (its hash then fails).
    let forged_root: Lie = |_, m, _, r| {
        if m.starts_with("eth_getBlockBy") && r.is_object() {
            r["stateRoot"] = json!(format!("0x{:064x}", 1));
        }
    };
    let header_liar = liar(node.clone(), Arc::new(Mutex::new(forged_root)));
    let front = liar(node.clone(), Arc::new(Mutex::new(|_, _, _, _| {})));
    let hosts = vec![header_liar.url(), node.url(), front.url()];
    let gw = gateway(&hosts, "enforce");
    let got = outcomes(&gw, &node, &calls(number, &hash));
    assert!(got.iter().all(|o| o.starts_with("honest")), "{got:#?}");
    // Two hosts, one of them forging headers: no majority, so nothing is anchored, and
    // the reads are refused rather than proven against the forged root.
    let gw = gateway_asking(&hosts[..2], "enforce", 2);
    let got = outcomes(&gw, &node, &calls(number, &hash));
    for outcome in &got {
        assert!(outcome.contains("is not anchored"), "{outcome}");
        assert!(
            outcome.contains("a header that is not its block's"),
            "{outcome}"
        );
    }
    assert!(metric_sum(&gw, "chainedge_disproved_answers_total{") >= 1.0);
    // Observe mode: a lying proof is recorded, and the node's own answer served unproven.
    let lying: Lie = |_, m, _, r| {
        if m == "eth_getProof" {
            r["balance"] = json!("0x1");
        }
    };
    let liars: Vec<Fixture> = (0..3)
        .map(|_| liar(node.clone(), Arc::new(Mutex::new(lying))))
        .collect();
    let hosts: Vec<String> = liars.iter().map(Fixture::url).collect();
    let gw = gateway(&hosts, "observe");
    let key = gw.key("scale", &[]);
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [DEV, "latest"]});
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
    assert_eq!(
        r.json()["result"],
        node.call("eth_getBalance", json!([DEV, "latest"]))
    );
    assert_eq!(r.header("x-chainedge-verified"), Some("none"));
    assert!(metric_sum(&gw, "chainedge_disproved_answers_total{") >= 1.0);
}

/// A chain of token transfers spread over blocks, empty blocks between: the token.
fn transfers(node: &Anvil) -> String {
    let token = deploy_erc20(node, "Complete", "CPL", "1000000");
    for (i, to) in [ALICE, BOB, CAROL, ALICE].iter().enumerate() {
        let data = format!(
            "0x{}{}{}",
            selector("transfer(address,uint256)"),
            word(to),
            word(&(i + 1).to_string())
        );
        send(node, Some(&token), &data, "0x0");
        node.mine(2);
    }
    token
}

/// Range filters over the whole chain: by address, by topic, matching nothing, all.
fn range_calls(node: &Anvil, token: &str) -> Vec<(&'static str, Value)> {
    let head = format!("0x{:x}", node.block_number());
    let transfer = format!("0x{}", hex_topic("Transfer(address,address,uint256)"));
    vec![
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": head, "address": token}]),
        ),
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": head, "topics": [transfer]}]),
        ),
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": head, "address": CAROL}]),
        ),
        (
            "eth_getLogs",
            json!([{"fromBlock": "0x3", "toBlock": head}]),
        ),
    ]
}

fn hex_topic(signature: &str) -> String {
    use sha3::Digest;
    hex::encode(sha3::Keccak256::digest(signature.as_bytes()))
}

/// Each range answer: `honest` (the node's own, said `root`), `FORGED`, or the error.
fn range_outcomes(gw: &Gateway, node: &Anvil, calls: &[(&str, Value)]) -> Vec<String> {
    let key = gw.key("scale", &[]);
    calls
        .iter()
        .map(|(method, params)| {
            let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": params});
            let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
            let got = r.json();
            match got.get("result") {
                Some(result) if *result == node.call(method, params.clone()) => {
                    let level = r.header("x-chainedge-verified").unwrap_or("");
                    format!(
                        "honest {level} {}",
                        r.header("x-chainedge-anchor").unwrap_or("")
                    )
                }
                Some(_) => format!("FORGED {params}: {got}"),
                None => format!("{} {}", r.status, got["error"]["message"]),
            }
        })
        .collect()
}

#[test]
fn a_range_of_logs_is_complete_or_refused_even_when_every_host_lies() {
    let node = Arc::new(Anvil::start(1, &[]));
    let token = transfers(&node);
    let calls = range_calls(&node, &token);
    // Honest hosts: every range answered as the node answers it, said `root`.
    let fronts: Vec<Fixture> = (0..2)
        .map(|_| liar(node.clone(), Arc::new(Mutex::new(|_, _, _, _| {}))))
        .collect();
    let gw = gateway(&[node.url(), fronts[0].url(), fronts[1].url()], "enforce");
    let got = range_outcomes(&gw, &node, &calls);
    for outcome in &got {
        assert!(outcome.starts_with("honest root block=0x"), "{got:#?}");
    }
    // Every host lying the same way about ranges of logs.
    let lies: Vec<(&str, Lie)> = vec![
        ("a log dropped", |_, m, p, r| {
            if m == "eth_getLogs" && p[0].get("fromBlock").is_some() {
                r.as_array_mut().unwrap().pop();
            }
        }),
        ("every log withheld", |_, m, p, r| {
            if m == "eth_getLogs" && p[0].get("fromBlock").is_some() {
                *r = json!([]);
            }
        }),
        ("a log forged", |_, m, _, r| {
            if let Some(log) = r
                .as_array_mut()
                .filter(|_| m == "eth_getLogs")
                .and_then(|l| l.first_mut())
            {
                log["data"] = json!(format!("0x{:064x}", 0xdead_beef_u64));
            }
        }),
        ("a log added twice", |_, m, _, r| {
            if let Some(logs) = r.as_array_mut().filter(|_| m == "eth_getLogs") {
                if let Some(first) = logs.first().cloned() {
                    logs.push(first);
                }
            }
        }),
        ("a log moved to a fork's block", |_, m, _, r| {
            if let Some(log) = r
                .as_array_mut()
                .filter(|_| m == "eth_getLogs")
                .and_then(|l| l.first_mut())
            {
                log["blockHash"] = json!(format!("0x{}", "ab".repeat(32)));
            }
        }),
    ];
    let says = ["its logs are not the blocks'"];
    when_every_host_tells(&node, lies, |gw| range_outcomes(gw, &node, &calls), &says);
}

#[test]
fn checked_reads_are_anchored_and_a_forks_block_is_refused() {
    let node = Arc::new(Anvil::start(1, &[]));
    let (number, hash) = state(&node);
    // Another chain of the same length: its blocks check against themselves, but they
    // are not the blocks a majority has.
    let fork = Arc::new(Anvil::start(1, &[]));
    send(&fork, Some(ALICE), "0x", "0x1");
    fork.mine(number - fork.block_number());
    assert_eq!(fork.block_number(), number);
    let (main, other) = (node.clone(), fork.clone());
    let forker = Fixture::start(move |req| {
        let call: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let to = match call["method"].as_str() {
            Some("eth_getBlockByNumber") => other.port,
            _ => main.port,
        };
        let hdr = [("Content-Type", "application/json")];
        FixtureResponse::json(request(to, "POST", "/", &hdr, &req.body).unwrap().json())
    });
    let front = liar(node.clone(), Arc::new(Mutex::new(|_, _, _, _| {})));
    let hosts = vec![forker.url(), node.url(), front.url()];
    let gw = gateway(&hosts, "enforce");
    let key = gw.key("scale", &[]);
    let n = format!("0x{number:x}");
    let tx = node.call("eth_getBlockByNumber", json!([n, false]))["transactions"][0].clone();
    let reads = [
        ("eth_getBlockByNumber", json!([n, true])),
        ("eth_getBlockByNumber", json!([n, false])),
        ("eth_getBlockByHash", json!([hash, false])),
        ("eth_getBlockReceipts", json!([n])),
        ("eth_getTransactionReceipt", json!([tx])),
        ("eth_getTransactionByHash", json!([tx])),
    ];
    // Each read several times, so the fork's host is asked first at least once.
    for _ in 0..3 {
        for (method, params) in &reads {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
            assert_eq!(
                r.json()["result"],
                node.call(method, params.clone()),
                "{method}"
            );
            assert_eq!(r.header("x-chainedge-verified"), Some("root"), "{method}");
            let anchor = r.header("x-chainedge-anchor").unwrap_or("");
            assert!(
                anchor.contains(&format!("hash={hash}")),
                "{method}: {anchor}"
            );
        }
    }
    let disproved = metric_sum(&gw, "chainedge_disproved_answers_total{");
    assert!(disproved >= 1.0, "the fork's block was never refused");
}

#[test]
fn a_frozen_host_costs_a_proven_read_a_hedge_not_its_timeout() {
    let node = Arc::new(Anvil::start(1, &[]));
    let (number, hash) = state(&node);
    let token = transfers(&node);
    // A host that takes every call and never answers within any budget (a SIGSTOPped
    // node, as a client sees it).
    let frozen = Fixture::start(|_| {
        std::thread::sleep(std::time::Duration::from_secs(20));
        FixtureResponse::json(json!({}))
    });
    let front = liar(node.clone(), Arc::new(Mutex::new(|_, _, _, _| {})));
    let hosts = vec![frozen.url(), node.url(), front.url()];
    let gw = gateway(&hosts, "enforce");
    let key = gw.key("scale", &[]);
    // At fixed blocks (the head moved since the state was written).
    let mut reads: Vec<(&str, Value)> = calls(number, &hash)
        .into_iter()
        .filter(|(_, p)| !p.to_string().contains("latest"))
        .collect();
    reads.extend(range_calls(&node, &token));
    for (method, params) in &reads {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let began = std::time::Instant::now();
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
        let took = began.elapsed();
        assert_eq!(
            r.json()["result"],
            node.call(method, params.clone()),
            "{method}"
        );
        assert!(
            took < std::time::Duration::from_millis(1500),
            "{method} {params}: {took:?}"
        );
    }
}
