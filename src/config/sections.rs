//! The app YAML's sections other than pools: listeners, console and sign-in (`console`),
//! store, keys,
//! JSON-RPC, health checks, streams and WebSocket sessions, the metrics mirror. Each
//! with its defaults (`deny_unknown_fields`: a typo is an error, not a silent default).

mod console;
pub use crate::jsonrpc::methods::MethodsConf;
pub use console::*;

use super::secrets::SecretRef;
use super::HostConf;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    #[serde(default)]
    pub http: Vec<String>,
    #[serde(default)]
    pub tls: Vec<TlsListen>,
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
pub struct RpcConf {
    #[serde(default = "d_body")]
    pub max_body_bytes: usize,
    #[serde(default = "d_batch")]
    pub max_batch: usize,
    #[serde(default = "d_resp")]
    pub max_response_bytes: usize,
    /// A read's whole budget, every attempt included.
    #[serde(default = "d_timeout")]
    pub timeout_ms: u64,
    /// One host's share of a read's budget: past it, the next host is tried.
    #[serde(default = "d_attempt_timeout")]
    pub attempt_timeout_ms: u64,
    /// Budgets for a method class (`read`, `trace`, `debug`, `txpool`) other than the
    /// two above: a `debug_trace*` does not share an `eth_call`'s 10 s.
    #[serde(default = "d_class_timeouts")]
    pub class_timeouts: BTreeMap<String, ClassTimeouts>,
    #[serde(default)]
    pub hedge: HedgeConf,
    /// Identical single reads in flight at the same moment share one upstream call.
    #[serde(default = "d_true")]
    pub coalesce: bool,
    /// The `eth_getLogs` guard: ranges per plan, chunks, bisection, the result bound.
    #[serde(default)]
    pub get_logs: LogsConf,
    /// The finality-aware response cache for single reads.
    #[serde(default)]
    pub cache: CacheConf,
    /// How long a call with `X-Chainedge-Min-Block` waits for a host to reach that block
    /// before 503 `block_not_reached`.
    #[serde(default = "d_min_block_wait")]
    pub min_block_wait_ms: u64,
    #[serde(default = "d_attempts")]
    pub max_attempts: usize,
    #[serde(default)]
    pub write_policy: WritePolicy,
    /// Lowest plan per method family: `trace`, `debug`, `txpool`. Families not listed
    /// are open to every plan that may call the route.
    #[serde(default = "d_method_plans")]
    pub method_plans: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassTimeouts {
    pub timeout_ms: Option<u64>,
    pub attempt_timeout_ms: Option<u64>,
}

fn d_class_timeouts() -> BTreeMap<String, ClassTimeouts> {
    let slow = ClassTimeouts {
        timeout_ms: Some(60_000),
        attempt_timeout_ms: Some(30_000),
    };
    [("trace", slow), ("debug", slow)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// `eth_getLogs`: the widest range (in blocks) a call may ask for, by plan (a plan not
/// listed has the range of the nearest plan below it); wider than `chunk_blocks`, a range
/// is fetched in chunks, `parallel` at a time, merged in order; a chunk a node refuses as
/// too large is bisected, at most `max_node_calls` calls in all; more than `max_results`
/// logs is an error naming the range that fits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsConf {
    #[serde(default = "d_logs_ranges")]
    pub max_block_range: BTreeMap<String, u64>,
    #[serde(default = "d_logs_chunk")]
    pub chunk_blocks: u64,
    #[serde(default = "d_logs_parallel")]
    pub parallel: usize,
    #[serde(default = "d_logs_results")]
    pub max_results: usize,
    #[serde(default = "d_logs_calls")]
    pub max_node_calls: usize,
}

impl Default for LogsConf {
    fn default() -> Self {
        LogsConf {
            max_block_range: d_logs_ranges(),
            chunk_blocks: d_logs_chunk(),
            parallel: d_logs_parallel(),
            max_results: d_logs_results(),
            max_node_calls: d_logs_calls(),
        }
    }
}

/// Modelled on the large providers' published bounds: a few hundred blocks on free
/// tiers, 10,000 on paid ones, wider for dedicated plans.
fn d_logs_ranges() -> BTreeMap<String, u64> {
    [
        ("anonymous", 500),
        ("free", 500),
        ("basic", 2_000),
        ("pro", 10_000),
        ("business", 50_000),
        ("enterprise", 1_000_000),
        ("scale", 1_000_000),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `rpc.cache`: answers kept for as long as what they depend on cannot change
/// (`src/rpc/cache.rs`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheConf {
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// All answers kept, in bytes; least recently used out first.
    #[serde(default = "d_cache_bytes")]
    pub max_bytes: usize,
    /// One answer larger than this is not kept.
    #[serde(default = "d_cache_entry")]
    pub max_entry_bytes: usize,
    /// What follows the head (`latest`, gas prices): until the head moves, at most this.
    #[serde(default = "d_cache_head_ttl")]
    pub head_ttl_ms: u64,
    /// A numbered block not finalized yet: until a reorg, at most this.
    #[serde(default = "d_cache_unfinal_ttl")]
    pub unfinalized_ttl_ms: u64,
    /// How often the head and the finalized block are read (and reorgs told).
    #[serde(default = "d_cache_track")]
    pub track_interval_ms: u64,
}

impl Default for CacheConf {
    fn default() -> Self {
        CacheConf {
            enabled: true,
            max_bytes: d_cache_bytes(),
            max_entry_bytes: d_cache_entry(),
            head_ttl_ms: d_cache_head_ttl(),
            unfinalized_ttl_ms: d_cache_unfinal_ttl(),
            track_interval_ms: d_cache_track(),
        }
    }
}

fn d_cache_bytes() -> usize {
    64 << 20
}

fn d_cache_entry() -> usize {
    1 << 20
}

fn d_cache_head_ttl() -> u64 {
    1_000
}

fn d_cache_unfinal_ttl() -> u64 {
    10_000
}

fn d_cache_track() -> u64 {
    1_000
}

fn d_min_block_wait() -> u64 {
    2_000
}

fn d_logs_chunk() -> u64 {
    2_000
}

fn d_logs_parallel() -> usize {
    4
}

fn d_logs_results() -> usize {
    10_000
}

fn d_logs_calls() -> usize {
    64
}

/// Hedged reads: when the host tried first has not answered within its recent latency
/// quantile, the next host gets the same call; the first answer wins, the other attempt
/// is dropped. Never for writes, filters or anything with an effect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HedgeConf {
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// Which of the host's recent answer times the delay is (0.95: its p95).
    #[serde(default = "d_hedge_quantile")]
    pub quantile: f64,
    /// Bounds on the delay: no hedge sooner than `min_delay_ms` (a fast host's tail is
    /// noise), none later than `max_delay_ms` (also the delay before a host has history).
    #[serde(default = "d_hedge_min")]
    pub min_delay_ms: u64,
    #[serde(default = "d_hedge_max")]
    pub max_delay_ms: u64,
    /// Method classes hedged: `read`, `trace`, `debug`, `txpool`.
    #[serde(default = "d_hedge_classes")]
    pub classes: Vec<String>,
}

impl Default for HedgeConf {
    fn default() -> Self {
        HedgeConf {
            enabled: true,
            quantile: d_hedge_quantile(),
            min_delay_ms: d_hedge_min(),
            max_delay_ms: d_hedge_max(),
            classes: d_hedge_classes(),
        }
    }
}

fn d_hedge_quantile() -> f64 {
    0.95
}
fn d_hedge_min() -> u64 {
    20
}
fn d_hedge_max() -> u64 {
    400
}
fn d_hedge_classes() -> Vec<String> {
    vec!["read".into(), "txpool".into()]
}
fn d_attempt_timeout() -> u64 {
    4_000
}

fn d_method_plans() -> BTreeMap<String, String> {
    [("trace", "pro"), ("debug", "pro"), ("txpool", "basic")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn d_body() -> usize {
    1 << 20
}
fn d_batch() -> usize {
    100
}
fn d_resp() -> usize {
    32 << 20
}
fn d_timeout() -> u64 {
    10_000
}
fn d_attempts() -> usize {
    3
}

impl Default for RpcConf {
    fn default() -> Self {
        RpcConf {
            max_body_bytes: d_body(),
            max_batch: d_batch(),
            max_response_bytes: d_resp(),
            timeout_ms: d_timeout(),
            attempt_timeout_ms: d_attempt_timeout(),
            class_timeouts: d_class_timeouts(),
            hedge: HedgeConf::default(),
            coalesce: true,
            get_logs: LogsConf::default(),
            min_block_wait_ms: d_min_block_wait(),
            cache: CacheConf::default(),
            max_attempts: d_attempts(),
            write_policy: WritePolicy::default(),
            method_plans: d_method_plans(),
        }
    }
}

/// How `eth_sendRawTransaction` is dispatched.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WritePolicy {
    /// Every healthy node of the pool at once; the fleet learns it without gossip.
    #[default]
    Broadcast,
    /// Host after host until one accepts.
    FirstAccepting,
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

/// Long-lived streams served by the edge (MEV-Share SSE).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamsConf {
    /// The server closes a MEV-Share stream after this long; the client reconnects.
    #[serde(default = "d_window")]
    pub mev_share_window_secs: u64,
    /// A `:ping` comment after this long without anything sent.
    #[serde(default = "d_ping")]
    pub ping_interval_secs: u64,
    /// Open MEV-Share streams in total, across users.
    #[serde(default = "d_max_streams")]
    pub max_streams: usize,
    /// WebSocket JSON-RPC sessions terminated at the edge.
    #[serde(default)]
    pub websocket: WebSocketConf,
    /// The Polygon firehose channels (`/ws/polygon/{logs,mempool}`).
    #[serde(default)]
    pub firehose: FirehoseConf,
}

/// Firehose connection tokens: signed with `secret` (a secret reference, at least 32
/// bytes), valid for `token_ttl_secs` (to connect; an open channel stays open), for a
/// channel at `public_url` (default: `console.origin` with a ws scheme).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirehoseConf {
    #[serde(default)]
    pub secret: Option<SecretRef>,
    #[serde(default = "d_token_ttl")]
    pub token_ttl_secs: u64,
    #[serde(default)]
    pub public_url: Option<String>,
}

impl Default for FirehoseConf {
    fn default() -> Self {
        FirehoseConf {
            secret: None,
            token_ttl_secs: d_token_ttl(),
            public_url: None,
        }
    }
}

fn d_token_ttl() -> u64 {
    60
}

/// Bounds of a WebSocket JSON-RPC session (`/rpc/eth` upgrades).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSocketConf {
    /// Open WebSocket connections per API key (per client address when anonymous), by
    /// plan; plans not listed get `default`.
    #[serde(default = "d_ws_connections")]
    pub max_connections_per_key: BTreeMap<String, usize>,
    /// Subscriptions one connection may hold at once.
    #[serde(default = "d_ws_subscriptions")]
    pub max_subscriptions_per_connection: usize,
    /// Subscriptions all of a key's connections may hold at once (across instances when
    /// clustered), by plan (`default` for plans not listed).
    #[serde(default = "d_ws_key_subscriptions")]
    pub max_subscriptions_per_key: BTreeMap<String, usize>,
    /// Messages waiting to go to one client; a client that lets more pile up is closed
    /// (1008, "slow consumer") rather than buffered without bound.
    #[serde(default = "d_ws_queue")]
    pub send_queue: usize,
    /// A ping goes out after this long; a connection silent for `idle_timeout_secs`
    /// (no message, no pong) is closed.
    #[serde(default = "d_ws_ping")]
    pub ping_interval_secs: u64,
    #[serde(default = "d_ws_idle")]
    pub idle_timeout_secs: u64,
}

impl Default for WebSocketConf {
    fn default() -> Self {
        WebSocketConf {
            max_connections_per_key: d_ws_connections(),
            max_subscriptions_per_connection: d_ws_subscriptions(),
            max_subscriptions_per_key: d_ws_key_subscriptions(),
            send_queue: d_ws_queue(),
            ping_interval_secs: d_ws_ping(),
            idle_timeout_secs: d_ws_idle(),
        }
    }
}

impl WebSocketConf {
    /// The connection cap for a plan.
    pub fn max_connections(&self, plan: &str) -> usize {
        self.max_connections_per_key
            .get(plan)
            .or_else(|| self.max_connections_per_key.get("default"))
            .copied()
            .unwrap_or(16)
    }

    /// The key-wide subscription cap for a plan.
    pub fn max_key_subscriptions(&self, plan: &str) -> usize {
        self.max_subscriptions_per_key
            .get(plan)
            .or_else(|| self.max_subscriptions_per_key.get("default"))
            .copied()
            .unwrap_or(64)
    }
}

fn d_ws_connections() -> BTreeMap<String, usize> {
    [
        ("default", 16),
        ("free", 4),
        ("basic", 16),
        ("pro", 64),
        ("business", 256),
        ("enterprise", 1024),
        ("scale", 1024),
        ("anonymous", 2),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
fn d_ws_key_subscriptions() -> BTreeMap<String, usize> {
    [
        ("default", 64),
        ("free", 16),
        ("basic", 64),
        ("pro", 256),
        ("business", 1024),
        ("enterprise", 4096),
        ("scale", 4096),
        ("anonymous", 4),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
fn d_ws_subscriptions() -> usize {
    32
}
fn d_ws_queue() -> usize {
    256
}
fn d_ws_ping() -> u64 {
    30
}
fn d_ws_idle() -> u64 {
    120
}

impl Default for StreamsConf {
    fn default() -> Self {
        StreamsConf {
            mev_share_window_secs: d_window(),
            ping_interval_secs: d_ping(),
            max_streams: d_max_streams(),
            websocket: WebSocketConf::default(),
            firehose: FirehoseConf::default(),
        }
    }
}

fn d_window() -> u64 {
    3600
}
fn d_ping() -> u64 {
    15
}
fn d_max_streams() -> usize {
    10_000
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

/// A mempool watcher (`src/mempool/`): which pool it polls, how often, how much it keeps.
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

/// The chain indexer (`src/index/`): which EVM chains to follow, from where, how close to
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
    /// How often the head is checked once caught up.
    #[serde(default = "d_index_poll_ms")]
    pub poll_ms: u64,
    /// The deepest reorg rolled back (block hashes kept this far below the indexed head).
    #[serde(default = "d_max_reorg_depth")]
    pub max_reorg_depth: u64,
}

fn d_batch_blocks() -> u64 {
    20
}

fn d_index_poll_ms() -> u64 {
    1000
}

fn d_max_reorg_depth() -> u64 {
    128
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

/// The Solana layer (`solana:`).
#[derive(Debug, Deserialize, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct SolanaConf {
    #[serde(default)]
    pub stake_snapshots: StakeSnapshotsConf,
    #[serde(default)]
    pub watchlist: WatchlistConf,
    #[serde(default)]
    pub mev_cache: MevCacheConf,
}

/// MEV-cache analytics (`src/mev_cache.rs`): how the `sol_mev_cache` hosts are sampled.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct MevCacheConf {
    /// Seconds between scrapes.
    #[serde(default = "d_mev_interval")]
    pub interval_secs: u64,
    /// The hosts' hits counter (summed over its label sets).
    #[serde(default = "d_hits_metric")]
    pub hits_metric: String,
}

impl Default for MevCacheConf {
    fn default() -> Self {
        MevCacheConf {
            interval_secs: d_mev_interval(),
            hits_metric: d_hits_metric(),
        }
    }
}

fn d_mev_interval() -> u64 {
    10
}

fn d_hits_metric() -> String {
    "mev_cache_hits_total".into()
}

/// Watchlists and their push (`src/sol_watch/`).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct WatchlistConf {
    /// Entries one tenant may hold.
    #[serde(default = "d_max_watch_entries")]
    pub max_entries_per_tenant: i64,
    /// Deliver changes from this instance (with several instances on one store, exactly
    /// one should push).
    #[serde(default = "d_true")]
    pub push: bool,
    /// Secret reference (≥ 32 bytes) each entry's webhook signing secret derives from;
    /// without it webhook entries are refused (ws entries still work).
    #[serde(default)]
    pub signing_secret: Option<super::secrets::SecretRef>,
    #[serde(default)]
    pub webhook: WebhookConf,
}

impl Default for WatchlistConf {
    fn default() -> Self {
        WatchlistConf {
            max_entries_per_tenant: d_max_watch_entries(),
            push: true,
            signing_secret: None,
            webhook: WebhookConf::default(),
        }
    }
}

fn d_max_watch_entries() -> i64 {
    100
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

/// Epoch stake snapshots (`src/sol_stake.rs`): captured from the `sol_rpc` pool once per
/// epoch into the store.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct StakeSnapshotsConf {
    /// Capture at all (default true when a `sol_rpc` pool is configured).
    #[serde(default = "d_true")]
    pub enabled: bool,
    /// How often the current epoch is checked.
    #[serde(default = "d_stake_poll_ms")]
    pub poll_ms: u64,
    /// Captured epochs kept (older ones are pruned after each capture).
    #[serde(default = "d_keep_epochs")]
    pub keep_epochs: u64,
}

impl Default for StakeSnapshotsConf {
    fn default() -> Self {
        StakeSnapshotsConf {
            enabled: true,
            poll_ms: d_stake_poll_ms(),
            keep_epochs: d_keep_epochs(),
        }
    }
}

fn d_true() -> bool {
    true
}

fn d_stake_poll_ms() -> u64 {
    30_000
}

fn d_keep_epochs() -> u64 {
    90
}
