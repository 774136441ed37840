//! The app YAML's sections other than pools: listeners, console and sign-in (`console`),
//! store, keys,
//! JSON-RPC, health checks, streams and WebSocket sessions, the metrics mirror. Each
//! with its defaults (`deny_unknown_fields`: a typo is an error, not a silent default).

mod console;
mod light_client;
mod rpc;
mod solana;
mod streams;
pub use crate::jsonrpc::methods::MethodsConf;
pub use console::*;
pub use light_client::*;
pub use rpc::*;
pub use solana::*;
pub use streams::*;

use super::secrets::SecretRef;
use super::HostConf;
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    #[serde(default)]
    pub http: Vec<String>,
    #[serde(default)]
    pub tls: Vec<TlsListen>,
    /// Listeners (addresses from `http` or `tls`) behind an L4 proxy that writes the
    /// PROXY protocol header (v1 or v2) before each connection's first byte: the client
    /// it names is judged, and a connection there without a header is closed.
    #[serde(default)]
    pub proxy_protocol: Vec<String>,
    /// Most open client connections per listener; more are closed at accept (0: no cap).
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Most open connections from one client address, over all listeners (0: no cap).
    #[serde(default = "default_max_connections_per_client")]
    pub max_connections_per_client: usize,
}

fn default_max_connections() -> usize {
    16_384
}

fn default_max_connections_per_client() -> usize {
    1_024
}

impl Listen {
    /// The listeners behind an L4 proxy that writes the PROXY protocol header, parsed
    /// (`-t` refuses an entry that is not a listener's address).
    pub fn proxied(&self) -> std::collections::HashSet<std::net::SocketAddr> {
        (self.proxy_protocol.iter())
            .filter_map(|a| a.parse().ok())
            .collect()
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsListen {
    pub addr: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConf {
    pub listen: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConf {
    /// Secret reference of the `X-Admin-Token` value; without it admin is loopback-only.
    #[serde(default)]
    pub token: Option<SecretRef>,
    /// Whether a request from a loopback origin (no proxy in between) is admin without
    /// a token. Production turns it off: any process on the host could otherwise act
    /// as admin, and a local proxy that sends no forwarding header looks like one.
    #[serde(default = "d_true")]
    pub allow_loopback: bool,
    /// A listener of its own for the admin routes (`127.0.0.1:9099`), as Envoy keeps
    /// its admin interface off the data plane: admin routes are then served there only
    /// (404 on the other listeners), and nothing else is served there.
    #[serde(default)]
    pub listen: Option<String>,
}

impl Default for AdminConf {
    fn default() -> Self {
        AdminConf {
            token: None,
            allow_loopback: true,
            listen: None,
        }
    }
}

/// Several instances as one edge (`src/cluster/`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConf {
    /// Redis for shared limits and change notices: a secret reference whose value is
    /// the `redis://` URL. Without it each instance limits on its own.
    #[serde(default)]
    pub redis: Option<SecretRef>,
    /// How often counts are exchanged with Redis: the most of the other instances'
    /// traffic one instance may not have seen yet.
    #[serde(default = "d_sync_interval_ms")]
    pub sync_interval_ms: u64,
}

fn d_sync_interval_ms() -> u64 {
    100
}

impl Default for ClusterConf {
    fn default() -> Self {
        ClusterConf {
            redis: None,
            sync_interval_ms: d_sync_interval_ms(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConf {
    /// SQLite file (the embedded default); relative paths are relative to this config
    /// file.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// PostgreSQL instead, shared by several instances: a secret reference whose value
    /// is the `postgres://user:password@host:port/db` URL.
    #[serde(default)]
    pub postgres: Option<SecretRef>,
    /// This instance's own files on local disk (the usage journal, `src/usage/`), kept
    /// across restarts. Default: the SQLite file's directory; required with `postgres`.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// How long a request waits on PostgreSQL (an uncached key, a sign-in, a console
    /// page) before it is answered 503 `store_unavailable` with `Retry-After`. SQLite,
    /// a local file, is given the background deadline.
    #[serde(default = "d_request_deadline")]
    pub request_deadline_ms: u64,
}

fn d_request_deadline() -> u64 {
    800
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConf {
    /// API keys held in memory (LRU by key hash).
    #[serde(default = "d_key_cache_size")]
    pub key_cache_size: usize,
    /// How long a cached key is trusted: the bound on staleness of a revocation made
    /// elsewhere (another node or the CLI). Revocation through this node is immediate.
    #[serde(default = "d_key_cache_ttl")]
    pub key_cache_ttl_ms: u64,
    /// While the store cannot be read, a cached key past its TTL is still admitted for
    /// this long after it was last read (0: never).
    #[serde(default = "d_key_stale")]
    pub key_stale_secs: u64,
}

fn d_key_stale() -> u64 {
    900
}

fn d_key_cache_size() -> usize {
    100_000
}
fn d_key_cache_ttl() -> u64 {
    30_000
}

impl Default for AuthConf {
    fn default() -> Self {
        AuthConf {
            key_cache_size: d_key_cache_size(),
            key_cache_ttl_ms: d_key_cache_ttl(),
            key_stale_secs: d_key_stale(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConf {
    pub hosts: Vec<HostConf>,
    /// Blocks (or slots) behind the pool head before a host is degraded; default by
    /// kind: EL 5, CL 3, Solana 50, heimdall 5.
    #[serde(default)]
    pub max_lag: Option<u64>,
    /// The operator's changes to the JSON-RPC method table for this pool.
    #[serde(default)]
    pub methods: MethodsConf,
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum BaseMode {
    #[default]
    Origin,
    Edge,
}

/// Background health checks of every pool host.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConf {
    #[serde(default = "d_health_interval")]
    pub interval_ms: u64,
    #[serde(default = "d_health_timeout")]
    pub timeout_ms: u64,
    /// Consecutive failed checks before a host is quarantined.
    #[serde(default = "d_quarantine_after")]
    pub quarantine_after: u32,
    /// A check slower than this degrades the host.
    #[serde(default = "d_slow")]
    pub slow_ms: u64,
}

impl Default for HealthConf {
    fn default() -> Self {
        HealthConf {
            interval_ms: d_health_interval(),
            timeout_ms: d_health_timeout(),
            quarantine_after: d_quarantine_after(),
            slow_ms: d_slow(),
        }
    }
}

fn d_health_interval() -> u64 {
    5000
}
fn d_health_timeout() -> u64 {
    2000
}
fn d_quarantine_after() -> u32 {
    2
}
fn d_slow() -> u64 {
    1500
}

/// The metrics mirror's cache and scrape bounds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorConf {
    #[serde(default = "d_fresh")]
    pub fresh_ms: u64,
    #[serde(default = "d_stale")]
    pub stale_ms: u64,
    #[serde(default = "d_health_timeout")]
    pub timeout_ms: u64,
    #[serde(default = "d_mirror_max")]
    pub max_bytes: usize,
}

impl Default for MirrorConf {
    fn default() -> Self {
        MirrorConf {
            fresh_ms: d_fresh(),
            stale_ms: d_stale(),
            timeout_ms: d_health_timeout(),
            max_bytes: d_mirror_max(),
        }
    }
}

fn d_fresh() -> u64 {
    5000
}
fn d_stale() -> u64 {
    60000
}
fn d_mirror_max() -> usize {
    8 << 20
}

/// A mempool watcher (`src/capture/mempool/`): which pool it polls, how often, how much it keeps.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct MempoolConf {
    /// The pool polled (default: `eth_el` for `eth`, `polygon_bor` for `polygon`); only
    /// its hosts with the `txpool` capability are asked.
    #[serde(default)]
    pub pool: Option<String>,
    /// How often `txpool_content` is read.
    #[serde(default = "d_mempool_poll_ms")]
    pub poll_ms: u64,
    /// Most pending transactions tracked (the highest-priced kept beyond it).
    #[serde(default = "d_max_pending")]
    pub max_pending: usize,
}

fn d_mempool_poll_ms() -> u64 {
    1000
}

fn d_max_pending() -> usize {
    50_000
}

impl MempoolConf {
    pub fn pool_for<'a>(&'a self, chain: &str) -> &'a str {
        self.pool.as_deref().unwrap_or(chain_pool(chain))
    }
}

/// The chain indexer (`src/capture/index/`): which EVM chains to follow, from where, how close to
/// the head. A chain not listed is not indexed (its history, tokens and NFT routes then
/// answer 503 `index_not_configured`).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ChainIndexConf {
    /// The pool followed (default: `eth_el` for `eth`, `polygon_bor` for `polygon`).
    #[serde(default)]
    pub pool: Option<String>,
    /// The first block indexed (backfill starts there). Absent: the head at first start.
    #[serde(default)]
    pub start_block: Option<u64>,
    /// Blocks left below the head: 0 indexes the head itself (reorgs are then rolled back).
    #[serde(default)]
    pub confirmations: u64,
    /// Blocks fetched per JSON-RPC batch and committed per store transaction.
    #[serde(default = "d_batch_blocks")]
    pub batch_blocks: u64,
    /// Dense batches at the node at once while the ones before them decode and commit
    /// (at most twice as many ahead): the node never waits for the store or the
    /// decoding. 0 fetches one batch at a time.
    #[serde(default = "d_fetch_ahead")]
    pub fetch_ahead: usize,
    /// How often the head is checked once caught up.
    #[serde(default = "d_index_poll_ms")]
    pub poll_ms: u64,
    /// The deepest reorg rolled back (block hashes kept this far below the indexed head).
    #[serde(default = "d_max_reorg_depth")]
    pub max_reorg_depth: u64,
    /// A token balance read from the node is followed through the indexed transfers for
    /// this many blocks, then read again (`handlers/indexed_tokens.rs`).
    #[serde(default = "d_balance_refresh_blocks")]
    pub balance_refresh_blocks: u64,
}

fn d_batch_blocks() -> u64 {
    20
}

fn d_fetch_ahead() -> usize {
    2
}

fn d_index_poll_ms() -> u64 {
    1000
}

fn d_max_reorg_depth() -> u64 {
    128
}

/// A day of Ethereum blocks (four hours of Polygon's).
fn d_balance_refresh_blocks() -> u64 {
    7_200
}

impl ChainIndexConf {
    /// The pool a chain's indexer follows.
    pub fn pool_for<'a>(&'a self, chain: &str) -> &'a str {
        self.pool.as_deref().unwrap_or(chain_pool(chain))
    }
}

/// The pool an EVM chain's background work (index, mempool) follows by default.
pub fn chain_pool(chain: &str) -> &'static str {
    match chain {
        "polygon" => "polygon_bor",
        _ => "eth_el",
    }
}

/// Webhook deliveries.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct WebhookConf {
    /// One attempt's deadline (connect, TLS, request, answer).
    #[serde(default = "d_webhook_timeout_ms")]
    pub timeout_ms: u64,
    /// Attempts before a delivery becomes a dead letter.
    #[serde(default = "d_webhook_attempts")]
    pub max_attempts: u32,
    /// Wait before the second attempt, doubling after each.
    #[serde(default = "d_webhook_backoff_ms")]
    pub backoff_ms: u64,
    /// Deliveries waiting or in flight at once; past it a change is dead-lettered.
    #[serde(default = "d_webhook_pending")]
    pub max_pending: usize,
    /// Address ranges a callback may resolve to although private, loopback or
    /// link-local (an operator's own receivers). Empty by default: only public addresses.
    #[serde(default)]
    pub allow_private: Vec<String>,
    /// PEM file of the CAs trusted for callbacks instead of the system's roots (an
    /// internal PKI).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

impl Default for WebhookConf {
    fn default() -> Self {
        WebhookConf {
            timeout_ms: d_webhook_timeout_ms(),
            max_attempts: d_webhook_attempts(),
            backoff_ms: d_webhook_backoff_ms(),
            max_pending: d_webhook_pending(),
            allow_private: Vec::new(),
            ca_file: None,
        }
    }
}

fn d_webhook_timeout_ms() -> u64 {
    5000
}

fn d_webhook_attempts() -> u32 {
    5
}

fn d_webhook_backoff_ms() -> u64 {
    1000
}

fn d_webhook_pending() -> usize {
    10_000
}

pub(super) fn d_true() -> bool {
    true
}
