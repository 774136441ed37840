//! Heimdall queries (checkpoint, span, current validators) through the heimdall stand-ins
//! (`tests/standins/heimdall.py`, held to heimdall v1's and heimdall-v2's own specs by
//! `tests/standins.rs`): one chain read through either generation's REST server becomes
//! the same product resource; bad ids never reach a node; unknown ids are 404 in both
//! generations' ways of saying so; a failing host is passed over.

use common::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// A gateway whose heimdall pool has one host per (LCD, RPC) pair, in order.
fn gateway(hosts: &[(String, String)]) -> Gateway {
    let list: String = hosts
        .iter()
        .enumerate()
        .map(|(i, (lcd, rpc))| {
            format!(
                "      - {{id: hd-{i}, url: \"{lcd}\", rpc_url: \"{rpc}\", family: heimdall}}\n"
            )
        })
        .collect();
    Gateway::start(GatewayOpts {
        pools: format!("  polygon_heimdall:\n    hosts:\n{list}"),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    })
}

/// One heimdall's LCD and RPC, as the gateway's host list takes them.
fn lcd_and_rpc(hd: &Standin, lcd: &str) -> (String, String) {
    (hd.url_of(lcd), hd.url_of("heimdall-rpc"))
}

#[test]
fn both_heimdall_generations_give_the_same_resources() {
    let hd = Standin::start_all(&["heimdall-lcd", "heimdall-v1-lcd", "heimdall-rpc"], &[]);
    let v2 = gateway(&[lcd_and_rpc(&hd, "heimdall-lcd")]);
    let v1 = gateway(&[lcd_and_rpc(&hd, "heimdall-v1-lcd")]);
    let read = |gw: &Gateway, tag: &str| {
        let key = gw.key("basic", &[]);
        let get = |path: &str| {
            let r = gw.get(path, &[("x-token", &key)]);
            assert_eq!(r.status, 200, "{tag} {path}: {}", r.text());
            r.json()
        };
        let missing = |path: &str| {
            let r = gw.get(path, &[("x-token", &key)]);
            assert_eq!(
                (r.status, r.json()["error"].as_str()),
                (404, Some("not_found")),
                "{tag} {path}: {}",
                r.text()
            );
        };
        // v1 says "no such checkpoint" with a 400 and "no such span" with a 500.
        missing("/v1/polygon/checkpoints/99999");
        missing("/v1/polygon/spans/99999");
        (
            get("/v1/polygon/checkpoints/1"),
            get("/v1/polygon/spans/1"),
            get("/v1/polygon/validators/current"),
        )
    };
    // The chain's proposer moves with each checkpoint (every 10 s): read both
    // generations again if one moved between the two reads.
    let mut answers = (read(&v2, "v2"), read(&v1, "v1"));
    for _ in 0..2 {
        if answers.0 == answers.1 {
            break;
        }
        answers = (read(&v2, "v2"), read(&v1, "v1"));
    }
    assert_eq!(answers.0, answers.1, "v1 and v2 normalise alike");
    let (checkpoint, span, set) = &answers.0;
    let root = format!("0x{}", hex::encode(Sha256::digest(b"checkpoint 1")));
    assert_eq!(
        (
            &checkpoint["id"],
            &checkpoint["start_block"],
            &checkpoint["end_block"],
            &checkpoint["root_hash"],
            &checkpoint["bor_chain_id"]
        ),
        (
            &json!(1),
            &json!(0),
            &json!(255),
            &json!(root),
            &json!("137")
        )
    );
    assert_eq!(
        (&span["id"], &span["start_block"], &span["end_block"]),
        (&json!(1), &json!(256), &json!(6655))
    );
    assert_eq!(span["validators"].as_array().unwrap().len(), 5);
    assert_eq!(span["selected_producers"].as_array().unwrap().len(), 1);
    let vals = set["validators"].as_array().unwrap();
    let ids: Vec<&Value> = vals.iter().map(|v| &v["id"]).collect();
    assert_eq!(
        ids,
        [1, 2, 3, 4, 5].map(|i| json!(i)).iter().collect::<Vec<_>>()
    );
    assert_eq!(set["total_voting_power"], 150_000, "10,000 × (1 + … + 5)");
    assert!(vals.iter().all(|v| {
        let s = v["signer"].as_str().unwrap();
        s.len() == 42 && s == s.to_ascii_lowercase() && v["jailed"] == false
    }));
    assert!(set["proposer"]["id"].is_i64());
}

#[test]
fn bad_ids_never_reach_a_node_and_a_failing_host_is_passed_over() {
    let good = Standin::start_all(&["heimdall-lcd", "heimdall-rpc"], &[]);
    // Healthy by its RPC's /status, but every LCD answer a 500.
    let broken = Standin::start_all(&["heimdall-lcd", "heimdall-rpc"], &[]);
    broken.set_mode(Some(500), std::time::Duration::ZERO);
    let gw = gateway(&[
        lcd_and_rpc(&broken, "heimdall-lcd"),
        lcd_and_rpc(&good, "heimdall-lcd"),
    ]);
    let key = gw.key("basic", &[]);
    let before = good.hits() + broken.hits();
    for id in ["0", "-1", "x", "1.5", "99999999999999999999", "7x"] {
        let r = gw.get(
            &format!("/v1/polygon/checkpoints/{id}"),
            &[("x-token", &key)],
        );
        assert_eq!(r.status, 400, "{id}: {}", r.text());
        assert_eq!(r.json()["error"], "invalid_params");
    }
    assert_eq!(
        good.hits() + broken.hits(),
        before,
        "no node heard of a bad id"
    );
    // Whichever host comes first, the answer comes from the good one.
    for _ in 0..4 {
        let r = gw.get("/v1/polygon/spans/1", &[("x-token", &key)]);
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
