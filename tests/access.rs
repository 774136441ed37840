//! Identity, plans, scopes and rate limits through the real binary (issue 3): every
//! 401 / 403 / 429 code, and that a refused request never reaches an upstream.

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

const ADDR: &str = "0x00000000219ab540356cBB839Cbe05303d7705Fa";

/// A gateway over `fixture`, its response cache off: these tests count the calls that
/// reach the node, and a kept `eth_chainId` would answer the repeats.
fn gateway_over(fixture: &Fixture, extra_yaml: &str) -> Gateway {
    Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            fixture.url()
        ),
        extra_yaml: format!("rpc:\n  cache: {{enabled: false}}\n{extra_yaml}"),
        ..Default::default()
    })
}

fn chain_id() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "eth_chainId", "params": []})
}

fn post_rpc(gw: &Gateway, headers: &[(&str, &str)]) -> Resp {
    let mut h = vec![("Content-Type", "application/json")];
    h.extend_from_slice(headers);
    request(
        gw.port,
        "POST",
        "/rpc/eth",
        &h,
        chain_id().to_string().as_bytes(),
    )
    .unwrap()
}

/// The refusal's status and code, in the route's envelope: chain REST, or on `/rpc/eth`
/// a JSON-RPC error answer whose `data` carries the same fields. Returns those fields.
fn assert_error(r: &Resp, status: u16, code: &str) -> serde_json::Value {
    assert_eq!(r.status, status, "{}", r.text());
    let body = r.json();
    let fields = if body.get("jsonrpc").is_some() {
        assert!(body["error"]["code"].is_i64(), "{body}");
        body["error"]["data"].clone()
    } else {
        body
    };
    assert_eq!(fields["error"], code, "{}", r.text());
    fields
}

/// A tenant on `plan` (billing dates as the CLI takes them) with one key.
fn tenant_key(gw: &Gateway, plan: &str, billing: &[&str]) -> String {
    let tenant = gw.cli(&["tenants", "create", "--name", "t", "--plan", plan]);
    if !billing.is_empty() {
        let mut args = vec!["tenants", "set-plan", "--tenant", &tenant, "--plan", plan];
        args.extend_from_slice(billing);
        gw.cli(&args);
    }
    gw.cli(&["keys", "create", "--tenant", &tenant])
}

#[test]
fn credentials_standing_and_plans() {
    let node = Fixture::json_rpc();
    let gw = gateway_over(&node, "auth:\n  key_cache_ttl_ms: 300\n");

    // No credential, a malformed one, an unknown one: 401 unauthorized.
    assert_error(&post_rpc(&gw, &[]), 401, "unauthorized");
    assert_error(
        &post_rpc(&gw, &[("Authorization", "Basic abc")]),
        401,
        "unauthorized",
    );
    assert_error(
        &post_rpc(&gw, &[("Authorization", "Bearer ce_not-a-real-key")]),
        401,
        "unauthorized",
    );
    assert_error(
        &post_rpc(&gw, &[("x-token", "ce_not-a-real-key")]),
        401,
        "unauthorized",
    );

    // Lapsed trial and lapsed subscription.
    let trial = tenant_key(&gw, "pro", &["--trial-ends", "2020-01-01T00:00:00Z"]);
    let r = post_rpc(&gw, &[("Authorization", &format!("Bearer {trial}"))]);
    let fields = assert_error(&r, 401, "trial_expired");
    assert!(fields["request_id"].is_string());
    // Refused before the body is read: no call id to answer with.
    assert_eq!(r.json()["id"], serde_json::Value::Null);
    let lapsed = tenant_key(&gw, "pro", &["--subscription-ends", "1600000000"]);
    assert_error(
        &post_rpc(&gw, &[("x-token", &lapsed)]),
        401,
        "subscription_expired",
    );
    // A paid subscription running past an old trial is in good standing.
    let paid = tenant_key(
        &gw,
        "pro",
        &[
            "--trial-ends",
            "2020-01-01T00:00:00Z",
            "--subscription-ends",
            "2999-01-01T00:00:00Z",
        ],
    );
    assert_eq!(post_rpc(&gw, &[("x-token", &paid)]).status, 200);

    // Nothing refused so far reached the node.
    assert_eq!(node.hits(), 1);

    // Both credential headers work.
    let free = tenant_key(&gw, "free", &[]);
    let r = post_rpc(&gw, &[("Authorization", &format!("Bearer {free}"))]);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"], "0x1");
    assert_eq!(post_rpc(&gw, &[("x-token", &free)]).status, 200);
    assert_eq!(node.hits(), 3);

    // Revoked elsewhere (the CLI): refused once the cache entry is older than its TTL.
    let tenant = gw.cli(&["tenants", "create", "--name", "r", "--plan", "free"]);
    let revoked = gw.cli(&["keys", "create", "--tenant", &tenant]);
    assert_eq!(post_rpc(&gw, &[("x-token", &revoked)]).status, 200);
    let list = gw.cli(&["keys", "list", "--tenant", &tenant]);
    let id = serde_json::from_str::<serde_json::Value>(list.lines().next().unwrap()).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    gw.cli(&["keys", "revoke", "--id", &id]);
    std::thread::sleep(Duration::from_millis(400));
    let hits = node.hits();
    assert_error(
        &post_rpc(&gw, &[("x-token", &revoked)]),
        401,
        "unauthorized",
    );
    assert_eq!(node.hits(), hits);

    // Plan too low: 403 tier_insufficient with the tiers, the upgrade URL and the header.
    let r = gw.get("/rpc/eth-beacon/eth/v1/node/syncing", &[("x-token", &free)]);
    assert_error(&r, 403, "tier_insufficient");
    let body = r.json();
    assert_eq!(body["current_tier"], "free");
    assert_eq!(body["required_tier"], "basic");
    // The console's plans page, where the tenant can ask for another plan.
    assert!(body["upgrade_url"]
        .as_str()
        .unwrap()
        .ends_with("/console/#plans"));
    assert_eq!(r.header("X-Required-Tier"), Some("basic"));

    // "And above": enterprise passes a basic route (501: not built yet, but admitted).
    let enterprise = tenant_key(&gw, "enterprise", &[]);
    let r = gw.get(
        "/rpc/eth-beacon/eth/v1/node/syncing",
        &[("x-token", &enterprise)],
    );
    assert_ne!(r.status, 403, "{}", r.text());
    assert_ne!(r.status, 401, "{}", r.text());

    // Scale plan only: enterprise is locked out of the MEV-Share stream (SSE envelope).
    let r = gw.get(
        "/sse/eth-mev-share",
        &[("Authorization", &format!("Bearer {enterprise}"))],
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json(), json!({"error": "tier_locked", "code": 403}));
    // ... and the stream takes a Bearer credential only.
    let scale = tenant_key(&gw, "scale", &[]);
    let r = gw.get("/sse/eth-mev-share", &[("x-token", &scale)]);
    assert_eq!(r.status, 401, "{}", r.text());

    // Scopes: business plan without `sol_watchlist` → 403 naming the scope.
    let tenant = gw.cli(&["tenants", "create", "--name", "b", "--plan", "business"]);
    let no_scope = gw.cli(&["keys", "create", "--tenant", &tenant]);
    let scoped = gw.cli(&[
        "keys",
        "create",
        "--tenant",
        &tenant,
        "--scopes",
        "sol_watchlist",
    ]);
    let r = gw.get("/v1/sol/watchlist", &[("x-token", &no_scope)]);
    assert_error(&r, 403, "tier_insufficient");
    assert_eq!(r.json()["required_scope"], "sol_watchlist");
    // A scope is the key's, not the plan's: no upgrade is pointed at.
    assert_eq!(r.json()["current_tier"], "business");
    assert_eq!(r.json()["required_tier"], "business");
    assert_eq!(r.header("X-Required-Tier"), Some("business"));
    let top = gw.cli(&["tenants", "create", "--name", "e", "--plan", "enterprise"]);
    let top_no_scope = gw.cli(&["keys", "create", "--tenant", &top]);
    let r = gw.get("/v1/sol/watchlist", &[("x-token", &top_no_scope)]);
    assert_error(&r, 403, "tier_insufficient");
    assert_eq!(r.json()["required_tier"], "enterprise", "{}", r.text());
    let r = gw.get("/v1/sol/watchlist", &[("x-token", &scoped)]);
    assert!(r.status != 401 && r.status != 403, "{}", r.text());

    // Anonymous route: no credential needed; a bad one is still refused.
    let path = format!("/v1/polygon/wallet/balance/{ADDR}");
    let r = gw.get(&path, &[]);
    assert!(r.status != 401 && r.status != 403, "{}", r.text());
    assert_error(
        &gw.get(&path, &[("x-token", "ce_bogus")]),
        401,
        "unauthorized",
    );

    // Refused requests never reached the node.
    assert_eq!(node.hits(), 4);
}

#[test]
fn rate_limits_refuse_before_the_upstream() {
    let node = Fixture::json_rpc();
    // free: 5 rps sustained, burst 10; anonymous: 2 rps, burst 4.
    let gw = gateway_over(
        &node,
        "limits:\n  default: {anonymous: 2, free: 5, basic: 5, pro: 5, business: 5, enterprise: 5, scale: 5}\n",
    );
    let key = tenant_key(&gw, "free", &[]);
    let mut admitted = 0;
    let mut refused = Vec::new();
    for _ in 0..14 {
        let r = post_rpc(&gw, &[("x-token", &key)]);
        match r.status {
            200 => {
                admitted += 1;
                assert_eq!(r.header("X-RateLimit-Limit"), Some("5"));
                assert!(r.header("X-RateLimit-Remaining").is_some());
            }
            429 => refused.push(r),
            s => panic!("unexpected {s}: {}", r.text()),
        }
    }
    assert_eq!(admitted, 10, "a burst of 2x is admitted, then refused");
    assert_eq!(node.hits(), 10, "refused calls must not reach the node");
    let r = &refused[0];
    // On `/rpc/eth` the refusal is the JSON-RPC answer to the call (its id, EIP-1474's
    // "limit exceeded"), the 429 fields in `error.data`.
    let body = assert_error(r, 429, "rate_limited");
    assert_eq!(
        (r.json()["id"].as_i64(), r.json()["error"]["code"].as_i64()),
        (Some(7), Some(-32005))
    );
    assert_eq!(body["current_tier"], "free");
    assert_eq!(body["category"], "eth_rpc");
    assert_eq!(body["limit_rps"], 5.0);
    let retry = body["retry_after_sec"].as_u64().unwrap();
    assert!((1..=10).contains(&retry), "{body}");
    assert_eq!(r.header("Retry-After"), Some(retry.to_string().as_str()));
    assert_eq!(r.header("X-RateLimit-Limit"), Some("5"));
    assert_eq!(r.header("X-RateLimit-Remaining"), Some("0"));
    assert_eq!(
        r.header("X-RateLimit-Reset"),
        Some(retry.to_string().as_str())
    );

    // Every call of a batch counts: 8 calls fit the burst of 10, a second 8 do not.
    let batcher = tenant_key(&gw, "free", &[]);
    let batch: Vec<_> = (0..8)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "eth_chainId", "params": []}))
        .collect();
    let send_batch = || {
        let body = json!(batch).to_string();
        request(
            gw.port,
            "POST",
            "/rpc/eth",
            &[("Content-Type", "application/json"), ("x-token", &batcher)],
            body.as_bytes(),
        )
        .unwrap()
    };
    let hits = node.hits();
    assert_eq!(send_batch().status, 200);
    let r = send_batch();
    assert_error(&r, 429, "rate_limited");
    assert_eq!(
        r.json()["id"],
        serde_json::Value::Null,
        "a batch refused whole"
    );
    assert_eq!(
        node.hits(),
        hits + 1,
        "the refused batch must not reach the node"
    );

    // Anonymous callers are limited per address, with their own (lower) rate; a key
    // on the same route raises it.
    let path = format!("/v1/polygon/wallet/balance/{ADDR}");
    let anon: Vec<u16> = (0..6).map(|_| gw.get(&path, &[]).status).collect();
    assert_eq!(anon.iter().filter(|s| **s == 429).count(), 2, "{anon:?}");
    let r = gw.get(&path, &[]);
    assert_eq!(r.json()["current_tier"], "anonymous");
    let keyed: Vec<u16> = (0..10)
        .map(|_| gw.get(&path, &[("x-token", &key)]).status)
        .collect();
    assert!(!keyed.contains(&429), "{keyed:?}");
}

/// Offer `rps` requests/s for `secs` on a rate-limited route; returns (admitted, refused).
fn drive(port: u16, key: &str, rps: f64, secs: f64) -> (usize, usize) {
    let path = format!("/v1/eth/wallet/{ADDR}/balance");
    let start = Instant::now();
    let (mut ok, mut refused) = (0, 0);
    let mut n = 0u32;
    while start.elapsed().as_secs_f64() < secs {
        let due = start + Duration::from_secs_f64(n as f64 / rps);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        n += 1;
        let r = request(port, "GET", &path, &[("x-token", key)], b"").unwrap();
        match r.status {
            429 => refused += 1,
            401 | 403 => panic!("{}", r.text()),
            _ => ok += 1, // admitted (the handler itself may answer 501)
        }
    }
    (ok, refused)
}

#[test]
fn sustained_rate_is_never_refused_burst_admitted_overdrive_cut() {
    // 20 rps sustained on every plan, the default 10-second horizon.
    let gw = Gateway::start(GatewayOpts {
        extra_yaml: "limits:\n  default: {anonymous: 20, free: 20, basic: 20, pro: 20, business: 20, enterprise: 20, scale: 20}\n".into(),
        ..Default::default()
    });
    let (steady, burst, over) = (
        tenant_key(&gw, "free", &[]),
        tenant_key(&gw, "free", &[]),
        tenant_key(&gw, "free", &[]),
    );
    let port = gw.port;
    let secs = 10.0;
    let steady_t = std::thread::spawn(move || drive(port, &steady, 20.0, secs));
    let over_t = std::thread::spawn(move || drive(port, &over, 60.0, secs));

    // After idle, 2x the rate at once is admitted; then the ceiling holds.
    let path = format!("/v1/eth/wallet/{ADDR}/balance");
    let statuses: Vec<u16> = (0..45)
        .map(|_| gw.get(&path, &[("x-token", &burst)]).status)
        .collect();
    assert!(statuses[..40].iter().all(|s| *s != 429), "{statuses:?}");
    assert!(statuses[40..].contains(&429), "{statuses:?}");

    let (ok, refused) = steady_t.join().unwrap();
    assert_eq!(
        refused, 0,
        "a client at the sustained rate was refused ({ok} admitted)"
    );
    let (ok, refused) = over_t.join().unwrap();
    let admitted_rps = ok as f64 / secs;
    eprintln!("3x client: {ok} admitted, {refused} refused, {admitted_rps:.1} rps admitted");
    assert!(
        (18.0..=25.0).contains(&admitted_rps),
        "3x the rate should be cut to about 20 rps, got {admitted_rps:.1}"
    );
}

/// The access log (issue 2): one JSON line per request with route, status, latency,
/// upstream and request id; ids of the caller, never the key or the query string. Lines
/// are written in batches off the proxy path, and the last ones are flushed at shutdown.
#[test]
fn access_log_has_one_secret_free_line_per_request() {
    let node = Fixture::json_rpc();
    let mut gw = gateway_over(&node, "");
    let key = gw.key("basic", &[]);
    let auth = format!("Bearer {key}");
    let r = post_rpc(
        &gw,
        &[("Authorization", &auth), ("X-Request-Id", "trace-me-1")],
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = gw.get(&format!("/v1/eth/no/such?api_key={key}"), &[]);
    assert_eq!(r.status, 404);

    // Written within the writer's drain interval (50 ms), not per request.
    let lines = |gw: &Gateway| -> Vec<serde_json::Value> {
        std::fs::read_to_string(gw.access_log())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while lines(&gw)
        .iter()
        .filter(|l| l["path"] != "/__ready")
        .count()
        < 2
    {
        assert!(std::time::Instant::now() < until, "no access log lines");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(gw.access_log()).unwrap();
    assert!(!text.contains(&key), "a key reached the access log");
    let all = lines(&gw);
    let rpc = all
        .iter()
        .find(|l| l["request_id"] == "trace-me-1")
        .unwrap();
    assert_eq!(rpc["route"], "eth.rpc");
    assert_eq!(rpc["method"], "POST");
    assert_eq!(rpc["status"], 200);
    assert_eq!(rpc["upstream"], "el-1");
    assert!(
        rpc["tenant"].is_string() && rpc["key_id"].is_string(),
        "{rpc}"
    );
    assert!(rpc["latency_ms"].as_f64().unwrap() > 0.0);
    let missing = all
        .iter()
        .find(|l| l["status"] == 404 && l["path"] != "/__ready")
        .unwrap();
    assert_eq!(missing["path"], "/v1/eth/no/such");
    assert_eq!(missing["error"], "route_not_found");

    // SIGTERM: the lines of the last requests are flushed before the process exits.
    for i in 0..20 {
        let id = format!("last-{i}");
        post_rpc(&gw, &[("Authorization", &auth), ("X-Request-Id", &id)]);
    }
    let mut proc = gw.proc.take().unwrap();
    proc.signal("TERM");
    assert!(proc.exited_within(std::time::Duration::from_secs(10)));
    let all = lines(&gw);
    for i in 0..20 {
        let id = format!("last-{i}");
        assert!(
            all.iter().any(|l| l["request_id"] == id.as_str()),
            "{id} not logged"
        );
    }
}

/// Behind a load balancer that is a trusted proxy, anonymous callers are limited by
/// the address its `X-Forwarded-For` gives (the right-most untrusted hop), not all
/// together as the balancer's one address; what a client writes to the left of the
/// chain changes nothing.
#[test]
fn behind_a_trusted_balancer_anonymous_callers_are_limited_by_their_own_address() {
    let node = Fixture::json_rpc();
    let gw = Gateway::start(GatewayOpts {
        pools: format!(
            "  eth_el:\n    hosts:\n      - {{id: el-1, url: \"{}\", family: el-geth}}\n",
            node.url()
        ),
        console_yaml: "  trusted_proxies: [\"127.0.0.0/8\"]\n".into(),
        // anonymous: 2 rps, bursts of 4.
        extra_yaml: "limits:\n  default: {anonymous: 2, free: 5, basic: 5, pro: 5, business: 5, enterprise: 5, scale: 5}\n".into(),
        ..Default::default()
    });
    let path = format!("/v1/polygon/wallet/balance/{ADDR}");
    let from = |xff: &str| gw.get(&path, &[("X-Forwarded-For", xff)]).status;
    let first: Vec<u16> = (0..6).map(|_| from("203.0.113.1")).collect();
    assert_eq!(first.iter().filter(|s| **s == 429).count(), 2, "{first:?}");
    // The same client, pretending to be someone else on the left: still limited.
    assert_eq!(from("198.51.100.7, 203.0.113.1"), 429);
    // Another client behind the same balancer has its own budget.
    let second: Vec<u16> = (0..4).map(|_| from("203.0.113.2")).collect();
    assert!(!second.contains(&429), "{second:?}");
}
