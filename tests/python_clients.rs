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
