//! Pools, health checks, mesh admin and the metrics mirror (issue 5), through the real
//! binary against real anvil nodes and fixture metrics endpoints.

use common::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn mesh(gw: &Gateway) -> Value {
    let r = gw.get("/v1/eth/mesh/health", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("X-Mesh-Source"), Some("eth-mesh-admin"));
    assert_eq!(r.header("Server"), Some("chainedge"));
    let v = r.json();
    // Counts always add up, hosts are always sorted.
    for (_, b) in v["blocks"].as_object().unwrap() {
        let n = |k: &str| b[k].as_u64().unwrap();
        assert_eq!(
            n("available_count") + n("degraded_count") + n("quarantined_count"),
            n("host_count"),
            "{b}"
        );
        let ids: Vec<&str> = b["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["id"].as_str().unwrap())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
    }
    v
}

fn host<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["blocks"]["el"]["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == id)
        .unwrap()
}

/// Poll mesh health until `id` is in `state`; returns how long it took.
fn wait_state(gw: &Gateway, id: &str, state: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let v = mesh(gw);
        if host(&v, id)["state"] == state {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{id} not {state} within {within:?}: {}",
            host(&v, id)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn health_classifies_lagging_stopped_and_restarted_nodes() {
    let a = Anvil::start(1, &[]);
    let b = Anvil::start(1, &[]);
    let c = Anvil::start(1, &[]);
    let b_port = b.port;
    let interval_ms = 300;
    // Listed out of order: the report sorts by id.
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    max_lag: 3\n    hosts:\n\
             \x20     - {{id: el-c, url: \"{}\", family: el-geth, role: backup, capabilities: [archive]}}\n\
             \x20     - {{id: el-a, url: \"{}\", family: el-geth, capabilities: [archive, trace]}}\n\
             \x20     - {{id: el-b, url: \"{}\", family: el-reth}}\n",
            c.url(),
            a.url(),
            b.url()
        ),
        extra_yaml: format!("health:\n  interval_ms: {interval_ms}\n  timeout_ms: 500\n  quarantine_after: 2\n{UNLIMITED}"),
        ..Default::default()
    });

    // The edge starts after the first round: every node is already classified.
    let v = mesh(&gw);
    let el = &v["blocks"]["el"];
    assert_eq!(el["block"], "el");
    assert_eq!(el["host_count"], 3);
    assert_eq!(el["available_count"], 3, "{el}");
    assert!(v["blocks"].get("cl").is_none() && v["blocks"].get("mev").is_none());
    assert!(v["generated_at"].as_str().unwrap().ends_with('Z'));
    let ha = host(&v, "el-a");
    assert_eq!(ha["family"], "el-geth");
    assert_eq!(ha["role"], "primary");
    assert_eq!(ha["capabilities"], json!(["archive", "trace"]));
    assert_eq!(host(&v, "el-c")["role"], "backup");
    assert!(ha["last_error"].is_null());
    assert_eq!(ha["head"], 1);

    // Admin only answers GET, in the admin envelope. Forwarding headers on a loopback
    // connection say a proxy stands in between: the client behind it is not local, so
    // admin then needs the token.
    let r = request(gw.port, "POST", "/v1/eth/mesh/health", &[], b"").unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(r.json(), json!({"error": "only GET supported"}));
    let r = gw.get(
        "/v1/eth/mesh/health",
        &[
            ("X-Forwarded-For", "203.0.113.9"),
            ("X-Real-IP", "203.0.113.9"),
        ],
    );
    assert_eq!(r.status, 403);
    let r = gw.get(
        "/v1/eth/mesh/health",
        &[
            ("X-Forwarded-For", "203.0.113.9"),
            ("X-Admin-Token", "test-admin-token"),
        ],
    );
    assert_eq!(r.status, 200);

    // Steady reads through /rpc/eth (four clients, a few hundred requests a second) for
    // the rest of the test must never fail.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicUsize::new(0));
    let ok = Arc::new(AtomicUsize::new(0));
    let key = gw.key("scale", &[]);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let (stop, failures, ok, port) = (stop.clone(), failures.clone(), ok.clone(), gw.port);
            let key = key.clone();
            std::thread::spawn(move || {
                let body =
                    json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []});
                while !stop.load(Ordering::Relaxed) {
                    let r = rpc(port, "/rpc/eth", Some(&key), &body);
                    if r.status == 200 && r.json()["result"].is_string() {
                        ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failures.fetch_add(1, Ordering::Relaxed);
                        eprintln!("read failed: {} {}", r.status, r.text());
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();

    // el-c falls 10 blocks behind: degraded, with its lag.
    a.mine(10);
    b.mine(10);
    wait_state(&gw, "el-c", "degraded", Duration::from_secs(3));
    let v = mesh(&gw);
    assert_eq!(host(&v, "el-c")["lag"], 10);
    assert_eq!(v["blocks"]["el"]["head"], 11);
    c.mine(10);
    wait_state(&gw, "el-c", "available", Duration::from_secs(3));

    // el-b stops: quarantined within two rounds (plus one probe timeout), with its error.
    drop(b);
    let took = wait_state(&gw, "el-b", "quarantined", Duration::from_secs(5));
    assert!(
        took <= Duration::from_millis(2 * interval_ms + 500 + 400),
        "quarantine took {took:?}"
    );
    let v = mesh(&gw);
    let hb = host(&v, "el-b");
    assert!(
        hb["last_error"].as_str().unwrap().contains("health check"),
        "{hb}"
    );
    assert_eq!(
        hb["head"], 11,
        "an error never overwrites the last good head"
    );
    assert_eq!(v["blocks"]["el"]["quarantined_count"], 1);

    // The gateway's own metrics carry the state.
    let m = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .unwrap()
        .text();
    assert!(
        m.contains("chainedge_host_state{host=\"el-b\",pool=\"eth_el\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("chainedge_host_head{host=\"el-a\",pool=\"eth_el\"} 11"),
        "{m}"
    );

    // Restarted (a fresh chain at height 1): back, but degraded until it catches up.
    let b = Anvil::start_on(b_port, 1, &[]);
    wait_state(&gw, "el-b", "degraded", Duration::from_secs(3));
    b.mine(10);
    wait_state(&gw, "el-b", "available", Duration::from_secs(3));

    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "reads failed while nodes came and went"
    );
    let ok = ok.load(Ordering::Relaxed);
    eprintln!("reads served while nodes came and went: {ok}");
    assert!(ok > 500, "only {ok} reads");

    // The hosts list covers every Ethereum pool host.
    let r = gw.get("/v1/eth/mesh/hosts", &[]);
    assert_eq!(r.status, 200);
    let ids: Vec<String> = r.json()["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["el-a", "el-b", "el-c"]);
}

const HOSTILE_METRICS: &str = "\
# HELP chain_head_block Current head block
# TYPE chain_head_block gauge
chain_head_block{instance=\"10.20.30.40:6060\",job=\"geth\",pod=\"geth-0\",namespace=\"mainnet\",node=\"ip-10-20-30-40.ec2.internal\"} 21000000
# HELP p2p_peers Connected peers
# TYPE p2p_peers gauge
p2p_peers{enode=\"enode://ab@52.14.1.2:30303\",kind=\"inbound\"} 12
p2p_peers{remote=\"[2001:db8::7]:30303\",kind=\"outbound\"} 3
# HELP rpc_requests_total RPC requests served
# TYPE rpc_requests_total counter
rpc_requests_total{method=\"eth_call\",hostname=\"geth-0.internal\",note=\"say \\\"hi\\\"\"} 1027
# HELP rpc_duration_seconds RPC latency
# TYPE rpc_duration_seconds histogram
rpc_duration_seconds_bucket{le=\"0.1\",pod=\"geth-0\"} 10
rpc_duration_seconds_bucket{le=\"+Inf\",pod=\"geth-0\"} 12
rpc_duration_seconds_sum{pod=\"geth-0\"} 1.5
rpc_duration_seconds_count{pod=\"geth-0\"} 12
rpc_duration_seconds_bucket{le=\"0.1\",pod=\"geth-1\"} 3
rpc_duration_seconds_bucket{le=\"+Inf\",pod=\"geth-1\"} 4
rpc_duration_seconds_sum{pod=\"geth-1\"} 0.5
rpc_duration_seconds_count{pod=\"geth-1\"} 4
# an operator note: scraped from 10.20.30.40
";

#[test]
fn metrics_mirror_scrubs_caches_and_refuses_in_order() {
    let node = Fixture::json_rpc();
    let delay_ms = Arc::new(AtomicU64::new(0));
    let d = delay_ms.clone();
    let metrics = Fixture::start(move |_| {
        std::thread::sleep(Duration::from_millis(d.load(Ordering::Relaxed)));
        FixtureResponse {
            status: 200,
            content_type: "text/plain; version=0.0.4",
            body: HOSTILE_METRICS.as_bytes().to_vec(),
            sse: None,
            raw: None,
        }
    });
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n\
             \x20     - {{id: geth-1, url: \"{n}\", family: el-geth, capabilities: [metrics], metrics_url: \"{m}/metrics\"}}\n\
             \x20     - {{id: geth-dark, url: \"{n}\", family: el-geth}}\n\
             \x20 polygon_bor:\n    hosts:\n\
             \x20     - {{id: bor-1, url: \"{n}\", family: bor, capabilities: [metrics], metrics_url: \"{m}/metrics\"}}\n",
            n = node.url(),
            m = metrics.url()
        ),
        extra_yaml: format!("metrics_mirror:\n  fresh_ms: 500\n  stale_ms: 2000\n  timeout_ms: 1000\n{UNLIMITED}"),
        ..Default::default()
    });
    let tenant = gw.cli(&["tenants", "create", "--name", "m", "--plan", "free"]);
    gw.cli(&[
        "tenants",
        "set-features",
        "--tenant",
        &tenant,
        "--features",
        "eth.chain_metrics_el",
    ]);
    let el_key = gw.cli(&["keys", "create", "--tenant", &tenant]);
    let both = gw.cli(&["tenants", "create", "--name", "m2", "--plan", "free"]);
    gw.cli(&[
        "tenants",
        "set-features",
        "--tenant",
        &both,
        "--features",
        "eth.chain_metrics_el,eth.chain_metrics_cl",
    ]);
    let both_key = gw.cli(&["keys", "create", "--tenant", &both]);
    let plain_key = gw.key("scale", &[]);

    let get = |path: &str, key: &str| gw.get(path, &[("x-token", key)]);
    let refused = |path: &str, key: &str, status: u16, code: &str| {
        let r = get(path, key);
        assert_eq!(r.status, status, "{path}: {}", r.text());
        assert_eq!(r.json(), json!({"error": code, "code": status}), "{path}");
    };

    // Layer is case-insensitive; first call scrapes.
    let r = get("/v1/eth/metrics/geth-1/EL-Geth", &el_key);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("X-Cache-Status"), Some("miss"));
    // Within the fresh window (asked at once, before the slower checks below): from cache.
    assert_eq!(
        get("/v1/eth/metrics/geth-1/el-geth", &el_key).header("X-Cache-Status"),
        Some("fresh")
    );
    assert_eq!(
        r.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(r.header("Server"), Some("chainedge"));
    let body = r.text();
    assert!(
        body.contains("chain_head_block{instance=\"geth-1\",job=\"geth\"} 21000000"),
        "{body}"
    );
    for leaked in [
        "10.20.30.40",
        "52.14.1.2",
        "2001:db8",
        "geth-0",
        "pod=",
        "namespace=",
        "node=",
        "hostname=",
        "enode",
        "operator note",
    ] {
        assert!(!body.contains(leaked), "{leaked} leaked:\n{body}");
    }
    assert!(body.contains("# HELP rpc_duration_seconds RPC latency"));
    assert!(
        body.contains("rpc_requests_total{method=\"eth_call\",note=\"say \\\"hi\\\"\"} 1027"),
        "{body}"
    );
    assert_eq!(
        body.matches("rpc_duration_seconds_count").count(),
        1,
        "{body}"
    );
    // Valid exposition text.
    let file = std::env::temp_dir().join(format!("chainedge-mirror-{}.prom", std::process::id()));
    std::fs::write(&file, &body).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .expect("promtool (installed by make setup)");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "promtool: {}{}\n{body}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Concurrent misses scrape once.
    std::thread::sleep(Duration::from_millis(600));
    delay_ms.store(300, Ordering::Relaxed);
    let before = metrics.hits();
    let port = gw.port;
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let k = el_key.clone();
            std::thread::spawn(move || {
                request(
                    port,
                    "GET",
                    "/v1/eth/metrics/geth-1/el-geth",
                    &[("x-token", &k)],
                    b"",
                )
                .unwrap()
            })
        })
        .collect();
    let statuses: Vec<Option<String>> = threads
        .into_iter()
        .map(|t| {
            let r = t.join().unwrap();
            assert_eq!(r.status, 200);
            r.header("X-Cache-Status").map(str::to_string)
        })
        .collect();
    assert_eq!(
        metrics.hits() - before,
        1,
        "one scrape for concurrent misses: {statuses:?}"
    );
    delay_ms.store(0, Ordering::Relaxed);

    // Node down: stale within the stale ceiling, then 502.
    metrics.down.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(600));
    let r = get("/v1/eth/metrics/geth-1/el-geth", &el_key);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Cache-Status"), Some("stale"));
    assert!(r.text().contains("chain_head_block"));
    std::thread::sleep(Duration::from_millis(2000));
    refused(
        "/v1/eth/metrics/geth-1/el-geth",
        &el_key,
        502,
        "upstream_unavailable",
    );

    // Every row of the error table, and its precedence.
    let r = request(
        gw.port,
        "POST",
        "/v1/eth/metrics/geth-1/el-geth",
        &[("x-token", &el_key)],
        b"",
    )
    .unwrap();
    assert_eq!(r.status, 405);
    assert_eq!(
        r.json(),
        json!({"error": "method_not_allowed", "code": 405})
    );
    for pprof in [
        "/v1/eth/metrics/geth-1/el-geth/debug/pprof/",
        "/v1/eth/metrics/geth-1//debug//pprof/heap",
        "/v1/eth/metrics/geth-1/%64ebug/pprof/",
        "/v1/eth/metrics/geth-1%2Fdebug%2Fpprof",
        "/v1/eth/metrics/nohost/nolayer/DEBUG/PPROF",
    ] {
        refused(pprof, &plain_key, 404, "pprof_not_allowed");
    }
    // Outside the mirror's base: the chain REST envelope of unknown paths.
    let r = get("/v1/eth/metricsx/geth-1/el-geth", &el_key);
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("route_not_found"))
    );
    refused("/v1/eth/metrics/geth-1", &el_key, 404, "invalid_path");
    refused(
        "/v1/eth/metrics/geth-1/el-geth/extra",
        &el_key,
        404,
        "invalid_path",
    );
    refused(
        "/v1/eth/metrics/nohost/el-unknown",
        &el_key,
        404,
        "unknown_layer",
    );
    refused(
        "/v1/eth/metrics/nohost/el-geth",
        &plain_key,
        403,
        "tier_locked",
    );
    refused(
        "/v1/eth/metrics/geth-1/cl-teku",
        &el_key,
        403,
        "tier_locked",
    );
    refused(
        "/v1/eth/metrics/nohost/cl-teku",
        &both_key,
        503,
        "pool_not_configured",
    );
    refused(
        "/v1/eth/metrics/nohost/el-geth",
        &el_key,
        404,
        "unknown_host",
    );
    refused(
        "/v1/eth/metrics/geth-1/el-reth",
        &el_key,
        400,
        "family_mismatch",
    );
    refused(
        "/v1/eth/metrics/geth-dark/el-geth",
        &el_key,
        403,
        "capability_missing",
    );

    // Polygon's mirror: layers bor and heimdall, no feature gate.
    metrics.down.store(false, Ordering::Relaxed);
    let r = get("/v1/polygon/metrics/bor-1/BOR", &plain_key);
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("instance=\"bor-1\""));
    refused(
        "/v1/polygon/metrics/bor-1/heimdall",
        &plain_key,
        503,
        "pool_not_configured",
    );
    let r = gw.get("/v1/polygon/mesh/health", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Mesh-Source"), Some("polygon-mesh-admin"));
    assert_eq!(r.json()["blocks"]["bor"]["host_count"], 1);
    assert!(r.json()["blocks"].get("heimdall").is_none());
}
