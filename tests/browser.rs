//! The console page in headless Chromium (Playwright), against the real binary.

mod common;
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
    // A node for the calls the usage chart then shows; usage flushed every 200 ms.
    let node = Fixture::json_rpc();
    let gw = Gateway::start(GatewayOpts {
        console_yaml: format!("  email:\n    outbox: {}\n", outbox.display()),
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        extra_yaml: "usage:\n  flush_interval_ms: 200\n".into(),
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
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "browser test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all browser checks passed"), "{stdout}");
    eprintln!("{stdout}");
    let _ = std::fs::remove_dir_all(dir);
}
