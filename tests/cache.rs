//! The finality-aware response cache (issue 21, item 1) against anvil: answers kept by
//! what they depend on, each saying its cache status and why; a reorg made with
//! `anvil_reorg` never lets an answer from the orphaned branch be served once the edge
//! has seen it; finalized answers served after their node is gone.

mod common;
use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(15);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn answers_live_as_long_as_what_they_depend_on_and_no_longer() {
    let node = Anvil::start(1, &[]);
    node.mine(99);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: format!(
            "rpc:\n  cache: {{track_interval_ms: 100, head_ttl_ms: 5000}}\n{UNLIMITED}"
        ),
        ..Default::default()
    });
    let key = gw.key("business", &[]);
    let call = |id: u64, method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["id"], id);
        let status = (
            r.header("X-Cache-Status").unwrap_or("").to_string(),
            r.header("X-Cache-Reason").unwrap_or("").to_string(),
        );
        (r.json()["result"].clone(), status)
    };
    let st = |s: &str, r: &str| (s.to_string(), r.to_string());
    let block = |n: u64| json!([format!("{n:#x}"), false]);

    // The tracker follows the pool once a read wants the cache: anvil finalizes 64 back.
    let (_, first) = call(1, "eth_getBlockByNumber", block(16));
    assert_eq!(first, st("miss", "absent"));
    wait_for("the finalized block", || {
        metric_value(&gw, "chainedge_cache_finalized_block{pool=\"eth_el\"}") == 36.0
    });
    let (final_block, _) = call(2, "eth_getBlockByNumber", block(16));
    let (again, status) = call(3, "eth_getBlockByNumber", block(16));
    assert_eq!(
        (again.clone(), status),
        (final_block.clone(), st("hit", "fresh"))
    );
    assert_eq!(again, node.call("eth_getBlockByNumber", block(16)));

    // A block not final yet: kept until a reorg.
    let (before, _) = call(4, "eth_getBlockByNumber", block(98));
    let (_, status) = call(5, "eth_getBlockByNumber", block(98));
    assert_eq!(status, st("hit", "fresh"));
    // The head: kept while it stays.
    call(6, "eth_blockNumber", json!([]));
    assert_eq!(call(7, "eth_blockNumber", json!([])).1, st("hit", "fresh"));
    // Never: pending, and answers that are not an answer yet.
    assert_eq!(
        call(8, "eth_getBalance", json!(["0x00", "pending"])).1,
        st("bypass", "pending")
    );
    let unknown = json!(["0x0000000000000000000000000000000000000000000000000000000000000001"]);
    assert_eq!(
        call(9, "eth_getTransactionReceipt", unknown.clone()).1,
        st("miss", "null_answer")
    );
    assert_eq!(
        call(10, "eth_getTransactionReceipt", unknown).1,
        st("miss", "null_answer")
    );

    // Reorg the last three blocks (98 gets a transaction it did not have).
    let reorgs = metric_value(&gw, "chainedge_cache_reorgs_total{pool=\"eth_el\"}");
    node.call(
        "anvil_reorg",
        json!([3, [[{"from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "to": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "value": "0x1"}, 0]]]),
    );
    let now = node.call("eth_getBlockByNumber", block(98));
    assert_ne!(now["hash"], before["hash"], "anvil reorged block 98");
    wait_for("the edge to see the reorg", || {
        metric_value(&gw, "chainedge_cache_reorgs_total{pool=\"eth_el\"}") > reorgs
    });
    let (after, status) = call(11, "eth_getBlockByNumber", block(98));
    assert_eq!(status, st("miss", "reorg"));
    assert_eq!(
        after["hash"], now["hash"],
        "the orphaned block is never served"
    );
    // What was final stays.
    assert_eq!(
        call(12, "eth_getBlockByNumber", block(16)).1,
        st("hit", "fresh")
    );

    // The head moves: what followed it is asked anew.
    node.mine(1);
    wait_for("the new head", || {
        call(13, "eth_blockNumber", json!([])).1 .1 == "head_moved"
    });

    // The node dies: finalized answers are still served, from the cache.
    drop(node);
    let (gone, status) = call(14, "eth_getBlockByNumber", block(16));
    assert_eq!((gone, status), (final_block, st("hit", "fresh")));
    assert!(
        metric_value(
            &gw,
            "chainedge_cache_lookups_total{outcome=\"hit\",pool=\"eth_el\",reason=\"fresh\"}"
        ) >= 5.0
    );
}
