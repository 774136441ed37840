//! Operator configuration: the app YAML, validated into what the edge runs on.

pub mod limits;
mod pool_check;
pub use pool_check::{HostSecrets, URL_KEY_PLACE};
pub mod secrets;
mod sections;
pub mod server;
pub mod usage;

pub use sections::*;

use secrets::{Secret, SecretRef};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A configuration problem, naming the file, the key and the reason.
#[derive(Debug, Clone)]
pub struct ConfigError {
    pub file: String,
    pub key: String,
    pub reason: String,
}

impl ConfigError {
    pub fn new(file: &Path, key: &str, reason: String) -> Self {
        ConfigError {
            file: file.display().to_string(),
            key: key.to_string(),
            reason,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file, self.reason)
        } else {
            write!(f, "{}: {}: {}", self.file, self.key, self.reason)
        }
    }
}

/// Deserialize YAML, reporting the failing key path (`pools.eth_el.hosts[0].url`).
pub fn parse_yaml<T: DeserializeOwned>(text: &str) -> Result<T, (String, String)> {
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let key = if key == "." { String::new() } else { key };
        (key, e.into_inner().to_string())
    })
}

/// Pools the product knows; manifests and config may only name these.
pub const POOL_NAMES: &[&str] = &[
    "eth_el",
    "eth_cl",
    "eth_mev_relay",
    "eth_mev_builder",
    "eth_mev_share",
    "eth_private_rpc",
    "polygon_bor",
    "polygon_heimdall",
    "polygon_sender_anon",
    "polygon_sender_no_auth",
    "sol_rpc",
    "sol_block_engine",
    "sol_mev_cache",
    "base",
    "base_portal",
];

/// EVM chains the indexer can follow (`index:`).
pub const INDEXED_CHAINS: &[&str] = &["eth", "polygon"];

/// A per-chain section (`index.<chain>`, `mempool.<chain>`): a chain the edge knows, on a
/// configured pool. The failing key and why.
fn check_chain(
    section: &str,
    chain: &str,
    pool: &str,
    pools: &BTreeMap<String, PoolConf>,
) -> Result<(), (String, String)> {
    if !INDEXED_CHAINS.contains(&chain) {
        return Err((
            format!("{section}.{chain}"),
            format!("unknown chain; chains are {INDEXED_CHAINS:?}"),
        ));
    }
    if !pools.contains_key(pool) {
        return Err((
            format!("{section}.{chain}.pool"),
            format!("pool {pool} is not configured"),
        ));
    }
    Ok(())
}

/// Release switches routes can depend on.
pub const SWITCHES: &[&str] = &["base_native"];

/// Client families: the ten metrics layers first (the metrics mirror's `ETH_LAYERS` takes
/// them), then the other node kinds.
pub const FAMILIES: &[&str] = &[
    "el-geth",
    "el-nethermind",
    "el-erigon",
    "el-besu",
    "el-reth",
    "cl-lighthouse",
    "cl-prysm",
    "cl-teku",
    "cl-nimbus",
    "cl-lodestar",
    "el-anvil",
    "bor",
    "heimdall",
    "solana",
    "block-engine",
    "mev-cache",
    "relay",
    "builder",
    "mev-share",
    "portal",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppConfig {
    /// Manifests directory; relative paths are relative to this config file.
    pub plugins: PathBuf,
    pub listen: Listen,
    pub metrics: MetricsConf,
    #[serde(default)]
    pub console: ConsoleConf,
    #[serde(default)]
    pub admin: AdminConf,
    pub store: StoreConf,
    #[serde(default)]
    pub cluster: ClusterConf,
    /// Plans, lowest first.
    pub plans: Vec<String>,
    #[serde(default = "default_upgrade_url")]
    pub upgrade_url: String,
    #[serde(default)]
    pub switches: BTreeMap<String, bool>,
    /// Where this gateway sits for the Base route: `origin` (non-POST `/rpc/base` → 405)
    /// or `edge` (GET/HEAD → the page, upgrades → the portal pool).
    #[serde(default)]
    pub base_mode: BaseMode,
    #[serde(default)]
    pub auth: AuthConf,
    #[serde(default)]
    pub rpc: RpcConf,
    #[serde(default)]
    pub limits: limits::LimitsConf,
    /// What each JSON-RPC method and route costs (`limits.compute_units`, usage).
    #[serde(default)]
    pub compute_units: usage::ComputeUnitsConf,
    /// Per-key usage counted off the hot path and kept in the store.
    #[serde(default)]
    pub usage: usage::UsageConf,
    #[serde(default)]
    pub health: HealthConf,
    #[serde(default)]
    pub metrics_mirror: MirrorConf,
    #[serde(default)]
    pub streams: StreamsConf,
    #[serde(default)]
    pub pools: BTreeMap<String, PoolConf>,
    /// Chains indexed (`eth`, `polygon`).
    #[serde(default)]
    pub index: BTreeMap<String, ChainIndexConf>,
    /// Chains whose mempool is watched (`eth`, `polygon`).
    #[serde(default)]
    pub mempool: BTreeMap<String, MempoolConf>,
    /// The Solana layer: epoch stake snapshots.
    #[serde(default)]
    pub solana: SolanaConf,
    /// Edge worker threads for the public listeners (Pingora `threads` is per service).
    #[serde(default)]
    pub threads: Option<usize>,
}

fn default_upgrade_url() -> String {
    "https://chainedge.dev/pricing".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConf {
    pub id: String,
    /// `http://host:port[/path]` or `https://…`.
    pub url: String,
    /// TLS server name when it differs from the URL's host.
    #[serde(default)]
    pub sni: Option<String>,
    pub family: String,
    #[serde(default = "d_role")]
    pub role: String,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub metrics_url: Option<String>,
    /// The node's WebSocket endpoint when it is not `url` (geth and erigon serve WS on
    /// their own port, 8546): `ws://…`, `wss://…` (or `http(s)://…`). Upgrades go here.
    #[serde(default)]
    pub ws_url: Option<String>,
    /// The host's Tendermint RPC when it is not `url` (a heimdall serves the Cosmos LCD
    /// at `url`, usually :1317, Tendermint RPC on its own port, usually :26657, and
    /// Prometheus at `metrics_url`). The consensus proxy sends each request to the one
    /// that serves it.
    #[serde(default)]
    pub rpc_url: Option<String>,
    /// Headers sent to this host, each value a secret reference (provider keys).
    #[serde(default)]
    pub headers: BTreeMap<String, SecretRef>,
    /// A provider key that belongs in the URL path (`https://…/v3/{key}`), as a secret
    /// reference: it takes the place of `{key}` in `url`, `ws_url`, `rpc_url` and
    /// `metrics_url`. A key written into a URL is refused.
    #[serde(default)]
    pub url_key: Option<SecretRef>,
}

fn d_role() -> String {
    "primary".into()
}

/// The loaded configuration plus what was resolved from it.
#[derive(Debug)]
pub struct Loaded {
    pub path: PathBuf,
    pub app: AppConfig,
    pub plugins_dir: PathBuf,
    /// The SQLite file, unless `store_postgres` is set.
    pub store_path: Option<PathBuf>,
    /// `store.postgres`, resolved: the PostgreSQL URL.
    pub store_postgres: Option<Secret>,
    /// `store.state_dir` relative to the config file, or the SQLite file's directory.
    pub state_dir: PathBuf,
    /// `cluster.redis`, resolved: the Redis URL.
    pub cluster_redis: Option<Secret>,
    pub admin_token: Option<Secret>,
    /// `admin.listen`, parsed: the admin routes' own listener.
    pub admin_listen: Option<std::net::SocketAddr>,
    /// The key firehose connection tokens are signed with (`streams.firehose.secret`).
    pub firehose_secret: Option<Secret>,
    /// The key watchlist webhook signing secrets derive from
    /// (`solana.watchlist.signing_secret`).
    pub watchlist_secret: Option<Secret>,
    /// SMTP user name and password, resolved from their references.
    pub smtp_credentials: Option<(Secret, Secret)>,
    /// `console.google.client_secret`, resolved.
    pub google_secret: Option<Secret>,
    /// `console.email.outbox`, relative to the config file.
    pub email_outbox: Option<PathBuf>,
    /// Resolved host secrets (headers, URL path key), per pool then per host index.
    pub host_secrets: BTreeMap<String, Vec<HostSecrets>>,
    /// Release switches resolved once at load: env (`BASE_NATIVE`) over config over off.
    pub switches_on: Vec<&'static str>,
}

impl Loaded {
    pub fn switch(&self, name: &str) -> bool {
        self.switches_on.contains(&name)
    }
}

/// What the configuration is loaded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Serving traffic (and `-t`): every secret reference must resolve.
    Serve,
    /// An operator's CLI command: only the store's and the cluster's secrets are read;
    /// serving secrets (admin token, provider keys, signing and SMTP secrets) are left
    /// unread, so a command run outside the service's environment needs none of them.
    Operate,
}

/// Parse and validate the app config; every problem is reported, not just the first.
pub fn load(path: &Path, purpose: Purpose) -> Result<Loaded, Vec<ConfigError>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![ConfigError::new(path, "", format!("cannot read: {e}"))])?;
    let app: AppConfig =
        parse_yaml(&text).map_err(|(key, reason)| vec![ConfigError::new(path, &key, reason)])?;
    let mut errors = Vec::new();
    let mut bad = |key: &str, reason: String| errors.push(ConfigError::new(path, key, reason));

    // A secret only serving needs: not read at all for an operator's command.
    let serving = |r: &SecretRef| match purpose {
        Purpose::Serve => r.resolve().map(Some),
        Purpose::Operate => Ok(None),
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let rel = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };

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
    if app.metrics.listen.parse::<SocketAddr>().is_err() {
        bad(
            "metrics.listen",
            format!("'{}' is not an address", app.metrics.listen),
        );
    }
    if let Some(o) = &app.console.origin {
        if !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with('/') {
            bad(
                "console.origin",
                format!("'{o}' must be an origin like https://console.example.com"),
            );
        }
    }
    for (i, p) in app.console.trusted_proxies.iter().enumerate() {
        if let Err(e) = crate::address::TrustedProxies::parse(&[p]) {
            bad(&format!("console.trusted_proxies[{i}]"), e);
        }
    }
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
    let watchlist_secret = match &app.solana.watchlist.signing_secret {
        Some(r) => match serving(r) {
            Ok(None) => None,
            Ok(Some(s)) if s.expose().len() >= 32 => Some(s),
            Ok(Some(_)) => {
                bad(
                    "solana.watchlist.signing_secret",
                    "must be at least 32 bytes (e.g. 64 hex digits)".into(),
                );
                None
            }
            Err(e) => {
                bad("solana.watchlist.signing_secret", e);
                None
            }
        },
        None => None,
    };
    for (i, cidr) in app
        .solana
        .watchlist
        .webhook
        .allow_private
        .iter()
        .enumerate()
    {
        if crate::net_policy::Cidr::parse(cidr).is_none() {
            bad(
                &format!("solana.watchlist.webhook.allow_private[{i}]"),
                format!("'{cidr}' is not an address range (a.b.c.d/n or an IPv6 /n)"),
            );
        }
    }
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
    let email = &app.console.email;
    if email.outbox.is_some() && email.smtp.is_some() {
        bad(
            "console.email",
            "choose one delivery: outbox (demo) or smtp".into(),
        );
    }
    if email.from.contains(['\r', '\n']) || !email.from.contains('@') {
        bad("console.email.from", "not a mailbox".into());
    }
    if email.code_ttl_secs < 60
        || email.max_attempts < 1
        || email.max_codes_per_15min < 1
        || email.max_codes_per_client_15min < 1
    {
        bad(
            "console.email",
            "code_ttl_secs must be at least 60; max_attempts, max_codes_per_15min and max_codes_per_client_15min positive"
                .into(),
        );
    }
    if email.lockout_secs < 1 || email.max_lockout_secs < email.lockout_secs {
        bad(
            "console.email",
            "lockout_secs must be positive and at most max_lockout_secs".into(),
        );
    }
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
    let cluster_redis = app.cluster.redis.as_ref().and_then(|r| {
        secret_url(r, &["redis://", "rediss://"])
            .map_err(|e| bad("cluster.redis", e))
            .ok()
    });
    for (chain, c) in &app.index {
        let key = |k: &str| format!("index.{chain}.{k}");
        if let Err((k, why)) = check_chain("index", chain, c.pool_for(chain), &app.pools) {
            bad(&k, why);
            continue;
        }
        if !(1..=500).contains(&c.batch_blocks) {
            bad(&key("batch_blocks"), "between 1 and 500".into());
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
    if !(10..=5000).contains(&app.cluster.sync_interval_ms) {
        bad("cluster.sync_interval_ms", "between 10 and 5000".into());
    }
    if app.console.session_ttl_secs < 2 || app.console.challenge_ttl_secs < 2 {
        bad(
            "console",
            "session_ttl_secs and challenge_ttl_secs must be at least 2".into(),
        );
    }
    if app.console.max_challenges_per_client < 1 || app.console.max_challenges_per_subject < 1 {
        bad(
            "console",
            "max_challenges_per_client and max_challenges_per_subject must be positive".into(),
        );
    }
    let smtp_credentials = match email.smtp.as_ref().map(|s| (&s.username, &s.password)) {
        Some((Some(u), Some(p))) => match (serving(u), serving(p)) {
            (Ok(u), Ok(p)) => u.zip(p),
            (Err(e), _) => {
                bad("console.email.smtp.username", e);
                None
            }
            (_, Err(e)) => {
                bad("console.email.smtp.password", e);
                None
            }
        },
        Some((None, None)) | None => None,
        Some(_) => {
            bad(
                "console.email.smtp",
                "username and password go together".into(),
            );
            None
        }
    };
    let google_secret = match &app.console.google {
        Some(g) => {
            for (k, url) in [
                ("token_endpoint", &g.token_endpoint),
                ("jwks_uri", &g.jwks_uri),
            ] {
                if let Err(e) = crate::address::HostAddr::parse(url) {
                    bad(&format!("console.google.{k}"), e);
                }
            }
            for (k, url) in [
                ("authorization_endpoint", &g.authorization_endpoint),
                ("redirect_uri", &g.redirect_uri),
            ] {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    bad(
                        &format!("console.google.{k}"),
                        "must be an http(s) URL".into(),
                    );
                }
            }
            if !g.after_login.starts_with('/') {
                bad(
                    "console.google.after_login",
                    "must be a path on this gateway".into(),
                );
            }
            match serving(&g.client_secret) {
                Ok(s) => s,
                Err(e) => {
                    bad("console.google.client_secret", e);
                    None
                }
            }
        }
        None => None,
    };
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
    if app.streams.mev_share_window_secs == 0
        || app.streams.ping_interval_secs == 0
        || app.streams.max_streams == 0
    {
        bad(
            "streams",
            "mev_share_window_secs, ping_interval_secs and max_streams must be positive".into(),
        );
    }
    if app.metrics_mirror.stale_ms < app.metrics_mirror.fresh_ms {
        bad(
            "metrics_mirror.stale_ms",
            "must be at least fresh_ms".into(),
        );
    }
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
    check_rpc_timing(&app.rpc, &mut bad);
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
    let host_secrets = pool_check::check_pools(&app, purpose, &mut bad);
    if !errors.is_empty() {
        return Err(errors);
    }
    // The environment wins so a release can flip BASE_NATIVE without editing config.
    let switches_on = SWITCHES
        .iter()
        .copied()
        .filter(
            |name| match std::env::var(name.to_ascii_uppercase()).as_deref() {
                Ok("true" | "1") => true,
                Ok("false" | "0") => false,
                _ => app.switches.get(*name).copied().unwrap_or(false),
            },
        )
        .collect();
    Ok(Loaded {
        switches_on,
        path: path.to_path_buf(),
        plugins_dir: rel(&app.plugins),
        store_path: app.store.path.as_deref().map(rel),
        store_postgres,
        state_dir,
        cluster_redis,
        admin_token,
        admin_listen,
        firehose_secret,
        watchlist_secret,
        smtp_credentials,
        google_secret,
        email_outbox: app.console.email.outbox.as_deref().map(rel),
        host_secrets,
        app,
    })
}

/// A secret reference whose value must be a URL with one of `schemes` (a database's:
/// it holds the password, so it is never in the file itself).
fn secret_url(r: &SecretRef, schemes: &[&str]) -> Result<Secret, String> {
    let url = r.resolve()?;
    if schemes.iter().any(|s| url.expose().starts_with(s)) {
        Ok(url)
    } else {
        Err(format!("the secret is not a {} URL", schemes[0]))
    }
}

/// Budgets and hedging: every class named is one a read can have, and no attempt may
/// outlast its call.
fn check_rpc_timing(rpc: &RpcConf, bad: &mut impl FnMut(&str, String)) {
    const CLASSES: [&str; 4] = ["read", "trace", "debug", "txpool"];
    for (class, t) in &rpc.class_timeouts {
        let at = format!("rpc.class_timeouts.{class}");
        if !CLASSES.contains(&class.as_str()) {
            bad(
                &at,
                "method classes are read, trace, debug and txpool".into(),
            );
        }
        let total = t.timeout_ms.unwrap_or(rpc.timeout_ms);
        let attempt = t.attempt_timeout_ms.unwrap_or(rpc.attempt_timeout_ms);
        if total == 0 || attempt == 0 || attempt > total {
            bad(
                &at,
                "timeouts positive, attempt_timeout_ms at most timeout_ms".into(),
            );
        }
    }
    if rpc.timeout_ms == 0 || rpc.attempt_timeout_ms == 0 || rpc.attempt_timeout_ms > rpc.timeout_ms
    {
        bad(
            "rpc.attempt_timeout_ms",
            "timeouts positive, attempt_timeout_ms at most timeout_ms".into(),
        );
    }
    let h = &rpc.hedge;
    if !(h.quantile > 0.0 && h.quantile < 1.0) || h.min_delay_ms > h.max_delay_ms {
        bad(
            "rpc.hedge",
            "quantile between 0 and 1, min_delay_ms at most max_delay_ms".into(),
        );
    }
    for class in &h.classes {
        if !CLASSES.contains(&class.as_str()) {
            bad(
                "rpc.hedge.classes",
                format!(
                    "'{class}': hedged classes are read, trace, debug and txpool (never writes)"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_config_loads_with_defaults() {
        let dir = std::env::temp_dir().join(format!("chainedge-min-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("plugins")).unwrap();
        let p = dir.join("app.yaml");
        std::fs::write(
            &p,
            "plugins: plugins\nlisten: {http: [\"127.0.0.1:1\"]}\nmetrics: {listen: \"127.0.0.1:2\"}\n\
             store: {path: s.db}\nplans: [free, basic, pro, business, enterprise, scale]\n",
        )
        .unwrap();
        let loaded = load(&p, Purpose::Serve).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(loaded.app.console.session_ttl_secs, 30 * 86400);
        assert_eq!(loaded.app.console.email.max_attempts, 5);
        let _ = std::fs::remove_dir_all(dir);
    }
}
