//! A Go JSON-RPC node (`tests/gonode`): reads requests as go-ethereum does (case-folded
//! keys, last one wins) and records what it executed. Built with Debian's Go toolchain
//! once per checkout (`target/gonode/gonode`), started on a free loopback port, killed
//! in `Drop`.

use super::root;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct GoNode {
    child: Child,
    pub port: u16,
}

/// The node's binary, built when missing or older than its source. Test binaries run
/// at once: each builds into a file of its own and renames it into place.
fn binary() -> PathBuf {
    let src = root().join("tests/gonode");
    let out = root().join("target/gonode");
    let bin = out.join("gonode");
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&bin) >= modified(&src.join("main.go")) && bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(&out).unwrap();
    let tmp = out.join(format!("gonode.{}", std::process::id()));
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&tmp)
        .arg(".")
        .current_dir(&src)
        .env("GOCACHE", out.join("cache"))
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .status()
        .expect("go (scripts/setup.sh installs golang-go)");
    assert!(status.success(), "go build tests/gonode failed");
    std::fs::rename(&tmp, &bin).unwrap();
    bin
}

impl GoNode {
    pub fn start() -> GoNode {
        let mut child = Command::new(binary())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gonode");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("gonode's port");
        let port = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("gonode said {line:?}"));
        GoNode { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every call the node executed (health checks aside), as it decoded it:
    /// `{"method": ..., "args": [...]}`.
    pub fn executed(&self) -> Vec<Value> {
        let r = super::request(self.port, "GET", "/executed", &[], b"").expect("gonode");
        serde_json::from_slice::<Vec<Value>>(&r.body).expect("gonode's record")
    }
}

impl Drop for GoNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
