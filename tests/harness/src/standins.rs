//! The upstream stand-ins of `tests/standins/` (the ones `make demo` runs, each held to
//! its system's official spec by `tests/standins.rs`), one per process, on a free port.

use super::{free_port, python, request, root, Proc};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Standin {
    /// The first stand-in's port: the one `set_mode` and `hits` act on.
    pub port: u16,
    ports: Vec<(String, u16)>,
    pub proc: Proc,
}

impl Standin {
    /// `fleet.py`'s stand-in `name` (e.g. `relay`, `beacon`), with its extra arguments.
    pub fn start(name: &str, extra: &[&str]) -> Standin {
        Standin::start_all(&[name], extra)
    }

    /// Several of `fleet.py`'s stand-ins in one process, sharing one chain (a heimdall's
    /// LCD and RPC, say), each on a port of its own.
    pub fn start_all(names: &[&str], extra: &[&str]) -> Standin {
        for _ in 0..3 {
            let ports: Vec<(String, u16)> =
                names.iter().map(|n| (n.to_string(), free_port())).collect();
            let mut child = Command::new(python())
                .arg(root().join("tests/standins/fleet.py"))
                .args(
                    ports
                        .iter()
                        .flat_map(|(n, p)| ["--port".to_string(), format!("{n}={p}")]),
                )
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn fleet.py");
            let mut line = String::new();
            let out = child.stdout.take().unwrap();
            let _ = BufReader::new(out).read_line(&mut line);
            let proc = Proc { child };
            if line.starts_with("standins: up") {
                return Standin {
                    port: ports[0].1,
                    ports,
                    proc,
                };
            }
        }
        panic!("stand-ins {names:?} did not start on any of three port sets");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The URL of stand-in `name` of this process.
    pub fn url_of(&self, name: &str) -> String {
        let port = self.ports.iter().find(|(n, _)| n == name).expect(name).1;
        format!("http://127.0.0.1:{port}")
    }

    /// Every answer a `status` (None: normal again), after `stall` each.
    pub fn set_mode(&self, fail: Option<u16>, stall: Duration) {
        let body = serde_json::json!({"fail": fail, "stall_ms": stall.as_millis() as u64});
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(r) = request(
                self.port,
                "POST",
                "/standin/mode",
                &[],
                body.to_string().as_bytes(),
            ) {
                if r.status == 200 {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the stand-in did not take its mode");
    }

    /// Requests it has answered (its control routes aside).
    pub fn hits(&self) -> u64 {
        let r = request(self.port, "GET", "/standin/hits", &[], b"").expect("stand-in answers");
        r.json()["hits"].as_u64().unwrap()
    }
}

impl Standin {
    /// The beacon stand-in following execution node `el_url`'s blocks (one-second slots):
    /// light-client data for `light_client_yaml`.
    pub fn beacon_over(el_url: &str) -> Standin {
        let el = format!("el-1={el_url}");
        Standin::start("beacon", &["--node", &el, "--slot-secs", "1"])
    }

    /// This beacon stand-in's checkpoint root and chain constants, once it has a block.
    pub fn light_client_checkpoint(&self) -> serde_json::Value {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let r = request(
                self.port,
                "GET",
                "/standin/light_client/checkpoint",
                &[],
                b"",
            );
            if let Some(r) = r.ok().filter(|r| r.status == 200) {
                return r.json();
            }
            assert!(Instant::now() < until, "the beacon stand-in made no block");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `rpc.verify.root.light_client` (flow YAML) rooting pool `el_pool` on this beacon
    /// stand-in, named pool `cl_pool`. The stand-in makes a block only when its node has a
    /// new one (a test's node may mine none for a while): a head is used for 10 minutes.
    pub fn light_client_yaml(&self, el_pool: &str, cl_pool: &str) -> String {
        self.light_client_yaml_aged(el_pool, cl_pool, 600)
    }

    /// The same, its signed head used for `max_head_age_slots` slots (seconds here).
    pub fn light_client_yaml_aged(&self, el_pool: &str, cl_pool: &str, max_age: u64) -> String {
        let cp = self.light_client_checkpoint();
        serde_json::json!({
            "pool": el_pool, "beacon": cl_pool, "checkpoint": cp["root"], "poll_ms": 300,
            "network": cp["network"], "max_head_age_slots": max_age,
        })
        .to_string()
    }
}
