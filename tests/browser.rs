//! The console page in headless Chromium (Playwright), against the real binary.

use common::*;

#[test]
fn console_page_in_chromium() {
    let script = root().join("tests/browser/console.mjs");
    assert!(
        root().join("node_modules/playwright-core").exists()
            && std::path::Path::new("/usr/bin/chromium").exists(),
        "playwright-core or chromium missing: run `make setup`"
    );
    let dir = tempdir("browser");
    let outbox = dir.join("outbox.jsonl");
    // A node for the calls the usage chart then shows (and the firehose's logs pool);
    // usage flushed every 200 ms; webhooks signed and sent to a real HTTPS receiver.
    let node = Fixture::json_rpc();
    localhost_cert(&dir);
    let hooks = Receiver::start(&dir, 200);
    let gw = Gateway::start(GatewayOpts {
        console_yaml: format!("  email:\n    outbox: {}\n", outbox.display()),
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{u}\", family: el-geth}}\n  polygon_bor:\n    hosts:\n      - {{id: bor-1, url: \"{u}\", family: bor}}\n",
            u = node.url()
        ),
        extra_yaml: format!(
            "usage:\n  flush_interval_ms: 200\ntx_tracking:\n  signing_secret: env:HOOK_SECRET\n  webhook: {{allow_private: [\"127.0.0.0/8\"], ca_file: \"{}\"}}\nstreams:\n  firehose:\n    secret: env:FIREHOSE_SECRET\n",
            dir.join("cert.pem").display()
        ),
        env: ["HOOK_SECRET", "FIREHOSE_SECRET"]
            .map(|n| (n.to_string(), format!("{n:0<40}")))
            .to_vec(),
        ..Default::default()
    });
    // Screenshots of each flow, kept after the run (`target/browser-artifacts/`).
    let artifacts = root().join("target/browser-artifacts");
    let _ = std::fs::remove_dir_all(&artifacts);
    std::fs::create_dir_all(&artifacts).expect("artifacts directory");
    let out = std::process::Command::new("node")
        .arg(&script)
        .arg(format!("http://127.0.0.1:{}", gw.port))
        .arg(&outbox)
        .arg(artifacts.join("usage-chart.png"))
        .arg(hooks.url())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all browser checks passed"), "{stdout}");
    // The page's test delivery reached the endpoint, signed with the hook's secret.
    let test = hooks
        .hits()
        .into_iter()
        .find(|h| h.body.contains("\"type\":\"test\""))
        .expect("the test delivery");
    assert!(test
        .header("X-Chainedge-Signature")
        .is_some_and(|s| s.starts_with("v1=")));
    eprintln!("{stdout}");
    let _ = std::fs::remove_dir_all(dir);
}
