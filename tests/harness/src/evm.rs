//! A real EVM chain for index tests: anvil's dev account sends transactions and deploys the
//! test tokens (tests/contracts), a gateway indexes it, and its wallet routes are read.
use super::*;
use serde_json::{json, Value};
use sha3::Digest;
use std::time::{Duration, Instant};

/// anvil's first dev account (unlocked, funded).
pub const DEV: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
pub const ALICE: &str = "0x00000000000000000000000000000000000a11ce";
pub const BOB: &str = "0x0000000000000000000000000000000000000b0b";
pub const CAROL: &str = "0x00000000000000000000000000000000000ca201";

pub fn bytecode(name: &str) -> String {
    let text = std::fs::read_to_string(root().join("tests/contracts/Tokens.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["bytecode"][name].as_str().unwrap().to_string()
}

pub fn selector(signature: &str) -> String {
    hex::encode(&sha3::Keccak256::digest(signature.as_bytes())[..4])
}

/// One ABI word: a number or an address.
pub fn word(v: &str) -> String {
    match v.strip_prefix("0x") {
        Some(hex) => format!("{hex:0>64}"),
        None => format!("{:064x}", v.parse::<u128>().unwrap()),
    }
}

/// ABI encoding of a `string` argument's tail (length, bytes padded).
pub fn string_tail(s: &str) -> String {
    let mut hex = hex::encode(s.as_bytes());
    while !hex.len().is_multiple_of(64) || hex.is_empty() {
        hex.push('0');
    }
    format!("{:064x}{hex}", s.len())
}

/// Send a transaction from DEV; its receipt.
pub fn send(node: &Anvil, to: Option<&str>, data: &str, value: &str) -> Value {
    send_as(node, DEV, to, data, value)
}

/// Send a transaction from `from` (DEV, or an account anvil impersonates); its receipt.
pub fn send_as(node: &Anvil, from: &str, to: Option<&str>, data: &str, value: &str) -> Value {
    let mut tx = json!({"from": from, "data": data, "value": value, "gas": "0x7a1200"});
    if let Some(to) = to {
        tx["to"] = json!(to);
    }
    let hash = node.call("eth_sendTransaction", json!([tx]));
    // anvil answers with the hash and mines right after.
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let receipt = node.call("eth_getTransactionReceipt", json!([hash]));
        if !receipt.is_null() {
            assert_eq!(receipt["status"], "0x1", "{receipt}");
            return receipt;
        }
        assert!(Instant::now() < until, "not mined");
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn deploy(node: &Anvil, name: &str, args: &str) -> String {
    let receipt = send(node, None, &format!("{}{args}", bytecode(name)), "0x0");
    receipt["contractAddress"]
        .as_str()
        .unwrap()
        .to_ascii_lowercase()
}

pub fn call(node: &Anvil, to: &str, signature: &str, args: &[&str]) {
    call_as(node, DEV, to, signature, args)
}

/// A contract call sent from `from`.
pub fn call_as(node: &Anvil, from: &str, to: &str, signature: &str, args: &[&str]) {
    let data = format!(
        "0x{}{}",
        selector(signature),
        args.iter().map(|a| word(a)).collect::<String>()
    );
    send_as(node, from, Some(to), &data, "0x0");
}

/// The test ERC-20 (6 decimals) deployed by DEV, with `supply` minted to DEV.
pub fn deploy_erc20(node: &Anvil, name: &str, symbol: &str, supply: &str) -> String {
    // Erc20(name, symbol, 6): three head words (two offsets and the decimals), then the
    // two strings.
    let args = format!(
        "{}{}{}{}{}",
        word("96"),
        word("160"),
        word("6"),
        string_tail(name),
        string_tail(symbol)
    );
    let token = deploy(node, "Erc20", &args);
    call(node, &token, "mint(address,uint256)", &[DEV, supply]);
    token
}

pub fn indexed_gateway(node: &Anvil, index_yaml: &str, postgres: Option<String>) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: format!("{UNLIMITED}index:\n  eth:\n{index_yaml}"),
        postgres,
        ..Default::default()
    })
}

pub fn metric(gw: &Gateway, name: &str) -> Option<f64> {
    let text = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .ok()?
        .text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}{{chain=\"eth\"}} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// Wait until the index has committed `block`.
pub fn wait_indexed(gw: &Gateway, block: u64) {
    let until = Instant::now() + Duration::from_secs(30);
    while metric(gw, "chainedge_index_head").unwrap_or(-1.0) < block as f64 {
        assert!(Instant::now() < until, "index did not reach block {block}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait until the index has counted a reorg.
pub fn wait_reorg_counted(gw: &Gateway) {
    let until = Instant::now() + Duration::from_secs(10);
    while metric(gw, "chainedge_index_reorgs_total").unwrap_or(0.0) < 1.0 {
        assert!(Instant::now() < until, "no reorg counted");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn get(gw: &Gateway, key: &str, path: &str) -> Value {
    let r = gw.get(path, &[("x-token", key)]);
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.json()
}

/// Every history item of `addr`, page by page.
pub fn all_history(gw: &Gateway, key: &str, addr: &str, limit: usize) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/v1/eth/wallet/{addr}/history?limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = get(gw, key, &path);
        items.extend(page["items"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return items,
        }
    }
}

/// A rewrite of a node's answer: (the node, the method, its params, the result to change).
pub type Lie = fn(&Anvil, &str, &Value, &mut Value);

/// A proxy before `node` that rewrites the `result` of single calls with `lie`, as a
/// compromised node would answer.
pub fn liar(node: std::sync::Arc<Anvil>, lie: std::sync::Arc<std::sync::Mutex<Lie>>) -> Fixture {
    Fixture::start(move |req| {
        let call: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        let hdr = [("Content-Type", "application/json")];
        let r = request(node.port, "POST", "/", &hdr, &req.body).unwrap();
        let mut answer = r.json();
        if let (Some(method), Some(result)) = (call["method"].as_str(), answer.get_mut("result")) {
            (*lie.lock().unwrap())(&node, method, &call["params"], result);
        }
        FixtureResponse::json(answer)
    })
}
