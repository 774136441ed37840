//! Mempool snapshot and stats on a real node (anvil, not mining): what the watcher polls
//! from `txpool_content` is served from memory, ordered, windowed and bounded; bad
//! parameters are 400, the plan is enforced, mined transactions leave the snapshot.

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// anvil's first two dev accounts.
const DEV0: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
const DEV1: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

fn pending(gw: &Gateway, key: &str) -> Value {
    let r = gw.get("/v1/eth/mempool/snapshot", &[("x-token", key)]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

#[test]
fn snapshot_and_stats_from_the_nodes_txpool() {
    let node = Anvil::start(1, &["--no-mining"]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [txpool]}}\n",
            node.url()
        ),
        extra_yaml: format!("{UNLIMITED}mempool:\n  eth:\n    poll_ms: 200\n"),
        ..Default::default()
    });
    let pro = gw.key("pro", &[]);
    // Five from DEV0 at 1..5 gwei, three from DEV1 at 10 gwei.
    let send = |from: &str, gwei: u64| {
        let tx = json!({"from": from, "to": "0x0000000000000000000000000000000000000b0b",
                        "value": "0x1", "gasPrice": format!("0x{:x}", gwei * 1_000_000_000)});
        node.call("eth_sendTransaction", json!([tx]));
    };
    for gwei in 1..=5 {
        send(DEV0, gwei);
    }
    for _ in 0..3 {
        send(DEV1, 10);
    }
    let until = Instant::now() + Duration::from_secs(10);
    let snap = loop {
        let snap = pending(&gw, &pro);
        if snap["pending"] == 8 {
            break snap;
        }
        assert!(
            Instant::now() < until,
            "watcher never saw 8 pending: {snap}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let prices: Vec<f64> = snap["txs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["gas_price_gwei"].as_f64().unwrap())
        .collect();
    assert_eq!(prices, vec![10.0, 10.0, 10.0, 5.0, 4.0, 3.0, 2.0, 1.0]);
    assert_eq!(snap["txs"][3]["from"], DEV0);
    let top = gw
        .get("/v1/eth/mempool/snapshot?limit=2", &[("x-token", &pro)])
        .json();
    assert_eq!(top["txs"].as_array().unwrap().len(), 2);

    let stats = gw.get("/v1/eth/mempool/stats?window=1m", &[("x-token", &pro)]);
    assert_eq!(stats.status, 200, "{}", stats.text());
    let s = stats.json();
    assert_eq!(s["window"], "1m");
    assert!(
        (s["tx_per_sec"].as_f64().unwrap() - 8.0 / 60.0).abs() < 1e-9,
        "{s}"
    );
    assert_eq!(
        (
            s["gas_p50_gwei"].as_f64(),
            s["gas_p95_gwei"].as_f64(),
            s["gas_p99_gwei"].as_f64()
        ),
        (Some(4.0), Some(10.0), Some(10.0))
    );
    assert_eq!(
        s["top_senders"],
        json!([{"address": DEV0, "count": 5}, {"address": DEV1, "count": 3}])
    );
    // The default window is 1m.
    assert_eq!(
        gw.get("/v1/eth/mempool/stats", &[("x-token", &pro)]).json()["window"],
        "1m"
    );

    // Mined: gone from the snapshot (arrivals still count in the window).
    node.mine(1);
    let until = Instant::now() + Duration::from_secs(10);
    while pending(&gw, &pro)["pending"] != 0 {
        assert!(Instant::now() < until, "mined transactions stayed pending");
        std::thread::sleep(Duration::from_millis(100));
    }
    let after = gw
        .get("/v1/eth/mempool/stats?window=5m", &[("x-token", &pro)])
        .json();
    assert_eq!(after["samples"], 8);

    // Refusals: bad parameters, the plan, a chain not watched.
    for path in [
        "/v1/eth/mempool/stats?window=2m",
        "/v1/eth/mempool/stats?window=",
        "/v1/eth/mempool/snapshot?limit=0",
        "/v1/eth/mempool/snapshot?limit=501",
    ] {
        let r = gw.get(path, &[("x-token", &pro)]);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_params");
    }
    let free = gw.key("free", &[]);
    let r = gw.get("/v1/eth/mempool/stats", &[("x-token", &free)]);
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["error"], "tier_insufficient");
    let r = gw.get("/v1/polygon/mempool/stats", &[("x-token", &pro)]);
    assert!(r.status == 503 || r.status == 403, "{}", r.text());
}

/// With a `ws` host, arrivals come from the shared `newPendingTransactions` subscription
/// at once: the poll here runs once a minute, so only the subscription can show them.
#[test]
fn arrivals_come_from_the_subscription_where_the_pool_has_ws() {
    let node = Anvil::start(1, &["--no-mining"]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [txpool, ws]}}\n",
            node.url()
        ),
        extra_yaml: format!("{UNLIMITED}mempool:\n  eth:\n    poll_ms: 60000\n"),
        ..Default::default()
    });
    let pro = gw.key("pro", &[]);
    // The first poll (at start) saw an empty pool; wait until the subscription is up.
    let until = Instant::now() + Duration::from_secs(10);
    while !metrics_text(&gw)
        .contains("chainedge_upstream_subscriptions{kind=\"newPendingTransactions\"")
    {
        assert!(Instant::now() < until, "no node subscription taken");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Counted when asked for; in place a moment later.
    std::thread::sleep(Duration::from_millis(500));
    for gwei in [7, 8, 9] {
        let tx = json!({"from": DEV0, "to": "0x0000000000000000000000000000000000000b0b",
                        "value": "0x1", "gasPrice": format!("0x{:x}", gwei * 1_000_000_000u64)});
        node.call("eth_sendTransaction", json!([tx]));
    }
    let until = Instant::now() + Duration::from_secs(5);
    let snap = loop {
        let snap = pending(&gw, &pro);
        if snap["pending"] == 3 {
            break snap;
        }
        assert!(
            Instant::now() < until,
            "arrivals not seen within 5 s: {snap}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(snap["txs"][0]["gas_price_gwei"], 9.0);
    assert_eq!(snap["txs"][0]["from"], DEV0);
}

fn metrics_text(gw: &Gateway) -> String {
    request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .map(|r| r.text())
        .unwrap_or_default()
}
