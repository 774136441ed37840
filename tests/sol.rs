//! The Solana REST layer against a real Solana execution engine (LiteSVM behind Solana's
//! JSON-RPC, `tests/standins/sol_node.py`), driven by a wallet that signs real transactions:
//! account and wallet reads, the transaction sender and the bundle sender (all or none),
//! every refusal before any node, and reads moving off an unhealthy node.

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

fn sol_gateway(nodes: &[&SolNode], extra: &str) -> Gateway {
    sol_gateway_with(nodes, "", extra)
}

/// As `sol_gateway`, each `sol_rpc` host declared with `host_attrs` too (e.g.
/// `capabilities: [das]`).
fn sol_gateway_with(nodes: &[&SolNode], host_attrs: &str, extra: &str) -> Gateway {
    let attrs = if host_attrs.is_empty() {
        String::new()
    } else {
        format!(", {host_attrs}")
    };
    let hosts: String = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                "      - {{id: sol-{}, url: \"{}\", family: solana{attrs}}}\n",
                i + 1,
                n.url()
            )
        })
        .collect();
    Gateway::start(GatewayOpts {
        pools: format!(
            "  sol_rpc:\n    hosts:\n{hosts}\
             \x20 sol_block_engine:\n    hosts:\n      - {{id: engine-1, url: \"{}/api/v1/bundles\", family: block-engine}}\n",
            nodes[0].url()
        ),
        extra_yaml: format!("health:\n  interval_ms: 200\n  timeout_ms: 2000\n{UNLIMITED}{extra}"),
        ..Default::default()
    })
}

fn get(gw: &Gateway, key: &str, path: &str) -> Resp {
    request(gw.port, "GET", path, &[("x-token", key)], b"").unwrap()
}

fn post(gw: &Gateway, key: &str, path: &str, body: &Value) -> Resp {
    let h = [("Content-Type", "application/json"), ("x-token", key)];
    request(gw.port, "POST", path, &h, body.to_string().as_bytes()).unwrap()
}

/// Calls the node has served, by method (the shim counts them).
fn served(node: &SolNode, method: &str) -> u64 {
    node.call("shim_stats", json!([]))["result"][method]
        .as_u64()
        .unwrap_or(0)
}

fn balance(node: &SolNode, address: &str) -> u64 {
    node.call("getBalance", json!([address]))["result"]["value"]
        .as_u64()
        .unwrap()
}

#[test]
fn wallet_and_account_reads_come_from_the_node_and_refuse_bad_input_first() {
    let node = SolNode::start(100, 32);
    let fx = node.fixture();
    let gw = sol_gateway(&[&node], "");
    let key = gw.key("business", &[]);
    let wallet = fx["wallet"].as_str().unwrap();

    let r = get(&gw, &key, &format!("/v1/sol/wallet/{wallet}/balance"));
    assert_eq!(r.status, 200, "{}", r.text());
    let b = r.json();
    assert_eq!(b["lamports"], 5_500_000_000u64);
    assert_eq!(b["sol"], 5.5);
    assert_eq!(b["commitment"], "confirmed");
    assert!(b["slot"].as_u64().unwrap() > 0);

    let r = get(&gw, &key, &format!("/v1/sol/wallet/{wallet}/tokens"));
    assert_eq!(r.status, 200, "{}", r.text());
    let tokens = r.json()["tokens"].as_array().unwrap().clone();
    assert_eq!(
        tokens.len(),
        2,
        "the NFT is not a fungible token: {tokens:?}"
    );
    let by_mint = |m: &Value| tokens.iter().find(|t| t["mint"] == *m).unwrap().clone();
    let spl = by_mint(&fx["mint"]);
    assert_eq!(
        (
            &spl["amount"],
            &spl["decimals"],
            &spl["ui_amount_string"],
            &spl["program"]
        ),
        (
            &json!("1500000"),
            &json!(6),
            &json!("1.5"),
            &json!("spl-token")
        )
    );
    let t22 = by_mint(&fx["mint22"]);
    assert_eq!(
        (&t22["amount"], &t22["ui_amount_string"], &t22["program"]),
        (&json!("12345"), &json!("123.45"), &json!("spl-token-2022"))
    );

    let r = get(&gw, &key, &format!("/v1/sol/wallet/{wallet}/nfts"));
    assert_eq!(r.status, 200, "{}", r.text());
    let n = r.json();
    assert_eq!(n["nfts"].as_array().unwrap().len(), 1);
    assert_eq!(n["nfts"][0]["mint"], fx["nft"]);
    assert_eq!(n["compressed"]["state"], "unavailable", "no DAS host here");

    // The same node declared as a DAS host: the compressed NFTs come from its DAS API
    // (`getAssetsByOwner`, whose parameters the node checks against the DAS spec).
    let das = sol_gateway_with(&[&node], "capabilities: [das]", "");
    let das_key = das.key("business", &[]);
    let calls = served(&node, "getAssetsByOwner");
    let r = get(&das, &das_key, &format!("/v1/sol/wallet/{wallet}/nfts"));
    assert_eq!(r.status, 200, "{}", r.text());
    let c = &r.json()["compressed"];
    assert_eq!(
        (&c["state"], &c["truncated"]),
        (&json!("available"), &json!(false)),
        "{c}"
    );
    let leaves = c["items"].as_array().unwrap();
    let names: Vec<&str> = leaves.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Demo leaf 1", "Demo leaf 2"]);
    assert_eq!(
        (&leaves[0]["leaf_id"], &leaves[1]["leaf_id"]),
        (&json!(0), &json!(1))
    );
    assert_eq!(leaves[0]["tree"], leaves[1]["tree"], "one Merkle tree");
    assert_ne!(leaves[0]["id"], leaves[1]["id"]);
    assert!(leaves.iter().all(|l| l["compressed"] == true));
    assert_eq!(served(&node, "getAssetsByOwner"), calls + 1);
    drop(das);

    // Account snapshot: a token mint (owned by the token program, 82 bytes of data).
    let mint = fx["mint"].as_str().unwrap();
    let r = get(&gw, &key, &format!("/v1/sol/snapshot/account/{mint}"));
    assert_eq!(r.status, 200, "{}", r.text());
    let a = r.json();
    assert_eq!(a["owner"], "TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
    assert_eq!(a["space"], 82);
    use base64::Engine;
    let data = base64::engine::general_purpose::STANDARD
        .decode(a["data"].as_str().unwrap())
        .unwrap();
    assert_eq!((data.len(), data[44]), (82, 6), "decimals at byte 44");
    let unknown = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    let r = get(&gw, &key, &format!("/v1/sol/snapshot/account/{unknown}"));
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("not_found"))
    );

    // History: the wallet's three incoming transfers plus its token accounts' creation
    // name it, newest first; pages by `before` meet without gap or overlap.
    let r = get(
        &gw,
        &key,
        &format!("/v1/sol/wallet/{wallet}/history?limit=100"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let all: Vec<Value> = r.json()["items"].as_array().unwrap().clone();
    assert!(all.len() >= 3, "{all:?}");
    assert!(all
        .windows(2)
        .all(|w| w[0]["slot"].as_u64() >= w[1]["slot"].as_u64()));
    assert!(r.json()["next_cursor"].is_null(), "one page holds it all");
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v1/sol/wallet/{wallet}/history?limit=2&before={c}"),
            None => format!("/v1/sol/wallet/{wallet}/history?limit=2"),
        };
        let page = get(&gw, &key, &path).json();
        paged.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let sigs = |v: &[Value]| v.iter().map(|i| i["signature"].clone()).collect::<Vec<_>>();
    assert_eq!(sigs(&paged), sigs(&all));
    assert_eq!(all[0]["status"], "success");

    // Bad input: 400 before any node call.
    let before = [
        "getBalance",
        "getAccountInfo",
        "getSignaturesForAddress",
        "getTokenAccountsByOwner",
    ]
    .map(|m| served(&node, m));
    for path in [
        "/v1/sol/wallet/0xdeadbeef/balance".to_string(),
        "/v1/sol/wallet/1111111111111111111111111111111/balance".to_string(),
        format!("/v1/sol/wallet/{wallet}/balance?commitment=max"),
        format!("/v1/sol/wallet/{wallet}/history?limit=0"),
        format!("/v1/sol/wallet/{wallet}/history?limit=1001"),
        format!("/v1/sol/wallet/{wallet}/history?before=notasignature"),
        format!("/v1/sol/wallet/{wallet}/history?commitment=processed"),
        "/v1/sol/snapshot/account/O0O0O0O0O0O0O0O0O0O0O0O0O0O0O0O0O0O0".to_string(),
        "/v1/sol/wallet/%20/tokens".to_string(),
    ] {
        let r = get(&gw, &key, &path);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_params", "{path}");
    }
    let after = [
        "getBalance",
        "getAccountInfo",
        "getSignaturesForAddress",
        "getTokenAccountsByOwner",
    ]
    .map(|m| served(&node, m));
    assert_eq!(before, after, "no node was called for bad input");

    // Tiers: history is basic and above.
    let free = gw.key("free", &[]);
    let r = get(&gw, &free, &format!("/v1/sol/wallet/{wallet}/history"));
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        get(&gw, &free, &format!("/v1/sol/wallet/{wallet}/balance")).status,
        200
    );
}

#[test]
fn reads_move_off_an_unhealthy_node() {
    let a = SolNode::start(100, 32);
    let b = SolNode::start(100, 32);
    let wallet = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    b.call("requestAirdrop", json!([wallet, 4_200_000_000u64]));
    let gw = sol_gateway(&[&a, &b], "");
    let key = gw.key("business", &[]);
    a.call("shim_setHealthy", json!([false]));
    std::thread::sleep(Duration::from_millis(800));
    for _ in 0..5 {
        let r = get(&gw, &key, &format!("/v1/sol/wallet/{wallet}/balance"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.json()["lamports"],
            4_200_000_000u64,
            "read on sol-2, the healthy node"
        );
    }
    a.call("shim_setHealthy", json!([true]));
}

/// Solana reads by vote (issue 65): two real nodes, each at its own slot, and a front
/// before one of them that inflates one wallet's balance. With two of three to agree
/// the vote is on the value (the slots differ), the liar is outvoted and logged; with
/// all three to agree the read is an error, never the liar's word.
#[test]
fn solana_reads_put_to_a_vote_outvote_a_liar() {
    let a = SolNode::start(100, 32);
    let b = SolNode::start(100, 32);
    let wallet = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    for n in [&a, &b] {
        n.call("requestAirdrop", json!([wallet, 4_200_000_000u64]));
    }
    let a_port = a.port;
    let liar = Fixture::start(move |req| {
        let hdr = [("Content-Type", "application/json")];
        let mut answer = request(a_port, "POST", "/", &hdr, &req.body)
            .unwrap()
            .json();
        let call: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        if call["method"] == "getBalance" && answer["result"]["value"].is_u64() {
            answer["result"]["value"] = json!(999_000_000_000u64);
        }
        FixtureResponse::json(answer)
    });
    let hosts = |agree: u32| {
        Gateway::start(GatewayOpts {
            pools: format!(
                "  sol_rpc:\n    hosts:\n      - {{id: sol-a, url: \"{}\", family: solana}}\n      \
                 - {{id: sol-b, url: \"{}\", family: solana}}\n      \
                 - {{id: sol-liar, url: \"{}\", family: solana}}\n",
                a.url(),
                b.url(),
                liar.url()
            ),
            extra_yaml: format!(
                "rpc:\n  verify: {{quorum: {{methods: [getBalance, getAccountInfo], ask: 3, \
                 agree: {agree}}}}}\n{UNLIMITED}"
            ),
            ..Default::default()
        })
    };
    let gw = hosts(2);
    let key = gw.key("business", &[]);
    for _ in 0..5 {
        let r = get(&gw, &key, &format!("/v1/sol/wallet/{wallet}/balance"));
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["lamports"], 4_200_000_000u64, "the liar outvoted");
        assert_eq!(r.header("x-chainedge-verified"), Some("quorum=2/3"));
    }
    let outvoted = metric_sum(&gw, "chainedge_disproved_answers_total{");
    assert!(
        outvoted >= 1.0,
        "the liar's answers were counted: {outvoted}"
    );
    // Reads not put to a vote say so.
    let r = get(&gw, &key, &format!("/v1/sol/wallet/{wallet}/history"));
    assert_eq!(
        r.header("x-chainedge-verified"),
        Some("none"),
        "{}",
        r.text()
    );

    let gw = hosts(3);
    let key = gw.key("business", &[]);
    let r = get(&gw, &key, &format!("/v1/sol/wallet/{wallet}/balance"));
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["error"], "quorum_dispute", "{}", r.text());
}

#[test]
fn the_senders_verify_first_send_once_and_bundles_land_all_or_none() {
    let node = SolNode::start(100, 32);
    let fx = node.fixture();
    let gw = sol_gateway(&[&node], "");
    let (basic, pro) = (gw.key("basic", &[]), gw.key("pro", &[]));
    let payer = fx["payer_secret"].as_str().unwrap();
    let wallet_secret = fx["wallet_secret"].as_str().unwrap();
    let to = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";

    // A signed transfer lands; its signature is the answer.
    let tx = node.signed_transfer(payer, to, 1_000_000);
    let r = post(
        &gw,
        &basic,
        "/v1/sol/sender/tx",
        &json!({"transaction": tx}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let sig = r.json()["signature"].as_str().unwrap().to_string();
    assert_eq!(balance(&node, to), 1_000_000);
    let status = node.call("getSignatureStatuses", json!([[sig]]));
    assert!(status["result"]["value"][0]["err"].is_null());
    // Resent: answered once, the node saw it once.
    let sent_before = served(&node, "sendTransaction");
    for _ in 0..3 {
        let r = post(
            &gw,
            &basic,
            "/v1/sol/sender/tx",
            &json!({"transaction": tx}),
        );
        assert_eq!(
            (r.status, r.json()["signature"].as_str()),
            (200, Some(sig.as_str()))
        );
    }
    assert_eq!(served(&node, "sendTransaction"), sent_before);
    assert_eq!(balance(&node, to), 1_000_000);

    // Base58 works as well.
    use base64::Engine;
    let tx2 = node.signed_transfer(payer, to, 2_000_000);
    let wire = base64::engine::general_purpose::STANDARD
        .decode(&tx2)
        .unwrap();
    let b58 = bs58::encode(&wire).into_string();
    let r = post(
        &gw,
        &basic,
        "/v1/sol/sender/tx",
        &json!({"transaction": b58, "encoding": "base58"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(balance(&node, to), 3_000_000);

    // The node's refusal (the wallet holds 5.5 SOL) is a 400 with its reason and logs.
    let too_much = node.signed_transfer(wallet_secret, to, 100_000_000_000);
    let r = post(
        &gw,
        &basic,
        "/v1/sol/sender/tx",
        &json!({"transaction": too_much}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"], "tx_rejected");
    assert_eq!(r.json()["node_code"], -32002);
    assert!(
        r.json()["logs"].as_array().is_some_and(|l| !l.is_empty()),
        "{}",
        r.text()
    );

    // Not a signed transaction: 400 before the node.
    let sent_before = served(&node, "sendTransaction");
    let mut altered = wire.clone();
    altered[10] ^= 0xff;
    let altered = base64::engine::general_purpose::STANDARD.encode(&altered);
    let mut unsigned = wire.clone();
    unsigned[1..65].fill(0);
    let unsigned = base64::engine::general_purpose::STANDARD.encode(&unsigned);
    let truncated = base64::engine::general_purpose::STANDARD.encode(&wire[..wire.len() - 3]);
    for body in [
        json!({"transaction": altered}),
        json!({"transaction": unsigned}),
        json!({"transaction": truncated}),
        json!({"transaction": "not base64!"}),
        json!({"transaction": tx2, "encoding": "base58"}),
        json!({"transaction": tx2, "encoding": "hex"}),
        json!({"transaction": ""}),
        json!({"transaction": "A".repeat(5000)}),
        json!({"tx": tx2}),
        json!({"transaction": tx2, "extra": 1}),
    ] {
        let r = post(&gw, &basic, "/v1/sol/sender/tx", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_params");
    }
    assert_eq!(served(&node, "sendTransaction"), sent_before);

    // A bundle lands in order, and its id is the SHA-256 of its signatures.
    let (x, y) = (
        "Fm5DZAoQ4uF9n6ZJ3t9LQdB8k8j5EqLqV6bTkzWq5Ggf",
        "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy4sBbkXK5Ac",
    );
    let ok = [
        node.signed_transfer(payer, x, 5_000_000),
        node.signed_transfer(payer, y, 6_000_000),
    ];
    let r = post(
        &gw,
        &pro,
        "/v1/sol/sender/bundle",
        &json!({"transactions": ok}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let sigs: Vec<String> = r.json()["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for s in &sigs {
        h.update(bs58::decode(s).into_vec().unwrap());
    }
    assert_eq!(r.json()["bundle_id"], hex::encode(h.finalize()));
    assert_eq!(
        (balance(&node, x), balance(&node, y)),
        (5_000_000, 6_000_000)
    );

    // One transaction of a bundle fails: none of it lands.
    let z = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T";
    let half = [
        node.signed_transfer(payer, z, 7_000_000),
        node.signed_transfer(wallet_secret, z, 100_000_000_000),
    ];
    let r = post(
        &gw,
        &pro,
        "/v1/sol/sender/bundle",
        &json!({"transactions": half}),
    );
    assert_eq!(
        r.status,
        200,
        "the engine takes it; landing is its business: {}",
        r.text()
    );
    let id = r.json()["bundle_id"].clone();
    assert_eq!(balance(&node, z), 0, "the first transfer was rolled back");
    let engine = request(
        node.port,
        "POST",
        "/api/v1/bundles",
        &[("Content-Type", "application/json")],
        json!({"jsonrpc": "2.0", "id": 1, "method": "getInflightBundleStatuses", "params": [[id]]})
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(engine.json()["result"]["value"][0]["status"], "Failed");

    // Bundle bounds and checks, before the engine.
    let bundles_before = served(&node, "sendBundle");
    let six: Vec<String> = (0..6)
        .map(|i| node.signed_transfer(payer, x, 1000 + i))
        .collect();
    for body in [
        json!({"transactions": []}),
        json!({"transactions": six}),
        json!({"transactions": [ok[0], ok[0]]}),
        json!({"transactions": [ok[0], altered]}),
        json!({"transactions": ok, "encoding": "base58"}),
        json!({"txs": ok}),
    ] {
        let r = post(&gw, &pro, "/v1/sol/sender/bundle", &body);
        assert_eq!(r.status, 400, "{body}: {}", r.text());
    }
    assert_eq!(served(&node, "sendBundle"), bundles_before);
    // Tiers: bundles are pro and above.
    let r = post(
        &gw,
        &basic,
        "/v1/sol/sender/bundle",
        &json!({"transactions": ok}),
    );
    assert_eq!(r.status, 403);
}

fn wait_for<F: Fn() -> Option<Value>>(gw: &Gateway, what: &str, f: F) -> Value {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}; the gateway said:\n{}",
            gw.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn stake_snapshots_are_captured_per_epoch_and_paged_by_voter() {
    // Epochs move only when the test warps them.
    let node = SolNode::start(200, 100_000);
    let fx = node.fixture();
    let gw = sol_gateway(&[&node], "solana:\n  stake_snapshots: {poll_ms: 200}\n");
    let key = gw.key("business", &["sol_gpa_snapshot"]);
    let voter = fx["vote1"].as_str().unwrap();
    let stakes: Vec<String> = fx["stakes_v1"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();

    let first = wait_for(&gw, "the first snapshot", || {
        let r = get(&gw, &key, "/v1/sol/snapshot/stake/latest");
        assert!(r.status == 200 || r.status == 404, "{}", r.text());
        (r.status == 200).then(|| r.json())
    });
    let e0 = first["epoch"].as_i64().unwrap();
    assert_eq!(
        first["total"], 4,
        "three stake accounts on vote1, one on vote2"
    );
    assert!(first["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .all(|a| a["deactivation_epoch"].is_null()));

    // SPEC's page: walk by offset until offset >= total.
    let mut seen = Vec::new();
    let mut offset = 0;
    loop {
        let r = get(
            &gw,
            &key,
            &format!("/v1/sol/snapshot/stake/by-voter/{voter}?limit=2&offset={offset}"),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let page = r.json();
        assert_eq!(
            (page["voter"].as_str(), page["total"].as_i64()),
            (Some(voter), Some(3))
        );
        for a in page["accounts"].as_array().unwrap() {
            assert_eq!(a["voter"], voter);
            assert!(a["stake"].as_i64().unwrap() > 9_000_000_000);
            seen.push(a["pubkey"].as_str().unwrap().to_string());
        }
        offset += 2;
        if offset >= page["total"].as_i64().unwrap() {
            break;
        }
    }
    let mut want = stakes.clone();
    want.sort();
    assert_eq!(seen, want, "every stake account once, in order");

    // One delegator starts unstaking; the next epoch's snapshot says so.
    node.client(&[
        "deactivate",
        fx["payer_secret"].as_str().unwrap(),
        &stakes[0],
    ]);
    node.call("shim_warpEpochs", json!([1]));
    let second = wait_for(&gw, "the next epoch's snapshot", || {
        let v = get(&gw, &key, "/v1/sol/snapshot/stake/latest").json();
        (v["epoch"].as_i64() == Some(e0 + 1)).then_some(v)
    });
    assert_eq!(second["total"], 4);
    let h = get(
        &gw,
        &key,
        &format!("/v1/sol/snapshot/stake/account/{}/history", stakes[0]),
    );
    assert_eq!(h.status, 200, "{}", h.text());
    let history = h.json()["history"].as_array().unwrap().clone();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0]["epoch"], e0 + 1, "newest first");
    assert_eq!(
        history[0]["deactivation_epoch"], e0,
        "deactivated in the epoch before the warp"
    );
    assert!(history[1]["deactivation_epoch"].is_null());
    let page = get(
        &gw,
        &key,
        &format!("/v1/sol/snapshot/stake/by-voter/{voter}"),
    )
    .json();
    let unstaking = page["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["pubkey"] == stakes[0].as_str())
        .unwrap()
        .clone();
    assert_eq!(unstaking["deactivation_epoch"], e0);
    assert_eq!(page["total"], 3, "distinct accounts across snapshots");

    // The older epoch stays readable; bad input and missing epochs.
    let r = get(
        &gw,
        &key,
        &format!("/v1/sol/snapshot/stake/epoch/{e0}?limit=1"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        (
            r.json()["total"].as_i64(),
            r.json()["accounts"].as_array().unwrap().len()
        ),
        (Some(4), 1)
    );
    let r = get(&gw, &key, "/v1/sol/snapshot/stake/epoch/999999");
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("snapshot_not_found"))
    );
    for path in [
        "/v1/sol/snapshot/stake/epoch/-1".to_string(),
        "/v1/sol/snapshot/stake/epoch/x".to_string(),
        format!("/v1/sol/snapshot/stake/by-voter/{voter}?limit=0"),
        format!("/v1/sol/snapshot/stake/by-voter/{voter}?limit=1001"),
        format!("/v1/sol/snapshot/stake/by-voter/{voter}?offset=-1"),
        "/v1/sol/snapshot/stake/by-voter/notakey".to_string(),
        "/v1/sol/snapshot/stake/account/notakey/history".to_string(),
    ] {
        let r = get(&gw, &key, &path);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
    }
    // Business tier and above, with the scope.
    let pro = gw.key("pro", &["sol_gpa_snapshot"]);
    assert_eq!(get(&gw, &pro, "/v1/sol/snapshot/stake/latest").status, 403);
    let unscoped = gw.key("business", &[]);
    assert_eq!(
        get(&gw, &unscoped, "/v1/sol/snapshot/stake/latest").status,
        403
    );
}

/// A MEV-cache host whose hits counter grows by `per_scrape` at every scrape of its
/// `/metrics` (and, with `reset_after`, starts again from zero after that many).
fn mev_cache_host(per_scrape: u64, reset_after: Option<u64>) -> Fixture {
    let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    Fixture::start(move |req| {
        if req.path != "/metrics" {
            return FixtureResponse::status(200, "ok");
        }
        let k = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let k = reset_after.map_or(k, |r| if k > r { k - r } else { k });
        let hits = k * per_scrape;
        FixtureResponse::status(
            200,
            &format!(
                "# HELP mev_cache_hits_total Hits served from 10.1.2.3\n# TYPE mev_cache_hits_total counter\n\
                 mev_cache_hits_total{{cache=\"bundles\"}} {}\nmev_cache_hits_total{{cache=\"tips\"}} {}\n\
                 # TYPE mev_cache_entries gauge\nmev_cache_entries{{upstream=\"10.9.8.7:8899\"}} 42\n",
                hits / 2,
                hits - hits / 2
            ),
        )
    })
}

#[test]
fn mev_cache_hosts_are_ranked_by_hits_per_second_from_their_own_metrics() {
    let fast = mev_cache_host(1000, None);
    let slow = mev_cache_host(10, Some(3));
    let broken = Fixture::start(|_| FixtureResponse::status(500, "down"));
    let node = SolNode::start(200, 1000);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  sol_rpc:\n    hosts:\n      - {{id: sol-1, url: \"{}\", family: solana}}\n\
             \x20 sol_mev_cache:\n    hosts:\n\
             \x20     - {{id: cache-fast, url: \"{}\", family: mev-cache}}\n\
             \x20     - {{id: cache-slow, url: \"{}\", family: mev-cache}}\n\
             \x20     - {{id: cache-broken, url: \"{}\", family: mev-cache}}\n",
            node.url(),
            fast.url(),
            slow.url(),
            broken.url()
        ),
        extra_yaml: format!(
            "health:\n  interval_ms: 200\n  timeout_ms: 2000\n{UNLIMITED}solana:\n  mev_cache: {{interval_secs: 1}}\n"
        ),
        ..Default::default()
    });
    let key = gw.key("pro", &[]);
    let board = wait_for(&gw, "two ranked hosts", || {
        let r = get(&gw, &key, "/v1/sol/mev-cache/leaderboard?window_secs=60");
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        (v["items"].as_array().unwrap().len() == 2 && v["items"][1]["samples"].as_i64() >= Some(4))
            .then_some(v)
    });
    assert_eq!(board["window_secs"], 60);
    assert_eq!(board["items"][0]["host_id"], "cache-fast");
    assert_eq!(board["items"][0]["rank"], 1);
    assert_eq!(board["items"][1]["host_id"], "cache-slow");
    assert_eq!(board["unranked"], json!(["cache-broken"]));
    let fast_rate = board["items"][0]["hits_per_sec"].as_f64().unwrap();
    // 1,000 hits per scrape, about one scrape a second.
    assert!((500.0..2000.0).contains(&fast_rate), "{fast_rate}");

    // The series: a reset counter never reads as negative.
    let s = get(&gw, &key, "/v1/sol/mev-cache/hosts/cache-slow/series").json();
    let points = s["points"].as_array().unwrap();
    assert!(points.len() >= 4, "{s}");
    assert!(points
        .iter()
        .all(|p| p["hits_per_sec"].as_f64().unwrap() >= 0.0));

    // The last scrape, scrubbed as the metrics mirror is.
    let r = get(&gw, &key, "/v1/sol/mev-cache/hosts/cache-fast/metrics");
    assert_eq!(r.status, 200, "{}", r.text());
    let m = r.json();
    assert!(
        !r.text().contains("10.9.8.7"),
        "raw IPs are scrubbed: {}",
        r.text()
    );
    let names: Vec<&str> = m["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["name"].as_str())
        .collect();
    assert!(
        names.contains(&"mev_cache_hits_total") && names.contains(&"mev_cache_entries"),
        "{names:?}"
    );
    let hosts = get(&gw, &key, "/v1/sol/mev-cache/hosts").json();
    assert_eq!(hosts["hosts"].as_array().unwrap().len(), 3);

    // Unknown hosts, never-sampled hosts, bad windows and spans.
    assert_eq!(
        get(&gw, &key, "/v1/sol/mev-cache/hosts/nope/metrics").status,
        404
    );
    assert_eq!(
        get(&gw, &key, "/v1/sol/mev-cache/hosts/cache-broken/metrics").status,
        503
    );
    for path in [
        "/v1/sol/mev-cache/leaderboard?window_secs=5",
        "/v1/sol/mev-cache/leaderboard?window_secs=x",
        "/v1/sol/mev-cache/hosts/cache-fast/series?from=x",
        "/v1/sol/mev-cache/hosts/cache-fast/series?to=-1",
    ] {
        assert_eq!(get(&gw, &key, path).status, 400, "{path}");
    }
    // An empty span is empty; a span longer than the samples are kept is cut to them.
    let empty = get(
        &gw,
        &key,
        "/v1/sol/mev-cache/hosts/cache-fast/series?from=100&to=50",
    );
    assert_eq!(empty.status, 200, "{}", empty.text());
    assert_eq!(empty.json()["points"], json!([]));
    let long = get(
        &gw,
        &key,
        "/v1/sol/mev-cache/hosts/cache-fast/series?from=0&to=9999999",
    );
    assert_eq!(long.status, 200, "{}", long.text());
    assert_eq!(long.json()["from"], json!(9999999 - 7 * 86_400));
    // Pro and above.
    let basic = gw.key("basic", &[]);
    assert_eq!(
        get(&gw, &basic, "/v1/sol/mev-cache/leaderboard").status,
        403
    );
}

#[test]
fn the_solana_mempool_is_what_the_senders_submitted_until_it_lands() {
    let node = SolNode::start(100, 1000);
    let fx = node.fixture();
    let gw = sol_gateway(&[&node], "");
    let key = gw.key("pro", &[]);
    let before = get(&gw, &key, "/v1/sol/mempool/stats").json();
    assert_eq!(
        (before["source"].as_str(), before["submitted"].as_i64()),
        (Some("senders"), Some(0))
    );
    let payer = fx["payer_secret"].as_str().unwrap();
    let to = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    let mut sigs = Vec::new();
    for i in 0..3 {
        let tx = node.signed_transfer(payer, to, 1_000_000 + i);
        let r = post(&gw, &key, "/v1/sol/sender/tx", &json!({"transaction": tx}));
        assert_eq!(r.status, 200, "{}", r.text());
        sigs.push(r.json()["signature"].clone());
    }
    let stats = wait_for(&gw, "the three to land", || {
        let v = get(&gw, &key, "/v1/sol/mempool/stats").json();
        (v["landed"].as_i64() == Some(3)).then_some(v)
    });
    assert_eq!(
        (stats["submitted"].as_i64(), stats["pending"].as_i64()),
        (Some(3), Some(0))
    );
    assert!(stats["land_ms"]["p50"].as_i64().is_some());
    let snap = get(&gw, &key, "/v1/sol/mempool/snapshot").json();
    assert_eq!(snap["count"], 0, "nothing pending once landed: {snap}");
    // Another tenant sees nothing of it: no signature, no fee payer, no count.
    let other = gw.key("pro", &[]);
    let theirs = get(&gw, &other, "/v1/sol/mempool/stats").json();
    assert_eq!(
        (theirs["submitted"].as_i64(), theirs["landed"].as_i64()),
        (Some(0), Some(0)),
        "{theirs}"
    );
    let theirs = get(&gw, &other, "/v1/sol/mempool/snapshot").text();
    for sig in &sigs {
        assert!(!theirs.contains(sig.as_str().unwrap()), "{theirs}");
    }
    assert_eq!(
        get(&gw, &key, "/v1/sol/mempool/snapshot?limit=0").status,
        400
    );
    let basic = gw.key("basic", &[]);
    assert_eq!(get(&gw, &basic, "/v1/sol/mempool/stats").status, 403);
}

/// Until `path` answers 200 with `status` (the follower looks every 150 ms).
fn until_tx_status(gw: &Gateway, key: &str, path: &str, status: &str) -> Value {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(gw, key, path);
        if r.status == 200 && r.json()["status"] == status {
            return r.json();
        }
        assert!(
            std::time::Instant::now() < until,
            "never {status}: {} {}",
            r.status,
            r.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_sent_transaction_lost_on_the_way_lands_when_sent_again_and_one_expires_with_its_blockhash() {
    let node = SolNode::start(100, 32);
    let fx = node.fixture();
    let gw = sol_gateway(
        &[&node],
        "tx_tracking:\n  follow_interval_ms: 150\n  solana_max_resends: 50\n",
    );
    let (alice, bob) = (gw.key("basic", &[]), gw.key("basic", &[]));
    let payer = fx["payer_secret"].as_str().unwrap();
    let to = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";

    // The node answers the signature but the leader never gets it: only the edge's
    // sending it again lands it.
    node.call("shim_dropSends", json!([1]));
    let tx = node.signed_transfer(payer, to, 2_000_000);
    let r = post(
        &gw,
        &alice,
        "/v1/sol/sender/tx",
        &json!({"transaction": tx}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let sig = r.json()["signature"].as_str().unwrap().to_string();
    let path = format!("/v1/sol/tx/{sig}");
    let landed = until_tx_status(&gw, &alice, &path, "final");
    assert_eq!(balance(&node, to), 2_000_000);
    assert!(landed["resends"].as_i64() >= Some(1), "{landed}");
    assert!(landed["block_number"].as_u64().is_some(), "{landed}");
    assert_eq!(landed["chain"], "sol");
    // The fee payer, as the node's own record of it says.
    let recorded = node.call("getTransaction", json!([sig, {"encoding": "base64"}]));
    assert!(recorded["result"]["slot"].is_u64(), "{recorded}");
    assert_eq!(
        landed["block_number"], recorded["result"]["slot"],
        "{landed}"
    );
    let from = landed["from"].as_str().unwrap();
    assert!((32..=44).contains(&from.len()), "{landed}");
    // Another tenant, a signature nobody sent, what is not a signature.
    assert_eq!(get(&gw, &bob, &path).status, 404);
    let r = get(&gw, &alice, "/v1/sol/tx/0xabc");
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (400, json!("invalid_params"))
    );

    // A bundle's transaction is followed too, never sent again alone.
    let carol = gw.key("pro", &[]);
    let in_bundle = node.signed_transfer(payer, to, 1_000_000);
    let r = post(
        &gw,
        &carol,
        "/v1/sol/sender/bundle",
        &json!({"transactions": [in_bundle]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let sig = r.json()["signatures"][0].as_str().unwrap().to_string();
    let bundled = until_tx_status(&gw, &carol, &format!("/v1/sol/tx/{sig}"), "final");
    assert_eq!(
        (bundled["route"].as_str(), bundled["resends"].as_i64()),
        (Some("bundle"), Some(0)),
        "{bundled}"
    );

    // Every send lost, then its blockhash expires: it can never land.
    node.call("shim_dropSends", json!([1_000_000]));
    let doomed = node.signed_transfer(payer, to, 3_000_000);
    let r = post(
        &gw,
        &alice,
        "/v1/sol/sender/tx",
        &json!({"transaction": doomed}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let sig = r.json()["signature"].as_str().unwrap().to_string();
    let path = format!("/v1/sol/tx/{sig}");
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while get(&gw, &alice, &path).json()["resends"].as_i64() < Some(2) {
        assert!(std::time::Instant::now() < until, "never sent again");
        std::thread::sleep(Duration::from_millis(100));
    }
    node.call("shim_expireBlockhash", json!([]));
    let expired = until_tx_status(&gw, &alice, &path, "expired");
    let resends = expired["resends"].as_i64().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        get(&gw, &alice, &path).json()["resends"].as_i64(),
        Some(resends),
        "never sent again once expired"
    );
    assert_eq!(balance(&node, to), 3_000_000);
}
