//! Wallet endpoints on real nodes (anvil as the Ethereum and the Polygon bor pool):
//! native balances at a block, and every parameter refused before any node is called.

use common::*;
use serde_json::{json, Value};

const ADDR: &str = "0x52908400098527886E0F7030069857D2E4169EE7";
/// anvil's first dev account (unlocked, funded).
const DEV: &str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

fn gateway(eth: &Anvil, bor: &Anvil, node_log: Option<&Fixture>) -> Gateway {
    let bor_url = node_log.map(|f| f.url()).unwrap_or_else(|| bor.url());
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n  polygon_bor:\n    hosts:\n      - {{id: bor-1, url: \"{bor_url}\", family: bor}}\n",
            eth.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    })
}

#[test]
fn native_balances_at_a_block() {
    let (eth, bor) = (Anvil::start(1, &[]), Anvil::start(137, &[]));
    let gw = gateway(&eth, &bor, None);
    let key = gw.key("free", &[]);
    // Real transfers from anvil's first dev account (each mined in its own block):
    // 2^64 + 1 wei first, more than a u64 or a double holds exactly; then 1 ether.
    let send = |wei: &str| -> u64 {
        let tx = json!({"from": DEV, "to": ADDR, "value": wei});
        let hash = eth.call("eth_sendTransaction", json!([tx]));
        // anvil answers with the hash and mines right after.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let receipt = eth.call("eth_getTransactionReceipt", json!([hash]));
            if let Some(number) = receipt["blockNumber"].as_str() {
                return u64::from_str_radix(&number[2..], 16).unwrap();
            }
            assert!(std::time::Instant::now() < until, "not mined");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    let at = send("0x10000000000000001");
    assert!(send("0xde0b6b3a7640000") > at);
    eth.mine(1);

    let head = eth.block_number();
    let get = |path: &str, key: Option<&str>| {
        let headers: Vec<(&str, &str)> = key.map(|k| vec![("x-token", k)]).unwrap_or_default();
        gw.get(path, &headers)
    };
    let now = get(&format!("/v1/eth/wallet/{ADDR}/balance"), Some(&key));
    assert_eq!(now.status, 200, "{}", now.text());
    assert_eq!(
        now.json(),
        json!({"address": ADDR, "wei": "19446744073709551617", "eth": 19.446744073709553, "block": head})
    );
    for block in [format!("{at}"), format!("0x{at:x}")] {
        let then = get(
            &format!("/v1/eth/wallet/{ADDR}/balance?block={block}"),
            Some(&key),
        );
        assert_eq!(then.status, 200, "{}", then.text());
        assert_eq!(
            then.json()["wei"],
            "18446744073709551617",
            "{}",
            then.text()
        );
        assert_eq!(then.json()["block"], at);
    }
    for tag in ["latest", "pending", "safe", "finalized"] {
        let r = get(
            &format!("/v1/eth/wallet/{ADDR}/balance?block={tag}"),
            Some(&key),
        );
        assert_eq!(r.status, 200, "{tag}: {}", r.text());
        assert!(r.json()["block"].as_u64().is_some(), "{tag}: {}", r.text());
    }
    let future = get(
        &format!("/v1/eth/wallet/{ADDR}/balance?block={}", at + 1000),
        Some(&key),
    );
    assert_eq!(future.status, 404, "not there yet: {}", future.text());
    assert_eq!(future.json()["error"], "not_found");

    // Polygon: anonymous callers allowed (SPEC), `matic` as the unit.
    bor.call("anvil_setBalance", json!([ADDR, "0x29a2241af62c0000"]));
    let r = get(&format!("/v1/polygon/wallet/balance/{ADDR}"), None);
    assert_eq!(r.status, 200, "{}", r.text());
    let v: Value = r.json();
    assert_eq!(
        (v["wei"].as_str(), v["matic"].as_f64()),
        (Some("3000000000000000000"), Some(3.0))
    );
    assert_eq!(v["address"], ADDR);
    assert_eq!(v["block"], bor.block_number());
}

/// Bad parameters are 400 `invalid_params` in the chain envelope, and no node hears of
/// them (the bor pool here is a fixture counting what reaches it).
#[test]
fn bad_wallet_parameters_never_reach_a_node() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let node = Fixture::start(move |req| {
        if req.body.windows(14).any(|w| w == b"eth_getBalance") {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        FixtureResponse::json(json!({"jsonrpc": "2.0", "id": 1, "result": "0x1"}))
    });
    let eth = Anvil::start(1, &[]);
    let gw = gateway(&eth, &eth, Some(&node));
    let key = gw.key("free", &[]);
    let bad = [
        "/v1/polygon/wallet/balance/0x1234".to_string(),
        format!("/v1/polygon/wallet/balance/{}", &ADDR[2..]),
        "/v1/polygon/wallet/balance/0xZZ908400098527886E0F7030069857D2E4169EE7".into(),
        format!("/v1/polygon/wallet/balance/{ADDR}?block=earliest"),
        format!("/v1/polygon/wallet/balance/{ADDR}?block=0x"),
        format!("/v1/polygon/wallet/balance/{ADDR}?block=-5"),
        format!("/v1/polygon/wallet/balance/{ADDR}?block=99999999999999999999"),
        "/v1/eth/wallet/0x12/balance".into(),
    ];
    for path in &bad {
        let r = gw.get(path, &[("x-token", &key)]);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_params", "{path}");
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}
