//! The finality-aware response cache (issue 21, item 1) against anvil: answers kept by
//! what they depend on, each saying its cache status and why; a reorg made with
//! `anvil_reorg` never lets an answer from the orphaned branch be served once the edge
//! has seen it; finalized answers served after their node is gone.

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

    // A batch: each plain read looked up on its own, under the same key as alone; only
    // the misses reach the node, and their answers are kept for single calls too.
    let batch = |calls: &[(u64, &str, Value)]| {
        let body: Vec<Value> = calls
            .iter()
            .map(|(id, m, p)| json!({"jsonrpc": "2.0", "id": id, "method": m, "params": p}))
            .collect();
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &json!(body));
        assert_eq!(r.status, 200, "{}", r.text());
        let answers = r.json().as_array().expect("a batch answer").clone();
        let ids: Vec<Value> = answers.iter().map(|a| a["id"].clone()).collect();
        let want: Vec<Value> = calls.iter().map(|(id, _, _)| json!(id)).collect();
        assert_eq!(ids, want, "every call answered under its own id, in order");
        let status = (
            r.header("X-Cache-Status").unwrap_or("").to_string(),
            r.header("X-Cache-Reason").unwrap_or("").to_string(),
        );
        let results: Vec<Value> = answers.iter().map(|a| a["result"].clone()).collect();
        (results, status)
    };
    let lookups = |outcome: &str| {
        metric_sum(
            &gw,
            &format!("chainedge_cache_lookups_total{{outcome=\"{outcome}\""),
        )
    };
    let (results, status) = batch(&[
        (20, "eth_getBlockByNumber", block(16)),
        (21, "eth_getBlockByNumber", block(50)),
    ]);
    assert_eq!(status, st("partial", "batch"));
    assert_eq!(results[0], final_block);
    assert_eq!(results[1], node.call("eth_getBlockByNumber", block(50)));
    assert_eq!(
        call(22, "eth_getBlockByNumber", block(50)).1,
        st("hit", "fresh")
    );
    let (hits, misses) = (lookups("hit"), lookups("miss"));
    let (again, status) = batch(&[
        (23, "eth_getBlockByNumber", block(50)),
        (24, "eth_getBlockByNumber", block(16)),
        (25, "eth_getBlockByNumber", block(98)),
    ]);
    assert_eq!(status, st("hit", "batch"));
    assert_eq!(again[..2], [results[1].clone(), final_block.clone()]);
    assert_eq!(again[2], before);
    assert_eq!(
        (lookups("hit"), lookups("miss")),
        (hits + 3.0, misses),
        "each read of the batch was answered from the cache"
    );
    let (_, status) = batch(&[
        (26, "eth_getBalance", json!(["0x00", "pending"])),
        (27, "eth_getBlockByNumber", block(51)),
    ]);
    assert_eq!(status, st("miss", "batch"));

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
    // Inside a batch too, the orphaned block is never served.
    let (in_batch, _) = batch(&[(28, "eth_getBlockByNumber", block(98))]);
    assert_eq!(in_batch[0]["hash"], now["hash"]);
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
    assert_eq!((gone, status), (final_block.clone(), st("hit", "fresh")));
    let (gone, status) = batch(&[(29, "eth_getBlockByNumber", block(16))]);
    assert_eq!((gone, status), (vec![final_block], st("hit", "batch")));
    assert!(
        metric_value(
            &gw,
            "chainedge_cache_lookups_total{outcome=\"hit\",pool=\"eth_el\",reason=\"fresh\"}"
        ) >= 5.0
    );
}

/// A beacon fixture whose finalized checkpoint names execution block `number` with
/// `hash` (the header's root changes with what it names).
fn beacon(finalized: std::sync::Arc<std::sync::Mutex<(u64, String)>>) -> Fixture {
    Fixture::start(move |req| {
        let path = req.path.split('?').next().unwrap_or("");
        let (number, hash) = finalized.lock().unwrap().clone();
        let root = format!("0x{}", hash[2..].chars().rev().collect::<String>());
        match path {
            "/eth/v1/node/syncing" => FixtureResponse::json(json!({"data": {"head_slot": "100",
                "sync_distance": "0", "is_syncing": false, "is_optimistic": false, "el_offline": false}})),
            "/eth/v1/beacon/headers/finalized" => FixtureResponse::json(json!({
                "execution_optimistic": false, "finalized": true,
                "data": {"root": root, "canonical": true, "header": {"message": {"slot": "64"}}}})),
            p if p == format!("/eth/v2/beacon/blocks/{root}") => FixtureResponse::json(json!({
                "version": "deneb", "execution_optimistic": false, "finalized": true,
                "data": {"message": {"slot": "64", "body": {"execution_payload": {
                    "block_number": number.to_string(), "block_hash": hash}}}}})),
            _ => FixtureResponse::status(404, r#"{"code":404,"message":"not found"}"#),
        }
    })
}

/// With a beacon pool beside `eth_el`, its finalized checkpoint is a second source of
/// finality: taken once an execution node has the same hash at that number, never when
/// the beacon pool names a block the execution nodes do not have.
#[test]
fn the_beacon_pools_finalized_checkpoint_makes_blocks_final_once_the_nodes_agree() {
    let node = Anvil::start(1, &[]);
    node.mine(99);
    // A checkpoint the execution nodes do not have: never used.
    let finalized = std::sync::Arc::new(std::sync::Mutex::new((
        90,
        format!("0x{}", "ab".repeat(32)),
    )));
    let cl = beacon(finalized.clone());
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n  eth_cl:\n    hosts:\n      - {{id: cl-1, url: \"{}\", family: cl-lighthouse}}\n",
            node.url(),
            cl.url()
        ),
        extra_yaml: format!(
            "rpc:\n  cache: {{track_interval_ms: 100, unfinalized_ttl_ms: 200}}\n{UNLIMITED}"
        ),
        ..Default::default()
    });
    let key = gw.key("business", &[]);
    let call = |method: &str, params: Value| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        rpc(gw.port, "/rpc/eth", Some(&key), &body)
    };
    let block = |n: u64| json!([format!("{n:#x}"), false]);
    let finalized_metric = || metric_value(&gw, "chainedge_cache_finalized_block{pool=\"eth_el\"}");
    // The node's own tag: 64 behind the head of 100.
    call("eth_getBlockByNumber", block(80));
    wait_for("the node's finalized block", || finalized_metric() == 36.0);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        finalized_metric(),
        36.0,
        "a checkpoint the nodes lack is not used"
    );

    // The checkpoint names the node's own block 90: block 80 becomes final.
    let real = node.call("eth_getBlockByNumber", block(90))["hash"]
        .as_str()
        .unwrap()
        .to_string();
    *finalized.lock().unwrap() = (90, real);
    wait_for("the beacon's finalized block", || {
        finalized_metric() == 90.0
    });
    let r = call("eth_getBlockByNumber", block(80));
    assert_eq!(r.status, 200);
    let eighty = r.json()["result"].clone();
    call("eth_getBlockByNumber", block(95));
    // Past the lifetime of what is not final, the node dies: block 80 is still served.
    std::thread::sleep(Duration::from_millis(400));
    drop(node);
    let r = call("eth_getBlockByNumber", block(80));
    assert_eq!(r.json()["result"], eighty);
    assert_eq!(r.header("X-Cache-Status"), Some("hit"), "{}", r.text());
    let r = call("eth_getBlockByNumber", block(95));
    assert_ne!(
        r.header("X-Cache-Status"),
        Some("hit"),
        "block 95 is not final"
    );
    assert!(r.json().get("error").is_some(), "{}", r.text());
}
