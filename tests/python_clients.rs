//! Real client libraries against the real binary: the console sign-in flows driven by
//! Python (aiosmtpd as the SMTP server, eth-account and PyNaCl as wallets).

use common::*;

#[test]
fn console_sign_in_with_smtp_and_wallets() {
    let smtp_port = free_port();
    let gw = Gateway::start(GatewayOpts {
        console_yaml: format!(
            "  challenge_ttl_secs: 2\n  email:\n    smtp: {{host: 127.0.0.1, port: {smtp_port}, security: none}}\n"
        ),
        ..Default::default()
    });
    let out = std::process::Command::new(python())
        .arg(root().join("tests/py/console_flows.py"))
        .arg(format!("http://127.0.0.1:{}", gw.port))
        .arg(smtp_port.to_string())
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "console flows failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all console flows passed"), "{stdout}");
}

#[test]
fn web3_py_over_two_anvil_nodes_one_lagging_one_killed() {
    let lead = Anvil::start(1, &[]);
    let lagging = Anvil::start(1, &[]);
    lead.mine(20);
    let gw = Gateway::start(GatewayOpts {
        // max_lag is large so the lagging node stays "available": only the per-call
        // need (the pool head) keeps it away from `latest`.
        pools: format!(
            "  eth_el:\n    max_lag: 1000\n    hosts:\n      - {{id: el-lead, url: \"{}\", family: el-anvil}}\n      - {{id: el-lag, url: \"{}\", family: el-anvil}}\n",
            lead.url(),
            lagging.url()
        ),
        extra_yaml: format!("health:\n  interval_ms: 300\n  timeout_ms: 500\nrpc:\n  write_policy: broadcast\n{UNLIMITED}"),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let url = format!("http://127.0.0.1:{}/rpc/eth", gw.port);
    let run = |args: &[&str]| {
        std::process::Command::new(python())
            .arg(root().join("tests/py/web3_rpc.py"))
            .arg(&url)
            .arg(&key)
            .args(args)
            .output()
            .expect("python")
    };
    let out = run(&["checks"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("web3 checks passed"));

    // Steady reads while the lagging node is killed: no client error.
    let load = std::process::Command::new(python())
        .arg(root().join("tests/py/web3_rpc.py"))
        .arg(&url)
        .arg(&key)
        .args(["load", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    drop(lagging);
    let out = load.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("{stdout}{}", String::from_utf8_lossy(&out.stderr)));
    eprintln!("web3 load while a node died: {v}");
    assert_eq!(v["errors"], 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(v["ok"].as_u64().unwrap() > 20);
}

/// web3.py's send-and-wait sees a transaction mined although every node dropped it:
/// the edge's follower finds no node holding it and sends it again.
#[test]
fn web3_py_send_and_wait_lands_a_transaction_every_node_lost() {
    let nodes = [
        Anvil::start(1, &["--no-mining"]),
        Anvil::start(1, &["--no-mining"]),
    ];
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n      - {{id: el-2, url: \"{}\", family: el-anvil}}\n",
            nodes[0].url(),
            nodes[1].url()
        ),
        extra_yaml: format!(
            "rpc:\n  write_policy: broadcast\n{UNLIMITED}tx_tracking:\n  follow_interval_ms: 200\n  resend_after_secs: 1\n"
        ),
        ..Default::default()
    });
    let key = gw.key("basic", &["rpc:read", "rpc:write"]);
    let out = std::process::Command::new(python())
        .arg(root().join("tests/py/send_and_wait.py"))
        .arg(format!("http://127.0.0.1:{}/rpc/eth", gw.port))
        .arg(&key)
        .arg(nodes[0].url())
        .arg(nodes[1].url())
        .output()
        .expect("python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let landed: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    let hash = landed["tx_hash"].as_str().unwrap();
    let followed = gw
        .get(&format!("/v1/eth/tx/{hash}"), &[("x-token", &key)])
        .json();
    assert!(followed["resends"].as_i64() >= Some(1), "{followed}");
    assert!(
        matches!(followed["status"].as_str(), Some("pending" | "included")),
        "{followed}"
    );
}

#[test]
fn web3_py_websocket_subscription_through_the_edge() {
    let node = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [ws]}}\n",
            node.url()
        ),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let mut child = std::process::Command::new(python())
        .arg(root().join("tests/py/ws_subscribe.py"))
        .arg(format!("ws://127.0.0.1:{}/rpc/eth", gw.port))
        .arg(&key)
        .arg("3")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the subscription, then make three new heads.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    use std::io::BufRead;
    stdout.read_line(&mut line).unwrap();
    if line.trim() != "subscribed" {
        let _ = child.wait();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        panic!("no subscription: {line}{err}");
    }
    for _ in 0..3 {
        node.mine(1);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{rest}{err}");
    let heads: Vec<u64> = rest.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(heads, vec![2, 3, 4], "{rest}");
}

/// `tests/py/web3_features.py` in one mode; its JSON line of measures.
fn web3_features(args: &[&str]) -> String {
    let out = std::process::Command::new(python())
        .arg(root().join("tests/py/web3_features.py"))
        .args(args)
        .output()
        .expect("python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("checks passed"),
        "web3_features {}:\n{stdout}{}",
        args[0],
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("web3 {}: {}", args[0], stdout.lines().next().unwrap_or(""));
    stdout
}

/// Issue 21 with web3.py: a reorg made with `anvil_reorg` never lets a cached answer
/// from the orphaned branch be served once the edge has seen it; finalized data is
/// served from the cache after its node dies; usage counts match the calls made.
#[test]
fn web3_py_cache_across_a_reorg_and_a_dead_node_and_usage_matching_the_calls() {
    let node = Anvil::start(1, &[]);
    node.mine(99);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            node.url()
        ),
        extra_yaml: format!(
            "rpc:\n  cache: {{track_interval_ms: 100, head_ttl_ms: 5000}}\nusage:\n  flush_interval_ms: 200\n{UNLIMITED}"
        ),
        ..Default::default()
    });
    let url = format!("http://127.0.0.1:{}/rpc/eth", gw.port);
    let (key, key_id) = gw.key_and_id("business");
    web3_features(&[
        "usage",
        &url,
        &key,
        &key_id,
        &format!("http://127.0.0.1:{}/v1/admin/usage", gw.port),
        "test-admin-token",
    ]);
    web3_features(&[
        "cache",
        &url,
        &key,
        &node.url(),
        &node.proc.pid().to_string(),
        &format!("http://127.0.0.1:{}/metrics", gw.metrics_port),
    ]);
}

/// Issue 21 with web3.py: with one of two nodes frozen (SIGSTOP), reads return from the
/// other, hedged past the frozen one: no error and no answer near the 10 s budget.
#[test]
fn web3_py_hedged_reads_return_from_the_fast_node() {
    let fast = Anvil::start(1, &[]);
    let slow = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-a, url: \"{}\", family: el-anvil}}\n      - {{id: el-b, url: \"{}\", family: el-anvil}}\n",
            slow.url(),
            fast.url()
        ),
        extra_yaml: format!("health:\n  interval_ms: 300\n  timeout_ms: 500\n{UNLIMITED}"),
        ..Default::default()
    });
    let key = gw.key("business", &[]);
    let url = format!("http://127.0.0.1:{}/rpc/eth", gw.port);
    let out = web3_features(&["hedge", &url, &key, &slow.proc.pid().to_string(), "5"]);
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(v["errors"], 0);
    assert!(v["reads"].as_u64().unwrap() > 50, "{v}");
}
