//! A Solana node for the tests: `tests/standins/sol_node.py` (LiteSVM behind Solana's JSON-RPC,
//! with a Jito-style block engine at `/api/v1/bundles`), and the wallet that drives it
//! with real signed transactions (`tests/py/sol_client.py`).

use super::{free_port, python, request, root, Proc};
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct SolNode {
    pub port: u16,
    /// The PubSub WebSocket's port: a free port of its own, not `port + 1` (an even port
    /// next to a `bind(0)` one is where the kernel puts outgoing connections, and a long
    /// test run leaves thousands of them in TIME_WAIT).
    pub ws_port: u16,
    pub proc: Proc,
}

impl SolNode {
    /// A node whose slots move every `slot_ms` and whose epochs last `slots_per_epoch`.
    pub fn start(slot_ms: u64, slots_per_epoch: u64) -> SolNode {
        for _ in 0..3 {
            let (port, ws_port) = (free_port(), free_port());
            let child = Command::new(python())
                .arg(root().join("tests/standins/sol_node.py"))
                .args(["--port", &port.to_string()])
                .args(["--ws-port", &ws_port.to_string()])
                .args(["--slot-ms", &slot_ms.to_string()])
                .args(["--slots-per-epoch", &slots_per_epoch.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn sol_node.py");
            let mut node = SolNode {
                port,
                ws_port,
                proc: Proc { child },
            };
            let until = Instant::now() + Duration::from_secs(15);
            while Instant::now() < until {
                if node.try_call("getHealth", json!([])).is_some() {
                    return node;
                }
                if matches!(node.proc.child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("sol_node.py did not start on any of three ports");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn try_call(&self, method: &str, params: Value) -> Option<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = request(
            self.port,
            "POST",
            "/",
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
        .ok()?;
        serde_json::from_slice(&r.body).ok()
    }

    /// A JSON-RPC call straight to the node: its whole answer (`result` or `error`).
    pub fn call(&self, method: &str, params: Value) -> Value {
        self.try_call(method, params)
            .unwrap_or_else(|| panic!("{method}: the node did not answer"))
    }

    /// Run the test wallet (`sol_client.py`) against this node: its stdout.
    pub fn client(&self, args: &[&str]) -> String {
        let out = Command::new(python())
            .arg(root().join("tests/py/sol_client.py"))
            .arg(args[0])
            .arg(format!("{}/", self.url()))
            .args(&args[1..])
            .output()
            .expect("run sol_client.py");
        assert!(
            out.status.success(),
            "sol_client.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Build the standard chain state (wallet with SOL, SPL and Token-2022 tokens, an
    /// NFT, two vote accounts with stake delegated to them): its addresses and keys.
    pub fn fixture(&self) -> Value {
        serde_json::from_str(&self.client(&["fixture"])).expect("fixture JSON")
    }

    /// A transfer signed by `secret` (hex keypair), base64, not sent.
    pub fn signed_transfer(&self, secret: &str, to: &str, lamports: u64) -> String {
        self.client(&["transfer", secret, to, &lamports.to_string()])
    }
}
