//! Operator configuration: the app YAML, validated into what the edge runs on.

mod advice;
mod check;
mod check_console;
mod check_rpc;
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
    /// Accepted transactions followed until they settle.
    #[serde(default)]
    pub tx_tracking: usage::TxTrackingConf,
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

/// Empty: the console's plans page on `console.origin` (`load` fills it in).
fn default_upgrade_url() -> String {
    String::new()
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
    /// The host's share of the calls its pool starts (1 to 100, default 1): a host of
    /// weight 3 is tried first three times as often as one of weight 1.
    #[serde(default = "d_weight")]
    pub weight: u16,
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

fn d_weight() -> u16 {
    1
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
    /// The key transaction hooks' signing secrets derive from
    /// (`tx_tracking.signing_secret`).
    pub tx_hook_secret: Option<Secret>,
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
    let mut app: AppConfig =
        parse_yaml(&text).map_err(|(key, reason)| vec![ConfigError::new(path, &key, reason)])?;
    if app.upgrade_url.is_empty() {
        // The plans page this gateway serves, absolute where the console's origin is known.
        let origin = app.console.origin.as_deref().unwrap_or_default();
        app.upgrade_url = format!("{origin}/console/#plans");
    }
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

    check::listeners(&app, &rel, &mut bad);
    let (admin_listen, admin_token) = check::admin(&app, &serving, &mut bad);
    let (watchlist_secret, tx_hook_secret) = check::pushes(&app, &serving, &mut bad);
    let firehose_secret = check::streams(&app, &serving, &mut bad);
    let (smtp_credentials, google_secret) = check_console::console(&app, &serving, &mut bad);
    let (store_postgres, state_dir) = check::store(&app, &rel, &mut bad);
    let cluster_redis = check::cluster(&app, &mut bad);
    check::capture(&app, &mut bad);
    check::plans_and_policy(&app, &mut bad);
    check::rpc(&app, &mut bad);
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
        tx_hook_secret,
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
