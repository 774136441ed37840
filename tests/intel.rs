//! Ethereum intel against beacon fixtures that answer as the standard beacon API does:
//! a validator's state mapped to SPEC's fields; a malformed index or an unknown
//! validator is 404 `invalid_params` (a malformed one never reaches a node); a failing
//! host is passed over; the tier is business.

use common::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const FAR_FUTURE: &str = "18446744073709551615";

/// A beacon node with validators 0 (active, exiting at epoch 900) and 1 (queued); with
/// `broken`, every validator read is a 500.
fn beacon(broken: bool, reads: Arc<AtomicUsize>) -> Fixture {
    Fixture::start(move |req| {
        let path = req.path.split('?').next().unwrap_or("");
        if path == "/eth/v1/node/syncing" {
            return FixtureResponse::json(
                json!({"data": {"head_slot": "100", "sync_distance": "0",
                "is_syncing": false, "is_optimistic": false, "el_offline": false}}),
            );
        }
        let Some(index) = path.strip_prefix("/eth/v1/beacon/states/head/validators/") else {
            return FixtureResponse::status(404, r#"{"code":404,"message":"not found"}"#);
        };
        reads.fetch_add(1, Ordering::SeqCst);
        if broken {
            return FixtureResponse::status(500, r#"{"code":500,"message":"internal error"}"#);
        }
        let (status, balance, activation, exit) = match index {
            "0" => ("active_exiting", "32001234567", "0", "900"),
            "1" => ("pending_queued", "32000000000", FAR_FUTURE, FAR_FUTURE),
            _ => {
                return FixtureResponse::status(
                    404,
                    r#"{"code":404,"message":"Validator not found"}"#,
                )
            }
        };
        FixtureResponse::json(
            json!({"execution_optimistic": false, "finalized": false, "data": {
            "index": index, "balance": balance, "status": status,
            "validator": {"pubkey": format!("0x{}", "b0".repeat(48)),
                "withdrawal_credentials": format!("0x01{}", "00".repeat(31)),
                "effective_balance": "32000000000", "slashed": false,
                "activation_eligibility_epoch": "0", "activation_epoch": activation,
                "exit_epoch": exit, "withdrawable_epoch": FAR_FUTURE}}}),
        )
    })
}

#[test]
fn validator_intel_maps_the_beacon_api_and_refuses_bad_indexes_first() {
    let (broken_reads, good_reads) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (broken, good) = (
        beacon(true, broken_reads.clone()),
        beacon(false, good_reads.clone()),
    );
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_cl:\n    hosts:\n      - {{id: cl-a-broken, url: \"{}\", family: cl-teku}}\n      - {{id: cl-b, url: \"{}\", family: cl-lighthouse}}\n",
            broken.url(),
            good.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let (pro, business) = (gw.key("pro", &[]), gw.key("business", &[]));
    let get = |key: &str, index: &str| {
        gw.get(
            &format!("/v1/eth/intel/validator/{index}"),
            &[("x-token", key)],
        )
    };

    // Whichever host is asked first, the answer comes from the good one.
    for _ in 0..2 {
        let r = get(&business, "0");
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(
            r.json(),
            json!({"validator_index": 0, "pubkey": format!("0x{}", "b0".repeat(48)),
                   "balance_gwei": 32001234567u64, "effective_balance_gwei": 32000000000u64,
                   "status": "active_exiting", "activation_epoch": 0, "exit_epoch": 900})
        );
    }
    let r = get(&business, "1");
    let v: Value = r.json();
    assert_eq!(
        (v["status"].as_str(), v["activation_epoch"].as_i64()),
        (Some("pending_queued"), Some(-1))
    );
    assert!(v["exit_epoch"].is_null());

    // Unknown: the node's 404 is the answer's.
    let r = get(&business, "5");
    assert_eq!(
        (r.status, r.json()["error"].as_str()),
        (404, Some("invalid_params")),
        "{}",
        r.text()
    );

    // Malformed: 404 before any node.
    let reads = good_reads.load(Ordering::SeqCst) + broken_reads.load(Ordering::SeqCst);
    for bad in ["-1", "0x1", "abc", "9223372036854775808", "1.5"] {
        let r = get(&business, bad);
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (404, Some("invalid_params")),
            "{bad}"
        );
    }
    assert_eq!(
        good_reads.load(Ordering::SeqCst) + broken_reads.load(Ordering::SeqCst),
        reads
    );

    // Business and above.
    let r = get(&pro, "0");
    assert_eq!(
        (r.status, r.json()["required_tier"].as_str()),
        (403, Some("business"))
    );
}

/// The capacity series: what the edge sent the consensus hosts, sampled every second in
/// the background and stored; read per minute, all hosts or one client's; bad ranges and
/// clients refused.
#[test]
fn the_capacity_series_counts_what_the_hosts_served() {
    let reads = Arc::new(AtomicUsize::new(0));
    let (teku, lighthouse) = (beacon(false, reads.clone()), beacon(false, reads.clone()));
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_cl:\n    hosts:\n      - {{id: cl-teku-1, url: \"{}\", family: cl-teku}}\n      - {{id: cl-lighthouse-1, url: \"{}\", family: cl-lighthouse}}\n",
            teku.url(),
            lighthouse.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let (pro, business) = (gw.key("pro", &[]), gw.key("business", &[]));
    for _ in 0..40 {
        let r = gw.get("/v1/eth/intel/validator/0", &[("x-token", &business)]);
        assert_eq!(r.status, 200);
    }
    let series = |query: &str| {
        gw.get(
            &format!("/v1/eth/intel/validator/series{query}"),
            &[("x-token", &business)],
        )
    };
    let total = |v: &Value, field: &str| {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[field].as_u64().unwrap())
            .sum::<u64>()
    };
    // Flushed within a few seconds.
    let mut all = Value::Null;
    for _ in 0..40 {
        all = series("").json();
        if total(&all, "requests") >= 40 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert_eq!(total(&all, "requests"), 40, "{all}");
    assert_eq!(all["measure"], "cl_rps_ceiling");
    assert_eq!(all["step_secs"], 60);
    let peak = all["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rps_ceiling"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!((1..=40).contains(&peak), "{all}");
    assert_eq!(all["points"][0]["hosts"], 2);
    let teku_only = series("?client=cl-teku").json();
    assert_eq!(teku_only["points"][0]["hosts"], 1, "{teku_only}");
    assert_eq!(teku_only["client"], "cl-teku");
    assert!(total(&teku_only, "requests") < 40);
    // A range in the past holds nothing; an empty range is empty; a range longer than a
    // day is cut to the day before `to`, and the answer says so; bad input is refused.
    assert_eq!(series("?from=0&to=3600").json()["points"], json!([]));
    let empty = series("?from=100&to=100");
    assert_eq!((empty.status, &empty.json()["points"]), (200, &json!([])));
    let cut = series("?from=0&to=90000").json();
    assert_eq!(
        (&cut["from"], &cut["to"]),
        (&json!(90_000 - 86_400), &json!(90_000)),
        "{cut}"
    );
    for bad in ["?client=el-geth", "?client=prysm", "?from=-5", "?to=abc"] {
        let r = series(bad);
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("invalid_params")),
            "{bad}"
        );
    }
    let r = gw.get("/v1/eth/intel/validator/series", &[("x-token", &pro)]);
    assert_eq!(r.status, 403);
}

/// An execution node answering `admin_nodeInfo` and `admin_peers` as geth does
/// (`peers`: (node id, client, inbound, rtt)); counts `admin_peers` calls.
fn geth(
    id: &'static str,
    peers: Vec<(&'static str, &'static str, bool, Option<f64>)>,
    calls: Arc<AtomicUsize>,
) -> Fixture {
    Fixture::start(move |req| {
        let v: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let answer = |call: &Value| {
            let result = match call["method"].as_str() {
                Some("eth_blockNumber") => json!("0x10"),
                Some("eth_syncing") => json!(false),
                Some("admin_nodeInfo") => json!({"id": id, "name": format!("Geth/{}", &id[..4]),
                    "enode": format!("enode://{id}@127.0.0.1:30303"), "ip": "127.0.0.1"}),
                Some("admin_peers") => {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Value::Array(peers.iter().map(|(pid, client, inbound, rtt)| {
                        let mut network = json!({"inbound": inbound, "trusted": false, "static": false,
                            "localAddress": "127.0.0.1:30303", "remoteAddress": "127.0.0.1:40000"});
                        if let Some(r) = rtt {
                            network["rtt"] = json!(r);
                        }
                        json!({"id": pid, "name": client, "enode": format!("enode://{pid}@127.0.0.1:30303"),
                               "caps": ["eth/68"], "network": network, "protocols": {"eth": {"version": 68}}})
                    }).collect())
                }
                _ => Value::Null,
            };
            json!({"jsonrpc": "2.0", "id": call["id"], "result": result})
        };
        match &v {
            Value::Array(calls) => {
                FixtureResponse::json(Value::Array(calls.iter().map(answer).collect()))
            }
            call => FixtureResponse::json(answer(call)),
        }
    })
}

#[test]
fn the_peer_graph_walks_out_through_the_fleet() {
    const A: &str = "aaaa000000000000000000000000000000000000000000000000000000000000";
    const B: &str = "bbbb000000000000000000000000000000000000000000000000000000000000";
    const X: &str = "cccc000000000000000000000000000000000000000000000000000000000000";
    const Y: &str = "dddd000000000000000000000000000000000000000000000000000000000000";
    let calls = Arc::new(AtomicUsize::new(0));
    let a = geth(
        A,
        vec![
            (B, "Geth/bbbb", false, None),
            (X, "Erigon/v2.60", true, None),
        ],
        calls.clone(),
    );
    let b = geth(
        B,
        vec![
            (A, "Geth/aaaa", true, None),
            (Y, "reth/v1.1", false, Some(7.5)),
        ],
        calls.clone(),
    );
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-a, url: \"{}\", family: el-geth, capabilities: [admin]}}\n      - {{id: el-b, url: \"{}\", family: el-geth, role: fallback, capabilities: [admin]}}\n",
            a.url(),
            b.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let (business, enterprise) = (gw.key("business", &[]), gw.key("enterprise", &[]));
    let get = |path: &str| gw.get(path, &[("x-token", &enterprise)]);
    let edges = |v: &Value| -> Vec<(String, String, String)> {
        v["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["from_host"].as_str().unwrap().into(),
                    e["to_host"].as_str().unwrap().into(),
                    e["direction"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    // Depth 1: the primary's own peers; the fallback is named by its id.
    let d1 = get("/v1/eth/intel/peer-graph").json();
    assert_eq!(
        edges(&d1),
        vec![
            ("el-a".into(), X.into(), "inbound".into()),
            ("el-a".into(), "el-b".into(), "outbound".into())
        ],
        "{d1}"
    );
    assert!(d1["observed_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(d1["edges"][0]["client"], "Erigon/v2.60");
    // Depth 2 reaches the fallback's peers; its report of the same connection is one edge.
    let d2 = get("/v1/eth/intel/peer-graph?depth=2").json();
    assert_eq!(edges(&d2).len(), 3, "{d2}");
    let to_y = d2["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["to_host"] == Y)
        .unwrap()
        .clone();
    assert_eq!(
        (to_y["from_host"].as_str(), to_y["latency_ms"].as_f64()),
        (Some("el-b"), Some(7.5))
    );
    assert_eq!(
        edges(&get("/v1/eth/intel/peer-graph?depth=3").json()).len(),
        3
    );
    // A snapshot is answered again without asking the nodes.
    let before = calls.load(Ordering::SeqCst);
    assert_eq!(
        get("/v1/eth/intel/peer-graph?depth=2").json()["observed_at"],
        d2["observed_at"]
    );
    assert_eq!(calls.load(Ordering::SeqCst), before);
    // One host's neighbours.
    let h = get("/v1/eth/intel/peer-graph/host/el-b").json();
    assert_eq!(h["enode"], format!("enode://{B}@127.0.0.1:30303"));
    assert_eq!(h["peers"].as_array().unwrap().len(), 2, "{h}");
    assert_eq!(h["peers"][0]["direction"], "inbound");
    assert_eq!(get("/v1/eth/intel/peer-graph/host/el-nope").status, 404);
    for bad in ["0", "4", "x", "1.5"] {
        let r = get(&format!("/v1/eth/intel/peer-graph?depth={bad}"));
        assert_eq!(
            (r.status, r.json()["error"].as_str()),
            (400, Some("invalid_params")),
            "{bad}"
        );
    }
    let r = gw.get("/v1/eth/intel/peer-graph", &[("x-token", &business)]);
    assert_eq!(
        (r.status, r.json()["required_tier"].as_str()),
        (403, Some("enterprise"))
    );
}
