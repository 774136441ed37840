//! The app configuration checked section by section: each function reads its section,
//! reports every problem through `bad` (key path, reason), and returns what it resolved
//! (addresses, secrets, directories). `load` runs them all.

use super::check_rpc::check_rpc_timing;
use super::secrets::{Secret, SecretRef};
use super::{check_chain, secret_url, AppConfig, SWITCHES};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Reports a problem: its key path and the reason.
pub(super) type Bad<'a> = dyn FnMut(&str, String) + 'a;
/// Resolves a secret reference that only serving needs (`None` for an operator's command).
pub(super) type Serving<'a> = dyn Fn(&SecretRef) -> Result<Option<Secret>, String> + 'a;
/// A path of the file, relative to the file's directory.
pub(super) type Rel<'a> = dyn Fn(&Path) -> PathBuf + 'a;

/// `listen` and `metrics.listen`.
pub(super) fn listeners(app: &AppConfig, rel: &Rel, bad: &mut Bad) {
    if app.listen.http.is_empty() && app.listen.tls.is_empty() {
        bad(
            "listen",
            "at least one http or tls listener is required".into(),
        );
    }
    for (i, a) in app.listen.http.iter().enumerate() {
        if a.parse::<SocketAddr>().is_err() {
            bad(
                &format!("listen.http[{i}]"),
                format!("'{a}' is not an address like 127.0.0.1:8080"),
            );
        }
    }
    for (i, t) in app.listen.tls.iter().enumerate() {
        if t.addr.parse::<SocketAddr>().is_err() {
            bad(
                &format!("listen.tls[{i}].addr"),
                format!("'{}' is not an address", t.addr),
            );
        }
        for (k, p) in [("cert", &t.cert), ("key", &t.key)] {
            if !rel(p).is_file() {
                bad(
                    &format!("listen.tls[{i}].{k}"),
                    format!("{} is not a readable file", rel(p).display()),
                );
            }
        }
    }
    let listening: Vec<SocketAddr> = app
        .listen
        .http
        .iter()
        .chain(app.listen.tls.iter().map(|t| &t.addr))
        .filter_map(|a| a.parse().ok())
        .collect();
    for (i, a) in app.listen.proxy_protocol.iter().enumerate() {
        if !a.parse().is_ok_and(|a| listening.contains(&a)) {
            bad(
                &format!("listen.proxy_protocol[{i}]"),
                format!("'{a}' is not one of the http or tls listeners' addresses"),
            );
        }
    }
    if app.metrics.listen.parse::<SocketAddr>().is_err() {
        bad(
            "metrics.listen",
            format!("'{}' is not an address", app.metrics.listen),
        );
    }
}

/// `admin`: its listener (its port no data-plane listener's) and token.
pub(super) fn admin(
    app: &AppConfig,
    serving: &Serving,
    bad: &mut Bad,
) -> (Option<SocketAddr>, Option<Secret>) {
    let admin_listen =
        app.admin
            .listen
            .as_deref()
            .and_then(|a| match a.parse::<std::net::SocketAddr>() {
                // The edge tells the admin listener by its port: no data-plane listener
                // may share it, on any address.
                Ok(addr)
                    if app
                        .listen
                        .http
                        .iter()
                        .chain(app.listen.tls.iter().map(|t| &t.addr))
                        .filter_map(|h| h.parse::<std::net::SocketAddr>().ok())
                        .any(|h| h.port() == addr.port()) =>
                {
                    bad(
                        "admin.listen",
                        format!("{a}: its port is also a data-plane listener's (listen)"),
                    );
                    None
                }
                Ok(addr) => Some(addr),
                Err(_) => {
                    bad("admin.listen", format!("'{a}' is not an address:port"));
                    None
                }
            });
    let admin_token = match &app.admin.token {
        Some(r) => match serving(r) {
            Ok(s) => s,
            Err(e) => {
                bad("admin.token", e);
                None
            }
        },
        None => None,
    };
    (admin_listen, admin_token)
}

/// A push's webhook signing secret (at least 32 bytes) and the private ranges its
/// callbacks may reach, under `at` (`solana.watchlist`, `tx_tracking`).
fn webhook_push(
    at: &str,
    secret: Option<&super::secrets::SecretRef>,
    webhook: &super::WebhookConf,
    serving: &Serving,
    bad: &mut Bad,
) -> Option<Secret> {
    let key = format!("{at}.signing_secret");
    let resolved = match secret.map(serving) {
        Some(Ok(Some(s))) if s.expose().len() >= 32 => Some(s),
        Some(Ok(Some(_))) => {
            bad(
                &key,
                "must be at least 32 bytes (e.g. 64 hex digits)".into(),
            );
            None
        }
        Some(Err(e)) => {
            bad(&key, e);
            None
        }
        Some(Ok(None)) | None => None,
    };
    for (i, cidr) in webhook.allow_private.iter().enumerate() {
        if crate::net_policy::Cidr::parse(cidr).is_none() {
            bad(
                &format!("{at}.webhook.allow_private[{i}]"),
                format!("'{cidr}' is not an address range (a.b.c.d/n or an IPv6 /n)"),
            );
        }
    }
    resolved
}

/// `solana.watchlist` and `tx_tracking`: their webhook signing secrets.
pub(super) fn pushes(
    app: &AppConfig,
    serving: &Serving,
    bad: &mut Bad,
) -> (Option<Secret>, Option<Secret>) {
    let w = &app.solana.watchlist;
    let watchlist = webhook_push(
        "solana.watchlist",
        w.signing_secret.as_ref(),
        &w.webhook,
        serving,
        bad,
    );
    let t = &app.tx_tracking;
    let txs = webhook_push(
        "tx_tracking",
        t.signing_secret.as_ref(),
        &t.webhook,
        serving,
        bad,
    );
    (watchlist, txs)
}

/// `streams`: the firehose's secret, token lifetime and public URL; the stream bounds.
pub(super) fn streams(app: &AppConfig, serving: &Serving, bad: &mut Bad) -> Option<Secret> {
    let firehose = &app.streams.firehose;
    let firehose_secret = match &firehose.secret {
        Some(r) => match serving(r) {
            Ok(None) => None,
            Ok(Some(s)) if s.expose().len() >= 32 => Some(s),
            Ok(Some(_)) => {
                bad(
                    "streams.firehose.secret",
                    "must be at least 32 bytes (e.g. 64 hex digits)".into(),
                );
                None
            }
            Err(e) => {
                bad("streams.firehose.secret", e);
                None
            }
        },
        None => None,
    };
    if !(1..=3600).contains(&firehose.token_ttl_secs) {
        bad(
            "streams.firehose.token_ttl_secs",
            "must be 1 to 3600 seconds".into(),
        );
    }
    if let Some(u) = &firehose.public_url {
        if !(u.starts_with("ws://") || u.starts_with("wss://")) || u.ends_with('/') {
            bad(
                "streams.firehose.public_url",
                format!("'{u}' must be a ws:// or wss:// origin like wss://api.example.com"),
            );
        }
    }
    if app.streams.mev_share_window_secs == 0
        || app.streams.ping_interval_secs == 0
        || app.streams.max_streams == 0
    {
        bad(
            "streams",
            "mev_share_window_secs, ping_interval_secs and max_streams must be positive".into(),
        );
    }
    firehose_secret
}

/// `store` and `auth`: one backend, the request deadline, the local state directory.
pub(super) fn store(app: &AppConfig, rel: &Rel, bad: &mut Bad) -> (Option<Secret>, PathBuf) {
    let store_postgres = match (&app.store.path, &app.store.postgres) {
        (Some(_), None) => None,
        (None, Some(r)) => secret_url(r, &["postgres://", "postgresql://"])
            .map_err(|e| bad("store.postgres", e))
            .ok(),
        _ => {
            bad(
                "store",
                "set exactly one of path (SQLite) and postgres (a secret reference)".into(),
            );
            None
        }
    };
    if !(50..=10_000).contains(&app.store.request_deadline_ms) {
        bad("store.request_deadline_ms", "between 50 and 10000".into());
    }
    if app.auth.key_stale_secs > 86_400 {
        bad("auth.key_stale_secs", "at most 86400 (a day)".into());
    }
    let state_dir = match (&app.store.state_dir, &app.store.path) {
        (Some(dir), _) => rel(dir),
        (None, Some(db)) => rel(db)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from(".")),
        (None, None) => {
            if app.store.postgres.is_some() {
                bad(
                    "store.state_dir",
                    "required with postgres: a local directory this instance keeps its usage \
                     journal in"
                        .into(),
                );
            }
            PathBuf::new()
        }
    };
    (store_postgres, state_dir)
}

/// `cluster`: the Redis URL (a secret reference) and the sync interval.
pub(super) fn cluster(app: &AppConfig, bad: &mut Bad) -> Option<Secret> {
    let cluster_redis = app.cluster.redis.as_ref().and_then(|r| {
        secret_url(r, &["redis://", "rediss://"])
            .map_err(|e| bad("cluster.redis", e))
            .ok()
    });
    if !(10..=5000).contains(&app.cluster.sync_interval_ms) {
        bad("cluster.sync_interval_ms", "between 10 and 5000".into());
    }
    cluster_redis
}

/// `index` and `mempool`: each chain's pool and bounds.
pub(super) fn capture(app: &AppConfig, bad: &mut Bad) {
    for (chain, c) in &app.index {
        let key = |k: &str| format!("index.{chain}.{k}");
        if let Err((k, why)) = check_chain("index", chain, c.pool_for(chain), &app.pools) {
            bad(&k, why);
            continue;
        }
        if !(1..=500).contains(&c.batch_blocks) {
            bad(&key("batch_blocks"), "between 1 and 500".into());
        }
        if c.fetch_ahead > 8 {
            bad(&key("fetch_ahead"), "between 0 and 8".into());
        }
        if !(50..=60_000).contains(&c.poll_ms) {
            bad(&key("poll_ms"), "between 50 and 60000".into());
        }
        if !(1..=10_000).contains(&c.max_reorg_depth) || c.confirmations > 10_000 {
            bad(
                &key("max_reorg_depth"),
                "max_reorg_depth between 1 and 10000, confirmations at most 10000".into(),
            );
        }
        if !(1..=10_000_000).contains(&c.balance_refresh_blocks) {
            bad(
                &key("balance_refresh_blocks"),
                "between 1 and 10000000".into(),
            );
        }
    }
    for (chain, c) in &app.mempool {
        let key = |k: &str| format!("mempool.{chain}.{k}");
        if let Err((k, why)) = check_chain("mempool", chain, c.pool_for(chain), &app.pools) {
            bad(&k, why);
            continue;
        }
        if !(100..=60_000).contains(&c.poll_ms) {
            bad(&key("poll_ms"), "between 100 and 60000".into());
        }
        if !(1..=1_000_000).contains(&c.max_pending) {
            bad(&key("max_pending"), "between 1 and 1000000".into());
        }
    }
}

/// `plans`, `limits`, `usage`, `switches`, `health`, `metrics_mirror`.
pub(super) fn plans_and_policy(app: &AppConfig, bad: &mut Bad) {
    if app.plans.is_empty() {
        bad("plans", "at least one plan is required".into());
    }
    for (i, p) in app.plans.iter().enumerate() {
        if app.plans[..i].contains(p) {
            bad(
                &format!("plans[{i}]"),
                format!("plan '{p}' is listed twice"),
            );
        }
    }
    for (key, reason) in app.limits.problems(&app.plans) {
        bad(&key, reason);
    }
    for (key, reason) in app.usage.problems() {
        bad(&key, reason);
    }
    for (key, reason) in app.tx_tracking.problems() {
        bad(&key, reason);
    }
    for k in app.switches.keys() {
        if !SWITCHES.contains(&k.as_str()) {
            bad(
                &format!("switches.{k}"),
                format!("unknown switch; switches are {SWITCHES:?}"),
            );
        }
    }
    if app.health.interval_ms < 100
        || app.health.timeout_ms == 0
        || app.health.quarantine_after == 0
    {
        bad(
            "health",
            "interval_ms must be at least 100; timeout_ms and quarantine_after positive".into(),
        );
    }
    if app.metrics_mirror.stale_ms < app.metrics_mirror.fresh_ms {
        bad(
            "metrics_mirror.stale_ms",
            "must be at least fresh_ms".into(),
        );
    }
}

/// `rpc`: method plans, timing, the response cache, the `eth_getLogs` guard, bounds.
pub(super) fn rpc(app: &AppConfig, bad: &mut Bad) {
    for (family, plan) in &app.rpc.method_plans {
        if !["trace", "debug", "txpool"].contains(&family.as_str()) {
            bad(
                &format!("rpc.method_plans.{family}"),
                "method families are trace, debug and txpool".into(),
            );
        }
        if !app.plans.contains(plan) {
            bad(
                &format!("rpc.method_plans.{family}"),
                format!("unknown plan '{plan}'"),
            );
        }
    }
    check_rpc_timing(&app.rpc, bad);
    for (plan, level) in &app.rpc.verify.require {
        let at = format!("rpc.verify.require.{plan}");
        if !app.plans.contains(plan) {
            bad(&at, format!("unknown plan '{plan}'"));
        }
        if crate::verify::Verified::named(level).is_none() {
            bad(
                &at,
                format!("'{level}' is not a level (self, quorum, proof, root or none)"),
            );
        }
    }
    let light_client = app.rpc.verify.root.iter().flat_map(|r| &r.light_client);
    for problem in light_client.flat_map(|l| l.problems(&app.pools)) {
        bad("rpc.verify.root.light_client", problem);
    }
    let cache = &app.rpc.cache;
    if cache.max_entry_bytes == 0
        || cache.max_entry_bytes > cache.max_bytes
        || cache.track_interval_ms < 50
    {
        bad(
            "rpc.cache",
            "max_entry_bytes between 1 and max_bytes; track_interval_ms at least 50".into(),
        );
    }
    let logs = &app.rpc.get_logs;
    for (plan, blocks) in &logs.max_block_range {
        let at = format!("rpc.get_logs.max_block_range.{plan}");
        if plan != crate::config::limits::ANONYMOUS && !app.plans.contains(plan) {
            bad(&at, format!("unknown plan '{plan}'"));
        }
        if *blocks == 0 {
            bad(&at, "at least 1 block".into());
        }
    }
    if logs.chunk_blocks == 0
        || logs.parallel == 0
        || logs.parallel > 32
        || logs.max_results == 0
        || logs.max_node_calls == 0
    {
        bad(
            "rpc.get_logs",
            "chunk_blocks, max_results and max_node_calls at least 1; parallel 1 to 32".into(),
        );
    }
    if app.rpc.max_batch == 0 || app.rpc.max_body_bytes == 0 || app.rpc.max_attempts == 0 {
        bad(
            "rpc",
            "max_batch, max_body_bytes and max_attempts must be positive".into(),
        );
    }
}
