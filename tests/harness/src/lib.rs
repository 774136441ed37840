//! Test harness: the real `chainedge` binary and real anvil nodes on ephemeral loopback
//! ports, a raw HTTP/1.1 client, and cleanup of every process started (in `Drop`).
#![allow(dead_code)]

mod browser;
pub mod evm;
mod fixture;
mod gonode;
mod postgres;
mod redis;
mod solana;
mod standins;
mod webhooks;
mod ws;
#[allow(unused_imports)]
pub use browser::{outbox_code, sign_in, Browser};
#[allow(unused_imports)]
pub use fixture::*;
#[allow(unused_imports)]
pub use gonode::GoNode;
#[allow(unused_imports)]
pub use postgres::PgServer;
#[allow(unused_imports)]
pub use redis::RedisServer;
#[allow(unused_imports)]
pub use solana::SolNode;
#[allow(unused_imports)]
pub use standins::Standin;
#[allow(unused_imports)]
pub use webhooks::{localhost_cert, verify, Hit, Receiver};
#[allow(unused_imports)]
pub use ws::{ws_connect, ws_connect_protocol, Ws};

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The repository (this crate is `tests/harness/` in it).
pub fn root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.join("../..").canonicalize().unwrap_or(here)
}

/// The tests' Python (web3.py, eth-account, solders, schemathesis), from `make setup`.
pub fn python() -> std::path::PathBuf {
    let p = root().join(".venv/bin/python");
    assert!(p.exists(), "Python venv missing: run `make setup`");
    p
}

/// Run a Python script of the repository (path from the root) in the venv with `args`;
/// its stdout, once it has exited 0 (else the test fails with both outputs).
pub fn run_python<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S]) -> String {
    let out = Command::new(python())
        .arg(root().join(script))
        .args(args)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The `chainedge` binary Cargo built with the test binaries: beside their `deps/`
/// folder (`CHAINEDGE_BIN` overrides it).
pub fn bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(p) = std::env::var("CHAINEDGE_BIN") {
            return p;
        }
        let exe = std::env::current_exe().expect("the test binary's path");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps");
        let bin = dir.join("chainedge");
        assert!(
            bin.exists(),
            "{} is missing: build the binary with the tests",
            bin.display()
        );
        bin.to_string_lossy().into_owned()
    })
}

/// Whether process `pid` holds the listening socket on `port` (another test's gateway
/// may have bound it between `free_port` and this one's start, and would answer).
pub fn listens_on(pid: u32, port: u16) -> bool {
    let inodes = listening_sockets(port);
    inodes.iter().any(|i| held_by(pid, i))
}

/// Whether every listening socket on `port` is held by `pid`: a proxy that binds with
/// `SO_REUSEPORT` (haproxy does) shares its port with another one that does, and the
/// kernel splits the connections between them.
pub fn listens_alone_on(pid: u32, port: u16) -> bool {
    let inodes = listening_sockets(port);
    !inodes.is_empty() && inodes.iter().all(|i| held_by(pid, i))
}

/// The listening sockets on `port`, as `/proc/<pid>/fd` links name them.
fn listening_sockets(port: u16) -> Vec<String> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let local_port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if *state == "0A" && local_port == Some(port) {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    inodes
}

fn held_by(pid: u32, socket: &str) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == socket))
}

/// The values of the gateway's `/metrics` lines that start with `line_start` (a name,
/// and as many of its labels as given), in order.
fn metric_values(gw: &Gateway, line_start: &str) -> Vec<f64> {
    let m = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .unwrap()
        .text();
    m.lines()
        .filter(|l| l.starts_with(line_start))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect()
}

/// The first such line's value, 0 when there is none.
pub fn metric_value(gw: &Gateway, line_start: &str) -> f64 {
    metric_values(gw, line_start)
        .first()
        .copied()
        .unwrap_or(0.0)
}

/// The sum over such lines (a family across the label values that follow).
pub fn metric_sum(gw: &Gateway, line_start: &str) -> f64 {
    metric_values(gw, line_start).iter().sum()
}

/// `N` distinct free ports: each held until all are chosen (two `free_port` calls in a
/// row may be given the same port, and a gateway with its edge and metrics listeners
/// on one port would pass for started while a metrics listener can answer its edge).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let held: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "chainedge-test-{tag}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&d).unwrap();
    remove_at_exit(d.clone());
    d
}

/// Directories made by `tempdir`, removed when the test binary exits (every gateway
/// and fixture is stopped by then): a test run leaves nothing behind in /tmp.
static MADE_DIRS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

fn remove_at_exit(dir: PathBuf) {
    extern "C" fn remove_made_dirs() {
        if let Ok(dirs) = MADE_DIRS.lock() {
            for d in dirs.iter() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
    let mut dirs = MADE_DIRS.lock().unwrap_or_else(|e| e.into_inner());
    if dirs.is_empty() {
        // SAFETY: registers a plain function with no arguments, run once at exit.
        unsafe { libc::atexit(remove_made_dirs) };
    }
    dirs.push(dir);
}

pub fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(Instant::now().elapsed().as_nanos() as u64);
    h.finish()
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on a fresh connection, sent byte for byte as given (paths are not normalised).
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    // One write: a body sent apart waits for the edge's delayed ACK (Nagle).
    let mut wire = req.into_bytes();
    wire.extend_from_slice(body);
    s.write_all(&wire)?;
    read_response(&mut BufReader::new(s), method == "HEAD")
}

fn read_response<R: BufRead>(r: &mut R, head: bool) -> std::io::Result<Resp> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if head || status == 204 || status == 304 {
    } else if let Some(len) = get("content-length") {
        let len: usize = len.parse().map_err(|_| bad("bad content-length"))?;
        body.resize(len, 0);
        r.read_exact(&mut body)?;
    } else if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let n = usize::from_str_radix(line.trim(), 16).map_err(|_| bad("bad chunk"))?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        r.read_to_end(&mut body)?;
    }
    Ok(Resp {
        status,
        headers,
        body,
    })
}

/// The headers of a WebSocket upgrade request (RFC 6455's sample key).
pub const WS_UPGRADE: [(&str, &str); 4] = [
    ("Upgrade", "websocket"),
    ("Connection", "Upgrade"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ("Sec-WebSocket-Version", "13"),
];

pub fn rpc(port: u16, path: &str, key: Option<&str>, body: &serde_json::Value) -> Resp {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut h = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        h.push(("Authorization", a.as_str()));
    }
    request(port, "POST", path, &h, body.to_string().as_bytes()).expect("rpc request")
}

/// A child process killed (SIGTERM, then SIGKILL) when dropped.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status();
    }
    pub fn exited_within(&mut self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal("TERM");
            if !self.exited_within(Duration::from_secs(3)) {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
    }
}

pub fn wait_for_port(port: u16, within: Duration) {
    let until = Instant::now() + within;
    while Instant::now() < until {
        // A connect to a free port in the ephemeral range can pick that same port as its
        // source and "succeed" against itself (TCP simultaneous open); that is no listener.
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            if s.local_addr().ok() != s.peer_addr().ok() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("port {port} did not open within {within:?}");
}

pub fn anvil_path() -> PathBuf {
    let p = root().join("node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil");
    assert!(
        p.exists(),
        "anvil missing: run `make setup` (npm install @foundry-rs/anvil-linux-amd64)"
    );
    p
}

pub struct Anvil {
    pub port: u16,
    pub proc: Proc,
}

impl Anvil {
    pub fn start(chain_id: u64, extra: &[&str]) -> Anvil {
        // Another test may take the port between `free_port` and anvil's bind; try anew.
        for _ in 0..3 {
            if let Some(a) = Anvil::try_start_on(free_port(), chain_id, extra) {
                return a;
            }
        }
        panic!("anvil did not start on any of three ports");
    }

    /// Start a node on a given port (also: restart a stopped one on its old port).
    pub fn start_on(port: u16, chain_id: u64, extra: &[&str]) -> Anvil {
        Anvil::try_start_on(port, chain_id, extra)
            .unwrap_or_else(|| panic!("anvil did not start on port {port}"))
    }

    /// Spawn anvil and wait until it answers JSON-RPC itself (not just until the port
    /// accepts a connection); `None` when the process exits or never answers.
    fn try_start_on(port: u16, chain_id: u64, extra: &[&str]) -> Option<Anvil> {
        let child = Command::new(anvil_path())
            .args([
                "--port",
                &port.to_string(),
                "--chain-id",
                &chain_id.to_string(),
                "--silent",
            ])
            .args(extra)
            // anvil offloads the states it cannot keep in memory to ~/.foundry/anvil/tmp
            // and leaves them there when stopped (670 MB a node in a full run): a home of
            // its own, removed when the test binary exits.
            .env("HOME", tempdir("anvil-home"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn anvil");
        let mut a = Anvil {
            port,
            proc: Proc { child },
        };
        let probe =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []});
        let want = format!("0x{chain_id:x}");
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let answered = request(
                port,
                "POST",
                "/",
                &[("Content-Type", "application/json")],
                probe.to_string().as_bytes(),
            )
            .ok()
            .filter(|r| r.status == 200)
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
            .is_some_and(|v| v["result"] == want.as_str());
            // Only this anvil counts: another test's node may hold the port (this one
            // then failed to bind), answer the probe, and be mined here by mistake.
            if answered && a.listens() {
                break;
            }
            if Instant::now() > until || matches!(a.proc.child.try_wait(), Ok(Some(_))) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // A fresh chain sits at height 0, which health checks treat as broken.
        a.mine(1);
        Some(a)
    }

    fn listens(&self) -> bool {
        listens_on(self.proc.pid(), self.port)
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Direct JSON-RPC call to this node.
    pub fn call(&self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = rpc(self.port, "/", None, &body);
        assert_eq!(r.status, 200, "{method}: {}", r.text());
        r.json()["result"].clone()
    }

    pub fn mine(&self, blocks: u64) {
        self.call("anvil_mine", serde_json::json!([format!("0x{blocks:x}")]));
    }

    pub fn block_number(&self) -> u64 {
        let v = self.call("eth_blockNumber", serde_json::json!([]));
        u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
    }
}

/// Options for one gateway under test.
pub struct GatewayOpts {
    /// `pools:` section of the app YAML (already indented at two spaces), or empty.
    pub pools: String,
    pub extra_yaml: String,
    pub admin_token: Option<String>,
    pub env: Vec<(String, String)>,
    /// Also listen with TLS (a fresh self-signed certificate) on `Gateway::tls_port`.
    pub tls: bool,
    /// Extra keys under `console:` (indented two spaces).
    pub console_yaml: String,
    /// Extra keys under `listen:` (indented two spaces).
    pub listen_yaml: String,
    /// A PostgreSQL URL: the store is there (given by a secret reference), not in SQLite.
    pub postgres: Option<String>,
    /// A Redis URL: limits and revocations are shared through it (`cluster.redis`).
    pub redis: Option<String>,
    /// Extra keys under `admin:` (indented two spaces).
    pub admin_yaml: String,
    /// Also listen on `Gateway::proxied_port` for connections that start with a PROXY
    /// protocol header; the TLS listener (with `tls`) takes only such connections too.
    pub proxy_protocol: bool,
}

impl Default for GatewayOpts {
    fn default() -> Self {
        GatewayOpts {
            pools: String::new(),
            extra_yaml: String::new(),
            admin_token: Some("test-admin-token".into()),
            env: Vec::new(),
            tls: false,
            console_yaml: String::new(),
            listen_yaml: String::new(),
            postgres: None,
            redis: None,
            admin_yaml: String::new(),
            proxy_protocol: false,
        }
    }
}

pub struct Gateway {
    pub port: u16,
    pub tls_port: Option<u16>,
    /// The plain listener behind a PROXY protocol writer (`GatewayOpts::proxy_protocol`).
    pub proxied_port: Option<u16>,
    pub metrics_port: u16,
    pub dir: PathBuf,
    pub app: PathBuf,
    pub server_conf: PathBuf,
    pub proc: Option<Proc>,
    pub env: Vec<(String, String)>,
}

impl Gateway {
    /// A gateway on fresh ports. `free_port` only finds a port free for the moment, so a
    /// test running alongside can take it first; the gateway then exits on the bind and
    /// is started again on other ports.
    pub fn start(opts: GatewayOpts) -> Gateway {
        let mut said = String::new();
        for _ in 0..3 {
            let mut gw = Gateway::configure(&opts);
            gw.proc = Some(gw.spawn(false));
            if gw.ready(Duration::from_secs(20)) {
                return gw;
            }
            said = gw.stderr_tail();
        }
        panic!("gateway did not start in 3 attempts; it said:\n{said}");
    }

    /// The last lines the gateway wrote on stderr.
    pub fn stderr_tail(&self) -> String {
        let mut out = String::new();
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with("stderr-") {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(20).collect();
                for l in tail.iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }

    fn configure(opts: &GatewayOpts) -> Gateway {
        let dir = tempdir("gw");
        let [port, metrics_port, tls_port, proxied_port] = free_ports::<4>();
        let mut env = opts.env.clone();
        let admin = match &opts.admin_token {
            Some(t) => {
                env.push(("CHAINEDGE_TEST_ADMIN_TOKEN".into(), t.clone()));
                format!(
                    "admin:\n  token: env:CHAINEDGE_TEST_ADMIN_TOKEN\n{}",
                    opts.admin_yaml
                )
            }
            None if !opts.admin_yaml.is_empty() => format!("admin:\n{}", opts.admin_yaml),
            None => String::new(),
        };
        let tls_port = opts.tls.then_some(tls_port);
        let tls = match tls_port {
            Some(p) => {
                self_signed_cert(&dir);
                format!(
                    "  tls:\n    - {{addr: \"127.0.0.1:{p}\", cert: {d}/cert.pem, key: {d}/key.pem}}\n",
                    d = dir.display()
                )
            }
            None => String::new(),
        };
        let proxied_port = opts.proxy_protocol.then_some(proxied_port);
        let proxied = match proxied_port {
            Some(p) => {
                let tls = tls_port
                    .map(|t| format!(", \"127.0.0.1:{t}\""))
                    .unwrap_or_default();
                format!("  proxy_protocol: [\"127.0.0.1:{p}\"{tls}]\n")
            }
            None => String::new(),
        };
        let http = match proxied_port {
            Some(p) => format!("\"127.0.0.1:{port}\", \"127.0.0.1:{p}\""),
            None => format!("\"127.0.0.1:{port}\""),
        };
        let store = match &opts.postgres {
            Some(url) => {
                env.push(("CHAINEDGE_TEST_PG_URL".into(), url.clone()));
                format!(
                    "postgres: env:CHAINEDGE_TEST_PG_URL\n  state_dir: {}",
                    dir.display()
                )
            }
            None => format!("path: {}", dir.join("store.db").display()),
        };
        let cluster = match &opts.redis {
            Some(url) => {
                env.push(("CHAINEDGE_TEST_REDIS_URL".into(), url.clone()));
                "cluster:\n  redis: env:CHAINEDGE_TEST_REDIS_URL\n".to_string()
            }
            None => String::new(),
        };
        let app = dir.join("app.yaml");
        let pools = if opts.pools.is_empty() {
            String::new()
        } else {
            format!("pools:\n{}", opts.pools)
        };
        std::fs::write(
            &app,
            format!(
                "plugins: {plugins}\nlisten:\n  http: [{http}]\n{proxied}{listen}{tls}metrics:\n  listen: \"127.0.0.1:{metrics_port}\"\n\
                 console:\n{origin}{console}{admin}store:\n  {store}\n\
                 plans: [free, basic, pro, business, enterprise, scale]\nthreads: 1\n{cluster}{pools}{extra}",
                plugins = root().join("plugins").display(),
                extra = opts.extra_yaml,
                console = opts.console_yaml,
                // A test may set its own console origin.
                origin = if opts.console_yaml.contains("  origin:") {
                    ""
                } else {
                    "  origin: \"http://console.test\"\n"
                },
                listen = opts.listen_yaml,
            ),
        )
        .unwrap();
        let server_conf = dir.join("pingora.yaml");
        std::fs::write(
            &server_conf,
            format!(
                "version: 1\nthreads: 1\npid_file: {d}/pid\nupgrade_sock: {d}/upgrade.sock\ngrace_period_seconds: 1\ngraceful_shutdown_timeout_seconds: 2\n",
                d = dir.display()
            ),
        )
        .unwrap();
        Gateway {
            port,
            tls_port,
            proxied_port,
            metrics_port,
            dir,
            app,
            server_conf,
            proc: None,
            env,
        }
    }

    /// Until this gateway (not whatever else took the port) answers on its edge port.
    pub fn wait_ready(&mut self, within: Duration) {
        assert!(
            self.ready(within),
            "gateway on port {} did not start",
            self.port
        );
    }

    /// Whether this gateway's edge answers within `within` (`false` once it exited).
    /// Only the edge stamps `X-Request-Id`: another gateway's metrics listener, which
    /// also says `Server: chainedge`, may hold the port.
    /// Its metrics listener must be its own too: a test alongside may hold that port
    /// (Pingora then keeps retrying the bind), and the gateway is started again.
    fn ready(&mut self, within: Duration) -> bool {
        let start = Instant::now();
        let mut edge_since: Option<Instant> = None;
        loop {
            if let Ok(r) = request(self.port, "GET", "/__ready", &[], b"") {
                let holds = |port| self.proc.as_ref().is_none_or(|p| listens_on(p.pid(), port));
                if r.header("server") == Some("chainedge")
                    && r.header("x-request-id").is_some()
                    && holds(self.port)
                {
                    if holds(self.metrics_port) {
                        return true;
                    }
                    let since = *edge_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(3) {
                        return false;
                    }
                }
            }
            let exited = self
                .proc
                .as_mut()
                .is_some_and(|p| matches!(p.child.try_wait(), Ok(Some(_))));
            if exited || start.elapsed() >= within {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The access log (stdout) of every process started on this config.
    pub fn access_log(&self) -> PathBuf {
        self.dir.join("access.log")
    }

    /// Start a gateway process on this config (`upgrade` adds `-u`).
    pub fn spawn(&self, upgrade: bool) -> Proc {
        let mut cmd = Command::new(bin());
        cmd.arg("-c")
            .arg(&self.server_conf)
            .arg("--app")
            .arg(&self.app);
        if upgrade {
            cmd.arg("-u");
        }
        // stdout is the access log; each process appends to the same file.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.access_log())
            .unwrap();
        cmd.envs(self.env.iter().cloned())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(
                std::fs::File::create(self.dir.join(format!("stderr-{}", rand_suffix()))).unwrap(),
            ));
        Proc {
            child: cmd.spawn().expect("spawn chainedge"),
        }
    }

    /// Run the CLI against this gateway's config and return stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        self.cli_both(args).0
    }

    /// Run the CLI against this gateway's config: (stdout, stderr), trimmed.
    pub fn cli_both(&self, args: &[&str]) -> (String, String) {
        let out = Command::new(bin())
            .arg("--app")
            .arg(&self.app)
            .args(args)
            .envs(self.env.iter().cloned())
            .output()
            .expect("run cli");
        assert!(
            out.status.success(),
            "cli {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8(out.stdout).unwrap().trim().to_string(),
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        )
    }

    /// A tenant on `plan` with one key carrying `scopes`; returns the raw key.
    pub fn key(&self, plan: &str, scopes: &[&str]) -> String {
        let tenant = self.cli(&["tenants", "create", "--name", plan, "--plan", plan]);
        let mut args = vec!["keys", "create", "--tenant", tenant.as_str()];
        let joined = scopes.join(",");
        if !scopes.is_empty() {
            args.extend(["--scopes", joined.as_str()]);
        }
        self.cli(&args)
    }

    /// A tenant on `plan` with one key: (raw key, key id).
    pub fn key_and_id(&self, plan: &str) -> (String, String) {
        let tenant = self.cli(&["tenants", "create", "--name", plan, "--plan", plan]);
        let (raw, said) = self.cli_both(&["keys", "create", "--tenant", tenant.as_str()]);
        let id = said
            .lines()
            .find_map(|l| l.strip_prefix("key id ").map(str::to_string))
            .expect("key id on stderr");
        (raw, id)
    }

    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        request(self.port, "GET", path, headers, b"").expect("request")
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.proc.take();
        // A failing test shows what the gateway said.
        if std::thread::panicking() {
            for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                if e.file_name().to_string_lossy().starts_with("stderr-") {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(40).collect();
                    eprintln!("--- gateway {}:", e.file_name().to_string_lossy());
                    for l in tail.iter().rev() {
                        eprintln!("{l}");
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn path_exists(p: &Path) -> bool {
    p.exists()
}

/// A throwaway self-signed certificate for 127.0.0.1 (`cert.pem`, `key.pem` in `dir`).
pub fn self_signed_cert(dir: &Path) {
    cert_for(dir, "127.0.0.1", "IP:127.0.0.1");
}

/// A throwaway self-signed certificate (its own CA) for `cn` with `san`
/// (`cert.pem`, `key.pem` in `dir`).
pub fn cert_for(dir: &Path, cn: &str, san: &str) {
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            &format!("/CN={cn}"),
            "-addext",
            &format!("subjectAltName={san}"),
        ])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// App YAML raising every rate limit out of the way (for load tests).
pub const UNLIMITED: &str = "limits:\n  default: {anonymous: 1000000, free: 1000000, basic: 1000000, pro: 1000000, business: 1000000, enterprise: 1000000, scale: 1000000}\n";

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

/// The process named by a pid file, killed when dropped (a daemon outlives its parent).
pub struct Daemon(pub std::path::PathBuf);

impl Daemon {
    pub fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(&self.0).ok()?.trim().parse().ok()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// Whether `pid` runs (a zombie does not).
pub fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

impl Gateway {
    /// The same gateway, stopped and started again daemonized (`-d`), as systemd's unit
    /// starts it; its access log where the first process wrote it.
    /// Its ports are free between the two processes: when a test alongside took one, the
    /// daemon is started again on fresh ports (the config rewritten), as `start` does.
    pub fn daemonize(&mut self) -> Daemon {
        if let Some(mut first) = self.proc.take() {
            first.signal("INT");
            assert!(first.exited_within(Duration::from_secs(10)));
        }
        let daemon = Daemon(self.dir.join("pid"));
        for _ in 0..3 {
            let status = Command::new(bin())
                .args(["-d", "-c"])
                .arg(&self.server_conf)
                .arg("--app")
                .arg(&self.app)
                .envs(self.env.iter().cloned())
                .stdout(std::fs::File::create(self.access_log()).unwrap())
                .stderr(std::fs::File::create(self.dir.join("stderr-daemon")).unwrap())
                .status()
                .unwrap();
            assert!(status.success());
            if self.ready(Duration::from_secs(20))
                && daemon.pid().is_some_and(|pid| {
                    listens_on(pid, self.port) && listens_on(pid, self.metrics_port)
                })
            {
                return daemon;
            }
            if let Some(pid) = daemon.pid() {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            self.move_to_fresh_ports();
        }
        panic!("the daemon did not serve on its own ports in 3 attempts");
    }

    /// The edge and metrics listeners on other free ports (the config rewritten).
    fn move_to_fresh_ports(&mut self) {
        let mut app = std::fs::read_to_string(&self.app).unwrap();
        for port in [&mut self.port, &mut self.metrics_port] {
            let fresh = free_port();
            app = app.replace(
                &format!("127.0.0.1:{port}\""),
                &format!("127.0.0.1:{fresh}\""),
            );
            *port = fresh;
        }
        std::fs::write(&self.app, app).unwrap();
    }

    /// `scripts/upgrade.sh` run on this (daemonized) gateway, as an operator runs it:
    /// whether it succeeded, and what it said.
    pub fn upgrade_script(&self) -> (bool, String) {
        let out = Command::new("bash")
            .arg(root().join("scripts/upgrade.sh"))
            .arg(&self.server_conf)
            .arg(&self.app)
            .env("CHAINEDGE_BIN", bin())
            .env("UPGRADE_DRAIN_SECS", "15")
            .envs(self.env.iter().cloned())
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    }
}

/// haproxy in the foreground on the configuration file `cfg`, killed when dropped.
pub fn haproxy(cfg: &std::path::Path) -> Proc {
    Proc {
        child: Command::new("haproxy")
            .args(["-db", "-f"])
            .arg(cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy (scripts/setup.sh installs it)"),
    }
}

/// nginx in the foreground on `dir/nginx.conf` with `dir` as its prefix, killed when
/// dropped.
pub fn nginx(dir: &std::path::Path) -> Proc {
    Proc {
        child: Command::new("nginx")
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-p")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx, with its stream module (scripts/setup.sh installs both)"),
    }
}
