//! Two instances as one edge: one PostgreSQL store and one Redis (both started here),
//! as behind a load balancer. A plan's limit holds across both; a key revoked through one
//! is refused by the other within 1 s; with Redis killed each instance keeps serving
//! under its own limits, and sharing comes back by itself.

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// A heimdall node: its health probe, and an echo for everything else.
fn heimdall() -> Fixture {
    Fixture::start(|req| match req.path.as_str() {
        "/status" => FixtureResponse::json(serde_json::json!(
            {"result": {"sync_info": {"latest_block_height": "100", "catching_up": false}}}
        )),
        _ => FixtureResponse::json(serde_json::json!({"path": req.path})),
    })
}

/// The tests here each hammer two instances: run one at a time, so neither starves the
/// other's sync rounds of CPU.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Pro callers get 10 requests/s (bursts to 20) on every category.
const LIMITS: &str = "limits:\n  burst: 2\n  horizon_secs: 10\n  default: {anonymous: 10, free: 10, basic: 10, pro: 10, business: 10, enterprise: 10, scale: 10}\n";

/// One instance of the cluster: a heimdall pool of `node`, the store on `postgres`,
/// `redis` shared, `extra` YAML (limits, usage).
fn instance(node: &Fixture, postgres: &str, redis: &str, extra: &str) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
            node.url()
        ),
        postgres: Some(postgres.to_string()),
        redis: Some(redis.to_string()),
        extra_yaml: extra.into(),
        ..Default::default()
    })
}

/// The heimdall echo through the edge with `key`.
fn echo(port: u16, key: &str) -> std::io::Result<Resp> {
    request(
        port,
        "GET",
        "/v1/polygon/heimdall/echo",
        &[("x-token", key)],
        b"",
    )
}

fn status(port: u16, key: &str) -> u16 {
    echo(port, key).map(|r| r.status).unwrap_or(0)
}

/// Send as fast as one client can to `port` for `secs`: (admitted, refused, other).
fn hammer(port: u16, key: String, secs: u64) -> std::thread::JoinHandle<(u32, u32, u32)> {
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(secs);
        let (mut ok, mut limited, mut other) = (0, 0, 0);
        while Instant::now() < until {
            match status(port, &key) {
                200 => ok += 1,
                429 => limited += 1,
                _ => other += 1,
            }
        }
        (ok, limited, other)
    })
}

fn redis_up(gw: &Gateway) -> Option<i64> {
    let text = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .ok()?
        .text();
    text.lines()
        .find_map(|l| l.strip_prefix("chainedge_cluster_redis_up "))
        .and_then(|v| v.trim().parse().ok())
}

fn wait_for(what: &str, within: Duration, mut check: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while start.elapsed() < within {
        if check() {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("{what}: not within {within:?}");
}

#[test]
fn a_limit_holds_across_instances_revocations_spread_and_redis_loss_falls_back() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut redis = RedisServer::start();
    let pg = PgServer::start();
    let db = pg.create_db();
    let node = heimdall();
    let a = instance(&node, &db, &redis.url(), LIMITS);
    let b = instance(&node, &db, &redis.url(), LIMITS);
    wait_for("redis up on both", Duration::from_secs(10), || {
        redis_up(&a) == Some(1) && redis_up(&b) == Some(1)
    });
    // What the balancer checks.
    let health = request(a.metrics_port, "GET", "/healthz", &[], b"").unwrap();
    assert_eq!(
        (health.status, health.text().as_str()),
        (200, r#"{"status":"serving"}"#)
    );

    // One tenant hammering both instances for 4 s. The short-term ceiling is 20 in any
    // second (the ten-second budget, 110, does not bind yet): alone, each instance
    // would admit about 80, 160 together; shared, both together admit about 80.
    let key = a.key("pro", &[]);
    let (ha, hb) = (hammer(a.port, key.clone(), 4), hammer(b.port, key, 4));
    let ((ok_a, lim_a, other_a), (ok_b, lim_b, other_b)) = (ha.join().unwrap(), hb.join().unwrap());
    let admitted = ok_a + ok_b;
    eprintln!("admitted {ok_a} on A + {ok_b} on B = {admitted} in 4 s; refused {lim_a} + {lim_b}");
    assert_eq!((other_a, other_b), (0, 0), "only 200 and 429");
    assert!(ok_a > 0 && ok_b > 0, "both instances served");
    assert!(lim_a > 0 && lim_b > 0, "both instances refused");
    // Bound: one budget over a 4 s run that touches 5 seconds admits at most 100; a
    // caller new to both instances gets its first burst (20) from each alone until the
    // first sync round; a round of the other's traffic (100 ms, longer on a loaded box)
    // may go unseen. Unshared, the same run admits ~160.
    assert!(
        (60..=130).contains(&admitted),
        "{admitted} admitted across both in 4 s (one budget is ~80, two ~160)"
    );

    // A key revoked through A (the CLI with A's config) is refused by B, which had it
    // cached, within 1 s.
    let (key, id) = a.key_and_id("pro");
    assert_eq!(status(b.port, &key), 200);
    a.cli(&["keys", "revoke", "--id", &id]);
    let took = wait_for("revocation on B", Duration::from_secs(1), || {
        status(b.port, &key) == 401
    });
    eprintln!("revoked through the CLI; refused by B after {took:?}");

    // A tenant moved from pro to free through A's CLI: B, which had its key cached as
    // pro, applies the new plan within 1 s (a basic-tier route: let through, then 403).
    let tenant = a.cli(&["tenants", "create", "--name", "mover", "--plan", "pro"]);
    let key = a.cli(&["keys", "create", "--tenant", tenant.as_str()]);
    let basic_route = |port: u16| {
        request(
            port,
            "GET",
            "/v1/polygon/checkpoints/1",
            &[("x-token", &key)],
            b"",
        )
        .map(|r| r.status)
        .unwrap_or(0)
    };
    let before = basic_route(b.port);
    assert!(before != 403 && before != 0, "{before}");
    a.cli(&[
        "tenants",
        "set-plan",
        "--tenant",
        tenant.as_str(),
        "--plan",
        "free",
    ]);
    let took = wait_for("plan change on B", Duration::from_secs(1), || {
        basic_route(b.port) == 403
    });
    eprintln!("plan changed through the CLI; applied by B after {took:?}");

    // Redis killed: both keep serving on their own limits, and say so.
    let key = a.key("pro", &[]);
    redis.kill();
    wait_for("redis down on A", Duration::from_secs(5), || {
        redis_up(&a) == Some(0)
    });
    for _ in 0..5 {
        assert_eq!(status(a.port, &key), 200);
        assert_eq!(status(b.port, &key), 200);
    }
    // Back: sharing resumes without a restart.
    redis.restart();
    let took = wait_for("redis up again", Duration::from_secs(10), || {
        redis_up(&a) == Some(1) && redis_up(&b) == Some(1)
    });
    eprintln!("redis back; both instances sharing again after {took:?}");
}

/// The control for the test above: the same load on two instances without Redis admits
/// about twice as much, each instance limiting alone.
#[test]
fn without_redis_each_instance_limits_alone() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pg = PgServer::start();
    let db = pg.create_db();
    let node = heimdall();
    let alone = |db: &str| {
        Gateway::start(GatewayOpts {
            pools: format!(
                "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
                node.url()
            ),
            postgres: Some(db.to_string()),
            extra_yaml: LIMITS.into(),
            ..Default::default()
        })
    };
    let (a, b) = (alone(&db), alone(&db));
    let key = a.key("pro", &[]);
    let (ha, hb) = (hammer(a.port, key.clone(), 4), hammer(b.port, key, 4));
    let ((ok_a, _, _), (ok_b, _, _)) = (ha.join().unwrap(), hb.join().unwrap());
    eprintln!("without Redis: admitted {ok_a} on A + {ok_b} on B in 4 s");
    assert!(ok_a + ok_b >= 130, "{} admitted", ok_a + ok_b);
}

/// An MEV-Share node streaming one hint every 100 ms.
fn mev_share_node() -> Fixture {
    Fixture::start(|req| match req.path.as_str() {
        "/" if req.header("accept") == Some("text/event-stream") => FixtureResponse::events(
            vec!["data: {\"hash\":\"0x01\"}\n\n".into()],
            Duration::from_millis(100),
        ),
        _ => FixtureResponse::status(404, "not here"),
    })
}

/// The MEV-Share stream; its status and, while open, the socket.
fn open_stream(port: u16, key: &str) -> (u16, std::net::TcpStream) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /sse/eth-mev-share HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    (status.unwrap_or(0), s)
}

/// A WebSocket on `/rpc/eth`: the socket, or the refusal's status.
fn open_ws(port: u16, key: &str) -> Result<tungstenite::WebSocket<std::net::TcpStream>, u16> {
    use tungstenite::client::IntoClientRequest;
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut req = format!("ws://127.0.0.1:{port}/rpc/eth")
        .into_client_request()
        .unwrap();
    req.headers_mut().insert("x-token", key.parse().unwrap());
    match tungstenite::client(req, stream) {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
            Err(r.status().as_u16())
        }
        Err(e) => panic!("handshake: {e}"),
    }
}

/// Stream caps and filters across two instances: a user's one MEV-Share stream and a
/// key's WebSocket connections are counted across both (a place freed on one is free on
/// the other at once); a filter created through one is polled and uninstalled through
/// the other, always on the node that holds it.
#[test]
fn stream_caps_and_filters_hold_across_instances() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let redis = RedisServer::start();
    let pg = PgServer::start();
    let db = pg.create_db();
    let mev = mev_share_node();
    // Two nodes, so a poll sent to the wrong one would find no filter.
    let (n1, n2) = (Anvil::start(1, &[]), Anvil::start(1, &[]));
    let start = || {
        Gateway::start(GatewayOpts {
            pools: format!(
                "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil, capabilities: [ws]}}\n      - {{id: el-2, url: \"{}\", family: el-anvil, capabilities: [ws]}}\n  eth_mev_share:\n    hosts:\n      - {{id: mevshare-1, url: \"{}\", family: mev-share}}\n",
                n1.url(),
                n2.url(),
                mev.url()
            ),
            postgres: Some(db.clone()),
            redis: Some(redis.url()),
            extra_yaml: format!("{UNLIMITED}streams:\n  websocket:\n    max_connections_per_key: {{default: 2}}\n    max_subscriptions_per_key: {{default: 2}}\n"),
            ..Default::default()
        })
    };
    let (a, b) = (start(), start());
    wait_for("redis up on both", Duration::from_secs(10), || {
        redis_up(&a) == Some(1) && redis_up(&b) == Some(1)
    });
    let key = a.key("scale", &[]);

    // One MEV-Share stream per user: open on A, refused on B; freed on A, open on B.
    let (status, held) = open_stream(a.port, &key);
    assert_eq!(status, 200);
    assert_eq!(open_stream(b.port, &key).0, 429, "second stream on B");
    assert_eq!(open_stream(a.port, &key).0, 429, "second stream on A");
    drop(held);
    let took = wait_for("stream place freed", Duration::from_secs(2), || {
        open_stream(b.port, &key).0 == 200
    });
    eprintln!("MEV-Share place closed on A, open on B after {took:?}");

    // Two WebSocket connections per key, wherever they land.
    let ws_a = open_ws(a.port, &key).expect("first on A");
    let mut ws_b = open_ws(b.port, &key).expect("second on B");
    assert_eq!(open_ws(a.port, &key).err(), Some(429), "third on A");
    assert_eq!(open_ws(b.port, &key).err(), Some(429), "third on B");
    drop(ws_a);
    wait_for("websocket place freed", Duration::from_secs(2), || {
        open_ws(b.port, &key).is_ok()
    });

    // Two subscriptions per key, wherever they are held.
    // (The probe's connection above frees its place once A reads its end.)
    let mut again = None;
    wait_for("a connection on A again", Duration::from_secs(2), || {
        again = open_ws(a.port, &key).ok();
        again.is_some()
    });
    let mut ws_a = again.expect("a connection on A again");
    let subscribe = |ws: &mut tungstenite::WebSocket<std::net::TcpStream>| {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}"#;
        ws.send(tungstenite::Message::text(call)).unwrap();
        loop {
            if let tungstenite::Message::Text(t) = ws.read().unwrap() {
                let v: serde_json::Value = serde_json::from_str(&t).unwrap();
                if v["id"] == 1 {
                    return v;
                }
            }
        }
    };
    let held_a = subscribe(&mut ws_a);
    assert!(held_a["result"].is_string(), "first on A: {held_a}");
    let held_b = subscribe(&mut ws_b);
    assert!(held_b["result"].is_string(), "second on B: {held_b}");
    let third = subscribe(&mut ws_a);
    assert_eq!(
        third["error"]["data"]["error"], "subscription_cap_exceeded",
        "third on A: {third}"
    );
    drop(ws_b);
    wait_for("subscription place freed", Duration::from_secs(2), || {
        subscribe(&mut ws_a)["result"].is_string()
    });
    drop(ws_a);

    // A block filter made through A, polled through B (each poll must reach its node:
    // the other answers "filter not found"), uninstalled through B, gone on A too.
    let call = |port: u16, method: &str, params: serde_json::Value| {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        rpc(port, "/rpc/eth", Some(&key), &body).json()
    };
    let fid = call(a.port, "eth_newBlockFilter", serde_json::json!([]))["result"]
        .as_str()
        .expect("a filter id")
        .to_string();
    for round in 0..6 {
        n1.mine(1);
        n2.mine(1);
        let port = if round % 2 == 0 { b.port } else { a.port };
        let changes = call(port, "eth_getFilterChanges", serde_json::json!([fid]));
        let hashes = changes["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{changes}"));
        assert_eq!(hashes.len(), 1, "round {round}: {changes}");
    }
    let gone = call(b.port, "eth_uninstallFilter", serde_json::json!([fid]));
    assert_eq!(gone["result"], true, "{gone}");
    let after = call(a.port, "eth_getFilterChanges", serde_json::json!([fid]));
    assert!(
        after.get("result").is_none() && after["error"].is_object(),
        "{after}"
    );
}

/// PostgreSQL stopped under load (20 s, twenty times the key cache's 1 s TTL here; the
/// default TTL is 30 s and keys stay served for 15 min): keys in use keep being served
/// with no error; a key never seen, and a sign-in, get 503 `store_unavailable` with
/// `Retry-After` within 1 s; a key revoked before the outage stays refused; and when the
/// database is back everything answers as before, without a restart.
#[test]
fn a_postgres_outage_keeps_keys_in_use_serving() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let redis = RedisServer::start();
    let mut pg = PgServer::start();
    let db = pg.create_db();
    let node = heimdall();
    let outbox = tempdir("outage").join("outbox.jsonl");
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
            node.url()
        ),
        postgres: Some(db),
        redis: Some(redis.url()),
        extra_yaml: "auth:\n  key_cache_ttl_ms: 1000\n".into(),
        console_yaml: format!("  email:\n    outbox: {}\n", outbox.display()),
        ..Default::default()
    });
    wait_for("redis up", Duration::from_secs(10), || {
        redis_up(&gw) == Some(1)
    });
    let in_use: Vec<String> = (0..2).map(|_| gw.key("pro", &[])).collect();
    let never_seen = gw.key("pro", &[]);
    let (revoked, revoked_id) = gw.key_and_id("pro");
    for k in in_use.iter().chain([&revoked]) {
        assert_eq!(status(gw.port, k), 200);
    }
    gw.cli(&["keys", "revoke", "--id", &revoked_id]);
    wait_for("revocation", Duration::from_secs(2), || {
        status(gw.port, &revoked) == 401
    });

    // One client sends with the keys in use throughout; the database goes away.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = {
        let (stop, keys, port) = (stop.clone(), in_use.clone(), gw.port);
        std::thread::spawn(move || {
            let (mut ok, mut failed) = (0u32, Vec::new());
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match status(port, &keys[i % keys.len()]) {
                    200 => ok += 1,
                    s => failed.push(s),
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            (ok, failed)
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    pg.stop();
    let outage = Instant::now();

    // Asked during the outage, each answered within 1 s.
    let mut slowest = Duration::ZERO;
    while outage.elapsed() < Duration::from_secs(20) {
        let started = Instant::now();
        let r = echo(gw.port, &never_seen).unwrap();
        assert_eq!(r.status, 503, "{}", r.text());
        assert_eq!(r.json()["error"], "store_unavailable");
        assert!(r.header("retry-after").is_some());
        let r = request(
            gw.port,
            "POST",
            "/v1/auth/email/start",
            &[("content-type", "application/json")],
            br#"{"email":"someone@example.com"}"#,
        )
        .unwrap();
        assert_eq!(r.status, 503, "{}", r.text());
        assert!(r.header("retry-after").is_some());
        assert_ne!(status(gw.port, &revoked), 200, "a revoked key was let in");
        slowest = slowest.max(started.elapsed());
        std::thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = client.join().unwrap();
    let stale = request(gw.metrics_port, "GET", "/metrics", &[], b"")
        .unwrap()
        .text()
        .lines()
        .find_map(|l| l.strip_prefix("chainedge_keys_served_stale_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    eprintln!(
        "20 s without PostgreSQL: {ok} requests on keys in use, {} failed; {stale} admitted \
         on a stale cache entry; slowest refusal round {slowest:?}",
        failed.len()
    );
    assert!(failed.is_empty(), "keys in use failed: {failed:?}");
    assert!(ok > 100 && stale > 0.0, "{ok} {stale}");
    assert!(
        slowest < Duration::from_secs(1),
        "{slowest:?} for three requests"
    );

    // Back: the unseen key is read and served.
    pg.restart();
    wait_for("store back", Duration::from_secs(10), || {
        status(gw.port, &never_seen) == 200
    });
    assert_eq!(status(gw.port, &revoked), 401);
}

/// `conf/haproxy-cluster.cfg` as shipped, its two servers `a` and `b` (addresses and
/// ports substituted, nothing else), under a descriptor limit of 4096; answering `key`
/// when this returns. The process and its port.
fn shipped_haproxy(a: &Gateway, b: &Gateway, key: &str) -> (Proc, u16) {
    // haproxy binds with SO_REUSEPORT: should a proxy alongside have taken the same
    // free port, both would listen and split the load. Then on another port.
    for _ in 0..3 {
        let port = free_port();
        let (mut haproxy, err) = spawn_shipped_haproxy(a, b, port);
        wait_for("haproxy up", Duration::from_secs(10), || {
            status(port, key) == 200
        });
        assert!(
            haproxy.child.try_wait().unwrap().is_none(),
            "haproxy exited: {}",
            std::fs::read_to_string(err).unwrap_or_default()
        );
        if listens_alone_on(haproxy.pid(), port) {
            return (haproxy, port);
        }
        let _ = haproxy.child.kill();
    }
    panic!("haproxy shared its port with another listener three times");
}

/// haproxy on `conf/haproxy-cluster.cfg`, bound to `port` and balancing `a` and `b`;
/// with the file its errors go to.
fn spawn_shipped_haproxy(a: &Gateway, b: &Gateway, port: u16) -> (Proc, std::path::PathBuf) {
    let shipped = std::fs::read_to_string(root().join("conf/haproxy-cluster.cfg")).unwrap();
    let mut cfg = shipped.clone();
    for (from, to) in [
        ("bind :8080".to_string(), format!("bind 127.0.0.1:{port}")),
        (
            "10.0.0.11:8080 check port 9090".to_string(),
            format!("127.0.0.1:{} check port {}", a.port, a.metrics_port),
        ),
        (
            "10.0.0.12:8080 check port 9090".to_string(),
            format!("127.0.0.1:{} check port {}", b.port, b.metrics_port),
        ),
    ] {
        assert!(
            cfg.contains(&from),
            "the shipped config no longer has {from:?}"
        );
        cfg = cfg.replace(&from, &to);
    }
    let dir = tempdir("haproxy");
    std::fs::write(dir.join("haproxy.cfg"), cfg).unwrap();
    let haproxy = Proc {
        child: std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n 4096 && exec haproxy -db -f {}",
                dir.join("haproxy.cfg").display()
            ))
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("haproxy.err")).unwrap())
            .spawn()
            .expect("haproxy (scripts/setup.sh installs it)"),
    };
    (haproxy, dir.join("haproxy.err"))
}

/// `conf/haproxy-cluster.cfg` as shipped (its addresses and ports substituted, nothing
/// else), under a descriptor limit of 4096: one instance SIGKILLed under load costs no
/// client an error.
#[test]
fn the_shipped_haproxy_config_hides_an_instance_dying() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let redis = RedisServer::start();
    let pg = PgServer::start();
    let db = pg.create_db();
    let node = heimdall();
    let start = || instance(&node, &db, &redis.url(), UNLIMITED);
    let (a, mut b) = (start(), start());
    let key = a.key("pro", &[]);

    let (mut haproxy, port) = shipped_haproxy(&a, &b, &key);

    // Three clients through haproxy; instance B is SIGKILLed 1.5 s in.
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let key = key.clone();
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(5);
                let (mut ok, mut failed) = (0u32, Vec::new());
                while Instant::now() < until {
                    match echo(port, &key) {
                        Ok(r) if r.status == 200 => ok += 1,
                        Ok(r) => failed.push(format!("{} {}", r.status, r.text())),
                        Err(e) => failed.push(e.to_string()),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    b.proc.take().unwrap().child.kill().unwrap();
    let (mut ok, mut failed) = (0, Vec::new());
    for c in clients {
        let (o, f) = c.join().unwrap();
        ok += o;
        failed.extend(f);
    }
    eprintln!(
        "instance SIGKILLed behind the shipped haproxy config: {ok} answered, {} failed",
        failed.len()
    );
    assert!(failed.is_empty(), "client errors: {failed:?}");
    assert!(ok > 200, "{ok}");
    let _ = haproxy.child.kill();
}

/// As systemd runs it (`-d`: Pingora forks after the store was opened and migrated), an
/// instance on PostgreSQL reads its keys: the daemon makes its own
/// connections rather than waiting on a runtime that stayed in its parent.
#[test]
fn a_daemon_on_postgres_reads_the_store() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pg = PgServer::start();
    let node = heimdall();
    let mut gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
            node.url()
        ),
        postgres: Some(pg.create_db()),
        ..Default::default()
    });
    let mut proc = gw.proc.take().unwrap();
    proc.signal("TERM");
    assert!(proc.exited_within(Duration::from_secs(10)));
    let key = gw.key("pro", &[]);
    let parent = std::process::Command::new(bin())
        .args(["-d", "-c"])
        .arg(&gw.server_conf)
        .arg("--app")
        .arg(&gw.app)
        .envs(gw.env.iter().cloned())
        .status()
        .unwrap();
    assert!(parent.success());
    let pid_file = gw.dir.join("pid");
    wait_for("the daemon", Duration::from_secs(20), || {
        status(gw.port, &key) != 0
    });
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_string();
    let started = Instant::now();
    let answered = status(gw.port, &key);
    let took = started.elapsed();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert_eq!(
        answered, 200,
        "a key lookup from the daemon (after {took:?})"
    );
}

/// The p-th percentile of `samples` (sorted here).
fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

/// Clients sending on `keys` in turn until `stop`: each answer's status and latency, per
/// key.
type Answers = Vec<(usize, u16, Duration)>;

fn keyed_load(
    port: u16,
    keys: Vec<String>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<std::thread::JoinHandle<Answers>> {
    (0..2)
        .map(|n| {
            let (keys, stop) = (keys.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut i = n;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = i % keys.len();
                    let started = Instant::now();
                    let s = status(port, &keys[k]);
                    out.push((k, s, started.elapsed()));
                    i += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                out
            })
        })
        .collect()
}

/// PostgreSQL hung (SIGSTOP on the server and its backends: it neither answers nor
/// refuses) for 75 s under keyed load. Keys in use answer as before (p99 within 2x of
/// the minute before), an unseen key is refused 503 within 1 s every time, and once the
/// server thaws every answered call is in the store exactly once.
#[test]
fn a_hung_postgres_costs_keys_in_use_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let pg = PgServer::start();
    let db = pg.create_db();
    let node = heimdall();
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
            node.url()
        ),
        postgres: Some(db),
        extra_yaml: format!(
            "{UNLIMITED}auth:\n  key_cache_ttl_ms: 1000\nusage:\n  flush_interval_ms: 500\n"
        ),
        ..Default::default()
    });
    let (keys, ids): (Vec<String>, Vec<String>) = (0..2).map(|_| gw.key_and_id("pro")).unzip();
    let never_seen = gw.key("pro", &[]);
    let run = |secs: u64, during: &mut dyn FnMut()| -> Answers {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clients = keyed_load(gw.port, keys.clone(), stop.clone());
        let until = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < until {
            during();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        clients
            .into_iter()
            .flat_map(|c| c.join().unwrap())
            .collect()
    };
    let before = run(10, &mut || std::thread::sleep(Duration::from_millis(100)));

    pg.signal("STOP");
    let mut refusals = Vec::new();
    let during = run(75, &mut || {
        let started = Instant::now();
        let r = echo(gw.port, &never_seen).unwrap();
        refusals.push((r.status, started.elapsed()));
        std::thread::sleep(Duration::from_millis(1000));
    });
    pg.signal("CONT");

    let latencies = |a: &Answers| a.iter().map(|(_, _, d)| *d).collect::<Vec<_>>();
    let (p99_before, p99_during) = (
        percentile(&mut latencies(&before), 0.99),
        percentile(&mut latencies(&during), 0.99),
    );
    let slowest_refusal = refusals.iter().map(|(_, d)| *d).max().unwrap();
    eprintln!(
        "PostgreSQL hung 75 s: keys in use p99 {p99_before:?} before, {p99_during:?} during \
         ({} and {} calls); {} unseen-key refusals, the slowest {slowest_refusal:?}",
        before.len(),
        during.len(),
        refusals.len()
    );
    let failed: Vec<_> = before
        .iter()
        .chain(&during)
        .filter(|(_, s, _)| *s != 200)
        .collect();
    assert!(
        failed.is_empty(),
        "{} calls on keys in use failed, the first: {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(during.len() > 1000, "too little load to mean anything");
    // Twice the minute before, and a millisecond for a busy machine's scheduling.
    assert!(
        p99_during <= p99_before * 2 + Duration::from_millis(1),
        "{p99_during:?} against {p99_before:?}"
    );
    // The first refusal may wait out one store deadline; every one within 1 s.
    assert!(refusals.iter().all(|(s, _)| *s == 503), "{refusals:?}");
    assert!(
        slowest_refusal < Duration::from_secs(1),
        "{slowest_refusal:?}"
    );

    // Thawed: every call answered is counted once.
    for (k, id) in ids.iter().enumerate() {
        let answered = before
            .iter()
            .chain(&during)
            .filter(|(i, _, _)| *i == k)
            .count() as i64;
        wait_for("the counts", Duration::from_secs(20), || {
            let r = gw.get(
                &format!("/v1/admin/usage?key={id}&step=day"),
                &[("x-admin-token", "test-admin-token")],
            );
            let rows = if r.status == 200 {
                r.json()["rows"].clone()
            } else {
                return false;
            };
            let stored: i64 = rows
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["calls"].as_i64().unwrap())
                .sum();
            assert!(
                stored <= answered,
                "{stored} stored for {answered} answered"
            );
            stored == answered
        });
    }
}

/// Rounds the transaction follower of `eth` has run on this instance.
fn follower_rounds(gw: &Gateway) -> f64 {
    let Ok(r) = request(gw.metrics_port, "GET", "/metrics", &[], b"") else {
        return 0.0;
    };
    r.text()
        .lines()
        .filter(|l| l.starts_with("chainedge_capture_rounds_total{"))
        .filter(|l| l.contains("producer=\"txs/follow/eth\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// How many of `instances` ran follower rounds over the next 1.5 s.
fn following(instances: &[&Gateway]) -> usize {
    let before: Vec<f64> = instances.iter().map(|g| follower_rounds(g)).collect();
    std::thread::sleep(Duration::from_millis(1500));
    instances
        .iter()
        .zip(before)
        .filter(|(g, b)| follower_rounds(g) > *b)
        .count()
}

/// Redis hung (SIGSTOP) for 4 s under two instances that follow transactions. While it
/// is away each may follow on its own (fail-open); once it answers again exactly one
/// does (a lease granted without Redis is taken again, and its holder steps down when
/// the other holds it), and a transaction every node dropped is sent again once.
#[test]
fn after_redis_hangs_one_instance_follows_and_resends_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let redis = RedisServer::start();
    let pg = PgServer::start();
    let db = pg.create_db();
    let node = Anvil::start(1, &["--no-mining"]);
    let instance = || {
        Gateway::start(GatewayOpts {
            pools: format!(
                "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-anvil}}\n",
                node.url()
            ),
            postgres: Some(db.clone()),
            redis: Some(redis.url()),
            extra_yaml: format!(
                "{UNLIMITED}tx_tracking:\n  follow_interval_ms: 200\n  resend_after_secs: 1\n"
            ),
            ..Default::default()
        })
    };
    let (a, b) = (instance(), instance());
    wait_for("one follower", Duration::from_secs(30), || {
        following(&[&a, &b]) == 1
    });

    redis.signal("STOP");
    // Without Redis each instance takes the lease on its own (fail-open): both follow.
    std::thread::sleep(Duration::from_millis(1500));
    let while_hung = following(&[&a, &b]);
    std::thread::sleep(Duration::from_millis(1000));
    redis.signal("CONT");
    assert_eq!(while_hung, 2, "the freeze did not reach the lease");
    let settled = wait_for("one follower after Redis", Duration::from_secs(30), || {
        following(&[&a, &b]) == 1
    });
    for _ in 0..3 {
        assert_eq!(following(&[&a, &b]), 1, "two followers again");
    }
    eprintln!(
        "Redis hung 4 s: two followers while it was, one again {settled:?} after it answered"
    );

    // A transaction every node dropped is sent again by the one follower, once.
    let key = a.key("basic", &["rpc:read", "rpc:write"]);
    let tx = json!({"from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "to": "0x000000000000000000000000000000000000dEaD", "value": "0x1",
        "gas": "0x5208", "gasPrice": "0x3b9aca00", "nonce": "0x0", "chainId": "0x1"});
    let raw = node.call("eth_signTransaction", json!([tx]));
    let sent = rpc(
        a.port,
        "/rpc/eth",
        Some(&key),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw]}),
    )
    .json();
    let hash = sent["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_string();
    node.call("anvil_dropTransaction", json!([hash]));
    wait_for("sent again", Duration::from_secs(15), || {
        !node
            .call("eth_getTransactionByHash", json!([hash]))
            .is_null()
    });
    std::thread::sleep(Duration::from_secs(3));
    let followed = b
        .get(&format!("/v1/eth/tx/{hash}"), &[("x-token", &key)])
        .json();
    assert_eq!(followed["resends"], 1, "{followed}");
}

/// `scripts/upgrade.sh` on a daemonized cluster member behind the shipped haproxy config,
/// twice, under load through the balancer: each time the new process serves with its
/// pid in the pid file and the old one is gone, no client sees an error, and every
/// answered call is in the store exactly once.
#[test]
fn the_upgrade_script_upgrades_a_cluster_member_under_load() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let redis = RedisServer::start();
    let pg = PgServer::start();
    let db = pg.create_db();
    let node = heimdall();
    let extra = format!("{UNLIMITED}usage:\n  flush_interval_ms: 500\n");
    let start = || instance(&node, &db, &redis.url(), &extra);
    let (mut a, b) = (start(), start());
    let daemon = a.daemonize();
    let (key, key_id) = a.key_and_id("pro");
    // The balancer's readiness is asked with a key of its own: `key` counts the load.
    let (mut haproxy, port) = shipped_haproxy(&a, &b, &a.key("pro", &[]));

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let (key, stop) = (key.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut ok, mut failed, mut first) = (0i64, Vec::new(), None);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    match echo(port, &key) {
                        Ok(r) if r.status == 200 => ok += 1,
                        other => {
                            failed.push(other.as_ref().map_or(0, |r| r.status));
                            // Who answered, and what: enough to tell a stray listener.
                            first.get_or_insert_with(|| match other {
                                Ok(r) => format!("{:?} {}", r.headers, r.text()),
                                Err(e) => e.to_string(),
                            });
                        }
                    }
                }
                (ok, failed, first)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1000));
    for round in 0..2 {
        let old = daemon.pid().expect("a pid file");
        let (upgraded, said) = a.upgrade_script();
        assert!(upgraded, "round {round}: {said}");
        let new = daemon.pid().expect("a pid file");
        assert_ne!(new, old, "round {round}: {said}");
        assert!(alive(new), "round {round}: {new} is not running: {said}");
        assert!(!alive(old), "round {round}: {old} still runs: {said}");
        std::thread::sleep(Duration::from_millis(1000));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut answered, mut failed, mut first) = (0, Vec::new(), None);
    for c in clients {
        let (o, f, one) = c.join().unwrap();
        answered += o;
        failed.extend(f);
        first = first.or(one);
    }
    let _ = haproxy.child.kill();
    assert!(
        failed.is_empty(),
        "{} failed ({answered} answered): {:?}; the first: {}",
        failed.len(),
        &failed[..failed.len().min(5)],
        first.unwrap_or_default()
    );
    assert!(answered > 200, "{answered}");
    let mut stored = 0;
    wait_for("the counts", Duration::from_secs(20), || {
        let r = b.get(
            &format!("/v1/admin/usage?key={key_id}&step=day"),
            &[("x-admin-token", "test-admin-token")],
        );
        stored = r.json()["rows"].as_array().map_or(0, |rows| {
            rows.iter().map(|r| r["calls"].as_i64().unwrap_or(0)).sum()
        });
        stored >= answered
    });
    eprintln!("two scripted upgrades of a cluster member: {answered} answered, {stored} counted");
    assert_eq!(stored, answered);
}
