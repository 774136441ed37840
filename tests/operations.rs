//! `chainedge -t` validation and the graceful upgrade under load.

use common::*;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Run `chainedge -t` on a copy of the demo config with one edit; returns (exit ok, stderr).
fn check(
    edit_app: impl Fn(String) -> String,
    edit_plugins: impl Fn(&std::path::Path),
) -> (bool, String) {
    let dir = tempdir("check");
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for e in std::fs::read_dir(root().join("plugins")).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            continue; // the contract: absent is empty
        }
        std::fs::copy(&p, plugins.join(p.file_name().unwrap())).unwrap();
    }
    edit_plugins(&plugins);
    let app = std::fs::read_to_string(root().join("conf/demo.yaml")).unwrap();
    let app = app.replace(
        "plugins: ../plugins",
        &format!("plugins: {}", plugins.display()),
    );
    std::fs::write(dir.join("app.yaml"), edit_app(app)).unwrap();
    let out = Command::new(bin())
        .args(["-t", "-c"])
        .arg(root().join("conf/pingora-demo.yaml"))
        .arg("--app")
        .arg(dir.join("app.yaml"))
        .env("CHAINEDGE_ADMIN_TOKEN", "x")
        .env("CHAINEDGE_FIREHOSE_SECRET", "f".repeat(64))
        .env("CHAINEDGE_WATCHLIST_SECRET", "w".repeat(64))
        .env("CHAINEDGE_TX_HOOK_SECRET", "t".repeat(64))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn edit_file(dir: &std::path::Path, name: &str, f: impl Fn(String) -> String) {
    let p = dir.join(name);
    std::fs::write(&p, f(std::fs::read_to_string(&p).unwrap())).unwrap();
}

#[test]
fn test_flag_validates_app_config_and_plugins() {
    let (ok, err) = check(|a| a, |_| {});
    assert!(ok, "demo config should validate: {err}");

    let (ok, err) = check(|a| a.replace("rpc:\n", "rpc:\n  bogus_key: 1\n"), |_| {});
    assert!(!ok);
    assert!(
        err.contains("app.yaml: rpc.bogus_key:") && err.contains("unknown field `bogus_key`"),
        "{err}"
    );

    // The admin listener may not share its port with a data-plane listener, on any
    // address (the edge tells it by its port); PostgreSQL needs a local state directory
    // for the usage journal.
    for (from, to, said) in [
        (
            "admin:\n",
            "admin:\n  listen: \"0.0.0.0:8080\"\n",
            "admin.listen: 0.0.0.0:8080: its port is also",
        ),
        (
            "  path: ../.demo/chainedge.db",
            "  postgres: env:CHAINEDGE_ADMIN_TOKEN",
            "store.state_dir: required with postgres",
        ),
    ] {
        let (ok, err) = check(|a| a.replace(from, to), |_| {});
        assert!(!ok && err.contains(said), "{said}: {err}");
    }

    let (ok, err) = check(|a| a.replace("127.0.0.1:9091", "not-an-address"), |_| {});
    assert!(!ok);
    assert!(
        err.contains("app.yaml: metrics.listen: 'not-an-address' is not an address"),
        "{err}"
    );

    let (ok, err) = check(
        |a| {
            a.replace(
                "env:CHAINEDGE_ADMIN_TOKEN",
                "env:CHAINEDGE_SURELY_UNSET_VAR",
            )
        },
        |_| {},
    );
    assert!(!ok);
    assert!(
        err.contains("admin.token: environment variable CHAINEDGE_SURELY_UNSET_VAR is not set"),
        "{err}"
    );

    let (ok, err) = check(
        |a| a,
        |d| {
            edit_file(d, "eth.yaml", |t| {
                t.replace("handler: eth_mempool_stats", "handler: teleport")
            })
        },
    );
    assert!(!ok);
    assert!(
        err.contains("eth.yaml: routes[7].handler:") && err.contains("unknown handler 'teleport'"),
        "{err}"
    );

    let (ok, err) = check(
        |a| a,
        |d| {
            edit_file(d, "sol.yaml", |t| {
                t.replace(
                    "tier: business, scopes: [sol_watchlist], rate: sol_watchlist}",
                    "tier: business, scopes: [sol_watchlist], rate: sol_watchlist, colour: red}",
                )
            })
        },
    );
    assert!(!ok);
    assert!(
        err.contains("sol.yaml: routes[0].colour:") && err.contains("unknown field `colour`"),
        "{err}"
    );

    // Overlap: a second route with the same shape and method.
    let (ok, err) = check(
        |a| a,
        |d| {
            edit_file(d, "polygon.yaml", |t| {
                t + "  - {name: polygon.dup, methods: [GET], path: \"/v1/polygon/spans/{span}\", handler: polygon_span}\n"
            })
        },
    );
    assert!(!ok);
    assert!(
        err.contains("polygon.yaml: routes[")
            && err.contains("].path: route 'polygon.dup' (GET /v1/polygon/spans/{span}) overlaps route 'polygon.span'"),
        "{err}"
    );

    let (ok, err) = check(
        |a| a,
        |d| {
            edit_file(d, "eth.yaml", |t| {
                t.replace("tier: enterprise", "tier: platinum")
            })
        },
    );
    assert!(!ok);
    assert!(err.contains("tier: unknown plan 'platinum'"), "{err}");

    // "Scale plan only": a plan above the MEV-Share stream's tier would be admitted too.
    let (ok, err) = check(
        |a| {
            a.replace("enterprise, scale]", "enterprise, scale, scale_plus]")
                .replace("scale: 1000}", "scale: 1000, scale_plus: 1000}")
        },
        |_| {},
    );
    assert!(!ok);
    assert!(
        err.contains("streams.yaml: routes[0].tier: the MEV-Share stream is for one plan only")
            && err.contains("[\"scale_plus\"]"),
        "{err}"
    );

    // Pingora's own YAML: unknown keys are refused too.
    let dir = tempdir("srv");
    std::fs::write(dir.join("p.yaml"), "version: 1\nthreads: 1\nthreadz: 2\n").unwrap();
    let out = Command::new(bin())
        .args(["-t", "-c"])
        .arg(dir.join("p.yaml"))
        .arg("--app")
        .arg(root().join("conf/demo.yaml"))
        .env("CHAINEDGE_ADMIN_TOKEN", "x")
        .env("CHAINEDGE_FIREHOSE_SECRET", "f".repeat(64))
        .env("CHAINEDGE_WATCHLIST_SECRET", "w".repeat(64))
        .env("CHAINEDGE_TX_HOOK_SECRET", "t".repeat(64))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("p.yaml: threadz: unknown Pingora server key"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The connection closed before any byte of an answer: the request was never read.
fn unanswered(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted)
        || e.to_string() == "bad status line \"\""
}

/// Clients sending `eth_chainId` with a key as fast as answers come, until finished.
/// Pingora drops a connection whose request has not arrived yet when the old process
/// starts its shutdown (pingora-proxy `handle_new_request`). Such a request never reached
/// the gateway, and an HTTP client sends an idempotent request again on a new connection
/// (RFC 9110 §9.2.2); so does this one, once. Anything else, or a second failure, is a
/// lost request.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    resent: Arc<AtomicUsize>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
    clients: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(port: u16, key: &str) -> Load {
        let load = Load {
            stop: Arc::new(AtomicBool::new(false)),
            ok: Arc::new(AtomicUsize::new(0)),
            resent: Arc::new(AtomicUsize::new(0)),
            failures: Arc::new(std::sync::Mutex::new(Vec::new())),
            clients: Vec::new(),
        };
        let mut clients = Vec::new();
        for _ in 0..4 {
            let (stop, ok, failures) = (load.stop.clone(), load.ok.clone(), load.failures.clone());
            let (resent, auth) = (load.resent.clone(), format!("Bearer {key}"));
            clients.push(std::thread::spawn(move || {
                let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []});
                while !stop.load(Ordering::Relaxed) {
                    let send = || request(port, "POST", "/rpc/eth", &[("Authorization", &auth), ("Content-Type", "application/json")], body.to_string().as_bytes());
                    let answer = match send() {
                        Err(e) if unanswered(&e) => {
                            resent.fetch_add(1, Ordering::Relaxed);
                            send()
                        }
                        other => other,
                    };
                    match answer {
                        Ok(r) if r.status == 200 => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => failures.lock().unwrap().push(format!("{} {}", r.status, r.text())),
                        Err(e) => failures.lock().unwrap().push(e.to_string()),
                    }
                }
            }));
        }
        Load { clients, ..load }
    }

    fn answered(&self) -> usize {
        self.ok.load(Ordering::Relaxed)
    }

    /// Stop, and assert nothing was lost and load kept flowing after `before` answers.
    fn finish(self, what: &str, before: usize) {
        self.stop.store(true, Ordering::Relaxed);
        for c in self.clients {
            c.join().unwrap();
        }
        let failures = self.failures.lock().unwrap();
        let total = self.ok.load(Ordering::Relaxed);
        eprintln!(
            "{what} under load: {total} requests, {} sent again after an unanswered close",
            self.resent.load(Ordering::Relaxed)
        );
        assert!(
            failures.is_empty(),
            "{} of {} requests failed during the {what}: {:?}",
            failures.len(),
            total,
            &failures[..failures.len().min(5)]
        );
        assert!(
            total > before + 50,
            "load kept flowing after the {what} ({before} → {total})"
        );
    }
}

/// A gateway on one anvil, without limits, and a free key: the upgrade tests' setup.
fn one_node_gateway() -> (Anvil, Gateway, String) {
    let anvil = Anvil::start(1, &[]);
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
            anvil.url()
        ),
        extra_yaml: UNLIMITED.into(),
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    (anvil, gw, key)
}

#[test]
fn graceful_upgrade_under_load_loses_no_request() {
    let (_anvil, mut gw, key) = one_node_gateway();
    let port = gw.port;
    let load = Load::start(port, &key);
    std::thread::sleep(Duration::from_millis(500));
    let before = load.answered();

    // By hand: start the new process with -u, then SIGQUIT the old one.
    let mut old = gw.proc.take().unwrap();
    let new = gw.spawn(true);
    std::thread::sleep(Duration::from_millis(300));
    old.signal("QUIT");
    assert!(
        old.exited_within(Duration::from_secs(15)),
        "old process did not drain and exit"
    );
    std::thread::sleep(Duration::from_millis(700));
    gw.proc = Some(new);
    load.finish("upgrade", before);
    // The new process is the one serving now.
    let r = rpc(
        port,
        "/rpc/eth",
        Some(&key),
        &serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "eth_chainId", "params": []}),
    );
    assert_eq!(r.status, 200);
}

/// `scripts/upgrade.sh`, as an operator (or the documented command) runs it, on a
/// daemonized gateway under load: the new process serves, its pid in the pid file, the
/// old one gone, no request lost; run twice, as a second upgrade follows the first.
#[test]
fn the_upgrade_script_upgrades_a_daemon_under_load() {
    let (_anvil, mut gw, key) = one_node_gateway();
    let daemon = gw.daemonize();
    let r = rpc(
        gw.port,
        "/rpc/eth",
        Some(&key),
        &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.text(), gw.stderr_tail());
    let load = Load::start(gw.port, &key);
    std::thread::sleep(Duration::from_millis(500));
    let before = load.answered();
    for round in 0..2 {
        let old = daemon.pid().expect("a pid file");
        let (upgraded, said) = gw.upgrade_script();
        assert!(upgraded, "round {round}: {said}");
        let new = daemon.pid().expect("a pid file");
        assert_ne!(new, old, "round {round}: {said}");
        assert!(alive(new), "round {round}: {new} is not running: {said}");
        assert!(!alive(old), "round {round}: {old} still runs: {said}");
        assert!(
            listens_on(new, gw.port),
            "round {round}: {new} does not hold the port"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    load.finish("scripted upgrade", before);
    // The new processes kept writing the access log where the first one did.
    let log = std::fs::read_to_string(gw.access_log()).unwrap();
    let last = log.lines().last().unwrap_or_default();
    assert!(last.contains("\"/rpc/eth\""), "{last}");
}

/// The TLS listener serves the same routes, offers HTTP/2 by ALPN and still speaks HTTP/1.1.
#[test]
fn tls_listener_offers_http2() {
    let gw = Gateway::start(GatewayOpts {
        tls: true,
        ..Default::default()
    });
    let port = gw.tls_port.unwrap();
    wait_for_port(port, Duration::from_secs(10));
    let url = format!("https://127.0.0.1:{port}/v1/eth/no/such/route");
    let curl = |version: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "--max-time", "10", version, "-o", "/dev/null"])
            .args(["-w", "%{http_version} %{http_code}"])
            .arg(&url)
            .output()
            .expect("run curl");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(curl("--http2"), "2 404");
    assert_eq!(curl("--http1.1"), "1.1 404");

    // The envelope and headers are the same as on the plain listener.
    let out = std::process::Command::new("curl")
        .args(["-sk", "--http2", "--max-time", "10", "-D", "-"])
        .arg(&url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(text.contains("server: chainedge"), "{text}");
    assert!(text.contains("x-request-id:"), "{text}");
    assert!(text.contains("\"error\":\"route_not_found\""), "{text}");
}

/// What a load balancer's health check sees when an instance stops: 200 while serving;
/// once SIGTERM arrives, 503 `draining` on a check connection already open, and no new
/// connection accepted; the process then exits within its grace periods.
#[test]
fn healthz_takes_a_stopping_instance_out_of_rotation() {
    use std::io::{Read, Write};
    let mut gw = Gateway::start(GatewayOpts::default());
    let mut check = std::net::TcpStream::connect(("127.0.0.1", gw.metrics_port)).unwrap();
    check
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let ask = |s: &mut std::net::TcpStream| -> String {
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: lb\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&got).contains("\"}") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    };
    let serving = ask(&mut check);
    assert!(
        serving.starts_with("HTTP/1.1 200") && serving.ends_with(r#"{"status":"serving"}"#),
        "{serving}"
    );
    let mut proc = gw.proc.take().unwrap();
    proc.signal("TERM");
    std::thread::sleep(Duration::from_millis(300));
    let draining = ask(&mut check);
    assert!(
        draining.starts_with("HTTP/1.1 503") && draining.ends_with(r#"{"status":"draining"}"#),
        "{draining}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", gw.metrics_port)).is_err(),
        "a new check connection is refused while draining"
    );
    assert!(proc.exited_within(Duration::from_secs(10)));
}

/// An operator finds tenants without reading the access log, and store commands run
/// without the serving secrets (here: the admin token's variable is unset).
#[test]
fn operators_list_and_show_tenants_without_serving_secrets() {
    let gw = Gateway::start(GatewayOpts::default());
    let (pro_key, pro_key_id) = gw.key_and_id("pro");
    gw.key("pro", &[]);
    gw.key("free", &[]);
    let cli = |args: &[&str]| {
        Command::new(bin())
            .arg("--app")
            .arg(&gw.app)
            .args(args)
            .env_remove("CHAINEDGE_TEST_ADMIN_TOKEN")
            .output()
            .unwrap()
    };
    // Serving needs the admin token: `-t` refuses without it.
    let out = cli(&["-t"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("admin.token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let lines = |out: std::process::Output| -> Vec<serde_json::Value> {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let all = lines(cli(&["tenants", "list"]));
    assert_eq!(all.len(), 3, "{all:?}");
    let pro = lines(cli(&["tenants", "list", "--plan", "pro"]));
    assert_eq!(pro.len(), 2);
    assert!(pro
        .iter()
        .all(|t| t["plan"] == "pro" && t["active_key_count"] == 1));
    assert_eq!(lines(cli(&["tenants", "list", "--limit", "1"])).len(), 1);
    let out = cli(&["tenants", "list", "--plan", "platinum"]);
    assert!(!out.status.success());

    // The tenant behind a key: its keys listed, never a secret.
    let tenant = pro
        .iter()
        .find(|t| {
            let show = cli(&["tenants", "show", "--tenant", t["id"].as_str().unwrap()]);
            String::from_utf8_lossy(&show.stdout).contains(&pro_key_id)
        })
        .expect("the key's tenant")["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = cli(&["tenants", "show", "--tenant", &tenant]);
    assert!(show.status.success());
    let text = String::from_utf8(show.stdout).unwrap();
    assert!(!text.contains(&pro_key[3..]), "a secret was shown");
    let shown: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(shown["plan"], "pro");
    assert_eq!(shown["keys"][0]["id"], pro_key_id.as_str());
    assert_eq!(
        shown["keys"][0]["key_prefix"],
        pro_key[..shown["keys"][0]["key_prefix"].as_str().unwrap().len()]
    );
    assert_eq!(shown["users"], serde_json::json!([]));
    let out = cli(&["tenants", "show", "--tenant", "no-such-tenant"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tenant with id no-such-tenant"));

    // Writing commands need no serving secret either.
    let made = cli(&["tenants", "create", "--name", "x", "--plan", "basic"]);
    assert!(made.status.success());
    assert_eq!(lines(cli(&["tenants", "list"])).len(), 4);
}

/// A provider key that belongs in the URL path comes from a secret reference into
/// `{key}`; the key is sent to the node and never written anywhere by the edge. A key
/// written into the config's URL is refused by `-t`, without repeating it.
#[test]
fn provider_keys_go_in_the_path_from_a_secret_never_from_the_file() {
    const KEY: &str = "Zq3xK9pLmN2vB7cR4tY8wE1uI6oP0aSd";
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let node = Fixture::json_rpc_keeping_paths(seen.clone());
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}/v3/{{key}}\", family: el-anvil, url_key: \"env:PROVIDER_KEY\"}}\n",
            node.url()
        ),
        extra_yaml: UNLIMITED.into(),
        env: vec![("PROVIDER_KEY".into(), KEY.into())],
        ..Default::default()
    });
    let key = gw.key("free", &[]);
    let body =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []});
    let r = rpc(gw.port, "/rpc/eth", Some(&key), &body);
    assert_eq!(
        r.json()["result"],
        "0x1",
        "{} {:?}",
        r.text(),
        seen.lock().unwrap()
    );
    let paths = seen.lock().unwrap().clone();
    assert!(!paths.is_empty());
    assert!(
        paths.iter().all(|p| p == &format!("/v3/{KEY}")),
        "{paths:?}"
    );
    // Nothing the edge wrote holds the key: its logs, its store, its config.
    for e in std::fs::read_dir(&gw.dir).unwrap().flatten() {
        let bytes = std::fs::read(e.path()).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{} holds the provider key",
            e.path().display()
        );
    }

    // Written into the URL: refused, and the error does not repeat it.
    let (ok, err) = check(
        |a| {
            a.replacen(
                "http://127.0.0.1:18545",
                &format!("http://127.0.0.1:18545/v2/{KEY}"),
                1,
            )
        },
        |_| {},
    );
    assert!(!ok);
    assert!(err.contains("looks like a provider key"), "{err}");
    assert!(!err.contains(&KEY[4..]), "{err}");
    // `{key}` without a url_key, or a url_key with nowhere to go: refused.
    let (ok, err) = check(
        |a| {
            a.replacen(
                "http://127.0.0.1:18545",
                "http://127.0.0.1:18545/v2/{key}",
                1,
            )
        },
        |_| {},
    );
    assert!(
        !ok && err.contains("has {key} but the host has no url_key"),
        "{err}"
    );
}

/// The demo (`scripts/demo.sh`) running on ports and a state directory of its own (a
/// demo the user has running on the defaults is never touched); SIGTERM (what Ctrl-C's
/// trap handles) when dropped.
struct Demo {
    child: std::process::Child,
    dir: std::path::PathBuf,
    edge: u16,
    /// The first of the 19 ports of its nodes and stand-ins (the second EL node's is
    /// the next).
    nodes: u16,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = std::time::Instant::now() + Duration::from_secs(15);
        while std::time::Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
    }
}

/// `eth_blockNumber` through the demo's `/rpc/eth` with `key`.
fn demo_block(demo: &Demo, key: &str) -> std::io::Result<Resp> {
    let body =
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []});
    let auth = format!("Bearer {key}");
    request(
        demo.edge,
        "POST",
        "/rpc/eth",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
}

/// Start `scripts/demo.sh` and wait until it answers; returns it and its keys by plan.
/// A demo that exits while starting (a port another process took between the check and
/// the bind, a stand-in starved on a loaded box) is started again, on fresh ports and
/// its own directory, twice at most; what it printed is reported each time.
fn start_demo() -> (Demo, serde_json::Value) {
    let mut said = Vec::new();
    for attempt in 1..=3 {
        match try_start_demo() {
            Ok(started) => return started,
            Err(why) => {
                eprintln!("start_demo: attempt {attempt}: {why}");
                said.push(why);
            }
        }
    }
    panic!(
        "the demo did not start in 3 attempts:\n{}",
        said.join("\n---\n")
    );
}

fn try_start_demo() -> Result<(Demo, serde_json::Value), String> {
    let dir = tempdir("demo");
    let log = dir.join("demo.log");
    // 19 consecutive free ports for the nodes and stand-ins, below the kernel's ephemeral
    // range: every other process of the run binds port 0 and connects out from that
    // range, so none can take one of these between this check and the demo's bind.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        ^ std::process::id();
    let nodes = loop {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let p = 20_000 + (seed % 10_000) as u16;
        if (0..19).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok()) {
            break p;
        }
    };
    let (edge, metrics) = (free_port(), free_port());
    let mut demo = Demo {
        child: Command::new("bash")
            .arg(root().join("scripts/demo.sh"))
            .current_dir(root())
            .env("DEMO_DIR", dir.join("state"))
            .env("DEMO_EDGE_PORT", edge.to_string())
            .env("DEMO_METRICS_PORT", metrics.to_string())
            .env("DEMO_NODE_PORT", nodes.to_string())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
            .spawn()
            .unwrap(),
        dir: dir.join("state"),
        edge,
        nodes,
    };
    let up = std::time::Instant::now() + Duration::from_secs(90);
    let printed = || {
        format!(
            "{}{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            std::fs::read_to_string(log.with_extension("err")).unwrap_or_default()
        )
    };
    loop {
        if std::time::Instant::now() >= up {
            return Err(format!("it did not answer in 90 s:\n{}", printed()));
        }
        if let Some(status) = demo.child.try_wait().unwrap() {
            return Err(format!("it exited ({status}):\n{}", printed()));
        }
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        if said.contains("chainedge is up") {
            let keys: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(demo.dir.join("keys.json")).unwrap())
                    .unwrap();
            if matches!(demo_block(&demo, keys["free"].as_str().unwrap()), Ok(r) if r.status == 200)
            {
                return Ok((demo, keys));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `make demo`'s fleet: killing one EL node stops nothing; the mesh quarantines it while
/// `/rpc/eth` keeps answering from the other node; a graceful upgrade of its gateway
/// (USR1) keeps the fleet and every read answered; Ctrl-C (SIGTERM) still stops it all,
/// the upgraded gateway included.
#[test]
fn the_demo_survives_a_node_dying() {
    let (mut demo, keys) = start_demo();
    let key = keys["free"].as_str().unwrap().to_string();
    let pid = std::fs::read_to_string(demo.dir.join("el-anvil-2.pid")).unwrap();
    assert!(Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .unwrap()
        .success());

    // Reads go on, every one answered, while the mesh finds the node gone.
    let state = |id: &str| -> Option<String> {
        let r = request(demo.edge, "GET", "/v1/eth/mesh/health", &[], b"").ok()?;
        let v = r.json();
        v["blocks"].as_object()?.values().find_map(|b| {
            b["hosts"].as_array()?.iter().find_map(|h| {
                (h["id"] == id).then(|| h["state"].as_str().unwrap_or("").to_string())
            })
        })
    };
    let mut reads = 0;
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while state("el-anvil-2").as_deref() != Some("quarantined") || reads < 50 {
        assert!(
            std::time::Instant::now() < until,
            "el-anvil-2 is {:?} after {reads} reads",
            state("el-anvil-2")
        );
        let r = demo_block(&demo, &key).expect("the gateway answers");
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.json()["result"].is_string(), "{}", r.text());
        reads += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(state("el-anvil-1").as_deref(), Some("available"));
    assert!(
        demo.child.try_wait().unwrap().is_none(),
        "the demo went down with its node"
    );

    // A graceful upgrade of the demo's gateway, as its banner says (USR1 to the demo):
    // a new process takes the listeners, the old one drains, the fleet stays; reads go
    // on.
    let pid = || {
        let text = std::fs::read_to_string(demo.dir.join("chainedge.pid")).unwrap();
        text.trim().parse::<u32>().unwrap()
    };
    let old = pid();
    let _ = Command::new("kill")
        .args(["-USR1", &demo.child.id().to_string()])
        .status();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while pid() == old || alive(old) {
        assert!(
            std::time::Instant::now() < until,
            "no upgrade: {old} -> {}",
            pid()
        );
        let r = demo_block(&demo, &key).expect("the gateway answers through the upgrade");
        assert_eq!(r.status, 200, "{}", r.text());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        listens_on(pid(), demo.edge),
        "the new gateway does not hold the port"
    );
    for _ in 0..20 {
        let r = demo_block(&demo, &key).expect("the new gateway answers");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert!(
        demo.child.try_wait().unwrap().is_none(),
        "the demo ended with its first gateway"
    );

    // Ctrl-C's signal still stops everything it started.
    let _ = Command::new("kill")
        .args(["-TERM", &demo.child.id().to_string()])
        .status();
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while demo.child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < until, "the demo did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut stopped = false;
    for _ in 0..50 {
        if std::net::TcpStream::connect(("127.0.0.1", demo.edge)).is_err()
            && std::net::TcpStream::connect(("127.0.0.1", demo.nodes)).is_err()
        {
            stopped = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(stopped, "the gateway or a node outlived the demo");
}

/// `make demo` shows every SPEC item: `scripts/demo_tour.py` walks them all (console
/// sign-ins, every chain surface, streams, channels, senders) on a fresh demo and fails
/// on any 5xx, any other status than the item's, or an answer without its data.
#[test]
fn the_demo_tour_finds_every_spec_item_answering_with_data() {
    let (demo, _) = start_demo();
    let said = run_python(
        "scripts/demo_tour.py",
        &[
            format!("http://127.0.0.1:{}", demo.edge),
            demo.dir.display().to_string(),
            demo.nodes.to_string(),
        ],
    );
    assert!(said.contains(", 0 missed"), "{said}");
}

/// `chainedge openapi` on a configuration: (exit ok, stdout, stderr).
fn openapi(app: &std::path::Path, strict: bool) -> (bool, String, String) {
    let mut cmd = Command::new(bin());
    cmd.arg("--app").arg(app).arg("openapi");
    if strict {
        cmd.arg("--strict");
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A console session on the demo for the contract's console routes (the email code
/// lands in the outbox): the session and CSRF cookies.
fn console_session(demo: &Demo) -> (String, String) {
    let start = request(
        demo.edge,
        "POST",
        "/v1/auth/email/start",
        &[("Content-Type", "application/json")],
        br#"{"email": "contract@example.com"}"#,
    )
    .unwrap();
    assert_eq!(start.status, 202, "{}", start.text());
    let outbox = std::fs::read_to_string(demo.dir.join("outbox.jsonl")).unwrap();
    let code = outbox
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["to"] == "contract@example.com")
        .filter_map(|m| {
            let text = m["text"].as_str().or(m["body"].as_str())?.to_string();
            text.split(|c: char| !c.is_ascii_digit())
                .find(|w| w.len() == 6)
                .map(str::to_string)
        })
        .next()
        .expect("a code in the outbox");
    let verify = request(
        demo.edge,
        "POST",
        "/v1/auth/email/verify",
        &[("Content-Type", "application/json")],
        format!(r#"{{"email": "contract@example.com", "code": "{code}"}}"#).as_bytes(),
    )
    .unwrap();
    assert_eq!(verify.status, 200, "{}", verify.text());
    let cookie = |name: &str| {
        verify
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
            .find_map(|(_, v)| v.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.split(';').next())
            .unwrap()
            .to_string()
    };
    (cookie("nl_session"), cookie("nl_csrf"))
}

/// schemathesis against the demo's contract with `key` and the console session `(session,
/// csrf)`; never signing out, which would end the session the other console operations
/// use. Bounded in examples and time by the caller; a fixed seed per run.
fn contract_run(demo: &Demo, key: &str, (session, csrf): &(String, String)) -> Command {
    let mut run = Command::new(root().join(".venv/bin/schemathesis"));
    run.arg("--config-file")
        .arg(root().join("tests/py/schemathesis.toml"))
        .args([
            "run",
            &format!("http://127.0.0.1:{}/openapi.json", demo.edge),
        ])
        .args(["-H", &format!("x-token: {key}")])
        .args([
            "-H",
            &format!("Cookie: nl_session={session}; nl_csrf={csrf}"),
        ])
        .args(["-H", &format!("X-CSRF-Token: {csrf}")])
        .args(["--generation-with-security-parameters", "false"])
        .args(["--exclude-operation-id", "console_logout"])
        .args(["--seed", "7", "--continue-on-failure"])
        .env("NO_COLOR", "1")
        .env("PYTHONPATH", root().join("tests/py"))
        .env("SCHEMATHESIS_HOOKS", "contract_hooks");
    run
}

/// The contract (issue 23): every route of the manifests has a schema (on an origin
/// and an edge-mode gateway), `docs/openapi.json` is what the code builds, the running
/// edge serves the same document, and schemathesis finds nothing against the demo stack
/// with each plan's key and a console session: every status documented, every answer
/// matching its schema, every error in its surface's envelope with a listed code.
#[test]
fn the_contract_holds_against_the_demo_stack() {
    let demo_app = root().join("conf/demo.yaml");
    let (ok, document, err) = openapi(&demo_app, true);
    assert!(ok, "{err}");
    let document: serde_json::Value = serde_json::from_str(&document).unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("docs/openapi.json")).unwrap())
            .unwrap();
    assert!(
        document == written,
        "docs/openapi.json is stale: chainedge --app conf/demo.yaml openapi --strict > docs/openapi.json"
    );
    // Edge mode adds the edge-only routes: they have schemas too.
    let dir = tempdir("edge-mode");
    let edge_app = dir.join("app.yaml");
    let text = std::fs::read_to_string(&demo_app).unwrap().replace(
        "plugins: ../plugins",
        &format!("plugins: {}", root().join("plugins").display()),
    );
    std::fs::write(&edge_app, format!("{text}\nbase_mode: edge\n")).unwrap();
    let (ok, edge_doc, err) = openapi(&edge_app, true);
    assert!(ok, "{err}");
    assert!(
        edge_doc.contains("base_page"),
        "edge-only routes are in the document"
    );

    let (demo, keys) = start_demo();
    let served = request(demo.edge, "GET", "/openapi.json", &[], b"").unwrap();
    assert_eq!(served.status, 200);
    assert!(
        served.json() == document,
        "the edge serves the built document"
    );
    let session = console_session(&demo);
    // Each plan's key but the highest (its own test, beside this one): the lower plans
    // mostly meet their 403s and 429s.
    let report = dir.join("schemathesis");
    for (plan, seconds, examples) in [
        ("free", "15", "3"),
        ("basic", "15", "3"),
        ("pro", "15", "3"),
        ("business", "15", "3"),
        ("enterprise", "15", "3"),
    ] {
        let key = keys[plan].as_str().unwrap();
        let out = contract_run(&demo, key, &session)
            .args([
                "-c",
                "status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,negative_data_rejection,unsupported_method",
            ])
            .args(["-n", examples, "--max-time", seconds, "--request-timeout", "10"])
            .args(["--report-dir"])
            .arg(&report)
            .output()
            .expect("schemathesis (make setup installs it)");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "schemathesis with the {plan} key:\n{said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.contains("passed"), "{said}");
    }

    let _ = std::fs::remove_dir_all(dir);
}

/// The contract with the highest plan's key, which reaches every handler: schemathesis
/// finds nothing (run beside the lower plans' test: each starts its own demo stack).
#[test]
fn the_contract_holds_for_the_plan_that_reaches_every_handler() {
    let dir = tempdir("contract-scale");
    let (demo, keys) = start_demo();
    let session = console_session(&demo);
    let out = contract_run(&demo, keys["scale"].as_str().unwrap(), &session)
        .args([
            "-c",
            "status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,negative_data_rejection,unsupported_method",
        ])
        .args(["-n", "10", "--max-time", "100", "--request-timeout", "10"])
        .args(["--report-dir"])
        .arg(dir.join("schemathesis"))
        .output()
        .expect("schemathesis (make setup installs it)");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("passed"),
        "schemathesis with the scale key:\n{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Every tag with `positive_data_acceptance`: what the contract allows is accepted.
#[test]
fn what_the_contract_allows_the_demo_stack_accepts() {
    let (demo, keys) = start_demo();
    let session = console_session(&demo);
    // Every tag with `positive_data_acceptance`: what the contract allows is
    // accepted (the formats tests/py/contract_hooks.py teaches generate real Solana keys
    // and signatures, and future times). Left out of this one check, each because no
    // schema can generate a valid request (each is tested with real values elsewhere):
    let not_generable: &[&str] = &[
        // a WebSocket handshake (tests/websocket.rs, streams.rs, firehose.rs)
        "eth_rpc_get",
        // the node decides which of its paths and event topics exist (tests/streams.rs,
        // heimdall.rs)
        "eth_beacon",
        "streams_beacon_events",
        "eth_mev_relay",
        "polygon_heimdall_get",
        "polygon_heimdall_post",
        // a signed transaction of a funded account, or a mined one (tests/txs.rs, sol.rs,
        // polygon.rs)
        "eth_sender_raw",
        "eth_sender_bundle",
        "polygon_sender_raw",
        "sol_sender_tx",
        "sol_sender_bundle",
        "polygon_trace_replay_tx",
        // a URL resolving to an allowed address (tests/txs.rs, sol_watch.rs, team.rs)
        "eth_tx_hooks_create",
        "sol_watchlist_create",
        "console_tx_hooks_create",
        "console_sol_watchlist_create",
        // a page cursor the server issued (tests/index.rs)
        "eth_wallet_history",
        "polygon_wallet_history",
        // bounds across parameters: from before to, at most 100,000 rows (tests/usage.rs)
        "admin_usage",
        // origins, addresses and ranges parsed, not patterned (tests/restrictions.rs)
        "console_keys_create",
        "console_keys_rename",
        // a code that was emailed, a signature over a challenge for the chain's kind of
        // address (tests/console.rs, browser.rs)
        "console_login_email_verify",
        "console_login_wallet_challenge",
        "console_login_wallet_verify",
    ];
    let mut run = contract_run(&demo, keys["scale"].as_str().unwrap(), &session);
    // the WebSocket channels: a handshake, as above
    run.args(["--exclude-path-regex", "^/ws/"]);
    for operation in not_generable {
        run.args(["--exclude-operation-id", operation]);
    }
    let out = run
        .args([
            "-c",
            "positive_data_acceptance,status_code_conformance,content_type_conformance,response_schema_conformance,negative_data_rejection",
        ])
        // Generated cases only: the coverage phase's boundary strings ignore the named
        // formats above.
        .args(["--phases", "examples,fuzzing"])
        .args(["-n", "10", "--max-time", "200", "--request-timeout", "10"])
        .output()
        .expect("schemathesis");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("passed"),
        "schemathesis, every tag, positive data:\n{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every code block of `docs/examples.md` (curl, web3.py, ethers, viem) runs as written
/// against the demo stack with a pro key, and succeeds.
#[test]
fn the_documented_examples_run_against_the_demo() {
    let page = std::fs::read_to_string(root().join("docs/examples.md")).unwrap();
    let mut blocks: Vec<(String, String)> = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in page.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some("")) => blocks.push(open.take().unwrap()),
            (Some((_, code)), _) => {
                code.push_str(line);
                code.push('\n');
            }
            (None, None) => {}
        }
    }
    let runnable: Vec<&(String, String)> = blocks.iter().filter(|(l, _)| l != "text").collect();
    assert!(runnable.len() >= 8, "{} blocks", runnable.len());

    let (demo, keys) = start_demo();
    // The chain index commits its first block a moment after the demo answers.
    let key = keys["pro"].as_str().unwrap();
    let tokens = "/v1/eth/wallet/0x00000000000000000000000000000000000a11ce/tokens";
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !matches!(request(demo.edge, "GET", tokens, &[("x-token", key)], b""), Ok(r) if r.status == 200)
    {
        assert!(
            std::time::Instant::now() < until,
            "the demo's index never became ready"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for (lang, code) in runnable {
        let mut cmd = match lang.as_str() {
            "sh" => {
                let mut c = Command::new("bash");
                c.args(["-euo", "pipefail", "-c", code]);
                c
            }
            "python" => {
                let mut c = Command::new(python());
                c.args(["-c", code]);
                c
            }
            "js" => {
                let mut c = Command::new("node");
                c.args(["--input-type=module", "-e", code]);
                c
            }
            other => panic!("docs/examples.md: a block in {other}: run it or mark it text"),
        };
        let out = cmd
            .current_dir(root())
            .env("BASE", format!("http://127.0.0.1:{}", demo.edge))
            .env("KEY", keys["pro"].as_str().unwrap())
            .env("W", "0x00000000000000000000000000000000000a11ce")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !said.trim().is_empty(),
            "docs/examples.md ({lang}) failed:\n{code}\n--- stdout\n{said}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// SIGHUP reloads the app configuration in place under load: no request fails, a
/// WebSocket session and its subscription carry on, the new limits apply to the next
/// requests; a broken file is refused with its reason in the log and the running
/// configuration is kept.
#[test]
fn sighup_reloads_in_place_under_load() {
    let anvil = Anvil::start(1, &[]);
    let limits = |n: u64| {
        format!("limits:\n  default: {{anonymous: {n}, free: {n}, basic: {n}, pro: {n}, business: {n}, enterprise: {n}, scale: {n}}}\n")
    };
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [ws]}}\n",
            anvil.url()
        ),
        extra_yaml: limits(1_000_000),
        ..Default::default()
    });
    let key = gw.key("pro", &[]);
    let limit_seen = || {
        rpc(
            gw.port,
            "/rpc/eth",
            Some(&key),
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}),
        )
        .header("x-ratelimit-limit")
        .map(str::to_string)
    };
    assert_eq!(limit_seen().as_deref(), Some("1000000"));

    // A WebSocket session with a subscription, held across the reload.
    let stream = std::net::TcpStream::connect(("127.0.0.1", gw.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut req = tungstenite::client::IntoClientRequest::into_client_request(format!(
        "ws://127.0.0.1:{}/rpc/eth",
        gw.port
    ))
    .unwrap();
    req.headers_mut().insert("x-token", key.parse().unwrap());
    let mut ws = tungstenite::client(req, stream).expect("upgrade").0;
    let ask = |ws: &mut tungstenite::WebSocket<std::net::TcpStream>, body: serde_json::Value| {
        ws.send(tungstenite::Message::text(body.to_string()))
            .unwrap();
        loop {
            if let tungstenite::Message::Text(t) = ws.read().unwrap() {
                let v: serde_json::Value = serde_json::from_str(&t).unwrap();
                if v.get("id").is_some() {
                    return v;
                }
            }
        }
    };
    let sub = ask(
        &mut ws,
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}),
    );
    assert!(sub["result"].is_string(), "{sub}");

    // Load from 3 clients throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let (stop, ok, failures, key, port) =
                (stop.clone(), ok.clone(), failures.clone(), key.clone(), gw.port);
            std::thread::spawn(move || {
                let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []});
                while !stop.load(Ordering::Relaxed) {
                    match request(port, "POST", "/rpc/eth", &[("Authorization", &format!("Bearer {key}"))], body.to_string().as_bytes()) {
                        Ok(r) if r.status == 200 => {
                            ok.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(r) => failures.lock().unwrap().push(format!("{} {}", r.status, r.text())),
                        Err(e) => failures.lock().unwrap().push(e.to_string()),
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));

    // New limits, then SIGHUP.
    let app = std::fs::read_to_string(&gw.app).unwrap();
    std::fs::write(&gw.app, app.replace(&limits(1_000_000), &limits(500_000))).unwrap();
    let pid = gw.proc.as_ref().unwrap().pid();
    gw.proc.as_ref().unwrap().signal("HUP");
    // Until the reload with `outcome` has been counted.
    let reloaded = |outcome: &str| {
        let metric = format!("chainedge_config_reloads_total{{outcome=\"{outcome}\"}}");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while metric_value(&gw, &metric) < 1.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no reload {outcome}: {}",
                gw.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    reloaded("ok");
    assert_eq!(limit_seen().as_deref(), Some("500000"));
    std::thread::sleep(Duration::from_millis(500));

    // A broken file: refused, said why, the running configuration kept.
    std::fs::write(
        &gw.app,
        format!(
            "{}\nlimits_typo: 1\n",
            app.replace(&limits(1_000_000), &limits(500_000))
        ),
    )
    .unwrap();
    gw.proc.as_ref().unwrap().signal("HUP");
    reloaded("refused");
    assert!(
        gw.stderr_tail().contains("reload refused"),
        "{}",
        gw.stderr_tail()
    );
    assert!(
        gw.stderr_tail().contains("limits_typo"),
        "{}",
        gw.stderr_tail()
    );
    assert_eq!(limit_seen().as_deref(), Some("500000"));
    std::thread::sleep(Duration::from_millis(300));

    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let failures = failures.lock().unwrap();
    let total = ok.load(Ordering::Relaxed);
    eprintln!(
        "two SIGHUPs under load: {total} requests answered, {} failed",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(total > 100, "{total}");
    // Still the same process, and the session and its subscription carry on.
    assert!(listens_on(pid, gw.port));
    let n = ask(
        &mut ws,
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber", "params": []}),
    );
    assert!(n["result"].is_string(), "{n}");
    anvil.mine(1);
    let head = loop {
        if let tungstenite::Message::Text(t) = ws.read().unwrap() {
            let v: serde_json::Value = serde_json::from_str(&t).unwrap();
            if v["method"] == "eth_subscription" {
                break v;
            }
        }
    };
    assert_eq!(head["params"]["subscription"], sub["result"]);
}
