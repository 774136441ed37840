//! Reads that outlive a bad node (issue 21, items 4 and 5): a node that stops answering
//! costs no caller an error nor more than a moment, a slow host is hedged to the next
//! one, and each method class has a budget of its own.

use common::*;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn eth_pool(urls: &[String]) -> String {
    let mut pools = "  eth_el:\n    hosts:\n".to_string();
    for (i, url) in urls.iter().enumerate() {
        pools.push_str(&format!(
            "      - {{id: el-{i}, url: \"{url}\", family: el-geth, capabilities: [debug]}}\n"
        ));
    }
    pools
}

/// Two nodes, each listed twice as the demo lists a node and the front before it: one
/// SIGSTOP freezes two hosts at once.
fn twice_each(nodes: &[&Anvil]) -> Gateway {
    let urls: Vec<String> = nodes.iter().flat_map(|n| [n.url(), n.url()]).collect();
    Gateway::start(GatewayOpts {
        pools: eth_pool(&urls),
        extra_yaml: format!("health:\n  interval_ms: 500\n  timeout_ms: 1000\n{UNLIMITED}"),
        ..Default::default()
    })
}

/// What readers saw while `meanwhile` ran: every answer's time, sorted, and how many
/// reads failed.
struct Seen {
    times: Vec<Duration>,
    failures: usize,
}

impl Seen {
    fn at(&self, q: f64) -> Duration {
        self.times[((self.times.len() - 1) as f64 * q) as usize]
    }
}

/// Four readers alternating `eth_blockNumber` and `eth_getBalance` at `latest` while
/// `meanwhile` runs, with two quiet seconds before and after it.
fn reads_while(gw: &Gateway, meanwhile: impl FnOnce()) -> Seen {
    let key = gw.key("scale", &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicUsize::new(0));
    let times = Arc::new(Mutex::new(Vec::new()));
    let readers: Vec<_> = (0..4)
        .map(|n| {
            let (stop, failures, times, port) =
                (stop.clone(), failures.clone(), times.clone(), gw.port);
            let key = key.clone();
            std::thread::spawn(move || {
                let calls = [
                    json!({"jsonrpc": "2.0", "id": n, "method": "eth_blockNumber", "params": []}),
                    json!({"jsonrpc": "2.0", "id": n, "method": "eth_getBalance",
                           "params": ["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", "latest"]}),
                ];
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let began = Instant::now();
                    let r = rpc(port, "/rpc/eth", Some(&key), &calls[i % 2]);
                    let took = began.elapsed();
                    i += 1;
                    if r.status == 200 && r.json()["result"].is_string() {
                        times.lock().unwrap().push(took);
                    } else {
                        failures.fetch_add(1, Ordering::Relaxed);
                        eprintln!("read failed after {took:?}: {} {}", r.status, r.text());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    meanwhile();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let mut times = times.lock().unwrap().clone();
    times.sort();
    let seen = Seen {
        times,
        failures: failures.load(Ordering::Relaxed),
    };
    eprintln!(
        "{} reads: p50 {:?} p99 {:?} max {:?}; hedges won by another host: {}",
        seen.times.len(),
        seen.at(0.5),
        seen.at(0.99),
        seen.at(1.0),
        metric_value(
            gw,
            "chainedge_hedged_reads_total{pool=\"eth_el\",won_by=\"other\"}"
        )
    );
    seen
}

/// Freeze (SIGSTOP: it accepts connections and never answers) each node in turn for
/// five seconds, thawing between.
fn freeze_each(nodes: &[&Anvil]) {
    for node in nodes {
        node.proc.signal("STOP");
        std::thread::sleep(Duration::from_secs(5));
        node.proc.signal("CONT");
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Two nodes under steady reads, each listed twice (a node and its front); each is
/// frozen in turn. Nobody gets an error, nobody waits a second: the bound is one hedge
/// delay per frozen host ahead (at most `hedge.max_delay_ms`, 400 ms, each; far less
/// for a host with fast history) plus the answering host's own time.
#[test]
fn a_frozen_node_costs_no_one_an_error() {
    let a = Anvil::start(1, &[]);
    let b = Anvil::start(1, &[]);
    let gw = twice_each(&[&a, &b]);
    let seen = reads_while(&gw, || freeze_each(&[&a, &b]));
    assert_eq!(seen.failures, 0, "reads failed");
    assert!(
        seen.times.len() > 600,
        "too few reads: {}",
        seen.times.len()
    );
    assert!(
        seen.at(1.0) < Duration::from_secs(1),
        "slowest read {:?}",
        seen.at(1.0)
    );
    // The frozen node's calls were answered by the other one, by hedging, before any
    // health check could have said anything.
    assert!(
        metric_value(
            &gw,
            "chainedge_hedged_reads_total{pool=\"eth_el\",won_by=\"other\"}"
        ) >= 1.0
    );
}

/// The same with the other node lagging (20 blocks behind, so degraded and asked last):
/// freezing the node ahead leaves only the lagging one, which answers within the bound
/// instead of the frozen node's attempt timing out.
#[test]
fn a_frozen_node_beside_a_lagging_one_costs_no_one_a_second() {
    let ahead = Anvil::start(1, &[]);
    let lagging = Anvil::start(1, &[]);
    ahead.mine(20);
    let gw = twice_each(&[&ahead, &lagging]);
    let seen = reads_while(&gw, || freeze_each(&[&ahead, &lagging]));
    assert_eq!(seen.failures, 0, "reads failed");
    assert!(
        seen.at(1.0) < Duration::from_secs(1),
        "slowest read {:?}",
        seen.at(1.0)
    );
}

/// A fixture node slow (`slow_ms`) for the methods listed, quick for the rest; batches
/// too (the health probe is one).
fn node_slow_for(methods: &'static [&'static str], slow_ms: u64) -> Fixture {
    Fixture::start(move |req| {
        let one = |call: &serde_json::Value| {
            let method = call["method"].as_str().unwrap_or("");
            if methods.contains(&method) {
                std::thread::sleep(Duration::from_millis(slow_ms));
            }
            let result = match method {
                "eth_blockNumber" => json!("0x10"),
                "eth_chainId" => json!("0x1"),
                "eth_syncing" => json!(false),
                _ => json!(format!("{method} answered")),
            };
            json!({"jsonrpc": "2.0", "id": call["id"], "result": result})
        };
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
        FixtureResponse::json(match &body {
            serde_json::Value::Array(calls) => calls.iter().map(one).collect(),
            call => one(call),
        })
    })
}

#[test]
fn slow_hosts_are_hedged_and_each_class_has_its_budget() {
    // Hedging: one host slow for eth_getBalance, the other quick. Whichever is tried
    // first, the answer comes from the quick one within the hedge delay.
    let slow = node_slow_for(&["eth_getBalance"], 3000);
    let quick = node_slow_for(&[], 0);
    let gw = Gateway::start(GatewayOpts {
        pools: eth_pool(&[slow.url(), quick.url()]),
        extra_yaml: format!("rpc:\n  hedge: {{min_delay_ms: 20, max_delay_ms: 200}}\n{UNLIMITED}"),
        ..Default::default()
    });
    let key = gw.key("scale", &[]);
    let balance = json!({"jsonrpc": "2.0", "id": 7, "method": "eth_getBalance", "params": ["0x00", "latest"]});
    for _ in 0..6 {
        let began = Instant::now();
        let r = rpc(gw.port, "/rpc/eth", Some(&key), &balance);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["result"], "eth_getBalance answered");
        assert_eq!(r.json()["id"], 7);
        assert!(
            began.elapsed() < Duration::from_secs(2),
            "{:?}",
            began.elapsed()
        );
    }
    assert!(quick.hits() >= 6, "the quick host answered every call");
    assert!(
        metric_value(
            &gw,
            "chainedge_hedged_reads_total{pool=\"eth_el\",won_by=\"other\"}"
        ) >= 1.0
    );
    drop(gw);

    // Budgets: reads get 1 s in all, debug calls 5 s; both methods take 1.5 s.
    let node = node_slow_for(&["eth_call", "debug_traceTransaction"], 1500);
    let gw = Gateway::start(GatewayOpts {
        pools: eth_pool(&[node.url()]),
        extra_yaml: format!(
            "rpc:\n  timeout_ms: 1000\n  attempt_timeout_ms: 1000\n  class_timeouts:\n    debug: {{timeout_ms: 5000, attempt_timeout_ms: 5000}}\n{UNLIMITED}"
        ),
        ..Default::default()
    });
    let key = gw.key("scale", &[]);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_call", "params": [{"to": "0x00"}, "latest"]});
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &call);
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["error"]["data"]["error"], "upstream_unavailable");
    assert!(r.text().contains("timeout"), "{}", r.text());
    let trace =
        json!({"jsonrpc": "2.0", "id": 2, "method": "debug_traceTransaction", "params": ["0x01"]});
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &trace);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"], "debug_traceTransaction answered");
}

/// Twenty wallets ask for the same balance at once: the node is asked once, and each
/// gets the answer under its own id.
#[test]
fn identical_reads_in_flight_share_one_upstream_call() {
    let node = node_slow_for(&["eth_getBalance"], 500);
    let gw = Gateway::start(GatewayOpts {
        pools: eth_pool(&[node.url()]),
        extra_yaml: UNLIMITED.to_string(),
        ..Default::default()
    });
    let key = gw.key("scale", &[]);
    let balance_calls = || {
        node.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| String::from_utf8_lossy(&r.body).contains("eth_getBalance"))
            .count()
    };
    let herd: Vec<_> = (0..20)
        .map(|n| {
            let (port, key) = (gw.port, key.clone());
            std::thread::spawn(move || {
                // Same call; the params' keys in another order are still the same call.
                let params = if n % 2 == 0 { json!(["0xab", {"blockHash": "0x01", "requireCanonical": true}]) }
                    else { json!(["0xab", {"requireCanonical": true, "blockHash": "0x01"}]) };
                let call = json!({"jsonrpc": "2.0", "id": format!("wallet-{n}"), "method": "eth_getBalance", "params": params});
                let r = rpc(port, "/rpc/eth", Some(&key), &call);
                assert_eq!(r.status, 200, "{}", r.text());
                assert_eq!(r.json()["id"], format!("wallet-{n}"));
                assert_eq!(r.json()["result"], "eth_getBalance answered");
            })
        })
        .collect();
    for t in herd {
        t.join().unwrap();
    }
    assert_eq!(balance_calls(), 1, "the herd made one upstream call");
    assert_eq!(metric_value(&gw, "chainedge_coalesced_reads_total"), 19.0);
    // Different params, or the same call once the first is done: calls of their own.
    for address in ["0xab", "0xcd"] {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [address, "latest"]});
        assert_eq!(rpc(gw.port, "/rpc/eth", Some(&key), &call).status, 200);
    }
    assert_eq!(balance_calls(), 3);
}

/// Read-your-writes (issue 21, item 6): each answer says the block its host had reached,
/// and a caller that saw block N asks for N: no host behind it answers, a wait for a
/// host to get there ends in a clear 503, and the answer comes once one does.
#[test]
fn a_caller_that_saw_block_n_is_never_answered_from_behind_it() {
    let ahead = Anvil::start(1, &[]);
    let behind = Anvil::start(1, &[]);
    ahead.mine(99);
    let gw = Gateway::start(GatewayOpts {
        // A host 99 blocks behind stays in use (it is what this test is about).
        pools: eth_pool(&[ahead.url(), behind.url()])
            .replacen("  eth_el:\n", "  eth_el:\n    max_lag: 1000000\n", 1),
        extra_yaml: format!(
            "health:\n  interval_ms: 200\n  timeout_ms: 1000\nrpc:\n  min_block_wait_ms: 1500\n{UNLIMITED}"
        ),
        ..Default::default()
    });
    let key = gw.key("pro", &[]);
    let ask = |min: Option<&str>, call: &serde_json::Value| {
        let body = call.to_string();
        let mut h = vec![
            ("Content-Type", "application/json"),
            ("x-token", key.as_str()),
        ];
        if let Some(m) = min {
            h.push(("X-Chainedge-Min-Block", m));
        }
        request(gw.port, "POST", "/rpc/eth", &h, body.as_bytes()).unwrap()
    };
    // anvil's `finalized` is 64 behind its head: it tells the two nodes apart.
    let finalized = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": ["finalized", false]});
    let served_at = |r: &Resp| -> u64 {
        r.header("X-Chainedge-Block")
            .expect("block header")
            .parse()
            .unwrap()
    };
    // Wait until health has seen both heads; unpinned, both nodes answer.
    let until = Instant::now() + Duration::from_secs(20);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 2 {
        assert!(
            Instant::now() < until,
            "both nodes never answered: {seen:?}"
        );
        let r = ask(None, &finalized);
        assert_eq!(r.status, 200, "{}", r.text());
        if r.header("X-Chainedge-Block").is_some() {
            seen.insert(served_at(&r));
        }
    }
    assert_eq!(seen.iter().next_back(), Some(&100), "{seen:?}");
    // Having seen block 100: every answer is from the node that has it.
    for min in ["100", "0x64"] {
        for _ in 0..10 {
            let r = ask(Some(min), &finalized);
            assert_eq!(r.status, 200, "{}", r.text());
            assert_eq!(r.json()["result"]["number"], "0x24", "{}", r.text());
            assert!(served_at(&r) >= 100);
        }
    }
    // No host there yet: a clear, retryable refusal after the wait, not a stale answer.
    let began = Instant::now();
    let r = ask(Some("2000"), &finalized);
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(began.elapsed() >= Duration::from_millis(1400));
    let e = &r.json()["error"];
    assert_eq!(e["data"]["error"], "block_not_reached");
    assert_eq!(
        (
            e["data"]["min_block"].as_u64(),
            e["data"]["highest_block"].as_u64()
        ),
        (Some(2000), Some(100))
    );
    assert_eq!(r.header("Retry-After"), Some("1"));
    // ... and once a node gets there while the call waits, it answers.
    let waiting = {
        let (port, key) = (gw.port, key.clone());
        std::thread::spawn(move || {
            let body = json!({"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber"}).to_string();
            let h = [
                ("Content-Type", "application/json"),
                ("x-token", key.as_str()),
                ("X-Chainedge-Min-Block", "150"),
            ];
            request(port, "POST", "/rpc/eth", &h, body.as_bytes()).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    // Few blocks, so a busy machine's anvil mines them well within the 1.5 s wait.
    behind.mine(200);
    let r = waiting.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(served_at(&r) >= 150, "{:?}", r.header("X-Chainedge-Block"));
    // A header that is not a block number: 400 before any node.
    let r = ask(Some("soon"), &finalized);
    assert_eq!(
        (r.status, r.json()["error"]["code"].as_i64()),
        (400, Some(-32602)),
        "{}",
        r.text()
    );
}
