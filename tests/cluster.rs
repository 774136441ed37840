//! Two instances as one edge: one PostgreSQL store and one Redis (both started here),
//! as behind a load balancer. A plan's limit holds across both; a key revoked through one
//! is refused by the other within 1 s; with Redis killed each instance keeps serving
//! under its own limits, and sharing comes back by itself.

mod common;

use common::*;
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

fn instance(node: &Fixture, postgres: &str, redis: &str) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  polygon_heimdall:\n    hosts:\n      - {{id: hd-1, url: \"{}\", family: heimdall}}\n",
            node.url()
        ),
        postgres: Some(postgres.to_string()),
        redis: Some(redis.to_string()),
        extra_yaml: LIMITS.into(),
        ..Default::default()
    })
}

fn status(port: u16, key: &str) -> u16 {
    request(
        port,
        "GET",
        "/v1/polygon/heimdall/echo",
        &[("x-token", key)],
        b"",
    )
    .map(|r| r.status)
    .unwrap_or(0)
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
    let a = instance(&node, &db, &redis.url());
    let b = instance(&node, &db, &redis.url());
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
    // Tolerance: one sync round (100 ms) of the other's traffic may go unseen, and a
    // 4 s run touches 5 seconds.
    assert!(
        (60..=110).contains(&admitted),
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
