//! The beacon light client as the root of proven answers (issue 66): the beacon
//! stand-in serves light-client data over a real anvil chain (checked first by Lodestar's
//! light client); the edge bootstraps from its checkpoint and anchors reads on what the
//! sync committee signed, not on what the execution hosts agree on.

use common::evm::*;

use common::*;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A gateway over `hosts` whose proven reads are anchored by a light client following
/// `beacon` (or, without one, by a majority of the three hosts).
fn gateway(hosts: &[String], beacon: &Standin, light: bool) -> Gateway {
    gateway_aged(hosts, beacon, light.then_some(600))
}

/// The same, the light client's head used for `max_age` slots (`None`: no light client).
fn gateway_aged(hosts: &[String], beacon: &Standin, max_age: Option<u64>) -> Gateway {
    let mut pools = "  eth_el:\n    hosts:\n".to_string();
    for (i, url) in hosts.iter().enumerate() {
        pools.push_str(&format!(
            "      - {{id: el-{i}, url: \"{url}\", family: el-anvil}}\n"
        ));
    }
    pools.push_str(&format!(
        "  eth_cl:\n    hosts:\n      - {{id: cl-1, url: \"{}\", family: cl-lighthouse}}\n",
        beacon.url()
    ));
    let root = if let Some(max_age) = max_age {
        let light_client = beacon.light_client_yaml_aged("eth_el", "eth_cl", max_age);
        format!("{{ask: 3, light_client: {light_client}}}")
    } else {
        "{ask: 3}".to_string()
    };
    Gateway::start(GatewayOpts {
        pools,
        extra_yaml: format!(
            "rpc:\n  cache: {{enabled: false}}\n  verify: {{mode: enforce, root: {root}}}\n{UNLIMITED}"
        ),
        ..Default::default()
    })
}

/// `eth_getBalance(DEV, at)`: (status, result or error message, anchor header).
fn balance(gw: &Gateway, key: &str, at: Value) -> (u16, String, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [DEV, at]});
    let r = rpc(gw.port, "/rpc/eth", Some(key), &body);
    let got = r.json();
    let said = match got.get("result") {
        Some(v) => v.as_str().unwrap_or_default().to_string(),
        None => got["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    };
    let anchor = r.header("x-chainedge-anchor").unwrap_or("").to_string();
    (r.status, said, anchor)
}

/// The block number an anchor header names.
fn anchored_number(anchor: &str) -> u64 {
    let hex = anchor
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("block=0x");
    u64::from_str_radix(hex, 16).unwrap()
}

/// Waits until a `latest` read is anchored by the light client at a block past the
/// fifth (the checkpoint's is the first it has); its anchor header.
fn synced(gw: &Gateway, key: &str) -> String {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, _, anchor) = balance(gw, key, json!("latest"));
        if anchor.ends_with("by=light-client") && anchored_number(&anchor) > 5 {
            return anchor;
        }
        assert!(
            Instant::now() < until,
            "never anchored by the light client: {anchor:?}\n{}",
            gw.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn lodestar_accepts_the_stand_ins_chain_and_the_edge_roots_reads_on_it() {
    let node = Arc::new(Anvil::start(1, &["--block-time", "1"]));
    let beacon = Standin::beacon_over(&node.url());
    beacon.light_client_checkpoint();
    std::thread::sleep(Duration::from_secs(3));
    // An independent light client first: Lodestar takes the stand-in's bootstrap and
    // updates, and its signed head is a block of the anvil chain.
    let out = Command::new("node")
        .arg(root().join("tests/js/lodestar_light_client.mjs"))
        .arg(beacon.url())
        .current_dir(root())
        .output()
        .expect("node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lodestar: Value = serde_json::from_slice(&out.stdout).unwrap();
    let number = lodestar["optimistic_block_number"].as_u64().unwrap();
    let block = node.call(
        "eth_getBlockByNumber",
        json!([format!("0x{number:x}"), false]),
    );
    assert_eq!(
        lodestar["optimistic_block_hash"], block["hash"],
        "{lodestar}"
    );

    // Honest hosts: reads proven at the block the sync committee signed.
    let fronts: Vec<Fixture> = (0..3)
        .map(|_| liar(node.clone(), Arc::new(Mutex::new(|_, _, _, _| {}))))
        .collect();
    let hosts: Vec<String> = fronts.iter().map(Fixture::url).collect();
    let gw = gateway(&hosts, &beacon, true);
    let key = gw.key("scale", &[]);
    let anchor = synced(&gw, &key);
    let at = anchored_number(&anchor);
    let truth = node.call("eth_getBalance", json!([DEV, format!("0x{at:x}")]));
    let (status, said, _) = balance(&gw, &key, json!(format!("0x{at:x}")));
    assert_eq!(
        (status, said.as_str()),
        (200, truth.as_str().unwrap()),
        "{anchor}"
    );
    // A block below the signed head is trusted through its parent hashes.
    let (status, said, below) = balance(&gw, &key, json!(format!("0x{:x}", at - 3)));
    assert_eq!(status, 200, "{said}");
    assert!(
        below.starts_with(&format!("block=0x{:x};", at - 3)) && below.ends_with("by=light-client"),
        "{below}"
    );

    // Every execution host on another chain (a fork that agrees with itself): by a
    // majority of them it would be served; with the light client, never.
    let fork = Arc::new(Anvil::start(1, &["--block-time", "1"]));
    fork.call("anvil_setBalance", json!([DEV, "0x1"]));
    std::thread::sleep(Duration::from_secs(2));
    let forks: Vec<Fixture> = (0..3)
        .map(|_| liar(fork.clone(), Arc::new(Mutex::new(|_, _, _, _| {}))))
        .collect();
    let hosts: Vec<String> = forks.iter().map(Fixture::url).collect();
    let by_majority = gateway(&hosts, &beacon, false);
    let majority_key = by_majority.key("scale", &[]);
    let (status, said, anchor) = balance(&by_majority, &majority_key, json!("latest"));
    assert_eq!(
        (status, said.as_str()),
        (200, "0x1"),
        "the fork is served by majority: {anchor}"
    );
    let rooted = gateway(&hosts, &beacon, true);
    let rooted_key = rooted.key("scale", &[]);
    let until = Instant::now() + Duration::from_secs(10);
    while metric_value(
        &rooted,
        "chainedge_light_client_slot{of=\"head\",pool=\"eth_el\"}",
    ) == 0.0
    {
        assert!(Instant::now() < until, "{}", rooted.stderr_tail());
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    for _ in 0..5 {
        let (status, said, anchor) = balance(&rooted, &rooted_key, json!("latest"));
        assert_ne!(said, "0x1", "the fork's balance was served ({anchor})");
        assert_eq!(status, 502, "{said} {anchor}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let below_head = node.block_number().saturating_sub(2);
    let (status, said, _) = balance(&rooted, &rooted_key, json!(format!("0x{below_head:x}")));
    assert_eq!(status, 502, "{said}");
    assert_ne!(said, "0x1");
}

#[test]
fn a_beacon_host_serving_forged_updates_is_not_followed() {
    let node = Arc::new(Anvil::start(1, &["--block-time", "1"]));
    let beacon = Standin::beacon_over(&node.url());
    let gw = gateway(&[node.url()], &beacon, true);
    let key = gw.key("scale", &[]);
    synced(&gw, &key);
    // Each forgery the optimistic update can carry: the head stalls until it ends.
    let forgeries = [
        ("signature", "signature does not verify"),
        ("participants", "fewer than two thirds"),
        ("execution", "execution payload is not its body's"),
    ];
    for (forge, why) in forgeries {
        forge_updates(&beacon, json!(forge));
        // Until one update was refused for its forgery (on a loaded box an update may
        // first be refused as from a slot not yet begun). The follower fetches one
        // update at a time, so from then on no honest one fetched before the switch is
        // still to be applied: the head it holds now is the one to keep.
        let since = Instant::now();
        while !gw.stderr_tail().contains(why) {
            assert!(
                since.elapsed() < Duration::from_secs(15),
                "{forge}: {why}: {}",
                gw.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        let held = anchored_number(&balance(&gw, &key, json!("latest")).2);
        // 3 s of forged updates (ten polls at the gateway's `poll_ms` of 300).
        std::thread::sleep(Duration::from_secs(3));
        let (_, _, anchor) = balance(&gw, &key, json!("latest"));
        assert_eq!(
            anchored_number(&anchor),
            held,
            "{forge}: the head moved on a forged update"
        );
        assert!(node.block_number() >= held + 2, "anvil kept mining");
        forge_updates(&beacon, Value::Null);
        let until = Instant::now() + Duration::from_secs(10);
        while anchored_number(&balance(&gw, &key, json!("latest")).2) <= held {
            assert!(
                Instant::now() < until,
                "{forge}: the head never moved again"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // A finality branch that leads elsewhere (finality updates carry one): refused.
    forge_updates(&beacon, json!("branch"));
    std::thread::sleep(Duration::from_secs(2));
    let log = gw.stderr_tail();
    assert!(log.contains("finality branch does not lead"), "{log}");
}

/// The beacon stand-in serves updates forged as `forge` says from now on (null: honest).
fn forge_updates(beacon: &Standin, forge: Value) {
    let mode = json!({ "forge": forge }).to_string();
    let r = request(
        beacon.port,
        "POST",
        "/standin/light_client",
        &[],
        mode.as_bytes(),
    );
    assert_eq!(r.unwrap().status, 200);
}

/// The hung variant: a beacon node that takes connections and never answers (SIGSTOP)
/// costs reads nothing (the light client follows in the background); its signed head
/// is used until `max_head_age_slots` old, then the majority anchors, saying so, and
/// the light client takes over again once the beacon node answers.
#[test]
fn a_frozen_beacon_node_costs_reads_nothing_and_a_stale_head_gives_way() {
    let node = Arc::new(Anvil::start(1, &["--block-time", "1"]));
    let beacon = Standin::beacon_over(&node.url());
    let gw = gateway_aged(&[node.url()], &beacon, Some(4));
    let key = gw.key("scale", &[]);
    synced(&gw, &key);
    beacon.proc.signal("STOP");
    let mut anchors = Vec::new();
    let until = Instant::now() + Duration::from_secs(9);
    while Instant::now() < until {
        let asked = Instant::now();
        let (status, said, anchor) = balance(&gw, &key, json!("latest"));
        assert_eq!(status, 200, "{said}");
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "a read waited on the frozen beacon node"
        );
        anchors.push(anchor.rsplit("by=").next().unwrap_or_default().to_string());
        std::thread::sleep(Duration::from_millis(250));
    }
    beacon.proc.signal("CONT");
    assert_eq!(
        anchors.first().map(String::as_str),
        Some("light-client"),
        "{anchors:?}"
    );
    assert_eq!(
        anchors.last().map(String::as_str),
        Some("majority-1/1"),
        "{anchors:?}"
    );
    let until = Instant::now() + Duration::from_secs(15);
    while !balance(&gw, &key, json!("latest"))
        .2
        .ends_with("by=light-client")
    {
        assert!(
            Instant::now() < until,
            "the light client never took over again"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
