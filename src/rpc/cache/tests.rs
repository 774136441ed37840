//! The response cache's lifetimes, bounds and policies.

use super::*;
use crate::verify::Verified;
use serde_json::json;

#[test]
fn lifetimes_follow_what_the_answer_depends_on() {
    use Depends::*;
    let p = |m: &str, v: Value| policy(m, Some(&v));
    assert_eq!(p("eth_chainId", json!([])), Policy::Cache(Nothing));
    assert_eq!(
        p("eth_getBlockByHash", json!(["0xab", false])),
        Policy::Cache(Nothing)
    );
    assert_eq!(
        p("eth_getBlockByNumber", json!(["0x10", false])),
        Policy::Cache(Block(16))
    );
    assert_eq!(
        p("eth_getBlockByNumber", json!(["latest", false])),
        Policy::Cache(Head)
    );
    assert_eq!(p("eth_getBalance", json!(["0xab"])), Policy::Cache(Head));
    assert_eq!(
        p("eth_getBalance", json!(["0xab", "pending"])),
        Policy::Bypass("pending")
    );
    assert_eq!(
        p("eth_getBalance", json!(["0xab", "earliest"])),
        Policy::Cache(Block(0))
    );
    assert_eq!(
        p("eth_call", json!([{}, {"blockHash": "0xab"}])),
        Policy::Cache(Nothing)
    );
    assert_eq!(
        p("eth_call", json!([{}, {"blockNumber": "0x5"}])),
        Policy::Cache(Block(5))
    );
    assert_eq!(
        p("eth_getTransactionReceipt", json!(["0xab"])),
        Policy::Cache(AnswerBlock)
    );
    assert_eq!(
        p(
            "eth_getLogs",
            json!([{"fromBlock": "0x1", "toBlock": "0x5"}])
        ),
        Policy::Cache(Block(5))
    );
    assert_eq!(
        p("eth_getLogs", json!([{"toBlock": "pending"}])),
        Policy::Bypass("pending")
    );
    assert_eq!(
        p("eth_getLogs", json!([{"blockHash": "0xab"}])),
        Policy::Cache(Nothing)
    );
    assert_eq!(
        p("eth_getBalance", json!(["0xab", "0xzz"])),
        Policy::Bypass("block_param")
    );
    for m in [
        "eth_sendRawTransaction",
        "eth_newFilter",
        "debug_traceBlockByNumber",
        "eth_estimateGas",
    ] {
        assert_eq!(p(m, json!(["0x1"])), Policy::Bypass("method"), "{m}");
    }
}

fn cache(max_bytes: usize) -> ResponseCache {
    let conf = crate::config::CacheConf {
        max_bytes,
        ..Default::default()
    };
    let mut views = HashMap::new();
    views.insert("p".to_string(), Arc::new(ChainView::default()));
    ResponseCache {
        conf,
        views,
        store: Mutex::new(Store {
            entries: lru::LruCache::unbounded(),
            bytes: 0,
        }),
    }
}

fn answer(result: Value) -> RpcReply {
    RpcReply {
        body: Bytes::from(json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string()),
        upstream: Some("el-1".into()),
        block: Some(100),
        cache: None,
        verified: Verified::None,
    }
}

#[test]
fn finality_reorgs_and_the_head_decide_what_is_served() {
    let c = cache(1 << 20);
    let view = c.views["p"].clone();
    view.head.store(100, Ordering::Relaxed);
    view.finalized.store(36, Ordering::Relaxed);
    // The caller's id, made only on a hit.
    let id = || Id::Number(7.into());
    let put = |k: &str, d, r| c.put("p", k.into(), d, &answer(r), c.snapshot("p"));
    assert!(put("final", Depends::Block(30), json!("0x1")).is_ok());
    assert!(put("recent", Depends::Block(99), json!("0x2")).is_ok());
    assert!(put("head", Depends::Head, json!("0x3")).is_ok());
    // Not kept: nulls, pending transactions, blocks past the head, a reorg meanwhile.
    assert_eq!(
        put("null", Depends::Nothing, Value::Null),
        Err("null_answer")
    );
    assert_eq!(
        put("tx", Depends::AnswerBlock, json!({"blockNumber": null})),
        Err("not_in_a_block")
    );
    assert_eq!(
        put("future", Depends::Block(101), json!("0x4")),
        Err("past_the_head")
    );
    let before = c.snapshot("p");
    view.generation.fetch_add(1, Ordering::Relaxed);
    assert_eq!(
        c.put(
            "p",
            "late".into(),
            Depends::Block(98),
            &answer(json!("0x5")),
            before
        ),
        Err("reorg_during_call")
    );
    view.generation.fetch_sub(1, Ordering::Relaxed);
    let hit = c.get("p", "final", id).unwrap();
    assert_eq!(&hit.body[..], br#"{"jsonrpc":"2.0","id":7,"result":"0x1"}"#);
    assert_eq!(hit.block, Some(100));
    assert!(c.get("p", "recent", id).is_ok());
    c.wrote("p");
    assert_eq!(c.get("p", "head", id).unwrap_err(), "write_sent");
    assert!(put("head", Depends::Head, json!("0x3")).is_ok());
    view.head.store(101, Ordering::Relaxed);
    assert_eq!(c.get("p", "head", id).unwrap_err(), "head_moved");
    // A receipt from a block past the known head moves the head at once.
    assert!(put("head", Depends::Head, json!("0x3")).is_ok());
    assert!(put(
        "receipt",
        Depends::AnswerBlock,
        json!({"blockNumber": "0x66"})
    )
    .is_ok());
    assert_eq!(c.get("p", "head", id).unwrap_err(), "head_moved");
    view.head.store(101, Ordering::Relaxed);
    c.reorg("p");
    assert_eq!(c.get("p", "recent", id).unwrap_err(), "reorg");
    assert!(
        c.get("p", "final", id).is_ok(),
        "final answers outlive a reorg"
    );
    assert_eq!(c.get("p", "recent", id).unwrap_err(), "absent");
}

#[test]
fn the_cache_is_bounded_in_bytes_and_drops_the_least_recently_used() {
    let c = cache(4096);
    c.views["p"].finalized.store(1000, Ordering::Relaxed);
    let big = json!("0x".to_string() + &"ab".repeat(400));
    for i in 0..20 {
        let kept = c.put(
            "p",
            format!("k{i}"),
            Depends::Nothing,
            &answer(big.clone()),
            (0, 0, 0),
        );
        assert!(kept.is_ok());
        assert!(c.bytes() <= 4096);
    }
    assert_eq!(c.get("p", "k0", || Id::Null).unwrap_err(), "absent");
    assert!(c.get("p", "k19", || Id::Null).is_ok());
}
