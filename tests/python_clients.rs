//! Real client libraries against the real binary: the console sign-in flows driven by
//! Python (aiosmtpd as the SMTP server, eth-account and PyNaCl as wallets).

mod common;
use common::*;

fn python() -> std::path::PathBuf {
    let p = root().join(".venv/bin/python");
    assert!(p.exists(), "Python venv missing: run `make setup`");
    p
}

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
