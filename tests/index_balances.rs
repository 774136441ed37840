//! ERC-20 balances answered from the index on a real node (anvil): each balance is read
//! from the node once, then follows the indexed transfers (in, out, to oneself) with no
//! node call, still answers with the node gone, and a reorg below the balance's block
//! makes the node be asked again (on SQLite and PostgreSQL).

use common::evm::*;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// `balanceOf(holder)` straight from the node, in decimal.
fn node_balance(node: &Anvil, token: &str, holder: &str) -> String {
    let data = format!("0x{}{}", selector("balanceOf(address)"), word(holder));
    let hex = node.call("eth_call", json!([{"to": token, "data": data}, "latest"]));
    u128::from_str_radix(hex.as_str().unwrap().trim_start_matches("0x"), 16)
        .unwrap()
        .to_string()
}

/// ALICE's tokens page, as `token → balance`, and whether answering it called a node
/// (the access log's `upstream` for the request, found by its id).
fn alice_tokens(gw: &Gateway, key: &str, request_id: &str) -> (Vec<(String, Value)>, bool) {
    let r = gw.get(
        &format!("/v1/eth/wallet/{ALICE}/tokens"),
        &[("x-token", key), ("x-request-id", request_id)],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let page = r.json();
    let balances = page["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["token"].as_str().unwrap().to_string(),
                t["balance"].clone(),
            )
        })
        .collect();
    // The access log is written within its drain interval (50 ms).
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let text = std::fs::read_to_string(gw.access_log()).unwrap_or_default();
        let line = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["request_id"] == request_id);
        if let Some(line) = line {
            return (balances, !line["upstream"].is_null());
        }
        assert!(
            Instant::now() < until,
            "no access log line for {request_id}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn balances_follow_the_index(postgres: Option<String>) {
    let node = Anvil::start(1, &[]);
    let gw = indexed_gateway(&node, "    start_block: 0\n    poll_ms: 100\n", postgres);
    let key = gw.key("basic", &[]);
    let usd = deploy_erc20(&node, "Test USD", "TUSD", "1000000");
    call(&node, &usd, "transfer(address,uint256)", &[ALICE, "250"]);
    wait_indexed(&gw, node.block_number());
    let (first, asked) = alice_tokens(&gw, &key, "tokens-1");
    assert_eq!(first, vec![(usd.clone(), json!("250"))]);
    assert!(asked, "the first balance comes from the node");

    // ALICE spends, receives and sends to herself: the index follows, the node is not asked.
    node.call("anvil_impersonateAccount", json!([ALICE]));
    send(&node, Some(ALICE), "0x", "0xde0b6b3a7640000");
    call_as(
        &node,
        ALICE,
        &usd,
        "transfer(address,uint256)",
        &[BOB, "30"],
    );
    call(&node, &usd, "transfer(address,uint256)", &[ALICE, "100"]);
    call_as(
        &node,
        ALICE,
        &usd,
        "transfer(address,uint256)",
        &[ALICE, "5"],
    );
    wait_indexed(&gw, node.block_number());
    assert_eq!(node_balance(&node, &usd, ALICE), "320");
    let (second, asked) = alice_tokens(&gw, &key, "tokens-2");
    assert_eq!(second, vec![(usd.clone(), json!("320"))]);
    assert!(!asked, "answered from the index");

    // A token new to ALICE: only it is read from the node.
    let eur = deploy_erc20(&node, "Test EUR", "TEUR", "500");
    call(&node, &eur, "transfer(address,uint256)", &[ALICE, "9"]);
    wait_indexed(&gw, node.block_number());
    let (third, asked) = alice_tokens(&gw, &key, "tokens-3");
    let mut want = vec![(usd.clone(), json!("320")), (eur.clone(), json!("9"))];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(third, want);
    assert!(asked);

    // With the node gone, both balances are still answered.
    drop(node);
    let (fourth, asked) = alice_tokens(&gw, &key, "tokens-4");
    assert_eq!(fourth, want);
    assert!(!asked);
}

#[test]
fn balances_follow_the_index_without_the_node() {
    balances_follow_the_index(None);
}

#[test]
fn balances_follow_the_index_on_postgres() {
    let pg = PgServer::start();
    balances_follow_the_index(Some(pg.create_db()));
}

/// A balance read on a branch that is then orphaned is not used on the new one.
#[test]
fn a_reorg_below_a_balance_makes_the_node_be_asked_again() {
    let node = Anvil::start(1, &[]);
    let gw = indexed_gateway(&node, "    start_block: 0\n    poll_ms: 100\n", None);
    let key = gw.key("basic", &[]);
    let usd = deploy_erc20(&node, "Test USD", "TUSD", "1000000");
    call(&node, &usd, "transfer(address,uint256)", &[ALICE, "250"]);
    let fork = node.call("evm_snapshot", json!([]));
    // The branch to be orphaned: 50 more, and the balance read on top of it.
    call(&node, &usd, "transfer(address,uint256)", &[ALICE, "50"]);
    let orphan_tip = node.block_number();
    wait_indexed(&gw, orphan_tip);
    let (on_orphan, _) = alice_tokens(&gw, &key, "orphan");
    assert_eq!(on_orphan, vec![(usd.clone(), json!("300"))]);

    // The new branch: 7 instead of 50, and longer.
    assert_eq!(node.call("evm_revert", json!([fork])), true);
    call(&node, &usd, "transfer(address,uint256)", &[ALICE, "7"]);
    node.mine(3);
    let tip = node.block_number();
    assert!(tip > orphan_tip);
    wait_indexed(&gw, tip);
    wait_reorg_counted(&gw);
    assert_eq!(node_balance(&node, &usd, ALICE), "257");
    let (on_new, asked) = alice_tokens(&gw, &key, "new-branch");
    assert_eq!(on_new, vec![(usd, json!("257"))]);
    assert!(asked, "the orphaned branch's balance was dropped");
}
