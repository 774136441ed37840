//! Heimdall queries (checkpoint, span, current validators) against fixtures that answer
//! as heimdall v1 and as heimdall-v2 do: both become the same product resource; bad ids
//! never reach a node; unknown ids are 404; a failing host is passed over.
mod common;

use common::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn v1_validator(id: u64, signer: &str, power: u64) -> Value {
    json!({"ID": id, "startEpoch": 0, "endEpoch": 0, "nonce": 1, "power": power,
           "pubKey": "0x04aa", "signer": signer, "last_updated": "0", "jailed": false, "accum": -5})
}

fn v2_validator(id: u64, signer: &str, power: u64) -> Value {
    json!({"val_id": id.to_string(), "start_epoch": "0", "end_epoch": "0", "nonce": "1",
           "voting_power": power.to_string(), "pub_key": "BKo=", "signer": signer,
           "last_updated": "0", "jailed": false, "proposer_priority": "-5"})
}

/// One validator as a generation writes it: (id, signer, power).
type Validator = fn(u64, &str, u64) -> Value;

/// A heimdall of generation `v` (1 or 2): checkpoint 7, span 3, two validators.
fn heimdall(v: u8, hits: Arc<AtomicUsize>) -> Fixture {
    Fixture::start(move |req| {
        hits.fetch_add(1, Ordering::SeqCst);
        let a = "0x00000000000000000000000000000000000000A1";
        let b = "0x00000000000000000000000000000000000000b2";
        let val: Validator = if v == 1 { v1_validator } else { v2_validator };
        let vals = vec![val(1, a, 100), val(2, b, 50)];
        let set = json!({"validators": vals, "proposer": val(1, a, 100)});
        match (v, req.path.as_str()) {
            (_, "/status") => FixtureResponse::json(json!(
                {"result": {"sync_info": {"latest_block_height": "100", "catching_up": false}}}
            )),
            (1, "/checkpoints/7") => FixtureResponse::json(json!({"height": "100", "result": {
                "id": 7, "proposer": a, "start_block": 100, "end_block": 355,
                "root_hash": "0xdead", "bor_chain_id": "137", "timestamp": 1700000000}})),
            (2, "/checkpoints/7") => FixtureResponse::json(json!({"checkpoint": {
                "id": "7", "proposer": a, "start_block": "100", "end_block": "355",
                "root_hash": "3q0=", "bor_chain_id": "137", "timestamp": "1700000000"}})),
            (1, "/bor/span/3") => FixtureResponse::json(json!({"height": "100", "result": {
                "span_id": 3, "start_block": 256, "end_block": 6655, "validator_set": set,
                "selected_producers": [val(1, a, 100)], "bor_chain_id": "137"}})),
            (2, "/bor/spans/3") => FixtureResponse::json(json!({"span": {
                "id": "3", "start_block": "256", "end_block": "6655", "validator_set": set,
                "selected_producers": [val(1, a, 100)], "bor_chain_id": "137"}})),
            (1, "/staking/validator-set") => {
                FixtureResponse::json(json!({"height": "100", "result": set}))
            }
            (2, "/stake/validators-set") => FixtureResponse::json(json!({"validator_set": set})),
            _ => FixtureResponse::status(404, "not found"),
        }
    })
}

fn gateway(hosts: &[&Fixture]) -> Gateway {
    let list: String = hosts
        .iter()
        .enumerate()
        .map(|(i, f)| {
            format!(
                "      - {{id: hd-{i}, url: \"{}\", family: heimdall}}\n",
                f.url()
            )
        })
        .collect();
    Gateway::start(GatewayOpts {
        pools: format!("  polygon_heimdall:\n    hosts:\n{list}"),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    })
}

#[test]
fn both_heimdall_generations_give_the_same_resources() {
    let mut answers = Vec::new();
    for v in [1u8, 2] {
        let node = heimdall(v, Arc::default());
        let gw = gateway(&[&node]);
        let key = gw.key("basic", &[]);
        let get = |path: &str| {
            let r = gw.get(path, &[("x-token", &key)]);
            assert_eq!(r.status, 200, "v{v} {path}: {}", r.text());
            r.json()
        };
        answers.push((
            get("/v1/polygon/checkpoints/7"),
            get("/v1/polygon/spans/3"),
            get("/v1/polygon/validators/current"),
        ));
        let r = gw.get("/v1/polygon/checkpoints/8", &[("x-token", &key)]);
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (404, Some("not_found")),
            "v{v}"
        );
    }
    assert_eq!(answers[0], answers[1], "v1 and v2 normalise alike");
    let (checkpoint, span, set) = &answers[0];
    assert_eq!(
        *checkpoint,
        json!({"id": 7, "proposer": "0x00000000000000000000000000000000000000a1", "start_block": 100,
               "end_block": 355, "root_hash": "0xdead", "bor_chain_id": "137", "timestamp": 1700000000})
    );
    assert_eq!(
        (span["id"].as_i64(), span["end_block"].as_i64()),
        (Some(3), Some(6655))
    );
    assert_eq!(span["validators"].as_array().unwrap().len(), 2);
    assert_eq!(span["selected_producers"][0]["voting_power"], 100);
    assert_eq!(set["total_voting_power"], 150);
    assert_eq!(
        set["validators"][1],
        json!({"id": 2, "signer": "0x00000000000000000000000000000000000000b2", "voting_power": 50,
               "proposer_priority": -5, "start_epoch": 0, "end_epoch": 0, "jailed": false})
    );
    assert_eq!(set["proposer"]["id"], 1);
}

#[test]
fn bad_ids_never_reach_a_node_and_a_failing_host_is_passed_over() {
    let hits = Arc::new(AtomicUsize::new(0));
    let broken = Fixture::start(|req| match req.path.as_str() {
        "/status" => FixtureResponse::json(json!(
            {"result": {"sync_info": {"latest_block_height": "100", "catching_up": false}}}
        )),
        _ => FixtureResponse::status(500, "boom"),
    });
    let good = heimdall(2, hits.clone());
    let gw = gateway(&[&broken, &good]);
    let key = gw.key("basic", &[]);
    let before = hits.load(Ordering::SeqCst);
    for id in ["0", "-1", "x", "1.5", "99999999999999999999", "7x"] {
        let r = gw.get(
            &format!("/v1/polygon/checkpoints/{id}"),
            &[("x-token", &key)],
        );
        assert_eq!(r.status, 400, "{id}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_params");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        before,
        "no node heard of a bad id"
    );
    // Whichever host comes first, the answer comes from the good one.
    for _ in 0..4 {
        let r = gw.get("/v1/polygon/spans/3", &[("x-token", &key)]);
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let free = gw.key("free", &[]);
    assert_eq!(
        gw.get("/v1/polygon/validators/current", &[("x-token", &free)])
            .status,
        403
    );
}

/// A heimdall as it really runs: the Cosmos LCD, Tendermint RPC and Prometheus each on
/// a port of its own. Each request lands on the service that serves it, the health
/// check reads Tendermint's `/status` from the RPC port, and the product queries read
/// the LCD.
#[test]
fn the_consensus_proxy_sends_each_request_to_its_service() {
    let seen = |tag: &'static str, log: Arc<std::sync::Mutex<Vec<String>>>| {
        Fixture::start(move |req| {
            log.lock()
                .unwrap()
                .push(format!("{tag} {} {}", req.method, req.path));
            match (tag, req.path.as_str()) {
                ("rpc", "/status") => FixtureResponse::json(json!(
                    {"result": {"sync_info": {"latest_block_height": "100", "catching_up": false}}}
                )),
                ("rpc", _) => FixtureResponse::json(
                    json!({"jsonrpc": "2.0", "id": 1, "result": {"served_by": "rpc"}}),
                ),
                ("metrics", _) => FixtureResponse {
                    content_type: "text/plain; version=0.0.4",
                    ..FixtureResponse::status(
                        200,
                        "# TYPE cometbft_consensus_height gauge\ncometbft_consensus_height 100\n",
                    )
                },
                ("lcd", "/checkpoints/7") => FixtureResponse::json(json!({"checkpoint": {
                    "id": "7", "proposer": "0x00000000000000000000000000000000000000a1", "start_block": "100",
                    "end_block": "355", "root_hash": "3q0=", "bor_chain_id": "137", "timestamp": "1700000000"}})),
                _ => FixtureResponse::json(json!({"served_by": "lcd"})),
            }
        })
    };
    let log = Arc::new(std::sync::Mutex::new(Vec::new()));
    // `metrics_url` is the scrape URL, path included.
    let (lcd, rpc, metrics) = (
        seen("lcd", log.clone()),
        seen("rpc", log.clone()),
        seen("metrics", log.clone()),
    );
    let scrape_url = format!("{}/prometheus/metrics", metrics.url());
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-0, url: \"{}\", rpc_url: \"{}\", metrics_url: \"{scrape_url}\", family: heimdall}}\n",
            lcd.url(),
            rpc.url(),
        ),
        extra_yaml: UNLIMITED.into(),
        tls: true,
        ..Default::default()
    });
    let key = gw.key("pro", &[]);
    let h = [
        ("x-token", key.as_str()),
        ("Content-Type", "application/json"),
    ];
    let r = gw.get("/v1/polygon/heimdall/status", &h);
    assert_eq!(
        (
            r.status,
            r.json()["result"]["sync_info"]["latest_block_height"].as_str()
        ),
        (200, Some("100")),
        "{}",
        r.text()
    );
    let r = gw.get("/v1/polygon/heimdall/block?height=5", &h);
    assert_eq!(r.json()["result"]["served_by"], "rpc");
    let r = gw.get(
        "/v1/polygon/heimdall/cosmos/base/tendermint/v1beta1/blocks/latest",
        &h,
    );
    assert_eq!(r.json()["served_by"], "lcd");
    let r = gw.get("/v1/polygon/heimdall/metrics", &h);
    assert!(
        r.text().contains("cometbft_consensus_height 100"),
        "{}",
        r.text()
    );
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"status","params":[]}"#;
    let r = request(gw.port, "POST", "/v1/polygon/heimdall/", &h, body).unwrap();
    assert_eq!(r.json()["result"]["served_by"], "rpc", "{}", r.text());
    let r = gw.get("/v1/polygon/checkpoints/7", &h);
    assert_eq!(
        (r.status, r.json()["id"].as_i64()),
        (200, Some(7)),
        "{}",
        r.text()
    );
    // The same over TLS and HTTP/2, where Pingora's proxy phases carry the request.
    let curl = |path: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "--http2", "-H", &format!("x-token: {key}")])
            .arg(format!("https://127.0.0.1:{}{path}", gw.tls_port.unwrap()))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(curl("/v1/polygon/heimdall/net_info").contains(r#""served_by":"rpc""#));
    assert!(curl("/v1/polygon/heimdall/metrics").contains("cometbft_consensus_height 100"));
    assert!(curl("/v1/polygon/heimdall/clerk/event-record/1").contains(r#""served_by":"lcd""#));
    let log = log.lock().unwrap();
    for expected in [
        "rpc GET /net_info",
        "lcd GET /clerk/event-record/1",
        "rpc GET /status",
        "rpc GET /block?height=5",
        "lcd GET /cosmos/base/tendermint/v1beta1/blocks/latest",
        "metrics GET /prometheus/metrics",
        "rpc POST /",
        "lcd GET /checkpoints/7",
    ] {
        assert!(
            log.iter().any(|l| l == expected),
            "{expected} not in {log:?}"
        );
    }
    assert!(
        !log.iter().any(|l| l.starts_with("lcd GET /status")),
        "health reads the RPC port: {log:?}"
    );
}
