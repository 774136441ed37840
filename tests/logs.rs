//! The `eth_getLogs` guard (issue 21, item 3): a range per plan refused before any node;
//! wide ranges fetched in chunks and merged in order; a range a node refuses as too
//! large bisected until it passes; the bound on the merged result naming the range that
//! fits. Against a node that caps its answers as providers do, and against anvil with
//! real logs (the merged answer equals the node's own).

use common::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// Blocks 0..=HEAD; one log in every tenth block.
const HEAD: u64 = 20_000;
/// The capped node refuses an answer of more than this many logs.
const NODE_CAP: usize = 100;

fn hex(n: u64) -> String {
    format!("{n:#x}")
}

fn block_of(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// A node whose logs are one per tenth block and which refuses more than `NODE_CAP` in
/// one answer with the words Infura uses. Every `eth_getLogs` range asked is recorded.
fn capped_node(asked: Arc<Mutex<Vec<(u64, u64)>>>) -> Fixture {
    Fixture::start(move |req| {
        let one = |call: &Value| -> Value {
            let id = call["id"].clone();
            let result = match call["method"].as_str().unwrap_or("") {
                "eth_blockNumber" => json!(hex(HEAD)),
                "eth_chainId" => json!("0x1"),
                "eth_syncing" => json!(false),
                "eth_getLogs" => {
                    let f = &call["params"][0];
                    if f.get("blockHash").is_some() {
                        return json!({"jsonrpc": "2.0", "id": id, "result": [{"blockHash": f["blockHash"]}]});
                    }
                    let end = |k: &str| match f[k].as_str() {
                        Some(h) if h.starts_with("0x") => block_of(&f[k]),
                        _ => HEAD,
                    };
                    let (from, to) = (end("fromBlock"), end("toBlock"));
                    asked.lock().unwrap().push((from, to));
                    let logs: Vec<Value> = (from..=to)
                        .filter(|b| b % 10 == 0)
                        .map(|b| json!({"blockNumber": hex(b), "logIndex": "0x0", "data": "0x", "topics": []}))
                        .collect();
                    if logs.len() > NODE_CAP {
                        return json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32005, "message": format!("query returned more than {NODE_CAP} results")}});
                    }
                    json!(logs)
                }
                _ => Value::Null,
            };
            json!({"jsonrpc": "2.0", "id": id, "result": result})
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        FixtureResponse::json(match &body {
            Value::Array(calls) => calls.iter().map(one).collect(),
            call => one(call),
        })
    })
}

fn get_logs(gw: &Gateway, key: &str, id: Value, filter: Value) -> Resp {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "eth_getLogs", "params": [filter]});
    rpc(gw.port, "/rpc/eth", Some(key), &call)
}

#[test]
fn wide_ranges_are_split_refused_ranges_bisected_and_plans_bound_the_range() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let node = capped_node(asked.clone());
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        extra_yaml: format!(
            "rpc:\n  get_logs: {{chunk_blocks: 2000, parallel: 3, max_results: 500, max_block_range: {{free: 500, pro: 10000}}}}\n{UNLIMITED}"
        ),
        ..Default::default()
    });
    let (free, pro) = (gw.key("free", &[]), gw.key("pro", &[]));
    let asked_count = || asked.lock().unwrap().len();

    // Within a chunk and under the node's cap: passed through as sent, one call.
    let r = get_logs(
        &gw,
        &pro,
        json!("a"),
        json!({"fromBlock": "0x0", "toBlock": "0x3e7"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["id"], "a");
    assert_eq!(r.json()["result"].as_array().unwrap().len(), 100);
    assert_eq!(asked_count(), 1);

    // 5,000 blocks, 500 logs: chunks of 2,000; each chunk of 200 logs is refused by the
    // node and bisected. The answer is every log once, in block order, under the id.
    asked.lock().unwrap().clear();
    let r = get_logs(
        &gw,
        &pro,
        json!(7),
        json!({"fromBlock": hex(0), "toBlock": hex(4_999)}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["id"], 7);
    let blocks: Vec<u64> = r.json()["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| block_of(&l["blockNumber"]))
        .collect();
    assert_eq!(blocks, (0..5_000).step_by(10).collect::<Vec<u64>>());
    let mut got = asked.lock().unwrap().clone();
    got.sort();
    assert_eq!(
        got,
        vec![
            (0, 999),
            (0, 1_999),
            (1_000, 1_999),
            (2_000, 2_999),
            (2_000, 3_999),
            (3_000, 3_999),
            (4_000, 4_999),
        ],
        "three chunks, the two refused ones halved"
    );

    // A range within one chunk that the node refuses is bisected too.
    asked.lock().unwrap().clear();
    let r = get_logs(
        &gw,
        &pro,
        json!(8),
        json!({"fromBlock": hex(10_000), "toBlock": hex(11_999)}),
    );
    assert_eq!(
        r.json()["result"].as_array().unwrap().len(),
        200,
        "{}",
        r.text()
    );
    assert_eq!(asked_count(), 3);

    // Past the merged bound: an error naming the range that fits, in the words indexers
    // already parse from providers.
    let r = get_logs(
        &gw,
        &pro,
        json!(9),
        json!({"fromBlock": hex(0), "toBlock": hex(9_999)}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let e = &r.json()["error"];
    assert_eq!(r.json()["id"], 9);
    assert_eq!(e["code"], -32005);
    assert_eq!(e["data"]["error"], "too_many_logs");
    assert_eq!(e["data"]["suggested_range"], json!([0, 3_999]));
    assert!(
        e["message"].as_str().unwrap().contains(
            "query returned more than 500 results. Try with this block range [0x0, 0xf9f]."
        ),
        "{e}"
    );

    // The plan's range: refused before any node, alone and inside a batch. The refusal
    // above answered as soon as one chunk was over the limit; chunks already sent land
    // at the node a moment later: let them, then count afresh.
    std::thread::sleep(std::time::Duration::from_millis(500));
    asked.lock().unwrap().clear();
    let r = get_logs(
        &gw,
        &free,
        json!(1),
        json!({"fromBlock": hex(0), "toBlock": hex(500)}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let e = &r.json()["error"];
    assert_eq!(
        (e["code"].as_i64(), e["data"]["max_block_range"].as_u64()),
        (Some(-32005), Some(500))
    );
    assert_eq!(e["data"]["requested_block_range"], 501);
    let r = get_logs(
        &gw,
        &pro,
        json!(2),
        json!({"fromBlock": hex(0), "toBlock": hex(10_000)}),
    );
    assert_eq!(r.json()["error"]["data"]["max_block_range"], 10_000);
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [{"fromBlock": hex(0), "toBlock": hex(600)}]},
        {"jsonrpc": "2.0", "id": 2, "method": "eth_getLogs", "params": [{"fromBlock": hex(0), "toBlock": hex(99)}]},
        {"jsonrpc": "2.0", "id": 3, "method": "eth_chainId"},
    ]);
    let r = rpc(gw.port, "/rpc/eth", Some(&free), &batch);
    assert_eq!(r.status, 200, "{}", r.text());
    let answers = r.json();
    assert_eq!(
        answers[0]["error"]["data"]["max_block_range"], 500,
        "{answers}"
    );
    assert_eq!(answers[1]["result"].as_array().unwrap().len(), 10);
    assert_eq!(answers[2]["result"], "0x1");
    assert_eq!(
        asked.lock().unwrap().clone(),
        vec![(0, 99)],
        "no node saw a refused range"
    );

    // A block-hash filter is the node's to judge.
    let r = get_logs(&gw, &free, json!(3), json!({"blockHash": "0xab"}));
    assert_eq!(r.json()["result"][0]["blockHash"], "0xab", "{}", r.text());
}

/// Real logs on anvil, spread over 3,000 blocks: the edge's chunked answer is exactly
/// the node's own answer to the whole range.
#[test]
fn a_chunked_answer_equals_the_nodes_own() {
    let node = Anvil::start(1, &[]);
    let from = node.call("eth_accounts", json!([]))[0].clone();
    // Init code that emits one LOG1 (topic: the block number) and deploys nothing:
    // NUMBER PUSH1 0 PUSH1 0 LOG1 STOP.
    for _ in 0..12 {
        node.call(
            "eth_sendTransaction",
            json!([{"from": from, "data": "0x4360006000a100", "gas": "0x186a0"}]),
        );
        node.mine(250);
    }
    let head = node.block_number();
    assert!(head > 3_000, "{head}");
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        extra_yaml: format!("rpc:\n  get_logs: {{chunk_blocks: 100, parallel: 4}}\n{UNLIMITED}"),
        ..Default::default()
    });
    let key = gw.key("business", &[]);
    let filter = json!({"fromBlock": "0x0", "toBlock": hex(head)});
    let direct = node.call("eth_getLogs", json!([filter]));
    assert_eq!(direct.as_array().unwrap().len(), 12);
    let r = get_logs(&gw, &key, json!(1), filter);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"], direct);
    // A topic filter is kept in every chunk.
    let topic = direct[5]["topics"][0].clone();
    let filter = json!({"fromBlock": "0x0", "toBlock": hex(head), "topics": [topic]});
    let r = get_logs(&gw, &key, json!(2), filter);
    assert_eq!(r.json()["result"], json!([direct[5]]), "{}", r.text());
}
